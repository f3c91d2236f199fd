"""Hub-format `config.json` -> validated `K3Config`.

The file uses the same keys as the released Kimi K3 text config (`KimiLinearConfig`:
flat MLA/MoE fields plus a nested `linear_attn_config` for KDA). A multimodal config
that nests the text part under `text_config` is accepted too. A config of the Kimi Linear
family (`model_type` "kimi_linear" without K3's `attn_res_block_size`) selects the Kimi Linear
variant instead: `config_kimi_linear.KimiLinearConfig` (`variant` "kimi_linear").

Extension keys (absent from the hub file; defaults reproduce the hub code's behaviour):
  * `linear_attn_config.head_k_dim` / `head_v_dim` (default `head_dim`): the hub uses one
    KDA head width for keys and values; separate widths let tests use all-distinct dims.
  * `linear_attn_config.decay_rank` (default `head_dim`): rank of the f_a/f_b decay projection.
  * `linear_attn_config.query_scale` (default `head_k_dim ** -0.5`, fla's `chunk_kda` default,
    which the hub code uses): KDA readout is `o = query_scale * S_t^T q_t` (Lean scales the
    query before the readout, fla's `q * scale`; equal by linearity).
  * `mla_score_scale` (default `(qk_nope_head_dim + qk_rope_head_dim) ** -0.5`, the hub value).
  * One RMSNorm / L2 epsilon per norm site (Lean `Config`; the table in pybridge/README.md,
    decision 8). The hub reads
    `rms_norm_eps` for the pre-norms, the final norm, the KDA output norm and the LatentMoE norm,
    and hard-codes 1e-6 for MLA's `q_a_layernorm` / `kv_a_layernorm` (transformers, NeMo) and
    for fla's KDA `l2norm`; these keys override a site and default to exactly that:
      `attn_res_norm_eps`          AttnRes score norms (every retrieval)   default rms_norm_eps
      `final_norm_eps`             `model.norm`                            default rms_norm_eps
      `mla_latent_norm_eps`        MLA `q_a_layernorm`, `kv_a_layernorm`   default 1e-6
      `latent_moe_norm_eps`        LatentMoE `routed_expert_norm`          default rms_norm_eps
      `linear_attn_config.output_norm_eps`   KDA `o_norm`                  default rms_norm_eps
      `linear_attn_config.l2_norm_eps`       KDA q/k L2 normalization      default 1e-6
    `rms_norm_eps` itself is the epsilon of the two pre-norms (`input_layernorm`,
    `post_attention_layernorm`).

The optional top-level `vision_config` (MoonViT-V2, k3-spec §7) becomes `K3Config.vision`
(`VisionConfig`, read by `vision_config_from_dict`), and `media_placeholder_token_id` (163605 in
the release) marks a prompt's visual tokens. Released names: `patch_size`, `vt_hidden_size`,
`qkv_hidden_size`, `vt_intermediate_size`, `vt_num_hidden_layers`, `vt_num_attention_heads`,
`merge_kernel_size`, `text_hidden_size`; the checkpoint port's `in_channels` (3),
`init_pos_emb_height`/`width` (64), `init_pos_emb_time` (4), `pos_emb_interpolation_mode`
("bilinear" only), `rms_norm_eps` and `projector_ln_eps` (1e-5); and this project's extensions
`rope_theta` (1e4) and the image preprocessing `image_mean`, `image_std` (0.5 each),
`max_patches` (16384), `max_patches_per_side` (512) (`pybridge.image`; Kimi K2.5's processor's
values, K3's is not public).
"""

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pybridge.config_kimi_linear import KimiLinearConfig, is_kimi_linear, kimi_linear_config_from_dict
from pybridge.errors import ConfigError

SUPPORTED_ACT = "situ"
#: The epsilon transformers' Kimi Linear and NeMo's K3 hard-code for MLA's latent norms.
HUB_MLA_LATENT_EPS = 1e-6
#: The epsilon of fla's `l2norm` (KDA queries and keys).
HUB_L2_EPS = 1e-6


