"""`difftest checkpoint`: verify a hub-format checkpoint layer by layer at its own dimensions.

For each selected layer (0-based hub index i, spec layer i + 1) the work is two units, each
loaded from the shards on its own (`checkpoint_io.LazyCheckpoint`, through the one hub ↔ spec
mapping `pybridge.adapter.layer_rules`) and freed before the next:

* `attn`: the AttnRes reads before the sequence and the channel mixer and their RMSNorms, and
  the sequence mixer (KDA or Gated MLA, a prefill of T tokens from the zero state);
* `channel`: the dense SiTU MLP, or for a MoE layer the router's top-k (exact), the shared
  experts, the whole LatentMoE output and every checked routed expert on its own (so a bad
  expert is named). Only the routed experts of the sampled tokens are read (plus `--experts`);
  with `--expert-shards G` the routed experts are split into G units (the route, the shared
  experts and the composed output are then checked only by shard 0, the composed output only
  when G = 1, since it needs every routed expert at once).

Every stage runs on its own seeded inputs (`difftest.inputs` generators, seed (seed, layer,
stage)), not on the previous stage's output, so any unit can run on any rank. Legs: the torch
layer (pybridge's `DecoderLayer`, loaded with the layer's tensors, at the run's dtype: the
checkpoint's by default), `--impl` adapters covering `kda_layer`, `mla` or `expert` (their
`call.sizes` carry the hub `layer` and, for an expert, `expert`), and difftest's float64 NumPy
reference (`numpy_ref`, configured by difftest's own reader of the checkpoint's config.json). The
exported Lean graphs exist at the tiny dimensions only, so there is no graph leg at checkpoint
dimensions (the summary says so). Tolerances are the components' error models at the layer's
sizes (`compare.tolerance`); low precision compares the relative 2-norm on inputs rounded to the
run's dtype, as `difftest run` does.

Memory (per rank, one unit at a time): the unit's tensors in the run's dtype, float64 copies of
its non-expert tensors for the NumPy reference (`SpecParams`, made on first use: about 10 bytes
per parameter in all), each routed expert in float64 only while the reference uses it, and the
torch layer's float32 temporaries. `peak_rss_mb` per unit is measured (the kernel's VmHWM,
reset before each unit); docs/scale.md sizes it at the paper's dimensions. Distributed runs:
`checkpoint_dist`.

MXFP4 checkpoints (config.json's `quantization_config.format` "mxfp4-pack-quantized",
`pybridge.checkpoint.is_quantized`): the routed experts are read as their uint8 codes and
scales (`checkpoint_io`, pybridge's checks of each pair), one unit at a time. The torch layer
holds them as pybridge does (`moe.MXFP4SituExpert`, which dequantizes in its forward); the NumPy
reference and `--impl` adapters get the exact dequantized weights (`pybridge.mxfp4.dequantize`
in float64 through the adapter's rule: what the checkpoint means), decoded once for an expert's
stage (its check, decode check, budget and adapters; the composed LatentMoE reference decodes
the routed experts it uses again, per token, as it converts bf16 ones), never kept,
and adapters also get the codes themselves (`gateWeight.packed`, `gateWeight.scale`, … in the
hub layout; `call.hub()` then gives the `weight_packed` / `weight_scale` names). Per checked
expert, `decode` (exact) counts the weights that are not finite in float64 or in the torch
leg's compute dtype (with a scale code ≥ 253 the larger E2M1 values overflow float32 and bfloat16), and `budget_rel_max` is
the proved quantization bound evaluated from the file alone (`quantization_budget`). With
`--master DIR` (the full-precision checkpoint the file was quantized from) each checked expert
is also checked against the master (`check_master`): every dequantized weight within its block's
scale of the master's (the theorem's hypothesis, `master_fit`, exact) and the NumPy and torch
legs' |y − y_master| within the proved bound (`bound`, error / bound under 1).
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import torch

from difftest import numpy_ref as ref
from difftest.adapters import Call, Impl, Inputs
from difftest.checkpoint_io import LazyCheckpoint, is_mxfp4
from difftest.compare import DTYPES, Comparison, compare, tolerance
from difftest.components.base import ErrorModel, round_to
from difftest.components.channel import ExpertComponent, LatentMoEComponent
from difftest.components.depth import AttnResComponent
from difftest.components.mxfp4 import Quantized, error_bound
from difftest.components.sequence import KDALayerComponent, MLAComponent
from difftest.config import TINY_CONFIG, own_reading
from difftest.inputs import gaussian, magnitude
from pybridge import adapter, moe, mxfp4
from pybridge.attnres import retrieve
from pybridge.checkpoint import is_quantized
from pybridge.config import K3Config, load_config
from pybridge.errors import ConfigError, K3Error
from pybridge.layers import compute_dtype
from pybridge.model import DecoderLayer

NORM_MODEL = ErrorModel(stores=6, accum=0, amp=2.0)  # RMSNorm: mean of squares (accum D added), sqrt, div, gain
GRAPH_NOTE = ("no graph leg: the Lean exports exist at the tiny dimensions only (fixtures/graphs); "
              "at checkpoint dimensions the legs are the torch layer, --impl adapters and the float64 NumPy reference")


@dataclass(frozen=True)
class Options:
    """What a run checks and how (`difftest checkpoint --help`)."""

    tokens: int = 4
    rows: int = 1
    seed: int = 0
    kind: str = "random"
    dtype: str = "auto"  # auto: the checkpoint's dtype
    device: str = "cpu"
    experts: str = "routed"  # routed | all | SPEC
    expert_shards: int = 1
    master: str = ""  # an MXFP4 checkpoint's full-precision master (same config, float experts)


@dataclass(frozen=True)
class Unit:
    """One piece of work: `kind` "attn" or "channel" of hub layer `layer`; channel shard `shard`
    of `shards` (the routed experts split G ways)."""

    layer: int
    kind: str
    shard: int = 0
    shards: int = 1

    @property
    def label(self) -> str:
        extra = f" shard {self.shard + 1}/{self.shards}" if self.shards > 1 else ""
        return f"layer {self.layer} {self.kind}{extra}"


@dataclass
class UnitResult:
    unit: Unit
    rank: int
    mixer: str = ""  # kda | mla | dense | moe
    comparisons: list[Comparison] = field(default_factory=list)
    experts: list[int] = field(default_factory=list)
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    peak_gpu_mb: float = 0.0
    bytes_read: int = 0
    error: str = ""
    #: MXFP4 checkpoints: what the checked experts' codes decode to, their budget and bound (`check_codes`)
    mxfp4: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.error and all(c.passed for c in self.comparisons)

    def to_json(self) -> dict:
        d = asdict(self)
        d["unit"] = asdict(self.unit)
        d["mxfp4"] = {k: _num(v) if isinstance(v, float) else v for k, v in self.mxfp4.items()}
        d["passed"] = self.passed
        d["comparisons"] = [{**asdict(c), "ratio": _num(c.ratio), **{k: _num(getattr(c, k)) for k in FLOATS}}
                            for c in self.comparisons]
        return d


FLOATS = ("err", "tol", "got", "want", "abs_err")


def _num(x: float) -> float | str:
    """A float for JSON: inf and nan as strings."""
    return x if math.isfinite(x) else str(x)


def parse_spec(spec: str, n: int, what: str) -> list[int]:
    """`all`, or comma-separated ids and ranges `a-b` (inclusive), each in [0, n)."""
    if spec in ("", "all"):
        return list(range(n))
    out: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise ValueError(f"{what} {spec!r}: '{part}' is not an id or a range a-b")
        a, b = int(m[1]), int(m[2] or m[1])
        if a > b or b >= n:
            raise ValueError(f"{what} {spec!r}: '{part}' is outside 0..{n - 1}")
        out += [i for i in range(a, b + 1) if i not in out]
    return out


def plan(cfg: K3Config, layers: list[int], opts: Options) -> list[Unit]:
    """The units of a run: per layer the attention unit, then the channel unit(s)."""
    units = []
    for i in layers:
        units.append(Unit(i, "attn"))
        shards = opts.expert_shards if cfg.is_moe(i) else 1
        units += [Unit(i, "channel", g, shards) for g in range(shards)]
    return units


#: bytes per routed-expert parameter: bf16, and MXFP4 (half a byte plus one scale byte per 32)
EXPERT_BYTES = {False: 2.0, True: 0.5 + 1 / mxfp4.GROUP}


def unit_bytes(cfg: K3Config, unit: Unit, quantized: bool = False) -> int:
    """The checkpoint bytes a unit reads, at 2 bytes a parameter (`quantized`: MXFP4 routed
    experts, 4.25 bits; for MoE an upper bound: the sampled tokens route to at most 8 k distinct
    experts), for balancing the ranks."""
    return _unit_bytes(cfg, cfg.is_mla(unit.layer), cfg.is_moe(unit.layer), unit.kind, unit.shards, quantized)


@cache
def _unit_bytes(cfg: K3Config, is_mla: bool, is_moe: bool, kind: str, shards: int, quantized: bool) -> int:
    """`unit_bytes` of every layer of one schedule kind (the first such layer's rules)."""
    layer = next(i for i in range(cfg.num_hidden_layers) if (cfg.is_mla(i), cfg.is_moe(i)) == (is_mla, is_moe))
    rules = _rules(cfg, Unit(layer, kind, 0, shards), experts=())
    total = 2 * sum(math.prod(s) for r in rules for s in r.hub_shapes)
    if kind == "channel" and is_moe:
        total += EXPERT_BYTES[quantized] * 3 * cfg.moe_intermediate_size * cfg.routed_expert_hidden_size * min(
            cfg.num_experts, 8 * cfg.num_experts_per_token) / shards
    return int(total)


def assign(cfg: K3Config, units: list[Unit], world: int, quantized: bool = False) -> list[list[Unit]]:
    """Units per rank: largest first to the least-loaded rank (longest processing time first);
    every rank computes the same assignment, so no communication is needed."""
    load, out = [0] * world, [[] for _ in range(world)]
    size = {u: unit_bytes(cfg, u, quantized) for u in units}
    for u in sorted(units, key=lambda u: -size[u]):
        r = min(range(world), key=lambda k: (load[k], k))
        out[r].append(u)
        load[r] += size[u]
    order = {u: k for k, u in enumerate(units)}
    return [sorted(us, key=order.__getitem__) for us in out]


# --- rules and loading ---------------------------------------------------------------------------

ATTN_PARTS = ("seq_res.", "seq_norm.", "chan_res.", "chan_norm.", "kda.", "mla.")


def _rules(cfg: K3Config, unit: Unit, experts, quantized: bool = False) -> list[adapter.Rule]:
    """The layer's rules (`pybridge.adapter.layer_rules`; `quantized`: MXFP4 routed experts) that
    a unit reads; for a channel unit only the routed experts in `experts`."""
    spec_prefix = f"layers.{unit.layer + 1}."
    keep = set(experts)
    out = []
    for r in adapter.layer_rules(cfg, unit.layer, quantized):
        part = r.spec[0][len(spec_prefix):]
        if (unit.kind == "attn") != part.startswith(ATTN_PARTS):
            continue
        m = re.fullmatch(r"moe\.expert\.\w+\[(\d+)\]", part)
        if m and int(m[1]) not in keep:
            continue
        out.append(r)
    return out


class SpecParams(Mapping):
    """A unit's spec parameters (names relative to the layer: `kda.query_proj`, …) for the NumPy
    reference: float64 copies of the run's (rounded) weights, made on first use. A routed
    expert's matrices are converted on every use and never kept, so the reference holds at most
    one expert in float64 at a time; everything else is kept once converted (the per-token
    reference reads the projections at every token). An MXFP4 expert's matrix (`codes`: its
    rule and its packed and scale tensors) is decoded exactly, in float64, on every use
    (`pybridge.mxfp4.dequantize` through the adapter's rule)."""

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self.codes: dict[str, tuple[adapter.Rule, torch.Tensor, torch.Tensor]] = {}
        self.cache: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self.cache:
            return self.cache[name]
        if name in self.codes:
            rule, packed, scale = self.codes[name]
            return rule.to_spec(packed.cpu(), scale.cpu())[0].numpy()
        a = self.tensors[name].to(torch.float64).numpy()
        if not name.startswith("moe.expert."):
            self.cache[name] = a
        return a

    def __iter__(self):
        return iter({**self.tensors, **self.codes})

    def __len__(self) -> int:
        return len(self.tensors) + len(self.codes)


@dataclass
class Loaded:
    """A unit's tensors: the torch layer (hub tensors assigned; parts not read stay on `meta`)
    and the spec parameters for the NumPy reference."""

    layer: DecoderLayer
    spec: SpecParams


def load_unit(ckpt: LazyCheckpoint, cfg: K3Config, config_path: Path, unit: Unit, rules: list[adapter.Rule],
              dtype: torch.dtype, device: str, into: Loaded | None = None, quantized: bool = False) -> Loaded:
    """Read the hub tensors of `rules`, rounded to the run's `dtype` (both legs compute with the
    same weights; MXFP4 codes stay uint8), map them to spec parameters (`pybridge.adapter.to_spec`;
    MXFP4 ones decoded on use, `SpecParams`) and assign them into the torch layer (a new one on
    `meta`, with MXFP4 routed experts if `quantized`, or `into`) on `device`."""
    hub = {k: v.to(dtype) if v.is_floating_point() else v for k, v in ckpt.read(rules, config_path).items()}
    prefix, spec_prefix = f"model.layers.{unit.layer}.", f"layers.{unit.layer + 1}."
    if into is None:
        with torch.device("meta"):
            layer = DecoderLayer(cfg, unit.layer).eval()
            into = Loaded(moe.use_mxfp4_experts_(layer) if quantized else layer, SpecParams())
    plain = [r for r in rules if not is_mxfp4(r)]
    plain_hub = {n: hub[n] for r in plain for n in r.hub}
    into.spec.tensors.update({k[len(spec_prefix):]: v for k, v in adapter.to_spec(plain, plain_hub).items()})
    into.spec.codes.update({r.spec[0][len(spec_prefix):]: (r, hub[r.hub[0]], hub[r.hub[1]]) for r in rules if is_mxfp4(r)})
    into.layer.load_state_dict({k[len(prefix):]: v for k, v in hub.items()}, strict=False, assign=True)
    for name in hub:
        mod_name, leaf = name[len(prefix):].rsplit(".", 1)
        mod = into.layer.get_submodule(mod_name)
        t = getattr(mod, leaf).detach().to(device=device)
        setattr(mod, leaf, torch.nn.Parameter(t, requires_grad=False) if t.is_floating_point() else t)  # codes: buffers
    return into


def sub(spec: Mapping[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The parameters under `prefix` (converted now: a sequence mixer's or a dense MLP's)."""
    return {k[len(prefix):]: spec[k] for k in spec if k.startswith(prefix)}


# --- the checks ------------------------------------------------------------------------------------

class Checker:
    """Compares one stage's legs under the stage's tolerance at the run's dtype."""

    def __init__(self, unit: Unit, dtype: torch.dtype, device: str, kind: str):
        self.unit, self.dtype, self.device, self.kind = unit, dtype, device, kind
        self.name = str(dtype).removeprefix("torch.")
        self.rows: list[Comparison] = []

    def rnd(self, a: np.ndarray) -> np.ndarray:
        """`a` rounded to the run's dtype (the shared inputs of both legs)."""
        return a if self.dtype == torch.float64 else round_to(a, self.dtype)

    def dev(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(self.rnd(a))).to(device=self.device, dtype=self.dtype)

    def add(self, stage: str, output: str, got: np.ndarray | torch.Tensor, want: np.ndarray, model: ErrorModel,
            impl: str = "torch", exact: bool = False, note: str = "", stored: bool = True) -> None:
        if isinstance(got, torch.Tensor):
            got = got.detach().to("cpu", torch.float64).numpy()
        if self.name != "float64" and not stored:
            model = dataclasses.replace(model, out_stores=0)
        low = self.name != "float64"
        c = compare(stage, self.unit.layer, self.kind, self.name, impl, "numpy", output, got, want,
                    tolerance(model, self.name), exact, metric="l2" if low else "max")
        c.note = c.note or note
        self.rows.append(c)


def chk_np(t: torch.Tensor | np.ndarray) -> np.ndarray:
    """A leg's output as a float64 NumPy array."""
    return t.detach().to("cpu", torch.float64).numpy() if isinstance(t, torch.Tensor) else t


def stage_rng(seed: int, layer: int, stage: str) -> np.random.Generator:
    return np.random.default_rng([seed, layer, sum(map(ord, stage)) * 7919 + len(stage)])


def check_attn(ld: Loaded, cfg: K3Config, own: dict, unit: Unit, opts: Options, chk: Checker,
               impls: tuple[Impl, ...]) -> str:
    """The AttnRes reads and norms of both mixers, and the sequence mixer; returns the mixer."""
    lay, p, i = ld.layer, ld.spec, unit.layer
    D, B, T, s = cfg.hidden_size, opts.rows, opts.tokens, magnitude(opts.kind)
    n_src = 1 + i // cfg.attn_res_block_size + (1 if i % cfg.attn_res_block_size else 0)  # as deep as layer i reads
    sizes = {"D": D, "L": cfg.num_hidden_layers, "B": cfg.attn_res_block_size}
    read_m = AttnResComponent().retrieval_model(sizes)
    norm_m = dataclasses.replace(NORM_MODEL, accum=D)
    cd = compute_dtype(chk.dtype)
    for part, norm, res_norm, res_proj, n in (
            ("seq", lay.input_layernorm, lay.self_attention_res_norm, lay.self_attention_res_proj, n_src),
            ("chan", lay.post_attention_layernorm, lay.mlp_res_norm, lay.mlp_res_proj, n_src + 1)):
        rng = stage_rng(opts.seed, i, part + "_res")
        sources = chk.rnd(gaussian(rng, (n, B * T, D), s))
        want = np.stack([ref.retrieve(sources[:, t], p[f"{part}_res.query"], p[f"{part}_res.norm_gain"], own["attn_res_eps"])
                         for t in range(B * T)])
        with torch.no_grad():
            w = res_norm.weight.to(cd) * res_proj.weight[0].to(cd)
            got = retrieve([chk.dev(x) for x in sources], w, cfg.attn_res_norm_eps)
        chk.add(f"{part}_read", "h", got, want, read_m)
        x = chk.rnd(gaussian(rng, (B * T, D), s))
        with torch.no_grad():
            got = norm(chk.dev(x))
        chk.add(f"{part}_norm", "x", got, ref.rms_norm(x, own["rms_eps"], p[f"{part}_norm.scale"]), norm_m)
    rng = stage_rng(opts.seed, i, "mixer")
    xs = chk.rnd(gaussian(rng, (B, T, D), s))
    with torch.no_grad():
        y, st = lay.self_attn(chk.dev(xs), lay.self_attn.initial_state(B, chk.dev(xs)))
    if cfg.is_mla(i):
        pm = sub(p, "mla.")
        H, Lkv = pm["key_up"].shape[:2]
        Rk = pm["shared_key_down"].shape[1]
        sizes = {"D": D, "H": H, "Lq": pm["query_down"].shape[1], "Lkv": Lkv, "C": pm["key_up"].shape[2], "R": Rk,
                 "V": pm["value_up"].shape[2], "B": B, "P": 0, "T": T}
        want = {"y": [], "latent": [], "shared_key": []}
        for b in range(B):
            lat, sh, ys = np.zeros((0, Lkv)), np.zeros((0, Rk)), []
            for t in range(T):
                yt, lat, sh = ref.mla_step(lat, sh, xs[b, t], pm, own)
                ys.append(yt)
            want["y"].append(np.stack(ys))
            want["latent"].append(lat)
            want["shared_key"].append(sh)
        want = {k: np.stack(v) for k, v in want.items()}
        model = MLAComponent().error_model(sizes)
        got = {"y": y, "latent": st.latent, "shared_key": st.shared_key}
        for k in got:
            chk.add("mla", k, got[k], want[k], model)
        _impl_legs(impls, "mla", {"xs": xs, **pm}, sizes, unit, chk, want, model)
        return "mla"
    pk = sub(p, "kda.")
    _, H, K = pk["query_proj"].shape
    V = pk["value_proj"].shape[2]
    W = cfg.kda_conv_size
    sizes = {"D": D, "H": H, "K": K, "V": V, "W": W, "R": pk["decay_down"].shape[1], "B": B, "P": 0, "T": T}
    want = {"y": [], "heads": [], "window_q": [], "window_k": [], "window_v": []}
    for b in range(B):
        win, hd, ys = tuple(np.zeros((W - 1, H, n)) for n in (K, K, V)), np.zeros((H, K, V)), []
        for t in range(T):
            yt, win, hd = ref.kda_layer_step(win, hd, xs[b, t], pk, own)
            ys.append(yt)
        for k, v in (("y", np.stack(ys)), ("heads", hd), ("window_q", win[0]), ("window_k", win[1]), ("window_v", win[2])):
            want[k].append(v)
    want = {k: np.stack(v) for k, v in want.items()}
    model = KDALayerComponent().error_model(sizes)
    got = {"y": y, "heads": st.recurrent, "window_q": st.conv_q.reshape(B, W - 1, H, K),
           "window_k": st.conv_k.reshape(B, W - 1, H, K), "window_v": st.conv_v.reshape(B, W - 1, H, V)}
    for k in got:
        chk.add("kda", k, got[k], want[k], model, stored=k != "heads")
    stacked = {f"{n}_conv": np.stack([pk[f"{n}_conv.{t}"] for t in range(W)]) for n in ("query", "key", "value")}
    flat = {k: v for k, v in pk.items() if "_conv." not in k}
    _impl_legs(impls, "kda_layer", {"xs": xs, **flat, **stacked}, sizes, unit, chk, want, model)
    return "kda"


def _impl_legs(impls: tuple[Impl, ...], component: str, tensors: dict[str, np.ndarray], sizes: dict[str, int],
               unit: Unit, chk: Checker, want: dict[str, np.ndarray], model: ErrorModel, expert: int | None = None) -> None:
    """Each adapter covering `component` as one more leg `impl:<name>` on the same inputs."""
    extra = {"layer": unit.layer, **({} if expert is None else {"expert": expert})}
    stage = component if expert is None else f"expert.{expert}"
    for impl in impls:
        fn = impl.covered().get(component)
        if fn is None or chk.name not in impl.dtypes:
            continue
        inputs = Inputs({k: torch.from_numpy(np.ascontiguousarray(v)).to(
            device=chk.device, dtype=chk.dtype if v.dtype.kind == "f" else None) for k, v in tensors.items()},
            impl.name, component)  # MXFP4 codes stay uint8
        try:
            with torch.no_grad():
                got = fn(Call(impl.name, component, inputs, {**sizes, **extra}, chk.dtype, chk.device))
        except Exception as exc:  # an implementation that raises is a finding about it
            chk.rows.append(Comparison(stage, unit.layer, chk.kind, chk.name, impl.column, "numpy", "*", math.inf, 0.0,
                                       False, note=f"{impl.column} raised {type(exc).__name__}: {exc}"))
            continue
        for k in sorted(set(got) & set(want)):
            chk.add(stage, k, got[k], want[k], model, impl=impl.column, stored=k != "heads")


def moe_route(ld: Loaded, own: dict, x: np.ndarray, k: int) -> list[list[int]]:
    """The reference's top-k route of each row of `x` (float64, the router's weights only)."""
    p = ld.spec
    return [ref.top_k(ref.router_scores(row, p["router.weight"]) + p["router.bias"], k) for row in x]


#: a routed expert's matrices: spec name, name in `moe.expert.{name}[e]`, hub module
EXPERT_WEIGHTS = (("gateWeight", "gate", "w1"), ("upWeight", "up", "w3"), ("downWeight", "down", "w2"))
#: the Lean theorem `quantization_budget` evaluates (its hypothesis: every weight within its block's scale)
BUDGET_THEOREM = "KimiK3.Microscaling.MXFP4Expert.abs_forward_dequantize_sub_le"


def quantization_budget(z_nl: np.ndarray, w: dict[str, np.ndarray], scale_io: dict[str, np.ndarray],
                        gate_cap: float, up_cap: float) -> np.ndarray:
    """The proved quantization bound from the MXFP4 file alone, per row and output `[N, L]`.

    `MXFP4Expert.abs_forward_dequantize_sub_le` bounds |y(dequantized) − y(master)| by
    `errorBound` for every full-precision master whose weights lie within their block's scale of
    the dequantized ones (`|Ŵ − W| ≤ s`: any ceil-rule quantization, `quantizeMXFP4Block_error_le`;
    a floor-rule one where |W| ≤ 7 s). `errorBound` needs the master's |D|; |D| ≤ |D̂| + s_D, and
    the bound grows with |D|, so `errorBound` at |D̂| + s_D bounds every such master's error:
    how far the released expert may be from any master it was quantized from, without the master."""
    q = {k: Quantized(np.empty(0), np.empty(0), scale_io[k], w[k]) for k in scale_io}
    return error_bound(z_nl, q, np.abs(w["downWeight"]) + scale_io["downWeight"], gate_cap, up_cap)


def check_codes(chk: Checker, e: int, w: dict[str, np.ndarray], codes: dict[str, tuple], z_nl: np.ndarray,
                want: np.ndarray, own: dict, stats: dict) -> dict[str, np.ndarray]:
    """One MXFP4 expert's decode check (`expert.{e}` output `decode`, exact: the number of decoded
    weights that are not finite in float64 or in the torch leg's compute dtype must be 0) and its
    quantization budget, folded into the unit's `stats`; returns the per-entry scales `[in, out]`."""
    cd = compute_dtype(chk.dtype)
    bad64 = sum(int((~np.isfinite(a)).sum()) for a in w.values())
    bad_cd = 0 if cd == torch.float64 else sum(int((~torch.isfinite(torch.from_numpy(a).to(cd))).sum()) for a in w.values())
    scales = [sc for _, _, sc in codes.values()]
    lo, hi = min(int(sc.min()) for sc in scales), max(int(sc.max()) for sc in scales)
    cd_name = str(cd).removeprefix("torch.")
    in_cd = "" if cd == torch.float64 else f", {bad_cd} in {cd_name} (the torch leg's compute dtype)"
    chk.rows.append(Comparison(f"expert.{e}", chk.unit.layer, chk.kind, chk.name, "mxfp4", "finite", "decode",
                               float(bad64 + bad_cd), 0.0, bad64 + bad_cd == 0,
                               note=f"E8M0 codes {lo}..{hi}; non-finite weights: {bad64} in float64{in_cd}"))
    scale_io = {k: mxfp4.expand_scales(mxfp4.decode_scales(sc)).T.numpy() for k, (_, _, sc) in codes.items()}
    budget = quantization_budget(z_nl, w, scale_io, own["gate_cap"], own["up_cap"])
    rel = float(budget.max() / max(np.abs(want).max(), np.finfo(float).tiny))
    stats["experts"] = stats.get("experts", 0) + 1
    stats["scale_codes"] = [min(lo, stats.get("scale_codes", [lo, hi])[0]), max(hi, stats.get("scale_codes", [lo, hi])[1])]
    stats["nonfinite_float64"] = stats.get("nonfinite_float64", 0) + bad64
    if cd != torch.float64:
        stats[f"nonfinite_{cd_name}"] = stats.get(f"nonfinite_{cd_name}", 0) + bad_cd
    stats["budget_rel_max"] = max(stats.get("budget_rel_max", 0.0), rel)
    stats["budget_theorem"] = BUDGET_THEOREM
    return scale_io


def check_master(chk: Checker, e: int, w: dict[str, np.ndarray], master_w: dict[str, np.ndarray],
                 scale_io: dict[str, np.ndarray], z_nl: np.ndarray, legs: dict[str, np.ndarray], own: dict,
                 model: ErrorModel, stats: dict) -> None:
    """One MXFP4 expert against its full-precision master (`master_w`, spec names): `master_fit`
    counts the weights outside their block's scale of the master (`|Ŵ − W| ≤ s`, the hypothesis
    of `MXFP4Expert.abs_forward_dequantize_sub_le`; exact, 0 to pass); `bound`, per leg
    (`legs`: its output on `z_nl`), is `max |y − y_master| / (errorBound + slack)` under 1, the
    slack the float evaluation error of both experts at the leg's dtype (float64 for NumPy)."""
    bad, worst = 0, ""
    for k, _, hub in EXPERT_WEIGHTS:
        over = np.abs(w[k] - master_w[k]) / scale_io[k]
        n = int((over > 1).sum())
        if n:
            i = np.unravel_index(int(np.argmax(over)), over.shape)
            worst += f"; {hub}: {n} outside (worst [in, out] = {[int(x) for x in i]}: |Ŵ − W| = {float(over[i]):.3g} s)"
        bad += n
    chk.rows.append(Comparison(f"expert.{e}", chk.unit.layer, chk.kind, chk.name, "mxfp4", "master", "master_fit",
                               float(bad), 0.0, bad == 0,
                               note=f"weights farther than their block's scale from the master: {bad}{worst}"))
    y_master = ref.expert(z_nl, master_w["gateWeight"], master_w["upWeight"], master_w["downWeight"], own)
    q = {k: Quantized(np.empty(0), np.empty(0), scale_io[k], w[k]) for k in scale_io}
    bound = error_bound(z_nl, q, master_w["downWeight"], own["gate_cap"], own["up_cap"])
    for leg, y in legs.items():
        tol = tolerance(model, "float64" if leg == "numpy" else chk.name)
        slack = tol * (np.abs(y_master).max(-1, keepdims=True) + np.abs(y).max(-1, keepdims=True))
        diff = np.abs(y - y_master)
        ratio = diff / (bound + slack)
        worst_r = float(ratio.max()) if np.isfinite(ratio).all() else math.inf
        idx = np.unravel_index(int(np.argmax(ratio)), ratio.shape) if math.isfinite(worst_r) else (0, 0)
        chk.rows.append(Comparison(f"expert.{e}", chk.unit.layer, chk.kind, chk.name, leg, "master", "bound", worst_r,
                                   1.0, worst_r <= 1.0, [int(i) for i in idx], float(y[idx]), float(y_master[idx]),
                                   float(diff[idx]), f"|y − y_master| / errorBound ({BUDGET_THEOREM}); "
                                   f"bound {float(bound[idx]):.3e}"))
        stats["bound_ratio_max"] = max(stats.get("bound_ratio_max", 0.0), worst_r)


def check_channel(ckpt: LazyCheckpoint, cfg: K3Config, config_path: Path, own: dict, unit: Unit, opts: Options,
                  chk: Checker, impls: tuple[Impl, ...], res: UnitResult, dtype: torch.dtype,
                  quantized: bool = False, master: LazyCheckpoint | None = None) -> None:
    """The dense MLP, or the MoE stages of this shard (module docstring); `quantized`: MXFP4
    routed experts; `master`: their full-precision checkpoint (`check_master`)."""
    i, D, s = unit.layer, cfg.hidden_size, magnitude(opts.kind)
    x = chk.rnd(gaussian(stage_rng(opts.seed, i, "channel"), (opts.rows * opts.tokens, D), s))
    if not cfg.is_moe(i):
        res.mixer = "dense"
        ld = load_unit(ckpt, cfg, config_path, unit, _rules(cfg, unit, ()), dtype, opts.device)
        p = sub(ld.spec, "mlp.")
        with torch.no_grad():
            got = ld.layer.mlp(chk.dev(x))
        want = ref.expert(x, p["gateWeight"], p["upWeight"], p["downWeight"], own)
        chk.add("mlp", "y", got, want, ExpertComponent().error_model({"d": D, "h": p["gateWeight"].shape[1]}))
        return
    res.mixer = "moe"
    k, E = cfg.num_experts_per_token, cfg.num_experts
    base = [r for r in _rules(cfg, unit, ()) if unit.shard == 0 or ".moe.shared." not in r.spec[0]]
    ld = load_unit(ckpt, cfg, config_path, unit, base, dtype, opts.device, quantized=quantized)  # router, shared, latent
    routes = moe_route(ld, own, x, k)
    with torch.no_grad():
        run_idx, _ = ld.layer.block_sparse_moe.gate(chk.dev(x))
    run_routes = [sorted(int(e) for e in row) for row in run_idx.cpu()]
    routed = sorted({e for r in routes + run_routes for e in r})
    extra = [] if opts.experts == "routed" else parse_spec(opts.experts, E, "--experts")
    checked = sorted(set(routed) | set(extra))
    mine = checked[unit.shard::unit.shards]
    wanted = set(mine) | (set(routed) if unit.shards == 1 else set())
    expert_rules = [r for r in _rules(cfg, unit, wanted, quantized) if ".moe.expert." in r.spec[0]]
    load_unit(ckpt, cfg, config_path, unit, expert_rules, dtype, opts.device, into=ld)
    res.experts = mine
    moe, p = ld.layer.block_sparse_moe, ld.spec
    S, h, L = cfg.num_shared_experts, cfg.moe_intermediate_size, cfg.routed_expert_hidden_size
    expert_m = ExpertComponent().error_model({"d": L, "h": h})
    z = np.stack([row @ p["moe.downProject"] for row in x])
    if unit.shard == 0:
        score_tol = tolerance(LatentMoEComponent().score_model({"d": D}), chk.name)
        use, notes = [], []
        for n, (want_r, run_r) in enumerate(zip(routes, run_routes)):
            adjusted = ref.router_scores(x[n], p["router.weight"]) + p["router.bias"]
            left = [e for e in range(E) if e not in run_r]
            gap = float(max(adjusted[left]) - min(adjusted[run_r])) if left else 0.0
            near = sorted(want_r) != run_r and gap <= score_tol * float(np.abs(adjusted).max())
            use.append(run_r if near else want_r)
            if near:
                notes.append(f"row {n}: near tie (score gap {gap:.1e}), reference on the run's route")
        note = "; ".join(notes)
        chk.add("route", "route", np.array(run_routes, np.float64), np.array([sorted(r) for r in use], np.float64),
                expert_m, exact=True, note=note)
        with torch.no_grad():
            got = moe.shared_experts(chk.dev(x))
        want = sum(ref.expert(x, p[f"moe.shared.gate[{j}]"], p[f"moe.shared.up[{j}]"], p[f"moe.shared.down[{j}]"], own)
                   for j in range(S))
        chk.add("shared", "y", got, want, ExpertComponent().error_model({"d": D, "h": S * h}))
        if unit.shards == 1:
            with torch.no_grad():
                got = moe(chk.dev(x)[None])[0]
            cfg_k = {**own, "top_k": k}
            want = np.stack([ref.latent_moe(row, p, cfg_k, S, E, r)[0] for row, r in zip(x, use)])
            chk.add("moe", "y", got, want, LatentMoEComponent().error_model({"d": D, "l": L, "hr": h, "k": k}), note=note)
    zr = chk.rnd(z)
    for e in mine:
        w = {k: p[f"moe.expert.{n}[{e}]"] for k, n, _ in EXPERT_WEIGHTS}  # converted (MXFP4: decoded) once
        with torch.no_grad():
            got = moe.experts[e](chk.dev(zr))
        want = ref.expert(zr, w["gateWeight"], w["upWeight"], w["downWeight"], own)
        chk.add(f"expert.{e}", "y", got, want, expert_m)
        tensors = {"x": zr, **w}
        if quantized:  # the file's codes too, hub layout, for adapters that run the MXFP4 kernels
            codes = {k: p.codes[f"moe.expert.{n}[{e}]"] for k, n, _ in EXPERT_WEIGHTS}
            scale_io = check_codes(chk, e, w, codes, zr, want, own, res.mxfp4)
            if master is not None:
                rules = [r for r in _rules(cfg, unit, {e}) if ".moe.expert." in r.spec[0]]
                hub = {k: v.to(torch.float64) for k, v in master.read(rules, master.folder / "config.json").items()}
                spec = adapter.to_spec(rules, hub)
                master_w = {k: spec[f"layers.{i + 1}.moe.expert.{n}[{e}]"].numpy() for k, n, _ in EXPERT_WEIGHTS}
                check_master(chk, e, w, master_w, scale_io, zr, {"numpy": want, "torch": chk_np(got)}, own, expert_m,
                             res.mxfp4)
                del master_w, spec, hub
            for k, (_, packed, scale) in codes.items():
                tensors[f"{k}.packed"], tensors[f"{k}.scale"] = packed.numpy(), scale.numpy()
        _impl_legs(impls, "expert", tensors, {"d": L, "h": h, "N": len(zr)}, unit, chk, {"y": want}, expert_m, e)


# --- running units -----------------------------------------------------------------------------------

def reset_peak_rss() -> None:
    """Reset the kernel's peak-RSS mark of this process (Linux ≥ 4.0: `clear_refs` 5)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_rss_mb() -> float:
    """This process's peak resident memory since the last reset (VmHWM), in MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Verifier:
    """A checkpoint opened for checking: its config (both readers), its shards, the options."""

    def __init__(self, folder: str | Path, opts: Options, impls: tuple[Impl, ...] = ()):
        self.folder = Path(folder)
        self.config_path = self.folder / "config.json"
        self.cfg = load_config(self.config_path)  # the torch leg's reader
        self.own = own_reading(self.config_path)  # the NumPy leg's reader (difftest's own)
        self.ckpt = LazyCheckpoint(self.folder)
        self.quantized = is_quantized(self.folder, self.cfg)  # MXFP4 routed experts (a bad quantization_config: named)
        self.master = self._master(opts.master) if opts.master else None
        self.opts, self.impls = opts, impls
        self.dtype = self.ckpt.dtype() if opts.dtype == "auto" else DTYPES[opts.dtype]
        if self.dtype not in DTYPES.values():
            self.dtype = torch.float32

    def _master(self, folder: str) -> LazyCheckpoint:
        """The full-precision master of an MXFP4 checkpoint: the same configuration, float experts."""
        path = Path(folder) / "config.json"
        if not self.quantized:
            raise ConfigError(f"--master {folder}: {self.config_path} declares no MXFP4 quantization_config; "
                              "a master is compared with MXFP4 experts only")
        if not path.is_file():
            raise ConfigError(f"--master {folder}: no config.json")
        cfg = load_config(path)
        if is_quantized(Path(folder), cfg):
            raise ConfigError(f"--master {folder}: {path} declares a quantization_config; the master holds float experts")
        if cfg != self.cfg:
            diff = [f.name for f in dataclasses.fields(cfg) if getattr(cfg, f.name) != getattr(self.cfg, f.name)]
            raise ConfigError(f"--master {folder}: {path} differs from {self.config_path} in {', '.join(diff)}")
        return LazyCheckpoint(folder)

    def graph_leg(self) -> str:
        """Why the run has no graph leg (or that it has one)."""
        same = self.cfg == load_config(TINY_CONFIG)
        return "the tiny configuration: run `difftest run` for the graph legs" if same else GRAPH_NOTE

    def run_unit(self, unit: Unit, rank: int = 0) -> UnitResult:
        """One unit: load, check, free; a fault becomes the unit's `error` (rank and layer named)."""
        res = UnitResult(unit, rank)
        reset_peak_rss()
        if self.opts.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        start, read0 = time.monotonic(), self.ckpt.bytes_read + (self.master.bytes_read if self.master else 0)
        chk = Checker(unit, self.dtype, self.opts.device, self.opts.kind)
        try:
            if unit.kind == "attn":
                ld = load_unit(self.ckpt, self.cfg, self.config_path, unit, _rules(self.cfg, unit, ()), self.dtype,
                               self.opts.device, quantized=self.quantized)
                res.mixer = check_attn(ld, self.cfg, self.own, unit, self.opts, chk, self.impls)
                del ld
            else:
                check_channel(self.ckpt, self.cfg, self.config_path, self.own, unit, self.opts, chk, self.impls, res,
                              self.dtype, self.quantized, self.master)
        except K3Error as exc:
            res.error = f"rank {rank}, {unit.label}: {exc}"
        except Exception as exc:  # reported by rank and layer; the other units go on
            last = traceback.extract_tb(exc.__traceback__)[-1]
            res.error = (f"rank {rank}, {unit.label}: {type(exc).__name__}: {exc} "
                         f"({last.filename.rsplit('/', 1)[-1]}:{last.lineno})")
        res.comparisons = chk.rows
        res.seconds = round(time.monotonic() - start, 2)
        res.bytes_read = self.ckpt.bytes_read + (self.master.bytes_read if self.master else 0) - read0
        res.peak_rss_mb = round(peak_rss_mb(), 1)
        if self.opts.device.startswith("cuda"):
            res.peak_gpu_mb = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        return res


def run_local(verifier: Verifier, units: list[Unit], rank: int = 0,
              progress: Callable[[str], None] = lambda s: None) -> list[UnitResult]:
    """The units in order on this process, with a progress line per unit."""
    out = []
    for n, unit in enumerate(units, 1):
        progress(f"[rank {rank}] {unit.label} ({n}/{len(units)}) ...")
        r = verifier.run_unit(unit, rank)
        worst = max((c.ratio for c in r.comparisons if c.tol > 0), default=0.0)
        status = "ok" if r.passed else ("ERROR " + r.error if r.error else "FAIL")
        progress(f"[rank {rank}] {unit.label}: {status} ({len(r.comparisons)} comparisons, worst error/tolerance "
                 f"{worst:.2g}, {r.seconds:.1f} s, peak {r.peak_rss_mb:.0f} MB, read {r.bytes_read / 1e6:.0f} MB)")
        out.append(r)
    return out
