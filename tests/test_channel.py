"""Channel mixers (lean/KimiK3/Channel): Float worked examples and graph exports, run in Lean.

Exact results (router weights 3/7 and 4/7, top-k routes and the route checker, the toy expert's
wiring, the App. C counterexample) are theorems checked by the build. This file evaluates the
Float examples of k3-spec §2.6–2.7 and exports the expert graph and the Stable LatentMoE graph
(for a fixed route) on the tiny dimensions, validating them against `fixtures/graph.schema.json`.

Evaluation uses `codegen`'s bundle (the modules' sources concatenated into one standalone file),
since the offline interpreter cannot run compiled code of another module.

`python tests/test_channel.py` rewrites `fixtures/graphs/channel_*.json`.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.lean

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from helpers import lean_run  # noqa: E402

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

CHECKS = """
namespace KimiK3.ChannelChecks
open KimiK3

/-- Toy expert of k3-spec §2.6: G = I, U = diag(2, 3), D = [[1], [-1]]. -/
def toyExpert : Expert Float 2 2 1 where
  gateWeight := fun i j => if i.val = j.val then 1 else 0
  upWeight := fun i j => if i.val = j.val then (if i.val = 0 then 2 else 3) else 0
  downWeight := fun j _ => if j.val = 0 then 1 else -1
def toyInput : Tensor Float [2] := fun i => if i.val = 0 then 1 else 2
def routerScores : Tensor Float [4] := fun e =>
  if e.val = 0 then 0.8 else if e.val = 1 then 0.7 else if e.val = 2 then 0.6 else 0.2
def routerBias : Tensor Float [4] := fun e => if e.val = 2 then 0.3 else 0

#eval softCap (4 : Float) 2
#eval SiTU.scalar (4 : Float) 25 2 6
#eval SiTU.scalar (4 : Float) 25 1 2
#eval toyExpert.forward 4 25 toyInput 0
#eval (Router.route routerScores routerBias (k := 2) (by decide) 0).val
#eval (Router.route routerScores routerBias (k := 2) (by decide) 1).val
#eval Router.mixtureWeights routerScores (Router.route routerScores routerBias (k := 2) (by decide)) 0
#eval Router.mixtureWeights routerScores (Router.route routerScores routerBias (k := 2) (by decide)) 1
end KimiK3.ChannelChecks
"""

# softCap 4 2, SiTU(4,25,2,6), SiTU(4,25,1,2), toy expert y0, route slots (2, 0), weights 3/7, 4/7
EXPECTED = [1.848469, 9.585417, 1.429351, -8.156066, 2, 0, 3 / 7, 4 / 7]


@lru_cache(maxsize=1)
def run() -> tuple[list[str], dict[str, dict]]:
    """One Lean run: the worked examples' printed values and the exported documents."""
    exports = "\n".join(
        f'#eval IO.println (KimiK3.Model.toJson "{name}" ({expr} : KimiK3.Model Float))'
        for name, expr in EXPORTS.items()
    )
    out = lean_run(TARGETS, CHECKS + "\n" + exports, "ChannelChecks")
    return out.texts, out.by_name()


def test_float_worked_examples():
    values, _ = run()
    assert len(values) == len(EXPECTED), values
    for text, want in zip(values, EXPECTED):
        got = float(re.sub(r"[^0-9eE+\-.]", "", text))
        assert got == pytest.approx(want, abs=2e-6), (text, want)


def test_exports_validate():
    _, docs = run()
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
    _, docs = run()
    for name, doc in docs.items():
        path = REPO / "fixtures" / "graphs" / f"{name}.json"
        assert path.exists(), f"{path} missing: run python tests/test_channel.py"
        assert json.loads(path.read_text(encoding="utf-8")) == doc


if __name__ == "__main__":
    _, documents = run()
    out = REPO / "fixtures" / "graphs"
    out.mkdir(parents=True, exist_ok=True)
    for name, doc in documents.items():
        path = out / f"{name}.json"
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(path)
