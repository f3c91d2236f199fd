"""difftest's own float64 NumPy transcription of MoonViT-V2 and its projector (k3-spec §7,
docs/vision.md "The computation"), written from the equations.

It shares no code with pybridge (neither `moonvit` nor `moonvit_reference`): it reads the
`vision_config` of the hub `config.json` itself (`vision_reading`, hub field names), computes
the bilinear weights from the half-pixel source coordinate in floating point (`x = (o + ½)·m/n − ½`,
clamped at 0; pybridge and Lean use the exact integer form), the time table, the rotary angles
and the attention from their definitions, one head at a time, and the merge by explicit index
arithmetic. Parameters are the spec tensors of `pybridge.adapter.vision_rules` (`[in, out]`):
`vision.patch_weight [P, D]`, `vision.pos_table [H₀, W₀, D]`, `vision.blocks.{i}.…`
(`attn.query/key/value [D, A, K]`, `attn.output [A, K, D]`, `mlp.fc0 [D, M]`, `mlp.fc1 [M, D]`,
`norm0/norm1.scale [D]`), `vision.final_norm.scale`, `projector.first [E, E]`,
`projector.second [E, T]`, `projector.post_norm.scale [T]`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from difftest.config import TINY_CONFIG, ConfigReadError

Params = dict[str, np.ndarray]
Grid = tuple[int, int, int]

_erf = np.vectorize(math.erf, otypes=[np.float64])


def vision_reading(path: Path = TINY_CONFIG) -> dict:
    """difftest's own reading of `vision_config` (hub field names): the values the NumPy and
    graph legs use. A missing or non-numeric field is a ConfigReadError naming it."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    if "vision_config" not in raw:
        raise ConfigReadError(f"{path}: field 'vision_config' is missing")
    v = raw["vision_config"]

    def num(key: str) -> float:
        x = v.get(key)
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise ConfigReadError(f"{path}: field 'vision_config.{key}' is missing or not a finite number: {x!r}")
        return x

    kernel = v.get("merge_kernel_size")
    if not (isinstance(kernel, list) and len(kernel) == 2 and all(isinstance(k, int) for k in kernel)):
        raise ConfigReadError(f"{path}: field 'vision_config.merge_kernel_size' must be two integers, got {kernel!r}")
    heads, qkv = int(num("vt_num_attention_heads")), int(num("qkv_hidden_size"))
    return {
        "patch": int(num("patch_size")), "channels": int(num("in_channels")), "width": int(num("vt_hidden_size")),
        "heads": heads, "head_dim": qkv // heads, "mlp": int(num("vt_intermediate_size")),
        "layers": int(num("vt_num_hidden_layers")), "table_rows": int(num("init_pos_emb_height")),
        "table_cols": int(num("init_pos_emb_width")), "frames": int(num("init_pos_emb_time")),
        "merge": (kernel[0], kernel[1]), "text_width": int(num("text_hidden_size")),
        "eps": float(num("rms_norm_eps")), "projector_eps": float(num("projector_ln_eps")),
        "theta": float(num("rope_theta")),
    }


