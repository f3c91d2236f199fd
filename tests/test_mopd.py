"""pybridge.mopd, Eq. 15 and the post-training controls (spec §2.12): the report's 0.70 / 0.08
example against a hand value, `reward_mem_interval` on random and extreme inputs, the tensor
rewards against the scalar reference and detached, the 3 × 3 teacher index against a table
written out by hand, the budget override's boundary (exact, with Fraction) and idempotence, the
verbosity rule's cases and its first-candidate order."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
import torch

from pybridge import mopd
from pybridge.errors import InputError
from pybridge.mopd import Domain, Effort


def ln_exact(q: Fraction, terms: int = 40) -> Fraction:
    """ln q = 2 atanh(z) = 2 Σ_k z^{2k+1}/(2k + 1), z = (q − 1)/(q + 1), in exact rationals; the
    truncation error is below z^81, negligible for the z ≤ 1/3 used here."""
    z = (q - 1) / (q + 1)
    return 2 * sum(z ** (2 * k + 1) / (2 * k + 1) for k in range(terms))


# ln 8.75 = 3 ln 2 + ln(35/32): both series converge fast (z = 1/3 and z = 3/67)
LN_8_75 = float(3 * ln_exact(Fraction(2)) + ln_exact(Fraction(35, 32)))


def test_worked_example_0_70_over_0_08() -> None:
    assert LN_8_75 == pytest.approx(2.169, abs=5e-4)  # the report's figure
    assert mopd.reward(5.0, 0.70, 0.08) == pytest.approx(LN_8_75, abs=1e-12)  # within the cap 5
    assert mopd.reward(5.0, 0.08, 0.70) == pytest.approx(-LN_8_75, abs=1e-12)  # swapped: sign flips
    assert mopd.reward(5.0, 0.3, 0.3) == 0.0
    assert mopd.reward(1.0, 0.70, 0.08) == 1.0  # clipped at R
    assert mopd.reward(0.0, 0.70, 0.08) == 0.0


def test_reward_mem_interval() -> None:
    rng = random.Random(0)
    cases = [(r, t, s) for r in (0.0, 0.5, 5.0) for t in (1e-300, 0.5, 1.0) for s in (1e-300, 0.5, 1.0)]
    cases += [(rng.uniform(0, 3), rng.uniform(1e-12, 1), rng.uniform(1e-12, 1)) for _ in range(1000)]
    for max_reward, t, s in cases:
        assert -max_reward <= mopd.reward(max_reward, t, s) <= max_reward


def test_bad_probabilities_and_cap_are_named() -> None:
    with pytest.raises(InputError, match="teacher probability"):
        mopd.reward(5.0, 0.0, 0.5)
    with pytest.raises(InputError, match="student probability"):
        mopd.reward(5.0, 0.5, 1.5)
    with pytest.raises(InputError, match="max_reward"):
        mopd.reward(-1.0, 0.5, 0.5)
    with pytest.raises(InputError, match="differ in shape"):
        mopd.token_rewards(torch.zeros(3), torch.zeros(4), 5.0)


def test_token_rewards_match_the_scalar_reference_and_stop_the_gradient() -> None:
    g = torch.Generator().manual_seed(1)
    teacher_p_t = torch.rand(64, generator=g, dtype=torch.float64) * 0.999 + 1e-3
    student_p_t = torch.rand(64, generator=g, dtype=torch.float64) ** 4 * 0.999 + 1e-3
    student_logp_t = student_p_t.log().requires_grad_()
    got_t = mopd.token_rewards(teacher_p_t.log(), student_logp_t, 2.0)
    expected = [mopd.reward(2.0, t.item(), s.item()) for t, s in zip(teacher_p_t, student_p_t)]
    assert torch.allclose(got_t, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-12)
    assert (got_t.abs() == 2.0).any() and (got_t.abs() < 2.0).any()  # both branches exercised
    assert not got_t.requires_grad


def test_teacher_index_is_the_hand_table_and_a_bijection() -> None:
    table = {
        (Domain.GENERAL_TASKS, Effort.LOW): 0, (Domain.GENERAL_TASKS, Effort.HIGH): 1,
        (Domain.GENERAL_TASKS, Effort.MAX): 2, (Domain.GENERAL_AGENTS, Effort.LOW): 3,
        (Domain.GENERAL_AGENTS, Effort.HIGH): 4, (Domain.GENERAL_AGENTS, Effort.MAX): 5,
        (Domain.CODING_AGENTS, Effort.LOW): 6, (Domain.CODING_AGENTS, Effort.HIGH): 7,
        (Domain.CODING_AGENTS, Effort.MAX): 8,
    }
    for (d, e), i in table.items():
        assert mopd.teacher_index(d, e) == i
        assert mopd.teacher_of_index(i) == (d, e)
    with pytest.raises(InputError, match="0 … 8"):
        mopd.teacher_of_index(9)


def test_budget_override_boundary_and_idempotence() -> None:
    tau, b0 = Fraction(3, 2), Fraction(100)  # budget 150 tokens exactly
    assert mopd.budget_override(Fraction(7, 10), 150, tau, b0) == Fraction(7, 10)  # at the budget: kept
    assert mopd.budget_override(Fraction(7, 10), 151, tau, b0) == -1  # over it: −1
    for task_reward in (Fraction(-1), Fraction(0), Fraction(1, 3), Fraction(1)):
        for length in (0, 149, 150, 151, 10**6):
            once = mopd.budget_override(task_reward, length, tau, b0)
            assert mopd.budget_override(once, length, tau, b0) == once


def test_verbosity_rule() -> None:
    sigma, v0 = Fraction(2), Fraction(50)  # limit 100
    for prefers_first in (True, False):
        assert mopd.verbosity_winner(101, 100, sigma, v0, prefers_first) == 1  # first overlong loses
        assert mopd.verbosity_winner(100, 101, sigma, v0, prefers_first) == 0  # second overlong loses
        assert mopd.verbosity_winner(101, 500, sigma, v0, prefers_first) == 1  # both: the first loses
    assert mopd.verbosity_winner(10, 100, sigma, v0, True) == 0  # neither: the judge decides
    assert mopd.verbosity_winner(10, 100, sigma, v0, False) == 1
