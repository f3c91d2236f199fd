"""`difftest checkpoint` on MXFP4 checkpoints (the released layout, issues 19 and 21).

The checkpoints are written by pybridge (`random_model(quantize="mxfp4")` + `save_checkpoint`,
the writer of `make-random-checkpoint --quantize mxfp4`) and by difftest's synthetic generator
(`write_synthetic(quantize="mxfp4")`, with its full-precision master from the same seed), at the
tiny-mx dimensions (routed experts of widths 64 / 32: whole MX groups). Expected verdicts come
from how the checkpoint was made or broken, never from the code under test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors import safe_open
from safetensors.torch import save_file

from difftest.adapters import load
from difftest.checkpoint import Options, plan, unit_bytes
from difftest.checkpoint_dist import verify
from difftest.checkpoint_synth import write_synthetic
from difftest.cli import main
from pybridge import mxfp4
from pybridge.checkpoint import INDEX_NAME, is_mxfp4, load_checkpoint, random_model, save_checkpoint
from pybridge.config import load_config

REPO = Path(__file__).resolve().parents[1]
TINY_MX = REPO / "fixtures" / "tiny-mx" / "config.json"
EXPERT = "model.layers.2.block_sparse_moe.experts.3.w1"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}"}


@pytest.fixture(scope="module")
def mx_ckpt(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("mx") / "pybridge"
    model = random_model(load_config(TINY_MX), seed=3, dtype=torch.bfloat16, quantize="mxfp4")
    save_checkpoint(model, TINY_MX, out, num_shards=3)
    return out


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> tuple[Path, Path]:
    """(MXFP4 checkpoint, its bf16 master): the synthetic generator, one seed."""
    root = tmp_path_factory.mktemp("synth")
    raw = json.loads(TINY_MX.read_text())
    write_synthetic(root / "mx", raw, seed=2, quantize="mxfp4")
    write_synthetic(root / "master", raw, seed=2)
    return root / "mx", root / "master"


def run_verify(folder: Path, report: Path, layers: str = "all", impls: tuple = (), **opts) -> tuple[int, dict]:
    code = verify(str(folder), layers, Options(**opts), impls, report, 60.0, lambda s: None)
    return code, json.loads((report / "summary.json").read_text())


def expert_rows(doc: dict, layer: int, output: str) -> list[dict]:
    return [c for u in doc["units"] if u["unit"]["layer"] == layer for c in u["comparisons"]
            if c["component"].startswith("expert.") and c["output"] == output]


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_clean_mxfp4_checkpoint_passes_and_reports_the_decode(mx_ckpt, tmp_path, dtype):
    before = sorted(p.name for p in mx_ckpt.iterdir())
    code, doc = run_verify(mx_ckpt, tmp_path / "r", dtype=dtype, experts="all")
    assert code == 0 and doc["passed"], doc["failed_layers"]
    assert sorted(doc["mxfp4"]) == ["1", "2", "3", "4"]  # the MoE layers; layer 0 is dense
    for i in (1, 2, 3, 4):
        m = doc["mxfp4"][str(i)]
        assert m["experts"] == 6 and m["nonfinite_float64"] == 0 and 0 < m["scale_codes"][0] <= m["scale_codes"][1] < 255
        assert m["budget_theorem"].endswith("MXFP4Expert.abs_forward_dequantize_sub_le") and m["budget_rel_max"] > 0
        assert sorted(c["component"] for c in expert_rows(doc, i, "decode")) == [f"expert.{e}" for e in range(6)]
        assert doc["layers"][str(i)]["rows"]["decode"] == 0.0
        # the torch leg (MXFP4SituExpert on the codes) against the reference on the dequantized weights:
        # close, but not bitwise (so the comparison measures something)
        ys = expert_rows(doc, i, "y")
        assert len(ys) == 6 and all(c["passed"] and c["tol"] > 0 for c in ys) and max(float(c["err"]) for c in ys) > 0
    if dtype == "bfloat16":
        assert all("nonfinite_float32" in doc["mxfp4"][k] for k in doc["mxfp4"])  # the torch leg's compute dtype
    assert sorted(p.name for p in mx_ckpt.iterdir()) == before
    html = (tmp_path / "r" / "index.html").read_text()
    assert ">decode</text>" in html and "6 decoded, E8M0 codes" in html


def test_mxfp4_units_read_the_codes_not_bf16(mx_ckpt, tmp_path):
    """A MoE unit reads 4.25 bits per routed-expert weight: against the same model dequantized
    into a bf16 checkpoint, the expert bytes are 17/64 of bf16's."""
    model = random_model(load_config(TINY_MX), seed=3, quantize="mxfp4")
    cfg = load_config(TINY_MX)
    dense = random_model(cfg, seed=3)
    with torch.no_grad():  # the dense model's experts set to the MXFP4 model's dequantized weights
        for i in range(1, 5):
            for e in range(6):
                for w in ("w1", "w2", "w3"):
                    q = getattr(model.model.layers[i].block_sparse_moe.experts[e], w)
                    getattr(dense.model.layers[i].block_sparse_moe.experts[e], w).weight.copy_(
                        mxfp4.dequantize(q.weight_packed, q.weight_scale))
    raw = json.loads(TINY_MX.read_text())
    raw.pop("quantization_config", None)
    (tmp_path / "cfg.json").write_text(json.dumps(raw))
    save_checkpoint(dense.to(torch.bfloat16), tmp_path / "cfg.json", tmp_path / "bf16", num_shards=2)
    _, q = run_verify(mx_ckpt, tmp_path / "rq", layers="1", dtype="bfloat16", experts="all")
    _, b = run_verify(tmp_path / "bf16", tmp_path / "rb", layers="1", dtype="bfloat16", experts="all")
    assert q["passed"] and b["passed"]
    assert ">decode</text>" in (tmp_path / "rq" / "index.html").read_text()
    assert ">decode</text>" not in (tmp_path / "rb" / "index.html").read_text()  # MXFP4 rows only where checked
    read = {k: next(u["bytes_read"] for u in d["units"] if u["unit"]["kind"] == "channel") for k, d in (("q", q), ("b", b))}
    n = 6 * 3 * 64 * 32  # routed-expert weights of the layer
    base = read["b"] - 2 * n  # the same non-expert tensors in both (bf16)
    assert read["q"] - base == n // 2 + n // 32  # packed codes + scales
    assert unit_bytes(cfg, plan(cfg, [1], Options())[1], quantized=True) < unit_bytes(cfg, plan(cfg, [1], Options())[1])


