"""Configuration values, read independently by each leg.

A configuration value (SiTU caps, scales, ε, the layer schedule) reaches each leg of the
differential test from the configuration file through that leg's own reader, so a bug in one
reader shows as a disagreement instead of reaching every leg at once:

* the torch leg: pybridge's reader (`pybridge.config.load_config`, `torch_reading`);
* the graph and NumPy legs: difftest's own reader of the hub `config.json` (`own_reading`,
  written here from the hub field names and defaults, sharing no code with pybridge), which
  feeds the graphs' constant inputs (`gate_cap`, `score_scale`, …); the constants the Lean
  export baked into a graph (ε of its norms, the KDA log-decay floor) are `graph_constants`;
* the Lean leg: the exported Lean `Config` (`lean_reading`, hook for the Lean leg).

`tests/test_difftest_config.py` compares the readings field by field.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY_CONFIG = REPO / "fixtures" / "tiny" / "config.json"
#: The exported Lean `Config.toJson tinyConfig` (written by the export command when it has it).
LEAN_TINY_CONFIG = REPO / "fixtures" / "tiny" / "lean_config.json"
GRAPHS = REPO / "fixtures" / "graphs"

#: name -> what it is (hub field). Every leg's reading has these keys.
FIELDS: dict[str, str] = {
    "gate_cap": "SiTU gate cap c_g (activation_situ_beta)",
    "up_cap": "SiTU up cap c_u (activation_situ_linear_beta)",
    "rms_eps": "ε of the two pre-norms of every layer (rms_norm_eps)",
    "attn_res_eps": "ε of the AttnRes score norms (attn_res_norm_eps; default rms_norm_eps)",
    "final_eps": "ε of the final norm (final_norm_eps; default rms_norm_eps)",
    "mla_latent_eps": "ε of MLA's q_a/kv_a latent norms (mla_latent_norm_eps; default 1e-6, as the hub hard-codes)",
    "moe_eps": "ε of the LatentMoE routed norm (latent_moe_norm_eps; default rms_norm_eps)",
    "kda_out_eps": "ε of the KDA output norm (linear_attn_config.output_norm_eps; default rms_norm_eps)",
    "l2_eps": "KDA q/k L2-normalization ε (linear_attn_config.l2_norm_eps; default fla's 1e-6)",
    "log_floor": "KDA log-decay floor g_min (linear_attn_config.gate_lower_bound)",
    "query_scale": "KDA readout scale (linear_attn_config.query_scale; default head_k_dim^-1/2)",
    "score_scale": "MLA score scale (mla_score_scale; default (qk_nope + qk_rope)^-1/2)",
    "routed_scaling": "MoE mixture scale (routed_scaling_factor; default 1)",
    "top_k": "active routed experts (num_experts_per_token)",
    "block_size": "AttnRes block size (attn_res_block_size)",
    "mla_layers": "1-based MLA layers (n % 4 == 0 or n == num_hidden_layers)",
    "moe_layers": "1-based MoE layers (0-based i >= first_k_dense_replace and i % moe_layer_freq == 0)",
}


def torch_reading(path: Path = TINY_CONFIG) -> dict:
    """The values as pybridge reads them (the torch leg's reader)."""
    from pybridge.config import load_config
    c = load_config(path)
    layers = range(c.num_hidden_layers)
    return {
        "gate_cap": c.situ_gate_cap, "up_cap": c.situ_up_cap, "rms_eps": c.rms_norm_eps,
        "attn_res_eps": c.attn_res_norm_eps, "final_eps": c.final_norm_eps, "mla_latent_eps": c.mla_latent_norm_eps,
        "moe_eps": c.latent_moe_norm_eps, "kda_out_eps": c.kda_output_norm_eps, "l2_eps": c.kda_l2_norm_eps,
        "log_floor": c.kda_gate_lower_bound, "query_scale": c.kda_query_scale, "score_scale": c.mla_score_scale,
        "routed_scaling": c.routed_scaling_factor, "top_k": c.num_experts_per_token, "block_size": c.attn_res_block_size,
        "mla_layers": tuple(i + 1 for i in layers if c.is_mla(i)), "moe_layers": tuple(i + 1 for i in layers if c.is_moe(i)),
    }


class ConfigReadError(ValueError):
    """difftest's own reader found a missing or malformed field (named in the message)."""


def own_reading(path: Path = TINY_CONFIG) -> dict:
    """difftest's own reading of a hub `config.json` (the graph and NumPy legs' reader)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigReadError(f"{path}: {err}") from None
    d = raw.get("text_config", raw)
    lac = d.get("linear_attn_config", {})

    def num(src: dict, key: str, default: float | None = None) -> float:
        if key not in src:
            if default is None:
                raise ConfigReadError(f"{path}: field '{key}' is missing")
            return default
        v = src[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigReadError(f"{path}: field '{key}' is not a finite number: {v!r}")
        return float(v)

    n_layers = int(num(d, "num_hidden_layers"))
    head_k = int(num(lac, "head_k_dim", num(lac, "head_dim")))
    first_dense, freq = int(num(d, "first_k_dense_replace", 0)), int(num(d, "moe_layer_freq", 1))
    eps = num(d, "rms_norm_eps")
    return {
        "gate_cap": num(d, "activation_situ_beta"),
        "up_cap": num(d, "activation_situ_linear_beta"),
        "rms_eps": eps,
        "attn_res_eps": num(d, "attn_res_norm_eps", eps),
        "final_eps": num(d, "final_norm_eps", eps),
        "mla_latent_eps": num(d, "mla_latent_norm_eps", 1e-6),
        "moe_eps": num(d, "latent_moe_norm_eps", eps),
        "kda_out_eps": num(lac, "output_norm_eps", eps),
        "l2_eps": num(lac, "l2_norm_eps", 1e-6),
        "log_floor": num(lac, "gate_lower_bound"),
        "query_scale": num(lac, "query_scale", head_k ** -0.5),
        "score_scale": num(d, "mla_score_scale", (num(d, "qk_nope_head_dim") + num(d, "qk_rope_head_dim")) ** -0.5),
        "routed_scaling": num(d, "routed_scaling_factor", 1.0),
        "top_k": int(num(d, "num_experts_per_token")),
        "block_size": int(num(d, "attn_res_block_size")),
        "mla_layers": tuple(n for n in range(1, n_layers + 1) if n % 4 == 0 or n == n_layers),
        "moe_layers": tuple(n for n in range(1, n_layers + 1) if n - 1 >= first_dense and (n - 1) % freq == 0),
    }


def lean_reading(path: Path = LEAN_TINY_CONFIG, doc: dict | None = None) -> dict | None:
    """Hook for the Lean leg: the values of the exported Lean `Config` (`Config.toJson
    tinyConfig`, the file `path` or the document `doc`), for the fields it carries (None: not
    exported yet). Where `Config` does not carry a value yet, the Lean leg takes difftest's own
    reading (`Component.lean_config`)."""
    if doc is None:
        if not Path(path).exists():
            return None
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    d = doc
    lac = d.get("linear_attn_config", {})
    out = {}
    for key, src, field in (("gate_cap", d, "activation_situ_beta"), ("up_cap", d, "activation_situ_linear_beta"),
                            ("rms_eps", d, "rms_norm_eps"), ("attn_res_eps", d, "attn_res_norm_eps"),
                            ("final_eps", d, "final_norm_eps"), ("mla_latent_eps", d, "mla_latent_norm_eps"),
                            ("moe_eps", d, "latent_moe_norm_eps"), ("kda_out_eps", lac, "output_norm_eps"),
                            ("l2_eps", lac, "l2_norm_eps"), ("log_floor", lac, "gate_lower_bound"),
                            ("query_scale", lac, "query_scale"), ("score_scale", d, "mla_score_scale"),
                            ("routed_scaling", d, "routed_scaling_factor"), ("top_k", d, "num_experts_per_token"),
                            ("block_size", d, "attn_res_block_size")):
        if field in src:
            out[key] = src[field]
    if "full_attn_layers" in lac:
        out["mla_layers"] = tuple(lac["full_attn_layers"])
    return out


def _float_attr(v: dict) -> float:
    return struct.unpack("<d", struct.pack("<Q", int(v["float64_bits"])))[0]


def graph_constants(file: str) -> dict[str, set[float]]:
    """The constants baked into a graph export, by `op.attribute` (e.g. `rmsNormLast.eps`,
    `l2NormLast.eps`, `scale.c`): what the Lean export read from its configuration."""
    doc = json.loads((GRAPHS / file).read_text(encoding="utf-8"))
    out: dict[str, set[float]] = {}
    for node in doc["nodes"]:
        for key, v in node["attrs"].items():
            if isinstance(v, dict) and "float64_bits" in v:
                out.setdefault(f"{node['op']}.{key}", set()).add(_float_attr(v))
    return out
