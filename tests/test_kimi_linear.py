"""The Kimi Linear variant (`pybridge.kimi_linear`, `pybridge.config_kimi_linear`) against
transformers 5.23's Kimi Linear, the independent leg: its layers and whole model run from the
float64 copy of its modeling file (`difftest.adapters.kimi_linear_f64`; the float32 casts made
float64, the kernel-hub decorators removed), on the same random weights mapped to transformers'
names (`pybridge.adapter.kimi_linear_to_transformers`), in float64 on the CPU, to 1e-12
(normwise relative). Planted bugs (a shifted conv window and a dropped router scaling in copies of
transformers' code, dt_bias dropped from pybridge's gate) are caught."""

from __future__ import annotations

import json
import math

import pytest
import torch

from difftest.adapters import kimi_linear_f64
from difftest.adapters.kimi_linear import hf_config
from difftest.components.kimi_linear import KDA_LAYER, MLA_LAYER, TINY, hub_config
from pybridge import adapter
from pybridge.checkpoint import init_random_, load_checkpoint
from pybridge.config import config_from_dict, load_config
from pybridge.config_kimi_linear import KimiLinearConfig
from pybridge.errors import ConfigError
from pybridge.kimi_linear import (KimiLinearForCausalLM, KimiLinearKDA, KimiLinearMLA, RoutedScalingMoE,
                                  softplus_decay_gate)
from helpers import TINY as K3_TINY
import kimi_linear_planted as planted

F64 = torch.float64
RTOL = 1e-12


def rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).abs().max() / want.abs().max())


def hf(cls: str, hub_cfg: dict, hub: dict, *args, source=None) -> torch.nn.Module:
    """transformers' `cls` (float64 copy, or `source`) holding the hub-named weights `hub`."""
    m = getattr(source or kimi_linear_f64.module(), cls)(hf_config(hub_cfg), *args).to(F64)
    m.load_state_dict(adapter.kimi_linear_to_transformers(hub))
    return m.eval()


def seeded(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    return init_random_(module.to(F64), seed).eval()


def causal(T: int) -> torch.Tensor:
    return torch.full((T, T), float("-inf"), dtype=F64).triu(1)[None, None]


# --- configuration -----------------------------------------------------------------------------

def test_config_selects_variant_in_both_spellings(tmp_path):
    hf_config(TINY).save_pretrained(tmp_path)  # transformers' flat spelling too: linear_head_dim, layer_types, ...
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["model_type"] == "kimi_linear" and written["linear_head_dim"] == 6 and written["layer_types"]
    flat = {k: v for k, v in written.items() if k != "linear_attn_config"}
    from_hub = config_from_dict(TINY)
    assert config_from_dict(flat) == from_hub
    from_file = load_config(tmp_path)
    assert isinstance(from_hub, KimiLinearConfig) and from_hub.variant == "kimi_linear"
    assert from_file == from_hub
    assert from_hub.layer_types == ("linear_attention", "linear_attention", "full_attention", "linear_attention")
    assert from_hub.mlp_layer_types == ("dense", "sparse", "sparse", "sparse")
    assert from_hub.kda_query_scale == 6**-0.5 and from_hub.q_lora_rank is None and from_hub.kda_gate_rank == 6
    assert (from_hub.kda_decay_gate, from_hub.mla_output_gate, from_hub.expert_activation) == ("softplus", False, "swiglu")
    assert from_hub.routed_scaling_factor == 2.446 and not from_hub.moe_latent_projection
    assert load_config(K3_TINY).variant == "k3"  # K3's fixture says kimi_linear too; its K3 fields keep it K3


@pytest.mark.parametrize("change, field", [
    ({"hidden_size": None}, "hidden_size"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"topk_group": 2, "num_expert_group": 4}, "topk_group"),
    ({"routed_scaling_factor": -1.0}, "routed_scaling_factor"),
    ({"layer_types": ["linear_attention"]}, "layer_types"),
    ({"linear_attn_config": {"num_heads": 2, "short_conv_kernel_size": 4}}, "head_dim"),
    ({"linear_attn_config": {**TINY["linear_attn_config"], "full_attn_layers": [9]}}, "full_attn_layers"),
    ({"moe_layer_freq": 2}, "moe_layer_freq"),
])
def test_config_errors_name_the_field(change, field):
    d = {k: v for k, v in {**TINY, **change}.items() if v is not None}
    with pytest.raises(ConfigError, match=field):
        config_from_dict(d)


def test_float64_copy_makes_every_edit():
    assert kimi_linear_f64.edited_source()[1] == kimi_linear_f64.EDITS
    src = kimi_linear_f64.edited_source()[0]
    assert "torch.float32" not in src and ".float()" not in src and "use_kernel_func_from_hub" not in src.split("def ")[-1]


