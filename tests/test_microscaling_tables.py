"""Exhaustive code tables of the microscaling formats: the Lean decoders, encoders and scale rules
(`lean/KimiK3/Microscaling/`) against torch, torchao and ml_dtypes, code by code.

The Lean leg is `tests/lean/MicroscalingTables.lean`: the library's own definitions
(`Microscaling/Tables.lean`, at `Float`) evaluated in one bundle, one JSON line per table. The
reference legs decode and encode through the libraries' casts; their inputs are enumerated here,
independently, from ml_dtypes' decoded values, and each encoding table must list exactly those
inputs.

The conventions are the Lean library's (`lean/KimiK3/Microscaling/README.md`): round to
nearest, ties to even, saturating at the largest finite magnitude; NaN/infinity codes excluded;
the scalar field has one zero. Every place where a library differs is named in `DIFFERENCES`
and asserted exactly (a new or vanished difference fails the test):

* `torch_fp4_no_cast`: torch 2.13's `float4_e2m1fn_x2` has no CPU cast kernel (`copy_kernel` not
  implemented), so the torch-side E2M1 leg is torchao's `f4_unpacked_to_f32`/`f32_to_f4_unpacked`;
* `negative_zero_input`: `−0.0` encodes to the `+0` code in Lean (one zero; `encode` tests
  `t < 0`), to the negative-zero code in the libraries;
* `e4m3_overflow_nan`: ml_dtypes casts E4M3 inputs beyond the last midpoint to NaN; Lean and
  torch saturate to ±448;
* `e5m2_overflow_inf`: torch and ml_dtypes cast E5M2 inputs beyond the last midpoint to ±inf;
  Lean saturates to ±57344;
* `e8m0_ties_up`: at a midpoint `3 · 2^(e − 128)` between E8M0 codes `e` and `e + 1`, torch and
  ml_dtypes pick `e + 1` (round half up); Lean picks the even code, so they differ exactly where
  `e` is even (`E8M0.encode_three`: 3 → code 128 = 2.0, torch 4.0);
* `e8m0_overflow_nan`: `2^128` casts to the NaN code 255 in torch and ml_dtypes; Lean saturates
  to code 254.
"""

from __future__ import annotations

import json
import math
import struct
from fractions import Fraction
from functools import lru_cache

import ml_dtypes
import numpy as np
import pytest
import torch
from torchao.prototype.mx_formats.kernels import f4_unpacked_to_f32, f32_to_f4_unpacked

from lean_checks import CHECKS, run_check_file

#: element formats: ml_dtypes type, torch type (None: no torch cast), number of codes
FORMATS = {
    "e2m1": (ml_dtypes.float4_e2m1fn, None, 16),
    "e4m3": (ml_dtypes.float8_e4m3fn, torch.float8_e4m3fn, 256),
    "e5m2": (ml_dtypes.float8_e5m2, torch.float8_e5m2, 256),
}
#: the E8M0 block scales the element encodings are run at (2^0, 2^-7, 2^8)
SCALES = (127, 120, 135)
DIFFERENCES = {"torch_fp4_no_cast", "negative_zero_input", "e4m3_overflow_nan", "e5m2_overflow_inf",
               "e8m0_ties_up", "e8m0_overflow_nan"}


@lru_cache(maxsize=1)
def lean_tables() -> dict[str, dict]:
    """The JSON lines printed by `tests/lean/MicroscalingTables.lean` (whose `#guard`s pass), by name."""
    tables = {}
    for message in run_check_file(CHECKS / "MicroscalingTables.lean"):
        if message.severity == "information" and message.text.lstrip().startswith("{"):
            doc = json.loads(message.text)
            tables[doc["check"]] = doc
    return tables


def from_bits(bits: int | None) -> float | None:
    return None if bits is None else struct.unpack("<d", struct.pack("<Q", bits))[0]


