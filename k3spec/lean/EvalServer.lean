/-
A long-lived offline Lean process that elaborates standalone files (evaluation bundles) one after
another, elaborating a file's *prefix* (its bundled library sources) once and resuming from the
saved state for every later file with the same prefix (`k3spec/evalserver.py`; tooling, not part of
the `KimiK3` library).

Each evaluation bundle repeats the same library sources (`codegen/bundle.py`), and a plain `lean`
process elaborates them again for every file: 15-30 s of CPU before the file's own commands start.
Here, a job names a source file and the byte length of its prefix. The first job with a given
prefix elaborates the prefix text as a file of its own and keeps the frontend state after its last
command (environment, scopes, the prefix's messages); a later job whose first bytes are the same
text resumes from that state, parsing the whole file from the byte where the prefix ends, so every
position is the whole file's. Both ways run the commands `lean FILE` runs, in the same order with
the same options, through Lean's own command loop (`Lean.Elab.Frontend.processCommand`).

Protocol, through files in the server's working directory (the offline Lean sees no environment
variable but `LEAN_PATH`):
- `job-<n>`: the file's name (used in messages), its path, the prefix's byte length (0: none), then
  one Boolean option per line (`name=true` or `name=false`). A first line `quit` ends the server.
- During job `n`, Lean's stdout and stderr go to `out-<n>.json` and `err-<n>.txt`; `out-<n>.json`
  then receives every message of the file as `lean --json` prints it, one JSON object per line.
- `done-<n>`: `ok` or `error` (whether any message is an error: `lean` then exits with 1), the
  job's milliseconds, and `hit` or `miss` (whether the prefix state was reused). Files are written
  under a temporary name and renamed.
- With no job for 10 minutes the server ends by itself.

Memory: only the last `k3Keep` prefix states are kept, and the imports of the last header (the
bundles have none, so `Init`), so a file whose prefix is new does not import `Init` again: imported
`.olean` data stays in the 32-bit heap until the process ends.

The code uses plain structural recursion and library functions that run in the offline
interpreter only (no `for` loops or generic helpers; `lean/KimiK3/Core/README.md`).
-/
import Lean.Elab.Frontend

open Lean Elab

/-- The trust level `lean` uses when `-t` is not given (`LEAN_BELIEVER_TRUST_LEVEL + 1`). -/
def k3TrustLevel : UInt32 := 1025

/-- How many prefix states the server keeps. -/
def k3Keep : Nat := 3

/-- `dir/name`. -/
def k3Path (dir name : String) : String := dir ++ "/" ++ name

/-- Write `text` to `dir/name` atomically: under a temporary name, then renamed. -/
def k3Write (dir name text : String) : IO Unit := do
  IO.FS.writeFile (k3Path dir (name ++ ".tmp")) text
  IO.FS.rename (k3Path dir (name ++ ".tmp")) (k3Path dir name)

/-- The options of `name=true`/`name=false` lines (`none` on any other line). -/
def k3Options : Options → List String → Option Options
  | o, [] => some o
  | o, line :: rest =>
    if line.isEmpty then k3Options o rest
    else match line.splitOn "=" with
      | [name, "true"] => k3Options (o.setBool name.toName true) rest
      | [name, "false"] => k3Options (o.setBool name.toName false) rest
      | _ => none

/-- A saved prefix: its text, its options' text, the frontend state after its last command and
its messages. -/
structure K3Saved where
  text : String
  optionsKey : String
  state : Frontend.State
  messages : MessageLog

