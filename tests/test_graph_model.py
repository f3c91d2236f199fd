"""Each exported graph equals the matching pybridge component with the same weights (float64).

Hub weights are nn.Linear `[out, in]`; graph (spec) weights are `[in, out]`; the mapping is
`pybridge.adapter`.
"""


import pytest
import torch
from helpers import GRAPHS, TINY, assert_close

from pybridge import adapter
from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph
from pybridge.layers import SituExpert, SituMLP

torch.set_num_threads(1)  # tiny tensors gain nothing from threads; on a shared box they only add contention
F64 = torch.float64
def _caps(cfg) -> dict[str, torch.Tensor]:
    return {"gateCap": torch.tensor(cfg.situ_gate_cap, dtype=F64), "upCap": torch.tensor(cfg.situ_up_cap, dtype=F64)}


@pytest.mark.parametrize("seed", [0, 1])
def test_expert_graph_equals_situ_expert_and_mlp(seed: int) -> None:
    cfg = load_config(TINY)
    cg = compile_graph(load_graph(GRAPHS / "channel_expert_tiny.json"))
    torch.manual_seed(seed)
    expert = SituExpert(24, 13, cfg.situ_gate_cap, cfg.situ_up_cap).to(F64)
    mlp = SituMLP(24, 13, cfg.situ_gate_cap, cfg.situ_up_cap).to(F64)
    x_nd = 3.0 * torch.randn(5, 24, dtype=F64)  # large enough that both soft caps bend
    with torch.no_grad():
        for module, names in ((expert, ("w1", "w3", "w2")), (mlp, ("gate_proj", "up_proj", "down_proj"))):
            params = adapter.to_spec(adapter.expert_rules(24, 13, names), module.state_dict())
            want_nd = module(x_nd)
            for x_d, want_d in zip(x_nd, want_nd):
                assert_close(cg(params, {"input": x_d, **_caps(cfg)})["output"], want_d)


def _moe_params(cfg, graph, moe, shared_hidden: int, route: list[int]) -> dict[str, torch.Tensor]:
    """Graph params for `moe` with `route` in the slots, through `pybridge.adapter`; the shared
    experts are `shared_hidden` wide here (graph shared expert j is hidden block j of pybridge's
    merged shared MLP)."""
    num_shared = moe.shared_experts.gate_proj.weight.shape[0] // shared_hidden
    names = ("gate_proj", "up_proj", "down_proj")
    shared = adapter.merged_experts(tuple(f"shared_experts.{n}.weight" for n in names),
                                    ("moe.shared.gate", "moe.shared.up", "moe.shared.down"),
                                    cfg.hidden_size, shared_hidden, num_shared)
    rules = [r for r in adapter.moe_rules(cfg) if not r.hub[0].startswith("shared_experts.")] + [shared]
    spec = adapter.to_spec(rules, moe.state_dict())
    return adapter.graph_params(graph, spec | adapter.stage_route(spec, route), prefix="moe.")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_latent_moe_graph_equals_latent_moe_on_its_route(seed: int) -> None:
    """The graph is LatentMoE for a fixed route (one expert per slot). pybridge's router picks
    the route for each token (with a nonzero selection bias); the graph, fed those experts,
    must give pybridge's LatentMoE output for that token."""
    cfg = load_config(TINY)
    graph = load_graph(GRAPHS / "channel_latent_moe_tiny.json")
    cg = compile_graph(graph)
    moe = random_model(cfg, seed=seed, dtype=F64).model.layers[1].block_sparse_moe
    shared_hidden = graph.params[0].shape[1]
    num_shared = sum(v.name == "shared.gate" for v in graph.params)
    # the graph's shared experts are wider (26) than the tiny config's (13): widen pybridge's
    # merged shared MLP to num_shared * 26 hidden units, with fresh random weights
    moe.shared_experts = SituMLP(cfg.hidden_size, num_shared * shared_hidden, cfg.situ_gate_cap, cfg.situ_up_cap)
    gen = torch.Generator().manual_seed(100 + seed)
    with torch.no_grad():
        for p in moe.shared_experts.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)
        moe.to(F64)
        moe.gate.e_score_correction_bias.copy_(0.01 * torch.randn(cfg.num_experts, dtype=F64, generator=gen))
        x_nd = 2.0 * torch.randn(16, cfg.hidden_size, dtype=F64, generator=gen)
        route_nk, _ = moe.gate(x_nd)
        want_nd = moe(x_nd[None])[0]
        routes = set()
        for x_d, route, want_d in zip(x_nd, route_nk.tolist(), want_nd):
            routes.add(tuple(route))
            assert_close(cg(_moe_params(cfg, graph, moe, shared_hidden, route), {"input": x_d, **_caps(cfg)})["output"], want_d)
    assert len(routes) > 1  # the tokens exercised several routes


