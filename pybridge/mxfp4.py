"""MXFP4 weights (OCP Microscaling v1.0, k3-spec §2.13 and §7) in the released checkpoint format.

A weight `[out, in]` (hub nn.Linear layout) is quantized in groups of `GROUP` = 32 consecutive
entries of a row (the spec's `[in, out]` blocks along the input axis, Lean `MXMatrix`). Each
group shares one E8M0 scale `s = 2^(c − 127)` (code c ∈ 0…254; 255 is NaN) and each entry is an
E2M1 code (bit 3 the sign, bits 0–2 the magnitude index into {0, ½, 1, 1½, 2, 3, 4, 6}).

The checkpoint format is compressed-tensors' `mxfp4-pack-quantized` (`MXFP4PackedCompressor`):
`<module>.weight_packed` uint8 `[out, in/2]`, entry `2j` in the LOW nibble of byte j and entry
`2j+1` in the high nibble (`pack_fp4_to_uint8` / `unpack_fp4_from_uint8`), and
`<module>.weight_scale` uint8 `[out, in/32]`, the E8M0 codes (`compress_mx_scale`). The
`quantization_config` of `config.json` is `quantization_config()`.

Rules (the Lean development's, `lean/KimiK3/Microscaling/`):
* elements: round to nearest, ties to the even code (the midpoints 0.25, 0.75, 1.25, 1.75, 2.5,
  3.5, 5 go to 0, 1, 1, 2, 2, 4, 4), saturating at ±6; the sign bit is the input's (−0.0 and small
  negatives give code 8, as in compressed-tensors and ml_dtypes);
* scale: the ceil rule `s = 2^⌈log₂(amax / 6)⌉`, the smallest power of two with `amax ≤ 6 s`
  (Lean `ScaleRule.ceil`: never clips, `ceil_range`; the proved MXFP4 error bounds assume it),
  code 0 for an all-zero group. compressed-tensors' own observer rounds amax's mantissa first
  (`generate_mx_scales`) and can clip; the OCP floor rule `2^(⌊log₂ amax⌋ − 2)` can clip too.

Why not call compressed-tensors here: its decoder returns bfloat16 (`decompress_mx_scale`), so
codes ≥ 253 overflow to inf and the NaN code 255 decodes silently to inf; and importing it takes
tens of seconds (it imports its quantization stack). pybridge decodes exactly in float64 and
raises on code 255; tests tie its decode to compressed-tensors' bit for bit where that is finite,
and its quantizer to compressed-tensors' at the ceil-rule scales. torch's `float4_e2m1fn_x2` has
no CPU conversion in torch 2.13, so it cannot serve as the decoder either.

Each fast (vectorized torch) function has a plain per-entry reference beside it
(`*_reference`); tests tie the two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

GROUP = 32
FORMAT = "mxfp4-pack-quantized"
E8M0_BIAS = 127
E8M0_MAX_CODE = 254  # 255 is NaN
E8M0_NAN = 255
E2M1_MAX = 6.0
#: E2M1 magnitudes by index (code & 7)
E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
#: the midpoints between consecutive magnitudes; a tie goes to the even index
E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def quantization_config() -> dict:
    """The `quantization_config` a quantized checkpoint's config.json carries: compressed-tensors'
    schema (k3-spec §7 field names), routed experts' w1/w2/w3 targeted."""
    return {
        "quant_method": "compressed-tensors",
        "format": FORMAT,
        "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": [r"re:.*block_sparse_moe\.experts\.\d+\.w[123]$"],
            "weights": {"num_bits": 4, "type": "float", "strategy": "group", "group_size": GROUP,
                        "symmetric": True, "dynamic": False, "scale_dtype": "torch.uint8"},
            "input_activations": None, "output_activations": None,
        }},
        "ignore": [],
    }


#: `quantization_config.config_groups.group_0.weights` fields and the values pybridge decodes
WEIGHT_ARGS = {"num_bits": 4, "type": "float", "strategy": "group", "group_size": GROUP, "symmetric": True,
               "scale_dtype": "torch.uint8"}


def config_problems(raw: dict) -> list[str] | None:
    """None when `raw` (a config.json's contents) has no `quantization_config`; otherwise the
    fields that differ from the MXFP4 format pybridge decodes (empty: MXFP4, routed experts)."""
    q = raw.get("quantization_config")
    if q is None:
        return None
    if not isinstance(q, dict):
        return [f"field 'quantization_config' must be an object, got {type(q).__name__}"]
    if q.get("format") != FORMAT:
        return [(f"field 'quantization_config.format' must be '{FORMAT}' (the only quantized format pybridge "
                 f"decodes), got {q.get('format')!r}")]
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or set(groups) != {"group_0"} or not isinstance(groups["group_0"], dict):
        return ["field 'quantization_config.config_groups' must hold exactly one group, 'group_0'"]
    weights = groups["group_0"].get("weights")
    if not isinstance(weights, dict):
        return ["field 'quantization_config.config_groups.group_0.weights' must be an object"]
    return [f"field 'quantization_config.config_groups.group_0.weights.{k}' must be {v!r}, got {weights.get(k)!r}"
            for k, v in WEIGHT_ARGS.items() if weights.get(k) != v]


