"""The Kimi Linear configuration and layer schedule in Lean (lean/KimiK3/KimiLinear/Config.lean)
against the fixture, pybridge and transformers.

The schedule facts of the released Kimi-Linear-48B-A3B configuration (20 KDA and 7 MLA layers,
the first layer dense, K3's rule at 27 layers, the default schedule without the lists) are
theorems checked by the build (`decide`). Here `Config.toJson` is evaluated on `kimiLinear48B`,
`tinyConfig` and variants of them that exercise every branch of the schedule rules
(`layer_types` over the lists, the two lists, transformers' default; `mlp_layer_types` over
`first_k_dense_replace`), and each must agree with:

* the hub files: `fixtures/kimi-linear-48b/config.json` field by field, and difftest's `TINY`;
* pybridge's reading, `pybridge.config_kimi_linear.kimi_linear_config_from_dict` (`layer_types`,
  `mlp_layer_types`);
* transformers 5.23's own `KimiLinearConfig` (`__post_init__`'s precedence), an independent
  witness of the rules.

Evaluation uses `codegen`'s bundle, since the offline interpreter cannot run another module's code.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest
from helpers import lean_run

from difftest.components.kimi_linear import TINY
from pybridge.config_kimi_linear import kimi_linear_config_from_dict

pytestmark = pytest.mark.lean

REPO = Path(__file__).resolve().parents[1]
RELEASED = json.loads((REPO / "fixtures" / "kimi-linear-48b" / "config.json").read_text(encoding="utf-8"))

#: hub fields `KimiLinear.Config` does not hold: what does not enter the equations, and the
#: behaviour flags the variant fixes (pybridge rejects any other value)
NOT_IN_CONFIG = {
    "_notes", "architectures", "model_type", "hidden_act", "mla_use_nope", "tie_word_embeddings",
    "model_max_length", "moe_layer_freq", "num_expert_group", "topk_group", "moe_renormalize",
    "moe_router_activation_func", "num_nextn_predict_layers",
}

KDA, MLA = "KimiK3.AttentionKind.kda", "KimiK3.AttentionKind.mla"
DENSE, MOE = "KimiK3.KimiLinear.ChannelKind.dense", "KimiK3.KimiLinear.ChannelKind.moe"
LEAN_KIND = {"linear_attention": KDA, "full_attention": MLA, "dense": DENSE, "sparse": MOE}

#: 27 explicit layer types (not the lists' schedule) and MLP types (not `first_k_dense_replace`'s)
EXPLICIT_LAYERS = ["full_attention" if i % 3 == 1 else "linear_attention" for i in range(27)]
EXPLICIT_MLP = ["sparse" if i % 2 else "dense" for i in range(27)]


def lean_list(kinds: list[str]) -> str:
    return "[" + ", ".join(LEAN_KIND[k] for k in kinds) + "]"


def without(d: dict, *keys: str, lac: tuple[str, ...] = ()) -> dict:
    out = {k: v for k, v in d.items() if k not in keys}
    out["linear_attn_config"] = {k: v for k, v in d["linear_attn_config"].items() if k not in lac}
    return out


#: (name, Lean configuration term, the same configuration as a hub dict)
CASES = [
    ("released", "KimiK3.KimiLinear.kimiLinear48B", RELEASED),
    ("tiny", "KimiK3.KimiLinear.tinyConfig", TINY),
    # no lists: transformers' default schedule; no dense layer
    ("default-schedule",
     "{ KimiK3.KimiLinear.kimiLinear48B with fullAttnLayers := none, kdaLayers := none, firstKDenseReplace := 0 }",
     {**without(RELEASED, lac=("full_attn_layers", "kda_layers")), "first_k_dense_replace": 0}),
    # one list only: still the default schedule; three dense layers
    ("one-list",
     "{ KimiK3.KimiLinear.kimiLinear48B with kdaLayers := none, firstKDenseReplace := 3 }",
     {**without(RELEASED, lac=("kda_layers",)), "first_k_dense_replace": 3}),
    # explicit per-layer lists win over the two lists and first_k_dense_replace
    ("explicit",
     "{ KimiK3.KimiLinear.kimiLinear48B with layerTypes := some " + lean_list(EXPLICIT_LAYERS)
     + ", mlpLayerTypes := some " + lean_list(EXPLICIT_MLP) + " }",
     {**RELEASED, "layer_types": EXPLICIT_LAYERS, "mlp_layer_types": EXPLICIT_MLP}),
]


@lru_cache(maxsize=1)
def lean_docs() -> dict[str, dict]:
    """One Lean run of `Config.toJson` on every case."""
    tail = "\n".join(f"#eval! IO.println (KimiK3.KimiLinear.Config.toJson ({term}))" for _, term, _ in CASES)
    out = lean_run(("KimiK3.KimiLinear.Config",), tail, "KimiLinearConfig")
    assert len(out.docs) == len(CASES), out.texts
    return {name: doc for (name, _, _), doc in zip(CASES, out.docs)}


def transformers_schedule(hub: dict) -> tuple[list[str], list[str]]:
    from transformers import KimiLinearConfig

    cfg = KimiLinearConfig.from_dict({**hub, "pad_token_id": None, "bos_token_id": None, "eos_token_id": None})
    return list(cfg.layer_types), list(cfg.mlp_layer_types)


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_schedule_matches_pybridge_and_transformers(name: str) -> None:
    hub = next(h for n, _, h in CASES if n == name)
    sched = lean_docs()[name]["schedule"]
    py = kimi_linear_config_from_dict(hub)
    assert sched["layer_types"] == list(py.layer_types)
    assert sched["mlp_layer_types"] == list(py.mlp_layer_types)
    assert (sched["layer_types"], sched["mlp_layer_types"]) == transformers_schedule(hub)
    # the 1-based lists agree with the per-layer ones
    n = len(sched["layer_types"])
    assert n == hub["num_hidden_layers"]
    assert sched["full_attn_layers"] == [i + 1 for i in range(n) if py.is_mla(i)]
    assert sched["kda_layers"] == [i + 1 for i in range(n) if not py.is_mla(i)]
    assert sched["moe_layers"] == [i + 1 for i in range(n) if py.is_moe(i)]
    assert sched["dense_layers"] == [i + 1 for i in range(n) if not py.is_moe(i)]


@pytest.mark.parametrize("name", ["released", "tiny"])
def test_config_matches_hub_file(name: str) -> None:
    """Every hub field of the file is in the Lean configuration with the same value (or
    deliberately outside it), and the Lean fields are the file's; the file's two lists are the
    derived schedule."""
    lean = dict(lean_docs()[name])
    raw = next(h for n, _, h in CASES if n == name)
    sched = lean.pop("schedule")
    lean_lac, raw_lac = lean.pop("linear_attn_config"), raw["linear_attn_config"]
    assert set(lean) == set(raw) - NOT_IN_CONFIG - {"linear_attn_config"}
    for key, value in lean.items():
        assert value == raw[key], key
    assert lean_lac == raw_lac
    assert sched["full_attn_layers"] == raw_lac["full_attn_layers"]
    assert sched["kda_layers"] == raw_lac["kda_layers"]


def test_released_fields_are_transformers_defaults() -> None:
    """The fixture's values are transformers 5.23's `KimiLinearConfig` defaults (its docstring's
    checkpoint is this release), all but the layer lists: transformers' default schedule differs,
    as `kimiLinear48B_default_schedule_differs` states."""
    from transformers import KimiLinearConfig

    default = KimiLinearConfig()
    for key, value in RELEASED.items():
        if key in ("_notes", "architectures", "linear_attn_config") or not hasattr(default, key):
            continue
        assert getattr(default, key) == value, key
    lac = RELEASED["linear_attn_config"]
    assert (default.linear_num_heads, default.linear_head_dim, default.linear_conv_kernel_dim) == (
        lac["num_heads"], lac["head_dim"], lac["short_conv_kernel_size"])
    released_schedule = lean_docs()["released"]["schedule"]
    assert [i + 1 for i, t in enumerate(default.layer_types) if t == "full_attention"] == [5, 9, 13, 17, 21, 25]
    assert released_schedule["full_attn_layers"] == [4, 8, 12, 16, 20, 24, 27]
    # the Lean facts, as the build proves them
    assert (len(released_schedule["kda_layers"]), len(released_schedule["full_attn_layers"])) == (20, 7)
    assert released_schedule["dense_layers"] == [1] and len(released_schedule["moe_layers"]) == 26
