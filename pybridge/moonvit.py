"""MoonViT-V2, K3's vision encoder, with its projector (k3-spec §7 "MoonViT-V2 as the released
checkpoint has it"; docs/vision.md).

The structure is the released checkpoint's (torchtitan's checkpoint-reconciled port, read for
facts): a bias-free patch projection; a learned `[64, 64, D]` position table resampled
bilinearly (half-pixel centres, `align_corners=False`) to each clip's grid; a fixed sincos time
table added only when a clip has more than one frame (row f for frame f); blocks
`x + Attn(RMSNorm(x))`, `x + MLP(RMSNorm(x))` with ONE fused `wqkv`/`wo` attention over all
`t·h·w` tokens of a clip and 2-D RoPE on q and k (rotary pair p = channels 2p, 2p+1; the first
`head_dim/4` pairs turn by the patch row, the last `head_dim/4` by the column, at frequencies
`θ^(-j/(head_dim/4))`); MLP `fc0 → GELU(tanh) → fc1`; a final RMSNorm; then per clip the
temporal mean, the 2×2 space-to-depth merge (merged channel `(dh·kw + dw)·D + c`) and the
projector `Linear → GELU(erf) → Linear → RMSNorm` to the text width.

Module names are the checkpoint's: `vision_tower.patch_embed.{proj,pos_emb}.weight`,
`vision_tower.encoder.blocks.{i}.{norm0,wqkv,wo,norm1,mlp.fc0,mlp.fc1}.weight`,
`vision_tower.encoder.final_layernorm.weight`, `mm_projector.proj.{0,2}.weight`,
`mm_projector.post_norm.weight`. Inputs are packed: `patches_np` holds every clip's patches
(frame-major, then row, then column; each patch flattened channel-major, the Conv2d weight's
order, `pybridge.image.patchify`) and `grids` the clips' `(t, h, w)`. This is the fast path: all
clips in one batch, kept apart by a block-diagonal mask (varlen attention); the plain reference
the tests tie it to is `pybridge.moonvit_reference` (one clip, one head, one token at a time).

Precision: every stage computes in `layers.compute_dtype` of the parameters' dtype (float32 for
bfloat16 weights); the features come back in the parameters' dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from pybridge.config import VisionConfig
from pybridge.errors import InputError
from pybridge.layers import RMSNorm, compute_dtype, lin

Grid = tuple[int, int, int]


def check_grids(cfg: VisionConfig, grids: Sequence[Grid], patches: int | None = None) -> None:
    """Every clip fits the encoder: 1..`pos_emb_time` frames, a grid the merge tiles, and (when
    given) as many patch rows as the grids hold. Raises InputError naming the clip."""
    kh, kw = cfg.merge_kernel_size
    if not grids:
        raise InputError("no clips: grids is empty")
    for i, g in enumerate(grids):
        if len(g) != 3 or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in g):
            raise InputError(f"clip {i}: grid must be three positive integers (t, h, w), got {tuple(g)!r}")
        t, h, w = g
        if t > cfg.pos_emb_time:
            raise InputError(f"clip {i} has {t} frames, more than the time table's {cfg.pos_emb_time} "
                             "(vision_config.init_pos_emb_time)")
        if h % kh or w % kw:
            raise InputError(f"clip {i}: patch grid {h}x{w} is not a multiple of the merge kernel {kh}x{kw} "
                             f"(pad the image to a multiple of {kh * cfg.patch_size}x{kw * cfg.patch_size} pixels)")
    want = sum(t * h * w for t, h, w in grids)
    if patches is not None and patches != want:
        raise InputError(f"patches has {patches} rows, expected {want} (t*h*w summed over the grids {list(map(tuple, grids))})")


def time_table(frames: int, dim: int) -> torch.Tensor:
    """The fixed sincos time table `[frames, dim]` (float64): row f is `[sin(f ω_c) | cos(f ω_c)]`,
    `ω_c = 10⁴^(-c/(dim/2))`, c < dim/2."""
    half = dim // 2
    omega = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
    angles = torch.arange(frames, dtype=torch.float64)[:, None] * omega[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


def rope_angles(cfg: VisionConfig, h: int, w: int) -> torch.Tensor:
    """Rotary angles `[h·w, head_dim/2]` (float64) of one frame's patches in raster order: pair
    j < R turns by `row · θ^(-j/R)`, pair R + j by `col · θ^(-j/R)` (R = head_dim/4)."""
    R = cfg.rope_freqs
    freq = cfg.rope_theta ** (-torch.arange(R, dtype=torch.float64) / R)
    rows = torch.arange(h, dtype=torch.float64).repeat_interleave(w)
    cols = torch.arange(w, dtype=torch.float64).repeat(h)
    return torch.cat([rows[:, None] * freq, cols[:, None] * freq], dim=1)


def rotate_pairs(x_nak: torch.Tensor, cos_np: torch.Tensor, sin_np: torch.Tensor) -> torch.Tensor:
    """Turn rotary pair p (channels 2p, 2p+1) of every head of token n by its angle."""
    n, a, k = x_nak.shape
    x = x_nak.reshape(n, a, k // 2, 2)
    c, s = cos_np[:, None, :], sin_np[:, None, :]
    x0, x1 = x[..., 0], x[..., 1]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).reshape(n, a, k)


def clip_mask(grids: Sequence[Grid], device: torch.device | None = None) -> torch.Tensor:
    """The block-diagonal mask `[N, N]` of packed clips: True where two tokens share a clip."""
    ids = torch.cat([torch.full((t * h * w,), i, device=device) for i, (t, h, w) in enumerate(grids)])
    return ids[:, None] == ids[None, :]


def merge_clip(y_nd: torch.Tensor, grid: Grid, kernel: tuple[int, int]) -> torch.Tensor:
    """Temporal mean of one clip's tokens, then space-to-depth: `[h/kh · w/kw, kh·kw·D]`, merged
    token `a·(w/kw) + b`, channel `(dh·kw + dw)·D + c` = pixel `(a·kh + dh, b·kw + dw)`, channel c."""
    t, h, w = grid
    kh, kw = kernel
    d = y_nd.shape[-1]
    x = y_nd.reshape(t, h // kh, kh, w // kw, kw, d).mean(0)
    return x.permute(0, 2, 1, 3, 4).reshape((h // kh) * (w // kw), kh * kw * d)


def token_count(cfg: VisionConfig, grids: Sequence[Grid]) -> int:
    """The number of visual tokens of the clips (the placeholders a prompt needs)."""
    kh, kw = cfg.merge_kernel_size
    return sum((h // kh) * (w // kw) for _, h, w in grids)


class _Weight(nn.Module):
    """A bare parameter holder, so the checkpoint's `….proj.weight` / `….pos_emb.weight` names
    hold tensors that are not an nn.Linear's (the Conv2d kernel `[D, C, p, p]`, the table `[H, W, D]`)."""

    def __init__(self, *shape: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(shape))


