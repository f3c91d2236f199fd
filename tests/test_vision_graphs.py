"""The exported MoonViT-V2 graphs (`lean/KimiK3/Vision/*Graph.lean`) against pybridge's plain
reference `moonvit_reference`, float64, at the tiny vision config (every width distinct).

Two independent legs: the graph JSON compiled by `pybridge.graph` (ops from docs/graph-format.md)
and the loop-by-loop reference written from the equations. Graph weights are `[in, out]`, the
reference reads checkpoint-named `nn.Linear` weights `[out, in]`.
"""

import math

import torch
from helpers import GRAPHS, TINY, assert_close

from pybridge import moonvit, moonvit_reference
from pybridge.config import load_config
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph

F64 = torch.float64


def _projector_sd(E: int, T: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    return {"mm_projector.proj.0.weight": torch.randn(E, E, generator=gen, dtype=F64) / math.sqrt(E),
            "mm_projector.proj.2.weight": torch.randn(T, E, generator=gen, dtype=F64) / math.sqrt(E),
            "mm_projector.post_norm.weight": 1 + 0.1 * torch.randn(T, generator=gen, dtype=F64)}


def _merge_graph(sd: dict[str, torch.Tensor], y_nd: torch.Tensor, first_ee: torch.Tensor | None = None) -> torch.Tensor:
    """The one merge-and-project graph, the erf GELU a node (`MergeGraph.specFwd_eq_mergeProject`)."""
    merge = compile_graph(load_graph(GRAPHS / "vision_merge_project_tiny.json"))
    first = sd["mm_projector.proj.0.weight"].T if first_ee is None else first_ee
    return merge({"first": first, "second": sd["mm_projector.proj.2.weight"].T,
                  "norm": sd["mm_projector.post_norm.weight"]}, {"features": y_nd})["tokens"]


def test_vision_merge_graph_equals_reference_merge_project() -> None:
    """2 frames of 6 × 4 tokens of width 20, 2 × 2 merge to 3 × 2 tokens of width 80, projected
    to 24: the Lean graph (the erf GELU a node) equals `merge_project_clip`; a swapped merge
    channel order (`(dw·2 + dh)·D + c`) and the first frame for the mean are caught."""
    vis = load_config(TINY).vision
    kh, kw = vis.merge_kernel_size
    D, T = vis.hidden_size, vis.text_hidden_size
    t, h, w = 2, 6, 4
    E = kh * kw * D
    gen = torch.Generator().manual_seed(0)
    sd = _projector_sd(E, T, gen)
    y_nd = torch.randn(t * h * w, D, generator=gen, dtype=F64)
    want_nt = moonvit_reference.merge_project_clip(vis, sd, y_nd, (t, h, w))
    assert want_nt.shape == ((h // kh) * (w // kw), T)
    assert [n.op for n in load_graph(GRAPHS / "vision_merge_project_tiny.json").nodes].count("erf") == 1
    assert_close(_merge_graph(sd, y_nd), want_nt)
    # planted bug: the graph's merge with the kernel offsets swapped, (dw·kh + dh)·D + c, seen through
    # the first linear (rows permuted accordingly)
    perm = torch.tensor([(dw * kh + dh) * D + c for dh in range(kh) for dw in range(kw) for c in range(D)])
    bad_ee = sd["mm_projector.proj.0.weight"].T[perm]
    assert float((_merge_graph(sd, y_nd, bad_ee) - want_nt).abs().max()) > 1e-3
    # planted bug: the first frame instead of the frame mean
    frame0_nd = y_nd[: h * w].repeat(t, 1)
    assert float((_merge_graph(sd, frame0_nd) - want_nt).abs().max()) > 1e-3


def _block_sd(vis, gen: torch.Generator, i: int = 0) -> dict[str, torch.Tensor]:
    """Block `i`'s checkpoint tensors (`nn.Linear` `[out, in]`), random."""
    D, Q, M = vis.hidden_size, vis.qkv_hidden_size, vis.intermediate_size
    pre = f"vision_tower.encoder.blocks.{i}."
    return {pre + "norm0.weight": 1 + 0.1 * torch.randn(D, generator=gen, dtype=F64),
            pre + "norm1.weight": 1 + 0.1 * torch.randn(D, generator=gen, dtype=F64),
            pre + "wqkv.weight": torch.randn(3 * Q, D, generator=gen, dtype=F64) / math.sqrt(D),
            pre + "wo.weight": torch.randn(D, Q, generator=gen, dtype=F64) / math.sqrt(Q),
            pre + "mlp.fc0.weight": torch.randn(M, D, generator=gen, dtype=F64) / math.sqrt(D),
            pre + "mlp.fc1.weight": torch.randn(D, M, generator=gen, dtype=F64) / math.sqrt(M)}


def _block_params(vis, sd: dict[str, torch.Tensor], i: int = 0) -> dict[str, torch.Tensor]:
    """Block `i`'s graph parameters, the per-head views of the checkpoint (`Block.lean`'s layout):
    `query{j}[a, d, p]` is `wqkv.weight[a·K + 2p + j, d]`, keys from row `Q` on, values from row `2Q`
    on, `output[a, c, e] = wo.weight[e, a·K + c]`."""
    A, K, Q, D = vis.num_heads, vis.head_dim, vis.qkv_hidden_size, vis.hidden_size
    pre = f"vision_tower.encoder.blocks.{i}."
    wqkv_sak_d = sd[pre + "wqkv.weight"].reshape(3, A, K, D)
    pairs_sapjd = wqkv_sak_d.reshape(3, A, K // 2, 2, D)
    return {"norm0": sd[pre + "norm0.weight"], "norm1": sd[pre + "norm1.weight"],
            "query0": pairs_sapjd[0, :, :, 0].transpose(1, 2), "query1": pairs_sapjd[0, :, :, 1].transpose(1, 2),
            "key0": pairs_sapjd[1, :, :, 0].transpose(1, 2), "key1": pairs_sapjd[1, :, :, 1].transpose(1, 2),
            "value": wqkv_sak_d[2].transpose(1, 2), "output": sd[pre + "wo.weight"].T.reshape(A, K, D),
            "fc0": sd[pre + "mlp.fc0.weight"].T, "fc1": sd[pre + "mlp.fc1.weight"].T}


def _encoder_params(vis, sd: dict[str, torch.Tensor], order: list[int] | None = None) -> dict[str, torch.Tensor]:
    """The encoder graph's parameters (`EncoderGraph.paramSig`): `blocks.k.` + block `order[k]`'s
    graph parameters, then `final_norm`."""
    order = list(range(vis.num_layers)) if order is None else order
    out = {f"blocks.{k}.{n}": v for k, i in enumerate(order) for n, v in _block_params(vis, sd, i).items()}
    return out | {"final_norm": sd["vision_tower.encoder.final_layernorm.weight"]}


def _rope_tables(vis, grid: tuple[int, int, int], swap_axes: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """`[L, 2R]` cos and sin of `moonvit_reference.rope_angle` per token (row, column); `swap_axes`
    plants the axis-order bug (column for the first R pairs)."""
    t, h, w = grid
    angle_lp = torch.tensor([[moonvit_reference.rope_angle(vis, *((l % w, l % (h * w) // w) if swap_axes
                                                                   else (l % (h * w) // w, l % w)), p)
                              for p in range(2 * vis.rope_freqs)] for l in range(t * h * w)], dtype=F64)
    return angle_lp.cos(), angle_lp.sin()


def test_vision_block_graph_equals_reference_block() -> None:
    """One clip of 2 frames of 6 × 4 tokens (48 tokens attending to each other), width 20, 3 heads
    of 12, MLP 28: the Lean block graph equals `moonvit_reference.block`; swapped RoPE axes and
    swapped pair components are caught."""
    vis = load_config(TINY).vision
    grid = (2, 6, 4)
    gen = torch.Generator().manual_seed(1)
    sd = _block_sd(vis, gen)
    x_ld = torch.randn(grid[0] * grid[1] * grid[2], vis.hidden_size, generator=gen, dtype=F64)
    want_ld = moonvit_reference.block(vis, sd, 0, x_ld, grid)
    graph = compile_graph(load_graph(GRAPHS / "vision_block_tiny.json"))
    params = _block_params(vis, sd)
    cos_lp, sin_lp = _rope_tables(vis, grid)
    assert_close(graph(params, {"x": x_ld, "cos": cos_lp, "sin": sin_lp})["y"], want_ld)
    # planted bugs: RoPE rows and columns swapped; the pair components of the query swapped
    bad_cos, bad_sin = _rope_tables(vis, grid, swap_axes=True)
    got_ld = graph(params, {"x": x_ld, "cos": bad_cos, "sin": bad_sin})["y"]
    assert float((got_ld - want_ld).abs().max()) > 1e-3
    swapped = params | {"query0": params["query1"], "query1": params["query0"]}
    got_ld = graph(swapped, {"x": x_ld, "cos": cos_lp, "sin": sin_lp})["y"]
    assert float((got_ld - want_ld).abs().max()) > 1e-3


def _interpolation_matrix(m: int, n: int) -> torch.Tensor:
    """`[n, m]` weights of `F.interpolate(bilinear, align_corners=False)` along one axis."""
    eye = torch.eye(m, dtype=F64).reshape(1, m, m, 1)
    return torch.nn.functional.interpolate(eye, size=(n, 1), mode="bilinear", align_corners=False).reshape(m, n).T


def test_vision_encoder_graph_equals_moonvit_encoder() -> None:
    """The whole encoder as ONE exported graph (`vision_encoder_tiny.json`, `EncoderGraph.program`:
    both blocks of the tiny config, then the final norm; 48 tokens of width 20, 3 heads of 12, MLP
    28) equals pybridge's `MoonViT` encoder (`VisionTower`: its own RoPE angles, the batched attention)
    on the embedding of one 2-frame 6 × 4 clip, float64; the blocks in swapped order are caught."""
    vis = load_config(TINY).vision
    assert vis.num_layers == 2
    grid = (2, 6, 4)
    vit = moonvit.random_moonvit(vis, seed=3)
    sd = vit.state_dict()
    gen = torch.Generator().manual_seed(3)
    patches_np = torch.randn(grid[0] * grid[1] * grid[2], vis.patch_dim, generator=gen, dtype=F64)
    with torch.no_grad():
        x_ld = vit.vision_tower.patch_embed(patches_np, [grid])
        want_ld = vit.vision_tower(patches_np, [grid])
    graph = compile_graph(load_graph(GRAPHS / "vision_encoder_tiny.json"))
    assert {v.name for v in graph.graph.params} == set(_encoder_params(vis, sd))
    cos_lp, sin_lp = _rope_tables(vis, grid)
    inputs = {"x": x_ld, "cos": cos_lp, "sin": sin_lp}
    assert_close(graph(_encoder_params(vis, sd), inputs)["y"], want_ld)
    # planted bug: block 1's weights in block 0's place and the other way round
    got_ld = graph(_encoder_params(vis, sd, order=[1, 0]), inputs)["y"]
    assert float((got_ld - want_ld).abs().max()) > 1e-3


def _interpolation_matrix(m: int, n: int) -> torch.Tensor:
    """`[n, m]` weights of `F.interpolate(bilinear, align_corners=False)` along one axis."""
    eye = torch.eye(m, dtype=F64).reshape(1, m, m, 1)
    return torch.nn.functional.interpolate(eye, size=(n, 1), mode="bilinear", align_corners=False).reshape(m, n).T


def test_vision_graphs_compose_to_reference_features() -> None:
    """Pixels-patches to visual tokens through the Lean graphs only (embedding, the encoder program,
    merge-and-project) equals `moonvit_reference.features` on one 2-frame 6 × 4 clip
    (`specFwd_eq_embed`, `program_eval_eq_encode`, `specFwd_eq_mergeProject`)."""
    vis = load_config(TINY).vision
    t, h, w = grid = (2, 6, 4)
    D = vis.hidden_size
    gen = torch.Generator().manual_seed(2)
    sd = {"vision_tower.patch_embed.proj.weight": torch.randn(D, vis.in_channels, vis.patch_size, vis.patch_size,
                                                              generator=gen, dtype=F64) / 3,
          "vision_tower.patch_embed.pos_emb.weight": torch.randn(vis.pos_emb_height, vis.pos_emb_width, D,
                                                                 generator=gen, dtype=F64),
          "vision_tower.encoder.final_layernorm.weight": 1 + 0.1 * torch.randn(D, generator=gen, dtype=F64)}
    sd |= _projector_sd(vis.merge_kernel_size[0] * vis.merge_kernel_size[1] * D, vis.text_hidden_size, gen)
    for i in range(vis.num_layers):
        sd |= _block_sd(vis, gen, i)
    patches_np = torch.randn(t * h * w, vis.patch_dim, generator=gen, dtype=F64)
    want_nt = moonvit_reference.features(vis, sd, patches_np, [grid])

    half = D // 2
    angle_fc = torch.arange(t, dtype=F64)[:, None] * torch.tensor([10000.0 ** (-c / half) for c in range(half)],
                                                                   dtype=F64)[None, :]
    embed = compile_graph(load_graph(GRAPHS / "vision_embed_tiny.json"))
    encoder = compile_graph(load_graph(GRAPHS / "vision_encoder_tiny.json"))
    cos_lp, sin_lp = _rope_tables(vis, grid)
    x_ld = embed({"patchWeight": sd["vision_tower.patch_embed.proj.weight"].reshape(D, -1).T,
                  "posTable": sd["vision_tower.patch_embed.pos_emb.weight"]},
                 {"patches": patches_np, "rows": _interpolation_matrix(vis.pos_emb_height, h),
                  "cols": _interpolation_matrix(vis.pos_emb_width, w),
                  "time": torch.cat([angle_fc.sin(), angle_fc.cos()], dim=1)})["embedding"]
    y_ld = encoder(_encoder_params(vis, sd), {"x": x_ld, "cos": cos_lp, "sin": sin_lp})["y"]
    assert_close(_merge_graph(sd, y_ld), want_nt)
