"""Context-parallel KDA prefill over torch.distributed (report §5.1; k3-spec §2.2 "chunk / scan
algebra" and §6 "Context parallelism for KDA").

Each rank holds one contiguous segment of the sequence. A segment acts on a head's state
S [K, V] as the affine map S -> A S + B (`AffineSummary`, A [K, K] acting by left
multiplication, B [K, V]), one map per batch row and head. A rank

1. computes its segment's summary (A, B) without knowing its incoming state,
2. all-gathers the summaries (a fixed [B, H, K, K + V] per rank: communication does not
   depend on the segment's length),
3. composes the summaries of the ranks before it, in order (`compose`), and applies the result
   to the sequence's initial state: that is its incoming state,
4. runs the chunked kernel on its segment from that state.

The Python here mirrors the Lean definitions of `lean/KimiK3/Sequence/Kernel.lean`:
`AffineSummary` (transition, offset), `apply`, `id`, `andThen`, `compose` (first element applied
first, a right fold), `KDA.tokenSummary` (A = (I - beta k k^T) Diag(alpha), B = beta k v^T) and
`KDA.segmentSummary` (the composed token summaries). Lean proves, over the scalar laws, that
the composed summary acts as the composition (`AffineSummary.apply_andThen`,
`apply_compose`), that composition is associative (`andThen_assoc`) but not commutative
(`andThen_not_comm_example`), that a segment's summary acts as running KDA over it
(`KDA.apply_segmentSummary`) and that segment summaries compose along concatenation
(`KDA.segmentSummary_append`). Together these say that the incoming state of step 3 is the
state the token-by-token recurrence reaches at the segment's start; the collective itself
(all-gather) and the floating-point kernels are not covered by those proofs (docs/parallel.md).

Written here rather than taken from a library: fla's context-parallel KDA is a Triton/CUDA
kernel, and this machine runs torch on CPU with gloo; the collective is torch.distributed's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from pybridge.errors import InputError
from pybridge.kda import kda_chunked, kda_recurrent
from pybridge.layers import compute_dtype


@dataclass(frozen=True)
class AffineSummary:
    """Lean `AffineSummary`: the map S -> A S + B, per batch row and head."""

    transition_bhkk: torch.Tensor  # A
    offset_bhkv: torch.Tensor  # B


def apply(s: AffineSummary, state_bhkv: torch.Tensor) -> torch.Tensor:
    """Lean `AffineSummary.apply`: A S + B."""
    return s.transition_bhkk @ state_bhkv + s.offset_bhkv


def identity(like_bhkv: torch.Tensor) -> AffineSummary:
    """Lean `AffineSummary.id`: (I, 0), the summary of an empty segment."""
    *lead, K, _ = like_bhkv.shape
    eye_bhkk = torch.eye(K, dtype=like_bhkv.dtype, device=like_bhkv.device).expand(*lead, K, K)
    return AffineSummary(eye_bhkk, torch.zeros_like(like_bhkv))


def and_then(first: AffineSummary, second: AffineSummary) -> AffineSummary:
    """Lean `AffineSummary.andThen`: `first`, then `second`: (A2 A1, A2 B1 + B2)."""
    A2 = second.transition_bhkk
    return AffineSummary(A2 @ first.transition_bhkk, A2 @ first.offset_bhkv + second.offset_bhkv)


def compose(summaries: list[AffineSummary], like_bhkv: torch.Tensor) -> AffineSummary:
    """Lean `AffineSummary.compose` (the seed's `composeAll`): the first element is applied first;
    the right fold `compose (s :: ss) = andThen s (compose ss)`, `compose [] = id`."""
    acc = identity(like_bhkv)
    for s in reversed(summaries):
        acc = and_then(s, acc)
    return acc


def token_summary(k_bhk: torch.Tensor, v_bhv: torch.Tensor, g_bhk: torch.Tensor, beta_bh: torch.Tensor) -> AffineSummary:
    """Lean `KDA.tokenSummary`: A[r, s] = (delta_rs - beta k_r k_s) alpha_s with alpha = e^g,
    B = beta k v^T."""
    K = k_bhk.shape[-1]
    eye_kk = torch.eye(K, dtype=k_bhk.dtype, device=k_bhk.device)
    bk_bhk = beta_bh[..., None] * k_bhk
    A_bhkk = (eye_kk - bk_bhk[..., :, None] * k_bhk[..., None, :]) * g_bhk.exp()[..., None, :]
    return AffineSummary(A_bhkk, bk_bhk[..., :, None] * v_bhv[..., None, :])


def segment_summary_reference(
    k_bthk: torch.Tensor, v_bthv: torch.Tensor, g_bthk: torch.Tensor, beta_bth: torch.Tensor
) -> AffineSummary:
    """Lean `KDA.segmentSummary`, plainly: `compose` of the token summaries (O(T K^3))."""
    B, T, H, K = k_bthk.shape
    like_bhkv = k_bthk.new_zeros(B, H, K, v_bthv.shape[-1])
    return compose([token_summary(k_bthk[:, t], v_bthv[:, t], g_bthk[:, t], beta_bth[:, t]) for t in range(T)], like_bhkv)


def segment_summary(
    k_bthk: torch.Tensor, v_bthv: torch.Tensor, g_bthk: torch.Tensor, beta_bth: torch.Tensor
) -> AffineSummary:
    """The segment's summary with the chunked kernel (one pass, in `compute_dtype`).

    The KDA update acts on every column S[:, c] of the state by the same affine map
    x -> (I - beta k k^T) Diag(alpha) x + beta k v_c. Running the kernel on the widened state
    [I | 0] ([K, K + V]) with values [0 | v] therefore carries the first K columns through the
    linear part alone, to A I = A, and the last V columns from 0, to B: the final state is
    [A | B]. (The kernel's outputs, read with k as the query, are not used.)"""
    B, T, H, K = k_bthk.shape
    V = v_bthv.shape[-1]
    cd = compute_dtype(k_bthk.dtype)
    wide_bthw = torch.cat([v_bthv.new_zeros(B, T, H, K), v_bthv], dim=-1).to(cd)
    start_bhkw = torch.cat([torch.eye(K, dtype=cd).expand(B, H, K, K), torch.zeros(B, H, K, V, dtype=cd)], dim=-1)
    _, final_bhkw = kda_chunked(k_bthk, k_bthk, wide_bthw, g_bthk, beta_bth, 1.0, start_bhkw)
    return AffineSummary(final_bhkw[..., :K].contiguous(), final_bhkw[..., K:].contiguous())


def incoming_state(summaries: list[AffineSummary], rank: int, state_bhkv: torch.Tensor) -> torch.Tensor:
    """The state entering segment `rank`: the earlier ranks' summaries composed in order, applied
    to the sequence's initial state."""
    return apply(compose(summaries[:rank], state_bhkv), state_bhkv)


def kda_context_parallel(
    q_bthk: torch.Tensor,
    k_bthk: torch.Tensor,
    v_bthv: torch.Tensor,
    g_bthk: torch.Tensor,
    beta_bth: torch.Tensor,
    scale: float,
    state_bhkv: torch.Tensor | None = None,
    group: dist.ProcessGroup | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """KDA prefill of this rank's segment (ranks hold consecutive segments in rank order, of any
    lengths >= 1). `state_bhkv` is the state before the whole sequence (the same on every rank;
    zero if None). Returns this segment's outputs and the state after it (the sequence's final
    state on the last rank). Collectives: one all-gather of the shapes (checked equal), one of
    the summaries; both bounded by the process group's timeout."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    B, T, H, K = k_bthk.shape
    V = v_bthv.shape[-1]
    if T < 1:
        raise InputError(f"context-parallel KDA: the segment of rank {rank} is empty (every rank needs >= 1 token)")
    shape = torch.tensor([B, H, K, V], dtype=torch.int64)
    shapes = [torch.empty_like(shape) for _ in range(world)]
    dist.all_gather(shapes, shape, group=group)
    if any(not torch.equal(s, shape) for s in shapes):
        raise InputError(f"context-parallel KDA: ranks disagree on [batch, heads, key_dim, value_dim]: {[s.tolist() for s in shapes]}")
    if state_bhkv is not None and list(state_bhkv.shape) != [B, H, K, V]:
        raise InputError(f"context-parallel KDA: rank {rank}'s initial state has shape {list(state_bhkv.shape)}, not {[B, H, K, V]}")
    cd = compute_dtype(q_bthk.dtype)
    s0_bhkv = torch.zeros(B, H, K, V, dtype=cd) if state_bhkv is None else state_bhkv.to(cd)
    local = segment_summary(k_bthk, v_bthv, g_bthk, beta_bth)
    packed_bhkw = torch.cat([local.transition_bhkk, local.offset_bhkv], dim=-1)
    gathered = [torch.empty_like(packed_bhkw) for _ in range(world)]
    dist.all_gather(gathered, packed_bhkw, group=group)
    summaries = [AffineSummary(p[..., :K], p[..., K:]) for p in gathered]
    return kda_chunked(q_bthk, k_bthk, v_bthv, g_bthk, beta_bth, scale, incoming_state(summaries, rank, s0_bhkv))


def kda_context_parallel_reference(
    segments: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]],
    scale: float,
    state_bhkv: torch.Tensor,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The same composition in one process, plainly: each segment's `segment_summary_reference`,
    each incoming state from `incoming_state`, then the per-token `kda_recurrent`. `segments`
    holds (q, k, v, g, beta) per rank; returns (outputs, state after) per rank."""
    summaries = [segment_summary_reference(k, v, g, beta) for _, k, v, g, beta in segments]
    return [kda_recurrent(*seg, scale, incoming_state(summaries, r, state_bhkv)) for r, seg in enumerate(segments)]
