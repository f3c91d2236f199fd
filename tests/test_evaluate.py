"""`codegen.bundle.run_source` with a Lean whose output is cut off (no Lean needed: `leanrun.run`
is replaced by a stand-in that replays outputs)."""

from __future__ import annotations

import pytest

from codegen import bundle
from k3spec import leanrun
from k3spec.toolchain import Toolchain

GOOD = '{"severity":"information","pos":{"line":3,"column":0},"data":"42\\n"}'
CUT = '{"severity":"information","pos":{"line":3,"column":0},"data":"4'


def _replay(monkeypatch, outputs: list[str]) -> list[int]:
    calls: list[int] = []

    def fake_run(tc, args, cwd, lean_path=(), unpatched=False, echo=False):
        calls.append(1)
        return leanrun.LeanResult(0, outputs[len(calls) - 1], "")

    monkeypatch.setattr(leanrun, "run", fake_run)
    return calls


TC = Toolchain(kind="native", identity="test", lean=None)


def test_cut_off_output_is_run_again(monkeypatch, capsys):
    calls = _replay(monkeypatch, [CUT, GOOD])
    (msg,) = bundle.run_source(TC, "#eval 42", "Answer")
    assert (msg.line, msg.severity, msg.text) == (3, "information", "42\n")
    assert len(calls) == 2
    assert "Answer.lean: Lean's output was cut off" in capsys.readouterr().err


def test_output_cut_off_every_time_is_a_clear_error(monkeypatch):
    calls = _replay(monkeypatch, [CUT, CUT, CUT])
    with pytest.raises(bundle.EvaluationError, match=r"Answer\.lean: Lean's output was cut off .* in all 3 runs"):
        bundle.run_source(TC, "#eval 42", "Answer")
    assert len(calls) == 3
