"""Kimi Linear's graphs (lean/KimiK3/KimiLinear/) against transformers' own modules, an
independent implementation, in float64:

* the SwiGLU expert (`SwiGLUGraph.lean`, theorem `specFwd_eq_swigluForward`) against
  `KimiLinearMLP`;
* the decay gate of one head (`DecayGateGraph.lean`, theorem `specFwd_eq_logDecay`) against
  `KimiLinearForgetGate`, head by head.

The committed exports `fixtures/graphs/kimi_linear_expert_tiny.json` (hidden 24, expert hidden 13)
and `kimi_linear_decay_gate_tiny.json` (hidden 24, rank = head dim = 5) are checked against a
fresh export by `tests/test_codegen.py`; here pybridge's graph interpreter runs them with the
weights of randomly initialized transformers modules.
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
GATE_GRAPH = GRAPHS / "kimi_linear_decay_gate_tiny.json"
HIDDEN, EXPERT_HIDDEN = 24, 13
HEAD_DIM, HEADS = 5, 2


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


def _forget_gate(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    config = configuration_kl.KimiLinearConfig(
        hidden_size=HIDDEN, linear_attn_config={"head_dim": HEAD_DIM, "num_heads": HEADS}
    )
    gate = transformers_kl.KimiLinearForgetGate(config).to(torch.float64)
    with torch.no_grad():  # A_log and dt_bias are created empty
        gate.A_log.copy_(torch.rand(gate.A_log.shape, dtype=torch.float64).mul(15.0).add(1.0).log())
        gate.dt_bias.copy_(torch.randn(gate.dt_bias.shape, dtype=torch.float64))
    return gate


def _gate_params(gate: torch.nn.Module, head: int) -> dict[str, torch.Tensor]:
    cols = slice(head * HEAD_DIM, (head + 1) * HEAD_DIM)
    return {
        "decayDown": gate.f_a_proj.weight.detach().T.contiguous(),
        "decayUp": gate.f_b_proj.weight.detach()[cols].T.contiguous(),
        "decayBias": gate.dt_bias.detach()[cols].clone(),
        "decayLogRate": gate.A_log.detach()[0, 0, head, 0].clone(),
    }


def _gate_case(seed: int) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    gate = _forget_gate(seed)
    x = torch.randn(HIDDEN, dtype=torch.float64, generator=torch.Generator().manual_seed(200 + seed)) * 3.0
    with torch.no_grad():
        want = gate(x.view(1, 1, HIDDEN)).view(HEADS, HEAD_DIM)
    return gate, x, want


#: transformers computes the gate in float32 whatever the module dtype (`forget_gate.float()`,
#: `A_log.float()`), so it agrees with the float64 graph to float32 rounding only.
FLOAT32_RTOL = 1e-5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decay_gate_graph_equals_transformers_forget_gate(seed: int) -> None:
    gate, x, want = _gate_case(seed)
    assert float(want.max()) < 0  # the theorem logDecay_neg, on these weights
    for head in range(HEADS):
        params = _gate_params(gate, head)
        got = torch.from_numpy(interpret(load_graph(GATE_GRAPH), params, {"input": x})["logDecay"])
        assert_close(got, want[head], rtol=FLOAT32_RTOL)
        # the same equation by hand in float64: −e^{A} log(1 + e^{z}), z = (x D) U + b
        z = x @ params["decayDown"] @ params["decayUp"] + params["decayBias"]
        assert_close(got, -params["decayLogRate"].exp() * torch.log1p(torch.exp(z)))


def test_decay_gate_with_the_wrong_head_rate_is_caught() -> None:
    """Planted bug: head 1 read with head 0's `A_log`."""
    gate, x, want = _gate_case(0)
    params = _gate_params(gate, 1)
    params["decayLogRate"] = _gate_params(gate, 0)["decayLogRate"]
    got = interpret(load_graph(GATE_GRAPH), params, {"input": x})["logDecay"]
    with pytest.raises(AssertionError):
        assert_close(torch.from_numpy(got), want[1])
