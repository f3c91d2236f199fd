"""The exported KDA and MLA step graphs equal pybridge's KDA recurrence and Gated MLA (float64).

Graph (spec) weights are `[in, out]`; pybridge holds hub `nn.Linear` weights `[out, in]`; the
mapping is `pybridge.adapter`.
"""


import pytest
import torch
from helpers import GRAPHS, TINY, assert_close

from pybridge import adapter
from pybridge.config import load_config
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph
from pybridge.kda import kda_recurrent
from pybridge.mla import GatedMLA, MLACache

torch.set_num_threads(1)
F64 = torch.float64


def _kda_inputs(gen: torch.Generator, heads: int, k: int, v: int) -> dict[str, torch.Tensor]:
    key = torch.nn.functional.normalize(torch.randn(heads, k, dtype=F64, generator=gen), dim=-1)
    return {
        "state": torch.randn(heads, k, v, dtype=F64, generator=gen),
        "key": key,
        "value": torch.randn(heads, v, dtype=F64, generator=gen),
        "retention": 0.05 + 0.9 * torch.rand(heads, k, dtype=F64, generator=gen),
        "beta": torch.rand(heads, dtype=F64, generator=gen),
        "query": torch.randn(heads, k, dtype=F64, generator=gen),
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kda_packed_step_graph_equals_recurrence(seed: int) -> None:
    cg = compile_graph(load_graph(GRAPHS / "kda_packed_step_tiny.json"))
    x = _kda_inputs(torch.Generator().manual_seed(seed), 2, 5, 7)
    got = cg({}, x)
    out_bthv, state_bhkv = kda_recurrent(
        x["query"][None, None], x["key"][None, None], x["value"][None, None],
        x["retention"].log()[None, None], x["beta"][None, None], 1.0, x["state"][None],
    )
    assert_close(got["next_state"], state_bhkv[0])
    assert_close(got["output"], out_bthv[0, 0])


def test_kda_head_step_graph_equals_recurrence() -> None:
    cg = compile_graph(load_graph(GRAPHS / "kda_head_step_tiny.json"))
    x = {name: t[0] for name, t in _kda_inputs(torch.Generator().manual_seed(7), 1, 5, 7).items()}
    got = cg({}, x)
    out_bthv, state_bhkv = kda_recurrent(
        x["query"][None, None, None], x["key"][None, None, None], x["value"][None, None, None],
        x["retention"].log()[None, None, None], x["beta"].reshape(1, 1, 1), 1.0, x["state"][None, None],
    )
    assert_close(got["next_state"], state_bhkv[0, 0])
    assert_close(got["output"], out_bthv[0, 0, 0])


@pytest.mark.parametrize("seed", [0, 1])
def test_mla_packed_step_graph_equals_gated_mla_decode(seed: int) -> None:
    cfg = load_config(TINY)
    torch.manual_seed(seed)
    mla = GatedMLA(cfg).to(F64)
    for norm in (mla.q_a_layernorm, mla.kv_a_layernorm):  # non-trivial gains, so a swap shows
        torch.nn.init.uniform_(norm.weight, 0.5, 1.5)
    cg = compile_graph(load_graph(GRAPHS / "mla_packed_step_tiny.json"))
    latent_pl = torch.randn(2, cfg.kv_lora_rank, dtype=F64)
    shared_pr = torch.randn(2, cfg.qk_rope_head_dim, dtype=F64)
    x_d = torch.randn(cfg.hidden_size, dtype=F64)
    with torch.no_grad():
        y_btd, cache = mla(x_d[None, None], MLACache(latent_pl[None], shared_pr[None]))
        got = cg(adapter.to_spec(adapter.mla_rules(cfg), mla.state_dict()), {
            "latent_cache": latent_pl, "shared_key_cache": shared_pr, "x": x_d,
            "score_scale": torch.tensor(cfg.mla_score_scale, dtype=F64),
        })
    assert_close(got["latent_cache_next"], cache.latent[0])
    assert_close(got["shared_key_cache_next"], cache.shared_key[0])
    assert_close(got["output"], y_btd[0, 0])