# --- layers --------------------------------------------------------------------------------------

def test_softplus_decay_gate_by_hand():
    z = torch.tensor([[[[-1.0, 0.0, 25.0]]]], dtype=F64)
    g = softplus_decay_gate(z, torch.tensor([math.log(2.0)], dtype=F64))
    want = [-2 * math.log(1 + math.exp(-1.0)), -2 * math.log(2.0), -2 * 25.0]
    assert torch.allclose(g.flatten(), torch.tensor(want, dtype=F64), rtol=1e-15, atol=0)


@pytest.mark.parametrize("T, scale, impl", [(9, 1.0, "chunk"), (40, 1.0, "chunk"), (9, 30.0, "chunk"), (9, 1.0, "recurrent")])
def test_kda_layer_matches_transformers(T, scale, impl):
    cfg = config_from_dict(TINY)
    pb = seeded(KimiLinearKDA(cfg), T)
    pb.impl = impl
    ref = hf("KimiLinearDeltaAttention", TINY, pb.state_dict(), KDA_LAYER)
    x = scale * torch.randn(2, T, 16, dtype=F64, generator=torch.Generator().manual_seed(T))
    with torch.no_grad():
        got, want = pb(x, pb.initial_state(2, x))[0], ref(x)
        assert rel(got, want) < RTOL
        # decode: one token at a time through pybridge's state equals transformers' prefill
        st, ys = pb.initial_state(2, x), []
        for t in range(T):
            y, st = pb(x[:, t : t + 1], st)
            ys.append(y)
        assert rel(torch.cat(ys, 1), want) < RTOL


