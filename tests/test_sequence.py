"""Sequence mixers (lean/KimiK3/Sequence): the graph exports, run in Lean.

The KDA and MLA step graphs are exported on the tiny dimensions and validated. (The Float checks
of the worked numbers are `tests/lean/SequenceChecks.lean`, run by `test_lean_checks.py`.)
Evaluation goes through `codegen`'s bundle, since the offline interpreter cannot run another
module's code.

`python tests/test_sequence.py` rewrites `fixtures/graphs/{kda,mla}_*_tiny.json`.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from codegen.bundle import bundle, dependency_order, run_lean
from codegen.export import load_schema, validate

pytestmark = pytest.mark.lean

REPO = Path(__file__).resolve().parents[1]
TARGETS = ("KimiK3.Core.Json", "KimiK3.Sequence.Graphs")
EXPORTS = ("kda_head_step_tiny", "kda_packed_step_tiny", "mla_packed_step_tiny")
EXPORT_EVALS = """
#eval IO.println KimiK3.KDA.headStepJsonTiny
#eval IO.println KimiK3.KDA.packedStepJsonTiny
#eval IO.println KimiK3.GatedMLA.stepJsonTiny
"""


@lru_cache(maxsize=1)
def run() -> dict[str, dict]:
    """One Lean run of the exports; the exported documents."""
    source = bundle(REPO, dependency_order(REPO, TARGETS)) + EXPORT_EVALS
    docs = {}
    for message in run_lean(source, "SequenceExports"):
        if message.severity == "information" and message.text.lstrip().startswith("{"):
            doc = json.loads(message.text)
            docs[doc["name"]] = doc
    return docs


def test_exports_validate() -> None:
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
