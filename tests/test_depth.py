"""AttnRes (lean/KimiK3/Depth): Float results and the graph export, run in Lean.

`tests/lean/DepthChecks.lean` `#guard`s the hand-computed cases (equal scores give the average;
scores ±ln 3 / 2 give weights 3/4, 1/4; block size 3 folds the partial block after three
commits; 93 layers at B = 12 give 9 sources; the graph equals the kernel on 3 sources at d = 6)
and prints Float bits of two results, which are
compared here with an independent computation in Python (`math`, `fractions`). The graph export
`attnres_tiny` (3 sources, d = 24, eps 2e-5 = the tiny `attn_res_norm_eps`; the session's fresh `k3spec export`,
`conftest.fresh_exports`) has the expected signature and nodes.
"""

from __future__ import annotations

import json
import math
import struct
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import pytest

import torch

from lean_checks import CHECKS, run_check_file
from pybridge.attnres import DepthState, retrieve
from pybridge.config import load_config
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph

REPO = Path(__file__).resolve().parents[1]
TARGETS = ("KimiK3.Core.Json", "KimiK3.Depth.Graph")
EXPORT = "attnres_tiny"
F64 = torch.float64


@lru_cache(maxsize=1)
def check_values() -> dict[str, list[float]]:
    """The Float bits printed by `tests/lean/DepthChecks.lean` (whose `#guard`s pass), by name."""
    checks: dict[str, list[float]] = {}
    for message in run_check_file(CHECKS / "DepthChecks.lean"):
        if message.severity == "information" and message.text.lstrip().startswith("{"):
            doc = json.loads(message.text)
            checks[doc["check"]] = [struct.unpack("<d", struct.pack("<Q", int(b)))[0] for b in doc["bits"]]
    return checks


def attend_reference(values_nd: list[list[float]], query_d: list[float], eps: float) -> list[float]:
    """Report Eq. 9-10 without max-subtraction: h = sum_i exp(s_i) / sum_j exp(s_j) * v_i."""
    d = len(query_d)
    scores_n = [
        math.fsum(q * v / math.sqrt(math.fsum(x * x for x in row) / d + eps) for q, v in zip(query_d, row))
        for row in values_nd
    ]
    kernels_n = [math.exp(s) for s in scores_n]
    total = math.fsum(kernels_n)
    return [math.fsum(k / total * row[c] for k, row in zip(kernels_n, values_nd)) for c in range(d)]


@pytest.mark.lean
@pytest.mark.checks
def test_hand_case_weights_three_to_one() -> None:
    # scores +-ln3/2 -> weights exactly 3/4, 1/4 over R: h = 3/4 [1, 1] + 1/4 [1, -1]
    expected = [Fraction(3, 4) * a + Fraction(1, 4) * b for a, b in zip([1, 1], [1, -1])]
    assert expected == [1, Fraction(1, 2)]
    got = check_values()["hand_three_to_one"]
    assert got == pytest.approx([float(x) for x in expected], abs=1e-12)


@pytest.mark.lean
@pytest.mark.checks
def test_small_graph_matches_python_reference() -> None:
    values_nd = [[(((6 * i + k) * 7) % 11 - 5) / 4 for k in range(6)] for i in range(3)]
    query_d = [((5 * k) % 7 - 3) / 8 for k in range(6)]
    expected = attend_reference(values_nd, query_d, 1e-5)
    got = check_values()["small_graph"]
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
    # a convex combination: every coordinate between the sources' least and largest values
    for c, h in enumerate(got):
        column = [row[c] for row in values_nd]
        assert min(column) - 1e-12 <= h <= max(column) + 1e-12


@pytest.mark.lean
def test_export_has_the_tiny_signature(fresh_exports: dict[str, str]) -> None:
    doc = json.loads(fresh_exports[EXPORT])
    assert [p["name"] for p in doc["params"]] == ["query", "norm_gain"]
    assert [(i["name"], i["shape"]) for i in doc["inputs"]] == [("values", [3, 24])]
    assert [n["op"] for n in doc["nodes"]] == ["rmsNormLast", "swapAxes01", "vecMatMul", "softmaxLast", "vecMatMul"]
    assert doc["outputs"][0]["shape"] == [24]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exported_graph_equals_pybridge_retrieve(seed: int) -> None:
    """The committed export (unit gain) computes pybridge's AttnRes retrieval in float64."""
    cg = compile_graph(load_graph(REPO / "fixtures" / "graphs" / f"{EXPORT}.json"))
    gen = torch.Generator().manual_seed(seed)
    values_nd = torch.randn(3, 24, dtype=F64, generator=gen) * 3
    query_d = torch.randn(24, dtype=F64, generator=gen)
    got = cg({"query": query_d, "norm_gain": torch.ones(24, dtype=F64)}, {"values": values_nd})["output"]
    want = retrieve(list(values_nd), query_d, load_config(REPO / "fixtures" / "tiny" / "config.json").attn_res_norm_eps)
    assert float((got - want).abs().max()) <= 1e-12 * float(want.abs().max())
    # convex combination of the sources (AttnRes.attendPacked_mem_interval)
    assert bool((got >= values_nd.min(0).values - 1e-12).all() and (got <= values_nd.max(0).values + 1e-12).all())


def test_pybridge_depth_state_follows_lean_commit_rule() -> None:
    """`three_commits_fold` and `widget_17_layers`: pybridge's DepthState keeps the same blocks."""
    e, *outs = [torch.full((2,), float(i)) for i in range(1, 8)]
    state = DepthState(blocks=[e], block_size=3)
    for seq_out, chan_out in zip(outs[0::2], outs[1::2]):
        state.add_sequence_output(seq_out)
        state.finish_layer(chan_out)
    assert state.count == 0 and state.partial is None
    assert [b.tolist() for b in state.sources()] == [e.tolist(), sum(outs, torch.zeros(2)).tolist()]
    state = DepthState(blocks=[e], block_size=12)
    for _ in range(17):
        state.add_sequence_output(torch.zeros(2))
        state.finish_layer(torch.ones(2))
    assert (len(state.blocks) - 1, state.count, len(state.sources())) == (1, 5, 3)

