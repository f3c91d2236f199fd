"""difftest's Lean leg calls the executable specification (`KimiK3.Exec`) for every component,
and a failed Lean evaluation names its cases, keeps the generated file and says how to rerun it
(no Lean process: the runner is replaced)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from difftest import lean, runner
from difftest.components import COMPONENTS

EXEC_COMPONENTS = ("expert", "latent_moe", "kda_recurrence", "kda_layer", "mla", "attnres", "kimi_linear_kda",
                   "kimi_linear_mla", "kimi_linear_moe", "kimi_linear_model")


def test_default_run_evaluates_every_component_in_lean_through_exec() -> None:
    for name in (*EXEC_COMPONENTS, "decoder_step"):
        comp = COMPONENTS[name]
        assert comp.lean_default and comp.lean_targets[0] == "KimiK3.Exec.Kernel", name
        ((_, _, view),) = runner.lean_chosen(runner.build_cases([name], 1, seed=0), None, True)
        body = lean.render_body(comp, view, "C0")
        # the case calls a library entry point of the executable spec, not a restatement
        assert re.search(r"Exec\.[A-Za-z.]+F\b", body), name
        # the reference runs its own routing (decoder_step's route checks, after it, take staged routes)
        assert "Tensor.memo" not in body and "staged" not in body.split("-- Route checks")[0], name


def test_failed_lean_evaluation_names_cases_file_and_rerun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIFFTEST_CACHE", str(tmp_path))

    def fail(source: str, name: str) -> list:
        raise RuntimeError(f"{name}.lean:3:0: error: unknown identifier")

    monkeypatch.setattr(lean, "run_lean", fail)
    items = [(comp, view) for _, comp, view in runner.lean_chosen(runner.build_cases(["expert", "mla"], 1, seed=0), None, True)]
    with pytest.raises(lean.LeanEvaluationError) as err:
        lean.evaluate(items, use_cache=False)
    text = str(err.value)
    for _, case in items:
        assert case.label in text  # component, index, kind, seed and sizes
    assert "unknown identifier" in text
    path = Path(re.search(r"generated file: (\S+)", text).group(1))
    assert path.is_file() and path.read_text(encoding="utf-8").count('emit "C') == 2
    assert f"python3 -m k3spec lean {path}" in text


def test_default_lean_cases_are_a_random_case_and_an_adversarial_kind() -> None:
    items = runner.build_cases(list(EXEC_COMPONENTS), None, seed=0)
    chosen = runner.lean_chosen(items, 2, lean_all=False)
    kinds: dict[str, list[str]] = {}
    for _, comp, view in chosen:
        kinds.setdefault(comp.name, []).append(view.kind)
    assert set(kinds) == set(EXEC_COMPONENTS)
    for name, got in kinds.items():
        if len(COMPONENTS[name].kinds) == 1:  # kimi_linear_model: random token ids on the seeded model only
            assert got == ["random"], (name, got)
            continue
        assert len(got) == 2 and got[0] == "random" and got[1] != "random", (name, got)
        assert not set(got) & set(COMPONENTS[name].lean_skip_kinds), (name, got)
    # --lean-all evaluates the skipped (long) kinds too
    every = runner.lean_chosen(items, None, lean_all=True)
    assert any(view.kind == "long" for _, _, view in every)