@pytest.mark.parametrize("adapter_name", ["swapped_nibbles", "scales_wrong_axis"])
def test_planted_mxfp4_decode_bug_fails_that_layer(mx_ckpt, tmp_path, monkeypatch, adapter_name):
    import checkpoint_planted

    monkeypatch.setattr(checkpoint_planted, "LAYER", 3)
    monkeypatch.setattr(checkpoint_planted, "EXPERT", -1)
    impl = load(f"checkpoint_planted:{adapter_name}")
    code, doc = run_verify(mx_ckpt, tmp_path / "r", impls=(impl,), dtype="bfloat16", experts="all")
    assert code == 1 and doc["failed_layers"] == [3]
    layer = doc["layers"]["3"]
    assert layer["failed_experts"] == list(range(6))
    assert layer["failed"] == [f"expert.{e}:y (impl:{impl.name})" for e in range(6)]
    honest = run_verify(mx_ckpt, tmp_path / "h", impls=(load("checkpoint_planted:honest"),), dtype="bfloat16",
                        experts="all")
    assert honest[0] == 0  # the same adapter without the bug, on the same codes, passes


def test_master_bound_holds_and_a_foreign_master_fails(synth, tmp_path):
    mx, master = synth
    code, doc = run_verify(mx, tmp_path / "r", dtype="bfloat16", experts="all", master=str(master))
    assert code == 0 and doc["passed"]
    bounds = expert_rows(doc, 2, "bound")
    assert {c["impl"] for c in bounds} == {"numpy", "torch"} and len(bounds) == 12
    # the quantization error is real (nonzero) and within the proved bound
    assert all(0 < float(c["err"]) <= 1 for c in bounds) and all(c["passed"] for c in expert_rows(doc, 2, "master_fit"))
    assert 0 < doc["mxfp4"]["2"]["bound_ratio_max"] <= 1
    assert doc["layers"]["2"]["rows"]["quant bound"] <= 1
    # the master of another seed: the file is not its quantization (weights outside their scale)
    other = tmp_path / "other"
    write_synthetic(other, json.loads(TINY_MX.read_text()), seed=5)
    code, doc = run_verify(mx, tmp_path / "r2", layers="1", dtype="float32", experts="0", master=str(other))
    assert code == 1 and doc["failed_layers"] == [1]
    assert "expert.0:master_fit (mxfp4)" in doc["layers"]["1"]["failed"]
    fit = expert_rows(doc, 1, "master_fit")[0]
    assert "w1:" in fit["note"] and "outside" in fit["note"]


