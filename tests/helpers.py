"""Helpers shared by the tests: fixture paths, random graph bindings, the float64 closeness
check, and one bundled Lean run with its printed lines and JSON documents."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from pybridge.graph.load import Graph, Value, binding_keys

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "fixtures" / "tiny" / "config.json"
GRAPHS = REPO / "fixtures" / "graphs"
GRAPH_FILES = sorted(GRAPHS.glob("*.json"))
#: float64 agreement bound of two implementations, relative to the reference's largest entry.
RTOL = 1e-12


def assert_close(got: torch.Tensor | np.ndarray, want: torch.Tensor | np.ndarray, rtol: float = RTOL) -> None:
    """Same shape, and max |got − want| ≤ rtol · max |want| (entries near 0 carry the others'
    rounding, so the bound is normwise)."""
    g = got.detach().to("cpu", torch.float64).numpy() if isinstance(got, torch.Tensor) else np.asarray(got, np.float64)
    w = want.detach().to("cpu", torch.float64).numpy() if isinstance(want, torch.Tensor) else np.asarray(want, np.float64)
    assert g.shape == w.shape, f"shape {g.shape} != {w.shape}"
    err, scale = float(np.abs(g - w).max(initial=0.0)), float(np.abs(w).max(initial=0.0))
    assert err <= rtol * scale, f"max error {err:.3e} vs bound {rtol * scale:.3e}"


def random_bindings(values: tuple[Value, ...], gen: torch.Generator, positive: set[str] = frozenset()) -> dict[str, torch.Tensor]:
    """float64 N(0, 1) tensors per binding key; names in `positive` get values in [1, 5]."""
    out = {}
    for key, v in zip(binding_keys(values), values):
        t = torch.randn(v.shape, dtype=torch.float64, generator=gen)
        out[key] = 1.0 + 4.0 * torch.rand(v.shape, dtype=torch.float64, generator=gen) if v.name in positive else t
    return out


def random_params_inputs(graph: Graph, seed: int) -> tuple[dict, dict]:
    """Caps (`*Cap`), `log` and `sqrt` need positive inputs; every graph input is made positive
    when its name ends in `Cap`."""
    gen = torch.Generator().manual_seed(seed)
    caps = {v.name for v in graph.inputs if v.name.endswith("Cap")}
    return random_bindings(graph.params, gen), random_bindings(graph.inputs, gen, caps)


@dataclass
class LeanRun:
    """What a bundled Lean run printed: the information messages that are not JSON (`texts`) and
    the JSON documents (`docs`, in order)."""

    texts: list[str] = field(default_factory=list)
    docs: list[dict] = field(default_factory=list)

    def by_name(self) -> dict[str, dict]:
        """The documents that carry a `name` (graph exports), by name."""
        return {d["name"]: d for d in self.docs if "name" in d}


def lean_run(targets: tuple[str, ...], tail: str, name: str) -> LeanRun:
    """One Lean process (through `k3spec.leanrun`): the library modules `targets` need, bundled,
    then `tail`; a failing `#guard` or any error raises `EvaluationError`."""
    from codegen.bundle import bundle, dependency_order, run_lean

    source = bundle(REPO, dependency_order(REPO, targets)) + "\n" + tail + "\n"
    out = LeanRun()
    for message in run_lean(source, name):
        if message.severity != "information":
            continue
        text = message.text.strip()
        if text.startswith("{"):
            out.docs.append(json.loads(text))
        else:
            out.texts.append(message.text)
    return out
