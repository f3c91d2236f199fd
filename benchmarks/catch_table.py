"""The catch table of issue 16: every planted bug of the mutation suite through the default run.

    python benchmarks/catch_table.py --write docs/catch-table.md

Each test of `tests/test_difftest_mutations.py` is called as pytest would call it (a fresh
`pytest.MonkeyPatch`, the compiled-graph cache cleared before and after, as its autouse fixture
does), so the bugs are the suite's own code and injections, not copies. The suite's
`default_run` (`difftest run --component C --no-lean`: one case of every input kind, float64,
float32 and bfloat16, seed 0, no shrinking) is wrapped to keep each run's comparisons; a test
that calls the suite's `passes` is an equivalence control. Per bug: the legs whose comparisons
failed, the worst error/tolerance ratio among them, and whether the run caught it (a failing
comparison against a reference independent of the torch model: lean, graph or numpy, as
`flagged` requires); the test's own further assertions are reported beside it. Then every
component's default run without any bug, for the tolerances the run computes. Not a test:
nothing here asserts; the mutation suite does.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

STARTED = time.monotonic()
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import test_difftest_mutations as suite  # noqa: E402  (the planted bugs, from the test suite)

from difftest.compare import Comparison  # noqa: E402
from difftest.components import COMPONENTS, base  # noqa: E402
from difftest.runner import RunResult  # noqa: E402

INDEPENDENT = ("lean", "graph", "numpy")
DTYPE_TAGS = {"float64": "f64", "float32": "f32", "bfloat16": "bf16"}
SECTION = re.compile(r"^# --- (.+?) -+$")


@dataclass
class Outcome:
    """One test of the suite: the runs it made and how its own assertions ended."""

    name: str
    description: str
    group: str
    control: bool = False
    runs: list[tuple[str, RunResult]] = field(default_factory=list)
    test_error: str = ""  # "" when the test's assertions held
    seconds: float = 0.0

    @property
    def components(self) -> str:
        return ", ".join(dict.fromkeys(c for c, _ in self.runs)) or "–"

    @property
    def comparisons(self) -> list[Comparison]:
        return [c for _, r in self.runs for res in r.results for c in res.comparisons]

    @property
    def failures(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.passed]

    @property
    def caught(self) -> bool:
        return any(c.ref in INDEPENDENT or c.impl in INDEPENDENT for c in self.failures)


def groups(source: list[str]) -> list[tuple[int, str]]:
    """(line number, title) of the suite's `# --- title ---` section comments."""
    return [(i + 1, m.group(1)) for i, line in enumerate(source) if (m := SECTION.match(line))]


def describe(name: str, fn: Callable) -> str:
    """The test's name in words, and the first paragraph of its docstring where it has one."""
    words = re.sub(r"_(is|are)(_not)?_flagged$", "", name.removeprefix("test_")).replace("_", " ")
    doc = inspect.getdoc(fn)
    if not doc:
        return words
    first = " ".join(doc.split("\n\n")[0].split())
    return f"{words} ({first.rstrip('.')})"


def first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return lines[0][:160] if lines else ""


def suite_tests() -> list[tuple[str, Callable, str]]:
    """(name, function, section title) of every test in the suite, in file order."""
    source = Path(suite.__file__).read_text(encoding="utf-8").splitlines()
    sections = groups(source)
    out = []
    for name, fn in vars(suite).items():
        if not (name.startswith("test_") and inspect.isfunction(fn)):
            continue
        params = list(inspect.signature(fn).parameters)
        if params != ["monkeypatch"]:
            raise SystemExit(f"{suite.__file__}: {name} takes {params}; this script provides only `monkeypatch`")
        line = inspect.getsourcelines(fn)[1]
        out.append((name, fn, next((t for n, t in reversed(sections) if n < line), "")))
    return out


def run_test(name: str, fn: Callable, group: str) -> Outcome:
    """Call one test with its own monkeypatches; record every default run it makes."""
    outcome = Outcome(name, describe(name, fn), group)
    default_run, passes = suite.default_run, suite.passes

    def recording_run(component: str) -> RunResult:
        result = default_run(component)
        outcome.runs.append((component, result))
        return result

    def recording_passes(component: str) -> None:
        outcome.control = True
        passes(component)

    mp = pytest.MonkeyPatch()
    mp.setattr(suite, "default_run", recording_run)
    mp.setattr(suite, "passes", recording_passes)
    base.compiled.cache_clear()
    start = time.monotonic()
    try:
        fn(mp)
    except AssertionError as exc:
        outcome.test_error = f"assertion failed: {first_line(exc) or 'assert'}"
    except Exception as exc:  # a crash of the test itself is reported, not raised
        outcome.test_error = f"{type(exc).__name__}: {first_line(exc)}"
    finally:
        mp.undo()
        base.compiled.cache_clear()
    outcome.seconds = time.monotonic() - start
    return outcome


# --- formatting --------------------------------------------------------------------------------

def ratio_text(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.3g}"


