"""MoonEP expert-parallel planning (report §5.2.1, pp. 19-20, App. E; k3-spec §2.15).

R ranks each send S tokens with K routed experts per token: S K token-expert assignments per
rank. Expert e has the fixed home rank e // (E / R) (E experts in contiguous blocks of E / R).
A plan says, for every (source rank, destination rank, expert), how many of the source's
assignments to that expert the destination processes (`Plan.dispatch_rre`). A destination
processing an expert whose home is elsewhere holds a redundant copy of it: one redundant slot.

How the report's three statements are read here (the spec states them in one line each):

* **Exactly S x K per rank.** Every destination processes exactly S K assignments, and every
  assignment is processed exactly once.
* **At most E / R redundant slots per rank.** Read with the hypotheses the seed formalization
  makes explicit (`MoonEP.peakRedundant_le_of_one_source`): each rank is the home of E / R
  experts and all of a destination's redundant experts come from one source rank; then a
  destination holds at most E / R redundant experts. The planner below builds plans with that
  one-source structure, so the bound holds for every load, not only on average.
* **Capacity pigeonhole lower bound.** Read as the seed's `MoonEP.ceilDiv_card_le_expertCount`
  applied to one expert: its L_e assignments go to ranks that take at most S K each, so any
  plan that meets the exact S K has expert e on at least ceil(L_e / (S K)) ranks
  (`replica_lower_bound`). A hot expert with L_e > S K must be replicated; no plan avoids it.
* **Fixed S x K receive buffer.** Each destination receives exactly S K rows whatever the routing,
  so a static [S K, d] buffer suffices (`receive_buffer_rows`). Without migration a rank receives
  the whole load of its home experts, up to S K R when every token of every rank picks K experts
  of one rank (DeepEP's worst case, `deepep_worst_case_rows`).

The planner (written here: no library plans MoonEP's migrations). With home load H_r (the
assignments to r's home experts) and surplus H_r - S K, overloaded ranks give assignments of
their own home experts to underloaded ranks, each underloaded rank receiving from exactly one
source. When the current source's remaining surplus is smaller than the next deficit, it hands
the remainder to the next overloaded rank (whose only source it becomes) instead of splitting
the deficit over two sources. A rank hands on less than S K that way, so a source never gives
more than its home load. Within a source, its hottest home experts go to its destinations first.
The seed formalization proves the two counting statements (its `MoonEP.lean`, read for the
statement shapes only); this project proves them in `lean/KimiK3/Channel/MoonEP.lean`, whose
checker `checkPlan` is run on this planner's plans (tests/test_parallel_lean.py); the planner and
any migration runtime are not verified (docs/parallel.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pybridge.errors import InputError


def redundant_slot_bound(experts: int, ranks: int) -> int:
    """The report's E / R: the most redundant experts one destination needs."""
    return experts // ranks


