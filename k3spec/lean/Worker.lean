/-
A long-lived offline Lean process that checks library modules one after another
(`k3spec/worker.py`; tooling, not part of the `KimiK3` library).

Each offline `lean` process pays about 3.5 s of CPU before it reads its file (instantiating and
linking the WebAssembly), more than half of what a typical module of the library costs. This file
is elaborated once per worker; its `#eval` then loops: it waits for the job file `job-<n>` in
its working directory (the offline Lean sees no environment variable but `LEAN_PATH`), elaborates the
module the job names as `lean --json -Dexperimental.module=true -DElab.async=false -o X.olean -i
X.ilean` does (the same options, trust level, module name, output files and JSON messages), and
writes `done-<n>`. The worker imports `Init` once, when it starts, and every job's imports start
from that state (`k3Frontend`); `k3RunFrontend` is the `lean` executable's own path
(`Lean.Elab.runFrontend`, reading every import again), taken where a job does not fit the first.

- A job file holds five lines: the module name, its source path (relative to the working
  directory, which links `lean/` to the build's staged sources, so the path is the plain command
  line's), the `.olean` path, the `.ilean` path, and `cached` or `full` (`full`: a module it
  imports declares `initialize`, so it goes through `k3RunFrontend`). A job whose first line is
  `quit` ends the worker.
- During job `n`, Lean's stdout and stderr streams go to `out-<n>.json` and `err-<n>.txt`, so a
  job's messages are exactly what a plain process prints, and nothing can be lost in a pipe.
- `done-<n>` holds `ok` or `error` (what the frontend returned: a plain process exits with 1 on
  `error`) and the job's milliseconds. Files are written under a temporary name and renamed, so the
  Python side never reads half a file.
- With no job for 10 minutes the worker ends by itself, so a worker whose driver died does not
  wait forever.

Imported `.olean` data stays in the 32-bit WebAssembly heap until the worker ends (Lean never
frees imported regions while a process runs): `Init`'s once, each job's library imports and its
leaked environment (as in `lean`) for each job, about 20-30 MB, so the Python side replaces a worker
after a bounded number of jobs or resident memory.

The code uses plain structural recursion and library functions that run in the offline
interpreter only (no `for` loops or generic helpers; `lean/KimiK3/Core/README.md`).
-/
import Lean.Elab.Frontend

open Lean

