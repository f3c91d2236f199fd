"""Quantile Balancing's histogram bias update (`pybridge.quantile_balancing`), without Lean.

Expected values come from independent computations: the k-th smallest value by sorting, its bin
by `floor` in exact `Fraction` arithmetic (clamped), routed counts by direct comparison, the tie
rule's routed set as the first k tokens of the stable order by (value, index). The Lean
guarantees (`estimate_within_width`, `routedTokenCount_estimate`, `tieRoutedCount_kthSmallest`)
are checked as properties on random and tied values; `test_qb_histogram_lean.py` compares the
rule with Lean's own evaluation.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from pybridge import quantile_balancing as qb
from pybridge.errors import InputError

CFG = qb.HistogramConfig(lower=-1.0, width=0.125, bins=16)  # range [-1, 1]
EXACT = qb.HistogramConfig(lower=Fraction(-1), width=Fraction(1, 8), bins=16)


def random_values(rng: np.random.Generator, n: int, tied: bool) -> list[Fraction]:
    """Exact rationals in [-1, 1]; `tied` draws from a few values on and between bin edges."""
    if tied:
        pool = [Fraction(-1), Fraction(-1, 2), Fraction(-3, 16), Fraction(0), Fraction(1, 8), Fraction(1)]
        return [pool[int(i)] for i in rng.integers(0, len(pool), n)]
    return [Fraction(int(x), 4096) for x in rng.integers(-4096, 4097, n)]


def floor_bin(cfg: qb.HistogramConfig, t: Fraction) -> int:
    """The clamped bin of `t` by floor (an independent formula for Lean's `inBin`)."""
    return min(max(math.floor((t - cfg.lower) / cfg.width), 0), cfg.bins - 1)


CASES = [(seed, n, tied) for seed in range(12) for n, tied in ((7, False), (40, False), (9, True), (33, True))]


@pytest.mark.parametrize("seed,n,tied", CASES)
def test_threshold_guarantees_exact(seed: int, n: int, tied: bool) -> None:
    rng = np.random.default_rng(seed)
    t = random_values(rng, n, tied)
    counts = qb.histogram_reference(t, EXACT)
    assert counts == [sum(floor_bin(EXACT, x) == b for x in t) for b in range(EXACT.bins)]
    for k in range(1, n + 1):
        q = sorted(t)[k - 1]  # the k-th smallest (Lean `IsKthSmallest`)
        b = qb.select_bin(counts, k)
        assert b == floor_bin(EXACT, q), (k, b)
        beta = qb.threshold(EXACT, counts, k)
        assert abs(beta - q) <= EXACT.width  # estimate_within_width
        routed = sum(x < beta for x in t)
        assert k <= routed + counts[b] and routed < k + counts[b]  # routedTokenCount_estimate
        mask = qb.tie_routed(t, q, k)
        assert sum(mask) == k  # tieRoutedCount_kthSmallest
        first_k = sorted(range(n), key=lambda i: (t[i], i))[:k]
        assert [i for i in range(n) if mask[i]] == sorted(first_k)


def test_width_bound_is_tight_and_counts_can_be_far() -> None:
    """The hand examples of `QuantileHistogramExample.lean`."""
    cfg = qb.HistogramConfig(Fraction(0), Fraction(1, 4), 8)
    spread = [Fraction(3, 10), Fraction(1, 2), Fraction(1, 2), Fraction(9, 10), Fraction(13, 10), Fraction(17, 10)]
    counts = qb.histogram_reference(spread, cfg)
    assert counts == [0, 1, 2, 1, 0, 1, 1, 0] and qb.select_bin(counts, 3) == 2
    assert qb.threshold(cfg, counts, 3) == Fraction(3, 4)  # 1/4 above the true 1/2
    tied = [Fraction(1, 2)] * 4
    beta = qb.threshold(cfg, qb.histogram_reference(tied, cfg), 2)
    assert beta == Fraction(5, 8) and sum(x < beta for x in tied) == 4
    assert qb.tie_routed(tied, Fraction(1, 2), 2) == [True, True, False, False]


@pytest.mark.parametrize("seed", range(6))
def test_fast_histogram_equals_reference_and_pools(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    edges = [CFG.edge(b) for b in range(CFG.bins + 1)]
    t_n = np.concatenate([rng.uniform(-1.3, 1.3, 200), rng.choice(edges, 30), [-5.0, 5.0, 1.0, -1.0]])
    counts = qb.histogram(torch.tensor(t_n), CFG)
    assert counts.tolist() == qb.histogram_reference(t_n.tolist(), CFG)
    assert int(counts.sum()) == len(t_n)
    shard_n = torch.tensor(rng.integers(0, 4, len(t_n)))
    parts = torch.stack([qb.histogram(torch.tensor(t_n)[shard_n == r], CFG) for r in range(4)])
    assert torch.equal(qb.pool(parts), counts)  # shardHistogram_pooled


def test_cutoff_excluding_self_matches_definition() -> None:
    rng = np.random.default_rng(7)
    adjusted = np.round(rng.uniform(0, 1, (20, 6)), 1)  # rounding makes ties
    fast = qb.cutoff_excluding_self(torch.tensor(adjusted), 2)
    assert fast.tolist() == qb.cutoff_excluding_self_reference(adjusted.tolist(), 2)


def test_bias_update_routes_within_the_bin_count() -> None:
    rng = np.random.default_rng(3)
    raw_ne = torch.tensor(rng.uniform(0, 1, (300, 8)))
    cutoff_ne = qb.cutoff_excluding_self(raw_ne, 2)
    cfg = qb.HistogramConfig(lower=-1.0, width=1 / 64, bins=128)
    k = 300 * 2 // 8
    bias_e = qb.bias_update(raw_ne, cutoff_ne, k, cfg, center=False)
    pooled_e = qb.bias_update(raw_ne, cutoff_ne, k, cfg, shard_n=torch.tensor(rng.integers(0, 3, 300)), center=False)
    assert torch.equal(bias_e, pooled_e)
    for e in range(8):
        t = (cutoff_ne[:, e] - raw_ne[:, e]).tolist()
        counts = qb.histogram_reference(t, cfg)
        b = qb.select_bin(counts, k)
        routed = int((cutoff_ne[:, e] < raw_ne[:, e] + bias_e[e]).sum())
        assert k <= routed + counts[b] and routed < k + counts[b]
        assert abs(float(bias_e[e]) - sorted(t)[k - 1]) <= cfg.width
    centered = qb.bias_update(raw_ne, cutoff_ne, k, cfg)
    assert abs(float(centered.sum())) < 1e-12 and torch.allclose(centered, bias_e - bias_e.mean(), atol=0, rtol=0)


def test_planted_off_by_one_bin_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Selecting the first bin with `k ≤ prefix b` (one bin too far) breaks the guarantees."""

    def off_by_one(counts, k):
        prefix = qb.prefix_counts(counts)
        return next((b for b in range(len(counts)) if k <= prefix[min(b + 2, len(counts))]), None)

    monkeypatch.setattr(qb, "select_bin", off_by_one)
    rng = np.random.default_rng(0)
    t = random_values(rng, 40, False)
    counts = qb.histogram_reference(t, EXACT)

    def violated(k: int) -> bool:
        try:
            beta = qb.threshold(EXACT, counts, k)
        except ZeroDivisionError:  # the wrong bin may be empty
            return True
        return abs(beta - sorted(t)[k - 1]) > EXACT.width

    bad = [k for k in range(1, 41) if violated(k)]
    assert len(bad) >= 10, bad


def test_bad_input_is_named() -> None:
    with pytest.raises(InputError, match="width"):
        qb.HistogramConfig(0.0, 0.0, 4)
    with pytest.raises(InputError, match="bins"):
        qb.HistogramConfig(0.0, 1.0, 0)
    with pytest.raises(InputError, match="values_n"):
        qb.histogram(torch.tensor([0.0, float("nan")]), CFG)
    with pytest.raises(InputError, match="target load"):
        qb.threshold(CFG, [1, 2, 0], 4)
    with pytest.raises(InputError, match="raw_scores_ne"):
        qb.bias_update(torch.zeros(3, 2), torch.zeros(3, 3), 1, CFG)
