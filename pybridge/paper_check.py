"""Check a hub-format K3 `config.json` against the paper configuration, field by field.

The paper configuration is `fixtures/paper/config.json`; its report-stated fields are the numbers
of Lean's `paperConfig` (`lean/KimiK3/Model/Config.lean`, `paperConfig_wf`), and tests tie the
two. Each field the K3 report states (k3-spec §1) is compared, and every disagreement is listed
with the field, the file's value, the report's value and where the report gives it. Fields the
report does not state (vocabulary size, query LoRA rank, KDA head count, ...) cannot be checked:
they are listed separately, never reported as mismatches.

It also checks the conditions of Lean's `Config.WF` at the MX block of the K3 release (32): the
file must load (`pybridge.config.config_from_dict`: positive widths, epsilons and scales, active
experts at most the routed experts, a negative KDA floor, each failure naming its field), and the
MX-quantized widths must be multiples of 32. The messages are those of Lean's `Config.check`.

A released config may nest the text model under `text_config`; field names then carry that prefix.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pybridge.config import K3Config, config_from_dict, vision_config_from_dict
from pybridge.errors import ConfigError

#: The MX block of the release's quantization (`group_size` 32, k3-spec §1 `Config.WF`).
MX_BLOCK = 32

PAPER_CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "paper" / "config.json"

#: Fields the report states, with where it states them (k3-spec §1).
REPORT_FIELDS: dict[str, str] = {
    "hidden_size": "Table 1: hidden dim 7,168",
    "num_hidden_layers": "Fig. 2, Table 1: 93 layers",
    "max_position_embeddings": "Table 1: 1M context",
    "num_attention_heads": "Table 1: 96 attention heads",
    "num_key_value_heads": "§2.1.2: every MLA head reads the shared latent",
    "kv_lora_rank": "§2.1.2: KV latent 512",
    "qk_rope_head_dim": "§2.1.2: shared (unrotated, NoPE) key 64",
    "qk_nope_head_dim": "§2.1.2: per-head content key 128",
    "v_head_dim": "§2.1.2: per-head value 128",
    "mla_use_nope": "§2.1.2: MLA uses no RoPE",
    "mla_use_output_gate": "§2.1.2: gated MLA",
    "hidden_act": "§2.3.2: SiTU",
    "activation_situ_beta": "§2.3.2, Eq. 18-19: gate cap 4",
    "activation_situ_linear_beta": "§2.3.2, Eq. 18-19: up cap 25",
    "num_experts": "Table 1: 896 routed experts",
    "num_experts_per_token": "Table 1: 16 active experts",
    "num_shared_experts": "Table 1: 2 shared experts",
    "moe_intermediate_size": "Table 1: expert hidden dim 3,072",
    "routed_expert_hidden_size": "§2.3, Table 1: latent dim 3,584",
    "latent_moe_use_norm": "§2.3, Eq. 11-13: RMSNorm in the latent",
    "moe_router_activation_func": "§2.3: sigmoid router",
    "attn_res_block_size": "§2.2: 12 layers per AttnRes block",
    "linear_attn_config.gate_lower_bound": "Eq. 5: log-decay floor -5",
    "linear_attn_config.kda_layers": "Fig. 2, §2.1: 1-based layer n is KDA unless n % 4 = 0 or n = 93",
    "linear_attn_config.full_attn_layers": "Fig. 2, §2.1: MLA at n % 4 = 0 and n = 93 (24 layers)",
}

#: The vision encoder's report-stated fields (k3-spec §1; `vision_config` beside `text_config`).
VISION_FIELDS: dict[str, str] = {
    "vision_config.patch_size": "Table 1, §2.4: MoonViT-V2 patch size 14",
    "vision_config.vt_num_hidden_layers": "Table 1, §2.4: MoonViT-V2 27 layers",
    "vision_config.vt_num_attention_heads": "Table 1, §2.4: MoonViT-V2 12 heads",
    "vision_config.merge_kernel_size": "§2.4: 2 x 2 spatial merge",
    "vision_config.text_hidden_size": "§2.4: MoonViT output width 7,168",
}
#: The derived check: the encoder's parameter count, in millions as the report rounds it.
VISION_PARAMETERS = "vision encoder parameters (millions, from vision_config)"
VISION_PARAMETERS_MILLIONS = 401
VISION_PARAMETERS_SOURCE = f"Table 1: MoonViT-V2 {VISION_PARAMETERS_MILLIONS} M parameters"


@dataclass(frozen=True)
class Mismatch:
    """One disagreement between a config file and the report."""

    field: str
    actual: Any
    expected: Any
    source: str

    def message(self, path: Path) -> str:
        if isinstance(self.actual, list) and isinstance(self.expected, list):
            lacks = sorted(set(map(repr, self.expected)) - set(map(repr, self.actual)), key=_natural)
            extra = sorted(set(map(repr, self.actual)) - set(map(repr, self.expected)), key=_natural)
            return (
                f"{path}: field '{self.field}' lists {len(self.actual)} entries, the K3 report {len(self.expected)}; "
                f"it lacks [{_short(lacks)}] and has extra [{_short(extra)}] ({self.source})"
            )
        shown = "missing" if self.actual is _MISSING else f"{self.actual!r}"
        return f"{path}: field '{self.field}' is {shown}; the K3 report has {self.expected!r} ({self.source})"


def _natural(text: str) -> tuple[int, str]:
    return (int(text), "") if text.lstrip("-").isdigit() else (0, text)


def _short(items: list[str], keep: int = 8) -> str:
    return ", ".join(items[:keep]) + (f", ... ({len(items) - keep} more)" if len(items) > keep else "")


class _Missing:
    def __repr__(self) -> str:
        return "missing"


_MISSING = _Missing()


@dataclass(frozen=True)
class PaperCheck:
    """Result of checking one file: the mismatches and the fields the report does not state."""

    path: Path
    checked: int
    mismatches: list[Mismatch]
    unverifiable: list[str]
    wf_problems: list[str]
    #: why the vision fields were not checked (the file has no `vision_config`), else None
    vision_unchecked: str | None = None


def _lookup(d: dict, dotted: str) -> Any:
    node: Any = d
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return actual is expected
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return math.isclose(actual, expected, rel_tol=0.0, abs_tol=0.0)
    if isinstance(expected, list) and isinstance(actual, list):
        return sorted(actual, key=repr) == sorted(expected, key=repr)
    return actual == expected


def _read_json(path: Path, what: str) -> dict:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{path}: cannot read {what} ({e.strerror or e})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: {what} is not valid JSON ({e})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: {what} must be a JSON object, got {type(raw).__name__}")
    return raw


def paper_fields() -> dict[str, Any]:
    """The report-stated fields of the paper configuration (dotted name -> value)."""
    paper = _read_json(PAPER_CONFIG, "the paper configuration")
    values = {name: _lookup(paper, name) for name in (*REPORT_FIELDS, *VISION_FIELDS)}
    missing = [name for name, v in values.items() if v is _MISSING]
    if missing:
        raise ConfigError(f"{PAPER_CONFIG}: the paper configuration lacks {', '.join(missing)}")
    return values


def check_config(path: str | Path) -> PaperCheck:
    """Compare every report-stated field of a hub `config.json` (or a folder holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    raw = _read_json(p, "config")
    top = raw
    prefix = ""
    if "text_config" in raw:
        if not isinstance(raw["text_config"], dict):
            raise ConfigError(f"{p}: field 'text_config' must be a JSON object")
        raw, prefix = raw["text_config"], "text_config."
    expected = paper_fields()
    mismatches = [
        Mismatch(prefix + name, actual, want, REPORT_FIELDS[name])
        for name, want in expected.items()
        if name in REPORT_FIELDS and not _same(actual := _lookup(raw, name), want)
    ]
    checked = len(REPORT_FIELDS)
    vision_unchecked = None
    if "vision_config" in top:
        vision, checked = _vision_mismatches(top, expected), checked + len(VISION_FIELDS) + 1
        mismatches += vision
    else:
        vision_unchecked = "the file has no vision_config (a text-only model)"
    lac = raw.get("linear_attn_config")
    present = [k for k in raw if k not in ("linear_attn_config", "vision_config")]
    present += [f"linear_attn_config.{k}" for k in lac] if isinstance(lac, dict) else []
    unverifiable = sorted(prefix + k for k in present if k not in REPORT_FIELDS and not k.startswith("_"))
    # the vision sub-fields the report does not state (its stated ones are VISION_FIELDS), wherever
    # the file keeps `vision_config` (beside `text_config`, or in a flat file)
    vis = top.get("vision_config")
    vis_present = [f"vision_config.{k}" for k in vis if not k.startswith("_")] if isinstance(vis, dict) else []
    unverifiable += sorted(k for k in vis_present if k not in VISION_FIELDS)
    return PaperCheck(p, checked, mismatches, unverifiable, wf_problems(raw), vision_unchecked)


def _vision_mismatches(top: dict, expected: dict[str, Any]) -> list[Mismatch]:
    """The vision fields that disagree with the report, then the encoder's parameter count (one
    attention per block, `moonvit.encoder_parameter_count`) rounded to millions against the report's."""
    from pybridge.moonvit import encoder_parameter_count  # imports torch: only when a file has vision

    out = [
        Mismatch(name, actual, expected[name], VISION_FIELDS[name])
        for name in VISION_FIELDS
        if not _same(actual := _lookup(top, name), expected[name])
    ]
    vision = top["vision_config"]
    try:
        # the count needs no text width: the vision config's own stands in (the text/vision width
        # agreement is a field mismatch above, or a well-formedness problem)
        own = vision.get("text_hidden_size") if isinstance(vision, dict) else None
        cfg = vision_config_from_dict(vision, own)
        millions: Any = round(encoder_parameter_count(cfg) / 1e6)
    except ConfigError as e:
        millions = f"not computable ({e})"
    if millions != VISION_PARAMETERS_MILLIONS:
        out.append(Mismatch(VISION_PARAMETERS, millions, VISION_PARAMETERS_MILLIONS, VISION_PARAMETERS_SOURCE))
    return out


def mx_problems(cfg: K3Config, mx_block: int = MX_BLOCK) -> list[str]:
    """The MX-quantized widths (Lean `Config.mxWidths`) that are not multiples of `mx_block`."""
    widths = {
        "hidden_size": cfg.hidden_size,
        "routed_expert_hidden_size": cfg.routed_expert_hidden_size,
        "moe_intermediate_size": cfg.moe_intermediate_size,
        "intermediate_size": cfg.intermediate_size,
    }
    return [f"field '{k}' must be a multiple of the MX block {mx_block}, got {v}" for k, v in widths.items() if v % mx_block]


def wf_problems(raw: dict, mx_block: int = MX_BLOCK) -> list[str]:
    """Every broken condition of Lean's `Config.WF` at MX block `mx_block`, by field: the
    loader's error if the file does not load, else the misaligned MX widths."""
    try:
        cfg = config_from_dict(raw)
    except ConfigError as e:
        return [str(e)]
    return mx_problems(cfg, mx_block)
