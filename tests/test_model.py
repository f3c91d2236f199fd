"""Full model and its parts: spec worked numbers, layer schedule, AttnRes bookkeeping,
MoE routing, MLA prefill/decode, and the whole model against the plain reference."""

import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pybridge.attnres import DepthState, retrieve
from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge.errors import InputError
from pybridge.layers import situ, soft_cap
from pybridge.moe import LatentMoE, MoEGate
from pybridge.reference import reference_logits

F64 = torch.float64
torch.set_num_threads(1)  # tiny tensors gain nothing from threads; on a shared box they only add contention
TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "config.json"


@pytest.fixture(scope="module")
def cfg():
    return load_config(TINY)


@pytest.fixture(scope="module")
def model(cfg):
    return random_model(cfg, seed=0, dtype=F64)


def ids(n: int, seed: int, vocab: int) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


# ---- spec worked numbers -------------------------------------------------------------


def test_situ_worked_numbers():
    t = lambda x: torch.tensor(x, dtype=F64)  # noqa: E731
    assert float(soft_cap(4.0, t(2.0))) == pytest.approx(1.848469, abs=1e-6)
    assert float(situ(t(2.0), t(6.0), 4.0, 25.0)) == pytest.approx(9.585417, abs=1e-6)
    z = situ(t([1.0, 2.0]), t([2.0, 6.0]), 4.0, 25.0)  # toy expert: g = (1, 2), u = (2, 6)
    assert z.tolist() == pytest.approx([1.429351, 9.585417], abs=1e-6)
    assert float(z[0] - z[1]) == pytest.approx(-8.156066, abs=1e-6)  # D = [[1], [-1]]
    assert float(situ(t(12.0), t(12.0), 4.0, 25.0)) == pytest.approx(44.40, abs=5e-3)


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_situ_bounded_by_caps(g, u):
    assert abs(float(situ(torch.tensor(g, dtype=F64), torch.tensor(u, dtype=F64), 4.0, 25.0))) <= 100.0


def gate_with_scores(scores: list[float], bias: list[float]) -> tuple[MoEGate, torch.Tensor]:
    """A 1-wide gate whose sigmoid scores for input x = [1] are exactly `scores`."""
    gate = MoEGate(1, len(scores), 2, 1.0).to(F64)
    with torch.no_grad():
        s = torch.tensor(scores, dtype=F64)
        gate.weight.copy_((s / (1 - s)).log()[:, None])
        gate.e_score_correction_bias.copy_(torch.tensor(bias, dtype=F64))
    return gate, torch.ones(1, 1, dtype=F64)


def test_routing_bias_selects_only():
    gate, x = gate_with_scores([0.8, 0.7, 0.6, 0.2], [0.0, 0.0, 0.0, 0.0])
    idx, w = gate(x)
    assert idx[0].tolist() == [0, 1]
    gate, x = gate_with_scores([0.8, 0.7, 0.6, 0.2], [0.0, 0.0, 0.3, 0.0])
    idx, w = gate(x)
    assert idx[0].tolist() == [2, 0]
    assert w[0].tolist() == pytest.approx([3 / 7, 4 / 7], abs=1e-12)  # raw scores, not 0.9


def test_routing_ties_go_to_lowest_index():
    gate, x = gate_with_scores([0.5, 0.7, 0.5, 0.7, 0.5], [0.0] * 5)
    assert gate(x)[0][0].tolist() == [1, 3]
    gate, x = gate_with_scores([0.5, 0.6, 0.5, 0.5, 0.5], [0.0] * 5)
    assert gate(x)[0][0].tolist() == [1, 0]


def test_attnres_retrieval_by_hand():
    v1, v2 = torch.tensor([1.0, 0.0], dtype=F64), torch.tensor([0.0, 2.0], dtype=F64)
    w = torch.tensor([0.5, -1.0], dtype=F64)
    eps = 1e-5
    s1 = 0.5 * 1.0 / math.sqrt(0.5 + eps)  # RMSNorm([1, 0]) = [1, 0] / sqrt(1/2 + eps)
    s2 = -1.0 * 2.0 / math.sqrt(2.0 + eps)
    a1 = math.exp(s1) / (math.exp(s1) + math.exp(s2))
    expected = [a1 * 1.0, (1 - a1) * 2.0]  # mixes the un-normalised sources
    assert retrieve([v1, v2], w, eps).tolist() == pytest.approx(expected, abs=1e-14)


