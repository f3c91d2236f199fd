"""Tests of `codegen`: bundling, the export manifest, schema validation, and `k3spec export`."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import shutil
import struct
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from codegen.bundle import EvaluationError, bundle, dependency_order, strip_header
import codegen.export
from codegen.export import ExportError, export, export_key, load_manifest, load_schema, render, stale, validate, write
from k3spec.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
GRAPHS = ROOT / "fixtures" / "graphs"


def float_of_bits(bits: str) -> float:
    """The binary64 value of a `float64_bits` attribute."""
    return struct.unpack("<d", struct.pack("<Q", int(bits)))[0]


def test_strip_header_drops_module_lines() -> None:
    src = "module\n\npublic import KimiK3.Core.Kernel\n\n@[expose] public section\n\ndef x := 1\n"
    assert strip_header(src).split() == ["def", "x", ":=", "1"]


def test_bundle_has_no_imports_and_keeps_dependency_order() -> None:
    order = dependency_order(ROOT, ("KimiK3.Core.Json",))
    assert order.index("KimiK3.Core.Scalar") < order.index("KimiK3.Core.Kernel") < order.index("KimiK3.Core.Json")
    text = bundle(ROOT, order)
    assert "import " not in text
    assert "def Model.toJson" in text


def test_dependency_order_names_an_unknown_module() -> None:
    with pytest.raises(EvaluationError, match="KimiK3.Nope is not a module"):
        dependency_order(ROOT, ("KimiK3.Nope",))


def test_manifest_produces_exactly_the_committed_graph_files() -> None:
    names = [e.name for e in load_manifest(ROOT).entries]
    assert len(names) == len(set(names))
    files = {e.file_name for e in load_manifest(ROOT).entries}
    assert files == {p.name for p in [*GRAPHS.glob("*.json"), *GRAPHS.glob("*.json.gz")]}


def test_gzip_entries_are_written_without_a_timestamp_and_checked_decompressed(tmp_path: Path) -> None:
    """A `gzip = true` entry is committed as `<name>.json.gz`: written twice, byte-identical (no
    mtime in the header); `stale` compares its decompressed text and names a changed file."""
    root = _root_with_manifest(tmp_path, '[[graph]]\nname = "big"\njson = "s"\nmodules = ["M"]\nconfig = "x"\ngzip = true\n')
    (path,) = write(root, {"big": '{"a": 1}\n'})
    assert path.name == "big.json.gz"
    first = path.read_bytes()
    write(root, {"big": '{"a": 1}\n'})
    assert path.read_bytes() == first and gzip.decompress(first) == b'{"a": 1}\n'
    assert stale(root, {"big": '{"a": 1}\n'}) == []
    assert stale(root, {"big": '{"a": 2}\n'}) == [
        "fixtures/graphs/big.json.gz: differs from a fresh export (run `k3spec export`)"]


def _root_with_manifest(tmp_path: Path, text: str) -> Path:
    (tmp_path / "codegen").mkdir()
    (tmp_path / "codegen" / "exports.toml").write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[graph]]\nname = "a b"\n', "`name` must be a file stem"),
        ('[[graph]]\nname = "a"\nmodules = ["M"]\nconfig = "x"\n', "exactly one of `model`"),
        ('[[graph]]\nname = "a"\nmodel = "m"\nconfig = "x"\n', "`modules` must be a non-empty list"),
        ('[[graph]]\nname = "a"\nmodel = "m"\nmodules = ["M"]\n', "`config`"),
        ('[[graph]]\nname = "a"\nmodel = "m"\nmodules = ["M"]\nconfig = "x"\nshape = 1\n', "unknown field"),
        ('[[graph]]\nname = "a"\nmodel = "m"\nmodules = ["M"]\nconfig = "x"\ngzip = "yes"\n', "`gzip` must be true or false"),
        ('[[graph]]\nname = "a"\nmodel = "m"\nmodules = ["M"]\nconfig = "x"\n' * 2, "defined twice"),
        ("graph = 3\n[x\n", "exports.toml"),
    ],
)
def test_manifest_faults_name_the_entry_and_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ExportError, match=message):
        load_manifest(_root_with_manifest(tmp_path, text))


def test_unknown_only_name_is_an_error() -> None:
    with pytest.raises(ExportError, match="not in the manifest: nope"):
        load_manifest(ROOT).select(("nope",))


def test_render_writes_every_entry_to_a_file(tmp_path: Path) -> None:
    entries = load_manifest(ROOT).select(("linear_softmax", "rms_mlp"))
    text = render(ROOT, entries, tmp_path)
    for e in entries:
        assert f'#eval! IO.FS.writeFile "{tmp_path / (e.name + ".json")}"' in text
    assert 'KimiK3.Model.toJson "rms_mlp" (KimiK3.Examples.rmsMlp 1e-6 2 4 : KimiK3.Model Float)' in text


def test_export_key_covers_the_terms_and_the_library(tmp_path: Path) -> None:
    entries = load_manifest(ROOT).select(("linear_softmax",))
    key = export_key(ROOT, entries)
    assert export_key(ROOT, entries) == key
    changed = [dataclasses.replace(entries[0], expr="KimiK3.Examples.linearSoftmax 4 2")]
    assert export_key(ROOT, changed) != key
    for name in ("lean", "codegen", "fixtures"):
        shutil.copytree(ROOT / name, tmp_path / name)
    examples = tmp_path / "lean" / "KimiK3" / "Core" / "Examples.lean"
    examples.write_text(examples.read_text() + "\n/-- A definition the old key did not see. -/\ndef extra : Nat := 1\n")
    assert export_key(tmp_path, entries) != key


@pytest.mark.lean
def test_a_second_export_of_the_same_sources_runs_no_lean(fresh_exports: dict[str, str], monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the export ran Lean for sources it had exported")

    monkeypatch.setattr(codegen.export, "run_lean", refuse)
    assert export(ROOT) == fresh_exports


@pytest.mark.parametrize("path", sorted(GRAPHS.glob("*.json")), ids=lambda p: p.stem)
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
@pytest.mark.slow
def test_export_check_passes_on_the_committed_files(fresh_exports: dict[str, str]) -> None:
    assert stale(ROOT, fresh_exports) == []


@pytest.mark.lean
@pytest.mark.slow
def test_export_check_names_a_file_changed_by_one_byte(fresh_exports: dict[str, str], tmp_path: Path) -> None:
    shutil.copytree(ROOT / "fixtures" / "graphs", tmp_path / "fixtures" / "graphs")
    target = tmp_path / "fixtures" / "graphs" / "attnres_tiny.json"
    data = bytearray(target.read_bytes())
    data[-2] = ord(" ") if data[-2] != ord(" ") else ord("\t")
    target.write_bytes(bytes(data))
    (tmp_path / "fixtures" / "graphs" / "extra.json").write_text("{}\n")
    assert stale(tmp_path, fresh_exports) == [
        "fixtures/graphs/attnres_tiny.json: differs from a fresh export (run `k3spec export`)",
        "fixtures/graphs/extra.json: not produced by any entry of codegen/exports.toml",
    ]


@pytest.mark.lean
@pytest.mark.slow
def test_exported_examples_keep_their_sharing(fresh_exports: dict[str, str]) -> None:
    lin = json.loads(fresh_exports["linear_softmax"])
    # `probs` uses h = x W through let1 (one vecMatMul); `hidden` repeats the term (a second one)
    assert [n["op"] for n in lin["nodes"]].count("vecMatMul") == 2
    assert [o["name"] for o in lin["outputs"]] == ["probs", "hidden"]
    rms = json.loads(fresh_exports["rms_mlp"])
    (norm,) = [n for n in rms["nodes"] if n["op"] == "rmsNormLast"]
    assert float_of_bits(norm["attrs"]["eps"]["float64_bits"]) == 1e-6
    mix = json.loads(fresh_exports["layout_mix"])
    # the let1-bound transpose is emitted once per let1 (two outputs, two bindings)
    assert [n["op"] for n in mix["nodes"]] == ["concat0", "swapAxes01", "reshape", "concat0", "swapAxes01", "meanLast"]


@pytest.mark.lean
def test_export_check_cli_fails_on_a_changed_file(fresh_exports: dict[str, str], tmp_path: Path) -> None:
    for name in ("lean", "codegen", "fixtures"):
        shutil.copytree(ROOT / name, tmp_path / name)
    target = tmp_path / "fixtures" / "graphs" / "linear_softmax.json"
    target.write_text(target.read_text().replace('"linear_softmax"', '"linear_softmaX"', 1))
    result = CliRunner().invoke(cli_main, ["export", "--root", str(tmp_path), "--check", "--only", "linear_softmax"])
    assert result.exit_code == 1
    assert "error: fixtures/graphs/linear_softmax.json: differs from a fresh export" in result.output
    result = CliRunner().invoke(cli_main, ["export", "--root", str(tmp_path), "--only", "linear_softmax"])
    assert result.exit_code == 0, result.output
    assert target.read_text() == fresh_exports["linear_softmax"]  # rewritten: `--check` would pass
