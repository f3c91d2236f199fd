"""Built-in adapters: fla's KDA kernels (`fla.ops.kda`) as `kda_recurrence`.

The mapping is exact: fla's `g` is the log-space per-channel decay, `g = log α` (K3's retention
α), computed in float32 from the stored α as pybridge's layer does; `beta`, the `[B, H, K, V]`
state layout (fla's default `state_v_first=False`) and `initial_state` are K3's; the readout
scale is passed explicitly as K3's 1 (fla defaults to K^-1/2). `naive_chunk_kda` needs T to be a
multiple of its chunk: the adapter pads with q = k = v = 0, g = 0, β = 0 tokens, each an identity
update of the state (the same padding as `pybridge.kda.kda_chunked`), and drops their outputs.

fla's naive kernels compute in float32 whatever the input dtype (`.to(torch.float)`), so they are
checked at float32 and bfloat16 storage only. `fused_recurrent_kda` and `chunk_kda` are Triton
kernels: covered on CUDA, `NotCovered` elsewhere. The other components are not kernels fla
provides as such (fla's layers differ from K3's as Kimi Linear does, `difftest.adapters.kimi_linear`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from difftest.adapters import Call, NotCovered

LAYERS = NotCovered("fla provides kernels here, not K3's layers (its KDA layer is Kimi Linear's: "
                    "see the kimi-linear adapters)")


def kernel_args(call: Call) -> tuple[torch.Tensor, ...]:
    """(q, k, v, g, beta, initial_state) from the case, g = log α in float32."""
    t = call.tensors
    return t["q"], t["k"], t["v"], t["retention"].float().log(), t["beta"], t["state"]


def pad_to(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """`x` [B, T, ...] padded with zero tokens to a multiple of `chunk`."""
    pad = (-x.shape[1]) % chunk
    return F.pad(x, (0, 0) * (x.dim() - 2) + (0, pad)) if pad else x


class FlaKDA:
    """fla's `kda_recurrence` kernel `kernel` (its keyword signature: scale, initial_state,
    output_final_state)."""

    dtypes = ("float32", "bfloat16")

    def __init__(self, name: str, kernel: Callable, chunk: int | None = None, cuda_only: bool = False):
        self.name, self.kernel, self.chunk = name, kernel, chunk
        self.description = f"fla.ops.kda {name.removeprefix('fla-')}: g = log α, scale 1" + (
            f", padded to chunks of {chunk}" if chunk else "")
        if cuda_only and not torch.cuda.is_available():
            self.kda_recurrence = NotCovered(f"fla's {kernel.__name__} is a Triton kernel: needs CUDA, torch sees none")
        else:
            self.kda_recurrence = self.run
        for comp in ("expert", "latent_moe", "kda_layer", "mla", "attnres", "decoder_step"):
            setattr(self, comp, LAYERS)

    def run(self, call: Call) -> dict[str, torch.Tensor]:
        q, k, v, g, beta, s0 = kernel_args(call)
        T = q.shape[1]
        if self.chunk:
            q, k, v, g, beta = (pad_to(x, self.chunk) for x in (q, k, v, g, beta))
            o, s = self.kernel(q, k, v, g, beta, scale=1.0, initial_state=s0.float(), output_final_state=True,
                               chunk_size=self.chunk)
        else:
            o, s = self.kernel(q, k, v, g, beta, scale=1.0, initial_state=s0.float(), output_final_state=True)
        return {"o": o[:, :T], "state": s}


def naive_recurrent() -> FlaKDA:
    from fla.ops.kda.naive import naive_recurrent_kda

    return FlaKDA("fla-naive-recurrent", naive_recurrent_kda)


def naive_chunk() -> FlaKDA:
    from fla.ops.kda.naive import naive_chunk_kda

    return FlaKDA("fla-naive-chunk", naive_chunk_kda, chunk=64)


def fused_recurrent() -> FlaKDA:
    from fla.ops.kda import fused_recurrent_kda

    return FlaKDA("fla-fused-recurrent", fused_recurrent_kda, cuda_only=True)


def chunk() -> FlaKDA:
    from fla.ops.kda import chunk_kda

    return FlaKDA("fla-chunk", chunk_kda, cuda_only=True)
