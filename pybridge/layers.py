"""Small shared pieces: norms, SiTU activation, SiTU MLPs.

Weights follow nn.Linear's `[out, in]` layout (the hub's). The Lean spec writes
`y = x W` with `W : [in, out]`, so spec `W` is `linear.weight.T`.
"""

import torch
from torch import nn


def rms_norm(x_nd: torch.Tensor, eps: float, weight_d: torch.Tensor | None = None) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps), times `weight_d` when given (unit scale otherwise)."""
    y = x_nd * torch.rsqrt(x_nd.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight_d is None else y * weight_d


def l2_normalize(x_nd: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(sum(x^2) + eps): the fla form; 0 maps to 0 and the norm is < 1."""
    return x_nd * torch.rsqrt(x_nd.pow(2).sum(-1, keepdim=True) + eps)


def soft_cap(cap: float, x: torch.Tensor) -> torch.Tensor:
    return cap * torch.tanh(x / cap)


def situ(gate: torch.Tensor, up: torch.Tensor, gate_cap: float, up_cap: float) -> torch.Tensor:
    """SiTU: softCap(c_g, g) * sigmoid(g) * softCap(c_u, u); the sigmoid reads the UNCAPPED gate."""
    return soft_cap(gate_cap, gate) * torch.sigmoid(gate) * soft_cap(up_cap, up)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x_nd: torch.Tensor) -> torch.Tensor:
        return rms_norm(x_nd, self.eps, self.weight)


class SituMLP(nn.Module):
    """Dense FFN and merged shared experts (hub `KimiMLP`: gate_proj / up_proj / down_proj).

    `num_shared_experts` shared experts of hidden width h are stored as ONE MLP of hidden
    width num_shared * h; the hidden units split into per-expert blocks, so the output is
    exactly the sum of the individual experts.
    """

    def __init__(self, dim: int, hidden: int, gate_cap: float, up_cap: float):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)
        self.caps = (gate_cap, up_cap)

    def forward(self, x_nd: torch.Tensor) -> torch.Tensor:
        return self.down_proj(situ(self.gate_proj(x_nd), self.up_proj(x_nd), *self.caps))


class SituExpert(nn.Module):
    """Routed expert (hub `KimiBlockSparseMLP`): w1 = gate, w3 = up, w2 = down, latent width."""

    def __init__(self, dim: int, hidden: int, gate_cap: float, up_cap: float):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.caps = (gate_cap, up_cap)

    def forward(self, z_nl: torch.Tensor) -> torch.Tensor:
        return self.w2(situ(self.w1(z_nl), self.w3(z_nl), *self.caps))