def bits_of(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def mld_decode(name: str) -> np.ndarray:
    """Every code of a format decoded by ml_dtypes, as float64."""
    dtype, _, count = FORMATS[name]
    return np.arange(count, dtype=np.uint8).view(dtype).astype(np.float64)


def torch_decode(name: str) -> np.ndarray:
    """Every code decoded by torch (E2M1: torchao's unpacked-fp4 decoder), as float64."""
    _, dtype, count = FORMATS[name]
    codes = torch.arange(count, dtype=torch.uint8)
    if dtype is None:
        return f4_unpacked_to_f32(codes).double().numpy()
    return codes.view(dtype).double().numpy()


def same_value(lean: float | None, lib: float) -> bool:
    """Lean's value (None: an excluded NaN/infinity code) equals a library's, bit for bit."""
    if lean is None:
        return not math.isfinite(lib)
    return math.isfinite(lib) and bits_of(lean) == bits_of(float(lib))


@pytest.mark.lean
@pytest.mark.checks
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_decode_table_matches_torch_and_ml_dtypes(name: str) -> None:
    values = [from_bits(b) for b in lean_tables()[f"decode_{name}"]["bits"]]
    assert len(values) == FORMATS[name][2]
    for lib, decoded in (("ml_dtypes", mld_decode(name)), ("torch", torch_decode(name))):
        bad = [c for c, (v, w) in enumerate(zip(values, decoded)) if not same_value(v, w)]
        assert not bad, f"{name}: Lean and {lib} decode codes {bad} differently"
    excluded = [c for c, v in enumerate(values) if v is None]
    assert excluded == {"e2m1": [], "e4m3": [0x7F, 0xFF], "e5m2": [*range(0x7C, 0x80), *range(0xFC, 0x100)]}[name]


@pytest.mark.lean
@pytest.mark.checks
def test_e8m0_decode_table_matches_torch_and_ml_dtypes() -> None:
    values = [from_bits(b) for b in lean_tables()["decode_e8m0"]["bits"]]
    assert values[:255] == [math.ldexp(1.0, e - 127) for e in range(255)] and values[255] is None
    codes = np.arange(256, dtype=np.uint8)
    for lib, decoded in (("ml_dtypes", codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float64)),
                         ("torch", torch.from_numpy(codes).view(torch.float8_e8m0fnu).double().numpy())):
        bad = [c for c, (v, w) in enumerate(zip(values, decoded)) if not same_value(v, w)]
        assert not bad, f"e8m0: Lean and {lib} decode codes {bad} differently"


