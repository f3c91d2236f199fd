"""Small shared pieces: norms, SiTU activation, SiTU MLPs, and the precision policy.

Weights follow nn.Linear's `[out, in]` layout (the hub's). The Lean spec writes
`y = x W` with `W : [in, out]`, so spec `W` is `linear.weight.T`.

Precision policy (docs/tolerances.md): weights, the activations between stages and the caches
are stored in the model's dtype; each stage (a norm, an AttnRes read, a sequence mixer, a
channel mixer, the head) computes in `compute_dtype` (float32 for bfloat16/float16 storage, as
production kernels do: fp32 matmul accumulation, norms, softmax, gates and the KDA recurrence)
and rounds only its output to the storage dtype. The KDA recurrent state stays in the compute
dtype between steps. For float32 and float64 models every cast is a no-op.
"""

import torch
import torch.nn.functional as F
from torch import nn


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The precision a stage computes in for tensors stored in `dtype` (at least float32)."""
    return torch.promote_types(dtype, torch.float32)


def lin(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """`layer(x)` in the dtype of `x` (the weight is cast, not the input)."""
    return F.linear(x, layer.weight.to(x.dtype))


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
        cd = compute_dtype(x_nd.dtype)
        return rms_norm(x_nd.to(cd), self.eps, self.weight.to(cd)).to(x_nd.dtype)


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
        x = x_nd.to(compute_dtype(x_nd.dtype))
        return lin(self.down_proj, situ(lin(self.gate_proj, x), lin(self.up_proj, x), *self.caps)).to(x_nd.dtype)


class SituExpert(nn.Module):
    """Routed expert (hub `KimiBlockSparseMLP`): w1 = gate, w3 = up, w2 = down, latent width."""

    def __init__(self, dim: int, hidden: int, gate_cap: float, up_cap: float):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.caps = (gate_cap, up_cap)

    def forward(self, z_nl: torch.Tensor) -> torch.Tensor:
        z = z_nl.to(compute_dtype(z_nl.dtype))
        return lin(self.w2, situ(lin(self.w1, z), lin(self.w3, z), *self.caps)).to(z_nl.dtype)
