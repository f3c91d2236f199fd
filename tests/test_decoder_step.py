"""Whole-step graphs (lean/KimiK3/Graph): the KDA layer step and the decoder token step.

Both are exported from Lean terms (`KDA.layerProgram`, `Decoder.program`, built in
`lean/KimiK3/Graph/Kernel.lean`; `KDA.layerProgram_eval` proves the first, the decoder's theorem
is open: `lean/KimiK3/Graph/README.md`)
by `k3spec export` (`codegen/exports.toml`); here the committed files are compiled with
`pybridge.graph` (float64) and compared with pybridge's own layers.

The parameter mappings (hub weights -> graph names), the state packing, the window capture and
the route staging live in `difftest/components/decoder.py` (the `decoder_step` component of
`difftest run`) and are imported here. The torch layers keep their random nonzero `dt_bias`
(the Lean layer's `decayBias`). The graph's window rows are the raw layer inputs of the last
three tokens; pybridge caches their projections, so the new rows are checked through the
projections too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from difftest.components.decoder import PAST, decoder_params, kda_layer_params, run_decoder_step, step_inputs
from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph
from pybridge.kda import KimiDeltaAttention
from pybridge.moe import select_top_k

torch.set_num_threads(1)
F64 = torch.float64
REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "fixtures" / "tiny" / "config.json"
PAPER = REPO / "fixtures" / "paper" / "config.json"
GRAPHS = REPO / "fixtures" / "graphs"
#: float64 agreement bound, relative to the largest entry of the reference tensor.
RTOL = 1e-12


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    got, want = got.detach(), want.detach()
    assert got.shape == want.shape
    err, scale = float((got - want).abs().max()), float(want.abs().max())
    assert err <= RTOL * scale, f"max error {err:.3e} vs bound {RTOL * scale:.3e}"


@pytest.fixture(scope="module")
def tiny_kda() -> KimiDeltaAttention:
    layer = random_model(load_config(TINY), seed=11, dtype=F64).model.layers[0].self_attn
    assert float(layer.dt_bias.detach().abs().min()) > 0  # the decay bias is exercised
    return layer


@pytest.mark.parametrize("seed", [0, 1])
def test_kda_layer_graph_equals_pybridge_layer(tiny_kda: KimiDeltaAttention, seed: int) -> None:
    layer = tiny_kda
    gen = torch.Generator().manual_seed(seed)
    D, H, K, V = layer.q_proj.in_features, layer.H, layer.K, layer.V
    prefix_td = torch.randn(3, D, dtype=F64, generator=gen)
    x_d = torch.randn(D, dtype=F64, generator=gen)
    st = layer.initial_state(1, x_d)
    st.recurrent = torch.randn(1, H, K, V, dtype=F64, generator=gen)
    cg = compile_graph(load_graph(GRAPHS / "kda_layer_step_tiny.json"))
    with torch.no_grad():
        _, st = layer(prefix_td[None], st)  # three tokens: the conv windows are full
        y_btd, st_next = layer(x_d[None, None], st)
        got = cg(kda_layer_params(layer), {
            "x": x_d, "window.0": prefix_td[0], "window.1": prefix_td[1], "window.2": prefix_td[2],
            "heads": st.recurrent[0],
        })
    _close(got["output"], y_btd[0, 0])
    _close(got["heads_next"], st_next.recurrent[0])
    rows_wd = torch.stack([got[f"window_next.{i}"] for i in range(3)])
    assert torch.equal(rows_wd, torch.cat([prefix_td[1:], x_d[None]]))
    for proj, conv in ((layer.q_proj, st_next.conv_q), (layer.k_proj, st_next.conv_k), (layer.v_proj, st_next.conv_v)):
        _close(proj(rows_wd), conv[0])


# ---------------------------------------------------------------- decoder token step

#: The decoder run's tokens: `PAST` prefix tokens, then the step token.
IDS = (5, 17, 42, 99)


@pytest.fixture(scope="module")
def decoder_run() -> dict:
    return run_decoder_step(ids=IDS)


def test_decoder_step_logits_equal_pybridge(decoder_run: dict) -> None:
    _close(decoder_run["got"]["logits"], decoder_run["logits"])


def test_decoder_step_states_equal_pybridge(decoder_run: dict) -> None:
    got, cache, model, rec = decoder_run["got"], decoder_run["cache"], decoder_run["model"], decoder_run["rec"]
    for i, (lay, st) in enumerate(zip(model.model.layers, cache.layers)):
        p = f"layers.{i + 1}."
        if lay.is_mla:
            _close(got[p + "latent_cache_next"], st.latent[0])
            _close(got[p + "shared_key_cache_next"], st.shared_key[0])
        else:
            _close(got[p + "heads_next"], st.recurrent[0])
            rows_wd = torch.stack([got[p + f"window_next.{r}"] for r in range(3)])
            _close(rows_wd, torch.stack(rec.seq_in[i][PAST - 2 :]))
            _close(lay.self_attn.q_proj(rows_wd), st.conv_q[0])


def test_decoder_step_routes_are_top_k_of_graph_scores(decoder_run: dict) -> None:
    got, model, rec = decoder_run["got"], decoder_run["model"], decoder_run["rec"]
    for i, route in rec.route.items():
        gate = model.model.layers[i].block_sparse_moe.gate
        scores_e = got[f"layers.{i + 1}.router_scores"]
        want_e = torch.sigmoid(rec.gate_in[i] @ gate.weight.T) + gate.e_score_correction_bias
        _close(scores_e, want_e)
        assert select_top_k(scores_e[None], gate.top_k)[0].tolist() == route


def test_decoder_step_other_route_changes_logits(decoder_run: dict) -> None:
    """Negative control: staging another expert in one slot of layer 2 moves the logits."""
    route = {i: list(r) for i, r in decoder_run["rec"].route.items()}
    route[1][1] = next(e for e in range(6) if e not in route[1])
    other = run_decoder_step(routes=route)["got"]["logits"]
    assert float((other - decoder_run["logits"]).abs().max()) > 1e-6



# ---------------------------------------------------------------- signatures (tiny and paper)

def _signature(cfg, past: int) -> tuple[list, list, list]:
    """The decoder step's parameters, inputs and outputs `(name, shape)` for a configuration,
    written here from the hub configuration and the graph's naming (not from the Lean code):
    every layer of the schedule (`is_mla`, `is_moe`), then the head."""
    D, W = cfg.hidden_size, cfg.kda_conv_size
    H, K, V, R = cfg.kda_num_heads, cfg.kda_head_k_dim, cfg.kda_head_v_dim, cfg.kda_decay_rank
    Hm, q, kv = cfg.num_attention_heads, cfg.q_lora_rank, cfg.kv_lora_rank
    nope, rope, vd = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    hs, L, E, k = cfg.moe_intermediate_size, cfg.routed_expert_hidden_size, cfg.num_experts, cfg.num_experts_per_token
    params, inputs, outputs = [], [("embedding", [D]), ("gate_cap", []), ("up_cap", []), ("score_scale", [])], []
    for i in range(cfg.num_hidden_layers):
        p = f"layers.{i + 1}."
        res = lambda part: [(p + part + "_res.query", [D]), (p + part + "_res.norm_gain", [D]), (p + part + "_norm.scale", [D])]
        params += res("seq")
        if cfg.is_mla(i):
            m = p + "mla."
            params += [(m + "query_down", [D, q]), (m + "query_norm_scale", [q]), (m + "kv_down", [D, kv]),
                       (m + "kv_norm_scale", [kv]), (m + "shared_key_down", [D, rope]),
                       (m + "query_content_up", [Hm, q, nope]), (m + "query_shared_up", [Hm, q, rope]),
                       (m + "key_up", [Hm, kv, nope]), (m + "value_up", [Hm, kv, vd]),
                       (m + "gate_weight", [D, Hm, vd]), (m + "output_weight", [Hm, vd, D])]
            inputs += [(p + "latent_cache", [past, kv]), (p + "shared_key_cache", [past, rope])]
            outputs += [(p + "latent_cache_next", [past + 1, kv]), (p + "shared_key_cache_next", [past + 1, rope])]
        else:
            a = p + "kda."
            params += [(a + "query_proj", [D, H, K]), (a + "key_proj", [D, H, K]), (a + "value_proj", [D, H, V])]
            for name, shape in (("query_conv", [H, K]), ("key_conv", [H, K]), ("value_conv", [H, V])):
                params += [(f"{a}{name}.{t}", shape) for t in range(W)]
            params += [(a + "decay_down", [D, R]), (a + "decay_up", [R, H, K]), (a + "decay_bias", [H, K]),
                       (a + "decay_log_scale", [H]), (a + "beta_proj", [D, H]), (a + "gate_weight", [D, H, V]),
                       (a + "out_norm_scale", [V]), (a + "output_proj", [H, V, D])]
            inputs += [(f"{p}window.{r}", [D]) for r in range(W - 1)] + [(p + "heads", [H, K, V])]
            outputs += [(f"{p}window_next.{r}", [D]) for r in range(W - 1)] + [(p + "heads_next", [H, K, V])]
        params += res("chan")
        if cfg.is_moe(i):
            e = p + "moe."
            params += [(e + n, s) for _ in range(cfg.num_shared_experts)
                       for n, s in (("shared.gate", [D, hs]), ("shared.up", [D, hs]), ("shared.down", [hs, D]))]
            params += [(e + "downProject", [D, L])]
            params += [(e + n, s) for _ in range(k)
                       for n, s in (("slot.router", [D]), ("slot.gate", [L, hs]), ("slot.up", [L, hs]), ("slot.down", [hs, L]))]
            params += [(e + "routedNormScale", [L]), (e + "upProject", [L, D]), (p + "router.weight", [D, E]),
                       (p + "router.bias", [E])]
            outputs += [(p + "router_scores", [E])]
        else:
            I = cfg.intermediate_size
            params += [(p + "mlp.gateWeight", [D, I]), (p + "mlp.upWeight", [D, I]), (p + "mlp.downWeight", [I, D])]
    params += [("final_res.query", [D]), ("final_res.norm_gain", [D]), ("final_norm.scale", [D]),
               ("lm_head.weight", [D, cfg.vocab_size])]
    return params, inputs, [("logits", [cfg.vocab_size])] + outputs


@pytest.mark.parametrize(("name", "config", "past"), [("decoder_step_tiny", TINY, 3)])
def test_decoder_graph_follows_the_configuration(name: str, config: Path, past: int) -> None:
    """The exported decoder step has exactly the configuration's parameters, states and outputs,
    in schedule order, and one AttnRes softmax per retrieval (two per layer and the final one) plus
    one per MLA layer. (The paper-dimension export `Decoder.jsonPaper` overflows the offline Lean's
    stack; when it is exported, add `("decoder_step_paper", PAPER, 1)` here.)"""
    cfg = load_config(config)
    doc = json.loads((GRAPHS / f"{name}.json").read_text(encoding="utf-8"))
    want_params, want_inputs, want_outputs = _signature(cfg, past)
    assert [(p["name"], p["shape"]) for p in doc["params"]] == want_params
    assert [(i["name"], i["shape"]) for i in doc["inputs"]] == want_inputs
    assert [(o["name"], o["shape"]) for o in doc["outputs"]] == want_outputs
    mla = sum(cfg.is_mla(i) for i in range(cfg.num_hidden_layers))
    softmax = sum(n["op"] == "softmaxLast" for n in doc["nodes"])
    assert softmax == 2 * cfg.num_hidden_layers + 1 + mla
    ids = {n["id"] for n in doc["nodes"]} | {x["id"] for x in doc["params"] + doc["inputs"]}
    assert len(ids) == len(doc["nodes"]) + len(doc["params"]) + len(doc["inputs"])
    assert all(o["id"] in ids for o in doc["outputs"])


# ---------------------------------------------------------------- provenance

def test_no_hand_wired_graph_remains() -> None:
    """Every whole-step graph comes from a Lean term: no non-module Lean file wires graphs by
    ids, no JSON node is written outside the serializer `Core/Json.lean`, no graph term counts de
    Bruijn indices by hand (`Var.at`, `v#`, chains of `.there`), and no export needs a prelude."""
    lean = REPO / "lean"
    assert not list(lean.rglob("*.eval")) or all("Graph" not in str(p) for p in lean.rglob("*.eval"))
    for path in lean.rglob("*.lean"):
        text = path.read_text(encoding="utf-8")
        if path.name != "Json.lean":
            assert '\\"op\\": ' not in text, f"{path}: writes graph JSON by hand"
        if "Graph" in path.parts:
            assert "Var.at" not in text and "v#" not in text, f"{path}: hand-counted variable"
            assert not re.search(r"(\.there \(){3}", text), f"{path}: a chain of .there"
    manifest = (REPO / "codegen" / "exports.toml").read_text(encoding="utf-8")
    assert "prelude" not in manifest.split("[[graph]]", 1)[1]
    for name in ("decoder_step_tiny", "kda_layer_step_tiny"):
        block = manifest.split(f'name = "{name}"', 1)[1].split("[[graph]]", 1)[0]
        assert "KimiK3.Graph.Kernel" in block and "json = " in block


def test_swapped_same_shaped_bindings_fail_against_torch(decoder_run: dict, tmp_path: Path) -> None:
    """Shape checks cannot see two same-shaped parameters exchanged (k3-spec §0); the comparison
    with torch must. Swap the ids of layer 2's KDA query and key projections (both `[D, H, K]`)
    in the exported graph: the logits leave torch's."""
    doc = json.loads((GRAPHS / "decoder_step_tiny.json").read_text(encoding="utf-8"))
    params = {p["name"]: p for p in doc["params"]}
    a, b = params["layers.2.kda.query_proj"], params["layers.2.kda.key_proj"]
    assert a["shape"] == b["shape"]
    a["name"], b["name"] = b["name"], a["name"]
    path = tmp_path / "decoder_step_tiny.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    model, run = decoder_run["model"], decoder_run
    with torch.no_grad():
        got = compile_graph(load_graph(path))(decoder_params(model, run["rec"].route), step_inputs(model, IDS[-1], run))
    err, scale = float((got["logits"] - run["logits"]).abs().max()), float(run["logits"].abs().max())
    assert err > 1e-6 * scale, "the swapped graph still matches torch"
