"""Planted MXFP4 bugs. Each is caught by the default run of `mxfp4_expert` (`difftest run
--component mxfp4_expert --no-lean`) against difftest's own NumPy quantizer and decoder: those
tests are in the mutation suite (`test_difftest_mutations.py`, so the catch table lists them).
Here: the default run passes without a bug, and the round trip of a `make-random-checkpoint
--quantize mxfp4` checkpoint changes where the bug is in the writer. The bugs are monkeypatched into `pybridge.mxfp4`, the
quantizer and decoder the checkpoint writer, the loader and the torch expert use.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from difftest import runner
from pybridge import moe, mxfp4
from pybridge.checkpoint import random_model
from pybridge.config import load_config

torch.set_num_threads(1)
TINY_MX = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-mx" / "config.json"
GOOD = {name: getattr(mxfp4, name) for name in ("e2m1_codes", "scale_codes", "pack_codes", "expand_scales")}


def default_run():
    return runner.run(["mxfp4_expert"], seed=0, use_lean=False, shrink=False)


def half_up(t: torch.Tensor) -> torch.Tensor:
    """The tie bug: a midpoint rounds away from zero (half up), not to the even code."""
    a = t.abs().to(torch.float64)
    idx = sum((a >= m).to(torch.uint8) for m in mxfp4.E2M1_MIDPOINTS)
    return idx.to(torch.uint8) | (torch.signbit(t).to(torch.uint8) << 3)


def floor_scale(amax: torch.Tensor) -> torch.Tensor:
    """The scale bug: 2^⌊log₂(amax/6)⌋, one binade below the ceil rule wherever amax/6 is not a
    power of two (the elements above 6·s then saturate)."""
    c = GOOD["scale_codes"](amax).to(torch.int64)
    exact = amax.to(torch.float64) == 6.0 * torch.ldexp(torch.ones_like(c, dtype=torch.float64), c - 127)
    return torch.where(exact | (c == 0), c, c - 1).to(torch.uint8)


def swapped_nibbles(codes: torch.Tensor) -> torch.Tensor:
    c = codes.to(torch.uint8)
    return c[..., 1::2] | (c[..., 0::2] << 4)


def tiled_scales(scale_og: torch.Tensor) -> torch.Tensor:
    """The scale-layout bug: scales broadcast along the wrong axis (entry j gets group j mod G)."""
    return scale_og.repeat(1, mxfp4.GROUP)


def test_default_run_passes() -> None:
    result = default_run()
    assert result.passed, [(c.kind, c.dtype, c.impl, c.ref, c.output) for r in result.results for c in r.failures()]


def test_a_writer_bug_changes_the_checkpoint(monkeypatch) -> None:
    """The checkpoint writer (`make-random-checkpoint --quantize mxfp4`: `moe.quantize_experts_`)
    writes other bytes under each planted bug; one expert holds midpoint weights (random
    float32 weights hit no exact tie)."""
    dense = random_model(load_config(TINY_MX), seed=7)
    w = dense.model.layers[1].block_sparse_moe.experts[0].w1.weight
    with torch.no_grad():
        w.copy_(torch.tensor(mxfp4.E2M1_MIDPOINTS).repeat(w.numel() // 7 + 1)[: w.numel()].reshape(w.shape) / 16)
        w[:, ::mxfp4.GROUP] = 6.0 / 16
    good = moe.quantize_experts_(copy.deepcopy(dense)).state_dict()
    for name, bug in (("e2m1_codes", half_up), ("scale_codes", floor_scale), ("pack_codes", swapped_nibbles),
                      ("expand_scales", tiled_scales)):
        with monkeypatch.context() as m:
            m.setattr(mxfp4, name, bug)
            bad = moe.quantize_experts_(copy.deepcopy(dense)).state_dict()
        assert any(not torch.equal(bad[k], good[k]) for k in good if k.endswith(".weight_packed")), name
