"""Export named Lean models to `k3spec.graph.v1` JSON and validate them against the schema."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import jinja2
import jsonschema

from .bundle import bundle, run_lean

TEMPLATES = Path(__file__).parent / "templates"
SCHEMA_PATH = Path("fixtures") / "graph.schema.json"


@dataclass(frozen=True)
class ModelSpec:
    """A model to export: its file name and the Lean expression of a `Model Float`."""

    name: str
    expr: str


#: Small example graphs (defined in `KimiK3.Core.Examples`).
EXAMPLES = (
    ModelSpec("linear_softmax", "KimiK3.Examples.linearSoftmax 4 3"),
    ModelSpec("rms_mlp", "KimiK3.Examples.rmsMlp 1e-6 2 4"),
    ModelSpec("layout_mix", "KimiK3.Examples.layoutMix"),
)


def render(root: Path, models: tuple[ModelSpec, ...]) -> str:
    """The generated Lean file: the executable modules, then one `#eval` per model."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=True)
    return env.get_template("export.lean.j2").render(bundle=bundle(root), models=models)


def load_schema(root: Path) -> dict:
    """The JSON Schema of the graph format."""
    return json.loads((root / SCHEMA_PATH).read_text(encoding="utf-8"))


def validate(doc: dict, schema: dict) -> None:
    """Check a document against the schema and the cross-references the schema cannot express.

    Raises `jsonschema.ValidationError` or `ValueError`.
    """
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


def export(root: Path, models: tuple[ModelSpec, ...] = EXAMPLES) -> dict[str, dict]:
    """Run the generated file and return each model's validated JSON document by name."""
    messages = [m for m in run_lean(render(root, models), "Export") if m.severity == "information"]
    if len(messages) != len(models):
        raise RuntimeError(f"expected {len(models)} documents, Lean printed {len(messages)} messages")
    schema = load_schema(root)
    docs = {}
    for spec, msg in zip(models, messages):
        doc = json.loads(msg.text)
        validate(doc, schema)
        docs[spec.name] = doc
    return docs


def write(docs: dict[str, dict], out_dir: Path) -> list[Path]:
    """Write one `NAME.json` per document; return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, doc in docs.items():
        path = out_dir / f"{name}.json"
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        paths.append(path)
    return paths
