"""`conforms`: one call that checks an implementation of one component in a user's own tests.

    from difftest.adapters.conform import conforms
    conforms("kda_recurrence", "my_pkg.k3:adapter", dtype="float32")   # AssertionError on a mismatch

It runs `difftest run --no-lean --no-pybridge --impl ...` for that component: the NumPy and
graph float64 references, the adapter at each dtype, failing cases shrunk. The assertion message
holds difftest's verdict, the readable diff of every failing case and its shrunk reproducer
(written to `summary.json`, replayable with `difftest replay`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from difftest.adapters import AdapterError, Impl, load
from difftest.compare import DTYPES


def conforms(component: str, impl: str | object, dtype: str | list[str] | None = None, cases: int | None = None,
             seed: int = 0, device: str = "cpu", report_dir: Path | None = None) -> None:
    """Assert that `impl` (an adapter object or spec, `difftest.adapters.load`) computes
    `component` as the spec does at `dtype` (default: every dtype the adapter declares), on
    `cases` cases (default: one of each input kind)."""
    from difftest import report
    from difftest.components import COMPONENTS
    from difftest.runner import run

    adapter: Impl = load(impl)
    if component not in COMPONENTS:
        raise AdapterError(f"unknown component {component!r}; known: {', '.join(COMPONENTS)}")
    if component not in adapter.covered():
        why = adapter.not_covered().get(component, "no attribute of that name")
        raise AdapterError(f"adapter {adapter.name!r} does not implement {component!r}: {why}")
    wanted = [dtype] if isinstance(dtype, str) else list(dtype or adapter.dtypes)
    bad = [d for d in wanted if d not in DTYPES or d not in adapter.dtypes]
    if bad:
        raise AdapterError(f"adapter {adapter.name!r}: dtype(s) {bad} not among those it declares ({', '.join(adapter.dtypes)})")
    result = run([component], cases, seed, wanted, device, use_lean=False, adapters=(adapter,), pybridge=False)
    mine = [c for r in result.results for c in r.comparisons if c.impl == adapter.column]
    if not mine:
        raise AdapterError(f"adapter {adapter.name!r}: no comparison of {component!r} ran at {', '.join(wanted)}")
    if result.passed:
        return
    folder = Path(report_dir) if report_dir is not None else Path(tempfile.mkdtemp(prefix="k3spec-conforms-"))
    json_path, _ = report.write(result, folder)
    failing = [r for r in result.results if not r.passed]
    diffs = "\n".join(report.diff_text(r, result.shrunk.get((r.component, r.case.index))) for r in failing)
    replay = f"python3 -m difftest replay {json_path}" + ("" if ":" in adapter.spec or adapter.spec in _named() else
                                                        " --impl package.module:object")
    raise AssertionError(f"{adapter.name} does not conform to the K3 spec on {component}: {len(failing)} of "
                         f"{len(result.results)} case(s) fail\n{diffs}\nreproducers (shrunk): {json_path}\nreplay: {replay}")


def _named() -> set[str]:
    from difftest.adapters import available

    return set(available())
