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
L2_EPS = 1e-6


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
    """Chunked KDA. Inside a chunk with cumulative log-decay G_t = sum_{s<=t} g_s:

        S_t = Diag(e^{G_t}) S0 + sum_{s<=t} Diag(e^{G_t - G_s}) k_s e_s^T
        e_t = beta_t (v_t - (Diag(e^{G_t}) S0)^T k_t - sum_{s<t} (k_t . e^{G_t-G_s} k_s) e_s)

    so (I + A) e = Diag(beta) (V - Khat S0) with A strictly lower triangular; a unit
    triangular solve gives e = U - W S0 for all chunks at once, then a short loop over
    chunks carries S0. Requires every chunk's accumulated log-decay to stay above about -160
    in float32 (the model guarantees >= 16 * lower_bound = -80). The padding tail
    (k = v = q = 0, beta = 0, g = 0) is an identity update. Computes in `compute_dtype`;
    returns o in the inputs' dtype and S in the compute dtype.
    """
    stored = q_bthk.dtype
    q_bthk, k_bthk, v_bthv, g_bthk, beta_bth = _compute(q_bthk, k_bthk, v_bthv, g_bthk, beta_bth)
    B, T, H, K = q_bthk.shape
    V = v_bthv.shape[-1]
    C = chunk_size
    pad = (-T) % C
    if pad:
        q_bthk, k_bthk, v_bthv, g_bthk = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q_bthk, k_bthk, v_bthv, g_bthk))
        beta_bth = F.pad(beta_bth, (0, 0, 0, pad))
    N = (T + pad) // C

    def chunks(x: torch.Tensor) -> torch.Tensor:  # [B, T, H, ...] -> [B, H, N, C, ...]
        return x.reshape(B, N, C, H, *x.shape[3:]).transpose(2, 3).transpose(1, 2)

    q, k, v, g, beta = map(chunks, (q_bthk, k_bthk, v_bthv, g_bthk, beta_bth))
    G = g.cumsum(dim=-2)  # [B,H,N,C,K]
    # e^{G_t - G_s} = e^{G_t - m} e^{m - G_s} with m the chunk's middle value: both factors
    # stay within e^{±40} when every g >= -5 (chunk total >= -80), safe in float32.
    Gm = G - G[..., C // 2 : C // 2 + 1, :]
    k_pos, k_neg, q_pos = k * Gm.exp(), k * (-Gm).exp(), q * Gm.exp()
    A = (k_pos @ k_neg.transpose(-1, -2)).tril(-1) * beta[..., None]  # A[t,s] = beta_t k_t.e^{G_t-G_s}k_s
    M = (q_pos @ k_neg.transpose(-1, -2)).tril()  # M[t,s] = q_t.e^{G_t-G_s}k_s, s <= t
    eye = torch.eye(C, dtype=q.dtype, device=q.device)
    k_hat = k * G.exp()  # Diag(e^{G_t}) applied to k_t
    rhs = torch.cat([beta[..., None] * v, beta[..., None] * k_hat], dim=-1)
    sol = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
    U, W = sol[..., :V], sol[..., V:]  # e = U - W S0
    q_hat = q * G.exp()
    G_last = G[..., -1:, :]  # [B,H,N,1,K]
    k_tail = k * (G_last - G).exp()  # e^{G_C - G_s} k_s

    S = q.new_zeros(B, H, K, V) if state_bhkv is None else state_bhkv.to(q.dtype)
    outs = []
    for n in range(N):
        e = U[:, :, n] - W[:, :, n] @ S  # [B,H,C,V]
        outs.append(q_hat[:, :, n] @ S + M[:, :, n] @ e)
        S = G_last[:, :, n, 0, :, None].exp() * S + k_tail[:, :, n].transpose(-1, -2) @ e
    o = torch.stack(outs, dim=2).reshape(B, H, N * C, V).transpose(1, 2)[:, :T]
    return (scale * o).to(stored), S


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

    q, k, v = silu(conv(x W_q)), ...; q, k L2-normalised per head (x / sqrt(|x|^2 + 1e-6));
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
        self.A_log = nn.Parameter(torch.empty(H))
        self.f_a_proj = nn.Linear(D, cfg.kda_decay_rank, bias=False)
        self.f_b_proj = nn.Linear(cfg.kda_decay_rank, H * K, bias=False)
        self.dt_bias = nn.Parameter(torch.empty(H * K))
        self.b_proj = nn.Linear(D, H, bias=False)
        self.g_proj = nn.Linear(D, H * V, bias=False)
        self.o_norm = RMSNorm(V, cfg.rms_norm_eps)
        self.o_proj = nn.Linear(H * V, D, bias=False)
        self.lower_bound = cfg.kda_gate_lower_bound
        self.scale = cfg.kda_query_scale
        self.conv_width = cfg.kda_conv_size
        self.impl = "auto"  # "auto" (chunked for T > 1, recurrent for T == 1) | "chunk" | "recurrent" | "fla"

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
        q = l2_normalize(q.view(B, T, self.H, self.K), L2_EPS)
        k = l2_normalize(k.view(B, T, self.H, self.K), L2_EPS)
        z = (lin(self.f_b_proj, lin(self.f_a_proj, x_btd)) + self.dt_bias.to(x_btd.dtype)).view(B, T, self.H, self.K)
        g = self.lower_bound * torch.sigmoid(self.A_log.to(x_btd.dtype).exp()[:, None] * z)
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
        gate = torch.sigmoid(lin(self.g_proj, x_btd)).view(B, T, self.H, self.V)
        o = self.o_norm(o) * gate
        return lin(self.o_proj, o.reshape(B, T, self.H * self.V)).to(stored), KDAState(*convs, S)
