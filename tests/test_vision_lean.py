"""The Lean MoonViT-V2 configuration and parameter counts (lean/KimiK3/Vision/Config.lean) against
the fixtures and pybridge.

`Vision.VisionConfig.toJson` of (`tinyConfig`, `tinyVision`) and (`paperConfig`, `paperVision`) is
evaluated: every field must equal the fixture's `vision_config` entry, and the Lean parameter
counts (the checkpoint's tensor shapes summed in Lean) must equal pybridge's hand formula
`moonvit.encoder_parameter_count` (itself tested against the torch module built on the meta
device), at the tiny configuration (every width distinct) and the paper one (401,214,464 and
571,111,424, also theorems checked by the build). The projector count is `4D·4D + T·4D + T`.

Evaluation uses `codegen`'s bundle, since the offline interpreter cannot run another module's code.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest
from helpers import lean_run

from pybridge.config import config_from_dict
from pybridge.moonvit import encoder_parameter_count

pytestmark = pytest.mark.lean

REPO = Path(__file__).resolve().parents[1]

VISION_EXPORTS = """
#eval! IO.println (KimiK3.Vision.VisionConfig.toJson KimiK3.tinyConfig KimiK3.Vision.tinyVision)
#eval! IO.println (KimiK3.Vision.VisionConfig.toJson KimiK3.paperConfig KimiK3.Vision.paperVision)
"""
COUNT_KEYS = {"k3spec_encoder_parameters", "k3spec_divided_encoder_parameters", "k3spec_projector_parameters"}


@lru_cache(maxsize=1)
def vision_docs() -> list[dict]:
    """One Lean run of `VisionConfig.toJson` on the tiny and the paper configuration."""
    out = lean_run(("KimiK3.Vision.Config",), VISION_EXPORTS, "VisionConfig")
    assert len(out.docs) == 2, out.texts
    return out.docs


@pytest.mark.parametrize("index, name", [(0, "tiny"), (1, "paper")])
def test_vision_config_and_counts_match_fixture_and_pybridge(index: int, name: str) -> None:
    lean = vision_docs()[index]
    raw = json.loads((REPO / "fixtures" / name / "config.json").read_text(encoding="utf-8"))
    raw_vis = raw["vision_config"]
    for key in set(lean) - COUNT_KEYS:
        assert lean[key] == raw_vis[key], key
    vis = config_from_dict(raw).vision
    assert lean["k3spec_encoder_parameters"] == encoder_parameter_count(vis)
    assert lean["k3spec_divided_encoder_parameters"] == encoder_parameter_count(vis, attentions_per_block=2)
    merged = vis.merge_kernel_size[0] * vis.merge_kernel_size[1] * vis.hidden_size
    text = raw_vis["text_hidden_size"]
    assert lean["k3spec_projector_parameters"] == merged * merged + text * merged + text
    if name == "paper":
        assert (lean["k3spec_encoder_parameters"], lean["k3spec_divided_encoder_parameters"]) == (401214464, 571111424)
