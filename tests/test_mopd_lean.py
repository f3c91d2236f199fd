"""The Lean MOPD reward and controls (`lean/KimiK3/Training/Mopd.lean`: `reward`, `clip`,
`teacherIndex`, `teacherOfIndex`, `budgetOverride`, `verbosityWinner`) evaluated at `Float` and,
exactly, at `Rat`, against `pybridge.mopd`.

One Lean run: the library's `Training.Mopd` and `Exec.RatScalar` bundled (`codegen.bundle`) with
* at `Float` (inputs bit for bit, `Float.ofBits`): the reward on the worked example (0.70 / 0.08,
  swapped, equal), seeded random probabilities in (0, 1] (some near 1e-300, so the clip acts) and
  caps R ∈ {0, 0.5, 2, 5, 10}; the budget override and the verbosity rule on seeded random lengths,
  τ, b₀, σ and verbosities, and their boundaries (length = τ·b₀); all 9 teacher indices and back;
* at `Rat` (`#reduce`, exact): `clip`, the budget override and the verbosity rule on rational
  cases, against `pybridge.mopd` in `fractions.Fraction`.

Python's `math.log` (glibc) and Lean's `Float.log` (the wasm build's libm) are different
implementations of the same function: the rewards are compared bit for bit (measured: equal on
every case), zeros up to sign (`max(-0.0, 0.0)` is `-0.0` in Python, `0.0` in Lean). A planted bug
(the teacher index numbered `domain + 3·effort`) must disagree.
"""

from __future__ import annotations

import json
import math
import re
import struct
from fractions import Fraction
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from codegen.bundle import EvaluationError, bundle, dependency_order, run_lean
from pybridge import mopd

