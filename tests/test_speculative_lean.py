"""The Lean speculative-sampling rule (`lean/KimiK3/Training/Speculative.lean`) evaluated exactly
at `Rat`, against pybridge's rule (`pybridge.speculative`) in `fractions.Fraction`.

One Lean run: the library's `Speculative` and `Exec.RatScalar` modules bundled (`codegen.bundle`)
with one `#reduce` per case, which reduces the library's own definitions at the library's `Rat`
instance (a model of `OrderedScalarField`) to normal form: acceptance rate, total variation,
residual mass, and per token the acceptance probability, the correction and the probability
that one step emits it (`emitProbability`, the quantity `emitProbability_eq_target` proves equal
to the target). The cases are the report's worked example, random rational pairs (fixed seed),
a draft with zero weights and a draft equal to the target (TV = 0).

The Python leg reads the same cases independently: `acceptance_probability` and
`residual_distribution` of pybridge, the overlap and TV from their formulas, the emission
probability by enumerating the draws (draft token, accept or reject, correction). A planted bug in
pybridge's acceptance rule must disagree with the Lean values.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from codegen.bundle import bundle, dependency_order, run_lean
from pybridge import speculative

REPO = Path(__file__).resolve().parents[1]
MODULES = ("KimiK3.Training.Speculative", "KimiK3.Exec.RatScalar")
#: a reduced `Rat`: `{ num := Int.ofNat 3, den := 10, den_nz := ⋯, reduced := ⋯ }`; Lean leaves
#: out the field `den` when it is the default 1
RAT = re.compile(r"\{ num := (?:Int\.ofNat (\d+)|Int\.negSucc (\d+))(?:, den := (\d+))?,")


def random_distribution(rng: np.random.Generator, n: int, zeros: int = 0) -> list[Fraction]:
    """Weights of small integers (the first `zeros` of them 0), normalised."""
    w = [0] * zeros + [int(x) for x in rng.integers(1, 9, n - zeros)]
    return [Fraction(x, sum(w)) for x in w]


def cases() -> list[tuple[list[Fraction], list[Fraction]]]:
    rng = np.random.default_rng(20)
    worked = ([Fraction(55, 100), Fraction(30, 100), Fraction(15, 100)],
              [Fraction(25, 100), Fraction(45, 100), Fraction(30, 100)])
    out = [worked]
    for n in (2, 3, 4):
        out.append((random_distribution(rng, n), random_distribution(rng, n)))
    out.append((random_distribution(rng, 4), random_distribution(rng, 4, zeros=2)))  # q_y = 0
    p = random_distribution(rng, 3)
    out.append((p, list(p)))  # TV = 0: everything accepted
    return out


def lean_vector(v: list[Fraction]) -> str:
    entries = ", ".join(f"({x.numerator} / {x.denominator} : Rat)" for x in v)
    return f"(fun i : Fin {len(v)} => listGetD (0 : Rat) [{entries}] i.val)"


def lean_source() -> str:
    lines = ["open KimiK3 KimiK3.Training"]
    for p, q in cases():
        n, P, Q = len(p), lean_vector(p), lean_vector(q)
        terms = [f"acceptanceRate {P} {Q}", f"totalVariation {P} {Q}", f"residualMass {P} {Q}"]
        for name in ("acceptProbability", "correctionDistribution", "emitProbability"):
            terms += [f"{name} {P} {Q} {i}" for i in range(n)]
        lines.append("#reduce [" + ", ".join(f"({t} : Rat)" for t in terms) + "]")
    return bundle(REPO, dependency_order(REPO, MODULES)) + "\n" + "\n".join(lines) + "\n"


def parse_rats(text: str) -> list[Fraction]:
    out = []
    for pos, neg, den in RAT.findall(" ".join(text.split())):
        num = int(pos) if pos else -int(neg) - 1
        out.append(Fraction(num, int(den) if den else 1))
    return out


@cache
def lean_values() -> tuple[dict[str, list[Fraction]], ...]:
    """Per case: Lean's values by quantity (scalars as one-element lists)."""
    messages = [m for m in run_lean(lean_source(), "SpeculativeRat") if m.severity == "information"
                and m.text.lstrip().startswith("[")]
    assert len(messages) == len(cases()), [m.text[:200] for m in messages]
    out = []
    for (p, _), message in zip(cases(), messages):
        n, vals = len(p), parse_rats(message.text)
        assert len(vals) == 3 + 3 * n, message.text[:300]
        out.append({"acceptance": vals[0:1], "tv": vals[1:2], "mass": vals[2:3], "accept": vals[3:3 + n],
                    "correction": vals[3 + n:3 + 2 * n], "emit": vals[3 + 2 * n:]})
    return tuple(out)