/-- The options of every library module: those of the plain command line (`k3spec/build.py`
`LEAN_OPTIONS` and `k3spec/leanrun.py` `OFFLINE_OPTIONS`). -/
def k3Options : Options :=
  (Options.empty.setBool `experimental.module true).setBool `Elab.async false

/-- The trust level `lean` uses when `-t` is not given (`LEAN_BELIEVER_TRUST_LEVEL + 1`). -/
def k3TrustLevel : UInt32 := 1025

/-- `dir/name`. -/
def k3Path (dir name : String) : String := dir ++ "/" ++ name

/-- Write `text` to `dir/name` atomically: under a temporary name, then renamed. -/
def k3Write (dir name text : String) : IO Unit := do
  IO.FS.writeFile (k3Path dir (name ++ ".tmp")) text
  IO.FS.rename (k3Path dir (name ++ ".tmp")) (k3Path dir name)

/-- The options `Lean.Elab.runFrontend` adds to the command line's before it elaborates. -/
def k3FrontendOptions : Options :=
  Lean.internal.cmdlineSnapshots.setIfNotSet (Elab.async.setIfNotSet k3Options true) true

/-- The import level of a file's header (`Lean.Elab.processHeaderCore`): `exported` for a
`module` outside the server, `private` otherwise. -/
def k3Level (isModule : Bool) : OLeanLevel :=
  if isModule then (if Elab.inServer.get k3FrontendOptions then .server else .exported) else .private

/-- The persistent array of `xs` when it has at most `PersistentArray.branching` (32) elements:
then `PersistentArray.push` keeps them all in its tail. (`push` and `toPArray'` do not run in
the offline interpreter.) -/
def k3Small {α : Type} (xs : Array α) : PersistentArray α := { tail := xs, size := xs.size }

/-- The command state after the last command (`Lean.Language.Lean.waitForFinalCmdState?`). -/
partial def k3FinalState (s : Language.Lean.CommandParsedSnapshot) : Elab.Command.State :=
  match s.nextCmdSnap? with
  | some next => k3FinalState next.task.get
  | none => s.elabSnap.resultSnap.task.get.cmdState

/-- A snapshot tree that is already there (`SnapshotTask.finished none`, which does not run in the
offline interpreter). -/
def k3Done (t : Language.SnapshotTree) : Language.SnapshotTask Language.SnapshotTree :=
  { stx? := none, cancelTk? := none, task := .pure t }

/-- The `import` info nodes of a header's imports (`Lean.Language.Lean.process`). -/
def k3ImportNodes : List Syntax → List Elab.InfoTree
  | [] => []
  | s :: rest => Elab.InfoTree.node (Elab.Info.ofCommandInfo { elaborator := `import, stx := s }) {}
      :: k3ImportNodes rest

/-- The info tree of a header, as `Lean.Language.Lean.process` makes it: a `header` command node
with an `import` node per import. -/
def k3HeaderTree (env : Environment) (fileMap : FileMap) (stx : Syntax) : Elab.InfoTree :=
  Elab.InfoTree.context (.commandCtx { env, fileMap, ngen := { namePrefix := `_import } })
    (Elab.InfoTree.node (Elab.Info.ofCommandInfo { elaborator := `header, stx })
      (k3Small (k3ImportNodes stx[1].getArgs.toList).toArray))

/-- The import of `Init` that a header without `prelude` starts with. -/
def k3InitImport : Import := { module := `Init }

/-- The info trees of `snaps`, in order, after `acc`. -/
def k3InfoTrees : List Language.Snapshot → Array Elab.InfoTree → Array Elab.InfoTree
  | [], acc => acc
  | s :: rest, acc => k3InfoTrees rest (match s.infoTree? with | some t => acc.push t | none => acc)

/-- The import state of `Init` alone at the level `level`: every job's imports start with it. -/
def k3InitState (level : OLeanLevel) : IO ImportState := do
  let (_, s) ← (importModulesCore #[k3InitImport] level).run
  pure s

/-- The environment of a header's `imports`, as `Lean.importModules` makes it (with the arguments
`Lean.Elab.processHeaderCore` passes: `leakEnv`, `loadExts`, the level), but with the reading of
the imported files started from `base`, the state after importing `Init`, which the worker keeps:
`Init`'s 505 files (68 MB) are read once per worker instead of once per module. A header's first
import is `Init` (`k3Frontend` checks), so a fresh `importModulesCore` reaches the state `base`
after that import and then goes on exactly as it does from `base`. -/
def k3Import (base : ImportState) (imports : Array Import) (level : OLeanLevel) : IO Environment := do
  let (_, s) ← (importModulesCore imports level).run base
  finalizeImport s imports k3FrontendOptions k3TrustLevel true true level

/-- `Lean.Elab.runFrontend input k3Options fileName mainModule k3TrustLevel olean ilean true`: what
the `lean` executable runs for `lean --json -o olean -i ilean` (returns whether it succeeded). -/
def k3RunFrontend (input fileName : String) (mainModule : Name) (olean ilean : String) : IO Bool := do
  let env? ← Lean.Elab.runFrontend input k3Options fileName mainModule k3TrustLevel (some olean) (some ilean) true
  pure env?.isSome

/-- The same as `k3RunFrontend`, with the header's imports read starting from `base`, the import
state of `Init` that the worker keeps: the steps of `runFrontend`, in its order (parse the
header; import as `Lean.Elab.processHeaderCore` and `Lean.importModules` do; set up the command
state and the header's info tree as `Lean.Language.Lean.process` does; elaborate the commands
with `Lean.Language.Lean.processCommands`, `process`'s own command loop; report the messages of
the whole snapshot tree as JSON with `runAndReport`; when there is no error, write the `.olean`
parts of the final command state's environment and the `.ilean` of the tree's info trees).
(`Lean.Elab.IO.processCommandsIncrementally`, which waits on each command's task in turn, made
the offline Lean start extra WebAssembly threads: 10-20 s and several GB per module. Lean's
older `Frontend.processCommands` loop keeps no info trees, so its `.ilean` had no references.) Where a file does not fit that path (not a `module`, a header
that does not parse or does not start with the plain `Init` import, more than 32 imports, CRLF
line ends), it calls `k3RunFrontend`.

Two steps of `importModules` and `processHeaderCore` are left out because the offline
interpreter cannot run them (they reach private code): `withImporting` (the flag that lets an
imported module's `initialize` declarations register extensions; the build sends a module
whose imports declare `initialize` to `k3RunFrontend`, `k3spec/build.py`) and
`setModulePackage none` (the package of a module built outside Lake, which is none already). -/
def k3Frontend (base : ImportState) (input fileName : String) (mainModule : Name) (olean ilean : String) :
    IO Bool := do
  if input.contains '\r' then
    return ← k3RunFrontend input fileName mainModule olean ilean
  let opts := k3FrontendOptions
  let inputCtx : Parser.InputContext := { inputString := input, fileName, fileMap := input.toFileMap }
  let (header, parserState, parseLog) ← Parser.parseHeader inputCtx
  let stx := header.raw.unsetTrailing
  let hdr : Elab.HeaderSyntax := ⟨stx⟩
  let imports := hdr.imports
  let level := k3Level hdr.isModule
  unless !parseLog.hasErrors && hdr.isModule && stx[1].getArgs.size ≤ 32 &&
      imports[0]? == some k3InitImport do
    return ← k3RunFrontend input fileName mainModule olean ilean
  let parseDiags ← Language.Snapshot.Diagnostics.ofMessageLog parseLog
  let (env, importLog) ← try
      pure ((← k3Import base imports level), ({} : MessageLog))
    catch e =>
      let env ← mkEmptyEnvironment
      let pos := inputCtx.fileMap.toPosition (stx.getPos?.getD 0)
      pure (env, ({} : MessageLog).add { fileName := inputCtx.fileName, data := toString e, pos })
  let env := env.setMainModule mainModule
  let importDiags ← Language.Snapshot.Diagnostics.ofMessageLog importLog
  if importLog.hasErrors then
    let tree := Language.SnapshotTree.mk { diagnostics := parseDiags }
      #[k3Done (Language.SnapshotTree.mk { diagnostics := importDiags } #[])]
    let _ ← tree.runAndReport opts true
    return false
  let headerTree := k3HeaderTree env inputCtx.fileMap stx
  let opts ← Language.Lean.reparseOptions opts
  let cmdState := Elab.Command.mkState env importLog opts
  let cmdState := { cmdState with infoState := { enabled := true, trees := k3Small #[headerTree] } }
  let first ← IO.wait (← Language.Lean.processCommands inputCtx parserState cmdState)
  let tree := Language.SnapshotTree.mk { diagnostics := parseDiags }
    #[k3Done (Language.SnapshotTree.mk { diagnostics := importDiags, infoTree? := some headerTree }
      #[k3Done (Language.toSnapshotTree first)])]
  if ← tree.runAndReport opts true then
    return false
  writeModule (k3FinalState first).env olean
  let trees := k3InfoTrees tree.getAll.toList #[]
  let (references, decls) ← (Server.findModuleRefs inputCtx.fileMap trees (localVars := false)).toLspModuleRefs
  let data : Server.Ilean :=
    { module := mainModule, directImports := Server.collectImports ⟨header.raw⟩, references, decls }
  IO.FS.writeFile ilean (Json.compress (toJson data))
  return true

/-- Elaborate one module as `lean --json -o olean -i ilean src` would, its messages going to
`out-<n>.json`, then write `done-<n>`. -/
def k3Job (dir : String) (base : ImportState) (n : Nat) (mod src olean ilean : String) (full : Bool) :
    IO Unit := do
  let t0 ← IO.monoMsNow
  let out ← IO.FS.Handle.mk (k3Path dir ("out-" ++ Nat.repr n ++ ".json")) .write
  let err ← IO.FS.Handle.mk (k3Path dir ("err-" ++ Nat.repr n ++ ".txt")) .write
  let oldOut ← IO.setStdout (IO.FS.Stream.ofHandle out)
  let oldErr ← IO.setStderr (IO.FS.Stream.ofHandle err)
  let input ← IO.FS.readFile src
  let ok ← if full then k3RunFrontend input src mod.toName olean ilean
    else k3Frontend base input src mod.toName olean ilean
  out.flush
  err.flush
  let _ ← IO.setStdout oldOut
  let _ ← IO.setStderr oldErr
  let t1 ← IO.monoMsNow
  k3Write dir ("done-" ++ Nat.repr n) ((if ok then "ok " else "error ") ++ Nat.repr (t1 - t0))

/-- Wait for job `n` (polling every 5 ms, giving up after `idleMs` without one), run it, and go on
with job `n + 1`, until a `quit` job. -/
partial def k3Loop (dir : String) (base : ImportState) (idleMs : Nat) (n : Nat) (since : Nat) : IO Unit := do
  let job := k3Path dir ("job-" ++ Nat.repr n)
  if ← System.FilePath.pathExists job then
    match (← IO.FS.readFile job).splitOn "\n" with
    | "quit" :: _ => pure ()
    | mod :: src :: olean :: ilean :: how :: _ =>
      k3Job dir base n mod src olean ilean (how == "full")
      k3Loop dir base idleMs (n + 1) (← IO.monoMsNow)
    | _ =>
      k3Write dir ("done-" ++ Nat.repr n) "bad job file"
      k3Loop dir base idleMs (n + 1) (← IO.monoMsNow)
  else if (← IO.monoMsNow) - since > idleMs then
    pure ()
  else
    IO.sleep 5
    k3Loop dir base idleMs n since

#eval show Lean.Elab.Command.CommandElabM Unit from do
  let base ← k3InitState (k3Level true)
  k3Write "." "ready" "ready"
  k3Loop "." base 600000 0 (← IO.monoMsNow)