@dataclass(frozen=True)
class K3Config:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    rms_norm_eps: float  # the pre-norms
    attn_res_norm_eps: float
    final_norm_eps: float
    mla_latent_norm_eps: float
    latent_moe_norm_eps: float
    kda_output_norm_eps: float
    kda_l2_norm_eps: float
    tie_word_embeddings: bool
    # Gated MLA (NoPE)
    num_attention_heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int  # per-head content key width
    qk_rope_head_dim: int  # shared (unrotated) key width
    v_head_dim: int
    mla_score_scale: float
    # KDA
    kda_num_heads: int
    kda_head_k_dim: int
    kda_head_v_dim: int
    kda_decay_rank: int
    kda_conv_size: int
    kda_gate_lower_bound: float
    kda_query_scale: float
    # Stable LatentMoE / dense FFN
    num_experts: int
    num_experts_per_token: int
    num_shared_experts: int
    moe_intermediate_size: int  # routed-expert hidden width (shared: times num_shared_experts)
    routed_expert_hidden_size: int  # latent width
    routed_scaling_factor: float
    first_k_dense_replace: int
    moe_layer_freq: int
    intermediate_size: int  # dense FFN hidden width
    situ_gate_cap: float
    situ_up_cap: float
    # AttnRes
    attn_res_block_size: int
    # MoonViT-V2 (None: a text-only model) and the id of a prompt's visual-token placeholders
    vision: "VisionConfig | None" = None
    media_placeholder_token_id: int | None = None
    #: which variant of the spec: "k3" (this class) or "kimi_linear" (`config_kimi_linear.KimiLinearConfig`)
    variant: str = "k3"

    def is_mla(self, layer_idx: int) -> bool:
        """Layer schedule with a 0-based index: 1-based n is MLA iff n % 4 == 0 or n == L."""
        n = layer_idx + 1
        return n % 4 == 0 or n == self.num_hidden_layers

    def is_moe(self, layer_idx: int) -> bool:
        """Hub rule (0-based): MoE iff idx >= first_k_dense_replace and idx % moe_layer_freq == 0."""
        return layer_idx >= self.first_k_dense_replace and layer_idx % self.moe_layer_freq == 0


@dataclass(frozen=True)
class VisionConfig:
    """MoonViT-V2 and its projector (k3-spec §7), and the image preprocessing (`pybridge.image`)."""

    patch_size: int
    in_channels: int
    hidden_size: int  # D, the encoder width
    num_heads: int  # A
    qkv_hidden_size: int  # A · head_dim (wider than D in the release: 12 × 128 = 1536)
    intermediate_size: int  # the MLP width M
    num_layers: int
    pos_emb_height: int  # rows of the learned position table
    pos_emb_width: int  # columns of the learned position table
    pos_emb_time: int  # rows of the fixed sincos time table: the most frames a clip may have
    merge_kernel_size: tuple[int, int]
    text_hidden_size: int
    rms_norm_eps: float  # norm0, norm1, the final norm
    projector_eps: float  # mm_projector.post_norm
    rope_theta: float
    image_mean: tuple[float, ...]
    image_std: tuple[float, ...]
    max_patches: int
    max_patches_per_side: int

    @property
    def head_dim(self) -> int:
        return self.qkv_hidden_size // self.num_heads

    @property
    def rope_freqs(self) -> int:
        """Rotary frequencies per grid axis: head_dim / 4 (half the pairs turn by the row, half by the column)."""
        return self.head_dim // 4

    @property
    def patch_dim(self) -> int:
        return self.in_channels * self.patch_size * self.patch_size

    @property
    def merged_size(self) -> int:
        return self.merge_kernel_size[0] * self.merge_kernel_size[1] * self.hidden_size


