"""Adapters for tests/test_difftest_checkpoint*.py: pybridge's expert as an `--impl` leg, honest
everywhere except one planted bug at one hub layer (and expert), the way a wrong dequantisation
scale or a mis-fused weight in an inference stack shows. On an MXFP4 checkpoint the expert runs
from the file's codes (`call.hub()`: `weight_packed` / `weight_scale`) as pybridge runs it
(`moe.MXFP4SituExpert`); the MXFP4 bugs act on those codes (nibbles swapped, scales read on the
wrong axis). Importable by spec (`checkpoint_planted:NAME`, with tests/ on the path) so
torchrun workers load them too."""

from __future__ import annotations

import os

import torch

from difftest.adapters import Call
from pybridge import adapter
from pybridge.layers import SituExpert
from pybridge.moe import MXFP4SituExpert

Codes = dict[str, torch.Tensor]

#: the layer and expert the planted adapters act on (environment, so torchrun workers see them)
LAYER = int(os.environ.get("K3_PLANT_LAYER", "2"))
EXPERT = int(os.environ.get("K3_PLANT_EXPERT", "-1"))  # -1: every expert of the layer


def _expert(call: Call, scale: float, codes=None) -> dict[str, torch.Tensor]:
    """The expert from the call's hub tensors; `scale`: the gate weight scaled (float weights:
    an MXFP4 expert's dequantized ones); `codes`: a change to an MXFP4 expert's codes."""
    d, h = call.sizes["d"], call.sizes["h"]
    cfg = call.config()
    if "gateWeight.packed" in call.tensors and scale == 1.0:
        mx = MXFP4SituExpert(d, h, cfg.situ_gate_cap, cfg.situ_up_cap).to(device=call.device)
        hub = call.hub()
        mx.load_state_dict(codes(hub) if codes is not None else hub)
        return {"y": mx(call.tensors["x"])}
    m = SituExpert(d, h, cfg.situ_gate_cap, cfg.situ_up_cap).to(device=call.device, dtype=call.dtype)
    weights = {k: call.tensors[k] for k in ("gateWeight", "upWeight", "downWeight")}
    m.load_state_dict(adapter.to_hub(adapter.expert_rules(d, h), weights))
    if scale != 1.0:
        with torch.no_grad():
            m.w1.weight.mul_(scale)
    return {"y": m(call.tensors["x"])}


def _hit(call: Call) -> bool:
    return call.sizes["layer"] == LAYER and EXPERT in (-1, call.sizes["expert"])


class Honest:
    name = "pybridge-expert"
    dtypes = ("float64", "float32", "bfloat16")

    def expert(self, call: Call) -> dict[str, torch.Tensor]:
        return _expert(call, 1.0)


class ScaledExpert(Honest):
    """One expert's gate weight ×1.01 at layer LAYER (expert EXPERT)."""

    name = "scaled-expert"

    def expert(self, call: Call) -> dict[str, torch.Tensor]:
        return _expert(call, 1.01 if _hit(call) else 1.0)


class DiesAtLayer(Honest):
    """The process exits (as an out-of-memory kill would end it) at layer LAYER."""

    name = "dies-at-layer"

    def expert(self, call: Call) -> dict[str, torch.Tensor]:
        if _hit(call):
            os._exit(7)
        return _expert(call, 1.0)


def _swap_nibbles(hub: Codes) -> Codes:
    """Entry 2j read from the high nibble and 2j+1 from the low one (the packing convention reversed)."""
    return {k: (v >> 4) | ((v & 0x0F) << 4) if k.endswith("weight_packed") else v for k, v in hub.items()}


def _scales_wrong_axis(hub: Codes) -> Codes:
    """The `[out, in/32]` scales read as if stored `[in/32, out]` (column-major)."""
    return {k: v.reshape(v.shape[1], v.shape[0]).T.contiguous() if k.endswith("weight_scale") else v
            for k, v in hub.items()}


class SwappedNibbles(Honest):
    """MXFP4 codes unpacked high nibble first at layer LAYER (expert EXPERT)."""

    name = "swapped-nibbles"

    def expert(self, call: Call) -> dict[str, torch.Tensor]:
        return _expert(call, 1.0, _swap_nibbles if _hit(call) else None)


class ScalesWrongAxis(Honest):
    """MXFP4 scales read on the wrong axis at layer LAYER (expert EXPERT)."""

    name = "scales-wrong-axis"

    def expert(self, call: Call) -> dict[str, torch.Tensor]:
        return _expert(call, 1.0, _scales_wrong_axis if _hit(call) else None)


honest, scaled_expert, dies_at_layer = Honest(), ScaledExpert(), DiesAtLayer()
swapped_nibbles, scales_wrong_axis = SwappedNibbles(), ScalesWrongAxis()
