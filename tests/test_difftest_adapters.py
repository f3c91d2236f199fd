"""Checking other implementations (difftest.adapters): the protocol and its errors, the built-in
fla and transformers Kimi Linear adapters (equivalence controls on several input kinds, and one
planted bug per adapter path, each caught and replayed), the toy example at float64, the CLI
and the pytest plugin run as a user would (README "Check your implementation")."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner
from helpers import REPO

from difftest import report, runner
from difftest.adapters import AdapterError, NotCovered, load
from difftest.cli import main
from difftest.components import COMPONENTS

EXAMPLES = REPO / "examples"
CPU_BUILTINS = ("fla-naive-recurrent", "fla-naive-chunk", "kimi-linear-recurrent", "kimi-linear-chunk")
LOWP = ["float32", "bfloat16"]


@pytest.fixture(autouse=True)
def examples_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.syspath_prepend(str(REPO / "tests"))


def evaluate(impl, component: str, kinds: tuple[str, ...], dtypes: list[str], index: int = 0) -> list:
    """The adapter's comparisons on one case of each kind (NumPy and graph references, no pybridge)."""
    comp, out = COMPONENTS[component], []
    for kind in kinds:
        r = runner.evaluate_case(comp, comp.make_case(index, kind, 0), dtypes, "cpu", None, (impl,), pybridge=False)
        assert all(c.passed for c in r.comparisons if c.impl != impl.column), "the references disagree"
        out.extend(c for c in r.comparisons if c.impl == impl.column)
    return out


# --- the protocol -------------------------------------------------------------------------------

class Partial:
    name = "partial"
    dtypes = ("float64",)
    mla = NotCovered("no attention here")

    def __init__(self, result):
        self.result = result

    def expert(self, call):
        return self.result(call)


def test_load_errors_name_the_adapter():
    with pytest.raises(AdapterError, match="'nowhere': not 'package.module:object'"):
        load("nowhere")
    with pytest.raises(AdapterError, match="cannot import 'no_such_module_k3'"):
        load("no_such_module_k3:x")
    with pytest.raises(AdapterError, match="has no attribute 'missing'"):
        load("k3_toy:missing")
    with pytest.raises(AdapterError, match="implements no component"):
        load(object())
    bad = Partial(None)
    bad.dtypes = ("float16",)
    with pytest.raises(AdapterError, match=r"'partial': unknown dtype\(s\) \['float16'\]"):
        load(bad)


def test_entry_point_group_finds_an_installed_adapter(tmp_path, monkeypatch):
    dist = tmp_path / "k3_user_impl-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: k3-user-impl\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[difftest.impls]\nmy-toy = k3_toy:adapter\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    impl = load("my-toy")
    assert impl.name == "toy" and load("k3_toy:ToyK3").covered().keys() == impl.covered().keys()
    assert impl.name == "toy" and set(impl.covered()) == {"kda_recurrence", "expert"}
    assert impl.not_covered() == {"mla": "the toy has no attention"}


@pytest.mark.parametrize("result, note", [
    (lambda call: {"out": call.tensors["x"]}, r"output\(s\) y missing \(returned: out"),
    (lambda call: {"y": call.tensors["x"], "z": call.tensors["x"]}, r"unknown output\(s\) z"),
    (lambda call: {"y": call.tensors["no_such_input"]}, "asked for input tensor 'no_such_input'"),
    (lambda call: {"y": call.tensors["x"].numpy()}, "output 'y' is ndarray, not a torch.Tensor"),
])
def test_contract_errors_fail_the_case_naming_adapter_and_tensor(result, note):
    (c,) = evaluate(load(Partial(result)), "expert", ("random",), ["float64"])
    assert not c.passed and "adapter 'partial', component 'expert'" in c.note
    assert re.search(note, c.note), c.note


def test_a_misshaped_output_fails_with_both_shapes():
    comps = evaluate(load(Partial(lambda call: {"y": call.tensors["x"][:, :3]})), "expert", ("random",), ["float64"])
    assert {c.ref for c in comps} == {"numpy", "graph"}
    for c in comps:
        assert not c.passed and c.impl == "impl:partial" and c.output == "y"
        assert c.note == "shape [3, 3] != reference shape [3, 24]"


