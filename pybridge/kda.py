"""Kimi Delta Attention (report §2.1.1, spec §2.2).

Per head, with state S [K, V] (rows = key channels, columns = value channels):
    S_t = (I - beta_t k_t k_t^T) Diag(alpha_t) S_{t-1} + beta_t k_t v_t^T
    o_t = scale * S_t^T q_t                  (read AFTER the update)
Kernels take `g = log(alpha)` per key channel (fla's convention) and work in the dtype of
their inputs, so float64 runs are exact up to float64 rounding.

`kda_recurrent` is the plain per-token reference (decode); `kda_chunked` is the chunked
WY form used for prefill (exact algebra, no approximation).
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from pybridge.config import K3Config
from pybridge.layers import RMSNorm, compute_dtype, l2_normalize, lin

CHUNK_SIZE = 16


def kda_recurrent(
    q_bthk: torch.Tensor,
    k_bthk: torch.Tensor,
    v_bthv: torch.Tensor,
    g_bthk: torch.Tensor,
    beta_bth: torch.Tensor,
    scale: float,
    state_bhkv: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-by-token recurrence in the spec's factored order (decay, correct, write, read).
    Computes in `compute_dtype`; returns o in the inputs' dtype and S in the compute dtype."""
    stored = q_bthk.dtype
    q_bthk, k_bthk, v_bthv, g_bthk, beta_bth = _compute(q_bthk, k_bthk, v_bthv, g_bthk, beta_bth)
    B, T, H, K = q_bthk.shape
    S = q_bthk.new_zeros(B, H, K, v_bthv.shape[-1]) if state_bhkv is None else state_bhkv.to(q_bthk.dtype)
    outs = []
    for t in range(T):
        k_bhk, beta_bh = k_bthk[:, t], beta_bth[:, t, :, None]
        decayed = S * g_bthk[:, t].exp()[..., None]
        correction_bhv = torch.einsum("bhk,bhkv->bhv", k_bhk, decayed)
        S = decayed + beta_bh[..., None] * k_bhk[..., None] * (v_bthv[:, t] - correction_bhv)[:, :, None, :]
        outs.append(scale * torch.einsum("bhk,bhkv->bhv", q_bthk[:, t], S))
    return torch.stack(outs, dim=1).to(stored), S


