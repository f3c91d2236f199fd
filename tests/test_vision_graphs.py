"""The exported MoonViT-V2 graphs (`lean/KimiK3/Vision/*Graph.lean`) against pybridge's plain
reference `moonvit_reference`, float64, at the tiny vision config (every width distinct).

Two independent legs: the graph JSON compiled by `pybridge.graph` (ops from docs/graph-format.md)
and the loop-by-loop reference written from the equations. Graph weights are `[in, out]`, the
reference reads checkpoint-named `nn.Linear` weights `[out, in]`.
"""

import math

import torch
from helpers import GRAPHS, TINY, assert_close

from pybridge import moonvit_reference
from pybridge.config import load_config
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph

F64 = torch.float64


def _gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """The projector's GELU, `x · (1 + erf(x/√2)) / 2` (the node the primitive set lacks)."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def _projector_sd(E: int, T: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    return {"mm_projector.proj.0.weight": torch.randn(E, E, generator=gen, dtype=F64) / math.sqrt(E),
            "mm_projector.proj.2.weight": torch.randn(T, E, generator=gen, dtype=F64) / math.sqrt(E),
            "mm_projector.post_norm.weight": 1 + 0.1 * torch.randn(T, generator=gen, dtype=F64)}


def _merge_graphs(sd: dict[str, torch.Tensor], y_nd: torch.Tensor, first_ee: torch.Tensor | None = None) -> torch.Tensor:
    """Head graph, erf GELU, tail graph (`mergeProject_eq_graphs`)."""
    head = compile_graph(load_graph(GRAPHS / "vision_merge_head_tiny.json"))
    tail = compile_graph(load_graph(GRAPHS / "vision_merge_tail_tiny.json"))
    first = sd["mm_projector.proj.0.weight"].T if first_ee is None else first_ee
    hidden_ne = head({"first": first}, {"features": y_nd})["hidden"]
    return tail({"second": sd["mm_projector.proj.2.weight"].T, "norm": sd["mm_projector.post_norm.weight"]},
                {"activated": _gelu_erf(hidden_ne)})["tokens"]


def test_vision_merge_graphs_equal_reference_merge_project() -> None:
    """2 frames of 6 × 4 tokens of width 20, 2 × 2 merge to 3 × 2 tokens of width 80, projected
    to 24: the two Lean graphs around the erf GELU equal `merge_project_clip`; a swapped merge
    channel order (`(dw·2 + dh)·D + c`) is caught."""
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
    assert_close(_merge_graphs(sd, y_nd), want_nt)
    # planted bug: the graph's merge with the kernel offsets swapped, (dw·kh + dh)·D + c, seen through
    # the first linear (rows permuted accordingly)
    perm = torch.tensor([(dw * kh + dh) * D + c for dh in range(kh) for dw in range(kw) for c in range(D)])
    bad_ee = sd["mm_projector.proj.0.weight"].T[perm]
    assert float((_merge_graphs(sd, y_nd, bad_ee) - want_nt).abs().max()) > 1e-3
    # planted bug: the first frame instead of the frame mean
    frame0_nd = y_nd[: h * w].repeat(t, 1)
    assert float((_merge_graphs(sd, frame0_nd) - want_nt).abs().max()) > 1e-3
