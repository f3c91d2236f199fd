"""`decoder_step` with the real Lean reference (one Lean evaluation, fresh cache): the whole tiny
token step evaluated by the executable language model agrees with the graph, NumPy and torch
legs, and a bug planted in pybridge's torch model afterwards (the cached Lean result reused) is
flagged against Lean."""

from __future__ import annotations

import pytest

from difftest import runner
from pybridge.model import K3TextModel

pytestmark = [pytest.mark.lean, pytest.mark.slow]


def decoder_run():
    return runner.run(["decoder_step"], cases=1, seed=0, dtypes=["float64"], shrink=False, lean_cases=1, lean_all=False)


@pytest.fixture(scope="module")
def lean_run(tmp_path_factory):
    """One Lean evaluation of decoder_step's first case; the cache stays set for the module."""
    mp = pytest.MonkeyPatch()
    mp.setenv("DIFFTEST_CACHE", str(tmp_path_factory.mktemp("difftest-cache")))
    yield decoder_run()
    mp.undo()


def test_decoder_step_lean_leg_agrees_with_every_leg(lean_run) -> None:
    assert lean_run.lean_record["ran"] == 1 and lean_run.lean_record["components"]["decoder_step"]["evaluated"] == 1
    result = lean_run.results[0]
    assert result.passed, result.failures()
    compared = {(c.ref, c.output) for c in result.comparisons if c.impl == "lean"}
    for ref in ("torch", "numpy", "graph"):
        assert {(ref, "logits"), (ref, "L1.heads"), (ref, "L3.heads"), (ref, "L4.latent_cache"),
                (ref, "L5.shared_key_cache")} <= compared, ref
    logits = result.f64["lean"]["logits"]
    assert logits.shape == (2, 101) and float(abs(logits).max()) > 0.1  # not a vacuous all-zero output


def test_planted_final_norm_eps_in_pybridge_is_flagged_against_lean(lean_run, monkeypatch) -> None:
    """pybridge's final RMSNorm takes `rms_norm_eps` (1e-5) instead of `final_norm_eps` (3e-5):
    only the torch leg changes; the Lean leg (from the cache) names it."""
    init = K3TextModel.__init__

    def planted(self, cfg) -> None:
        init(self, cfg)
        self.norm.eps = cfg.rms_norm_eps

    monkeypatch.setattr(K3TextModel, "__init__", planted)
    result = decoder_run()
    assert result.lean_record["ran"] == 0 and result.lean_record["cached"] == 1
    failures = result.results[0].failures()
    assert ("lean", "torch", "logits") in {(c.impl, c.ref, c.output) for c in failures}
    assert all("torch" in (c.impl, c.ref) for c in failures)  # Lean, graph and NumPy still agree