def replica_lower_bound(load: int, tokens_per_rank: int, top_k: int) -> int:
    """ceil(load / (S K)): the fewest ranks an expert with `load` assignments can be spread over
    when no rank processes more than S K assignments (the pigeonhole bound)."""
    return -(-load // (tokens_per_rank * top_k))


def receive_buffer_rows(tokens_per_rank: int, top_k: int) -> int:
    """MoonEP's static receive buffer: S K rows per rank."""
    return tokens_per_rank * top_k


def deepep_worst_case_rows(tokens_per_rank: int, top_k: int, ranks: int) -> int:
    """The receive size a rank must be ready for without migration: S K R."""
    return tokens_per_rank * top_k * ranks


def home_rank(expert: int, experts: int, ranks: int) -> int:
    """The fixed home of an expert: contiguous blocks of E / R experts."""
    return expert // (experts // ranks)


@dataclass(frozen=True)
class Plan:
    """A MoonEP plan. `dispatch_rre[a, r, e]`: assignments of source rank a to expert e that
    destination r processes. `source[r]`: the one rank whose home experts r holds redundant
    copies of (None when r holds none)."""

    tokens_per_rank: int
    top_k: int
    dispatch_rre: torch.Tensor
    source: tuple[int | None, ...]


def check_counts(counts_re: torch.Tensor, tokens_per_rank: int, top_k: int) -> None:
    """`counts_re[a, e]`: how many of source a's S tokens picked expert e. Raises an `InputError`
    naming the field at fault."""
    if counts_re.dim() != 2 or counts_re.dtype != torch.int64:
        raise InputError(f"moonep: counts must be an int64 [ranks, experts] tensor, got {counts_re.dtype} {list(counts_re.shape)}")
    ranks, experts = counts_re.shape
    if ranks < 1 or experts % ranks:
        raise InputError(f"moonep: experts ({experts}) must be a positive multiple of ranks ({ranks})")
    if not 1 <= top_k <= experts or tokens_per_rank < 1:
        raise InputError(f"moonep: need tokens_per_rank >= 1 and 1 <= top_k <= experts, got S={tokens_per_rank}, K={top_k}")
    if (counts_re < 0).any() or (counts_re > tokens_per_rank).any():
        a, e = ((counts_re < 0) | (counts_re > tokens_per_rank)).nonzero()[0].tolist()
        raise InputError(f"moonep: counts[{a}, {e}] = {counts_re[a, e].item()} is outside [0, S={tokens_per_rank}] "
                         "(a token picks an expert at most once)")
    sums = counts_re.sum(1)
    if (sums != tokens_per_rank * top_k).any():
        a = int((sums != tokens_per_rank * top_k).nonzero()[0])
        raise InputError(f"moonep: source rank {a} sends {sums[a].item()} assignments, not S*K = {tokens_per_rank * top_k}")


def _flows(home_load_r: list[int], capacity: int) -> list[tuple[int, int, int]]:
    """(source, destination, assignments) moves that leave every rank exactly `capacity`, each
    destination receiving from one source (see the module docstring)."""
    surplus = [h - capacity for h in home_load_r]
    over = sorted((r for r, s in enumerate(surplus) if s > 0), key=lambda r: -surplus[r])
    under = sorted((r for r, s in enumerate(surplus) if s < 0), key=lambda r: surplus[r])
    flows: list[tuple[int, int, int]] = []
    nxt, cur, shed = 0, -1, 0
    for d in under:
        need = -surplus[d]
        while shed < need:  # hand the remainder on: the next overloaded rank's one source is cur
            if shed > 0:
                flows.append((cur, over[nxt], shed))
            cur, shed = over[nxt], shed + surplus[over[nxt]]
            nxt += 1
        flows.append((cur, d, need))
        shed -= need
    return flows


def plan(counts_re: torch.Tensor, tokens_per_rank: int, top_k: int) -> Plan:
    """A plan in which every rank processes exactly S K assignments and holds at most E / R
    redundant experts, all from one source rank."""
    check_counts(counts_re, tokens_per_rank, top_k)
    ranks, experts = counts_re.shape
    per = experts // ranks
    load_e = counts_re.sum(0).tolist()
    processed_er = [[0] * ranks for _ in range(experts)]
    source: list[int | None] = [None] * ranks
    flows = _flows([sum(load_e[r * per : (r + 1) * per]) for r in range(ranks)], receive_buffer_rows(tokens_per_rank, top_k))
    for u in range(ranks):
        # u's home experts, hottest first, cut into its destinations' shares and then its own
        shares = [(d, n) for s, d, n in flows if s == u]
        for d, _ in shares:
            source[d] = u
        hot = sorted(range(u * per, (u + 1) * per), key=lambda e: -load_e[e])
        left = {e: load_e[e] for e in hot}
        for d, n in shares:
            for e in hot:
                take = min(n, left[e])
                processed_er[e][d] += take
                left[e] -= take
                n -= take
        for e in hot:
            processed_er[e][u] += left[e]
    return Plan(tokens_per_rank, top_k, _dispatch(counts_re, processed_er), tuple(source))


def _dispatch(counts_re: torch.Tensor, processed_er: list[list[int]]) -> torch.Tensor:
    """Splits each expert's per-source assignments over the ranks processing it, in rank order
    on both sides (the destinations' totals are `processed_er`)."""
    ranks, experts = counts_re.shape
    counts = counts_re.tolist()
    dispatch_rre = [[[0] * experts for _ in range(ranks)] for _ in range(ranks)]
    for e in range(experts):
        want = list(processed_er[e])
        r = 0
        for a in range(ranks):
            have = counts[a][e]
            while have:
                while want[r] == 0:
                    r += 1
                take = min(have, want[r])
                dispatch_rre[a][r][e] += take
                want[r] -= take
                have -= take
    return torch.tensor(dispatch_rre, dtype=torch.int64)