# --- E2M1 and E8M0 codes ------------------------------------------------------------------------

def e2m1_value_reference(code: int) -> float:
    """The E2M1 code's value from its bit fields (sign s, exponent e, mantissa m; bias 1):
    e = 0 is subnormal, `m/2`; otherwise `2^(e−1) (1 + m/2)`."""
    s, e, m = code >> 3 & 1, code >> 1 & 3, code & 1
    mag = m * 0.5 if e == 0 else 2.0 ** (e - 1) * (1 + m / 2)
    return -mag if s else mag


def scale_value_reference(code: int) -> float:
    """The E8M0 code's value `2^(code − 127)` (255: NaN, an error)."""
    if not 0 <= code <= E8M0_MAX_CODE:
        raise ValueError(f"E8M0 code {code} is not a finite scale (0…254; 255 is NaN)")
    return math.ldexp(1.0, code - E8M0_BIAS)


def e2m1_code_reference(t: float) -> int:
    """E2M1 round to nearest, ties to even, saturating at ±6; the sign bit is `t`'s."""
    sign = 8 if math.copysign(1.0, t) < 0 else 0
    a = min(abs(t), E2M1_MAX)
    best = min(range(8), key=lambda i: (abs(E2M1_MAGNITUDES[i] - a), i % 2))
    return sign | best


def scale_code_reference(amax: float) -> int:
    """The ceil rule: the smallest code c ≤ 254 with amax ≤ 6 · 2^(c − 127) (254 if none)."""
    for c in range(E8M0_MAX_CODE + 1):
        if amax <= E2M1_MAX * math.ldexp(1.0, c - E8M0_BIAS):
            return c
    return E8M0_MAX_CODE


# --- fast paths ----------------------------------------------------------------------------------

def _e2m1_table(device: torch.device | str = "cpu") -> torch.Tensor:
    mags = torch.tensor(E2M1_MAGNITUDES, dtype=torch.float64, device=device)
    return torch.cat([mags, -mags])