class PatchEmbed(nn.Module):
    """`proj`: the bias-free stride-p Conv2d of the checkpoint, applied as a matrix product over
    the flattened patches; `pos_emb`: the learned position table. The time table is fixed."""

    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.proj = _Weight(cfg.hidden_size, cfg.in_channels, cfg.patch_size, cfg.patch_size)
        self.pos_emb = _Weight(cfg.pos_emb_height, cfg.pos_emb_width, cfg.hidden_size)

    def position(self, h: int, w: int, dtype: torch.dtype) -> torch.Tensor:
        """The table resampled to an `h × w` grid, `[h·w, D]` (torch's bilinear, half-pixel centres)."""
        table = self.pos_emb.weight.to(dtype).permute(2, 0, 1)[None]
        grid = F.interpolate(table, size=(h, w), mode="bilinear", align_corners=False)
        return grid[0].permute(1, 2, 0).reshape(h * w, -1)

    def forward(self, patches_np: torch.Tensor, grids: Sequence[Grid]) -> torch.Tensor:
        D = self.cfg.hidden_size
        x_nd = patches_np @ self.proj.weight.to(patches_np.dtype).reshape(D, -1).T
        terms = []
        for t, h, w in grids:
            pos = self.position(h, w, x_nd.dtype)
            if t == 1:  # a single image: no time term (not the f = 0 row)
                terms.append(pos)
            else:
                time = time_table(t, D).to(pos)
                terms.append((pos[None] + time[:, None]).reshape(t * h * w, D))
        return x_nd + torch.cat(terms)


class VisionMLP(nn.Module):
    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.fc0 = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.fc1 = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x_nd: torch.Tensor) -> torch.Tensor:
        return lin(self.fc1, F.gelu(lin(self.fc0, x_nd), approximate="tanh"))


class VisionBlock(nn.Module):
    """Pre-norm block: one RoPE attention over each clip's tokens, then the MLP."""

    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.norm0 = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.wqkv = nn.Linear(cfg.hidden_size, 3 * cfg.qkv_hidden_size, bias=False)
        self.wo = nn.Linear(cfg.qkv_hidden_size, cfg.hidden_size, bias=False)
        self.norm1 = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = VisionMLP(cfg)

    def attention(self, h_nd: torch.Tensor, cos_np: torch.Tensor, sin_np: torch.Tensor,
                  mask_nn: torch.Tensor) -> torch.Tensor:
        """`wqkv` rows are `(q|k|v, head, channel)`; scores scaled by `head_dim^-1/2`."""
        n, a, k = h_nd.shape[0], self.cfg.num_heads, self.cfg.head_dim
        q, key, v = lin(self.wqkv, h_nd).view(n, 3, a, k).unbind(1)
        q, key = rotate_pairs(q, cos_np, sin_np), rotate_pairs(key, cos_np, sin_np)
        o = F.scaled_dot_product_attention(q.transpose(0, 1)[None], key.transpose(0, 1)[None],
                                           v.transpose(0, 1)[None], attn_mask=mask_nn)
        return lin(self.wo, o[0].transpose(0, 1).reshape(n, a * k))

    def forward(self, x_nd: torch.Tensor, cos_np: torch.Tensor, sin_np: torch.Tensor,
                mask_nn: torch.Tensor) -> torch.Tensor:
        x_nd = x_nd + self.attention(self.norm0(x_nd), cos_np, sin_np, mask_nn)
        return x_nd + self.mlp(self.norm1(x_nd))


