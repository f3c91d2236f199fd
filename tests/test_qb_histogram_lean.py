"""The Lean Quantile Balancing histogram rule (`lean/KimiK3/Channel/QuantileHistogram.lean`,
`QuantileThreshold.lean`, `QuantileTies.lean`) evaluated at `Float`, against
`pybridge.quantile_balancing`, bit for bit.

One Lean run: the library's `Channel.QuantileTies` bundled (`codegen.bundle`) with seeded random
required biases (passed bit for bit, `Float.ofBits`): spread values with some outside the range
(clamping), values on bin edges and tied values, two layouts (dyadic width 1/8, and width 0.1
whose edges round). Per case Lean prints the bin counts (`binCount`, by comparisons), per target
load k the selected bin (`selectBin`), the estimate's bits (`estimate`), the tokens it routes
(`belowCount`) and the tie rule's routed set at the k-th smallest value (`tieRouted`); and per
expert of one bias-update case (required biases `cutoff − raw` formed in Lean) the estimate.
pybridge's fast histogram (`searchsorted`), `select_bin`, `estimate`, `tie_routed` and
`bias_update` must agree exactly. A planted off-by-one bin selection must disagree.
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
from pybridge import quantile_balancing as qb

REPO = Path(__file__).resolve().parents[1]
LAYOUTS = (qb.HistogramConfig(-1.0, 0.125, 16), qb.HistogramConfig(-0.7, 0.1, 17))
KS = (1, 2, 5, 9, 17)
#: bias-update case: tokens, experts, top_k, target load
UPDATE = (24, 4, 2, 12)


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from_bits(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b))[0]


@cache
def cases() -> tuple[tuple[qb.HistogramConfig, tuple[float, ...]], ...]:
    rng = np.random.default_rng(5)
    out = []
    for cfg in LAYOUTS:
        edges = [float(cfg.edge(b)) for b in range(cfg.bins + 1)]
        out.append((cfg, tuple(rng.uniform(-1.2, 1.2, 20))))  # spread, some clamped
        out.append((cfg, tuple(rng.choice(edges, 18))))  # on the edges, with ties
        out.append((cfg, tuple(rng.choice([-0.5, 0.0, 0.3], 21))))  # heavy ties
    return tuple(out)


@cache
def update_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    n, E, top_k, _ = UPDATE
    raw_ne = torch.tensor(np.random.default_rng(9).uniform(0, 1, (n, E)))
    return raw_ne, qb.cutoff_excluding_self(raw_ne, top_k)


def floats(xs) -> str:
    return "[" + ", ".join(f"Float.ofBits {bits(float(x))}" for x in xs) + "]"


def lean_config(cfg: qb.HistogramConfig) -> str:
    return f"{{ lower := Float.ofBits {bits(cfg.lower)}, width := Float.ofBits {bits(cfg.width)}, bins := {cfg.bins} }}"


def lean_case(index: int) -> str:
    cfg, t = cases()[index]
    n = len(t)
    per_k = []
    for k in KS:
        q = sorted(t)[k - 1]
        per_k.append(f"""
  ", {{\\"k\\": {k}, \\"bin\\": " ++ optNat (selectBin h {cfg.bins} {k}) ++
  ", \\"est\\": " ++ toString (estimate cfg h {k} (optGet (selectBin h {cfg.bins} {k}))).toBits ++
  ", \\"routed\\": " ++ toString (belowCount values (estimate cfg h {k} (optGet (selectBin h {cfg.bins} {k})))) ++
  ", \\"ties\\": " ++ toString (finList {n} (tieRouted values (Float.ofBits {bits(q)}) {k})) ++ "}}" ++""")
    return f"""
