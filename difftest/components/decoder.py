"""The whole decoder token step (graph `decoder_step_tiny`; KimiK3ForCausalLM with a cache).

A case is B rows of P prefix tokens and one step token, on a seeded tiny model
(`fixtures/tiny/config.json`: KDA layers 1–3, MLA 4–5, layer 1 dense, MoE 2–5, AttnRes blocks
of 3). Legs:
* torch: the prefix in one batched prefill call, then one batched cached step;
* numpy: difftest's own decoder (`numpy_ref.Decoder`) on the model's spec parameters
  (`pybridge.adapter`), token by token;
* graph: the Lean export of one step after exactly 3 prefix tokens, per row, fed the NumPy
  prefix states (KDA: the last three layer inputs and the heads; MLA: the caches) and the NumPy
  routes staged into its slots (`staged_routes`); outputs besides the step's: every MoE layer's
  router scores, the experts staged (`L{n}.staged_experts`, slot order) and, as an independent
  Python check, the top-k of the graph's own router scores (`L{n}.route`, compared exactly with
  the NumPy and torch routes; it runs on every case, Lean or not);
* Lean: the executable spec's language model (`Exec.LanguageModel.runF`, equal to the reference
  `LanguageModel.run` by `Exec.LanguageModel.run_eq`) on the same spec parameters, the first row
  (`LEAN_ROWS`) from the initial state over its prefix and step token
  (templates/decoder_step.lean.j2): the step token's logits, the new KDA heads and MLA caches,
  compared with the same row of the other legs (`lean_slice`). Its configuration values and
  layer schedule come from the Lean leg's reading (`lean_config`), its widths from the
  parameters' shapes.
  In the same bundle, **the route checks**: the library's `Routing.checkRouteF` (equal to
  `Routing.checkRoute`, the hypothesis of `Decoder.program_eval_step`/`program_eval_run`, by
  `Routing.checkRouteF_ofFn`) on every staged route of every MoE layer and row, against the graph
  leg's own router scores (`route_checks`: a rejected route fails the case, naming the layer,
  the row, the slots' experts, the top-k and the scores).

Kinds: `random`; `tie` (in the router of every MoE layer, experts 0–2 score exactly σ(0) + b₀,
so wherever they reach the top-k the tie rule, lower index first, picks among them);
`long` (40 prefix tokens: no graph, no Lean by default).

Low precision: every stage of the step (each layer's AttnRes reads, norms, mixer and channel
mixer, the final read, norm and head) at the run's dtype on the NumPy reference's own inputs at
that point, rounded; and, as information only (`info`), the whole rounded model from scratch
against the float64 NumPy logits: KL divergence and top-1 agreement.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import torch

from difftest import numpy_ref as ref
from difftest.case import Case
from difftest.components.base import (
    F64,
    ErrorModel,
    ExecComponent,
    LowpCheck,
    compiled,
    round_to,
    t64,
    to_np,
    torch_config,
)
from difftest.components.channel import LatentMoEComponent
from difftest.components.depth import AttnResComponent
from difftest.components.sequence import KDALayerComponent, MLAComponent
from difftest.lean import TensorRefs
from pybridge import adapter
from pybridge.attnres import retrieve
from pybridge.checkpoint import random_model
from pybridge.kda import KDAState
from pybridge.layers import compute_dtype
from pybridge.mla import MLACache
from pybridge.model import KimiK3ForCausalLM

GRAPH_FILE = "decoder_step_tiny.json"
GRAPH_PAST = 3  # the export's MLA cache length and KDA window length
TIE_GROUP = 3  # the `tie` kind: experts 0..TIE_GROUP-1 of every router tie exactly
#: rows of a case the Lean model evaluates (each row costs its P + 1 token steps in the offline
#: interpreter, about half of a case's Lean time per row; rows are independent there, so the
#: batch itself is the torch leg's concern, checked against NumPy and the graph on every row).
#: The route checks take every row.
LEAN_ROWS = 1


def tiny_model(seed: int, dtype: torch.dtype = F64, tied: int = 0) -> KimiK3ForCausalLM:
    """The seeded tiny model (random weights: a nonzero KDA `dt_bias`, the Lean layer's
    `decayBias`); `tied` > 1: in every MoE router, experts `0 .. tied - 1` get a zero router
    column and expert 0's bias, so their scores are σ(0) + b₀ exactly in every leg and
    every token, whatever the rounding of the other columns (equal nonzero columns would not
    do: a matmul may round its columns differently)."""
    model = random_model(torch_config(), seed=seed, dtype=dtype)
    if tied > 1:
        with torch.no_grad():
            for lay in model.model.layers:
                if hasattr(lay, "block_sparse_moe"):
                    gate = lay.block_sparse_moe.gate
                    gate.weight[:tied] = 0.0
                    gate.e_score_correction_bias[:tied] = gate.e_score_correction_bias[0].clone()
    return model


def case_model(tensors: dict[str, np.ndarray], dtype: torch.dtype = F64) -> KimiK3ForCausalLM:
    """The model of a case: its `model_seed`, with the router ties of its `router_ties` (how
    many experts tie; absent or 0: none)."""
    return tiny_model(int(tensors["model_seed"]), dtype, int(tensors.get("router_ties", 0)))


def layer_tag(i: int) -> str:
    """Output-name prefix of 0-based layer `i` (1-based as in the graph): `L2.`."""
    return f"L{i + 1}."


class DecoderStepComponent(ExecComponent):
    name = "decoder_step"
    summary = ("one cached token step of the whole tiny decoder, B rows (Lean LanguageModel.run on the first row and "
               "Routing.checkRouteF on every staged route; graph decoder_step_tiny; KimiK3ForCausalLM)")
    template = "decoder_step"
    lean_targets = ("KimiK3.Exec.Kernel", "KimiK3.Channel.RouteCheck")  # the route checker `Routing.checkRouteF`
    lean_skip_kinds = ("long",)  # 41 tokens per row from the initial state: minutes in the interpreter
    kinds = {
        "random": "a seeded model, B rows of different token ids",
        "tie": f"router scores of experts 0-{TIE_GROUP - 1} tied exactly in every MoE layer (the tie rule picks)",
        "long": "40 prefix tokens (no graph: it is exported for 3)",
    }
    default_sizes = {"B": 2, "P": GRAPH_PAST}
    graph_file = GRAPH_FILE

    def sizes_for_kind(self, kind, thorough=False):
        s = dict(self.default_sizes)
        if kind == "long":
            s["P"] = 40
        if thorough:
            s["B"] = 4
        return s

    def shrink_sizes(self, sizes):
        return [{**sizes, "B": 1}] if sizes["B"] > 1 else []

    def graph_fits(self, case):
        return case.sizes["P"] == GRAPH_PAST

    def sample(self, rng, kind, sizes):
        vocab = torch_config().vocab_size
        # ids below vocab/2: the shrinker's value simplification (powers of two) stays below vocab
        out = {"model_seed": np.array(float(rng.integers(0, 2**20))),
               "ids": rng.integers(0, vocab // 2, (sizes["B"], sizes["P"] + 1)).astype(np.float64)}
        if kind == "tie":
            out["router_ties"] = np.array(float(TIE_GROUP))
        return out

    @staticmethod
    def seed_and_ids(case: Case) -> tuple[int, np.ndarray]:
        return int(case.tensors["model_seed"]), case.tensors["ids"].astype(np.int64)

    @staticmethod
    def model(case: Case, dtype: torch.dtype = F64) -> KimiK3ForCausalLM:
        """The case's model (`case_model`): every leg builds its own from the case's tensors."""
        return case_model(case.tensors, dtype)

    # --- torch -----------------------------------------------------------------------------------
    def torch_outputs(self, case, dtype, device):
        _, ids = self.seed_and_ids(case)
        model = self.model(case).to(device=device, dtype=dtype)
        ids_bt = torch.tensor(ids, device=device)
        gates: dict[int, torch.Tensor] = {}
        handles = [lay.block_sparse_moe.gate.register_forward_hook(
            lambda mod, args, out, i=i: gates.__setitem__(i, args[0])) for i, lay in enumerate(model.model.layers)
            if hasattr(lay, "block_sparse_moe")]
        try:
            with torch.no_grad():
                _, cache = model(ids_bt[:, :-1])
                logits_btv, cache = model(ids_bt[:, -1:], cache)
        finally:
            for h in handles:
                h.remove()
        out = {"logits": to_np(logits_btv[:, -1])}
        for i, (lay, st) in enumerate(zip(model.model.layers, cache.layers)):
            p = layer_tag(i)
            if lay.is_mla:
                out[p + "latent_cache"], out[p + "shared_key_cache"] = to_np(st.latent), to_np(st.shared_key)
            else:
                out[p + "heads"] = to_np(st.recurrent)
            if i in gates:
                gate = lay.block_sparse_moe.gate
                x = gates[i].to(compute_dtype(dtype))
                with torch.no_grad():
                    scores = torch.sigmoid(x @ gate.weight.to(x.dtype).T) + gate.e_score_correction_bias.to(x.dtype)
                    route, _ = gate(x)
                out[p + "router_scores"] = to_np(scores)
                out[p + "route"] = np.sort(route.cpu().numpy(), -1).astype(np.float64)
        return {"torch": out}

    # --- numpy -----------------------------------------------------------------------------------
    def decoder(self, model: KimiK3ForCausalLM) -> ref.Decoder:
        """difftest's decoder on the model's spec parameters; its layer schedule and
        configuration values from difftest's own reader."""
        cfg, own = model.config, self.own_config()
        spec = {k: to_np(v) for k, v in adapter.hub_to_spec(cfg, model.state_dict()).items()}
        layers = range(1, cfg.num_hidden_layers + 1)
        return ref.Decoder(spec, own, tuple(n in own["mla_layers"] for n in layers), tuple(n in own["moe_layers"] for n in layers),
                           cfg.num_shared_experts, cfg.num_experts, cfg.kda_conv_size)

    def numpy_rows(self, case: Case, model: KimiK3ForCausalLM | None = None) -> list[tuple[ref.Decoder, np.ndarray, list]]:
        """Per row: the decoder after the step, its logits, and the states after the prefix."""
        _, ids = self.seed_and_ids(case)
        model = self.model(case) if model is None else model
        rows = []
        for row in ids:
            dec = self.decoder(model)
            for tok in row[:-1]:
                dec.step(int(tok))
            prefix = list(dec.states)
            rows.append((dec, dec.step(int(row[-1])), prefix))
        return rows

    def numpy_outputs(self, case):
        out: dict[str, list] = {}
        for dec, logits, _ in self.numpy_rows(case):
            out.setdefault("logits", []).append(logits)
            for i, st in enumerate(dec.states):
                p = layer_tag(i)
                if dec.mla[i]:
                    out.setdefault(p + "latent_cache", []).append(st.latent)
                    out.setdefault(p + "shared_key_cache", []).append(st.shared)
                else:
                    out.setdefault(p + "heads", []).append(st.heads)
                rec = dec.record[i + 1]
                if rec["route"] is not None:
                    out.setdefault(p + "router_scores", []).append(rec["scores"])
                    out.setdefault(p + "route", []).append(np.array(sorted(rec["route"]), np.float64))
        return {k: np.stack(v) for k, v in out.items()}

    # --- graph -----------------------------------------------------------------------------------
    @staticmethod
    def staged_routes(dec: ref.Decoder) -> dict[int, list[int]]:
        """The routes the graph leg stages for one row (0-based MoE layer -> experts, slot order):
        the NumPy decoder's own routes of the step token."""
        return {i: list(rec["route"]) for i in range(len(dec.mla)) if (rec := dec.record[i + 1])["route"]}

    def graph_outputs(self, case, device, routes: list[dict[int, list[int]]] | None = None):
        """The step graph per row on the NumPy prefix states, staged with `staged_routes` (or
        `routes`, per row: 0-based layer -> experts); per MoE layer `L{l}.router_scores` (the
        graph's own), `L{l}.staged_experts` (slot order: what the Lean route check takes) and
        `L{l}.route`, the top-k of the graph's router scores in Python (`numpy_ref.top_k`)."""
        _, ids = self.seed_and_ids(case)
        model = self.model(case)
        cfg, own = model.config, self.own_config()
        spec = adapter.hub_to_spec(cfg, model.state_dict())
        cg = compiled(GRAPH_FILE, F64, device)
        out: dict[str, list] = {}
        for b, ((dec, _, prefix), row) in enumerate(zip(self.numpy_rows(case, model), ids)):
            staged_routes = self.staged_routes(dec) if routes is None else routes[b]
            staged = dict(spec)
            for i, route in staged_routes.items():
                staged.update(adapter.stage_route(spec, route, f"layers.{i + 1}."))
            inputs = {"embedding": spec["token_embedding"][int(row[-1])], "gate_cap": t64(np.array(own["gate_cap"])),
                      "up_cap": t64(np.array(own["up_cap"])), "score_scale": t64(np.array(own["score_scale"]))}
            for i, st in enumerate(prefix):
                g = f"layers.{i + 1}."
                if dec.mla[i]:
                    inputs[g + "latent_cache"], inputs[g + "shared_key_cache"] = t64(st.latent), t64(st.shared)
                else:
                    inputs.update({g + f"window.{r}": t64(x) for r, x in enumerate(st.rows)})
                    inputs[g + "heads"] = t64(st.heads)
            with torch.no_grad():
                got = cg(adapter.graph_params(cg.graph, staged), inputs)
            out.setdefault("logits", []).append(to_np(got["logits"]))
            for i in range(cfg.num_hidden_layers):
                p, g = layer_tag(i), f"layers.{i + 1}."
                if dec.mla[i]:
                    out.setdefault(p + "latent_cache", []).append(to_np(got[g + "latent_cache_next"]))
                    out.setdefault(p + "shared_key_cache", []).append(to_np(got[g + "shared_key_cache_next"]))
                else:
                    out.setdefault(p + "heads", []).append(to_np(got[g + "heads_next"]))
                if i in staged_routes:
                    scores = to_np(got[g + "router_scores"])
                    out.setdefault(p + "router_scores", []).append(scores)
                    out.setdefault(p + "staged_experts", []).append(np.array(staged_routes[i], np.float64))
                    out.setdefault(p + "route", []).append(np.array(sorted(ref.top_k(scores, own["top_k"])), np.float64))
        return {k: np.stack(v) for k, v in out.items()}

    # --- Lean ------------------------------------------------------------------------------------
    def lean_schedule(self, n_layers: int) -> list[dict[str, bool]]:
        """Per layer, whether it is MLA and MoE, from the Lean leg's configuration reading."""
        cfg = self.lean_config()
        return [{"mla": n in cfg["mla_layers"], "moe": n in cfg["moe_layers"]} for n in range(1, n_layers + 1)]

    def lean_case(self, case):
        """The Lean leg's view: the seeded model's spec parameters (`pybridge.adapter.hub_to_spec`,
        as the NumPy leg) with the convolution taps and the experts stacked as the executable
        structures take them, each AttnRes query with its score-norm gain folded in
        (`gain ⊙ query`, `weighted_query`: `AttnRes.specFwd_eq_attendPacked_gain`), and the token
        ids of the first `LEAN_ROWS` rows. Its sizes: those rows `B`, the prefix `P`, the layer
        count `L` and the widths of `Exec.ModelDims` (from the parameters' shapes; the caps, top-k
        and block size from the Lean leg's configuration reading). Where the graph leg runs, also
        the inputs of the route checks, for every row of the case: per MoE layer the graph's
        router scores `check.L{n}.router_scores` [rows, E] and the experts it staged
        `check.L{n}.staged_experts` [rows, k] (`graph_outputs` on the CPU)."""
        _, ids = self.seed_and_ids(case)
        tensors, sizes = self.lean_model(self.model(case))
        tensors["ids"] = ids[:LEAN_ROWS].astype(np.float64)
        if self.graph_fits(case):
            graph = self.graph_outputs(case, "cpu")
            for name in sorted(k for k in graph if k.endswith(".staged_experts")):
                layer = name.removesuffix("staged_experts")
                tensors[f"check.{layer}router_scores"] = graph[layer + "router_scores"]
                tensors[f"check.{name}"] = graph[name]
        return dataclasses.replace(case, sizes={"B": min(LEAN_ROWS, ids.shape[0]), "P": ids.shape[1] - 1, **sizes},
                                   tensors=tensors)

    def lean_model(self, model: KimiK3ForCausalLM) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        """The model part of the Lean view (`lean_case`; also `multimodal_prefill`'s): the spec
        parameters, stacked and folded as `lean_case` says, under the template's names, and the
        sizes `L` (layer count) and `lean_dims`."""
        spec = {k: to_np(v) for k, v in adapter.hub_to_spec(model.config, model.state_dict()).items()}
        tensors: dict[str, np.ndarray] = {}
        stacks: dict[str, dict[int, np.ndarray]] = {}
        for name, t in spec.items():
            m = re.fullmatch(r"(.+_conv)\.(\d+)|(.+)\[(\d+)\]", name)  # `kda.query_conv.0`, `moe.shared.gate[0]`
            if m:
                stacks.setdefault(m[1] or m[3], {})[int(m[2] or m[4])] = t
            elif name.endswith(".query"):
                base = name.removesuffix(".query")
                tensors[base + ".weighted_query"] = spec[base + ".norm_gain"] * t
            elif not name.endswith(".norm_gain"):
                tensors[name] = t
        tensors.update({k: np.stack([v[i] for i in range(len(v))]) for k, v in stacks.items()})
        n_layers = sum(1 for k in tensors if k.endswith(".seq_norm.scale"))
        schedule = self.lean_schedule(n_layers)
        for n, lay in enumerate(schedule, 1):
            for key, what in ((f"layers.{n}.mla.kv_down" if lay["mla"] else f"layers.{n}.kda.query_proj", "MLA" if lay["mla"] else "KDA"),
                              (f"layers.{n}.router.weight" if lay["moe"] else f"layers.{n}.mlp.gateWeight", "MoE" if lay["moe"] else "dense")):
                if key not in tensors:
                    raise ValueError(f"decoder_step Lean leg: the Lean configuration makes layer {n} {what}, "
                                     f"but the parameters have no '{key}'")
        return tensors, {"L": n_layers, **self.lean_dims(tensors, schedule)}

    def lean_dims(self, t: dict[str, np.ndarray], schedule: list[dict[str, bool]]) -> dict[str, int]:
        """`Exec.ModelDims` (template names) from the view's parameter shapes and the Lean leg's
        configuration (block size, top-k, the SiTU caps: natural numbers there)."""
        cfg = self.lean_config()

        def first(kind: str, suffix: str) -> tuple[int, ...]:
            """The shape of `suffix` in the first layer of `kind` (zeros where the schedule has none)."""
            n = next((n for n, lay in enumerate(schedule, 1) if {"kda": not lay["mla"], "mla": lay["mla"], "dense": not lay["moe"],
                                                                 "moe": lay["moe"]}[kind]), None)
            return (0, 0, 0) if n is None else t[f"layers.{n}.{suffix}"].shape

        def whole(field: str) -> int:
            v = float(cfg[field])
            if not v.is_integer() or v < 0:
                raise ValueError(f"decoder_step Lean leg: configuration field '{field}' = {cfg[field]!r} is not a natural "
                                 "number (Exec.ModelDims takes it as a Nat)")
            return int(v)

        vocab, D = t["token_embedding"].shape
        _, Hk, K = first("kda", "kda.query_proj")
        _, _, Vk = first("kda", "kda.value_proj")
        W, _, _ = first("kda", "kda.query_conv")
        _, R = first("kda", "kda.decay_down")[:2]
        Hm, Lq, C = first("mla", "mla.query_content_up")
        _, Lkv, Vm = first("mla", "mla.value_up")
        _, Rs = first("mla", "mla.shared_key_down")[:2]
        _, F = first("dense", "mlp.gateWeight")[:2]
        S, _, h = first("moe", "moe.shared.gate")
        E, l, hr = first("moe", "moe.expert.gate")
        if h != hr:
            raise ValueError(f"decoder_step Lean leg: shared experts {h} wide, routed {hr}: Exec.ModelDims has one expertHidden")
        return {"vocab": vocab, "D": D, "block": whole("block_size"), "Hm": Hm, "Lq": Lq, "Lkv": Lkv, "C": C, "Rs": Rs,
                "Vm": Vm, "Hk": Hk, "K": K, "Vk": Vk, "W": W, "R": R, "F": F, "l": l, "h": h, "S": S, "E": E,
                "k": whole("top_k"), "gc": whole("gate_cap"), "uc": whole("up_cap")}

    def lean_context(self, case):
        return {**super().lean_context(case), "layers": self.lean_schedule(case.sizes["L"]),
                "ids": [[int(i) for i in row] for row in case.tensors["ids"]], "route_checks": self.lean_route_checks(case)}

    @staticmethod
    def lean_route_checks(view: Case) -> list[dict]:
        """The route checks of a Lean view: per MoE layer (`layer`: its output prefix `L{n}.`)
        and row, the offset of the graph's router scores in the packed inputs (`scores`) and the
        staged experts (`experts`, slot order); the checker takes `E` and `k` from the view's
        sizes (the parameters' expert count, the Lean configuration's top-k)."""
        refs, out = None, []
        for name, t in view.tensors.items():
            if name.startswith("check.") and name.endswith(".staged_experts"):
                layer = name.removeprefix("check.").removesuffix("staged_experts")
                refs = refs or TensorRefs(view)
                scores = view.tensors[f"check.{layer}router_scores"]
                out.append({"layer": layer, "rows": [{"scores": refs.offsets[f"check.{layer}router_scores"] + b * scores.shape[1],
                                      "experts": [int(e) for e in t[b]]} for b in range(t.shape[0])]})
        return out

    def route_checks(self, case: Case, lean_out: dict[str, np.ndarray] | None, legs: dict[str, dict[str, np.ndarray]],
                     why_not: str = "") -> tuple[list, dict]:
        """The Lean route checks of a case as comparisons (`lean` vs `graph`, output
        `L{n}.route_check`, exact: 1 per row where `Routing.checkRouteF` accepted the staged route)
        and their record (`runner.CaseResult.routes`): how many staged routes Lean checked and
        rejected, how many it did not check and why (`why_not`: the case had no Lean evaluation;
        then only the Python top-k check `L{n}.route` ran), and a note."""
        # a local import: difftest.compare imports the components
        from difftest.compare import Comparison, compare

        graph = legs.get("graph", {})
        staged = sorted(k.removesuffix("staged_experts") for k in graph if k.endswith(".staged_experts"))
        record = {"checked": 0, "rejected": 0, "unchecked": 0, "why": ""}
        if not staged:
            return [], {**record, "note": "routes: none staged (no graph leg for this case)"}
        if lean_out is None or not any(k.endswith(".route_check") for k in lean_out):
            why = "the Lean evaluation has no route checks" if lean_out is not None else why_not
            m = len(staged) * graph[staged[0] + "staged_experts"].shape[0]
            return [], {**record, "unchecked": m, "why": why,
                        "note": f"routes: {m} staged, not checked by Lean ({why}); Python top-k check only"}
        k = int(self.lean_config()["top_k"])
        rows, n, rejected = [], 0, 0
        for layer in staged:
            verdict = lean_out.get(layer + "route_check")
            if verdict is None:
                rows.append(Comparison(self.name, case.index, case.kind, "float64", "lean", "graph", layer + "route_check",
                                       np.inf, 0.0, False, note=f"Lean printed no route check for layer {layer[1:-1]}"))
                continue
            c = compare(self.name, case.index, case.kind, "float64", "lean", "graph", layer + "route_check", verdict,
                        np.ones_like(verdict), 0.0, True)
            n += verdict.size
            bad = [b for b in range(verdict.size) if verdict[b] != 1.0]
            rejected += len(bad)
            if bad:
                scores, experts = graph[layer + "router_scores"], graph[layer + "staged_experts"]
                c.note = "; ".join(
                    f"Lean Routing.checkRouteF rejected the staged route of layer {layer[1:-1]}, token row {b}: slots "
                    f"{[int(e) for e in experts[b]]} (experts {sorted(int(e) for e in experts[b])}), top-{k} of the "
                    f"graph's router scores {sorted(ref.top_k(scores[b], k))}, scores {[float(x) for x in scores[b]]}"
                    for b in bad)
            rows.append(c)
        return rows, {**record, "checked": n, "rejected": rejected,
                      "note": f"routes: {n} staged route(s) checked by Lean (Routing.checkRouteF), {rejected} rejected"}

    def lean_slice(self, case, out):
        """The rows the Lean model evaluates (the first `LEAN_ROWS`) of another leg's outputs."""
        return {k: v[:LEAN_ROWS] for k, v in out.items()}

    def lean_output_shapes(self, case):
        s = case.sizes
        out = {"logits": (s["B"], s["vocab"])}
        out.update({chk["layer"] + "route_check": (len(chk["rows"]),) for chk in self.lean_route_checks(case)})
        for i, lay in enumerate(self.lean_schedule(s["L"])):
            p = layer_tag(i)
            if lay["mla"]:
                out[p + "latent_cache"], out[p + "shared_key_cache"] = (s["B"], s["P"] + 1, s["Lkv"]), (s["B"], s["P"] + 1, s["Rs"])
            else:
                out[p + "heads"] = (s["B"], s["Hk"], s["K"], s["Vk"])
        return out

    def exact_outputs(self):
        cfg = torch_config()
        return tuple(f"{layer_tag(i)}route" for i in range(cfg.num_hidden_layers) if cfg.is_moe(i))

    # --- low precision -----------------------------------------------------------------------------
    def lowp_checks(self, case, dtype, device):
        """Every stage of the step on the NumPy reference's own inputs at that point, rounded to
        the storage dtype, against the NumPy stage on the same (the model's weights rounded)."""
        model = self.model(case).to(device=device, dtype=dtype)
        rounded64 = self.model(case)
        rounded64.load_state_dict({k: v.to(F64) for k, v in model.state_dict().items()})
        from difftest.compare import tolerance

        cd, sz = compute_dtype(dtype), case.sizes
        moe_comp = LatentMoEComponent()
        score_tol = tolerance(moe_comp.score_model({"d": model.config.hidden_size}), str(dtype).removeprefix("torch."))
        dense = ErrorModel(stores=14, accum=model.config.hidden_size + model.config.intermediate_size, amp=2.0)
        cfg = model.config
        attn, kda_m, mla_m, moe_m = (AttnResComponent().retrieval_model(
                                         {"D": cfg.hidden_size, "L": cfg.num_hidden_layers, "B": cfg.attn_res_block_size}),
                                     KDALayerComponent().error_model({**KDALayerComponent.default_sizes, "P": 0, "T": 1}),
                                     MLAComponent().error_model({**MLAComponent.default_sizes, "P": 0, "T": sz["P"] + 1}),
                                     moe_comp.error_model(moe_comp.default_sizes))
        norm = ErrorModel(stores=6, accum=cfg.hidden_size, amp=2.0)  # RMSNorm: mean of squares, sqrt, div, gain
        got: dict[str, list] = {}
        want: dict[str, list] = {}
        models: dict[str, ErrorModel] = {}

        def add(name: str, g: np.ndarray, w: np.ndarray, m: ErrorModel) -> None:
            got.setdefault(name, []).append(g)
            want.setdefault(name, []).append(w)
            models[name] = m

        def dev(a: np.ndarray) -> torch.Tensor:
            return t64(round_to(a, dtype)).to(device=device, dtype=dtype)

        eps, notes = model.config.attn_res_norm_eps, []

        def read_and_norm(dec: ref.Decoder, rec: dict, part: str, tag: str, spec: str,
                          res_norm: torch.nn.Module, res_proj: torch.nn.Module, norm_mod: torch.nn.Module,
                          norm_eps: str = "rms_eps") -> np.ndarray:
            """The AttnRes read `{part}_read` and the RMSNorm after it `{part}_in`, each on the
            reference's own (rounded) inputs, under the output names `{tag}{part}_read` /
            `{tag}{part}_in` and the spec names `{spec}{part}_res` / `{spec}{part}_norm.scale`;
            returns the reference's normed value rounded: the next stage's input. The read's
            score norm uses `attn_res_norm_eps`, the RMSNorm the config's `norm_eps` field."""
            w = res_norm.weight.to(cd) * res_proj.weight[0].to(cd)
            srcs = [round_to(s, dtype) for s in rec[part + "_sources"]]
            add(tag + part + "_read", to_np(retrieve([dev(s) for s in srcs], w, eps)), dec.read(spec + part + "_res", srcs), attn)
            x = round_to(rec[part + "_read"], dtype)
            scale = dec.p[spec + part + "_norm.scale"]
            add(tag + part + "_in", to_np(norm_mod(dev(x))), ref.rms_norm(x, dec.cfg[norm_eps], scale), norm)
            return round_to(rec[part + "_in"], dtype)

        for dec, _, prefix in self.numpy_rows(case, rounded64):
            for i, lay in enumerate(model.model.layers):
                rec, p, pw = dec.record[i + 1], layer_tag(i), f"layers.{i + 1}."
                with torch.no_grad():
                    x = read_and_norm(dec, rec, "seq", p, pw, lay.self_attention_res_norm, lay.self_attention_res_proj,
                                      lay.input_layernorm)
                    st = prefix[i]
                    st = dataclasses.replace(st, **({"latent": round_to(st.latent, dtype), "shared": round_to(st.shared, dtype)}
                                                    if dec.mla[i] else
                                                    {"windows": tuple(round_to(w, dtype) for w in st.windows),
                                                     "heads": round_to(st.heads, cd)}))
                    w_out, _ = dec.mixer(i, x, st)
                    if dec.mla[i]:
                        y, _ = lay.self_attn(dev(x)[None, None], MLACache(dev(st.latent)[None], dev(st.shared)[None]))
                    else:
                        win = [dev(w.reshape(w.shape[0], -1))[None] for w in st.windows]
                        y, _ = lay.self_attn(dev(x)[None, None], KDAState(*win, t64(st.heads).to(device=device, dtype=cd)[None]))
                    add(p + "seq_out", to_np(y[0, 0]), w_out, mla_m if dec.mla[i] else kda_m)
                    x = read_and_norm(dec, rec, "chan", p, pw, lay.mlp_res_norm, lay.mlp_res_proj, lay.post_attention_layernorm)
                    y = to_np(lay.channel(dev(x)[None, None])[0, 0])
                    route = None
                    if rec["route"] is not None:
                        chosen, _ = lay.block_sparse_moe.gate(dev(x)[None])
                        chosen = sorted(int(e) for e in chosen[0])
                        _, w_route, adjusted = dec.channel(i, x)
                        left = [e for e in range(len(adjusted)) if e not in chosen]
                        gap = float(max(adjusted[left]) - min(adjusted[chosen]))
                        route = chosen if chosen != sorted(w_route) and gap <= score_tol * float(np.abs(adjusted).max()) else w_route
                        if route is chosen:
                            notes.append(f"{p}route near tie (gap {gap:.1e}): reference on the run's route")
                        add(p + "route", np.array(chosen, np.float64), np.array(sorted(route), np.float64), moe_m)
                    add(p + "chan_out", y, dec.channel(i, x, route)[0], moe_m if rec["route"] is not None else dense)
            with torch.no_grad():
                m = model.model
                x = read_and_norm(dec, dec.record, "final", "", "", m.output_attn_res_norm, m.output_attn_res_proj, m.norm, "final_eps")
                add("logits", to_np(model.lm_head(dev(x))), x @ dec.p["lm_head.weight"],
                    ErrorModel(stores=3, accum=cfg.hidden_size, amp=1.0))  # a dot of length D
        exact = set(self.exact_outputs())
        return [LowpCheck("torch stage", "numpy", k, np.stack(got[k]), np.stack(want[k]), models[k], exact=k in exact,
                          note="; ".join(notes)) for k in got]

    def info(self, case: Case, dtype: torch.dtype, device: str) -> dict[str, float]:
        """Whole-model figures (information, not pass/fail): the model rounded to `dtype` run from
        scratch (prefill and step) against the float64 NumPy logits of the same step: mean
        KL(p64 ‖ p_dtype) over the rows, and the fraction of rows whose top-1 token agrees."""
        want = self.numpy_outputs(case)["logits"]
        got = self.torch_outputs(case, dtype, device)["torch"]["logits"]
        lp, lq = (x - x.max(-1, keepdims=True) for x in (want, got))
        lp, lq = lp - np.log(np.exp(lp).sum(-1, keepdims=True)), lq - np.log(np.exp(lq).sum(-1, keepdims=True))
        kl = float(np.mean(np.sum(np.exp(lp) * (lp - lq), -1)))
        return {"logit_kl": kl, "top1_agreement": float(np.mean(want.argmax(-1) == got.argmax(-1)))}

    def error_model(self, sizes):
        """The chain of the step (float64): per layer the AttnRes read before the mixer, the
        mixer (KDA layer with one token, or MLA over P + 1 tokens), the AttnRes read before the
        channel mixer and the MoE, then the final read, RMSNorm and the LM head (dot of length
        D). Stores and accumulation lengths add along the chain; the amplification is that of one
        stage (4): every stage reads the residual stream through an RMSNorm'd, softmax-weighted
        convex mix (AttnRes), so a relative error in the stream is carried, not multiplied."""
        cfg = torch_config()
        D = cfg.hidden_size
        attn = AttnResComponent().error_model({"D": D, "L": cfg.num_hidden_layers, "B": cfg.attn_res_block_size})
        kda_ = KDALayerComponent().error_model({**KDALayerComponent.default_sizes, "P": 0, "T": 1})
        mla_ = MLAComponent().error_model({**MLAComponent.default_sizes, "P": 0, "T": sizes["P"] + 1})
        moe_ = LatentMoEComponent().error_model(LatentMoEComponent.default_sizes)
        stages = [attn]
        for i in range(cfg.num_hidden_layers):
            stages += [attn, mla_ if cfg.is_mla(i) else kda_, attn, moe_]
        return ErrorModel(stores=sum(s.stores for s in stages) + 6, accum=sum(s.accum for s in stages) + 2 * D,
                          amp=max(s.amp for s in stages))
