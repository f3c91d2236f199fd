"""benchmarks/catch_table.py (docs/catch-table.md) reads the mutation suite as pytest does: every
test, its own monkeypatches, and its verdict; a bug it does not catch is listed, not hidden."""

from __future__ import annotations

import importlib.util
import inspect
import sys

import test_difftest_mutations as suite
from helpers import REPO

spec = importlib.util.spec_from_file_location("catch_table", REPO / "benchmarks" / "catch_table.py")
catch_table = sys.modules["catch_table"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
spec.loader.exec_module(catch_table)


def test_every_test_of_the_suite_is_a_row() -> None:
    names = [n for n, f in vars(suite).items() if n.startswith("test_") and inspect.isfunction(f)]
    assert [name for name, _, _ in catch_table.suite_tests()] == names
    groups = {group for _, _, group in catch_table.suite_tests()}
    assert {"configuration mapping", "model bugs"} <= groups


def test_a_bug_is_caught_a_control_is_not_and_the_patches_are_undone() -> None:
    bug = catch_table.run_test("test_up_path_capped_with_the_gate_cap_is_flagged",
                               suite.test_up_path_capped_with_the_gate_cap_is_flagged, "model bugs")
    assert bug.caught and not bug.control and not bug.test_error and bug.components == "expert"
    assert "torch vs numpy" in catch_table.legs(bug.failures) and "cap" in catch_table.kinds(bug.failures)
    control = catch_table.run_test("test_sigmoid_through_tanh_is_not_flagged", suite.test_sigmoid_through_tanh_is_not_flagged, "")
    assert control.control and not control.failures and 0 < catch_table.worst_ratio(control.comparisons) < 1
    assert suite.default_run.__name__ == "default_run" and suite.passes.__name__ == "passes"


def test_a_bug_the_run_misses_is_reported_as_not_caught() -> None:
    def test_planted_nothing(monkeypatch) -> None:
        suite.flagged("expert")  # no bug: the suite's own check fails, and the table says so

    out = catch_table.run_test("test_planted_nothing", test_planted_nothing, "")
    assert not out.caught and not out.control and out.test_error.startswith("assertion failed")
    table = "\n".join(catch_table.bug_table([out]))
    assert "**NO**" in table and "assertion failed" in table
