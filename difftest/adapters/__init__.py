"""Check any implementation of a K3 component against the spec: the adapter protocol.

An *adapter* is any Python object with a `name` and, for each component it implements, an
attribute named after the component (`difftest list` names them: `expert`, `latent_moe`,
`kda_recurrence`, `kda_layer`, `mla`, `attnres`, `decoder_step`; the Kimi Linear variant's
`kimi_linear_kda`, `kimi_linear_mla`, `kimi_linear_moe`, `kimi_linear_model`) holding a callable

    fn(call: Call) -> dict[str, torch.Tensor]

that runs the user's code on `call.tensors` (the case's inputs and weights under their spec names,
in `call.dtype` on `call.device`; `call.hub()` gives the weights under K3's hub state-dict names
through `pybridge.adapter`, `call.config()` the configuration) and returns the spec's outputs
and states under their spec names (`CONTRACTS`; a subset is fine, the primary outputs are
required). A component the implementation deliberately does not cover is `NotCovered("why")`:
`difftest list --impl` shows the reason. Optional attributes: `dtypes` (the storage dtypes it
runs at; default all three), `description`.

difftest finds an adapter by `--impl package.module:object` (the object, or a zero-argument
callable returning it), by a name in the entry-point group `difftest.impls`, or by a built-in
name (`BUILTIN`). Its results enter `difftest run` as their own column `impl:<name>`: at float64
against every float64 leg (Lean, graph, NumPy, pybridge) under `tol64`, at float32/bfloat16 as one
stage on the case rounded to that dtype against the float64 NumPy reference on the same rounded
values, under the stage's tolerance (docs/tolerances.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import torch

from difftest.config import TINY_CONFIG

ENTRY_POINT_GROUP = "difftest.impls"
ALL_DTYPES = ("float64", "float32", "bfloat16")

#: built-in adapters: name -> "module:object"
BUILTIN = {
    "fla-naive-recurrent": "difftest.adapters.fla:naive_recurrent",
    "fla-naive-chunk": "difftest.adapters.fla:naive_chunk",
    "fla-fused-recurrent": "difftest.adapters.fla:fused_recurrent",
    "fla-chunk": "difftest.adapters.fla:chunk",
    "kimi-linear-recurrent": "difftest.adapters.kimi_linear:recurrent",
    "kimi-linear-chunk": "difftest.adapters.kimi_linear:chunk",
    "kimi-linear": "difftest.adapters.kimi_linear:layers",
}


@dataclass(frozen=True)
class Contract:
    """What a component's callable receives and returns (`difftest list --impl`)."""

    inputs: str
    outputs: dict[str, str]  # output name -> shape
    primary: tuple[str, ...]  # outputs every implementation must return