def python_values(p: list[Fraction], q: list[Fraction]) -> dict[str, list[Fraction] | None]:
    """The same quantities from pybridge's rule and the formulas, in exact arithmetic."""
    n = len(p)
    overlap = sum(min(a, b) for a, b in zip(p, q))
    a = [Fraction(speculative.acceptance_probability(p[x], q[x])) for x in range(n)]
    reject = sum(q[x] * (1 - a[x]) for x in range(n))
    r = (list(speculative.residual_distribution(np.array(p, dtype=object), np.array(q, dtype=object)))
         if overlap < 1 else None)
    emit = [sum(q[x] * (a[x] * (x == y) + (1 - a[x]) * (r[y] if r else 0)) for x in range(n)) for y in range(n)]
    return {"acceptance": [overlap], "tv": [sum(abs(x - y) for x, y in zip(p, q)) / 2], "mass": [reject],
            "accept": a, "correction": r, "emit": emit}


@pytest.mark.lean
@pytest.mark.parametrize("index", range(len(cases())))
def test_lean_rule_at_rat_equals_pybridge_rule(index: int) -> None:
    p, q = cases()[index]
    lean, py = lean_values()[index], python_values(p, q)
    for key in ("acceptance", "tv", "mass", "accept", "emit"):
        assert lean[key] == py[key], f"case {index} {key}: Lean {lean[key]} vs pybridge {py[key]}"
    if py["correction"] is None:  # no residual mass: Lean's correction is 0 / 0 = 0, weight 0
        assert lean["correction"] == [0] * len(p) and lean["mass"] == [0]
    else:
        assert lean["correction"] == py["correction"], f"case {index} correction"
    assert lean["emit"] == p and lean["acceptance"][0] == 1 - lean["tv"][0]


@pytest.mark.lean
def test_lean_worked_example_values() -> None:
    """Report §4.1.4 example (hand values): overlap 0.70, TV 0.30, acceptance (1, 2/3, 1/2),
    correction (1, 0, 0)."""
    lean = lean_values()[0]
    assert lean["acceptance"] == [Fraction(7, 10)] and lean["tv"] == [Fraction(3, 10)]
    assert lean["accept"] == [1, Fraction(2, 3), Fraction(1, 2)] and lean["correction"] == [1, 0, 0]


@pytest.mark.lean
def test_planted_acceptance_bug_disagrees_with_lean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speculative, "acceptance_probability", lambda p, q: 1 if q >= p else q / p)
    bad = [i for i, (p, q) in enumerate(cases()) if python_values(p, q)["accept"] != lean_values()[i]["accept"]]
    assert bad and 0 in bad


def test_rat_parser_reads_negative_and_positive_values() -> None:
    text = "[{ num := Int.ofNat 3, den := 10, den_nz := ⋯, reduced := ⋯ }, { num := Int.negSucc 0, den := 3, den_nz := ⋯, reduced := ⋯ }]"
    one = "{ num := Int.ofNat 1, den_nz := instInhabitedRat._proof_1,\n reduced := ⋯ }"
    assert parse_rats(text + one) == [Fraction(3, 10), Fraction(-1, 3), Fraction(1)]
