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
from difftest.compare import ErrorModel, gamma, measure, tolerance
from difftest.components import COMPONENTS
from pybridge import kda


def test_gamma_bounds() -> None:
    u = 2.0**-53
    assert gamma(10, u) == pytest.approx(10 * u, rel=1e-12)
    assert gamma(2**9, 2.0**-8) == math.inf  # worst case is vacuous at bfloat16


def test_tolerance_formula() -> None:
    """docs/tolerances.md written out by hand: float64 worst case; low precision one output
    store at the storage unit roundoff plus √n float32 roundings, times SAFETY and amp."""
    m = ErrorModel(stores=10, accum=30, amp=2.0)
    assert tolerance(m, "float64") == pytest.approx(2 * 2 * 2 * 40 * 2.0**-53, rel=1e-9)
    assert tolerance(m, "bfloat16") == pytest.approx(2.0**-8 + 2 * 2 * 2.0**-24 * math.sqrt(40), rel=1e-12)
    assert tolerance(m, "float32") == pytest.approx(2.0**-24 + 2 * 2 * 2.0**-24 * math.sqrt(40), rel=1e-12)
    two = ErrorModel(stores=10, accum=30, amp=2.0, out_stores=2)  # a mid-chain store is amplified
    assert tolerance(two, "bfloat16") == pytest.approx(3 * 2.0**-8 + 2 * 2 * 2.0**-24 * math.sqrt(40), rel=1e-12)
    kept = ErrorModel(stores=10, accum=30, amp=2.0, out_stores=0)  # a state kept in float32
    assert tolerance(kept, "bfloat16") == pytest.approx(2 * 2 * 2.0**-24 * math.sqrt(40), rel=1e-12)


@pytest.mark.parametrize("name", list(COMPONENTS))
def test_low_precision_tolerances_fail_zero_and_one_percent_scale(name: str) -> None:
    """Every bfloat16 stage tolerance stays below the error of a 1 % scale error (and so of an
    all-zero output) in the relative 2-norm: 0.01 − u_bf16 (the scaled output's own rounding)."""
    comp = COMPONENTS[name]
    case = comp.make_case(0, next(iter(comp.kinds)), seed=0)
    for chk in comp.lowp_checks(case, torch.bfloat16, "cpu"):
        if not chk.exact:
            tol = tolerance(chk.model, "bfloat16")
            assert tol < 0.01 - 2.0**-8, (chk.impl, chk.output, tol)
            assert measure(np.zeros_like(chk.want), chk.want, "l2")[0] > tol
            scaled = torch.from_numpy(1.01 * chk.want).to(torch.bfloat16).double().numpy()
            assert measure(scaled, chk.want, "l2")[0] > tol, (chk.impl, chk.output)


def test_measure_is_normwise_and_never_passes_nan() -> None:
    want = np.array([1.0, -4.0, 2.0])
    rel, abs_err, idx, note = measure(np.array([1.0, -4.0, 2.5]), want)
    assert (rel, abs_err, idx, note) == (0.125, 0.5, (2,), "")
    assert measure(np.array([1.0, -4.0, 2.5]), want, "l2")[0] == pytest.approx(0.5 / math.sqrt(21), rel=1e-15)
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
    items = [(comp, view) for _, comp, view in runner.lean_chosen(runner.build_cases(["expert", "attnres"], 2, seed=0), None, True)]
    source = lean.render_batch(items, ("KimiK3.Exec.Kernel",))
    assert "def decode (s : String)" in source
    assert "structure BlockState" in source and "structure Expert" in source  # bundled, not imported
    assert "import " not in source.split("namespace KimiK3.DiffTest")[1]
    assert source.count('emit "C') == 4
    _, case = items[0]
    assert hex_bits(case.tensors["gateWeight"]) in source  # inputs travel as exact bits
    assert lean.render_body(items[0][0], case, "C0").count("(Float.ofBits 4616189618054758400)") == 1  # c_g = 4 from the config


def test_lean_cache_key_covers_the_configuration_values(monkeypatch) -> None:
    """A configuration value the Lean leg passes in (here the SiTU gate cap) is part of the
    case's cache key: a changed configuration file never reuses a stale Lean result."""
    comp, case = runner.build_cases(["expert"], 1, seed=0)[0]
    view = comp.lean_case(case)
    before = lean.case_key(comp, view, "h")
    assert lean.case_key(comp, view, "h") == before
    config = comp.lean_config()
    monkeypatch.setattr(type(comp), "lean_config", lambda self: {**config, "gate_cap": config["gate_cap"] + 1})
    assert lean.case_key(comp, view, "h") != before