CONTRACTS: dict[str, Contract] = {
    "expert": Contract("x [N, d]; gateWeight, upWeight [d, h]; downWeight [h, d] (an MXFP4 checkpoint's expert: "
                       "these dequantized, and its codes gateWeight.packed [h, d/2], gateWeight.scale [h, d/32], … "
                       "uint8, hub layout; call.hub() then gives w1.weight_packed, w1.weight_scale, …)",
                       {"y": "[N, d]"}, ("y",)),
    "latent_moe": Contract("x [N, d] and the LatentMoE weights (spec names; call.tensors lists them)",
                           {"y": "[N, d]", "route": "[N, k] sorted expert ids (float64)"}, ("y",)),
    "kda_recurrence": Contract(
        "state [B, H, K, V]; q, k [B, T, H, K] (unit rows); v [B, T, H, V]; retention [B, T, H, K] "
        "(α in (0, 1]; g = log α); beta [B, T, H]; readout scale 1",
        {"o": "[B, T, H, V]", "state": "[B, H, K, V]"}, ("o", "state")),
    "kda_layer": Contract("xs [B, T, D] and the KDA layer weights (spec names; call.hub() in hub names), from the zero state",
                          {"y": "[B, T, D]", "heads": "[B, H, K, V]", "window_q": "[B, W-1, H, K]",
                           "window_k": "[B, W-1, H, K]", "window_v": "[B, W-1, H, V]"}, ("y",)),
    "mla": Contract("xs [B, T, D] and the Gated MLA weights (spec names; call.hub() in hub names), from an empty cache",
                    {"y": "[B, T, D]", "latent": "[B, T, Lkv]", "shared_key": "[B, T, R]"}, ("y",)),
    "attnres": Contract("embedding [N, D]; seq_out, chan_out [L, N, D]; w_seq, w_chan [L, D]; w_final [D]; block size B",
                        {"h_seq": "[L, N, D]", "h_chan": "[L, N, D]", "final": "[N, D]"}, ("h_seq", "h_chan", "final")),
    "decoder_step": Contract("ids [B, P+1] (float64 token ids); model_seed: call.hub() is the seeded tiny model's state dict; "
                             "prefill ids[:, :-1], then one cached step on ids[:, -1]",
                             {"logits": "[B, vocab]"}, ("logits",)),
    # the Kimi Linear variant (difftest.components.kimi_linear): weights under the hub's names
    "kimi_linear_kda": Contract("xs [B, T, D] and the Kimi Linear KDA layer's weights (hub names relative to self_attn.: "
                                "q_proj.weight, q_conv1d.weight, A_log [1, 1, H, 1], dt_bias, g_a_proj.weight, …), "
                                "from the zero state; call.config(): pybridge's KimiLinearConfig",
                                {"y": "[B, T, D]"}, ("y",)),
    "kimi_linear_mla": Contract("xs [B, T, D] and the Kimi Linear MLA weights (hub names relative to self_attn.; "
                                "q_proj.weight, or q_a_proj/q_a_layernorm/q_b_proj when sizes['Lq'] > 0), causal, "
                                "from an empty cache", {"y": "[B, T, D]"}, ("y",)),
    "kimi_linear_moe": Contract("x [N, D] and the Kimi Linear MoE weights (hub names relative to block_sparse_moe.: "
                                "gate.weight, gate.e_score_correction_bias, experts.{e}.w1/w2/w3.weight, shared_experts.*)",
                                {"y": "[N, D]"}, ("y",)),
    "kimi_linear_model": Contract("ids [B, T] (float64 token ids); model_seed: call.hub() is the seeded tiny Kimi Linear "
                                  "model's state dict (hub names); prefill logits of every position",
                                  {"logits": "[B, T, vocab]"}, ("logits",)),
}


class AdapterError(Exception):
    """An adapter that cannot be loaded or returns what its contract does not allow (the message
    names the adapter, the component and the tensor)."""


@dataclass(frozen=True)
class NotCovered:
    """A component an implementation does not cover, and why (shown by `difftest list --impl`)."""

    reason: str


class Inputs(dict):
    """The case's tensors; a missing name is an `AdapterError` naming the adapter and what exists."""

    def __init__(self, data: Mapping[str, torch.Tensor], adapter: str, component: str):
        super().__init__(data)
        self._where = f"adapter {adapter!r}, component {component!r}"

    def __missing__(self, key: str) -> torch.Tensor:
        raise AdapterError(f"{self._where}: asked for input tensor {key!r}, which the case does not have "
                           f"(inputs: {', '.join(sorted(self))})")


@dataclass
class Call:
    """One invocation of an adapter's component: the case's tensors and sizes at one dtype."""

    adapter: str
    component: str
    tensors: Inputs
    sizes: dict[str, int]
    dtype: torch.dtype
    device: str
    config_path: Path = field(default=TINY_CONFIG)

    def config(self):
        """pybridge's `K3Config` of the tiny configuration with this case's dimensions."""
        from difftest.components import COMPONENTS
        from difftest.components.base import torch_config

        comp = COMPONENTS[self.component]
        if getattr(comp, "spec_is_pybridge", False) and self.config_path != TINY_CONFIG:  # a checkpoint's own
            from pybridge.config import load_config

            return load_config(self.config_path)
        return comp.config(self.sizes) if hasattr(comp, "config") else torch_config()

    def hub(self) -> dict[str, torch.Tensor]:
        """The case's weights under K3's hub state-dict names (`pybridge.adapter`), in `dtype`."""
        from pybridge import adapter

        spec = {k: v for k, v in self.tensors.items() if k not in ("x", "xs")}
        if self.component == "kda_layer":
            from difftest.components import COMPONENTS

            stacked = COMPONENTS["kda_layer"].stacked
            flat = {}
            for k, v in spec.items():
                flat.update({stacked[k].format(i=i): v[i] for i in range(v.shape[0])} if k in stacked else {k: v})
            return adapter.to_hub(adapter.kda_rules(self.config()), flat)
        if self.component == "mla":
            return adapter.to_hub(adapter.mla_rules(self.config()), spec)
        if self.component == "expert":
            if "gateWeight.packed" in spec:  # MXFP4 (difftest checkpoint): the file's codes, as stored
                return {f"{hub}.weight_{part}": spec[f"{name}.{part}"] for name, hub in
                        (("gateWeight", "w1"), ("upWeight", "w3"), ("downWeight", "w2")) for part in ("packed", "scale")}
            return adapter.to_hub(adapter.expert_rules(self.sizes["d"], self.sizes["h"]), spec)
        from difftest.components import COMPONENTS

        own = getattr(COMPONENTS.get(self.component), "hub_tensors", None)
        if own is not None:  # the Kimi Linear variant: the case's tensors are hub names already
            return {k: v.to(device=self.device, dtype=self.dtype) for k, v in own(self.tensors).items()}
        if self.component == "decoder_step":
            from difftest.components.decoder import case_model

            model = case_model(self.tensors).to(device=self.device, dtype=self.dtype)
            return dict(model.state_dict())
        raise AdapterError(f"adapter {self.adapter!r}: component {self.component!r} has no hub mapping; "
                           "read call.tensors (spec names)")


