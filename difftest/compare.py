"""Error measures and the tolerances of docs/tolerances.md.

Error of `got` against `want` (one output tensor): the normwise relative error
`max_i |got_i − want_i| / max_i |want_i|` (0 when both are all zero). Any NaN or Inf in either
tensor fails the comparison, whatever the tolerance.

Tolerances come from the rounding model of docs/tolerances.md: for a component with `stores`
roundings and `accum` accumulated terms on its longest dependency chain and amplification `amp`,
* float64 against float64 (two implementations, each within the worst-case bound):
  `SAFETY · amp · 2 γ(stores + accum, 2⁻⁵³)`, `γ(n, u) = n u / (1 − n u)`;
* a float32 / bfloat16 run against the float64 reference (probabilistic bound, Higham–Mary
  2019, λ = 5): `SAFETY · amp · (γ̃(stores, u_store) + γ̃(accum, u_accum))` with
  `γ̃(n, u) = exp(λ √n u + n u² / (1 − u)) − 1`; bfloat16 values are stored with u = 2⁻⁸ but
  reductions accumulate in float32 (u = 2⁻²⁴), as torch's CPU and CUDA kernels do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from difftest.components.base import ErrorModel

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16}
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "bfloat16": 2.0**-8}
ACCUM_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "bfloat16": 2.0**-24}
SAFETY = 2.0
LAMBDA = 5.0


def gamma(n: int, u: float) -> float:
    """Worst-case relative error bound of n rounded operations (Higham, Lemma 3.1)."""
    if n * u >= 1:
        return math.inf
    return n * u / (1 - n * u)


def gamma_prob(n: int, u: float, lam: float = LAMBDA) -> float:
    """Probabilistic bound γ̃_n(λ) (Higham & Mary 2019, Thm 2.4): holds with probability at
    least 1 − 2n·exp(−λ²(1−u)²/2) for independent, mean-zero rounding errors."""
    return math.exp(lam * math.sqrt(n) * u + n * u * u / (1 - u)) - 1


def tolerance(model: ErrorModel, dtype: str) -> float:
    if dtype == "float64":
        return SAFETY * model.amp * 2 * gamma(model.stores + model.accum, UNIT_ROUNDOFF["float64"])
    return SAFETY * model.amp * (gamma_prob(model.stores, UNIT_ROUNDOFF[dtype]) + gamma_prob(model.accum, ACCUM_ROUNDOFF[dtype]))


@dataclass
class Comparison:
    """One output of one implementation against a reference, on one case, at one dtype."""

    component: str
    case: int
    kind: str
    dtype: str
    impl: str
    ref: str
    output: str
    err: float
    tol: float
    passed: bool
    index: list[int] = field(default_factory=list)
    got: float = 0.0
    want: float = 0.0
    abs_err: float = 0.0
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.err / self.tol if self.tol > 0 else (0.0 if self.err == 0 else math.inf)


def measure(got: np.ndarray, want: np.ndarray) -> tuple[float, float, tuple[int, ...], str]:
    """(relative error, absolute error, worst index, note); the error is inf on any non-finite value
    or a shape mismatch."""
    if got.shape != want.shape:
        return math.inf, math.inf, (), f"shape {list(got.shape)} != reference shape {list(want.shape)}"
    bad_got, bad_want = ~np.isfinite(got), ~np.isfinite(want)
    if bad_got.any() or bad_want.any():
        where = np.argwhere(bad_got | bad_want)[0]
        side = "result" if bad_got.any() else "reference"
        return math.inf, math.inf, tuple(int(i) for i in where), f"non-finite value (NaN/Inf) in the {side}"
    if got.size == 0:
        return 0.0, 0.0, (), ""
    diff = np.abs(got - want)
    idx = np.unravel_index(int(np.argmax(diff)), diff.shape)
    scale = float(np.max(np.abs(want)))
    abs_err = float(diff[idx])
    if abs_err == 0:
        return 0.0, 0.0, tuple(int(i) for i in idx), ""
    rel = abs_err / scale if scale > 0 else math.inf
    return rel, abs_err, tuple(int(i) for i in idx), ""


def compare(component: str, case: int, kind: str, dtype: str, impl: str, ref: str, output: str,
            got: np.ndarray, want: np.ndarray, tol: float, exact: bool = False) -> Comparison:
    rel, abs_err, idx, note = measure(got, want)
    passed = (rel == 0.0) if exact else (rel <= tol)
    if exact and not passed and not note:
        note = f"exact output differs: {got.tolist()} vs {want.tolist()}"
    g = float(got[idx]) if idx and got.shape == want.shape else (float(got) if got.ndim == 0 else math.nan)
    w = float(want[idx]) if idx and got.shape == want.shape else (float(want) if want.ndim == 0 else math.nan)
    return Comparison(component, case, kind, dtype, impl, ref, output, rel, 0.0 if exact else tol, passed,
                      list(idx), g, w, abs_err, note)