/-- The parser's input context for `input`, as `Parser.mkInputContext` builds it for a file without
carriage returns (the Python side sends no other; that function's compiled form is out of the
interpreter's reach). -/
def k3Input (input fileName : String) : Parser.InputContext :=
  Parser.InputContext.mk' input fileName (FileMap.ofString input) input.rawEndPos (Nat.le_refl _)

/-- The first `n` entries of a list. -/
def k3Take : Nat → List K3Saved → List K3Saved
  | 0, _ => []
  | _, [] => []
  | n + 1, x :: xs => x :: k3Take n xs

/-- The saved prefix with this text and options, and the others. -/
def k3Lookup (pre optionsKey : String) : List K3Saved → Option K3Saved × List K3Saved
  | [] => (none, [])
  | e :: rest =>
    if e.text == pre && e.optionsKey == optionsKey then (some e, rest)
    else
      let (found, others) := k3Lookup pre optionsKey rest
      (found, e :: others)

/-- Run `Frontend.processCommand` until the end of the input, collecting every command's
messages (the command loop clears them before each command). -/
partial def k3Commands (acc : MessageLog) : Frontend.FrontendM MessageLog := do
  let done ← Frontend.processCommand
  let acc := acc ++ (← get).commandState.messages
  if done then pure acc else k3Commands acc

/-- Elaborate `input` (named `fileName`) from `state`, returning the state at its end and its
messages. -/
def k3Run (input fileName : String) (state : Frontend.State) : IO (Frontend.State × MessageLog) := do
  let inputCtx := k3Input input fileName
  let (msgs, s) ← (k3Commands {}).run { inputCtx } |>.run state
  pure (s, msgs)

/-- The last file header the server processed: its text and options, and the environment and
messages `processHeader` gave (importing is the same for the same header and options). -/
structure K3Header where
  key : String
  env : Environment
  messages : MessageLog

/-- The frontend state of a fresh file with `opts`, after its header (parsed from `input`); the
imports of the previous header are reused when its text and options are the same. -/
def k3Start (input fileName : String) (opts : Options) (optionsKey : String) (last : Option K3Header) :
    IO (Frontend.State × MessageLog × K3Header) := do
  let inputCtx := k3Input input fileName
  let (header, parserState, messages) ← Parser.parseHeader inputCtx
  let key := optionsKey ++ "\n" ++ String.Pos.Raw.extract input 0 parserState.pos
  let h ← match last with
    | some h => if h.key == key then pure h else k3Import header opts messages inputCtx key
    | none => k3Import header opts messages inputCtx key
  let commandState := Command.mkState h.env {} opts
  pure ({ commandState, parserState, cmdPos := parserState.pos }, h.messages, h)
where
  k3Import header opts messages inputCtx key : IO K3Header := do
    let (env, messages) ← processHeader header opts messages inputCtx k3TrustLevel
    pure { key, env, messages }

/-- What the server keeps between jobs: the last header's imports and the saved prefixes. -/
structure K3Cache where
  header : Option K3Header := none
  prefixes : List K3Saved := []

/-- Elaborate the job's file; returns whether the prefix state was reused, all messages, and the
updated cache. -/
def k3Elaborate (cache : K3Cache) (fileName input optionsKey : String) (opts : Options)
    (prefixLen : Nat) : IO (Bool × MessageLog × K3Cache) := do
  if prefixLen == 0 then
    let (s, hmsgs, h) ← k3Start input fileName opts optionsKey cache.header
    let (_, msgs) ← k3Run input fileName s
    pure (false, hmsgs ++ msgs, { cache with header := some h })
  else
    let pre := String.Pos.Raw.extract input 0 ⟨prefixLen⟩
    let (hit, e, cache) ← match k3Lookup pre optionsKey cache.prefixes with
      | (some e, others) => pure (true, e, { cache with prefixes := e :: others })
      | (none, _) => do
        let (s0, hmsgs, h) ← k3Start pre fileName opts optionsKey cache.header
        let (s1, pmsgs) ← k3Run pre fileName s0
        let e : K3Saved := { text := pre, optionsKey, state := s1, messages := hmsgs ++ pmsgs }
        pure (false, e, { header := some h, prefixes := k3Take k3Keep (e :: cache.prefixes) })
    let (_, msgs) ← k3Run input fileName { e.state with parserState := { pos := ⟨prefixLen⟩ }, cmdPos := ⟨prefixLen⟩ }
    pure (hit, e.messages ++ msgs, cache)

/-- Print each message as `lean --json` does, one line each, as a message of the file `fileName`
(a saved prefix's messages name the file that first elaborated it). -/
def k3Print (out : IO.FS.Handle) (fileName : String) : List Message → IO Unit
  | [] => pure ()
  | m :: rest => do
    out.putStrLn (← Message.toJson { m with fileName }).compress
    k3Print out fileName rest

/-- Run job `n`: elaborate the file, its stdout/stderr and messages going to its own files. -/
def k3Job (dir : String) (n : Nat) (saved : K3Cache) (fileName path : String) (prefixLen : Nat)
    (optionLines : List String) : IO K3Cache := do
  let t0 ← IO.monoMsNow
  match k3Options {} optionLines with
  | none =>
    k3Write dir ("done-" ++ Nat.repr n) "bad options"
    pure saved
  | some opts =>
    let out ← IO.FS.Handle.mk (k3Path dir ("out-" ++ Nat.repr n ++ ".json")) .write
    let err ← IO.FS.Handle.mk (k3Path dir ("err-" ++ Nat.repr n ++ ".txt")) .write
    let oldOut ← IO.setStdout (IO.FS.Stream.ofHandle out)
    let oldErr ← IO.setStderr (IO.FS.Stream.ofHandle err)
    let input ← IO.FS.readFile path
    let (hit, msgs, saved) ← k3Elaborate saved fileName input (String.intercalate "\n" optionLines) opts prefixLen
    k3Print out fileName msgs.toList
    out.flush
    err.flush
    let _ ← IO.setStdout oldOut
    let _ ← IO.setStderr oldErr
    let t1 ← IO.monoMsNow
    k3Write dir ("done-" ++ Nat.repr n)
      ((if msgs.hasErrors then "error " else "ok ") ++ Nat.repr (t1 - t0) ++ (if hit then " hit" else " miss"))
    pure saved

/-- Wait for job `n` (polling every 5 ms, giving up after `idleMs` without one), run it, and go on
with job `n + 1`, until a `quit` job. -/
partial def k3Loop (dir : String) (idleMs : Nat) (n : Nat) (since : Nat) (saved : K3Cache) : IO Unit := do
  let job := k3Path dir ("job-" ++ Nat.repr n)
  if ← System.FilePath.pathExists job then
    match (← IO.FS.readFile job).splitOn "\n" with
    | "quit" :: _ => pure ()
    | fileName :: path :: prefixLen :: optionLines =>
      match prefixLen.toNat? with
      | some len =>
        let saved ← k3Job dir n saved fileName path len optionLines
        k3Loop dir idleMs (n + 1) (← IO.monoMsNow) saved
      | none =>
        k3Write dir ("done-" ++ Nat.repr n) "bad job file"
        k3Loop dir idleMs (n + 1) (← IO.monoMsNow) saved
    | _ =>
      k3Write dir ("done-" ++ Nat.repr n) "bad job file"
      k3Loop dir idleMs (n + 1) (← IO.monoMsNow) saved
  else if (← IO.monoMsNow) - since > idleMs then
    pure ()
  else
    IO.sleep 5
    k3Loop dir idleMs n since saved

#eval show Lean.Elab.Command.CommandElabM Unit from do
  k3Write "." "ready" "ready"
  k3Loop "." 600000 0 (← IO.monoMsNow) {}
