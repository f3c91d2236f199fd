"""Image and video preprocessing for MoonViT-V2: pixels → packed patches and grids.

Parameters come from `vision_config` (`pybridge.config.VisionConfig`): an image of `H × W` pixels
is scaled (bicubic, antialiased, never up) so that it holds at most `max_patches` patches and at
most `max_patches_per_side` on each side; padded at the bottom and right with black to a
multiple of `patch_size · merge` pixels (28 for the release), so its patch grid is a multiple
of the merge; rescaled to [0, 1], normalized with `image_mean`/`image_std`; and cut into
`patch_size²` patches in raster order, each flattened channel-major (the Conv2d weight's order).
A video clip is 1–`init_pos_emb_time` frames of one size, frame-major. The size rule is Kimi
K2.5's processor's (transformers 5.23 `navit_resize`); K3's own processor is not public.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from pybridge.config import VisionConfig
from pybridge.errors import InputError


def target_size(cfg: VisionConfig, height: int, width: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """`((resized_h, resized_w), (padded_h, padded_w))` of a `height × width` image (Kimi K2.5's
    `navit_resize`, with a merge kernel that may differ per axis)."""
    p, side = cfg.patch_size, cfg.max_patches_per_side
    count = max(1, height // p) * max(1, width // p)
    scale = min(1.0, math.sqrt(cfg.max_patches / count), side * p / height, side * p / width)
    new_h = min(max(1, int(height * scale)), side * p)
    new_w = min(max(1, int(width * scale)), side * p)
    fh, fw = p * cfg.merge_kernel_size[0], p * cfg.merge_kernel_size[1]  # pad each side to whole merges
    return (new_h, new_w), (-(-new_h // fh) * fh, -(-new_w // fw) * fw)


def _as_frames(pixels: torch.Tensor, what: str) -> torch.Tensor:
    """`[3, H, W]` or `[T, 3, H, W]` pixels (uint8 0–255, or float 0–1) as float64 `[T, 3, H, W]`."""
    if pixels.dim() == 3:
        pixels = pixels[None]
    if pixels.dim() != 4:
        raise InputError(f"{what}: pixels must have shape [3, H, W] or [T, 3, H, W], got {list(pixels.shape)}")
    if pixels.dtype == torch.uint8:
        return pixels.to(torch.float64) / 255.0
    if not pixels.is_floating_point():
        raise InputError(f"{what}: pixels must be uint8 or floating point, got {pixels.dtype}")
    return pixels.to(torch.float64)


def patchify(frames_tchw: torch.Tensor, patch: int) -> torch.Tensor:
    """`[T, C, H, W]` (H, W multiples of `patch`) → `[T·(H/p)·(W/p), C·p·p]`, frame-major,
    then raster order; each patch channel-major."""
    t, c, h, w = frames_tchw.shape
    x = frames_tchw.reshape(t, c, h // patch, patch, w // patch, patch)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(t * (h // patch) * (w // patch), c * patch * patch)


def preprocess(cfg: VisionConfig, clips: Sequence[torch.Tensor]) -> tuple[torch.Tensor, list[tuple[int, int, int]]]:
    """Packed patches `[N, C·p·p]` (float64) and the clips' grids `(t, h, w)`."""
    if not clips:
        raise InputError("no clips to preprocess")
    patches, grids = [], []
    for i, clip in enumerate(clips):
        what = f"clip {i}"
        frames = _as_frames(clip, what)
        t, c, height, width = frames.shape
        if min(t, height, width) < 1:
            raise InputError(f"{what}: pixels have an empty axis, shape {list(frames.shape)}")
        if c != cfg.in_channels:
            raise InputError(f"{what}: pixels have {c} channels, expected {cfg.in_channels} (vision_config.in_channels)")
        if t > cfg.pos_emb_time:
            raise InputError(f"{what} has {t} frames, more than the time table's {cfg.pos_emb_time} "
                             "(vision_config.init_pos_emb_time)")
        (rh, rw), (ph, pw) = target_size(cfg, height, width)
        if (rh, rw) != (height, width):
            frames = F.interpolate(frames, size=(rh, rw), mode="bicubic", align_corners=False, antialias=True)
        frames = F.pad(frames, (0, pw - rw, 0, ph - rh))  # black, before normalization
        mean = torch.tensor(cfg.image_mean, dtype=torch.float64)[None, :, None, None]
        std = torch.tensor(cfg.image_std, dtype=torch.float64)[None, :, None, None]
        patches.append(patchify((frames - mean) / std, cfg.patch_size))
        grids.append((t, ph // cfg.patch_size, pw // cfg.patch_size))
    return torch.cat(patches), grids
