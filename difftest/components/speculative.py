"""Speculative decoding against serial greedy decoding (`pybridge.speculative`; no Lean leg).

A case is a seeded tiny model (`fixtures/tiny/config.json`), B prompts (each decoded on its own,
batch 1), and a plan: per step s, the number of drafts k_s and how many of them the target must
accept, a_s. The drafts are the serial greedy continuation with the (a_s + 1)-th and later drafts replaced by other tokens
(`PlannedProposer`), so the plan, not a draft model, chooses the accept pattern: the kinds are
the adversarial ones (all accepted, none, some, no drafts at all, a mix). Legs:
* torch serial: `KimiK3ForCausalLM.generate` for the tokens; the states of a target fed the
  prompt in one prefill and then one token at a time (generate's path), at the token count each
  step of the plan ends at;
* torch speculative: `SpeculativeDecoder` (one verify pass per step, rollback on rejection):
  its tokens, accept counts and state after every step;
* numpy: difftest's own decoder (`numpy_ref.Decoder`), greedy, one token at a time: tokens and
  the states (KDA heads and conv windows, MLA caches) at the same token counts.
Outputs: `tokens` and `accepted` (exact), `s{s}.L{l}.{heads,conv_q,conv_k,conv_v,latent_cache,
shared_key_cache}` (float64). The verify pass takes the prefill path, whose rounding differs
from the one-token decode path (a few ulps), so the states are compared under the tolerance of
the whole decode; a rolled-back state that kept a rejected token is off by O(1).

Float64 only: `lowp_checks` is empty (rollback does not depend on the dtype, and at low
precision greedy decoding of the prefill and decode paths may legitimately part at near ties).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from difftest.case import Case
from difftest.components.base import Component, ErrorModel, to_np, torch_config
from difftest.components.decoder import DecoderStepComponent, layer_tag, tiny_model
from pybridge.kda import KDAState
from pybridge.model import K3Cache
from pybridge.speculative import SpeculativeDecoder

K_MAX = 4  # drafts per step
STEPS = 4
PROMPT = 4


@dataclass
class PlannedProposer:
    """Drafts from the serial greedy continuation `oracle` (tokens t_0, t_1, ... after the
    prompt) that the target accepts exactly `plan[s] = (k, a)` of at step s: the first a drafts
    are right, every later one is replaced by another token."""

    oracle: list[int]
    plan: list[tuple[int, int]]
    vocab: int
    feature_layers: tuple[int, ...] = ()
    pos: int = 0  # index in `oracle` of the pending token
    step: int = 0

    def start(self, prompt_ids, features):
        self.pos, self.step = 0, 0

    def propose(self, pending, k, sample):
        planned, a = self.plan[self.step]
        if k != planned:
            raise ValueError(f"PlannedProposer: step {self.step} asks for {k} drafts, the plan has {planned}")
        right = self.oracle[self.pos + 1 : self.pos + 1 + k]
        return right[:a] + [(t + 1 + i) % self.vocab for i, t in enumerate(right[a:])], None

    def commit(self, kept, features):
        self.pos += len(kept)
        self.step += 1


def plan_of(case: Case) -> list[tuple[int, int]]:
    """The case's plan, clipped into its domain (0 <= a <= k <= K_MAX; the shrinker may have
    moved the values)."""
    out = []
    for k, a in np.asarray(case.tensors["plan"]).reshape(-1, 2):
        k = int(min(K_MAX, max(0, round(abs(float(k))))))
        out.append((k, int(min(k, max(0, round(abs(float(a))))))))
    return out


def step_ends(plan: list[tuple[int, int]]) -> list[int]:
    """Per step, how many tokens the target state holds after it beyond the prompt (all emitted
    tokens but the pending one): the first token, then a + 1 per step, minus the pending one."""
    ends, emitted = [], 1
    for _, a in plan:
        emitted += a + 1
        ends.append(emitted - 1)
    return ends


def state_outputs(prefix: str, layers: list, mla: list[bool]) -> dict[str, np.ndarray]:
    """`prefix`L{l}.* of one target state: per KDA layer the heads and the q/k/v windows
    ([W-1, H*K] etc.), per MLA layer the latent and shared-key caches."""
    out = {}
    for i, st in enumerate(layers):
        p = prefix + layer_tag(i)
        if mla[i]:
            out[p + "latent_cache"], out[p + "shared_key_cache"] = st
        else:
            heads, (cq, ck, cv) = st
            out.update({p + "heads": heads, p + "conv_q": cq, p + "conv_k": ck, p + "conv_v": cv})
    return out


def stacked(rows: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per-row outputs stacked along a leading row axis. Rows of one plan emit equally many
    tokens unless a decoder accepted other counts than the plan: then this raises, naming them."""
    lengths = [len(r["tokens"]) for r in rows]
    if len(set(lengths)) > 1:
        raise ValueError(f"the rows emitted {lengths} tokens under one plan: the accepted counts differ from the plan "
                         f"({[r['accepted'].astype(int).tolist() for r in rows if 'accepted' in r]})")
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def torch_state(cache: K3Cache) -> list:
    return [((to_np(s.recurrent[0]), (to_np(s.conv_q[0]), to_np(s.conv_k[0]), to_np(s.conv_v[0]))) if isinstance(s, KDAState)
             else (to_np(s.latent[0]), to_np(s.shared_key[0]))) for s in cache.layers]


