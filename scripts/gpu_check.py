"""Checks that need a CUDA device, in one process, with a JSON + HTML summary.

  graphs   every graph in fixtures/graphs compiled (pybridge.graph.compile) on the device in
           float64, against the same graph on the CPU in float64, on seeded inputs
  fla      fla's chunk_kda and fused_recurrent_kda (difftest's built-in adapters) at float32 and
           bfloat16 storage, against pybridge.kda.kda_recurrent in float64 on the same rounded
           inputs, under difftest's error model of the KDA recurrence (docs/tolerances.md)
  compile  torch.compile of every compiled graph on the device against the eager module there
  model    the tiny model (fixtures/tiny, seeded random weights) on the device in float64: prefill
           logits and cached, teacher-forced decode logits, against the CPU in float64

No GPU was available to the session that wrote this script: its checks have run only with
device "cpu" (tests/test_gpu_check.py), and the skip path on a CPU-only machine.

Each check records passed/failed/skipped/error, its largest error, the tolerance and the seconds
it took. float64 tolerances come from difftest.compare.tolerance: for a graph, a worst-case
bound over its nodes and reductions (`graph_error_model`); for the model, difftest's error model
of the decoder token step. Without CUDA every check is skipped: one line says so, the summary
says why, and the exit status is 0. Otherwise the exit status is 1 when a check failed or raised.
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import json
import math
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from difftest.adapters import load as load_impl  # noqa: E402
from difftest.adapters.legs import COMPUTE_OUTPUTS, call_impl  # noqa: E402
from difftest.compare import measure, tolerance  # noqa: E402
from difftest.components.base import ErrorModel, rounded, to_np, torch_config  # noqa: E402
from difftest.components.decoder import DecoderStepComponent  # noqa: E402
from difftest.components.sequence import KDARecurrenceComponent  # noqa: E402
from pybridge.checkpoint import random_model  # noqa: E402
from pybridge.graph.compile import compile_graph  # noqa: E402
from pybridge.graph.load import Graph, binding_keys, load_graph  # noqa: E402
from pybridge.kda import kda_recurrent  # noqa: E402

F64 = torch.float64
GRAPHS = ROOT / "fixtures" / "graphs"
SEED = 0
GROUPS = ("graphs", "fla", "compile", "model")
#: ops that reduce over their first argument's last axis (a sum, or a product's inner axis)
REDUCING = {"sumLast", "meanLast", "softmaxLast", "rmsNormLast", "l2NormLast", "vecMatMul", "matMul", "batchedMatMul"}
FLA_ADAPTERS = ("fla-chunk", "fla-fused-recurrent")  # difftest's built-in adapters of chunk_kda, fused_recurrent_kda
#: the fla check's sizes: K3's head width, T = 300 (not a multiple of fla's 64-token chunks)
FLA_SIZES = {"B": 2, "H": 4, "K": 128, "V": 128, "P": 0, "T": 300}
FLA_KINDS = ("random", "decay")
FLA_DTYPES = ("float32", "bfloat16")
#: the model check: B rows, a P-token prompt, then D cached decode steps on given tokens
MODEL_B, MODEL_P, MODEL_D = 2, 24, 8


@dataclass(frozen=True)
class Measured:
    """One output of a check: its error (difftest.compare.measure) and tolerance."""

    output: str
    err: float
    tol: float

    @property
    def ratio(self) -> float:
        return self.err / self.tol if self.tol > 0 else math.inf


@dataclass(frozen=True)
class Check:
    group: str
    name: str
    run: Callable[[], list[Measured]]
    #: why the check cannot run here (None: it can)
    skip: Callable[[], str | None] = lambda: None


@dataclass
class Result:
    group: str
    name: str
    status: str  # passed | failed | skipped | error
    err: float | None = None
    tol: float | None = None
    seconds: float = 0.0
    note: str = ""
    outputs: list[dict] = field(default_factory=list)


def to_device(x, device: str, dtype: torch.dtype):
    """The device leg's copy of a tensor or module (every device input goes through here)."""
    return x.to(device=device, dtype=dtype)


def seeded_inputs(values, seed: int) -> dict[str, torch.Tensor]:
    """Uniform values in [0.1, 1) for every binding: positive, so that log, sqrt and division see
    values in their domain (the check compares two devices, not the spec's input ranges)."""
    gen = torch.Generator().manual_seed(seed)
    return {k: 0.1 + 0.9 * torch.rand(v.shape, generator=gen, dtype=F64) for k, v in zip(binding_keys(values), values)}


def graph_error_model(graph: Graph) -> ErrorModel:
    """A worst-case budget for one graph: every node a rounding on the chain, every reduction's
    full length accumulated, amplification 1 (the legs run the same torch ops; only the devices'
    summation orders and elementary functions differ)."""
    shapes = {v.id: v.shape for v in (*graph.params, *graph.inputs)} | {n.id: n.shape for n in graph.nodes}
    accum = sum(shapes[n.args[0]][-1] for n in graph.nodes if n.op in REDUCING)
    return ErrorModel(stores=len(graph.nodes) + 1, accum=accum, amp=1.0)


