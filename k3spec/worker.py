"""Long-lived offline Lean processes that check module after module (`k3spec build`).

Every offline `lean` process spends about 3.5 s of CPU instantiating and linking the WebAssembly
before it reads its file, and about 0.85 s more reading `Init`'s 505 `.olean` files (68 MB), more
than half of what a typical library module costs (docs/benchmarks-lean.md, "Long-lived workers").
A `LeanWorker` starts Lean once on `k3spec/lean/Worker.lean`, which imports `Init` once and then
elaborates each module it is sent the way the `lean` executable does (`Lean.Elab.runFrontend`'s
steps, with its imports read starting from that `Init`; `Worker.lean`, `k3Frontend`), with the
options of the plain command line (`build._plain_check`). `tests/test_build.py` checks that both
paths give the same verdicts, the same diagnostics, the same `.ilean` bytes and `.olean` parts
with the same constants and extension entry counts.

Protocol, through files in the worker's own folder (`Worker.lean` explains the Lean side): we
write `job-<n>` (module name, source path, `.olean` path, `.ilean` path, `cached` or `full`), the
worker writes the module's messages to `out-<n>.json` and then `done-<n>` (`ok` or `error`, and
milliseconds); a `quit` job ends it. The worker runs in its folder, where `lean` links to the
build's staged sources, so source paths are the plain command line's, relative (they end up in the
outputs).

Memory: the offline Lean is 32-bit WebAssembly, and imported `.olean` data stays in its heap until
the process ends. A worker is therefore replaced once its resident memory passes
`K3SPEC_WORKER_RECYCLE_MB` (default 2400) or it has run `K3SPEC_WORKER_JOBS` jobs (default 24).
Measured on the library: a worker holds about 1.6 GB after its first job and a job adds 20-30 MB
(50-200 MB when every job read `Init` again); the process dies ("INTERNAL PANIC: out of memory")
near 2.9-3.2 GB. A worker that dies during a job anyway raises `WorkerDied`; the build then checks
that module with a plain process, so a death costs time, never a verdict.

A worker takes one of the machine-wide Lean slots (`leanrun.lean_slot`) only while it starts or
runs a job, so other Lean processes queue fairly between its jobs.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from . import leanrun
from .toolchain import Toolchain

WORKER_SOURCE = Path(__file__).parent / "lean" / "Worker.lean"
#: How often the driver looks for the worker's answer files.
POLL_S = 0.01


class WorkerDied(RuntimeError):
    """The worker process ended before it answered; the message quotes what it printed last."""


def _limit(name: str, default: int) -> int:
    raw = os.environ.get(name, str(default))
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a positive integer, got {raw!r}")
    return int(raw)


_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before `exec`: get SIGKILL when the thread that started it ends (Linux
    `PR_SET_PDEATHSIG`), so no worker outlives a build that crashed. (libc is loaded before the
    fork: nothing here takes a lock.)"""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _rss_mb(pid: int, field: str) -> float:
    """`VmRSS` or `VmHWM` of a live process, in MB (0 when it cannot be read)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


class LeanLoop:
    """One long-lived offline Lean process running a loop program (`Worker.lean`,
    `EvalServer.lean`) that answers job files in its folder; started on its first job, replaced
    after `max_jobs` jobs or `K3SPEC_WORKER_RECYCLE_MB` of resident memory, and before a job when
    it has ended by itself (after 10 idle minutes). One that dies during a job raises
    `WorkerDied`: the caller gives that job to a plain process."""

    #: The Lean program the process elaborates; its `#eval` is the job loop.
    program: Path

    def __init__(self, tc: Toolchain, folder: Path, lean_path: list[Path], max_jobs: int) -> None:
        if tc.kind != "offline":
            raise ValueError("Lean workers are for the offline toolchain (a native Lean starts in milliseconds)")
        self.tc = tc
        self.folder = folder
        self.lean_path = lean_path
        self.recycle_mb = _limit("K3SPEC_WORKER_RECYCLE_MB", 2400)
        self.max_jobs = max_jobs
        self.started = 0
        self._proc: subprocess.Popen | None = None
        self._jobs = 0

    # --- life cycle -------------------------------------------------------------------------------
    def _prepare(self) -> None:
        """Fill the fresh folder before the process starts (the program is already there)."""

    def _spawn(self) -> None:
        """Start the process; its loop writes `ready` once it runs (about 5 s later)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        shutil.copyfile(self.program, self.folder / self.program.name)
        self._prepare()
        argv, env = leanrun.command(self.tc, [self.program.name])
        env["LEAN_PATH"] = os.pathsep.join([str(self.tc.stdlib), *map(str, self.lean_path)])
        with open(self.folder / "stdout.txt", "w") as out, open(self.folder / "stderr.txt", "w") as err:
            self._proc = subprocess.Popen(argv, cwd=self.folder, env=env, stdout=out, stderr=err,
                                          preexec_fn=_die_with_parent)
        self._jobs = 0
        self.started += 1

    def close(self) -> None:
        """Send `quit` and reap the process (killed if it does not end within 30 s)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            self._write(f"job-{self._jobs}", "quit\n")
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _write(self, name: str, text: str) -> None:
        tmp = self.folder / (name + ".tmp")
        tmp.write_text(text)
        tmp.rename(self.folder / name)

    def _last_words(self) -> str:
        """Why the process ended, from what it printed: its panic or error lines (e.g. "INTERNAL
        PANIC: out of memory"), else its last lines, without the toolchain's debug lines."""
        lines: list[str] = []
        for name in ("stderr.txt", "stdout.txt"):
            path = self.folder / name
            if path.exists():
                filt = leanrun.DebugFilter()
                lines += [line.strip() for line in path.read_text(errors="replace").splitlines() if filt.keep(line) and line.strip()]
        errors = [line for line in lines if "PANIC" in line or "Error" in line or "error" in line]
        return "; ".join((errors or lines)[-3:]) or "no message"

    def _wait_for(self, path: Path, what: str) -> None:
        assert self._proc is not None
        while not path.exists():
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise WorkerDied(f"the Lean worker ended (exit {code}) during its {what}: {self._last_words()}")
            time.sleep(POLL_S)

    def _job(self, lines: str, what: str) -> tuple[list[str], str, str, float]:
        """Send one job (holding a Lean slot while the process starts and runs it) and collect its
        answer: the words of `done-<n>`, its filtered stdout, its stderr and the process's peak
        resident memory; then replace the process if it has grown too large or done enough."""
        with leanrun.lean_slot():
            if self._proc is not None and self._proc.poll() is not None:
                # It ended before this job was sent (a loop ends itself after 10 idle minutes):
                # nothing of this job is lost, so a fresh process takes it.
                self._proc = None
            if self._proc is None:
                self._spawn()
            self._wait_for(self.folder / "ready", "start")
            n = self._jobs
            self._jobs += 1
            self._write(f"job-{n}", lines)
            self._wait_for(self.folder / f"done-{n}", what)
        assert self._proc is not None
        verdict = (self.folder / f"done-{n}").read_text().split()
        out = (self.folder / f"out-{n}.json").read_text(errors="replace") if (self.folder / f"out-{n}.json").exists() else ""
        err = (self.folder / f"err-{n}.txt").read_text(errors="replace") if (self.folder / f"err-{n}.txt").exists() else ""
        for name in (f"job-{n}", f"done-{n}", f"out-{n}.json", f"err-{n}.txt"):
            (self.folder / name).unlink(missing_ok=True)
        filt = leanrun.DebugFilter()
        stdout = "\n".join(line for line in out.splitlines() if filt.keep(line))
        peak_mb = _rss_mb(self._proc.pid, "VmHWM")
        if _rss_mb(self._proc.pid, "VmRSS") > self.recycle_mb or self._jobs >= self.max_jobs:
            self.close()
        return verdict, stdout, err.strip(), peak_mb


class LeanWorker(LeanLoop):
    """A worker of the build: checks library modules like `lean -o X.olean -i X.ilean X.lean`."""

    program = WORKER_SOURCE

    def __init__(self, tc: Toolchain, folder: Path, sources: Path, lean_path: list[Path]) -> None:
        super().__init__(tc, folder, lean_path, _limit("K3SPEC_WORKER_JOBS", 24))
        self.sources = sources

    def _prepare(self) -> None:
        (self.folder / "lean").symlink_to(self.sources / "lean")

    # --- jobs ---------------------------------------------------------------------------------------
    def check(self, module: str, source: Path, olean: Path, ilean: Path, full_import: bool = False) -> leanrun.LeanResult:
        """Elaborate `module` like `lean --json -o OLEAN -i ILEAN SOURCE`: the exit code a plain
        process would give (0, or 1 when the frontend failed), its messages, and the worker's
        peak resident memory. With `full_import` (a module it imports declares `initialize`) the
        worker imports with Lean's own `importModules`, through `Lean.Elab.runFrontend`. Raises
        `WorkerDied` if the process ends first."""
        how = "full" if full_import else "cached"
        verdict, stdout, err, peak_mb = self._job(f"{module}\n{source}\n{olean}\n{ilean}\n{how}\n", f"check of {module}")
        if not verdict or verdict[0] not in ("ok", "error"):
            raise WorkerDied(f"the Lean worker did not understand the job for {module}: {' '.join(verdict)}")
        return leanrun.LeanResult(0 if verdict[0] == "ok" else 1, stdout, err, peak_mb)
