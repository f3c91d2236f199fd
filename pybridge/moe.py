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

A checkpoint in the released MXFP4 format (`pybridge.mxfp4`) holds the routed experts' w1/w2/w3
as `weight_packed` / `weight_scale`; `use_mxfp4_experts_` gives a model such experts
(`MXFP4SituExpert`: dequantize, then the matmul), `quantize_experts_` quantizes a model's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pybridge import mxfp4
from pybridge.config import K3Config
from pybridge.layers import RMSNorm, SituExpert, SituMLP, compute_dtype, lin, situ


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


class MXFP4Linear(nn.Module):
    """A bias-free linear layer with an MXFP4 weight `[out, in]`: buffers `weight_packed`
    (uint8 `[out, in/2]`) and `weight_scale` (uint8 E8M0 `[out, in/32]`), the checkpoint's
    tensors. `forward` dequantizes exactly (`mxfp4.dequantize`, rounded once to the input's
    dtype), then multiplies; with `blockwise`, it multiplies block by block and scales each
    block's sum (`mxfp4.blockwise_linear`, the blockwise-kernel form)."""

    blockwise: bool = False

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        if in_features % mxfp4.GROUP:
            raise ValueError(f"MXFP4 input width {in_features} is not a multiple of the MX group {mxfp4.GROUP}")
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("weight_packed", torch.zeros(out_features, in_features // 2, dtype=torch.uint8))
        self.register_buffer("weight_scale", torch.zeros(out_features, in_features // mxfp4.GROUP, dtype=torch.uint8))

    @classmethod
    def quantized(cls, weight_oi: torch.Tensor) -> MXFP4Linear:
        """The layer holding `weight_oi` quantized (`mxfp4.quantize`: ceil rule, ties to even)."""
        layer = cls(weight_oi.shape[1], weight_oi.shape[0])
        layer.weight_packed, layer.weight_scale = mxfp4.quantize(weight_oi)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.blockwise:
            return mxfp4.blockwise_linear(x, self.weight_packed, self.weight_scale)
        return F.linear(x, mxfp4.dequantize(self.weight_packed, self.weight_scale, x.dtype))


class MXFP4SituExpert(nn.Module):
    """A routed expert with MXFP4 weights (hub names `w1`/`w3`/`w2` as `SituExpert`, each an
    `MXFP4Linear`); computes in `compute_dtype` as `SituExpert` does."""

    def __init__(self, dim: int, hidden: int, gate_cap: float, up_cap: float) -> None:
        super().__init__()
        self.w1, self.w3 = MXFP4Linear(dim, hidden), MXFP4Linear(dim, hidden)
        self.w2 = MXFP4Linear(hidden, dim)
        self.caps = (gate_cap, up_cap)

    def forward(self, z_nl: torch.Tensor) -> torch.Tensor:
        z = z_nl.to(compute_dtype(z_nl.dtype))
        return self.w2(situ(self.w1(z), self.w3(z), *self.caps)).to(z_nl.dtype)

    def set_blockwise(self, on: bool) -> MXFP4SituExpert:
        """Use the blockwise products (`MXFP4Linear.blockwise`) or dequantize-then-matmul."""
        for layer in (self.w1, self.w2, self.w3):
            layer.blockwise = on
        return self


def _latent_moes(model: nn.Module) -> list[LatentMoE]:
    return [m for m in model.modules() if isinstance(m, LatentMoE)]


def use_mxfp4_experts_(model: nn.Module) -> nn.Module:
    """Give every LatentMoE of `model` MXFP4 routed experts (zero weights: to be loaded), in place;
    built on the model's device (meta for a checkpoint load)."""
    for m in _latent_moes(model):
        for e, ex in enumerate(m.experts):
            dim, hidden = ex.w1.in_features, ex.w1.out_features
            with torch.device(ex.w1.weight.device):
                m.experts[e] = MXFP4SituExpert(dim, hidden, *ex.caps)
    return model


def quantize_experts_(model: nn.Module) -> nn.Module:
    """Replace every routed expert of `model` by its MXFP4 quantization (`MXFP4Linear.quantized`),
    in place: the layout of the released checkpoint."""
    for m in _latent_moes(model):
        for e, ex in enumerate(m.experts):
            q = MXFP4SituExpert(ex.w1.in_features, ex.w1.out_features, *ex.caps)
            for part in ("w1", "w2", "w3"):
                setattr(q, part, MXFP4Linear.quantized(getattr(ex, part).weight))
            m.experts[e] = q.to(ex.w1.weight.device)
    return model
