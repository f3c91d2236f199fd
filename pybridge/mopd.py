"""MOPD reward and the post-training controls (report §4.1, pp. 12–14, Eq. 15; spec §2.12; the
seed's `Training/Distillation.lean` and `Training/Controls.lean`, whose names are cited below).

    r_t = clip_{[−R, R]}( log( π_teacher(y_t | ·) / π_student(y_t | ·) ) )        (Eq. 15, `reward`)
    clip R x = max(−R, min(R, x))                                                  (`clip`, reconstructed)
    0 ≤ R  ⇒  −R ≤ r ≤ R                                                          (`reward_mem_interval`)

Probabilities are strict (`StrictProbability` = (0, 1]), so `log 0` never occurs. The reward is a
stop-gradient: it is held fixed during the policy update (`token_rewards` returns it detached).
The report gives neither R_max nor τ, σ, b₀ (spec §6 item 15): they are arguments here.

The controls are reconstructed from the report's prose; the seed's exact Lean statements are not
in the spec, so the choices below (index order, tie order) are ours and are named as such:
* teacher index: 9 specialists = 3 domains × 3 efforts, numbered `effort + 3·domain` (the
  head-major `finProdFinEquiv` order `pybridge.muon` also uses);
* budget override: reward −1 when the trajectory length exceeds τ·b₀(x) (idempotent);
* verbosity rule (GenRM tournaments): a response longer than σ × the cold-start verbosity loses
  automatically; the first candidate is checked first, so when both are overlong the first loses.
"""

from __future__ import annotations

import math
from enum import IntEnum
from fractions import Fraction

import torch

from pybridge.errors import InputError

Number = float | Fraction


# --- Eq. 15 ---------------------------------------------------------------------------------------

def clip(max_reward: Number, x: Number) -> Number:
    """`clip R x = max(−R, min(R, x))`."""
    return max(-max_reward, min(max_reward, x))


def reward(max_reward: float, teacher_p: float, student_p: float) -> float:
    """Eq. 15 on one token (Lean `reward`): `clip R (log(teacher_p / student_p))`, both
    probabilities in (0, 1] and `R ≥ 0` (the hypothesis of `reward_mem_interval`)."""
    for what, p in (("teacher probability", teacher_p), ("student probability", student_p)):
        if not 0 < p <= 1:
            raise InputError(f"MOPD reward: the {what} must lie in (0, 1], got {p}")
    if not max_reward >= 0:
        raise InputError(f"MOPD reward: max_reward must be >= 0, got {max_reward}")
    return clip(max_reward, math.log(teacher_p / student_p))


def token_rewards(teacher_logp_t: torch.Tensor, student_logp_t: torch.Tensor, max_reward: float) -> torch.Tensor:
    """Eq. 15 per token from the two models' log-probabilities of the sampled tokens `y_t`:
    `clamp(log π_teacher − log π_student, −R, R)`, detached (the stop-gradient). `reward` is the
    plain per-token reference."""
    if teacher_logp_t.shape != student_logp_t.shape:
        raise InputError(f"MOPD rewards: teacher log-probabilities {tuple(teacher_logp_t.shape)} and "
                         f"student log-probabilities {tuple(student_logp_t.shape)} differ in shape")
    if not max_reward >= 0:
        raise InputError(f"MOPD rewards: max_reward must be >= 0, got {max_reward}")
    return (teacher_logp_t - student_logp_t).clamp(-max_reward, max_reward).detach()


# --- the 3 × 3 teacher index ----------------------------------------------------------------------

class Domain(IntEnum):
    GENERAL_TASKS = 0
    GENERAL_AGENTS = 1
    CODING_AGENTS = 2


class Effort(IntEnum):
    LOW = 0
    HIGH = 1
    MAX = 2


def teacher_index(domain: Domain, effort: Effort) -> int:
    """The specialist of (domain, effort) among the 9 RL teachers: `effort + 3·domain`."""
    return int(effort) + len(Effort) * int(domain)


def teacher_of_index(index: int) -> tuple[Domain, Effort]:
    """The inverse of `teacher_index` on 0 … 8."""
    if not 0 <= index < len(Domain) * len(Effort):
        raise InputError(f"teacher index must lie in 0 … {len(Domain) * len(Effort) - 1}, got {index}")
    return Domain(index // len(Effort)), Effort(index % len(Effort))


# --- budget override and verbosity rule -----------------------------------------------------------

def exceeds_budget(length: int, tau: Number, baseline_budget: Number) -> bool:
    """Whether a trajectory of `length` tokens exceeds `τ·b₀(x)` (strictly)."""
    return length > tau * baseline_budget


def budget_override(task_reward: Number, length: int, tau: Number, baseline_budget: Number) -> Number:
    """The budget penalty: −1 when the trajectory exceeds its budget, else the task reward.
    Idempotent: overriding an overridden reward changes nothing."""
    return -1 if exceeds_budget(length, tau, baseline_budget) else task_reward


def verbosity_winner(first_length: int, second_length: int, sigma: Number, cold_start_verbosity: Number,
                     judge_prefers_first: bool) -> int:
    """The winner (0: first, 1: second) of one GenRM tournament match: a response longer than
    `σ ×` the cold-start verbosity loses automatically, the first candidate checked first; the
    judge decides only when neither is overlong."""
    limit = sigma * cold_start_verbosity
    if first_length > limit:
        return 1
    if second_length > limit:
        return 0
    return 0 if judge_prefers_first else 1
