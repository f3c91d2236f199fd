"""difftest without Lean: tolerances, error measures, the Lean file generator, graph vs torch
runs of every component, shrinking, reports and the CLI's errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from difftest import lean, runner
from difftest.case import from_hex_bits, hex_bits
from difftest.cli import main
from difftest.compare import ErrorModel, gamma, gamma_prob, measure, tolerance
from difftest.components import COMPONENTS
from pybridge import kda


def test_gamma_bounds() -> None:
    u = 2.0**-53
    assert gamma(10, u) == pytest.approx(10 * u, rel=1e-12)
    assert gamma(2**9, 2.0**-8) == math.inf  # worst case is vacuous at bfloat16
    # Higham–Mary: λ √n u to first order
    assert gamma_prob(100, 2.0**-24) == pytest.approx(5 * 10 * 2.0**-24, rel=1e-5)


def test_tolerance_formula() -> None:
    m = ErrorModel(stores=10, accum=30, amp=2.0)
    assert tolerance(m, "float64") == pytest.approx(2 * 2 * 2 * 40 * 2.0**-53, rel=1e-9)
    assert tolerance(m, "bfloat16") == pytest.approx(
        2 * 2 * (math.exp(5 * math.sqrt(10) * 2.0**-8 + 10 * 2.0**-16 / (1 - 2.0**-8)) - 1
                 + math.exp(5 * math.sqrt(30) * 2.0**-24 + 30 * 2.0**-48 / (1 - 2.0**-24)) - 1), rel=1e-9)


def test_measure_is_normwise_and_never_passes_nan() -> None:
    want = np.array([1.0, -4.0, 2.0])
    rel, abs_err, idx, note = measure(np.array([1.0, -4.0, 2.5]), want)
    assert (rel, abs_err, idx, note) == (0.125, 0.5, (2,), "")
    rel, _, idx, note = measure(np.array([1.0, np.nan, 2.0]), want)
    assert rel == math.inf and idx == (1,) and "NaN" in note
    rel, _, _, note = measure(np.array([0.0, 0.0]), want)
    assert rel == math.inf and "shape" in note
    assert measure(np.zeros(3), np.zeros(3))[0] == 0.0


def test_hex_bits_round_trip_exactly() -> None:
    x = np.array([[0.1, -3.5e-300], [np.pi, 1e308]])
    assert hex_bits(np.array(1.0)) == "3ff0000000000000"
    assert np.array_equal(from_hex_bits(hex_bits(x), [2, 2]), x)


def test_lean_file_has_bundle_decoder_and_one_eval_per_case() -> None:
    items = runner.build_cases(["expert", "attnres"], 2, seed=0)
    source = lean.render_batch(items, ("KimiK3.Channel.Expert", "KimiK3.Depth.Kernel"))
    assert "def decode (s : String)" in source
    assert "structure BlockState" in source and "structure Expert" in source  # bundled, not imported
    assert "import " not in source.split("namespace KimiK3.DiffTest")[1]
    assert source.count('emit "C') == 4
    _, case = items[0]
    assert hex_bits(case.tensors["G"]) in source  # inputs travel as exact bits


def test_lean_output_parsing_uses_exact_bits() -> None:
    comp, case = runner.build_cases(["expert"], 1, seed=0)[0]
    y = np.linspace(-1, 1, case.sizes["d"]) / 3
    bits = np.frombuffer(y.astype("<f8").tobytes(), dtype="<u8").tolist()
    line = json.dumps({"case": "C0", "outputs": {"y": bits}})
    (out,) = lean.parse_output([line + "\n"], [(comp, case)])
    assert np.array_equal(out["y"], y)
    with pytest.raises(lean.LeanEvaluationError, match="no result"):
        lean.parse_output([], [(comp, case)])


def test_every_component_graph_and_torch_agree_without_lean() -> None:
    result = runner.run(list(COMPONENTS), cases=4, seed=5, use_lean=False, shrink=False)
    assert result.passed, [c for r in result.results for c in r.failures()]
    kinds = {(r.component, r.case.kind) for r in result.results}
    assert ("latent_moe", "tie") in kinds and ("kda_recurrence", "long") in kinds
    compared = {(c.component, c.impl, c.ref) for r in result.results for c in r.comparisons}
    assert ("expert", "torch", "graph") in compared and ("kda_recurrence", "torch", "graph") in compared
    assert ("mla", "torch_decode", "torch") in compared  # prefill vs decode
    low = {(c.component, c.dtype) for r in result.results for c in r.comparisons}
    assert ("attnres", "bfloat16") in low and ("mla", "float32") in low


def test_tie_case_routes_by_lowest_index() -> None:
    comp = COMPONENTS["latent_moe"]
    case = comp.make_case(2, "tie", seed=0)
    scores = comp.adjusted_scores(case)
    tied = [1, 3, 4]
    assert scores[1] == scores[3] == scores[4] and scores[1] == scores.max()
    out = comp.torch_outputs(case, torch.float64, "cpu")["torch"]
    assert out["route"].tolist() == [1.0, 3.0]  # three equal scores, two slots: lowest indices
    assert comp.graph_outputs(case, torch.float64, "cpu")["route"].tolist() == [1.0, 3.0]
    assert set(tied) > {1, 3}


def _read_before_update(q, k, v, g, beta, scale, state=None):
    """kda_recurrent with the read moved before the update (a known bug)."""
    B, T, H, K = q.shape
    S = q.new_zeros(B, H, K, v.shape[-1]) if state is None else state
    outs = []
    for t in range(T):
        outs.append(scale * torch.einsum("bhk,bhkv->bhv", q[:, t], S))
        decayed = S * g[:, t].exp()[..., None]
        corr = torch.einsum("bhk,bhkv->bhv", k[:, t], decayed)
        S = decayed + beta[:, t, :, None, None] * k[:, t, ..., None] * (v[:, t] - corr)[:, :, None, :]
    return torch.stack(outs, dim=1), S


def test_failure_is_shrunk_reported_and_reproducible(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(kda, "kda_recurrent", _read_before_update)
    result = runner.run(["kda_recurrence"], cases=1, seed=0, dtypes=["float64"], use_lean=False)
    assert not result.passed
    shrunk = result.shrunk[("kda_recurrence", 0)]
    assert shrunk.case.sizes["T"] == 1 and shrunk.case.simplify == 2  # smallest length, simplest values
    failing = shrunk.failures()[0]
    assert (failing.impl, failing.ref) == ("torch_recurrent", "graph")
    from difftest import report

    text = report.diff_text(result.results[0], shrunk)
    assert "worst |error|" in text and "at index" in text and "graph" in text and "torch" in text
    json_path, html_path = report.write(result, tmp_path)
    doc = json.loads(json_path.read_text())
    assert doc["passed"] is False
    repro = doc["failures"][0]["reproducer"]
    assert repro["seed"] == 0 and repro["sizes"]["T"] == 1
    state = from_hex_bits(repro["tensors"]["state"]["float64_hex"], repro["tensors"]["state"]["shape"])
    assert np.array_equal(state, shrunk.case.tensors["state"])
    assert "<svg" in html_path.read_text()


def test_cli_rejects_bad_options() -> None:
    cli = CliRunner()
    r = cli.invoke(main, ["run", "--component", "nope"])
    assert r.exit_code == 2 and "unknown component 'nope'" in r.output
    r = cli.invoke(main, ["run", "--dtype", "float16"])
    assert r.exit_code == 2 and "float16" in r.output
    r = cli.invoke(main, ["run", "--device", "tpu"])
    assert r.exit_code == 2 and "cpu or cuda" in r.output
    r = cli.invoke(main, ["run", "--cases", "0"])
    assert r.exit_code == 2


def test_cli_run_without_lean_writes_report(tmp_path) -> None:
    r = CliRunner().invoke(main, ["run", "--component", "expert", "--cases", "2", "--no-lean", "--report", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "difftest PASSED" in r.output
    assert json.loads((tmp_path / "summary.json").read_text())["components"]["expert"]["cases"] == 2


def test_cli_list_names_every_component() -> None:
    r = CliRunner().invoke(main, ["list"])
    assert r.exit_code == 0 and all(name in r.output for name in COMPONENTS)


def test_decoder_step_has_no_lean_path_even_with_lean_all() -> None:
    """`decoder_step` has no Lean template: `--lean-all` leaves it to the graph (no Lean process)."""
    result = runner.run(["decoder_step"], cases=1, seed=0, dtypes=["float64"], use_lean=True, lean_all=True, shrink=False)
    assert result.passed and result.lean_record["ran"] == 0 and result.lean_record["cached"] == 0
    compared = {(c.impl, c.ref) for c in result.results[0].comparisons}
    assert compared == {("torch", "graph")}
    routes = [c for c in result.results[0].comparisons if c.output.endswith(".route")]
    assert len(routes) == 4 and all(c.tol == 0.0 for c in routes)  # MoE layers 2-5, exact
    r = CliRunner().invoke(main, ["list"])
    assert "decoder_step" in r.output and "Lean: none" in r.output
