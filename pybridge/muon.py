"""Per-Head Muon (report §2.5, p. 10; spec §2.10; the seed's `Training/Muon.lean`).

Muon updates a 2-D weight by an orthogonalized momentum; K3 orthogonalizes the Q, K and V
projections **per attention head**. The Lean side (to be written; the names below are the seed's)
states only the layout and the orthogonalizer contract:

    split m h = [row, column] ↦ m[row, column + columns·h]          (`split`; finProdFinEquiv)
    merge b   = [row, column + columns·h] ↦ b h [row, column]       (`merge`)
    merge (split m) = m,  split (merge b) = b                        (`merge_split`, `split_merge`)
    orthogonalize O m = merge (h ↦ O (split m h))                    (`split_orthogonalize`)
    exact:  MᵀM = I;  approximate: ‖MᵀM − I‖ ≤ ε                     (`HasExactColumnGram`, `HasApproxColumnGram`)

Layout. Lean's matrices are `rows × (heads·columns)` = `[input, output]`, i.e. the hub's
`weight.T` (`pybridge/README.md`, Weights). Each head owns a contiguous block of `columns`
output columns (head-major): hub rows `h·w … h·w + w − 1` of `weight`. The per-head width `w` of
each hub tensor (`head_blocks`): KDA `q_proj`/`k_proj` `head_k_dim`, `v_proj` `head_v_dim`; MLA
`q_b_proj` `qk_nope_head_dim + qk_rope_head_dim` (head h: content then shared part) and
`kv_b_proj` `qk_nope_head_dim + v_head_dim` (head h: key then value), as `pybridge.adapter`'s
`split_heads_linear` lays them out. Every other 2-D weight is orthogonalized whole.

Orientation (spec §6 item 14). The column Gram `MᵀM` of an `r × c` matrix can be `I` only when
`r ≥ c`; a wide block (MLA `q_b`: 10 × 23 in the tiny config) has rank ≤ r, so `gram_residual`
measures the smaller Gram: `‖MᵀM − I‖₂` if `r ≥ c` (the spec's column contract), else
`‖MMᵀ − I‖₂` (the same contract for `Mᵀ`). Norm: spectral (the spec leaves it open).

Why our own step rather than `torch.optim.Muon`: that optimizer orthogonalizes each parameter
whole and runs Newton–Schulz in bfloat16; per-head blocks and measured float64 residuals need
the iteration on blocks in the caller's dtype. Its coefficients, Nesterov momentum and
decoupled weight decay are the ones used here, and a test ties a whole-matrix step to it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable

import torch

from pybridge.config import K3Config
from pybridge.errors import InputError

# The quintic Newton–Schulz coefficients of Keller Jordan's Muon (kellerjordan.github.io/posts/muon,
# 2024), as torch.optim.Muon ships them (`torch/optim/_muon.py`, DEFAULT_A/B/C, DEFAULT_NS_STEPS).
# The report does not give coefficients or a step count (spec §6 item 14).
NS_COEFFICIENTS: tuple[float, float, float] = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5
NS_EPS = 1e-7

Orthogonalizer = Callable[[torch.Tensor], torch.Tensor]


# --- layout: Lean `split` / `merge` -----------------------------------------------------------

def _check_heads(m_rk: torch.Tensor, heads: int, what: str) -> int:
    if m_rk.ndim != 2 or heads < 1 or m_rk.shape[1] % heads != 0:
        raise InputError(f"{what}: a [rows, heads·columns] matrix with {heads} heads is needed, "
                         f"got shape {tuple(m_rk.shape)}")
    return m_rk.shape[1] // heads


def split(m_rk: torch.Tensor, heads: int) -> torch.Tensor:
    """Lean `split`: `[rows, heads·columns]` → `[heads, rows, columns]`, block h column c being
    column `c + columns·h` of `m` (head-major, spec §2.10)."""
    columns = _check_heads(m_rk, heads, "split")
    return m_rk.reshape(m_rk.shape[0], heads, columns).permute(1, 0, 2)


def merge(blocks_hrc: torch.Tensor) -> torch.Tensor:
    """Lean `merge`: `[heads, rows, columns]` → `[rows, heads·columns]`, the inverse of `split`."""
    if blocks_hrc.ndim != 3:
        raise InputError(f"merge: [heads, rows, columns] blocks are needed, got shape {tuple(blocks_hrc.shape)}")
    heads, rows, columns = blocks_hrc.shape
    return blocks_hrc.permute(1, 0, 2).reshape(rows, heads * columns)


def split_reference(m_rk: torch.Tensor, heads: int) -> torch.Tensor:
    """Plain `split`: entry by entry, `out[h, r, c] = m[r, c + columns·h]` (finProdFinEquiv)."""
    columns = _check_heads(m_rk, heads, "split")
    out_hrc = m_rk.new_empty(heads, m_rk.shape[0], columns)
    for h in range(heads):
        for r in range(m_rk.shape[0]):
            for c in range(columns):
                out_hrc[h, r, c] = m_rk[r, c + columns * h]
    return out_hrc


# --- orthogonalizers and the Gram contract ------------------------------------------------------

def orthogonalize_svd(m_rc: torch.Tensor) -> torch.Tensor:
    """The exact orthogonalizer (reference): `U Vᵀ` from the thin SVD `m = U S Vᵀ`; its smaller
    Gram is `I` (exact contract, `ExactMatrixOrthogonalizer`) when `m` has full rank."""
    u_rk, _, vh_kc = torch.linalg.svd(m_rc, full_matrices=False)
    return u_rk @ vh_kc


def newton_schulz(m_rc: torch.Tensor, steps: int = NS_STEPS,
                  coefficients: tuple[float, float, float] = NS_COEFFICIENTS) -> torch.Tensor:
    """Muon's quintic Newton–Schulz iteration in `m`'s dtype: X₀ = m / max(‖m‖_F, eps), then
    `steps` times X ← aX + (b·XXᵀ + c·(XXᵀ)²)X on the wide orientation (XXᵀ the smaller Gram).
    In exact arithmetic X = U φᵏ(S/‖m‖_F) Vᵀ with φ(s) = as + bs³ + cs⁵; the coefficients push
    small singular values up fast but settle in ≈ [0.68, 1.2], not at 1 (approximate contract)."""
    a, b, c = coefficients
    tall = m_rc.shape[0] > m_rc.shape[1]
    x_rc = m_rc.T if tall else m_rc
    x_rc = x_rc / x_rc.norm().clamp(min=NS_EPS)
    for _ in range(steps):
        gram_rr = x_rc @ x_rc.T
        x_rc = a * x_rc + (b * gram_rr + c * gram_rr @ gram_rr) @ x_rc
    return x_rc.T if tall else x_rc


def gram_residual(m_rc: torch.Tensor) -> float:
    """`‖MᵀM − I‖₂` for `rows ≥ columns` (the column-Gram contract), else `‖MMᵀ − I‖₂`."""
    gram_kk = m_rc.T @ m_rc if m_rc.shape[0] >= m_rc.shape[1] else m_rc @ m_rc.T
    eye_kk = torch.eye(gram_kk.shape[0], dtype=gram_kk.dtype, device=gram_kk.device)
    return torch.linalg.matrix_norm(gram_kk - eye_kk, ord=2).item()


def orthogonalize_heads(m_rk: torch.Tensor, heads: int, orth: Orthogonalizer = newton_schulz) -> torch.Tensor:
    """Lean `orthogonalize O m = merge (h ↦ O (split m h))`: each head block separately."""
    return merge(torch.stack([orth(block_rc) for block_rc in split(m_rk, heads)]))


# --- which hub tensors are per head -------------------------------------------------------------

_KDA = re.compile(r"model\.layers\.(\d+)\.self_attn\.(q_proj|k_proj|v_proj)\.weight")
_MLA = re.compile(r"model\.layers\.(\d+)\.self_attn\.(q_b_proj|kv_b_proj)\.weight")


def head_blocks(cfg: K3Config, name: str) -> tuple[int, int] | None:
    """`(heads, columns per head)` of a hub Q/K/V projection (spec layout `weight.T`), or None
    for a weight Muon orthogonalizes whole."""
    if (kda := _KDA.fullmatch(name)) and not cfg.is_mla(int(kda[1])):
        width = cfg.kda_head_v_dim if kda[2] == "v_proj" else cfg.kda_head_k_dim
        return cfg.kda_num_heads, width
    if (mla := _MLA.fullmatch(name)) and cfg.is_mla(int(mla[1])):
        tail = cfg.qk_rope_head_dim if mla[2] == "q_b_proj" else cfg.v_head_dim
        return cfg.num_attention_heads, cfg.qk_nope_head_dim + tail
    return None


# --- the optimizer step -------------------------------------------------------------------------

def muon_update(momentum_oi: torch.Tensor, blocks: tuple[int, int] | None,
                orth: Orthogonalizer = newton_schulz) -> torch.Tensor:
    """The orthogonalized update of a hub weight `[out, in]`: Lean `orthogonalize` on the spec
    layout `momentum.T` (per head when `blocks` is given, else whole), scaled by Moonlight's
    `0.2·√max(rows, columns)` per orthogonalized matrix (Liu et al. 2025, "Muon is Scalable for
    LLM Training", as torch.optim.Muon's `match_rms_adamw`), returned in the hub layout."""
    m_ik = momentum_oi.T
    if blocks is None:
        return (0.2 * math.sqrt(max(m_ik.shape)) * orth(m_ik)).T
    heads, columns = blocks
    if heads * columns != m_ik.shape[1]:
        raise InputError(f"per-head Muon: {heads} heads of width {columns} do not tile the "
                         f"{m_ik.shape[1]} output rows of a weight of shape {tuple(momentum_oi.shape)}")
    scale = 0.2 * math.sqrt(max(m_ik.shape[0], columns))
    return (scale * orthogonalize_heads(m_ik, heads, orth)).T


class PerHeadMuon(torch.optim.Optimizer):
    """Muon with per-head orthogonalization of the Q/K/V projections (spec §2.10).

    Per 2-D hub weight θ with gradient g (torch.optim.Muon's algorithm, Nesterov momentum in its
    lerp form; the orthogonalizer's normalization makes the (1 − μ) factor immaterial):
        B ← μB + (1 − μ)g;  B̃ = (1 − μ)g + μB;  θ ← θ(1 − γλ) − γ · muon_update(B̃)
    `named_params`: (hub name, parameter) pairs, e.g. `model.named_parameters()` filtered to 2-D
    weights; the names decide the layout (`head_blocks`)."""

    def __init__(self, named_params: Iterable[tuple[str, torch.nn.Parameter]], cfg: K3Config,
                 lr: float = 1e-3, momentum: float = 0.95, weight_decay: float = 0.1,
                 orth: Orthogonalizer = newton_schulz) -> None:
        named = list(named_params)
        for name, p in named:
            if p.ndim != 2:
                raise InputError(f"per-head Muon takes 2-D weights only; {name} has shape {tuple(p.shape)}")
        self.blocks = {p: head_blocks(cfg, name) for name, p in named}
        self.orth = orth
        super().__init__([p for _, p in named], {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                buf = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                buf.lerp_(p.grad, 1 - mu)
                nesterov_oi = p.grad.lerp(buf, mu)
                p.mul_(1 - lr * wd).sub_(lr * muon_update(nesterov_oi, self.blocks[p], self.orth))
        return loss