def rms_norm(x: np.ndarray, eps: float, gain: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gain


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def bilinear(m: int, n: int, align_corners: bool = False) -> np.ndarray:
    """`[n, m]`: output o of n reads source `x = (o + ½)·m/n − ½` (half-pixel centres), clamped
    at 0, from rows ⌊x⌋ (weight 1 − λ) and min(⌊x⌋ + 1, m − 1) (weight λ). `align_corners`:
    the other convention, `x = o·(m − 1)/(n − 1)` (for planted bugs only)."""
    out = np.zeros((n, m))
    for o in range(n):
        if align_corners:
            x = o * (m - 1) / (n - 1) if n > 1 else 0.0
        else:
            x = max((o + 0.5) * m / n - 0.5, 0.0)
        low = min(int(math.floor(x)), m - 1)
        lam = x - low
        out[o, low] += 1.0 - lam
        out[o, min(low + 1, m - 1)] += lam
    return out


def time_rows(t: int, d: int) -> np.ndarray:
    """`[t, d]`: row f is `sin(f ω_c)` for c < d/2, then `cos(f ω_c)`, `ω_c = 10⁴^(−c/(d/2))`."""
    half = d // 2
    out = np.zeros((t, d))
    for f in range(t):
        for c in range(half):
            angle = f * 10000.0 ** (-c / half)
            out[f, c], out[f, half + c] = math.sin(angle), math.cos(angle)
    return out


def embed(p: Params, patches_np: np.ndarray, grid: Grid, cfg: dict) -> np.ndarray:
    """Token `l = f·h·w + r·w + c`: `patches[l] · W + Σ_j cols[c, j] Σ_i rows[r, i] table[i, j]`,
    plus `time[f]` only when t > 1."""
    t, h, w = grid
    rows, cols = bilinear(cfg["table_rows"], h), bilinear(cfg["table_cols"], w)
    pos_hwd = np.einsum("cj,ri,ijd->rcd", cols, rows, p["vision.pos_table"])
    x = patches_np @ p["vision.patch_weight"]
    d = x.shape[1]
    time = time_rows(t, d)
    for l in range(t * h * w):
        f, r, c = l // (h * w), (l % (h * w)) // w, l % w
        x[l] += pos_hwd[r, c] + (time[f] if t > 1 else 0.0)
    return x


def rope_angles(h: int, w: int, cfg: dict) -> np.ndarray:
    """`[h·w, K/2]`: pair p < R turns by `row·θ^(−p/R)`, pair R + j by `col·θ^(−j/R)`, R = K/4."""
    R = cfg["head_dim"] // 4
    out = np.zeros((h * w, 2 * R))
    for l in range(h * w):
        r, c = l // w, l % w
        for j in range(R):
            f = cfg["theta"] ** (-j / R)
            out[l, j], out[l, R + j] = r * f, c * f
    return out


def rotate(x_nk: np.ndarray, angles_np: np.ndarray) -> np.ndarray:
    """Channels (2p, 2p + 1) of every token turned by its angle p."""
    out = np.empty_like(x_nk)
    cos, sin = np.cos(angles_np), np.sin(angles_np)
    out[:, 0::2] = x_nk[:, 0::2] * cos - x_nk[:, 1::2] * sin
    out[:, 1::2] = x_nk[:, 0::2] * sin + x_nk[:, 1::2] * cos
    return out


def softmax_rows(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def block(p: Params, i: int, x_nd: np.ndarray, grid: Grid, cfg: dict) -> np.ndarray:
    """Block i on one clip: `x + Σ_a softmax(q_a k_aᵀ/√K) v_a O_a` over all the clip's tokens
    (RoPE on q and k; every frame repeats its grid's angles), then `x + GELU_tanh(n x F0) F1`."""
    t, h, w = grid
    pre = f"vision.blocks.{i}."
    K = cfg["head_dim"]
    angles = np.tile(rope_angles(h, w, cfg), (t, 1))
    hn = rms_norm(x_nd, cfg["eps"], p[pre + "norm0.scale"])
    attn = np.zeros_like(x_nd)
    for a in range(cfg["heads"]):
        q = rotate(hn @ p[pre + "attn.query"][:, a], angles)
        k = rotate(hn @ p[pre + "attn.key"][:, a], angles)
        v = hn @ p[pre + "attn.value"][:, a]
        attn += softmax_rows(q @ k.T / math.sqrt(K)) @ v @ p[pre + "attn.output"][a]
    x1 = x_nd + attn
    u = rms_norm(x1, cfg["eps"], p[pre + "norm1.scale"]) @ p[pre + "mlp.fc0"]
    return x1 + gelu_tanh(u) @ p[pre + "mlp.fc1"]


def merge(y_nd: np.ndarray, grid: Grid, cfg: dict) -> np.ndarray:
    """Merged token `a·(w/kw) + b`, channel `(dh·kw + dw)·D + c`: the frame mean at pixel
    `(a·kh + dh, b·kw + dw)`, channel c."""
    t, h, w = grid
    kh, kw = cfg["merge"]
    d = y_nd.shape[1]
    hm, wm = h // kh, w // kw
    out = np.zeros((hm * wm, kh * kw * d))
    for a in range(hm):
        for b in range(wm):
            for dh in range(kh):
                for dw in range(kw):
                    r, c = a * kh + dh, b * kw + dw
                    frames = [y_nd[f * h * w + r * w + c] for f in range(t)]
                    out[a * wm + b, (dh * kw + dw) * d:(dh * kw + dw + 1) * d] = sum(frames) / t
    return out


def project(p: Params, m_me: np.ndarray, cfg: dict) -> np.ndarray:
    """`RMSNorm(GELU_erf(m W₁) W₂)` (post-norm only)."""
    return rms_norm(gelu_erf(m_me @ p["projector.first"]) @ p["projector.second"], cfg["projector_eps"],
                    p["projector.post_norm.scale"])


def merge_project(p: Params, y_nd: np.ndarray, grids: list[Grid], cfg: dict) -> np.ndarray:
    """Every clip's visual tokens, clip after clip."""
    parts, start = [], 0
    for g in grids:
        n = g[0] * g[1] * g[2]
        parts.append(merge(y_nd[start:start + n], g, cfg))
        start += n
    return project(p, np.concatenate(parts), cfg)


def encode(p: Params, patches_np: np.ndarray, grid: Grid, cfg: dict) -> list[np.ndarray]:
    """One clip: the embedding, every block's output, then the final norm (the stages in order)."""
    stages = [embed(p, patches_np, grid, cfg)]
    for i in range(cfg["layers"]):
        stages.append(block(p, i, stages[-1], grid, cfg))
    stages.append(rms_norm(stages[-1], cfg["eps"], p["vision.final_norm.scale"]))
    return stages
