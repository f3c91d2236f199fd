"""Plain reference interpreter: evaluate a checked graph node by node in float64 NumPy.

Each op is written straight from the formula in docs/graph-format.md, independently of
`compile.py` (sums run over k in increasing order as the table states, products are written
as such sums). Used by tests to check the compiled module; not fast.
"""

import math

import numpy as np
import torch

from pybridge.graph.load import Graph, Node, binding_keys, check_bindings


def _sum_last(x: np.ndarray) -> np.ndarray:
    acc = np.zeros(x.shape[:-1])
    for k in range(x.shape[-1]):
        acc = acc + x[..., k]
    return acc


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C[..., r, k] = sum_i A[..., r, i] B[..., i, k] for stacked matrices."""
    c = np.zeros((*a.shape[:-1], b.shape[-1]))
    for i in range(a.shape[-1]):
        c = c + a[..., :, i, None] * b[..., None, i, :]
    return c


def _eval(node: Node, a: list[np.ndarray]) -> np.ndarray:
    x = a[0]
    match node.op:
        case "neg": return -x
        case "exp": return np.exp(x)
        case "log": return np.log(x)
        case "tanh": return np.tanh(x)
        case "sqrt": return np.sqrt(x)
        case "sigmoid": return 1.0 / (1.0 + np.exp(-x))
        case "erf": return np.vectorize(math.erf, otypes=[np.float64])(x)
        case "add": return x + a[1]
        case "sub": return x - a[1]
        case "mul": return x * a[1]
        case "div": return x / a[1]
        case "scale": return node.attrs["c"] * x
        case "broadcast": return np.stack([x] * node.attrs["n"]) if node.attrs["n"] else np.zeros(node.shape)
        case "sumLast": return _sum_last(x)
        case "meanLast": return _sum_last(x) / x.shape[-1]
        case "vecMatMul": return _matmul(x[None, :], a[1])[0]
        case "matMul" | "batchedMatMul": return _matmul(x, a[1])
        case "outer": return x[:, None] * a[1][None, :]
        case "swapAxes01": return np.swapaxes(x, 0, 1)
        case "reshape": return np.ascontiguousarray(x).reshape(node.shape)
        case "concat0": return np.concatenate([x, a[1]], axis=0)
        case "concatLast": return np.concatenate([x, a[1]], axis=-1)
        case "softmaxLast":
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return e / _sum_last(e)[..., None]
        case "rmsNormLast":
            return x / np.sqrt(_sum_last(x * x)[..., None] / x.shape[-1] + node.attrs["eps"]) * a[1]
        case "l2NormLast":
            return x / np.sqrt(_sum_last(x * x)[..., None] + node.attrs["eps"])
    raise AssertionError(f"op {node.op} passed the loader but has no interpreter case")


def _array(t: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().to(torch.float64).numpy()
    return np.asarray(t, dtype=np.float64)


def interpret(graph: Graph, params: dict, inputs: dict) -> dict[str, np.ndarray]:
    """Outputs keyed like `compile_graph`'s, as float64 arrays."""
    check_bindings(graph, params, inputs)
    env: dict[int, np.ndarray] = {}
    for values, given in ((graph.params, params), (graph.inputs, inputs)):
        for key, v in zip(binding_keys(values), values):
            env[v.id] = _array(given[key])
    for node in graph.nodes:
        env[node.id] = np.asarray(_eval(node, [env[a] for a in node.args]), dtype=np.float64)
    return {key: env[v.id] for key, v in zip(binding_keys(graph.outputs), graph.outputs)}
