"""Whole-step graphs (lean/KimiK3/Graph): the KDA layer step and the decoder token step.

`k3spec export` writes `fixtures/graphs/kda_layer_step_tiny.json` and `decoder_step_tiny.json`
(`codegen/exports.toml`; `tests/test_codegen.py` checks the committed files against a fresh
export); here the committed files are compiled with `pybridge.graph` (float64) and compared with
pybridge's own layers.

The parameter mapping (hub weights -> graph names) is `pybridge.adapter`; the state packing and
the route staging of the decoder step live in `difftest/components/decoder.py` (the
`decoder_step` component of `difftest run`), used here. Both graphs are exported from Lean terms
(`KDA.layerProgram`, `Decoder.program`, built in `lean/KimiK3/Graph/Kernel.lean`);
`KDA.layerProgram_eval` proves the first, `Decoder.program_eval` (packed step) and
`Decoder.program_eval_step`/`program_eval_run` (public model) the second (`lean/KimiK3/Graph/README.md`). The torch layers keep their random nonzero
`dt_bias` (the Lean layer's `decayBias`). The graph's window rows are the raw layer inputs of the last three tokens; pybridge
caches their projections, so the new rows are checked through the projections too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from helpers import GRAPHS, TINY, assert_close

from codegen.export import committed_text

from difftest.components.decoder import DecoderStepComponent
from pybridge import adapter
from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph
from pybridge.kda import KimiDeltaAttention

torch.set_num_threads(1)
F64 = torch.float64
REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "fixtures" / "paper" / "config.json"


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
        spec = adapter.to_spec(adapter.kda_rules(load_config(TINY)), layer.state_dict())
        got = cg(adapter.graph_params(cg.graph, spec), {
            "x": x_d, "window.0": prefix_td[0], "window.1": prefix_td[1], "window.2": prefix_td[2],
            "heads": st.recurrent[0],
        })
    assert_close(got["output"], y_btd[0, 0])
    assert_close(got["heads_next"], st_next.recurrent[0])
    rows_wd = torch.stack([got[f"window_next.{i}"] for i in range(3)])
    assert torch.equal(rows_wd, torch.cat([prefix_td[1:], x_d[None]]))
    for proj, conv in ((layer.q_proj, st_next.conv_q), (layer.k_proj, st_next.conv_k), (layer.v_proj, st_next.conv_v)):
        assert_close(proj(rows_wd), conv[0])


# ---------------------------------------------------------------- decoder token step

@pytest.fixture(scope="module")
def decoder_legs() -> tuple:
    comp = DecoderStepComponent()
    case = comp.make_case(0, "random", seed=3)
    return comp, case, comp.graph_outputs(case, "cpu"), comp.numpy_outputs(case), comp.torch_outputs(case, F64, "cpu")["torch"]


def test_decoder_step_graph_equals_pybridge_and_numpy(decoder_legs: tuple) -> None:
    """Logits, every updated state and every MoE layer's router scores; the graph is fed the
    NumPy prefix states and routes (`difftest.components.decoder`)."""
    _, case, graph, numpy_, torch_ = decoder_legs
    staged = {k for k in graph if k.endswith(".staged_experts")}  # what the graph leg staged (Lean checks them)
    assert len(staged) == 4 and set(graph) - staged == set(numpy_) <= set(torch_)
    for name, want in torch_.items():
        if name in graph and not name.endswith("route"):
            assert_close(graph[name], want)
            assert_close(numpy_[name], want)


def test_decoder_step_routes_are_top_k_of_graph_scores(decoder_legs: tuple) -> None:
    comp, _, graph, numpy_, torch_ = decoder_legs
    routes = [name for name in graph if name.endswith("route")]
    assert len(routes) == 4  # MoE layers 2-5
    for name in routes:
        assert (graph[name] == torch_[name]).all() and (numpy_[name] == torch_[name]).all()


def test_decoder_step_other_route_changes_logits(decoder_legs: tuple) -> None:
    """Negative control: staging another expert in one slot of layer 2 moves the logits."""
    comp, case, graph, _, _ = decoder_legs
    rows = comp.numpy_rows(case)
    routes = [{i: list(dec.record[i + 1]["route"]) for i in range(5) if dec.record[i + 1]["route"]} for dec, _, _ in rows]
    routes[0][1][1] = next(e for e in range(6) if e not in routes[0][1])
    other = comp.graph_outputs(case, "cpu", routes=routes)["logits"]
    assert float(abs(other[0] - graph["logits"][0]).max()) > 1e-6


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


@pytest.mark.parametrize(("file", "config", "past"),
                         [("decoder_step_tiny.json", TINY, 3), ("decoder_step_paper.json.gz", PAPER, 1)])
def test_decoder_graph_follows_the_configuration(file: str, config: Path, past: int) -> None:
    """The exported decoder step has exactly the configuration's parameters, states and outputs,
    in schedule order, and one AttnRes softmax per retrieval (two per layer and the final one) plus
    one per MLA layer; every id is defined once. At the paper's dimensions (93 layers, 1 past
    token; `Decoder.jsonPaper`) the graph is checked so, and by pybridge's loader (every node's
    shape from its op and arguments), without running it."""
    cfg = load_config(config)
    doc = json.loads(committed_text(GRAPHS / file))
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
    graph = load_graph(GRAPHS / file)
    assert len(graph.nodes) == len(doc["nodes"])


# ---------------------------------------------------------------- provenance

def test_no_hand_wired_graph_remains() -> None:
    """Every whole-step graph comes from a Lean term: no non-module Lean file wires graphs by
    ids, no JSON node is written outside the serializer `Core/Json.lean`, no graph term counts de
    Bruijn indices by hand (`Var.at`, `v#`, chains of `.there`), and both whole-step exports are
    library definitions of `Graph/Kernel.lean` (the manifest has no field for extra Lean text)."""
    lean = REPO / "lean"
    assert not list(lean.rglob("*.eval")), "a non-module Lean file in lean/"
    for path in lean.rglob("*.lean"):
        text = path.read_text(encoding="utf-8")
        if path.name != "Json.lean":
            assert '\\"op\\": ' not in text, f"{path}: writes graph JSON by hand"
        if "Graph" in path.parts:
            assert "Var.at" not in text and "v#" not in text, f"{path}: hand-counted variable"
            assert not re.search(r"(\.there \(){3}", text), f"{path}: a chain of .there"
    manifest = (REPO / "codegen" / "exports.toml").read_text(encoding="utf-8")
    for name in ("decoder_step_tiny", "kda_layer_step_tiny"):
        block = manifest.split(f'name = "{name}"', 1)[1].split("[[graph]]", 1)[0]
        assert "KimiK3.Graph.Kernel" in block and "json = " in block
