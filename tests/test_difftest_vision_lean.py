"""vision_embed's Lean leg (the library's `Vision.embed` in a bundle, template
`difftest/templates/vision_embed.lean.j2`): one Lean process, fresh cache. The run is green
against the NumPy, graph and torch legs; a second run takes the Lean result from the cache and
flags a NumPy reference with `align_corners=True` weights against Lean itself."""

from __future__ import annotations

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
