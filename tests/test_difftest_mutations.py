"""Planted bugs, each caught by the default run of its component (`difftest run --component C
--no-lean`: one case of every input kind, every dtype, seed 0) against a reference independent
of the code under test; and equivalent rewrites that must not be flagged.

The bugs are injected by monkeypatching (pybridge's model, its configuration reader, the
hub ↔ spec adapter, the graph compiler's op table), never by editing files. Each test names the
leg where the bug shows; `test_difftest_lean.py` runs checks against the Lean leg itself.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from difftest import runner
from difftest.components import base
import test_mxfp4_mutations as mxfp4_bugs  # the planted quantizer bugs, defined with their own tests
import test_speculative as speculative_bugs  # the planted rollback bug, likewise
from pybridge import adapter, attnres, config, kda, layers, mla, moe, mxfp4
from pybridge import model as k3model
from pybridge.graph import compile as graph_compile
from pybridge.layers import compute_dtype, lin, rms_norm


@pytest.fixture(autouse=True)
def fresh_graphs():
    """Compiled graphs are cached: a patched compiler must compile afresh, and leave no trace."""
    base.compiled.cache_clear()
    yield
    base.compiled.cache_clear()


def default_run(component: str):
    return runner.run([component], seed=0, use_lean=False, shrink=False)


def flagged(component: str) -> list:
    """The failing comparisons of the default run (at least one, against an independent reference)."""
    failures = [c for r in default_run(component).results for c in r.failures()]
    assert failures, f"the default run did not flag the planted bug in {component}"
    assert any(c.ref in ("lean", "graph", "numpy") for c in failures), {(c.impl, c.ref) for c in failures}
    return failures


def passes(component: str) -> None:
    result = default_run(component)
    assert result.passed, [(c.kind, c.dtype, c.impl, c.output, c.err, c.tol) for r in result.results for c in r.failures()]


def patch_config(monkeypatch, **changes) -> None:
    """pybridge's configuration reader returns `changes` (K3Config field -> function of the
    value read) applied to what it reads: a bug in the torch leg's reader only."""
    read = config.config_from_dict

    def buggy(raw):
        cfg = read(raw)
        return dataclasses.replace(cfg, **{k: f(cfg) for k, f in changes.items()})

    monkeypatch.setattr(config, "config_from_dict", buggy)


# --- configuration mapping -----------------------------------------------------------------------

def test_reader_swapping_the_situ_caps_is_flagged(monkeypatch) -> None:
    patch_config(monkeypatch, situ_gate_cap=lambda c: c.situ_up_cap, situ_up_cap=lambda c: c.situ_gate_cap)
    failures = flagged("expert")
    assert {(c.impl, c.ref) for c in failures if c.dtype == "float64"} >= {("torch", "graph"), ("torch", "numpy")}


def test_reader_with_a_wrong_attn_res_eps_is_flagged(monkeypatch) -> None:
    """The AttnRes score norms' ε (`attn_res_norm_eps`) read wrong by the torch leg."""
    patch_config(monkeypatch, attn_res_norm_eps=lambda c: 1e-6)
    failures = flagged("attnres")
    assert "eps" in {c.kind for c in failures}


def test_reader_with_an_off_by_one_dense_schedule_is_flagged(monkeypatch) -> None:
    """The MoE rule with `>` for `>=`: the first MoE layer becomes dense in pybridge only."""
    monkeypatch.setattr(config.K3Config, "is_moe", lambda self, i: i > self.first_k_dense_replace and i % self.moe_layer_freq == 0)
    failures = [c for r in default_run("decoder_step").results for c in r.failures()]
    # the NumPy and graph legs (difftest's own schedule) find no MoE parameters for layer 2
    assert any(c.impl == "numpy" and "layer 2 MoE, but the parameters have no 'layers.2.router.weight'" in c.note
               for c in failures), {c.note for c in failures}


def test_reader_with_an_off_by_one_block_size_is_flagged(monkeypatch) -> None:
    patch_config(monkeypatch, attn_res_block_size=lambda c: c.attn_res_block_size + 1)
    failures = flagged("decoder_step")
    assert any(c.output == "logits" and c.impl == "torch" for c in failures)



# --- the completed spec's non-neutral values (issue 15 item 5; tiny: ρ = 2.5, every ε its own) ---

def test_reader_ignoring_the_routed_scaling_factor_is_flagged(monkeypatch) -> None:
    """ρ read as 1: the routed path is RMS-normalized, so ρ shows only through ε (the `eps` kind)."""
    patch_config(monkeypatch, routed_scaling_factor=lambda c: 1.0)
    assert "eps" in {c.kind for c in flagged("latent_moe")}


def test_reader_giving_the_mla_latent_norms_rms_norm_eps_is_flagged(monkeypatch) -> None:
    """`q_a_layernorm`/`kv_a_layernorm` with `rms_norm_eps` (1e-5) instead of
    `mla_latent_norm_eps` (tiny: 2e-6): the ε mix-up the spec settles."""
    patch_config(monkeypatch, mla_latent_norm_eps=lambda c: c.rms_norm_eps)
    flagged("mla")


