"""The Lean side: one generated Lean file per batch of cases, with a cache of its results.

`lean --run` does not work offline and `#eval` cannot run code of imported modules there, so
the file is a *bundle*: the library modules the components need (`codegen.bundle`, sources in
dependency order) followed by a Jinja2-rendered section (templates/batch.lean.j2 and one
`<component>.lean.j2` per component) that decodes each case's inputs from float64 bit patterns
and `#eval`s the component's reference function, printing exact result bits as JSON lines.
The same file runs unchanged on a native Lean toolchain (`k3spec.toolchain.find`).

Cache: `$DIFFTEST_CACHE`, else `<K3SPEC_HOME>/difftest-cache`; one JSON file per case, keyed by
the hash of the bundled Lean sources, the templates and the case's inputs. `use_cache=False`
(or a fresh machine) runs Lean for real.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import jinja2
import numpy as np

from codegen.bundle import bundle, dependency_order, run_lean
from difftest.case import Case, bits_float, hex_bits
from k3spec.toolchain import cache_root

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = Path(__file__).resolve().parent / "templates"
ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


class LeanEvaluationError(RuntimeError):
    """Lean rejected the generated file, or printed something unexpected."""


def cache_dir() -> Path:
    env = os.environ.get("DIFFTEST_CACHE")
    return Path(env) if env else cache_root() / "difftest-cache"


class TensorRefs(dict):
    """Lean expressions of a case's tensors inside the packed array `A` (name -> expression):
    array-backed tensors `Exec.Arr.ofArrayAtF A offset [shape]`, scalars `Exec.arrayGetD A offset 0`."""

    def __init__(self, case: Case) -> None:
        super().__init__()
        self.offsets: dict[str, int] = {}
        offset = 0
        for name, t in case.tensors.items():
            self.offsets[name] = offset
            if t.ndim == 0:
                self[name] = f"(Exec.arrayGetD A {offset} 0)"
            else:
                self[name] = f"(Exec.Arr.ofArrayAtF A {offset} {_shape(t.shape)})"
            offset += t.size

    def at(self, name: str, index: str, case: Case) -> str:
        """Expression for slice `index` (a Lean Nat expression) of a stacked tensor `name`."""
        t = case.tensors[name]
        if t.ndim < 2:
            raise ValueError(f"tensor {name} of rank {t.ndim} cannot be sliced")
        size = int(np.prod(t.shape[1:]))
        return f"(Exec.Arr.ofArrayAtF A ({self.offsets[name]} + ({index}) * {size}) {_shape(t.shape[1:])})"


def _shape(dims: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(n) for n in dims) + "]"


def _flat_hex(case: Case) -> str:
    return "".join(hex_bits(t) for t in case.tensors.values())


def render_body(component, case: Case, key: str) -> str:
    """The component's Lean section for one case (its `<template>.lean.j2`); it prints `key`."""
    template = ENV.get_template(f"{component.template}.lean.j2")
    refs = TensorRefs(case)
    return template.render(T=refs, off=refs.offsets, key=key, case=case, s=case.sizes, **component.lean_context(case))


def library_bundle(targets: tuple[str, ...]) -> str:
    """The library modules `targets` need, as one file: exactly the checked sources."""
    return bundle(REPO, dependency_order(REPO, targets))


def _sources_hash(targets: tuple[str, ...]) -> str:
    h = hashlib.sha256(library_bundle(targets).encode())
    for path in sorted(TEMPLATES.glob("*.lean.j2")):
        h.update(path.read_bytes())
    return h.hexdigest()


def case_key(component, case: Case, sources_hash: str) -> str:
    """The cache key of one case: the library and templates, the component, the case's tensors,
    and its rendered Lean section, which holds every configuration value the leg passes in (so a
    changed configuration file is a cache miss)."""
    body = render_body(component, case, "key")
    return hashlib.sha256((sources_hash + component.name + case.digest() + body).encode()).hexdigest()[:32]


def item_keys(items: list[tuple[object, Case]]) -> list[str]:
    """The cache key of each (component, case). A case's key covers its own component's modules,
    not the batch's union: its result does not depend on which components share its Lean run."""
    hashes = {t: _sources_hash(t) for t in dict.fromkeys(tuple(c.lean_targets) for c, _ in items)}
    return [case_key(c, case, hashes[tuple(c.lean_targets)]) for c, case in items]


