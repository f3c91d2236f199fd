"""Compiled graphs: compiled == reference interpreter on every fixture and on a graph using
every op; documented formulas (eps placement); dtypes; torch.export and torch.compile."""

import json
import math
import struct
from pathlib import Path

import pytest
import torch
from helpers import GRAPH_FILES, GRAPHS, RTOL, assert_close, random_params_inputs

from pybridge.errors import GraphError
from pybridge.graph.compile import compile_graph
from pybridge.graph.interpret import interpret
from pybridge.graph.load import load_graph, parse_graph

torch.set_num_threads(1)  # tiny tensors gain nothing from threads; on a shared box they only add contention
@pytest.mark.parametrize("path", GRAPH_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compiled_equals_interpreter(path: Path, seed: int) -> None:
    g = load_graph(path)
    params, inputs = random_params_inputs(g, seed)
    got, want = compile_graph(g)(params, inputs), interpret(g, params, inputs)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key].dtype == torch.float64
        assert_close(got[key], want[key])


def _f(x: float) -> dict:
    return {"float64_bits": str(struct.unpack("<Q", struct.pack("<d", x))[0]), "display": repr(x)}


def _node(id_: int, op: str, args: list[int], shape: list[int], **attrs: object) -> dict:
    return {"id": id_, "op": op, "attrs": attrs, "args": args, "shape": shape}


ALL_OPS_DOC = {
    "format": "k3spec.graph.v1",
    "name": "all_ops",
    "params": [{"name": "W", "shape": [4, 3], "id": 0}, {"name": "A", "shape": [2, 4], "id": 1},
               {"name": "B", "shape": [2, 4, 3], "id": 2}, {"name": "g", "shape": [3], "id": 3}],
    "inputs": [{"name": "x", "shape": [4], "id": 4}, {"name": "yCap", "shape": [4], "id": 5},
               {"name": "M", "shape": [2, 2, 4], "id": 6}],
    "nodes": [
        _node(7, "neg", [4], [4]), _node(8, "exp", [4], [4]), _node(9, "log", [5], [4]),
        _node(10, "tanh", [4], [4]), _node(11, "sqrt", [5], [4]), _node(12, "sigmoid", [4], [4]),
        _node(13, "add", [7, 8], [4]), _node(14, "sub", [9, 10], [4]), _node(15, "mul", [11, 12], [4]),
        _node(16, "div", [13, 5], [4]), _node(17, "scale", [14], [4], c=_f(0.3)),
        _node(18, "broadcast", [15], [2, 4], n=2), _node(19, "sumLast", [18], [2]), _node(20, "meanLast", [18], [2]),
        _node(21, "vecMatMul", [16, 0], [3]), _node(22, "matMul", [1, 0], [2, 3]),
        _node(23, "batchedMatMul", [6, 2], [2, 2, 3]), _node(24, "outer", [17, 21], [4, 3]),
        _node(25, "swapAxes01", [24], [3, 4]), _node(26, "reshape", [23], [4, 3]),
        _node(27, "concat0", [24, 26], [8, 3]), _node(28, "concatLast", [22, 22], [2, 6]),
        _node(29, "softmaxLast", [27], [8, 3]), _node(30, "rmsNormLast", [27, 3], [8, 3], eps=_f(0.25)),
        _node(31, "l2NormLast", [28], [2, 6], eps=_f(0.5)), _node(32, "swapAxes01", [23], [2, 2, 3]),
        _node(33, "erf", [17], [4]),
    ],
    "outputs": [{"name": n, "shape": s, "id": i} for n, s, i in [
        ("s", [2], 19), ("m", [2], 20), ("t", [3, 4], 25), ("soft", [8, 3], 29), ("rms", [8, 3], 30),
        ("l2", [2, 6], 31), ("bmm", [2, 2, 3], 32), ("cat", [8, 3], 27), ("erf", [4], 33)]],
}


def test_all_ops_compiled_equals_interpreter() -> None:
    g = parse_graph(json.loads(json.dumps(ALL_OPS_DOC)), "all_ops")
    for seed in range(3):
        params, inputs = random_params_inputs(g, seed)
        got, want = compile_graph(g)(params, inputs), interpret(g, params, inputs)
        for key in want:
            assert_close(got[key], want[key])


def test_documented_formulas() -> None:
    """Norm eps placement, softmax and erf, recomputed here from the table (eps large enough to matter)."""
    g = parse_graph(json.loads(json.dumps(ALL_OPS_DOC)), "all_ops")
    params, inputs = random_params_inputs(g, 7)
    cg = compile_graph(g)
    out = cg(params, inputs)
    # intermediate values are recomputed independently in float64
    x, y, W = inputs["x"], inputs["yCap"], params["W"]
    v16 = (-x + torch.exp(x)) / y
    v17 = 0.3 * (torch.log(y) - torch.tanh(x))
    v21 = torch.einsum("i,ik->k", v16, W)
    v24 = v17[:, None] * v21[None, :]
    v26 = torch.einsum("jri,jik->jrk", inputs["M"], params["B"]).reshape(4, 3)
    v27 = torch.cat([v24, v26])
    rms = v27 / torch.sqrt((v27**2).sum(-1, keepdim=True) / 3 + 0.25) * params["g"]
    v22 = params["A"] @ W
    v28 = torch.cat([v22, v22], -1)
    l2 = v28 / torch.sqrt((v28**2).sum(-1, keepdim=True) + 0.5)
    soft = torch.exp(v27) / torch.exp(v27).sum(-1, keepdim=True)
    erf = torch.tensor([math.erf(v) for v in v17.tolist()], dtype=torch.float64)
    for key, want in (("rms", rms), ("l2", l2), ("soft", soft), ("cat", v27), ("erf", erf)):
        assert_close(out[key], want.numpy())


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_low_precision(dtype: torch.dtype, tol: float) -> None:
    g = load_graph(GRAPHS / "channel_latent_moe_tiny.json")
    params, inputs = random_params_inputs(g, 0)
    got = compile_graph(g, dtype=dtype, device="cpu")(params, inputs)["output"]
    assert got.dtype == dtype
    assert_close(got.float(), interpret(g, params, inputs)["output"], rtol=tol)


def test_bad_bindings() -> None:
    g = load_graph(GRAPHS / "channel_expert_tiny.json")
    params, inputs = random_params_inputs(g, 0)
    cg = compile_graph(g)
    with pytest.raises(GraphError, match="missing \\['gateWeight'\\]"):
        cg({k: v for k, v in params.items() if k != "gateWeight"}, inputs)
    with pytest.raises(GraphError, match="input input: shape \\[23\\]"):
        cg(params, {**inputs, "input": torch.zeros(23)})


@pytest.mark.slow
def test_export_and_compile() -> None:
    g = load_graph(GRAPHS / "channel_expert_tiny.json")
    params, inputs = random_params_inputs(g, 3)
    cg = compile_graph(g)
    want = cg(params, inputs)["output"]
    exported = torch.export.export(cg.module, (params, inputs))
    assert torch.equal(exported.module()(params, inputs)["output"], want)
    compiled = torch.compile(cg.module)  # inductor: 20-35 s cold on the 2-core CPU box
    torch.testing.assert_close(compiled(params, inputs)["output"], want, rtol=RTOL, atol=0)
