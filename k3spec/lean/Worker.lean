/-
A long-lived offline Lean process that checks library modules one after another
(`k3spec/worker.py`; tooling, not part of the `KimiK3` library).

Each offline `lean` process pays about 3.5 s of CPU before it reads its file (instantiating and
linking the WebAssembly), more than half of what a typical module of the library costs. This file
is elaborated once per worker; its `#eval` then loops: it waits for the job file `job-<n>` in
its working directory (the offline Lean sees no environment variable but `LEAN_PATH`), elaborates the module the job names with `Lean.Elab.runFrontend`
(the function the `lean` executable's `main` calls, with the arguments that
`lean --json -Dexperimental.module=true -DElab.async=false -o X.olean -i X.ilean` passes: the same
options, trust level, module name, output files and JSON messages), and writes `done-<n>`.

- A job file holds four lines: the module name, its source path (relative to the working
  directory, which links `lean/` to the build's staged sources, so the path is the plain command
  line's), the `.olean` path and the `.ilean` path. A job whose
  first line is `quit` ends the worker.
- During job `n`, Lean's stdout and stderr streams go to `out-<n>.json` and `err-<n>.txt`, so a
  job's messages are exactly what a plain process prints, and nothing can be lost in a pipe.
- `done-<n>` holds `ok` or `error` (what the frontend returned: a plain process exits with 1 on
  `error`) and the job's milliseconds. Files are written under a temporary name and renamed, so the
  Python side never reads half a file.
- With no job for 10 minutes the worker ends by itself, so a worker whose driver died does not
  wait forever.

Each job's imported `.olean` data stays in the 32-bit WebAssembly heap until the worker ends (Lean
never frees imported regions while a process runs), so the Python side replaces a worker after a
bounded number of jobs or resident memory.

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

/-- Elaborate one module as `lean --json -o olean -i ilean src` would, its messages going to
`out-<n>.json`, then write `done-<n>`. -/
def k3Job (dir : String) (n : Nat) (mod src olean ilean : String) : IO Unit := do
  let t0 ← IO.monoMsNow
  let out ← IO.FS.Handle.mk (k3Path dir ("out-" ++ Nat.repr n ++ ".json")) .write
  let err ← IO.FS.Handle.mk (k3Path dir ("err-" ++ Nat.repr n ++ ".txt")) .write
  let oldOut ← IO.setStdout (IO.FS.Stream.ofHandle out)
  let oldErr ← IO.setStderr (IO.FS.Stream.ofHandle err)
  let input ← IO.FS.readFile src
  let env? ← Lean.Elab.runFrontend input k3Options src mod.toName k3TrustLevel (some olean) (some ilean) true
  out.flush
  err.flush
  let _ ← IO.setStdout oldOut
  let _ ← IO.setStderr oldErr
  let t1 ← IO.monoMsNow
  k3Write dir ("done-" ++ Nat.repr n) ((if env?.isSome then "ok " else "error ") ++ Nat.repr (t1 - t0))

/-- Wait for job `n` (polling every 5 ms, giving up after `idleMs` without one), run it, and go on
with job `n + 1`, until a `quit` job. -/
partial def k3Loop (dir : String) (idleMs : Nat) (n : Nat) (since : Nat) : IO Unit := do
  let job := k3Path dir ("job-" ++ Nat.repr n)
  if ← System.FilePath.pathExists job then
    match (← IO.FS.readFile job).splitOn "\n" with
    | "quit" :: _ => pure ()
    | mod :: src :: olean :: ilean :: _ =>
      k3Job dir n mod src olean ilean
      k3Loop dir idleMs (n + 1) (← IO.monoMsNow)
    | _ =>
      k3Write dir ("done-" ++ Nat.repr n) "bad job file"
      k3Loop dir idleMs (n + 1) (← IO.monoMsNow)
  else if (← IO.monoMsNow) - since > idleMs then
    pure ()
  else
    IO.sleep 5
    k3Loop dir idleMs n since

#eval show Lean.Elab.Command.CommandElabM Unit from do
  k3Write "." "ready" "ready"
  k3Loop "." 600000 0 (← IO.monoMsNow)