class SpeculativeStepComponent(Component):
    name = "speculative_step"
    summary = ("speculative decoding steps with rollback vs serial greedy decoding of the tiny model "
               "(pybridge.speculative vs KimiK3ForCausalLM.generate and numpy_ref.Decoder; no Lean leg)")
    kinds = {
        "all": "every draft accepted (the verify pass's state is kept, bonus token)",
        "none": "every first draft rejected (the state is rolled back to the pending token)",
        "partial": "some of the drafts accepted (rolled back mid-way)",
        "zero": "no drafts: one-token verify passes",
        "mixed": "a random pattern of the four per step",
    }
    default_sizes = {"B": 2, "P": PROMPT, "S": STEPS, "K": K_MAX}

    def shrink_sizes(self, sizes):
        return [{**sizes, "B": 1}] if sizes["B"] > 1 else []

    def sample(self, rng, kind, sizes):
        K = sizes["K"]
        plan = []
        for _ in range(sizes["S"]):
            pattern = kind if kind != "mixed" else ("all", "none", "partial", "zero")[int(rng.integers(0, 4))]
            k = 0 if pattern == "zero" else int(rng.integers(2, K + 1))
            a = {"all": k, "none": 0, "partial": int(rng.integers(1, k)) if k > 1 else 0, "zero": 0}[pattern]
            plan.append((k, a))
        vocab = torch_config().vocab_size
        return {"model_seed": np.array(float(rng.integers(0, 2**20))),
                "ids": rng.integers(0, vocab // 2, (sizes["B"], sizes["P"])).astype(np.float64),
                "plan": np.array(plan, dtype=np.float64)}

    @staticmethod
    def inputs(case: Case) -> tuple[int, list[list[int]], list[tuple[int, int]]]:
        """The model seed, the B prompts (each decoded on its own: batch 1) and the plan."""
        ids = np.asarray(case.tensors["ids"]).astype(np.int64)
        return int(case.tensors["model_seed"]), [[int(t) for t in row] for row in ids.reshape(-1, ids.shape[-1])], plan_of(case)

    def torch_outputs(self, case, dtype, device):
        seed, prompts, plan = self.inputs(case)
        model = tiny_model(seed).to(device=device, dtype=dtype)
        rows = [self.torch_row(model, prompt, plan, device) for prompt in prompts]
        return {leg: stacked([r[leg] for r in rows]) for leg in ("torch serial", "torch speculative")}

    @staticmethod
    def torch_row(model, prompt: list[int], plan: list[tuple[int, int]], device: str) -> dict[str, dict]:
        mla = [lay.is_mla for lay in model.model.layers]
        ends = step_ends(plan)
        with torch.no_grad():
            oracle = model.generate(torch.tensor([prompt], device=device), ends[-1] + 2 + K_MAX)[0].tolist()
            # serial: the prompt in one prefill, then one token at a time (generate's path)
            _, cache = model(torch.tensor([prompt], device=device))
            serial = {"tokens": np.array(oracle[: ends[-1] + 1], np.float64),
                      "accepted": np.array([a for _, a in plan], np.float64)}  # the plan's, by the drafts' construction
            fed = 0
            for s, end in enumerate(ends):
                while fed < end:
                    _, cache = model(torch.tensor([[oracle[fed]]], device=device), cache)
                    fed += 1
                serial.update(state_outputs(f"s{s}.", torch_state(cache), mla))
            spec, accepted = {}, []
            dec = SpeculativeDecoder(model, PlannedProposer(oracle, plan, model.config.vocab_size))
            dec.start(prompt)
            for s, (k, _) in enumerate(plan):
                accepted.append(dec.step(k).accepted)
                spec.update(state_outputs(f"s{s}.", torch_state(dec.cache), mla))
        spec["tokens"], spec["accepted"] = np.array(dec.tokens, np.float64), np.array(accepted, np.float64)
        return {"torch serial": serial, "torch speculative": spec}

    def numpy_outputs(self, case):
        seed, prompts, plan = self.inputs(case)
        model = tiny_model(seed)
        return stacked([self.numpy_row(DecoderStepComponent().decoder(model), prompt, plan) for prompt in prompts])

    @staticmethod
    def numpy_row(dec, prompt: list[int], plan: list[tuple[int, int]]) -> dict[str, np.ndarray]:
        """difftest's decoder, greedy, one token at a time: the tokens, and the states at the
        token counts the steps of the plan end at."""
        for t in prompt[:-1]:
            dec.step(t)
        logits = dec.step(prompt[-1])
        tokens, out = [], {}
        for s, end in enumerate(step_ends(plan)):
            while len(tokens) < end:
                tokens.append(int(np.argmax(logits)))
                logits = dec.step(tokens[-1])
            out.update(state_outputs(f"s{s}.", [(st.latent, st.shared) if dec.mla[i] else
                                                  (st.heads, tuple(w.reshape(w.shape[0], -1) for w in st.windows))
                                                  for i, st in enumerate(dec.states)], list(dec.mla)))
        tokens.append(int(np.argmax(logits)))
        out["tokens"] = np.array(tokens, np.float64)
        return out

    def exact_outputs(self):
        return ("tokens", "accepted")

    def lowp_checks(self, case, dtype, device):
        return []

    def error_model(self, sizes):
        """The decoder step's chain (`decoder_step`, MLA over the whole sequence) once per token
        the state has seen: the KDA heads carry every earlier token's rounding."""
        n = sizes["P"] + sizes["S"] * (sizes["K"] + 1)
        step = DecoderStepComponent().error_model({"P": n})
        return ErrorModel(stores=step.stores * n, accum=step.accum * n, amp=step.amp)