def _compute(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The kernels' inputs in the compute dtype (float32 for bfloat16 storage)."""
    cd = compute_dtype(xs[0].dtype)
    return tuple(x.to(cd) for x in xs)


GROUP_TOKENS = 256  # kda_chunked works through the sequence in groups of whole chunks of about this many tokens
SUB_CHUNK = 16  # kda_chunked: sub-chunk size; decay products are doubled within a sub-chunk, joined at sub-chunk ends across them
LOG2E = 1.4426950408889634  # kda_chunked forms alpha = e^g as 2^(g log2 e): torch's exp2 is about 4x faster than exp on a CPU


def kda_chunked(
    q_bthk: torch.Tensor,
    k_bthk: torch.Tensor,
    v_bthv: torch.Tensor,
    g_bthk: torch.Tensor,
    beta_bth: torch.Tensor,
    scale: float,
    state_bhkv: torch.Tensor | None = None,
    chunk_size: int = CHUNK_SIZE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked KDA: the WY/UT form of fla's chunk kernels, exact algebra, any chunk size C.

    Per head, in a chunk that starts from state S0, with G_t = sum_{r<=t} g_r (per key
    channel, non-increasing since g <= 0) and e_t the value written at token t:

        S_t = Diag(e^{G_t}) S0 + sum_{s<=t} Diag(e^{G_t-G_s}) k_s e_s^T
        e_t = beta_t (v_t - (Diag(e^{G_t}) S0)^T k_t - sum_{s<t} (k_t . e^{G_t-G_s} k_s) e_s)

    so (I + A) E = Diag(beta) (V - K_hat S0), A[t,s] = beta_t k_t . e^{G_t-G_s} k_s for s < t
    (strictly lower triangular), K_hat rows e^{G_t} k_t. With the UT inverse (I + A)^-1:
    E = U - W S0, U = (I + A)^-1 Diag(beta) V, W = (I + A)^-1 Diag(beta) K_hat, computed for
    many chunks at once; then a loop over chunks carries S0:
        O = Q_hat S0 + M E,  M[t,s] = q_t . e^{G_t-G_s} k_s (s <= t),  Q_hat rows e^{G_t} q_t,
        S0 <- Diag(e^{G_C}) S0 + sum_s (e^{G_C-G_s} k_s) e_s^T
    (the loop forms E and Q_hat S0 with one product per chunk; M E is added for all chunks after it).

    Proved (over every scalar field, any chunk sizes, all inputs): this WY/UT form equals the
    token recurrence, `KimiK3.KDA.wyChunkedRun_eq_run` (one chunk: `wyChunk_eq_run`; the
    triangular system (I + A) E = Diag(beta)(V - K_hat S0) with E = U - W S0: `wyValue_solves`),
    lean/KimiK3/Sequence/KDAWYChunk.lean, definitions in KDAWY.lean. There e^{G_t-G_s} is
    D[s+1, t+1) = prod_{s<r<=t} alpha_r, a product of retentions between two positions
    (`decayRange`, every factor in [0, 1]: `decayRange_mem_unit`, exponent <= 0:
    `decayRange_exp_le_one`, KDAWYDecay.lean); the factoring below is D[a, b) = D[a, m) D[m, b)
    (`decayRange_split`, `decayRange_split_of_le`, `decayRange_subchunk`). Trusted: that the
    torch code below computes those definitions (checked against `kda_recurrent`, and against
    the Lean example's exact values in tests/test_kda_wy.py).

    Numerics: the one exponential is the retention alpha_t = e^{g_t} (formed as 2^{g_t log2 e}:
    exp2 is several times faster than exp on a CPU), exponent <= 0, so alpha_t is in [0, 1]. Every
    decay factor is then D[a, b) itself, a product of retentions as the Lean `decayRange` is
    defined, built along D[a, b) = D[a, m) D[m, b), never as e^{G_t} e^{-G_s} (e^{-G_s} reaches
    e^{5C} at the gate floor g = -5; the old e^{±(G - G_mid)} form gave NaN in float32 from
    C = 36). Each chunk is cut into sub-chunks of c = min(C, SUB_CHUNK) tokens starting at b_i (a
    chunk that is not a multiple of c is padded at its end with identity tokens q = k = v = 0,
    beta = g = 0: A is lower triangular, so the leading C x C block of the padded system is the
    chunk's own):
      * s <= t both in sub-chunk i (c padded to a power of two when C < SUB_CHUNK): doubling over
        aligned blocks (`_diagonal_blocks`): in each 2w-block [a, a+2w) (w = 1, 2, ..., c/2), s in
        its first half and t in its second half get D[s+1, t+1) = D[s+1, a+w) D[a+w, t+1), and
        both factors, kept per token, double with the blocks; t = s is 1, s > t stays exactly 0;
      * s in sub-chunk j < i: D[s+1, t+1) = D[s+1, b_{j+1}) D[b_{j+1}, b_i) D[b_i, t+1), the
        middle factor a product of whole sub-chunks (`decayRange_subchunk`);
      * D[0, t+1) = D[0, b_i) D[b_i, t+1) (Q_hat, K_hat), D[s+1, C) = D[s+1, b_{j+1}) D[b_{j+1}, C)
        (K_tail) and the state decay D[0, C).
    So every factor is in [0, 1] whatever C and g are, and a product of factors <= 1 underflows
    only where the exact term is below the dtype's smallest normal number. This changes only how
    e^{G_t-G_s} is evaluated, not the system. The padding tail of the last chunk is an identity
    update too.

    The sequence is processed in groups of whole chunks (about GROUP_TOKENS tokens), so the
    intermediates take O(group) memory, not O(T): they stay in cache, and on a CPU the allocator
    reuses their memory instead of faulting in fresh pages for every tensor (which cost more
    than the arithmetic). Computes in `compute_dtype`; returns o in the inputs' dtype and S in
    the compute dtype.
    """
    stored = q_bthk.dtype
    q_bthk, k_bthk, v_bthv, g_bthk, beta_bth = _compute(q_bthk, k_bthk, v_bthv, g_bthk, beta_bth)
    B, T, H, K = q_bthk.shape
    V, C = v_bthv.shape[-1], chunk_size
    N, per = -(-T // C), max(1, GROUP_TOKENS // C)  # chunks, chunks per group
    S = q_bthk.new_zeros(B * H, K, V) if state_bhkv is None else state_bhkv.to(q_bthk.dtype).reshape(B * H, K, V).clone()
    out = q_bthk.new_empty(B, N, C, H, V)
    for n0 in range(0, N, per):
        t0, t1 = n0 * C, min((n0 + per) * C, T)
        o = _chunk_group(*(x[:, t0:t1] for x in (q_bthk, k_bthk, v_bthv, g_bthk, beta_bth[..., None])), S, C)
        n = o.shape[0]
        torch.mul(o[:, :, :C].view(n, B, H, C, V).permute(1, 0, 3, 2, 4), scale, out=out[:, n0 : n0 + n])
    return out.view(B, N * C, H, V)[:, :T].to(stored), S.view(B, H, K, V)


def _chunk_group(
    q_bthk: torch.Tensor, k_bthk: torch.Tensor, v_bthv: torch.Tensor, g_bthk: torch.Tensor, beta_bth1: torch.Tensor,
    S: torch.Tensor, C: int,
) -> torch.Tensor:
    """`kda_chunked` on a run of whole chunks (the last one may be short): returns o [N, B*H, C', V]
    (unscaled) and advances S [B*H, K, V] in place."""
    B, T, H, K = q_bthk.shape
    N, Cp = -(-T // C), _padded(C)
    qk = q_bthk.new_empty(N, B * H, Cp, 2, K)  # q_t and k_t side by side: one product gives both M and P rows
    _chunks(q_bthk, C, Cp, qk[..., 0, :])
    _chunks(k_bthk, C, Cp, qk[..., 1, :])
    v, beta = _chunks(v_bthv, C, Cp), _chunks(beta_bth1, C, Cp)
    alpha = _chunks(g_bthk, C, Cp, scale=LOG2E).exp2_()  # retentions alpha_t = e^{g_t} = 2^(g_t log2 e), in [0, 1]
    MP, qk_hat, k_tail, decay = _intra_chunk(qk, alpha)
    eye = torch.eye(Cp, dtype=qk.dtype, device=qk.device)
    # X = (I + A)^-1 Diag(beta), A = Diag(beta) P (unit triangular: its zero diagonal is not read);
    # U = X V and W = X K_hat, so E = U - W S0; with eo = [U; 0] and R = [-W; Q_hat] one product
    # per chunk gives [E; Q_hat S0] = eo + R S0, and O = Q_hat S0 + M E is completed after the loop
    X = torch.linalg.solve_triangular(MP[..., 1, :].mul_(beta), eye, upper=False, unitriangular=True).mul_(beta.mT)
    eo, R = v.new_empty(N, B * H, 2 * Cp, v.shape[-1]), qk.new_empty(N, B * H, 2 * Cp, K)  # contiguous chunk blocks
    eo[..., :Cp, :] = X @ v
    eo[..., Cp:, :] = 0
    torch.neg(X @ qk_hat[..., 1, :], out=R[..., :Cp, :])
    R[..., Cp:, :] = qk_hat[..., 0, :]
    E, O = eo[..., :Cp, :], eo[..., Cp:, :]
    for eo_n, E_n, R_n, kt_n, d_n in zip(eo, E, R, k_tail.mT, decay[..., None]):  # S0 <- D[0, C) S0 + K_tail^T E
        eo_n.baddbmm_(R_n, S)
        S.mul_(d_n).baddbmm_(kt_n, E_n)
    return torch.baddbmm(O.flatten(0, 1), MP[..., 0, :].flatten(0, 1), E.flatten(0, 1)).view_as(v)


def _padded(C: int) -> int:
    """C' >= C, the chunk length the intra-chunk products use: the next multiple of SUB_CHUNK when
    C > SUB_CHUNK, else the next power of two (the doubling in `_diagonal_blocks` needs one)."""
    return 1 << (C - 1).bit_length() if C <= SUB_CHUNK else -(-C // SUB_CHUNK) * SUB_CHUNK


def _chunks(
    x_bthd: torch.Tensor, C: int, Cp: int, out: torch.Tensor | None = None, scale: float | None = None
) -> torch.Tensor:
    """[B, T, H, D] -> [N, B*H, C', D] (written into `out` when given, times `scale` when given):
    chunks of C tokens, each zero-padded at its end to C' tokens (the last one also to C)."""
    B, T, H, D = x_bthd.shape
    N, full = -(-T // C), T // C
    out = x_bthd.new_empty(N, B * H, Cp, D) if out is None else out
    if Cp != C or full != N:
        out.zero_()
    dst = out.view(N, B, H, Cp, D)
    parts = [(dst[:full, ..., :C, :], x_bthd[:, : full * C].view(B, full, C, H, D).permute(1, 0, 3, 2, 4))]
    if full != N:
        parts.append((dst[full:, ..., : T - full * C, :], x_bthd[:, full * C :, None].permute(2, 0, 3, 1, 4)))
    for d, src in parts:
        d.copy_(src) if scale is None else torch.mul(src, scale, out=d)
    return out


def _intra_chunk(
    qk: torch.Tensor, alpha: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """From qk [..., C, 2, K] (q_t, k_t) and the retentions alpha [..., C, K] (C <= SUB_CHUNK or a
    multiple of it), with D[a, b) = prod_{a<=r<b} alpha_r (= e^{G_{b-1}-G_{a-1}}): MP [..., C, 2, C]
    with MP[t, 0, s] = M[t,s] = q_t . D[s+1, t+1) k_s (s <= t) and MP[t, 1, s] = P[t,s] =
    k_t . D[s+1, t+1) k_s (s < t), zero elsewhere; qk_hat [..., C, 2, K] (D[0, t+1) q_t and k_t),
    k_tail [..., C, K] (D[s+1, C) k_s) and the chunk's decay D[0, C) [..., K]. How the products
    are split into factors: `kda_chunked`."""
    *lead, C, _, K = qk.shape
    c = min(C, SUB_CHUNK)
    n = C // c
    qks = qk.view(*lead, n, c, 2, K)
    MPd, qk_left, k_right, whole = _diagonal_blocks(qks, alpha.view(*lead, n, c, K))
    # D[b_i, t+1) (q_t, k_t), D[s+1, b_j + c) k_s and D over each whole sub-chunk [..., n, K]
    if n == 1:  # b_0 = 0 and b_0 + c = C: already D[0, t+1) (q_t, k_t) and D[s+1, C) k_s
        return MPd.view(*lead, C, 2, C), qk_left.view_as(qk), k_right.view_as(alpha), whole[..., 0, :]
    MP = qk.new_zeros(*lead, C, 2, C)
    _set_blocks(MP, 0, MPd)
    # blocks (j + d, j): D[s+1, t+1) = D[s+1, b_{j+1}) D[b_{j+1}, b_{j+d}) D[b_{j+d}, t+1), the middle
    # factor the product of whole sub-chunks j+1 .. j+d-1
    r = k_right
    for d in range(1, n):
        r = r[..., : n - d, :, :] if d == 1 else r[..., : n - d, :, :] * whole[..., d - 1 : n - 1, None, :]
        _set_blocks(MP, d, (qk_left[..., d:, :, :, :].flatten(-3, -2) @ r.mT).view(*lead, n - d, c, 2, c))
    upto = whole.cumprod(dim=-2)  # D[0, b_{i+1})
    after = whole.flip(-2).cumprod(dim=-2).flip(-2)  # D[b_j, C)
    qk_left.mul_(F.pad(upto[..., :-1, :], (0, 0, 1, 0), value=1.0)[..., None, None, :])  # D[0, b_i) D[b_i, t+1)
    k_right.mul_(F.pad(after[..., 1:, :], (0, 0, 0, 1), value=1.0)[..., None, :])  # D[s+1, b_{j+1}) D[b_{j+1}, C)
    return MP, qk_left.view_as(qk), k_right.view_as(alpha), upto[..., -1, :]


def _diagonal_blocks(
    qk: torch.Tensor, alpha: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """From qk [..., c, 2, K] (q_t, k_t) and the retentions alpha [..., c, K] (c a power of two),
    D[a, b) = prod_{a<=r<b} alpha_r: MP [..., c, 2, c] with MP[t, 0, s] = M[t,s] =
    q_t . D[s+1, t+1) k_s (s <= t) and MP[t, 1, s] = P[t,s] = k_t . D[s+1, t+1) k_s (s < t), zero
    elsewhere; qk_left [..., c, 2, K] (D[0, t+1) q_t and k_t), k_right [..., c, K] (D[s+1, c) k_s)
    and D[0, c) [..., K].

    Doubling over aligned blocks [a, a+w) of w = 1, 2, 4, ..., c/2 tokens, keeping per token
    qk_left_t = D[a, t+1) (q_t, k_t) and k_right_s = D[s+1, a+w) k_s, and per block D[a, a+w): in
    each 2w-block [a, a+2w), s in its first half A and t in its second half B get
    D[s+1, t+1) = D[s+1, a+w) D[a+w, t+1) (`decayRange_split_of_le`), so one product of the kept
    rows [s in A] x [(t, q|k) in B] gives those entries; then the blocks double: k_right_s *=
    D[a+w, a+2w) in A, qk_left_t *= D[a, a+w) in B, D[a, a+2w) = D[a, a+w) D[a+w, a+2w). w = 1
    (s = t - 1) as dot products; the diagonal t = s is D[t+1, t+1) = 1. Products of retentions
    only: no exponential, no pairwise tensor."""
    *lead, c, _, K = qk.shape
    MP = qk.new_zeros(*lead, c, 2, c)
    MP.diagonal(0, -3, -1)[..., 0, :].copy_(torch.linalg.vecdot(qk[..., 0, :], qk[..., 1, :]))
    # blocks of one token: D[t, t+1) = alpha_t on q_t and k_t, D[s+1, s+1) = 1 on k_s, block decays alpha
    qk_left, k_right, block = qk * alpha[..., None, :], qk[..., 1, :].clone(), alpha
    w = 1
    while w < c:
        m = c // (2 * w)
        qkl6, kr5, block4 = qk_left.view(*lead, m, 2, w, 2, K), k_right.view(*lead, m, 2, w, K), block.view(*lead, m, 2, K)
        if w == 1:  # pairs (2j, 2j+1): dot products (a batch of 1-row products is slow)
            pairs = torch.linalg.vecdot(qkl6[..., 1, 0, :, :], kr5[..., 0, :, :])  # [..., m, 2 (q|k)]
            MP.view(*lead, m, 2, 2, m, 2)[..., :, 1, :, :, 0].diagonal(0, -3, -1).copy_(pairs.mT)
        else:
            blocks = kr5[..., 0, :, :] @ qkl6[..., 1, :, :, :].flatten(-3, -2).mT  # [..., m, w (s), 2w (t, q|k)]
            MP7 = MP.view(*lead, m, 2, w, 2, m, 2, w)[..., :, 1, :, :, :, 0, :]  # rows t in B, columns s in A
            MP7.diagonal(0, -5, -2).copy_(blocks.view(*lead, m, w, w, 2).movedim(-4, -1).movedim(-4, -2))
        kr5[..., 0, :, :].mul_(block4[..., 1, None, :])
        qkl6[..., 1, :, :, :].mul_(block4[..., 0, None, None, :])
        block = block4[..., 0, :] * block4[..., 1, :]
        w *= 2
    return MP, qk_left, k_right, block[..., 0, :]


def _set_blocks(X: torch.Tensor, d: int, blocks: torch.Tensor) -> None:
    """Writes blocks [..., n - d, c, 2, c] into the sub-chunk blocks (j + d, j) of X [..., n*c, 2, n*c]."""
    n, c = X.shape[-1] // blocks.shape[-1], blocks.shape[-1]
    X.view(*X.shape[:-3], n, c, 2, n, c).diagonal(-d, -5, -2).copy_(blocks.movedim(-4, -1))


@dataclass
class KDAState:
    """Causal state of one KDA layer: conv windows (last W-1 projected inputs, stored in the
    model's dtype) and S (kept in the compute dtype, float32 at least, between steps)."""

    conv_q: torch.Tensor  # [B, W-1, H*K]
    conv_k: torch.Tensor  # [B, W-1, H*K]
    conv_v: torch.Tensor  # [B, W-1, H*V]
    recurrent: torch.Tensor  # [B, H, K, V]


class ShortConv(nn.Module):
    """Causal depthwise conv + SiLU. weight [D, 1, W] (nn.Conv1d layout, hub name `*_conv1d`):
    out_t[d] = silu(sum_i weight[d, 0, i] * x_{t-W+1+i}[d]), zero history at the start."""

    def __init__(self, dim: int, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim, 1, width))

    def forward(self, x_btd: torch.Tensor, window_bwd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Computes in the dtype of `x_btd`; the returned window is in the dtype of `window_bwd`."""
        W = self.weight.shape[-1]
        full = torch.cat([window_bwd.to(x_btd.dtype), x_btd], dim=1)  # [B, W-1+T, D]
        out = (full.unfold(1, W, 1) * self.weight[:, 0, :].to(x_btd.dtype)).sum(-1)  # [B, T, D]
        return F.silu(out), full[:, full.shape[1] - (W - 1) :].to(window_bwd.dtype)


class KimiDeltaAttention(nn.Module):
    """KDA sequence mixer; parameter names follow the hub's `KimiDeltaAttention`.

    q, k, v = silu(conv(x W_q)), ...; q, k L2-normalised per head (x / sqrt(|x|^2 + l2_eps));
    g = lower_bound * sigmoid(exp(A_log[h]) * (f_b(f_a(x)) + dt_bias)) per key channel
    (alpha = e^g in (e^lower_bound, 1)); beta = sigmoid(b_proj(x)) per head;
    y = o_proj( RMSNorm_head(o) * o_norm.weight * sigmoid(g_proj(x)) ).
    """

    def __init__(self, cfg: K3Config) -> None:
        super().__init__()
        D, H, K, V = cfg.hidden_size, cfg.kda_num_heads, cfg.kda_head_k_dim, cfg.kda_head_v_dim
        self.H, self.K, self.V = H, K, V
        self.q_proj = nn.Linear(D, H * K, bias=False)
        self.k_proj = nn.Linear(D, H * K, bias=False)
        self.v_proj = nn.Linear(D, H * V, bias=False)
        self.q_conv1d = ShortConv(H * K, cfg.kda_conv_size)
        self.k_conv1d = ShortConv(H * K, cfg.kda_conv_size)
        self.v_conv1d = ShortConv(H * V, cfg.kda_conv_size)
        self.init_decay_scale(cfg)
        self.f_a_proj = nn.Linear(D, cfg.kda_decay_rank, bias=False)
        self.f_b_proj = nn.Linear(cfg.kda_decay_rank, H * K, bias=False)
        self.dt_bias = nn.Parameter(torch.empty(H * K))
        self.b_proj = nn.Linear(D, H, bias=False)
        self.init_output_gate(cfg)
        self.o_norm = RMSNorm(V, cfg.kda_output_norm_eps)
        self.l2_eps = cfg.kda_l2_norm_eps
        self.o_proj = nn.Linear(H * V, D, bias=False)
        self.scale = cfg.kda_query_scale
        self.conv_width = cfg.kda_conv_size
        self.impl = "auto"  # "auto" (chunked for T > 1, recurrent for T == 1) | "chunk" | "recurrent" | "fla"

    def init_decay_scale(self, cfg: K3Config) -> None:
        """K3's decay scale `A_log [H]` and lower bound (the Kimi Linear variant overrides this)."""
        self.A_log = nn.Parameter(torch.empty(self.H))
        self.lower_bound = cfg.kda_gate_lower_bound

    def init_output_gate(self, cfg: K3Config) -> None:
        """K3's full-rank output gate `g_proj` (the Kimi Linear variant overrides this)."""
        self.g_proj = nn.Linear(cfg.hidden_size, self.H * self.V, bias=False)

    def log_decay(self, x_btd: torch.Tensor) -> torch.Tensor:
        """g = log alpha [B, T, H, K]: K3's lower-bounded gate
        g = lower_bound * sigmoid(exp(A_log[h]) * (f_b(f_a(x)) + dt_bias))."""
        B, T, _ = x_btd.shape
        z = (lin(self.f_b_proj, lin(self.f_a_proj, x_btd)) + self.dt_bias.to(x_btd.dtype)).view(B, T, self.H, self.K)
        return self.lower_bound * torch.sigmoid(self.A_log.to(x_btd.dtype).exp()[:, None] * z)

    def output_gate(self, x_btd: torch.Tensor) -> torch.Tensor:
        """The output gate [B, T, H, V]: K3's full-rank sigmoid(g_proj(x))."""
        B, T, _ = x_btd.shape
        return torch.sigmoid(lin(self.g_proj, x_btd)).view(B, T, self.H, self.V)

    def initial_state(self, batch: int, like: torch.Tensor) -> KDAState:
        W, H, K, V = self.conv_width - 1, self.H, self.K, self.V
        z = like.new_zeros
        return KDAState(z(batch, W, H * K), z(batch, W, H * K), z(batch, W, H * V),
                        z(batch, H, K, V, dtype=compute_dtype(like.dtype)))

    def prepare(
        self, x_btd: torch.Tensor, st: KDAState
    ) -> tuple[
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        torch.Tensor,
        tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    ]:
        """Inputs of the recurrence (in the dtype of `x_btd`): q, k (normalised), v, g = log alpha,
        beta, new conv windows (in the dtype of the state's windows)."""
        B, T, _ = x_btd.shape
        q, cq = self.q_conv1d(lin(self.q_proj, x_btd), st.conv_q)
        k, ck = self.k_conv1d(lin(self.k_proj, x_btd), st.conv_k)
        v, cv = self.v_conv1d(lin(self.v_proj, x_btd), st.conv_v)
        q = l2_normalize(q.view(B, T, self.H, self.K), self.l2_eps)
        k = l2_normalize(k.view(B, T, self.H, self.K), self.l2_eps)
        g = self.log_decay(x_btd)
        beta = torch.sigmoid(lin(self.b_proj, x_btd))
        return q, k, v.view(B, T, self.H, self.V), g, beta, (cq, ck, cv)

    def forward(self, x_btd: torch.Tensor, st: KDAState) -> tuple[torch.Tensor, KDAState]:
        """The layer on T new tokens (computed in `compute_dtype`, output in the input's dtype)."""
        B, T, _ = x_btd.shape
        stored, x_btd = x_btd.dtype, x_btd.to(compute_dtype(x_btd.dtype))
        q, k, v, g, beta, convs = self.prepare(x_btd, st)
        impl = self.impl if self.impl != "auto" else ("recurrent" if T == 1 else "chunk")
        if impl == "fla":
            from pybridge.kda_fla import fla_chunk_kda

            o, S = fla_chunk_kda(q, k, v, g, beta, self.scale, st.recurrent.to(x_btd.dtype))
        else:
            kernel = kda_recurrent if impl == "recurrent" else kda_chunked
            o, S = kernel(q, k, v, g, beta, self.scale, st.recurrent.to(x_btd.dtype))
        o = self.o_norm(o) * self.output_gate(x_btd)
        return lin(self.o_proj, o.reshape(B, T, self.H * self.V)).to(stored), KDAState(*convs, S)
