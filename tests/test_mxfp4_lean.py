"""mxfp4_expert with the real Lean reference: the library's proved `Exec.Expert.forwardF`
(the `expert` template) at the NumPy leg's exact dequantized weights agrees with the torch MXFP4
expert and the NumPy one, its output is within the proved quantization bound, and a planted
scale-layout bug in pybridge is flagged against Lean itself (from the cache)."""

from __future__ import annotations

import pytest

from difftest import runner
from pybridge import mxfp4

pytestmark = [pytest.mark.lean, pytest.mark.slow]


@pytest.fixture(scope="module")
def lean_run(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("DIFFTEST_CACHE", str(tmp_path_factory.mktemp("difftest-cache")))
    yield runner.run(["mxfp4_expert"], seed=0, dtypes=["float64"], shrink=False, lean_cases=2, lean_all=False)
    mp.undo()


def test_lean_leg_agrees_and_is_within_the_bound(lean_run) -> None:
    assert lean_run.passed, [c for r in lean_run.results for c in r.failures()]
    assert lean_run.lean_record["ran"] == 2
    pairs = {(c.kind, c.impl, c.ref) for r in lean_run.results for c in r.comparisons}
    for kind in ("random", "midpoint"):
        assert {(kind, "lean", "torch"), (kind, "lean", "torch-blockwise"), (kind, "lean", "numpy"),
                (kind, "lean", "bound")} <= pairs


def test_a_scale_layout_bug_is_flagged_against_lean(lean_run, monkeypatch) -> None:
    monkeypatch.setattr(mxfp4, "expand_scales", lambda scale_og: scale_og.repeat(1, mxfp4.GROUP))
    result = runner.run(["mxfp4_expert"], cases=1, seed=0, dtypes=["float64"], shrink=False, lean_cases=1,
                        lean_all=False)
    assert result.lean_record["ran"] == 0 and result.lean_record["cached"] == 1
    assert ("lean", "torch") in {(c.impl, c.ref) for c in result.results[0].failures()}
