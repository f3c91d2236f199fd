"""Hub-format checkpoints: `config.json` + safetensors shards (+ `model.safetensors.index.json`).

Tensor names and shapes are the hub's (nn.Linear weights `[out, in]`; the Lean spec's
`[in, out]` matrices are their transposes). Loading is strict: every missing, unexpected or
mis-shaped tensor is reported by name, corrupt/unreadable files by path. Only safetensors are
read; pickle (`torch.load`) is never used.

Accepted name prefixes: `model.` (text-only) and `language_model.model.` /
`language_model.lm_head.` (the released multimodal wrapper). `vision_tower.*` and
`mm_projector.*` tensors (MoonViT-V2 and its projector) are left to `load_vision`, which reads
them as strictly (through `adapter.vision_rules` for the spec parameters) when the config has a
`vision_config`; `save_checkpoint` writes them when given the vision model.

Quantized checkpoints: a config.json whose `quantization_config.format` is
`mxfp4-pack-quantized` (`pybridge.mxfp4`) has the routed experts' w1/w2/w3 as `weight_packed`
(uint8, two E2M1 codes per byte) and `weight_scale` (uint8 E8M0, one per 32 entries); the model
then holds them as they are (`moe.MXFP4SituExpert`, dequantized in the forward) and
`load_spec_params` dequantizes them through the adapter. A wrong scale shape, packed rows that
are not whole groups, the NaN scale code, a missing scale or a non-uint8 dtype is an error naming
the tensor and its file.
"""

import json
import math
from pathlib import Path

import torch
from torch import nn
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from pybridge import adapter, moe, mxfp4
from pybridge.config import K3Config, VisionConfig, load_config
from pybridge.errors import CheckpointError, ConfigError
from pybridge.kimi_linear import KimiLinearForCausalLM
from pybridge.model import KimiK3ForCausalLM
from pybridge.moonvit import MoonViT

INDEX_NAME = "model.safetensors.index.json"
VISION_PREFIXES = ("vision_tower.", "mm_projector.")
MAX_LISTED = 20


def _canonical(name: str) -> str:
    return name[len("language_model.") :] if name.startswith("language_model.") else name


def _shard_files(ckpt: Path) -> list[Path]:
    index = ckpt / INDEX_NAME
    if index.exists():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            files = sorted({str(v) for v in weight_map.values()})
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"{index}: malformed index ({e.__class__.__name__}: {e})") from None
        paths = [ckpt / f for f in files]
        for p in paths:
            if not p.is_file():
                raise CheckpointError(f"{index}: lists shard '{p.name}', which does not exist")
        return paths
    paths = sorted(ckpt.glob("*.safetensors"))
    if not paths:
        raise CheckpointError(f"{ckpt}: no *.safetensors files and no {INDEX_NAME}")
    return paths


def read_tensors(ckpt: Path, vision: bool = False) -> dict[str, torch.Tensor]:
    """All text tensors of all shards, keyed by canonical (text-only) name; with `vision`, all
    `vision_tower.*` / `mm_projector.*` tensors instead."""
    return read_located(ckpt, vision)[0]


def read_located(ckpt: Path, vision: bool = False) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """`read_tensors`, and the shard file each tensor came from."""
    tensors: dict[str, torch.Tensor] = {}
    where: dict[str, str] = {}
    for path in _shard_files(ckpt):
        try:
            with safe_open(str(path), framework="pt") as f:
                for raw in f.keys():
                    name = _canonical(raw)
                    if raw.startswith(VISION_PREFIXES) != vision:
                        continue
                    if name in tensors:
                        raise CheckpointError(f"tensor '{raw}' appears in both {where[name]} and {path.name}")
                    tensors[name], where[name] = f.get_tensor(raw), path.name
        except (SafetensorError, OSError, ValueError, RuntimeError) as e:
            raise CheckpointError(f"{path}: corrupt or unreadable safetensors file ({e})") from None
    return tensors, where


