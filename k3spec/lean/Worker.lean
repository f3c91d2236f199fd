/-
A long-lived Lean process that checks library modules one after another (`k3spec.worker`).

Every `lean` process of the offline toolchain pays about 8 s of fixed start-up (instantiating the
WebAssembly, importing `Init`). This file is elaborated once per worker; its `#eval` then loops:
it waits for the job file `job-<n>` in its working directory, elaborates the module it
names with `Lean.Elab.runFrontend` (the function the `lean` executable's main calls, with the same
arguments `lean --json -o X.olean -i X.ilean` passes), and writes `done-<n>` (`ok` or `error`).
The messages go to stdout as JSON lines, between the marker lines
`{"k3worker":"begin","job":n}` and `{"k3worker":"end","job":n}`.

Each module's imported `.olean` data stays in memory until the worker ends (freeing it with
`Environment.freeRegions` crashed a later job: something still points into it), so the Python
side replaces a worker after a bounded number of jobs (`k3spec/worker.py`).

A job file holds four lines: the module name, the source path, the `.olean` path and the `.ilean`
path; a job file whose first line is `quit` ends the worker.

The code avoids library functions that the offline toolchain cannot call from compiled code
(`for` loops, `toString` on names, generic helpers): plain structural recursion only.
-/
import Lean.Elab.Frontend

open Lean Elab Command

/-- The trust level `lean` uses when `-t` is not given (`LEAN_BELIEVER_TRUST_LEVEL + 1`). -/
def k3TrustLevel : UInt32 := 1025

/-- The options of every module: the command line's `-Dexperimental.module=true`. -/
def k3Options : Options := Options.empty.setBool `experimental.module true

/-- Write `text` to `dir/name` atomically (written under a temporary name, then renamed), so that
the Python side never reads a half-written file. -/
def k3Write (dir name text : String) : IO Unit := do
  IO.FS.writeFile (dir ++ "/" ++ name ++ ".tmp") text
  IO.FS.rename (dir ++ "/" ++ name ++ ".tmp") (dir ++ "/" ++ name)

/-- Elaborate one module and write its outputs; report on stdout and in `done-<n>`. -/
def k3Job (dir : String) (n : Nat) (mod src olean ilean : String) : IO Unit := do
  let out ← IO.getStdout
  out.putStrLn ("{\"k3worker\":\"begin\",\"job\":" ++ Nat.repr n ++ "}")
  out.flush
  let input ← IO.FS.readFile src
  let env? ← Lean.Elab.runFrontend input k3Options src mod.toName k3TrustLevel (some olean) (some ilean) true
  out.putStrLn ("{\"k3worker\":\"end\",\"job\":" ++ Nat.repr n ++ "}")
  out.flush
  k3Write dir ("done-" ++ Nat.repr n) (if env?.isSome then "ok" else "error")

/-- Wait for job `n`, run it, and go on with job `n + 1` (until a `quit` job). -/
partial def k3Loop (dir : String) (n : Nat) : IO Unit := do
  let job := dir ++ "/job-" ++ Nat.repr n
  if ← System.FilePath.pathExists job then
    match (← IO.FS.readFile job).splitOn "\n" with
    | "quit" :: _ => pure ()
    | mod :: src :: olean :: ilean :: _ =>
      k3Job dir n mod src olean ilean
      k3Loop dir (n + 1)
    | _ =>
      k3Write dir ("done-" ++ Nat.repr n) "bad job file"
      k3Loop dir (n + 1)
  else
    IO.sleep 10
    k3Loop dir n

#eval show CommandElabM Unit from do
  let dir := (← IO.currentDir).toString
  k3Write dir "ready" "ready"
  k3Loop dir 0
