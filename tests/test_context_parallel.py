"""Context-parallel KDA (pybridge/context_parallel.py): the summaries against the Lean-mirror
reference, the single-process composition against the whole-sequence kernels, and real gloo
runs with 2 and 4 processes on loopback (tests/cp_worker.py) against the single-process
`kda_chunked` prefill, honest and under planted composition bugs.

Tolerance (float64, unit roundoff u = 2^-53 ~ 1.1e-16): every compared quantity is a sum of
products along at most T = 64 tokens with inner products of length K + V <= 12, of terms of
magnitude <= ~5 (measured max |o| 5.4, max |S| 2.0; bounded by the inputs: |q|, |v| ~ N(0, 1),
beta < 1, ||k|| = 1, alpha <= 1). A forward bound of order T (K + V) u max|term| ~
64 * 12 * 1.1e-16 * 5 ~ 4e-13 gives ATOL = 1e-12; the measured worst error of the distributed
runs is 1.6e-15. The planted bugs move the outputs by 2.2 and 3.6 (the states by 0.57, 0.59),
10^12 times the tolerance.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import socket
import time
from pathlib import Path

import cp_worker
import pytest
import torch
from safetensors.torch import load_file, save_file

from pybridge import context_parallel as cp
from pybridge.errors import InputError
from pybridge.kda import kda_chunked, kda_recurrent

F64 = torch.float64
ATOL = 1e-12
SCALE = 0.7
torch.set_num_threads(1)
FORKSERVER = multiprocessing.get_context("forkserver")
FORKSERVER.set_forkserver_preload(["torch", "cp_worker"])


def kda_inputs(T: int, seed: int, B: int = 2, H: int = 2, K: int = 5, V: int = 7) -> dict[str, torch.Tensor]:
    """Random KDA inputs whose decays keep a long memory in half the key channels (alpha in
    (0.95, 1)) and forget fast in the others (alpha in (e^-5, 1)): with short memory alone the
    transitions A vanish over a segment and the order of composition would hardly matter."""
    gen = torch.Generator().manual_seed(seed)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=F64)

    u = torch.rand(B, T, H, K, generator=gen, dtype=F64)
    g = torch.where(torch.arange(K) % 2 == 0, -0.05 * u, -5.0 * u)
    return {"q": r(B, T, H, K), "k": torch.nn.functional.normalize(r(B, T, H, K), dim=-1), "v": r(B, T, H, V),
            "g": g, "beta": torch.rand(B, T, H, generator=gen, dtype=F64), "state": r(B, H, K, V)}


def split(x: dict[str, torch.Tensor], lengths: list[int]) -> list[tuple[torch.Tensor, ...]]:
    offsets = [sum(lengths[:i]) for i in range(len(lengths) + 1)]
    return [tuple(x[n][:, a:b] for n in ("q", "k", "v", "g", "beta")) for a, b in itertools.pairwise(offsets)]


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


@pytest.mark.parametrize("T", [1, 2, 17, 40])
def test_segment_summary_equals_composed_token_summaries(T):
    x = kda_inputs(T, seed=T)
    fast = cp.segment_summary(x["k"], x["v"], x["g"], x["beta"])
    plain = cp.segment_summary_reference(x["k"], x["v"], x["g"], x["beta"])
    assert max_err(fast.transition_bhkk, plain.transition_bhkk) < ATOL
    assert max_err(fast.offset_bhkv, plain.offset_bhkv) < ATOL
    # the summary acts on a state as the recurrence does (Lean `KDA.apply_segmentSummary`)
    _, S_bhkv = kda_recurrent(x["q"], x["k"], x["v"], x["g"], x["beta"], SCALE, x["state"])
    assert max_err(cp.apply(plain, x["state"]), S_bhkv) < ATOL


def test_token_summary_is_the_dense_matrix_update():
    x = kda_inputs(1, seed=5)
    k, g, beta = x["k"][0, 0, 0], x["g"][0, 0, 0], x["beta"][0, 0, 0]
    s = cp.token_summary(x["k"][:, 0], x["v"][:, 0], x["g"][:, 0], x["beta"][:, 0])
    A = (torch.eye(5, dtype=F64) - beta * torch.outer(k, k)) @ torch.diag(g.exp())
    assert max_err(s.transition_bhkk[0, 0], A) < 1e-15
    assert max_err(s.offset_bhkv[0, 0], beta * torch.outer(k, x["v"][0, 0, 0])) < 1e-15


def test_composition_is_ordered():
    """Lean `andThen_not_comm_example` as numbers: A(s) = 2s + 1 then B(s) = 3s is 6s + 3; the
    other order is 6s + 1."""
    one = torch.ones(1, 1, dtype=F64)
    a, b = cp.AffineSummary(2 * one, one), cp.AffineSummary(3 * one, 0 * one)
    assert cp.compose([a, b], one).offset_bhkv.item() == 3.0
    assert cp.compose([b, a], one).offset_bhkv.item() == 1.0
    assert cp.compose([], one).transition_bhkk.item() == 1.0


@pytest.mark.parametrize("lengths", [[40], [1, 39], [13, 1, 26], [1, 1, 1, 37], [16, 16, 8]])
def test_reference_composition_equals_whole_sequence(lengths):
    x = kda_inputs(sum(lengths), seed=len(lengths))
    want_o, want_S = kda_recurrent(x["q"], x["k"], x["v"], x["g"], x["beta"], SCALE, x["state"])
    got = cp.kda_context_parallel_reference(split(x, lengths), SCALE, x["state"])
    assert max_err(torch.cat([o for o, _ in got], dim=1), want_o) < ATOL
    assert max_err(got[-1][1], want_S) < ATOL


CASES = {  # world size -> (case name, segment lengths, variants)
    2: [("uneven", [37, 1], ["honest"]), ("long_first", [1, 45], ["honest"]), ("bad_heads", [3, 4], ["honest"])],
    4: [("mixed", [1, 30, 17, 9], ["honest", "reversed", "skipping"]), ("equal", [16, 16, 16, 16], ["honest"])],
}


def run_workers(world: int, folder: Path, timeout_s: float = 60) -> None:
    """`world` worker processes (forked from a forkserver that imports torch and the worker once,
    instead of once per process) on loopback, all stopped at `timeout_s`."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [FORKSERVER.Process(target=cp_worker.run_rank, args=(r, world, port, folder)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    try:
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    for r, p in enumerate(procs):
        crash = folder / f"crash_{r}.txt"
        assert p.exitcode == 0, f"rank {r} exited {p.exitcode}:\n{crash.read_text() if crash.exists() else ''}"


