"""The vision components' Lean legs, one Lean process per component, fresh cache:
`vision_embed` (the library's `Vision.embed` in a bundle, template
`difftest/templates/vision_embed.lean.j2`) and `vision_block` (the executable
`Exec.Vision.Block.forward`, proved equal to `Vision.Block.forward` by `Exec.Vision.Block.forward_eq`;
template `vision_block.lean.j2`). Each run is green against the NumPy, graph and torch legs; a
second run takes the Lean result from the cache and flags a planted bug in the NumPy reference
against Lean itself (`align_corners=True` weights; RoPE's row and column axes swapped)."""

from __future__ import annotations

import numpy as np
import pytest

from difftest import numpy_vision, runner

pytestmark = [pytest.mark.lean, pytest.mark.slow]


def test_vision_embed_lean_leg_agrees_and_catches_corner_aligned_weights(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))
    run = runner.run(["vision_embed"], cases=1, seed=0, dtypes=["float64"], shrink=False, lean_cases=1, lean_all=True)
    assert run.passed, [c for r in run.results for c in r.failures()]
    assert run.lean_record["ran"] == 1
    pairs = {(c.impl, c.ref) for r in run.results for c in r.comparisons}
    assert {("lean", "numpy"), ("lean", "graph"), ("lean", "torch")} <= pairs
    real = numpy_vision.bilinear
    monkeypatch.setattr(numpy_vision, "bilinear", lambda m, n, align_corners=False: real(m, n, True))
    bad = runner.run(["vision_embed"], cases=1, seed=0, dtypes=["float64"], shrink=False, lean_cases=1, lean_all=True)
    assert bad.lean_record["cached"] == 1
    assert ("lean", "numpy") in {(c.impl, c.ref) for r in bad.results for c in r.failures()}


def test_vision_block_lean_leg_agrees_and_catches_swapped_rope_axes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))
    run = runner.run(["vision_block"], cases=1, seed=0, dtypes=["float64"], shrink=False, lean_cases=1, lean_all=True)
    assert run.passed, [c for r in run.results for c in r.failures()]
    assert run.lean_record["ran"] == 1
    pairs = {(c.impl, c.ref) for r in run.results for c in r.comparisons}
    assert {("lean", "numpy"), ("lean", "graph"), ("lean", "torch")} <= pairs
    real = numpy_vision.rope_angles

    def swapped(h: int, w: int, cfg: dict) -> np.ndarray:
        """The row pairs turned by the column and the column pairs by the row."""
        angles = real(h, w, cfg)
        R = angles.shape[1] // 2
        return np.concatenate([angles[:, R:], angles[:, :R]], axis=1)

    monkeypatch.setattr(numpy_vision, "rope_angles", swapped)
    bad = runner.run(["vision_block"], cases=1, seed=0, dtypes=["float64"], shrink=False, lean_cases=1, lean_all=True)
    assert bad.lean_record["cached"] == 1
    assert ("lean", "numpy") in {(c.impl, c.ref) for r in bad.results for c in r.failures()}
