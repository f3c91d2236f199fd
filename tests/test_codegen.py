"""Tests of the `codegen` package: bundling, schema validation, and the Lean export."""

from __future__ import annotations

import copy
import json
import struct
from pathlib import Path

import jsonschema
import pytest

from codegen.bundle import bundle, strip_header
from codegen.export import EXAMPLES, export, load_schema, render, validate

ROOT = Path(__file__).resolve().parent.parent
GRAPHS = ROOT / "fixtures" / "graphs"


def float_of_bits(bits: str) -> float:
    """The binary64 value of a `float64_bits` attribute."""
    return struct.unpack("<d", struct.pack("<Q", int(bits)))[0]


def test_strip_header_drops_module_lines() -> None:
    src = "module\n\npublic import KimiK3.Core.Kernel\n\n@[expose] public section\n\ndef x := 1\n"
    assert strip_header(src).split() == ["def", "x", ":=", "1"]


def test_bundle_has_no_imports() -> None:
    text = bundle(ROOT)
    assert "import " not in text
    assert "def Model.toJson" in text


def test_render_lists_every_model() -> None:
    text = render(ROOT, EXAMPLES)
    for spec in EXAMPLES:
        assert f'"{spec.name}"' in text


@pytest.mark.parametrize("path", [GRAPHS / f"{spec.name}.json" for spec in EXAMPLES], ids=lambda p: p.stem)
def test_committed_graphs_validate(path: Path) -> None:
    validate(json.loads(path.read_text()), load_schema(ROOT))


def test_validate_rejects_use_before_definition() -> None:
    doc = json.loads((GRAPHS / "linear_softmax.json").read_text())
    bad = copy.deepcopy(doc)
    bad["nodes"][0]["args"] = [2, 999]
    with pytest.raises(ValueError):
        validate(bad, load_schema(ROOT))


def test_schema_rejects_unknown_op() -> None:
    doc = json.loads((GRAPHS / "linear_softmax.json").read_text())
    doc["nodes"][0]["op"] = "conv2d"
    with pytest.raises(jsonschema.ValidationError):
        validate(doc, load_schema(ROOT))


@pytest.mark.lean
def test_export_examples_validate_and_keep_sharing() -> None:
    docs = export(ROOT)
    assert set(docs) == {spec.name for spec in EXAMPLES}
    lin = docs["linear_softmax"]
    # `probs` uses h = x W through let1 (one vecMatMul); `hidden` repeats the term (a second one)
    assert [n["op"] for n in lin["nodes"]].count("vecMatMul") == 2
    assert [o["name"] for o in lin["outputs"]] == ["probs", "hidden"]
    rms = docs["rms_mlp"]
    (norm,) = [n for n in rms["nodes"] if n["op"] == "rmsNormLast"]
    assert float_of_bits(norm["attrs"]["eps"]["float64_bits"]) == 1e-6
    mix = docs["layout_mix"]
    # the let1-bound transpose is emitted once per let1 (two outputs, two bindings)
    assert [n["op"] for n in mix["nodes"]] == ["concat0", "swapAxes01", "reshape", "concat0", "swapAxes01", "meanLast"]
