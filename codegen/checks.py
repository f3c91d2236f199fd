"""Run the Lean evaluation checks (`codegen/lean/EvalChecks.lean`) on the executable modules."""

from __future__ import annotations

from pathlib import Path

from .bundle import bundle, dependency_order, run_lean

CHECKS = Path(__file__).parent / "lean" / "EvalChecks.lean"


def run_checks(root: Path) -> list[str]:
    """Elaborate the bundle followed by the checks; return the printed lines.

    Any failing `#guard` is a Lean error and raises `codegen.bundle.EvaluationError`.
    """
    source = bundle(root, dependency_order(root, ("KimiK3.Core.Examples", "KimiK3.Core.Json"))) + "\n" + CHECKS.read_text(encoding="utf-8")
    return [m.text for m in run_lean(source, "EvalChecks") if m.severity == "information"]
