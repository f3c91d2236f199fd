"""`difftest checkpoint` on a checkpoint of the Kimi Linear family: layer by layer at its own
dimensions, against the Kimi Linear variant (`pybridge.kimi_linear`, the spec leg).

`difftest checkpoint --checkpoint DIR` comes here when `DIR/config.json` selects the variant
(`pybridge.config_kimi_linear.is_kimi_linear`; a moonshotai/Kimi-Linear-* download, or what
transformers' `save_pretrained` writes). Per selected 0-based layer i, two stages, each on its
own seeded inputs `[rows, tokens, D]` (`difftest.inputs`, seed (seed, layer, stage)):
* `attn`: the sequence mixer (KDA or MLA) from the zero state; components `kimi_linear_kda` /
  `kimi_linear_mla`;
* `channel`: the MoE block (`kimi_linear_moe`) or the dense SwiGLU MLP.
Legs, all at float64 (this checker has no low-precision mode yet): pybridge's block with
the layer's tensors (the spec leg), the same block token by token (`pybridge decode`; per token
for the channel stage), and every `--impl` adapter covering the stage's component (the built-in
`kimi-linear`: transformers' own layers; `call.sizes` carries `layer`, `call.config_path` the
checkpoint's config.json). Tolerances: the components' error models at the layer's sizes. There
is no Lean, NumPy or graph leg for the variant (the summary says so).

Only the layer's tensors are read (`checkpoint_io.LazyCheckpoint`, shapes from the config; a
missing, mis-shaped or unreadable tensor is an error naming it, and that stage fails while the
others go on). transformers 5.23's `save_pretrained` writes a dense layer's MLP as
`block_sparse_moe.{gate,up,down}_proj`; it is read as `mlp.*`. Memory: one layer's tensors at a
time, in float64, once per leg.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from difftest.adapters import Call, Impl, Inputs
from difftest.checkpoint import parse_spec, stage_rng
from difftest.checkpoint_io import LazyCheckpoint
from difftest.compare import Comparison, compare, tolerance
from difftest.components import COMPONENTS
from difftest.components.base import to_np
from difftest.inputs import gaussian
from pybridge import adapter
from pybridge.config import load_config
from pybridge.errors import K3Error
from pybridge.kimi_linear import KimiLinearDecoderLayer

NO_LEAN = "no Lean, NumPy or graph leg for the Kimi Linear variant: the legs are pybridge's variant and the adapters"


def layer_tensors(ckpt: LazyCheckpoint, cfg, i: int, config: Path, part: str) -> dict[str, torch.Tensor]:
    """The layer's tensors under `part` (`self_attn`, `block_sparse_moe` or `mlp`), names relative
    to it, shapes from the configuration; a dense layer's `block_sparse_moe.*_proj` read as `mlp.*`."""
    with torch.device("meta"):
        module = getattr(KimiLinearDecoderLayer(cfg, i), part)
    rules = []
    for name, t in module.state_dict().items():
        hub = f"model.layers.{i}.{part}.{name}"
        if part == "mlp" and hub not in ckpt.where:
            hub = f"model.layers.{i}.block_sparse_moe.{name}"
        rules.append(adapter.same(hub, name, tuple(t.shape)))
    got = ckpt.read(rules, config)
    return {r.spec[0]: got[r.hub[0]] for r in rules}


def stage_sizes(cfg, i: int, rows: int, tokens: int) -> dict[str, int]:
    """`call.sizes` of layer i's stages: the case sizes and the error models' widths."""
    return {"B": rows, "T": tokens, "layer": i, "Lq": cfg.q_lora_rank or 0, "D": cfg.hidden_size,
            "K": cfg.kda_head_dim, "Lkv": cfg.kv_lora_rank, "C": cfg.qk_nope_head_dim + cfg.qk_rope_head_dim,
            "HV": cfg.num_attention_heads * cfg.v_head_dim, "h": cfg.moe_intermediate_size,
            "k": cfg.num_experts_per_token}


