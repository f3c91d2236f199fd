"""What a component provides to the differential tester (one registry entry per component)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from difftest.case import Case

REPO = Path(__file__).resolve().parents[2]
GRAPHS = REPO / "fixtures" / "graphs"
TINY_CONFIG = REPO / "fixtures" / "tiny" / "config.json"


@dataclass(frozen=True)
class ErrorModel:
    """The rounding-error budget of a component (docs/tolerances.md).

    `stores`: roundings of stored values on the longest dependency chain (inputs and weights
    count one each); `accum`: total length of the reductions on that chain; `amp`: the product
    of the stated amplification factors of its nonlinear stages and of output cancellation.
    """

    stores: int
    accum: int
    amp: float


class Component:
    """A K3 component: seeded inputs, the Lean reference, the exported graph and the torch model.

    Subclasses set the class attributes and implement `sample`, `torch_outputs`,
    `lean_output_shapes` and `error_model`; `graph_outputs` when an export exists.
    """

    name: str = ""
    summary: str = ""
    template: str = ""  # templates/<template>.lean.j2
    lean_targets: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ("random",)
    default_sizes: dict[str, int] = {}
    graph_file: str | None = None  # fixtures/graphs/<graph_file>; None: no export yet
    #: whether the default run evaluates this component in Lean; False where the offline
    #: interpreter took minutes per case (see the report; `--lean-all` runs it anyway)
    lean_default: bool = False
    #: (implementation, dtype, device) -> why pybridge cannot run it; reported as skipped
    unsupported: dict[tuple[str, str, str], str] = {}

    # --- inputs -----------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, kind: str, sizes: dict[str, int]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def sizes_for_kind(self, kind: str) -> dict[str, int]:
        """The sizes a kind uses (e.g. `long` lengthens the sequence)."""
        return dict(self.default_sizes)

    def make_case(self, index: int, kind: str, seed: int, sizes: dict[str, int] | None = None) -> Case:
        sizes = self.sizes_for_kind(kind) if sizes is None else dict(sizes)
        rng = np.random.default_rng([seed, index])
        return Case(self.name, index, kind, seed, sizes, self.sample(rng, kind, sizes))

    def shrink_sizes(self, sizes: dict[str, int]) -> list[dict[str, int]]:
        """Smaller size sets to try when shrinking a failure, smallest first."""
        return []

    # --- the three implementations ----------------------------------------------------------
    def torch_outputs(self, case: Case, dtype: torch.dtype, device: str) -> dict[str, dict[str, np.ndarray]]:
        """{implementation name: {output name: float64 array}} of the pybridge model."""
        raise NotImplementedError

    def runs(self, impl: str, dtype: torch.dtype, device: str) -> bool:
        """Whether pybridge can run `impl` at `dtype` on `device` (see `unsupported`)."""
        return (impl, str(dtype).removeprefix("torch."), str(device).split(":")[0]) not in self.unsupported

    def numpy_outputs(self, case: Case) -> dict[str, np.ndarray] | None:
        """An optional plain float64 NumPy reference, independent of pybridge (None: none)."""
        return None

    def graph_available(self, case: Case) -> bool:
        return self.graph_file is not None and (GRAPHS / self.graph_file).exists() and self.graph_fits(case)

    def graph_fits(self, case: Case) -> bool:
        return case.sizes == self.sizes_for_kind(case.kind) == self.default_sizes

    def graph_outputs(self, case: Case, dtype: torch.dtype, device: str) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def lean_context(self, case: Case) -> dict:
        """Extra template variables (besides `T`, `off`, `s`, `key`, `case`)."""
        return {}

    def lean_output_shapes(self, case: Case) -> dict[str, tuple[int, ...]]:
        raise NotImplementedError

    def lean_postprocess(self, case: Case, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return out

    def lowp_reference(self, case: Case, got: dict[str, np.ndarray], ref: dict[str, np.ndarray],
                       dtype: str) -> tuple[dict[str, np.ndarray], str]:
        """The float64 reference a low-precision run is compared with, and a note (default: `ref`)."""
        return ref, ""

    # --- tolerances ---------------------------------------------------------------------------
    def error_model(self, sizes: dict[str, int]) -> ErrorModel:
        raise NotImplementedError

    def exact_outputs(self) -> tuple[str, ...]:
        """Outputs compared exactly (integers such as routes), not under a tolerance."""
        return ()


def t64(a: np.ndarray) -> torch.Tensor:
    """A float64 tensor with the array's shape (0-d arrays stay 0-d)."""
    return torch.from_numpy(np.array(a, dtype=np.float64, order="C", copy=True))


def to_np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy().copy()


def lean_float(x: float) -> str:
    """An exact Lean `Float` literal."""
    from difftest.case import float_bits

    return f"(Float.ofBits {float_bits(x)})"
