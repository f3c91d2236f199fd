"""The Lean MoonEP checker (`lean/KimiK3/Channel/MoonEP.lean`) on pybridge's plans, and the Lean
context-parallel composition (`lean/KimiK3/Sequence/ContextParallel.lean`) at `Float` against
pybridge's (`pybridge.context_parallel.compose`).

One Lean run: the two modules bundled (`codegen.bundle`) with every case appended, each printing
one JSON line.

* MoonEP: seeded loads (uniform, Zipf, hot rank; `routed_counts` of `tests/test_moonep.py`), the
  plan of `pybridge.moonep.plan`, and two planted plans (one assignment moved to another rank;
  home-only dispatch). Lean prints `checkPlan`'s verdict (proved equivalent to: loads conserved,
  exactly S·K rows per rank, redundant experts from the named source, `checkPlan_iff`), the rows
  per rank, redundant experts per rank, hosts per expert and ⌈load/(S·K)⌉ per expert. The Python
  leg recounts the same numbers from `dispatch_rre` in torch (and `violations` of
  `tests/test_moonep.py`); they must be equal, the planner's plans accepted and the planted ones
  rejected by both.
* Context parallelism: random summaries (A [K, K], B [K, V], float64 passed bit for bit) of R
  ranks; Lean prints `composeAll` of all ranks and each rank's incoming state (`composeAll` of the
  ranks before it applied to S₀), pybridge computes `compose` and `incoming_state`. Agreement to
  1e-12 (entries are O(10), a few dozen rounded operations of 2⁻⁵³ each); the planted bug — the
  earlier summaries composed in reverse order — must move them by far more.
"""

from __future__ import annotations

import json
import struct
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

from codegen.bundle import bundle, dependency_order, run_lean
from pybridge import context_parallel as cp
from pybridge import moonep
from test_moonep import routed_counts, violations

REPO = Path(__file__).resolve().parents[1]
MODULES = ("KimiK3.Channel.MoonEP", "KimiK3.Sequence.ContextParallel")
TOL = 1e-12


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from_bits(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b))[0]


# ---------------------------------------------------------------- MoonEP cases

