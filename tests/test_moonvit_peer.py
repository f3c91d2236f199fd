"""Peer check: pybridge's MoonViT-V2 against transformers 5.23 `kimi_k25` (Kimi K2.5's MoonViT)
wherever the two compute the same function (docs/vision.md lists every difference).

Weights are copied across by name mapping; where K2.5 has a bias or a norm that K3 lacks, the peer
gets zero biases and the comparison stops before that norm. Both sides run in float64 and agree to
float64 rounding, except where transformers itself computes in float32 (its RoPE casts q, k, cos
and sin to float32; its time table and interpolation weights are float32): there the comparison
is done twice, once with that cast replaced by float64 (the function, to float64 rounding) and
once as transformers runs it (to float32 rounding)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from pybridge import moonvit
from pybridge.config import load_config

k25 = pytest.importorskip("transformers.models.kimi_k25.modeling_kimi_k25")
k25_config = pytest.importorskip("transformers.models.kimi_k25.configuration_kimi_k25")
vision_utils = pytest.importorskip("transformers.vision_utils")

torch.set_num_threads(1)
F64 = torch.float64
TINY = load_config(Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "config.json").vision
#: K2.5's attention maps width D to D, so the peer configuration has qkv width = width (24 = 3 heads
#: of 8) and K2.5's square position table (8 × 8).
PEER = dataclasses.replace(TINY, hidden_size=24, qkv_hidden_size=24, pos_emb_height=8, pos_emb_width=8)
GRIDS = [(1, 4, 6), (3, 2, 8), (2, 6, 4), (1, 10, 12)]
F64_BOUND = 1e-13  # float64 rounding, relative to the largest entry
F32_BOUND = 2e-6  # float32 rounding


def max_rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).abs().max() / want.abs().max())


def hf_vision_config():
    vc = k25_config.Kimi_K25VisionConfig(
        hidden_size=PEER.hidden_size, num_attention_heads=PEER.num_heads, intermediate_size=PEER.intermediate_size,
        num_hidden_layers=1, patch_size=PEER.patch_size, pos_emb_height=8, pos_emb_width=8, pos_emb_time=PEER.pos_emb_time,
        merge_kernel_size=list(PEER.merge_kernel_size), rope_parameters={"rope_type": "axial", "rope_theta": PEER.rope_theta})
    vc._attn_implementation = "sdpa"  # float64 throughout (its eager path takes the softmax in float32)
    return vc


def grid_thw(grids) -> torch.Tensor:
    return torch.tensor(grids, dtype=torch.long)


def rope_permutation(head_dim: int) -> list[int]:
    """transformers channel i ↔ pybridge channel perm[i]. transformers rotates channel i with
    i + K/2 (`rotate_half`), pair i = 2j by the column and 2j + 1 by the row at frequency j
    (`recomposition_frequencies`); pybridge rotates channels 2p, 2p + 1, pair j < R by the row and
    R + j by the column."""
    half, R = head_dim // 2, head_dim // 4
    pair = [(i // 2 if i % 2 else R + i // 2) for i in range(half)]
    return [2 * pair[i] for i in range(half)] + [2 * pair[i] + 1 for i in range(half)]


def test_merge_order_matches() -> None:
    """K2.5's temporal merge (`temporal_patch_merger` over the packed clips; the gather index of
    `get_vision_temporal_merge_index` clip by clip), flattened as its projector flattens the kernel
    axis, is pybridge's merge: channel `(dh·2 + dw)·D + c`. (The gather index cannot hold clips of
    different frame counts in one call: `torch.cat` of `[m, t, 4]` blocks; docs/vision.md.)"""
    gen = torch.Generator().manual_seed(0)
    y = torch.randn(sum(t * h * w for t, h, w in GRIDS), 5, dtype=F64, generator=gen)
    ours, theirs, start = [], [], 0
    for t, h, w in GRIDS:
        clip = y[start : start + t * h * w]
        ours.append(moonvit.merge_clip(clip, (t, h, w), (2, 2)))
        index = k25.get_vision_temporal_merge_index(grid_thw([(t, h, w)]), 2, 2)
        theirs.append(clip[index].mean(dim=1).reshape(index.shape[0], -1))
        start += t * h * w
    ours = torch.cat(ours)
    assert max_rel(torch.cat(theirs), ours) <= 1e-15
    packed = k25.Kimi_K25VisionModel.temporal_patch_merger(SimpleNamespace(merge_kernel_size=(2, 2)), y, grid_thw(GRIDS))
    assert max_rel(packed.reshape(packed.shape[0], -1), ours) <= 1e-15


def test_projector_shape_of_computation_matches() -> None:
    """K2.5's `Linear+b → GELU(erf) → Linear+b` on the merged vector, with zero biases and its
    pre-norm (a LayerNorm per patch, which K3 does not have) left out, is K3's projector before
    its post-norm."""
    torch.manual_seed(1)
    ours = moonvit.random_moonvit(PEER, seed=2).mm_projector
    cfg = k25_config.Kimi_K25Config(vision_config=hf_vision_config().to_dict(),
                                    text_config={"model_type": "deepseek_v3", "hidden_size": PEER.text_hidden_size},
                                    projection_hidden_size=PEER.hidden_size)
    theirs = k25.Kimi_K25MultimodalProjection(cfg).to(F64)
    with torch.no_grad():
        theirs.pre_norm = torch.nn.Identity()
        theirs.in_proj.weight.copy_(ours.proj[0].weight)
        theirs.out_proj.weight.copy_(ours.proj[2].weight)
        theirs.in_proj.bias.zero_()
        theirs.out_proj.bias.zero_()
        pooled = torch.randn(7, 4, PEER.hidden_size, dtype=F64)
        got = theirs(pooled[None])[0]
        want = ours.proj(pooled.reshape(7, -1))
    assert max_rel(got, want) <= F64_BOUND


def _float64_rope(q, k, cos, sin):
    """transformers' `apply_rotary_pos_emb_vision` without its float32 casts (its own `rotate_half`)."""
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return q * cos + k25.rotate_half(q) * sin, k * cos + k25.rotate_half(k) * sin


