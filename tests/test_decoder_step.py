"""Whole-step graphs (lean/KimiK3/Graph): the KDA layer step and the decoder token step.

The Lean export (`lean/KimiK3/Graph/export.eval`, run as a bundle) writes
`fixtures/graphs/kda_layer_step_tiny.json` (and the decoder step); here the committed files
are compiled with `pybridge.graph` (float64) and compared with pybridge's own layers.

The parameter mapping (hub weights -> graph names) is `pybridge.adapter`; the state packing, the
window capture and the route staging live in `difftest/components/decoder.py` (the
`decoder_step` component of `difftest run`) and are imported here. The Lean layer (`KDA.layerStep`) has no decay-logit bias, so `dt_bias` is set to 0 in the torch
layer. The graph's window rows are the raw layer inputs of the last three tokens; pybridge
caches their projections, so the new rows are checked through the projections too.

`python tests/test_decoder_step.py` rewrites the fixtures.
"""

from __future__ import annotations

import json
from functools import lru_cache

import pytest
import torch
from helpers import GRAPHS, REPO, TINY, assert_close, lean_run

from difftest.components.decoder import PAST, run_decoder_step
from pybridge import adapter
from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph
from pybridge.kda import KimiDeltaAttention
from pybridge.moe import select_top_k

torch.set_num_threads(1)
F64 = torch.float64
EXPORT = REPO / "lean" / "KimiK3" / "Graph" / "export.eval"
TARGETS = (
    "KimiK3.Core.Json",
    "KimiK3.Graph.KDALayerGraph",
    "KimiK3.Channel.ExpertGraph",
    "KimiK3.Channel.LatentMoEModel",
    "KimiK3.Depth.Graph",
)
EXPORTS = ("kda_layer_step_tiny", "decoder_step_tiny")


@lru_cache(maxsize=1)
def lean_exports() -> dict[str, dict]:
    """One Lean run of `export.eval` as a bundle; the printed documents by name."""
    return lean_run(TARGETS, EXPORT.read_text(encoding="utf-8"), "GraphExports").by_name()


@pytest.mark.lean
def test_exports_validate_and_match_committed() -> None:
    from codegen.export import load_schema, validate

    docs = lean_exports()
    assert set(docs) == set(EXPORTS)
    schema = load_schema(REPO)
    for name, doc in docs.items():
        validate(doc, schema)
        committed = json.loads((GRAPHS / f"{name}.json").read_text(encoding="utf-8"))
        assert committed == doc, f"{name}.json is stale: run python tests/test_decoder_step.py"


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
def decoder_run() -> dict:
    return run_decoder_step()


def test_decoder_step_logits_equal_pybridge(decoder_run: dict) -> None:
    assert_close(decoder_run["got"]["logits"], decoder_run["logits"])


def test_decoder_step_states_equal_pybridge(decoder_run: dict) -> None:
    got, cache, model, rec = decoder_run["got"], decoder_run["cache"], decoder_run["model"], decoder_run["rec"]
    for i, (lay, st) in enumerate(zip(model.model.layers, cache.layers)):
        p = f"layers.{i + 1}."
        if lay.is_mla:
            assert_close(got[p + "latent_cache_next"], st.latent[0])
            assert_close(got[p + "shared_key_cache_next"], st.shared_key[0])
        else:
            assert_close(got[p + "heads_next"], st.recurrent[0])
            rows_wd = torch.stack([got[p + f"window_next.{r}"] for r in range(3)])
            assert_close(rows_wd, torch.stack(rec.seq_in[i][PAST - 2 :]))
            assert_close(lay.self_attn.q_proj(rows_wd), st.conv_q[0])


def test_decoder_step_routes_are_top_k_of_graph_scores(decoder_run: dict) -> None:
    got, model, rec = decoder_run["got"], decoder_run["model"], decoder_run["rec"]
    for i, route in rec.route.items():
        gate = model.model.layers[i].block_sparse_moe.gate
        scores_e = got[f"layers.{i + 1}.router_scores"]
        want_e = torch.sigmoid(rec.gate_in[i] @ gate.weight.T) + gate.e_score_correction_bias
        assert_close(scores_e, want_e)
        assert select_top_k(scores_e[None], gate.top_k)[0].tolist() == route


def test_decoder_step_other_route_changes_logits(decoder_run: dict) -> None:
    """Negative control: staging another expert in one slot of layer 2 moves the logits."""
    route = {i: list(r) for i, r in decoder_run["rec"].route.items()}
    route[1][1] = next(e for e in range(6) if e not in route[1])
    other = run_decoder_step(routes=route)["got"]["logits"]
    assert float((other - decoder_run["logits"]).abs().max()) > 1e-6


if __name__ == "__main__":
    for name, doc in lean_exports().items():
        (GRAPHS / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