def compare_outputs(got: dict, want: dict, tol: float, metric: str = "max") -> list[Measured]:
    return [Measured(k, measure(to_np(got[k]), to_np(want[k]), metric)[0], tol) for k in want]


def graph_check(path: Path, device: str, dtype: torch.dtype = F64) -> list[Measured]:
    """(a) The graph compiled for `device` at `dtype` against the CPU float64 module."""
    graph = load_graph(path)
    params, inputs = seeded_inputs(graph.params, SEED), seeded_inputs(graph.inputs, SEED + 1)
    want = compile_graph(graph, F64)(params, inputs)
    dev = {k: to_device(v, device, dtype) for k, v in params.items()}, {k: to_device(v, device, dtype) for k, v in inputs.items()}
    got = compile_graph(graph, dtype, device)(*dev)
    return compare_outputs(got, want, tolerance(graph_error_model(graph), "float64"))


def compile_check(path: Path, device: str) -> list[Measured]:
    """(c) torch.compile of the graph's module on `device` against the eager module there."""
    graph = load_graph(path)
    cg = compile_graph(graph, F64, device)
    args = ({k: v.to(device) for k, v in seeded_inputs(graph.params, SEED).items()},
            {k: v.to(device) for k, v in seeded_inputs(graph.inputs, SEED + 1).items()})
    want = cg.module(*args)
    got = torch.compile(cg.module, fullgraph=True)(*args)
    return compare_outputs(got, want, tolerance(graph_error_model(graph), "float64"))


def fla_check(adapter, dtype: str, device: str, sizes: dict[str, int] = FLA_SIZES) -> list[Measured]:
    """(b) An fla kernel through difftest's adapter (a name or an adapter object) at `dtype`
    storage, against kda_recurrent in float64 on the same rounded inputs: relative 2-norm error
    under the component's error model (o stored once in the dtype, the state kept in float32)."""
    impl, comp, out = load_impl(adapter), KDARecurrenceComponent(), []
    model = comp.error_model(sizes)
    for index, kind in enumerate(FLA_KINDS):
        case = rounded(comp.make_case(index, kind, SEED, sizes), getattr(torch, dtype))
        got = call_impl(impl, comp, case, getattr(torch, dtype), device)
        t = {k: torch.from_numpy(v) for k, v in case.tensors.items()}
        o, s = kda_recurrent(t["q"], t["k"], t["v"], t["retention"].log(), t["beta"], 1.0, t["state"])
        for name, want in (("o", o), ("state", s)):
            m = dataclasses.replace(model, out_stores=0) if name in COMPUTE_OUTPUTS[comp.name] else model
            out.append(Measured(f"{kind} {name}", measure(got[name], to_np(want), "l2")[0], tolerance(m, dtype)))
    return out


def model_logits(model: torch.nn.Module, ids_bt: torch.Tensor) -> dict[str, torch.Tensor]:
    """Prefill logits of the first MODEL_P tokens, then each later token as a cached decode step."""
    with torch.no_grad():
        prefill, cache = model(ids_bt[:, :MODEL_P])
        steps = []
        for t in range(MODEL_P, ids_bt.shape[1]):
            logits, cache = model(ids_bt[:, t : t + 1], cache)
            steps.append(logits)
    return {"prefill": prefill, "decode": torch.cat(steps, 1)}


def model_check(device: str, dtype: torch.dtype = F64) -> list[Measured]:
    """(d) The seeded tiny model on `device` at `dtype` against the CPU in float64, under
    difftest's float64 error model of a decoder step after MODEL_P + MODEL_D tokens."""
    cfg = torch_config()
    ids = torch.randint(0, cfg.vocab_size, (MODEL_B, MODEL_P + MODEL_D), generator=torch.Generator().manual_seed(SEED))
    want = model_logits(random_model(cfg, seed=SEED, dtype=F64), ids)
    got = model_logits(to_device(random_model(cfg, seed=SEED, dtype=F64), device, dtype), ids.to(device))
    tol = tolerance(DecoderStepComponent().error_model({"B": MODEL_B, "P": MODEL_P + MODEL_D}), "float64")
    return compare_outputs(got, want, tol)


def fla_missing(adapter: str) -> str | None:
    try:
        impl = load_impl(adapter)
    except Exception as e:  # fla not importable: its adapters cannot load
        return f"fla not importable: {e}"
    return None if "kda_recurrence" in impl.covered() else impl.not_covered().get("kda_recurrence", "not covered")


