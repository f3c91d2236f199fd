"""Evaluation bundles: the library's executable modules as one standalone Lean file, and runs of
such files.

The offline Lean cannot run the code of imported modules (not through `#eval`, `meta import`,
`import all` or the `.ir` files; see `lean/KimiK3/Core/README.md`), so every evaluation of
library code elaborates one file holding the sources it needs. The sources are taken verbatim,
in dependency order; only the module-system header lines (`module`, imports,
`@[expose] public section`), which a single file cannot repeat, are left out.

A bundle is elaborated with Lean's own option `debug.proofAsSorry` (`BUNDLE_OPTIONS`): the bodies
of its theorems are not elaborated again, since `k3spec build` checks exactly these sources,
proofs included. Definitions (their `by` blocks too) and every `#eval`/`#guard` are elaborated as
usual. Proofs are erased at run time, so no evaluated value can depend on a skipped body; the only
`sorry` a bundle holds is a skipped theorem body, because the build and the check-file runner
refuse `sorry` in the sources. Plain `#eval` refuses any term that mentions a theorem with a
skipped body ("depends on the 'sorry' axiom"), so the generated files evaluate with `#eval!`.
Measured on the check file `ModelChecks` (21 modules, 164 theorems): 179 s without the option,
63 s with it.

Offline, `run_lean` sends a bundle to this process's evaluation server (`k3spec/evalserver.py`),
which elaborates the library sources (up to the line `BUNDLE_END`) once and resumes from the saved
state for every later file that starts with them; a plain `lean` process takes the file when the
server is off (`K3SPEC_EVAL_SERVER=0`), busy with another thread's file, or dead.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from k3spec import evalserver, leanrun, sources, toolchain
from k3spec.build import LEAN_OPTIONS, USES_SORRY
from k3spec.evalserver import BUNDLE_END, ServerRefused
from k3spec.toolchain import Toolchain
from k3spec.worker import WorkerDied

HEADER_PREFIXES = ("module", "public import ", "import ", "@[expose] public section")
#: Options of every bundle run: theorem bodies are skipped (the build checks them; module docstring).
BUNDLE_OPTIONS = ("-Ddebug.proofAsSorry=true",)


class EvaluationError(RuntimeError):
    """Lean rejected an evaluated file (its first errors are in the message; `messages` holds all
    of the file's messages, when Lean ran)."""

    def __init__(self, detail: str, messages: list["Message"] | None = None) -> None:
        super().__init__(detail)
        self.messages = messages or []


@dataclass
class Message:
    """One message of an evaluated file."""

    line: int
    severity: str
    text: str


def module_path(root: Path, module: str) -> Path:
    """The source file of a module of the library rooted at `root`."""
    return root / "lean" / Path(*module.split(".")).with_suffix(".lean")


def strip_header(source: str) -> str:
    """A module's source without its module-system header lines."""
    kept = [line for line in source.splitlines() if not line.strip().startswith(HEADER_PREFIXES)]
    return "\n".join(kept) + "\n"


def dependency_order(root: Path, targets: tuple[str, ...]) -> tuple[str, ...]:
    """`targets` and every library module they import, each after its imports."""
    modules = sources.discover(root)
    order: list[str] = []

    def visit(name: str) -> None:
        if name not in modules:
            raise EvaluationError(f"{name} is not a module of the library under {root / 'lean'}")
        if name not in order:
            for dep in modules[name].imports:
                visit(dep)
            order.append(name)

    for target in targets:
        visit(target)
    return tuple(order)


def bundle(root: Path, modules: tuple[str, ...]) -> str:
    """The listed modules' sources (in the given order) as one standalone Lean file, ending with
    the line `BUNDLE_END` (where the evaluation server's saved prefix ends, `k3spec/evalserver.py`)."""
    parts = [f"-- from {m}\n" + strip_header(module_path(root, m).read_text(encoding="utf-8")) for m in modules]
    return "\n".join(parts) + BUNDLE_END


def run_source(
    tc: Toolchain,
    source: str,
    name: str = "Eval",
    lean_path: list[Path] = (),
    attempts: int = 3,
    options: tuple[str, ...] = (),
) -> list[Message]:
    """Elaborate `source` as `NAME.lean` in a fresh folder under /tmp and return its messages.

    `lean_path` lists folders of `.olean`s it may import; `options` are extra `-D` options. Raises `EvaluationError` on any error.
    Lean's stdout goes to a file (`leanrun`), because through a pipe the offline `lean.js` cut
    messages off at 64 KiB. Should a message still arrive cut off (it is not valid JSON), the file
    is run again, up to `attempts` runs in all; a message cut off every time (the offline Lean
    also truncates one message at about 2 MB) is an `EvaluationError`: write large results to a
    file instead.
    """
    args = ["--json", *LEAN_OPTIONS, *options, f"{name}.lean"]
    for attempt in range(1, attempts + 1):
        run = _run_on_server(tc, source, name, args) if not lean_path and evalserver.enabled(tc) else None
        if run is None:
            with tempfile.TemporaryDirectory(prefix="k3spec-eval-", dir="/tmp") as tmp:
                (Path(tmp) / f"{name}.lean").write_text(source, encoding="utf-8")
                run = leanrun.run(tc, args, cwd=Path(tmp), lean_path=list(lean_path))
        try:
            parsed = leanrun.parse_messages(run.stdout, strict=True)
            break
        except leanrun.CutOffOutput as err:
            cut = f"{name}.lean: Lean's output was cut off ({err})"
            if attempt == attempts:
                raise EvaluationError(f"{cut} in all {attempts} runs; write large results to a file") from None
            print(f"{cut}; running it again ({attempt + 1}/{attempts})", file=sys.stderr, flush=True)
    messages = [Message(m.line, m.severity, m.text) for m in parsed if m.text.strip() or m.severity != "information"]
    errors = [m for m in messages if m.severity == "error"]
    if errors or run.returncode != 0:
        detail = "\n".join(f"{name}.lean:{m.line}: {m.text}" for m in errors[:5]) or run.stderr.strip()
        raise EvaluationError(detail, messages)
    return messages


def _run_on_server(tc: Toolchain, source: str, name: str, args: list[str]) -> leanrun.LeanResult | None:
    """`source` elaborated by this process's evaluation server with the options of `args` (and
    the toolchain's process options), or None when the server does not take it or died (the
    caller then runs a plain process)."""
    try:
        options = evalserver.bool_options([*leanrun.process_options(tc), *args])
        return evalserver.server(tc).evaluate(f"{name}.lean", source, options)
    except ServerRefused:
        return None
    except WorkerDied as err:
        print(f"{name}.lean: {err}; running it in a plain Lean process", file=sys.stderr, flush=True)
        return None


def run_lean(source: str, name: str = "Bundle") -> list[Message]:
    """Elaborate a bundle (a standalone Lean file, no library imports) with `BUNDLE_OPTIONS` and
    return its messages, less the warnings for the theorem bodies it skipped.

    Raises `EvaluationError` on any error.
    """
    messages = run_source(toolchain.find(), source, name, options=BUNDLE_OPTIONS)
    return [m for m in messages if not (m.severity == "warning" and USES_SORRY.fullmatch(m.text.strip()))]