class VisionEncoder(nn.Module):
    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(VisionBlock(cfg) for _ in range(cfg.num_layers))
        self.final_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class VisionTower(nn.Module):
    """`vision_tower`: the patch embedding and the encoder."""

    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.patch_embed = PatchEmbed(cfg)
        self.encoder = VisionEncoder(cfg)

    def forward(self, patches_np: torch.Tensor, grids: Sequence[Grid]) -> torch.Tensor:
        """The encoder output `[N, D]` (after the final norm) of the packed clips."""
        x = self.patch_embed(patches_np, grids)
        angles = torch.cat([rope_angles(self.cfg, h, w).repeat(t, 1) for t, h, w in grids]).to(x)
        cos, sin, mask = angles.cos(), angles.sin(), clip_mask(grids, x.device)
        for block in self.encoder.blocks:
            x = block(x, cos, sin, mask)
        return self.encoder.final_layernorm(x)


class Projector(nn.Module):
    """`mm_projector`: `Linear(mD, mD) → GELU(erf) → Linear(mD, T)`, then RMSNorm (post-norm, no pre-norm)."""

    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        e = cfg.merged_size
        self.proj = nn.Sequential(nn.Linear(e, e, bias=False), nn.GELU(), nn.Linear(e, cfg.text_hidden_size, bias=False))
        self.post_norm = RMSNorm(cfg.text_hidden_size, cfg.projector_eps)

    def forward(self, merged_me: torch.Tensor) -> torch.Tensor:
        first, act, second = self.proj
        return self.post_norm(lin(second, act(lin(first, merged_me))))


class MoonViT(nn.Module):
    """The vision tower and the projector under their checkpoint names (`vision_tower.…`,
    `mm_projector.…`): packed patches → visual tokens at the text width."""

    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.vision_tower = VisionTower(cfg)
        self.mm_projector = Projector(cfg)

    def encode(self, patches_np: torch.Tensor, grids: Sequence[Grid]) -> torch.Tensor:
        """The encoder output `[N, D]` in the compute dtype (inputs checked: InputError)."""
        grids = [tuple(g) for g in grids]
        if patches_np.dim() != 2 or patches_np.shape[1] != self.cfg.patch_dim:
            raise InputError(f"patches must have shape [N, {self.cfg.patch_dim}] (C·p·p per patch), got {list(patches_np.shape)}")
        check_grids(self.cfg, grids, patches_np.shape[0])
        cd = compute_dtype(self.mm_projector.post_norm.weight.dtype)
        return self.vision_tower(patches_np.to(cd), grids)

    def merge_project(self, y_nd: torch.Tensor, grids: Sequence[Grid]) -> torch.Tensor:
        """Every clip's visual tokens `[Σ h/kh·w/kw, T]`, clip after clip."""
        parts, start = [], 0
        for t, h, w in grids:
            parts.append(merge_clip(y_nd[start : start + t * h * w], (t, h, w), self.cfg.merge_kernel_size))
            start += t * h * w
        return self.mm_projector(torch.cat(parts))

    def forward(self, patches_np: torch.Tensor, grids: Sequence[Grid]) -> torch.Tensor:
        """Visual tokens `[Σ h/kh·w/kw, T]` in the parameters' dtype."""
        out = self.merge_project(self.encode(patches_np, grids), [tuple(g) for g in grids])
        return out.to(self.mm_projector.post_norm.weight.dtype)


def encoder_parameter_count(cfg: VisionConfig, attentions_per_block: int = 1) -> int:
    """Encoder parameters (patch embedding, position table, blocks, final norm; no projector) by
    hand from the config: each attention brings its norm, `wqkv` and `wo`. One attention per block
    is the checkpoint's structure (401,214,464 at the paper config); two are the seed's divided
    spatial + temporal attention (571,111,424)."""
    D, Q, M = cfg.hidden_size, cfg.qkv_hidden_size, cfg.intermediate_size
    attention = D + 3 * Q * D + Q * D
    block = attentions_per_block * attention + D + 2 * D * M
    return D * cfg.patch_dim + cfg.pos_emb_height * cfg.pos_emb_width * D + cfg.num_layers * block + D


def init_random_(model: MoonViT, seed: int) -> MoonViT:
    """Deterministic random weights with unit-scale activations: norms near 1, linears and the
    patch projection by fan-in, the position table of unit scale."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("pos_emb.weight"):
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(math.prod(p.shape[1:])))
    return model


def random_moonvit(cfg: VisionConfig, seed: int = 0, dtype: torch.dtype = torch.float64) -> MoonViT:
    return init_random_(MoonViT(cfg), seed).to(dtype).eval()
