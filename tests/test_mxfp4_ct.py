"""pybridge.mxfp4 against compressed-tensors, the library that defines `mxfp4-pack-quantized`:
tensor names, nibble order, E2M1 and E8M0 decoding and the packing of a quantized checkpoint,
bit for bit; where the two differ, the test names the difference.

Slow only because importing compressed-tensors takes 30–40 s on the 2-core machine."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from pybridge import mxfp4
from pybridge.checkpoint import load_spec_params, random_model, save_checkpoint
from pybridge.config import load_config

ct_base = pytest.importorskip("compressed_tensors.compressors.mxfp4.base")
from compressed_tensors.compressors.mx_utils import decompress_mx_scale  # noqa: E402
from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8  # noqa: E402
from compressed_tensors.quantization import QuantizationArgs, QuantizationConfig, QuantizationScheme  # noqa: E402
from compressed_tensors.quantization.utils.mxfp_utils import generate_mx_scales  # noqa: E402

pytestmark = pytest.mark.slow
torch.set_num_threads(1)
Compressor = ct_base.MXFP4PackedCompressor
SCHEME = QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(
    num_bits=4, type="float", strategy="group", group_size=32, symmetric=True, scale_dtype=torch.uint8))
TINY_MX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-mx" / "config.json"
ALL_BYTES = torch.arange(256, dtype=torch.uint8)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float32).view(torch.int32)


def ct_decode(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return Compressor.decompress({"weight_packed": packed, "weight_scale": scale}, SCHEME)["weight"]


def test_every_byte_unpacks_as_compressed_tensors() -> None:
    """256 bytes → 512 codes, low nibble first, decoded bit for bit as `unpack_fp4_from_uint8`."""
    ours = mxfp4.dequantize(ALL_BYTES.reshape(8, 32), torch.full((8, 2), 127, dtype=torch.uint8), torch.float32)
    theirs = unpack_fp4_from_uint8(ALL_BYTES.reshape(8, 32), 8, 64, dtype=torch.float32)
    assert bits(ours).equal(bits(theirs)) and ours.numel() == 512


def test_every_finite_scale_code_decodes_as_compressed_tensors() -> None:
    """Codes 0…254 as `decompress_mx_scale` (bfloat16, every 2^k exact there). The difference:
    code 255 (E8M0 NaN) decodes to inf there; pybridge rejects it by name."""
    ours = mxfp4.decode_scales(ALL_BYTES[:255])
    assert ours.equal(decompress_mx_scale(ALL_BYTES[:255]).to(torch.float64))
    assert torch.isinf(decompress_mx_scale(ALL_BYTES[255:])).all()
    problems = mxfp4.tensor_problems("w.weight", torch.zeros(1, 16, dtype=torch.uint8),
                                     torch.tensor([[255]], dtype=torch.uint8), "f.safetensors")
    assert problems and "NaN code 255" in problems[0] and "w.weight_scale" in problems[0] and "f.safetensors" in problems[0]


def test_random_tensors_decode_bit_for_bit_as_the_compressor() -> None:
    """`MXFP4PackedCompressor.decompress` (bfloat16 output) against pybridge's exact decode rounded
    to float32, on random bytes and scale codes 0…252. The difference: at codes 253 and 254
    compressed-tensors' bfloat16 overflows to inf where pybridge (float64) is finite."""
    gen = torch.Generator().manual_seed(0)
    packed = torch.randint(0, 256, (64, 64), dtype=torch.uint8, generator=gen)
    scale = torch.randint(0, 253, (64, 4), dtype=torch.uint8, generator=gen)
    ours, theirs = mxfp4.dequantize(packed, scale, torch.float32), ct_decode(packed, scale)
    assert bits(ours).equal(bits(theirs)) and ours.numel() == 8192
    top = torch.full((64, 4), 254, dtype=torch.uint8)
    assert torch.isinf(ct_decode(packed, top)).any() and torch.isfinite(mxfp4.dequantize(packed, top)).all()


def test_quantizer_packs_as_the_compressor_at_the_ceil_rule_scales() -> None:
    """compressed-tensors' quantize + pack (round to nearest even, `pack_fp4_to_uint8`) at
    pybridge's scales gives pybridge's bytes, on Gaussian weights and on every midpoint."""
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(32, 128, generator=gen)
    mids = torch.tensor(mxfp4.E2M1_MIDPOINTS + (6.0,))
    w[:8] = (mids[torch.randint(0, 8, (8, 128), generator=gen)] * torch.randint(0, 2, (8, 128), generator=gen).mul(2).sub(1)
             * 2.0 ** torch.randint(-4, 4, (8, 1), generator=gen))
    w[:8, ::32] = 6.0 * 2.0 ** torch.randint(-4, 4, (8, 1), generator=gen)  # the block maxima: scale exactly 2^k
    packed, scale = mxfp4.quantize(w)
    theirs = Compressor.compress({"weight": w, "weight_scale": mxfp4.decode_scales(scale).to(torch.float32)}, SCHEME)
    assert theirs["weight_packed"].equal(packed) and theirs["weight_scale"].equal(scale)


def test_compressed_tensors_own_scale_observer_differs_from_the_ceil_rule() -> None:
    """The named difference: `generate_mx_scales` rounds amax's mantissa first, so amax 6.5 gets
    s = 1 (6.5 > 6 s: clipped), where the ceil rule gives s = 2."""
    amax = torch.tensor([6.5, 6.0, 7.0])
    assert generate_mx_scales(amax).tolist() == [127, 127, 128]
    assert mxfp4.scale_codes(amax.double()).tolist() == [128, 127, 128]


def test_quantized_checkpoint_is_compressed_tensors_format(tmp_path) -> None:
    """make-random-checkpoint's MXFP4 checkpoint: its quantization_config parses as
    compressed-tensors' `QuantizationConfig`, and every packed module decompresses with its
    compressor to the weights pybridge loads, bit for bit."""
    ckpt = save_checkpoint(random_model(load_config(TINY_MX), seed=4, quantize="mxfp4"), TINY_MX, tmp_path, 2)
    import json

    config = json.loads((ckpt / "config.json").read_text())
    assert QuantizationConfig.model_validate(config["quantization_config"]).format == mxfp4.FORMAT
    cfg, spec = load_spec_params(ckpt)
    checked = 0
    for f in sorted(ckpt.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as h:
            for name in [k for k in h.keys() if k.endswith(".weight_packed")]:  # noqa: SIM118 (a safetensors handle)
                base = name.removesuffix(".weight_packed")
                theirs = ct_decode(h.get_tensor(name), h.get_tensor(base + ".weight_scale"))
                layer, e, w = base.split(".")[2], base.split(".")[5], base.split(".")[6]
                part = {"w1": "gate", "w3": "up", "w2": "down"}[w]
                ours = spec[f"layers.{int(layer) + 1}.moe.expert.{part}[{e}]"].T
                assert bits(ours).equal(bits(theirs)), name
                checked += 1
    assert checked == 3 * cfg.num_experts * sum(cfg.is_moe(i) for i in range(cfg.num_hidden_layers))
