"""Sequence mixers (lean/KimiK3/Sequence): Float checks and graph exports, run in Lean.

The worked numbers (7.4, 10, 4.8, 5.25 vs 2.25, the toy read of 3) are proved exactly in
`KDAExamples.lean`; here the executable Float versions are `#guard`ed and the KDA and MLA step
graphs are exported on the tiny dimensions and validated. As for the channel mixers, evaluation
goes through `codegen`'s bundle, since the offline interpreter cannot run another module's code.

`python tests/test_sequence.py` rewrites `fixtures/graphs/{kda,mla}_*_tiny.json`.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest
from helpers import lean_run

from codegen.export import load_schema, validate

pytestmark = pytest.mark.lean

REPO = Path(__file__).resolve().parents[1]
CHECKS = REPO / "lean" / "KimiK3" / "Sequence" / "float_checks.eval"
TARGETS = ("KimiK3.Core.Json", "KimiK3.Sequence.Graphs")
EXPORTS = ("kda_head_step_tiny", "kda_packed_step_tiny", "mla_packed_step_tiny")


@lru_cache(maxsize=1)
def run() -> dict[str, dict]:
    """One Lean run of the checks (a failing `#guard` is an error); the exported documents."""
    return lean_run(TARGETS, CHECKS.read_text(encoding="utf-8"), "SequenceChecks").by_name()


def test_float_checks_pass_and_exports_validate() -> None:
    docs = run()
    assert set(docs) == set(EXPORTS)
    schema = load_schema(REPO)
    for doc in docs.values():
        validate(doc, schema)
    kda = docs["kda_packed_step_tiny"]
    # tiny config: 2 KDA heads, key width 5, value width 7 (all distinct, so swapped axes show)
    assert [2, 5, 7] in [p["shape"] for p in kda["params"] + kda["inputs"]]


def test_committed_exports_match() -> None:
    for name, doc in run().items():
        path = REPO / "fixtures" / "graphs" / f"{name}.json"
        assert path.exists(), f"{path} missing: run python tests/test_sequence.py"
        assert json.loads(path.read_text(encoding="utf-8")) == doc


if __name__ == "__main__":
    for name, doc in run().items():
        (REPO / "fixtures" / "graphs" / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
