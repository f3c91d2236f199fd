"""`difftest run`: cases -> Lean (one batch), exported graphs and the torch model -> comparisons.

Float64 paths (Lean, graph, torch implementations) are compared pairwise under the float64
tolerance; float32/bfloat16 runs of the torch model and graph are compared with the float64
reference (Lean when it ran, else torch float64) under the per-dtype tolerance
(docs/tolerances.md). A failing case is shrunk (smaller sizes, simpler values) and reported
with a reproducer.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from difftest import lean
from difftest.case import Case
from difftest.compare import DTYPES, Comparison, compare, tolerance
from difftest.components import COMPONENTS, Component
from difftest.inputs import simplify

Progress = Callable[[str], None]


@dataclass
class CaseResult:
    component: str
    case: Case
    comparisons: list[Comparison] = field(default_factory=list)
    f64: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # impl -> outputs
    skipped: list[str] = field(default_factory=list)  # implementations pybridge cannot run, with why

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons)

    def failures(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.passed]


@dataclass
class RunResult:
    options: dict
    results: list[CaseResult]
    shrunk: dict[tuple[str, int], CaseResult]
    lean_record: dict
    seconds: float

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)


def _safe(fn: Callable[[], dict], what: str) -> tuple[dict | None, str]:
    try:
        return fn(), ""
    except Exception as exc:  # an implementation that raises is a finding, not a crash
        last = traceback.extract_tb(exc.__traceback__)[-1]
        return None, f"{what} raised {type(exc).__name__}: {exc} ({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"


def evaluate_case(comp: Component, case: Case, dtypes: list[str], device: str,
                  lean_out: dict[str, np.ndarray] | None) -> CaseResult:
    """All implementations of one case and their comparisons."""
    res = CaseResult(comp.name, case)
    exact = set(comp.exact_outputs())
    impls: dict[str, dict[str, np.ndarray]] = {}
    if lean_out is not None:
        impls["lean"] = lean_out

    def raised(dtype: str, impl: str, note: str) -> None:
        res.comparisons.append(Comparison(comp.name, case.index, case.kind, dtype, impl, "-", "*", np.inf, 0.0, False, note=note))

    ref_np, err = _safe(lambda: comp.numpy_outputs(case) or {}, "numpy reference")
    if ref_np:
        impls["numpy"] = ref_np
    elif err:
        raised("float64", "numpy", err)
    if comp.graph_available(case):
        out, err = _safe(lambda: comp.graph_outputs(case, torch.float64, device), "graph (float64)")
        if out is None:
            raised("float64", "graph", err)
        else:
            impls["graph"] = out
    out, err = _safe(lambda: comp.torch_outputs(case, torch.float64, device), "torch (float64)")
    if out is None:
        raised("float64", "torch", err)
    else:
        impls.update(out)
    res.f64 = impls
    tol64 = tolerance(comp.error_model(case.sizes), "float64")
    names = list(impls)
    if "float64" in dtypes:
        for j, impl in enumerate(names):
            for ref in names[:j]:
                for output in sorted(set(impls[impl]) & set(impls[ref])):
                    res.comparisons.append(compare(comp.name, case.index, case.kind, "float64", impl, ref, output,
                                                   impls[impl][output], impls[ref][output], tol64, output in exact))
    ref_name = next((n for n in ("lean", "numpy") if n in impls), None) or next((n for n in names if n.startswith("torch")), None)
    for dtype in dtypes:
        if dtype == "float64" or ref_name is None:
            continue
        tol = tolerance(comp.error_model(case.sizes), dtype)
        for (impl, d, dev), why in comp.unsupported.items():
            if d == dtype and dev == str(device).split(":")[0]:
                res.skipped.append(f"{impl} at {dtype} on {dev}: {why}")
        low: dict[str, dict[str, np.ndarray]] = {}
        out, err = _safe(lambda d=DTYPES[dtype]: comp.torch_outputs(case, d, device), f"torch ({dtype})")
        if out is None:
            raised(dtype, "torch", err)
        else:
            low.update(out)
        if comp.graph_available(case):
            gout, err = _safe(lambda d=DTYPES[dtype]: comp.graph_outputs(case, d, device), f"graph ({dtype})")
            if gout is None:
                raised(dtype, "graph", err)
            else:
                low["graph"] = gout
        for impl, got in low.items():
            want, note = comp.lowp_reference(case, got, impls[ref_name], dtype)
            for output in sorted(set(got) & set(want)):
                c = compare(comp.name, case.index, case.kind, dtype, impl, ref_name, output, got[output], want[output],
                            tol, output in exact)
                c.note = c.note or note
                res.comparisons.append(c)
    return res


def build_cases(names: list[str], cases: int, seed: int) -> list[tuple[Component, Case]]:
    items = []
    for name in names:
        comp = COMPONENTS[name]
        for i in range(cases):
            items.append((comp, comp.make_case(i, comp.kinds[i % len(comp.kinds)], seed)))
    return items


def shrink_candidates(comp: Component, case: Case) -> list[Case]:
    """Smaller and simpler variants of a case, most reduced first (the same kind, seed and index)."""
    out = []
    for sizes in [*comp.shrink_sizes(case.sizes), case.sizes]:
        base = comp.make_case(case.index, case.kind, case.seed, sizes)
        for level in (2, 1, 0):
            if sizes == case.sizes and level == 0:
                continue
            tensors = {k: simplify(v, level) for k, v in base.tensors.items()}
            out.append(Case(comp.name, case.index, case.kind, case.seed, dict(sizes), tensors, level))
    return out


def run(components: list[str], cases: int = 4, seed: int = 0, dtypes: list[str] = ("float64", "float32", "bfloat16"),
        device: str = "cpu", use_lean: bool = True, use_cache: bool = True, shrink: bool = True,
        lean_cases: int | None = None, lean_all: bool = True, progress: Progress = lambda s: None) -> RunResult:
    """Run the differential test. Lean evaluates the first `lean_cases` cases (all when None) of
    each component (only of those with `lean_default` unless `lean_all`; never of those without a
    Lean template); the other cases are checked against the graph and NumPy references."""
    start = time.monotonic()
    torch.set_num_threads(1)  # tiny tensors: threads only add contention
    dtypes = list(dtypes)
    items = build_cases(components, cases, seed)
    progress(f"difftest: {len(items)} case(s) of {', '.join(components)}; dtypes {', '.join(dtypes)}; device {device}")
    lean_outs: list = [None] * len(items)
    record = {"cached": 0, "ran": 0, "seconds": 0.0, "used": use_lean}
    if use_lean:
        chosen = [i for i, (comp, case) in enumerate(items)
                  if (lean_cases is None or case.index < lean_cases) and (lean_all or comp.lean_default) and comp.template]
        outs, rec = lean.evaluate([items[i] for i in chosen], use_cache, progress)
        for i, out in zip(chosen, outs):
            lean_outs[i] = out
        record.update(rec)
    results = []
    for (comp, case), lo in zip(items, lean_outs):
        r = evaluate_case(comp, case, dtypes, device, lo)
        worst = max((c.ratio for c in r.comparisons if c.tol > 0), default=0.0)
        progress(f"  {case.label}: {'ok' if r.passed else 'FAIL'} ({len(r.comparisons)} comparisons, worst error/tolerance {worst:.2g})")
        results.append(r)
    shrunk: dict[tuple[str, int], CaseResult] = {}
    failed = [r for r in results if not r.passed]
    if shrink and failed:
        shrunk = shrink_failures(failed, dtypes, device, use_lean, use_cache, progress)
    return RunResult(
        {"components": components, "cases": cases, "seed": seed, "dtypes": dtypes, "device": device,
         "lean": use_lean, "lean_cases": lean_cases, "lean_all": lean_all, "cache": use_cache, "shrink": shrink},
        results, shrunk, record, round(time.monotonic() - start, 1),
    )


def shrink_failures(failed: list[CaseResult], dtypes: list[str], device: str, use_lean: bool, use_cache: bool,
                    progress: Progress) -> dict[tuple[str, int], CaseResult]:
    """For each failing case, the most reduced candidate that still fails the same way (one Lean
    batch for all candidates)."""
    plan = []
    for r in failed:
        comp = COMPONENTS[r.component]
        # Lean is rerun for the candidates only when no other reference shows the failure
        needs_lean = bool(comp.template) and not any(c.ref in ("graph", "numpy") or c.impl in ("graph", "numpy")
                                                     for c in r.failures())
        signature = {(c.dtype, c.impl) for c in r.failures()}
        for cand in shrink_candidates(comp, r.case):
            plan.append((r, comp, cand, signature, needs_lean))
    progress(f"shrinking {len(failed)} failing case(s): {len(plan)} candidate(s)")
    lean_outs: list = [None] * len(plan)
    chosen = [i for i, p in enumerate(plan) if p[4]]
    if use_lean and chosen:
        outs, _ = lean.evaluate([(plan[i][1], plan[i][2]) for i in chosen], use_cache, progress)
        for i, out in zip(chosen, outs):
            lean_outs[i] = out
    best: dict[tuple[str, int], CaseResult] = {}
    for (r, comp, cand, signature, _), lo in zip(plan, lean_outs):
        key = (r.component, r.case.index)
        if key in best:
            continue
        cr = evaluate_case(comp, cand, sorted({d for d, _ in signature}), device, lo)
        if any((c.dtype, c.impl) in signature for c in cr.failures()):
            best[key] = cr
            progress(f"  {r.case.label} shrinks to {cand.label}")
    return best
