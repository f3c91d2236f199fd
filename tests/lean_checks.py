"""Run the Lean check files of `tests/lean/` (used by `test_lean_checks.py` and by the tests that
read values a check prints).

A check file begins with exactly one line `-- bundle: Mod.A Mod.B ...` naming the library modules
it needs. The offline interpreter cannot run imported code (`lean/KimiK3/Core/README.md`,
"Toolchain constraints"), so the files are evaluated after those modules' sources, bundled with
their dependency closure in dependency order (`codegen.bundle`). All the files of `tests/lean/`
are elaborated in one Lean run, once per process (`run_check_files`): the union of their bundles,
then each file in a `section` of its own, so a file must close the namespaces it opens; each file
gets its own verdict from the errors in its own lines. Any error (a failing `#guard` included)
fails the check. Bundles skip theorem bodies (`codegen.bundle`, `debug.proofAsSorry`), so a check
file states its checks as `#guard`/`#eval`, never as a `theorem`, `lemma` or `example`, and never
uses `sorry` or the build's other forbidden words (`check_statements` refuses them).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from codegen.bundle import EvaluationError, Message, bundle, dependency_order, run_lean
from k3spec.build import USES_SORRY
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


def run_check_file(path: Path) -> tuple[Message, ...]:
    """Elaborate one check file after its bundle; its messages. Raises `CheckFileError`.

    The files of `tests/lean/` are elaborated together, once per process (`run_check_files`);
    any other file alone, after its own bundle."""
    if path.resolve().parent == CHECKS.resolve() and path in check_files():
        result = run_check_files(tuple(check_files()))[path]
        if isinstance(result, CheckFileError):
            raise result
        return result
    return _run_alone(path)


@cache
def _run_alone(path: Path) -> tuple[Message, ...]:
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


@cache
def run_check_files(paths: tuple[Path, ...]) -> dict[Path, tuple[Message, ...] | CheckFileError]:
    """Elaborate the check files `paths` in ONE Lean run: the union of their bundles, then each
    file in a `section` of its own (so its `open`s end with it); each file's messages, with lines
    relative to the file, or the `CheckFileError` naming its first errors.

    Why one run: the files' bundles overlap (most hold `Core`), and elaborating them ten times
    took 3-4 times the CPU of one run (docs/benchmarks-lean.md, "Check files in one run")."""
    for path in paths:
        check_statements(path)
    modules = tuple(dict.fromkeys(m for path in paths for m in bundle_modules(path)))
    try:
        parts = [bundle(REPO, dependency_order(REPO, modules))]
    except EvaluationError as err:
        raise CheckFileError(f"the `{HEADER}` lines of {', '.join(map(_rel, paths))}: {err}") from None
    ranges: dict[Path, tuple[int, int]] = {}
    for path in paths:
        # the new part starts after the lines of the parts before it and their joining newlines;
        # its first line is `section`, the file's first line the next one
        first = 2 + sum(part.count("\n") for part in parts) + len(parts)
        text = path.read_text(encoding="utf-8")
        parts.append(f"section\n{text}\nend\n")
        ranges[path] = (first, first + text.count("\n"))
    source = "\n".join(parts)
    try:
        messages, failed = run_lean(source, "Checks"), None
    except EvaluationError as err:
        messages, failed = err.messages, err

    def in_a_file(line: int) -> bool:
        return any(first <= line <= last for first, last in ranges.values())

    library_errors = [m for m in messages if m.severity == "error" and not in_a_file(m.line)]
    if failed is not None and not library_errors and not any(m.severity == "error" for m in messages):
        library_errors = [Message(0, "error", str(failed))]  # Lean failed without an error message
    results: dict[Path, tuple[Message, ...] | CheckFileError] = {}
    for path, (first, last) in ranges.items():
        mine = [Message(m.line - first + 1, m.severity, m.text) for m in messages if first <= m.line <= last]
        errors = [m for m in mine if m.severity == "error"]
        if errors:
            results[path] = CheckFileError(f"{_rel(path)} failed:\n" + "\n".join(
                f"{_rel(path)}:{m.line}: {m.text}" for m in errors[:5]))
        elif library_errors:
            results[path] = CheckFileError(f"{_rel(path)}: the bundled library failed:\n" + "\n".join(
                f"(bundled library, line {m.line}): {m.text}" for m in library_errors[:5]))
        else:
            results[path] = tuple(m for m in mine if not (m.severity == "warning" and USES_SORRY.fullmatch(m.text.strip())))
    return results


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
