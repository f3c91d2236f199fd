"""`difftest run --impl kimi-linear`: transformers 5.23's Kimi Linear KDA layer, MLA attention, MoE
block and whole tiny model against the Kimi Linear variant (pybridge's, the spec leg; here without
the layers' Lean leg, `--no-lean`: tests/test_kimi_linear_difftest_lean.py runs it; the whole model
has none, and the summary says so). A planted bug in a copy of transformers' layer is caught, shrunk,
and its reproducer replays (`tests/kimi_linear_planted.py`)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers import REPO

from difftest import report, runner
from difftest.adapters import load
from difftest.adapters.conform import conforms
from difftest.cli import main

VARIANT = ["kimi_linear_kda", "kimi_linear_mla", "kimi_linear_moe", "kimi_linear_model"]


@pytest.fixture(autouse=True)
def planted_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "tests"))


def test_cli_run_impl_kimi_linear_is_green(tmp_path):
    out = CliRunner().invoke(main, ["run", "--impl", "kimi-linear", "--no-lean", "--report", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "difftest PASSED: 9 case(s)" in out.output
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert set(doc["adapters"]["impl:kimi-linear"]) == set(VARIANT)
    for name in VARIANT:
        comp = doc["components"][name]
        assert comp["failed_cases"] == 0 and "impl:kimi-linear" in comp["implementations"] and "pybridge" in comp["implementations"]
        assert comp["lean"]["evaluated"] == 0 and set(comp["lean"]["skipped"]) == {runner.NO_LEAN}
        assert comp["worst_ratio"]["float64"] < 0.1  # well inside tol64, which is ~1e-12 here
    mine = [c for c in doc["comparisons"] if c["impl"] == "impl:kimi-linear" and c["dtype"] == "float64"]
    assert {c["component"] for c in mine if c["ref"] == "pybridge"} == set(VARIANT)
    assert all(c["passed"] and c["err"] < 5e-14 and c["tol"] < 1e-11 for c in mine)  # measured: err <= 7.6e-15
    f32 = [c for c in doc["comparisons"] if c["impl"] == "impl:kimi-linear" and c["dtype"] == "float32"]
    assert {c["component"] for c in f32} == set(VARIANT[:3]) and {c["ref"] for c in f32} == {"pybridge"}
    assert all(c["passed"] and c["err"] < 5e-6 and c["tol"] < 2e-5 for c in f32)  # measured: err <= 1.2e-6, tol 4e-6 to 1.2e-5
    assert not any(c["dtype"] == "bfloat16" and c["impl"] == "impl:kimi-linear" for c in doc["comparisons"])
    # pybridge's own low-precision path has no independent reference here: not checked against itself
    assert not any(c["impl"] == "pybridge" and c["dtype"] != "float64" for c in doc["comparisons"])


def test_no_pybridge_keeps_the_variant_spec_leg_and_no_lean_says_so():
    result = runner.run(["kimi_linear_mla"], 1, 0, ["float64"], "cpu", use_lean=False, adapters=(load("kimi-linear"),),
                        pybridge=False, shrink=False)
    assert result.passed
    pairs = {(c.impl, c.ref) for r in result.results for c in r.comparisons}
    assert ("impl:kimi-linear", "pybridge") in pairs
    assert result.lean_record["components"]["kimi_linear_mla"]["skipped"] == {runner.NO_LEAN: 1}
    model = runner.run(["kimi_linear_model"], 1, 0, ["float64"], "cpu", use_lean=False, shrink=False)
    assert model.lean_record["components"]["kimi_linear_model"]["skipped"] == {runner.NO_LEAN: 1}


def test_list_impl_shows_the_variant_components_and_k3_not_covered():
    out = CliRunner().invoke(main, ["list", "--impl", "kimi-linear"])
    assert out.exit_code == 0, out.output
    assert "dtypes: float64, float32" in out.output
    assert "kimi_linear_model implemented (float64 only: the whole model" in out.output
    for name in VARIANT[:3]:
        assert f"{name:15} implemented: returns y" in out.output
    assert "mla             not covered: Kimi Linear's MLA has no output gate" in out.output
    assert "checked as the Kimi Linear variant" in out.output
    listing = CliRunner().invoke(main, ["list"]).output
    assert "kimi_linear_kda" in listing and "pybridge variant (the spec leg), lean (Exec.KimiLinear)" in listing


def test_conforms_passes_and_a_planted_shifted_conv_fails_with_a_replayable_reproducer(tmp_path):
    conforms("kimi_linear_kda", "kimi-linear", dtype="float64")
    spec = "kimi_linear_planted:kimi_shifted_conv"
    result = runner.run(["kimi_linear_kda", "kimi_linear_model"], 1, 0, ["float64"], "cpu", use_lean=False,
                        adapters=(load(spec),))
    assert not result.passed and result.shrunk
    bad = [c for r in result.results for c in r.failures()]
    assert {c.component for c in bad} == {"kimi_linear_kda", "kimi_linear_model"}
    assert all(c.impl == "impl:kimi-linear-shifted-conv" and c.ratio > 1e6 for c in bad)  # by far, not at the margin
    json_path, _ = report.write(result, tmp_path)
    failures = json.loads(json_path.read_text())["failures"]
    kda = next(f for f in failures if f["reproducer"]["component"] == "kimi_linear_kda")
    assert kda["reproducer"]["impls"] == [spec]
    assert not runner.replay(kda["reproducer"]).passed
    assert runner.replay(kda["reproducer"], adapters=(load("kimi-linear"),)).passed
    with pytest.raises(AssertionError, match="does not conform"):
        conforms("kimi_linear_kda", spec, dtype="float64", report_dir=tmp_path / "c")


@pytest.mark.parametrize("factory, component", [("kimi_no_dt_bias", "kimi_linear_kda"),
                                                ("kimi_no_routed_scaling", "kimi_linear_moe")])
def test_other_planted_bugs_are_caught(factory, component):
    result = runner.run([component], 1, 0, ["float64"], "cpu", use_lean=False,
                        adapters=(load(f"kimi_linear_planted:{factory}"),), shrink=False)
    bad = [c for r in result.results for c in r.failures()]
    assert bad and all(c.ratio > 1e6 for c in bad)


def test_difftest_checkpoint_checks_a_transformers_written_kimi_linear_checkpoint_layer_by_layer(tmp_path):
    """A bfloat16 checkpoint written by transformers' own `save_pretrained` (hub names; its dense
    MLP as `block_sparse_moe.*`): every layer's mixer and channel stage agree with transformers'
    layers; a planted shifted conv fails exactly the KDA stages; a missing tensor is named."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import KimiLinearForCausalLM as HFModel

    from difftest.adapters.kimi_linear import hf_config
    from difftest.components.kimi_linear import TINY
    from pybridge import adapter
    from pybridge.checkpoint import random_model
    from pybridge.config import config_from_dict

    pb = random_model(config_from_dict(TINY), 3)
    hf_model = HFModel(hf_config(TINY))
    hf_model.load_state_dict(adapter.kimi_linear_to_transformers(pb.state_dict()))
    ckpt = tmp_path / "ckpt"
    hf_model.to(torch.bfloat16).save_pretrained(ckpt)
    ok = CliRunner().invoke(main, ["checkpoint", "--checkpoint", str(ckpt), "--impl", "kimi-linear",
                                   "--report", str(tmp_path / "rep")])
    assert ok.exit_code == 0, ok.output
    doc = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert doc["variant"] == "kimi_linear" and "no Lean" in doc["lean"] and len(doc["stages"]) == 8
    impl_rows = [c for s in doc["stages"] for c in s["comparisons"] if c["impl"] == "impl:kimi-linear"]
    assert {c["component"] for c in impl_rows} == {"kimi_linear_kda", "kimi_linear_mla", "kimi_linear_moe"}
    bad = CliRunner().invoke(main, ["checkpoint", "--checkpoint", str(ckpt), "--impl", "kimi_linear_planted:kimi_shifted_conv"])
    assert bad.exit_code == 1
    failed = [line.split(":")[0].strip() for line in bad.output.splitlines() if ": FAIL" in line]
    assert failed == ["layer 0 attn (self_attn)", "layer 1 attn (self_attn)", "layer 3 attn (self_attn)"]  # the KDA layers
    state = load_file(str(ckpt / "model.safetensors"))
    del state["model.layers.1.self_attn.dt_bias"]
    save_file(state, str(ckpt / "model.safetensors"))
    missing = CliRunner().invoke(main, ["checkpoint", "--checkpoint", str(ckpt), "--layers", "0-1"])
    assert missing.exit_code == 1 and "no tensor 'model.layers.1.self_attn.dt_bias'" in missing.output
    assert "layer 1 channel (block_sparse_moe): ok" in missing.output  # the other stages go on


def test_a_planted_bug_in_transformers_float32_code_is_caught_at_float32():
    result = runner.run(["kimi_linear_kda"], 1, 0, ["float32"], "cpu", use_lean=False,
                        adapters=(load("kimi_linear_planted:kimi_shifted_conv_f32"),), shrink=False)
    bad = [c for r in result.results for c in r.failures()]
    assert bad and all(c.dtype == "float32" and c.ref == "pybridge" and c.ratio > 1e4 for c in bad)
