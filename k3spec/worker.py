"""Long-lived Lean processes that check module after module (offline toolchain).

Every offline `lean` process pays about 8 s of fixed start-up (instantiating the WebAssembly and
importing `Init`); a library of a hundred modules spent more time starting Lean than checking
proofs. A `LeanWorker` starts Lean once, on `k3spec/lean/Worker.lean`, whose `#eval` loop
elaborates each module it is sent with `Lean.Elab.runFrontend`, the function the `lean`
executable's main calls, with the same arguments (`--json`, the `-D` options, the trust level,
the `.olean`/`.ilean` outputs, the module name). `tests/test_build.py` checks that the two paths
give identical verdicts and diagnostics.

Protocol (files in the worker's folder, its working directory): the worker writes `ready`; for
job `n` we write `job-<n>` (module name, source path, `.olean` path, `.ilean` path, one per line),
the worker prints the module's messages as JSON lines to its stdout (a file) between
`{"k3worker":"begin","job":n}` and `{"k3worker":"end","job":n}` and then writes `done-<n>`
(`ok` or `error`); a `quit` job ends it. Files are written under a temporary name and renamed.

Memory: the offline Lean is 32-bit WebAssembly (at most 4 GB of linear memory) and a worker keeps
every module's imported `.olean` data (about 100 MB per module; freeing it made a later job crash,
measured). A worker that ran out of memory died after 19 modules at 7.7 GB resident, so a worker
whose resident memory passes `K3SPEC_WORKER_RECYCLE_MB` (default 6000) or that has run
`K3SPEC_WORKER_JOBS` jobs (default 14) is replaced by a fresh one. A worker that dies anyway is
reported by the caller, which checks the module again with a plain `lean` process.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from . import leanrun
from .toolchain import Toolchain

WORKER_SOURCE = Path(__file__).parent / "lean" / "Worker.lean"
_BEGIN = '{"k3worker":"begin"'
_END = '{"k3worker":"end"'


class WorkerError(RuntimeError):
    """The worker process died or did not answer; the message says what it printed last."""


def _limit(name: str, default: int) -> int:
    raw = os.environ.get(name, str(default))
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a positive integer, got {raw!r}")
    return int(raw)


class LeanWorker:
    """One long-lived offline Lean process (holding one machine-wide Lean slot while it lives)."""

    def __init__(self, tc: Toolchain, folder: Path, lean_path: list[Path]) -> None:
        self.tc = tc
        self.folder = folder
        self.lean_path = lean_path
        self.jobs = 0
        self.peak_rss_mb = 0.0
        self._proc: subprocess.Popen | None = None
        self._slot = contextlib.ExitStack()
        self._stdout_pos = 0
        self._pending = ""

    # --- life cycle ---------------------------------------------------------------------
    def start(self, timeout: float = 600.0) -> None:
        """Take a Lean slot, start the process and wait until its loop is running."""
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        shutil.copyfile(WORKER_SOURCE, self.folder / "Worker.lean")
        self._slot.enter_context(leanrun.lean_slot())
        argv, env = leanrun.command(self.tc, ["Worker.lean"])
        env["LEAN_PATH"] = os.pathsep.join([str(self.tc.stdlib), *map(str, self.lean_path)])
        self._proc = subprocess.Popen(
            argv, cwd=self.folder, env=env,
            stdout=open(self.folder / "stdout", "w"), stderr=open(self.folder / "stderr", "w"),
        )
        self._wait_for(self.folder / "ready", timeout, "start")

    def stop(self) -> None:
        """End the process (a `quit` job, then a kill if it does not exit) and free the slot."""
        if self._proc is not None and self._proc.poll() is None:
            self._write(f"job-{self.jobs}", "quit\n")
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        self._slot.close()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def worn_out(self) -> bool:
        """Whether the worker should be replaced before its next job (memory or job count)."""
        return (self._rss_mb() > _limit("K3SPEC_WORKER_RECYCLE_MB", 6000)
                or self.jobs >= _limit("K3SPEC_WORKER_JOBS", 14))

    # --- jobs -----------------------------------------------------------------------------
    def check(self, module: str, source: Path, olean: Path, ilean: Path, timeout: float = 3600.0) -> leanrun.LeanResult:
        """Elaborate one module; its messages and an exit code as a plain `lean --json` gives them."""
        n = self.jobs
        self.jobs += 1
        self._write(f"job-{n}", f"{module}\n{source}\n{olean}\n{ilean}\n")
        self._wait_for(self.folder / f"done-{n}", timeout, module)
        verdict = (self.folder / f"done-{n}").read_text(encoding="utf-8").strip()
        lines = self._job_lines(n)
        self.peak_rss_mb = max(self.peak_rss_mb, self._hwm_mb())
        return leanrun.LeanResult(0 if verdict == "ok" else 1, "\n".join(lines), "" if verdict in ("ok", "error") else verdict)

    def _write(self, name: str, text: str) -> None:
        tmp = self.folder / f"{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.rename(self.folder / name)

    def _wait_for(self, path: Path, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            if self._proc is None or self._proc.poll() is not None:
                raise WorkerError(f"the Lean worker died during {what}: {self._stderr_tail()}")
            if time.monotonic() > deadline:
                raise WorkerError(f"the Lean worker gave no answer for {what} within {timeout:.0f} s")
            time.sleep(0.02)

    def _job_lines(self, n: int, timeout: float = 60.0) -> list[str]:
        """Lean's own output lines of job `n` (debug chatter of lean.js removed). The output of
        the thread that elaborated the module can reach the file after `done-<n>`: wait for the
        job's end marker."""
        end = f'{_END},"job":{n}}}'
        deadline = time.monotonic() + timeout
        while end not in self._pending:
            with open(self.folder / "stdout", encoding="utf-8", errors="replace") as fh:
                fh.seek(self._stdout_pos)
                chunk = fh.read()
                self._stdout_pos = fh.tell()
            self._pending += chunk
            if end in self._pending:
                break
            if time.monotonic() > deadline:
                raise WorkerError(f"the Lean worker's output of job {n} has no end marker after {timeout:.0f} s")
            time.sleep(0.02)
        cut = self._pending.index(end) + len(end)
        text, self._pending = self._pending[:cut], self._pending[cut:]
        lines, inside, filt = [], False, leanrun.DebugFilter()
        for line in text.splitlines():
            if line.startswith(_BEGIN):
                inside = json.loads(line)["job"] == n
            elif line.startswith(_END):
                inside = False
            elif inside and filt.keep(line):
                lines.append(line)
        return lines

    def _stderr_tail(self) -> str:
        try:
            text = (self.folder / "stderr").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "no output"
        kept = [line for line in text.splitlines() if line.strip() and not line.startswith("[DEBUG")]
        return " | ".join(kept[-4:]) or "no output"

    def _status_kb(self, field: str) -> float:
        if self._proc is None:
            return 0.0
        try:
            for line in open(f"/proc/{self._proc.pid}/status", encoding="ascii"):
                if line.startswith(field + ":"):
                    return float(line.split()[1])
        except OSError:
            pass
        return 0.0

    def _rss_mb(self) -> float:
        return self._status_kb("VmRSS") / 1024

    def _hwm_mb(self) -> float:
        return self._status_kb("VmHWM") / 1024
