"""scripts/gpu-check on this CPU machine: the skip path end to end, and the comparison code of its
checks run with device "cpu" (graphs, model; fla's comparison through fla's CPU naive kernel),
each also shown to fail on a planted error."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check"
_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
torch.set_num_threads(1)  # small tensors; on a shared box threads only add contention
gpu_check = sys.modules["gpu_check"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_check)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the skip path needs a machine without CUDA")
def test_without_cuda_every_check_is_skipped_and_reported(tmp_path):
    out = tmp_path / "summary"
    run = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1 and "CUDA is absent" in lines[0]
    summary = json.loads((out / "summary.json").read_text())
    planned = gpu_check.plan()
    assert [(c["group"], c["name"]) for c in summary["checks"]] == [(c.group, c.name) for c in planned]
    assert {c.group for c in planned} == set(gpu_check.GROUPS)
    assert all(c["status"] == "skipped" and "CUDA is absent" in c["note"] for c in summary["checks"])
    assert summary["counts"] == {"passed": 0, "failed": 0, "error": 0, "skipped": len(planned)}
    assert "CUDA is absent" in summary["skipped"] and summary["passed"]
    page = (out / "index.html").read_text()
    assert "Every check skipped" in page and page.count("<td>skipped</td>") == len(planned)


def test_unknown_group_is_a_clear_error(tmp_path):
    run = subprocess.run([sys.executable, str(SCRIPT), "--only", "graphs,gpus"], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2 and "unknown group(s) gpus" in run.stderr and "Traceback" not in run.stderr


def test_graph_and_model_checks_pass_on_cpu():
    results = [gpu_check.run_check(c) for c in gpu_check.plan("cpu", ("graphs", "model"))]
    assert len(results) == len(list(gpu_check.GRAPHS.glob("*.json"))) + 1
    for r in results:
        assert r.status == "passed", (r.name, r.note)
        assert r.err is not None and r.tol is not None and 0 < r.tol < 1e-10


def test_graph_and_model_checks_fail_a_float32_device_leg():
    """The planted error: the device leg in float32 (relative errors ~1e-7, tolerances ~1e-13)."""
    for path in sorted(gpu_check.GRAPHS.glob("*.json")):
        assert any(m.err > m.tol for m in gpu_check.graph_check(path, "cpu", torch.float32)), path.name
    assert all(m.err > m.tol for m in gpu_check.model_check("cpu", torch.float32))


def test_checks_fail_a_perturbed_device_copy(monkeypatch):
    """The planted error: every device input (tensor or module weight) scaled by 1 + 1e-9."""
    real = gpu_check.to_device

    def perturbed(x, device, dtype):
        x = real(x, device, dtype)
        if isinstance(x, torch.nn.Module):
            with torch.no_grad():
                for p in x.parameters():
                    p.mul_(1 + 1e-9)
            return x
        return x * (1 + 1e-9)

    monkeypatch.setattr(gpu_check, "to_device", perturbed)
    results = [gpu_check.run_check(c) for c in gpu_check.plan("cpu", ("graphs", "model"))]
    assert {r.status for r in results} == {"failed"}


SMALL = {"B": 2, "H": 2, "K": 16, "V": 8, "P": 0, "T": 70}


@pytest.mark.parametrize("dtype", gpu_check.FLA_DTYPES)
def test_fla_comparison_passes_fla_naive_kernel_and_fails_a_one_percent_error(dtype):
    """The fla check's comparison code through difftest's CPU adapter of fla's naive recurrent
    kernel (at smaller sizes than on the GPU); the same kernel with o scaled by 1.01 fails it."""
    assert all(m.err <= m.tol for m in gpu_check.fla_check("fla-naive-recurrent", dtype, "cpu", SMALL))
    naive = gpu_check.load_impl("fla-naive-recurrent").obj

    class OnePercentOff:
        name = "one-percent-off"
        dtypes = gpu_check.FLA_DTYPES

        def kda_recurrence(self, call):
            out = naive.run(call)
            return {"o": 1.01 * out["o"], "state": out["state"]}

    measured = gpu_check.fla_check(OnePercentOff(), dtype, "cpu", SMALL)
    assert {m.output for m in measured if m.err > m.tol} == {f"{kind} o" for kind in gpu_check.FLA_KINDS}


def test_a_raising_check_is_an_error_result():
    def boom():
        raise RuntimeError("no kernel image for this device")

    r = gpu_check.run_check(gpu_check.Check("fla", "x", boom))
    assert r.status == "error" and "no kernel image" in r.note
    assert gpu_check.run_check(gpu_check.Check("fla", "y", boom, lambda: "fla not importable")).status == "skipped"
