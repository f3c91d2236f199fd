"""Built-in adapters: transformers' Kimi Linear (`transformers.models.kimi_linear`).

Covered: `kda_recurrence`, by the torch fallbacks `recurrent_kimi_delta_attention` and
`chunk_kimi_delta_attention` (their undecorated `__wrapped__` functions: with fla installed the
decorated names dispatch to fla's Triton kernels). The mapping: `g = log α` (float32, as the
layer computes its gate), K3's `beta` and `[B, H, K, V]` state. The kernels hard-code the query
scale K^-1/2; K3's readout scale is 1, so the adapter passes `q · √K` (one extra rounding of q,
inside the stage's input rounding budget). The kernels compute in float32 whatever the input
dtype, so they are checked at float32 and bfloat16 storage only.

Not covered, where Kimi Linear's architecture differs from K3 (no exact mapping exists):
the layers' gates, norms and experts (`NOT_COVERED`). Checking those needs the Kimi Linear
variant of the spec (issue 17, item 3), not yet in the spec.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from difftest.adapters import Call, NotCovered

NOT_COVERED = {
    "kda_layer": "Kimi Linear's decay gate is −exp(A_log)·softplus(f + dt_bias), not K3's lower-bounded sigmoid; "
                 "its output gate is low-rank; its kernels hard-code the K^-1/2 query scale",
    "mla": "Kimi Linear's MLA has no output gate (K3: y = W_o (attn ⊙ σ(x W_g)))",
    "expert": "Kimi Linear's experts are SwiGLU (SiLU(xG) ⊙ xU), K3's SiTU soft-caps both branches",
    "latent_moe": "Kimi Linear's MoE is DeepSeek-style SwiGLU without the latent projection, with a routed scaling factor",
    "attnres": "Kimi Linear has plain residual connections, no AttnRes depth state",
    "decoder_step": "the whole model differs in the layers above",
}


class KimiLinearKDA:
    """A Kimi Linear KDA kernel (torch fallback) as K3's `kda_recurrence`."""

    dtypes = ("float32", "bfloat16")

    def __init__(self, name: str, kernel: Callable):
        self.name, self.kernel = name, kernel
        self.description = f"transformers {kernel.__name__} (torch fallback): g = log α, q·√K against its K^-1/2 scale"
        for comp, reason in NOT_COVERED.items():
            setattr(self, comp, NotCovered(reason))

    def kda_recurrence(self, call: Call) -> dict[str, torch.Tensor]:
        t = call.tensors
        q, K = t["q"], t["q"].shape[-1]
        o, s = self.kernel(q.float() * K**0.5, t["k"], t["v"], t["retention"].float().log(), t["beta"],
                           initial_state=t["state"].float(), output_final_state=True)
        return {"o": o, "state": s}


def _fallback(name: str) -> Callable:
    from transformers.models.kimi_linear import modeling_kimi_linear

    fn = getattr(modeling_kimi_linear, name)
    return getattr(fn, "__wrapped__", fn)


def recurrent() -> KimiLinearKDA:
    return KimiLinearKDA("kimi-linear-recurrent", _fallback("recurrent_kimi_delta_attention"))


def chunk() -> KimiLinearKDA:
    return KimiLinearKDA("kimi-linear-chunk", _fallback("chunk_kimi_delta_attention"))