@cache
def moon_cases() -> tuple[tuple[str, torch.Tensor, int, int, torch.Tensor, tuple[int, ...]], ...]:
    """(name, counts_re, S, K, dispatch_rre, source) — the planner's plans, then planted ones."""
    out = []
    for name, (R, per, S, K, seed), weight in (
        ("uniform", (4, 3, 6, 2, 11), lambda E: torch.ones(E)),
        ("zipf", (5, 4, 8, 3, 12), lambda E: 1.0 / torch.arange(1, E + 1, dtype=torch.float64)),
        ("hot_rank", (4, 2, 5, 2, 13), lambda E: torch.cat([torch.ones(2), 1e-12 * torch.ones(E - 2)])),
    ):
        E = R * per
        counts = routed_counts(R, E, S, K, weight(E), seed)
        p = moonep.plan(counts, S, K)
        source = tuple(r if s is None else s for r, s in enumerate(p.source))
        out.append((name, counts, S, K, p.dispatch_rre, source))
    name, counts, S, K, d, source = out[1]
    moved = d.clone()  # planted: one assignment processed at another rank (a != r, same expert)
    a, r, e = (int(i) for i in (moved > 0).nonzero()[0])
    moved[a, r, e] -= 1
    moved[a, (r + 1) % counts.shape[0], e] += 1
    out.append(("planted_moved", counts, S, K, moved, source))
    name, counts, S, K, _, _ = out[2]
    per = counts.shape[1] // counts.shape[0]
    home_only = torch.zeros(counts.shape[0], *counts.shape, dtype=torch.int64)
    for e in range(counts.shape[1]):
        home_only[:, e // per, e] = counts[:, e]
    out.append(("planted_home_only", counts, S, K, home_only, tuple(range(counts.shape[0]))))
    return tuple(out)


def lean_nat_table(rows) -> str:
    return "[" + ", ".join(lean_nat_table(r) if isinstance(r, list) else str(int(r)) for r in rows) + "]"


def moon_lean(index: int) -> str:
    name, counts, S, K, d, source = moon_cases()[index]
    R, E = counts.shape
    return f"""
namespace Moon{index}
def counts : Fin {R} → Fin {E} → Nat := fun a e => listGetD 0 (listGetD [] {lean_nat_table(counts.tolist())} a.val) e.val
def table : List (List (List Nat)) := {lean_nat_table(d.tolist())}
def plan : MoonEP.Plan {R} {E} :=
  ⟨fun a r e => listGetD 0 (listGetD [] (listGetD [] table a.val) r.val) e.val, fun r => listGetD 0 {list(source)} r.val⟩
#eval! IO.println ("{{\\"moon\\": {index}, \\"accepted\\": " ++ toString (MoonEP.checkPlan {E // R} {S} {K} counts plan) ++
  ", \\"received\\": " ++ toString (finList {R} (MoonEP.received plan)) ++
  ", \\"redundant\\": " ++ toString (finList {R} (MoonEP.redundantCount (MoonEP.blockHome {E // R}) plan)) ++
  ", \\"hosts\\": " ++ toString (finList {E} (MoonEP.hosts plan)) ++
  ", \\"lower\\": " ++ toString (finList {E} (fun e => MoonEP.ceilDiv (MoonEP.load counts e) ({S} * {K}))) ++ "}}")
end Moon{index}
"""


def moon_python(index: int) -> dict:
    """The same quantities, recounted from the dispatch tensor."""
    name, counts, S, K, d, source = moon_cases()[index]
    R, E = counts.shape
    per = E // R
    processed_re = d.sum(0)  # [destination, expert]
    redundant = [sum(1 for e in range(E) if processed_re[r, e] > 0 and e // per != r) for r in range(R)]
    one_source = all(e // per == source[r] for r in range(R) for e in range(E) if processed_re[r, e] > 0 and e // per != r)
    received = processed_re.sum(1).tolist()
    accepted = bool(torch.equal(d.sum(1), counts)) and all(x == S * K for x in received) and one_source
    return {"accepted": accepted, "received": received, "redundant": redundant,
            "hosts": (processed_re > 0).sum(0).tolist(), "lower": [-(-int(x) // (S * K)) for x in counts.sum(0)]}


# ---------------------------------------------------------------- context-parallel cases

CP_CASES = ((3, 2, 2, 0), (4, 3, 2, 1), (2, 2, 3, 2))  # (ranks, K, V, seed)


@cache
def cp_inputs(index: int) -> tuple[list[cp.AffineSummary], torch.Tensor]:
    R, K, V, seed = CP_CASES[index]
    gen = torch.Generator().manual_seed(seed)
    summaries = [cp.AffineSummary(torch.randn(K, K, generator=gen, dtype=torch.float64),
                                  torch.randn(K, V, generator=gen, dtype=torch.float64)) for _ in range(R)]
    return summaries, torch.randn(K, V, generator=gen, dtype=torch.float64)


def lean_matrix(m: torch.Tensor) -> str:
    rows = ", ".join("[" + ", ".join(f"Float.ofBits {bits(float(x))}" for x in row) + "]" for row in m.tolist())
    return f"(fun r c => listGetD 0 (listGetD [] [{rows}] r.val) c.val)"


def cp_lean(index: int) -> str:
    R, K, V, _ = CP_CASES[index]
    summaries, s0 = cp_inputs(index)
    names = [f"s{r}" for r in range(R)]
    defs = "".join(f"def s{r} : AffineSummary Float {K} {V} := ⟨{lean_matrix(s.transition_bhkk)}, {lean_matrix(s.offset_bhkv)}⟩\n"
                   for r, s in enumerate(summaries))
    mat = lambda t, rows, cols: f"finList {rows} (fun r => finList {cols} (fun c => ({t}) r c |>.toBits))"
    incoming = " ++ \", \" ++ ".join(
        "toString (" + mat(f"(AffineSummary.composeAll ([{', '.join(names[:r])}] : List (AffineSummary Float {K} {V}))).apply S0", K, V) + ")"
        for r in range(R))
    whole = f"AffineSummary.composeAll [{', '.join(names)}]"
    return f"""
namespace CP{index}
{defs}def S0 : Tensor Float [{K}, {V}] := {lean_matrix(s0)}
#eval! IO.println ("{{\\"cp\\": {index}, \\"transition\\": " ++ toString ({mat(f"({whole}).transition", K, K)}) ++
  ", \\"offset\\": " ++ toString ({mat(f"({whole}).offset", K, V)}) ++ ", \\"incoming\\": [" ++ {incoming} ++ "]}}")
end CP{index}
"""


# ---------------------------------------------------------------- the Lean run

@cache
def lean_results() -> dict[str, dict[int, dict]]:
    source = bundle(REPO, dependency_order(REPO, MODULES)) + "\nopen KimiK3\n"
    source += "".join(moon_lean(i) for i in range(len(moon_cases())))
    source += "".join(cp_lean(i) for i in range(len(CP_CASES)))
    out: dict[str, dict[int, dict]] = {"moon": {}, "cp": {}}
    for message in run_lean(source, "ParallelBridge"):
        if message.severity == "information" and message.text.lstrip().startswith("{"):
            doc = json.loads(message.text)
            kind = "moon" if "moon" in doc else "cp"
            out[kind][doc[kind]] = doc
    assert sorted(out["moon"]) == list(range(len(moon_cases()))), sorted(out["moon"])
    assert sorted(out["cp"]) == list(range(len(CP_CASES))), sorted(out["cp"])
    return out


def floats(rows) -> torch.Tensor:
    return torch.tensor([[from_bits(b) for b in row] for row in rows], dtype=torch.float64)


@pytest.mark.lean
@pytest.mark.parametrize("index", range(5), ids=lambda i: moon_cases()[i][0])
def test_lean_moonep_checker_recounts_pybridge_plans(index: int) -> None:
    name, counts, S, K, d, _ = moon_cases()[index]
    lean = lean_results()["moon"][index]
    py = moon_python(index)
    for key in ("accepted", "received", "redundant", "hosts", "lower"):
        assert lean[key] == py[key], f"{name} {key}: Lean {lean[key]} vs Python {py[key]}"
    planted = name.startswith("planted")
    assert lean["accepted"] is (not planted), f"{name}: Lean checker verdict {lean['accepted']}"
    assert (violations(counts, S, K, d) != []) is planted
    if not planted:  # the proved consequences of acceptance, on the numbers
        assert max(lean["redundant"]) <= counts.shape[1] // counts.shape[0]
        assert all(h >= lo for h, lo in zip(lean["hosts"], lean["lower"]))


def cp_python(index: int, compose=cp.compose) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    summaries, s0 = cp_inputs(index)
    whole = compose(summaries, s0)
    incoming = [cp.apply(compose(summaries[:r], s0), s0) for r in range(len(summaries))]
    return whole.transition_bhkk, whole.offset_bhkv, incoming


@pytest.mark.lean
@pytest.mark.parametrize("index", range(len(CP_CASES)))
def test_lean_composeAll_equals_pybridge_compose(index: int) -> None:
    lean = lean_results()["cp"][index]
    A, B, incoming = cp_python(index)
    assert (floats(lean["transition"]) - A).abs().max() <= TOL
    assert (floats(lean["offset"]) - B).abs().max() <= TOL
    for r, state in enumerate(incoming):
        assert (floats(lean["incoming"][r]) - state).abs().max() <= TOL, f"rank {r} incoming state"


@pytest.mark.lean
def test_planted_reversed_composition_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Composing the earlier ranks' summaries in reverse order moves the result far past TOL."""
    def reversed_compose(summaries, like):
        return cp.compose(summaries[::-1], like)

    worst = 0.0
    for index in range(len(CP_CASES)):
        lean = lean_results()["cp"][index]
        A, B, incoming = cp_python(index, reversed_compose)
        worst = max(worst, float((floats(lean["transition"]) - A).abs().max()),
                    max(float((floats(lean["incoming"][r]) - s).abs().max()) for r, s in enumerate(incoming)))
    assert worst > 1e3 * TOL, worst
