"""MoonEP planner (pybridge/moonep.py): every bound of k3-spec §2.15, recounted here from the
plan's dispatch tensor alone, on random, skewed, one-hot-expert, hot-rank, all-equal and
adversarial loads and on hypothesis-drawn ones; and planted planner bugs that the checks catch."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pybridge import moonep
from pybridge.errors import InputError

torch.set_num_threads(1)


def violations(counts_re: torch.Tensor, S: int, K: int, dispatch_rre: torch.Tensor) -> list[str]:
    """Every bound, counted independently of the planner: home blocks of E / R experts."""
    R, E = counts_re.shape
    per = E // R
    home = [e // per for e in range(E)]
    out = []
    if (dispatch_rre < 0).any():
        out.append("negative count")
    if not torch.equal(dispatch_rre.sum(1), counts_re):
        out.append("assignments not each processed exactly once")
    processed_er = dispatch_rre.sum(0).T.tolist()  # [E][R]
    for r in range(R):
        received = int(dispatch_rre[:, r, :].sum())
        if received != S * K:
            out.append(f"rank {r} processes {received}, not S*K = {S * K} (the static receive buffer)")
        remote = [e for e in range(E) if processed_er[e][r] > 0 and home[e] != r]
        if len(remote) > E // R:
            out.append(f"rank {r} holds {len(remote)} redundant experts > E/R = {E // R}")
        if len({home[e] for e in remote}) > 1:
            out.append(f"rank {r} holds redundant experts from several sources {sorted({home[e] for e in remote})}")
    for e in range(E):
        hosts = sum(1 for n in processed_er[e] if n > 0)
        load = int(counts_re[:, e].sum())
        if hosts < -(-load // (S * K)):
            out.append(f"expert {e} (load {load}) on {hosts} ranks < ceil(load / SK)")
    return out


def routed_counts(R: int, E: int, S: int, K: int, weights_e: torch.Tensor, seed: int) -> torch.Tensor:
    """Each of a rank's S tokens picks K distinct experts with probabilities ~ `weights_e`."""
    gen = torch.Generator().manual_seed(seed)
    counts = torch.zeros(R, E, dtype=torch.int64)
    for a in range(R):
        picks = torch.multinomial(weights_e.expand(S, E), K, replacement=False, generator=gen)
        counts[a] = torch.bincount(picks.flatten(), minlength=E)
    return counts


def all_equal(R: int, E: int, S: int, K: int) -> torch.Tensor:
    """Token t of every rank picks experts tK .. tK + K - 1 (mod E): equal loads when E | SK."""
    counts = torch.zeros(R, E, dtype=torch.int64)
    for t in range(S):
        for j in range(K):
            counts[:, (t * K + j) % E] += 1
    return counts


