"""Quantile Balancing's histogram bias update (report §2.3.3, App. C–D; k3-spec §2.8).

Mirrors `lean/KimiK3/Channel/QuantileHistogram.lean`, `QuantileThreshold.lean` and
`QuantileTies.lean` (Lean names in brackets):

    t_i        = cutoff_i − rawScore_i          required bias of token i; routed iff t_i < bias
    edge b     = lower + b·width                                                   [edge]
    bin of t   = #{interior edges e = 1..bins−1 with edge e ≤ t}   (clamped)        [inBin]
    prefix b   = count 0 + … + count (b−1)                                         [prefixCount]
    selected b = first b with k ≤ prefix (b+1)                                     [selectBin]
    estimate   = edge b + ((k − prefix b) / count b)·width                         [estimate]

Guarantees proved in Lean (at any ordered field): the pooled histogram of shards is the histogram
of all tokens (`shardHistogram_pooled`); the estimate is within one bin width of the k-th
smallest required bias when that lies in range (`estimate_within_width`); the estimate routes r
tokens with `k ≤ r + count b` and `r < k + count b` (`routedTokenCount_estimate`); the tie rule
(ties at the bias resolved by lower index) routes exactly `k` at the k-th smallest value
(`tieRoutedCount_kthSmallest`).

`histogram` is the fast path (`torch.searchsorted` on the interior edges, computed as Lean
computes them); `histogram_reference` evaluates Lean's `inBin` bin by bin, on floats or
`fractions.Fraction`. The other functions take plain numbers and run unchanged on Fractions, so
tests can run them in exact arithmetic.

The report does not state the bin layout, the target load, or whether a token's cutoff includes
the expert under consideration (spec §6 item 9): `cutoff_excluding_self` is this project's
reading (the top_k-th highest adjusted score among the *other* experts, so that
`cutoff < raw + bias` iff the expert beats that score).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Sequence

import torch

from pybridge.errors import InputError


@dataclass(frozen=True)
class HistogramConfig:
    """`bins` bins of width `width` from `lower` (Lean `HistogramConfig`); the first and last
    bins are open-ended."""

    lower: Real
    width: Real
    bins: int

    def __post_init__(self) -> None:
        if not isinstance(self.bins, int) or self.bins < 1:
            raise InputError(f"HistogramConfig.bins must be an integer ≥ 1, got {self.bins!r}")
        if not self.width > 0 or not math.isfinite(self.width):
            raise InputError(f"HistogramConfig.width must be finite and > 0, got {self.width!r}")
        if not math.isfinite(self.lower):
            raise InputError(f"HistogramConfig.lower must be finite, got {self.lower!r}")

    def edge(self, b: int) -> Real:
        """Lean `edge`: `lower + b·width` (the same operations, so the same floats)."""
        return self.lower + type(self.width)(b) * self.width


def in_bin(cfg: HistogramConfig, b: int, t: Real) -> bool:
    """Lean `inBin`: `b < bins`, `edge b ≤ t` unless `b = 0`, `t < edge (b+1)` unless last."""
    return (b < cfg.bins and (b == 0 or cfg.edge(b) <= t)
            and (b + 1 == cfg.bins or t < cfg.edge(b + 1)))


def histogram_reference(values: Sequence[Real], cfg: HistogramConfig) -> list[int]:
    """Lean `binCount` for every bin: `#{i | in_bin(b, t_i)}` (plain reference)."""
    return [sum(1 for t in values if in_bin(cfg, b, t)) for b in range(cfg.bins)]


def histogram(values_n: torch.Tensor, cfg: HistogramConfig) -> torch.Tensor:
    """Bin counts `[bins]` (int64) of a float tensor of required biases (fast path): the bin of
    `t` is the number of interior edges `≤ t`."""
    values_n = _check_values("values_n", values_n)
    if values_n.dim() != 1:
        raise InputError(f"values_n must be 1-D, got shape {tuple(values_n.shape)}")
    edges = torch.tensor([float(cfg.edge(b)) for b in range(1, cfg.bins)], dtype=torch.float64)
    index_n = torch.searchsorted(edges, values_n.to(torch.float64).contiguous(), right=True)
    return torch.bincount(index_n, minlength=cfg.bins)


def pool(histograms_rb: torch.Tensor) -> torch.Tensor:
    """Lean `pool`: the per-shard histograms `[shards, bins]` summed bin by bin."""
    if histograms_rb.dim() != 2:
        raise InputError(f"histograms_rb must be [shards, bins], got shape {tuple(histograms_rb.shape)}")
    return histograms_rb.sum(dim=0)


def prefix_counts(counts: Sequence[int]) -> list[int]:
    """Lean `prefixCount` at `0 … bins`: `prefix[b] = counts[0] + … + counts[b−1]`."""
    out = [0]
    for c in counts:
        out.append(out[-1] + int(c))
    return out


def select_bin(counts: Sequence[int], k: int) -> int | None:
    """Lean `selectBin`: the first bin whose cumulative count reaches `k`; `None` if none
    does (`k` above the total)."""
    prefix = prefix_counts(counts)
    for b in range(len(counts)):
        if k <= prefix[b + 1]:
            return b
    return None


def estimate(cfg: HistogramConfig, counts: Sequence[int], k: int, b: int) -> Real:
    """Lean `estimate`: `edge b + ((k − prefix b) / count b)·width` (Lean's natural-number
    subtraction; for the selected bin `k > prefix b` and `count b > 0`)."""
    num = type(cfg.width)(max(k - prefix_counts(counts)[b], 0))
    return cfg.edge(b) + num / type(cfg.width)(int(counts[b])) * cfg.width


def threshold(cfg: HistogramConfig, counts: Sequence[int], k: int) -> Real:
    """The histogram's bias for target load `k`: `estimate` at `select_bin`."""
    total = sum(int(c) for c in counts)
    if not 1 <= k <= total:
        raise InputError(f"target load k must be in [1, {total}] (the histogram's total count), got {k}")
    b = select_bin(counts, k)
    assert b is not None  # k ≤ total
    return estimate(cfg, counts, k, b)


