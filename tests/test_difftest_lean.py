"""difftest with the real Lean reference (one bundled Lean process, fresh cache): the run is
green three ways, a second run takes every Lean result from the cache, and an injected bug is
flagged against Lean itself."""

from __future__ import annotations

import pytest
import torch

from difftest import runner
from difftest.components import COMPONENTS
from pybridge import layers

pytestmark = [pytest.mark.lean, pytest.mark.slow]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("DIFFTEST_CACHE", str(tmp_path_factory.mktemp("difftest-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def lean_run(cache):
    """The default run: Lean evaluates the components marked `lean_default` (one case each)."""
    return runner.run(list(COMPONENTS), cases=2, seed=0, dtypes=["float64", "float32", "bfloat16"], shrink=False,
                      lean_cases=1, lean_all=False)


def test_three_way_run_is_green(lean_run) -> None:
    assert lean_run.passed, [c for r in lean_run.results for c in r.failures()]
    default = [c for c in COMPONENTS.values() if c.lean_default]
    assert default and lean_run.lean_record["ran"] == len(default)
    pairs = {(c.component, c.impl, c.ref) for r in lean_run.results for c in r.comparisons}
    for comp in default:
        # the Kimi Linear variant's spec leg is pybridge's variant; it has no NumPy leg
        refs = ("pybridge",) if getattr(comp, "spec_is_pybridge", False) else ("torch", "numpy")
        assert {(comp.name, "lean", ref) for ref in refs} <= pairs
        if comp.graph_file is None:  # mxfp4_expert: no export at MX-aligned widths
            continue
        assert (comp.name, "torch", "graph") in pairs
        # attnres's graph computes only the retrievals over its exported source count (`*_g`)
        assert comp.name == "attnres" or (comp.name, "lean", "graph") in pairs


def test_second_run_reads_the_cache_and_flags_a_bug_against_lean(lean_run, monkeypatch) -> None:
    def situ_capped(gate, up, gate_cap, up_cap):
        capped = layers.soft_cap(gate_cap, gate)
        return capped * torch.sigmoid(capped) * layers.soft_cap(up_cap, up)

    monkeypatch.setattr(layers, "situ", situ_capped)
    result = runner.run(["expert"], cases=1, seed=0, dtypes=["float64"], shrink=False)
    assert result.lean_record["ran"] == 0 and result.lean_record["cached"] == 1
    assert any((c.impl, c.ref) == ("lean", "torch") for c in result.results[0].failures())