R, E, S, K = 8, 32, 24, 4
LOADS = {
    "uniform": routed_counts(R, E, S, K, torch.ones(E), seed=1),
    "zipf": routed_counts(R, E, S, K, 1.0 / torch.arange(1, E + 1, dtype=torch.float64), seed=2),
    "one_hot_expert": routed_counts(R, E, S, K, torch.cat([torch.tensor([1e9]), torch.ones(E - 1)]), seed=3),
    "hot_rank": routed_counts(R, E, S, K, torch.cat([torch.ones(E // R), 1e-12 * torch.ones(E - E // R)]), seed=4),
    "hot_last_rank": routed_counts(R, E, S, K, torch.cat([1e-12 * torch.ones(E - E // R), torch.ones(E // R)]), seed=5),
    "all_equal": all_equal(R, E, S, K),
}


@pytest.mark.parametrize("name", LOADS)
def test_plan_meets_every_bound(name):
    counts = LOADS[name]
    p = moonep.plan(counts, S, K)
    assert violations(counts, S, K, p.dispatch_rre) == []
    processed_er = p.dispatch_rre.sum(0).T
    for r in range(R):  # the plan's named source is the home of every redundant expert it holds
        remote_homes = {e // (E // R) for e in range(E) if processed_er[e, r] > 0 and e // (E // R) != r}
        assert remote_homes <= ({p.source[r]} if p.source[r] is not None else set())


def test_one_hot_expert_is_replicated_and_buffers_stay_static():
    """Expert 0 is picked by every token: load R S = 192 > S K = 96, so any plan spreads it
    over >= ceil(192 / 96) = 2 ranks; without migration its home rank would receive
    its home block's whole load."""
    counts = LOADS["one_hot_expert"]
    assert int(counts[:, 0].sum()) == R * S
    p = moonep.plan(counts, S, K)
    assert int((p.dispatch_rre.sum(0)[:, 0] > 0).sum()) >= moonep.replica_lower_bound(R * S, S, K) == 2
    assert (p.dispatch_rre.sum((0, 2)) == moonep.receive_buffer_rows(S, K)).all()


def test_hot_rank_needs_deepep_worst_case_without_migration():
    """Every token picks K experts of rank 0: home-only dispatch sends rank 0 all S K R
    assignments (DeepEP's worst case), the plan S K to every rank."""
    counts = LOADS["hot_rank"]
    assert int(counts[:, : E // R].sum()) == moonep.deepep_worst_case_rows(S, K, R)
    p = moonep.plan(counts, S, K)
    assert (p.dispatch_rre.sum((0, 2)) == S * K).all()
    assert violations(counts, S, K, home_only(counts)) != []


@settings(max_examples=60, deadline=None)
@given(
    R=st.integers(1, 6), per=st.integers(1, 5), S=st.integers(1, 12), K=st.integers(1, 4),
    skew=st.floats(0.0, 3.0), seed=st.integers(0, 10_000),
)
def test_plan_meets_every_bound_on_drawn_loads(R, per, S, K, skew, seed):
    E = R * per
    K = min(K, E)
    weights = torch.rand(E, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) ** (1 + 4 * skew) + 1e-9
    counts = routed_counts(R, E, S, K, weights, seed)
    assert violations(counts, S, K, moonep.plan(counts, S, K).dispatch_rre) == []


def test_paper_scale_plan():
    """896 experts on 64 ranks (E/R = 14), K = 16, Zipf-skewed routing."""
    R, E, S, K = 64, 896, 64, 16
    counts = routed_counts(R, E, S, K, 1.0 / torch.arange(1, E + 1, dtype=torch.float64) ** 1.2, seed=7)
    assert violations(counts, S, K, moonep.plan(counts, S, K).dispatch_rre) == []


# planted planners: each is caught by the checks above


def home_only(counts_re: torch.Tensor) -> torch.Tensor:
    """Planted: no migration, every expert processed at its home."""
    R, E = counts_re.shape
    d = torch.zeros(R, R, E, dtype=torch.int64)
    for e in range(E):
        d[:, e // (E // R), e] = counts_re[:, e]
    return d


def line_cut(counts_re: torch.Tensor, S: int, K: int) -> torch.Tensor:
    """Planted: fill ranks with S K assignments each in expert order (balanced, but a rank's cut
    can straddle several home blocks)."""
    R, E = counts_re.shape
    d = torch.zeros(R, R, E, dtype=torch.int64)
    r, room = 0, S * K
    for e in range(E):
        for a in range(R):
            have = int(counts_re[a, e])
            while have:
                take = min(have, room)
                d[a, r, e] += take
                have, room = have - take, room - take
                if room == 0 and r < R - 1:
                    r, room = r + 1, S * K
    return d


def extra_slot(counts_re: torch.Tensor, S: int, K: int) -> torch.Tensor:
    """Planted: the honest plan with one assignment swapped so that the rank holding the most
    redundant experts gets one more, from a third rank's home block."""
    R, E = counts_re.shape
    per = E // R
    d = moonep.plan(counts_re, S, K).dispatch_rre.clone()
    proc = d.sum(0).T
    slots = [[e for e in range(E) if proc[e, r] > 0 and e // per != r] for r in range(R)]
    r = max(range(R), key=lambda r: len(slots[r]))
    src = slots[r][0] // per
    e_new, r_from = next((e, int(proc[e].nonzero()[0])) for e in range(E)
                         if e // per not in (r, src) and proc[e, r] == 0 and proc[e].sum() > 0)
    a = int(d[:, r_from, e_new].nonzero()[0])
    e_old = slots[r][0]
    b = int(d[:, r, e_old].nonzero()[0])
    d[a, r_from, e_new] -= 1
    d[a, r, e_new] += 1
    d[b, r, e_old] -= 1
    d[b, r_from, e_old] += 1
    return d


# E = 6 on R = 3 ranks (E/R = 2), S = 2, K = 2: loads (3, 2 | 0, 0 | 1, 6). The line cut gives
# rank 1 the assignments [4, 8): the tail of expert 1 and experts 4 and 5, three redundant
# experts from two homes.
ADVERSARIAL = torch.tensor([[1, 1, 0, 0, 0, 2], [1, 1, 0, 0, 0, 2], [1, 0, 0, 0, 1, 2]], dtype=torch.int64)


def test_adversarial_load_honest_plan_meets_bounds():
    assert violations(ADVERSARIAL, 2, 2, moonep.plan(ADVERSARIAL, 2, 2).dispatch_rre) == []


def test_planted_line_cut_is_caught():
    found = violations(ADVERSARIAL, 2, 2, line_cut(ADVERSARIAL, 2, 2))
    assert "rank 1 holds 3 redundant experts > E/R = 2" in found
    assert any("several sources" in v for v in found)


@pytest.mark.parametrize("name", ["zipf", "one_hot_expert", "hot_rank"])
def test_planted_home_only_is_caught(name):
    found = violations(LOADS[name], S, K, home_only(LOADS[name]))
    assert any("not S*K" in v for v in found)


def test_planted_pigeonhole_violation_is_caught():
    """Home-only processing of the one hot expert puts its 192 assignments on one rank."""
    found = violations(LOADS["one_hot_expert"], S, K, home_only(LOADS["one_hot_expert"]))
    assert "expert 0 (load 192) on 1 ranks < ceil(load / SK)" in found


@pytest.mark.parametrize("name", ["uniform", "zipf", "one_hot_expert"])
def test_planted_extra_slot_is_caught(name):
    found = violations(LOADS[name], S, K, extra_slot(LOADS[name], S, K))
    assert any("several sources" in v for v in found)


# E = 6 on R = 3 (E/R = 2), S = 2, K = 2: loads (5, 5 | 1, 0 | 1, 0). Rank 0 gives 3 of expert 0
# to rank 1 and then 2 of expert 0 and 1 of expert 1 to rank 2, which holds E/R = 2 redundant experts.
AT_BOUND = torch.tensor([[2, 2, 0, 0, 0, 0], [2, 2, 0, 0, 0, 0], [1, 1, 1, 0, 1, 0]], dtype=torch.int64)


def test_planted_extra_slot_breaks_e_over_r_at_the_bound():
    """Where a rank already holds E/R redundant experts, one more breaks the E/R bound itself."""
    p = moonep.plan(AT_BOUND, 2, 2)
    assert violations(AT_BOUND, 2, 2, p.dispatch_rre) == []
    assert p.dispatch_rre.sum(0)[2].tolist() == [2, 1, 0, 0, 1, 0] and p.source[2] == 0
    found = violations(AT_BOUND, 2, 2, extra_slot(AT_BOUND, 2, 2))
    assert "rank 2 holds 3 redundant experts > E/R = 2" in found


@pytest.mark.parametrize("counts, S, K, match", [
    (torch.zeros(2, 5, dtype=torch.int64), 1, 1, "multiple of ranks"),
    (torch.tensor([[2, 1], [1, 1]]), 2, 1, r"source rank 0 sends 3 assignments, not S\*K = 2"),
    (torch.tensor([[3, 1], [2, 2]]), 2, 2, r"counts\[0, 0\] = 3 is outside"),
    (torch.tensor([[1.0, 1.0]]), 1, 2, "int64"),
    (torch.tensor([[1, 1]]), 1, 3, "top_k"),
])
def test_bad_counts_are_named(counts, S, K, match):
    with pytest.raises(InputError, match=match):
        moonep.plan(counts, S, K)


def test_remainder_is_handed_on_not_split():
    """E = R = 3, S = 3, K = 1: home loads (4, 4, 1), surpluses (1, 1, -2). Rank 2's deficit of 2
    exceeds either surplus, so rank 0 hands its 1 to rank 1, which gives 2 to rank 2: every
    destination has one source (filling rank 2 from both would not)."""
    counts = torch.tensor([[2, 1, 0], [1, 2, 0], [1, 1, 1]], dtype=torch.int64)
    p = moonep.plan(counts, 3, 1)
    assert violations(counts, 3, 1, p.dispatch_rre) == []
    assert p.source == (None, 0, 1)
    assert p.dispatch_rre.sum(0).tolist() == [[3, 0, 0], [1, 2, 0], [0, 2, 1]]