def test_kda_layer_dropping_dt_bias_is_flagged(monkeypatch) -> None:
    """The decay logit without the hub's `dt_bias` (nonzero in every case)."""
    prepare = kda.KimiDeltaAttention.prepare

    def no_bias(self, x_btd, st):
        saved = self.dt_bias.data.clone()
        self.dt_bias.data.zero_()
        try:
            return prepare(self, x_btd, st)
        finally:
            self.dt_bias.data.copy_(saved)

    monkeypatch.setattr(kda.KimiDeltaAttention, "prepare", no_bias)
    failures = flagged("kda_layer")
    assert {c.dtype for c in failures} >= {"float64"}


def test_kda_layer_without_the_query_scale_is_flagged(monkeypatch) -> None:
    """The readout not scaled (fla's `scale` left at 1): the per-head output norm hides it
    except near its ε."""
    patch_config(monkeypatch, kda_query_scale=lambda c: 1.0)
    flagged("kda_layer")


# --- the hub <-> spec adapter ----------------------------------------------------------------------

def test_adapter_reversing_the_conv_taps_is_flagged(monkeypatch) -> None:
    real = adapter.conv_taps

    def reversed_taps(hub, spec, heads, width, taps):
        r = real(hub, spec, heads, width, taps)
        return dataclasses.replace(r, to_hub=lambda *s: r.to_hub(*s[::-1]))

    monkeypatch.setattr(adapter, "conv_taps", reversed_taps)
    failures = flagged("kda_layer")
    assert {c.ref for c in failures} >= {"numpy", "graph"}


def test_adapter_pairing_shared_experts_with_the_wrong_down_block_is_flagged(monkeypatch) -> None:
    real = adapter.merged_experts

    def swapped_down(hub, spec, dim, hidden, count):
        r = real(hub, spec, dim, hidden, count)

        def to_hub(*s):
            g, u, d = r.to_hub(*s)
            blocks = d.reshape(dim, count, hidden).flip(1).reshape(dim, count * hidden)  # expert j's down <- expert S-1-j's
            return g, u, blocks

        return dataclasses.replace(r, to_hub=to_hub)

    monkeypatch.setattr(adapter, "merged_experts", swapped_down)
    flagged("latent_moe")


def test_adapter_reading_the_output_projection_width_major_is_flagged(monkeypatch) -> None:
    """`[heads, width, out]` filled as if the hub's input axis were width-major."""

    def width_major(hub, spec, heads, width, out):
        return adapter.Rule((hub,), (spec,), ((out, heads * width),), ((heads, width, out),),
                            lambda w: (w.T.reshape(width, heads, out).transpose(0, 1),),
                            lambda s: (s.transpose(0, 1).reshape(heads * width, out).T,), "bug")

    monkeypatch.setattr(adapter, "linear_out_heads", width_major)
    flagged("mla")


# --- the graph compiler's op semantics ---------------------------------------------------------------

def test_compiler_putting_the_rmsnorm_eps_outside_the_root_is_flagged(monkeypatch) -> None:
    def rms_norm_eps_outside(g, a, node):
        x, gain = a
        ms = g.call_function(torch.mean, (g.call_function(torch.mul, (x, x)), -1), {"keepdim": True})
        denom = g.call_function(torch.add, (g.call_function(torch.sqrt, (ms,)), node.attrs["eps"]))
        return g.call_function(torch.mul, (g.call_function(torch.div, (x, denom)), gain))

    monkeypatch.setitem(graph_compile.EMIT, "rmsNormLast", rms_norm_eps_outside)
    failures = flagged("mla")
    assert all("graph" in (c.impl, c.ref) for c in failures)


def test_compiler_with_swapped_sub_operands_is_flagged(monkeypatch) -> None:
    monkeypatch.setitem(graph_compile.EMIT, "sub", lambda g, a, node: g.call_function(torch.sub, (a[1], a[0])))
    failures = flagged("kda_recurrence")
    assert all("graph" in (c.impl, c.ref) for c in failures)


def test_compiler_softmax_over_the_first_axis_is_flagged(monkeypatch) -> None:
    monkeypatch.setitem(graph_compile.EMIT, "softmaxLast", lambda g, a, node: g.call_function(torch.softmax, (a[0], 0)))
    failures = flagged("decoder_step")
    assert "graph" in {c.impl for c in failures} | {c.ref for c in failures}


def test_compiler_erf_as_a_tanh_curve_is_flagged(monkeypatch) -> None:
    """`erf x` compiled as `tanh(1.2025·x)` (the curve behind the tanh GELU, within 0.02 of erf)
    instead of `torch.erf`: merge-and-project's graph leg, whose GELU is the graph's `erf` node."""
    monkeypatch.setitem(graph_compile.EMIT, "erf", lambda g, a, node: g.call_function(
        torch.tanh, (g.call_function(torch.mul, (a[0], 1.2025)),)))
    failures = flagged("merge_project")
    assert all("graph" in (c.impl, c.ref) for c in failures) and "random" in {c.kind for c in failures}


# --- bugs only some inputs show --------------------------------------------------------------------