def _run(file: str, params: dict, inputs: dict) -> dict[str, torch.Tensor]:
    return compile_graph(load_graph(GRAPHS / file))(params, inputs)


def test_small_fixtures_closed_form() -> None:
    """layout_mix, linear_softmax and rms_mlp against their formulas written in torch here;
    rms_mlp's norm is pybridge's `rms_norm`."""
    from pybridge.layers import rms_norm

    gen = torch.Generator().manual_seed(5)
    r = lambda *s: torch.randn(*s, dtype=F64, generator=gen)
    a, b = r(2, 3), r(1, 3)
    out = _run("layout_mix.json", {}, {"a": a, "b": b})
    stacked_t = torch.cat([a, b]).T
    assert_close(out["flat"], stacked_t.reshape(9))
    assert_close(out["rowMean"], torch.cat([a, b]).mean(0))
    W, bias, x = r(4, 3), r(3), r(4)
    out = _run("linear_softmax.json", {"W": W, "b": bias}, {"x": x})
    assert_close(out["hidden"], x @ W)
    assert_close(out["probs"], torch.softmax(x @ W + bias, -1))
    g, W, x = r(4), r(4, 4), r(2, 4)
    out = _run("rms_mlp.json", {"g": g, "W": W}, {"x": x})
    assert_close(out["y"], torch.tanh(rms_norm(x, 1e-6, g) @ W))


def _interpolation_matrix(m: int, n: int, align_corners: bool = False) -> torch.Tensor:
    """The `[n, m]` bilinear resampling matrix (half-pixel centres unless `align_corners`), read off
    torch's `F.interpolate` on the identity (independent of the Lean and the reference's integer
    formula)."""
    eye = torch.eye(m, dtype=F64).reshape(1, m, m, 1)  # channel i = unit vector e_i along the axis
    out = torch.nn.functional.interpolate(eye, size=(n, 1), mode="bilinear", align_corners=align_corners)
    return out.reshape(m, n).T


def test_vision_embed_graph_equals_reference_embedding() -> None:
    """The Lean patch-embedding graph (2 frames of 6 × 4 patches, a 4 × 6 table: both axes
    resampled) equals `moonvit_reference.embed_clip` with the same weights; the graph's row, column
    and time inputs come from `F.interpolate` and the sincos definition."""
    from pybridge import moonvit_reference

    vis = load_config(TINY).vision
    graph = load_graph(GRAPHS / "vision_embed_tiny.json")
    t, h, w, D = 2, 6, 4, vis.hidden_size
    gen = torch.Generator().manual_seed(0)
    sd = {
        "vision_tower.patch_embed.proj.weight": torch.randn(D, vis.in_channels, vis.patch_size, vis.patch_size,
                                                            generator=gen, dtype=F64),
        "vision_tower.patch_embed.pos_emb.weight": torch.randn(vis.pos_emb_height, vis.pos_emb_width, D,
                                                               generator=gen, dtype=F64),
    }
    patches_np = torch.randn(t * h * w, vis.patch_dim, generator=gen, dtype=F64)
    want_nd = moonvit_reference.embed_clip(vis, sd, patches_np, (t, h, w))
    half = D // 2
    omega = torch.tensor([10000.0 ** (-c / half) for c in range(half)], dtype=F64)
    angle_fc = torch.arange(t, dtype=F64)[:, None] * omega[None, :]
    params = {"patchWeight": sd["vision_tower.patch_embed.proj.weight"].reshape(D, -1).T,
              "posTable": sd["vision_tower.patch_embed.pos_emb.weight"]}
    inputs = {"patches": patches_np, "rows": _interpolation_matrix(vis.pos_emb_height, h),
              "cols": _interpolation_matrix(vis.pos_emb_width, w),
              "time": torch.cat([angle_fc.sin(), angle_fc.cos()], dim=1)}
    got_nd = compile_graph(graph)(params, inputs)["embedding"]
    assert_close(got_nd, want_nd)
    # planted bugs are caught: no time rows; align_corners=True interpolation weights
    for bad in ({"time": 0 * inputs["time"]}, {"rows": _interpolation_matrix(vis.pos_emb_height, h, True),
                                                "cols": _interpolation_matrix(vis.pos_emb_width, w, True)}):
        assert float((compile_graph(graph)(params, inputs | bad)["embedding"] - want_nd).abs().max()) > 1e-3