def _get(d: dict, key: str, kind: str, where: str, default: Any = None) -> Any:
    """Read `d[key]` and check it. kind: pos_int | nonneg_int | pos_float | float | bool."""
    name = f"{where}{key}"
    if key not in d:
        if default is not None:
            return default
        raise ConfigError(f"field '{name}' is missing")
    v = d[key]
    if kind in ("pos_int", "nonneg_int"):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"field '{name}' must be an integer, got {v!r}")
        if v < (1 if kind == "pos_int" else 0):
            raise ConfigError(f"field '{name}' must be {'positive' if kind == 'pos_int' else '>= 0'}, got {v}")
        return v
    if kind in ("pos_float", "float"):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(f"field '{name}' must be a finite number, got {v!r}")
        if kind == "pos_float" and v <= 0:
            raise ConfigError(f"field '{name}' must be positive, got {v}")
        return float(v)
    if kind == "bool":
        if not isinstance(v, bool):
            raise ConfigError(f"field '{name}' must be true or false, got {v!r}")
        return v
    raise AssertionError(kind)


def _require(d: dict, key: str, expected: Any, where: str = "") -> None:
    if d.get(key, expected) != expected:
        raise ConfigError(f"field '{where}{key}' must be {expected!r} (only value supported), got {d[key]!r}")