def legs(failures: list[Comparison]) -> str:
    """`impl vs ref (dtypes)` per failing pair of legs (`impl raised`: the leg raised)."""
    pairs: dict[tuple[str, str], set[str]] = {}
    for c in failures:
        pairs.setdefault((c.impl, c.ref), set()).add(c.dtype)
    order = list(DTYPE_TAGS)
    return "; ".join(f"{impl} {'raised' if ref == '-' else 'vs ' + ref} "
                     f"({', '.join(DTYPE_TAGS[d] for d in sorted(ds, key=order.index))})" for (impl, ref), ds in pairs.items())


def worst(failures: list[Comparison]) -> str:
    """The largest error/tolerance ratio among the failures; failures without a finite ratio
    (a leg that raised, exact outputs that differ, non-finite values or a wrong shape) are
    counted beside it."""
    finite = [c.ratio for c in failures if c.tol > 0 and math.isfinite(c.ratio)]
    counts = {"leg(s) raised": 0, "exact output(s) differ": 0, "NaN/Inf or wrong shape": 0}
    for c in failures:
        if c.ref == "-":
            counts["leg(s) raised"] += 1
        elif c.tol == 0:
            counts["exact output(s) differ"] += 1
        elif not math.isfinite(c.ratio):
            counts["NaN/Inf or wrong shape"] += 1
    parts = ([ratio_text(max(finite))] if finite else []) + [f"{n} {what}" for what, n in counts.items() if n]
    return "; ".join(parts) or "–"


def worst_ratio(comparisons: list[Comparison]) -> float:
    return max((c.ratio for c in comparisons), default=0.0)


