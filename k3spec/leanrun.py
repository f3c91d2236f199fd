"""Run Lean processes on either toolchain, and read what they print: the one runner and the one
parser of Lean's `--json` messages that the build, the bundles, the exports and the audit share.

The offline `lean.js` prints `[DEBUG...]` progress lines. On stdout, the line
`[DEBUG:F] Input file content (first 200 chars): ...` is followed by up to 200 characters of the
source file, which run on over several lines until the next `[DEBUG` line; on stderr, some
`[DEBUG` lines are followed by indented detail lines (`  - /path/X.olean`). `DebugFilter` drops
exactly those, and keeps everything Lean itself prints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator

from .toolchain import VISIBLE_ROOTS, Toolchain, cache_root

CONTENT_DUMP = "[DEBUG:F] Input file content"


class DebugFilter:
    """Line filter for one output stream of `lean.js`."""

    def __init__(self) -> None:
        self._in_dump = False
        self._after_debug = False

    def keep(self, line: str) -> bool:
        """Whether `line` (without its newline) is Lean's own output."""
        if line.startswith("[DEBUG"):
            self._in_dump = line.startswith(CONTENT_DUMP)
            self._after_debug = True
            return False
        if self._in_dump:
            return False
        if self._after_debug and line.startswith("  "):
            return False
        self._after_debug = False
        return True


@dataclass
class LeanResult:
    """Exit code, filtered output and peak resident memory of one Lean process."""

    returncode: int
    stdout: str
    stderr: str
    peak_rss_mb: float = 0.0


@dataclass
class LeanMessage:
    """One message of `lean --json` (position in the elaborated file)."""

    line: int
    column: int
    severity: str
    text: str
    kind: str = ""


class CutOffOutput(ValueError):
    """A line that starts a JSON message does not parse: the output was cut off."""


def parse_messages(stdout: str, strict: bool = False) -> list[LeanMessage]:
    """The messages in the stdout of `lean --json`, in order.

    A line that is not a JSON object is kept as an `information` message at line 1 (the offline
    Lean prints a few such lines). With `strict`, a line starting with `{` that does not parse
    raises `CutOffOutput` (the offline `lean.js` could cut long output off); otherwise it is kept
    as text.
    """
    messages = []
    for line in stdout.splitlines():
        if not line.startswith("{"):
            if line.strip():
                messages.append(LeanMessage(1, 0, "information", line))
            continue
        try:
            msg = json.loads(line)
        except json.JSONDecodeError as err:
            if strict:
                raise CutOffOutput(f"{err.msg} at character {err.pos} of a message") from None
            messages.append(LeanMessage(1, 0, "information", line))
            continue
        pos = msg.get("pos") or {"line": 1, "column": 0}
        messages.append(LeanMessage(pos.get("line", 1), pos.get("column", 0), msg.get("severity", "information"),
                                    msg.get("data", ""), msg.get("kind", "")))
    return messages


#: Options every offline Lean process gets. Each thread of `lean.js` is a worker that loads and
#: links the whole wasm again (about 4-5 s of CPU and 0.5-0.7 GB each), and by default Lean starts
#: 4 of them for a small module. One task-manager worker and synchronous elaboration need 2: on
#: `Core/Kernel.lean`, 36 s of CPU and 2.6 GB instead of 47 s and 3.5 GB (docs/benchmarks-lean.md).
#: `--tstack` raises Lean's thread stack to 64 MB (in KB) to match the 256 MB worker stacks of the
#: patched `lean.js`, so deep non-tail recursions (the paper-size graph serializer) do not overflow.
#: All are Lean's own options; they change the schedule and stack of elaboration, not what is
#: checked.
OFFLINE_OPTIONS = ("-j1", "-DElab.async=false", "--tstack=65536")


def process_options(tc: Toolchain) -> tuple[str, ...]:
    """The options `command` adds to every `lean` command line on `tc` (none for native Lean)."""
    return OFFLINE_OPTIONS if tc.kind == "offline" else ()


