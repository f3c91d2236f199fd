"""Whole-step graphs (lean/KimiK3/Graph): the KDA layer step and the decoder token step.

`k3spec export` writes `fixtures/graphs/kda_layer_step_tiny.json` and `decoder_step_tiny.json`
(`codegen/exports.toml`; `tests/test_codegen.py` checks the committed files against a fresh
export); here the committed files are compiled with `pybridge.graph` (float64) and compared with
pybridge's own layers.

The parameter mapping (hub weights -> graph names) is `pybridge.adapter`; the state packing and
the route staging of the decoder step live in `difftest/components/decoder.py` (the
`decoder_step` component of `difftest run`), used here. The Lean layer (`KDA.layerStep`) has no decay-logit bias, so `dt_bias` is set to 0 in the torch
layer. The graph's window rows are the raw layer inputs of the last three tokens; pybridge
caches their projections, so the new rows are checked through the projections too.
"""

from __future__ import annotations

import pytest
import torch
from helpers import GRAPHS, TINY, assert_close

from difftest.components.decoder import DecoderStepComponent
from pybridge import adapter
from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph
from pybridge.kda import KimiDeltaAttention

torch.set_num_threads(1)
F64 = torch.float64
@pytest.fixture(scope="module")
def tiny_kda() -> KimiDeltaAttention:
    layer = random_model(load_config(TINY), seed=11, dtype=F64).model.layers[0].self_attn
    with torch.no_grad():
        layer.dt_bias.zero_()  # the Lean layer has no decay-logit bias
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
    assert set(graph) == set(numpy_) <= set(torch_)
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