def check_stage(cfg, config: Path, i: int, stage: str, weights: dict[str, torch.Tensor], x: np.ndarray,
                impls: tuple[Impl, ...], sizes: dict[str, int]) -> list[Comparison]:
    """The stage's legs on `x` and their comparisons (float64)."""
    layer = KimiLinearDecoderLayer(cfg, i)
    part = "self_attn" if stage == "attn" else ("block_sparse_moe" if cfg.is_moe(i) else "mlp")
    comp_name = {"self_attn": "kimi_linear_mla" if cfg.is_mla(i) else "kimi_linear_kda",
                 "block_sparse_moe": "kimi_linear_moe", "mlp": ""}[part]
    module = getattr(layer, part).to(torch.float64)
    w64 = {k: v.to(torch.float64) for k, v in weights.items()}
    module.load_state_dict(w64)
    xt = torch.from_numpy(x)
    legs: dict[str, np.ndarray] = {}
    with torch.no_grad():
        if stage == "attn":
            legs["pybridge"] = to_np(module(xt, module.initial_state(xt.shape[0], xt))[0])
            legs["pybridge decode"] = to_np(COMPONENTS["kimi_linear_kda"].decode(module, xt))
        else:
            flat = xt.reshape(-1, xt.shape[-1])
            legs["pybridge"] = to_np(module(flat))
            legs["pybridge per token"] = to_np(torch.cat([module(flat[j : j + 1]) for j in range(flat.shape[0])]))
        for impl in impls:
            fn = impl.covered().get(comp_name)
            if fn is None:
                continue
            name = "x" if comp_name == "kimi_linear_moe" else "xs"
            inp = xt.reshape(-1, xt.shape[-1]) if name == "x" else xt
            tensors = Inputs({name: inp, **w64}, impl.name, comp_name)
            legs[impl.column] = to_np(fn(Call(impl.name, comp_name, tensors, sizes, torch.float64, "cpu", config))["y"])
    model = COMPONENTS[comp_name or "kimi_linear_moe"].error_model(
        {**sizes, "h": cfg.intermediate_size} if part == "mlp" else sizes)
    tol = tolerance(model, "float64")
    names, out = list(legs), []
    for j, impl in enumerate(names):
        for ref in names[:j]:
            out.append(compare(comp_name or "kimi_linear_mlp", i, stage, "float64", impl, ref, "y", legs[impl], legs[ref], tol))
    return out


def verify(folder: str | Path, layers: str, tokens: int, rows: int, seed: int, impls: tuple[Impl, ...],
           report_dir: Path | None, progress: Callable[[str], None] = lambda s: None) -> int:
    """Check the selected layers; 0 when every stage passes, 1 otherwise (a stage's fault named)."""
    folder = Path(folder)
    config = folder / "config.json"
    cfg = load_config(config)
    ckpt = LazyCheckpoint(folder)
    chosen = parse_spec(layers, cfg.num_hidden_layers, "--layers")
    progress(f"difftest checkpoint (Kimi Linear variant): {folder}, layers {layers} ({len(chosen)}), "
             f"{rows} x {tokens} tokens, float64; {NO_LEAN}")
    results, start = [], time.monotonic()
    for i in chosen:
        sizes = stage_sizes(cfg, i, rows, tokens)
        for stage in ("attn", "channel"):
            t0, error, rows_ = time.monotonic(), "", []
            part = "self_attn" if stage == "attn" else ("block_sparse_moe" if cfg.is_moe(i) else "mlp")
            try:
                weights = layer_tensors(ckpt, cfg, i, config, part)
                x = gaussian(stage_rng(seed, i, stage), (rows, tokens, cfg.hidden_size), 1.0)
                rows_ = check_stage(cfg, config, i, stage, weights, x, impls, sizes)
                del weights
            except K3Error as exc:
                error = f"layer {i} {stage}: {exc}"
            except Exception as exc:  # reported with the layer; the other stages go on
                last = traceback.extract_tb(exc.__traceback__)[-1]
                error = f"layer {i} {stage}: {type(exc).__name__}: {exc} ({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"
            passed = not error and all(c.passed for c in rows_)
            worst = max((c.ratio for c in rows_), default=0.0)
            progress(f"  layer {i} {stage} ({part}): {'ok' if passed else 'ERROR ' + error if error else 'FAIL'} "
                     f"({len(rows_)} comparisons, worst error/tolerance {worst:.2g}, {time.monotonic() - t0:.1f} s)")
            results.append({"layer": i, "stage": stage, "part": part, "passed": passed, "error": error,
                             "comparisons": [{"component": c.component, "impl": c.impl, "ref": c.ref, "err": c.err,
                                              "tol": c.tol, "passed": c.passed} for c in rows_]})
    ok = all(r["passed"] for r in results)
    progress(f"difftest checkpoint {'PASSED' if ok else 'FAILED'}: {len(results)} stage(s), "
             f"{sum(len(r['comparisons']) for r in results)} comparisons, {time.monotonic() - start:.1f} s")
    if report_dir is not None:
        Path(report_dir).mkdir(parents=True, exist_ok=True)
        doc = {"format": "difftest.checkpoint.kimi_linear.v1", "checkpoint": str(folder), "variant": "kimi_linear",
               "passed": ok, "lean": NO_LEAN, "impls": [a.spec for a in impls], "stages": results}
        (Path(report_dir) / "summary.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        progress(f"report: {Path(report_dir) / 'summary.json'}")
    return 0 if ok else 1