@pytest.mark.parametrize("world", [2, 4])
def test_distributed_prefill_equals_single_process(world, tmp_path):
    cases = [{"name": n, "lengths": L, "variants": v, "scale": SCALE, "drop_head_on_last": n == "bad_heads"}
             for n, L, v in CASES[world]]
    inputs = {}
    for i, c in enumerate(cases):
        inputs[c["name"]] = kda_inputs(sum(c["lengths"]), seed=100 * world + i)
        save_file(inputs[c["name"]], tmp_path / f"in_{c['name']}.safetensors")
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    run_workers(world, tmp_path)
    for c in cases:
        x, L = inputs[c["name"]], c["lengths"]
        if c["drop_head_on_last"]:  # every rank names the disagreement, none computes
            for r in range(world):
                msg = (tmp_path / f"error_{c['name']}_honest_{r}.txt").read_text()
                assert msg == f"context-parallel KDA: ranks disagree on [batch, heads, key_dim, value_dim]: {[[2, 2, 5, 7], [2, 1, 5, 7]]}"
            continue
        o_bthv, S_bhkv = kda_chunked(x["q"], x["k"], x["v"], x["g"], x["beta"], SCALE, x["state"])
        boundaries = [kda_chunked(*split(x, [sum(L[: r + 1])])[0], SCALE, x["state"])[1] for r in range(world)]
        reference = cp.kda_context_parallel_reference(split(x, L), SCALE, x["state"])
        for variant in c["variants"]:
            outs = [load_file(tmp_path / f"out_{c['name']}_{variant}_{r}.safetensors") for r in range(world)]
            o_err = max_err(torch.cat([out["o"] for out in outs], dim=1), o_bthv)
            state_err = max(max_err(out["state"], b) for out, b in zip(outs, boundaries))
            if variant == "honest":
                assert o_err < ATOL and state_err < ATOL, (c["name"], o_err, state_err)
                assert max_err(outs[-1]["state"], S_bhkv) < ATOL
                assert all(max_err(out["o"], o) < ATOL for out, (o, _) in zip(outs, reference))
            else:  # the planted bug is caught, by far
                assert o_err > 1e-3 and state_err > 1e-3, (c["name"], variant, o_err, state_err)


def test_empty_segment_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(cp.dist, "get_rank", lambda group=None: 3)
    monkeypatch.setattr(cp.dist, "get_world_size", lambda group=None: 4)
    x = kda_inputs(0, seed=1)
    with pytest.raises(InputError, match="segment of rank 3 is empty"):
        cp.kda_context_parallel(x["q"], x["k"], x["v"], x["g"], x["beta"], SCALE, x["state"])


def test_mis_shaped_initial_state_is_named(monkeypatch):
    monkeypatch.setattr(cp.dist, "get_rank", lambda group=None: 0)
    monkeypatch.setattr(cp.dist, "get_world_size", lambda group=None: 1)
    monkeypatch.setattr(cp.dist, "all_gather", lambda out, t, group=None: out[0].copy_(t))
    x = kda_inputs(3, seed=1)
    with pytest.raises(InputError, match=r"rank 0's initial state has shape \[2, 2, 5, 6\], not \[2, 2, 5, 7\]"):
        cp.kda_context_parallel(x["q"], x["k"], x["v"], x["g"], x["beta"], SCALE, x["state"][..., :6])