# --- the toy example: every dtype, float64 against Lean-independent references -------------------

def test_toy_example_conforms_at_float64_and_a_swapped_cap_is_caught():
    import adapters_planted
    import k3_toy

    good = evaluate(load(k3_toy.adapter), "expert", ("random", "cap", "large"), ["float64", "float32", "bfloat16"])
    assert {c.ref for c in good if c.dtype == "float64"} == {"numpy", "graph"}
    assert all(c.passed for c in good) and max(c.err for c in good if c.dtype == "float64") > 0
    bad = evaluate(load(adapters_planted.toy_bad_cap), "expert", ("random",), ["float64"])
    assert bad and not any(c.passed for c in bad)


class PybridgeLayers:
    """pybridge's own layers wrapped as a user would wrap theirs: built from `call.config()`,
    loaded from `call.hub()` (the hub-name path of the protocol)."""

    name = "pybridge-as-user"

    @staticmethod
    def _run(module, call):
        module = module.to(call.dtype)
        module.load_state_dict(call.hub())
        xs = call.tensors["xs"]
        y, _ = module(xs, module.initial_state(xs.shape[0], xs))
        return {"y": y}

    def kda_layer(self, call):
        from pybridge.kda import KimiDeltaAttention

        return self._run(KimiDeltaAttention(call.config()), call)

    def mla(self, call):
        from pybridge.mla import GatedMLA

        return self._run(GatedMLA(call.config()), call)


@pytest.mark.parametrize("component", ["kda_layer", "mla"])
def test_hub_names_and_config_reach_a_layer_adapter(component):
    comps = evaluate(load(PybridgeLayers()), component, ("random",), ["float64", "bfloat16"])
    assert {c.ref for c in comps if c.dtype == "float64"} >= {"numpy", "graph"}
    assert all(c.passed for c in comps) and {c.dtype for c in comps} == {"float64", "bfloat16"}


# --- the built-in adapters ------------------------------------------------------------------------

@pytest.mark.parametrize("name", CPU_BUILTINS)
def test_builtin_adapter_agrees_with_the_spec(name):
    """Equivalence control: every adapter comparison passes, at both low precisions, on kinds
    that stress chunk boundaries (P + T = 25 and 1), decay ends and magnitudes; each measured
    error is nonzero (the adapter really ran) and its tolerance fails a 1 % scale error."""
    impl = load(name)
    comps = evaluate(impl, "kda_recurrence", ("random", "decay", "large", "short"), LOWP)
    assert len(comps) == 4 * 2 * 2
    failed = [(c.kind, c.dtype, c.output, c.err, c.tol) for c in comps if not c.passed]
    assert not failed
    assert all(c.err > 0 and c.tol < 1e-2 for c in comps if c.output == "o")


def test_fla_gpu_kernels_declare_themselves_not_covered_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("CUDA present: the GPU kernels are covered")
    for name in ("fla-fused-recurrent", "fla-chunk"):
        assert "needs CUDA" in load(name).not_covered()["kda_recurrence"]


@pytest.mark.parametrize("factory, failing", [
    ("fla_default_scale", ["o"]),  # fla's default readout scale K^-1/2: the state is unaffected
    ("fla_shifted_decay", ["o", "state"]),
    ("kimi_unscaled", ["o"]),  # Kimi Linear's hard-coded K^-1/2 left uncompensated
    ("kimi_shifted_decay", ["o", "state"]),
])
def test_planted_bug_in_each_builtin_adapter_path_is_caught(factory, failing):
    impl = load(f"adapters_planted:{factory}")
    comps = evaluate(impl, "kda_recurrence", ("random",), ["float32"])
    assert [c.output for c in comps if not c.passed] == failing
    assert all(c.ratio > 1e4 for c in comps if not c.passed)  # by far, not at the margin


