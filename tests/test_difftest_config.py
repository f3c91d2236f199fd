"""The legs' configuration readers (difftest.config) agree field by field: pybridge's (torch
leg), difftest's own (graph and NumPy legs), the constants the Lean export baked into the
graphs, and the Lean `Config` itself (a Lean run)."""

from __future__ import annotations

import json

import pytest
from helpers import GRAPHS, REPO, TINY, lean_run

from difftest import config


def test_own_and_pybridge_readings_agree_on_the_fixtures() -> None:
    for path in (TINY, REPO / "fixtures" / "paper" / "config.json"):
        assert set(config.own_reading(path)) == set(config.torch_reading(path)) == set(config.FIELDS)
        assert config.own_reading(path) == config.torch_reading(path), path


def test_readings_agree_on_non_neutral_values(tmp_path) -> None:
    """Every value moved off the fixture's (no defaults hide a reader that ignores a field)."""
    raw = json.loads(TINY.read_text())
    raw.update(activation_situ_beta=3.5, activation_situ_linear_beta=21.0, rms_norm_eps=3e-6, mla_score_scale=0.3,
               routed_scaling_factor=2.5, num_experts_per_token=3, attn_res_block_size=2, num_hidden_layers=8,
               first_k_dense_replace=2, moe_layer_freq=2)
    raw["linear_attn_config"].update(gate_lower_bound=-4.0, query_scale=0.6)
    for key in ("kda_layers", "full_attn_layers"):
        raw["linear_attn_config"].pop(key)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    own, torch_ = config.own_reading(path), config.torch_reading(path)
    assert own == torch_
    assert own["mla_layers"] == (4, 8) and own["moe_layers"] == (3, 5, 7) and own["routed_scaling"] == 2.5
    del raw["mla_score_scale"], raw["linear_attn_config"]["query_scale"]
    path.write_text(json.dumps(raw))  # the hub defaults, written out by each reader
    assert config.own_reading(path) == config.torch_reading(path)
    assert config.own_reading(path)["query_scale"] == 5**-0.5


def test_graph_constants_are_the_readings() -> None:
    """ε and the log-decay floor the Lean export baked into each tiny graph equal the readings."""
    r = config.own_reading()
    #: the norm sites each graph holds (each site has its own ε in the tiny configuration)
    sites = {"attnres_tiny.json": ("attn_res_eps",), "channel_latent_moe_tiny.json": ("moe_eps",),
             "mla_packed_step_tiny.json": ("mla_latent_eps",), "kda_layer_step_tiny.json": ("kda_out_eps",),
             "decoder_step_tiny.json": ("rms_eps", "attn_res_eps", "final_eps", "mla_latent_eps", "moe_eps", "kda_out_eps")}
    for file in sorted(p.name for p in GRAPHS.glob("*_tiny.json")):
        if file.startswith("vision_"):
            continue  # test_vision_graph_constants_are_the_readings
        consts = config.graph_constants(file)
        want = {r[k] for k in sites.get(file, ())}
        assert consts.get("rmsNormLast.eps", set()) == want, file
        assert consts.get("l2NormLast.eps", {r["l2_eps"]}) == {r["l2_eps"]}, file
        assert consts.get("scale.c", set()) - {0.0} <= {r["log_floor"], r["query_scale"], r["routed_scaling"]}, file
    assert config.graph_constants("kda_layer_step_tiny.json")["scale.c"] == {r["log_floor"], r["query_scale"]}


def test_vision_graph_constants_are_the_readings() -> None:
    """The MoonViT graphs' baked ε's are `vision_config`'s (difftest's own reading); the block's
    and the encoder's scale constants are the score scale `head_dim^(-1/2)`, the tanh GELU's ½,
    0.044715, √(2/π); merge-and-project's are the erf GELU's ½ and √(1/2)."""
    import math

    from difftest import numpy_vision as nv

    v = nv.vision_reading()
    eps = {"vision_block_tiny.json": {v["eps"]}, "vision_encoder_tiny.json": {v["eps"]},
           "vision_merge_project_tiny.json": {v["projector_eps"]}}
    for file in sorted(p.name for p in GRAPHS.glob("vision_*_tiny.json")):
        assert config.graph_constants(file).get("rmsNormLast.eps", set()) == eps.get(file, set()), file
    for file, want in (("vision_block_tiny.json", {v["head_dim"] ** -0.5, 0.5, 0.044715, math.sqrt(2 / math.pi)}),
                       ("vision_encoder_tiny.json", {v["head_dim"] ** -0.5, 0.5, 0.044715, math.sqrt(2 / math.pi)}),
                       ("vision_merge_project_tiny.json", {0.5, math.sqrt(0.5)})):
        scales = config.graph_constants(file)["scale.c"]
        assert len(scales) == len(want) and all(min(abs(s - w) for s in scales) <= 1e-15 for w in want), (file, scales)


def test_lean_reading_reads_a_config_document() -> None:
    doc = {"activation_situ_beta": 4, "activation_situ_linear_beta": 25,
           "linear_attn_config": {"gate_lower_bound": -5, "full_attn_layers": [4, 5]}}
    assert config.lean_reading(doc=doc) == {"gate_cap": 4, "up_cap": 25, "log_floor": -5, "mla_layers": (4, 5)}


@pytest.mark.lean
@pytest.mark.slow
def test_lean_config_agrees_with_both_readers() -> None:
    out = lean_run(("KimiK3.Model.Config",), "#eval! IO.println (KimiK3.Config.toJson KimiK3.tinyConfig)", "TinyConfig")
    lean = config.lean_reading(doc=out.docs[0])
    own = config.own_reading()
    assert lean and all(lean[k] == own[k] for k in lean), (lean, own)
    assert {"gate_cap", "up_cap", "log_floor", "mla_layers"} <= set(lean)
