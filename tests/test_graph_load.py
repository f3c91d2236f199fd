"""Graph loader: every fixture loads; malformed files give a GraphError naming file, field, node."""

import json
import struct
from pathlib import Path

import jsonschema
import pytest
from helpers import GRAPH_FILES, GRAPHS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybridge.errors import GraphError, K3Error
from pybridge.graph import load
from pybridge.graph.load import binding_keys, load_graph

EXPERT = GRAPHS / "channel_expert_tiny.json"


def _bits(x: float) -> str:
    return str(struct.unpack("<Q", struct.pack("<d", x))[0])


@pytest.mark.parametrize("path", GRAPH_FILES, ids=lambda p: p.name)
def test_fixture_loads(path: Path) -> None:
    doc = json.loads(path.read_text())
    g = load_graph(path)
    assert g.name == doc["name"]
    assert [n.id for n in g.nodes] == [n["id"] for n in doc["nodes"]]
    for node, raw in zip(g.nodes, doc["nodes"]):
        for key, attr in raw["attrs"].items():
            if isinstance(attr, dict):  # float attribute: the decoded value has exactly these bits
                assert _bits(node.attrs[key]) == attr["float64_bits"]
    assert len(set(binding_keys(g.params))) == len(g.params)


def test_graph_error_is_k3error() -> None:
    assert issubclass(GraphError, K3Error)


def test_float_attr_decoded_exactly(tmp_path: Path) -> None:
    doc = json.loads(EXPERT.read_text())
    x = 0.1 + 0.2  # not representable by a short decimal display
    doc["nodes"].append({"id": 99, "op": "scale", "attrs": {"c": {"float64_bits": _bits(x), "display": "0.3"}},
                         "args": [21], "shape": [24]})
    doc["outputs"] = [{"name": "output", "shape": [24], "id": 99}]
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    assert load_graph(path).nodes[-1].attrs["c"] == x


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    return path


def _node(doc: dict, node_id: int) -> dict:
    return next(n for n in doc["nodes"] if n["id"] == node_id)


CASES = {
    "unknown op": (lambda d: _node(d, 11).update(op="gelu"), ["node id 11", "gelu", "unknown op"]),
    "format version": (lambda d: d.update(format="k3spec.graph.v2"), ["format", "k3spec.graph.v2"]),
    "missing field": (lambda d: d.pop("nodes"), ["nodes"]),
    "missing node field": (lambda d: _node(d, 10).pop("shape"), ["node id 10", "shape"]),
    "wrong shape": (lambda d: _node(d, 6).update(shape=[12]), ["node id 6", "vecMatMul", "[13]"]),
    "arg shape mismatch": (lambda d: _node(d, 10).update(args=[6, 3]), ["node id 10", "div", "differ"]),
    "dangling arg": (lambda d: _node(d, 11).update(args=[500]), ["node id 11", "tanh", "500"]),
    "use before def": (lambda d: _node(d, 6).update(args=[21, 0]), ["node id 6", "21"]),
    "duplicate id": (lambda d: _node(d, 7).update(id=6), ["6", "twice"]),
    "dangling output": (lambda d: d["outputs"][0].update(id=777), ["outputs[0]", "777"]),
    "output shape": (lambda d: d["outputs"][0].update(shape=[23]), ["outputs[0]", "[23]"]),
    "float id": (lambda d: _node(d, 6).update(id=6.0), ["nodes[0] (node id 6.0, op vecMatMul) field id", "integer"]),
    "string id": (lambda d: _node(d, 6).update(id="6"), ["node id '6'"]),
    "missing attr": (lambda d: _node(d, 8).update(attrs={}), ["node id 8", "broadcast"]),
    "float bits overflow": (
        lambda d: d["nodes"].append({"id": 50, "op": "scale", "attrs": {"c": {"float64_bits": "99999999999999999999"}},
                                     "args": [21], "shape": [24]}),
        ["node id 50", "scale", "float64_bits"],
    ),
    "no format field": (lambda d: d.clear() or d.update(x=1), ["format"]),
}


