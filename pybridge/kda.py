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
SUB_CHUNK = 16  # kda_chunked: sub-chunk size; e^{G_t-G_s} is factored by halving within a sub-chunk, by sub-chunk ends across them


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
        O = Q_hat S0 + M E = (Q_hat - M W) S0 + M U,  M[t,s] = q_t . e^{G_t-G_s} k_s (s <= t),
        Q_hat rows e^{G_t} q_t,  S0 <- Diag(e^{G_C}) S0 + sum_s (e^{G_C-G_s} k_s) e_s^T.

    Proved (over every scalar field, any chunk sizes, all inputs): this WY/UT form equals the
    token recurrence, `KimiK3.KDA.wyChunkedRun_eq_run` (one chunk: `wyChunk_eq_run`; the
    triangular system (I + A) E = Diag(beta)(V - K_hat S0) with E = U - W S0: `wyValue_solves`),
    lean/KimiK3/Sequence/KDAWYChunk.lean, definitions in KDAWY.lean. There e^{G_t-G_s} is
    D[s+1, t+1) = prod_{s<r<=t} alpha_r, a product of retentions between two positions
    (`decayRange`, every factor in [0, 1]: `decayRange_mem_unit`, exponent <= 0:
    `decayRange_exp_le_one`, KDAWYDecay.lean); the sub-chunk factoring below is
    D[a, b) = D[a, m) D[m, b) (`decayRange_split`, `decayRange_subchunk`). Trusted: that the
    torch code below computes those definitions (checked against `kda_recurrent`, and against
    the Lean example's exact values in tests/test_kda_wy.py).

    Numerics: every exponential this function forms has an exponent <= 0, so every factor is
    in [0, 1]. A and M need e^{G_t-G_s} for s <= t, which is never formed as e^{G_t} e^{-G_s}
    (e^{-G_s} reaches e^{5C} at the gate floor g = -5; the old e^{±(G - G_mid)} form gave NaN in
    float32 from C = 36). Each chunk is cut into sub-chunks of c = min(C, SUB_CHUNK) tokens (a
    chunk that is not a multiple of c is padded at its end with identity tokens q = k = v = 0,
    beta = g = 0: A is lower triangular, so the leading C x C block of the padded system is the
    chunk's own). For sub-chunk i let b_i be G just before it (0 for the first) and E_i G at its
    last token:
      * s <= t both in sub-chunk i (c padded to a power of two when C < SUB_CHUNK): halved
        down to single tokens (`_diagonal_blocks`): in each 2w-block (w = c/2, ..., 1) with
        first half A ending at E_A, t in the second half and s in A get
        e^{G_t-G_s} = e^{G_t-E_A} e^{E_A-G_s}, both exponents <= 0 (G is a cumulative sum of
        g <= 0, non-increasing also after float rounding); t = s is 1, s > t stays exactly 0;
      * s in sub-chunk j < i: e^{G_t-G_s} = e^{G_t-b_i} e^{b_i-E_j} e^{E_j-G_s}, every exponent
        <= 0 because G is non-increasing and s <= (end of j) <= (end of i-1) < t;
      * e^{G_t} = e^{b_i} e^{G_t-b_i} (Q_hat, K_hat), e^{G_C-G_s} = e^{G_C-E_j} e^{E_j-G_s} and
        the state decay e^{G_C}: exponents <= 0.
    So no factor exceeds 1 whatever C and g are, and a product of factors <= 1 underflows only
    where the exact term is below the dtype's smallest normal number. This changes only how
    e^{G_t-G_s} is factored, not the system. The padding tail of the last chunk is an identity
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
    q, k, v, g, beta = (_chunks(x, C) for x in (q_bthk, k_bthk, v_bthv, g_bthk, beta_bth1))
    N, _, Cp, _ = q.shape
    G = g.cumsum_(dim=-2)
    M, P, q_hat, k_hat, k_tail = _intra_chunk(q, k, G)
    eye = torch.eye(Cp, dtype=q.dtype, device=q.device)
    inv = torch.linalg.solve_triangular(P.mul_(beta).add_(eye), eye, upper=False, unitriangular=True)
    inv.mul_(beta.mT)  # (I + A)^-1 Diag(beta)
    V = v.shape[-1]
    # X = [I; M] (I + A)^-1 Diag(beta); eo = X V = [U; M U] and R = -X K_hat = [-W; -M W], then Q_hat
    # added to -M W: R = [-W; Q] with Q = Q_hat - M W, so that one product per chunk gives
    # [e; o] = eo + R S0 = [U - W S0; M U + Q S0] (O = Q_hat S0 + M E = Q S0 + M U)
    X = torch.cat([inv, M @ inv], dim=-2)  # [N, B*H, 2C', C']
    eo, R = X @ v, X @ k_hat.neg_()  # [N, B*H, 2C', V], [N, B*H, 2C', K]: contiguous, updated in place below
    R[..., Cp:, :].add_(q_hat)
    decay = G[..., -1:, :].mT.exp()  # [N, B*H, K, 1]
    for n in range(N):  # S0 <- Diag(e^{G_C}) S0 + K_tail^T e
        eo[n].baddbmm_(R[n], S)
        S.mul_(decay[n]).baddbmm_(k_tail[n].mT, eo[n, :, :Cp])
    return eo[..., Cp:, :]


def _chunks(x_bthd: torch.Tensor, C: int) -> torch.Tensor:
    """[B, T, H, D] -> [N, B*H, C', D]: chunks of C tokens (the last one zero-padded), each
    zero-padded at its end to C' (the next multiple of SUB_CHUNK when C > SUB_CHUNK, else the next power of two)."""
    B, T, H, D = x_bthd.shape
    N = -(-T // C)
    Cp = 1 << (C - 1).bit_length() if C <= SUB_CHUNK else -(-C // SUB_CHUNK) * SUB_CHUNK
    if N * C != T:
        x_bthd = F.pad(x_bthd, (0, 0, 0, 0, 0, N * C - T))
    out = x_bthd.new_zeros(N, B, H, Cp, D) if Cp != C else x_bthd.new_empty(N, B, H, Cp, D)
    out[..., :C, :] = x_bthd.view(B, N, C, H, D).permute(1, 0, 3, 2, 4)
    return out.view(N, B * H, Cp, D)


def _intra_chunk(
    q: torch.Tensor, k: torch.Tensor, G: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """From q, k, G [..., C, K] (C <= SUB_CHUNK or a multiple of it): M[t,s] = q_t . e^{G_t-G_s} k_s
    (s <= t) and P[t,s] = k_t . e^{G_t-G_s} k_s (s < t), zero elsewhere ([..., C, C]);
    q_hat_t = e^{G_t} q_t, k_hat_t = e^{G_t} k_t and k_tail_s = e^{G_C-G_s} k_s ([..., C, K]).
    The factorization of e^{G_t-G_s} by sub-chunks is described in `kda_chunked`."""
    *lead, C, K = G.shape
    c = min(C, SUB_CHUNK)
    n = C // c
    qs, ks, Gs = (x.view(*lead, n, c, K) for x in (q, k, G))
    E = Gs[..., -1, :]  # [..., n, K]: G at the end of each sub-chunk
    b = F.pad(E[..., :-1, :], (0, 0, 1, 0))  # G before each sub-chunk (0 before the first)
    M, P = q.new_zeros(*lead, C, C), q.new_zeros(*lead, C, C)
    # (in-place ops below: on a CPU a fresh [N, B*H, C, K] buffer costs more in page faults than the op)
    # blocks on the diagonal: halved down to single tokens (`_diagonal_blocks`), every exponent <= 0
    Md, Pd = _diagonal_blocks(qs, ks, Gs)
    _set_blocks(M, 0, Md)
    _set_blocks(P, 0, Pd)
    del Md, Pd
    left = (Gs - b[..., None, :]).exp_()  # e^{G_t-b_i} <= 1
    q_left = qs * left
    k_left = left.mul_(ks)
    right = (E[..., None, :] - Gs).exp_().mul_(ks)  # e^{E_j-G_s} k_s, the factor <= 1
    if n > 1:
        # blocks (j + d, j): e^{G_t-G_s} = e^{G_t-b_{j+d}} e^{E_{j+d-1}-E_j} e^{E_j-G_s}, each <= 1
        for d in range(1, n):
            r = right[..., : n - d, :, :]
            if d > 1:
                r = r * (E[..., d - 1 : n - 1, :] - E[..., : n - d, :]).exp()[..., None, :]
            _set_blocks(M, d, q_left[..., d:, :, :] @ r.mT)
            _set_blocks(P, d, k_left[..., d:, :, :] @ r.mT)
        eb = b.exp()[..., None, :]  # e^{G_t} = e^{G_t-b_i} e^{b_i}
        q_left.mul_(eb)
        k_left.mul_(eb)
        right.mul_((E[..., -1:, :] - E).exp()[..., None, :])  # e^{G_C-G_s} = e^{G_C-E_j} e^{E_j-G_s}
    # with n = 1, b = 0 and E = G_C: left is already e^{G_t}, right e^{G_C-G_s}
    return M, P, q_left.view_as(q), k_left.view_as(k), right.view_as(k)


def _diagonal_blocks(q: torch.Tensor, k: torch.Tensor, G: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """From q, k, G [..., c, K] (c a power of two, G non-increasing along c): M[t,s] = q_t . e^{G_t-G_s} k_s
    (s <= t) and P[t,s] = k_t . e^{G_t-G_s} k_s (s < t), zero elsewhere ([..., c, c]). Halving: for
    w = c/2, c/4, ..., 1, each 2w-block's second half B after its first half A (last G: E_A) gets
    e^{G_t-G_s} = e^{G_t-E_A} e^{E_A-G_s}, both exponents <= 0 (t after A's end, s at or before
    it); the diagonal t = s is e^0 = 1. log2(c) passes of c K exponentials, no pairwise tensor."""
    *lead, c, K = G.shape
    M, P = q.new_zeros(*lead, c, c), q.new_zeros(*lead, c, c)
    M.diagonal(0, -2, -1).copy_((q * k).sum(-1))
    w = c // 2
    while w >= 1:
        m = c // (2 * w)
        q6, k6, G6 = (x.view(*lead, m, 2, w, K) for x in (q, k, G))
        E_A = G6[..., 0, w - 1 : w, :]  # [..., m, 1, K]
        left = (G6[..., 1, :, :] - E_A).exp_()  # e^{G_t-E_A}, t in B
        right = (E_A - G6[..., 0, :, :]).exp_().mul_(k6[..., 0, :, :])  # e^{E_A-G_s} k_s, s in A
        _set_halves(M, (q6[..., 1, :, :] * left) @ right.mT)
        _set_halves(P, left.mul_(k6[..., 1, :, :]) @ right.mT)
        w //= 2
    return M, P


def _set_halves(X: torch.Tensor, blocks: torch.Tensor) -> None:
    """Writes blocks [..., m, w, w] into X [..., c, c] (c = 2 m w) at rows of the second half and
    columns of the first half of each 2w-block on the diagonal."""
    m, w = blocks.shape[-3], blocks.shape[-1]
    Xv = X.view(*X.shape[:-2], m, 2, w, m, 2, w).select(-2, 0).select(-4, 1)  # [..., m, w, m, w]
    Xv.diagonal(0, -4, -2).copy_(blocks.movedim(-3, -1))


def _set_blocks(X: torch.Tensor, d: int, blocks: torch.Tensor) -> None:
    """Writes blocks [..., n - d, c, c] into the sub-chunk blocks (j + d, j) of X [..., n*c, n*c]."""
    n, c = X.shape[-1] // blocks.shape[-1], blocks.shape[-1]
    X.view(*X.shape[:-2], n, c, n, c).diagonal(-d, -4, -2).copy_(blocks.movedim(-3, -1))


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
