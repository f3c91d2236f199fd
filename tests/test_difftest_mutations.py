"""Seven known bugs injected into the torch model (by monkeypatching pybridge, never by editing
it) are each flagged by difftest against an independent reference: the exported graph (compiled
from the Lean export) or, for AttnRes, the plain NumPy reference. `test_difftest_lean.py` runs
the same checks against the Lean reference itself.
"""

from __future__ import annotations

import torch

from difftest import runner
from pybridge import attnres, kda, layers, mla, moe
from pybridge import model as k3model
from pybridge.layers import rms_norm

CASES = 2


def flagged(component: str, use_lean: bool = False) -> list:
    """Run `component` on seeded cases; the failing comparisons (at least one, against a reference
    that does not depend on pybridge)."""
    result = runner.run([component], cases=CASES, seed=0, dtypes=["float64"], use_lean=use_lean, shrink=False)
    failures = [c for r in result.results for c in r.failures()]
    assert failures, f"difftest did not flag the injected bug in {component}"
    assert any(c.ref in ("lean", "graph", "numpy") for c in failures)
    return failures


def test_unmutated_components_pass() -> None:
    assert runner.run(["expert", "latent_moe", "kda_recurrence", "kda_layer", "mla", "attnres", "decoder_step"], cases=CASES,
                      seed=0, dtypes=["float64"], use_lean=False, shrink=False).passed


def test_sigmoid_reading_the_capped_gate_is_flagged(monkeypatch) -> None:
    def situ_capped(gate, up, gate_cap, up_cap):
        capped = layers.soft_cap(gate_cap, gate)
        return capped * torch.sigmoid(capped) * layers.soft_cap(up_cap, up)

    monkeypatch.setattr(layers, "situ", situ_capped)
    failures = flagged("expert")
    assert max(c.err for c in failures) > 1e-3


def test_mixture_weights_from_bias_adjusted_scores_are_flagged(monkeypatch) -> None:
    def gate_forward(self, x_nd):
        adjusted = torch.sigmoid(x_nd @ self.weight.T) + self.e_score_correction_bias
        idx = moe.select_top_k(adjusted, self.top_k)
        chosen = adjusted.gather(1, idx)
        return idx, self.scaling * chosen / chosen.sum(-1, keepdim=True)

    monkeypatch.setattr(moe.MoEGate, "forward", gate_forward)
    failures = flagged("latent_moe")
    assert {c.output for c in failures} == {"y"}  # same route, wrong weights


def test_kda_reading_before_the_update_is_flagged(monkeypatch) -> None:
    def recurrent_read_first(q, k, v, g, beta, scale, state=None):
        B, T, H, K = q.shape
        S = q.new_zeros(B, H, K, v.shape[-1]) if state is None else state
        outs = []
        for t in range(T):
            outs.append(scale * torch.einsum("bhk,bhkv->bhv", q[:, t], S))  # read the old state
            decayed = S * g[:, t].exp()[..., None]
            corr = torch.einsum("bhk,bhkv->bhv", k[:, t], decayed)
            S = decayed + beta[:, t, :, None, None] * k[:, t, ..., None] * (v[:, t] - corr)[:, :, None, :]
        return torch.stack(outs, dim=1), S

    monkeypatch.setattr(kda, "kda_recurrent", recurrent_read_first)
    failures = flagged("kda_recurrence")
    assert {c.impl for c in failures} == {"torch_recurrent"} and {c.output for c in failures} == {"o"}
    # the layer's decode path runs the recurrent kernel: decode and prefill (chunked) now differ
    assert any(c.impl == "torch_decode" for c in runner.run(["kda_layer"], cases=1, use_lean=False, shrink=False,
                                                              dtypes=["float64"]).results[0].failures())


