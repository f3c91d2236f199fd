"""Channel mixers (lean/KimiK3/Channel): the graph exports, run in Lean.

Exact results (router weights 3/7 and 4/7, top-k routes and the route checker, the toy expert's
wiring, the App. C counterexample) are theorems checked by the build; the Float worked examples
of k3-spec §2.6–2.7 are `tests/lean/ChannelChecks.lean` (run by `test_lean_checks.py`). This file
exports the expert graph and the Stable LatentMoE graph (for a fixed route) on the tiny
dimensions, validating them against `fixtures/graph.schema.json`.

Evaluation uses `codegen`'s bundle (the modules' sources concatenated into one standalone file),
since the offline interpreter cannot run compiled code of another module.

`python tests/test_channel.py` rewrites `fixtures/graphs/channel_*.json`.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.lean

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from codegen.bundle import bundle, dependency_order, run_lean  # noqa: E402
from codegen.export import load_schema, validate  # noqa: E402

TARGETS = ("KimiK3.Core.Json", "KimiK3.Channel.ExpertGraph", "KimiK3.Channel.LatentMoEModel")

# Tiny dimensions (fixtures/tiny/config.json): hidden_size 24; routed experts work at latent width
# routed_expert_hidden_size 12 with hidden moe_intermediate_size 13; shared experts use
# intermediate_size 26 (our reading: the config does not name the shared hidden width);
# num_shared_experts 2; num_experts_per_token 2; rms_norm_eps 1e-5.
EXPORTS = {
    "channel_expert_tiny": "KimiK3.ExpertGraph.model 24 13 24",
    "channel_latent_moe_tiny": "KimiK3.MoEModel.model 24 12 26 13 2 2 (0.00001 : Float)",
}


@lru_cache(maxsize=1)
def run() -> dict[str, dict]:
    """One Lean run of the exports; the exported documents."""
    exports = "\n".join(
        f'#eval IO.println (KimiK3.Model.toJson "{name}" ({expr} : KimiK3.Model Float))'
        for name, expr in EXPORTS.items()
    )
    source = bundle(REPO, dependency_order(REPO, TARGETS)) + "\n" + exports + "\n"
    texts = [m.text for m in run_lean(source, "ChannelExports") if m.severity == "information"]
    docs = {}
    for t in texts:
        if t.lstrip().startswith("{"):
            doc = json.loads(t)
            docs[doc["name"]] = doc
    return docs


def test_exports_validate():
    docs = run()
    assert set(docs) == set(EXPORTS)
    schema = load_schema(REPO)
    for doc in docs.values():
        validate(doc, schema)
    expert = docs["channel_expert_tiny"]
    assert [p["shape"] for p in expert["params"]] == [[24, 13], [24, 13], [13, 24]]
    assert [i["name"] for i in expert["inputs"]] == ["input", "gateCap", "upCap"]
    ops = [n["op"] for n in expert["nodes"]]
    assert "sigmoid" in ops and ops.count("tanh") == 2  # SiTU from primitive nodes, not opaque
    moe = docs["channel_latent_moe_tiny"]
    assert moe["outputs"][0]["shape"] == [24]


def test_committed_exports_match():
    docs = run()
    for name, doc in docs.items():
        path = REPO / "fixtures" / "graphs" / f"{name}.json"
        assert path.exists(), f"{path} missing: run python tests/test_channel.py"
        assert json.loads(path.read_text(encoding="utf-8")) == doc


if __name__ == "__main__":
    documents = run()
    out = REPO / "fixtures" / "graphs"
    out.mkdir(parents=True, exist_ok=True)
    for name, doc in documents.items():
        path = out / f"{name}.json"
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(path)
