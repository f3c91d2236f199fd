"""pybridge.mxfp4: every code decoded against independent decoders (its bit-field reference,
ml_dtypes, torch's E8M0 dtype), the quantizer's fast path against its plain reference, the tie
and scale rules stated in the module (and k3-spec §2.13 / §7), and difftest's `mxfp4_expert`
bound check. compressed-tensors, the format's defining library, is `test_mxfp4_ct.py`."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from difftest import numpy_ref as ref
from difftest.components import COMPONENTS
from difftest.components.mxfp4 import WEIGHTS as NAMES
from difftest.components.mxfp4 import error_bound, quantize_np
from pybridge import mxfp4

torch.set_num_threads(1)
ALL_BYTES = torch.arange(256, dtype=torch.uint8)


def test_every_e2m1_code_decodes_as_its_bit_fields_and_ml_dtypes() -> None:
    """All 256 bytes = all 512 nibbles, low nibble first: the fast decoder, the bit-field
    reference and ml_dtypes' float4_e2m1fn agree bit for bit (signed zeros included)."""
    fast = mxfp4.dequantize(ALL_BYTES.reshape(8, 32), torch.full((8, 2), 127, dtype=torch.uint8))
    ref = torch.tensor(mxfp4.dequantize_reference(ALL_BYTES.reshape(8, 32).tolist(), [[127, 127]] * 8), dtype=torch.float64)
    codes = np.stack([np.arange(256) & 15, np.arange(256) >> 4], -1).reshape(-1).astype(np.uint8)
    lib = torch.from_numpy(codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)).reshape(8, 64)
    assert fast.view(torch.int64).equal(ref.view(torch.int64)) and fast.view(torch.int64).equal(lib.view(torch.int64))
    assert fast.numel() == 512
    assert [mxfp4.e2m1_value_reference(c) for c in range(8)] == list(mxfp4.E2M1_MAGNITUDES)


def test_every_finite_e8m0_code_decodes_as_torch_and_ml_dtypes() -> None:
    """Codes 0…254: 2^(c − 127) from pybridge, torch's float8_e8m0fnu and ml_dtypes, bit for
    bit; 255 is NaN in both libraries, and pybridge rejects it (`tensor_problems`)."""
    finite = ALL_BYTES[:255]
    ours = mxfp4.decode_scales(finite)
    assert ours.equal(finite.view(torch.float8_e8m0fnu).to(torch.float64))
    assert ours.numpy().tolist() == finite.numpy().view(ml_dtypes.float8_e8m0fnu).astype(np.float64).tolist()
    assert ours.tolist() == [mxfp4.scale_value_reference(c) for c in range(255)]
    assert math.isnan(float(ALL_BYTES[255:].view(torch.float8_e8m0fnu).to(torch.float64)))
    with pytest.raises(ValueError, match="255"):
        mxfp4.scale_value_reference(255)


def test_pack_puts_the_even_entry_in_the_low_nibble() -> None:
    codes = torch.tensor([[1, 2, 3, 4]], dtype=torch.uint8)
    assert mxfp4.pack_codes(codes).tolist() == [[0x21, 0x43]]
    assert mxfp4.unpack_codes(mxfp4.pack_codes(codes)).equal(codes)


def test_ties_go_to_the_even_code_and_large_values_saturate() -> None:
    """k3-spec §7: the midpoints 0.25 … 5 round to 0, 1, 1, 2, 2, 4, 4; beyond 6 saturates;
    the sign bit is kept (−0.0, and −0.25 → −0)."""
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=torch.float64)
    t = torch.cat([mids, -mids, torch.tensor([7.0, -100.0, -0.0, 2.7, 0.25 + 2**-40, 5 - 2**-40], dtype=torch.float64)])
    got = [mxfp4.e2m1_value_reference(int(c)) for c in mxfp4.e2m1_codes(t)]
    assert got[:7] == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    assert got[7:14] == [-0.0, -1.0, -1.0, -2.0, -2.0, -4.0, -4.0] and math.copysign(1, got[7]) < 0
    assert got[14:] == [6.0, -6.0, -0.0, 3.0, 0.5, 4.0] and math.copysign(1, got[16]) < 0
    # the report's worked example: 2.70 → 3.00, error 0.30
    assert abs(got[17] - 2.70) == pytest.approx(0.30)
    lib = t.numpy().astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    assert mxfp4.e2m1_codes(t).numpy().tolist() == lib.tolist()


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0, max_value=6 * 2.0**127, allow_subnormal=True))
def test_the_ceil_rule_is_the_smallest_covering_scale(amax: float) -> None:
    """`amax ≤ 6 s` (Lean `ceil_range`) and, above code 0, `6 s/2 < amax` (`ceil_minimal`)."""
    c = int(mxfp4.scale_codes(torch.tensor([amax], dtype=torch.float64))[0])
    assert c == mxfp4.scale_code_reference(amax)
    s = math.ldexp(1.0, c - 127)
    assert amax <= 6 * s and (c == 0 or 3 * s < amax)


def test_scale_rule_examples_and_the_floor_rules_counterexample() -> None:
    """amax 7 → code 128 (s = 2; Lean `ceil_code_seven`), 6 → 127, 0 → 0; the OCP floor rule's
    2^(⌊log₂ 7⌋ − 2) = 1 would put 7 above 6·s (`ocpFloor_range_counterexample`)."""
    got = mxfp4.scale_codes(torch.tensor([7.0, 6.0, 0.0, 3.0, 6 * 2.0**-127, 6 * 2.0**127], dtype=torch.float64))
    assert got.tolist() == [128, 127, 0, 126, 0, 254]
    assert 7 > 6 * 2.0 ** (math.floor(math.log2(7)) - 2)