def test_router_using_the_first_tokens_route_for_all_is_flagged(monkeypatch) -> None:
    """Visible only with more than one token."""
    real = moe.MoEGate.forward

    def first_route(self, x_nd):
        idx, _ = real(self, x_nd)
        idx = idx[:1].expand_as(idx)
        x = x_nd.to(compute_dtype(x_nd.dtype))
        raw = torch.sigmoid(x @ self.weight.to(x.dtype).T).gather(1, idx)
        return idx, self.scaling * raw / raw.sum(-1, keepdim=True)

    monkeypatch.setattr(moe.MoEGate, "forward", first_route)
    flagged("latent_moe")
    comp = runner.COMPONENTS["latent_moe"]
    one_row = runner.evaluate_case(comp, comp.make_case(0, "random", 0, {**comp.default_sizes, "N": 1}), ["float64"], "cpu", None)
    assert one_row.passed  # with one token the bug is invisible


def test_kernel_starting_every_row_from_the_first_rows_state_is_flagged(monkeypatch) -> None:
    """Visible only with batch > 1 (rows start from different states)."""
    real = kda.kda_chunked

    def shared_state(q, k, v, g, beta, scale, state=None, chunk_size=kda.CHUNK_SIZE):
        if state is not None:
            state = state[:1].expand_as(state).contiguous()
        return real(q, k, v, g, beta, scale, state, chunk_size)

    monkeypatch.setattr(kda, "kda_chunked", shared_state)
    flagged("kda_recurrence")
    comp = runner.COMPONENTS["kda_recurrence"]
    one_row = runner.evaluate_case(comp, comp.make_case(0, "random", 0, {**comp.default_sizes, "B": 1}), ["float64"], "cpu", None)
    assert one_row.passed  # with one row the bug is invisible


def test_mla_mask_ignoring_the_cache_offset_is_flagged(monkeypatch) -> None:
    """Visible only when a prefill starts from a non-empty cache."""
    monkeypatch.setattr(mla.GatedMLA, "forward", _mla_forward(mask_offset=False))
    failures = flagged("mla")
    assert {c.impl for c in failures if c.ref in ("numpy", "graph")} <= {"torch_split", "torch from prefix 5"}