def test_torch_has_no_fp4_cast_kernel() -> None:
    """`torch_fp4_no_cast`: why the torch-side E2M1 leg is torchao's decoder and encoder."""
    packed = torch.arange(16, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    with pytest.raises(RuntimeError, match="not implemented"):
        packed.to(torch.float32)


@pytest.mark.lean
@pytest.mark.checks
@pytest.mark.parametrize("name", [*sorted(FORMATS), "e8m0"])
def test_decode_then_encode_is_the_identity_on_finite_codes(name: str) -> None:
    """`encode_decode`: every finite code comes back, except negative zero, which encodes to +0."""
    codes = lean_tables()[f"roundtrip_{name}"]["codes"]
    values = lean_tables()[f"decode_{name}"]["bits"]
    finite = [c for c in range(len(codes)) if values[c] is not None]
    neg_zero = {"e2m1": 8, "e4m3": 0x80, "e5m2": 0x80}.get(name)
    assert [codes[c] for c in finite] == [0 if c == neg_zero else c for c in finite]
    assert all(codes[c] is None for c in range(len(codes)) if c not in finite)
    assert len(finite) == {"e2m1": 16, "e4m3": 254, "e5m2": 248, "e8m0": 255}[name]


def element_probes(name: str) -> list[float]:
    """The probes of `Tables.elementProbe`, from ml_dtypes' values: each finite magnitude and the
    midpoint above it (up to the largest), then twice the largest; then all of them negated."""
    decoded = mld_decode(name)
    mags = sorted({float(v) for v in decoded if math.isfinite(v) and v >= 0})
    probes = []
    for lo, hi in zip(mags, mags[1:]):
        probes += [lo, (lo + hi) / 2]
    probes += [mags[-1], 2 * mags[-1]]
    return probes + [-p for p in probes]


def library_codes(name: str, x_over_s: np.ndarray) -> dict[str, list[int]]:
    """The codes ml_dtypes and torch (E2M1: torchao) cast `x / s` to."""
    dtype, tdtype, _ = FORMATS[name]
    got = {"ml_dtypes": x_over_s.astype(dtype).view(np.uint8).astype(int).tolist()}
    t = torch.from_numpy(x_over_s.astype(np.float32))
    got["torch"] = (f32_to_f4_unpacked(t) if tdtype is None else t.to(tdtype).view(torch.uint8)).int().tolist()
    return got


def is_nan_code(name: str, code: int) -> bool:
    value = float(mld_decode(name)[code])
    return math.isnan(value)


def is_inf_code(name: str, code: int) -> bool:
    return math.isinf(float(mld_decode(name)[code]))


@pytest.mark.lean
@pytest.mark.checks
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_element_encodings_match_libraries_except_named(name: str, scale: int) -> None:
    table = lean_tables()[f"encode_{name}_s{scale}"]
    s = math.ldexp(1.0, scale - 127)
    probes = element_probes(name)
    assert table["scale"] == scale
    assert table["inputs"] == [bits_of(p * s) for p in probes], "Lean encoded other inputs than the enumeration"
    lean = table["codes"]
    half = len(probes) // 2
    sign = FORMATS[name][2] // 2  # the sign bit's weight
    max_code = max(c for c in range(sign) if math.isfinite(mld_decode(name)[c]))
    seen = set()
    x = np.array(probes) * s  # exact: the probes times a power of two
    for lib, codes in library_codes(name, x / s).items():
        for j, (p, a, b) in enumerate(zip(probes, lean, codes)):
            if a == b:
                continue
            if p == 0 and math.copysign(1, p) < 0 and a == 0 and b == sign:
                seen.add("negative_zero_input")
            elif name == "e4m3" and lib == "ml_dtypes" and abs(p) > 448 and a == max_code + (j >= half) * sign \
                    and is_nan_code(name, b):
                seen.add("e4m3_overflow_nan")
            elif name == "e5m2" and abs(p) > 57344 and a == max_code + (j >= half) * sign and is_inf_code(name, b):
                seen.add("e5m2_overflow_inf")
            else:
                pytest.fail(f"{name} at scale 2^{scale - 127}: input {p} → Lean code {a}, {lib} code {b}")
    assert seen == {"negative_zero_input"} | {"e4m3": {"e4m3_overflow_nan"}, "e5m2": {"e5m2_overflow_inf"}}.get(name, set())
    # the tie rule is exercised: every odd probe is a midpoint, and Lean sends it to an even code
    ties = [lean[j] for j in range(1, half - 2, 2)]
    assert ties and all(c % 2 == 0 for c in ties)


def e8m0_probes() -> list[float]:
    """The probes of `Tables.e8m0Probe`: 2^(e−127) and the midpoint 3 · 2^(e−128) above it, then
    2^−128 and 2^128."""
    probes = []
    for e in range(255):
        probes.append(math.ldexp(1.0, e - 127))
        if e < 254:
            probes.append(math.ldexp(3.0, e - 128))
    return probes + [math.ldexp(1.0, -128), math.ldexp(1.0, 128)]


@pytest.mark.lean
@pytest.mark.checks
def test_e8m0_encodings_match_libraries_except_named() -> None:
    table = lean_tables()["encode_e8m0"]
    probes = e8m0_probes()
    assert table["inputs"] == [bits_of(p) for p in probes]
    lean = table["codes"]
    # the stated rule, computed here: values exact, ties to the even code, saturation at 0 and 254
    want = [j // 2 if j % 2 == 0 else (j // 2 if (j // 2) % 2 == 0 else j // 2 + 1) for j in range(509)] + [0, 254]
    assert lean == want
    x = np.array(probes)
    with np.errstate(over="ignore"):  # 2^128 overflows float8_e8m0fnu (the named difference)
        mld = x.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8).astype(int).tolist()
    libs = {"ml_dtypes": mld,
            "torch": torch.from_numpy(x).to(torch.float8_e8m0fnu).view(torch.uint8).int().tolist()}
    seen = set()
    for lib, codes in libs.items():
        for j, (a, b) in enumerate(zip(lean, codes)):
            if a == b:
                continue
            if j < 509 and j % 2 == 1 and (j // 2) % 2 == 0 and a == j // 2 and b == j // 2 + 1:
                seen.add("e8m0_ties_up")
            elif j == 510 and a == 254 and b == 255:
                seen.add("e8m0_overflow_nan")
            else:
                pytest.fail(f"e8m0: input {probes[j]} → Lean code {a}, {lib} code {b}")
    assert seen == {"e8m0_ties_up", "e8m0_overflow_nan"}


def scale_probes() -> list[float]:
    """The probes of `Tables.scaleProbe`: v · 2^(i − 3), v in 1/2 … 6 by 1/4, 6.5, 7.5; i < 8."""
    values = [(k + 2) / 4 for k in range(23)] + [6.5, 7.5]
    return [v * math.ldexp(1.0, i - 3) for i in range(8) for v in values]


def ocp_floor_code(amax: float) -> int:
    """OCP MX v1.0 §6.3: 127 + ⌊log₂ amax⌋ − emax, emax = 2 for E2M1 (frexp: amax = m 2^e, m ∈ [½, 1))."""
    return 127 + (math.frexp(amax)[1] - 1) - 2


def ceil_code(amax: float) -> int:
    """The least code with amax ≤ 6 · 2^(code − 127), exactly (fractions)."""
    code = 0
    while Fraction(amax) > 6 * Fraction(2) ** (code - 127):
        code += 1
    return code


@pytest.mark.lean
@pytest.mark.checks
def test_scale_rules_match_their_formulas_and_torchao() -> None:
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    probes = scale_probes()
    floor_t, ceil_t = lean_tables()["scale_ocpFloor_e2m1"], lean_tables()["scale_ceil_e2m1"]
    assert floor_t["inputs"] == ceil_t["inputs"] == [bits_of(p) for p in probes]
    assert floor_t["codes"] == [ocp_floor_code(p) for p in probes]
    assert ceil_t["codes"] == [ceil_code(p) for p in probes]
    # torchao's FLOOR mode is the OCP rule: one block of 32 per probe, amax first
    blocks = torch.zeros(len(probes), 32)
    blocks[:, 0] = torch.tensor(probes)
    scale, _ = to_mx(blocks, torch.float4_e2m1fn_x2, 32, ScaleCalculationMode.FLOOR)
    assert scale.view(torch.uint8).flatten().int().tolist() == floor_t["codes"]
    # the range hypothesis |x| ≤ 6 s: the ceil rule always meets it, the OCP rule not (amax/s ∈ [4, 8))
    ratios = [Fraction(p) / Fraction(2) ** (c - 127) for p, c in zip(probes, floor_t["codes"])]
    assert all(4 <= r < 8 for r in ratios) and any(r > 6 for r in ratios)
    assert all(Fraction(p) <= 6 * Fraction(2) ** (c - 127) for p, c in zip(probes, ceil_t["codes"]))


def test_compressed_tensors_scale_rule_clips_below_seven_scales() -> None:
    """compressed-tensors (the `mxfp4-pack-quantized` format's library) rounds amax to a power of
    two at E2M1's mantissa width before the OCP formula: it differs from `ocpFloor` exactly where
    amax's significand is in [1.75, 2), and amax/s ∈ [3.5, 7), so `|x| ≤ 7 s` holds
    (`quantizeMXFP4Block_error_le_of_abs_le_seven` applies) while `|x| ≤ 6 s` does not."""
    from compressed_tensors.quantization.utils.mxfp_utils import generate_mx_scales

    probes = scale_probes()
    codes = generate_mx_scales(torch.tensor(probes, dtype=torch.float32)).int().tolist()
    for p, c in zip(probes, codes):
        significand = 2 * math.frexp(p)[0]  # in [1, 2)
        assert c == ocp_floor_code(p) + (significand >= 1.75), (p, c)
    ratios = [Fraction(p) / Fraction(2) ** (c - 127) for p, c in zip(probes, codes)]
    assert all(Fraction(7, 2) <= r < 7 for r in ratios) and any(r > 6 for r in ratios)


def test_named_differences_are_the_documented_ones() -> None:
    assert DIFFERENCES == {"torch_fp4_no_cast", "negative_zero_input", "e4m3_overflow_nan", "e5m2_overflow_inf",
                           "e8m0_ties_up", "e8m0_overflow_nan"}
    assert all(f"`{d}`" in __doc__ for d in DIFFERENCES)
