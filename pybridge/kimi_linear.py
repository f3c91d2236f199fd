"""The Kimi Linear variant of the spec (k3-spec §7 "Kimi Linear in transformers 5.23"): the
layers where Kimi Linear differs from K3, and the whole model. Parameter names are the hub's
(moonshotai/Kimi-Linear-*: `self_attn.q_conv1d`, `self_attn.A_log [1, 1, H, 1]`,
`block_sparse_moe.experts.{e}.w1`, ...); `adapter.kimi_linear_from_transformers` maps
transformers' in-memory names onto them.

Per token x (hub names), where K3 differs:
* KDA decay gate (`softplus_decay_gate`), per head h and key channel c:
      g = -exp(A_log[h]) * softplus(f_b(f_a(x)) + dt_bias)          (log alpha <= 0, unbounded below)
  softplus(z) = z for z > 20, log(1 + e^z) otherwise (transformers' form). K3:
  g = lower_bound * sigmoid(exp(A_log[h]) * (f_b(f_a(x)) + dt_bias)).
* KDA output gate, low rank through `head_dim`: y = o_proj(RMSNorm_head(o) * o_norm.weight *
  sigmoid(g_b(g_a(x)))). K3: sigmoid(g_proj(x)), full rank.
* KDA query scale K^-1/2, fixed: o_t = K^-1/2 S_t^T q_t (K3: `query_scale`, a config value).
* MLA without an output gate: y = o_proj(concat_h o_h); queries from `q_proj` when
  `q_lora_rank` is null (the released models), else the low-rank path as K3's.
* SwiGLU experts at model width, DeepSeek-style MoE with routed scaling, no latent projection:
      s = sigmoid(gate.weight x);  T = top-k(s + e_score_correction_bias)
      w_e = routed_scaling_factor * s_e / (sum_T s + 1e-20)    (without the sum when moe_renormalize is false)
      y = sum_{e in T} w_e down_e(silu(w1_e x) * w3_e x) + shared(x),  shared = SwiGLU of width S*h.
* Plain pre-norm residuals (no AttnRes): x += mixer(RMSNorm(x)); x += mlp(RMSNorm(x));
  logits = lm_head(RMSNorm(x)).
The KDA recurrence, short convolutions, L2 norms, beta and the MLA attention itself are K3's
(`pybridge.kda`, `pybridge.mla`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from pybridge.config_kimi_linear import ROUTER_EPS, SOFTPLUS_THRESHOLD, KimiLinearConfig
from pybridge.errors import InputError
from pybridge.kda import KDAState, KimiDeltaAttention
from pybridge.layers import RMSNorm, compute_dtype, lin
from pybridge.mla import GatedMLA, MLACache
from pybridge.model import KimiK3ForCausalLM
from pybridge.moe import select_top_k


def softplus_decay_gate(z_bthk: torch.Tensor, a_log_h: torch.Tensor) -> torch.Tensor:
    """g = -exp(A_log[h]) * softplus(z) with softplus(z) = z for z > 20 (`z` = f + dt_bias)."""
    soft = torch.where(z_bthk > SOFTPLUS_THRESHOLD, z_bthk, torch.log(1.0 + torch.exp(z_bthk)))
    return -a_log_h.exp()[:, None] * soft


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """SiLU(gate) * up."""
    return F.silu(gate) * up


class KimiLinearKDA(KimiDeltaAttention):
    """KDA with Kimi Linear's softplus decay gate, low-rank output gate and K^-1/2 query scale
    (module docstring); everything else is K3's layer."""

    def init_decay_scale(self, cfg: KimiLinearConfig) -> None:
        self.A_log = nn.Parameter(torch.empty(1, 1, self.H, 1))  # the hub's shape

    def init_output_gate(self, cfg: KimiLinearConfig) -> None:
        self.g_a_proj = nn.Linear(cfg.hidden_size, cfg.kda_gate_rank, bias=False)
        self.g_b_proj = nn.Linear(cfg.kda_gate_rank, self.H * self.V, bias=False)

    def log_decay(self, x_btd: torch.Tensor) -> torch.Tensor:
        B, T, _ = x_btd.shape
        z = (lin(self.f_b_proj, lin(self.f_a_proj, x_btd)) + self.dt_bias.to(x_btd.dtype)).view(B, T, self.H, self.K)
        return softplus_decay_gate(z, self.A_log.to(x_btd.dtype).view(self.H))

    def output_gate(self, x_btd: torch.Tensor) -> torch.Tensor:
        B, T, _ = x_btd.shape
        return torch.sigmoid(lin(self.g_b_proj, lin(self.g_a_proj, x_btd))).view(B, T, self.H, self.V)


