"""Run the Lean check files of `tests/lean/` (used by `test_lean_checks.py` and by the tests that
read values a check prints).

A check file begins with exactly one line `-- bundle: Mod.A Mod.B ...` naming the library modules
it needs. The offline interpreter cannot run imported code (`lean/KimiK3/Core/README.md`,
"Toolchain constraints"), so the file is appended to those modules' sources, bundled with their
dependency closure in dependency order (`codegen.bundle`), and elaborated as one file; any error
(a failing `#guard` included) fails the check. Bundles skip theorem bodies (`codegen.bundle`,
`debug.proofAsSorry`), so a check file states its checks as `#guard`/`#eval`, never as a
`theorem`, `lemma` or `example`, and never uses `sorry` or the build's other forbidden words
(`check_statements` refuses them).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from codegen.bundle import EvaluationError, Message, bundle, dependency_order, run_lean
from k3spec.sources import blank_comments_and_strings, forbidden_uses

REPO = Path(__file__).resolve().parents[1]
CHECKS = REPO / "tests" / "lean"
HEADER = "-- bundle:"
#: Declarations whose proofs a bundle would skip.
_PROOF_DECL = re.compile(r"^\s*(?:@\[[^\]]*\]\s*)?(?:private\s+)?(theorem|lemma|example)\b")


class CheckFileError(RuntimeError):
    """A check file is malformed, or Lean reported an error in it (the message names the file)."""


def check_files() -> list[Path]:
    """Every check file, by name."""
    return sorted(CHECKS.glob("*.lean"))


def bundle_modules(path: Path) -> tuple[str, ...]:
    """The library modules named by the file's `-- bundle:` header line."""
    rel = _rel(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith(HEADER):
        raise CheckFileError(f"{rel}:1: the first line must be `{HEADER} Mod.A Mod.B ...` (the library modules it needs)")
    if any(line.startswith(HEADER) for line in lines[1:]):
        raise CheckFileError(f"{rel}: only the first line may be a `{HEADER}` line")
    modules = tuple(lines[0][len(HEADER):].split())
    if not modules:
        raise CheckFileError(f"{rel}:1: the `{HEADER}` line names no module")
    return modules


def check_statements(path: Path) -> None:
    """Refuse a `theorem`, `lemma` or `example`, and the build's forbidden words (`sorry`, `admit`,
    `axiom`, `native_decide`: `k3spec.sources.forbidden_uses`), in a check file's code (see the
    module docstring)."""
    text = path.read_text(encoding="utf-8")
    found = [(n, m.group(1)) for n, line in enumerate(blank_comments_and_strings(text).splitlines(), start=1)
             if (m := _PROOF_DECL.match(line))]
    found += [(n, word) for n, _, word in forbidden_uses(text)]
    if found:
        number, word = min(found)
        raise CheckFileError(
            f"{_rel(path)}:{number}: `{word}` in a check file: bundles skip theorem bodies, so state the check as `#guard`"
        )


@cache
def run_check_file(path: Path) -> tuple[Message, ...]:
    """Elaborate one check file after its bundle; its messages. Raises `CheckFileError`."""
    rel = _rel(path)
    check_statements(path)
    modules = bundle_modules(path)
    try:
        library = bundle(REPO, dependency_order(REPO, modules))
    except EvaluationError as err:
        raise CheckFileError(f"{rel}:1: `{HEADER}`: {err}") from None
    source = library + "\n" + path.read_text(encoding="utf-8")
    offset = library.count("\n") + 1  # bundle line of the check file's first line, minus one
    try:
        return tuple(run_lean(source, path.stem))
    except EvaluationError as err:
        raise CheckFileError(f"{rel} failed:\n{_relocate(str(err), path.stem, offset, rel)}") from None


def _relocate(text: str, stem: str, offset: int, rel: str) -> str:
    """Lean's `STEM.lean:LINE:` positions as positions in the check file (or in the bundle)."""

    def fix(m: re.Match) -> str:
        line = int(m.group(1))
        return f"{rel}:{line - offset}:" if line > offset else f"(bundled library, line {line}):"

    return re.sub(rf"{re.escape(stem)}\.lean:(\d+):", fix, text)


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)