def config_from_dict(raw: Any) -> "K3Config | KimiLinearConfig":
    """Validate a parsed hub config; raises ConfigError naming the offending field. A config of
    the Kimi Linear family (`config_kimi_linear.is_kimi_linear`) gives its `KimiLinearConfig`."""
    if not isinstance(raw, dict):
        raise ConfigError(f"top level must be a JSON object, got {type(raw).__name__}")
    d = raw.get("text_config", raw)
    if not isinstance(d, dict):
        raise ConfigError("field 'text_config' must be a JSON object")
    if is_kimi_linear(d):
        return kimi_linear_config_from_dict(d)
    lac = d.get("linear_attn_config")
    if not isinstance(lac, dict):
        raise ConfigError("field 'linear_attn_config' is missing or not a JSON object")
    w = "linear_attn_config."

    _require(d, "hidden_act", SUPPORTED_ACT)
    _require(d, "mla_use_nope", True)
    _require(d, "mla_use_output_gate", True)
    _require(d, "moe_router_activation_func", "sigmoid")
    _require(d, "moe_renormalize", True)
    _require(d, "latent_moe_use_norm", True)
    _require(d, "num_expert_group", 1)
    _require(d, "topk_group", 1)
    _require(lac, "use_full_rank_gate", True, w)

    heads = _get(d, "num_attention_heads", "pos_int", "")
    if d.get("num_key_value_heads", heads) != heads:
        raise ConfigError(
            f"field 'num_key_value_heads' must equal num_attention_heads ({heads}), got {d['num_key_value_heads']!r}"
        )
    nope = _get(d, "qk_nope_head_dim", "pos_int", "")
    rope = _get(d, "qk_rope_head_dim", "pos_int", "")
    head_dim = _get(lac, "head_dim", "pos_int", w)
    head_k = _get(lac, "head_k_dim", "pos_int", w, head_dim)
    layers = _get(d, "num_hidden_layers", "pos_int", "")

    eps = _get(d, "rms_norm_eps", "pos_float", "")
    cfg = K3Config(
        vocab_size=_get(d, "vocab_size", "pos_int", ""),
        hidden_size=_get(d, "hidden_size", "pos_int", ""),
        num_hidden_layers=layers,
        rms_norm_eps=eps,
        attn_res_norm_eps=_get(d, "attn_res_norm_eps", "pos_float", "", eps),
        final_norm_eps=_get(d, "final_norm_eps", "pos_float", "", eps),
        mla_latent_norm_eps=_get(d, "mla_latent_norm_eps", "pos_float", "", HUB_MLA_LATENT_EPS),
        latent_moe_norm_eps=_get(d, "latent_moe_norm_eps", "pos_float", "", eps),
        kda_output_norm_eps=_get(lac, "output_norm_eps", "pos_float", w, eps),
        kda_l2_norm_eps=_get(lac, "l2_norm_eps", "pos_float", w, HUB_L2_EPS),
        tie_word_embeddings=_get(d, "tie_word_embeddings", "bool", "", False),
        num_attention_heads=heads,
        q_lora_rank=_get(d, "q_lora_rank", "pos_int", ""),
        kv_lora_rank=_get(d, "kv_lora_rank", "pos_int", ""),
        qk_nope_head_dim=nope,
        qk_rope_head_dim=rope,
        v_head_dim=_get(d, "v_head_dim", "pos_int", ""),
        mla_score_scale=_get(d, "mla_score_scale", "pos_float", "", (nope + rope) ** -0.5),
        kda_num_heads=_get(lac, "num_heads", "pos_int", w),
        kda_head_k_dim=head_k,
        kda_head_v_dim=_get(lac, "head_v_dim", "pos_int", w, head_dim),
        kda_decay_rank=_get(lac, "decay_rank", "pos_int", w, head_dim),
        kda_conv_size=_get(lac, "short_conv_kernel_size", "pos_int", w),
        kda_gate_lower_bound=_get(lac, "gate_lower_bound", "float", w),
        kda_query_scale=_get(lac, "query_scale", "pos_float", w, head_k**-0.5),
        num_experts=_get(d, "num_experts", "pos_int", ""),
        num_experts_per_token=_get(d, "num_experts_per_token", "pos_int", ""),
        num_shared_experts=_get(d, "num_shared_experts", "pos_int", ""),
        moe_intermediate_size=_get(d, "moe_intermediate_size", "pos_int", ""),
        routed_expert_hidden_size=_get(d, "routed_expert_hidden_size", "pos_int", ""),
        routed_scaling_factor=_get(d, "routed_scaling_factor", "pos_float", "", 1.0),
        first_k_dense_replace=_get(d, "first_k_dense_replace", "nonneg_int", "", 0),
        moe_layer_freq=_get(d, "moe_layer_freq", "pos_int", "", 1),
        intermediate_size=_get(d, "intermediate_size", "pos_int", ""),
        situ_gate_cap=_get(d, "activation_situ_beta", "pos_float", ""),
        situ_up_cap=_get(d, "activation_situ_linear_beta", "pos_float", ""),
        attn_res_block_size=_get(d, "attn_res_block_size", "pos_int", ""),
    )
    if cfg.kda_gate_lower_bound >= 0:
        raise ConfigError(f"field '{w}gate_lower_bound' must be negative, got {cfg.kda_gate_lower_bound}")
    if cfg.num_experts_per_token > cfg.num_experts:
        raise ConfigError(
            f"field 'num_experts_per_token' ({cfg.num_experts_per_token}) exceeds 'num_experts' ({cfg.num_experts})"
        )
    _check_layer_lists(lac, cfg)
    if "vision_config" in raw:
        vision = vision_config_from_dict(raw["vision_config"], cfg.hidden_size)
        ph = _get(raw, "media_placeholder_token_id", "nonneg_int", "")
        if ph >= cfg.vocab_size:
            raise ConfigError(f"field 'media_placeholder_token_id' ({ph}) must be below vocab_size ({cfg.vocab_size})")
        cfg = dataclasses.replace(cfg, vision=vision, media_placeholder_token_id=ph)
    return cfg


def _floats(d: dict, key: str, n: int, where: str, default: tuple[float, ...]) -> tuple[float, ...]:
    v = d.get(key, list(default))
    if (not isinstance(v, list) or len(v) != n
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)):
        raise ConfigError(f"field '{where}{key}' must be a list of {n} finite numbers (one per channel), got {v!r}")
    return tuple(float(x) for x in v)


