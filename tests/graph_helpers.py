"""Shared helpers for the graph tests: fixture paths and random bindings."""

from pathlib import Path

import torch

from pybridge.graph.load import Graph, Value, binding_keys

GRAPHS = Path(__file__).resolve().parents[1] / "fixtures" / "graphs"
GRAPH_FILES = sorted(GRAPHS.glob("*.json"))


def random_bindings(values: tuple[Value, ...], gen: torch.Generator, positive: set[str] = frozenset()) -> dict[str, torch.Tensor]:
    """float64 N(0, 1) tensors per binding key; names in `positive` get values in [1, 5]."""
    out = {}
    for key, v in zip(binding_keys(values), values):
        t = torch.randn(v.shape, dtype=torch.float64, generator=gen)
        out[key] = 1.0 + 4.0 * torch.rand(v.shape, dtype=torch.float64, generator=gen) if v.name in positive else t
    return out


def random_params_inputs(graph: Graph, seed: int) -> tuple[dict, dict]:
    """Caps (`*Cap`), `log` and `sqrt` need positive inputs; every graph input is made positive
    when its name ends in `Cap`."""
    gen = torch.Generator().manual_seed(seed)
    caps = {v.name for v in graph.inputs if v.name.endswith("Cap")}
    return random_bindings(graph.params, gen), random_bindings(graph.inputs, gen, caps)
