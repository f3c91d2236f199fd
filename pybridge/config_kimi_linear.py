"""Hub `config.json` of the Kimi Linear family -> validated `KimiLinearConfig` (the Kimi Linear
variant of the spec, k3-spec §7 "Kimi Linear in transformers 5.23").

Selection (`is_kimi_linear`): `model_type` "kimi_linear" (as transformers' `KimiLinearConfig`
writes it and moonshotai/Kimi-Linear-* ship it) without any of K3's own fields
(`attn_res_block_size`, `routed_expert_hidden_size`, the SiTU caps, `hidden_act` "situ", ...).
This project's tiny K3 fixture still says `model_type` "kimi_linear" (the release says
"kimi_k3"); its K3 fields keep it K3.

Both spellings are read: the hub's nested `linear_attn_config.{head_dim, num_heads,
short_conv_kernel_size, kda_layers, full_attn_layers}` (1-based layer lists) and the flat keys
transformers' `save_pretrained` writes (`linear_head_dim`, `linear_num_heads`,
`linear_conv_kernel_dim`, `layer_types`, `mlp_layer_types`); the nested one wins, as in
`KimiLinearConfig.__post_init__`. Layer schedule precedence as there: `layer_types`, else the
two lists, else transformers' default (0-based i is MLA iff i > 0 and i % 4 == 0). MLP
schedule: `mlp_layer_types`, else dense iff i < `first_k_dense_replace` (default 1).

What the variant fixes (not in the file; transformers hard-codes them): KDA query scale
`head_dim ** -0.5`, KDA L2 epsilon 1e-6, MLA latent-norm epsilon 1e-6, KDA output-norm epsilon
`rms_norm_eps`, decay and output-gate ranks `head_dim`, softplus threshold 20, the router's
renormalisation epsilon 1e-20. Every bad or missing field is a `ConfigError` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pybridge.errors import ConfigError

#: transformers' Kimi Linear hard-codes these (modeling_kimi_linear.py, 5.23)
L2_EPS = 1e-6
MLA_LATENT_EPS = 1e-6
SOFTPLUS_THRESHOLD = 20.0
ROUTER_EPS = 1e-20
LAYER_KINDS = ("linear_attention", "full_attention")
MLP_KINDS = ("dense", "sparse")


@dataclass(frozen=True)
class KimiLinearConfig:
    """The Kimi Linear variant. Field names equal `K3Config`'s where the meaning coincides (so the
    shared KDA/MLA code reads either); `variant` tells them apart."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    rms_norm_eps: float  # pre-norms, final norm, KDA o_norm
    tie_word_embeddings: bool
    # MLA (NoPE), no output gate; q_lora_rank None: one q_proj
    num_attention_heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    # KDA: one head width for q, k, v; decay and output gate low-rank through head_dim
    kda_num_heads: int
    kda_head_dim: int
    kda_conv_size: int
    # DeepSeek-style MoE (SwiGLU, model width) and the dense SwiGLU MLP
    num_experts: int
    num_experts_per_token: int
    num_shared_experts: int
    moe_intermediate_size: int
    intermediate_size: int
    routed_scaling_factor: float
    moe_renormalize: bool
    layer_types: tuple[str, ...]  # per 0-based layer: "linear_attention" (KDA) | "full_attention" (MLA)
    mlp_layer_types: tuple[str, ...]  # per 0-based layer: "dense" | "sparse"
    variant: str = "kimi_linear"
    vision: None = None  # text only (K3Config's multimodal fields, always empty here)
    media_placeholder_token_id: None = None

    # --- what the variant is, stated (K3: "sigmoid_lower_bound", True, "situ", True) -----------
    #: KDA decay gate: g = -exp(A_log) * softplus(f + dt_bias)
    kda_decay_gate = "softplus"
    #: MLA has no sigmoid output gate
    mla_output_gate = False
    #: experts and dense MLP: SiLU(x w1) * (x w3)
    expert_activation = "swiglu"
    #: MoE without K3's latent down/up projection
    moe_latent_projection = False

    # --- the variant's fixed values (names shared with K3Config) -----------------------------
    @property
    def kda_head_k_dim(self) -> int:
        return self.kda_head_dim

    @property
    def kda_head_v_dim(self) -> int:
        return self.kda_head_dim

    @property
    def kda_decay_rank(self) -> int:
        return self.kda_head_dim

    @property
    def kda_gate_rank(self) -> int:
        """Rank of the low-rank output gate g_b(g_a(x))."""
        return self.kda_head_dim

    @property
    def kda_query_scale(self) -> float:
        """K^-1/2, hard-coded in transformers' kernels (K3: a config value)."""
        return self.kda_head_dim**-0.5

    @property
    def kda_output_norm_eps(self) -> float:
        return self.rms_norm_eps

    @property
    def kda_l2_norm_eps(self) -> float:
        return L2_EPS

    @property
    def mla_latent_norm_eps(self) -> float:
        return MLA_LATENT_EPS

    @property
    def final_norm_eps(self) -> float:
        return self.rms_norm_eps

    @property
    def mla_score_scale(self) -> float:
        return (self.qk_nope_head_dim + self.qk_rope_head_dim) ** -0.5

    def is_mla(self, layer_idx: int) -> bool:
        return self.layer_types[layer_idx] == "full_attention"

    def is_moe(self, layer_idx: int) -> bool:
        return self.mlp_layer_types[layer_idx] == "sparse"