def is_quantized(ckpt: Path, cfg: K3Config) -> bool:
    """Whether `ckpt/config.json` declares MXFP4 weights (`quantization_config`, `pybridge.mxfp4`);
    any other quantization, or expert widths that are not whole MX groups, is a `ConfigError`
    naming the field."""
    path = ckpt / "config.json"
    problems = mxfp4.config_problems(json.loads(path.read_text(encoding="utf-8")))
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(problems))
    if problems is not None:
        check_mxfp4_widths(cfg, f"{path}: ")
    return problems is not None


def check_mxfp4_widths(cfg: K3Config, where: str = "") -> None:
    """MXFP4 routed experts need their input widths (latent and hidden) in whole groups of 32."""
    bad = {k: getattr(cfg, k) for k in ("routed_expert_hidden_size", "moe_intermediate_size") if getattr(cfg, k) % mxfp4.GROUP}
    if bad:
        raise ConfigError(where + "MXFP4 routed experts need " + " and ".join(f"field '{k}' ({v})" for k, v in bad.items())
                          + f" to be multiples of the MX group {mxfp4.GROUP}")


PACKED, SCALE = ".weight_packed", ".weight_scale"


def _quantized_problems(expected: dict, tensors: dict[str, torch.Tensor], where: dict[str, str]) -> tuple[list[str], set[str]]:
    """The problems of the MXFP4 pairs the model expects (`mxfp4.tensor_problems`), and the names
    they cover (the generic checks skip those)."""
    problems, covered = [], set()
    for k in expected:
        if not k.endswith(PACKED) or k not in tensors:
            continue
        base = k.removesuffix(PACKED)
        scale = tensors.get(base + SCALE)
        found = mxfp4.tensor_problems(base + ".weight", tensors[k], scale, where.get(k, "?"))
        if found:
            problems += found
            covered |= {k, base + SCALE}
    return problems, covered




def check_tensors(model: torch.nn.Module, tensors: dict[str, torch.Tensor], where: dict[str, str] | None = None) -> None:
    """Strict comparison against the model's parameters and buffers (MXFP4 ones: uint8); one
    error lists every problem; `where`: each tensor's file, named in the messages."""
    where = where or {}
    state = model.state_dict()
    expected = {k: tuple(v.shape) for k, v in state.items()}
    if isinstance(model, (KimiK3ForCausalLM, KimiLinearForCausalLM)) and model.config.tie_word_embeddings:
        expected.pop("lm_head.weight")
    packed = [k for k in tensors if k.endswith(PACKED) and k not in expected]
    if packed and not any(v.dtype == torch.uint8 for v in state.values()):
        raise CheckpointError(f"tensor '{packed[0]}' (in {where.get(packed[0], '?')}) and {len(packed) - 1} more are "
                              f"MXFP4-packed, but config.json declares no quantization_config with format '{mxfp4.FORMAT}'")
    problems, covered = _quantized_problems(expected, tensors, where)
    problems += [f"missing tensor '{k}' (expected shape {list(s)})" for k, s in expected.items()
                 if k not in tensors and k not in covered]

    def unexpected(k: str, t: torch.Tensor) -> str:
        hint = " (MXFP4-packed, but only routed experts are)" if k.endswith((PACKED, SCALE)) else ""
        return f"unexpected tensor '{k}' (shape {list(t.shape)}{', in ' + where[k] if k in where else ''}){hint}"

    problems += [unexpected(k, t) for k, t in tensors.items() if k not in expected]
    for k, t in tensors.items():
        if k in covered or k not in expected:
            continue
        if state[k].dtype == torch.uint8:
            if tuple(t.shape) != expected[k] or t.dtype != torch.uint8:
                problems.append(f"tensor '{k}' (in {where.get(k, '?')}) is {t.dtype} {list(t.shape)}, expected "
                                f"torch.uint8 {list(expected[k])}")
        elif tuple(t.shape) != expected[k]:
            problems.append(f"tensor '{k}' has shape {list(t.shape)}, expected {list(expected[k])}")
        elif k in expected and not t.is_floating_point():
            problems.append(f"tensor '{k}' has dtype {t.dtype}, expected a floating-point dtype")
        elif k in expected and not bool(torch.isfinite(t).all()):
            problems.append(f"tensor '{k}' contains NaN or infinite values")
    if problems:
        more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        raise CheckpointError(
            f"{len(problems)} problem(s) in checkpoint:\n  " + "\n  ".join(problems[:MAX_LISTED]) + more
        )


