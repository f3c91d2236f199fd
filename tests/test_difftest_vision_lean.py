"""The vision components' Lean legs, one Lean process per component, fresh cache:
`vision_embed` (the library's `Vision.embed` in a bundle, template
`difftest/templates/vision_embed.lean.j2`), `vision_block` (the executable
`Exec.Vision.Block.forward`, proved equal to `Vision.Block.forward` by `Exec.Vision.Block.forward_eq`;
template `vision_block.lean.j2`), `merge_project` (the executable `Exec.Vision.mergeProject`,
`Exec.Vision.mergeProject_eq`; template `merge_project.lean.j2`) and `vision_encoder` (the library's
`Vision.embed`, then the executable encoder and merge-and-project, `Exec.Vision.clipFeatures_eq`;
template `vision_encoder.lean.j2`). Each run is green against the NumPy, graph and torch legs
(those the component has); a second run takes the Lean result from the cache and flags a planted
bug in the NumPy reference against Lean itself (`align_corners=True` weights; RoPE's row and
column axes swapped; the merge's channel blocks transposed; a time term on single frames).
`multimodal_prefill` (the executable tower and `Exec.Vision.multimodalPrefillF`,
`Exec.Vision.multimodalPrefill_clipFeatures_eq`; template `multimodal_prefill.lean.j2`, its one-clip
kind `short`) is green against NumPy and torch, and flags a splice in reverse order planted in both
of them, which only Lean then catches."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from difftest import numpy_vision, runner
from difftest.components import vision

pytestmark = [pytest.mark.lean, pytest.mark.slow]


def _lean_leg_agrees_then_catches(component: str, plant: Callable[[], None], cases: int = 1,
                                  refs: tuple[str, ...] = ("numpy", "graph", "torch")) -> None:
    """The first `cases` cases of `component` (one Lean process) are green with Lean against the
    `refs` legs; after `plant()` breaks the NumPy reference, a second run takes Lean from the
    cache and flags it."""
    run_once = lambda: runner.run([component], cases=cases, seed=0, dtypes=["float64"], shrink=False,  # noqa: E731
                                  lean_cases=cases, lean_all=True)
    run = run_once()
    assert run.passed, [c for r in run.results for c in r.failures()]
    assert run.lean_record["ran"] == cases
    print(f"{component}: one Lean run of {cases} case(s), {run.lean_record['seconds']} s")  # shown with -s
    pairs = {(c.impl, c.ref) for r in run.results for c in r.comparisons}
    assert {("lean", ref) for ref in refs} <= pairs
    plant()
    bad = run_once()
    assert bad.lean_record["cached"] == cases
    assert ("lean", "numpy") in {(c.impl, c.ref) for r in bad.results for c in r.failures()}


def test_vision_embed_lean_leg_agrees_and_catches_corner_aligned_weights(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))
    real = numpy_vision.bilinear
    _lean_leg_agrees_then_catches("vision_embed", lambda: monkeypatch.setattr(
        numpy_vision, "bilinear", lambda m, n, align_corners=False: real(m, n, True)))


def test_vision_block_lean_leg_agrees_and_catches_swapped_rope_axes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))
    real = numpy_vision.rope_angles

    def swapped(h: int, w: int, cfg: dict) -> np.ndarray:
        """The row pairs turned by the column and the column pairs by the row."""
        angles = real(h, w, cfg)
        R = angles.shape[1] // 2
        return np.concatenate([angles[:, R:], angles[:, :R]], axis=1)

    _lean_leg_agrees_then_catches("vision_block", lambda: monkeypatch.setattr(numpy_vision, "rope_angles", swapped))


def test_merge_project_lean_leg_agrees_and_catches_swapped_merge_channel_order(tmp_path, monkeypatch) -> None:
    """Two cases: one clip (the graph's 2 frames of 6 × 4) and three clips of different grids and
    frame counts; the plant puts pixel `(dh, dw)` at channel block `dw·2 + dh`."""
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))
    real = numpy_vision.merge

    def swapped(y_nd: np.ndarray, grid: tuple[int, int, int], cfg: dict) -> np.ndarray:
        kh, kw = cfg["merge"]
        m = real(y_nd, grid, cfg)
        return m.reshape(m.shape[0], kh, kw, -1).transpose(0, 2, 1, 3).reshape(m.shape[0], -1)

    _lean_leg_agrees_then_catches("merge_project", lambda: monkeypatch.setattr(numpy_vision, "merge", swapped), cases=2)


def test_vision_encoder_lean_leg_agrees_and_catches_time_term_of_single_frames(tmp_path, monkeypatch) -> None:
    """Two cases: five clips of different grids and frame counts in one batch (two of them single
    frames, one larger than the table) and one clip of 2 frames; against NumPy, torch's batched
    model and (features) the per-clip plain reference. The plant adds the time table's row 0 to
    single-frame clips."""
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))
    real = numpy_vision.embed

    def with_time(p: dict, patches_np: np.ndarray, grid: tuple[int, int, int], cfg: dict) -> np.ndarray:
        x = real(p, patches_np, grid, cfg)
        return x + numpy_vision.time_rows(1, x.shape[1])[0] if grid[0] == 1 else x

    _lean_leg_agrees_then_catches("vision_encoder", lambda: monkeypatch.setattr(numpy_vision, "embed", with_time),
                                  cases=2, refs=("numpy", "torch", "torch_reference"))


def test_multimodal_prefill_lean_leg_agrees_and_alone_catches_a_reversed_splice(tmp_path, monkeypatch) -> None:
    """One case, the kind `short` (one row: text, placeholder, text, placeholder, text; one 1-frame
    2 × 4 clip, 2 visual tokens): Lean's features and logits of every position agree with NumPy
    and torch. Then the splice fills the placeholders last-first in both of them (torch:
    `multimodal.splice` given the rows reversed, as the mutation suite's plant; NumPy: a copy of
    its leg with the rows reversed): they agree with each other, and only the comparisons against
    Lean (taken from the cache) flag it, on the logits, not the features."""
    from pybridge import multimodal

    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))
    component = "multimodal_prefill"
    run_once = lambda: runner.run([component], cases=1, seed=0, dtypes=["float64"], shrink=False,  # noqa: E731
                                  lean_cases=1, lean_all=True)
    run = run_once()
    assert run.passed, [c for r in run.results for c in r.failures()]
    assert {c.kind for r in run.results for c in r.comparisons} == {vision.LEAN_KIND} and run.lean_record["ran"] == 1
    print(f"{component}: one Lean run of 1 case, {run.lean_record['seconds']} s")  # shown with -s
    lean = [c for r in run.results for c in r.comparisons if c.impl == "lean"]
    assert {(c.ref, c.output) for c in lean} == {(ref, out) for ref in ("numpy", "torch") for out in ("features", "logits")}
    print("error, tolerance:", {(c.ref, c.output): (c.err, c.tol) for c in lean})

    real_splice = multimodal.splice
    monkeypatch.setattr(multimodal, "splice", lambda e, ids, ph, f: real_splice(e, ids, ph, f.flip(0)))
    real_numpy = vision.MultimodalPrefillComponent.numpy_outputs

    def numpy_reversed(self, case):
        """The NumPy leg with the visual rows taken last-first (a copy of its splice loop)."""
        from difftest.components.decoder import DecoderStepComponent, case_model

        out = real_numpy(self, case)
        feats, ph = out["features"][::-1], vision.torch_config().media_placeholder_token_id
        dec_comp, model = DecoderStepComponent(), case_model(case.tensors)
        logits, k = [], 0
        for row in case.tensors["ids"].astype(np.int64):
            dec, rows = dec_comp.decoder(model), []
            for tok in row:
                if tok == ph:
                    rows.append(dec.step_embedding(feats[k]))
                    k += 1
                else:
                    rows.append(dec.step(int(tok)))
            logits.append(np.stack(rows))
        return {"features": out["features"], "logits": np.stack(logits)}

    monkeypatch.setattr(vision.MultimodalPrefillComponent, "numpy_outputs", numpy_reversed)
    bad = run_once()
    assert bad.lean_record["cached"] == 1
    failures = {(c.impl, c.ref, c.output): c.err / c.tol for r in bad.results for c in r.failures()}
    print("planted, error/tolerance:", failures)
    assert set(failures) == {("lean", "numpy", "logits"), ("lean", "torch", "logits")}