def test_synthetic_generator_writes_the_released_layout(synth):
    """pybridge's strict loader reads the synthetic MXFP4 checkpoint, and its codes are the plain
    per-entry quantization (`mxfp4.quantize_reference`) of the master's bf16 weights."""
    mx, master = synth
    raw = json.loads((mx / "config.json").read_text())
    assert raw["quantization_config"]["format"] == "mxfp4-pack-quantized"
    assert is_mxfp4(load_checkpoint(mx))
    index = json.loads((mx / INDEX_NAME).read_text())["weight_map"]
    m_index = json.loads((master / INDEX_NAME).read_text())["weight_map"]
    with safe_open(str(mx / index[EXPERT + ".weight_packed"]), "pt") as f:
        packed, scale = f.get_tensor(EXPERT + ".weight_packed"), f.get_tensor(EXPERT + ".weight_scale")
    with safe_open(str(master / m_index[EXPERT + ".weight"]), "pt") as f:
        w = f.get_tensor(EXPERT + ".weight")
    assert packed.dtype == scale.dtype == torch.uint8 and list(packed.shape) == [32, 32] and list(scale.shape) == [32, 2]
    want_packed, want_scale = mxfp4.quantize_reference(w.double().tolist())
    assert packed.tolist() == want_packed and scale.tolist() == want_scale
    # the non-expert tensors are the master's
    with safe_open(str(mx / index["model.norm.weight"]), "pt") as f, \
            safe_open(str(master / m_index["model.norm.weight"]), "pt") as g:
        assert torch.equal(f.get_tensor("model.norm.weight"), g.get_tensor("model.norm.weight"))