def _mla_forward(attend_first: bool = False, transpose_o: bool = False):
    """pybridge's GatedMLA.forward with one injected bug."""

    def forward(self, x_btd, cache):
        B, T, _ = x_btd.shape
        H = self.H
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x_btd))).view(B, T, H, self.nope + self.rope)
        q_content, q_shared = q.split([self.nope, self.rope], dim=-1)
        latent_new, shared_new = self.kv_a_proj_with_mqa(x_btd).split([self.kv_rank, self.rope], dim=-1)
        new = mla.MLACache(torch.cat([cache.latent, self.kv_a_layernorm(latent_new)], dim=1),
                           torch.cat([cache.shared_key, shared_new], dim=1))
        seen = cache if attend_first else new  # the bug: attend over the cache before appending
        S, P = seen.latent.shape[1], cache.latent.shape[1]
        kv = self.kv_b_proj(seen.latent).view(B, S, H, self.nope + self.vdim)
        k_content, v = kv.split([self.nope, self.vdim], dim=-1)
        scores = torch.einsum("bthc,bshc->bhts", q_content, k_content)
        scores = (scores + torch.einsum("bthr,bsr->bhts", q_shared, seen.shared_key)) * self.score_scale
        allowed = torch.arange(S)[None, :] <= (P + torch.arange(T))[:, None]
        scores = scores.masked_fill(~allowed, float("-inf"))
        o = torch.einsum("bhts,bshv->bthv", torch.softmax(scores, dim=-1), v).reshape(B, T, H * self.vdim)
        gated = torch.sigmoid(self.g_proj(x_btd)) * o
        # the bug: the hub [out, in] weight used as if it were the spec's [in, out]
        y = gated @ self.o_proj.weight if transpose_o else self.o_proj(gated)
        return y, new

    return forward


def test_mla_attending_before_appending_is_flagged(monkeypatch) -> None:
    monkeypatch.setattr(mla.GatedMLA, "forward", _mla_forward(attend_first=True))
    failures = flagged("mla")
    # with an empty cache the first token attends over nothing (an empty softmax gives 0)
    assert any(c.ref == "graph" and c.output == "y_t2" for c in failures)


def test_mla_forward_copy_is_faithful(monkeypatch) -> None:
    """The copied forward without a bug passes: the failures above come from the bugs."""
    monkeypatch.setattr(mla.GatedMLA, "forward", _mla_forward())
    assert runner.run(["mla"], cases=CASES, seed=0, dtypes=["float64"], use_lean=False, shrink=False).passed


def retrieve_normalized(sources, query_d, eps):
    """attnres.retrieve mixing the normalized sources (a known bug)."""
    v = torch.stack(sources, dim=0)
    normed = rms_norm(v, eps)
    weights = torch.softmax((normed * query_d).sum(-1), dim=0)
    return (weights[..., None] * normed).sum(0)  # mixes RMSNorm(v_i), not v_i


def test_attnres_mixing_normalized_values_is_flagged(monkeypatch) -> None:
    monkeypatch.setattr(attnres, "retrieve", retrieve_normalized)
    failures = flagged("attnres")
    assert {c.ref for c in failures} <= {"lean", "numpy", "graph"}


def test_decoder_step_flags_attnres_mixing_normalized_values(monkeypatch) -> None:
    """The same bug inside the whole model (pybridge.model imports `retrieve` by name): the
    decoder step's logits and states leave the float64 graph of the Lean export."""
    monkeypatch.setattr(attnres, "retrieve", retrieve_normalized)
    monkeypatch.setattr(k3model, "retrieve", retrieve_normalized)
    failures = flagged("decoder_step")
    assert {(c.impl, c.ref) for c in failures} == {("torch", "graph")}
    assert max(c.err for c in failures if c.output == "logits") > 1e-3


def test_transposed_in_out_weight_is_flagged(monkeypatch) -> None:
    # o_proj is square in the tiny configuration (3 heads × 8 = 24 = hidden), so the
    # transposed weight runs without a shape error: only the values are wrong
    monkeypatch.setattr(mla.GatedMLA, "forward", _mla_forward(transpose_o=True))
    failures = flagged("mla")
    assert max(c.err for c in failures) > 1e-2


def test_decoder_step_flags_a_route_that_is_not_the_graph_top_k(monkeypatch) -> None:
    """A gate that picks the lowest-scoring experts: the graph is staged with that route, and its
    own top-k differs; the run reports the route mismatch (exact outputs) instead of crashing."""

    def gate_bottom_k(self, x_nd):
        scores_ne = torch.sigmoid(x_nd @ self.weight.T)
        idx_nk = moe.select_top_k(-(scores_ne + self.e_score_correction_bias), self.top_k)
        raw_nk = scores_ne.gather(1, idx_nk)
        return idx_nk, self.scaling * raw_nk / raw_nk.sum(-1, keepdim=True)

    monkeypatch.setattr(moe.MoEGate, "forward", gate_bottom_k)
    failures = flagged("decoder_step")
    routes = [c for c in failures if c.output.endswith(".route")]
    assert routes and all(c.tol == 0.0 and "exact output differs" in c.note for c in routes)