def load_checkpoint(path: str | Path, dtype: torch.dtype = torch.float32) -> KimiK3ForCausalLM:
    """Build the model from `path/config.json` and load all shards strictly."""
    ckpt = Path(path)
    if not ckpt.is_dir():
        raise CheckpointError(f"{ckpt}: checkpoint directory does not exist")
    cfg = load_config(ckpt / "config.json")
    if cfg.variant == "kimi_linear":
        return load_kimi_linear(ckpt, cfg, dtype)
    quantized = is_quantized(ckpt, cfg)
    with torch.device("meta"):
        model = KimiK3ForCausalLM(cfg)
    if quantized:
        moe.use_mxfp4_experts_(model)
    tensors, where = read_located(ckpt)
    check_tensors(model, tensors, where)
    model.load_state_dict({k: _cast(v, dtype) for k, v in tensors.items()}, strict=False, assign=True)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.eval()


def load_kimi_linear(ckpt: Path, cfg, dtype: torch.dtype = torch.float32) -> KimiLinearForCausalLM:
    """The Kimi Linear variant (`pybridge.kimi_linear`) from a checkpoint of that family: hub names,
    or transformers' own (`adapter.kimi_linear_hub_names`), loaded strictly."""
    tensors, where = read_located(ckpt)
    renamed = adapter.kimi_linear_hub_names(cfg, tensors)
    with torch.device("meta"):
        model = KimiLinearForCausalLM(cfg)
    check_tensors(model, renamed, {k: where[k] for k in renamed if k in where})
    model.load_state_dict({k: _cast(v, dtype) for k, v in renamed.items()}, strict=False, assign=True)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.eval()


def load_spec_params(path: str | Path, dtype: torch.dtype = torch.float64) -> tuple[K3Config, dict[str, torch.Tensor]]:
    """The configuration and the spec parameters (`[in, out]` layout, graph names; see
    `pybridge.adapter`) of the checkpoint at `path`, read strictly as `load_checkpoint` does."""
    ckpt = Path(path)
    if not ckpt.is_dir():
        raise CheckpointError(f"{ckpt}: checkpoint directory does not exist")
    cfg = load_config(ckpt / "config.json")
    quantized = is_quantized(ckpt, cfg)
    tensors, where = read_located(ckpt)
    with torch.device("meta"):
        model = KimiK3ForCausalLM(cfg)
        check_tensors(moe.use_mxfp4_experts_(model) if quantized else model, tensors, where)
    spec = adapter.hub_to_spec(cfg, {k: _cast(v, dtype) for k, v in tensors.items()}, quantized)
    return cfg, {k: v.to(dtype) for k, v in spec.items()}


def _cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Floating-point tensors in `dtype`; MXFP4 codes (uint8) as they are."""
    return t.to(dtype) if t.is_floating_point() else t


def _vision_config(ckpt: Path) -> VisionConfig:
    if not ckpt.is_dir():
        raise CheckpointError(f"{ckpt}: checkpoint directory does not exist")
    vision = load_config(ckpt / "config.json").vision
    if vision is None:
        raise CheckpointError(f"{ckpt / 'config.json'}: no vision_config, so the checkpoint has no vision tower to load")
    return vision


def load_vision(path: str | Path, dtype: torch.dtype = torch.float32) -> MoonViT:
    """MoonViT-V2 and its projector from the checkpoint's `vision_tower.*` / `mm_projector.*`
    tensors, strictly (every missing, unexpected, mis-shaped or non-finite tensor named)."""
    ckpt = Path(path)
    vision = _vision_config(ckpt)
    with torch.device("meta"):
        model = MoonViT(vision)
    tensors = read_tensors(ckpt, vision=True)
    check_tensors(model, tensors)
    model.load_state_dict({k: v.to(dtype) for k, v in tensors.items()}, strict=False, assign=True)
    return model.eval()


def load_vision_spec_params(path: str | Path, dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    """The spec parameters (`adapter.vision_rules`) of the checkpoint's vision tower and projector."""
    ckpt = Path(path)
    vision = _vision_config(ckpt)
    tensors = read_tensors(ckpt, vision=True)
    with torch.device("meta"):
        check_tensors(MoonViT(vision), tensors)
    return adapter.vision_to_spec(vision, {k: v.to(dtype) for k, v in tensors.items()})