def _rewrite(folder: Path, name: str, change, drop_from_index: bool = False) -> str:
    index_path = folder / INDEX_NAME
    index = json.loads(index_path.read_text())
    shard = index["weight_map"][name]
    with safe_open(str(folder / shard), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    change(tensors)
    save_file(tensors, str(folder / shard), metadata={"format": "pt"})
    if drop_from_index:
        index["weight_map"].pop(name)
        index_path.write_text(json.dumps(index))
    return shard


def _error(doc: dict, layer: int) -> str:
    e = doc["layers"][str(layer)]
    assert e["verdict"] == "ERROR", e
    return " ".join(e["errors"])


def test_bad_mxfp4_tensors_are_named_errors(mx_ckpt, tmp_path):
    packed, scale = EXPERT + ".weight_packed", EXPERT + ".weight_scale"

    def nan_code(t):
        s = t[scale].clone()
        s[5, 1] = 255
        t[scale] = s

    cases = {
        "missing scale": (scale, lambda t: t.pop(scale), True, [packed, f"has no scale tensor '{scale}'"]),
        "packed shape": (packed, lambda t: t.__setitem__(packed, t[packed][:, :-1].clone()), False,
                         [packed, "shape [32, 31]", "implies [32, 32]"]),
        "scale code 255": (scale, nan_code, False, [scale, "E8M0 NaN code 255", "[5, 1]"]),
        "dtype": (packed, lambda t: t.__setitem__(packed, t[packed].to(torch.int16)), False,
                  [packed, "dtype torch.int16", "expected torch.uint8"]),
    }
    for n, (name, change, drop, words) in enumerate(cases.values()):
        bad = shutil.copytree(mx_ckpt, tmp_path / f"bad{n}")
        shard = _rewrite(bad, name, change, drop)
        code, doc = run_verify(bad, tmp_path / f"r{n}", layers="1-2", dtype="float32", experts="3")
        msg = _error(doc, 2)
        assert code == 1 and shard in msg and all(w in msg for w in words), msg
        assert doc["layers"]["1"]["verdict"] == "pass"  # the other layer finishes


def test_scale_codes_beyond_float32_fail_the_decode_check_there(mx_ckpt, tmp_path):
    """E8M0 code 254 (2^127) makes weights of 6 · 2^127 > float32's maximum: finite in float64
    (the reference, and a float64 run's torch leg), not in the bf16 run's float32 compute dtype."""
    scale = "model.layers.2.block_sparse_moe.experts.3.w2.weight_scale"
    bad = shutil.copytree(mx_ckpt, tmp_path / "big")

    def big(t):
        s = t[scale].clone()
        s[7, 0] = 254
        t[scale] = s

    _rewrite(bad, scale, big)
    code, doc = run_verify(bad, tmp_path / "r32", layers="2", dtype="bfloat16", experts="3")
    assert code == 1 and doc["failed_layers"] == [2]
    assert "expert.3:decode (mxfp4)" in doc["layers"]["2"]["failed"] and doc["layers"]["2"]["failed_experts"] == [3]
    dec = next(c for c in expert_rows(doc, 2, "decode") if c["component"] == "expert.3")
    assert "254" in dec["note"] and "0 in float64" in dec["note"] and "0 in float32" not in dec["note"]
    assert doc["mxfp4"]["2"]["nonfinite_float32"] > 0 and doc["mxfp4"]["2"]["nonfinite_float64"] == 0
    _, doc = run_verify(bad, tmp_path / "r64", layers="2", dtype="float64", experts="3")
    assert all(c["passed"] for c in expert_rows(doc, 2, "decode"))


def test_float_experts_where_mxfp4_is_declared_and_bad_master(mx_ckpt, synth, tmp_path):
    # config.json says MXFP4, the shards hold float experts: the error says so
    bad = tmp_path / "undeclared"
    dense = random_model(load_config(TINY_MX), seed=3)
    save_checkpoint(dense, TINY_MX, bad, num_shards=2)
    raw = json.loads((bad / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**raw, "quantization_config": mxfp4.quantization_config()}))
    code, doc = run_verify(bad, tmp_path / "r", layers="1", dtype="float32", experts="0")
    msg = _error(doc, 1)
    assert code == 1 and "experts.0.w1.weight_packed" in msg and "this expert is not quantized" in msg
    # a master whose configuration differs: one error line, exit 2
    mx, master = synth
    r = CliRunner().invoke(main, ["checkpoint", "--checkpoint", str(mx_ckpt), "--master", str(mx)])
    assert r.exit_code == 2 and "declares a quantization_config" in r.output and "Traceback" not in r.output
    other = tmp_path / "other-master"
    shutil.copytree(master, other)
    raw = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**raw, "routed_scaling_factor": 1.5}))
    r = CliRunner().invoke(main, ["checkpoint", "--checkpoint", str(mx), "--master", str(other)])
    assert r.exit_code == 2 and "routed_scaling_factor" in r.output


def test_torchrun_two_ranks_mxfp4_with_a_planted_nibble_swap(mx_ckpt, tmp_path):
    """2 processes, each MoE layer's experts split over 2 shards: the per-layer `mxfp4` entries
    gather every checked expert from both ranks, and the nibble swap planted at layer 4 is named
    there (with all its experts), nowhere else."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(port), "-m", "difftest", "checkpoint", "--checkpoint", str(mx_ckpt), "--report",
           str(tmp_path / "r"), "--timeout", "30", "--dtype", "float32", "--experts", "all", "--expert-shards", "2",
           "--impl", "checkpoint_planted:swapped_nibbles"]
    p = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=150, env={**ENV, "K3_PLANT_LAYER": "4"},
                       cwd=REPO)
    assert p.returncode == 1, p.stderr[-3000:]
    doc = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert doc["world_size"] == 2 and doc["failed_layers"] == [4]
    assert sorted(doc["layers"]["4"]["failed_experts"]) == list(range(6))
    assert sorted({u["rank"] for u in doc["units"]}) == [0, 1]
    for i in (1, 2, 3, 4):
        shards = [u for u in doc["units"] if u["unit"]["layer"] == i and u["unit"]["kind"] == "channel"]
        assert len(shards) == 2 and sorted(e for u in shards for e in u["experts"]) == list(range(6))
        assert doc["mxfp4"][str(i)]["experts"] == 6 and doc["mxfp4"][str(i)]["nonfinite_float32"] == 0