@pytest.mark.parametrize("layers,completed,partial_size", [(17, 1, 5), (93, 7, 9), (24, 2, 0)])
def test_attnres_block_bookkeeping(layers, completed, partial_size):
    depth = DepthState([torch.zeros(1)], block_size=12)
    for i in range(layers):
        depth.add_sequence_output(torch.ones(1))
        depth.finish_layer(torch.ones(1))
    assert len(depth.blocks) == 1 + completed and depth.count == partial_size
    assert [float(b) for b in depth.blocks[1:]] == [24.0] * completed  # 12 layers x (1 + 1)
    assert (depth.partial is None) == (partial_size == 0)
    assert len(depth.sources()) == 1 + completed + (partial_size > 0)


def test_paper_schedule():
    paper = load_config(TINY.parents[1] / "paper" / "config.json")
    mla = [n for n in range(1, 94) if paper.is_mla(n - 1)]
    assert len(mla) == 24 and mla[-2:] == [92, 93] and 93 - len(mla) == 69
    cached = paper.kv_lora_rank + paper.qk_rope_head_dim
    expanded = paper.num_attention_heads * (paper.qk_nope_head_dim + paper.qk_rope_head_dim + paper.v_head_dim)
    assert (cached, expanded) == (576, 30720) and expanded * 3 == cached * 160


def test_tiny_covers_every_component(cfg, model):
    kinds = {(layer.is_mla, hasattr(layer, "block_sparse_moe")) for layer in model.model.layers}
    assert kinds == {(False, False), (False, True), (True, True)}
    assert cfg.num_hidden_layers > cfg.attn_res_block_size  # at least one completed block
    dims = [
        cfg.hidden_size,
        cfg.kda_num_heads,
        cfg.kda_head_k_dim,
        cfg.kda_head_v_dim,
        cfg.kda_decay_rank,
        cfg.num_attention_heads,
        cfg.q_lora_rank,
        cfg.kv_lora_rank,
        cfg.qk_nope_head_dim,
        cfg.qk_rope_head_dim,
        cfg.v_head_dim,
        cfg.num_experts,
        cfg.routed_expert_hidden_size,
        cfg.moe_intermediate_size,
        cfg.intermediate_size,
        cfg.vocab_size,
    ]
    assert len(set(dims)) == len(dims)


# ---- batched/chunked paths against plain per-token ones ------------------------------


def test_model_matches_plain_reference(cfg, model):
    seq = ids(37, 1, cfg.vocab_size)  # > 2 KDA chunks, not a multiple of 16
    with torch.no_grad():
        logits, _ = model(torch.tensor([seq]))
    expected = reference_logits(cfg, model.state_dict(), seq)
    torch.testing.assert_close(logits[0], expected, rtol=0, atol=1e-10)


def test_hub_defaults_match_reference(tmp_path):
    """Without the tiny fixture's per-site epsilons (the hub file has only `rms_norm_eps`), with
    a routed scaling factor of 1 and tied embeddings, the model still equals the plain reference,
    and every default is the hub's."""
    raw = json.loads(TINY.read_text())
    for key in ("attn_res_norm_eps", "final_norm_eps", "mla_latent_norm_eps", "latent_moe_norm_eps"):
        raw.pop(key)
    for key in ("output_norm_eps", "l2_norm_eps"):
        raw["linear_attn_config"].pop(key)
    raw.update(routed_scaling_factor=1.0, tie_word_embeddings=True, rms_norm_eps=3e-5)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    hub_cfg = load_config(tmp_path)
    assert hub_cfg.kda_query_scale == 5**-0.5 and hub_cfg.mla_score_scale == 23**-0.5
    assert (hub_cfg.mla_latent_norm_eps, hub_cfg.kda_l2_norm_eps) == (1e-6, 1e-6)  # hard-coded by the hub
    assert {hub_cfg.attn_res_norm_eps, hub_cfg.final_norm_eps, hub_cfg.latent_moe_norm_eps,
            hub_cfg.kda_output_norm_eps} == {3e-5}  # rms_norm_eps
    hub_model = random_model(hub_cfg, seed=4, dtype=F64)
    seq = ids(19, 12, hub_cfg.vocab_size)
    with torch.no_grad():
        logits, _ = hub_model(torch.tensor([seq]))
    torch.testing.assert_close(logits[0], reference_logits(hub_cfg, hub_model.state_dict(), seq), rtol=0, atol=1e-10)


