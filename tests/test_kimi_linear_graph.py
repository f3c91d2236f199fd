"""Kimi Linear's SwiGLU expert graph (lean/KimiK3/KimiLinear/SwiGLUGraph.lean, theorem
`specFwd_eq_swigluForward`) against transformers' own `KimiLinearMLP`, an independent
implementation, in float64.

The committed export `fixtures/graphs/kimi_linear_expert_tiny.json` (hidden 24, expert hidden 13)
is checked against a fresh export by `tests/test_codegen.py`; here pybridge's graph interpreter
runs it with the weights of a randomly initialized `KimiLinearMLP`.
"""

from __future__ import annotations

import pytest
import torch
from helpers import GRAPHS, assert_close

from pybridge.graph.interpret import interpret
from pybridge.graph.load import load_graph

transformers_kl = pytest.importorskip("transformers.models.kimi_linear.modeling_kimi_linear")
configuration_kl = pytest.importorskip("transformers.models.kimi_linear.configuration_kimi_linear")

GRAPH = GRAPHS / "kimi_linear_expert_tiny.json"
HIDDEN, EXPERT_HIDDEN = 24, 13


def _mlp(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    config = configuration_kl.KimiLinearConfig(hidden_size=HIDDEN, intermediate_size=EXPERT_HIDDEN, hidden_act="silu")
    return transformers_kl.KimiLinearMLP(config).to(torch.float64)


def _graph_params(mlp: torch.nn.Module) -> dict[str, torch.Tensor]:
    # transformers stores `nn.Linear` weights [out, in]; the graph's are [in, out].
    return {
        "gateWeight": mlp.gate_proj.weight.detach().T.contiguous(),
        "upWeight": mlp.up_proj.weight.detach().T.contiguous(),
        "downWeight": mlp.down_proj.weight.detach().T.contiguous(),
    }


def test_graph_has_the_tiny_shapes_and_no_opaque_activation() -> None:
    g = load_graph(GRAPH)
    assert [p.shape for p in g.params] == [(HIDDEN, EXPERT_HIDDEN), (HIDDEN, EXPERT_HIDDEN), (EXPERT_HIDDEN, HIDDEN)]
    assert [n.op for n in g.nodes].count("sigmoid") == 1  # SiLU as gate · σ(gate), from primitives


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_graph_equals_transformers_kimi_linear_mlp(seed: int) -> None:
    mlp = _mlp(seed)
    x = torch.randn(HIDDEN, dtype=torch.float64, generator=torch.Generator().manual_seed(100 + seed)) * 3.0
    got = interpret(load_graph(GRAPH), _graph_params(mlp), {"input": x})["output"]
    with torch.no_grad():
        want = mlp(x.unsqueeze(0)).squeeze(0)
    assert_close(torch.from_numpy(got), want)


def test_swapped_gate_and_up_weights_are_caught() -> None:
    """Planted bug: SiLU applied to the up projection instead of the gate."""
    mlp = _mlp(0)
    params = _graph_params(mlp)
    params["gateWeight"], params["upWeight"] = params["upWeight"], params["gateWeight"]
    x = torch.randn(HIDDEN, dtype=torch.float64, generator=torch.Generator().manual_seed(100)) * 3.0
    got = interpret(load_graph(GRAPH), params, {"input": x})["output"]
    with torch.no_grad():
        want = mlp(x.unsqueeze(0)).squeeze(0)
    with pytest.raises(AssertionError):
        assert_close(torch.from_numpy(got), want)
