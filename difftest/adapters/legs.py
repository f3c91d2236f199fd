"""An adapter as a leg of `difftest run`: its float64 outputs and its low-precision stage checks.

float64: the adapter runs on the case's exact inputs; `runner.evaluate_case` compares its
outputs with every other float64 leg under `tol64`. float32/bfloat16: the adapter runs once on
the case rounded to the dtype (one stage: the whole call), against the float64 NumPy reference on
the same rounded values under the component's error model (docs/tolerances.md): the output is
stored once in the dtype (`out_stores` 1), states kept in the compute dtype (`COMPUTE_OUTPUTS`)
not at all.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from difftest.adapters import CONTRACTS, AdapterError, Call, Impl, Inputs
from difftest.case import Case
from difftest.components.base import Component, LowpCheck, rounded, t64, to_np

#: outputs a low-precision implementation keeps in its compute dtype (float32), as fla does
COMPUTE_OUTPUTS = {"kda_recurrence": ("state",), "kda_layer": ("heads",)}
#: components whose adapters are checked at float64 only, and why (`difftest list --impl`)
FLOAT64_ONLY = {
    "latent_moe": "a low-precision route may differ at a near tie; the near-tie rule is pybridge's (LatentMoEComponent)",
    "decoder_step": "the whole model has no single-stage error budget; pybridge's stages are checked one by one",
    "kimi_linear_model": "the whole model has no single-stage error budget (its layers are checked one by one)",
}


def call_impl(impl: Impl, comp: Component, case: Case, dtype: torch.dtype, device: str,
              allowed: set[str] | None = None) -> dict[str, np.ndarray]:
    """The adapter's outputs on `case` at `dtype` (float64 arrays), checked against its contract:
    every primary output present, every output a known one, a tensor."""
    fn = impl.covered()[comp.name]
    tensors = Inputs({k: t64(v).to(device=device, dtype=dtype) for k, v in case.tensors.items()}, impl.name, comp.name)
    with torch.no_grad():
        got = fn(Call(impl.name, comp.name, tensors, dict(case.sizes), dtype, device))
    where = f"adapter {impl.name!r}, component {comp.name!r}"
    if not isinstance(got, dict):
        raise AdapterError(f"{where}: returned {type(got).__name__}, not a dict of output name -> tensor")
    contract = CONTRACTS[comp.name]
    known = set(contract.outputs) | (allowed or set())
    missing = [k for k in contract.primary if k not in got]
    if missing:
        raise AdapterError(f"{where}: output(s) {', '.join(missing)} missing (returned: {', '.join(got) or 'nothing'}; "
                           f"expected {', '.join(f'{k} {contract.outputs[k]}' for k in contract.primary)})")
    unknown = sorted(set(got) - known)
    if unknown:
        raise AdapterError(f"{where}: unknown output(s) {', '.join(unknown)} (outputs: {', '.join(sorted(known))})")
    out = {}
    for name, t in got.items():
        if not isinstance(t, torch.Tensor):
            raise AdapterError(f"{where}: output {name!r} is {type(t).__name__}, not a torch.Tensor")
        out[name] = to_np(t)
    if comp.name == "mla" and case.sizes["P"] + case.sizes["T"] >= 3:
        out["y_t2"] = out["y"][:, 2]  # the graph leg's decode step at position 2
    return out


def lowp_checks(impl: Impl, comp: Component, case: Case, dtype: torch.dtype, device: str) -> list[LowpCheck]:
    """The adapter's call on the case rounded to `dtype` against the NumPy reference on the same."""
    if comp.name in FLOAT64_ONLY:
        return []
    rc = rounded(case, dtype)
    want = comp.numpy_outputs(rc)
    ref = "numpy"
    if want is None and getattr(comp, "spec_is_pybridge", False):  # a variant: its spec leg in float64
        want, ref = comp.torch_outputs(rc, torch.float64, device)["pybridge"], "pybridge"
    got = call_impl(impl, comp, rc, dtype, device, set(want))
    model = comp.error_model(case.sizes)
    exact = set(comp.exact_outputs())
    checks = []
    for name in sorted(set(got) & set(want)):
        m = dataclasses.replace(model, out_stores=0) if name in COMPUTE_OUTPUTS.get(comp.name, ()) else model
        checks.append(LowpCheck(impl.column, ref, name, got[name], want[name], m, exact=name in exact))
    return checks
