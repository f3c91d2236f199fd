"""One long-lived offline Lean process per Python process for evaluation bundles, elaborating each
bundled prefix once (`codegen.bundle.run_lean`).

Every evaluation bundle starts with the library sources it needs (`codegen.bundle.bundle`, which
ends them with the line `BUNDLE_END`), and a plain `lean` process elaborates them again for every
file: for the executable specification's bundle (`KimiK3.Exec.Kernel`) about 15-20 s of CPU, plus
3.5 s of start-up, before the file's own commands. The server (`k3spec/lean/EvalServer.lean`)
elaborates a prefix once, keeps Lean's frontend state after it, and resumes from that state for
every later file that starts with the same text, with the same options; the file's own commands
are parsed and elaborated from the byte where the prefix ends, so positions and messages are the
whole file's. `tests/test_evalserver.py` checks that a file gives the same messages through the
server, on a hit and on a miss, as through a plain `lean` process (a passing and a failing file,
and definitions of one file invisible to the next).

Off with `K3SPEC_EVAL_SERVER=0` (a plain process per file). Only the offline toolchain uses it; a
native Lean starts in milliseconds. A server that dies during a job leaves that file to a plain
process, so a death costs time, never a result.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path

from . import leanrun
from .toolchain import Toolchain, cache_root
from .worker import LeanLoop, WorkerDied

EVAL_SERVER_SOURCE = Path(__file__).parent / "lean" / "EvalServer.lean"
#: The line that ends a bundle's library sources: the server's prefix ends after it.
BUNDLE_END = "-- end of the bundled library sources\n"


class ServerRefused(RuntimeError):
    """The file cannot go through the server (the caller runs a plain process)."""


class EvalServer(LeanLoop):
    """The evaluation server process (see the module docstring)."""

    program = EVAL_SERVER_SOURCE

    def __init__(self, tc: Toolchain, folder: Path) -> None:
        # Replaced by memory only (`K3SPEC_WORKER_RECYCLE_MB`): a job that resumes a saved prefix
        # imports nothing, so what it allocates is freed with its state.
        super().__init__(tc, folder, [], max_jobs=10**9)
        self.hits = 0
        self.misses = 0
        self._busy = threading.Lock()

    def close(self) -> None:
        """End the process (if running) and remove its folder."""
        super().close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def evaluate(self, name: str, source: str, options: dict[str, bool]) -> leanrun.LeanResult:
        """Elaborate `source` as the file `name` with the Boolean `options`, like `lean --json
        -Dk=v … name`; the prefix is the text up to and including the last `BUNDLE_END` line (none
        without one). Raises `WorkerDied` if the process ends first, `ServerRefused` for a file it
        does not take (a carriage return, which Lean's own reader would normalise) or while it
        runs another file (a concurrent caller gets a plain process)."""
        if "\r" in source:
            raise ServerRefused(f"{name} holds a carriage return")
        if not self._busy.acquire(blocking=False):
            raise ServerRefused("the server is running another file")
        try:
            return self._evaluate(name, source, options)
        finally:
            self._busy.release()

    def _evaluate(self, name: str, source: str, options: dict[str, bool]) -> leanrun.LeanResult:
        cut = source.rfind(BUNDLE_END)
        prefix_len = len(source[: cut + len(BUNDLE_END)].encode()) if cut >= 0 else 0
        lines = "".join(f"{k}={'true' if v else 'false'}\n" for k, v in options.items())
        with tempfile.TemporaryDirectory(prefix="k3spec-eval-", dir="/tmp") as tmp:
            path = Path(tmp) / name
            path.write_text(source, encoding="utf-8")
            verdict, stdout, err, peak_mb = self._job(f"{name}\n{path}\n{prefix_len}\n{lines}", f"evaluation of {name}")
        if len(verdict) < 3 or verdict[0] not in ("ok", "error"):
            raise WorkerDied(f"the evaluation server did not understand the job for {name}: {' '.join(verdict)}")
        if verdict[2] == "hit":
            self.hits += 1
        else:
            self.misses += 1
        return leanrun.LeanResult(0 if verdict[0] == "ok" else 1, stdout, err, peak_mb)


def bool_options(args: list[str]) -> dict[str, bool]:
    """The `-Dname=true|false` options among `lean` arguments (the toolchain's own process options
    included, as `leanrun.command` adds them); other `-D` options are refused."""
    options: dict[str, bool] = {}
    for arg in args:
        if arg.startswith("-D"):
            key, _, value = arg[2:].partition("=")
            if value not in ("true", "false"):
                raise ServerRefused(f"option {arg} is not a Boolean")
            options[key] = value == "true"
    return options


_lock = threading.Lock()
_servers: dict[str, EvalServer] = {}


def enabled(tc: Toolchain) -> bool:
    """Whether bundles go through the server: the offline toolchain, unless `K3SPEC_EVAL_SERVER=0`."""
    return tc.kind == "offline" and os.environ.get("K3SPEC_EVAL_SERVER", "1") != "0"


def server(tc: Toolchain) -> EvalServer:
    """This process's server for `tc` (one per process, closed at exit)."""
    with _lock:
        key = tc.identity
        if key not in _servers:
            folder = cache_root() / "evalservers" / f"{os.getpid()}-{len(_servers)}"
            _servers[key] = EvalServer(tc, folder)
            atexit.register(_servers[key].close)
        return _servers[key]
