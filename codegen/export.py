"""`k3spec export`: every file of `fixtures/graphs/` from one manifest (`codegen/exports.toml`).

Each manifest entry names a Lean term (a `Model Float`, or a library `String` definition holding
the document) and the library modules it needs. The exporter bundles those modules
(`codegen.bundle`), appends one `#eval` per entry that writes the entry's `k3spec.graph.v1`
document to a file (a file, not a message: the offline Lean truncates long messages), runs
Lean, validates every document against `fixtures/graph.schema.json` and the cross-references the
schema cannot express, and writes it as `fixtures/graphs/<name>.json` (two-space indented JSON).
All the selected entries share one Lean run, on the union of their modules: measured on the 18
graphs, one run takes 159 s of CPU and 1.6 GB, where one run per set of modules (11 runs) took
293 s of CPU, since their dependency closures overlap (docs/benchmarks-lean.md).

`--check` exports into a temporary folder and compares byte by byte with the committed files,
naming every file that differs, is missing, or is not in the manifest.

A run's validated documents are kept in `exports/<key>/` beside the object store, keyed by the
generated Lean file (bundle, terms), the toolchain, the schema and this code; a second export of
the same sources reads them back without a Lean run.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import jsonschema
import jsonschema_rs

from k3spec import toolchain
from k3spec.build import object_store

from .bundle import EvaluationError, bundle, dependency_order, run_lean

TEMPLATES = Path(__file__).parent / "templates"
MANIFEST = Path("codegen") / "exports.toml"
SCHEMA_PATH = Path("fixtures") / "graph.schema.json"
GRAPHS = Path("fixtures") / "graphs"


class ExportError(RuntimeError):
    """A bad manifest, a Lean failure, an invalid document, or (with `--check`) stale files."""


@dataclass(frozen=True)
class Entry:
    """One exported file: `fixtures/graphs/<name>.json` from the Lean term `expr`."""

    name: str
    kind: str  # "model": a `Model Float`; "json": a `String` holding the document
    expr: str
    modules: tuple[str, ...]
    config: str
    gzip: bool = False  # committed as `<name>.json.gz` (the paper-dimension graph: 13 MB of JSON)

    @property
    def file_name(self) -> str:
        """The committed file's name under `fixtures/graphs/`."""
        return f"{self.name}.json.gz" if self.gzip else f"{self.name}.json"

    def lean_string(self) -> str:
        """A Lean term of type `String`: the document."""
        if self.kind == "model":
            return f'(KimiK3.Model.toJson "{self.name}" ({self.expr} : KimiK3.Model Float))'
        return f"({self.expr} : String)"


@dataclass
class Manifest:
    """The entries of `codegen/exports.toml`, in file order."""

    entries: list[Entry] = field(default_factory=list)

    def select(self, only: tuple[str, ...]) -> list[Entry]:
        names = {e.name for e in self.entries}
        unknown = [n for n in only if n not in names]
        if unknown:
            raise ExportError(f"not in the manifest: {', '.join(unknown)} (entries: {', '.join(sorted(names))})")
        return [e for e in self.entries if not only or e.name in only]


def load_manifest(root: Path) -> Manifest:
    """Read and check the manifest; every fault names the entry and field."""
    path = root / MANIFEST
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ExportError(f"{path}: {err}") from err
    manifest = Manifest()
    seen: set[str] = set()
    for i, raw in enumerate(doc.get("graph", [])):
        where = f"{path}: graph entry {i + 1}"
        name = raw.get("name")
        if not isinstance(name, str) or not name.replace("_", "").isalnum():
            raise ExportError(f"{where}: `name` must be a file stem of letters, digits and '_', got {name!r}")
        where = f"{path}: graph {name!r}"
        if name in seen:
            raise ExportError(f"{where}: defined twice")
        seen.add(name)
        kinds = [k for k in ("model", "json") if k in raw]
        if len(kinds) != 1:
            raise ExportError(f"{where}: give exactly one of `model` (a Model Float) or `json` (a String)")
        modules = raw.get("modules")
        if not isinstance(modules, list) or not modules or not all(isinstance(m, str) for m in modules):
            raise ExportError(f"{where}: `modules` must be a non-empty list of module names")
        if not isinstance(raw.get("config"), str):
            raise ExportError(f"{where}: `config` (the configuration whose dimensions it uses) is missing")
        if not isinstance(raw.get("gzip", False), bool):
            raise ExportError(f"{where}: `gzip` must be true or false")
        unknown = set(raw) - {"name", "model", "json", "modules", "config", "gzip"}
        if unknown:
            raise ExportError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        manifest.entries.append(Entry(name, kinds[0], raw[kinds[0]], tuple(modules), raw["config"], raw.get("gzip", False)))
    if not manifest.entries:
        raise ExportError(f"{path}: no [[graph]] entries")
    return manifest


def render(root: Path, entries: list[Entry], out_dir: Path) -> str:
    """The generated Lean file of one run: the bundle, then one file-writing `#eval` per entry."""
    targets = tuple(dict.fromkeys(m for e in entries for m in e.modules))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template("export.lean.j2").render(
        bundle=bundle(root, dependency_order(root, targets)),
        entries=[{"name": e.name, "term": e.lean_string(), "path": json.dumps(str(out_dir / f"{e.name}.json"))} for e in entries],
    )


def load_schema(root: Path) -> dict:
    """The JSON Schema of the graph format."""
    return json.loads((root / SCHEMA_PATH).read_text(encoding="utf-8"))


