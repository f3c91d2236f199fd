"""difftest's `decoder_step`: its Lean leg (the executable language model, rendered without
Lean here), a swapped parameter binding in the exported step graph caught by the comparison,
and the Lean case counts of the summary and the HTML report (the Lean runner replaced: no
Lean process)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from difftest import cli, lean, report, runner
from difftest.components import COMPONENTS
from difftest.components import decoder as decoder_mod
from difftest.config import GRAPHS
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph

DECODER = COMPONENTS["decoder_step"]


def lean_view():
    return DECODER.lean_case(DECODER.make_case(0, "random", seed=0))


# ---------------------------------------------------------------- the Lean leg, rendered

def test_decoder_step_default_lean_run_has_random_and_tie_without_long() -> None:
    items = runner.build_cases(["decoder_step"], None, seed=0)
    assert [c.kind for _, c in items] == ["random", "tie", "long"]
    plan = runner.lean_plan(items, 2, lean_all=False)
    assert plan[0][0] is not None and plan[1][0] is not None and plan[2] == (None, runner.KIND_SKIPPED)
    assert runner.lean_plan(items, None, lean_all=True)[2][0] is not None  # --lean-all evaluates it


def test_lean_view_holds_the_spec_parameters_of_the_seeded_model() -> None:
    """The view's tensors are the NumPy leg's spec parameters (its `Decoder.p`), stacked where
    the executable structures take a stack, with the AttnRes gain folded into the query."""
    case = DECODER.make_case(0, "random", seed=0)
    view = DECODER.lean_case(case)
    dec = DECODER.numpy_rows(case)[0][0]
    p = dec.p
    assert np.array_equal(view.tensors["layers.2.kda.query_conv"], np.stack([p[f"layers.2.kda.query_conv.{t}"] for t in range(4)]))
    assert np.array_equal(view.tensors["layers.3.moe.expert.down"], np.stack([p[f"layers.3.moe.expert.down[{e}]"] for e in range(6)]))
    assert np.array_equal(view.tensors["final_res.weighted_query"], p["final_res.query"] * p["final_res.norm_gain"])
    assert np.array_equal(view.tensors["lm_head.weight"], p["lm_head.weight"])
    assert np.array_equal(view.tensors["ids"], case.tensors["ids"][:1])  # the Lean model runs the first row
    assert view.sizes["B"] == 1 and view.sizes["P"] == 3 and view.sizes["L"] == 5
    # widths from fixtures/tiny/config.json, written out here
    assert {k: view.sizes[k] for k in ("vocab", "D", "block", "Hk", "K", "Vk", "W", "Lkv", "Rs", "E", "k", "gc", "uc")} == {
        "vocab": 101, "D": 24, "block": 3, "Hk": 2, "K": 5, "Vk": 7, "W": 4, "Lkv": 11, "Rs": 14, "E": 6, "k": 2, "gc": 4, "uc": 25}


def test_lean_body_runs_the_executable_language_model_per_row() -> None:
    view = lean_view()
    body = lean.render_body(DECODER, view, "C0")
    assert "Exec.LanguageModel.runF dims model model.initialState ids" in body
    rows = re.findall(r"\(row \[([0-9, ]+)\]\)", body)
    assert [[int(x) for x in r.split(", ")] for r in rows] == view.tensors["ids"].astype(int).tolist()
    # the schedule of fixtures/tiny/config.json: KDA 1-3, MLA 4-5, dense 1, MoE 2-5
    assert body.count("sequence := .kda") == 3 and body.count("sequence := .mla") == 2
    assert body.count("channel := .dense") == 1 and body.count("channel := .moe") == 4


def test_lean_leg_reads_its_configuration_from_lean_config(monkeypatch) -> None:
    """ε per site comes from `lean_config`, not from pybridge's reader: a changed final-norm ε
    there changes the Lean text only (the schedule: the next test)."""
    from difftest.components.base import lean_float

    view = lean_view()
    cfg = DECODER.lean_config()
    before = lean.render_body(DECODER, view, "C0")
    assert lean_float(cfg["final_eps"]) in before and lean_float(cfg["mla_latent_eps"]) in before
    changed = {**cfg, "final_eps": 0.125}
    monkeypatch.setattr(type(DECODER), "lean_config", lambda self: changed)
    after = lean.render_body(DECODER, view, "C0")
    assert lean_float(0.125) in after and lean_float(0.125) not in before
    assert decoder_mod.torch_config().final_norm_eps == cfg["final_eps"]  # pybridge's reading unchanged


def test_lean_leg_rejects_a_schedule_the_parameters_do_not_have(monkeypatch) -> None:
    cfg = DECODER.lean_config()
    monkeypatch.setattr(type(DECODER), "lean_config", lambda self: {**cfg, "mla_layers": (3, 4, 5)})
    with pytest.raises(ValueError, match=r"makes layer 3 MLA, but the parameters have no 'layers\.3\.mla\.kv_down'"):
        lean_view()


def test_lean_leg_rejects_a_fractional_cap(monkeypatch) -> None:
    cfg = DECODER.lean_config()
    monkeypatch.setattr(type(DECODER), "lean_config", lambda self: {**cfg, "gate_cap": 4.5})
    with pytest.raises(ValueError, match="'gate_cap' = 4.5 is not a natural number"):
        lean_view()


def test_lean_output_shapes_match_the_other_legs() -> None:
    case = DECODER.make_case(0, "random", seed=0)
    numpy_ = DECODER.numpy_outputs(case)
    shapes = DECODER.lean_output_shapes(DECODER.lean_case(case))
    checks = {k for k in shapes if k.endswith(".route_check")}
    assert set(shapes) - checks == {k for k in numpy_ if not k.endswith(("route", "router_scores"))}
    assert all(numpy_[k][:1].shape == s for k, s in shapes.items() if k not in checks)  # the first row
    assert DECODER.lean_slice(case, numpy_)["logits"].shape == shapes["logits"]
    # one route check per MoE layer (2-5 in fixtures/tiny/config.json) and row
    assert {k: shapes[k] for k in checks} == {f"L{n}.route_check": (2,) for n in (2, 3, 4, 5)}


# ---------------------------------------------------------------- a swapped binding in the export

SWAPS = [("layers.1.seq_res.query", "layers.1.chan_res.query"), ("layers.1.kda.query_proj", "layers.1.kda.key_proj")]


def swapped_graph(tmp_path, a: str, b: str):
    """A copy of decoder_step_tiny.json with the names of two same-shaped parameters swapped (each
    id now bound to the other name)."""
    doc = json.loads((GRAPHS / decoder_mod.GRAPH_FILE).read_text(encoding="utf-8"))
    pa, pb = (next(p for p in doc["params"] if p["name"] == n) for n in (a, b))
    assert pa["shape"] == pb["shape"]
    pa["name"], pb["name"] = b, a
    path = tmp_path / decoder_mod.GRAPH_FILE
    path.write_text(json.dumps(doc), encoding="utf-8")
    return compile_graph(load_graph(path), dtype=decoder_mod.F64, device="cpu")


def graph_run(monkeypatch, graph=None):
    if graph is not None:
        monkeypatch.setattr(decoder_mod, "compiled", lambda file, dtype, device: graph)
    return runner.run(["decoder_step"], cases=1, seed=0, dtypes=["float64"], use_lean=False, shrink=False)


def test_unmodified_graph_passes(monkeypatch) -> None:
    result = graph_run(monkeypatch)
    assert result.passed
    assert {(c.impl, c.ref) for c in result.results[0].comparisons} == {("graph", "numpy"), ("torch", "numpy"), ("torch", "graph")}


@pytest.mark.parametrize(("a", "b"), SWAPS)
def test_swapped_binding_fails_the_graph_leg(tmp_path, monkeypatch, a: str, b: str) -> None:
    result = graph_run(monkeypatch, swapped_graph(tmp_path, a, b))
    failures = result.results[0].failures()
    assert failures and all("graph" in (c.impl, c.ref) for c in failures)  # torch vs numpy still agree
    assert {("graph", "numpy", "logits"), ("torch", "graph", "logits")} <= {(c.impl, c.ref, c.output) for c in failures}
    assert all(c.ratio > 1e3 for c in failures if c.output == "logits")  # far outside, not borderline
    text = report.diff_text(result.results[0])
    assert "FAIL decoder_step#0" in text and "logits [float64] graph vs numpy" in text


# ---------------------------------------------------------------- Lean counts in the summary and HTML

@pytest.fixture
def fake_lean(tmp_path, monkeypatch):
    """A fresh Lean cache and a stand-in for the Lean process: every case "evaluates" to no
    outputs (nothing to compare), so only the counting is exercised."""
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path / "cache"))
    calls = []

    def run_lean(source: str, name: str) -> list:
        calls.append(source.count('emit "C'))
        return []

    monkeypatch.setattr(lean, "run_lean", run_lean)
    monkeypatch.setattr(lean, "parse_output", lambda texts, batch: [{} for _ in batch])
    return calls


def counts_of(result) -> dict:
    return {name: c["lean"] for name, c in report.summary(result)["components"].items()}


def test_summary_and_html_count_lean_cases_per_component(fake_lean, tmp_path) -> None:
    def run():
        return runner.run(["expert", "decoder_step"], cases=2, seed=0, dtypes=["float64"], shrink=False,
                          lean_cases=1, lean_all=False)

    # the stand-in prints no route checks: the random case's 8 staged routes (4 MoE layers, 2
    # rows) are counted as not checked, and so are the tie case's 8 (not evaluated in Lean)
    routes = {"checked": 0, "rejected": 0, "unchecked": {"the Lean evaluation has no route checks": 8, runner.BEYOND_CASES: 8}}
    first = run()
    assert fake_lean == [2]  # one Lean batch: the first case of each component
    assert counts_of(first) == {
        "expert": {"evaluated": 1, "cached": 0, "skipped": {runner.BEYOND_CASES: 1}},
        "decoder_step": {"evaluated": 1, "cached": 0, "skipped": {runner.BEYOND_CASES: 1}, "route_checks": routes}}
    second = run()
    assert fake_lean == [2]  # no second batch: both from the cache
    assert counts_of(second) == {
        "expert": {"evaluated": 0, "cached": 1, "skipped": {runner.BEYOND_CASES: 1}},
        "decoder_step": {"evaluated": 0, "cached": 1, "skipped": {runner.BEYOND_CASES: 1}, "route_checks": routes}}
    assert second.lean_record["skipped"] == 2
    # the final line of `difftest run` prints the same counts, the skipped ones with their reason
    assert cli._lean_line(second.lean_record) == (
        f"Lean 0.0 s, 0 evaluated, 2 cached, 2 skipped: 2 {runner.BEYOND_CASES}; "
        "routes checked by Lean 0, rejected 0, not checked 16")
    _, html_path = report.write(second, tmp_path / "report")
    html = html_path.read_text(encoding="utf-8")
    assert "evaluated / cached / skipped" in html
    assert html.count(f"0 / 1 / 1\n (1 {runner.BEYOND_CASES})") == 2
    # and the route checks of decoder_step, with the reasons for the unchecked ones
    assert html.count("routes checked by Lean") == 1
    assert (f"not checked\n 8 (the Lean evaluation has no route checks); 8 ({runner.BEYOND_CASES})") in html
    doc = json.loads((tmp_path / "report" / "summary.json").read_text(encoding="utf-8"))
    assert doc["components"]["decoder_step"]["lean"]["cached"] == 1


def test_counts_name_no_lean_and_no_template(fake_lean, monkeypatch) -> None:
    off = runner.run(["expert"], cases=2, seed=0, dtypes=["float64"], use_lean=False, shrink=False)
    assert counts_of(off) == {"expert": {"evaluated": 0, "cached": 0, "skipped": {runner.NO_LEAN: 2}}}
    monkeypatch.setattr(type(COMPONENTS["expert"]), "template", "")
    none = runner.run(["expert"], cases=1, seed=0, dtypes=["float64"], shrink=False, lean_cases=2, lean_all=False)
    assert counts_of(none) == {"expert": {"evaluated": 0, "cached": 0, "skipped": {runner.NO_TEMPLATE: 1}}}
    assert fake_lean == []


# ---------------------------------------------------------------- the route checks, rendered

def test_route_checks_take_the_graph_legs_scores_and_staged_experts() -> None:
    """Every MoE layer's route check reads, from the packed inputs at its offset, exactly the
    graph leg's router scores of that row, and takes the experts the graph leg staged (slot
    order); the checker is the library's `Routing.checkRouteF` with the model's E and k."""
    case = DECODER.make_case(0, "random", seed=0)
    view = DECODER.lean_case(case)
    graph = DECODER.graph_outputs(case, "cpu")
    flat = np.concatenate([t.reshape(-1) for t in view.tensors.values()])
    checks = DECODER.lean_route_checks(view)
    assert [c["layer"] for c in checks] == ["L2.", "L3.", "L4.", "L5."]
    body = lean.render_body(DECODER, view, "C0")
    for chk in checks:
        for b, row in enumerate(chk["rows"]):
            assert np.array_equal(flat[row["scores"]:row["scores"] + 6], graph[chk["layer"] + "router_scores"][b])
            assert row["experts"] == graph[chk["layer"] + "staged_experts"][b].astype(int).tolist()
            experts = ", ".join(map(str, row["experts"]))
            assert f"Routing.checkRouteF 6 2 (floatsAt A {row['scores']} 6) [{experts}]" in body
    assert " routeChecks)" in body.splitlines()[-1]  # printed with the rows' outputs


def test_rejected_route_fails_the_case_naming_layer_row_and_slots() -> None:
    """A Lean verdict 0 (the Lean output replaced here) fails the case: the comparison
    `L3.route_check` lean vs graph, with the layer, the row, the slots, the top-k and the scores."""
    case = DECODER.make_case(0, "random", seed=0)
    legs = {"graph": DECODER.graph_outputs(case, "cpu")}
    verdicts = {f"L{n}.route_check": np.ones(2) for n in (2, 3, 4, 5)}
    verdicts["L3.route_check"] = np.array([1.0, 0.0])
    rows, record = DECODER.route_checks(case, verdicts, legs)
    assert record["checked"] == 8 and record["rejected"] == 1
    (bad,) = [c for c in rows if not c.passed]
    slots = legs["graph"]["L3.staged_experts"][1].astype(int).tolist()
    assert bad.output == "L3.route_check" and (bad.impl, bad.ref) == ("lean", "graph")
    assert f"rejected the staged route of layer 3, token row 1: slots {slots}" in bad.note
    assert "scores [" in bad.note
    none, unchecked = DECODER.route_checks(case, None, legs, runner.NO_LEAN)
    assert none == [] and unchecked["unchecked"] == 8 and unchecked["why"] == runner.NO_LEAN
    assert "not checked by Lean (--no-lean)" in unchecked["note"]


def test_tie_kind_ties_experts_zero_to_two_exactly() -> None:
    """The `tie` kind's routers: experts 0-2 score exactly the same in the graph leg (σ(0) + b₀),
    and the NumPy and torch legs pick the same routes (the tie rule: lower index first)."""
    case = DECODER.make_case(1, "tie", seed=0)
    graph, numpy_ = DECODER.graph_outputs(case, "cpu"), DECODER.numpy_outputs(case)
    torch_ = DECODER.torch_outputs(case, decoder_mod.F64, "cpu")["torch"]
    for n in (2, 3, 4, 5):
        s = graph[f"L{n}.router_scores"][0]
        assert s[0] == s[1] == s[2] and len(set(s[3:].tolist()) | {s[0]}) == 4
        assert np.array_equal(numpy_[f"L{n}.route"], torch_[f"L{n}.route"])
    assert case.tensors["router_ties"] == decoder_mod.TIE_GROUP
