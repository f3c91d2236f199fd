"""The configurations of the Lean language model (lean/KimiK3/Model/Config.lean) against the fixtures.

`run_eq_logits`, `run_append` and the configuration facts (69/24 layers, `paperConfig_wf`, the MLA
cache identity) are theorems checked by the build. Here `Config.toJson` of `tinyConfig` and
`paperConfig` is evaluated and must agree field by field with fixtures/tiny/config.json and fixtures/paper/config.json (where the
paper fixture omits a field, with the hub default as pybridge reads it).

Evaluation uses `codegen`'s bundle, since the offline interpreter cannot run another module's code.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest
from helpers import lean_run

from pybridge.config import config_from_dict

pytestmark = pytest.mark.lean

REPO = Path(__file__).resolve().parents[1]

# Lean JSON field -> K3Config attribute (pybridge's reading of the hub config, defaults applied).
TOP_FIELDS = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_hidden_layers": "num_hidden_layers",
    "attn_res_block_size": "attn_res_block_size",
    "num_attention_heads": "num_attention_heads",
    "q_lora_rank": "q_lora_rank",
    "kv_lora_rank": "kv_lora_rank",
    "qk_rope_head_dim": "qk_rope_head_dim",
    "qk_nope_head_dim": "qk_nope_head_dim",
    "v_head_dim": "v_head_dim",
    "num_experts": "num_experts",
    "num_experts_per_token": "num_experts_per_token",
    "num_shared_experts": "num_shared_experts",
    "moe_intermediate_size": "moe_intermediate_size",
    "routed_expert_hidden_size": "routed_expert_hidden_size",
    "intermediate_size": "intermediate_size",
    "first_k_dense_replace": "first_k_dense_replace",
    "moe_layer_freq": "moe_layer_freq",
    "activation_situ_beta": "situ_gate_cap",
    "activation_situ_linear_beta": "situ_up_cap",
}
LAC_FIELDS = {
    "num_heads": "kda_num_heads",
    "head_k_dim": "kda_head_k_dim",
    "head_v_dim": "kda_head_v_dim",
    "decay_rank": "kda_decay_rank",
    "short_conv_kernel_size": "kda_conv_size",
    "gate_lower_bound": "kda_gate_lower_bound",
}
# Hub fields that are not widths or counts: model parameters (eps, scales) or fixed behaviour
# flags that the Lean definitions hard-wire; `Config` does not carry them.
NOT_IN_CONFIG = {
    "_notes", "architectures", "model_type", "max_position_embeddings", "rms_norm_eps",
    "tie_word_embeddings", "hidden_act", "mla_use_nope", "mla_use_output_gate", "mla_score_scale",
    "latent_moe_use_norm", "moe_renormalize", "moe_router_activation_func", "routed_scaling_factor",
    "num_expert_group", "topk_group",
    "num_nextn_predict_layers", "eagle_config",  # the EAGLE-3 draft's fields (pybridge.eagle)
    # the placeholder token of the multimodal splice (pybridge.multimodal), not a width
    "media_placeholder_token_id",
}
LAC_NOT_IN_CONFIG = {"use_full_rank_gate", "query_scale"}


CONFIG_EXPORTS = """
#eval! IO.println (KimiK3.Config.toJson KimiK3.tinyConfig)
#eval! IO.println (KimiK3.Config.toJson KimiK3.paperConfig)
"""


@lru_cache(maxsize=1)
def config_docs() -> list[dict]:
    """One Lean run of `Config.toJson` on `tinyConfig` and `paperConfig`."""
    out = lean_run(("KimiK3.Model.Config",), CONFIG_EXPORTS, "ModelConfig")
    assert len(out.docs) == 2, out.texts
    return out.docs


@pytest.mark.parametrize("index, name", [(0, "tiny"), (1, "paper")])
def test_config_matches_fixture(index: int, name: str) -> None:
    lean = config_docs()[index]
    raw = json.loads((REPO / "fixtures" / name / "config.json").read_text(encoding="utf-8"))
    cfg = config_from_dict(raw)
    lean_lac, raw_lac = lean["linear_attn_config"], raw["linear_attn_config"]
    for key, attr in TOP_FIELDS.items():
        assert lean[key] == getattr(cfg, attr), key
        if key in raw:
            assert lean[key] == raw[key], key
    assert lean["num_key_value_heads"] == raw.get("num_key_value_heads", raw["num_attention_heads"])
    for key, attr in LAC_FIELDS.items():
        assert lean_lac[key] == getattr(cfg, attr), key
        if key in raw_lac:
            assert lean_lac[key] == raw_lac[key], key
    assert lean_lac["head_dim"] == raw_lac["head_dim"]
    mla = [n for n in range(1, cfg.num_hidden_layers + 1) if cfg.is_mla(n - 1)]
    assert lean_lac["full_attn_layers"] == raw_lac["full_attn_layers"] == mla
    assert lean_lac["kda_layers"] == raw_lac["kda_layers"]
    # every hub field is compared above or deliberately outside `Config`
    assert set(raw) <= set(lean) | NOT_IN_CONFIG, set(raw) - set(lean) - NOT_IN_CONFIG
    assert set(raw_lac) <= set(lean_lac) | LAC_NOT_IN_CONFIG
    # MoonViT's widths: every Lean field equals the fixture's `vision_config` entry; output
    # width = text width; attention width divisible by the heads
    lean_vis, raw_vis = lean["vision_config"], raw["vision_config"]
    assert lean_vis == {key: raw_vis.get(key) for key in lean_vis}
    assert lean_vis["text_hidden_size"] == lean["hidden_size"]
    assert lean_vis["qkv_hidden_size"] % lean_vis["vt_num_attention_heads"] == 0


def test_paper_schedule_counts() -> None:
    lac = config_docs()[1]["linear_attn_config"]
    assert (len(lac["kda_layers"]), len(lac["full_attn_layers"])) == (69, 24)
