"""`decoder_step` with the real Lean reference (one Lean process, fresh cache): the whole tiny
token step evaluated by the executable language model agrees with the graph, NumPy and torch
legs on the `random` and `tie` cases, and the library's route checker `Routing.checkRouteF`
accepts every route the graph leg staged. Two planted bugs, afterwards (the cached Lean results
reused): one in pybridge's torch model, flagged against Lean; one in the graph leg's staging (a
non-top-k expert in a slot), rejected by the Lean route checker, which names the layer, the row
and the slots."""

from __future__ import annotations

import pytest

from difftest import lean, numpy_ref, runner
from difftest.components import COMPONENTS
from difftest.components.decoder import DecoderStepComponent
from pybridge.model import K3TextModel

pytestmark = [pytest.mark.lean, pytest.mark.slow]

DECODER = COMPONENTS["decoder_step"]
STAGED_ROUTES = DecoderStepComponent.staged_routes  # the unplanted staging


def decoder_run(cases: int = 1):
    return runner.run(["decoder_step"], cases=cases, seed=0, dtypes=["float64"], shrink=False, lean_cases=cases,
                      lean_all=False)


def off_by_one_routes(dec: numpy_ref.Decoder) -> dict[int, list[int]]:
    """The planted staging bug: the experts of ranks 0 and 2 of the NumPy decoder's adjusted
    scores (an off-by-one top-k), not ranks 0 and 1, in every MoE layer."""
    out = {}
    for i, route in STAGED_ROUTES(dec).items():
        ranked = numpy_ref.top_k(dec.record[i + 1]["scores"], len(route) + 1)
        out[i] = [ranked[0], *ranked[2:]]
    return out


def plant_routes(mp: pytest.MonkeyPatch) -> None:
    mp.setattr(DecoderStepComponent, "staged_routes", staticmethod(off_by_one_routes))


@pytest.fixture(scope="module")
def lean_record(tmp_path_factory):
    """ONE Lean evaluation of decoder_step's first two cases (`random`, `tie`) and of the first
    case with the planted staging bug; the cache stays set for the module."""
    mp = pytest.MonkeyPatch()
    mp.setenv("DIFFTEST_CACHE", str(tmp_path_factory.mktemp("difftest-cache")))
    cases = [case for _, case in runner.build_cases(["decoder_step"], 2, seed=0)]
    items = [(DECODER, DECODER.lean_case(case)) for case in cases]
    with pytest.MonkeyPatch.context() as planted:
        plant_routes(planted)
        items.append((DECODER, DECODER.lean_case(cases[0])))
    _, record = lean.evaluate(items, use_cache=False)
    yield record
    mp.undo()


def test_decoder_step_lean_leg_agrees_with_every_leg(lean_record) -> None:
    assert lean_record["ran"] == 3
    run = decoder_run(2)
    assert run.lean_record["ran"] == 0 and run.lean_record["components"]["decoder_step"]["cached"] == 2
    assert [r.case.kind for r in run.results] == ["random", "tie"]
    for result in run.results:
        assert result.passed, result.failures()
        compared = {(c.ref, c.output) for c in result.comparisons if c.impl == "lean"}
        for ref in ("torch", "numpy", "graph"):
            assert {(ref, "logits"), (ref, "L1.heads"), (ref, "L3.heads"), (ref, "L4.latent_cache"),
                    (ref, "L5.shared_key_cache")} <= compared, ref
    logits = run.results[0].f64["lean"]["logits"]
    assert logits.shape == (1, 101) and float(abs(logits).max()) > 0.1  # not a vacuous all-zero output


def test_lean_route_checker_accepts_every_staged_route(lean_record) -> None:
    """Every staged route of every MoE layer (2-5) and row, checked in Lean: 4 x 2 rows on the
    random case and on the tie case (whose routes the tie rule picks: experts 0-2 tie)."""
    run = decoder_run(2)
    assert [r.routes["checked"] for r in run.results] == [8, 8]
    assert all(r.routes["rejected"] == 0 for r in run.results)
    assert run.lean_record["components"]["decoder_step"]["route_checks"] == {"checked": 16, "rejected": 0, "unchecked": {}}
    for result in run.results:
        checks = {c.output: c for c in result.comparisons if c.output.endswith(".route_check")}
        assert set(checks) == {f"L{n}.route_check" for n in (2, 3, 4, 5)}
        assert all(c.passed and (c.impl, c.ref) == ("lean", "graph") for c in checks.values())
        assert all(v.tolist() == [1.0, 1.0] for k, v in result.f64["lean"].items() if k.endswith(".route_check"))
    tie = run.results[1].f64["graph"]
    assert any(0 in tie[f"L{n}.staged_experts"] for n in (2, 3, 4, 5))  # the tied experts are chosen somewhere


def test_planted_off_by_one_route_is_rejected_by_the_lean_checker(lean_record, monkeypatch) -> None:
    """The graph leg stages ranks 0 and 2 (of the NumPy decoder's scores): Lean's checker
    rejects layer 2's route in both rows (from the cache: the planted view was in the module's
    one Lean evaluation), and every rejection is named. Later layers' graph scores move with the
    wrong routes before them, so there ranks 0 and 2 of NumPy's scores may happen to be a top-2
    of the graph's. The Python check of layer 2 (`L2.route`, the top-k of the graph's own scores)
    does not see it: layer 2's scores come before its route."""
    plant_routes(monkeypatch)
    run = decoder_run(1)
    assert run.lean_record["ran"] == 0 and run.lean_record["cached"] == 1
    result = run.results[0]
    assert result.routes["checked"] == 8 and result.routes["rejected"] >= 2
    failed = {c.output: c for c in result.failures() if c.output.endswith(".route_check")}
    assert "L2.route_check" in failed
    notes = " ".join(c.note for c in failed.values())
    assert notes.count("Lean Routing.checkRouteF rejected the staged route") == result.routes["rejected"]
    note = failed["L2.route_check"].note
    staged = result.f64["graph"]["L2.staged_experts"]
    for b in (0, 1):
        assert (f"Lean Routing.checkRouteF rejected the staged route of layer 2, token row {b}: "
                f"slots {[int(e) for e in staged[b]]}") in note
    assert "top-2 of the graph's router scores" in note and "scores [" in note
    assert not any(c.output == "L2.route" for c in result.failures())  # the Python check passes layer 2


def test_planted_final_norm_eps_in_pybridge_is_flagged_against_lean(lean_record, monkeypatch) -> None:
    """pybridge's final RMSNorm takes `rms_norm_eps` (1e-5) instead of `final_norm_eps` (3e-5):
    only the torch leg changes; the Lean leg (from the cache) names it."""
    init = K3TextModel.__init__

    def planted(self, cfg) -> None:
        init(self, cfg)
        self.norm.eps = cfg.rms_norm_eps

    monkeypatch.setattr(K3TextModel, "__init__", planted)
    result = decoder_run()
    assert result.lean_record["ran"] == 0 and result.lean_record["cached"] == 1
    failures = result.results[0].failures()
    assert ("lean", "torch", "logits") in {(c.impl, c.ref, c.output) for c in failures}
    assert all("torch" in (c.impl, c.ref) for c in failures)  # Lean, graph and NumPy still agree
