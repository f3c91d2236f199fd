"""Sequence mixers (lean/KimiK3/Sequence): the graph exports.

The KDA and MLA step graphs, exported on the tiny dimensions (the session's fresh `k3spec export`,
`conftest.fresh_exports`), have the expected signatures. (The Float checks of the
worked numbers are `tests/lean/SequenceChecks.lean`, run by `test_lean_checks.py`.)
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.lean

EXPORTS = ("kda_head_step_tiny", "kda_packed_step_tiny", "mla_packed_step_tiny")


def test_exports_have_the_tiny_shapes(fresh_exports: dict[str, str]) -> None:
    docs = {name: json.loads(fresh_exports[name]) for name in EXPORTS}
    kda = docs["kda_packed_step_tiny"]
    # tiny config: 2 KDA heads, key width 5, value width 7 (all distinct, so swapped axes show)
    assert [2, 5, 7] in [p["shape"] for p in kda["params"] + kda["inputs"]]