def test_tiny_fixture_has_no_neutral_values(cfg, model):
    """Every real hyperparameter of the tiny configuration is exercised: random `dt_bias`
    is nonzero, the query scale and routed scaling factor are not 1, and no two norm sites share
    an epsilon (so a site wired to the wrong epsilon changes the outputs)."""
    assert cfg.kda_query_scale == 5**-0.5 and cfg.routed_scaling_factor == 2.5
    sites = (cfg.rms_norm_eps, cfg.attn_res_norm_eps, cfg.final_norm_eps, cfg.mla_latent_norm_eps,
             cfg.latent_moe_norm_eps, cfg.kda_output_norm_eps, cfg.kda_l2_norm_eps)
    assert len(set(sites)) == len(sites)
    for layer in model.model.layers:
        if not layer.is_mla:
            assert float(layer.self_attn.dt_bias.detach().abs().min()) > 0


def test_each_norm_site_reads_its_own_epsilon(tmp_path, cfg):
    """Changing one site's epsilon (to a value that matters: 1.0 against unit-scale inputs)
    changes the logits, and the plain reference follows it."""
    seq = ids(7, 6, cfg.vocab_size)
    base = random_model(cfg, seed=5, dtype=F64)
    with torch.no_grad():
        want, _ = base(torch.tensor([seq]))
    raw = json.loads(TINY.read_text())
    for key in ("rms_norm_eps", "attn_res_norm_eps", "final_norm_eps", "mla_latent_norm_eps", "latent_moe_norm_eps",
                "linear_attn_config.output_norm_eps", "linear_attn_config.l2_norm_eps"):
        changed = json.loads(json.dumps(raw))
        node, leaf = (changed["linear_attn_config"], key.split(".")[1]) if "." in key else (changed, key)
        node[leaf] = 1.0
        (tmp_path / "config.json").write_text(json.dumps(changed))
        other_cfg = load_config(tmp_path)
        other = random_model(other_cfg, seed=5, dtype=F64)
        with torch.no_grad():
            got, _ = other(torch.tensor([seq]))
        assert float((got - want).abs().max()) > 1e-6, key
        torch.testing.assert_close(got[0], reference_logits(other_cfg, other.state_dict(), seq), rtol=0, atol=1e-10)


def test_prefill_then_decode_equals_token_by_token(cfg, model):
    seq = ids(29, 2, cfg.vocab_size)
    with torch.no_grad():
        prefill, cache = model(torch.tensor([seq[:20]]))
        steps = [prefill]
        for t in seq[20:]:
            out, cache = model(torch.tensor([[t]]), cache)
            steps.append(out)
        one_by_one, c2 = [], None
        for t in seq:
            out, c2 = model(torch.tensor([[t]]), c2)
            one_by_one.append(out)
    torch.testing.assert_close(torch.cat(steps, 1), torch.cat(one_by_one, 1), rtol=0, atol=1e-10)
    assert cache.length == c2.length == len(seq)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(2, 40), data=st.data())
def test_chunked_continuation_with_cache(cfg, model, n, data):
    """Prefill a prefix, then prefill the rest on top of the cache (MLA mask offset, KDA
    initial state and conv windows) == one prefill over everything."""
    split = data.draw(st.integers(1, n - 1))
    seq = torch.tensor([ids(n, n + 100 * split, cfg.vocab_size)])
    with torch.no_grad():
        whole, _ = model(seq)
        first, cache = model(seq[:, :split])
        rest, _ = model(seq[:, split:], cache)
    torch.testing.assert_close(torch.cat([first, rest], 1), whole, rtol=0, atol=1e-10)