def validate(doc: dict, schema: dict) -> None:
    """Check a document against the schema and the cross-references the schema cannot express.

    Raises `jsonschema.ValidationError` or `ValueError`.
    """
    # jsonschema-rs decides (seconds faster on the paper-dimension graph, pybridge/graph/load.py);
    # jsonschema raises the error of a document it rejects.
    if not jsonschema_rs.Draft202012Validator(schema).is_valid(doc):
        jsonschema.validate(doc, schema)
    defined = {e["id"]: e["shape"] for e in doc["params"] + doc["inputs"]}
    for node in doc["nodes"]:
        for arg in node["args"]:
            if arg not in defined:
                raise ValueError(f"node {node['id']} uses id {arg} before it is defined")
        if node["id"] in defined:
            raise ValueError(f"id {node['id']} defined twice")
        defined[node["id"]] = node["shape"]
    for out in doc["outputs"]:
        if defined.get(out["id"]) != out["shape"]:
            raise ValueError(f"output {out['name']} does not match the shape of id {out['id']}")


def text_of(doc: dict) -> str:
    """The committed form of a document."""
    return json.dumps(doc, indent=2) + "\n"


def export_key(root: Path, entries: list[Entry]) -> str:
    """What one Lean run's documents depend on: the generated file (with a fixed output folder),
    the toolchain, the schema and this code."""
    h = hashlib.sha256()
    for part in (render(root, entries, Path("/k3spec-export")), toolchain.find().identity,
                 (root / SCHEMA_PATH).read_text(encoding="utf-8"), Path(__file__).read_text(encoding="utf-8")):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _run(root: Path, entries: list[Entry], schema: dict) -> dict[str, str]:
    kept = object_store().parent / "exports" / export_key(root, entries)
    if kept.is_dir():
        return {e.name: (kept / f"{e.name}.json").read_text(encoding="utf-8") for e in entries}
    texts = _export(root, entries, schema)
    tmp = kept.with_name(kept.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, text in texts.items():
        (tmp / f"{name}.json").write_text(text, encoding="utf-8")
    try:
        tmp.rename(kept)
    except OSError:  # another export stored the same run first: same key, same documents
        shutil.rmtree(tmp, ignore_errors=True)
    return texts


def _export(root: Path, entries: list[Entry], schema: dict) -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="k3spec-export-", dir="/tmp") as tmp:
        source = render(root, entries, Path(tmp))
        try:
            run_lean(source, "Export")
        except EvaluationError as err:
            names = ", ".join(e.name for e in entries)
            raise ExportError(f"the Lean export of {names} failed:\n{err}") from err
        texts = {}
        for e in entries:
            path = Path(tmp) / f"{e.name}.json"
            if not path.is_file():
                raise ExportError(f"{e.name}: Lean wrote no document")
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                validate(doc, schema)
            except (json.JSONDecodeError, jsonschema.ValidationError, ValueError) as err:
                raise ExportError(f"{e.name}: the exported document is invalid: {str(err).splitlines()[0]}") from err
            if doc.get("name") != e.name:
                raise ExportError(f"{e.name}: the document is named {doc.get('name')!r}, not {e.name!r}")
            texts[e.name] = text_of(doc)
    return texts


def export(root: Path, only: tuple[str, ...] = (), progress=lambda s: None) -> dict[str, str]:
    """Run the exports and return each file's text by name (validated)."""
    entries = load_manifest(root).select(only)
    schema = load_schema(root)
    progress(f"export: {len(entries)} graph(s) in one Lean run")
    texts = _run(root, entries, schema)
    return {e.name: texts[e.name] for e in entries}


def file_names(root: Path) -> dict[str, str]:
    """Each manifest entry's committed file name under `fixtures/graphs/` (the manifest of `root`,
    or of this checkout for a folder that holds only graph files)."""
    source = root if (root / MANIFEST).is_file() else Path(__file__).resolve().parents[1]
    return {e.name: e.file_name for e in load_manifest(source).entries}


def committed_text(path: Path) -> str:
    """A committed graph file's JSON text (`.json.gz`: decompressed)."""
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes()).decode("utf-8")
    return path.read_text(encoding="utf-8")


def write(root: Path, texts: dict[str, str]) -> list[Path]:
    """Write `fixtures/graphs/<name>.json` (or `.json.gz`, as the manifest says) for each document;
    return the paths. Compressed files carry no timestamp, so a fresh export is byte for byte the
    committed one."""
    out = root / GRAPHS
    out.mkdir(parents=True, exist_ok=True)
    names = file_names(root)
    paths = []
    for name, text in texts.items():
        path = out / names[name]
        if path.suffix == ".gz":
            path.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
        else:
            path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def stale(root: Path, texts: dict[str, str], only: tuple[str, ...] = ()) -> list[str]:
    """One line per committed file that differs from `texts`, is missing, or (for a full check)
    is a graph file the manifest does not produce."""
    problems = []
    names = file_names(root)
    for name, text in texts.items():
        path = root / GRAPHS / names[name]
        if not path.is_file():
            problems.append(f"{path.relative_to(root)}: missing (run `k3spec export`)")
        elif committed_text(path) != text:
            problems.append(f"{path.relative_to(root)}: differs from a fresh export (run `k3spec export`)")
    if not only:
        produced = {names[n] for n in texts}
        for path in sorted([*(root / GRAPHS).glob("*.json"), *(root / GRAPHS).glob("*.json.gz")]):
            if path.name not in produced:
                problems.append(f"{path.relative_to(root)}: not produced by any entry of {MANIFEST}")
    return problems