def render_batch(items: list[tuple[object, Case]], targets: tuple[str, ...]) -> str:
    """The whole generated Lean file for `items` (component, case)."""
    cases = [
        {"ns": f"C{i}", "label": case.label, "hex": _flat_hex(case), "body": render_body(component, case, f"C{i}")}
        for i, (component, case) in enumerate(items)
    ]
    return ENV.get_template("batch.lean.j2").render(bundle=library_bundle(targets), cases=cases)


def parse_output(texts: list[str], items: list[tuple[object, Case]]) -> list[dict[str, np.ndarray]]:
    """Decode the JSON lines into one output dict per item, shaped by each component."""
    found: dict[int, dict] = {}
    for text in texts:
        line = text.strip()
        if not line.startswith("{"):
            continue
        doc = json.loads(line)
        found[int(doc["case"][1:])] = doc["outputs"]
    results = []
    for i, (component, case) in enumerate(items):
        if i not in found:
            raise LeanEvaluationError(f"Lean printed no result for {case.label}")
        shapes = component.lean_output_shapes(case)
        out = {}
        for name, bits in found[i].items():
            arr = np.array([bits_float(b) for b in bits], dtype=np.float64)
            out[name] = arr.reshape(shapes[name])
        results.append(component.lean_postprocess(case, out))
    return results


def evaluate(
    items: list[tuple[object, Case]],
    use_cache: bool = True,
    progress: Callable[[str], None] = lambda s: None,
) -> tuple[list[dict[str, np.ndarray]], dict]:
    """Lean outputs for every (component, case), running one Lean process for the uncached ones.

    Returns the outputs and a small record (`cached`, `ran`, `seconds`; `from_cache`: per item,
    whether its result came from the cache).
    """
    targets = tuple(dict.fromkeys(t for component, _ in items for t in component.lean_targets))
    if not items:
        return [], {"cached": 0, "ran": 0, "seconds": 0.0, "from_cache": []}
    folder = cache_dir()
    keys = item_keys(items)
    results: list[dict[str, np.ndarray] | None] = [None] * len(items)
    if use_cache:
        for i, key in enumerate(keys):
            path = folder / f"{key}.json"
            if path.exists():
                stored = json.loads(path.read_text(encoding="utf-8"))
                results[i] = {k: np.array(v["values"], dtype=np.float64).reshape(v["shape"]) for k, v in stored.items()}
    todo = [i for i, r in enumerate(results) if r is None]
    record = {"cached": len(items) - len(todo), "ran": len(todo), "seconds": 0.0,
              "from_cache": [r is not None for r in results]}
    if todo:
        batch = [items[i] for i in todo]
        progress(f"lean: evaluating {len(batch)} case(s) in one bundle ({len(items) - len(todo)} cached) ...")
        source = render_batch(batch, targets)
        start = time.monotonic()
        try:
            messages = run_lean(source, "DiffTestBatch")
            outs = parse_output([m.text for m in messages if m.severity == "information"], batch)
        except Exception as exc:  # EvaluationError, ToolchainError, no result: name the cases and the file
            raise LeanEvaluationError(_failure_text(batch, source, exc)) from exc
        record["seconds"] = round(time.monotonic() - start, 1)
        progress(f"lean: done in {record['seconds']} s")
        folder.mkdir(parents=True, exist_ok=True)
        for i, out in zip(todo, outs):
            results[i] = out
            doc = {k: {"shape": list(v.shape), "values": v.reshape(-1).tolist()} for k, v in out.items()}
            (folder / f"{keys[i]}.json").write_text(json.dumps(doc), encoding="utf-8")
    return results, record  # type: ignore[return-value]


def _failure_text(batch: list[tuple[object, Case]], source: str, exc: Exception) -> str:
    """Why the Lean leg failed: the cases of the batch, the generated file (kept) and how to rerun it."""
    folder = cache_dir() / "failed"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"DiffTestBatch-{hashlib.sha256(source.encode()).hexdigest()[:12]}.lean"
    path.write_text(source, encoding="utf-8")
    cases = ", ".join(case.label for _, case in batch)
    return (f"the Lean reference did not evaluate {cases}: {exc}\n"
            f"generated file: {path}\nrerun it with: python3 -m k3spec lean {path}")