namespace Case{index}
def cfg : HistogramConfig Float := {lean_config(cfg)}
def values : Fin {n} → Float := fun i => listGetD 0 {floats(t)} i.val
def hist : List Nat := finList {cfg.bins} (fun b => binCount cfg values b.val)
def h (b : Nat) : Nat := listGetD 0 hist b
#eval! IO.println ("{{\\"case\\": {index}, \\"counts\\": " ++ toString hist ++ ", \\"ks\\": [\\"\\"" ++{"".join(per_k)} "]}}")
end Case{index}
"""


def lean_update() -> str:
    n, E, _, k = UPDATE
    raw_ne, cutoff_ne = update_inputs()
    cfg = LAYOUTS[1]
    lines = [f"namespace Update\ndef cfg : HistogramConfig Float := {lean_config(cfg)}"]
    ests = []
    for e in range(E):
        lines.append(f"def raw{e} : Fin {n} → Float := fun i => listGetD 0 {floats(raw_ne[:, e].tolist())} i.val")
        lines.append(f"def cut{e} : Fin {n} → Float := fun i => listGetD 0 {floats(cutoff_ne[:, e].tolist())} i.val")
        lines.append(f"def t{e} : Fin {n} → Float := fun i => cut{e} i - raw{e} i")
        lines.append(f"def hist{e} : List Nat := finList {cfg.bins} (fun b => binCount cfg t{e} b.val)")
        lines.append(f"def h{e} (b : Nat) : Nat := listGetD 0 hist{e} b")
        ests.append(f"toString (estimate cfg h{e} {k} (optGet (selectBin h{e} {cfg.bins} {k}))).toBits")
    lines.append('#eval! IO.println ("{\\"update\\": [" ++ ' + ' ++ ", " ++ '.join(ests) + ' ++ "]}")')
    return "\n".join(lines) + "\nend Update\n"


HEADER = """
open KimiK3 KimiK3.QuantileBalancing
def optNat : Option Nat → String
  | some b => toString b
  | none => "null"
def optGet : Option Nat → Nat
  | some b => b
  | none => 0
"""


@cache
def lean_results() -> tuple[dict[int, dict], list[float]]:
    source = bundle(REPO, dependency_order(REPO, ("KimiK3.Channel.QuantileTies",)))
    source += HEADER + "".join(lean_case(i) for i in range(len(cases()))) + lean_update()
    out, update = {}, None
    for message in run_lean(source, "QuantileHistogramFloat"):
        if message.severity == "information" and message.text.lstrip().startswith("{"):
            doc = json.loads(message.text)
            if "update" in doc:
                update = [from_bits(b) for b in doc["update"]]
            else:
                doc["ks"] = doc["ks"][1:]  # drop the "" placeholder
                out[doc["case"]] = doc
    assert sorted(out) == list(range(len(cases()))) and update is not None, sorted(out)
    return out, update


def python_case(index: int) -> dict:
    cfg, t = cases()[index]
    counts = qb.histogram(torch.tensor(t), cfg).tolist()
    ks = []
    for k in KS:
        b = qb.select_bin(counts, k)
        beta = qb.estimate(cfg, counts, k, b)
        ks.append({"k": k, "bin": b, "est": bits(beta), "routed": sum(x < beta for x in t),
                   "ties": qb.tie_routed(list(t), sorted(t)[k - 1], k)})
    return {"case": index, "counts": counts, "ks": ks}


@pytest.mark.lean
def test_lean_rule_at_float_equals_pybridge() -> None:
    lean, _ = lean_results()
    for index in range(len(cases())):
        py = python_case(index)
        assert lean[index]["counts"] == py["counts"], f"case {index} counts"
        for lk, pk in zip(lean[index]["ks"], py["ks"], strict=True):
            assert lk == pk, f"case {index} k={pk['k']}: Lean {lk} vs pybridge {pk}"
            assert sum(pk["ties"]) == pk["k"]  # tieRoutedCount_kthSmallest


@pytest.mark.lean
def test_lean_bias_update_equals_pybridge() -> None:
    _, update = lean_results()
    raw_ne, cutoff_ne = update_inputs()
    bias_e = qb.bias_update(raw_ne, cutoff_ne, UPDATE[3], LAYOUTS[1], center=False)
    assert [bits(x) for x in bias_e.tolist()] == [bits(x) for x in update]


@pytest.mark.lean
def test_planted_off_by_one_bin_disagrees_with_lean(monkeypatch: pytest.MonkeyPatch) -> None:
    def off_by_one(counts, k):
        prefix = qb.prefix_counts(counts)
        return next((b for b in range(len(counts)) if k <= prefix[min(b + 2, len(counts))]), None)

    monkeypatch.setattr(qb, "select_bin", off_by_one)
    lean, _ = lean_results()
    bad = 0
    for index in range(len(cases())):
        try:
            py = python_case(index)
        except ZeroDivisionError:  # the wrong bin may be empty
            bad += 1
            continue
        bad += any(lk["bin"] != pk["bin"] for lk, pk in zip(lean[index]["ks"], py["ks"]))
    assert bad >= len(cases()) // 2, bad


def test_cases_cover_clamping_edges_and_ties() -> None:
    for cfg, t in cases():
        assert len(set(t)) < len(t) or min(t) < cfg.lower or max(t) >= cfg.edge(cfg.bins)
    assert any(min(t) < cfg.lower for cfg, t in cases())
    assert all(k <= len(t) for _, t in cases() for k in KS)
