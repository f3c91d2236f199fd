"""Multimodal prefill: a prompt's placeholder tokens replaced by MoonViT's visual tokens.

A prompt holds one `media_placeholder_token_id` (163605 in the release) per visual token; the
visual tokens of all clips, clip after clip (`MoonViT.forward`), fill the placeholders in reading
order (batch row by row, left to right), as transformers' Kimi K2.5 does (`masked_scatter`). The
count of placeholders must equal the count of visual tokens. Then the text model runs on the rows.

    logits, cache = prefill_pixels(model, vit, ids_bt, [image_chw, video_tchw])
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pybridge.errors import InputError
from pybridge.image import preprocess
from pybridge.model import K3Cache, KimiK3ForCausalLM
from pybridge.moonvit import Grid, MoonViT


def splice(embeds_btd: torch.Tensor, ids_bt: torch.Tensor, placeholder: int, features_md: torch.Tensor) -> torch.Tensor:
    """`embeds_btd` with the rows at `placeholder` ids replaced by `features_md`, in reading order."""
    mask_bt = ids_bt == placeholder
    count = int(mask_bt.sum())
    if count != features_md.shape[0]:
        raise InputError(f"the prompt has {count} placeholder token(s) (id {placeholder}, media_placeholder_token_id) "
                         f"but the clips give {features_md.shape[0]} visual token(s); they must be equal")
    if features_md.shape[1:] != embeds_btd.shape[2:]:
        raise InputError(f"visual tokens have width {features_md.shape[1]}, the text model {embeds_btd.shape[2]}")
    out = embeds_btd.clone()
    out[mask_bt] = features_md.to(out.dtype)
    return out


def prefill(model: KimiK3ForCausalLM, vit: MoonViT, ids_bt: torch.Tensor, patches_np: torch.Tensor,
            grids: Sequence[Grid]) -> tuple[torch.Tensor, K3Cache]:
    """Logits `[B, T, vocab]` and the cache of a prompt whose placeholders take the clips' visual tokens."""
    placeholder = model.config.media_placeholder_token_id
    if placeholder is None:
        raise InputError("the text config has no media_placeholder_token_id (no vision_config): no visual input")
    if ids_bt.dim() != 2 or ids_bt.shape[1] == 0:
        raise InputError(f"input ids must have shape [batch, tokens] with tokens >= 1, got {tuple(ids_bt.shape)}")
    vocab = model.config.vocab_size
    if ids_bt.min() < 0 or ids_bt.max() >= vocab:
        raise InputError(f"token ids must lie in [0, {vocab}), got min {int(ids_bt.min())} max {int(ids_bt.max())}")
    embeds = model.model.embed_tokens(ids_bt)
    return model.forward_embeds(splice(embeds, ids_bt, placeholder, vit(patches_np, grids)))


def prefill_pixels(model: KimiK3ForCausalLM, vit: MoonViT, ids_bt: torch.Tensor,
                   clips: Sequence[torch.Tensor]) -> tuple[torch.Tensor, K3Cache]:
    """`prefill` from pixels: each clip `[3, H, W]` or `[T, 3, H, W]` (`pybridge.image.preprocess`)."""
    patches, grids = preprocess(vit.cfg, clips)
    return prefill(model, vit, ids_bt, patches, grids)