def vision_config_from_dict(v: Any, text_hidden: int) -> VisionConfig:
    """Validate a `vision_config` object (text width `text_hidden`); raises ConfigError naming the field."""
    w = "vision_config."
    if not isinstance(v, dict):
        raise ConfigError("field 'vision_config' must be a JSON object")
    _require(v, "pos_emb_interpolation_mode", "bilinear", w)
    merge = v.get("merge_kernel_size", [2, 2])
    if (not isinstance(merge, list) or len(merge) != 2
            or not all(isinstance(m, int) and not isinstance(m, bool) and m > 0 for m in merge)):
        raise ConfigError(f"field '{w}merge_kernel_size' must be two positive integers, got {merge!r}")
    channels = _get(v, "in_channels", "pos_int", w, 3)
    vc = VisionConfig(
        patch_size=_get(v, "patch_size", "pos_int", w),
        in_channels=channels,
        hidden_size=_get(v, "vt_hidden_size", "pos_int", w),
        num_heads=_get(v, "vt_num_attention_heads", "pos_int", w),
        qkv_hidden_size=_get(v, "qkv_hidden_size", "pos_int", w),
        intermediate_size=_get(v, "vt_intermediate_size", "pos_int", w),
        num_layers=_get(v, "vt_num_hidden_layers", "pos_int", w),
        pos_emb_height=_get(v, "init_pos_emb_height", "pos_int", w, 64),
        pos_emb_width=_get(v, "init_pos_emb_width", "pos_int", w, 64),
        pos_emb_time=_get(v, "init_pos_emb_time", "pos_int", w, 4),
        merge_kernel_size=(merge[0], merge[1]),
        text_hidden_size=_get(v, "text_hidden_size", "pos_int", w),
        rms_norm_eps=_get(v, "rms_norm_eps", "pos_float", w, 1e-5),
        projector_eps=_get(v, "projector_ln_eps", "pos_float", w, 1e-5),
        rope_theta=_get(v, "rope_theta", "pos_float", w, 10000.0),
        image_mean=_floats(v, "image_mean", channels, w, (0.5,) * channels),
        image_std=_floats(v, "image_std", channels, w, (0.5,) * channels),
        max_patches=_get(v, "max_patches", "pos_int", w, 16384),
        max_patches_per_side=_get(v, "max_patches_per_side", "pos_int", w, 512),
    )
    if vc.qkv_hidden_size % vc.num_heads or vc.head_dim % 4:
        raise ConfigError(
            f"field '{w}qkv_hidden_size' ({vc.qkv_hidden_size}) must be vt_num_attention_heads "
            f"({vc.num_heads}) times a head width divisible by 4 (2-D RoPE: two axes of rotary pairs)")
    if vc.hidden_size % 2:
        raise ConfigError(f"field '{w}vt_hidden_size' ({vc.hidden_size}) must be even (the time table's sin and cos halves)")
    if vc.text_hidden_size != text_hidden:
        raise ConfigError(f"field '{w}text_hidden_size' ({vc.text_hidden_size}) must equal hidden_size ({text_hidden})")
    if any(s <= 0 for s in vc.image_std):
        raise ConfigError(f"field '{w}image_std' must be positive, got {list(vc.image_std)}")
    if vc.max_patches < vc.merge_kernel_size[0] * vc.merge_kernel_size[1]:
        raise ConfigError(f"field '{w}max_patches' ({vc.max_patches}) must hold at least one merged token "
                          f"({vc.merge_kernel_size[0] * vc.merge_kernel_size[1]} patches)")
    return vc


def _check_layer_lists(lac: dict, cfg: K3Config) -> None:
    """If the config lists KDA / MLA layers (1-based), they must match the K3 schedule."""
    mla = [n for n in range(1, cfg.num_hidden_layers + 1) if cfg.is_mla(n - 1)]
    kda = [n for n in range(1, cfg.num_hidden_layers + 1) if not cfg.is_mla(n - 1)]
    for key, want in (("full_attn_layers", mla), ("kda_layers", kda)):
        if key in lac and (not isinstance(lac[key], list) or sorted(lac[key]) != want):
            raise ConfigError(
                f"field 'linear_attn_config.{key}' must list the 1-based layers {want} "
                f"(MLA iff n % 4 == 0 or n == num_hidden_layers), got {lac[key]!r}"
            )


def load_config(path: str | Path) -> "K3Config | KimiLinearConfig":
    """Read and validate a config.json file (or a directory containing one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read config ({e.__class__.__name__}: {e})") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{p}: not valid JSON ({e})") from None
    try:
        return config_from_dict(raw)
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from None