def test_generate_is_greedy_over_reference(cfg, model):
    prompt = [1, 2, 3]
    new = model.generate(torch.tensor([prompt]), 16)[0].tolist()
    assert len(new) == 16
    ref = reference_logits(cfg, model.state_dict(), prompt + new[:-1])
    assert ref[len(prompt) - 1 :].argmax(-1).tolist() == new


def test_kda_impls_agree_inside_the_model(cfg, model):
    seq = torch.tensor([ids(21, 11, cfg.vocab_size)])
    with torch.no_grad():
        auto, _ = model(seq)
        model.set_kda_impl("recurrent")
        recurrent, _ = model(seq)
        model.set_kda_impl("auto")
    torch.testing.assert_close(recurrent, auto, rtol=0, atol=1e-12)


def test_batch_rows_are_independent(cfg, model):
    a, b = ids(18, 3, cfg.vocab_size), ids(18, 4, cfg.vocab_size)
    with torch.no_grad():
        both, _ = model(torch.tensor([a, b]))
        only_b, _ = model(torch.tensor([b]))
    torch.testing.assert_close(both[1], only_b[0], rtol=0, atol=1e-12)


def test_future_tokens_do_not_leak(cfg, model):
    seq = ids(20, 5, cfg.vocab_size)
    other = seq[:12] + ids(8, 6, cfg.vocab_size)
    with torch.no_grad():
        a, _ = model(torch.tensor([seq]))
        b, _ = model(torch.tensor([other]))
    torch.testing.assert_close(a[0, :12], b[0, :12], rtol=0, atol=1e-13)


def test_mla_mask_is_true_exclusion(model):
    """Huge future keys would leak through a finite sentinel; -inf gives them weight 0."""
    mla = model.model.layers[3].self_attn
    gen = torch.Generator().manual_seed(10)
    x = torch.randn(1, 16, mla.q_a_proj.in_features, dtype=F64, generator=gen)
    x_loud = x.clone()
    x_loud[:, 9:] = 1e4 * torch.randn(1, 7, x.shape[-1], dtype=F64, generator=gen)
    with torch.no_grad():
        y, _ = mla(x, mla.initial_state(1, x))
        y_loud, _ = mla(x_loud, mla.initial_state(1, x))
    torch.testing.assert_close(y_loud[:, :9], y[:, :9], rtol=0, atol=1e-13)


def test_mla_prefill_equals_steps(model):
    mla = model.model.layers[3].self_attn
    x = torch.randn(2, 15, mla.q_a_proj.in_features, dtype=F64, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        y, cache = mla(x, mla.initial_state(2, x))
        c, ys = mla.initial_state(2, x), []
        for t in range(15):
            yt, c = mla(x[:, t : t + 1], c)
            ys.append(yt)
    torch.testing.assert_close(torch.cat(ys, 1), y, rtol=0, atol=1e-12)
    assert cache.latent.shape == (2, 15, mla.kv_rank) and cache.shared_key.shape == (2, 15, mla.rope)


def test_moe_batched_equals_per_token(model):
    moe = model.model.layers[1].block_sparse_moe
    assert isinstance(moe, LatentMoE)
    x = torch.randn(3, 11, moe.gate.weight.shape[1], dtype=F64, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        batched = moe(x)
        per_token = torch.stack([torch.stack([moe(x[b, t][None, None])[0, 0] for t in range(11)]) for b in range(3)])
    torch.testing.assert_close(batched, per_token, rtol=0, atol=1e-12)


def test_float32_close_to_float64(cfg, model):
    m32 = random_model(cfg, seed=0, dtype=torch.float32)
    seq = torch.tensor([ids(24, 9, cfg.vocab_size)])
    with torch.no_grad():
        torch.testing.assert_close(m32(seq)[0].double(), model(seq)[0], rtol=1e-4, atol=1e-4)


def test_bad_inputs_raise_input_error(cfg, model):
    with pytest.raises(InputError, match="token ids"):
        model(torch.tensor([[0, cfg.vocab_size]]))
    with pytest.raises(InputError, match="shape"):
        model(torch.zeros(1, 0, dtype=torch.long))
