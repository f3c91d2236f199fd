"""The Kimi Linear variant's Lean legs (`Exec.KimiLinear` in a bundle, templates
`difftest/templates/kimi_linear_{kda,mla,moe,model}.lean.j2`): one Lean process, fresh cache, for the KDA
layer (its `long` kind included), MLA (the direct-query path and the low-rank query), the MoE block and the
whole tiny model (`KimiLinear.Model.logits`: 3 KDA + 1 MLA decoder layers, dense + MoE MLPs). The run is
green against pybridge's variant, its second path and transformers' own layers and model (`--impl
kimi-linear`); later runs take the Lean results from the cache and, with pybridge's decay gate planted
without `dt_bias` (both pybridge paths share it, so they still agree with each other), fail exactly the
KDA and model comparisons against Lean; a planted unscaled MoE likewise; and, on the model alone, a decoder
layer without its MLP residual, or a final RMSNorm with the wrong ε (1e-6, the latent norms' value, for
`rms_norm_eps` 1e-5), fail exactly the model's comparisons against Lean."""

from __future__ import annotations

import pytest

from difftest import runner
from difftest.adapters import load

pytestmark = [pytest.mark.lean, pytest.mark.slow]

LAYERS = ["kimi_linear_kda", "kimi_linear_mla", "kimi_linear_moe"]
MODEL = "kimi_linear_model"
SECOND = {"kimi_linear_moe": "pybridge per token"}  # the second pybridge path ("pybridge decode" elsewhere)


def run(components: list[str] = LAYERS + [MODEL], **kw) -> runner.RunResult:
    # three cases each: KDA random, large, long (T = 40); MLA random, large (both q_proj), q_lora (the low-rank
    # query); MoE random, large, random; the model three random (seeded model, T = 7)
    return runner.run(components, cases=3, seed=0, dtypes=["float64"], shrink=False, lean_cases=3, lean_all=True, **kw)


def lean_failures(result: runner.RunResult) -> set[tuple[str, str, str]]:
    return {(c.component, c.impl, c.ref) for r in result.results for c in r.failures()}


def against_pybridge(name: str) -> set[tuple[str, str, str]]:
    return {(name, "lean", "pybridge"), (name, "lean", SECOND.get(name, "pybridge decode"))}


def test_kimi_linear_lean_legs_agree_and_catch_planted_pybridge_bugs(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))
    good = run(adapters=(load("kimi-linear"),))
    assert good.passed, [c for r in good.results for c in r.failures()]
    assert good.lean_record["ran"] == 12 and good.lean_record["seconds"] > 0
    lean_rows = [c for r in good.results for c in r.comparisons if c.impl == "lean"]
    assert {(c.component, c.ref) for c in lean_rows} == {
        (name, ref) for name in LAYERS + [MODEL] for ref in ("pybridge", SECOND.get(name, "pybridge decode"),
                                                             "impl:kimi-linear")}
    assert {r.case.kind for r in good.results if r.case.component == "kimi_linear_mla"} == {"random", "large", "q_lora"}
    # measured: normwise error <= 5.7e-15 (tol64 1.2e-13 to 1.0e-12): far inside, and far below a real bug
    assert all(c.passed and c.err < 2e-14 for c in lean_rows)
    assert sum(c.component == MODEL for c in lean_rows) == 9  # 3 cases x 3 references

    from pybridge import kimi_linear

    def no_dt_bias(self, x_btd):
        B, T, _ = x_btd.shape
        z = kimi_linear.lin(self.f_b_proj, kimi_linear.lin(self.f_a_proj, x_btd)).view(B, T, self.H, self.K)
        return kimi_linear.softplus_decay_gate(z, self.A_log.to(x_btd.dtype).view(self.H))

    monkeypatch.setattr(kimi_linear.KimiLinearKDA, "log_decay", no_dt_bias)
    monkeypatch.setattr(kimi_linear.RoutedScalingGate, "forward", _unscaled(kimi_linear.RoutedScalingGate.forward))
    bad = run()
    assert bad.lean_record["cached"] == 12 and bad.lean_record["ran"] == 0
    assert lean_failures(bad) == against_pybridge("kimi_linear_kda") | against_pybridge("kimi_linear_moe") | \
        against_pybridge(MODEL)
    assert all(c.ratio > 1e6 for r in bad.results for c in r.failures())  # by far, not at the margin
    monkeypatch.undo()
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))

    def no_mlp_residual(self, x_btd, state):  # `KimiLinearDecoderLayer.forward` returning the MLP output alone
        seq_out, state = self.self_attn(self.input_layernorm(x_btd), state)
        h = self.post_attention_layernorm(x_btd + seq_out)
        return (self.block_sparse_moe(h) if hasattr(self, "block_sparse_moe") else self.mlp(h)), state

    from pybridge.config_kimi_linear import KimiLinearConfig

    for name, value, patch in (("forward", kimi_linear.KimiLinearDecoderLayer, no_mlp_residual),
                               ("final_norm_eps", KimiLinearConfig, property(lambda cfg: 1e-6))):
        with monkeypatch.context() as m:
            m.setattr(value, name, patch)
            planted = run([MODEL])
        assert planted.lean_record["cached"] == 3 and planted.lean_record["ran"] == 0
        assert lean_failures(planted) == against_pybridge(MODEL), name
        assert min(c.ratio for r in planted.results for c in r.failures()) > 1e4, name  # far from the margin


def _unscaled(forward):
    """The router with its weights divided by the routed scaling factor (ρ dropped)."""

    def gate(self, x_nd):
        idx, w = forward(self, x_nd)
        return idx, w / self.scaling

    return gate
