"""The MXFP4 expert (issue 19 item 5): the `expert` component with its weights quantized to MXFP4.

Each leg quantizes the case's full-precision weights itself:
* torch: pybridge (`pybridge.adapter`'s MXFP4 expert rules, i.e. `pybridge.mxfp4.quantize`, the
  quantizer `make-random-checkpoint --quantize mxfp4` uses) into `moe.MXFP4SituExpert`, which
  dequantizes and multiplies (`torch`) or multiplies block by block and scales each block's sum
  (`torch-blockwise`, `mxfp4.blockwise_linear`);
* NumPy: difftest's own quantizer below — the ceil scale rule as the Lean definition states it
  (the first E8M0 code whose 6·s covers the block maximum, `ScaleRule.ceil`), E2M1
  round-to-nearest-even by `ml_dtypes`' cast, its own nibble packing and decode — then the NumPy
  expert (`numpy_ref.expert`) at the dequantized weights;
* Lean: the `expert` component's template (the library's proved `Exec.Expert.forwardF`, equal to
  `Expert.forward` by `Exec.Expert.forward_eq`) at the NumPy leg's exact dequantized weights.
No graph leg: the expert export (`channel_expert_tiny.json`) has widths 24 and 13, not multiples
of the MX block 32.

The checkpoint tensors (`<w>.packed`, `<w>.scale`: hub layout `[out, in/2]` bytes and
`[out, in/32]` E8M0 codes, as float64) are compared exactly, so the tie rule, the scale rule,
the nibble order and the scale layout are each checked bit for bit; `y` under the expert's
tolerances. `bound_checks`: the quantization error of every leg's `y` against the
full-precision expert is within the proved bound (`errorBound`, below).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import ml_dtypes
import numpy as np
import torch

from difftest import numpy_ref as ref
from difftest.case import Case
from difftest.components.base import LowpCheck, load_module, rounded, t64, to_np, torch_config
from difftest.components.channel import ExpertComponent, situ_weights
from difftest.inputs import gaussian
from pybridge import adapter, moe

BLOCK = 32
E2M1_MAX = 6.0
#: the midpoints between consecutive E2M1 magnitudes
MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
#: 6 · 2^(c − 127) for the finite E8M0 codes c = 0…254 (exact in float64)
COVER = E2M1_MAX * np.ldexp(1.0, np.arange(255) - 127)
#: the projections: spec name, hub name (their checkpoint tensors' prefix)
WEIGHTS = (("gateWeight", "w1"), ("upWeight", "w3"), ("downWeight", "w2"))
#: the Lean theorem the bound check evaluates (lean/KimiK3/Microscaling/Expert.lean)
BOUND_THEOREM = "KimiK3.Microscaling.MXFP4Expert.abs_forward_quantize_sub_le"


@dataclasses.dataclass(frozen=True)
class Quantized:
    """One weight quantized by the NumPy leg: hub-layout bytes and scale codes, the per-entry
    scale and the dequantized weight in the spec layout `[in, out]`."""

    packed: np.ndarray
    scale: np.ndarray
    scale_io: np.ndarray
    weight_io: np.ndarray


def quantize_np(w_io: np.ndarray) -> Quantized:
    """difftest's MXFP4 quantization of a spec weight `[in, out]`: blocks of 32 along the input
    axis (the rows of the hub's `[out, in]`)."""
    w = np.ascontiguousarray(np.asarray(w_io, dtype=np.float64).T)  # hub [out, in]
    out, n = w.shape
    amax = np.abs(w).reshape(out, n // BLOCK, BLOCK).max(-1)
    scale = np.minimum(np.searchsorted(COVER, amax, side="left"), 254)  # first code with amax ≤ 6 s
    s = np.repeat(np.ldexp(1.0, scale - 127), BLOCK, axis=-1)
    codes = (w / s).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)  # round to nearest even, saturating
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    low, high = packed & 0x0F, packed >> 4
    unpacked = np.stack([low, high], axis=-1).reshape(out, n)
    weight = unpacked.view(ml_dtypes.float4_e2m1fn).astype(np.float64) * s
    return Quantized(packed.astype(np.float64), scale.astype(np.float64), s.T.copy(), weight.T.copy())


def error_bound(x_nd: np.ndarray, q: dict[str, Quantized], down_io: np.ndarray, gate_cap: float, up_cap: float) -> np.ndarray:
    """The proved bound on each output's quantization error, `MXFP4Expert.errorBound` of
    `BOUND_THEOREM`: `Σ_j (c_g c_u sD_jk + |D_jk| ((1 + c_g/4) c_u Σ_i |x_i| sG_ij + c_g Σ_i |x_i| sU_ij))`,
    `s` the block scales of the ceil-rule quantization, `D` the full-precision down weight; rows
    `[N, out]`."""
    ax = np.abs(x_nd)
    hidden = (1 + gate_cap / 4) * up_cap * (ax @ q["gateWeight"].scale_io) + gate_cap * (ax @ q["upWeight"].scale_io)
    return gate_cap * up_cap * q["downWeight"].scale_io.sum(0)[None, :] + hidden @ np.abs(down_io)


def blocks(rng: np.random.Generator, w_io: np.ndarray, exps: np.ndarray,
           body: Callable[[np.random.Generator], np.ndarray]) -> np.ndarray:
    """`w_io` with every block (32 rows of one column) replaced by `body(rng) · 2^exps[b, k]`
    (`body` gives 32 values in units of the block's scale)."""
    out = w_io.copy()
    for b in range(w_io.shape[0] // BLOCK):
        for k in range(w_io.shape[1]):
            out[b * BLOCK : (b + 1) * BLOCK, k] = np.ldexp(body(rng), int(exps[b, k]))
    return out


def midpoint_block(rng: np.random.Generator) -> np.ndarray:
    """Random signed E2M1 midpoints, with one entry ±6 (the block maximum: scale exactly 1)."""
    v = rng.choice(MIDPOINTS, BLOCK) * rng.choice([-1.0, 1.0], BLOCK)
    v[rng.integers(BLOCK)] = 6.0 * rng.choice([-1.0, 1.0])
    return v


def max_block(rng: np.random.Generator) -> np.ndarray:
    """Every entry ±6; half the blocks with one entry ±7 instead (the ceil rule doubles the scale;
    the OCP floor rule would clip it, `ocpFloor_range_counterexample`)."""
    v = 6.0 * rng.choice([-1.0, 1.0], BLOCK)
    if rng.random() < 0.5:
        v[rng.integers(BLOCK)] = 7.0 * np.sign(v[0])
    return v


def extreme(rng: np.random.Generator, w_io: np.ndarray, name: str) -> np.ndarray:
    """`w_io` rescaled block by block to the maximum 6·2^(c−127) of a random extreme code c:
    0…3 or 251…254 in alternate columns of the gate and up weights (opposite ones), 251…254 in
    the down weight (so the outputs stay of moderate size)."""
    nb, out = w_io.shape[0] // BLOCK, w_io.shape[1]
    low = (np.arange(out) % 2 == (0 if name == "gateWeight" else 1)) & (name != "downWeight")
    codes = np.where(low, rng.integers(0, 4, (nb, out)), rng.integers(251, 255, (nb, out)))
    u = w_io.reshape(nb, BLOCK, out)
    return (u / np.abs(u).max(1, keepdims=True) * COVER[codes][:, None, :]).reshape(w_io.shape)


def saturated(rng: np.random.Generator, d: int, h: int, n: int) -> dict[str, np.ndarray]:
    """SiTU saturated at ±c_g c_u with exactly representable gate and up weights (all +6·2^-4 and
    ±6·2^-1 per column; tokens of equal positive entries): every hidden unit is ±100. Each down
    block is 0.25·s at every entry (the tie that rounds to 0: error s/4) but one 6·s, signed as
    its hidden unit, so the error terms add up: the bound's first term is nearly attained
    (error/bound about 0.1, against about 1e-3 for the other kinds)."""
    sign_h = rng.choice([-1.0, 1.0], h)
    gate = np.full((d, h), 6.0 * 2.0**-4)
    up = np.full((d, h), 6.0 * 2.0**-1) * sign_h
    down = np.ldexp(0.25 * np.ones((h, d)), rng.integers(-6, -3, (h // BLOCK, d)).repeat(BLOCK, 0))
    for b in range(h // BLOCK):
        top = b * BLOCK + rng.integers(BLOCK, size=d)
        down[top, np.arange(d)] *= 24.0  # 6·s
    x = np.ones((n, d)) * np.linspace(1.0, 1.5, n)[:, None]
    return {"gateWeight": gate, "upWeight": up, "downWeight": down * sign_h[:, None], "x": x}


class MXFP4ExpertComponent(ExpertComponent):
    name = "mxfp4_expert"
    summary = ("SiTU expert with MXFP4 weights (ceil rule, ties to even) on N tokens: checkpoint bytes exact, "
               "y at the dequantized weights (Lean Expert.forward), error ≤ the proved bound")
    kinds = {
        "random": "Gaussian weights and unit-size tokens",
        "midpoint": "every weight on an E2M1 midpoint (a tie) of its block, each block's maximum ±6·s",
        "max_block": "max-magnitude blocks: all ±6·s, half with one ±7·s (the scale doubles; 3.5 ties)",
        "zero_block": "Gaussian weights with all-zero blocks (scale code 0, some −0.0 entries)",
        "extreme_scale": "block maxima 6·2^(c−127) at E8M0 codes 0…3 and 251…254 (float64 only: "
                         "outside float32's range, so no low-precision checks)",
        "saturated": "SiTU saturated at ±c_g·c_u and down weights at the s/4 tie, errors aligned: the "
                     "proved bound nearly attained (error/bound ≈ 0.1)",
    }
    default_sizes = {"d": 64, "h": 32, "N": 3}
    graph_file = None
    #: low precision skips these kinds (their weights do not fit float32)
    lowp_skip_kinds = ("extreme_scale",)

    def sample(self, rng, kind, sizes):
        d, h, n = sizes["d"], sizes["h"], sizes["N"]
        if d % BLOCK or h % BLOCK:
            raise ValueError(f"the MXFP4 expert needs d and h multiples of {BLOCK}, got d={d}, h={h}")
        if kind == "saturated":
            return saturated(rng, d, h, n)
        w = situ_weights(rng, d, h, d, (), 1.0)
        t = {"gateWeight": w["gate"], "upWeight": w["up"], "downWeight": w["down"]}
        if kind in ("midpoint", "max_block"):
            body = midpoint_block if kind == "midpoint" else max_block
            for name, lo in (("gateWeight", -6), ("upWeight", -6), ("downWeight", -7)):
                shape = t[name].shape
                t[name] = blocks(rng, t[name], rng.integers(lo, lo + 3, (shape[0] // BLOCK, shape[1])), body)
        elif kind == "zero_block":
            for name, col in (("gateWeight", 0), ("upWeight", 3), ("downWeight", 1)):
                t[name][:BLOCK, col] = 0.0
                t[name][1:BLOCK:5, col] = -0.0
        elif kind == "extreme_scale":
            for name in ("gateWeight", "upWeight", "downWeight"):
                t[name] = extreme(rng, t[name], name)
        return {**t, "x": gaussian(rng, (n, d), 2.0)}

    def shrink_sizes(self, sizes):
        smaller = [{"d": BLOCK, "h": BLOCK, "N": 1}] if (sizes["d"], sizes["h"]) != (BLOCK, BLOCK) else []
        return smaller + ([{**sizes, "N": 1}] if sizes["N"] > 1 else [])

    def graph_fits(self, case):
        return False

    # --- the legs ----------------------------------------------------------------------------------
    def module(self, case: Case, dtype: torch.dtype, device: str) -> moe.MXFP4SituExpert:
        d, h = case.sizes["d"], case.sizes["h"]
        cfg = torch_config()
        spec = {k: t64(case.tensors[k]) for k, _ in WEIGHTS}
        hub = adapter.to_hub(adapter.expert_rules(d, h, quantized=True), spec)
        return load_module(moe.MXFP4SituExpert(d, h, cfg.situ_gate_cap, cfg.situ_up_cap), hub, dtype, device)

    def torch_outputs(self, case, dtype, device):
        """`torch`: dequantize-then-matmul, with the checkpoint tensors it quantized;
        `torch-blockwise`: the same tensors, block products scaled per block."""
        ex = self.module(case, dtype, device)
        x = t64(case.tensors["x"]).to(device=device, dtype=dtype)
        with torch.no_grad():
            y = ex(x)
            y_blockwise = ex.set_blockwise(True)(x)
        out = {"y": to_np(y)}
        for spec, hub in WEIGHTS:
            layer = getattr(ex, hub)
            out[f"{spec}.packed"] = layer.weight_packed.cpu().numpy().astype(np.float64)
            out[f"{spec}.scale"] = layer.weight_scale.cpu().numpy().astype(np.float64)
        return {"torch": out, "torch-blockwise": {"y": to_np(y_blockwise)}}

    def quantized(self, case: Case) -> dict[str, Quantized]:
        return {k: quantize_np(case.tensors[k]) for k, _ in WEIGHTS}

    def numpy_outputs(self, case):
        q = self.quantized(case)
        y = ref.expert(case.tensors["x"], *(q[k].weight_io for k, _ in WEIGHTS), self.own_config())
        out = {"y": y}
        for k, _ in WEIGHTS:
            out[f"{k}.packed"], out[f"{k}.scale"] = q[k].packed, q[k].scale
        return out

    def graph_outputs(self, case, device):
        raise NotImplementedError("no expert export at MX-aligned widths")

    def lean_case(self, case):
        """The `expert` template's case at the NumPy leg's dequantized weights, first token."""
        q = self.quantized(case)
        return dataclasses.replace(case, tensors={**{k: q[k].weight_io for k, _ in WEIGHTS}, "x": case.tensors["x"][0]})

    def exact_outputs(self):
        return tuple(f"{k}.{part}" for k, _ in WEIGHTS for part in ("packed", "scale"))

    def lowp_checks(self, case, dtype, device):
        if case.kind in self.lowp_skip_kinds:
            return []
        rc = rounded(case, dtype)
        want, model = self.numpy_outputs(rc)["y"], self.error_model(case.sizes)
        got = self.torch_outputs(rc, dtype, device)
        return [LowpCheck(impl, "numpy", "y", got[impl]["y"], want, model) for impl in ("torch", "torch-blockwise")]

    # --- the proved bound ----------------------------------------------------------------------------
    def bound_checks(self, case: Case, f64: dict[str, dict[str, np.ndarray]]) -> list:
        """Every leg's `y` (the MXFP4 expert) against the full-precision expert (NumPy, the case's
        weights): `|y − y_full| ≤ errorBound + slack` per token and output, the slack the float64
        evaluation error of the two experts (`tol64` of each one's largest output); the error is
        reported as `max (|y − y_full| / (bound + slack))` under tolerance 1 (the report plots it)."""
        from difftest.compare import Comparison, tolerance  # compare imports the components

        t, cfg = case.tensors, self.own_config()
        q = self.quantized(case)
        x = t["x"]
        y_full = ref.expert(x, t["gateWeight"], t["upWeight"], t["downWeight"], cfg)
        bound = error_bound(x, q, t["downWeight"], cfg["gate_cap"], cfg["up_cap"])
        tol64 = tolerance(self.error_model(case.sizes), "float64")
        checks = []
        for impl, outs in f64.items():
            if "y" not in outs:
                continue
            y = outs["y"][None] if impl == "lean" else outs["y"]  # the Lean leg evaluates token 0
            rows = slice(0, y.shape[0])
            slack = tol64 * (np.abs(y_full[rows]).max(-1, keepdims=True) + np.abs(y).max(-1, keepdims=True))
            diff = np.abs(y - y_full[rows])
            ratio = diff / (bound[rows] + slack)
            idx = np.unravel_index(int(np.argmax(ratio)), ratio.shape) if np.isfinite(ratio).all() else (0, 0)
            worst = float(ratio.max()) if np.isfinite(ratio).all() else np.inf
            checks.append(Comparison(self.name, case.index, case.kind, "float64", impl, "bound", "y", worst, 1.0,
                                     worst <= 1.0, [int(i) for i in idx], float(y[idx]), float(y_full[rows][idx]),
                                     float(diff[idx]), f"|y − y_full| / errorBound ({BOUND_THEOREM}); "
                                     f"bound {float(bound[rows][idx]):.3e}"))
        return checks

