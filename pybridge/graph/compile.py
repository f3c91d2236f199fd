"""Compile a checked graph (`load.Graph`) to a `torch.fx.GraphModule` of plain torch calls.

    cg = compile_graph(load_graph(path), dtype=torch.float32, device="cuda")
    outs = cg(params, inputs)         # dicts keyed by `load.binding_keys`; returns {output key: tensor}
    cg.module(params, inputs)         # the bare GraphModule: no binding checks; use it for
                                      # torch.compile(cg.module) / torch.export.export(cg.module, (params, inputs))

The module's forward takes two positional dicts, `params` and `inputs` (keys: the names in the
file, or `name[k]` for the k-th of a repeated name), converts every tensor to `dtype` (and
`device` when given), and returns a dict of outputs. Each op is emitted as the torch calls
that compute its documented formula (docs/graph-format.md); no Python function of ours is
called at run time.
"""

import operator
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import fx

from pybridge.graph.load import Graph, Node, binding_keys, check_bindings

Emit = Callable[[fx.Graph, list[fx.Node], Node], fx.Node]


def _call(g: fx.Graph, fn: Callable, *args: object) -> fx.Node:
    return g.call_function(fn, tuple(args))


def _rms_norm(g: fx.Graph, a: list[fx.Node], node: Node) -> fx.Node:
    """x / sqrt(sum_k x^2 / n + eps) * g, as in the table (mean first, eps inside the root)."""
    x, gain = a
    mean_sq = g.call_function(torch.mean, (_call(g, torch.mul, x, x), -1), {"keepdim": True})
    return _call(g, torch.mul, _call(g, torch.div, x, _call(g, torch.sqrt, _call(g, torch.add, mean_sq, node.attrs["eps"]))), gain)


def _l2_norm(g: fx.Graph, a: list[fx.Node], node: Node) -> fx.Node:
    """x / sqrt(sum_k x^2 + eps) (not max(|x|, eps) as F.normalize)."""
    x = a[0]
    sum_sq = g.call_function(torch.sum, (_call(g, torch.mul, x, x), -1), {"keepdim": True})
    return _call(g, torch.div, x, _call(g, torch.sqrt, _call(g, torch.add, sum_sq, node.attrs["eps"])))


def _unary(fn: Callable) -> Emit:
    return lambda g, a, node: _call(g, fn, a[0])


def _binary(fn: Callable) -> Emit:
    return lambda g, a, node: _call(g, fn, a[0], a[1])


EMIT: dict[str, Emit] = {
    "neg": _unary(torch.neg),
    "exp": _unary(torch.exp),
    "log": _unary(torch.log),
    "tanh": _unary(torch.tanh),
    "sqrt": _unary(torch.sqrt),
    "sigmoid": _unary(torch.sigmoid),
    "erf": _unary(torch.erf),
    "add": _binary(torch.add),
    "sub": _binary(torch.sub),
    "mul": _binary(torch.mul),
    "div": _binary(torch.div),
    "scale": lambda g, a, node: _call(g, torch.mul, a[0], node.attrs["c"]),
    "broadcast": lambda g, a, node: _call(g, torch.broadcast_to, a[0], node.shape),
    "sumLast": lambda g, a, node: _call(g, torch.sum, a[0], -1),
    "meanLast": lambda g, a, node: _call(g, torch.mean, a[0], -1),
    "vecMatMul": _binary(torch.matmul),
    "matMul": _binary(torch.mm),
    "batchedMatMul": _binary(torch.bmm),
    "outer": _binary(torch.outer),
    "swapAxes01": lambda g, a, node: _call(g, torch.transpose, a[0], 0, 1),
    "reshape": lambda g, a, node: _call(g, torch.reshape, a[0], node.shape),
    "concat0": lambda g, a, node: _call(g, torch.cat, [a[0], a[1]], 0),
    "concatLast": lambda g, a, node: _call(g, torch.cat, [a[0], a[1]], -1),
    "softmaxLast": lambda g, a, node: _call(g, torch.softmax, a[0], -1),
    "rmsNormLast": _rms_norm,
    "l2NormLast": _l2_norm,
}


@dataclass(frozen=True)
class CompiledGraph:
    graph: Graph
    module: fx.GraphModule
    dtype: torch.dtype
    device: torch.device | None

    def __call__(self, params: dict[str, torch.Tensor], inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Check names and shapes (`GraphError` otherwise), then run the module."""
        check_bindings(self.graph, params, inputs)
        return self.module(params, inputs)


def compile_graph(graph: Graph, dtype: torch.dtype = torch.float64, device: str | torch.device | None = None) -> CompiledGraph:
    g = fx.Graph()
    dev = None if device is None else torch.device(device)
    to_kwargs: dict[str, object] = {"dtype": dtype} if dev is None else {"dtype": dtype, "device": dev}
    env: dict[int, fx.Node] = {}
    for holder, values in (("params", graph.params), ("inputs", graph.inputs)):
        placeholder = g.placeholder(holder)
        for key, v in zip(binding_keys(values), values):
            env[v.id] = g.call_method("to", (g.call_function(operator.getitem, (placeholder, key)),), to_kwargs)
    for node in graph.nodes:
        env[node.id] = EMIT[node.op](g, [env[a] for a in node.args], node)
    g.output({key: env[v.id] for key, v in zip(binding_keys(graph.outputs), graph.outputs)})
    module = fx.GraphModule(torch.nn.Module(), g, class_name=f"Graph_{graph.name}")
    return CompiledGraph(graph, module, dtype, dev)