def test_chunk_output_from_the_initial_state_is_flagged(monkeypatch) -> None:
    """kda_chunked reading chunk n's inter-chunk term from the initial state instead of the
    carried one: visible only when one call spans more than one chunk."""

    def chunked_bug(q_bthk, k_bthk, v_bthv, g_bthk, beta_bth, scale, state_bhkv=None, chunk_size=kda.CHUNK_SIZE):
        stored = q_bthk.dtype
        q_bthk, k_bthk, v_bthv, g_bthk, beta_bth = (x.to(compute_dtype(stored)) for x in (q_bthk, k_bthk, v_bthv, g_bthk, beta_bth))
        B, T, H, K = q_bthk.shape
        V, C = v_bthv.shape[-1], chunk_size
        pad = (-T) % C
        if pad:
            q_bthk, k_bthk, v_bthv, g_bthk = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q_bthk, k_bthk, v_bthv, g_bthk))
            beta_bth = F.pad(beta_bth, (0, 0, 0, pad))
        N = (T + pad) // C

        def chunks(x):
            return x.reshape(B, N, C, H, *x.shape[3:]).transpose(2, 3).transpose(1, 2)

        q, k, v, g, beta = map(chunks, (q_bthk, k_bthk, v_bthv, g_bthk, beta_bth))
        G = g.cumsum(dim=-2)
        Gm = G - G[..., C // 2 : C // 2 + 1, :]
        k_pos, k_neg, q_pos = k * Gm.exp(), k * (-Gm).exp(), q * Gm.exp()
        A = (k_pos @ k_neg.transpose(-1, -2)).tril(-1) * beta[..., None]
        M = (q_pos @ k_neg.transpose(-1, -2)).tril()
        eye = torch.eye(C, dtype=q.dtype)
        rhs = torch.cat([beta[..., None] * v, beta[..., None] * (k * G.exp())], dim=-1)
        sol = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
        U, W = sol[..., :V], sol[..., V:]
        q_hat, G_last = q * G.exp(), G[..., -1:, :]
        k_tail = k * (G_last - G).exp()
        S = q.new_zeros(B, H, K, V) if state_bhkv is None else state_bhkv.to(q.dtype)
        S0, outs = S, []
        for n in range(N):
            e = U[:, :, n] - W[:, :, n] @ S
            outs.append(q_hat[:, :, n] @ S0 + M[:, :, n] @ e)  # the bug: S0, not the carried S
            S = G_last[:, :, n, 0, :, None].exp() * S + k_tail[:, :, n].transpose(-1, -2) @ e
        o = torch.stack(outs, dim=2).reshape(B, H, N * C, V).transpose(1, 2)[:, :T]
        return (scale * o).to(stored), S

    monkeypatch.setattr(kda, "kda_chunked", chunked_bug)
    failures = flagged("kda_recurrence")
    assert "short" not in {c.kind for c in failures}
    assert not any(c.impl.startswith("torch_recurrent") and c.ref in ("numpy", "graph") for c in failures)


def test_kda_state_kept_in_bfloat16_between_steps_is_flagged(monkeypatch) -> None:
    """The layer stores S in the model's dtype instead of float32: bfloat16 only."""
    forward = kda.KimiDeltaAttention.forward

    def store_state_low(self, x_btd, st):
        y, new = forward(self, x_btd, st)
        return y, kda.KDAState(new.conv_q, new.conv_k, new.conv_v, new.recurrent.to(x_btd.dtype))

    monkeypatch.setattr(kda.KimiDeltaAttention, "forward", store_state_low)
    failures = flagged("kda_layer")
    assert {c.dtype for c in failures} == {"bfloat16"}
    assert "heads" in {c.output for c in failures}


def test_rmsnorm_computed_in_bfloat16_is_flagged(monkeypatch) -> None:
    """RMSNorm in the storage dtype instead of float32 (the model's pre-norms run on stored
    bfloat16 activations): bfloat16 only."""
    monkeypatch.setattr(layers.RMSNorm, "forward", lambda self, x: rms_norm(x, self.eps, self.weight.to(x.dtype)))
    failures = flagged("decoder_step")
    assert {c.dtype for c in failures} == {"bfloat16"}
    assert {c.output.split(".")[-1] for c in failures} >= {"seq_in", "chan_in"}


# --- model bugs ------------------------------------------------------------------------------------

def test_sigmoid_reading_the_capped_gate_is_flagged(monkeypatch) -> None:
    def situ_capped(gate, up, gate_cap, up_cap):
        capped = layers.soft_cap(gate_cap, gate)
        return capped * torch.sigmoid(capped) * layers.soft_cap(up_cap, up)

    monkeypatch.setattr(layers, "situ", situ_capped)
    assert max(c.err for c in flagged("expert")) > 1e-3


def test_up_path_capped_with_the_gate_cap_is_flagged(monkeypatch) -> None:
    monkeypatch.setattr(layers, "situ", lambda g, u, gc, uc: layers.soft_cap(gc, g) * torch.sigmoid(g) * layers.soft_cap(gc, u))
    assert "cap" in {c.kind for c in flagged("expert")}


def test_mixture_weights_from_bias_adjusted_scores_are_flagged(monkeypatch) -> None:
    def gate_forward(self, x_nd):
        x = x_nd.to(compute_dtype(x_nd.dtype))
        adjusted = torch.sigmoid(x @ self.weight.to(x.dtype).T) + self.e_score_correction_bias.to(x.dtype)
        idx = moe.select_top_k(adjusted, self.top_k)
        chosen = adjusted.gather(1, idx)
        return idx, self.scaling * chosen / chosen.sum(-1, keepdim=True)

    monkeypatch.setattr(moe.MoEGate, "forward", gate_forward)
    assert {c.output for c in flagged("latent_moe")} == {"y"}  # same route, wrong weights


def test_mixture_weights_normalized_over_every_expert_are_flagged(monkeypatch) -> None:
    def gate_forward(self, x_nd):
        x = x_nd.to(compute_dtype(x_nd.dtype))
        raw = torch.sigmoid(x @ self.weight.to(x.dtype).T)
        idx = moe.select_top_k(raw + self.e_score_correction_bias.to(x.dtype), self.top_k)
        return idx, self.scaling * raw.gather(1, idx) / raw.sum(-1, keepdim=True)

    monkeypatch.setattr(moe.MoEGate, "forward", gate_forward)
    flagged("latent_moe")


def test_reversed_tie_rule_is_flagged(monkeypatch) -> None:
    """Equal scores go to the highest index: only exact ties show it (the `tie` kind)."""
    def highest_index(adjusted_ne, k):
        E = adjusted_ne.shape[-1]
        flipped = torch.sort(adjusted_ne.flip(-1), dim=-1, descending=True, stable=True).indices[:, :k]
        return E - 1 - flipped

    monkeypatch.setattr(moe, "select_top_k", highest_index)
    failures = flagged("latent_moe")
    assert {c.kind for c in failures} == {"tie"}


def test_routed_norm_without_eps_is_flagged(monkeypatch) -> None:
    forward = moe.LatentMoE.forward

    def no_eps(self, x_btd):
        self.routed_expert_norm.eps = 0.0
        return forward(self, x_btd)

    monkeypatch.setattr(moe.LatentMoE, "forward", no_eps)
    assert "eps" in {c.kind for c in flagged("latent_moe")}


def test_kda_reading_before_the_update_is_flagged(monkeypatch) -> None:
    def recurrent_read_first(q, k, v, g, beta, scale, state=None):
        B, T, H, K = q.shape
        S = q.new_zeros(B, H, K, v.shape[-1]) if state is None else state.to(q.dtype)
        q, k, v, g, beta = (x.to(S.dtype) for x in (q, k, v, g, beta))
        outs = []
        for t in range(T):
            outs.append(scale * torch.einsum("bhk,bhkv->bhv", q[:, t], S))  # read the old state
            decayed = S * g[:, t].exp()[..., None]
            corr = torch.einsum("bhk,bhkv->bhv", k[:, t], decayed)
            S = decayed + beta[:, t, :, None, None] * k[:, t, ..., None] * (v[:, t] - corr)[:, :, None, :]
        return torch.stack(outs, dim=1), S

    monkeypatch.setattr(kda, "kda_recurrent", recurrent_read_first)
    failures = flagged("kda_recurrence")
    assert "torch_recurrent" in {c.impl for c in failures} and "o" in {c.output for c in failures}


def test_l2_norm_with_eps_outside_the_root_is_flagged(monkeypatch) -> None:
    monkeypatch.setattr(kda, "l2_normalize", lambda x, eps=1e-6: x / (x.pow(2).sum(-1, keepdim=True).sqrt() + eps))
    assert "eps" in {c.kind for c in flagged("kda_layer")}


def test_decay_without_exp_of_the_log_scale_is_flagged(monkeypatch) -> None:
    prepare = kda.KimiDeltaAttention.prepare

    def prepare_bug(self, x_btd, st):
        q, k, v, g, beta, convs = prepare(self, x_btd, st)
        B, T, _ = x_btd.shape
        z = (lin(self.f_b_proj, lin(self.f_a_proj, x_btd)) + self.dt_bias.to(x_btd.dtype)).view(B, T, self.H, self.K)
        return q, k, v, self.lower_bound * torch.sigmoid(self.A_log.to(x_btd.dtype)[:, None] * z), beta, convs

    monkeypatch.setattr(kda.KimiDeltaAttention, "prepare", prepare_bug)
    flagged("kda_layer")


def test_conv_window_keeping_the_oldest_rows_is_flagged(monkeypatch) -> None:
    """Visible only when a later call reads the window (split prefill, decode)."""
    def conv_bug(self, x_btd, window_bwd):
        W = self.weight.shape[-1]
        full = torch.cat([window_bwd.to(x_btd.dtype), x_btd], dim=1)
        out = (full.unfold(1, W, 1) * self.weight[:, 0, :].to(x_btd.dtype)).sum(-1)
        return F.silu(out), full[:, : W - 1].to(window_bwd.dtype)

    monkeypatch.setattr(kda.ShortConv, "forward", conv_bug)
    failures = flagged("kda_layer")
    assert "torch_split" in {c.impl for c in failures}


def test_mla_score_scale_applied_twice_is_flagged(monkeypatch) -> None:
    init = mla.GatedMLA.__init__

    def init_bug(self, cfg):
        init(self, cfg)
        self.score_scale = cfg.mla_score_scale**2

    monkeypatch.setattr(mla.GatedMLA, "__init__", init_bug)
    flagged("mla")


def test_empty_partial_block_as_a_source_is_flagged(monkeypatch) -> None:
    def sources(self):
        return self.blocks + [self.partial if self.partial is not None else torch.zeros_like(self.blocks[0])]

    monkeypatch.setattr(attnres.DepthState, "sources", sources)
    flagged("attnres")


def test_block_folded_one_layer_late_is_flagged(monkeypatch) -> None:
    def finish_layer(self, chan_out):
        self.partial, self.after_seq = self.after_seq + chan_out, None
        self.count += 1
        if self.count == self.block_size + 1:
            self.blocks.append(self.partial)
            self.partial, self.count = None, 0

    monkeypatch.setattr(attnres.DepthState, "finish_layer", finish_layer)
    flagged("attnres")


def retrieve_normalized(sources, query_d, eps):
    """attnres.retrieve mixing the normalized sources (a known bug)."""
    v = torch.stack(sources, dim=0)
    normed = rms_norm(v.to(compute_dtype(v.dtype)), eps)
    weights = torch.softmax((normed * query_d.to(normed.dtype)).sum(-1), dim=0)
    return (weights[..., None] * normed).sum(0).to(v.dtype)  # mixes RMSNorm(v_i), not v_i


def test_attnres_mixing_normalized_values_is_flagged(monkeypatch) -> None:
    monkeypatch.setattr(attnres, "retrieve", retrieve_normalized)
    assert {c.ref for c in flagged("attnres")} <= {"lean", "numpy", "graph"}


def test_decoder_step_flags_attnres_mixing_normalized_values(monkeypatch) -> None:
    """The same bug inside the whole model (pybridge.model imports `retrieve` by name)."""
    monkeypatch.setattr(k3model, "retrieve", retrieve_normalized)
    failures = flagged("decoder_step")
    assert max(c.err for c in failures if c.output == "logits" and c.dtype == "float64") > 1e-3


def test_final_read_with_the_last_layers_query_is_flagged(monkeypatch) -> None:
    forward = k3model.KimiK3ForCausalLM.forward

    def forward_bug(self, ids, cache=None):
        m = self.model
        saved = m.output_attn_res_proj.weight.data.clone()
        m.output_attn_res_proj.weight.data.copy_(m.layers[-1].mlp_res_proj.weight.data)
        try:
            return forward(self, ids, cache)
        finally:
            m.output_attn_res_proj.weight.data.copy_(saved)

    monkeypatch.setattr(k3model.KimiK3ForCausalLM, "forward", forward_bug)
    assert "logits" in {c.output for c in flagged("decoder_step")}


def _mla_forward(attend_first: bool = False, transpose_o: bool = False, mask_offset: bool = True):
    """pybridge's GatedMLA.forward (precision policy included) with one injected bug."""

    def forward(self, x_btd, cache):
        B, T, _ = x_btd.shape
        H = self.H
        stored, x = x_btd.dtype, x_btd.to(compute_dtype(x_btd.dtype))
        q = lin(self.q_b_proj, self.q_a_layernorm(lin(self.q_a_proj, x))).view(B, T, H, self.nope + self.rope)
        q_content, q_shared = q.split([self.nope, self.rope], dim=-1)
        latent_new, shared_new = lin(self.kv_a_proj_with_mqa, x).split([self.kv_rank, self.rope], dim=-1)
        latent_new = self.kv_a_layernorm(latent_new)
        new = mla.MLACache(torch.cat([cache.latent, latent_new.to(stored)], dim=1),
                           torch.cat([cache.shared_key, shared_new.to(stored)], dim=1))
        lat, sh = cache.latent.to(x.dtype), cache.shared_key.to(x.dtype)
        if not attend_first:  # the bug: attend over the cache before appending
            lat, sh = torch.cat([lat, latent_new], 1), torch.cat([sh, shared_new], 1)
        S, P = lat.shape[1], cache.latent.shape[1]
        kv = lin(self.kv_b_proj, lat).view(B, S, H, self.nope + self.vdim)
        k_content, v = kv.split([self.nope, self.vdim], dim=-1)
        scores = torch.einsum("bthc,bshc->bhts", q_content, k_content)
        scores = (scores + torch.einsum("bthr,bsr->bhts", q_shared, sh)) * self.score_scale
        # mask_offset False, the bug: key j allowed for query t when j <= t, not j <= P + t
        if T > 1:
            allowed = torch.arange(S)[None, :] <= ((P if mask_offset else 0) + torch.arange(T))[:, None]
            scores = scores.masked_fill(~allowed, float("-inf"))
        o = torch.einsum("bhts,bshv->bthv", torch.softmax(scores, dim=-1), v).reshape(B, T, H * self.vdim)
        gated = torch.sigmoid(lin(self.g_proj, x)) * o
        # the bug: the hub [out, in] weight used as if it were the spec's [in, out]
        y = gated @ self.o_proj.weight.to(x.dtype) if transpose_o else lin(self.o_proj, gated)
        return y.to(stored), new

    return forward


def test_mla_forward_copy_is_faithful(monkeypatch) -> None:
    """The copied forward without a bug passes: the failures above come from the bugs."""
    monkeypatch.setattr(mla.GatedMLA, "forward", _mla_forward())
    passes("mla")


def test_mla_attending_before_appending_is_flagged(monkeypatch) -> None:
    monkeypatch.setattr(mla.GatedMLA, "forward", _mla_forward(attend_first=True))
    assert any(c.ref in ("graph", "numpy") for c in flagged("mla"))


def test_transposed_in_out_weight_is_flagged(monkeypatch) -> None:
    # o_proj is square in the tiny configuration (3 heads × 8 = 24 = hidden), so the
    # transposed weight runs without a shape error: only the values are wrong
    monkeypatch.setattr(mla.GatedMLA, "forward", _mla_forward(transpose_o=True))
    assert max(c.err for c in flagged("mla")) > 1e-2


def test_decoder_step_flags_a_route_that_is_not_the_top_k(monkeypatch) -> None:
    """A gate that picks the lowest-scoring experts: the routes differ from the NumPy and graph
    routes (exact outputs) instead of crashing."""

    def gate_bottom_k(self, x_nd):
        x = x_nd.to(compute_dtype(x_nd.dtype))
        scores_ne = torch.sigmoid(x @ self.weight.to(x.dtype).T)
        idx_nk = moe.select_top_k(-(scores_ne + self.e_score_correction_bias.to(x.dtype)), self.top_k)
        raw_nk = scores_ne.gather(1, idx_nk)
        return idx_nk, self.scaling * raw_nk / raw_nk.sum(-1, keepdim=True)

    monkeypatch.setattr(moe.MoEGate, "forward", gate_bottom_k)
    routes = [c for c in flagged("decoder_step") if c.output.endswith(".route")]
    assert routes and all(c.tol == 0.0 and "exact output differs" in c.note for c in routes)


# --- microscaling and speculative decoding (issues 19, 20) -----------------------------------------


def test_mxfp4_rounding_half_up_at_the_midpoints_is_flagged(monkeypatch) -> None:
    """E2M1 ties rounded away from zero, not to the even code."""
    monkeypatch.setattr(mxfp4, "e2m1_codes", mxfp4_bugs.half_up)
    failures = {(c.kind, c.output, c.ref) for c in flagged("mxfp4_expert")}
    assert {("midpoint", f"{w}.packed", "numpy") for w in ("gateWeight", "upWeight", "downWeight")} <= failures


def test_mxfp4_floor_scale_rule_is_flagged(monkeypatch) -> None:
    """The block scale 2^⌊log₂(amax/6)⌋ (OCP's floor rule) instead of the ceil rule."""
    monkeypatch.setattr(mxfp4, "scale_codes", mxfp4_bugs.floor_scale)
    failures = {(c.kind, c.output, c.ref) for c in flagged("mxfp4_expert")}
    assert ("random", "gateWeight.scale", "numpy") in failures and ("random", "y", "numpy") in failures


def test_mxfp4_swapped_nibbles_are_flagged(monkeypatch) -> None:
    """The even entry packed in the high nibble."""
    monkeypatch.setattr(mxfp4, "pack_codes", mxfp4_bugs.swapped_nibbles)
    failures = {(c.kind, c.output, c.ref) for c in flagged("mxfp4_expert")}
    assert {("random", "downWeight.packed", "numpy"), ("random", "y", "numpy")} <= failures


def test_mxfp4_scales_along_the_wrong_axis_are_flagged(monkeypatch) -> None:
    """Scales broadcast along the wrong axis (entry j gets group j mod G)."""
    monkeypatch.setattr(mxfp4, "expand_scales", mxfp4_bugs.tiled_scales)
    assert ("random", "y", "numpy") in {(c.kind, c.output, c.ref) for c in flagged("mxfp4_expert")}


def test_speculative_rollback_keeping_the_conv_windows_is_flagged(monkeypatch) -> None:
    """Rejected tokens roll back the KDA states and MLA caches but not the conv windows."""
    speculative_bugs.keep_conv_windows_of_the_verify_pass(monkeypatch)
    failures = flagged("speculative_step")
    failed = {(c.kind, c.impl, c.ref) for c in failures}
    for kind in ("none", "partial"):
        assert {(kind, "torch speculative", "numpy"), (kind, "torch speculative", "torch serial")} <= failed, failed
    # mixed: the rows' accept counts left the plan, so the rows' outputs differ in length
    notes = [c.note for c in failures if c.kind == "mixed"]
    assert notes and all("accepted counts differ from the plan" in n for n in notes), notes
    assert not any(kind in ("all", "zero") for kind, _, _ in failed)  # nothing is rolled back there


# --- pretraining loss (issue 20 item 2) -------------------------------------------------------------

def test_loss_gradient_at_masked_positions_is_flagged(monkeypatch) -> None:
    """The mask forgotten in the closed-form gradient: masked positions get softmax − one-hot."""
    import test_loss as loss_bugs  # the planted bug, defined with its own tests
    from pybridge import loss as pyloss

    monkeypatch.setattr(pyloss, "next_token_gradient", loss_bugs.forgotten_mask_gradient)
    failed = {(c.kind, c.impl, c.ref, c.output) for c in flagged("next_token_loss")}
    for kind in ("random", "peaked", "one_supervised", "sparse_mask"):
        assert {(kind, "torch closed form", "numpy", "grad"), (kind, "torch closed form", "torch", "grad")} <= failed, failed
    assert not any(impl == "torch" for _, impl, _, _ in failed)  # the loss and its autograd are untouched


# --- equivalent rewrites: not flagged ----------------------------------------------------------------

def test_permuting_the_merged_shared_hidden_units_is_not_flagged(monkeypatch) -> None:
    """An MLP is invariant under a permutation of its hidden units (gate and up rows, down
    columns alike): the adapter may interleave the shared experts' blocks."""
    real = adapter.merged_experts

    def interleaved(hub, spec, dim, hidden, count):
        r = real(hub, spec, dim, hidden, count)

        def to_hub(*s):
            g, u, d = r.to_hub(*s)
            perm = torch.arange(count * hidden).reshape(count, hidden).T.reshape(-1)
            return g[perm], u[perm], d[:, perm]

        return dataclasses.replace(r, to_hub=to_hub)

    monkeypatch.setattr(adapter, "merged_experts", interleaved)
    passes("latent_moe")


def test_sigmoid_through_tanh_is_not_flagged(monkeypatch) -> None:
    monkeypatch.setattr(layers, "situ", lambda g, u, gc, uc: layers.soft_cap(gc, g) * (1 + torch.tanh(g / 2)) / 2
                        * layers.soft_cap(uc, u))
    passes("expert")


def test_swapping_the_attnres_query_and_gain_is_not_flagged(monkeypatch) -> None:
    """query · (gain ⊙ RMSNorm(v)) = gain · (query ⊙ RMSNorm(v)): the adapter may swap them."""
    real = adapter.attnres_rules

    def swapped(cfg, hub_norm, hub_proj, spec):
        query, gain = real(cfg, hub_norm, hub_proj, spec)
        return [dataclasses.replace(query, spec=gain.spec), dataclasses.replace(gain, spec=query.spec, spec_shapes=((cfg.hidden_size,),))]

    monkeypatch.setattr(adapter, "attnres_rules", swapped)
    passes("decoder_step")


def test_a_smaller_kda_chunk_is_not_flagged(monkeypatch) -> None:
    real = kda.kda_chunked
    monkeypatch.setattr(kda, "kda_chunked", lambda *a, **k: real(*a, **{**k, "chunk_size": 8}))
    passes("kda_recurrence")


def test_rmsnorm_by_division_is_not_flagged(monkeypatch) -> None:
    def rms_div(x_nd, eps, weight_d=None):
        y = x_nd / torch.sqrt(x_nd.pow(2).mean(-1, keepdim=True) + eps)
        return y if weight_d is None else y * weight_d

    monkeypatch.setattr(layers, "rms_norm", rms_div)
    monkeypatch.setattr(attnres, "rms_norm", rms_div)
    passes("attnres")


# --- MoonViT-V2 (issue 18): the vision encoder's planted bugs and a control ---------------------

def test_rope_turning_pairs_by_column_then_row_is_flagged(monkeypatch) -> None:
    """The 2-D RoPE axis order swapped: the first `head_dim/4` pairs turned by the column, the
    last by the row (visible on every grid with a row or column > 0)."""
    from pybridge import moonvit

    real = moonvit.rope_angles

    def swapped(cfg, h, w):
        a = real(cfg, h, w)
        R = cfg.rope_freqs
        return torch.cat([a[:, R:], a[:, :R]], dim=1)

    monkeypatch.setattr(moonvit, "rope_angles", swapped)
    failures = flagged("vision_block")
    assert {c.kind for c in failures if c.dtype == "float64"} >= {"random", "frames4", "larger"}
    assert any(c.ref == "numpy" for c in flagged("vision_encoder"))


def test_merge_with_the_column_offset_major_is_flagged(monkeypatch) -> None:
    """Space-to-depth channel order `(dw·kh + dh)·D + c` instead of `(dh·kw + dw)·D + c`."""
    from pybridge import moonvit

    def merge_dw_major(y_nd, grid, kernel):
        t, h, w = grid
        kh, kw = kernel
        d = y_nd.shape[-1]
        x = y_nd.reshape(t, h // kh, kh, w // kw, kw, d).mean(0)
        return x.permute(0, 2, 3, 1, 4).reshape((h // kh) * (w // kw), kh * kw * d)

    monkeypatch.setattr(moonvit, "merge_clip", merge_dw_major)
    failures = flagged("merge_project")
    assert {"random", "clips", "single", "frames4"} <= {c.kind for c in failures}


def test_position_table_resampled_with_align_corners_is_flagged(monkeypatch) -> None:
    """Bilinear interpolation weights of `align_corners=True` (corner-aligned) instead of
    half-pixel centres: every resampled grid moves; the table's own grid does not."""
    from pybridge import moonvit

    def corners(self, h, w, dtype):
        table = self.pos_emb.weight.to(dtype).permute(2, 0, 1)[None]
        grid = F.interpolate(table, size=(h, w), mode="bilinear", align_corners=True)
        return grid[0].permute(1, 2, 0).reshape(h * w, -1)

    monkeypatch.setattr(moonvit.PatchEmbed, "position", corners)
    failures = flagged("vision_embed")
    kinds = {c.kind for c in failures}
    assert {"random", "larger", "grid64"} <= kinds and "table" not in kinds
    pairs = {(c.impl, c.ref) for c in failures}
    assert ("torch", "graph") in pairs and ("graph", "numpy") not in pairs  # the graph and NumPy legs agree


def test_single_image_given_the_time_row_zero_is_flagged(monkeypatch) -> None:
    """A single image gets the `f = 0` time row (sine half 0, cosine half 1) instead of nothing."""
    from pybridge import moonvit

    real = moonvit.PatchEmbed.forward

    def with_row_zero(self, patches_np, grids):
        out = real(self, patches_np, grids)
        D, parts, start = self.cfg.hidden_size, [], 0
        for t, h, w in grids:
            n = t * h * w
            extra = moonvit.time_table(1, D).to(out) if t == 1 else torch.zeros(1, D, dtype=out.dtype)
            parts.append(out[start:start + n] + extra)
            start += n
        return torch.cat(parts)

    monkeypatch.setattr(moonvit.PatchEmbed, "forward", with_row_zero)
    failures = flagged("vision_embed")
    assert {c.kind for c in failures} == {"single", "table", "grid64"}
    assert any(c.kind == "random" for c in flagged("vision_encoder"))


def test_splice_filling_the_placeholders_in_reverse_is_flagged(monkeypatch) -> None:
    """The visual tokens spliced into the placeholders last-first instead of in reading order."""
    from pybridge import multimodal

    real = multimodal.splice
    monkeypatch.setattr(multimodal, "splice", lambda e, ids, ph, f: real(e, ids, ph, f.flip(0)))
    failures = flagged("multimodal_prefill")
    assert {c.output for c in failures} == {"logits"} and {c.kind for c in failures} == {"short", "random", "leading"}


def test_position_from_the_integer_bilinear_matrices_is_not_flagged(monkeypatch) -> None:
    """The position term as `rows · table · colsᵀ` with `moonvit_reference.bilinear_weights` (the
    exact integer formula) instead of `F.interpolate`: the same function."""
    from pybridge import moonvit, moonvit_reference

    def by_matrices(self, h, w, dtype):
        table = self.pos_emb.weight.to(dtype)
        rows = moonvit_reference.bilinear_weights(table.shape[0], h).to(dtype)
        cols = moonvit_reference.bilinear_weights(table.shape[1], w).to(dtype)
        return torch.einsum("ri,cj,ijd->rcd", rows, cols, table).reshape(h * w, -1)

    monkeypatch.setattr(moonvit.PatchEmbed, "position", by_matrices)
    passes("vision_embed")
    passes("vision_encoder")
