"""Adapters for tests/test_difftest_checkpoint.py: pybridge's expert as an `--impl` leg, honest
everywhere except one planted bug at one hub layer (and expert), the way a wrong dequantisation
scale or a mis-fused weight in an inference stack shows. Importable by spec
(`checkpoint_planted:NAME`, with tests/ on the path) so torchrun workers load them too."""

from __future__ import annotations

import os

import torch

from difftest.adapters import Call
from pybridge.layers import SituExpert

#: the layer and expert the planted adapters act on (environment, so torchrun workers see them)
LAYER = int(os.environ.get("K3_PLANT_LAYER", "2"))
EXPERT = int(os.environ.get("K3_PLANT_EXPERT", "-1"))  # -1: every expert of the layer


def _expert(call: Call, scale: float) -> dict[str, torch.Tensor]:
    d, h = call.sizes["d"], call.sizes["h"]
    cfg = call.config()
    m = SituExpert(d, h, cfg.situ_gate_cap, cfg.situ_up_cap).to(device=call.device, dtype=call.dtype)
    m.load_state_dict(call.hub())
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


honest, scaled_expert, dies_at_layer = Honest(), ScaledExpert(), DiesAtLayer()
