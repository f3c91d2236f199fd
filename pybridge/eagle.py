"""The EAGLE-3 draft model of K3 (report §4.1.4, Eq. 16; spec §2.14): the MTP layer fed the
fused low / middle / high features of the target.

Per draft position t, from a feature f (width D) and the embedding e of the token at t:
    x  = eh_proj([enorm(e) ; hnorm(f)])                  (the MTP input, DeepSeek-V3 layout)
    one K3 layer on the depth state [x] (AttnRes: its reads see x, then x and the layer's partial sum)
    h  = AttnRes read of [x, partial] with the layer's own output query (the new feature)
    logits = shared_head.head(shared_head.norm(h))
The first draft position of a speculative step takes the *fused* target feature
    f = fc([f_low ; f_mid ; f_high]) = f_low F_0 + f_mid F_1 + f_high F_2      (Lean `FeatureFusion.forward`)
later positions take the draft's own previous `h` (self-feeding, Lean `trainingTimeTestStep`):
after the fusion the draft never asks the target for a fresh feature. `fc` starts at
`[0 0 I]`, so the initial fusion is the high feature exactly (Lean `initial_fusion_eq_high`).

A target feature with id i (0-based, `eagle_config.eagle_aux_hidden_state_layer_ids`, vLLM's
key and reading: the hidden state *entering* layer i) is the AttnRes read that layer i's
sequence mixer takes, before its `input_layernorm`; id L = num_hidden_layers is the final read,
the input of `model.norm`. K3 has no residual stream, so the read a layer consumes is the
nearest equivalent of "the hidden state entering it".

Decisions where the spec is silent (§6.16: the draft architecture and which layers are
low/mid/high are not given):
  * the MTP layer is hub layer L (`model.layers.{L}.*`, as DeepSeek-V3 numbers its MTP layers
    after the last layer) and is built as the target's schedule builds a last layer: MLA
    (n == num_hidden_layers), dense or MoE by the hub rule at index L;
  * MTP names `enorm`, `hnorm`, `eh_proj`, `shared_head.{norm,head}` are DeepSeek-V3's; the
    fusion is EAGLE-3's top-level `fc` (`nn.Linear(3D, D)`: F_i = fc.weight[:, iD:(i+1)D].T);
    the output read `output_attn_res_{norm,proj}` mirrors the target's final read;
  * the token embedding is the target's (`model.embed_tokens`), passed in, not copied;
  * epsilons: enorm/hnorm `rms_norm_eps`, shared_head.norm `final_norm_eps`, the reads
    `attn_res_norm_eps`, the layer's own sites as in the target.
"""

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from pybridge.attnres import DepthState, retrieve
from pybridge.checkpoint import MAX_LISTED, init_random_, read_tensors
from pybridge.config import K3Config, config_from_dict
from pybridge.errors import CheckpointError, ConfigError
from pybridge.layers import RMSNorm, compute_dtype, lin
from pybridge.mla import MLACache
from pybridge.model import DecoderLayer, KimiK3ForCausalLM

FEATURE_KEY = "eagle_config.eagle_aux_hidden_state_layer_ids"


@dataclass(frozen=True)
class DraftConfig:
    """The draft's configuration: the target's, the MTP layer's hub index and the feature ids."""

    target: K3Config
    layer_index: int  # hub index of the MTP layer (= target.num_hidden_layers)
    feature_layers: tuple[int, int, int]  # low, mid, high (0-based; num_hidden_layers = the final read)