def kinds(failures: list[Comparison]) -> str:
    return ", ".join(dict.fromkeys(c.kind for c in failures)) or "–"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def bug_table(bugs: list[Outcome]) -> list[str]:
    rows = ["| # | planted bug | section | component | caught | legs that flagged it (impl vs reference) | kinds flagged "
            "| worst error/tolerance | failing / all comparisons | test's own assertions | s |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, b in enumerate(bugs, 1):
        f = b.failures
        rows.append(f"| {i} | {cell(b.description)} | {b.group} | {b.components} | {'yes' if b.caught else '**NO**'} "
                    f"| {cell(legs(f)) or '–'} | {kinds(f)} | {cell(worst(f))} | {len(f)} / {len(b.comparisons)} "
                    f"| {'hold' if not b.test_error else cell(b.test_error)} | {b.seconds:.1f} |")
    return rows


def control_table(controls: list[Outcome]) -> list[str]:
    rows = ["| control (an equivalent rewrite) | component | flagged | worst error/tolerance (must be < 1) "
            "| comparisons | test's own assertions | s |", "|---|---|---|---|---|---|---|"]
    for c in controls:
        rows.append(f"| {cell(c.description)} | {c.components} | {'**YES**' if c.failures else 'no'} "
                    f"| {ratio_text(worst_ratio(c.comparisons))} | {len(c.comparisons)} "
                    f"| {'hold' if not c.test_error else cell(c.test_error)} | {c.seconds:.1f} |")
    return rows


def tol_range(tols: list[float]) -> str:
    if not tols:
        return "–"
    lo, hi = f"{min(tols):.2e}", f"{max(tols):.2e}"
    return lo if lo == hi else f"{lo} – {hi}"


def tolerance_table(clean: dict[str, RunResult]) -> list[str]:
    """Per component and dtype, the range of the tolerances its default run computes."""
    rows = ["| component | float64 tolerance | float32 tolerance | bfloat16 tolerance | comparisons "
            "(+ exact) | worst error/tolerance | passed | s |", "|---|---|---|---|---|---|---|---|"]
    for name, r in clean.items():
        comps = [c for res in r.results for c in res.comparisons]
        ranges = [tol_range([c.tol for c in comps if c.dtype == dtype and c.tol > 0]) for dtype in DTYPE_TAGS]
        n_tol, n_exact = sum(1 for c in comps if c.tol > 0), sum(1 for c in comps if c.tol == 0)
        rows.append(f"| {name} | {' | '.join(ranges)} | {n_tol} (+ {n_exact}) | {ratio_text(worst_ratio(comps))} "
                    f"| {'yes' if r.passed else '**NO**'} | {r.seconds:.1f} |")
    return rows


def output_tolerance_table(clean: dict[str, RunResult]) -> list[str]:
    """Per component and output (the decoder's layer prefix `L<i>.` folded), the float32 and
    bfloat16 tolerance ranges and the worst error/tolerance at each."""
    rows = ["| component | output | float32 tolerance | worst f32 error/tolerance | bfloat16 tolerance "
            "| worst bf16 error/tolerance |", "|---|---|---|---|---|---|"]
    for name, r in clean.items():
        by_output: dict[str, list[Comparison]] = {}
        for c in (c for res in r.results for c in res.comparisons if c.dtype != "float64"):
            by_output.setdefault(re.sub(r"^L\d+\.", "L*.", c.output), []).append(c)
        for output, comps in by_output.items():
            cells = []
            for dtype in ("float32", "bfloat16"):
                at = [c for c in comps if c.dtype == dtype]
                exact = at and all(c.tol == 0 for c in at)
                cells += ["exact" if exact else tol_range([c.tol for c in at if c.tol > 0]),
                          ratio_text(worst_ratio(at)) if at else "–"]
            rows.append(f"| {name} | {output} | {' | '.join(cells)} |")
    return rows


def report(bugs: list[Outcome], controls: list[Outcome], clean: dict[str, RunResult], wall: float) -> str:
    caught = sum(b.caught for b in bugs)
    missed = [b for b in bugs if not b.caught]
    worst_control = max((worst_ratio(c.comparisons) for c in controls), default=0.0)
    closest = min((b for b in bugs if b.caught), key=lambda b: worst_ratio(b.failures), default=None)
    lines = [
        "# Catch table: the planted bugs of the mutation suite (issue 16)",
        "",
        "Produced by `python benchmarks/catch_table.py --write docs/catch-table.md` (one run; regenerate with",
        "that command). Each planted bug of `tests/test_difftest_mutations.py` (the suite's own code and",
        "monkeypatches, called as pytest calls the test) goes through the default run of its component",
        "without the Lean leg, `difftest run --component C --no-lean`: one case of every input kind, at",
        "float64, float32 and bfloat16, seed 0, no shrinking. A bug is *caught* when a failing comparison",
        "involves a leg independent of the torch model (lean, graph or numpy, on either side; a reference",
        "leg that raised counts), as the suite's `flagged` requires; the test's further assertions (which",
        "leg, which kind, which dtype) are shown beside it.",
        "Errors are those of `docs/tolerances.md`: normwise relative at float64, relative 2-norm per stage at",
        "float32/bfloat16; routes are compared exactly (no ratio).",
        "",
        (f"Wall time of this run: {wall:.0f} s ({len(bugs)} bugs, {len(controls)} controls, and the"
         f" default run of the {len(clean)} components without a bug, {sum(r.seconds for r in clean.values()):.0f} s"
         f" of it); machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, 1-min load"
         f" average at the end {os.getloadavg()[0]:.1f}."),
        "",
        (f"**{caught} of {len(bugs)} planted bugs caught**, {len(missed)} not caught"
         + (f" ({', '.join(b.name for b in missed)})" if missed else "")
         + f"; {len(controls)} equivalence controls, "
         + f"{sum(1 for c in controls if c.failures)} flagged, worst control error/tolerance {ratio_text(worst_control)}."
         + (f" The narrowest catch: {closest.description}, worst error/tolerance {ratio_text(worst_ratio(closest.failures))}."
            if closest else "")),
        "",
        "## Planted bugs",
        "",
        *bug_table(bugs),
        "",
        "## Equivalence controls (must not be flagged)",
        "",
        *control_table(controls),
        "",
        "## Tolerances per component, as the default run computes them",
        "",
        "The range over every comparison of the component's default run without a bug (min – max over its",
        "stages, outputs and case kinds; each from the stage's error model, `difftest/compare.py`); the",
        "worst error/tolerance of that run and its wall time. A bfloat16 tolerance below 1 is what lets",
        "the check fail an all-zero output (error 1).",
        "",
        *tolerance_table(clean),
        "",
        "Per output at float32 and bfloat16 (the decoder step's layers folded into `L*.`; `exact`: routes):",
        "",
        *output_tolerance_table(clean),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", type=Path, help="write the table to this markdown file (e.g. docs/catch-table.md)")
    ap.add_argument("-k", dest="only", help="only the tests whose name contains this (a partial table)")
    args = ap.parse_args()
    tests = [t for t in suite_tests() if args.only is None or args.only in t[0]]
    outcomes = []
    for i, (name, fn, group) in enumerate(tests, 1):
        print(f"[{i}/{len(tests)}] {name} ...", file=sys.stderr, flush=True)
        o = run_test(name, fn, group)
        verdict = ("control, " + ("FLAGGED" if o.failures else "not flagged")) if o.control else (
            "caught" if o.caught else "NOT CAUGHT")
        print(f"[{i}/{len(tests)}] {name}: {o.components}: {verdict}, worst error/tolerance "
              f"{ratio_text(worst_ratio(o.failures if not o.control else o.comparisons))}"
              f"{'; test: ' + o.test_error if o.test_error else ''} ({o.seconds:.1f} s)", file=sys.stderr, flush=True)
        outcomes.append(o)
    clean = {}
    for name in COMPONENTS:
        print(f"[clean] {name} ...", file=sys.stderr, flush=True)
        base.compiled.cache_clear()
        clean[name] = suite.default_run(name)
        print(f"[clean] {name}: {'passed' if clean[name].passed else 'FAILED'} ({clean[name].seconds:.1f} s)",
              file=sys.stderr, flush=True)
    text = report([o for o in outcomes if not o.control], [o for o in outcomes if o.control], clean,
                  time.monotonic() - STARTED)
    print(text)
    if args.write:
        args.write.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
