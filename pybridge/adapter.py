"""The one hub ↔ spec parameter adapter.

Hub: the checkpoint's state dict (`model.layers.{i}.…`, `lm_head.weight`; nn.Linear weights
`[out, in]`), as `pybridge.model.KimiK3ForCausalLM` holds it. Spec: the Lean specification's
parameters in its `[in, out]` layout, named as the exported graphs name them
(`layers.{l}.kda.query_proj`, 1-based `l`; `fixtures/graphs/*.json`; a repeated graph name is
keyed `name[k]`, `pybridge.graph.load.binding_keys`).

Every mapping is one `Rule`: the hub tensors it reads, the spec tensors it writes, their shapes
(from the configuration), and the two directions. The rules cover names, transposes, per-head
reshapes, the KDA conv taps, the MLA `kv_a`/`q_b`/`kv_b` splits, the merged shared experts
(one hub MLP of hidden `S·h`, `S` spec experts of hidden `h`) and the AttnRes query pairs; the
table in `pybridge/README.md` is `mapping_table()`. `to_spec` / `to_hub` check every name and
shape first and raise `CheckpointError` naming the tensor at fault.

    spec = hub_to_spec(cfg, model.state_dict())       # whole model
    hub = to_hub(kda_rules(cfg), spec_of_one_layer)   # one block, names relative to the block

Beyond the state dict: `stage_route` lays the spec's routed experts into the slots of a
route-staged LatentMoE graph (which expert each slot holds is chosen outside the graph), and
`graph_params` picks the parameters a graph file binds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from pybridge import mxfp4
from pybridge.config import K3Config, VisionConfig
from pybridge.errors import CheckpointError

if TYPE_CHECKING:
    from pybridge.graph.load import Graph

Tensors = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class Rule:
    """Hub tensors `hub` (shapes `hub_shapes`) ↔ spec tensors `spec` (shapes `spec_shapes`).

    `to_spec(*hub tensors)` returns the spec tensors in order, `to_hub(*spec tensors)` the hub
    tensors; `how` describes the mapping for the README table (`hub_doc` / `spec_doc`: the name
    patterns shown there)."""

    hub: tuple[str, ...]
    spec: tuple[str, ...]
    hub_shapes: tuple[tuple[int, ...], ...]
    spec_shapes: tuple[tuple[int, ...], ...]
    to_spec: Callable[..., Tensors]
    to_hub: Callable[..., Tensors]
    how: str
    hub_doc: tuple[str, ...] = ()
    spec_doc: tuple[str, ...] = ()
    shown: int = 0  # how many spec shapes the README row shows (0: all; a pattern row shows one set)

    def prefixed(self, hub_prefix: str, spec_prefix: str) -> Rule:
        return Rule(tuple(hub_prefix + n for n in self.hub), tuple(spec_prefix + n for n in self.spec),
                    self.hub_shapes, self.spec_shapes, self.to_spec, self.to_hub, self.how,
                    tuple(hub_prefix + n for n in self.hub_doc or self.hub),
                    tuple(spec_prefix + n for n in self.spec_doc or self.spec), self.shown)


# --- rule constructors ------------------------------------------------------------------------

def same(hub: str, spec: str, shape: tuple[int, ...], how: str = "same tensor") -> Rule:
    """The same tensor under two names."""
    return Rule((hub,), (spec,), (shape,), (shape,), lambda w: (w,), lambda s: (s,), how)


def linear(hub: str, spec: str, inp: int, out: tuple[int, ...], how: str = "") -> Rule:
    """A hub nn.Linear weight `[prod(out), in]` ↔ spec `[in, *out]` (`weight.T`, viewed)."""
    n = _prod(out)
    return Rule((hub,), (spec,), ((n, inp),), ((inp, *out),),
                lambda w: (w.T.reshape(inp, *out),), lambda s: (s.reshape(inp, n).T,),
                how or ("`weight.T`" if len(out) == 1 else f"`weight.T` viewed `[{inp}, {', '.join(map(str, out))}]`"))


def mxfp4_linear(hub: str, spec: str, inp: int, out: int) -> Rule:
    """A hub MXFP4 linear layer (`{hub}.weight_packed [out, in/2]`, `{hub}.weight_scale
    [out, in/32]`, `pybridge.mxfp4`) ↔ the spec `[in, out]`: `to_spec` dequantizes exactly (float64)
    and transposes; `to_hub` quantizes (ceil rule, ties to even), so `to_spec ∘ to_hub` is the
    dequantized weight, not the identity."""
    if inp % mxfp4.GROUP:
        raise CheckpointError(f"'{hub}': MXFP4 input width {inp} is not a multiple of the MX group {mxfp4.GROUP}")
    return Rule((f"{hub}.weight_packed", f"{hub}.weight_scale"), (spec,),
                ((out, inp // 2), (out, inp // mxfp4.GROUP)), ((inp, out),),
                lambda p, s: (mxfp4.dequantize(p, s).T,), lambda w: mxfp4.quantize(w.T),
                "MXFP4: `dequantize(weight_packed, weight_scale).T` (pybridge.mxfp4)")


def linear_out_heads(hub: str, spec: str, heads: int, width: int, out: int) -> Rule:
    """A hub output projection `[out, heads·width]` ↔ spec `[heads, width, out]`."""
    return Rule((hub,), (spec,), ((out, heads * width),), ((heads, width, out),),
                lambda w: (w.T.reshape(heads, width, out),), lambda s: (s.reshape(heads * width, out).T,),
                f"`weight.T` viewed `[{heads}, {width}, {out}]` (head-major input axis)")


def row_query(hub: str, spec: str, dim: int) -> Rule:
    """A hub `Linear(dim, 1)` weight `[1, dim]` ↔ the spec query vector `[dim]`."""
    return Rule((hub,), (spec,), ((1, dim),), ((dim,),), lambda w: (w[0],), lambda s: (s[None],), "`weight[0]`")


def conv_taps(hub: str, spec: str, heads: int, width: int, taps: int) -> Rule:
    """A hub depthwise conv `[heads·width, 1, taps]` ↔ spec taps `spec.t : [heads, width]`
    (tap `t` multiplies the window row `t`, oldest first)."""
    names = tuple(f"{spec}.{t}" for t in range(taps))
    return Rule((hub,), names, ((heads * width, 1, taps),), ((heads, width),) * taps,
                lambda w: tuple(w[:, 0, t].reshape(heads, width) for t in range(taps)),
                lambda *s: (torch.stack([x.reshape(heads * width) for x in s], -1)[:, None, :],),
                "`weight[:, 0, t]` viewed `[heads, width]`; tap t multiplies window row t (oldest first)",
                spec_doc=(f"{spec}.{{t}}",), shown=1)


def split_rows_linear(hub: str, specs: tuple[str, ...], widths: tuple[int, ...], inp: int) -> Rule:
    """A hub Linear `[Σ widths, in]` whose output rows stack several spec matrices `[in, w]`."""
    total = sum(widths)
    return Rule((hub,), specs, ((total, inp),), tuple((inp, w) for w in widths),
                lambda w: tuple(p.T for p in w.split(widths, 0)),
                lambda *s: (torch.cat([x.T for x in s], 0),),
                "rows " + " and ".join(f"`[{a}:{a + w}]`" for a, w in zip(_starts(widths), widths)) + ", each `.T`")


def split_heads_linear(hub: str, specs: tuple[str, ...], heads: int, widths: tuple[int, ...], inp: int) -> Rule:
    """A hub Linear `[heads·Σ widths, in]` (per head: the parts in order) ↔ spec
    `[heads, in, w]` per part."""
    per = sum(widths)

    def to_spec(w: torch.Tensor) -> Tensors:
        return tuple(p.transpose(1, 2) for p in w.reshape(heads, per, inp).split(widths, 1))

    def to_hub(*s: torch.Tensor) -> Tensors:
        return (torch.cat([x.transpose(1, 2) for x in s], 1).reshape(heads * per, inp),)

    return Rule((hub,), specs, ((heads * per, inp),), tuple((heads, inp, w) for w in widths), to_spec, to_hub,
                f"rows viewed `[{heads}, {per}, {inp}]`, head h: " +
                " and ".join(f"`[{a}:{a + w}]`" for a, w in zip(_starts(widths), widths)) + ", each `.T`")


def merged_experts(hub: tuple[str, str, str], spec: tuple[str, str, str], dim: int, hidden: int, count: int) -> Rule:
    """The hub's merged shared MLP (gate/up `[count·hidden, dim]`, down `[dim, count·hidden]`) ↔
    `count` spec experts `name[j]` (gate/up `[dim, hidden]`, down `[hidden, dim]`): hidden
    block j. SiTU acts per hidden unit, so the sum of the parts is the merged MLP."""
    names = tuple(f"{s}[{j}]" for j in range(count) for s in spec)

    def to_spec(g: torch.Tensor, u: torch.Tensor, d: torch.Tensor) -> Tensors:
        out = []
        for j in range(count):
            rows = slice(j * hidden, (j + 1) * hidden)
            out += [g[rows].T, u[rows].T, d[:, rows].T]
        return tuple(out)

    def to_hub(*s: torch.Tensor) -> Tensors:
        parts = [s[3 * j : 3 * j + 3] for j in range(count)]
        return (torch.cat([p[0].T for p in parts], 0), torch.cat([p[1].T for p in parts], 0),
                torch.cat([p[2].T for p in parts], 1))

    return Rule(hub, names, ((count * hidden, dim), (count * hidden, dim), (dim, count * hidden)),
                ((dim, hidden), (dim, hidden), (hidden, dim)) * count, to_spec, to_hub,
                f"hidden block j (`[jh:(j+1)h]`, h = {hidden}): gate/up rows, down columns, each `.T`",
                spec_doc=tuple(f"{s}[j]" for s in spec), shown=3)


def _prod(xs: Sequence[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _starts(widths: Sequence[int]) -> list[int]:
    out, a = [], 0
    for w in widths:
        out.append(a)
        a += w
    return out


# --- the blocks -------------------------------------------------------------------------------
# Names relative to the block: hub under the layer's `self_attn.` / `block_sparse_moe.` / `mlp.`,
# spec under the layer's `kda.` / `mla.` / `moe.` / `mlp.` (the router sits at `router.`).

def kda_rules(cfg: K3Config) -> list[Rule]:
    """KDA (spec `KDA.LayerParams`, graph `kda_layer_step_tiny`) ↔ hub `KimiDeltaAttention`."""
    D, H, K, V, W, R = (cfg.hidden_size, cfg.kda_num_heads, cfg.kda_head_k_dim, cfg.kda_head_v_dim,
                        cfg.kda_conv_size, cfg.kda_decay_rank)
    return [
        linear("q_proj.weight", "query_proj", D, (H, K)),
        linear("k_proj.weight", "key_proj", D, (H, K)),
        linear("v_proj.weight", "value_proj", D, (H, V)),
        conv_taps("q_conv1d.weight", "query_conv", H, K, W),
        conv_taps("k_conv1d.weight", "key_conv", H, K, W),
        conv_taps("v_conv1d.weight", "value_conv", H, V, W),
        linear("f_a_proj.weight", "decay_down", D, (R,)),
        linear("f_b_proj.weight", "decay_up", R, (H, K)),
        Rule(("dt_bias",), ("decay_bias",), ((H * K,),), ((H, K),), lambda b: (b.reshape(H, K),),
             lambda s: (s.reshape(H * K),), "viewed `[heads, key]` (added to the decay logit)"),
        same("A_log", "decay_log_scale", (H,), "same tensor (the log-scale s of report Eq. 5)"),
        linear("b_proj.weight", "beta_proj", D, (H,)),
        linear("g_proj.weight", "gate_weight", D, (H, V)),
        same("o_norm.weight", "out_norm_scale", (V,)),
        linear_out_heads("o_proj.weight", "output_proj", H, V, D),
    ]


def mla_rules(cfg: K3Config) -> list[Rule]:
    """Gated MLA (spec `GatedMLA.Params`, graph `mla_packed_step_tiny`) ↔ hub `GatedMLA`."""
    D, H, Lq, Lkv = cfg.hidden_size, cfg.num_attention_heads, cfg.q_lora_rank, cfg.kv_lora_rank
    C, R, V = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    return [
        linear("q_a_proj.weight", "query_down", D, (Lq,)),
        same("q_a_layernorm.weight", "query_norm_scale", (Lq,)),
        split_rows_linear("kv_a_proj_with_mqa.weight", ("kv_down", "shared_key_down"), (Lkv, R), D),
        same("kv_a_layernorm.weight", "kv_norm_scale", (Lkv,)),
        split_heads_linear("q_b_proj.weight", ("query_content_up", "query_shared_up"), H, (C, R), Lq),
        split_heads_linear("kv_b_proj.weight", ("key_up", "value_up"), H, (C, V), Lkv),
        linear("g_proj.weight", "gate_weight", D, (H, V)),
        linear_out_heads("o_proj.weight", "output_weight", H, V, D),
    ]


def expert_rules(dim: int, hidden: int, names: tuple[str, str, str] = ("w1", "w3", "w2"), prefix: str = "",
                 quantized: bool = False) -> list[Rule]:
    """A SiTU expert (spec `Expert`: gateWeight, upWeight, downWeight) ↔ hub gate/up/down Linear
    weights (`w1`/`w3`/`w2` for a routed expert, `gate_proj`/`up_proj`/`down_proj` for an MLP);
    `quantized`: MXFP4 layers (`mxfp4_linear`)."""
    gate, up, down = names
    if quantized:
        return [mxfp4_linear(gate, f"{prefix}gateWeight", dim, hidden), mxfp4_linear(up, f"{prefix}upWeight", dim, hidden),
                mxfp4_linear(down, f"{prefix}downWeight", hidden, dim)]
    return [
        linear(f"{gate}.weight", f"{prefix}gateWeight", dim, (hidden,)),
        linear(f"{up}.weight", f"{prefix}upWeight", dim, (hidden,)),
        linear(f"{down}.weight", f"{prefix}downWeight", hidden, (dim,)),
    ]


def mlp_rules(cfg: K3Config) -> list[Rule]:
    """The dense SiTU channel mixer (hub `mlp.*_proj`) ↔ spec `mlp.{gate,up,down}Weight`."""
    return expert_rules(cfg.hidden_size, cfg.intermediate_size, ("gate_proj", "up_proj", "down_proj"))


def moe_rules(cfg: K3Config, quantized: bool = False) -> list[Rule]:
    """Stable LatentMoE (spec `StableLatentMoE`; graph names of `channel_latent_moe_tiny`) ↔ hub
    `block_sparse_moe`. Spec names relative to the layer: `router.weight`, `router.bias`,
    `moe.shared.{gate,up,down}[j]`, `moe.expert.{gate,up,down}[e]`, `moe.downProject`,
    `moe.upProject`, `moe.routedNormScale`. `quantized`: the routed experts are MXFP4, as
    released (`mxfp4_linear`)."""
    D, E, S, h, L = (cfg.hidden_size, cfg.num_experts, cfg.num_shared_experts, cfg.moe_intermediate_size,
                     cfg.routed_expert_hidden_size)
    rules = [
        linear("gate.weight", "router.weight", D, (E,)),
        same("gate.e_score_correction_bias", "router.bias", (E,), "same tensor (selection only)"),
        merged_experts(("shared_experts.gate_proj.weight", "shared_experts.up_proj.weight",
                        "shared_experts.down_proj.weight"), ("moe.shared.gate", "moe.shared.up", "moe.shared.down"),
                       D, h, S),
        linear("routed_expert_down_proj.weight", "moe.downProject", D, (L,)),
        linear("routed_expert_up_proj.weight", "moe.upProject", L, (D,)),
        same("routed_expert_norm.weight", "moe.routedNormScale", (L,)),
    ]
    for e in range(E):
        for hub, spec, shape in (("w1", "gate", (L, h)), ("w3", "up", (L, h)), ("w2", "down", (h, L))):
            if quantized:
                rules.append(mxfp4_linear(f"experts.{e}.{hub}", f"moe.expert.{spec}[{e}]", *shape))
                continue
            r = linear(f"experts.{e}.{hub}.weight", f"moe.expert.{spec}[{e}]", shape[0], (shape[1],))
            rules.append(Rule(r.hub, r.spec, r.hub_shapes, r.spec_shapes, r.to_spec, r.to_hub,
                              "`weight.T` (w1 gate, w3 up, w2 down)", (f"experts.{{e}}.{hub}.weight",),
                              (f"moe.expert.{spec}[e]",)))
    return rules


def attnres_rules(cfg: K3Config, hub_norm: str, hub_proj: str, spec: str) -> list[Rule]:
    """An AttnRes retrieval: hub `*_res_proj.weight [1, D]` (the query) and `*_res_norm.weight`
    (the RMSNorm gain) ↔ spec `{spec}.query`, `{spec}.norm_gain`. The score
    `query · (gain ⊙ RMSNorm(v))` is the hub's `(res_norm.weight ⊙ res_proj.weight[0]) · RMSNorm(v)`
    (`AttnRes.specFwd_eq_attendPacked_gain`)."""
    D = cfg.hidden_size
    return [row_query(f"{hub_proj}.weight", f"{spec}.query", D),
            same(f"{hub_norm}.weight", f"{spec}.norm_gain", (D,), "same tensor (the score's RMSNorm gain)")]


def layer_rules(cfg: K3Config, i: int, quantized: bool = False) -> list[Rule]:
    """Every rule of 0-based layer `i` (hub `model.layers.{i}.`, spec `layers.{i+1}.`);
    `quantized`: MXFP4 routed experts (`moe_rules`)."""
    D = cfg.hidden_size
    rules = [
        *attnres_rules(cfg, "self_attention_res_norm", "self_attention_res_proj", "seq_res"),
        same("input_layernorm.weight", "seq_norm.scale", (D,)),
        *attnres_rules(cfg, "mlp_res_norm", "mlp_res_proj", "chan_res"),
        same("post_attention_layernorm.weight", "chan_norm.scale", (D,)),
    ]
    mixer = ("mla.", mla_rules(cfg)) if cfg.is_mla(i) else ("kda.", kda_rules(cfg))
    rules += [r.prefixed("self_attn.", mixer[0]) for r in mixer[1]]
    if cfg.is_moe(i):
        rules += [r.prefixed("block_sparse_moe.", "") for r in moe_rules(cfg, quantized)]
    else:
        rules += [r.prefixed("mlp.", "mlp.") for r in mlp_rules(cfg)]
    return [r.prefixed(f"model.layers.{i}.", f"layers.{i + 1}.") for r in rules]


def model_rules(cfg: K3Config, quantized: bool = False) -> list[Rule]:
    """Every rule of the whole language model. With tied embeddings the hub has no
    `lm_head.weight` and the spec head is the embedding's transpose (no separate tensor);
    `quantized`: MXFP4 routed experts, as released (`moe_rules`)."""
    D = cfg.hidden_size
    rules = [same("model.embed_tokens.weight", "token_embedding", (cfg.vocab_size, D),
                  "same tensor (row t embeds token t)")]
    for i in range(cfg.num_hidden_layers):
        rules += layer_rules(cfg, i, quantized)
    rules += [
        *attnres_rules(cfg, "model.output_attn_res_norm", "model.output_attn_res_proj", "final_res"),
        same("model.norm.weight", "final_norm.scale", (D,)),
    ]
    if not cfg.tie_word_embeddings:
        rules.append(linear("lm_head.weight", "lm_head.weight", D, (cfg.vocab_size,)))
    return rules


# --- applying rules ---------------------------------------------------------------------------

def _check(given: Mapping[str, object], names: list[str], shapes: list[tuple[int, ...]], side: str) -> None:
    """Every name present with its shape, no extra names; one CheckpointError listing all."""
    problems = [f"missing {side} tensor '{n}' (expected shape {list(s)})" for n, s in zip(names, shapes) if n not in given]
    for n, s in zip(names, shapes):
        if n in given:
            got = tuple(getattr(given[n], "shape", ()))
            if not isinstance(given[n], torch.Tensor):
                problems.append(f"{side} tensor '{n}' is a {type(given[n]).__name__}, not a torch.Tensor")
            elif got != tuple(s):
                problems.append(f"{side} tensor '{n}' has shape {list(got)}, expected {list(s)}")
    expected = set(names)
    problems += [f"unexpected {side} tensor '{n}'" for n in given if n not in expected]
    if problems:
        raise CheckpointError(f"{len(problems)} problem(s) mapping {side} tensors:\n  " + "\n  ".join(problems))


def to_spec(rules: list[Rule], hub: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Spec tensors from hub tensors (exactly the rules' hub names; `CheckpointError` otherwise)."""
    _check(hub, [n for r in rules for n in r.hub], [s for r in rules for s in r.hub_shapes], "hub")
    out: dict[str, torch.Tensor] = {}
    for r in rules:
        out.update(zip(r.spec, r.to_spec(*(hub[n] for n in r.hub))))
    return out