class KimiLinearMLA(GatedMLA):
    """MLA without K3's sigmoid output gate; one `q_proj` when `q_lora_rank` is None."""

    def init_query(self, cfg: KimiLinearConfig) -> None:
        if cfg.q_lora_rank is None:
            self.q_proj = nn.Linear(cfg.hidden_size, self.H * (self.nope + self.rope), bias=False)
        else:
            super().init_query(cfg)

    def init_output_gate(self, cfg: KimiLinearConfig) -> None:
        pass  # no output gate

    def query(self, x_btd: torch.Tensor) -> torch.Tensor:
        return lin(self.q_proj, x_btd) if hasattr(self, "q_proj") else super().query(x_btd)

    def gated(self, x_btd: torch.Tensor, o_btf: torch.Tensor) -> torch.Tensor:
        return o_btf


class SwiGLUMLP(nn.Module):
    """Dense MLP and merged shared experts: down_proj(silu(gate_proj x) * up_proj x).

    `NAMES` are the hub's names of the gate, up and down projections (the state dict's keys)."""

    NAMES = ("gate_proj", "up_proj", "down_proj")

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        gate, up, down = self.NAMES
        setattr(self, gate, nn.Linear(dim, hidden, bias=False))
        setattr(self, up, nn.Linear(dim, hidden, bias=False))
        setattr(self, down, nn.Linear(hidden, dim, bias=False))

    def forward(self, x_nd: torch.Tensor) -> torch.Tensor:
        x = x_nd.to(compute_dtype(x_nd.dtype))
        gate, up, down = (getattr(self, name) for name in self.NAMES)
        return lin(down, swiglu(lin(gate, x), lin(up, x))).to(x_nd.dtype)


class SwiGLUExpert(SwiGLUMLP):
    """Routed expert at model width: w2(silu(w1 x) * w3 x) (hub `experts.{e}.w1/w2/w3`)."""

    NAMES = ("w1", "w3", "w2")


