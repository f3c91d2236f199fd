"""Runs the Lean evaluation checks of the core (`codegen/lean/EvalChecks.lean`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codegen.checks import run_checks

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.lean
def test_eval_checks_pass() -> None:
    assert "eval checks passed" in run_checks(ROOT)[-1]