def tie_routed(values: Sequence[Real], bias: Real, k: int) -> list[bool]:
    """Lean `tieRouted`: route `t_i < bias`, and the lowest-indexed tokens with `t_i = bias`,
    as many as still missing (`k − #{t < bias}`, natural-number subtraction)."""
    missing = max(k - sum(1 for t in values if t < bias), 0)
    out, ties = [], 0
    for t in values:
        if t < bias:
            out.append(True)
        elif t == bias:
            out.append(ties < missing)
            ties += 1
        else:
            out.append(False)
    return out


def cutoff_excluding_self(adjusted_ne: torch.Tensor, top_k: int) -> torch.Tensor:
    """`cutoff[i, e]`: the `top_k`-th highest adjusted score of token i among the experts other
    than e (this project's reading of spec §6 item 9). With the scores sorted descending, that is
    `v[top_k]` when e's score is among the top `top_k` values (`≥ v[top_k − 1]`), else
    `v[top_k − 1]`."""
    if adjusted_ne.dim() != 2 or not 1 <= top_k < adjusted_ne.shape[1]:
        raise InputError(f"adjusted_ne must be [tokens, experts] with experts > top_k ≥ 1, "
                         f"got shape {tuple(adjusted_ne.shape)} and top_k={top_k}")
    v_ne = adjusted_ne.sort(dim=1, descending=True).values
    kth_n1, next_n1 = v_ne[:, top_k - 1:top_k], v_ne[:, top_k:top_k + 1]
    return torch.where(adjusted_ne >= kth_n1, next_n1, kth_n1)


def cutoff_excluding_self_reference(adjusted: Sequence[Sequence[Real]], top_k: int) -> list[list[Real]]:
    """`cutoff_excluding_self` by its definition: sort the others, take the `top_k`-th."""
    return [[sorted((s for f, s in enumerate(row) if f != e), reverse=True)[top_k - 1]
             for e in range(len(row))] for row in adjusted]


def bias_update(raw_scores_ne: torch.Tensor, cutoff_ne: torch.Tensor, target_load: int,
                cfg: HistogramConfig, shard_n: torch.Tensor | None = None,
                center: bool = True) -> torch.Tensor:
    """QB's bias update (report App. D): per expert e, the histogram of required biases
    `cutoff[:, e] − raw[:, e]` (pooled over the shards `shard_n` assigns tokens to, when given),
    and the new bias `threshold(cfg, counts, target_load)`; then, if `center`, the mean bias is
    subtracted (Eq. 14; `centerBias_topKSlots`: a common shift changes no route)."""
    if raw_scores_ne.shape != cutoff_ne.shape or raw_scores_ne.dim() != 2:
        raise InputError(f"raw_scores_ne and cutoff_ne must both be [tokens, experts], got "
                         f"{tuple(raw_scores_ne.shape)} and {tuple(cutoff_ne.shape)}")
    required_ne = _check_values("cutoff_ne − raw_scores_ne", (cutoff_ne - raw_scores_ne).to(torch.float64))
    biases = []
    for e in range(required_ne.shape[1]):
        t_n = required_ne[:, e]
        if shard_n is None:
            counts = histogram(t_n, cfg)
        else:
            shards = int(shard_n.max()) + 1 if shard_n.numel() else 0
            counts = pool(torch.stack([histogram(t_n[shard_n == r], cfg) for r in range(shards)]))
        biases.append(float(threshold(cfg, counts.tolist(), target_load)))
    bias_e = torch.tensor(biases, dtype=torch.float64)
    return bias_e - bias_e.mean() if center else bias_e


def _check_values(name: str, values: torch.Tensor) -> torch.Tensor:
    """`values` unchanged, or an `InputError` naming it: not a tensor, or a non-finite entry."""
    if not torch.is_tensor(values):
        raise InputError(f"{name} must be a tensor, got {type(values).__name__}")
    if not torch.isfinite(values).all():
        raise InputError(f"{name} has a non-finite entry (NaN or ±inf)")
    return values