class RoutedScalingGate(nn.Module):
    """Sigmoid router with a selection-only bias and routed scaling (module docstring)."""

    def __init__(self, dim: int, num_experts: int, top_k: int, scaling: float, renormalize: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_experts, dim))
        self.e_score_correction_bias = nn.Parameter(torch.zeros(num_experts))
        self.top_k, self.scaling, self.renormalize = top_k, scaling, renormalize

    def forward(self, x_nd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(expert ids [N, k], mixture weights [N, k]) in `compute_dtype`; ties -> lower id."""
        x_nd = x_nd.to(compute_dtype(x_nd.dtype))
        scores_ne = torch.sigmoid(x_nd @ self.weight.to(x_nd.dtype).T)
        idx_nk = select_top_k(scores_ne + self.e_score_correction_bias.to(x_nd.dtype), self.top_k)
        w_nk = scores_ne.gather(1, idx_nk)
        if self.renormalize:
            w_nk = w_nk / (w_nk.sum(-1, keepdim=True) + ROUTER_EPS)
        return idx_nk, self.scaling * w_nk


class RoutedScalingMoE(nn.Module):
    """DeepSeek-style MoE: SwiGLU experts at model width, routed scaling, shared experts, no
    latent projection (hub `block_sparse_moe`)."""

    def __init__(self, cfg: KimiLinearConfig) -> None:
        super().__init__()
        D, h = cfg.hidden_size, cfg.moe_intermediate_size
        self.gate = RoutedScalingGate(D, cfg.num_experts, cfg.num_experts_per_token, cfg.routed_scaling_factor,
                                      cfg.moe_renormalize)
        self.experts = nn.ModuleList(SwiGLUExpert(D, h) for _ in range(cfg.num_experts))
        self.shared_experts = SwiGLUMLP(D, h * cfg.num_shared_experts)

    def forward(self, x_btd: torch.Tensor) -> torch.Tensor:
        x_nd = x_btd.reshape(-1, x_btd.shape[-1]).to(compute_dtype(x_btd.dtype))
        idx_nk, w_nk = self.gate(x_nd)
        routed_nd = torch.zeros_like(x_nd)
        for e in idx_nk.unique().tolist():
            tok, slot = (idx_nk == e).nonzero(as_tuple=True)
            routed_nd.index_add_(0, tok, w_nk[tok, slot, None] * self.experts[e](x_nd[tok]))
        return (routed_nd + self.shared_experts(x_nd)).view(x_btd.shape).to(x_btd.dtype)


@dataclass
class KimiLinearCache:
    """Per-layer causal state (KDAState or MLACache) and the number of tokens seen."""

    layers: list[KDAState | MLACache]
    length: int = 0


class KimiLinearDecoderLayer(nn.Module):
    def __init__(self, cfg: KimiLinearConfig, layer_idx: int) -> None:
        super().__init__()
        D = cfg.hidden_size
        self.is_mla = cfg.is_mla(layer_idx)
        self.self_attn = KimiLinearMLA(cfg) if self.is_mla else KimiLinearKDA(cfg)
        if cfg.is_moe(layer_idx):
            self.block_sparse_moe = RoutedScalingMoE(cfg)
        else:
            self.mlp = SwiGLUMLP(D, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(D, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(D, cfg.rms_norm_eps)

    def forward(self, x_btd: torch.Tensor, state: KDAState | MLACache) -> tuple[torch.Tensor, KDAState | MLACache]:
        seq_out, state = self.self_attn(self.input_layernorm(x_btd), state)
        x_btd = x_btd + seq_out
        h = self.post_attention_layernorm(x_btd)
        chan = self.block_sparse_moe(h) if hasattr(self, "block_sparse_moe") else self.mlp(h)
        return x_btd + chan, state


class KimiLinearTextModel(nn.Module):
    def __init__(self, cfg: KimiLinearConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(KimiLinearDecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.final_norm_eps)


class KimiLinearForCausalLM(nn.Module):
    """The Kimi Linear variant's text model under hub names; `forward` as `KimiK3ForCausalLM`'s."""

    def __init__(self, cfg: KimiLinearConfig) -> None:
        super().__init__()
        self.config = cfg
        self.model = KimiLinearTextModel(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def new_cache(self, batch: int) -> KimiLinearCache:
        like = self.lm_head.weight
        return KimiLinearCache([layer.self_attn.initial_state(batch, like) for layer in self.model.layers])

    def forward(self, input_ids_bt: torch.Tensor,
                cache: KimiLinearCache | None = None) -> tuple[torch.Tensor, KimiLinearCache]:
        """Logits [B, T, vocab] for the new tokens, and the cache advanced by T tokens."""
        if input_ids_bt.dim() != 2 or input_ids_bt.shape[1] == 0:
            raise InputError(f"input ids must have shape [batch, tokens] with tokens >= 1, got {tuple(input_ids_bt.shape)}")
        vocab = self.config.vocab_size
        if input_ids_bt.min() < 0 or input_ids_bt.max() >= vocab:
            raise InputError(f"token ids must lie in [0, {vocab}), got min {int(input_ids_bt.min())} "
                             f"max {int(input_ids_bt.max())}")
        cache = cache if cache is not None else self.new_cache(input_ids_bt.shape[0])
        x = self.model.embed_tokens(input_ids_bt)
        states = []
        for layer, state in zip(self.model.layers, cache.layers):
            x, state = layer(x, state)
            states.append(state)
        h = self.model.norm(x)
        cd = compute_dtype(h.dtype)
        return lin(self.lm_head, h.to(cd)).to(h.dtype), KimiLinearCache(states, cache.length + input_ids_bt.shape[1])

    generate = KimiK3ForCausalLM.generate  # greedy: one prefill, then one cached step per token
    set_kda_impl = KimiK3ForCausalLM.set_kda_impl  # "auto" | "chunk" | "recurrent" | "fla" for every KDA layer
