"""difftest's MoonViT-V2 components (`difftest/components/vision.py`): the default run is green
on every kind and dtype, difftest's own NumPy reference matches hand values, the low-precision
tolerance fails an all-zero output, and the Lean skip reasons are recorded. The planted bugs are in
`test_difftest_mutations.py` (MoonViT section); the Lean leg's check is `test_difftest_vision_lean.py`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from difftest import numpy_vision as nv
from difftest import runner
from difftest.compare import compare, tolerance
from difftest.components import COMPONENTS
from difftest.config import TINY_CONFIG, ConfigReadError

VISION = ("vision_embed", "vision_block", "merge_project", "vision_encoder", "multimodal_prefill")


@pytest.fixture(scope="module")
def default_run():
    return runner.run(list(VISION), seed=0, use_lean=False, shrink=False)


def test_default_run_is_green_on_every_kind_and_dtype(default_run) -> None:
    assert default_run.passed, [(c.component, c.kind, c.dtype, c.impl, c.ref, c.output, c.err, c.tol)
                                for r in default_run.results for c in r.failures()]
    seen = {(c.component, c.kind, c.dtype) for r in default_run.results for c in r.comparisons}
    for name in VISION:
        for kind in COMPONENTS[name].kinds:
            assert {(name, kind, d) for d in ("float64", "float32", "bfloat16")} <= seen, (name, kind)


def test_each_component_has_its_independent_legs(default_run) -> None:
    pairs = {(c.component, c.impl, c.ref) for r in default_run.results for c in r.comparisons if c.dtype == "float64"}
    assert ("vision_embed", "torch", "numpy") in pairs and ("vision_embed", "graph", "numpy") in pairs
    assert ("vision_block", "graph", "numpy") in pairs and ("merge_project", "graph", "numpy") in pairs
    assert ("vision_encoder", "graph", "numpy") in pairs
    assert ("vision_encoder", "torch_reference", "numpy") in pairs and ("vision_encoder", "torch_reference", "torch") in pairs
    # the encoder's per-stage low-precision checks: the embedding, every block, the final norm, the features
    stages = {c.output for r in default_run.results for c in r.comparisons
              if c.component == "vision_encoder" and c.dtype == "bfloat16"}
    assert stages == {"embedding", "block0", "block1", "final_norm", "features"}
    assert {("multimodal_prefill", "torch", "numpy")} <= pairs
    outputs = {c.output for r in default_run.results for c in r.comparisons if c.component == "multimodal_prefill"}
    assert outputs == {"features", "logits"}


def test_graph_leg_runs_on_the_exported_grid_only(default_run) -> None:
    kinds = {(c.component, c.kind) for r in default_run.results for c in r.comparisons
             if c.impl == "graph" or c.ref == "graph"}
    # 2 frames of 6 × 4, the exports' grid (vision_encoder: its one-clip kind)
    assert kinds == {("vision_embed", "random"), ("vision_embed", "large"),
                     *(("vision_block", k) for k in ("random", "sharp", "large", "eps")),
                     *(("merge_project", k) for k in ("random", "large", "eps")), ("vision_encoder", "single")}


def test_numpy_bilinear_and_time_rows_by_hand() -> None:
    # 2 table rows to 4: sources -0.25 (clamped to 0), 0.25, 0.75, 1.25 (last row twice)
    assert np.array_equal(nv.bilinear(2, 4), [[1, 0], [0.75, 0.25], [0.25, 0.75], [0, 1]])
    assert np.array_equal(nv.bilinear(5, 5), np.eye(5))
    # 4 rows to 2: sources 0.5 and 2.5
    assert np.array_equal(nv.bilinear(4, 2), [[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]])
    assert np.allclose(nv.bilinear(4, 6).sum(1), 1.0) and np.allclose(nv.bilinear(6, 64).sum(1), 1.0)
    t = nv.time_rows(2, 4)  # ω = 1, 10⁻²
    assert np.array_equal(t[0], [0, 0, 1, 1])
    assert np.allclose(t[1], [np.sin(1), np.sin(0.01), np.cos(1), np.cos(0.01)], rtol=0, atol=1e-16)


def test_numpy_merge_channel_order_by_hand() -> None:
    # 2 frames of 2 × 4, D = 1: token value 100 f + 10 r + c; one merged row of 2 tokens
    y = np.array([[100 * f + 10 * r + c] for f in range(2) for r in range(2) for c in range(4)], dtype=float)
    m = nv.merge(y, (2, 2, 4), {"merge": (2, 2)})
    # channel (dh·2 + dw): pixels (0,0), (0,1), (1,0), (1,1) of each 2 × 2 window, frame mean + 50
    assert np.array_equal(m, [[50, 51, 60, 61], [52, 53, 62, 63]])


def test_numpy_reader_names_a_missing_field(tmp_path) -> None:
    raw = json.loads(TINY_CONFIG.read_text())
    del raw["vision_config"]["rope_theta"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigReadError, match=r"vision_config\.rope_theta"):
        nv.vision_reading(path)
    assert nv.vision_reading()["head_dim"] == 12  # tiny: 36 / 3 heads


@pytest.mark.parametrize("name", VISION)
def test_low_precision_tolerance_fails_an_all_zero_output(name) -> None:
    comp = COMPONENTS[name]
    case = comp.make_case(0, "random", 0)
    for dtype in ("float32", "bfloat16"):
        import torch

        for chk in comp.lowp_checks(case, getattr(torch, dtype), "cpu"):
            tol = tolerance(chk.model, dtype)
            assert 0 < tol < 0.01, (chk.output, tol)
            ok = compare(name, 0, "random", dtype, chk.impl, chk.ref, chk.output, chk.got, chk.want, tol, metric="l2")
            zero = compare(name, 0, "random", dtype, chk.impl, chk.ref, chk.output, 0 * chk.want, chk.want, tol, metric="l2")
            assert ok.passed and not zero.passed and zero.err == pytest.approx(1.0)


def test_lean_skip_reasons_are_recorded() -> None:
    items = runner.build_cases(list(VISION), 1, 0)
    reasons = {comp.name: why for (comp, _), (_, why) in zip(items, runner.lean_plan(items, 2, False))}
    for name in ("vision_embed", "vision_block", "merge_project", "vision_encoder", "multimodal_prefill"):
        # the skip reason carries the component's measured Lean time
        assert reasons[name] == f"{runner.NOT_DEFAULT}: {COMPONENTS[name].lean_note}" and " s a bundle offline" in reasons[name]
    # --lean-all evaluates the ones with a template (multimodal_prefill: its first kind, `short`)
    chosen = {comp.name for _, comp, _ in runner.lean_chosen(items, 2, True)}
    assert chosen & set(VISION) == set(VISION)
    # multimodal_prefill's other kinds (two rows, two clips; 4 frames) have no Lean view, and say why
    more = runner.build_cases(["multimodal_prefill"], 3, 0)
    why = [w for _, w in runner.lean_plan(more, None, True)]
    assert why[0] == "" and all("short" in w and "multimodalPrefill_clipFeatures_eq" in w for w in why[1:])
