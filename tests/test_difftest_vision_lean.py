"""The vision components' Lean legs, one Lean process per component, fresh cache:
`vision_embed` (the library's `Vision.embed` in a bundle, template
`difftest/templates/vision_embed.lean.j2`) and `vision_block` (the executable
`Exec.Vision.Block.forward`, proved equal to `Vision.Block.forward` by `Exec.Vision.Block.forward_eq`;
template `vision_block.lean.j2`). Each run is green against the NumPy, graph and torch legs; a
second run takes the Lean result from the cache and flags a planted bug in the NumPy reference
against Lean itself (`align_corners=True` weights; RoPE's row and column axes swapped)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from difftest import numpy_vision, runner

pytestmark = [pytest.mark.lean, pytest.mark.slow]


def _lean_leg_agrees_then_catches(component: str, plant: Callable[[], None]) -> None:
    """One case of `component` is green with Lean against the NumPy, graph and torch legs; after
    `plant()` breaks the NumPy reference, a second run takes Lean from the cache and flags it."""
    run_once = lambda: runner.run([component], cases=1, seed=0, dtypes=["float64"], shrink=False,  # noqa: E731
                                  lean_cases=1, lean_all=True)
    run = run_once()
    assert run.passed, [c for r in run.results for c in r.failures()]
    assert run.lean_record["ran"] == 1
    pairs = {(c.impl, c.ref) for r in run.results for c in r.comparisons}
    assert {("lean", "numpy"), ("lean", "graph"), ("lean", "torch")} <= pairs
    plant()
    bad = run_once()
    assert bad.lean_record["cached"] == 1
    assert ("lean", "numpy") in {(c.impl, c.ref) for r in bad.results for c in r.failures()}


def test_vision_embed_lean_leg_agrees_and_catches_corner_aligned_weights(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))
    real = numpy_vision.bilinear
    _lean_leg_agrees_then_catches("vision_embed", lambda: monkeypatch.setattr(
        numpy_vision, "bilinear", lambda m, n, align_corners=False: real(m, n, True)))


def test_vision_block_lean_leg_agrees_and_catches_swapped_rope_axes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))
    real = numpy_vision.rope_angles

    def swapped(h: int, w: int, cfg: dict) -> np.ndarray:
        """The row pairs turned by the column and the column pairs by the row."""
        angles = real(h, w, cfg)
        R = angles.shape[1] // 2
        return np.concatenate([angles[:, R:], angles[:, :R]], axis=1)

    _lean_leg_agrees_then_catches("vision_block", lambda: monkeypatch.setattr(numpy_vision, "rope_angles", swapped))