def init_random_(model: nn.Module, seed: int) -> nn.Module:
    """Deterministic random weights with stable magnitudes (for tests and the CLI demo), by
    parameter name, so any module under hub names (the model, the EAGLE-3 draft) can use them.
    Norm scales are near 1, A_log = log(U(1, 16)) as in the hub init, selection biases small."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif leaf == "A_log":
                p.copy_(torch.empty(p.shape).uniform_(1.0, 16.0, generator=gen).log())
            elif leaf in ("dt_bias", "e_score_correction_bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith("conv1d.weight"):
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))
            else:  # linear [out, in] and embedding: unit-variance outputs for unit inputs
                fan_in = p.shape[-1] if name != "model.embed_tokens.weight" else 1
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(fan_in))
    return model


def random_model(cfg: K3Config, seed: int = 0, dtype: torch.dtype = torch.float32,
                 quantize: str | None = None) -> KimiK3ForCausalLM:
    """`init_random_` weights; `quantize="mxfp4"`: the routed experts then quantized to MXFP4, as
    released (`moe.quantize_experts_`; their widths must be multiples of 32)."""
    if cfg.variant == "kimi_linear":
        if quantize is not None:
            raise ConfigError("the Kimi Linear variant has no quantized checkpoint layout here (quantize must be none)")
        return init_random_(KimiLinearForCausalLM(cfg), seed).to(dtype).eval()
    model = init_random_(KimiK3ForCausalLM(cfg), seed)
    if quantize == "mxfp4":
        check_mxfp4_widths(cfg)
        moe.quantize_experts_(model)
    elif quantize is not None:
        raise ConfigError(f"unknown quantization {quantize!r} (known: mxfp4)")
    return model.to(dtype).eval()


def is_mxfp4(model: KimiK3ForCausalLM) -> bool:
    """Whether the model's routed experts are MXFP4 (`moe.MXFP4SituExpert`)."""
    return any(isinstance(m, moe.MXFP4SituExpert) for m in model.modules())


def save_checkpoint(
    model: KimiK3ForCausalLM, config_path: str | Path, out_dir: str | Path, num_shards: int = 2,
    vision: MoonViT | None = None,
) -> Path:
    """Write config.json + `num_shards` safetensors shards + index. config.json is copied
    verbatim, except that its `quantization_config` is set (MXFP4 experts, `mxfp4.quantization_config`)
    or removed (dense) to match the model; with `vision`, its `vision_tower.*` / `mm_projector.*`
    tensors too."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = Path(config_path).read_text(encoding="utf-8")
    raw = json.loads(text)
    if is_mxfp4(model) != ("quantization_config" in raw):
        raw.pop("quantization_config", None)
        text = json.dumps(raw | ({"quantization_config": mxfp4.quantization_config()} if is_mxfp4(model) else {}),
                          indent=2) + "\n"
    (out / "config.json").write_text(text, encoding="utf-8")
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight")
    if vision is not None:
        state.update({k: v.detach().contiguous() for k, v in vision.state_dict().items()})
    names = list(state)
    per = math.ceil(len(names) / num_shards)
    weight_map = {}
    for i in range(num_shards):
        fname = f"model-{i + 1:05d}-of-{num_shards:05d}.safetensors"
        part = {k: state[k] for k in names[i * per : (i + 1) * per]}
        save_file(part, str(out / fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in part})
    (out / INDEX_NAME).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1), encoding="utf-8")
    return out
