"""Seeded input distributions: well-conditioned ones and adversarial ones.

Each component names its kinds and what they stress (`difftest list`); shared ones:
* `random` — weights N(0, 1/fan_in), activations of unit size: the well-conditioned case;
* `small`, `large` — inputs and weights ×1e-3 / ×1e3 (magnitude sweep);
* `eps` — the inputs of a norm near √ε, where the ε of RMSNorm / L2 normalization dominates;
* `tie`, `near_tie` — exact and near ties (router scores at the top-k boundary, depth sources);
* `long`, `short` — long sequences (decay over many tokens, many chunk boundaries) and one token;
* `decay` — KDA retention at both ends of (e^-5, 1).
"""

from __future__ import annotations

import numpy as np

MAGNITUDE = {"small": 1e-3, "large": 1e3}


def magnitude(kind: str) -> float:
    """The scale of inputs and weights in the magnitude sweep (1 outside it)."""
    return MAGNITUDE.get(kind, 1.0)


def gaussian(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> np.ndarray:
    return rng.standard_normal(shape) * std


def unit_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Gaussian rows normalized to unit length (last axis)."""
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def pieces(total: int, conv_width: int, chunk: int = 16) -> list[int]:
    """Lengths of consecutive prefill calls covering `total` tokens: one shorter than the conv
    width, one crossing a KDA chunk boundary without being a multiple of the chunk, then the
    rest in calls of 2 chunks + 3 tokens."""
    out, left = [], total
    for n in (max(1, conv_width - 2), chunk + 1):
        if left > 0:
            out.append(min(n, left))
            left -= out[-1]
    while left > 0:
        out.append(min(2 * chunk + 3, left))
        left -= out[-1]
    return out


def simplify(values: np.ndarray, level: int) -> np.ndarray:
    """Simpler values for shrinking: every entry rounded to 3 significant bits (level 1) or to a
    signed power of two (level 2). Signs, rough magnitudes and ranges such as (0, 1] are kept,
    so the simplified case stays in the component's input domain."""
    if level == 0 or values.ndim == 0:
        return values
    mant, exp = np.frexp(values)
    steps = 8 if level == 1 else 2
    return np.ldexp(np.round(mant * steps) / steps, exp)
