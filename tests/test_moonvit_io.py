"""MoonViT-V2 around the model: the `vision_config` reader and its errors, every config reader
still accepting the fixtures, the adapter's vision rules (hand-built entries, round trips, the README
table), checkpoints (random writing, strict loading, named errors), image preprocessing, and the
multimodal prefill against the plain text reference fed the reference tower's visual tokens."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from pybridge import adapter
from pybridge import moonvit_reference as vref
from pybridge.__main__ import main
from pybridge.checkpoint import INDEX_NAME, load_checkpoint, load_vision, load_vision_spec_params, random_model, save_checkpoint
from pybridge.config import config_from_dict, load_config
from pybridge.errors import CheckpointError, ConfigError, InputError
from pybridge.image import patchify, preprocess, target_size
from pybridge.moonvit import MoonViT, random_moonvit
from pybridge.multimodal import prefill, prefill_pixels
from pybridge.reference import reference_logits

torch.set_num_threads(1)
F64 = torch.float64
REPO = Path(__file__).resolve().parents[1]
TINY_PATH = REPO / "fixtures" / "tiny" / "config.json"
PAPER_PATH = REPO / "fixtures" / "paper" / "config.json"
CFG = load_config(TINY_PATH)
V = CFG.vision


def raw_tiny() -> dict:
    return json.loads(TINY_PATH.read_text(encoding="utf-8"))


# --- configuration ---------------------------------------------------------------------------------

def test_every_config_reader_accepts_the_fixtures() -> None:
    from difftest.config import own_reading, torch_reading
    from pybridge.paper_check import check_config

    for path in (TINY_PATH, PAPER_PATH):
        cfg = load_config(path)
        assert cfg.vision is not None and cfg.media_placeholder_token_id is not None
        assert own_reading(path) == torch_reading(path)
    paper = check_config(PAPER_PATH)
    assert paper.mismatches == [] and paper.wf_problems == []
    assert load_config(PAPER_PATH).media_placeholder_token_id == 163605


def test_text_only_config_has_no_vision() -> None:
    raw = raw_tiny()
    del raw["vision_config"], raw["media_placeholder_token_id"]
    cfg = config_from_dict(raw)
    assert cfg.vision is None and cfg.media_placeholder_token_id is None


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["vision_config"].update(qkv_hidden_size=35), r"'vision_config.qkv_hidden_size' \(35\) must be vt_num_attention_heads \(3\) times a head width divisible by 4"),
    (lambda r: r["vision_config"].update(qkv_hidden_size=30), r"'vision_config.qkv_hidden_size' \(30\)"),
    (lambda r: r["vision_config"].update(text_hidden_size=25), r"'vision_config.text_hidden_size' \(25\) must equal hidden_size \(24\)"),
    (lambda r: r["vision_config"].update(pos_emb_interpolation_mode="bicubic"), r"'vision_config.pos_emb_interpolation_mode' must be 'bilinear'"),
    (lambda r: r["vision_config"].update(merge_kernel_size=[2]), r"'vision_config.merge_kernel_size' must be two positive integers"),
    (lambda r: r["vision_config"].update(image_std=[0.5, 0.5]), r"'vision_config.image_std' must be a list of 3 finite numbers"),
    (lambda r: r["vision_config"].update(image_std=[0.5, 0.0, 0.5]), r"'vision_config.image_std' must be positive"),
    (lambda r: r["vision_config"].update(vt_hidden_size=21), r"'vision_config.vt_hidden_size' \(21\) must be even"),
    (lambda r: r["vision_config"].pop("patch_size"), r"field 'vision_config.patch_size' is missing"),
    (lambda r: r["vision_config"].update(vt_num_hidden_layers=0), r"'vision_config.vt_num_hidden_layers' must be positive"),
    (lambda r: r.pop("media_placeholder_token_id"), r"field 'media_placeholder_token_id' is missing"),
    (lambda r: r.update(media_placeholder_token_id=101), r"'media_placeholder_token_id' \(101\) must be below vocab_size \(101\)"),
    (lambda r: r.update(vision_config=[]), r"field 'vision_config' must be a JSON object"),
])
def test_bad_vision_fields_are_named(edit, message) -> None:
    raw = raw_tiny()
    edit(raw)
    with pytest.raises(ConfigError, match=message):
        config_from_dict(raw)


# --- the adapter -----------------------------------------------------------------------------------

def coded(*shape: int) -> torch.Tensor:
    return torch.arange(1, torch.Size(shape).numel() + 1, dtype=F64).reshape(shape)


def test_vision_rules_on_coded_tensors() -> None:
    """Spec entries written down index by index: `query[d, a, k] = wqkv[a·K + k, d]`, key and
    value the next Q rows; `output[a, k, d] = wo[d, a·K + k]`; `patch_weight[(c·p + i)·p + j, d] =
    proj[d, c, i, j]`; `first = proj.0.T`."""
    hub = {k: coded(*v.shape) for k, v in random_moonvit(V, 0).state_dict().items()}
    spec = adapter.vision_to_spec(V, hub)
    D, A, K, Q, p = V.hidden_size, V.num_heads, V.head_dim, V.qkv_hidden_size, V.patch_size
    w, wo = hub["vision_tower.encoder.blocks.1.wqkv.weight"], hub["vision_tower.encoder.blocks.1.wo.weight"]
    proj = hub["vision_tower.patch_embed.proj.weight"]
    for d in (0, 7, D - 1):
        for a in range(A):
            for k in (0, 5, K - 1):
                assert spec["vision.blocks.1.attn.query"][d, a, k] == w[a * K + k, d]
                assert spec["vision.blocks.1.attn.key"][d, a, k] == w[Q + a * K + k, d]
                assert spec["vision.blocks.1.attn.value"][d, a, k] == w[2 * Q + a * K + k, d]
                assert spec["vision.blocks.1.attn.output"][a, k, d] == wo[d, a * K + k]
        for c in range(3):
            for i in range(p):
                for j in range(p):
                    assert spec["vision.patch_weight"][(c * p + i) * p + j, d] == proj[d, c, i, j]
    assert torch.equal(spec["projector.first"], hub["mm_projector.proj.0.weight"].T)
    assert torch.equal(spec["projector.post_norm.scale"], hub["mm_projector.post_norm.weight"])
    back = adapter.vision_to_hub(V, spec)
    assert set(back) == set(hub) and all(torch.equal(back[k], hub[k]) for k in hub)


def test_paper_checkpoint_layout_is_the_adapters() -> None:
    """The released key list (k3-spec §7) at the paper config: every name and shape the module
    has, the adapter maps, and nothing else."""
    vision = load_config(PAPER_PATH).vision
    with torch.device("meta"):
        hub = {k: tuple(t.shape) for k, t in MoonViT(vision).state_dict().items()}
    per_block = {"norm0.weight": (1024,), "wqkv.weight": (4608, 1024), "wo.weight": (1024, 1536), "norm1.weight": (1024,),
                 "mlp.fc0.weight": (4096, 1024), "mlp.fc1.weight": (1024, 4096)}
    want = {"vision_tower.patch_embed.proj.weight": (1024, 3, 14, 14), "vision_tower.patch_embed.pos_emb.weight": (64, 64, 1024),
            **{f"vision_tower.encoder.blocks.{i}.{k}": s for i in range(27) for k, s in per_block.items()},
            "vision_tower.encoder.final_layernorm.weight": (1024,), "mm_projector.proj.0.weight": (4096, 4096),
            "mm_projector.proj.2.weight": (7168, 4096), "mm_projector.post_norm.weight": (7168,)}
    assert hub == want
    rules = adapter.vision_rules(vision)
    assert dict(zip((n for r in rules for n in r.hub), (s for r in rules for s in r.hub_shapes))) == want


def test_whole_checkpoint_maps_text_and_vision() -> None:
    """A checkpoint's text and vision tensors together map through `checkpoint_rules` (nothing
    unexpected) and back; the text model's `hub_to_spec` alone names the vision tensors as
    unexpected, and `checkpoint_rules` without them names them missing."""
    hub = {**random_model(CFG, 1, F64).state_dict(), **random_moonvit(V, 1).state_dict()}
    spec = adapter.checkpoint_to_spec(CFG, hub)
    assert "vision.blocks.1.attn.key" in spec and "token_embedding" in spec
    back = adapter.spec_to_checkpoint(CFG, spec)
    assert set(back) == set(hub) and all(torch.equal(back[k], hub[k]) for k in hub)
    with pytest.raises(CheckpointError, match=r"unexpected hub tensor 'vision_tower.patch_embed.proj.weight'"):
        adapter.hub_to_spec(CFG, hub)
    text = {k: t for k, t in hub.items() if not k.startswith(("vision_tower.", "mm_projector."))}
    with pytest.raises(CheckpointError, match=r"missing hub tensor 'mm_projector.post_norm.weight' \(expected shape \[24\]\)"):
        adapter.checkpoint_to_spec(CFG, text)


def test_readme_vision_table_is_the_adapters() -> None:
    text = (REPO / "pybridge" / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- vision adapter table: begin -->\n(.*?)\n<!-- vision adapter table: end -->", text, re.DOTALL)
    assert block, "pybridge/README.md lost its generated vision table markers"
    assert block.group(1) == adapter.vision_mapping_table(V), "regenerate with `python -m pybridge.adapter vision`"


# --- checkpoints -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    """`make-random-checkpoint` (in process) on the tiny config."""
    out = tmp_path_factory.mktemp("vit")
    argv = ["pybridge", "make-random-checkpoint", "--config", str(TINY_PATH), "--out", str(out), "--seed", "7"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", argv)
        main()
    return out


def test_random_checkpoint_holds_the_vision_tensors(ckpt) -> None:
    names = set()
    for f in ckpt.glob("*.safetensors"):
        names |= set(load_file(str(f)))
    want = set(random_moonvit(V, 7).state_dict())
    assert want <= names and "vision_tower.encoder.blocks.1.wqkv.weight" in names
    vit = load_vision(ckpt, F64)
    expected = random_moonvit(V, 7, torch.float32).to(F64)
    assert all(torch.equal(vit.state_dict()[k], t) for k, t in expected.state_dict().items())
    load_checkpoint(ckpt)  # the text loader leaves the vision tensors to load_vision
    spec = load_vision_spec_params(ckpt)
    assert set(spec) == set(adapter.vision_to_spec(V, expected.state_dict()))


def _rewrite(ckpt: Path, dst: Path, change) -> Path:
    """A copy of `ckpt` whose tensors went through `change(dict)` (one shard, no index)."""
    dst.mkdir()
    (dst / "config.json").write_text((ckpt / "config.json").read_text())
    tensors = {}
    for f in ckpt.glob("*.safetensors"):
        tensors.update(load_file(str(f)))
    change(tensors)
    save_file(tensors, str(dst / "model.safetensors"))
    return dst


@pytest.mark.parametrize("change, message", [
    (lambda t: t.update({"vision_tower.encoder.blocks.0.wo.weight": torch.zeros(36, 20)}),
     r"checkpoint:\n  tensor 'vision_tower.encoder.blocks.0.wo.weight' has shape \[36, 20\], expected \[20, 36\]"),
    (lambda t: t.pop("mm_projector.post_norm.weight"), r"missing tensor 'mm_projector.post_norm.weight' \(expected shape \[24\]\)"),
    (lambda t: t.update({"vision_tower.patch_embed.weight": torch.zeros(2, 2)}), r"unexpected tensor 'vision_tower.patch_embed.weight'"),
    (lambda t: t["vision_tower.patch_embed.pos_emb.weight"].view(-1).__setitem__(3, float("nan")),
     r"tensor 'vision_tower.patch_embed.pos_emb.weight' contains NaN or infinite values"),
])
def test_bad_vision_tensors_are_named(ckpt, tmp_path, change, message) -> None:
    bad = _rewrite(ckpt, tmp_path / "bad", change)
    with pytest.raises(CheckpointError, match=message):
        load_vision(bad)
    with pytest.raises(CheckpointError, match=message):
        load_vision_spec_params(bad)


def test_text_loader_leaves_bad_vision_tensors_to_load_vision(ckpt, tmp_path) -> None:
    """A text-only load (what `generate` calls) does not read the vision tensors; a vision load names the bad one."""
    bad = _rewrite(ckpt, tmp_path / "bad", lambda t: t.update({"mm_projector.proj.0.weight": torch.zeros(80, 81)}))
    load_checkpoint(bad)
    with pytest.raises(CheckpointError, match=r"'mm_projector.proj.0.weight' has shape \[80, 81\], expected \[80, 80\]"):
        load_vision(bad)


def test_text_only_config_has_no_vision_to_load(ckpt, tmp_path) -> None:
    raw = raw_tiny()
    del raw["vision_config"], raw["media_placeholder_token_id"]
    d = _rewrite(ckpt, tmp_path / "text", lambda t: None)
    (d / "config.json").write_text(json.dumps(raw))
    load_checkpoint(d)  # the vision tensors are left aside
    with pytest.raises(CheckpointError, match=r"no vision_config, so the checkpoint has no vision tower to load"):
        load_vision(d)


def test_save_checkpoint_indexes_the_vision_tensors(tmp_path) -> None:
    out = save_checkpoint(random_model(CFG, 1), TINY_PATH, tmp_path, num_shards=2, vision=random_moonvit(V, 2))
    weight_map = json.loads((out / INDEX_NAME).read_text())["weight_map"]
    assert "mm_projector.proj.2.weight" in weight_map and "model.embed_tokens.weight" in weight_map


# --- image preprocessing ---------------------------------------------------------------------------

@pytest.mark.parametrize("hw, want", [
    ((10, 17), ((10, 17), (12, 18))),  # inside the budget: no resize, pad to multiples of 6 (3 · 2)
    ((40, 70), ((13, 24), (18, 24))),  # scale min(√(48/(13·23)), 24/40, 24/70) = 24/70: 13.7 → 13, 24
    ((24, 24), ((20, 20), (24, 24))),  # 64 patches > 48: scale √(48/64)
    ((2, 100), ((1, 24), (6, 24))),  # the per-side budget (8 patches of 3): scale 0.24, ⌊0.48⌋ → at least 1
])
def test_target_size_by_hand(hw, want) -> None:
    """Kimi K2.5's rule (transformers `navit_resize`): scale = min(1, √(budget / ⌊H/p⌋⌊W/p⌋),
    side·p/H, side·p/W), sizes ⌊H·scale⌋, then padded up to multiples of p·merge."""
    assert target_size(V, *hw) == want


def test_preprocess_pads_normalizes_and_patchifies_by_hand() -> None:
    gen = torch.Generator().manual_seed(0)
    image = torch.randint(0, 256, (3, 10, 17), dtype=torch.uint8, generator=gen)
    got, grids = preprocess(V, [image])
    assert grids == [(1, 4, 6)] and got.shape == (24, 27)
    p = V.patch_size
    for r in range(4):
        for c in range(6):
            for ch in range(3):
                for i in range(p):
                    for j in range(p):
                        y, x = r * p + i, c * p + j
                        pixel = float(image[ch, y, x]) / 255.0 if y < 10 and x < 17 else 0.0  # black padding
                        want = (pixel - V.image_mean[ch]) / V.image_std[ch]
                        assert got[r * 6 + c, (ch * p + i) * p + j] == pytest.approx(want, abs=1e-15)


def test_preprocess_resizes_videos_and_names_bad_clips() -> None:
    video = torch.rand(3, 3, 40, 70, dtype=F64)
    got, grids = preprocess(V, [video, torch.rand(3, 10, 17)])
    assert grids == [(3, 6, 8), (1, 4, 6)] and got.shape == (3 * 48 + 24, 27)
    frames = torch.nn.functional.interpolate(video, size=(13, 24), mode="bicubic", align_corners=False, antialias=True)
    frames = torch.nn.functional.pad(frames, (0, 0, 0, 5))
    mean = torch.tensor(V.image_mean, dtype=F64)[None, :, None, None]
    std = torch.tensor(V.image_std, dtype=F64)[None, :, None, None]
    assert torch.equal(got[:144], patchify((frames - mean) / std, V.patch_size))
    with pytest.raises(InputError, match=r"clip 1 has 5 frames, more than the time table's 4"):
        preprocess(V, [video, torch.rand(5, 3, 6, 6)])
    with pytest.raises(InputError, match=r"clip 0: pixels have 4 channels, expected 3"):
        preprocess(V, [torch.rand(4, 6, 6)])
    with pytest.raises(InputError, match=r"clip 0: pixels must have shape \[3, H, W\] or \[T, 3, H, W\]"):
        preprocess(V, [torch.rand(6, 6)])
    with pytest.raises(InputError, match=r"clip 0: pixels have an empty axis, shape \[1, 3, 0, 6\]"):
        preprocess(V, [torch.rand(3, 0, 6)])
    with pytest.raises(InputError, match=r"clip 0: pixels must be uint8 or floating point, got torch.int64"):
        preprocess(V, [torch.zeros(3, 6, 6, dtype=torch.long)])
    with pytest.raises(InputError, match="no clips to preprocess"):
        preprocess(V, [])


def test_non_square_merge_pads_each_axis() -> None:
    assert target_size(dataclasses.replace(V, merge_kernel_size=(2, 3)), 10, 17) == ((10, 17), (12, 18))
    assert target_size(dataclasses.replace(V, merge_kernel_size=(3, 2)), 10, 17) == ((10, 17), (18, 18))


# --- multimodal prefill ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def models():
    return random_model(CFG, seed=2, dtype=F64), random_moonvit(V, seed=4)


def _expected_logits(text, vit, ids: list[int], patches, grids) -> torch.Tensor:
    """The plain text reference on an embedding table extended by the reference tower's visual
    tokens, each placeholder pointing at its own new row (the splice written another way)."""
    feats = vref.features(V, vit.state_dict(), patches, grids)
    sd = dict(text.state_dict())
    sd["model.embed_tokens.weight"] = torch.cat([sd["model.embed_tokens.weight"], feats])
    rows = iter(range(CFG.vocab_size, CFG.vocab_size + feats.shape[0]))
    return reference_logits(CFG, sd, [next(rows) if t == CFG.media_placeholder_token_id else t for t in ids])


def test_prefill_equals_the_reference_splice(models) -> None:
    text, vit = models
    grids = [(2, 4, 2), (1, 2, 4)]  # 2 + 2 visual tokens
    patches = torch.randn(24, 27, dtype=F64, generator=torch.Generator().manual_seed(3))
    ph = CFG.media_placeholder_token_id
    ids = [5, ph, ph, 17, 3, ph, ph, 42]
    with torch.no_grad():
        logits, cache = prefill(text, vit, torch.tensor([ids]), patches, grids)
    want = _expected_logits(text, vit, ids, patches, grids)
    assert float((logits[0] - want).abs().max()) <= 1e-10 * float(want.abs().max())
    assert cache.length == len(ids)
    with torch.no_grad():
        plain, _ = text(torch.tensor([ids]))
    assert not torch.allclose(plain, logits)  # the splice changed the logits


def test_pixels_to_logits(models) -> None:
    text, vit = models
    image = torch.randint(0, 256, (3, 10, 17), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    ph = CFG.media_placeholder_token_id
    ids = [1, *[ph] * 6, 2, 3]  # a 4 × 6 grid merges to 6 tokens
    with torch.no_grad():
        got, _ = prefill_pixels(text, vit, torch.tensor([ids]), [image])
    patches, grids = preprocess(V, [image])
    want = _expected_logits(text, vit, ids, patches, grids)
    assert float((got[0] - want).abs().max()) <= 1e-10 * float(want.abs().max())


def test_placeholder_count_must_match(models) -> None:
    text, vit = models
    ph = CFG.media_placeholder_token_id
    patches = torch.zeros(8, 27, dtype=F64)
    with pytest.raises(InputError, match=r"the prompt has 3 placeholder token\(s\) \(id 100, media_placeholder_token_id\) "
                                         r"but the clips give 2 visual token\(s\)"):
        prefill(text, vit, torch.tensor([[1, ph, ph, ph]]), patches, [(1, 2, 4)])
    text_only = random_model(config_from_dict({k: v for k, v in raw_tiny().items()
                                               if k not in ("vision_config", "media_placeholder_token_id")}), 0, F64)
    with pytest.raises(InputError, match="no media_placeholder_token_id"):
        prefill(text_only, vit, torch.tensor([[1, 2]]), patches, [(1, 2, 4)])