#: fields only K3's configs have (Block AttnRes, LatentMoE, SiTU, MLA's output gate)
K3_FIELDS = ("attn_res_block_size", "routed_expert_hidden_size", "latent_moe_use_norm", "activation_situ_beta",
             "activation_situ_linear_beta", "mla_use_output_gate")


def is_kimi_linear(d: dict) -> bool:
    """Whether a parsed (text) config selects the Kimi Linear variant: `model_type` "kimi_linear"
    and none of K3's own fields (`K3_FIELDS`, `hidden_act` "situ"), so that a K3 config with one
    field missing is still read, and rejected naming that field, as K3."""
    return (d.get("model_type") == "kimi_linear" and d.get("hidden_act") != "situ"
            and not any(k in d for k in K3_FIELDS))


def _int(d: dict, key: str, where: str = "", default: Any = None, allow_none: bool = False) -> Any:
    name = f"{where}{key}"
    if key not in d:
        if default is not None or allow_none:
            return default
        raise ConfigError(f"field '{name}' is missing")
    v = d[key]
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"field '{name}' must be an integer, got {v!r}")
    if v < 1:
        raise ConfigError(f"field '{name}' must be positive, got {v}")
    return v


def _float(d: dict, key: str) -> float:
    if key not in d:
        raise ConfigError(f"field '{key}' is missing")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v == float("inf"):
        raise ConfigError(f"field '{key}' must be a positive finite number, got {v!r}")
    return float(v)


def _bool(d: dict, key: str, default: bool) -> bool:
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise ConfigError(f"field '{key}' must be true or false, got {v!r}")
    return v


