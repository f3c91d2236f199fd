"""The report of `difftest checkpoint`: `summary.json` and `index.html` with a per-layer heat map
of error / tolerance (inline SVG, one column per layer, one row per stage), so that one bad layer
among 93 stands out, and a per-layer, per-rank table. An MXFP4 checkpoint adds, per expert
layer, the `mxfp4` entry (what the checked experts' codes decode to, `checkpoint.check_codes`)
and the heat-map rows `decode` (the codes decode to finite weights) and, with `--master`,
`quant bound` (error / the proved quantization bound)."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

#: heat-map rows: (label, the comparison stages it takes the worst of)
ROWS = (("seq read", ("seq_read",)), ("seq norm", ("seq_norm",)), ("mixer", ("kda", "mla")),
        ("chan read", ("chan_read",)), ("chan norm", ("chan_norm",)), ("channel", ("mlp", "moe")),
        ("route", ("route",)), ("shared", ("shared",)), ("experts", ("expert.",)), ("decode", ()), ("quant bound", ()))
#: comparisons of routed experts that have their own heat-map row, by output
OUTPUT_ROWS = {"decode": "decode", "master_fit": "quant bound", "bound": "quant bound"}


def _row(c: dict) -> str | None:
    """The heat-map row a comparison counts in (None: none)."""
    if c["output"] in OUTPUT_ROWS and c["component"].startswith("expert."):
        return OUTPUT_ROWS[c["output"]]
    return next((label for label, stages in ROWS
                 if any(c["component"] == s or (s.endswith(".") and c["component"].startswith(s)) for s in stages)), None)


def merge_mxfp4(into: dict, add: dict) -> dict:
    """Two units' `mxfp4` entries as one (counts added, code ranges joined, worst budget)."""
    if not into:
        return dict(add)
    out = dict(into)
    for k, v in add.items():
        if k == "scale_codes":
            out[k] = [min(v[0], into[k][0]), max(v[1], into[k][1])]
        elif k.startswith(("nonfinite_", "experts")):
            out[k] = into.get(k, 0) + v
        elif k.endswith("_max"):
            worst = max(float(into.get(k, 0.0)), float(v))  # "inf" parses
            out[k] = worst if math.isfinite(worst) else "inf"
        else:
            out[k] = v
    return out


def _ratio(c: dict) -> float:
    return float(c["ratio"])  # "inf" / "nan" parse as floats


def layer_table(results: list[dict], lost: dict[int, tuple[str, list]]) -> dict[int, dict]:
    """Per layer: verdict (pass / FAIL / ERROR / LOST), the ranks and units that checked it, the
    worst error / tolerance per heat-map row, the failing stages and experts, seconds, peak MB."""
    layers: dict[int, dict] = {}

    def entry(i: int) -> dict:
        return layers.setdefault(i, {"verdict": "pass", "mixer": [], "ranks": [], "units": [], "rows": {},
                                     "failed": [], "failed_experts": [], "errors": [], "seconds": 0.0,
                                     "peak_rss_mb": 0.0, "bytes_read": 0, "mxfp4": {}})

    for r in results:
        u, e = r["unit"], entry(r["unit"]["layer"])
        e["ranks"] = sorted(set(e["ranks"]) | {r["rank"]})
        shard = "" if u["shards"] == 1 else f" {u['shard'] + 1}/{u['shards']}"
        e["units"].append(f"{u['kind']}{shard} @ rank {r['rank']}")
        e["mixer"].append(r["mixer"])
        e["seconds"] = round(e["seconds"] + r["seconds"], 2)
        e["peak_rss_mb"] = max(e["peak_rss_mb"], r["peak_rss_mb"])
        e["bytes_read"] += r["bytes_read"]
        if r.get("mxfp4"):
            e["mxfp4"] = merge_mxfp4(e["mxfp4"], r["mxfp4"])
        if r["error"]:
            e["errors"].append(r["error"])
            e["verdict"] = "ERROR"
        for c in r["comparisons"]:
            label = _row(c)
            if label is not None:
                e["rows"][label] = max(e["rows"].get(label, 0.0), _ratio(c))
            if not c["passed"]:
                name = f"{c['component']}:{c['output']} ({c['impl']})"
                if name not in e["failed"]:
                    e["failed"].append(name)
                if c["component"].startswith("expert."):
                    ex = int(c["component"].split(".")[1])
                    if ex not in e["failed_experts"]:
                        e["failed_experts"].append(ex)
                if e["verdict"] == "pass":
                    e["verdict"] = "FAIL"
    for rank, (why, units) in lost.items():
        for u in units:
            e = entry(u.layer)
            e["verdict"] = "LOST"
            e["errors"].append(f"rank {rank} did not report {u.label}: {why}")
            e["ranks"] = sorted(set(e["ranks"]) | {rank})
    for e in layers.values():
        e["rows"] = {k: (v if math.isfinite(v) else "inf") for k, v in e["rows"].items()}
        e["mixer"] = "+".join(dict.fromkeys(m for m in e["mixer"] if m))
    return dict(sorted(layers.items()))