def test_worked_block_example_scale_half_covers_minus_three_to_three() -> None:
    """k3-spec §2.13: an MXFP4 block with s = 1/2 has error ≤ 1/2 on [−3, 3]."""
    w = torch.linspace(-3, 3, 32, dtype=torch.float64)[None]
    packed, scale = mxfp4.quantize(w)
    assert scale.tolist() == [[126]]
    assert float((mxfp4.dequantize(packed, scale) - w).abs().max()) <= 0.5


WEIGHTS = st.integers(1, 4).flatmap(lambda rows: st.integers(1, 3).flatmap(lambda groups: st.lists(
    st.one_of(st.floats(-1e3, 1e3), st.sampled_from([0.25, -0.75, 1.25, 1.75, -2.5, 3.5, 5.0, -0.0, 6.0, 7.0])),
    min_size=rows * groups * 32, max_size=rows * groups * 32).map(lambda v: (rows, groups * 32, v))))


@settings(max_examples=60, deadline=None)
@given(WEIGHTS, st.integers(-20, 20))
def test_fast_quantizer_and_decoder_equal_their_references(spec, exp: int) -> None:
    """Fast paths against the per-entry references, and the entrywise error ≤ the block scale
    (Lean `abs_quantizeMatrix_mxfp4_sub_le`)."""
    rows, n, values = spec
    w = torch.tensor(values, dtype=torch.float64).reshape(rows, n) * 2.0**exp
    packed, scale = mxfp4.quantize(w)
    ref_packed, ref_scale = mxfp4.quantize_reference(w.tolist())
    assert packed.tolist() == ref_packed and scale.tolist() == ref_scale
    deq = mxfp4.dequantize(packed, scale)
    assert deq.tolist() == mxfp4.dequantize_reference(ref_packed, ref_scale)
    assert bool(((deq - w).abs() <= mxfp4.expand_scales(mxfp4.decode_scales(scale))).all())
    # difftest's NumPy leg (ml_dtypes + the Lean definition of the ceil rule) agrees bit for bit
    q = quantize_np(w.T.numpy())
    assert q.packed.tolist() == packed.double().tolist() and q.scale.tolist() == scale.double().tolist()


def test_quantize_rejects_misaligned_and_non_finite_weights() -> None:
    with pytest.raises(ValueError, match="multiple of the MX group"):
        mxfp4.quantize(torch.zeros(2, 48))
    with pytest.raises(ValueError, match="NaN"):
        mxfp4.quantize(torch.full((1, 32), float("nan")))


def test_config_reader_names_each_bad_field() -> None:
    good = {"quantization_config": mxfp4.quantization_config()}
    assert mxfp4.config_problems({}) is None and mxfp4.config_problems(good) == []
    bad = {"quantization_config": dict(mxfp4.quantization_config(), format="nvfp4-pack-quantized")}
    assert "quantization_config.format" in mxfp4.config_problems(bad)[0]
    q = mxfp4.quantization_config()
    q["config_groups"]["group_0"]["weights"]["group_size"] = 16
    assert "weights.group_size" in mxfp4.config_problems({"quantization_config": q})[0]


# --- difftest's bound check ------------------------------------------------------------------------

def test_the_bound_check_can_fail() -> None:
    """An implementation whose error is the proved bound ×1.01 fails the check; ×0.99 passes; the
    check names the theorem it evaluates."""
    comp = COMPONENTS["mxfp4_expert"]
    case = comp.make_case(0, "random", seed=3)
    t, cfg = case.tensors, comp.own_config()
    y_full = ref.expert(t["x"], t["gateWeight"], t["upWeight"], t["downWeight"], cfg)
    q = {k: quantize_np(t[k]) for k, _ in NAMES}
    bound = error_bound(t["x"], q, t["downWeight"], cfg["gate_cap"], cfg["up_cap"])
    checks = comp.bound_checks(case, {"over": {"y": y_full + 1.01 * bound}, "under": {"y": y_full - 0.99 * bound},
                                      "numpy": comp.numpy_outputs(case)})
    verdict = {c.impl: c.passed for c in checks}
    assert verdict == {"over": False, "under": True, "numpy": True}
    assert all("abs_forward_quantize_sub_le" in c.note for c in checks)


def test_the_saturated_kind_comes_within_a_factor_ten_of_the_bound() -> None:
    """The bound is not vacuous: on the `saturated` kind the NumPy MXFP4 expert's error is about
    a tenth of the proved bound (the other kinds: about 1e-3)."""
    comp = COMPONENTS["mxfp4_expert"]
    case = comp.make_case(0, "saturated", seed=0)
    (check,) = comp.bound_checks(case, {"numpy": comp.numpy_outputs(case)})
    assert check.passed and 0.05 < check.err < 1.0


def test_blockwise_products_equal_dequantize_then_matmul() -> None:
    """The blockwise form (`blockwise_linear`, Lean `dot_eq_scale_mul_sum`) against its plain
    reference: bit for bit where every product and sum is exact (small dyadic tokens), and within
    float64 rounding on Gaussian ones."""
    gen = torch.Generator().manual_seed(2)
    packed, scale = mxfp4.quantize(torch.randn(16, 96, generator=gen, dtype=torch.float64))
    w = mxfp4.dequantize(packed, scale)
    x_exact = torch.randint(-8, 9, (5, 96), generator=gen).to(torch.float64) / 4
    assert torch.equal(mxfp4.blockwise_linear(x_exact, packed, scale), x_exact @ w.T)
    x = torch.randn(5, 96, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(mxfp4.blockwise_linear(x, packed, scale), x @ w.T, rtol=1e-14, atol=1e-14)