@pytest.mark.parametrize("q_lora", [0, 5])
def test_mla_matches_transformers(q_lora):
    d = hub_config({"Lq": q_lora})
    pb = seeded(KimiLinearMLA(config_from_dict(d)), q_lora)
    assert not hasattr(pb, "g_proj") and hasattr(pb, "q_proj") == (q_lora == 0)
    ref = hf("KimiLinearAttention", d, pb.state_dict(), MLA_LAYER)
    x = torch.randn(2, 9, 16, dtype=F64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert rel(pb(x, pb.initial_state(2, x))[0], ref(x, attention_mask=causal(9))[0]) < RTOL


@pytest.mark.parametrize("renormalize", [True, False])
def test_moe_matches_transformers(renormalize):
    d = {**TINY, "moe_renormalize": renormalize}
    pb = seeded(RoutedScalingMoE(config_from_dict(d)), 3)
    ref = hf("KimiLinearMoE", d, pb.state_dict())
    x = torch.randn(18, 16, dtype=F64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        got, want = pb(x), ref(x)
    assert rel(got, want) < RTOL
    idx, w = pb.gate(x)
    _, w_ref, idx_ref = ref.gate(x)
    assert torch.equal(idx.sort(-1).values, idx_ref.sort(-1).values)
    if renormalize:  # the mixture weights sum to the routed scaling factor
        assert torch.allclose(w.sum(-1), torch.full((18,), TINY["routed_scaling_factor"], dtype=F64), rtol=1e-14)


def test_state_dict_mapping_round_trips():
    hf_model = kimi_linear_f64.module().KimiLinearForCausalLM(hf_config(TINY))
    sd = hf_model.state_dict()
    hub = adapter.kimi_linear_from_transformers(sd)
    assert "model.layers.0.self_attn.q_conv1d.weight" in hub and "model.layers.1.block_sparse_moe.experts.3.w3.weight" in hub
    assert "model.layers.0.mlp.gate_proj.weight" in hub  # a dense layer keeps mlp.
    back = adapter.kimi_linear_to_transformers(hub)
    assert set(back) == set(sd) and all(torch.equal(back[k], sd[k]) for k in sd)


# --- the whole tiny model, through a transformers-written checkpoint ---------------------------------

def test_whole_model_checkpoint_matches_transformers(tmp_path):
    from transformers import KimiLinearForCausalLM as HFModel

    pb = seeded(KimiLinearForCausalLM(config_from_dict(TINY)), 7)
    hf_model = HFModel(hf_config(TINY)).to(F64)  # transformers' own class writes the checkpoint
    hf_model.load_state_dict(adapter.kimi_linear_to_transformers(pb.state_dict()))
    hf_model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    loaded = load_checkpoint(tmp_path, F64)
    assert isinstance(loaded, KimiLinearForCausalLM)
    ref = hf("KimiLinearForCausalLM", TINY, pb.state_dict())
    ids = torch.randint(0, TINY["vocab_size"], (2, 11), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        want = ref(input_ids=ids).logits
        got, cache = loaded(ids[:, :-1])
        step, _ = loaded(ids[:, -1:], cache)
    assert rel(got, want[:, :-1]) < RTOL and rel(step, want[:, -1:]) < RTOL


# --- planted bugs ------------------------------------------------------------------------------------

def test_planted_bugs_are_caught():
    cfg = config_from_dict(TINY)
    x = torch.randn(2, 9, 16, dtype=F64, generator=torch.Generator().manual_seed(3))
    pb = seeded(KimiLinearKDA(cfg), 9)
    with torch.no_grad():
        y = pb(x, pb.initial_state(2, x))[0]
        shifted = hf("KimiLinearDeltaAttention", TINY, pb.state_dict(), KDA_LAYER,
                     source=kimi_linear_f64.module(planted.SHIFTED_CONV))
        assert rel(y, shifted(x)) > 1e3 * RTOL  # a copy of transformers' layer with its conv window shifted

        class NoDtBias(KimiLinearKDA):
            def log_decay(self, x_btd):
                B, T, _ = x_btd.shape
                z = self.f_b_proj(self.f_a_proj(x_btd)).view(B, T, self.H, self.K)
                return softplus_decay_gate(z, self.A_log.view(self.H))

        bad = NoDtBias(cfg).to(F64)
        bad.load_state_dict(pb.state_dict())
        assert rel(bad(x, bad.initial_state(2, x))[0], hf("KimiLinearDeltaAttention", TINY, pb.state_dict(), KDA_LAYER)(x)) > 1e3 * RTOL
        moe = seeded(RoutedScalingMoE(cfg), 3)
        unscaled = hf("KimiLinearMoE", TINY, moe.state_dict(), source=kimi_linear_f64.module(planted.NO_ROUTED_SCALING))
        xm = x.reshape(-1, 16)
        assert rel(unscaled(xm), moe(xm)) > 1e3 * RTOL


def test_random_checkpoint_generates_transformers_greedy_tokens(tmp_path):
    """`make-random-checkpoint` and `generate` on a Kimi Linear config: pybridge's cached greedy
    decode equals greedy decoding by transformers' model recomputing the whole prefix."""
    from pybridge.checkpoint import random_model, save_checkpoint

    (tmp_path / "config.json").write_text(json.dumps(TINY))
    model = random_model(config_from_dict(TINY), seed=4, dtype=F64)
    save_checkpoint(model, tmp_path / "config.json", tmp_path / "ckpt")
    loaded = load_checkpoint(tmp_path / "ckpt", F64)
    ref = hf("KimiLinearForCausalLM", TINY, model.state_dict())
    ids = torch.tensor([[1, 2, 3], [40, 7, 59]])
    got = loaded.generate(ids, 6)
    seq = ids
    with torch.no_grad():
        for _ in range(6):
            seq = torch.cat([seq, ref(input_ids=seq).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(got, seq[:, 3:])


def test_bad_kimi_linear_checkpoint_names_the_tensor(tmp_path):
    from safetensors.torch import load_file, save_file

    from pybridge.errors import CheckpointError

    pb = seeded(KimiLinearForCausalLM(config_from_dict(TINY)), 1)
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    state = {k: v.contiguous() for k, v in pb.state_dict().items() if k != "model.layers.3.self_attn.k_conv1d.weight"}
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"missing tensor 'model\.layers\.3\.self_attn\.k_conv1d\.weight'"):
        load_checkpoint(tmp_path, F64)
    fused = adapter.kimi_linear_to_transformers(pb.state_dict())
    fused["model.layers.0.self_attn.conv1d.weight"] = fused["model.layers.0.self_attn.conv1d.weight"][:-1]
    save_file({k: v.contiguous() for k, v in fused.items()}, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"'model\.layers\.0\.self_attn\.conv1d\.weight' has 35 rows, not a multiple of 3"):
        load_checkpoint(tmp_path, F64)
    assert load_file(str(tmp_path / "model.safetensors"))  # the file itself is fine: the mapping names the fault


def test_transformers_cached_decode_matches_pybridge_prefill():
    """transformers' own decode path (DynamicCache: `causal_conv1d_update`, the recurrent KDA
    fallback, the MLA latent cache) after a prefill, against pybridge's prefill of the whole row."""
    pb = seeded(KimiLinearForCausalLM(config_from_dict(TINY)), 7)
    ref = hf("KimiLinearForCausalLM", TINY, pb.state_dict())
    ids = torch.randint(0, TINY["vocab_size"], (2, 11), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        past = ref(input_ids=ids[:, :8], use_cache=True).past_key_values
        steps = []
        for t in range(8, 11):
            out = ref(input_ids=ids[:, t : t + 1], past_key_values=past, use_cache=True)
            past = out.past_key_values
            steps.append(out.logits)
        assert rel(pb(ids)[0][:, 8:], torch.cat(steps, 1)) < RTOL