def _colour(v: float | str | None) -> str:
    if v is None:
        return "#eeeeee"
    v = math.inf if v == "inf" else float(v)
    if v > 1.0:
        return "#b2182b"  # fails
    x = min(max((math.log10(v) + 4) / 4, 0.0), 1.0) if v > 0 else 0.0  # 1e-4 .. 1 -> 0 .. 1
    g = round(247 - 120 * x)
    b = round(247 - 200 * x)
    return f"#f7{g:02x}{b:02x}" if x > 0.5 else f"#{round(230 - 180 * x):02x}{round(240 - 40 * x):02x}ff"


def heat_map(layers: dict[int, dict], cell: int = 14) -> str:
    """An SVG: columns are layers, rows the stages, each cell coloured by the worst error /
    tolerance (blue → orange up to the tolerance, red beyond it, grey: not checked); a failing,
    erroring or lost layer gets a black frame and its number in red below the map."""
    ids = list(layers)
    rows = [r for r in ROWS if r[1] or any(r[0] in e["rows"] for e in layers.values())]  # MXFP4 rows when checked
    cell = max(6, min(cell, 900 // max(len(ids), 1)))
    left, top = 70, 10
    width, height = left + cell * len(ids) + 10, top + cell * len(rows) + 46
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-size="10">']
    for r, (label, _) in enumerate(rows):
        parts.append(f'<text x="{left - 4}" y="{top + r * cell + cell * 0.75:.1f}" text-anchor="end">{label}</text>')
    for c, i in enumerate(ids):
        e = layers[i]
        x = left + c * cell
        for r, (label, _) in enumerate(rows):
            v = e["rows"].get(label)
            title = f"layer {i} {label}: " + ("not checked" if v is None else f"error/tolerance {v}")
            parts.append(f'<rect x="{x}" y="{top + r * cell}" width="{cell}" height="{cell}" fill="{_colour(v)}" '
                         f'stroke="#fff"><title>{html.escape(title)}</title></rect>')
        if e["verdict"] != "pass":
            parts.append(f'<rect x="{x}" y="{top}" width="{cell}" height="{cell * len(rows)}" fill="none" stroke="#000" '
                         f'stroke-width="2"><title>layer {i}: {e["verdict"]}</title></rect>')
            parts.append(f'<text x="{x + cell / 2}" y="{top + cell * len(rows) + 12}" text-anchor="middle" fill="#b2182b">{i}</text>')
        elif len(ids) <= 40 or c % 10 == 0:
            parts.append(f'<text x="{x + cell / 2}" y="{top + cell * len(rows) + 12}" text-anchor="middle" fill="#666">{i}</text>')
    parts.append(f'<text x="{left}" y="{height - 8}">hub layer (columns); colour: worst error / tolerance, '
                 'blue 1e-4 → orange 1, red &gt; 1 (fails), grey not checked</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def summary(checkpoint: str, cfg_dims: dict, options: dict, dtype: str, legs: list[str], graph_leg: str,
            results: list[dict], lost: dict[int, tuple[str, list]], world: int, backend: str, seconds: float) -> dict:
    """The `summary.json` document (format `difftest.checkpoint.v1`)."""
    layers = layer_table(results, lost)
    ranks: dict[int, dict] = {r: {"units": 0, "seconds": 0.0, "peak_rss_mb": 0.0, "peak_gpu_mb": 0.0, "bytes_read": 0,
                                  "status": "ok"} for r in range(world)}
    for r in results:
        v = ranks[r["rank"]]
        v["units"] += 1
        v["seconds"] = round(v["seconds"] + r["seconds"], 2)
        v["peak_rss_mb"] = max(v["peak_rss_mb"], r["peak_rss_mb"])
        v["peak_gpu_mb"] = max(v["peak_gpu_mb"], r.get("peak_gpu_mb", 0.0))
        v["bytes_read"] += r["bytes_read"]
        if r["error"]:
            v["status"] = "unit error"
    for rank, (why, units) in lost.items():
        ranks[rank]["status"] = f"lost: {why}; unreported: {', '.join(u.label for u in units) or 'none'}"
    failed = [i for i, e in layers.items() if e["verdict"] != "pass"]
    return {
        "format": "difftest.checkpoint.v1", "passed": not failed and not lost, "checkpoint": checkpoint,
        "config": cfg_dims, "options": options, "dtype": dtype, "legs": legs, "graph_leg": graph_leg,
        "world_size": world, "backend": backend, "seconds": round(seconds, 1),
        "bytes_read": sum(r["bytes_read"] for r in results),
        "memory_bound": ("per rank, one unit at a time: the unit's tensors in the run's dtype, float64 copies of its "
                         "non-expert tensors for the NumPy reference (made on first use), one routed expert in float64 "
                         "at a time, and the torch layer's float32 compute temporaries; peak_rss_mb is measured per "
                         "unit (VmHWM reset before each); MXFP4 routed experts wait as their codes (4.25 bits a weight) and are "
                         "decoded to float64 one at a time for the reference"),
        "mxfp4": {i: e["mxfp4"] for i, e in layers.items() if e["mxfp4"]},
        "failed_layers": failed, "layers": layers, "ranks": ranks, "units": results,
        "lost": {r: {"why": why, "units": [u.label for u in units]} for r, (why, units) in lost.items()},
    }


def mxfp4_text(m: dict) -> str:
    """A layer's `mxfp4` entry in words (the HTML table)."""
    if not m:
        return ""
    bad = {k.removeprefix("nonfinite_"): v for k, v in m.items() if k.startswith("nonfinite_")}
    text = (f"{m['experts']} decoded, E8M0 codes {m['scale_codes'][0]}..{m['scale_codes'][1]}, non-finite weights: "
            + ", ".join(f"{v} in {k}" for k, v in bad.items()) + f"; quantization budget ≤ {float(m['budget_rel_max']):.3g} × max|y|")
    if "bound_ratio_max" in m:
        text += f"; error / proved bound vs the master ≤ {float(m['bound_ratio_max']):.3g}"
    return text


def write(doc: dict, folder: Path) -> tuple[Path, Path]:
    """`summary.json` and `index.html` into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path = folder / "summary.json"
    json_path.write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    esc = html.escape
    rows = []
    for i, e in doc["layers"].items():
        worst = max((math.inf if v == "inf" else v for v in e["rows"].values()), default=0.0)
        problems = "; ".join(e["errors"] + e["failed"]) or ""
        experts = ", ".join(map(str, e["failed_experts"]))
        mx = mxfp4_text(e.get("mxfp4", {}))
        rows.append(f"<tr class='{e['verdict'].lower()}'><td>{i}</td><td>{esc(e['mixer'])}</td><td>{e['verdict']}</td>"
                    f"<td>{esc(', '.join(e['units']))}</td><td>{worst:.3g}</td><td>{e['seconds']}</td>"
                    f"<td>{e['peak_rss_mb']:.0f}</td><td>{e['bytes_read'] / 1e6:.0f}</td><td>{esc(experts)}</td>"
                    f"<td>{esc(mx)}</td><td>{esc(problems)}</td></tr>")
    ranks = "".join(f"<tr><td>{r}</td><td>{v['units']}</td><td>{v['seconds']}</td><td>{v['peak_rss_mb']:.0f}</td>"
                    f"<td>{v['bytes_read'] / 1e6:.0f}</td><td>{esc(v['status'])}</td></tr>" for r, v in doc["ranks"].items())
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>difftest checkpoint</title>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}} tr.fail td,tr.error td,tr.lost td{{background:#fde0dd}}</style>
</head><body>
<h1>difftest checkpoint: {'PASSED' if doc['passed'] else 'FAILED'}</h1>
<p>{esc(doc['checkpoint'])}: {len(doc['layers'])} layer(s) checked at {esc(doc['dtype'])} on {doc['world_size']} rank(s)
({esc(doc['backend'])}), {doc['seconds']} s, {doc['bytes_read'] / 1e9:.2f} GB read.
Failing layers: {esc(', '.join(map(str, doc['failed_layers'])) or 'none')}.</p>
<p>Legs: {esc(', '.join(doc['legs']))}. {esc(doc['graph_leg'])}.</p>
<p>Memory bound: {esc(doc['memory_bound'])}</p>
<h2>Error / tolerance per layer and stage</h2>
{heat_map(doc['layers'])}
<h2>Ranks</h2>
<table><tr><th>rank</th><th>units</th><th>s</th><th>peak RSS MB</th><th>MB read</th><th>status</th></tr>{ranks}</table>
<h2>Layers</h2>
<table><tr><th>layer</th><th>mixers</th><th>verdict</th><th>units @ rank</th><th>worst err/tol</th><th>s</th>
<th>peak RSS MB</th><th>MB read</th><th>failing experts</th><th>MXFP4 experts</th><th>problems</th></tr>{''.join(rows)}</table>
</body></html>
"""
    html_path = folder / "index.html"
    html_path.write_text(page, encoding="utf-8")
    return json_path, html_path
