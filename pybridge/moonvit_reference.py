"""Plain reference MoonViT-V2: one clip, one head, one token at a time, from the equations.

Written from k3-spec §7 and docs/vision.md in the row-vector convention (`y = x W`,
`W = weight.T`), reading a checkpoint-named state dict directly; it shares no code with
`pybridge.moonvit` except the config record, so tests can tie the batched model to it. The
bilinear weights come from an integer formula (`bilinear_weights`, not `F.interpolate`), RoPE
and the time table from their definitions, attention from a per-query softmax over the clip's
tokens only. Slow by design: float64 throughout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from pybridge.config import VisionConfig


def _lin(sd: dict, name: str) -> torch.Tensor:
    """Spec matrix [in, out] from an nn.Linear weight [out, in]."""
    return sd[name + ".weight"].T


def _rms(x_d: torch.Tensor, eps: float, scale_d: torch.Tensor) -> torch.Tensor:
    return x_d / math.sqrt(float((x_d * x_d).sum()) / x_d.numel() + eps) * scale_d


def bilinear_weights(m: int, n: int) -> torch.Tensor:
    """The `[n, m]` bilinear resampling matrix of one axis (m table rows to n grid rows, half-pixel
    centres): output o reads the source position `((2o + 1)·m − n) / 2n`, clamped at 0, in exact
    integer arithmetic; taps floor and floor + 1 (the last row twice), weights 1 − frac and frac."""
    out = torch.zeros(n, m, dtype=torch.float64)
    for o in range(n):
        num = max((2 * o + 1) * m - n, 0)
        low, frac = num // (2 * n), (num % (2 * n)) / (2 * n)
        high = low + 1 if low + 1 < m else low
        out[o, low] += 1 - frac
        out[o, high] += frac
    return out


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x))) / 2


def _gelu_erf(x: torch.Tensor) -> torch.Tensor:
    return x * (1 + torch.erf(x * math.sqrt(0.5))) / 2


def embed_clip(cfg: VisionConfig, sd: dict, patches_np: torch.Tensor, grid: tuple[int, int, int]) -> torch.Tensor:
    """Token l of a `t × h × w` clip: `patch · W + pos[row, col] (+ time[frame] if t > 1)`."""
    t, h, w = grid
    D = cfg.hidden_size
    weight = sd["vision_tower.patch_embed.proj.weight"].reshape(D, -1).T
    table = sd["vision_tower.patch_embed.pos_emb.weight"]
    rows, cols = bilinear_weights(cfg.pos_emb_height, h), bilinear_weights(cfg.pos_emb_width, w)
    half = D // 2
    out = torch.zeros(t * h * w, D, dtype=torch.float64)
    for l in range(t * h * w):
        f, r, c = l // (h * w), l % (h * w) // w, l % (h * w) % w
        pos = sum(cols[c, j] * sum(rows[r, i] * table[i, j] for i in range(cfg.pos_emb_height))
                  for j in range(cfg.pos_emb_width))
        x = patches_np[l] @ weight + pos
        if t > 1:
            omega = [10000.0 ** (-k / half) for k in range(half)]
            x = x + torch.tensor([math.sin(f * o) for o in omega] + [math.cos(f * o) for o in omega],
                                 dtype=torch.float64)
        out[l] = x
    return out


def rope_angle(cfg: VisionConfig, row: int, col: int, p: int) -> float:
    R = cfg.rope_freqs
    pos, f = (row, p) if p < R else (col, p - R)
    return pos * cfg.rope_theta ** (-f / R)


def _rotate(cfg: VisionConfig, x_k: torch.Tensor, row: int, col: int) -> torch.Tensor:
    """2-D RoPE of one head vector: pair p (channels 2p, 2p+1) turned by `rope_angle`."""
    out = torch.empty_like(x_k)
    for p in range(x_k.shape[0] // 2):
        th = rope_angle(cfg, row, col, p)
        out[2 * p] = x_k[2 * p] * math.cos(th) - x_k[2 * p + 1] * math.sin(th)
        out[2 * p + 1] = x_k[2 * p] * math.sin(th) + x_k[2 * p + 1] * math.cos(th)
    return out


def block(cfg: VisionConfig, sd: dict, i: int, x_nd: torch.Tensor, grid: tuple[int, int, int]) -> torch.Tensor:
    """Block `i` on one clip's tokens `[t·h·w, D]`: every token attends to every token of the clip."""
    _, h, w = grid
    pre = f"vision_tower.encoder.blocks.{i}."
    A, K, Q, eps = cfg.num_heads, cfg.head_dim, cfg.qkv_hidden_size, cfg.rms_norm_eps
    n = x_nd.shape[0]
    hs = [_rms(x_nd[l], eps, sd[pre + "norm0.weight"]) for l in range(n)]
    wqkv = _lin(sd, pre + "wqkv")  # [D, 3Q]: columns (q|k|v, head, channel)
    wo = _lin(sd, pre + "wo")  # [Q, D]: rows (head, channel)
    attn = torch.zeros_like(x_nd)
    for a in range(A):
        cols = [slice(s * Q + a * K, s * Q + (a + 1) * K) for s in range(3)]
        pos = [(l % (h * w) // w, l % w) for l in range(n)]  # (row, column) of token l
        qs = [_rotate(cfg, hs[l] @ wqkv[:, cols[0]], *pos[l]) for l in range(n)]
        ks = [_rotate(cfg, hs[l] @ wqkv[:, cols[1]], *pos[l]) for l in range(n)]
        vs = [hs[l] @ wqkv[:, cols[2]] for l in range(n)]
        for l in range(n):
            scores = [float(qs[l] @ ks[m]) / math.sqrt(K) for m in range(n)]
            top = max(scores)
            ex = [math.exp(s - top) for s in scores]
            total = sum(ex)
            o = sum(e / total * vs[m] for m, e in enumerate(ex))
            attn[l] += o @ wo[a * K : (a + 1) * K]
    x1 = x_nd + attn
    out = torch.empty_like(x1)
    for l in range(n):
        u = _rms(x1[l], eps, sd[pre + "norm1.weight"]) @ _lin(sd, pre + "mlp.fc0")
        out[l] = x1[l] + _gelu_tanh(u) @ _lin(sd, pre + "mlp.fc1")
    return out


def encode_clip(cfg: VisionConfig, sd: dict, patches_np: torch.Tensor, grid: tuple[int, int, int]) -> torch.Tensor:
    x = embed_clip(cfg, sd, patches_np, grid)
    for i in range(cfg.num_layers):
        x = block(cfg, sd, i, x, grid)
    g = sd["vision_tower.encoder.final_layernorm.weight"]
    return torch.stack([_rms(x[l], cfg.rms_norm_eps, g) for l in range(x.shape[0])])


def merge_project_clip(cfg: VisionConfig, sd: dict, y_nd: torch.Tensor, grid: tuple[int, int, int]) -> torch.Tensor:
    """Merged token `a·w' + b` at channel `(dh·kw + dw)·D + c` is the frame mean at pixel
    `(a·kh + dh, b·kw + dw)`, channel c; then the projector."""
    t, h, w = grid
    kh, kw = cfg.merge_kernel_size
    D = cfg.hidden_size
    hm, wm = h // kh, w // kw
    merged = torch.empty(hm * wm, kh * kw * D, dtype=torch.float64)
    for a in range(hm):
        for b in range(wm):
            for dh in range(kh):
                for dw in range(kw):
                    r, c = a * kh + dh, b * kw + dw
                    mean = sum(y_nd[f * h * w + r * w + c] for f in range(t)) / t
                    merged[a * wm + b, (dh * kw + dw) * D : (dh * kw + dw + 1) * D] = mean
    hidden = _gelu_erf(merged @ _lin(sd, "mm_projector.proj.0"))
    out = hidden @ _lin(sd, "mm_projector.proj.2")
    g = sd["mm_projector.post_norm.weight"]
    return torch.stack([_rms(out[m], cfg.projector_eps, g) for m in range(out.shape[0])])


def features(cfg: VisionConfig, sd: dict, patches_np: torch.Tensor, grids: Sequence[tuple[int, int, int]]) -> torch.Tensor:
    """Every clip's visual tokens, clip after clip (each clip on its own: no cross-clip attention)."""
    sd = {k: v.to(torch.float64) for k, v in sd.items()}
    patches_np = patches_np.to(torch.float64)
    outs, start = [], 0
    for g in grids:
        n = g[0] * g[1] * g[2]
        y = encode_clip(cfg, sd, patches_np[start : start + n], g)
        outs.append(merge_project_clip(cfg, sd, y, g))
        start += n
    return torch.cat(outs)
