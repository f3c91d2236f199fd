"""Optional CUDA path: fla's Triton `chunk_kda` kernel (GPU only).

We pass the already prepared inputs (L2-normalised q, k; g = log alpha; beta after the
sigmoid) and our explicit readout scale, so the kernel computes the same function as
`pybridge.kda.kda_chunked`; `tests/test_kda.py` compares them when a GPU is present.
The state layout is [B, H, K, V] on both sides (fla's default `state_v_first=False`).
"""

import torch

from pybridge.errors import InputError


def fla_chunk_kda(
    q_bthk: torch.Tensor,
    k_bthk: torch.Tensor,
    v_bthv: torch.Tensor,
    g_bthk: torch.Tensor,
    beta_bth: torch.Tensor,
    scale: float,
    state_bhkv: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    if not q_bthk.is_cuda:
        raise InputError("kda impl 'fla' needs CUDA tensors; use 'auto' on CPU")
    try:
        from fla.ops.kda import chunk_kda
    except ImportError as e:
        raise InputError(f"kda impl 'fla' needs the flash-linear-attention package ({e})") from None
    o, S = chunk_kda(
        q_bthk,
        k_bthk,
        v_bthv,
        g_bthk,
        beta_bth,
        scale=scale,
        initial_state=state_bhkv,
        output_final_state=True,
    )
    return o, S