def _attention_pair(seed: int, mapped: bool = True):
    """pybridge's block attention and K2.5's attention with the same weights (zero biases; q and
    k rows permuted per head by `rope_permutation`), the inputs, and both sides' RoPE tables."""
    vc = hf_vision_config()
    block = moonvit.random_moonvit(PEER, seed=seed).vision_tower.encoder.blocks[0]
    theirs = k25.Kimi_K25VisionAttention(vc).to(F64)
    A, K, Q = PEER.num_heads, PEER.head_dim, PEER.qkv_hidden_size
    order = rope_permutation(K) if mapped else list(range(K))
    perm = torch.tensor([a * K + p for a in range(A) for p in order])
    w = block.wqkv.weight.detach()
    with torch.no_grad():
        theirs.q_proj.weight.copy_(w[:Q][perm])
        theirs.k_proj.weight.copy_(w[Q : 2 * Q][perm])
        theirs.v_proj.weight.copy_(w[2 * Q :])
        theirs.proj.weight.copy_(block.wo.weight)
        for lin in (theirs.q_proj, theirs.k_proj, theirs.v_proj, theirs.proj):
            lin.bias.zero_()
    n = sum(t * h * w for t, h, w in GRIDS)
    x = torch.randn(n, PEER.hidden_size, dtype=F64, generator=torch.Generator().manual_seed(seed))
    angles = torch.cat([moonvit.rope_angles(PEER, h, w).repeat(t, 1) for t, h, w in GRIDS])
    ours = block.attention(x, angles.cos(), angles.sin(), moonvit.clip_mask(GRIDS))
    # their RoPE table: their position ids and layout, their frequency formula evaluated in float64
    rotary = k25.Kimi_K25VisionRotaryEmbedding(vc)
    spatial = K // 2
    inv_freq = 1.0 / (PEER.rope_theta ** (torch.arange(0, spatial, 2, dtype=F64) / spatial))
    assert torch.allclose(rotary.inv_freq.to(F64), inv_freq, rtol=1e-7, atol=0)
    pos = vision_utils.get_vision_position_ids(grid_thw(GRIDS), spatial_merge_size=1)
    freqs = pos[..., None].to(F64) * inv_freq
    cos, sin = rotary.recomposition_frequencies(freqs.cos()), rotary.recomposition_frequencies(freqs.sin())
    cu, max_len = vision_utils.get_vision_attention_seqlens(grid_thw(GRIDS), vc, merge_temporal=True)
    return theirs, x, (cos, sin), (cu, max_len), ours, rotary, pos