def plan(device: str = "cuda", groups: tuple[str, ...] = GROUPS) -> list[Check]:
    """The checks of `groups` on `device`, in run order."""
    graphs = sorted(GRAPHS.glob("*.json"))
    checks = []
    if "graphs" in groups:
        checks += [Check("graphs", p.stem, lambda p=p: graph_check(p, device)) for p in graphs]
    if "fla" in groups:
        checks += [Check("fla", f"{name} {dt}", lambda n=name, dt=dt: fla_check(n, dt, device), lambda n=name: fla_missing(n))
                   for name in FLA_ADAPTERS for dt in FLA_DTYPES]
    if "compile" in groups:
        checks += [Check("compile", p.stem, lambda p=p: compile_check(p, device)) for p in graphs]
    if "model" in groups:
        checks.append(Check("model", "tiny prefill + decode", lambda: model_check(device)))
    return checks


def run_check(check: Check) -> Result:
    reason = check.skip()
    if reason:
        return Result(check.group, check.name, "skipped", note=reason)
    t0 = time.perf_counter()
    try:
        measured = check.run()
    except Exception as e:
        return Result(check.group, check.name, "error", seconds=time.perf_counter() - t0, note=f"{type(e).__name__}: {e}")
    worst = max(measured, key=lambda m: m.ratio)
    passed = all(m.err <= m.tol for m in measured)
    return Result(check.group, check.name, "passed" if passed else "failed", worst.err, worst.tol,
                  time.perf_counter() - t0, f"worst output: {worst.output}", [dataclasses.asdict(m) for m in measured])


def environment() -> dict[str, str]:
    env = {"torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
           "cuda": torch.version.cuda or "none", "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name(0)
    try:  # the distribution's version: importing fla without CUDA prints Triton warnings
        env["fla"] = metadata.version("flash-linear-attention")
    except metadata.PackageNotFoundError:
        env["fla"] = "not installed"
    return env


def write_summary(out: Path, results: list[Result], env: dict[str, str], skipped: str | None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    summary = {"environment": env, "skipped": skipped, "passed": all(r.status in ("passed", "skipped") for r in results),
               "counts": {s: sum(r.status == s for r in results) for s in ("passed", "failed", "error", "skipped")},
               "checks": [dataclasses.asdict(r) for r in results]}
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    (out / "index.html").write_text(render_html(summary), encoding="utf-8")
    return summary


def render_html(summary: dict) -> str:
    colors = {"passed": "#d4edda", "failed": "#f8d7da", "error": "#f8d7da", "skipped": "#eeeeee"}

    def num(x: float | None) -> str:
        return "" if x is None else f"{x:.2e}"

    rows = "\n".join(
        f'<tr style="background:{colors[c["status"]]}"><td>{html.escape(c["group"])}</td><td>{html.escape(c["name"])}</td>'
        f'<td>{c["status"]}</td><td>{num(c["err"])}</td><td>{num(c["tol"])}</td><td>{c["seconds"]:.2f}</td>'
        f'<td>{html.escape(c["note"])}</td></tr>' for c in summary["checks"])
    env = ", ".join(f"{k} {html.escape(v)}" for k, v in summary["environment"].items())
    head = (f"<p><b>Every check skipped:</b> {html.escape(summary['skipped'])}</p>" if summary["skipped"] else
            f"<p><b>{'PASSED' if summary['passed'] else 'FAILED'}</b>: "
            + ", ".join(f"{n} {k}" for k, n in summary["counts"].items()) + "</p>")
    return (f"<!doctype html><meta charset=utf-8><title>gpu-check</title><h1>gpu-check</h1><p>{env}</p>{head}"
            "<table border=1 cellpadding=4 style='border-collapse:collapse'><tr><th>group</th><th>check</th>"
            f"<th>status</th><th>max error</th><th>tolerance</th><th>seconds</th><th>note</th></tr>\n{rows}</table>\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu-check", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("gpu-check-out"), help="summary folder (default gpu-check-out/)")
    ap.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated groups to run (default {','.join(GROUPS)})")
    args = ap.parse_args(argv)
    groups = tuple(g for g in args.only.split(",") if g)
    bad = sorted(set(groups) - set(GROUPS))
    if bad:
        ap.error(f"--only: unknown group(s) {', '.join(bad)} (groups: {', '.join(GROUPS)})")
    checks, env = plan("cuda", groups), environment()
    if not torch.cuda.is_available():
        reason = f"CUDA is absent (torch {torch.__version__}: torch.cuda.is_available() is False)"
        write_summary(args.out, [Result(c.group, c.name, "skipped", note=reason) for c in checks], env, reason)
        print(f"gpu-check: {reason}; all {len(checks)} checks skipped; summary in {args.out}/")
        return 0
    results = []
    for i, check in enumerate(checks, 1):
        r = run_check(check)
        results.append(r)
        detail = f"err {r.err:.2e}, tol {r.tol:.2e}, " if r.err is not None else ""
        print(f"[{i}/{len(checks)}] {r.group}/{r.name}: {r.status} ({detail}{r.seconds:.1f} s) {r.note}", flush=True)
    summary = write_summary(args.out, results, env, None)
    print(f"gpu-check: {'PASSED' if summary['passed'] else 'FAILED'} {summary['counts']}; summary in {args.out}/")
    return 0 if summary["passed"] else 1