def _kinds(v: Any, key: str, n: int, allowed: tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(v, list) or len(v) != n or any(x not in allowed for x in v):
        raise ConfigError(f"field '{key}' must list {n} entries (one per layer), each one of {list(allowed)}, got {v!r}")
    return tuple(v)


def _schedule(d: dict, lac: dict, n: int) -> tuple[str, ...]:
    if d.get("layer_types") is not None:
        return _kinds(d["layer_types"], "layer_types", n, LAYER_KINDS)
    if "full_attn_layers" in lac and "kda_layers" in lac:
        full, kda = lac["full_attn_layers"], lac["kda_layers"]
        for key, v in (("full_attn_layers", full), ("kda_layers", kda)):
            if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= n for x in v):
                raise ConfigError(f"field 'linear_attn_config.{key}' must list 1-based layers in 1..{n}, got {v!r}")
        if sorted(full + kda) != list(range(1, n + 1)):
            raise ConfigError(f"fields 'linear_attn_config.kda_layers' and 'full_attn_layers' must together list every "
                              f"layer 1..{n} once, got {kda!r} and {full!r}")
        return tuple("full_attention" if i + 1 in full else "linear_attention" for i in range(n))
    return tuple("full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n))


def kimi_linear_config_from_dict(d: dict) -> KimiLinearConfig:
    """Validate a parsed Kimi Linear config (`d` the text part); raises ConfigError naming the field."""
    lac = d.get("linear_attn_config", {})
    if not isinstance(lac, dict):
        raise ConfigError("field 'linear_attn_config' must be a JSON object")
    if d.get("hidden_act", "silu") != "silu":
        raise ConfigError(f"field 'hidden_act' must be 'silu' (Kimi Linear's SwiGLU), got {d['hidden_act']!r}")
    if d.get("mla_use_nope", True) is not True:
        raise ConfigError(f"field 'mla_use_nope' must be true (Kimi Linear's MLA has no RoPE), got {d['mla_use_nope']!r}")
    if d.get("moe_router_activation_func", "sigmoid") != "sigmoid":
        raise ConfigError(f"field 'moe_router_activation_func' must be 'sigmoid', got {d['moe_router_activation_func']!r}")
    if d.get("attention_bias", False) is not False:
        raise ConfigError(f"field 'attention_bias' must be false (bias-free projections), got {d['attention_bias']!r}")
    if d.get("moe_layer_freq", 1) != 1:
        raise ConfigError(f"field 'moe_layer_freq' must be 1 (transformers' Kimi Linear ignores it), got {d['moe_layer_freq']!r}")
    groups, topk_groups = _int(d, "num_expert_group", default=1), _int(d, "topk_group", default=1)
    if groups != topk_groups:
        raise ConfigError(f"field 'topk_group' ({topk_groups}) must equal 'num_expert_group' ({groups}): "
                          "group-limited routing is not part of the variant")
    heads = _int(d, "num_attention_heads")
    if d.get("num_key_value_heads", heads) not in (heads, None):
        raise ConfigError(f"field 'num_key_value_heads' must equal num_attention_heads ({heads}), got {d['num_key_value_heads']!r}")
    layers = _int(d, "num_hidden_layers")

    def kda(nested: str, flat: str) -> int:
        if nested in lac:
            return _int(lac, nested, "linear_attn_config.")
        if flat in d:
            return _int(d, flat)
        raise ConfigError(f"field 'linear_attn_config.{nested}' (or '{flat}') is missing")

    if d.get("mlp_layer_types") is not None:
        mlp = _kinds(d["mlp_layer_types"], "mlp_layer_types", layers, MLP_KINDS)
    else:
        first_dense = d.get("first_k_dense_replace", 1)
        if isinstance(first_dense, bool) or not isinstance(first_dense, int) or first_dense < 0:
            raise ConfigError(f"field 'first_k_dense_replace' must be an integer >= 0, got {first_dense!r}")
        mlp = tuple("dense" if i < first_dense else "sparse" for i in range(layers))
    cfg = KimiLinearConfig(
        vocab_size=_int(d, "vocab_size"),
        hidden_size=_int(d, "hidden_size"),
        num_hidden_layers=layers,
        rms_norm_eps=_float(d, "rms_norm_eps"),
        tie_word_embeddings=_bool(d, "tie_word_embeddings", False),
        num_attention_heads=heads,
        q_lora_rank=_int(d, "q_lora_rank", allow_none=True),
        kv_lora_rank=_int(d, "kv_lora_rank"),
        qk_nope_head_dim=_int(d, "qk_nope_head_dim"),
        qk_rope_head_dim=_int(d, "qk_rope_head_dim"),
        v_head_dim=_int(d, "v_head_dim"),
        kda_num_heads=kda("num_heads", "linear_num_heads"),
        kda_head_dim=kda("head_dim", "linear_head_dim"),
        kda_conv_size=kda("short_conv_kernel_size", "linear_conv_kernel_dim"),
        num_experts=_int(d, "num_experts"),
        num_experts_per_token=_int(d, "num_experts_per_token"),
        num_shared_experts=_int(d, "num_shared_experts"),
        moe_intermediate_size=_int(d, "moe_intermediate_size"),
        intermediate_size=_int(d, "intermediate_size"),
        routed_scaling_factor=_float(d, "routed_scaling_factor"),
        moe_renormalize=_bool(d, "moe_renormalize", True),
        layer_types=_schedule(d, lac, layers),
        mlp_layer_types=mlp,
    )
    if cfg.num_experts_per_token > cfg.num_experts:
        raise ConfigError(f"field 'num_experts_per_token' ({cfg.num_experts_per_token}) exceeds 'num_experts' ({cfg.num_experts})")
    if cfg.num_experts % groups:
        raise ConfigError(f"field 'num_expert_group' ({groups}) must divide 'num_experts' ({cfg.num_experts})")
    return cfg
