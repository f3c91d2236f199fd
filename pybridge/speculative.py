"""Speculative decoding over the K3 target (report §4.1.4; spec §2.14), greedy or sampled.

One step, from the target state `snapshot` (all tokens so far but the last emitted one, the
*pending* token x):
  1. the proposer drafts k tokens d_1..d_k (with their draft distributions q_i when sampling);
  2. ONE cached target pass (the prefill path) over [x, d_1..d_k] gives p_1..p_{k+1};
  3. d_i is accepted while the rule accepts it: greedy, d_i = argmax p_i; sampled, with
     probability min(1, p_i(d_i) / q_i(d_i)) (`acceptance_probability`);
  4. at the first rejection i the step emits a token from the normalised residual
     max(0, p_i - q_i) (`residual_distribution`; greedy: argmax p_i); when all k are accepted,
     a bonus token from p_{k+1}; so a step emits j + 1 tokens for j accepted drafts;
  5. the new state holds [x, d_1..d_j] (`rolled_back`).
Sampled, each emitted token has exactly the target's distribution (the accepted mass
min(p, q) plus the residual mass 1 - Σ min(p, q) times the correction is p: Lean
`accepted_add_corrected_eq_target`); greedy emits exactly serial greedy decoding's tokens.

Rollback is snapshot and recompute. Every layer returns fresh state tensors and never writes
into the cache it was given (KDA states and conv windows, MLA caches; tested by
`test_forward_leaves_its_input_cache_untouched`), so the state before the step is its own
snapshot at no cost. When all
drafts are accepted the verify pass's state is the new state; otherwise the state is recomputed
from the snapshot by one cached pass over the j + 1 kept tokens, so the KDA recurrent states,
the short-conv windows and the MLA caches are all exactly those of a target that never saw the
rejected tokens. Per-token states are not saved instead: the chunked KDA kernel does not form
them (the report, §5.1: "do not store a full state per draft position"). The report's cheaper
replay of the cached projected KDA inputs of the kept tokens (no second pass through the MoE and
MLA layers, MLA caches truncated) is not implemented.

Only batch 1 (the rows of a batch would accept different counts) and temperature 1 (no
top-k / top-p) are supported.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from pybridge.eagle import EagleDraft, target_pass
from pybridge.errors import InputError
from pybridge.mla import MLACache
from pybridge.model import K3Cache, KimiK3ForCausalLM


def acceptance_probability(p_x, q_x):
    """min(1, p(x) / q(x)) for a drafted x (q(x) > 0 since x was drawn from q). Written with
    `>=` and `/` only, so it works on floats, 0-d tensors and `fractions.Fraction`."""
    return 1 if p_x >= q_x else p_x / q_x


def residual_distribution(p, q):
    """max(0, p - q) normalised: the correction after a rejection (Lean
    `correctionDistribution`). Works on tensors and NumPy arrays (also of `Fraction`s)."""
    r = (p - q).clip(min=0)
    return r / r.sum()


class Proposer(Protocol):
    """What drafts tokens: sees the target features `feature_layers` of the tokens it is told about."""

    feature_layers: tuple[int, ...]

    def start(self, prompt_ids: list[int], features: tuple[torch.Tensor, ...]) -> None:
        """After the prompt's prefill: its tokens and their target features ([1, P, D] each)."""

    def propose(self, pending: int, k: int, sample: torch.Generator | None) -> tuple[list[int], torch.Tensor | None]:
        """k draft tokens after `pending` and, when sampling (`sample` is the generator), their
        draft distributions q [k, vocab] they were drawn from (greedy: None)."""

    def commit(self, kept: list[int], features: tuple[torch.Tensor, ...]) -> None:
        """The step kept `kept` (the pending token and the accepted drafts), with the target
        features of those positions ([1, len(kept), D] each)."""


@dataclass
class StepRecord:
    drafted: list[int]
    accepted: int
    emitted: list[int]  # drafted[:accepted] + [the correction or bonus token]


def choose(p_v: torch.Tensor, sample: torch.Generator | None) -> int:
    """A token of distribution (sampled) or logit row (greedy: argmax, ties to the lowest id) `p_v`."""
    return int(p_v.argmax()) if sample is None else int(torch.multinomial(p_v, 1, generator=sample))


def verify(p_tv: torch.Tensor, drafted: Sequence[int], q_kv: torch.Tensor | None,
           sample: torch.Generator | None) -> tuple[int, int]:
    """(accepted drafts j, the next token) from the target rows `p_tv` [k + 1, vocab]
    (probabilities when sampling, logits when greedy) and the draft rows `q_kv` [k, vocab]."""
    for i, d in enumerate(drafted):
        if sample is None:
            if d != int(p_tv[i].argmax()):
                return i, choose(p_tv[i], None)
        elif not bool(torch.rand((), dtype=p_tv.dtype, generator=sample) < acceptance_probability(p_tv[i, d], q_kv[i, d])):
            r = residual_distribution(p_tv[i], q_kv[i])
            # the residual is empty only when p <= q everywhere, i.e. p = q up to rounding
            return i, choose(r if bool(torch.isfinite(r).all()) else p_tv[i], sample)
    return len(drafted), choose(p_tv[len(drafted)], sample)


def rolled_back(target: KimiK3ForCausalLM, snapshot: K3Cache, verified: K3Cache, fed: list[int], keep: int) -> K3Cache:
    """The target state after the first `keep` of the tokens `fed` that the verify pass fed
    from `snapshot` (giving `verified`): `verified` when all are kept; otherwise recomputed
    from the snapshot by one cached pass over the kept tokens."""
    if keep == len(fed):
        return verified
    ids = torch.tensor([fed[:keep]], device=target.lm_head.weight.device)
    return target(ids, snapshot)[1]


