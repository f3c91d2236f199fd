"""Stable LatentMoE (report §2.3, spec §2.7), hub names of `KimiSparseMoeBlock`.

shared = shared_experts(x)                           (model width, every token)
s      = sigmoid(gate.weight x)                      raw scores [E]
T      = top-k of s + e_score_correction_bias        (bias used ONLY for selection;
                                                      ties -> lowest expert index)
w_e    = routed_scaling_factor * s_e / sum_{T} s     (RAW scores renormalised)
routed = sum_{e in T} w_e Expert_e(routed_expert_down_proj x)   (latent width)
y      = shared + routed_expert_up_proj(RMSNorm(routed) * routed_expert_norm.weight)
         (epsilon `latent_moe_norm_eps`; since `routed` is RMS-normalised, the scaling factor
          changes y only through that epsilon)
"""

import torch
from torch import nn

from pybridge.config import K3Config
from pybridge.layers import RMSNorm, SituExpert, SituMLP, compute_dtype, lin


def select_top_k(adjusted_ne: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k largest entries per row; equal scores -> lower index first.
    A stable descending sort keeps equal entries in index order."""
    return torch.sort(adjusted_ne, dim=-1, descending=True, stable=True).indices[:, :k]


class MoEGate(nn.Module):
    def __init__(self, dim: int, num_experts: int, top_k: int, scaling: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_experts, dim))
        self.e_score_correction_bias = nn.Parameter(torch.zeros(num_experts))
        self.top_k, self.scaling = top_k, scaling

    def forward(self, x_nd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (expert ids [N, k], mixture weights [N, k]), computed in `compute_dtype`."""
        x_nd = x_nd.to(compute_dtype(x_nd.dtype))
        scores_ne = torch.sigmoid(x_nd @ self.weight.to(x_nd.dtype).T)
        bias = self.e_score_correction_bias.to(x_nd.dtype)
        idx_nk = select_top_k(scores_ne + bias, self.top_k)
        raw_nk = scores_ne.gather(1, idx_nk)
        return idx_nk, self.scaling * raw_nk / raw_nk.sum(-1, keepdim=True)


class LatentMoE(nn.Module):
    def __init__(self, cfg: K3Config) -> None:
        super().__init__()
        D, L = cfg.hidden_size, cfg.routed_expert_hidden_size
        caps = (cfg.situ_gate_cap, cfg.situ_up_cap)
        self.gate = MoEGate(D, cfg.num_experts, cfg.num_experts_per_token, cfg.routed_scaling_factor)
        self.experts = nn.ModuleList(SituExpert(L, cfg.moe_intermediate_size, *caps) for _ in range(cfg.num_experts))
        self.shared_experts = SituMLP(D, cfg.moe_intermediate_size * cfg.num_shared_experts, *caps)
        self.routed_expert_down_proj = nn.Linear(D, L, bias=False)
        self.routed_expert_up_proj = nn.Linear(L, D, bias=False)
        self.routed_expert_norm = RMSNorm(L, cfg.latent_moe_norm_eps)

    def forward(self, x_btd: torch.Tensor) -> torch.Tensor:
        x_nd = x_btd.reshape(-1, x_btd.shape[-1]).to(compute_dtype(x_btd.dtype))
        idx_nk, w_nk = self.gate(x_nd)
        z_nl = lin(self.routed_expert_down_proj, x_nd)
        routed_nl = torch.zeros_like(z_nl)
        for e in idx_nk.unique().tolist():  # only experts some token chose
            tok, slot = (idx_nk == e).nonzero(as_tuple=True)
            routed_nl.index_add_(0, tok, w_nk[tok, slot, None] * self.experts[e](z_nl[tok]))
        y_nd = self.shared_experts(x_nd) + lin(self.routed_expert_up_proj, self.routed_expert_norm(routed_nl))
        return y_nd.view(x_btd.shape).to(x_btd.dtype)
