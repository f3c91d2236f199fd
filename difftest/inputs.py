"""Seeded input distributions: well-conditioned ones and adversarial ones.

Kinds (each component lists the ones that apply to it):
* `random`   — weights N(0, 1/fan_in), activations of unit size: the well-conditioned case;
* `saturate` — activations 30× larger: pre-activations far beyond the soft caps, saturated
               sigmoids, retention at its floor, peaked softmaxes;
* `tiny`     — activations 1e-7× as large: norms near zero, where the ε of RMSNorm / L2
               normalization dominates;
* `tie`      — exact ties (equal router scores at the top-k boundary, equal depth sources);
* `long`     — long sequences (KDA decay over many tokens, chunk boundaries).
"""

from __future__ import annotations

import numpy as np

KIND_SCALE = {"random": 1.0, "saturate": 30.0, "tiny": 1e-7, "tie": 1.0, "long": 1.0}


def scale_for_kind(kind: str) -> float:
    return KIND_SCALE[kind]


def gaussian(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> np.ndarray:
    return rng.standard_normal(shape) * std


def simplify(values: np.ndarray, level: int) -> np.ndarray:
    """Simpler values for shrinking: every entry rounded to 3 significant bits (level 1) or to a
    signed power of two (level 2). Signs, rough magnitudes and ranges such as (0, 1] are kept,
    so the simplified case stays in the component's input domain."""
    if level == 0 or values.ndim == 0:
        return values
    mant, exp = np.frexp(values)
    steps = 8 if level == 1 else 2
    return np.ldexp(np.round(mant * steps) / steps, exp)
