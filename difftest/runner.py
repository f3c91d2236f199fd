"""`difftest run`: cases -> Lean (one batch), exported graphs, NumPy reference and the torch model
-> comparisons.

float64 legs (Lean, graph, NumPy, torch implementations) are compared pairwise under the
float64 tolerance; the Lean leg evaluates `Component.lean_case` and is compared with
`lean_slice` of the others. float32/bfloat16: each stage of the run is compared with the float64
NumPy reference (or graph) on the same rounded inputs (`Component.lowp_checks`), never with the
torch model under test, under the per-dtype tolerance (docs/tolerances.md). A failing case is
shrunk (smaller sizes, simpler values) and reported with a reproducer.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from difftest import lean
from difftest.adapters import Impl, legs
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
    info: dict[str, dict[str, float]] = field(default_factory=dict)  # dtype -> whole-model figures
    #: the Lean route checks of the case (components with `route_checks`): how many staged routes
    #: Lean checked and rejected, how many it did not check and why, and a note for people
    routes: dict = field(default_factory=dict)

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


def _safe(fn: Callable[[], object], what: str) -> tuple[object | None, str]:
    try:
        return fn(), ""
    except Exception as exc:  # an implementation that raises is a finding, not a crash
        last = traceback.extract_tb(exc.__traceback__)[-1]
        return None, f"{what} raised {type(exc).__name__}: {exc} ({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"


def evaluate_case(comp: Component, case: Case, dtypes: list[str], device: str,
                  lean_out: dict[str, np.ndarray] | None, adapters: tuple[Impl, ...] = (),
                  pybridge: bool = True, lean_why_not: str = "no Lean evaluation") -> CaseResult:
    """All legs of one case and their comparisons; each adapter covering `comp` is one more leg
    (its column `impl:<name>`, `difftest.adapters.legs`); `pybridge` False leaves out the torch
    model's legs (an adapter check: the NumPy, graph and Lean legs stay). A component with
    `route_checks` (decoder_step) adds the Lean route checks' verdicts; `lean_why_not` says why
    there are none when `lean_out` is None."""
    res = CaseResult(comp.name, case)
    exact = set(comp.exact_outputs())

    def raised(dtype: str, impl: str, note: str) -> None:
        res.comparisons.append(Comparison(comp.name, case.index, case.kind, dtype, impl, "-", "*", np.inf, 0.0, False, note=note))

    impls: dict[str, dict[str, np.ndarray]] = {}
    out, err = _safe(lambda: comp.numpy_outputs(case), "numpy reference")
    if out:
        impls["numpy"] = out
    elif err:
        raised("float64", "numpy", err)
    if comp.graph_available(case):
        out, err = _safe(lambda: comp.graph_outputs(case, device), "graph (float64)")
        if out is None:
            raised("float64", "graph", err)
        else:
            impls["graph"] = out
    if pybridge or getattr(comp, "spec_is_pybridge", False):  # a variant whose spec leg is pybridge's
        out, err = _safe(lambda: comp.torch_outputs(case, torch.float64, device), "torch (float64)")
        if out is None:
            raised("float64", "torch", err)
        else:
            impls.update(out)
    covering = [a for a in adapters if comp.name in a.covered()]
    for a in covering:
        if "float64" not in a.dtypes or "float64" not in dtypes:
            continue
        out, err = _safe(lambda a=a: legs.call_impl(a, comp, case, torch.float64, device, set(impls.get("numpy", ()))),
                         f"{a.column} (float64)")
        if out is None:
            raised("float64", a.column, err)
        else:
            impls[a.column] = out
    res.f64 = dict(impls)
    tol64 = tolerance(comp.error_model(case.sizes), "float64")
    if "float64" in dtypes:
        names = list(impls)
        for j, impl in enumerate(names):
            for ref in names[:j]:
                for output in sorted(set(impls[impl]) & set(impls[ref])):
                    res.comparisons.append(compare(comp.name, case.index, case.kind, "float64", impl, ref, output,
                                                   impls[impl][output], impls[ref][output], tol64, output in exact))
        if lean_out is not None:
            res.f64["lean"] = lean_out
            for ref in names:
                sliced = comp.lean_slice(case, impls[ref])
                for output in sorted(set(lean_out) & set(sliced)):
                    res.comparisons.append(compare(comp.name, case.index, case.kind, "float64", "lean", ref, output,
                                                   lean_out[output], sliced[output], tol64, output in exact))
        checker = getattr(comp, "route_checks", None)
        if checker is not None:
            rows, res.routes = checker(case, lean_out, impls, lean_why_not)
            res.comparisons.extend(rows)
        bounds, err = _safe(lambda: comp.bound_checks(case, res.f64), "bound check")
        if bounds is None:
            raised("float64", "bound", err)
        else:
            res.comparisons += bounds
    for dtype in dtypes:
        if dtype == "float64":
            continue
        checks, err = _safe(lambda d=DTYPES[dtype]: comp.lowp_checks(case, d, device) if pybridge else [], f"{dtype} run")
        if checks is None:
            raised(dtype, "torch", err)
            continue
        for chk in checks:
            c = compare(comp.name, case.index, case.kind, dtype, chk.impl, chk.ref, chk.output, chk.got, chk.want,
                        tolerance(chk.model, dtype), chk.exact, metric="l2")
            c.note = c.note or chk.note
            res.comparisons.append(c)
        for a in covering:
            if dtype not in a.dtypes:
                continue
            checks, err = _safe(lambda d=DTYPES[dtype], a=a: legs.lowp_checks(a, comp, case, d, device), f"{a.column} ({dtype})")
            if checks is None:
                raised(dtype, a.column, err)
                continue
            for chk in checks:
                res.comparisons.append(compare(comp.name, case.index, case.kind, dtype, chk.impl, chk.ref, chk.output,
                                               chk.got, chk.want, tolerance(chk.model, dtype), chk.exact, metric="l2"))
        info = getattr(comp, "info", None) if pybridge else None
        if info is not None:
            figures, err = _safe(lambda d=DTYPES[dtype]: info(case, d, device), f"{dtype} whole-model figures")
            res.info[dtype] = figures if figures is not None else {"error": err}
    return res


def default_cases(comp: Component, thorough: bool = False) -> int:
    """One case of every kind (three with `--thorough`)."""
    return len(comp.kinds) * (3 if thorough else 1)


def build_cases(names: list[str], cases: int | None, seed: int, thorough: bool = False) -> list[tuple[Component, Case]]:
    """Case i of a component has its kind number i (cycling), so the first len(kinds) cases
    cover every kind; `cases` None: `default_cases`."""
    items = []
    for name in names:
        comp = COMPONENTS[name]
        kinds = list(comp.kinds)
        for i in range(default_cases(comp, thorough) if cases is None else cases):
            items.append((comp, comp.make_case(i, kinds[i % len(kinds)], seed, thorough=thorough)))
    return items


def shrink_candidates(comp: Component, case: Case) -> list[Case]:
    """Smaller and simpler variants of a case, most reduced first (the same kind, seed and index)."""
    out = []
    for sizes in [*comp.shrink_sizes(case.sizes), case.sizes]:
        base = comp.make_case(case.index, case.kind, case.seed, sizes)
        for level in (2, 1, 0):
            if sizes == case.sizes and level == 0:
                continue
            tensors = {k: simplify(v, level) if k not in ("ids", "model_seed", "router_ties") else v for k, v in base.tensors.items()}
            out.append(Case(comp.name, case.index, case.kind, case.seed, dict(sizes), tensors, level))
    return out


#: why the Lean leg did not evaluate a case (the summary's `lean.skipped` keys)
NO_TEMPLATE, NOT_DEFAULT, KIND_SKIPPED, BEYOND_CASES, NO_LEAN = (
    "no template", "not in the default run (--lean-all)", "kind skipped (--lean-all)", "beyond --lean-cases", "--no-lean")


def lean_plan(items: list[tuple[Component, Case]], lean_cases: int | None,
              lean_all: bool) -> list[tuple[Case | None, str]]:
    """Per item: (the Lean leg's view, "") when Lean evaluates it, else (None, why not). Per
    component the first `lean_cases` (all when None) of its cases, of the components with
    `lean_default` and without the kinds in `lean_skip_kinds` unless `lean_all`."""
    taken: dict[str, int] = {}
    plan: list[tuple[Case | None, str]] = []
    for comp, case in items:
        view = comp.lean_case(case) if comp.template else None
        if view is None:
            reason = comp.lean_why_not or NO_TEMPLATE
        elif not lean_all and not comp.lean_default:
            reason = NOT_DEFAULT + (f": {comp.lean_note}" if comp.lean_note else "")
        elif not lean_all and case.kind in comp.lean_skip_kinds:
            reason = KIND_SKIPPED
        elif lean_cases is not None and taken.get(comp.name, 0) >= lean_cases:
            reason = BEYOND_CASES
        else:
            taken[comp.name] = taken.get(comp.name, 0) + 1
            reason = ""
        plan.append((None if reason else view, reason))
    return plan


def lean_chosen(items: list[tuple[Component, Case]], lean_cases: int | None,
                lean_all: bool) -> list[tuple[int, Component, Case]]:
    """(position, component, view) of the items Lean evaluates (`lean_plan`)."""
    return _chosen(items, lean_plan(items, lean_cases, lean_all))


def _chosen(items: list[tuple[Component, Case]], plan: list[tuple[Case | None, str]]) -> list[tuple[int, Component, Case]]:
    return [(i, items[i][0], view) for i, (view, _) in enumerate(plan) if view is not None]


def route_counts(results: list[CaseResult]) -> dict[str, dict]:
    """Per component with route checks: the staged routes Lean checked and rejected, and those
    it did not check, by reason (`CaseResult.routes`)."""
    counts: dict[str, dict] = {}
    for r in results:
        if not r.routes:
            continue
        c = counts.setdefault(r.component, {"checked": 0, "rejected": 0, "unchecked": {}})
        c["checked"] += r.routes["checked"]
        c["rejected"] += r.routes["rejected"]
        if r.routes["unchecked"]:
            why = r.routes["why"]
            c["unchecked"][why] = c["unchecked"].get(why, 0) + r.routes["unchecked"]
    return counts


def lean_counts(items: list[tuple[Component, Case]], status: list[str]) -> dict[str, dict]:
    """Per component: how many cases the Lean leg evaluated, took from the cache, and skipped
    (by reason); `status` per item: "evaluated", "cached" or the reason it was skipped."""
    counts: dict[str, dict] = {}
    for (comp, _), st in zip(items, status):
        c = counts.setdefault(comp.name, {"evaluated": 0, "cached": 0, "skipped": {}})
        if st in ("evaluated", "cached"):
            c[st] += 1
        else:
            c["skipped"][st] = c["skipped"].get(st, 0) + 1
    return counts


def run(components: list[str], cases: int | None = None, seed: int = 0,
        dtypes: list[str] = ("float64", "float32", "bfloat16"), device: str = "cpu", use_lean: bool = True,
        use_cache: bool = True, shrink: bool = True, lean_cases: int | None = None, lean_all: bool = True,
        thorough: bool = False, progress: Progress = lambda s: None, adapters: tuple[Impl, ...] = (),
        pybridge: bool = True) -> RunResult:
    """Run the differential test; each of `adapters` is a further leg of the components it
    covers (`pybridge` False: without the torch model's legs). Lean evaluates the cases
    `lean_chosen` picks (never of components without a Lean template); the other cases are
    checked against the graph and NumPy references."""
    start = time.monotonic()
    torch.set_num_threads(1)  # tiny tensors: threads only add contention
    dtypes = list(dtypes)
    items = build_cases(components, cases, seed, thorough)
    progress(f"difftest: {len(items)} case(s) of {', '.join(components)}; dtypes {', '.join(dtypes)}; device {device}")
    lean_outs: list = [None] * len(items)
    record = {"cached": 0, "ran": 0, "seconds": 0.0, "used": use_lean}
    status = [NO_LEAN if lean_cases != 0 else "--lean-cases 0"] * len(items)
    # a variant without any Lean leg says so even without Lean (not "--no-lean")
    status = [comp.lean_why_not if getattr(comp, "spec_is_pybridge", False) and comp.lean_why_not else st
              for (comp, _), st in zip(items, status)]
    if use_lean:
        plan = lean_plan(items, lean_cases, lean_all)
        chosen = _chosen(items, plan)
        status = [reason for _, reason in plan]
        outs, rec = lean.evaluate([(comp, view) for _, comp, view in chosen], use_cache, progress)
        for (i, _, _), out, cached in zip(chosen, outs, rec.pop("from_cache")):
            lean_outs[i] = out
            status[i] = "cached" if cached else "evaluated"
        record.update(rec)
    record["components"] = lean_counts(items, status)
    record["skipped"] = sum(sum(c["skipped"].values()) for c in record["components"].values())
    results = []
    for (comp, case), lo, st in zip(items, lean_outs, status):
        t0 = time.monotonic()
        r = evaluate_case(comp, case, dtypes, device, lo, adapters, pybridge, lean_why_not=st)
        worst = max((c.ratio for c in r.comparisons if c.tol > 0), default=0.0)
        progress(f"  {case.label}: {'ok' if r.passed else 'FAIL'} ({len(r.comparisons)} comparisons, "
                 f"worst error/tolerance {worst:.2g}, {time.monotonic() - t0:.1f} s)"
                 + (f"; {r.routes['note']}" if r.routes else ""))
        results.append(r)
    for name, c in route_counts(results).items():
        record["components"].setdefault(name, {"evaluated": 0, "cached": 0, "skipped": {}})["route_checks"] = c
    shrunk: dict[tuple[str, int], CaseResult] = {}
    failed = [r for r in results if not r.passed]
    if shrink and failed:
        shrunk = shrink_failures(failed, dtypes, device, use_lean, use_cache, progress, adapters, pybridge)
    return RunResult(
        {"components": components, "cases": cases, "seed": seed, "dtypes": dtypes, "device": device, "lean": use_lean,
         "lean_cases": lean_cases, "lean_all": lean_all, "cache": use_cache, "shrink": shrink, "thorough": thorough,
         "impls": [a.spec for a in adapters], "pybridge": pybridge},
        results, shrunk, record, round(time.monotonic() - start, 1),
    )


def shrink_failures(failed: list[CaseResult], dtypes: list[str], device: str, use_lean: bool, use_cache: bool,
                    progress: Progress, adapters: tuple[Impl, ...] = (),
                    pybridge: bool = True) -> dict[tuple[str, int], CaseResult]:
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
    chosen = [i for i, p in enumerate(plan) if p[4] and p[1].lean_case(p[2]) is not None]
    if use_lean and chosen:
        outs, _ = lean.evaluate([(plan[i][1], plan[i][1].lean_case(plan[i][2])) for i in chosen], use_cache, progress)
        for i, out in zip(chosen, outs):
            lean_outs[i] = out
    best: dict[tuple[str, int], CaseResult] = {}
    for (r, comp, cand, signature, _), lo in zip(plan, lean_outs):
        key = (r.component, r.case.index)
        if key in best:
            continue
        cr = evaluate_case(comp, cand, sorted({d for d, _ in signature}), device, lo, adapters, pybridge,
                           lean_why_not="shrink candidate: Lean not rerun")
        if any((c.dtype, c.impl) in signature for c in cr.failures()):
            best[key] = cr
            progress(f"  {r.case.label} shrinks to {cand.label}")
    return best


def replay(reproducer: dict, dtypes: list[str] | None = None, device: str = "cpu",
           adapters: tuple[Impl, ...] | None = None) -> CaseResult:
    """Evaluate the exact case of a `summary.json` reproducer again (no Lean), with the adapters
    it names (`impls`) unless `adapters` is given."""
    from difftest.adapters import load

    comp = COMPONENTS[reproducer["component"]]
    case = Case.from_reproducer(reproducer)
    if adapters is None:
        adapters = tuple(load(spec) for spec in reproducer.get("impls", []))
    return evaluate_case(comp, case, dtypes or reproducer.get("dtypes") or list(DTYPES), device, None, adapters,
                         reproducer.get("pybridge", True), lean_why_not="replay: no Lean")
