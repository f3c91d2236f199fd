"""Reports: a JSON summary and an HTML page with per-component error plots (inline SVG), and
the readable diff printed for each failure."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

import jinja2

from difftest.compare import Comparison
from difftest.components import COMPONENTS
from difftest.runner import CaseResult, RunResult

TEMPLATES = Path(__file__).resolve().parent / "templates"
DTYPE_COLOURS = {"float64": "#1f77b4", "float32": "#2ca02c", "bfloat16": "#d62728"}


def _num(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def _at(values, index: list[int]) -> float | None:
    try:
        v = values
        for i in index:
            v = v[i]
        return float(v)
    except (IndexError, TypeError, ValueError):
        return None


def diff_text(r: CaseResult, shrunk: CaseResult | None = None) -> str:
    """The readable diff of a failing case: per failing comparison, the worst absolute and
    relative error, its index, and the Lean, graph and torch values there (float64)."""
    lines = [f"FAIL {r.case.label}"]
    for c in r.failures():
        lines.append(f"  {c.output} [{c.dtype}] {c.impl} vs {c.ref}: " + (c.note if c.note else ""))
        if math.isfinite(c.abs_err) or c.index:
            lines.append(f"    worst |error| {c.abs_err:.3e}, relative {c.err:.3e} (tolerance {c.tol:.1e}) at index {tuple(c.index)}")
            vals = []
            for impl in ("lean", "graph", "torch"):
                v = _at(r.f64.get(impl, {}).get(c.output), c.index)
                if v is not None:
                    vals.append(f"{impl} {v!r}")
            if c.dtype != "float64" or c.impl not in ("lean", "graph", "torch"):
                vals.append(f"{c.impl} ({c.dtype}) {c.got!r}")
            lines.append("    values: " + ", ".join(vals))
    if shrunk is not None:
        lines.append(f"  shrunk to {shrunk.case.label}:")
        for c in shrunk.failures()[:3]:
            lines.append(f"    {c.output} [{c.dtype}] {c.impl} vs {c.ref}: |error| {c.abs_err:.3e} at {tuple(c.index)}, "
                         f"got {c.got!r}, want {c.want!r} {c.note}")
    return "\n".join(lines)


def summary(run: RunResult) -> dict:
    comps: dict[str, dict] = {}
    for r in run.results:
        comp = COMPONENTS[r.component]
        s = comps.setdefault(r.component, {"summary": comp.summary, "cases": 0, "failed_cases": 0,
                                           "comparisons": 0, "worst_ratio": {}, "implementations": set(),
                                           "references": comp.references() or ["none: torch paths only"],
                                           "kinds": sorted({x.case.kind for x in run.results if x.component == r.component}),
                                           "tolerances": {}, "whole_model": {}, "bound_ratio": {}})
        s["cases"] += 1
        s["failed_cases"] += 0 if r.passed else 1
        s["comparisons"] += len(r.comparisons)
        s["implementations"].update(r.f64)
        s["implementations"].update(c.impl for c in r.comparisons if c.impl.startswith("impl:"))
        for c in r.comparisons:
            if c.ref == "bound":  # error / proved bound (`Component.bound_checks`), worst per input kind
                s["bound_ratio"][c.kind] = _num(max(c.ratio, s["bound_ratio"].get(c.kind, 0.0)))
            elif c.tol > 0 and math.isfinite(c.ratio):
                s["worst_ratio"][c.dtype] = max(s["worst_ratio"].get(c.dtype, 0.0), c.ratio)
                lo, hi = s["tolerances"].get(c.dtype, (c.tol, c.tol))
                s["tolerances"][c.dtype] = (min(lo, c.tol), max(hi, c.tol))
        for dtype, figures in r.info.items():
            s["whole_model"].setdefault(dtype, []).append({"case": r.case.index, **figures})
    lean_counts = run.lean_record.get("components", {})
    for name, s in comps.items():
        s["implementations"] = sorted(s["implementations"])
        # the Lean leg's cases: evaluated, from the cache, skipped (by reason: `runner.lean_plan`)
        s["lean"] = lean_counts.get(name, {"evaluated": 0, "cached": 0, "skipped": {}})
    failures = []
    for r in run.results:
        if r.passed:
            continue
        shrunk = run.shrunk.get((r.component, r.case.index))
        failures.append({
            "case": r.case.label,
            "comparisons": [_row(c) for c in r.failures()],
            "diff": diff_text(r, shrunk),
            "reproducer": {**(shrunk or r).case.reproducer(), "dtypes": sorted({c.dtype for c in (shrunk or r).failures()}),
                           "impls": run.options.get("impls", []), "pybridge": run.options.get("pybridge", True)},
            "original_reproducer": r.case.reproducer() if shrunk else None,
        })
    return {
        "format": "difftest.report.v1",
        "passed": run.passed,
        "adapters": adapter_columns(run),
        "options": run.options,
        "seconds": run.seconds,
        "lean": run.lean_record,
        "components": comps,
        "failures": failures,
        "comparisons": [_row(c) for r in run.results for c in r.comparisons],
    }


def adapter_columns(run: RunResult) -> dict[str, dict[str, dict]]:
    """Per adapter column (`impl:<name>`) and component: comparisons, failures, and the worst
    error / tolerance per dtype (the report's "Implementations under test" table)."""
    cols: dict[str, dict[str, dict]] = {}
    for r in run.results:
        for c in r.comparisons:
            col = next((x for x in (c.impl, c.ref) if x.startswith("impl:")), None)  # the Lean leg has it as ref
            if col is None:
                continue
            s = cols.setdefault(col, {}).setdefault(r.component, {"comparisons": 0, "failed": 0, "worst_ratio": {}})
            s["comparisons"] += 1
            s["failed"] += not c.passed
            ratio = c.ratio if math.isfinite(c.ratio) else math.inf
            s["worst_ratio"][c.dtype] = max(s["worst_ratio"].get(c.dtype, 0.0), ratio)
    for comps in cols.values():
        for s in comps.values():
            s["worst_ratio"] = {d: _num(v) for d, v in s["worst_ratio"].items()}
    return cols


def _row(c: Comparison) -> dict:
    d = asdict(c)
    for k in ("err", "tol", "got", "want", "abs_err"):
        d[k] = _num(d[k])
    d["ratio"] = _num(c.ratio)
    return d


def svg_plot(rows: list[Comparison], width: int = 640, height: int = 220, line: str = "tolerance") -> str:
    """Scatter of log10(error / tolerance) per comparison, by case, coloured by dtype; the
    tolerance (`line`: what it is) is the line at 0. Exact comparisons and exact agreements sit at
    the bottom."""
    pad_l, pad_r, pad_t, pad_b = 48, 10, 10, 28
    lo, hi = -6.0, 2.0
    cases = sorted({c.case for c in rows}) or [0]
    span = max(cases[-1] - cases[0], 1)

    def x(case: int, jitter: float) -> float:
        return pad_l + (case - cases[0] + 0.5 + jitter) / (span + 1) * (width - pad_l - pad_r)

    def y(v: float) -> float:
        v = min(max(v, lo), hi)
        return pad_t + (hi - v) / (hi - lo) * (height - pad_t - pad_b)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-size="10">',
             f'<rect x="{pad_l}" y="{pad_t}" width="{width - pad_l - pad_r}" height="{height - pad_t - pad_b}" fill="#fafafa" stroke="#ccc"/>']
    for v in range(int(lo), int(hi) + 1, 2):
        parts.append(f'<text x="{pad_l - 4}" y="{y(v) + 3:.1f}" text-anchor="end">1e{v}</text>')
        parts.append(f'<line x1="{pad_l}" x2="{width - pad_r}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
    parts.append(f'<line x1="{pad_l}" x2="{width - pad_r}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#000" stroke-dasharray="4 2"/>')
    parts.append(f'<text x="{width - pad_r - 2}" y="{y(0) - 3:.1f}" text-anchor="end">{line}</text>')
    parts.append(f'<text x="{(width + pad_l) / 2}" y="{height - 6}" text-anchor="middle">case (error / {line}, log scale)</text>')
    order = list(DTYPE_COLOURS)
    for c in rows:
        r = c.ratio
        v = math.log10(r) if r > 0 and math.isfinite(r) else (hi if not math.isfinite(r) else lo)
        jitter = (order.index(c.dtype) - 1) * 0.18 if c.dtype in order else 0.0
        colour = DTYPE_COLOURS.get(c.dtype, "#555")
        fill = colour if c.passed else "none"
        parts.append(f'<circle cx="{x(c.case, jitter):.1f}" cy="{y(v):.1f}" r="3" fill="{fill}" stroke="{colour}">'
                     f'<title>{c.kind} {c.dtype} {c.impl} vs {c.ref} {c.output}: {c.err:.2e} / {c.tol:.1e}</title></circle>')
    for i, (dtype, colour) in enumerate(DTYPE_COLOURS.items()):
        parts.append(f'<circle cx="{pad_l + 10 + 80 * i}" cy="{pad_t + 10}" r="3" fill="{colour}"/>'
                     f'<text x="{pad_l + 16 + 80 * i}" y="{pad_t + 13}">{dtype}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def plots(rows: list[Comparison]) -> str:
    """A component's plots: error / tolerance of its comparisons between legs, and error / proved
    bound of its bound checks (`Component.bound_checks`) where it has any."""
    bound = [c for c in rows if c.ref == "bound"]
    legs = svg_plot([c for c in rows if c.ref != "bound"])
    return legs + ("\n" + svg_plot(bound, line="proved bound") if bound else "")


def write(run: RunResult, folder: Path) -> tuple[Path, Path]:
    """Write `summary.json` and `index.html` into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = summary(run)
    json_path = folder / "summary.json"
    json_path.write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    by_comp: dict[str, list[Comparison]] = defaultdict(list)
    for r in run.results:
        by_comp[r.component].extend(r.comparisons)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)
    html = env.get_template("report.html.j2").render(doc=doc, plots={name: plots(rows) for name, rows in by_comp.items()})
    html_path = folder / "index.html"
    html_path.write_text(html, encoding="utf-8")
    return json_path, html_path