REPO = Path(__file__).resolve().parents[1]
MODULES = ("KimiK3.Training.Mopd", "KimiK3.Exec.RatScalar")
RAT = re.compile(r"\{ num := (?:Int\.ofNat (\d+)|Int\.negSucc (\d+))(?:, den := (\d+))?,")
CAPS = (0.0, 0.5, 2.0, 5.0, 10.0)
DOMAINS, EFFORTS = ("generalTasks", "generalAgents", "codingAgents"), ("low", "high", "max")


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from_bits(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def fl(x: float) -> str:
    return f"(Float.ofBits {bits(float(x))})"


@cache
def reward_cases() -> list[tuple[float, float, float]]:
    out = [(5.0, 0.70, 0.08), (5.0, 0.08, 0.70), (5.0, 0.3, 0.3), (5.0, 1.0, 1e-300), (0.0, 0.70, 0.08)]
    rng = np.random.default_rng(15)
    for _ in range(40):
        t, s = (float(x) for x in 1 - rng.random(2))  # in (0, 1]
        if rng.random() < 0.3:
            t = float(10.0 ** -rng.uniform(3, 300))  # tiny: |log ratio| beyond the cap
        out.append((float(rng.choice(CAPS)), t, s))
    return out


@cache
def budget_cases() -> list[tuple[float, int, float, float]]:
    out = [(0.5, 150, 1.5, 100.0), (0.5, 151, 1.5, 100.0), (-1.0, 10, 0.5, 30.0)]
    rng = np.random.default_rng(16)
    for _ in range(20):
        out.append((float(rng.normal()), int(rng.integers(0, 400)), float(rng.uniform(0.5, 3)), float(rng.uniform(10, 150))))
    return out


@cache
def verbosity_cases() -> list[tuple[int, int, float, float, bool]]:
    out = [(101, 120, 2.0, 50.0, True), (100, 101, 2.0, 50.0, False), (100, 100, 2.0, 50.0, True), (99, 100, 2.0, 50.0, False)]
    rng = np.random.default_rng(17)
    for _ in range(20):
        out.append((int(rng.integers(0, 300)), int(rng.integers(0, 300)), float(rng.uniform(1, 3)),
                    float(rng.uniform(40, 120)), bool(rng.random() < 0.5)))
    return out


#: exact rational cases: clip (R, x); budget (r, length, τ, b₀); verbosity (first, second, σ, v, judge)
RAT_CLIP = ((Fraction(5), Fraction(35, 4)), (Fraction(5), Fraction(-7, 3)), (Fraction(1, 2), Fraction(-2)), (Fraction(0), Fraction(1, 3)))
RAT_BUDGET = ((Fraction(1, 3), 150, Fraction(3, 2), Fraction(100)), (Fraction(1, 3), 151, Fraction(3, 2), Fraction(100)),
              (Fraction(-2, 7), 7, Fraction(7, 3), Fraction(3)))
RAT_VERBOSITY = ((11, 12, Fraction(11, 10), Fraction(10), True), (11, 12, Fraction(6, 5), Fraction(10), False),
                 (13, 11, Fraction(6, 5), Fraction(10), True))


def rat(x: Fraction) -> str:
    return f"({x.numerator} / {x.denominator} : Rat)"


def lean_source() -> str:
    lines = ["open KimiK3 KimiK3.Training.Mopd"]

    def emit(key: str, body: str) -> None:
        lines.append(f'#eval! IO.println ("{{\\"key\\": \\"{key}\\", \\"value\\": " ++ toString ({body}) ++ "}}")')

    emit("reward", "[" + ", ".join(f"(reward {fl(R)} {fl(t)} {fl(s)}).toBits" for R, t, s in reward_cases()) + "]")
    emit("budget", "[" + ", ".join(f"(budgetOverride {fl(r)} {n} {fl(tau)} {fl(b)}).toBits"
                                   for r, n, tau, b in budget_cases()) + "]")
    emit("verbosity", "[" + ", ".join(f"(verbosityWinner {a} {b} {fl(sig)} {fl(v)} {str(j).lower()}).val"
                                      for a, b, sig, v, j in verbosity_cases()) + "]")
    emit("index", "[" + ", ".join(f"(teacherIndex .{d} .{e}).val" for d in DOMAINS for e in EFFORTS) + "]")
    emit("inverse", "[" + ", ".join(f"[(teacherOfIndex ⟨{i}, by decide⟩).1.toFin.val, "
                                    f"(teacherOfIndex ⟨{i}, by decide⟩).2.toFin.val]" for i in range(9)) + "]")
    for R, x in RAT_CLIP:
        lines.append(f"#reduce (clip {rat(R)} {rat(x)} : Rat)")
    for r, n, tau, b in RAT_BUDGET:
        lines.append(f"#reduce (budgetOverride {rat(r)} {n} {rat(tau)} {rat(b)} : Rat)")
    for a, b, sig, v, j in RAT_VERBOSITY:
        lines.append(f"#reduce (verbosityWinner {a} {b} {rat(sig)} {rat(v)} {str(j).lower()}).val")
    return bundle(REPO, dependency_order(REPO, MODULES)) + "\n" + "\n".join(lines) + "\n"


def parse_rat(text: str) -> Fraction:
    found = RAT.findall(" ".join(text.split()))
    assert len(found) == 1, text[:300]
    pos, neg, den = found[0]
    return Fraction(int(pos) if pos else -int(neg) - 1, int(den) if den else 1)


@cache
def lean_messages() -> tuple[list, str | None]:
    """One Lean run per session: its messages, or the error (kept, so a failure is not rerun)."""
    try:
        return run_lean(lean_source(), "MopdRules"), None
    except EvaluationError as err:
        return [], str(err)


@cache
def lean_values() -> tuple[dict[str, list], list[Fraction], list[int]]:
    messages, error = lean_messages()
    assert error is None, error
    evals, reduced = {}, []
    for message in messages:
        if message.severity != "information":
            continue
        text = message.text.strip()
        if text.startswith('{"key"'):
            doc = json.loads(text)
            evals[doc["key"]] = doc["value"]
        else:
            reduced.append(text)
    n_rat = len(RAT_CLIP) + len(RAT_BUDGET)
    assert len(reduced) == n_rat + len(RAT_VERBOSITY), reduced
    return evals, [parse_rat(t) for t in reduced[:n_rat]], [int(t) for t in reduced[n_rat:]]


def same(a: float, b: float) -> bool:
    """Bit-equal, or both zero (the sign of a clipped zero differs, module docstring)."""
    return bits(a) == bits(b) or (a == 0 and b == 0)


@pytest.mark.lean
def test_lean_reward_at_float_equals_pybridge_reward() -> None:
    lean = [from_bits(b) for b in lean_values()[0]["reward"]]
    py = [mopd.reward(R, t, s) for R, t, s in reward_cases()]
    assert len(lean) == len(py)
    bad = [(c, x, y) for c, x, y in zip(reward_cases(), lean, py) if not same(x, y)]
    assert not bad, bad[:5]
    assert round(lean[0], 3) == 2.169 and lean[0] == math.log(8.75) and lean[1] == -lean[0] and lean[2] == 0
    clipped = sum(abs(y) == R for (R, _, _), y in zip(reward_cases(), py) if R > 0)
    assert clipped >= 3 and any(0 < abs(y) < R for (R, _, _), y in zip(reward_cases(), py))  # both branches


@pytest.mark.lean
def test_lean_budget_and_verbosity_at_float_equal_pybridge() -> None:
    evals = lean_values()[0]
    budget = [from_bits(b) for b in evals["budget"]]
    assert budget == [float(mopd.budget_override(r, n, tau, b)) for r, n, tau, b in budget_cases()]
    assert budget[:2] == [0.5, -1.0] and -1.0 in budget[3:] and any(x != -1 for x in budget[3:])
    winners = evals["verbosity"]
    assert winners == [mopd.verbosity_winner(a, b, sig, v, j) for a, b, sig, v, j in verbosity_cases()]
    assert winners[:4] == [1, 0, 0, 1]


@pytest.mark.lean
def test_lean_teacher_index_equals_pybridge_and_is_a_bijection() -> None:
    evals = lean_values()[0]
    py = [mopd.teacher_index(mopd.Domain(d), mopd.Effort(e)) for d in range(3) for e in range(3)]
    assert evals["index"] == py and sorted(py) == list(range(9))
    assert [tuple(p) for p in evals["inverse"]] == [tuple(map(int, mopd.teacher_of_index(i))) for i in range(9)]


@pytest.mark.lean
def test_lean_rules_at_rat_equal_pybridge_in_fractions() -> None:
    _, rats, winners = lean_values()
    n = len(RAT_CLIP)
    assert rats[:n] == [mopd.clip(R, x) for R, x in RAT_CLIP]
    assert rats[n:] == [mopd.budget_override(r, k, tau, b) for r, k, tau, b in RAT_BUDGET]
    assert winners == [mopd.verbosity_winner(a, b, sig, v, j) for a, b, sig, v, j in RAT_VERBOSITY]
    assert rats[:n] == [5, Fraction(-7, 3), Fraction(-1, 2), 0] and rats[n:n + 2] == [Fraction(1, 3), -1]


@pytest.mark.lean
def test_planted_domain_minor_index_is_caught() -> None:
    planted = [d + 3 * e for d in range(3) for e in range(3)]
    assert lean_values()[0]["index"] != planted
