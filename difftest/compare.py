"""Error measures and the tolerances of docs/tolerances.md.

float64 (two float64 legs against each other): the normwise relative error
`max_i |got_i − want_i| / max_i |want_i|` under `tol64 = SAFETY · amp · 2 γ(stores + accum, 2⁻⁵³)`,
`γ(n, u) = n u / (1 − n u)` (worst case, Higham Lemma 3.1).

float32 / bfloat16 (one stage of the run against the float64 reference on the same rounded
inputs and weights): the relative 2-norm error `‖got − want‖₂ / ‖want‖₂` under
`tol = u_store · (1 + (out_stores − 1) · amp) + SAFETY · amp · u_compute · √(stores + accum)`:
the stage's values rounded to the storage dtype (`u_store`: 2⁻²⁴, 2⁻⁸; each store's error is at
most `u_store` of the value, deterministically) plus its operations at the compute precision
(float32, `u_compute` = 2⁻²⁴: matmul accumulation, norms, softmax, gates, the KDA recurrence),
whose independent rounding errors add in quadrature (their RMS grows as √n, not n).

Any NaN or Inf in either tensor fails the comparison, whatever the tolerance.

The worst-case terms are the first-order forms of theorems of the Lean rounding model
(`lean/KimiK3/Microscaling/`, namespace `KimiK3.Rounding`; docs/tolerances.md cites each):
`gamma` is `Rounding.gamma` (`abs_roundedDot_sub_le_gamma`, `abs_roundedSum_sub_le_gamma`), the
store term `u_store` is `RoundsTo.sumSq_sub_le`, and the factors in `amp` are
`rmsNormVec_rel_perturb_le`/`l2NormVec_rel_perturb_le` (2), `softmaxVec_perturb_le` (2) and
`elementwise_rel_error_le` (κ). The √n compute term is a statistical model, not a theorem.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from difftest.components.base import ErrorModel

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16}
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "bfloat16": 2.0**-8}
#: the compute precision of a low-precision stage (pybridge.layers.compute_dtype: float32)
COMPUTE_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-24}
SAFETY = 2.0


def gamma(n: int, u: float) -> float:
    """Worst-case relative error bound of n rounded operations (Higham, Lemma 3.1): the Lean
    `KimiK3.Rounding.gamma`, with `(1 + u)^n − 1 ≤ γ_n` (`one_add_pow_sub_one_le_gamma`)."""
    if n * u >= 1:
        return math.inf
    return n * u / (1 - n * u)


def tolerance(model: ErrorModel, dtype: str) -> float:
    """The tolerance of a stage with error model `model` at `dtype` (module docstring)."""
    n = model.stores + model.accum
    if dtype == "float64":
        return SAFETY * model.amp * 2 * gamma(n, UNIT_ROUNDOFF["float64"])
    store = UNIT_ROUNDOFF[dtype] * (1 + (model.out_stores - 1) * model.amp) if model.out_stores else 0.0
    return store + SAFETY * model.amp * COMPUTE_ROUNDOFF[dtype] * math.sqrt(n)


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
    metric: str = "max"  # "max": normwise max-abs relative; "l2": relative 2-norm

    @property
    def ratio(self) -> float:
        return self.err / self.tol if self.tol > 0 else (0.0 if self.err == 0 else math.inf)


def measure(got: np.ndarray, want: np.ndarray, metric: str = "max") -> tuple[float, float, tuple[int, ...], str]:
    """(relative error, absolute error, worst index, note): `metric` "max" is
    max|got − want| / max|want|, "l2" is ‖got − want‖₂ / ‖want‖₂; the error is inf on any
    non-finite value or a shape mismatch."""
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
    abs_err = float(diff[idx])
    if abs_err == 0:
        return 0.0, 0.0, tuple(int(i) for i in idx), ""
    if metric == "l2":
        scale = float(np.linalg.norm(want))
        rel = float(np.linalg.norm(diff)) / scale if scale > 0 else math.inf
    else:
        scale = float(np.max(np.abs(want)))
        rel = abs_err / scale if scale > 0 else math.inf
    return rel, abs_err, tuple(int(i) for i in idx), ""


def compare(component: str, case: int, kind: str, dtype: str, impl: str, ref: str, output: str,
            got: np.ndarray, want: np.ndarray, tol: float, exact: bool = False, metric: str = "max") -> Comparison:
    rel, abs_err, idx, note = measure(got, want, metric)
    passed = (rel == 0.0) if exact else (rel <= tol)
    if exact and not passed and not note:
        note = f"exact output differs: {got.tolist()} vs {want.tolist()}"
    g = float(got[idx]) if idx and got.shape == want.shape else (float(got) if got.ndim == 0 else math.nan)
    w = float(want[idx]) if idx and got.shape == want.shape else (float(want) if want.ndim == 0 else math.nan)
    return Comparison(component, case, kind, dtype, impl, ref, output, rel, 0.0 if exact else tol, passed,
                      list(idx), g, w, abs_err, note, metric)