@pytest.mark.parametrize("case", CASES)
def test_malformed_names_the_fault(tmp_path: Path, case: str) -> None:
    mutate, fragments = CASES[case]
    doc = json.loads(EXPERT.read_text())
    mutate(doc)
    path = _write(tmp_path, doc)
    with pytest.raises(GraphError) as err:
        load_graph(path)
    msg = str(err.value)
    assert str(path) in msg
    for fragment in fragments:
        assert fragment in msg, msg


@pytest.mark.parametrize("data", [b"", b"{", b"\xff\xfe\x00", b"[1, 2]", b'{"format": NaN}', b"[" * 100000, b"null"])
def test_not_a_graph(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(data)
    with pytest.raises(GraphError, match=str(path)):
        load_graph(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GraphError, match="cannot read"):
        load_graph(tmp_path / "absent.json")


# ---- property: any mutation of a valid file gives GraphError or a valid graph, never another exception

_JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=8),
    st.lists(st.integers(-3, 30), max_size=4), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _paths(x: object, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside a JSON document."""
    out = [prefix]
    if isinstance(x, dict):
        for k, v in x.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            out += _paths(v, prefix + (i,))
    return out


def _mutate(doc: object, path: tuple, how: str, junk: object) -> object:
    if not path:
        return junk
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    if how == "drop":
        del parent[path[-1]]
    else:
        parent[path[-1]] = junk
    return doc


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutations_never_crash(tmp_path: Path, data: st.DataObject) -> None:
    src = data.draw(st.sampled_from(GRAPH_FILES))
    doc = json.loads(src.read_text())
    paths = _paths(doc)
    path = data.draw(st.sampled_from(paths))
    how = data.draw(st.sampled_from(["drop", "replace"]) if path else st.just("replace"))
    junk = data.draw(_JUNK)
    doc = _mutate(doc, path, how, junk)
    target = tmp_path / "m.json"
    if data.draw(st.booleans()):
        target.write_text(json.dumps(doc))
    else:  # truncated or corrupted bytes
        raw = json.dumps(doc).encode()
        cut = data.draw(st.integers(0, len(raw)))
        target.write_bytes(raw[:cut] + data.draw(st.binary(max_size=4)))
    try:
        load_graph(target)
    except GraphError as err:
        msg = str(err)
        assert str(target) in msg
        blamed = [i for i, n in enumerate(doc.get("nodes", []) if isinstance(doc, dict) and isinstance(doc.get("nodes"), list) else [])
                  if f"nodes[{i}]" in msg and isinstance(n, dict) and "id" in n and "op" in n]
        for i in blamed:  # a node the message blames is named by id and op
            assert f"node id {doc['nodes'][i]['id']!r}".replace("'", "") in msg.replace("'", ""), msg


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_both_schema_validators_agree_on_mutated_documents(data: st.DataObject) -> None:
    """The loader lets jsonschema-rs decide and jsonschema explain (`load._validators`): on any
    mutation of a committed graph they accept and reject the same documents."""
    fast, explain = load._validators()
    doc = json.loads(data.draw(st.sampled_from(GRAPH_FILES)).read_text())
    path = data.draw(st.sampled_from(_paths(doc)))
    how = data.draw(st.sampled_from(["drop", "replace"]) if path else st.just("replace"))
    doc = _mutate(doc, path, how, data.draw(_JUNK))
    assert fast.is_valid(doc) == (jsonschema.exceptions.best_match(explain.iter_errors(doc)) is None)


def test_unknown_op_before_schema_names_node(tmp_path: Path) -> None:
    doc = json.loads(EXPERT.read_text())
    _node(doc, 21).update(op="matmul_fast", attrs={"k": 1})
    with pytest.raises(GraphError) as err:
        load_graph(_write(tmp_path, doc))
    assert "node id 21" in str(err.value) and "matmul_fast" in str(err.value)
