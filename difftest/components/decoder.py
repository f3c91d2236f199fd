"""The whole decoder token step (graph `decoder_step_tiny`; KimiK3ForCausalLM with a cache).

The Lean export `fixtures/graphs/decoder_step_tiny.json` is one cached step of the tiny model
(5 layers: KDA 1–3, MLA 4–5, layer 1 dense, MoE 2–5, AttnRes blocks of 3) after `PAST` tokens.
Its inputs are the step token's embedding and the prefix states (KDA: the last three layer
inputs and the heads' state; MLA: the latent and shared-key caches); its outputs are the logits,
every updated state and every MoE layer's router scores. The MoE routes are *staged*: each
layer's chosen experts are parameters (slot i holds expert `route[i]`), so a route computed
outside the graph is fed in and checked afterwards against the top-k of the graph's own scores.

Parameters: the graph's names are the spec names of `pybridge.adapter` (hub `[out, in]` ->
spec `[in, out]`, splits and all); the routes are staged with `adapter.stage_route`. The Lean
KDA layer has no decay-logit bias yet, so `dt_bias` is 0 in the torch model (`tiny_model`).

No Lean path: evaluating the step in the offline Lean interpreter is too slow; the graph (the
Lean export compiled by `pybridge.graph`) is the independent reference.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from difftest.case import Case
from difftest.components.base import TINY_CONFIG, Component, ErrorModel, to_np
from difftest.components.channel import LatentMoEComponent, compiled
from difftest.components.depth import AttnResComponent
from difftest.components.sequence import KDALayerComponent, MLAComponent
from pybridge import adapter
from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge.model import K3Cache, KimiK3ForCausalLM
from pybridge.moe import select_top_k

F64 = torch.float64
PAST = 3  # tokens before the step (the export's MLA cache length; the KDA window length)
GRAPH_FILE = "decoder_step_tiny.json"


def tiny_model(seed: int, dtype: torch.dtype = F64) -> KimiK3ForCausalLM:
    """The seeded tiny model (fixtures/tiny/config.json) with KDA `dt_bias` = 0 (the Lean KDA
    layer has no decay-logit bias)."""
    model = random_model(load_config(TINY_CONFIG), seed=seed, dtype=dtype)
    with torch.no_grad():
        for lay in model.model.layers:
            if not lay.is_mla:
                lay.self_attn.dt_bias.zero_()
    return model


def decoder_params(model: KimiK3ForCausalLM, routes: dict[int, list[int]]) -> dict[str, torch.Tensor]:
    """Spec parameters of the whole model (`pybridge.adapter`) plus the staged route of every MoE
    layer (keyed by 0-based layer index): the graph `decoder_step_tiny` binds its own keys."""
    spec = adapter.hub_to_spec(model.config, model.state_dict())
    for i, route in routes.items():
        spec.update(adapter.stage_route(spec, route, f"layers.{i + 1}."))
    return spec


class Recorder:
    """Forward hooks: every KDA/MLA layer's input rows and every MoE gate's input rows and
    chosen experts, per call (0-based layer index)."""

    def __init__(self, model: KimiK3ForCausalLM) -> None:
        self.seq_in: dict[int, list[torch.Tensor]] = {}
        self.gate_in: dict[int, torch.Tensor] = {}
        self.route: dict[int, list[int]] = {}
        self.handles = []
        for i, lay in enumerate(model.model.layers):
            self.handles.append(lay.self_attn.register_forward_hook(self._seq(i)))
            if hasattr(lay, "block_sparse_moe"):
                self.handles.append(lay.block_sparse_moe.gate.register_forward_hook(self._gate(i)))

    def _seq(self, i: int):
        def hook(module, args, output) -> None:
            self.seq_in.setdefault(i, []).extend(args[0][0])  # [T, D] rows of batch 0

        return hook

    def _gate(self, i: int):
        def hook(module, args, output) -> None:
            self.gate_in[i] = args[0][-1]  # the last token's row
            self.route[i] = output[0][-1].tolist()

        return hook

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def cast_cache(cache: K3Cache, dtype: torch.dtype, device: str) -> K3Cache:
    """`cache` with every state tensor converted to `dtype` on `device`."""
    def cast(st):
        return dataclasses.replace(st, **{f.name: getattr(st, f.name).to(device=device, dtype=dtype)
                                          for f in dataclasses.fields(st)})

    return K3Cache([cast(st) for st in cache.layers], cache.length)


def cached_step(model: KimiK3ForCausalLM, ids: list[int], prefix_model: KimiK3ForCausalLM | None = None) -> dict:
    """The prefix `ids[:-1]` in one call, then one cached step on `ids[-1]`, recorded:
    `logits` [vocab] of the step, `prefix` (cache after the prefix), `cache` (after the step),
    `prefix_rows` (each mixer's prefix input rows) and `rec` (the step's Recorder, its `seq_in`
    holding the prefix rows too). With `prefix_model` (same weights, e.g. float64) the prefix
    runs on it and its cache is cast to `model`'s dtype and device: the step alone is `model`'s."""
    pm = model if prefix_model is None else prefix_model
    weight = model.lm_head.weight
    ids_bt = torch.tensor([list(ids)], device=pm.lm_head.weight.device)
    rec = Recorder(pm)
    try:
        with torch.no_grad():
            _, prefix = pm(ids_bt[:, :-1])
    finally:
        rec.close()
    prefix_rows = {i: list(rows) for i, rows in rec.seq_in.items()}
    rec = Recorder(model)
    try:
        with torch.no_grad():
            logits_btv, cache = model(ids_bt[:, -1:].to(weight.device), cast_cache(prefix, weight.dtype, weight.device))
    finally:
        rec.close()
    rec.seq_in = {i: [r.to(weight) for r in prefix_rows[i]] + rows for i, rows in rec.seq_in.items()}
    return {"logits": logits_btv[0, -1], "prefix": prefix, "cache": cache, "prefix_rows": prefix_rows, "rec": rec}


def step_inputs(model: KimiK3ForCausalLM, token: int, run: dict) -> dict[str, torch.Tensor]:
    """Graph inputs of `decoder_step_tiny`: the token's embedding, the constants and the prefix
    states of `run` (a `cached_step` result; KDA windows are the last three layer inputs, oldest
    first)."""
    cfg = model.config
    dt = model.lm_head.weight.dtype
    inputs = {
        "embedding": model.model.embed_tokens.weight[token],
        "gate_cap": torch.tensor(cfg.situ_gate_cap, dtype=dt),
        "up_cap": torch.tensor(cfg.situ_up_cap, dtype=dt),
        "score_scale": torch.tensor(cfg.mla_score_scale, dtype=dt),
    }
    for i, (lay, st) in enumerate(zip(model.model.layers, run["prefix"].layers)):
        p = f"layers.{i + 1}."
        if lay.is_mla:
            inputs[p + "latent_cache"] = st.latent[0]
            inputs[p + "shared_key_cache"] = st.shared_key[0]
        else:
            rows = run["prefix_rows"][i]
            for r in range(3):
                inputs[p + f"window.{r}"] = rows[len(rows) - 3 + r]
            inputs[p + "heads"] = st.recurrent[0]
    return inputs


def run_decoder_step(seed: int = 3, routes: dict[int, list[int]] | None = None,
                     ids: tuple[int, ...] = (5, 17, 42, 99), dtype: torch.dtype = F64, device: str = "cpu") -> dict:
    """A seeded tiny model (float64), `PAST` prefix tokens, then one cached step; the graph
    (compiled at `dtype` on `device`) evaluated on the model's weights, the prefix states and the
    routes staged from the model's own routing of the step token (or `routes` when given).
    Returns the `cached_step` record plus `model` and `got` (the graph's outputs)."""
    if len(ids) != PAST + 1:
        raise ValueError(f"decoder_step_tiny steps after {PAST} tokens: give {PAST + 1} token ids, got {len(ids)}")
    model = tiny_model(seed)
    run = cached_step(model, list(ids))
    cg = compiled(GRAPH_FILE, dtype, device)
    with torch.no_grad():
        spec = decoder_params(model, run["rec"].route if routes is None else routes)
        got = cg(adapter.graph_params(cg.graph, spec), step_inputs(model, ids[-1], run))
    return {**run, "model": model, "got": got}


def without_staged(out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`out` without the `staged_route` bookkeeping entries."""
    return {k: v for k, v in out.items() if not k.endswith("staged_route")}


def layer_tag(i: int) -> str:
    """Output-name prefix of 0-based layer `i` (1-based as in the graph): `L2.`."""
    return f"L{i + 1}."


class DecoderStepComponent(Component):
    name = "decoder_step"
    summary = "one cached token step of the whole tiny decoder (graph decoder_step_tiny; KimiK3ForCausalLM)"
    template = ""  # no Lean path: the step's Lean evaluation is too slow offline
    kinds = ("random",)
    default_sizes = {"P": PAST}
    graph_file = GRAPH_FILE

    def sample(self, rng, kind, sizes):
        if sizes["P"] != PAST:
            raise ValueError(f"decoder_step_tiny is exported for {PAST} prefix tokens, not {sizes['P']}")
        vocab = load_config(TINY_CONFIG).vocab_size
        # ids below vocab/2: the shrinker's value simplification (powers of two) stays below vocab
        return {"model_seed": np.array(float(rng.integers(0, 2**20))),
                "ids": rng.integers(0, vocab // 2, PAST + 1).astype(np.float64)}

    @staticmethod
    def seed_and_ids(case: Case) -> tuple[int, tuple[int, ...]]:
        return int(case.tensors["model_seed"]), tuple(int(i) for i in case.tensors["ids"])

    def torch_outputs(self, case, dtype, device):
        seed, ids = self.seed_and_ids(case)
        model = tiny_model(seed).to(device=device, dtype=dtype)
        # float64: the whole path (prefill, then the step); lower precisions: the step alone, from
        # the float64 prefix states the graph is given (a prefix token routed differently at a
        # near tie would otherwise change the states the step starts from)
        run = cached_step(model, list(ids), None if dtype == F64 else tiny_model(seed).to(device))
        rec, out = run["rec"], {"logits": to_np(run["logits"])}
        for i, (lay, st) in enumerate(zip(model.model.layers, run["cache"].layers)):
            p = layer_tag(i)
            if lay.is_mla:
                out[p + "latent_cache"], out[p + "shared_key_cache"] = to_np(st.latent[0]), to_np(st.shared_key[0])
            else:
                out[p + "heads"] = to_np(st.recurrent[0])
                out[p + "window"] = to_np(torch.stack(rec.seq_in[i][-3:]))
                for name in ("q", "k", "v"):
                    out[p + f"conv_{name}"] = to_np(getattr(st, f"conv_{name}")[0])
            if i in rec.route:
                gate = lay.block_sparse_moe.gate
                with torch.no_grad():
                    scores_e = torch.sigmoid(rec.gate_in[i] @ gate.weight.T) + gate.e_score_correction_bias
                out[p + "router_scores"] = to_np(scores_e)
                out[p + "route"] = np.array(sorted(rec.route[i]), dtype=np.float64)
        return {"torch": out}

    def graph_outputs(self, case, dtype, device, routes: dict[int, list[int]] | None = None):
        """The step graph on the float64 prefix states and staged routes (the float64 torch
        model's own, or `routes`); `L{l}.route` is the top-k of the graph's own router scores,
        ascending (compared exactly with the torch route's experts: a staged route that is not
        the graph's top-k fails; the slot order only changes the summation order); `L{l}.staged_route` is the route
        fed in (bookkeeping for `lowp_reference`, not compared). KDA conv caches are the float64 projections of the graph's window rows."""
        seed, ids = self.seed_and_ids(case)
        r = run_decoder_step(seed, routes, ids, dtype, device)
        model, got, out = r["model"], r["got"], {"logits": to_np(r["got"]["logits"])}
        for i, lay in enumerate(model.model.layers):
            p, g = layer_tag(i), f"layers.{i + 1}."
            if lay.is_mla:
                out[p + "latent_cache"] = to_np(got[g + "latent_cache_next"])
                out[p + "shared_key_cache"] = to_np(got[g + "shared_key_cache_next"])
            else:
                out[p + "heads"] = to_np(got[g + "heads_next"])
                rows_wd = torch.stack([got[g + f"window_next.{k}"].to("cpu", F64) for k in range(3)])
                out[p + "window"] = to_np(rows_wd)
                with torch.no_grad():
                    for name in ("q", "k", "v"):
                        out[p + f"conv_{name}"] = to_np(getattr(lay.self_attn, f"{name}_proj")(rows_wd))
            if hasattr(lay, "block_sparse_moe"):
                scores_e = got[g + "router_scores"]
                out[p + "router_scores"] = to_np(scores_e)
                top_k = select_top_k(scores_e[None], lay.block_sparse_moe.gate.top_k)[0]
                out[p + "route"] = np.array(sorted(top_k.tolist()), dtype=np.float64)
                out[p + "staged_route"] = np.array(r["rec"].route[i] if routes is None else routes[i], dtype=np.float64)
        return out

    def exact_outputs(self):
        cfg = load_config(TINY_CONFIG)
        return tuple(f"{layer_tag(i)}route" for i in range(cfg.first_k_dense_replace, cfg.num_hidden_layers))

    def lowp_reference(self, case, got, ref, dtype):
        """The float64 graph. A low-precision run may route differently at a near tie. Its route
        is the top-k of its own scores; if those are within δ (max abs) of the float64 scores on
        the same routes, every expert it chose has a float64 score at most 2δ below every expert
        it left out. Where that holds in every differing layer, the reference is the float64
        graph staged with the low-precision routes (the scores themselves are compared under the
        tolerance); otherwise the route comparison fails."""
        graph = self.graph_outputs(case, F64, "cpu")
        routes = {name: got[name] for name in self.exact_outputs() if name in got}
        differ = [name for name, r in routes.items() if not np.array_equal(r, graph[name])]
        if not differ:
            return without_staged(graph), "reference = float64 graph"
        # the routes the run computed with: its own (torch), or the float64 ones fed in (graph)
        staged = {int(name[1:].split(".")[0]) - 1: [int(e) for e in got.get(name.replace("route", "staged_route"), r)]
                  for name, r in routes.items()}
        near = self.graph_outputs(case, F64, "cpu", routes=staged)
        gaps = []
        for name in differ:
            want, run = near[name.replace("route", "router_scores")], got[name.replace("route", "router_scores")]
            chosen = [int(e) for e in routes[name]]
            left = [e for e in range(len(want)) if e not in chosen]
            gap, delta = float(max(want[left]) - min(want[chosen])), float(np.abs(run - want).max())
            if gap > 2 * delta:
                return without_staged(graph), "reference = float64 graph"
            gaps.append(f"{name} gap {gap:.1e} <= 2 x {delta:.1e}")
        near.update(routes)  # accepted near ties
        return without_staged(near), f"near tie ({'; '.join(gaps)}): reference = float64 graph on the {dtype} run's routes"

    def error_model(self, sizes):
        """The chain of the step: per layer the AttnRes read before the mixer, the mixer (KDA
        layer with one token, or MLA over PAST + 1 tokens), the AttnRes read before the channel
        mixer and the MoE (the dense MLP of layer 1 is shorter), then the final AttnRes read,
        RMSNorm and the LM head (dot of length D). Stores and accumulation lengths add along the
        chain; the amplification is that of one stage (4): every stage reads the residual stream
        through an RMSNorm'd, softmax-weighted convex mix (AttnRes), so a relative error in the
        stream is carried, not multiplied, into the next stage's output."""
        cfg = load_config(TINY_CONFIG)
        D = cfg.hidden_size
        attn = AttnResComponent().error_model({"D": D, "L": cfg.num_hidden_layers, "B": cfg.attn_res_block_size})
        kda_ = KDALayerComponent().error_model({**KDALayerComponent.default_sizes, "T": 1})
        mla_ = MLAComponent().error_model({**MLAComponent.default_sizes, "T": sizes["P"] + 1})
        moe_ = LatentMoEComponent().error_model(LatentMoEComponent.default_sizes)
        stages = [attn]  # the final read
        for i in range(cfg.num_hidden_layers):
            stages += [attn, mla_ if cfg.is_mla(i) else kda_, attn, moe_]
        norm_head = ErrorModel(stores=6, accum=2 * D, amp=2.0)  # final RMSNorm and the LM head
        return ErrorModel(stores=sum(s.stores for s in stages) + norm_head.stores,
                          accum=sum(s.accum for s in stages) + norm_head.accum,
                          amp=max(s.amp for s in stages))