def test_planted_bug_reproducer_replays(tmp_path):
    """A transformers kernel fed the decay one token late: the run fails, shrinks, and the
    summary's reproducer replays (the adapter reloaded from its spec) and still fails."""
    spec = "adapters_planted:kimi_shifted_decay"
    result = runner.run(["kda_recurrence"], 1, 0, ["float32"], "cpu", use_lean=False, adapters=(load(spec),),
                        pybridge=False)
    assert not result.passed and result.shrunk
    json_path, html_path = report.write(result, tmp_path)
    doc = json.loads(json_path.read_text())
    column = doc["adapters"]["impl:kimi-linear-chunk-shifted-decay"]["kda_recurrence"]
    assert column["failed"] == 2 and column["worst_ratio"]["float32"] > 1e4
    assert "impl:kimi-linear-chunk-shifted-decay" in doc["components"]["kda_recurrence"]["implementations"]
    assert "Implementations under test" in html_path.read_text()
    (failure,) = doc["failures"]
    assert failure["reproducer"]["impls"] == [spec]
    replayed = runner.replay(failure["reproducer"])
    assert not replayed.passed and {c.impl for c in replayed.failures()} == {"impl:kimi-linear-chunk-shifted-decay"}
    ok = runner.replay(failure["reproducer"], adapters=(load("kimi-linear-chunk"),))
    assert ok.passed
    cli = CliRunner().invoke(main, ["replay", str(json_path)])
    assert cli.exit_code == 1 and "replayed 1 failure(s): 1 still fail" in cli.output
    assert CliRunner().invoke(main, ["replay", str(json_path), "--impl", "kimi-linear-chunk"]).exit_code == 0


# --- CLI and pytest plugin --------------------------------------------------------------------------

def test_cli_list_impl_shows_covered_and_not_covered_with_reasons():
    out = CliRunner().invoke(main, ["list", "--impl", "kimi-linear-recurrent"])
    assert out.exit_code == 0, out.output
    assert "kda_recurrence  implemented: returns o, state" in out.output
    assert "mla             not covered: Kimi Linear's MLA has no output gate" in out.output
    assert "dtypes: float32, bfloat16" in out.output
    bad = CliRunner().invoke(main, ["run", "--no-lean", "--impl", "k3_toy:missing"])
    assert bad.exit_code == 2 and "has no attribute 'missing'" in bad.output
    bad = CliRunner().invoke(main, ["run", "--no-lean", "--impl", "fla-naive-chunk", "--dtype", "float64"])
    assert bad.exit_code == 2 and "fla-naive-chunk runs at float32, bfloat16 only" in bad.output


def test_cli_run_impl_green_on_the_toy():
    out = CliRunner().invoke(main, ["run", "--no-lean", "--no-pybridge", "--impl", "k3_toy:adapter", "--cases", "1"])
    assert out.exit_code == 0, out.output
    assert "difftest PASSED: 2 case(s)" in out.output  # kda_recurrence and expert, the toy's components


def pytest_in_subprocess(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(EXAMPLES), str(REPO / "tests")])}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "difftest.pytest_plugin", "-p", "no:cacheprovider",
                           "--rootdir", str(EXAMPLES), "-c", os.devnull, *args],
                          cwd=EXAMPLES, env=env, capture_output=True, text=True, timeout=300)


def test_pytest_plugin_example_passes_and_a_wrong_impl_fails_with_its_reproducer():
    """The README's example test file and `--k3-impl`, run by pytest as in a user's CI (one
    process): the example's two tests and the toy's two components pass; of the wrong toy's
    components, its (correct) kda_recurrence passes and its expert fails with the verdict."""
    run = pytest_in_subprocess("test_k3_toy.py", "--k3-impl", "k3_toy:adapter", "--k3-impl", "adapters_planted:toy_bad_cap",
                               "--k3-cases", "1", "--k3-dtype", "float64")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 5 passed" in run.stdout, run.stdout
    assert "FAILED ::k3spec[toy-bad-cap-expert]" in run.stdout
    assert "toy-bad-cap does not conform to the K3 spec on expert: 1 of 1 case(s) fail" in run.stdout
    assert "shrunk to expert#0" in run.stdout and "reproducers (shrunk):" in run.stdout
    assert "replay: python3 -m difftest replay" in run.stdout
