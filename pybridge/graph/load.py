"""Read and check a `k3spec.graph.v1` file (docs/graph-format.md).

`load_graph(path)` reads the file as JSON (nothing in it is ever executed), validates it
against `fixtures/graph.schema.json`, then checks it node by node with the op table in
`shapes.py`: argument count and shapes, attributes, output shape, ids unique and defined
before use, outputs naming existing ids with their shapes. Float attributes are decoded
exactly from `float64_bits`. Every failure is a `GraphError` naming the file and the field
or node (id and op) at fault.
"""

import gzip
import json
import struct
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jsonschema
import jsonschema_rs

from pybridge.errors import GraphError
from pybridge.graph.shapes import OPS, Shape, ShapeMismatch

FORMAT = "k3spec.graph.v1"
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "graph.schema.json"
_MAX_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Value:
    """A param, input or output: `name`, `shape` (outermost axis first) and graph `id`."""

    name: str
    shape: Shape
    id: int


@dataclass(frozen=True)
class Node:
    """One operation; `attrs` holds decoded values (`float` for float attrs, `int` for `n`)."""

    id: int
    op: str
    args: tuple[int, ...]
    attrs: dict[str, float | int]
    shape: Shape


@dataclass(frozen=True)
class Graph:
    source: str
    name: str
    params: tuple[Value, ...]
    inputs: tuple[Value, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[Value, ...]


def binding_keys(values: tuple[Value, ...]) -> list[str]:
    """The dict key of each value: its name when unique in `values`, else `name[k]` for
    its k-th occurrence (exports may repeat a name, e.g. `slot.router` once per slot;
    `[` cannot occur in a graph name, so these keys never collide with a real name)."""
    counts = Counter(v.name for v in values)
    seen: Counter[str] = Counter()
    keys = []
    for v in values:
        keys.append(v.name if counts[v.name] == 1 else f"{v.name}[{seen[v.name]}]")
        seen[v.name] += 1
    return keys


def load_graph(path: str | Path) -> Graph:
    source = str(path)
    try:
        # `.json.gz`: a gzip-compressed graph (the paper-dimension export, fixtures/graphs)
        with (gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")) as f:
            data = f.read(_MAX_BYTES + 1)
    except (OSError, EOFError) as err:
        raise GraphError(f"{source}: cannot read graph file: {getattr(err, 'strerror', None) or err}") from None
    if len(data) > _MAX_BYTES:
        raise GraphError(f"{source}: graph file larger than {_MAX_BYTES} bytes")
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as err:
        raise GraphError(f"{source}: not UTF-8 text (byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise GraphError(f"{source}: not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except (ValueError, RecursionError) as err:
        raise GraphError(f"{source}: not valid JSON: {err}") from None
    return parse_graph(doc, source)


def parse_graph(doc: object, source: str) -> Graph:
    """Check a decoded JSON document; `source` names it in errors."""
    if not isinstance(doc, dict):
        raise GraphError(f"{source}: top level must be a JSON object, got {type(doc).__name__}")
    if "format" not in doc:
        raise GraphError(f"{source}: missing field 'format'")
    if doc["format"] != FORMAT:
        raise GraphError(f"{source}: field 'format': unsupported format version {_short(doc['format'])}; expected {FORMAT!r}")
    _check_schema(doc, source)
    params = _values(doc, "params", source)
    inputs = _values(doc, "inputs", source)
    outputs = _values(doc, "outputs", source)
    shapes: dict[int, Shape] = {}
    for v in params + inputs:
        _define(shapes, v.id, v.shape, source, f"id {v.id} ({v.name})")
    nodes = tuple(_node(raw, i, shapes, source) for i, raw in enumerate(doc["nodes"]))
    for i, out in enumerate(outputs):
        if out.id not in shapes:
            raise GraphError(f"{source}: outputs[{i}] ({out.name}): id {out.id} is not defined")
        if shapes[out.id] != out.shape:
            raise GraphError(
                f"{source}: outputs[{i}] ({out.name}): shape {list(out.shape)} but id {out.id} has shape {list(shapes[out.id])}"
            )
    return Graph(source, doc["name"], params, inputs, nodes, outputs)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _short(x: object, limit: int = 80) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@cache
def _validators() -> tuple[jsonschema_rs.Draft202012Validator, jsonschema.protocols.Validator]:
    """The schema's validators: jsonschema-rs (Rust) to decide, jsonschema to explain."""
    try:
        schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise GraphError(f"{SCHEMA_PATH}: cannot read the graph schema: {err}") from None
    return jsonschema_rs.Draft202012Validator(schema), jsonschema.Draft202012Validator(schema)


def _check_schema(doc: dict, source: str) -> None:
    # jsonschema walks every node through the schema's ten `if` clauses, building an error object
    # per clause that does not apply: about 20 s for the 150,000 nodes of the paper-dimension
    # decoder graph, which jsonschema-rs decides in well under a second. Only a document it
    # rejects is walked again by jsonschema, whose `best_match` names the field at fault.
    fast, explain = _validators()
    if fast.is_valid(doc):
        return
    error = jsonschema.exceptions.best_match(explain.iter_errors(doc))
    if error is None:
        return
    path = list(error.absolute_path)
    field = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(path)) or "top level"
    where = field
    if len(path) >= 2 and path[0] == "nodes" and isinstance(path[1], int):
        raw = doc["nodes"][path[1]]
        if isinstance(raw, dict):
            where += f" (node id {_short(raw.get('id'))}, op {_short(raw.get('op'))})"
    if path[-1:] == ["op"] and error.validator == "enum":
        message = f"unknown op {_short(error.instance)}"
    elif error.validator == "required":
        message = _short(error.message, 160)
    else:
        message = f"{_short(error.instance, 60)} fails schema rule '{error.validator}' ({_short(error.message, 160)})"
    raise GraphError(f"{source}: {where}: {message}")


def _int(x: object, source: str, field: str) -> int:
    if type(x) is not int:  # the schema's "integer" also admits 3.0
        raise GraphError(f"{source}: {field}: must be an integer, got {_short(x)}")
    return x


def _shape(x: list, source: str, field: str) -> Shape:
    return tuple(_int(n, source, f"{field}[{i}]") for i, n in enumerate(x))


def _values(doc: dict, key: str, source: str) -> tuple[Value, ...]:
    return tuple(
        Value(v["name"], _shape(v["shape"], source, f"{key}[{i}].shape"), _int(v["id"], source, f"{key}[{i}].id"))
        for i, v in enumerate(doc[key])
    )


def _define(shapes: dict[int, Shape], id_: int, shape: Shape, source: str, where: str) -> None:
    if id_ in shapes:
        raise GraphError(f"{source}: {where}: id {id_} is defined twice")
    shapes[id_] = shape


def _node(raw: dict, index: int, shapes: dict[int, Shape], source: str) -> Node:
    id_ = _int(raw["id"], source, f"nodes[{index}] (node id {_short(raw['id'])}, op {raw['op']}) field id")
    op = raw["op"]
    where = f"nodes[{index}] (node id {id_}, op {op})"
    spec = OPS.get(op)
    if spec is None:
        raise GraphError(f"{source}: {where}: unknown op {op!r}")
    args = tuple(_int(a, source, f"{where} field args[{j}]") for j, a in enumerate(raw["args"]))
    if len(args) != spec.arity:
        raise GraphError(f"{source}: {where}: takes {spec.arity} argument(s), got {len(args)}")
    for a in args:
        if a not in shapes:
            raise GraphError(f"{source}: {where}: argument id {a} is not defined before this node")
    attrs = _attrs(raw["attrs"], spec.attrs, source, where)
    shape = _shape(raw["shape"], source, f"{where} field shape")
    try:
        expected = spec.rule([shapes[a] for a in args], attrs, shape)
    except ShapeMismatch as err:
        raise GraphError(f"{source}: {where}: {err}") from None
    if expected != shape:
        raise GraphError(f"{source}: {where}: shape {list(shape)} but the op's rule gives {list(expected)}")
    _define(shapes, id_, shape, source, where)
    return Node(id_, op, args, attrs, shape)


def _attrs(raw: dict, kinds: dict[str, str], source: str, where: str) -> dict[str, float | int]:
    if set(raw) != set(kinds):
        raise GraphError(f"{source}: {where}: attributes {sorted(raw)} but the op takes {sorted(kinds)}")
    out: dict[str, float | int] = {}
    for name, kind in kinds.items():
        if kind == "nat":
            out[name] = _int(raw[name], source, f"{where} field attrs.{name}")
            if out[name] < 0:
                raise GraphError(f"{source}: {where} field attrs.{name}: must be >= 0")
        else:
            out[name] = _float64(raw[name], source, f"{where} field attrs.{name}")
    return out


def _float64(x: object, source: str, field: str) -> float:
    bits = x.get("float64_bits") if isinstance(x, dict) else None
    if not isinstance(bits, str) or not bits.isascii() or not bits.isdigit() or int(bits) >= 2**64:
        raise GraphError(f"{source}: {field}: needs {{'float64_bits': <decimal u64 string>}}, got {_short(x)}")
    return struct.unpack("<d", struct.pack("<Q", int(bits)))[0]


def check_bindings(graph: Graph, params: dict, inputs: dict) -> None:
    """Raise `GraphError` unless `params` / `inputs` hold exactly the graph's keys
    (see `binding_keys`), each bound to a tensor or array of the declared shape."""
    for kind, values, given in (("param", graph.params, params), ("input", graph.inputs, inputs)):
        if not isinstance(given, dict):
            raise GraphError(f"{graph.source}: {kind}s must be a dict from name to tensor, got {type(given).__name__}")
        keys = binding_keys(values)
        missing, extra = sorted(set(keys) - set(given)), sorted(set(given) - set(keys))
        if missing or extra:
            raise GraphError(f"{graph.source}: {kind}s: missing {missing}, unexpected {extra}")
        for key, v in zip(keys, values):
            shape = tuple(getattr(given[key], "shape", ()) or ())
            if not hasattr(given[key], "shape") or shape != v.shape:
                raise GraphError(f"{graph.source}: {kind} {key}: shape {list(shape)}, graph declares {list(v.shape)}")