def test_lean_cache_key_of_a_case_does_not_depend_on_the_other_components_of_the_run() -> None:
    """A case's key covers its own component's modules: an `expert` case run alone reuses the
    result of the same case run beside `decoder_step` (whose Lean modules differ)."""
    (comp, case), = runner.build_cases(["expert"], 1, seed=0)
    (dcomp, dcase), = runner.build_cases(["decoder_step"], 1, seed=0)
    assert tuple(dcomp.lean_targets) != tuple(comp.lean_targets)
    item = (comp, comp.lean_case(case))
    alone, = lean.item_keys([item])
    beside, _ = lean.item_keys([item, (dcomp, dcomp.lean_case(dcase))])
    assert alone == beside


def test_lean_output_parsing_uses_exact_bits() -> None:
    comp, case = runner.build_cases(["expert"], 1, seed=0)[0]
    case = comp.lean_case(case)
    y = np.linspace(-1, 1, case.sizes["d"]) / 3
    bits = np.frombuffer(y.astype("<f8").tobytes(), dtype="<u8").tolist()
    line = json.dumps({"case": "C0", "outputs": {"y": bits}})
    (out,) = lean.parse_output([line + "\n"], [(comp, case)])
    assert np.array_equal(out["y"], y)
    with pytest.raises(lean.LeanEvaluationError, match="no result"):
        lean.parse_output([], [(comp, case)])


@pytest.mark.slow
def test_the_default_run_passes_and_covers_every_kind() -> None:
    result = runner.run(list(COMPONENTS), seed=0, use_lean=False, shrink=False)
    assert result.passed, [c for r in result.results for c in r.failures()]
    kinds = {(r.component, r.case.kind) for r in result.results}
    assert kinds == {(name, kind) for name, comp in COMPONENTS.items() for kind in comp.kinds}
    compared = {(c.component, c.impl, c.ref) for r in result.results for c in r.comparisons}
    assert ("expert", "torch", "graph") in compared and ("kda_recurrence", "torch", "graph") in compared
    assert ("mla", "torch_decode", "torch") in compared and ("kda_layer", "torch_split", "numpy") in compared
    low = {(c.component, c.dtype, c.ref) for r in result.results for c in r.comparisons if c.dtype != "float64"}
    assert {ref for _, _, ref in low} == {"numpy"}  # never the torch model under test
    assert ("attnres", "bfloat16", "numpy") in low and ("decoder_step", "float32", "numpy") in low
    info = [r.info for r in result.results if r.component == "decoder_step"]
    assert all(0 <= i["bfloat16"]["top1_agreement"] <= 1 and i["bfloat16"]["logit_kl"] >= 0 for i in info)


def test_every_component_agrees_on_its_first_cases() -> None:
    """The fast loop's version of the default run: the first two kinds of every component."""
    result = runner.run(list(COMPONENTS), cases=2, seed=5, use_lean=False, shrink=False)
    assert result.passed, [c for r in result.results for c in r.failures()]
    batch = {r.component: r.case.sizes.get("B", r.case.sizes.get("N")) for r in result.results}
    assert all(b > 1 for b in batch.values()), batch  # every component runs several rows


def test_tie_case_routes_by_lowest_index() -> None:
    comp = COMPONENTS["latent_moe"]
    case = comp.make_case(1, "tie", seed=0)
    assert case.kind == "tie"
    rows = comp.numpy_rows(case)
    tied_rows = [i for i, (_, route, adjusted) in enumerate(rows)
                 if adjusted[1] == adjusted[3] == adjusted[4] and adjusted[1] >= sorted(adjusted)[-2]]
    assert tied_rows  # the three tied experts hold the top scores of some token
    out = comp.torch_outputs(case, torch.float64, "cpu")["torch"]
    for i in tied_rows:
        assert out["route"][i].tolist() == [1.0, 3.0]  # three equal scores, two slots: lowest indices
        assert comp.graph_outputs(case, "cpu")["route"][i].tolist() == [1.0, 3.0]


