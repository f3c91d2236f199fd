"""Checkpoint loading end to end: random checkpoint round trip, the CLI, and
hypothesis-generated malformed checkpoints/configs that must give a clear error naming the
tensor, file or field (never another exception type, never a traceback); the same for MXFP4
checkpoints (the released layout) and their malformed quantized tensors."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from pybridge import mxfp4
from pybridge.__main__ import main
from pybridge.checkpoint import INDEX_NAME, load_checkpoint, load_spec_params, random_model, save_checkpoint
from pybridge.config import config_from_dict, load_config
from pybridge.errors import CheckpointError, ConfigError

torch.set_num_threads(1)  # tiny tensors gain nothing from threads; on a shared box they only add contention
TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "config.json"


@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory) -> Path:
    model = random_model(load_config(TINY), seed=11)
    return save_checkpoint(model, TINY, tmp_path_factory.mktemp("ckpt"), num_shards=3)


def copy_of(src: Path, dst: Path | None = None) -> Path:
    """Copy a checkpoint; without `dst`, into a fresh temp dir the caller removes."""
    dst = dst or Path(tempfile.mkdtemp(prefix="k3ckpt-"))
    shutil.copytree(src, dst, dirs_exist_ok=True)
    return dst


def test_round_trip(ckpt_dir):
    original = random_model(load_config(TINY), seed=11)
    loaded = load_checkpoint(ckpt_dir)
    for (n1, t1), (n2, t2) in zip(original.state_dict().items(), loaded.state_dict().items()):
        assert n1 == n2 and torch.equal(t1, t2)
    prompt = torch.tensor([[1, 2, 3]])
    assert torch.equal(original.generate(prompt, 8), loaded.generate(prompt, 8))


def test_tied_embeddings_round_trip(tmp_path):
    cfg_path = tmp_path / "tied.json"
    cfg_path.write_text(json.dumps(dict(json.loads(TINY.read_text()), tie_word_embeddings=True)))
    model = random_model(load_config(cfg_path), seed=2)
    out = save_checkpoint(model, cfg_path, tmp_path / "ckpt", num_shards=1)
    loaded = load_checkpoint(out)
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    assert torch.equal(loaded.lm_head.weight, model.lm_head.weight)


def test_hub_names_and_shapes(ckpt_dir):
    names = set()
    for f in sorted(ckpt_dir.glob("*.safetensors")):
        names |= set(load_file(str(f)))
    assert "model.layers.0.self_attn.q_conv1d.weight" in names
    assert "model.layers.1.block_sparse_moe.experts.5.w3.weight" in names
    assert "model.layers.3.self_attn.kv_a_proj_with_mqa.weight" in names
    assert "model.layers.0.mlp.gate_proj.weight" in names
    assert "lm_head.weight" in names and "model.output_attn_res_proj.weight" in names


def test_multimodal_prefix_and_vision_tensors_accepted(ckpt_dir, tmp_path):
    d = copy_of(ckpt_dir, tmp_path / "mm")
    (d / INDEX_NAME).unlink()
    for f in d.glob("*.safetensors"):
        tensors = load_file(str(f))
        save_file({("language_model." + k): v for k, v in tensors.items()}, str(f))
    save_file({"vision_tower.patch_embed.weight": torch.zeros(2, 2)}, str(d / "vision.safetensors"))
    load_checkpoint(d)


# ---- malformed checkpoints --------------------------------------------------------------

ALL_NAMES = list(random_model(load_config(TINY), seed=0).state_dict())
MUTATIONS = [
    "drop",
    "extra",
    "reshape",
    "int_dtype",
    "nan",
    "truncate_file",
    "garbage_file",
    "missing_shard",
    "bad_index",
    "duplicate",
    "config_missing",
    "config_bad_field",
]


def mutate(d: Path, kind: str, name: str, data: st.DataObject) -> str:
    """Apply one defect; return the text the error message must contain."""
    index = json.loads((d / INDEX_NAME).read_text())
    shard = d / index["weight_map"][name]
    tensors = load_file(str(shard))
    if kind == "drop":
        del tensors[name]
        del index["weight_map"][name]
    elif kind == "extra":
        tensors["model.layers.0.self_attn.bogus.weight"] = torch.zeros(3)
        name = "model.layers.0.self_attn.bogus.weight"
    elif kind == "reshape":
        t = tensors[name]
        tensors[name] = torch.zeros(*t.shape[:-1], t.shape[-1] + data.draw(st.integers(1, 3)))
    elif kind == "int_dtype":
        tensors[name] = tensors[name].to(torch.int32)
    elif kind == "nan":
        t = tensors[name].clone()
        t.view(-1)[data.draw(st.integers(0, t.numel() - 1))] = float("nan")
        tensors[name] = t
    elif kind == "truncate_file":
        raw = shard.read_bytes()
        shard.write_bytes(raw[: data.draw(st.integers(0, len(raw) - 1))])
        return shard.name
    elif kind == "garbage_file":
        shard.write_bytes(data.draw(st.binary(min_size=0, max_size=64)))
        return shard.name
    elif kind == "missing_shard":
        shard.unlink()
        return shard.name
    elif kind == "bad_index":
        (d / INDEX_NAME).write_text(data.draw(st.sampled_from(["{", "[]", '{"weight_map": 3}', "{}"])))
        return INDEX_NAME
    elif kind == "config_missing":
        (d / "config.json").unlink()
        return "config.json"
    elif kind == "config_bad_field":
        cfg = json.loads((d / "config.json").read_text())
        field = data.draw(st.sampled_from(["hidden_size", "num_experts", "kv_lora_rank", "attn_res_block_size"]))
        cfg[field] = data.draw(st.sampled_from([0, -3, "x", None, 2.5]))
        (d / "config.json").write_text(json.dumps(cfg))
        return field
    elif kind == "duplicate":
        other = next(f for f in sorted(d.glob("*.safetensors")) if f != shard)
        extra = load_file(str(other))
        extra[name] = tensors[name]
        save_file(extra, str(other))
    save_file(tensors, str(shard))
    (d / INDEX_NAME).write_text(json.dumps(index))
    return name


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(MUTATIONS), name=st.sampled_from(ALL_NAMES), data=st.data())
def test_malformed_checkpoint_gives_named_error(ckpt_dir, kind, name, data):
    d = copy_of(ckpt_dir)
    try:
        must_mention = mutate(d, kind, name, data)
        with pytest.raises((CheckpointError, ConfigError)) as err:
            load_checkpoint(d)
        assert must_mention in str(err.value)
    finally:
        shutil.rmtree(d)


# ---- malformed configs ------------------------------------------------------------------

TINY_DICT = json.loads(TINY.read_text())
TOP_FIELDS = [k for k in TINY_DICT if k not in ("architectures", "model_type", "linear_attn_config")]
BAD_VALUES = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.integers(-5, 0),
    st.floats(allow_nan=True),
    st.lists(st.integers(), max_size=2),
    st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(
    field=st.sampled_from(TOP_FIELDS + ["linear_attn_config." + k for k in TINY_DICT["linear_attn_config"]]),
    value=BAD_VALUES,
    delete=st.booleans(),
)
def test_bad_config_field_is_named(field, value, delete):
    cfg = json.loads(json.dumps(TINY_DICT))
    holder, key = (cfg["linear_attn_config"], field.split(".", 1)[1]) if "." in field else (cfg, field)
    if delete:
        del holder[key]
    else:
        holder[key] = value
    try:
        config_from_dict(cfg)
    except ConfigError as e:
        assert key in str(e)


def test_config_errors_name_field_and_file(tmp_path):
    bad = dict(TINY_DICT, hidden_size="wide")
    (tmp_path / "config.json").write_text(json.dumps(bad))
    with pytest.raises(ConfigError, match=r"config\.json: field 'hidden_size' must be an integer"):
        load_config(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(tmp_path)
    wrong_schedule = json.loads(json.dumps(TINY_DICT))
    wrong_schedule["linear_attn_config"]["full_attn_layers"] = [4]
    with pytest.raises(ConfigError, match="full_attn_layers"):
        config_from_dict(wrong_schedule)
    with pytest.raises(ConfigError, match="num_experts_per_token"):
        config_from_dict(dict(TINY_DICT, num_experts_per_token=7))


# ---- command line -----------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "pybridge", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_cli_make_checkpoint_and_generate(tmp_path):
    out = tmp_path / "k3"
    made = run_cli("make-random-checkpoint", "--config", str(TINY), "--out", str(out), "--seed", "3")
    assert made.returncode == 0, made.stderr
    res = run_cli("generate", "--checkpoint", str(out), "--prompt-ids", "1,2,3", "--max-new-tokens", "16")
    assert res.returncode == 0, res.stderr
    new = [int(t) for t in res.stdout.strip().split(",")]
    expected = random_model(load_config(TINY), seed=3).generate(torch.tensor([[1, 2, 3]]), 16)[0].tolist()
    assert new == expected


def test_cli_errors_have_no_traceback(ckpt_dir, tmp_path, monkeypatch, capsys):
    """Same entry point as `python -m pybridge`, run in-process to keep the suite fast."""
    broken = copy_of(ckpt_dir, tmp_path / "broken")
    shard = sorted(broken.glob("*.safetensors"))[0]
    shard.write_bytes(b"\x00" * 10)
    cases = [
        (("--checkpoint", str(tmp_path / "absent"), "--prompt-ids", "1"), "does not exist"),
        (("--checkpoint", str(ckpt_dir), "--prompt-ids", "1,a"), "--prompt-ids"),
        (("--checkpoint", str(ckpt_dir), "--prompt-ids", "5000"), "token ids"),
        (("--checkpoint", str(broken), "--prompt-ids", "1"), shard.name),
    ]
    for args, fragment in cases:
        monkeypatch.setattr(sys, "argv", ["pybridge", "generate", *args])
        with pytest.raises(SystemExit) as exit_info:
            main()
        err = capsys.readouterr().err
        assert exit_info.value.code == 2
        assert err.startswith("error: ") and fragment in err and "Traceback" not in err


# ---- MXFP4 checkpoints (the released layout: routed experts `weight_packed` / `weight_scale`) ----

TINY_MX = TINY.parents[1] / "tiny-mx" / "config.json"


@pytest.fixture(scope="module")
def mx_dir(tmp_path_factory) -> Path:
    model = random_model(load_config(TINY_MX), seed=5, quantize="mxfp4")
    return save_checkpoint(model, TINY_MX, tmp_path_factory.mktemp("mx"), num_shards=3)


def test_mxfp4_checkpoint_round_trip_and_generate(mx_dir):
    """Written and read back exactly; the model generates as a dense one holding the dequantized
    expert weights; the spec parameters are the dequantized weights (through the adapter)."""
    original = random_model(load_config(TINY_MX), seed=5, quantize="mxfp4")
    loaded = load_checkpoint(mx_dir)
    assert original.state_dict().keys() == loaded.state_dict().keys()
    assert all(torch.equal(t, loaded.state_dict()[k]) for k, t in original.state_dict().items())
    packed = loaded.state_dict()["model.layers.1.block_sparse_moe.experts.2.w1.weight_packed"]
    scale = loaded.state_dict()["model.layers.1.block_sparse_moe.experts.2.w1.weight_scale"]
    # w1 [hidden 32, latent 64]: 32 bytes and 2 groups per row
    assert (packed.dtype, list(packed.shape), scale.dtype, list(scale.shape)) == (torch.uint8, [32, 32], torch.uint8, [32, 2])
    dense = random_model(load_config(TINY_MX), seed=5)
    with torch.no_grad():
        for name, p in dense.named_parameters():
            if ".experts." in name:
                base = name.removesuffix(".weight")
                p.copy_(mxfp4.dequantize(original.state_dict()[base + ".weight_packed"],
                                         original.state_dict()[base + ".weight_scale"], torch.float32))
    prompt = torch.tensor([[1, 2, 3]])
    assert torch.equal(loaded.generate(prompt, 8), dense.generate(prompt, 8))
    _, spec = load_spec_params(mx_dir)
    hub = original.state_dict()
    want = mxfp4.dequantize(hub["model.layers.2.block_sparse_moe.experts.4.w2.weight_packed"],
                            hub["model.layers.2.block_sparse_moe.experts.4.w2.weight_scale"]).T
    assert torch.equal(spec["layers.3.moe.expert.down[4]"], want)
    assert json.loads((mx_dir / "config.json").read_text())["quantization_config"]["format"] == "mxfp4-pack-quantized"


def test_cli_mxfp4_checkpoint_generates(tmp_path):
    out = tmp_path / "k3mx"
    made = run_cli("make-random-checkpoint", "--config", str(TINY_MX), "--out", str(out), "--seed", "6", "--quantize", "mxfp4")
    assert made.returncode == 0, made.stderr
    res = run_cli("generate", "--checkpoint", str(out), "--prompt-ids", "4,5,6", "--max-new-tokens", "8")
    assert res.returncode == 0, res.stderr
    want = random_model(load_config(TINY_MX), seed=6, quantize="mxfp4").generate(torch.tensor([[4, 5, 6]]), 8)
    assert [int(t) for t in res.stdout.strip().split(",")] == want[0].tolist()
    bad = run_cli("make-random-checkpoint", "--config", str(TINY), "--out", str(tmp_path / "no"), "--quantize", "mxfp4")
    assert bad.returncode == 2 and "routed_expert_hidden_size" in bad.stderr and "Traceback" not in bad.stderr


def test_mxfp4_config_with_misaligned_expert_widths_is_named(mx_dir, tmp_path):
    d = copy_of(mx_dir, tmp_path / "mis")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps(dict(cfg, routed_expert_hidden_size=48)))
    for load in (load_checkpoint, load_spec_params):
        with pytest.raises(ConfigError, match=r"config\.json: MXFP4 routed experts need field 'routed_expert_hidden_size' \(48\)"):
            load(d)


MX_PACKED = [k for k in random_model(load_config(TINY_MX), seed=0, quantize="mxfp4").state_dict()
             if k.endswith(".weight_packed")]
MX_MUTATIONS = ["scale_shape", "odd_packed", "nan_scale", "drop_scale", "packed_dtype", "no_quantization_config",
                "bad_format"]


def mutate_mx(d: Path, kind: str, packed_name: str, data: st.DataObject) -> list[str]:
    """Apply one defect to an MXFP4 pair; return the texts the error message must contain."""
    scale_name = packed_name.replace("_packed", "_scale")
    index = json.loads((d / INDEX_NAME).read_text())
    if kind in ("no_quantization_config", "bad_format"):
        cfg = json.loads((d / "config.json").read_text())
        if kind == "bad_format":
            cfg["quantization_config"]["format"] = data.draw(st.sampled_from(["nvfp4-pack-quantized", "pack-quantized", 4]))
        else:
            del cfg["quantization_config"]
        (d / "config.json").write_text(json.dumps(cfg))
        return ["quantization_config"] + ([".weight_packed' (in model-", "MXFP4-packed"] if kind == "no_quantization_config"
                                          else ["config.json"])
    target = packed_name if kind in ("odd_packed", "packed_dtype", "drop_scale") else scale_name
    shard = d / index["weight_map"][target]
    tensors = load_file(str(shard))
    scale_shard = d / index["weight_map"][scale_name]
    if kind == "scale_shape":
        s = tensors[scale_name]
        tensors[scale_name] = data.draw(st.sampled_from([s.T.contiguous(), torch.cat([s, s], 1), s[:-1], s.reshape(-1)]))
    elif kind == "odd_packed":
        p = tensors[packed_name]
        tensors[packed_name] = p[:, : p.shape[1] - data.draw(st.integers(1, 15))].contiguous()
    elif kind == "nan_scale":
        s = tensors[scale_name].clone()
        s.view(-1)[data.draw(st.integers(0, s.numel() - 1))] = 255
        tensors[scale_name] = s
    elif kind == "drop_scale":
        other = load_file(str(scale_shard))
        del other[scale_name]
        del index["weight_map"][scale_name]
        save_file(other, str(scale_shard))
        tensors = load_file(str(shard)) if shard == scale_shard else tensors
    elif kind == "packed_dtype":
        tensors[packed_name] = tensors[packed_name].to(data.draw(st.sampled_from([torch.int8, torch.float32, torch.int32])))
    save_file(tensors, str(shard))
    (d / INDEX_NAME).write_text(json.dumps(index))
    return [packed_name if kind in ("odd_packed", "packed_dtype", "drop_scale") else scale_name, shard.name]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(MX_MUTATIONS), name=st.sampled_from(MX_PACKED), data=st.data())
def test_malformed_mxfp4_tensor_gives_named_error(mx_dir, kind, name, data):
    """A wrong scale shape, packed rows that are not whole groups, the NaN scale code, a missing
    scale, a non-uint8 packed tensor, a missing or foreign quantization_config: one error naming
    the tensor and its file (or the config field), from both loaders."""
    d = copy_of(mx_dir)
    try:
        must_mention = mutate_mx(d, kind, name, data)
        for load in (load_checkpoint, load_spec_params):
            with pytest.raises((CheckpointError, ConfigError)) as err:
                load(d)
            assert all(m in str(err.value) for m in must_mention), (must_mention, str(err.value))
    finally:
        shutil.rmtree(d)