@dataclass
class Impl:
    """A loaded adapter: its object, how it was named (`spec`), and what it covers."""

    obj: object
    spec: str

    @property
    def name(self) -> str:
        return str(getattr(self.obj, "name", self.spec))

    @property
    def column(self) -> str:
        """The adapter's column in difftest's comparisons."""
        return f"impl:{self.name}"

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(getattr(self.obj, "dtypes", ALL_DTYPES))

    @property
    def description(self) -> str:
        return str(getattr(self.obj, "description", "") or (type(self.obj).__doc__ or "").strip().split("\n")[0])

    def entries(self) -> Iterator[tuple[str, Callable | NotCovered | None]]:
        for comp in CONTRACTS:
            yield comp, getattr(self.obj, comp, None)

    def covered(self) -> dict[str, Callable]:
        return {c: fn for c, fn in self.entries() if fn is not None and not isinstance(fn, NotCovered)}

    def not_covered(self) -> dict[str, str]:
        return {c: fn.reason for c, fn in self.entries() if isinstance(fn, NotCovered)}


def entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def available() -> dict[str, str]:
    """Every adapter name difftest knows: built-in ones and those of installed packages."""
    return {**BUILTIN, **{name: ep.value for name, ep in entry_points().items()}}


def load(spec: str | object) -> Impl:
    """The adapter named by `spec`: an adapter object, "module:object", an entry-point name or a
    built-in name."""
    if not isinstance(spec, str):
        return check(Impl(spec, str(getattr(spec, "name", type(spec).__name__))))
    eps = entry_points()
    if spec in eps:
        try:
            obj = eps[spec].load()
        except Exception as exc:
            raise AdapterError(f"adapter {spec!r} (entry point {eps[spec].value}): cannot load: {exc}") from exc
    else:
        target = BUILTIN.get(spec, spec)
        if ":" not in target:
            raise AdapterError(f"adapter {spec!r}: not 'package.module:object', an entry point of group "
                               f"{ENTRY_POINT_GROUP!r} or a built-in ({', '.join(available())})")
        module_name, _, attr = target.partition(":")
        try:
            obj = importlib.import_module(module_name)
        except ImportError as exc:
            raise AdapterError(f"adapter {spec!r}: cannot import {module_name!r}: {exc}") from exc
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise AdapterError(f"adapter {spec!r}: module {module_name!r} has no attribute {attr!r}")
            obj = getattr(obj, part)
    if isinstance(obj, type) or (callable(obj) and not any(hasattr(obj, c) for c in CONTRACTS)):
        obj = obj()  # a class or a factory
    return check(Impl(obj, spec))


def check(impl: Impl) -> Impl:
    """`impl` after checking its declared dtypes and component entries."""
    bad = [d for d in impl.dtypes if d not in ALL_DTYPES]
    if bad:
        raise AdapterError(f"adapter {impl.name!r}: unknown dtype(s) {bad} in `dtypes` (known: {', '.join(ALL_DTYPES)})")
    for comp, fn in impl.entries():
        if fn is not None and not isinstance(fn, NotCovered) and not callable(fn):
            raise AdapterError(f"adapter {impl.name!r}: attribute {comp!r} is neither callable nor NotCovered")
    if not impl.covered() and not impl.not_covered():
        raise AdapterError(f"adapter {impl.name!r}: implements no component (attributes named after one of "
                           f"{', '.join(CONTRACTS)})")
    return impl


__all__ = ["AdapterError", "BUILTIN", "CONTRACTS", "Call", "Contract", "Impl", "Inputs", "NotCovered", "available", "load"]