def to_hub(rules: list[Rule], spec: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Hub tensors from spec tensors (exactly the rules' spec names; `CheckpointError` otherwise)."""
    _check(spec, [n for r in rules for n in r.spec], [s for r in rules for s in r.spec_shapes], "spec")
    out: dict[str, torch.Tensor] = {}
    for r in rules:
        out.update(zip(r.hub, (t.contiguous() for t in r.to_hub(*(spec[n] for n in r.spec)))))
    return out


def hub_to_spec(cfg: K3Config, hub: Mapping[str, torch.Tensor], quantized: bool = False) -> dict[str, torch.Tensor]:
    """The whole model's spec parameters from a hub state dict (`model.state_dict()`); with tied
    embeddings a `lm_head.weight` entry, if present, must be the embedding and is dropped;
    `quantized`: the routed experts are MXFP4 (`weight_packed`/`weight_scale`), dequantized."""
    hub = dict(hub)
    if cfg.tie_word_embeddings and "lm_head.weight" in hub:
        head = hub.pop("lm_head.weight")
        emb = hub.get("model.embed_tokens.weight")
        if emb is not None and (head.shape != emb.shape or not torch.equal(head, emb)):
            raise CheckpointError("hub tensor 'lm_head.weight' differs from 'model.embed_tokens.weight' "
                                  "although tie_word_embeddings is true")
    return to_spec(model_rules(cfg, quantized), hub)


def spec_to_hub(cfg: K3Config, spec: Mapping[str, torch.Tensor], quantized: bool = False) -> dict[str, torch.Tensor]:
    """The hub state dict of the whole model from its spec parameters (tied: no `lm_head.weight`;
    `quantized`: the routed experts quantized to MXFP4)."""
    return to_hub(model_rules(cfg, quantized), spec)


def stage_route(spec: Mapping[str, torch.Tensor], route: Sequence[int], prefix: str = "") -> dict[str, torch.Tensor]:
    """The slot parameters of a route-staged LatentMoE graph: slot i holds router column
    `route[i]` and that expert's weights (`{prefix}moe.slot.{router,gate,up,down}[i]`), from the
    spec names of `moe_rules` under `prefix` (e.g. `layers.2.`)."""
    out = {}
    for i, e in enumerate(route):
        e = int(e)
        out[f"{prefix}moe.slot.router[{i}]"] = spec[f"{prefix}router.weight"][:, e]
        for part in ("gate", "up", "down"):
            out[f"{prefix}moe.slot.{part}[{i}]"] = spec[f"{prefix}moe.expert.{part}[{e}]"]
    return out


def graph_params(graph: Graph, spec: Mapping[str, torch.Tensor], prefix: str = "") -> dict[str, torch.Tensor]:
    """The parameters `graph` binds (its `binding_keys`), each the spec tensor `prefix + key`; spec
    tensors the graph does not bind are left out. A key with no spec tensor is a
    `CheckpointError` naming it."""
    from pybridge.graph.load import binding_keys

    keys = binding_keys(graph.params)
    missing = [k for k in keys if prefix + k not in spec]
    if missing:
        raise CheckpointError(f"{graph.source}: no spec tensor for graph parameter(s) {', '.join(prefix + k for k in missing)}")
    return {k: spec[prefix + k] for k in keys}


def mapping_table(cfg: K3Config) -> str:
    """The README's mapping table (Markdown): one row per rule of one KDA layer, one MLA layer,
    a MoE and a dense layer, and the model-level tensors, with the shapes at `cfg`; `{i}` is the
    0-based hub layer, `{l}` = i + 1 the spec layer, `{e}` a routed expert, `[j]` a shared one."""
    rows = ["| hub tensor(s) | shape(s) | spec parameter(s) | shape(s) | mapping |", "|---|---|---|---|---|"]
    layers = range(cfg.num_hidden_layers)
    picks = dict.fromkeys(i for i in (next((i for i in layers if not cfg.is_mla(i)), None),
                                      next((i for i in layers if cfg.is_mla(i)), None),
                                      next((i for i in layers if cfg.is_moe(i)), None),
                                      next((i for i in layers if not cfg.is_moe(i)), None)) if i is not None)
    seen: set[tuple[str, str]] = set()

    def shapes(ss: tuple[tuple[int, ...], ...], n: int) -> str:
        return ", ".join(str(list(s)) for s in ss[:n])

    def add(rule: Rule, i: int | None) -> None:
        hub, spec = ", ".join(rule.hub_doc or rule.hub), ", ".join(rule.spec_doc or rule.spec)
        if i is not None:
            hub, spec = hub.replace(f"model.layers.{i}.", "model.layers.{i}."), spec.replace(f"layers.{i + 1}.", "layers.{l}.")
        if (hub, spec) in seen:
            return
        seen.add((hub, spec))
        hub, spec = hub.replace(", ", "`, `"), spec.replace(", ", "`, `")
        rows.append(f"| `{hub}` | {shapes(rule.hub_shapes, len(rule.hub))} | `{spec}` | "
                    f"{shapes(rule.spec_shapes, rule.shown or len(rule.spec))} | {rule.how} |")

    for i in picks:
        for r in layer_rules(cfg, i):
            add(r, i)
    layer_hubs = {n for i in layers for r in layer_rules(cfg, i) for n in r.hub}
    for r in model_rules(cfg):
        if not set(r.hub) & layer_hubs:
            add(r, None)
    return "\n".join(rows)


# --- MoonViT-V2 and its projector (`vision_tower.…`, `mm_projector.…`) --------------------------

def vision_rules(v: VisionConfig) -> list[Rule]:
    """MoonViT-V2 and its projector (hub `pybridge.moonvit.MoonViT`, the checkpoint's names) ↔
    spec `vision.…` / `projector.…` (`[in, out]`; per-head axes split out of the fused `wqkv`)."""
    D, A, K, M, Q = v.hidden_size, v.num_heads, v.head_dim, v.intermediate_size, v.qkv_hidden_size
    C, p, E, T = v.in_channels, v.patch_size, v.merged_size, v.text_hidden_size
    blk = "vision_tower.encoder.blocks.{i}."

    def qkv(w: torch.Tensor) -> Tensors:
        return tuple(part.T.reshape(D, A, K) for part in w.split(Q, 0))

    def qkv_hub(*s: torch.Tensor) -> Tensors:
        return (torch.cat([x.reshape(D, Q).T for x in s], 0),)

    rules = [
        Rule(("vision_tower.patch_embed.proj.weight",), ("vision.patch_weight",), ((D, C, p, p),), ((C * p * p, D),),
             lambda w: (w.reshape(D, C * p * p).T,), lambda s: (s.T.reshape(D, C, p, p),),
             f"`weight` (the Conv2d kernel) viewed `[{D}, {C * p * p}]`, `.T` (patch entries channel-major)"),
        same("vision_tower.patch_embed.pos_emb.weight", "vision.pos_table", (v.pos_emb_height, v.pos_emb_width, D),
             "same tensor (row, column, channel)"),
    ]
    for i in range(v.num_layers):
        hub, spec = blk.format(i=i), f"vision.blocks.{i}."
        block = [
            same("norm0.weight", "norm0.scale", (D,)),
            Rule(("wqkv.weight",), ("attn.query", "attn.key", "attn.value"), ((3 * Q, D),), ((D, A, K),) * 3, qkv, qkv_hub,
                 f"rows `[0:{Q}]`, `[{Q}:{2 * Q}]`, `[{2 * Q}:{3 * Q}]`, each `.T` viewed `[{D}, {A}, {K}]`"),
            linear_out_heads("wo.weight", "attn.output", A, K, D),
            same("norm1.weight", "norm1.scale", (D,)),
            linear("mlp.fc0.weight", "mlp.fc0", D, (M,)),
            linear("mlp.fc1.weight", "mlp.fc1", M, (D,)),
        ]
        rules += [r.prefixed(hub, spec) for r in block]
    return rules + [
        same("vision_tower.encoder.final_layernorm.weight", "vision.final_norm.scale", (D,)),
        linear("mm_projector.proj.0.weight", "projector.first", E, (E,)),
        linear("mm_projector.proj.2.weight", "projector.second", E, (T,)),
        same("mm_projector.post_norm.weight", "projector.post_norm.scale", (T,)),
    ]


def vision_to_spec(v: VisionConfig, hub: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The spec parameters of MoonViT and its projector from their hub tensors (`CheckpointError`
    naming every missing, unexpected or mis-shaped tensor)."""
    return to_spec(vision_rules(v), hub)


def vision_to_hub(v: VisionConfig, spec: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The hub tensors of MoonViT and its projector from their spec parameters."""
    return to_hub(vision_rules(v), spec)


def checkpoint_rules(cfg: K3Config) -> list[Rule]:
    """Every rule of a whole checkpoint: the language model and, when the config has a
    `vision_config`, MoonViT and its projector (the released layout; canonical names, without the
    `language_model.` prefix)."""
    return model_rules(cfg) + (vision_rules(cfg.vision) if cfg.vision is not None else [])


def checkpoint_to_spec(cfg: K3Config, hub: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The spec parameters of a whole checkpoint (`checkpoint_rules`): text and vision tensors."""
    return to_spec(checkpoint_rules(cfg), hub)


def spec_to_checkpoint(cfg: K3Config, spec: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The hub tensors of a whole checkpoint from its spec parameters (`checkpoint_rules`)."""
    return to_hub(checkpoint_rules(cfg), spec)


def vision_mapping_table(v: VisionConfig) -> str:
    """The README's MoonViT table (Markdown): block 0's rules with `{i}` for the block."""
    rows = ["| hub tensor(s) | shape(s) | spec parameter(s) | shape(s) | mapping |", "|---|---|---|---|---|"]
    for r in vision_rules(v):
        hub, spec = ", ".join(r.hub_doc or r.hub), ", ".join(r.spec_doc or r.spec)
        if ".blocks." in hub and ".blocks.0." not in hub:
            continue
        hub, spec = hub.replace(".blocks.0.", ".blocks.{i}."), spec.replace(".blocks.0.", ".blocks.{i}.")
        rows.append(f"| `{hub}` | {', '.join(str(list(s)) for s in r.hub_shapes)} | `{spec.replace(', ', '`, `')}` | "
                    f"{', '.join(str(list(s)) for s in r.spec_shapes)} | {r.how} |")
    return "\n".join(rows)


if __name__ == "__main__":  # print the README's tables: python -m pybridge.adapter [vision]
    import sys

    from pybridge.config import load_config

    tiny = load_config(Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "config.json")
    print(vision_mapping_table(tiny.vision) if sys.argv[1:] == ["vision"] else mapping_table(tiny))


# --- the Kimi Linear variant: transformers' in-memory names <-> the hub's ---------------------
# The variant's pybridge model (`pybridge.kimi_linear`) holds the hub's names (those of
# moonshotai/Kimi-Linear-* and of transformers' `save_pretrained`, which converts back);
# transformers 5.23 renames and fuses them when it loads (`conversion_mapping.py`, "kimi_linear").
# These functions work on any prefix (a whole model, one layer or one module's state dict).

KL_FORGET_GATE = ("f_a_proj.weight", "f_b_proj.weight", "dt_bias", "A_log")


def _split_rows(t: torch.Tensor, parts: int, name: str) -> tuple[torch.Tensor, ...]:
    if t.shape[0] % parts:
        raise CheckpointError(f"tensor '{name}' has {t.shape[0]} rows, not a multiple of {parts} (shape {list(t.shape)})")
    return tuple(t.chunk(parts, dim=0))


def kimi_linear_from_transformers(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers' Kimi Linear state dict -> the hub's names (`pybridge.kimi_linear`):
    `self_attn.forget_gate.X` -> `self_attn.X`; the fused `conv1d.weight [3HK, 1, W]` -> `q_conv1d`,
    `k_conv1d`, `v_conv1d` (rows in that order); `experts.gate_up_proj [E, 2h, D]` ->
    `experts.{e}.w1.weight` (rows :h, the gate) and `w3.weight` (rows h:, the up);
    `experts.down_proj [E, D, h]` -> `experts.{e}.w2.weight`; a sparse layer's `mlp.` ->
    `block_sparse_moe.` (dense layers keep `mlp.`)."""
    sparse = {k[: -len("mlp.experts.gate_up_proj")] for k in state if k.endswith("mlp.experts.gate_up_proj")}
    out: dict[str, torch.Tensor] = {}
    for name, t in state.items():
        for prefix in sparse:
            if prefix and name.startswith(prefix + "mlp."):
                name = prefix + "block_sparse_moe." + name[len(prefix) + 4:]
                break
        head, _, leaf = name.rpartition("forget_gate.")
        if leaf in KL_FORGET_GATE:
            name = head + leaf
        if name == "conv1d.weight" or name.endswith(".conv1d.weight"):
            base = name[: -len("conv1d.weight")]
            for part, w in zip("qkv", _split_rows(t, 3, name)):
                out[f"{base}{part}_conv1d.weight"] = w
        elif name.endswith("experts.gate_up_proj"):
            base = name[: -len("gate_up_proj")]
            for e in range(t.shape[0]):
                out[f"{base}{e}.w1.weight"], out[f"{base}{e}.w3.weight"] = _split_rows(t[e], 2, name)
        elif name.endswith("experts.down_proj"):
            base = name[: -len("down_proj")]
            for e in range(t.shape[0]):
                out[f"{base}{e}.w2.weight"] = t[e]
        else:
            out[name] = t
    return out


def kimi_linear_to_transformers(hub: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of `kimi_linear_from_transformers`: the hub's names -> transformers' 5.23
    in-memory Kimi Linear names (what its modules' `load_state_dict` takes)."""
    out: dict[str, torch.Tensor] = {}
    experts: dict[str, dict[int, dict[str, torch.Tensor]]] = {}
    for name, t in hub.items():
        head, _, leaf = name.rpartition("self_attn.")
        rel = leaf if head or name.startswith("self_attn.") else name
        pre = name[: len(name) - len(rel)]
        if rel in KL_FORGET_GATE:
            out[f"{pre}forget_gate.{rel}"] = t
            continue
        if rel.endswith(("q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight")):
            base = name[: -len("q_conv1d.weight")]
            if rel.startswith("q_"):
                out[f"{base}conv1d.weight"] = torch.cat([hub[f"{base}{p}_conv1d.weight"] for p in "qkv"], 0)
            continue
        parts = name.split(".")
        if "experts" in parts and parts[-1] == "weight" and parts[-2] in ("w1", "w2", "w3"):
            i = len(parts) - 1 - parts[::-1].index("experts")
            base = ".".join(parts[: i + 1]) + "."
            experts.setdefault(base, {}).setdefault(int(parts[i + 1]), {})[parts[-2]] = t
            continue
        out[name] = t
    for base, per in experts.items():
        E = len(per)
        if sorted(per) != list(range(E)) or any(set(p) != {"w1", "w2", "w3"} for p in per.values()):
            raise CheckpointError(f"experts under '{base}' must be 0..{E - 1}, each with w1, w2, w3 (got {sorted(per)})")
        out[f"{base}gate_up_proj"] = torch.stack([torch.cat([per[e]["w1"], per[e]["w3"]], 0) for e in range(E)])
        out[f"{base}down_proj"] = torch.stack([per[e]["w2"] for e in range(E)])
    return {k.replace(".block_sparse_moe.", ".mlp.") if not k.startswith("block_sparse_moe.") else "mlp." + k[17:]: v
            for k, v in out.items()}


def kimi_linear_hub_names(cfg, tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A Kimi Linear checkpoint's tensors under the names `pybridge.kimi_linear` holds: transformers'
    in-memory names converted (`kimi_linear_from_transformers`), and a dense layer's
    `block_sparse_moe.{gate,up,down}_proj` (transformers 5.23's `save_pretrained` renames every
    `.mlp.` back, dense layers included) read as `mlp.*`."""
    out = kimi_linear_from_transformers(tensors)
    for i in range(cfg.num_hidden_layers):
        if cfg.is_moe(i):
            continue
        for part in ("gate_proj", "up_proj", "down_proj"):
            old = f"model.layers.{i}.block_sparse_moe.{part}.weight"
            if old in out:
                out[f"model.layers.{i}.mlp.{part}.weight"] = out.pop(old)
    return out
