/-
Compare two builds of the same modules (tooling for `tests/test_build.py`, not part of the
`KimiK3` library): for each line `A B` of `pairs.txt` in the working directory, where `A` and `B`
are `.olean` paths, read both modules' three parts (`.olean`, `.olean.server`, `.olean.private`)
and print `same A`, or the first difference and `A`. Two parts agree when they hold the same
constant names, and each constant the same name, universe parameters, type and value
(`Expr` equality is structural), and the same number of entries for every environment extension.

Why not bytes: Lean's compactor writes an object graph as it finds it in memory, so a process
that has already checked other modules (a `k3spec/worker.py` worker) can lay out equal objects
with different sharing, and copies the uninitialized padding of some objects, which a fresh
process has zeroed.

Plain structural recursion only (the offline interpreter cannot call some library helpers;
`lean/KimiK3/Core/README.md`).
-/
import Lean

open Lean

/-- The first constant of `as` that differs from the one of `bs` at the same index (name,
universe parameters, type, value), or `none`. -/
def firstDifference : List ConstantInfo → List ConstantInfo → Option String
  | [], [] => none
  | a :: as, b :: bs =>
    if a.name == b.name && a.levelParams == b.levelParams && a.type == b.type &&
        a.value? (allowOpaque := true) == b.value? (allowOpaque := true) then
      firstDifference as bs
    else some ("constant " ++ a.name.toString)
  | _, _ => some "constant count"

/-- How many entries each environment extension has, in order. -/
def entryCounts : List (Name × Array EnvExtensionEntry) → List Nat
  | [] => []
  | (_, es) :: rest => es.size :: entryCounts rest

/-- `same`, or what differs between two parts. -/
def compareData (ma mb : ModuleData) : String := Id.run do
  if ma.constNames != mb.constNames then return "constant names"
  if let some d := firstDifference ma.constants.toList mb.constants.toList then return d
  if entryCounts ma.entries.toList != entryCounts mb.entries.toList then return "extension entry counts"
  return "same"

/-- `same`, or the first difference between two lists of parts. -/
def compareParts : List (ModuleData × CompactedRegion) → List (ModuleData × CompactedRegion) → String
  | [], [] => "same"
  | (a, _) :: as, (b, _) :: bs =>
    let r := compareData a b
    if r == "same" then compareParts as bs else r
  | _, _ => "part count"

/-- Compare the three parts of two builds of one module (read together, as Lean imports them). -/
def compareModules (a b : String) : IO String := do
  let pa ← readModuleDataParts #[a, a ++ ".server", a ++ ".private"]
  let pb ← readModuleDataParts #[b, b ++ ".server", b ++ ".private"]
  return compareParts pa.toList pb.toList

/-- Compare every pair of lines `A B`. -/
def compareAll : List String → IO Unit
  | [] => pure ()
  | line :: rest => do
    match line.splitOn " " with
    | [a, b] => IO.println ((← compareModules a b) ++ " " ++ a)
    | _ => pure ()
    compareAll rest

#eval show Lean.Elab.Command.CommandElabM Unit from do
  compareAll ((← IO.FS.readFile "pairs.txt").splitOn "\n")
