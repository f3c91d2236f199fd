"""The Kimi Linear variant's Lean legs (`Exec.KimiLinear` in a bundle, templates
`difftest/templates/kimi_linear_{kda,mla,moe}.lean.j2`): one Lean process, fresh cache, for the KDA
layer (its `long` kind included), MLA (the direct-query path and the low-rank query) and the MoE block. The run is green
against pybridge's variant, its second path and transformers' own layers (`--impl kimi-linear`);
a second run takes the Lean results from the cache and, with pybridge's decay gate planted without
`dt_bias` (both pybridge paths share it, so they still agree with each other), fails exactly the
KDA comparisons against Lean; a planted unscaled MoE likewise."""

from __future__ import annotations

import pytest

from difftest import runner
from difftest.adapters import load

pytestmark = [pytest.mark.lean, pytest.mark.slow]

LAYERS = ["kimi_linear_kda", "kimi_linear_mla", "kimi_linear_moe"]


def run(**kw) -> runner.RunResult:
    # three cases each: KDA random, large, long (T = 40); MLA random, large (both q_proj), q_lora (the low-rank
    # query); MoE random, large, random
    return runner.run(LAYERS, cases=3, seed=0, dtypes=["float64"], shrink=False, lean_cases=3, lean_all=True, **kw)


def test_kimi_linear_lean_legs_agree_and_catch_planted_pybridge_bugs(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))
    good = run(adapters=(load("kimi-linear"),))
    assert good.passed, [c for r in good.results for c in r.failures()]
    assert good.lean_record["ran"] == 9 and good.lean_record["seconds"] > 0
    lean_rows = [c for r in good.results for c in r.comparisons if c.impl == "lean"]
    assert {(c.component, c.ref) for c in lean_rows} == {
        (name, ref) for name in LAYERS for ref in ("pybridge", "pybridge decode" if name != "kimi_linear_moe"
                                                    else "pybridge per token", "impl:kimi-linear")}
    assert {r.case.kind for r in good.results if r.case.component == "kimi_linear_mla"} == {"random", "large", "q_lora"}
    # measured: normwise error <= 5.7e-15 (tol64 1.2e-13 to 1.0e-12): far inside, and far below a real bug
    assert all(c.passed and c.err < 2e-14 for c in lean_rows)

    from pybridge import kimi_linear

    def no_dt_bias(self, x_btd):
        B, T, _ = x_btd.shape
        z = kimi_linear.lin(self.f_b_proj, kimi_linear.lin(self.f_a_proj, x_btd)).view(B, T, self.H, self.K)
        return kimi_linear.softplus_decay_gate(z, self.A_log.to(x_btd.dtype).view(self.H))

    monkeypatch.setattr(kimi_linear.KimiLinearKDA, "log_decay", no_dt_bias)
    monkeypatch.setattr(kimi_linear.RoutedScalingGate, "forward", _unscaled(kimi_linear.RoutedScalingGate.forward))
    bad = run()
    assert bad.lean_record["cached"] == 9 and bad.lean_record["ran"] == 0
    failed = {(c.component, c.impl, c.ref) for r in bad.results for c in r.failures()}
    assert failed == {("kimi_linear_kda", "lean", "pybridge"), ("kimi_linear_kda", "lean", "pybridge decode"),
                      ("kimi_linear_moe", "lean", "pybridge"), ("kimi_linear_moe", "lean", "pybridge per token")}
    assert all(c.ratio > 1e6 for r in bad.results for c in r.failures())  # by far, not at the margin


def _unscaled(forward):
    """The router with its weights divided by the routed scaling factor (ρ dropped)."""

    def gate(self, x_nd):
        idx, w = forward(self, x_nd)
        return idx, w / self.scaling

    return gate