def draft_config_from_dict(raw: Any) -> DraftConfig:
    """The target configuration plus `num_nextn_predict_layers` (>= 1: the MTP layer the draft
    is initialised from) and `eagle_config.eagle_aux_hidden_state_layer_ids` (three strictly
    increasing ids in [0, num_hidden_layers]); a bad field raises ConfigError naming it."""
    target = config_from_dict(raw)
    d = raw.get("text_config", raw)
    n_mtp = d.get("num_nextn_predict_layers")
    if isinstance(n_mtp, bool) or not isinstance(n_mtp, int) or n_mtp < 1:
        raise ConfigError(f"field 'num_nextn_predict_layers' must be an integer >= 1 (the MTP layer the draft is "
                          f"built from), got {n_mtp!r}")
    eagle = d.get("eagle_config")
    if not isinstance(eagle, dict):
        raise ConfigError("field 'eagle_config' is missing or not a JSON object")
    ids = eagle.get("eagle_aux_hidden_state_layer_ids")
    L = target.num_hidden_layers
    if (not isinstance(ids, list) or len(ids) != 3 or any(isinstance(i, bool) or not isinstance(i, int) for i in ids)
            or not 0 <= ids[0] < ids[1] < ids[2] <= L):
        raise ConfigError(f"field '{FEATURE_KEY}' must list three strictly increasing layer ids in [0, {L}] "
                          f"(low, mid, high; {L} = the final read), got {ids!r}")
    return DraftConfig(target, L, (ids[0], ids[1], ids[2]))


def load_draft_config(path: str | Path) -> DraftConfig:
    """Read a hub config.json (or its directory) with the draft's fields."""
    p = Path(path)
    p = p / "config.json" if p.is_dir() else p
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{p}: cannot read config ({e.__class__.__name__}: {e})") from None
    try:
        return draft_config_from_dict(raw)
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from None


class FeatureFusion(nn.Linear):
    """EAGLE-3's `fc`: [f_low ; f_mid ; f_high] (3D) -> D, no bias (Lean `FeatureFusion.forward`)."""

    def __init__(self, dim: int) -> None:
        super().__init__(3 * dim, dim, bias=False)

    def reset_to_high_(self) -> None:
        """fc = [0 0 I]: the fusion returns the high feature exactly."""
        D = self.out_features
        with torch.no_grad():
            self.weight.zero_()
            self.weight[:, 2 * D :].copy_(torch.eye(D))

    def forward(self, low_btd: torch.Tensor, mid_btd: torch.Tensor, high_btd: torch.Tensor) -> torch.Tensor:
        x = torch.cat([low_btd, mid_btd, high_btd], dim=-1)
        return lin(self, x.to(compute_dtype(x.dtype))).to(x.dtype)


class SharedHead(nn.Module):
    def __init__(self, cfg: K3Config) -> None:
        super().__init__()
        self.norm = RMSNorm(cfg.hidden_size, cfg.final_norm_eps)
        self.head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)


class MTPLayer(DecoderLayer):
    """A K3 layer (hub layer L) with the MTP input projection, its output read and head."""

    def __init__(self, cfg: K3Config, layer_idx: int) -> None:
        # the schedule of an (L+1)-layer model makes index L its last layer: MLA
        super().__init__(dataclasses.replace(cfg, num_hidden_layers=layer_idx + 1), layer_idx)
        D = cfg.hidden_size
        self.enorm = RMSNorm(D, cfg.rms_norm_eps)
        self.hnorm = RMSNorm(D, cfg.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * D, D, bias=False)
        self.output_attn_res_norm = RMSNorm(D, cfg.attn_res_norm_eps)
        self.output_attn_res_proj = nn.Linear(D, 1, bias=False)
        self.shared_head = SharedHead(cfg)


class EagleDraft(nn.Module):
    """The draft: `fc` and the MTP layer `model.layers.{L}` (hub-style names)."""

    def __init__(self, dcfg: DraftConfig) -> None:
        super().__init__()
        self.draft_config = dcfg
        cfg = dcfg.target
        self.fc = FeatureFusion(cfg.hidden_size)
        self.model = nn.Module()
        self.model.layers = nn.ModuleDict({str(dcfg.layer_index): MTPLayer(cfg, dcfg.layer_index)})

    @property
    def layer(self) -> MTPLayer:
        return self.model.layers[str(self.draft_config.layer_index)]

    def initial_state(self, batch: int) -> MLACache:
        return self.layer.self_attn.initial_state(batch, self.fc.weight)

    def forward(self, embeds_btd: torch.Tensor, features_btd: torch.Tensor,
                cache: MLACache) -> tuple[torch.Tensor, torch.Tensor, MLACache]:
        """T draft positions from the tokens' embeddings and the features before them:
        (logits [B, T, vocab], new features h [B, T, D], the cache advanced by T)."""
        lay, cfg = self.layer, self.draft_config.target
        cd = compute_dtype(embeds_btd.dtype)
        x = lin(lay.eh_proj, torch.cat([lay.enorm(embeds_btd), lay.hnorm(features_btd)], dim=-1).to(cd))
        depth = DepthState([x.to(embeds_btd.dtype)], block_size=cfg.attn_res_block_size)
        cache = lay(depth, cache)
        w_out = lay.output_attn_res_norm.weight.to(cd) * lay.output_attn_res_proj.weight[0].to(cd)
        h = retrieve(depth.sources(), w_out, cfg.attn_res_norm_eps)
        logits = lin(lay.shared_head.head, lay.shared_head.norm(h).to(cd)).to(h.dtype)
        return logits, h, cache