def test_near_tie_is_made_through_the_bias() -> None:
    comp = COMPONENTS["latent_moe"]
    case = comp.make_case(2, "near_tie", seed=0)
    _, route, adjusted = comp.numpy_rows(case)[0]
    order = sorted(range(len(adjusted)), key=lambda e: -adjusted[e])
    a, b = order[1], order[2]
    raw = adjusted - case.tensors["router.bias"]
    assert 0 < adjusted[a] - adjusted[b] < 2e-9 and abs(raw[a] - raw[b]) > 1e-6


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
    assert (shrunk.case.sizes["B"], shrunk.case.sizes["P"], shrunk.case.sizes["T"]) == (1, 0, 1)  # smallest sizes
    assert shrunk.case.simplify == 2  # simplest values
    failing = shrunk.failures()[0]
    assert (failing.impl, failing.ref) == ("torch_recurrent", "numpy")
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


def test_cli_list_names_every_component_kind_and_reference() -> None:
    r = CliRunner().invoke(main, ["list"])
    assert r.exit_code == 0 and all(name in r.output for name in COMPONENTS)
    for comp in COMPONENTS.values():
        assert all(f"kind {kind} " in r.output for kind in comp.kinds), comp.name
        assert comp.references(), f"{comp.name} has only torch paths"
    assert "references: lean, graph, numpy; graph: decoder_step_tiny.json; Lean: default run" in r.output


def test_a_component_with_only_torch_paths_says_so(monkeypatch) -> None:
    comp = COMPONENTS["expert"]
    monkeypatch.setattr(type(comp), "template", "")
    monkeypatch.setattr(type(comp), "graph_file", None)
    monkeypatch.setattr(type(comp), "numpy_outputs", runner.Component.numpy_outputs)
    r = CliRunner().invoke(main, ["list"])
    assert "references: none: torch paths only" in r.output


def test_decoder_step_without_lean_compares_graph_numpy_torch() -> None:
    """`--no-lean`: the graph and NumPy legs are `decoder_step`'s references (its Lean leg, in
    the default run: tests/test_difftest_decoder.py)."""
    result = runner.run(["decoder_step"], cases=1, seed=0, dtypes=["float64"], use_lean=False, shrink=False)
    assert result.passed and result.lean_record["ran"] == 0 and result.lean_record["cached"] == 0
    compared = {(c.impl, c.ref) for c in result.results[0].comparisons}
    assert compared == {("graph", "numpy"), ("torch", "numpy"), ("torch", "graph")}
    routes = [c for c in result.results[0].comparisons if c.output.endswith(".route")]
    assert len(routes) == 3 * 4 and all(c.tol == 0.0 for c in routes)  # MoE layers 2-5, exact, per leg pair


def test_shrinking_keeps_the_new_kinds(monkeypatch) -> None:
    """A bug only exact ties show (the tie rule reversed) shrinks to one token of the `tie` kind."""
    from pybridge import moe

    def highest_index(adjusted_ne, k):
        flipped = torch.sort(adjusted_ne.flip(-1), dim=-1, descending=True, stable=True).indices[:, :k]
        return adjusted_ne.shape[-1] - 1 - flipped

    monkeypatch.setattr(moe, "select_top_k", highest_index)
    result = runner.run(["latent_moe"], cases=2, seed=0, dtypes=["float64"], use_lean=False)
    failed = [r for r in result.results if not r.passed]
    assert [r.case.kind for r in failed] == ["tie"]
    shrunk = result.shrunk[("latent_moe", failed[0].case.index)]
    assert shrunk.case.kind == "tie" and shrunk.case.sizes["N"] == 1 and not shrunk.passed


def test_reproducer_in_summary_replays_the_failure_exactly(monkeypatch, tmp_path) -> None:
    """The reproducer of summary.json rebuilds the shrunk case bit for bit, and replaying it gives
    the same failing comparisons with the same errors (also through `difftest replay`)."""
    monkeypatch.setattr(kda, "kda_recurrent", _read_before_update)
    result = runner.run(["kda_layer"], cases=1, seed=0, dtypes=["float64", "bfloat16"], use_lean=False)
    from difftest import report

    json_path, _ = report.write(result, tmp_path)
    doc = json.loads(json_path.read_text())
    repro = doc["failures"][0]["reproducer"]
    shrunk = result.shrunk[("kda_layer", 0)]
    case = runner.Case.from_reproducer(repro)
    assert case.digest() == shrunk.case.digest() and case.label == shrunk.case.label
    replayed = runner.replay(repro)
    key = lambda c: (c.dtype, c.impl, c.ref, c.output)  # noqa: E731
    assert {key(c): c.err for c in replayed.failures()} == {key(c): c.err for c in shrunk.failures()}
    r = CliRunner().invoke(main, ["replay", str(json_path)])
    assert r.exit_code == 1 and "1 still fail" in r.output
