"""pybridge.adapter, the one hub ↔ spec parameter mapping: both round trips are the identity on
random tensors; each mapping on a hand-built case whose expected entries are written down here
index by index (not by the adapter's reshapes); bad input names the tensor; the README table is
the adapter's; a checkpoint on disk reads into the same spec parameters."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch

from pybridge import adapter
from pybridge.checkpoint import load_spec_params, random_model, save_checkpoint
from pybridge.config import load_config
from pybridge.errors import CheckpointError

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "fixtures" / "tiny" / "config.json"
CFG = load_config(TINY)


def coded(*shape: int) -> torch.Tensor:
    """Entry i (row-major) holds i + 1: every entry distinct, so any misplaced one shows."""
    n = 1
    for s in shape:
        n *= s
    return torch.arange(1, n + 1, dtype=torch.float64).reshape(shape)


def test_hub_spec_hub_is_the_identity_on_a_random_checkpoint() -> None:
    hub = random_model(CFG, seed=4, dtype=torch.float64).state_dict()
    back = adapter.spec_to_hub(CFG, adapter.hub_to_spec(CFG, hub))
    assert set(back) == set(hub)
    for name, t in hub.items():
        assert torch.equal(back[name], t), name


def test_spec_hub_spec_is_the_identity() -> None:
    gen = torch.Generator().manual_seed(5)
    rules = adapter.model_rules(CFG)
    spec = {n: torch.randn(s, dtype=torch.float64, generator=gen) for r in rules for n, s in zip(r.spec, r.spec_shapes)}
    back = adapter.hub_to_spec(CFG, adapter.spec_to_hub(CFG, spec))
    assert set(back) == set(spec)
    for name, t in spec.items():
        assert torch.equal(back[name], t), name


def test_round_trip_with_tied_embeddings() -> None:
    cfg = dataclasses.replace(CFG, tie_word_embeddings=True)
    hub = random_model(cfg, seed=1, dtype=torch.float64).state_dict()
    spec = adapter.hub_to_spec(cfg, hub)  # lm_head.weight is the embedding: dropped
    assert "lm_head.weight" not in spec
    back = adapter.spec_to_hub(cfg, spec)
    assert set(back) == set(hub) - {"lm_head.weight"}
    hub["lm_head.weight"] = hub["lm_head.weight"] + 1.0
    with pytest.raises(CheckpointError, match="'lm_head.weight' differs"):
        adapter.hub_to_spec(cfg, hub)


def test_kda_mapping_by_hand() -> None:
    D, H, K, V, W, R = 24, 2, 5, 7, 4, 15
    hub = {
        "q_proj.weight": coded(H * K, D), "k_proj.weight": coded(H * K, D) + 1000, "v_proj.weight": coded(H * V, D),
        "q_conv1d.weight": coded(H * K, 1, W), "k_conv1d.weight": coded(H * K, 1, W) + 50,
        "v_conv1d.weight": coded(H * V, 1, W), "f_a_proj.weight": coded(R, D), "f_b_proj.weight": coded(H * K, R),
        "dt_bias": coded(H * K), "A_log": coded(H), "b_proj.weight": coded(H, D), "g_proj.weight": coded(H * V, D),
        "o_norm.weight": coded(V), "o_proj.weight": coded(D, H * V),
    }
    spec = adapter.to_spec(adapter.kda_rules(CFG), hub)
    for d in range(D):
        for h in range(H):
            for k in range(K):
                assert spec["query_proj"][d, h, k] == hub["q_proj.weight"][h * K + k, d]
                assert spec["key_proj"][d, h, k] == hub["k_proj.weight"][h * K + k, d]
            for c in range(V):
                assert spec["value_proj"][d, h, c] == hub["v_proj.weight"][h * V + c, d]
                assert spec["gate_weight"][d, h, c] == hub["g_proj.weight"][h * V + c, d]
                assert spec["output_proj"][h, c, d] == hub["o_proj.weight"][d, h * V + c]
        for h in range(H):
            assert spec["beta_proj"][d, h] == hub["b_proj.weight"][h, d]
        for r in range(R):
            assert spec["decay_down"][d, r] == hub["f_a_proj.weight"][r, d]
    for t in range(W):  # tap t multiplies window row t (oldest first)
        for h in range(H):
            for k in range(K):
                assert spec[f"query_conv.{t}"][h, k] == hub["q_conv1d.weight"][h * K + k, 0, t]
                assert spec[f"key_conv.{t}"][h, k] == hub["k_conv1d.weight"][h * K + k, 0, t]
            for c in range(V):
                assert spec[f"value_conv.{t}"][h, c] == hub["v_conv1d.weight"][h * V + c, 0, t]
    for r in range(R):
        for h in range(H):
            for k in range(K):
                assert spec["decay_up"][r, h, k] == hub["f_b_proj.weight"][h * K + k, r]
    for h in range(H):
        for k in range(K):
            assert spec["decay_bias"][h, k] == hub["dt_bias"][h * K + k]
    assert torch.equal(spec["decay_log_scale"], hub["A_log"]) and torch.equal(spec["out_norm_scale"], hub["o_norm.weight"])


def test_mla_mapping_by_hand() -> None:
    D, H, Lq, Lkv, C, R, V = 24, 3, 10, 11, 9, 14, 8
    hub = {
        "q_a_proj.weight": coded(Lq, D), "q_a_layernorm.weight": coded(Lq), "kv_a_proj_with_mqa.weight": coded(Lkv + R, D),
        "kv_a_layernorm.weight": coded(Lkv), "q_b_proj.weight": coded(H * (C + R), Lq),
        "kv_b_proj.weight": coded(H * (C + V), Lkv), "g_proj.weight": coded(H * V, D), "o_proj.weight": coded(D, H * V),
    }
    spec = adapter.to_spec(adapter.mla_rules(CFG), hub)
    for d in range(D):
        for j in range(Lq):
            assert spec["query_down"][d, j] == hub["q_a_proj.weight"][j, d]
        for j in range(Lkv):
            assert spec["kv_down"][d, j] == hub["kv_a_proj_with_mqa.weight"][j, d]
        for r in range(R):
            assert spec["shared_key_down"][d, r] == hub["kv_a_proj_with_mqa.weight"][Lkv + r, d]
        for h in range(H):
            for c in range(V):
                assert spec["gate_weight"][d, h, c] == hub["g_proj.weight"][h * V + c, d]
                assert spec["output_weight"][h, c, d] == hub["o_proj.weight"][d, h * V + c]
    for h in range(H):
        for i in range(Lq):
            for c in range(C):
                assert spec["query_content_up"][h, i, c] == hub["q_b_proj.weight"][h * (C + R) + c, i]
            for r in range(R):
                assert spec["query_shared_up"][h, i, r] == hub["q_b_proj.weight"][h * (C + R) + C + r, i]
        for i in range(Lkv):
            for c in range(C):
                assert spec["key_up"][h, i, c] == hub["kv_b_proj.weight"][h * (C + V) + c, i]
            for c in range(V):
                assert spec["value_up"][h, i, c] == hub["kv_b_proj.weight"][h * (C + V) + C + c, i]


def test_moe_mapping_by_hand() -> None:
    D, E, S, h, L = 24, 6, 2, 13, 12
    hub = {"gate.weight": coded(E, D), "gate.e_score_correction_bias": coded(E),
           "shared_experts.gate_proj.weight": coded(S * h, D), "shared_experts.up_proj.weight": coded(S * h, D) + 7,
           "shared_experts.down_proj.weight": coded(D, S * h), "routed_expert_down_proj.weight": coded(L, D),
           "routed_expert_up_proj.weight": coded(D, L), "routed_expert_norm.weight": coded(L)}
    for e in range(E):
        hub |= {f"experts.{e}.w1.weight": coded(h, L) * (e + 1), f"experts.{e}.w3.weight": coded(h, L) * (e + 2),
                f"experts.{e}.w2.weight": coded(L, h) * (e + 3)}
    spec = adapter.to_spec(adapter.moe_rules(CFG), hub)
    for d in range(D):
        for e in range(E):
            assert spec["router.weight"][d, e] == hub["gate.weight"][e, d]
        for j in range(S):
            for u in range(h):  # shared expert j is hidden block j of the merged MLP
                assert spec[f"moe.shared.gate[{j}]"][d, u] == hub["shared_experts.gate_proj.weight"][j * h + u, d]
                assert spec[f"moe.shared.up[{j}]"][d, u] == hub["shared_experts.up_proj.weight"][j * h + u, d]
                assert spec[f"moe.shared.down[{j}]"][u, d] == hub["shared_experts.down_proj.weight"][d, j * h + u]
        for j in range(L):
            assert spec["moe.downProject"][d, j] == hub["routed_expert_down_proj.weight"][j, d]
            assert spec["moe.upProject"][j, d] == hub["routed_expert_up_proj.weight"][d, j]
    for e in range(E):
        for i in range(L):
            for u in range(h):
                assert spec[f"moe.expert.gate[{e}]"][i, u] == hub[f"experts.{e}.w1.weight"][u, i]
                assert spec[f"moe.expert.up[{e}]"][i, u] == hub[f"experts.{e}.w3.weight"][u, i]
                assert spec[f"moe.expert.down[{e}]"][u, i] == hub[f"experts.{e}.w2.weight"][i, u]
    staged = adapter.stage_route(spec, [4, 1])
    assert torch.equal(staged["moe.slot.router[0]"], hub["gate.weight"][4])
    assert torch.equal(staged["moe.slot.down[1]"], hub["experts.1.w2.weight"].T)


def test_layer_and_model_level_mapping_by_hand() -> None:
    hub = random_model(CFG, seed=2, dtype=torch.float64).state_dict()
    spec = adapter.hub_to_spec(CFG, hub)
    for i in range(CFG.num_hidden_layers):
        p, q = f"model.layers.{i}.", f"layers.{i + 1}."
        # the score query . (gain * RMSNorm(v)) is the hub's (res_norm.weight * res_proj.weight[0]) . RMSNorm(v)
        for hub_name, spec_name in (("self_attention_res", "seq_res"), ("mlp_res", "chan_res")):
            for d in range(CFG.hidden_size):
                assert spec[q + f"{spec_name}.query"][d] == hub[p + f"{hub_name}_proj.weight"][0, d]
            assert torch.equal(spec[q + f"{spec_name}.norm_gain"], hub[p + f"{hub_name}_norm.weight"])
        assert torch.equal(spec[q + "seq_norm.scale"], hub[p + "input_layernorm.weight"])
        assert torch.equal(spec[q + "chan_norm.scale"], hub[p + "post_attention_layernorm.weight"])
        assert (q + "mla.key_up" in spec) == CFG.is_mla(i) and (q + "kda.query_proj" in spec) != CFG.is_mla(i)
        assert (q + "router.weight" in spec) == CFG.is_moe(i) and (q + "mlp.gateWeight" in spec) != CFG.is_moe(i)
    for v in range(CFG.vocab_size):
        for d in range(CFG.hidden_size):
            assert spec["lm_head.weight"][d, v] == hub["lm_head.weight"][v, d]
    assert torch.equal(spec["token_embedding"], hub["model.embed_tokens.weight"])
    assert torch.equal(spec["final_res.query"], hub["model.output_attn_res_proj.weight"][0])


def test_missing_tensor_is_named() -> None:
    hub = random_model(CFG, seed=0, dtype=torch.float64).state_dict()
    del hub["model.layers.3.self_attn.kv_b_proj.weight"]
    with pytest.raises(CheckpointError, match=r"missing hub tensor 'model.layers.3.self_attn.kv_b_proj.weight' \(expected shape \[51, 11\]\)"):
        adapter.hub_to_spec(CFG, hub)


def test_wrong_shape_and_unexpected_tensors_are_named() -> None:
    hub = random_model(CFG, seed=0, dtype=torch.float64).state_dict()
    hub["model.layers.0.self_attn.q_conv1d.weight"] = torch.zeros(10, 1, 3)
    hub["model.layers.0.self_attn.extra"] = torch.zeros(1)
    with pytest.raises(CheckpointError) as err:
        adapter.hub_to_spec(CFG, hub)
    assert "hub tensor 'model.layers.0.self_attn.q_conv1d.weight' has shape [10, 1, 3], expected [10, 1, 4]" in str(err.value)
    assert "unexpected hub tensor 'model.layers.0.self_attn.extra'" in str(err.value)
    spec = adapter.to_spec(adapter.kda_rules(CFG), {k.removeprefix("model.layers.0.self_attn."): v for k, v in
                                                    random_model(CFG, 0, torch.float64).state_dict().items()
                                                    if k.startswith("model.layers.0.self_attn.")})
    spec["query_conv.2"] = spec["query_conv.2"].T
    with pytest.raises(CheckpointError, match=r"spec tensor 'query_conv.2' has shape \[5, 2\], expected \[2, 5\]"):
        adapter.to_hub(adapter.kda_rules(CFG), spec)


def test_readme_table_is_the_adapters() -> None:
    text = (REPO / "pybridge" / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- adapter table: begin -->\n(.*?)\n<!-- adapter table: end -->", text, re.S)
    assert block, "pybridge/README.md lost its generated adapter table markers"
    assert block.group(1) == adapter.mapping_table(CFG), "regenerate with `python -m pybridge.adapter`"


def test_checkpoint_reads_into_spec_parameters(tmp_path) -> None:
    model = random_model(CFG, seed=9, dtype=torch.float64)
    cfg, spec = load_spec_params(save_checkpoint(model, TINY, tmp_path, num_shards=2))
    want = adapter.hub_to_spec(CFG, model.state_dict())
    assert cfg == CFG and set(spec) == set(want)
    assert all(torch.equal(spec[k], want[k]) for k in want)