def target_pass(target: KimiK3ForCausalLM, ids_bt: torch.Tensor, cache, feature_layers: tuple[int, ...]):
    """One cached target pass that also returns the features `feature_layers` ([B, T, D] each):
    the AttnRes read entering layer i (the input of its `input_layernorm`), or for
    i = num_hidden_layers the final read (the input of `model.norm`). Read with forward
    pre-hooks, so the model's own forward is what runs."""
    L = target.config.num_hidden_layers
    reads: dict[int, torch.Tensor] = {}
    handles = []
    for i in sorted(set(feature_layers)):
        site = target.model.norm if i == L else target.model.layers[i].input_layernorm
        handles.append(site.register_forward_pre_hook(lambda mod, args, i=i: reads.__setitem__(i, args[0])))
    try:
        logits, cache = target(ids_bt, cache)
    finally:
        for h in handles:
            h.remove()
    return logits, cache, tuple(reads[i] for i in feature_layers)


def init_draft_(draft: EagleDraft, seed: int) -> EagleDraft:
    """Deterministic random weights by the target's rules (`checkpoint.init_random_`), then fc = [0 0 I]."""
    init_random_(draft, seed)
    draft.fc.reset_to_high_()
    return draft


def random_draft(dcfg: DraftConfig, seed: int = 0, dtype: torch.dtype = torch.float32) -> EagleDraft:
    return init_draft_(EagleDraft(dcfg), seed).to(dtype).eval()


DRAFT_FILE = "draft.safetensors"


def save_draft(draft: EagleDraft, config_path: str | Path, out_dir: str | Path) -> Path:
    """A draft checkpoint: config.json (copied verbatim) and `draft.safetensors` (hub-style names)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(Path(config_path).read_text(encoding="utf-8"), encoding="utf-8")
    save_file({k: v.detach().contiguous() for k, v in draft.state_dict().items()}, str(out / DRAFT_FILE),
              metadata={"format": "pt"})
    return out


def load_draft(path: str | Path, dtype: torch.dtype = torch.float32) -> EagleDraft:
    """The draft of the checkpoint directory `path` (config.json with the draft's fields and
    safetensors shards), loaded strictly: every missing, unexpected or mis-shaped tensor is named."""
    ckpt = Path(path)
    if not ckpt.is_dir():
        raise CheckpointError(f"{ckpt}: draft checkpoint directory does not exist")
    dcfg = load_draft_config(ckpt)
    with torch.device("meta"):
        draft = EagleDraft(dcfg)
    tensors = read_tensors(ckpt)
    expected = {k: list(v.shape) for k, v in draft.state_dict().items()}
    problems = [f"missing tensor '{k}' (expected shape {s})" for k, s in expected.items() if k not in tensors]
    problems += [f"unexpected tensor '{k}'" for k in tensors if k not in expected]
    problems += [f"tensor '{k}' has shape {list(t.shape)}, expected {expected[k]}" for k, t in tensors.items()
                 if k in expected and list(t.shape) != expected[k]]
    problems += [f"tensor '{k}' is not finite floating point" for k, t in tensors.items()
                 if k in expected and (not t.is_floating_point() or not bool(torch.isfinite(t).all()))]
    if problems:
        more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        raise CheckpointError(f"{ckpt}: {len(problems)} problem(s) in draft checkpoint:\n  "
                              + "\n  ".join(problems[:MAX_LISTED]) + more)
    draft.load_state_dict({k: v.to(dtype) for k, v in tensors.items()}, assign=True)
    return draft.eval()