@dataclass
class SpeculativeDecoder:
    """Speculative decoding of one sequence (batch 1); `sample` None is greedy."""

    target: KimiK3ForCausalLM
    proposer: Proposer
    sample: torch.Generator | None = None
    cache: K3Cache | None = None
    pending: int = -1
    tokens: list[int] = field(default_factory=list)

    def probs(self, logits_btv: torch.Tensor) -> torch.Tensor:
        return logits_btv[0] if self.sample is None else torch.softmax(logits_btv[0], dim=-1)

    @torch.no_grad()
    def start(self, prompt_ids: list[int]) -> int:
        """Prefill the prompt; returns the first token (sampled from or argmax of its last row)."""
        if not prompt_ids:
            raise InputError("the prompt is empty")
        ids = torch.tensor([prompt_ids], device=self.target.lm_head.weight.device)
        logits, self.cache, feats = target_pass(self.target, ids, None, self.proposer.feature_layers)
        self.proposer.start(list(prompt_ids), feats)
        self.pending = choose(self.probs(logits)[-1], self.sample)
        self.tokens = [self.pending]
        return self.pending

    @torch.no_grad()
    def step(self, k: int) -> StepRecord:
        """Draft k tokens (k = 0: a plain decode step), verify them in one pass, keep the accepted."""
        if k < 0:
            raise InputError(f"the draft length must be >= 0, got {k}")
        if self.cache is None:
            raise InputError("SpeculativeDecoder.step before start()")
        snapshot = self.cache
        drafted, q_kv = self.proposer.propose(self.pending, k, self.sample)
        if len(drafted) != k:
            raise InputError(f"the proposer returned {len(drafted)} draft tokens, asked for {k}")
        if self.sample is not None and k and (q_kv is None or q_kv.shape != (k, self.target.config.vocab_size)):
            raise InputError(f"sampled decoding needs the draft distributions [{k}, vocab] the drafts were drawn from, "
                             f"got {None if q_kv is None else tuple(q_kv.shape)}")
        fed = [self.pending, *drafted]
        ids = torch.tensor([fed], device=self.target.lm_head.weight.device)
        logits, verified, feats = target_pass(self.target, ids, snapshot, self.proposer.feature_layers)
        j, nxt = verify(self.probs(logits), drafted, q_kv, self.sample)
        self.cache = rolled_back(self.target, snapshot, verified, fed, j + 1)
        self.proposer.commit(fed[: j + 1], tuple(f[:, : j + 1] for f in feats))
        self.pending = nxt
        emitted = [*drafted[:j], nxt]
        self.tokens += emitted
        return StepRecord(drafted, j, emitted)


@torch.no_grad()
def speculative_generate(target: KimiK3ForCausalLM, proposer: Proposer, prompt_ids_bt: torch.Tensor,
                         max_new_tokens: int, k: int, sample: torch.Generator | None = None) -> torch.Tensor:
    """`max_new_tokens` new ids [1, N] by speculative decoding with k drafts per step (the
    last step drafts fewer so no more than N tokens are verified); greedy when `sample` is None."""
    if prompt_ids_bt.dim() != 2 or prompt_ids_bt.shape[0] != 1:
        raise InputError(f"speculative decoding takes one sequence [1, tokens], got {tuple(prompt_ids_bt.shape)}")
    if max_new_tokens < 0:
        raise InputError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if max_new_tokens == 0:
        return prompt_ids_bt.new_zeros(1, 0)
    dec = SpeculativeDecoder(target, proposer, sample)
    dec.start(prompt_ids_bt[0].tolist())
    while len(dec.tokens) < max_new_tokens:
        dec.step(min(k, max_new_tokens - len(dec.tokens) - 1))
    return torch.tensor([dec.tokens[:max_new_tokens]], device=prompt_ids_bt.device)


@dataclass
class EagleProposer:
    """Drafts with the EAGLE-3 draft: the fused target feature at the first position, then the
    draft's own features (self-feeding). Its cache is rolled back like the target's: the state
    before `propose` is kept, and `commit` recomputes it over the kept positions with the
    target's features (one cached draft pass)."""

    target: KimiK3ForCausalLM
    draft: EagleDraft
    cache: MLACache | None = None
    feature: torch.Tensor | None = None  # [1, 1, D]: the feature before the pending token

    @property
    def feature_layers(self) -> tuple[int, ...]:
        return self.draft.draft_config.feature_layers

    def fused(self, features: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return self.draft.fc(*features)

    def embed(self, ids: list[int]) -> torch.Tensor:
        w = self.target.model.embed_tokens.weight
        return self.target.model.embed_tokens(torch.tensor([ids], device=w.device))

    def start(self, prompt_ids, features):
        f = self.fused(features)  # [1, P, D]: the feature at each prompt position
        self.cache = self.draft.initial_state(1)
        if len(prompt_ids) > 1:  # position t pairs the feature at t - 1 with the token at t
            _, _, self.cache = self.draft(self.embed(prompt_ids[1:]), f[:, :-1], self.cache)
        self.feature = f[:, -1:]

    def propose(self, pending, k, sample):
        cache, feature, token, drafted, qs = self.cache, self.feature, pending, [], []
        for _ in range(k):
            logits, feature, cache = self.draft(self.embed([token]), feature, cache)
            q_v = torch.softmax(logits[0, -1], dim=-1) if sample is not None else logits[0, -1]
            token = choose(q_v, sample)
            drafted.append(token)
            qs.append(q_v)
        return drafted, (torch.stack(qs) if sample is not None and qs else None)

    def commit(self, kept, features):
        f = self.fused(features)  # the target features of the kept positions
        _, _, self.cache = self.draft(self.embed(kept), torch.cat([self.feature, f[:, :-1]], dim=1), self.cache)
        self.feature = f[:, -1:]