def command(tc: Toolchain, args: list[str], unpatched: bool = False) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that run `lean ARGS` on toolchain `tc` (with `process_options`)."""
    env = dict(os.environ)
    if tc.kind == "native":
        return [str(tc.lean), *args], env
    assert tc.node and tc.lean_js and tc.stdlib and tc.lean_js_unpatched
    js = tc.lean_js_unpatched if unpatched else tc.lean_js
    # Node's own cache of compiled JavaScript: `lean.js` is 89 MB of glue that every process
    # would otherwise compile again (about 1.5 s of CPU per process, measured).
    env.setdefault("NODE_COMPILE_CACHE", str(cache_root() / "node-compile-cache"))
    return [str(tc.node), str(js), *process_options(tc), *args], env


def slot_count() -> int:
    """How many Lean processes may run at once on this machine (`K3SPEC_LEAN_SLOTS`, default 4).

    Four: an offline Lean process peaks at 0.75-2.5 GB (a build worker, most bundles) and at most
    about 4.3 GB (its 32-bit WebAssembly heap is capped at 4 GB), so four fit in the machine's 24 GB
    beside the test processes; and one offline process keeps only about 0.7-0.85 of a core busy
    (its two wasm threads hand work to each other), so four on the two cores build the library in
    292 s where two took 335 s (docs/benchmarks-lean.md, "Long-lived Lean workers")."""
    raw = os.environ.get("K3SPEC_LEAN_SLOTS", "4")
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"K3SPEC_LEAN_SLOTS must be a positive integer, got {raw!r}")
    return int(raw)


@contextmanager
def lean_slot() -> Iterator[None]:
    """Hold one of the machine-wide Lean slots (lock files under `<K3SPEC_HOME>/slots`).

    Every Lean process started through this module takes a slot, whichever build, test or helper
    starts it, so the memory limit (about 6.5 GB per offline Lean process) holds machine-wide.
    Waiters queue at a turnstile (`slots/turnstile.lock`): only its holder looks for a free slot,
    and it lets go once it has one, so a process that releases a slot and asks again at once
    queues behind the processes already waiting instead of taking the slot back.
    """
    import fcntl

    folder = cache_root() / "slots"
    folder.mkdir(parents=True, exist_ok=True)
    told = False
    with open(folder / "turnstile.lock", "w") as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            while True:
                handle = _free_slot(folder)
                if handle is not None:
                    break
                if not told:
                    print(f"waiting for a free Lean slot ({slot_count()} in use; K3SPEC_LEAN_SLOTS)", file=sys.stderr, flush=True)
                    told = True
                time.sleep(0.2)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _free_slot(folder: Path):
    """An open, exclusively locked slot file, or None when all slots are taken."""
    import fcntl

    for i in range(slot_count()):
        handle = open(folder / f"slot-{i}.lock", "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        return handle
    return None


def _pump(stream: IO[str], sink: Callable[[str], None], offline: bool) -> None:
    filt = DebugFilter()
    for raw in stream:
        line = raw.rstrip("\n")
        if not offline or filt.keep(line):
            sink(line)


def run(
    tc: Toolchain,
    args: list[str],
    cwd: Path,
    lean_path: list[Path] = (),
    unpatched: bool = False,
    echo: bool = False,
) -> LeanResult:
    """Run `lean ARGS` in `cwd` with `LEAN_PATH` = stdlib (offline) + `lean_path`.

    For the offline toolchain, `cwd` and every path in `lean_path` must lie under /home or /tmp.
    With `echo`, filtered output is also streamed to this process's stdout/stderr as it comes.
    """
    argv, env = command(tc, args, unpatched)
    search = [str(p) for p in lean_path]
    if tc.kind == "offline":
        search.insert(0, str(tc.stdlib))
    elif env.get("LEAN_PATH"):
        search.append(env["LEAN_PATH"])
    env["LEAN_PATH"] = os.pathsep.join(search)
    with lean_slot():
        return _run_process(argv, cwd, env, tc.kind == "offline", echo)


def _run_process(argv: list[str], cwd: Path, env: dict[str, str], offline: bool, echo: bool) -> LeanResult:
    """Run one Lean process. Unless its output is echoed live, stdout goes to a file: node's
    writes to a pipe are asynchronous, and `lean.js` exits before a long line has drained, so a
    message longer than the pipe buffer (64 KiB) arrived cut off; writes to a file are not."""
    if echo:
        return _run_piped(argv, cwd, env, offline)
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stdout_file:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout_file, stderr=subprocess.PIPE, text=True, errors="replace")
        watch = PeakWatch(proc.pid)
        err: list[str] = []
        reader = threading.Thread(target=_pump, args=(proc.stderr, err.append, offline))
        reader.start()
        reader.join()
        rc, peak_mb = _wait(proc, watch)
        stdout_file.seek(0)
        out: list[str] = []
        _pump(stdout_file, out.append, offline)
    return LeanResult(rc, "\n".join(out), "\n".join(err), peak_mb)


def _run_piped(argv: list[str], cwd: Path, env: dict[str, str], offline: bool) -> LeanResult:
    """Run one Lean process and stream its filtered output to ours as it comes."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace"
    )
    watch = PeakWatch(proc.pid)
    out: list[str] = []
    err: list[str] = []

    def sink(store: list[str], target: IO[str]) -> Callable[[str], None]:
        def put(line: str) -> None:
            store.append(line)
            print(line, file=target, flush=True)

        return put

    threads = [
        threading.Thread(target=_pump, args=(proc.stdout, sink(out, sys.stdout), offline)),
        threading.Thread(target=_pump, args=(proc.stderr, sink(err, sys.stderr), offline)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rc, peak_mb = _wait(proc, watch)
    return LeanResult(rc, "\n".join(out), "\n".join(err), peak_mb)


class PeakWatch:
    """The peak resident memory of one running process: its `VmHWM` (the high-water mark of its
    own memory since its `exec`), read from `/proc/PID/status` every `interval` seconds.

    Why not `wait4`'s `ru_maxrss` alone: Linux carries the parent's high-water mark into the
    child at the fork, so every child of a large Python process (pytest with torch loaded: about
    1.7 GB) would report at least that. The last reading may miss growth in the final interval;
    `VmHWM` only rises, so it is never more than the true peak."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self._path = Path(f"/proc/{pid}/status")
        self._interval = interval
        self._stop = threading.Event()
        self.peak_kb = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for line in self._path.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            except (OSError, ValueError, IndexError):
                return
            self._stop.wait(self._interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _wait(proc: subprocess.Popen, watch: PeakWatch) -> tuple[int, float]:
    """Reap `proc`: its exit code and its peak resident memory in MB (`PeakWatch`; `wait4`'s
    figure where /proc could not be read)."""
    _, status, usage = os.wait4(proc.pid, 0)
    watch.stop()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, (watch.peak_kb or usage.ru_maxrss) / 1024


def _visible(path: Path) -> bool:
    return (str(path.resolve()) + "/").startswith(VISIBLE_ROOTS)


def wrapper_main(tc: Toolchain, args: list[str]) -> int:
    """`k3spec lean ARGS`: run Lean like the native binary, staging files lean.js cannot see.

    Input `.lean` files and `-o`/`-i`/`-c` outputs outside /home and /tmp are copied to (and
    outputs back from) a staging folder under /tmp; the exit code is Lean's.
    """
    cwd = Path.cwd()
    if tc.kind == "native" or _visible(cwd):
        staged_args, copies_back, stage_cwd = list(args), [], cwd
        stage_dir = None
    else:
        stage_dir = Path(tempfile.mkdtemp(prefix="k3spec-lean-", dir="/tmp"))
        stage_cwd = stage_dir / "src"
        stage_cwd.mkdir()
        staged_args, copies_back = [], []
        output_flags = {"-o", "-i", "-c", "--ir"}
        pending_output = False
        for arg in args:
            if pending_output:
                target = Path(arg) if Path(arg).is_absolute() else cwd / arg
                staged = stage_dir / "out" / target.name
                staged.parent.mkdir(parents=True, exist_ok=True)
                staged_args.append(str(staged))
                copies_back.append((staged, target))
                pending_output = False
            elif arg in output_flags:
                staged_args.append(arg)
                pending_output = True
            elif not arg.startswith("-") and arg.endswith(".lean"):
                source = Path(arg) if Path(arg).is_absolute() else cwd / arg
                rel = Path(arg) if not Path(arg).is_absolute() else Path(source.name)
                staged = stage_cwd / rel
                staged.parent.mkdir(parents=True, exist_ok=True)
                if source.exists():
                    shutil.copyfile(source, staged)
                staged_args.append(str(rel))
            else:
                staged_args.append(arg)
    extra = [Path(p) for p in os.environ.get("K3SPEC_LEAN_PATH", "").split(os.pathsep) if p]
    try:
        result = run(tc, staged_args, stage_cwd, lean_path=extra, echo=True)
        for staged, target in copies_back:
            if staged.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(staged, target)
    finally:
        if stage_dir is not None:
            shutil.rmtree(stage_dir, ignore_errors=True)
    return result.returncode
