"""Run a Lean file against the built library and return what it prints.

`lean --run` does not work offline, so code that must execute (graph export, the differential
tester's reference evaluations) is written as a generated Lean file whose `#eval` commands print
their results; this module builds the library (incrementally), elaborates that file with the
library on `LEAN_PATH`, and returns the messages.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import leanrun
from .build import LEAN_OPTIONS, build, work_folder
from .toolchain import Toolchain


class EvaluationError(RuntimeError):
    """The library did not build, or the evaluated file produced errors."""


@dataclass
class Message:
    """One message of the evaluated file."""

    line: int
    severity: str
    text: str


def library_path(root: Path) -> Path:
    """The folder holding the library's `.olean` files after an offline build of `root`."""
    return work_folder(root) / "out"


def run_source(
    tc: Toolchain, source: str, name: str = "Eval", lean_path: list[Path] = (), attempts: int = 3
) -> list[Message]:
    """Elaborate `source` as `NAME.lean` in a fresh folder under /tmp and return its messages.

    `lean_path` lists folders of `.olean`s it may import. Raises `EvaluationError` on any error.
    `leanrun` sends Lean's stdout to a file, because through a pipe the offline `lean.js` cut
    messages off at 64 KiB. Should a message still arrive cut off (it is not valid JSON), the file
    is run again, up to `attempts` runs in all; a message cut off every time (the offline Lean
    also truncates one message at about 2 MB) is an `EvaluationError`: write large results to a
    file instead.
    """
    for attempt in range(1, attempts + 1):
        with tempfile.TemporaryDirectory(prefix="k3spec-eval-", dir="/tmp") as tmp:
            path = Path(tmp) / f"{name}.lean"
            path.write_text(source, encoding="utf-8")
            run = leanrun.run(tc, ["--json", *LEAN_OPTIONS, path.name], cwd=Path(tmp), lean_path=list(lean_path))
        try:
            messages = _parse_messages(run.stdout)
            break
        except json.JSONDecodeError as err:
            cut = f"{name}.lean: Lean's output was cut off ({err.msg} at character {err.pos} of a message)"
            if attempt == attempts:
                raise EvaluationError(f"{cut} in all {attempts} runs; write large results to a file") from None
            print(f"{cut}; running it again ({attempt + 1}/{attempts})", file=sys.stderr, flush=True)
    errors = [m for m in messages if m.severity == "error"]
    if errors or run.returncode != 0:
        detail = "\n".join(f"{name}.lean:{m.line}: {m.text}" for m in errors[:5]) or run.stderr.strip()
        raise EvaluationError(detail)
    return messages


def _parse_messages(stdout: str) -> list[Message]:
    messages = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            msg = json.loads(line)
            messages.append(Message(msg.get("pos", {}).get("line", 0), msg.get("severity", ""), msg.get("data", "")))
    return messages


def run_file(root: Path, tc: Toolchain, source: str, name: str = "Eval") -> list[Message]:
    """Build the library at `root`, then elaborate `source` (which may import it).

    Offline, only code that the compiler inlines runs across modules (the wasm Lean does not
    load imported modules' IR); `codegen.bundle` evaluates library code by bundling sources.
    Raises `EvaluationError` naming the failing module or the file's first errors.
    """
    result = build(root, tc, quiet=True)
    if not result.ok:
        errors = [d.render() for d in result.diagnostics if d.severity == "error"]
        raise EvaluationError("the Lean library does not build:\n" + "\n".join(errors[:10]))
    if tc.kind == "native":
        search = [root / ".lake" / "build" / "lib" / "lean"]
    else:
        search = [library_path(root)]
    return run_source(tc, source, name, search)
