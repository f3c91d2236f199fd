"""Gated MLA without positional encoding (report §2.1.2, spec §2.3).

Per token x (hub names; spec names in brackets):
    c_q  = RMSNorm(q_a_proj x) * q_a_layernorm.weight                [queryLatent]
    (both latent RMSNorms use `mla_latent_norm_eps`, default 1e-6 as the hub hard-codes)
    [c_kv | k_s] = kv_a_proj_with_mqa x; c_kv = RMSNorm(c_kv) * w    [latent (cached), sharedKey (cached, unrotated)]
    per head h: [qC_h | qS_h] = (q_b_proj c_q)_h ; [K_h | V_h] = (kv_b_proj c_kv)_h
    score_h[j] = score_scale * (qC_h . K_h[j] + qS_h . k_s[j])   over cached j <= t (self included)
    o_h = softmax_j(score_h) V_h ;  y = o_proj( sigmoid(g_proj x) * concat_h o_h )
Only (c_kv, k_s) are cached: kv_lora_rank + qk_rope_head_dim numbers per token.
"""

from dataclasses import dataclass

import torch
from torch import nn

from pybridge.config import K3Config
from pybridge.layers import RMSNorm, compute_dtype, lin


@dataclass
class MLACache:
    """The latent KV cache, stored in the model's dtype."""

    latent: torch.Tensor  # [B, P, kv_lora_rank], normalised c_kv
    shared_key: torch.Tensor  # [B, P, qk_rope_head_dim]


class GatedMLA(nn.Module):
    def __init__(self, cfg: K3Config) -> None:
        super().__init__()
        D, H = cfg.hidden_size, cfg.num_attention_heads
        self.H, self.nope, self.rope, self.vdim = H, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
        self.kv_rank = cfg.kv_lora_rank
        self.init_query(cfg)
        self.kv_a_proj_with_mqa = nn.Linear(D, self.kv_rank + self.rope, bias=False)
        self.kv_a_layernorm = RMSNorm(self.kv_rank, cfg.mla_latent_norm_eps)
        self.kv_b_proj = nn.Linear(self.kv_rank, H * (self.nope + self.vdim), bias=False)
        self.init_output_gate(cfg)
        self.o_proj = nn.Linear(H * self.vdim, D, bias=False)
        self.score_scale = cfg.mla_score_scale

    def init_query(self, cfg: K3Config) -> None:
        """The low-rank query path q_a_proj -> q_a_layernorm -> q_b_proj."""
        width = self.H * (self.nope + self.rope)
        self.q_a_proj = nn.Linear(cfg.hidden_size, cfg.q_lora_rank, bias=False)
        self.q_a_layernorm = RMSNorm(cfg.q_lora_rank, cfg.mla_latent_norm_eps)
        self.q_b_proj = nn.Linear(cfg.q_lora_rank, width, bias=False)

    def init_output_gate(self, cfg: K3Config) -> None:
        """K3's sigmoid output gate `g_proj` (the Kimi Linear variant has none)."""
        self.g_proj = nn.Linear(cfg.hidden_size, self.H * self.vdim, bias=False)

    def query(self, x_btd: torch.Tensor) -> torch.Tensor:
        """Per-head queries [B, T, H*(nope+rope)]."""
        return lin(self.q_b_proj, self.q_a_layernorm(lin(self.q_a_proj, x_btd)))

    def gated(self, x_btd: torch.Tensor, o_btf: torch.Tensor) -> torch.Tensor:
        """K3: sigmoid(g_proj x) * concat_h o_h."""
        return torch.sigmoid(lin(self.g_proj, x_btd)) * o_btf

    def initial_state(self, batch: int, like: torch.Tensor) -> MLACache:
        return MLACache(like.new_zeros(batch, 0, self.kv_rank), like.new_zeros(batch, 0, self.rope))

    def forward(self, x_btd: torch.Tensor, cache: MLACache) -> tuple[torch.Tensor, MLACache]:
        """Append the T new tokens to the cache, then attend causally over past + current.

        Prefill (T > 1) masks key j > P + t by setting its score to -inf before the softmax:
        exp(-inf) is exactly 0, so masked keys get exactly zero weight (true exclusion).
        Every row keeps its own token, so no row is fully masked. Computed in `compute_dtype`;
        the output and the cache are stored in the input's dtype.
        """
        B, T, _ = x_btd.shape
        H = self.H
        stored, x_btd = x_btd.dtype, x_btd.to(compute_dtype(x_btd.dtype))
        q = self.query(x_btd).view(B, T, H, self.nope + self.rope)
        q_content, q_shared = q.split([self.nope, self.rope], dim=-1)
        latent_new, shared_new = lin(self.kv_a_proj_with_mqa, x_btd).split([self.kv_rank, self.rope], dim=-1)
        latent_new = self.kv_a_layernorm(latent_new)
        # attend over the stored cache and the new tokens' own (unrounded) entries; store them rounded
        latent = torch.cat([cache.latent.to(x_btd.dtype), latent_new], dim=1)
        shared_key = torch.cat([cache.shared_key.to(x_btd.dtype), shared_new], dim=1)
        cache = MLACache(torch.cat([cache.latent, latent_new.to(stored)], dim=1),
                         torch.cat([cache.shared_key, shared_new.to(stored)], dim=1))
        S, P = latent.shape[1], latent.shape[1] - T
        kv = lin(self.kv_b_proj, latent).view(B, S, H, self.nope + self.vdim)
        k_content, v = kv.split([self.nope, self.vdim], dim=-1)
        scores_bhts = torch.einsum("bthc,bshc->bhts", q_content, k_content)
        scores_bhts = scores_bhts + torch.einsum("bthr,bsr->bhts", q_shared, shared_key)
        scores_bhts = scores_bhts * self.score_scale
        if T > 1:
            allowed_ts = (
                torch.arange(S, device=x_btd.device)[None, :] <= (P + torch.arange(T, device=x_btd.device))[:, None]
            )
            scores_bhts = scores_bhts.masked_fill(~allowed_ts, float("-inf"))
        o_bthv = torch.einsum("bhts,bshv->bthv", torch.softmax(scores_bhts, dim=-1), v)
        return lin(self.o_proj, self.gated(x_btd, o_bthv.reshape(B, T, H * self.vdim))).to(stored), cache
