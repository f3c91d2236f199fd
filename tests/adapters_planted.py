"""Wrong adapters for tests/test_difftest_adapters.py: each built-in adapter path with one planted
bug (a realistic mapping or porting mistake), and the toy example with one. Importable by spec
(`adapters_planted:NAME`) so a failure's reproducer replays."""

from __future__ import annotations

import torch

from difftest.adapters import Call
from difftest.adapters import fla as fla_adapters
from difftest.adapters import kimi_linear

import k3_toy


def _shift_decay(call: Call) -> Call:
    """The call with every token's decay moved one token later (an off-by-one window)."""
    t = call.tensors
    a = t["retention"]
    shifted = torch.cat([torch.ones_like(a[:, :1]), a[:, :-1]], 1)
    return Call(call.adapter, call.component, type(t)({**t, "retention": shifted}, call.adapter, call.component),
                call.sizes, call.dtype, call.device)


class FlaDefaultScale(fla_adapters.FlaKDA):
    """fla's naive recurrence with its default readout scale K^-1/2 (the scale not passed)."""

    def run(self, call):
        q, k, v, g, beta, s0 = fla_adapters.kernel_args(call)
        o, s = self.kernel(q, k, v, g, beta, initial_state=s0.float(), output_final_state=True)
        return {"o": o, "state": s}


class FlaShiftedDecay(fla_adapters.FlaKDA):
    """fla's naive chunk kernel fed the decay one token late."""

    def run(self, call):
        return super().run(_shift_decay(call))


class KimiUnscaled(kimi_linear.KimiLinearKDA):
    """Kimi Linear's recurrence without compensating its hard-coded K^-1/2 query scale."""

    def kda_recurrence(self, call):
        t = call.tensors
        o, s = self.kernel(t["q"], t["k"], t["v"], t["retention"].float().log(), t["beta"],
                           initial_state=t["state"].float(), output_final_state=True)
        return {"o": o, "state": s}


class KimiShiftedDecay(kimi_linear.KimiLinearKDA):
    """Kimi Linear's chunk fallback fed the decay one token late."""

    def kda_recurrence(self, call):
        return super().kda_recurrence(_shift_decay(call))


class ToyBadCap(k3_toy.ToyK3):
    """The toy expert with the two SiTU caps swapped."""

    name = "toy-bad-cap"

    def expert(self, call):
        cfg, t = call.config(), call.tensors
        return {"y": k3_toy.situ_expert(t["x"], t["gateWeight"], t["upWeight"], t["downWeight"],
                                        cfg.situ_up_cap, cfg.situ_gate_cap)}


def fla_default_scale():
    from fla.ops.kda.naive import naive_recurrent_kda

    return FlaDefaultScale("fla-naive-recurrent-default-scale", naive_recurrent_kda)


def fla_shifted_decay():
    from fla.ops.kda.naive import naive_chunk_kda

    return FlaShiftedDecay("fla-naive-chunk-shifted-decay", naive_chunk_kda, chunk=64)


def kimi_unscaled():
    return KimiUnscaled("kimi-linear-recurrent-unscaled", kimi_linear._fallback("recurrent_kimi_delta_attention"))


def kimi_shifted_decay():
    return KimiShiftedDecay("kimi-linear-chunk-shifted-decay", kimi_linear._fallback("chunk_kimi_delta_attention"))


toy_bad_cap = ToyBadCap()
