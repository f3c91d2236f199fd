"""What a component provides to the differential tester (one registry entry per component).

Legs (each reads its configuration through its own reader, `difftest.config`):
* `torch_outputs`: pybridge, built from the case's spec tensors through `pybridge.adapter`,
  configured by pybridge's reader (`torch_config`);
* `graph_outputs`: the Lean export compiled by `pybridge.graph`, its constant inputs from
  difftest's own reader (`own_config`); only where the export's shapes fit (`graph_fits`);
* `numpy_outputs`: difftest's own float64 transcription of the spec (`difftest.numpy_ref`);
* the Lean leg (`difftest.lean`): `lean_case` (the part of a case the Lean templates
  evaluate), `lean_config` (its configuration values), `lean_context`, `lean_output_shapes`,
  `lean_postprocess`.

Low precision: `lowp_checks` runs each stage of the torch model (and the graph) at the run's
dtype on the reference's own inputs at that point, rounded to the storage dtype, beside the
float64 NumPy reference (or graph) evaluated on those same rounded inputs and weights.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch

from difftest import config as readings
from difftest.case import Case
from difftest.config import GRAPHS, TINY_CONFIG

F64 = torch.float64


@dataclass(frozen=True)
class ErrorModel:
    """The rounding-error budget of one stage (docs/tolerances.md).

    `stores`: roundings of stored values on the longest dependency chain at float64 (inputs and
    weights count one each); `accum`: total length of the reductions on that chain; `amp`: the
    product of the stated amplification factors of its nonlinear stages. At low precision the
    inputs and weights are shared with the reference, every operation runs at the compute
    precision (float32), and `out_stores` values on the chain are rounded to the storage dtype
    (1: the stage's output)."""

    stores: int
    accum: int
    amp: float
    out_stores: int = 1


@dataclass
class LowpCheck:
    """One low-precision comparison: `got` (the run, `impl`) against `want` (float64 reference
    `ref` on the same rounded inputs) for one stage output, under `model`."""

    impl: str
    ref: str
    output: str
    got: np.ndarray
    want: np.ndarray
    model: ErrorModel
    exact: bool = False
    note: str = ""


class Component:
    """A K3 component: seeded inputs and its legs. Subclasses set the class attributes and
    implement `sample`, `torch_outputs`, `numpy_outputs`, `lowp_checks`, `error_model`, and the
    Lean methods where a template exists; `graph_outputs` where an export exists."""

    name: str = ""
    summary: str = ""
    template: str = ""  # templates/<template>.lean.j2
    lean_targets: tuple[str, ...] = ()
    #: kind -> what its inputs stress (`difftest list`); the default run starts with one case of each
    kinds: dict[str, str] = {"random": "well-conditioned weights and activations"}
    default_sizes: dict[str, int] = {}
    graph_file: str | None = None  # fixtures/graphs/<graph_file>; None: no export yet
    #: whether the default run evaluates this component in Lean (see `difftest list`)
    lean_default: bool = False
    #: kinds the default run does not evaluate in Lean (too long for the offline interpreter;
    #: `--lean-all` evaluates them)
    lean_skip_kinds: tuple[str, ...] = ()
    #: why a component without `lean_default` is left out of the default run (appended to the
    #: skip reason), and why one without a template has none (replaces "no template")
    lean_note: str = ""
    lean_why_not: str = ""
    #: stacked case tensor -> its spec names, one per leading index (`{i}`)
    stacked: dict[str, str] = {}

    # --- inputs -----------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, kind: str, sizes: dict[str, int]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def sizes_for_kind(self, kind: str, thorough: bool = False) -> dict[str, int]:
        """The sizes a kind uses (e.g. `long` lengthens the sequence); `thorough` may widen them."""
        return dict(self.default_sizes)

    def make_case(self, index: int, kind: str, seed: int, sizes: dict[str, int] | None = None,
                  thorough: bool = False) -> Case:
        sizes = self.sizes_for_kind(kind, thorough) if sizes is None else dict(sizes)
        rng = np.random.default_rng([seed, index])
        return Case(self.name, index, kind, seed, sizes, self.sample(rng, kind, sizes))

    def shrink_sizes(self, sizes: dict[str, int]) -> list[dict[str, int]]:
        """Smaller size sets to try when shrinking a failure, smallest first."""
        return []

    # --- configuration: one reader per leg ---------------------------------------------------
    def own_config(self) -> dict:
        """The graph and NumPy legs' configuration values (difftest's own reader)."""
        return own_config()

    def lean_config(self) -> dict:
        """Hook for the Lean leg: its configuration values. The exported Lean `Config`
        (`difftest.config.lean_reading`) where it carries a value; difftest's own reading of the
        configuration file for the others (the Lean `Config` has no field for them yet)."""
        return {**self.own_config(), **(readings.lean_reading() or {})}

    # --- the legs ------------------------------------------------------------------------------
    def spec_params(self, case: Case) -> dict[str, np.ndarray]:
        """The case's weights under their spec names (`pybridge.adapter`): stacked families
        (`stacked`) split into one tensor per leading index."""
        out = {}
        for name, t in case.tensors.items():
            if name in self.stacked:
                out.update({self.stacked[name].format(i=i): t[i] for i in range(t.shape[0])})
            else:
                out[name] = t
        return out

    def torch_outputs(self, case: Case, dtype: torch.dtype, device: str) -> dict[str, dict[str, np.ndarray]]:
        """{implementation name: {output name: float64 array}} of the pybridge model."""
        raise NotImplementedError

    def numpy_outputs(self, case: Case) -> dict[str, np.ndarray] | None:
        """difftest's own float64 NumPy reference (None: none)."""
        return None

    def graph_available(self, case: Case) -> bool:
        return self.graph_file is not None and (GRAPHS / self.graph_file).exists() and self.graph_fits(case)

    def graph_fits(self, case: Case) -> bool:
        return case.sizes == self.default_sizes

    def graph_outputs(self, case: Case, device: str) -> dict[str, np.ndarray]:
        """The float64 graph leg."""
        raise NotImplementedError

    def references(self) -> list[str]:
        """The float64 references independent of the torch model (`difftest list`)."""
        return [name for name, has in (("lean", bool(self.template)), ("graph", self.graph_file is not None),
                                       ("numpy", type(self).numpy_outputs is not Component.numpy_outputs)) if has]

    # --- the Lean leg (templates/<template>.lean.j2) ------------------------------------------
    def lean_case(self, case: Case) -> Case | None:
        """The case the Lean templates evaluate (None: none); its outputs are compared with
        `lean_slice` of the other legs' outputs."""
        return case

    def lean_slice(self, case: Case, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The part of another leg's outputs the Lean leg computes."""
        return out

    def lean_context(self, case: Case) -> dict:
        """Extra template variables (besides `T`, `off`, `s`, `key`, `case`): `cfg`, the Lean
        leg's configuration values as exact Lean `Float` literals."""
        return {"cfg": {k: lean_float(float(v)) for k, v in self.lean_config().items() if isinstance(v, (int, float))}}

    def lean_output_shapes(self, case: Case) -> dict[str, tuple[int, ...]]:
        raise NotImplementedError

    def lean_postprocess(self, case: Case, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return out

    # --- low precision ---------------------------------------------------------------------------
    def lowp_checks(self, case: Case, dtype: torch.dtype, device: str) -> list[LowpCheck]:
        raise NotImplementedError

    # --- tolerances ------------------------------------------------------------------------------
    def error_model(self, sizes: dict[str, int]) -> ErrorModel:
        raise NotImplementedError

    def exact_outputs(self) -> tuple[str, ...]:
        """Outputs compared exactly (integers such as routes), not under a tolerance."""
        return ()

    def bound_checks(self, case: Case, f64: dict[str, dict[str, np.ndarray]]) -> list:
        """Comparisons of the float64 legs' outputs (`f64`: leg -> outputs) against a proved
        bound rather than each other (`compare.Comparison`s, reference "bound"; none by default)."""
        return []


class ExecComponent(Component):
    """A component whose Lean template calls the executable specification (`KimiK3.Exec`,
    seconds per case offline): the default run evaluates it in Lean."""

    lean_targets = ("KimiK3.Exec.Kernel",)
    lean_default = True


@cache
def own_config() -> dict:
    return readings.own_reading(TINY_CONFIG)


@cache
def compiled(file: str, dtype: torch.dtype, device: str):
    """A graph export compiled once per dtype and device."""
    from pybridge.graph.compile import compile_graph
    from pybridge.graph.load import load_graph

    return compile_graph(load_graph(GRAPHS / file), dtype=dtype, device=device)


def torch_config(**dims):
    """pybridge's reading of the tiny configuration (the torch leg's reader), with the
    component's dimensions replaced (`dims`: K3Config field -> value)."""
    from pybridge.config import load_config

    return dataclasses.replace(load_config(TINY_CONFIG), **dims)


def rounded(case: Case, dtype: torch.dtype) -> Case:
    """The case with every tensor rounded to `dtype` (stored as float64): the shared inputs and
    weights of a low-precision check."""
    return dataclasses.replace(case, tensors={k: round_to(v, dtype) for k, v in case.tensors.items()})


def round_to(a: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """`a` rounded to `dtype` (round to nearest even), as float64."""
    return torch.from_numpy(np.array(a, dtype=np.float64)).to(dtype).to(F64).numpy()


def t64(a: np.ndarray) -> torch.Tensor:
    """A float64 tensor with the array's shape (0-d arrays stay 0-d)."""
    return torch.from_numpy(np.array(a, dtype=np.float64, order="C", copy=True))


def to_np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy().copy()


def load_module(module: torch.nn.Module, hub: dict[str, torch.Tensor], dtype: torch.dtype, device: str) -> torch.nn.Module:
    """`module` with the hub tensors loaded (float64 values), then moved to `dtype`/`device`."""
    module.to(F64).load_state_dict(hub)
    return module.to(device=device, dtype=dtype)


def lean_float(x: float) -> str:
    """An exact Lean `Float` literal."""
    from difftest.case import float_bits

    return f"(Float.ofBits {float_bits(x)})"
