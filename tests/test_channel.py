"""Channel mixers (lean/KimiK3/Channel): the graph exports.

Exact results (router weights 3/7 and 4/7, top-k routes and the route checker, the toy expert's
wiring, the App. C counterexample) are theorems checked by the build; the Float worked examples
of k3-spec §2.6–2.7 are `tests/lean/ChannelChecks.lean` (run by `test_lean_checks.py`). This file
checks the exported expert graph and Stable LatentMoE graph (for a fixed route) on the tiny
dimensions (the session's fresh `k3spec export`, `conftest.fresh_exports`).
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.lean

# Tiny dimensions (fixtures/tiny/config.json): hidden_size 24; routed experts work at latent width
# routed_expert_hidden_size 12 with hidden moe_intermediate_size 13; the num_shared_experts = 2
# shared experts have hidden moe_intermediate_size 13 each (k3-spec §7: the hub's one shared MLP of
# width 2 * 13 is their sum); num_experts_per_token 2; latent_moe_norm_eps 5e-5;
# routed_scaling_factor 2.5.
EXPORTS = ("channel_expert_tiny", "channel_latent_moe_tiny")


def test_exports_have_the_tiny_shapes(fresh_exports: dict[str, str]) -> None:
    docs = {name: json.loads(fresh_exports[name]) for name in EXPORTS}
    expert = docs["channel_expert_tiny"]
    assert [p["shape"] for p in expert["params"]] == [[24, 13], [24, 13], [13, 24]]
    assert [i["name"] for i in expert["inputs"]] == ["input", "gateCap", "upCap"]
    ops = [n["op"] for n in expert["nodes"]]
    assert "sigmoid" in ops and ops.count("tanh") == 2  # SiTU from primitive nodes, not opaque
    moe = docs["channel_latent_moe_tiny"]
    assert moe["outputs"][0]["shape"] == [24]

