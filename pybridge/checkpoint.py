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
"""

import json
import math
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from pybridge import adapter
from pybridge.config import K3Config, VisionConfig, load_config
from pybridge.errors import CheckpointError
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
    return tensors


def check_tensors(model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Strict comparison against the model's parameters; one error lists every problem."""
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if isinstance(model, KimiK3ForCausalLM) and model.config.tie_word_embeddings:
        expected.pop("lm_head.weight")
    problems = [f"missing tensor '{k}' (expected shape {list(s)})" for k, s in expected.items() if k not in tensors]
    problems += [f"unexpected tensor '{k}' (shape {list(t.shape)})" for k, t in tensors.items() if k not in expected]
    for k, t in tensors.items():
        if k in expected and tuple(t.shape) != expected[k]:
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
    with torch.device("meta"):
        model = KimiK3ForCausalLM(cfg)
    tensors = read_tensors(ckpt)
    check_tensors(model, tensors)
    model.load_state_dict({k: v.to(dtype) for k, v in tensors.items()}, strict=False, assign=True)
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
    tensors = read_tensors(ckpt)
    with torch.device("meta"):
        check_tensors(KimiK3ForCausalLM(cfg), tensors)
    return cfg, adapter.hub_to_spec(cfg, {k: v.to(dtype) for k, v in tensors.items()})


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


def init_random_(model: KimiK3ForCausalLM, seed: int) -> KimiK3ForCausalLM:
    """Deterministic random weights with stable magnitudes (for tests and the CLI demo).
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


def random_model(cfg: K3Config, seed: int = 0, dtype: torch.dtype = torch.float32) -> KimiK3ForCausalLM:
    return init_random_(KimiK3ForCausalLM(cfg), seed).to(dtype).eval()


def save_checkpoint(
    model: KimiK3ForCausalLM, config_path: str | Path, out_dir: str | Path, num_shards: int = 2,
    vision: MoonViT | None = None,
) -> Path:
    """Write config.json (copied verbatim) + `num_shards` safetensors shards + index; with
    `vision`, its `vision_tower.*` / `mm_projector.*` tensors too."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(Path(config_path).read_text(encoding="utf-8"), encoding="utf-8")
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