def e2m1_codes(t: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (uint8) of `t`: round to nearest, ties to the even index, saturating at ±6.
    Index = the number of midpoints below |t|, plus one at a midpoint whose upper index is even."""
    a = t.abs().to(torch.float64)
    idx = torch.zeros(t.shape, dtype=torch.uint8, device=t.device)
    for k, mid in enumerate(E2M1_MIDPOINTS):
        up = (a > mid) | ((a == mid) & ((k + 1) % 2 == 0))
        idx += up.to(torch.uint8)
    return idx | (torch.signbit(t).to(torch.uint8) << 3)


def scale_codes(amax: torch.Tensor) -> torch.Tensor:
    """The ceil rule per group maximum (uint8 codes): with amax = m · 2^e, m ∈ [½, 1),
    amax ≤ 6 · 2^k iff k ≥ e − 3 (m ≤ ¾) or k ≥ e − 2 (m > ¾), exactly, with no division;
    clamped to 0…254; 0 for amax = 0."""
    m, e = torch.frexp(amax.to(torch.float64))
    k = e.to(torch.int64) - 3 + (m > 0.75).to(torch.int64)
    code = torch.clamp(k + E8M0_BIAS, 0, E8M0_MAX_CODE)
    return torch.where(amax == 0, torch.zeros_like(code), code).to(torch.uint8)


def expand_scales(scale_og: torch.Tensor) -> torch.Tensor:
    """Per-entry values `[out, in]` of group scales `[out, in/32]`: entry j of a row has the scale
    of group j // 32."""
    return scale_og.repeat_interleave(GROUP, dim=-1)


def pack_codes(codes_on: torch.Tensor) -> torch.Tensor:
    """Two codes per byte along the last axis: entry 2j in the low nibble, 2j+1 in the high."""
    c = codes_on.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack_codes(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of `pack_codes`: `[..., n/2]` bytes → `[..., n]` codes."""
    low, high = packed & 0x0F, packed >> 4
    return torch.stack([low, high], dim=-1).flatten(-2)


def decode_scales(scale: torch.Tensor) -> torch.Tensor:
    """E8M0 codes → `2^(c − 127)` in float64 (exact; code 255 must have been rejected)."""
    return torch.ldexp(torch.ones(scale.shape, dtype=torch.float64, device=scale.device),
                       scale.to(torch.int64) - E8M0_BIAS)


def dequantize(packed: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The weight `[out, in]` of `weight_packed [out, in/2]` and `weight_scale [out, in/32]`:
    computed exactly in float64 (an E2M1 value times a power of two), rounded once to `dtype`."""
    values = _e2m1_table(packed.device)[unpack_codes(packed).to(torch.int64)]
    return (values * expand_scales(decode_scales(scale))).to(dtype)


def blockwise_linear(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """`x @ dequantize(packed, scale).T` block by block, in `x`'s dtype: per output o and group g the
    dot product of x's group with the E2M1 values, times the group's scale, summed over groups
    (Lean `Block.dot_eq_scale_mul_sum`, the factorization blockwise MX kernels use). Its plain
    reference is dequantize-then-matmul (`dequantize`); the two agree up to the summation order."""
    out, groups = scale.shape
    values = _e2m1_table(packed.device)[unpack_codes(packed).to(torch.int64)].to(x.dtype).view(out, groups, GROUP)
    partial = torch.einsum("...gk,ogk->...og", x.reshape(*x.shape[:-1], groups, GROUP), values)
    return (partial * decode_scales(scale).to(x.dtype)).sum(-1)


def quantize(w_oi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(`weight_packed`, `weight_scale`) of a weight `[out, in]` (in a multiple of 32), ceil rule."""
    out, n = w_oi.shape
    if n % GROUP:
        raise ValueError(f"input width {n} is not a multiple of the MX group {GROUP}")
    w = w_oi.detach().to(torch.float64)
    if not bool(torch.isfinite(w).all()):
        raise ValueError("cannot quantize NaN or infinite weights")
    scale = scale_codes(w.abs().reshape(out, n // GROUP, GROUP).amax(-1))
    t = w / expand_scales(decode_scales(scale))  # exact: division by a power of two
    return pack_codes(e2m1_codes(t)), scale


# --- plain references --------------------------------------------------------------------------

def dequantize_reference(packed: Sequence[Sequence[int]], scale: Sequence[Sequence[int]]) -> list[list[float]]:
    """`dequantize`, one entry at a time from the bit fields."""
    rows = []
    for prow, srow in zip(packed, scale):
        codes = [c for byte in prow for c in (int(byte) & 0x0F, int(byte) >> 4)]
        rows.append([e2m1_value_reference(c) * scale_value_reference(int(srow[j // GROUP])) for j, c in enumerate(codes)])
    return rows


def quantize_reference(w: Sequence[Sequence[float]]) -> tuple[list[list[int]], list[list[int]]]:
    """`quantize`, one group and one entry at a time."""
    packed, scales = [], []
    for row in w:
        codes, srow = [], []
        for g in range(0, len(row), GROUP):
            block = [float(v) for v in row[g : g + GROUP]]
            c = scale_code_reference(max(abs(v) for v in block))
            s = scale_value_reference(c)
            srow.append(c)
            codes += [e2m1_code_reference(v / s) for v in block]
        packed.append([codes[i] | codes[i + 1] << 4 for i in range(0, len(codes), 2)])
        scales.append(srow)
    return packed, scales


# --- checkpoint tensors ------------------------------------------------------------------------

def tensor_problems(name: str, packed: torch.Tensor, scale: torch.Tensor | None, where: str) -> list[str]:
    """What is wrong with the quantized pair `name` (`<module>.weight`) as read from `where`: a
    missing scale, dtypes other than uint8, a packed row that is not whole 32-entry groups (16
    bytes each), a scale shape other than `[out, in/32]`, the NaN scale code 255."""
    base = name.removesuffix(".weight")
    pname, sname = f"{base}.weight_packed", f"{base}.weight_scale"
    if scale is None:
        return [f"tensor '{pname}' (in {where}) has no scale tensor '{sname}'"]
    problems = [f"tensor '{n}' (in {where}) has dtype {t.dtype}, expected torch.uint8"
                for n, t in ((pname, packed), (sname, scale)) if t.dtype != torch.uint8]
    if packed.ndim != 2:
        return problems + [f"tensor '{pname}' (in {where}) has shape {list(packed.shape)}, expected [out, in/2]"]
    out, nbytes = packed.shape
    if nbytes % (GROUP // 2):
        problems.append(f"tensor '{pname}' (in {where}): packed rows of {nbytes} bytes are not whole "
                        f"{GROUP}-entry groups ({GROUP // 2} bytes each)")
    else:
        want = [out, 2 * nbytes // GROUP]
        if list(scale.shape) != want:
            problems.append(f"tensor '{sname}' (in {where}) has shape {list(scale.shape)}, expected {want} "
                            f"(one scale per {GROUP} entries of '{pname}' {list(packed.shape)})")
    if scale.dtype == torch.uint8 and bool((scale == E8M0_NAN).any()):
        at = [int(i) for i in (scale == E8M0_NAN).nonzero()[0]]
        problems.append(f"tensor '{sname}' (in {where}) holds the E8M0 NaN code 255 (first at {at})")
    return problems