def test_attention_with_rope_and_block_diagonal_mask_matches(monkeypatch) -> None:
    """One clip-level attention (K2.5: a loop over `cu_seqlens` segments; pybridge: one batch under
    the block-diagonal mask) with 2-D RoPE once the axis conventions are mapped."""
    theirs, x, (cos, sin), (cu, max_len), ours, _, _ = _attention_pair(seed=3)
    monkeypatch.setattr(k25, "apply_rotary_pos_emb_vision", _float64_rope)
    with torch.no_grad():
        got = theirs(x, cu_seqlens=cu, position_embeddings=(cos, sin), max_seqlen=max_len)
    assert float(ours.detach().abs().max()) > 0.1
    assert max_rel(got, ours.detach()) <= F64_BOUND, max_rel(got, ours.detach())


def test_attention_as_transformers_runs_it() -> None:
    """The same with transformers' own float32 RoPE (its rotary module and cast): float32 rounding."""
    theirs, x, _, (cu, max_len), ours, rotary, pos = _attention_pair(seed=4)
    with torch.no_grad():
        cos, sin = rotary(x, pos)
        got = theirs(x, cu_seqlens=cu, position_embeddings=(cos, sin), max_seqlen=max_len)
    err = max_rel(got, ours.detach())
    assert err <= F32_BOUND, err


def test_unmapped_rope_axes_disagree(monkeypatch) -> None:
    """Without the channel mapping the two attentions differ: the mapping is what makes them agree."""
    theirs, x, (cos, sin), (cu, max_len), ours, _, _ = _attention_pair(seed=3, mapped=False)
    monkeypatch.setattr(k25, "apply_rotary_pos_emb_vision", _float64_rope)
    with torch.no_grad():
        got = theirs(x, cu_seqlens=cu, position_embeddings=(cos, sin), max_seqlen=max_len)
    assert max_rel(got, ours.detach()) > 1e-3


@pytest.mark.parametrize("h, w", [(16, 4), (8, 8), (32, 2)])
def test_bilinear_position_table_matches_transformers_bilinear_mode(h: int, w: int) -> None:
    """transformers' interpolation helper in bilinear mode with half-pixel centres (K2.5 itself
    uses bicubic) is pybridge's resampling: on sizes whose weights are exact in float32 (scales
    by powers of 2; its weights are float32), to float64 rounding."""
    cfg = dataclasses.replace(PEER, hidden_size=6)
    embed = moonvit.PatchEmbed(cfg)
    with torch.no_grad():
        embed.pos_emb.weight.copy_(torch.randn(8, 8, 6, dtype=torch.float32, generator=torch.Generator().manual_seed(5)))
    table = embed.pos_emb.weight.detach().to(F64)
    idx, wts = vision_utils.get_vision_interpolation_indices_and_weights(grid_thw([(1, h, w)]), 8, mode="bilinear",
                                                                         align_corners=False)
    theirs = (table.reshape(64, 6)[idx] * wts.to(F64)[..., None]).sum(1)
    assert max_rel(embed.position(h, w, F64).detach(), theirs) <= F64_BOUND


def test_bilinear_position_table_at_other_sizes() -> None:
    """At scales that are not powers of 2 the helper's float32 weights agree to float32 rounding."""
    embed = moonvit.PatchEmbed(dataclasses.replace(PEER, hidden_size=6))
    with torch.no_grad():
        embed.pos_emb.weight.normal_()
    table = embed.pos_emb.weight.detach().to(F64)
    idx, wts = vision_utils.get_vision_interpolation_indices_and_weights(grid_thw([(1, 10, 6)]), 8, mode="bilinear",
                                                                         align_corners=False)
    theirs = (table.reshape(64, 6)[idx] * wts.to(F64)[..., None]).sum(1)
    assert max_rel(embed.position(10, 6, F64).detach(), theirs) <= F32_BOUND


def test_time_table_matches() -> None:
    """K2.5's time table (float32) has a zero row 0 that single images read, and frame f of a clip
    of t > 1 frames reads row f + 1, which is pybridge's row f."""
    emb = k25.Kimi_K25VisionPositionEmbeddings(hf_vision_config())
    theirs = emb.compute_pos_embed().to(F64)
    assert torch.equal(theirs[0], torch.zeros(PEER.hidden_size, dtype=F64))
    assert max_rel(theirs[1:], moonvit.time_table(PEER.pos_emb_time, PEER.hidden_size)) <= F32_BOUND
    index = k25.get_vision_frame_index(grid_thw([(1, 2, 2), (3, 2, 2)]))
    assert index.tolist() == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4
