"""Channel mixers: the SiTU expert and Stable LatentMoE (k3-spec §2.6–2.7), on N tokens."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from difftest import numpy_ref as ref
from difftest.case import Case
from difftest.components.base import (F64, ErrorModel, ExecComponent, LowpCheck, compiled, load_module, rounded, t64,
                                      to_np, torch_config)
from difftest.inputs import gaussian, magnitude
from pybridge import adapter, layers, moe


def situ_weights(rng: np.random.Generator, d: int, h: int, o: int, lead: tuple[int, ...], w: float) -> dict[str, np.ndarray]:
    """Gate and up `[in, out]` weights with unit-variance outputs, down with fan-in scaling (× w)."""
    return {"gate": gaussian(rng, (*lead, d, h), w * d**-0.5), "up": gaussian(rng, (*lead, d, h), w * d**-0.5),
            "down": gaussian(rng, (*lead, h, o), w * h**-0.5)}


def run_graph_rows(file: str, params: dict, rows_nd: np.ndarray, scalars: dict, dtype: torch.dtype, device: str,
                   store: torch.dtype | None = None) -> np.ndarray:
    """A one-token export evaluated row by row (`input` ← each row; `scalars` the constant
    inputs); with `store`, every output rounded to that storage dtype."""
    cg = compiled(file, dtype, device)
    outs = []
    for x in rows_nd:
        y = cg(params, {"input": t64(x), **{k: t64(np.array(v)) for k, v in scalars.items()}})["output"]
        outs.append(to_np(y if store is None else y.to(store)))
    return np.stack(outs)


class ExpertComponent(ExecComponent):
    name = "expert"
    summary = "SiTU expert y = SiTU(c_g, c_u, xG, xU) D on N tokens (Lean Expert.forward; SituExpert)"
    template = "expert"
    kinds = {
        "random": "pre-activations of size ~2: both soft caps bend",
        "small": "inputs and weights ×1e-3: the caps act linearly, σ near 1/2",
        "large": "inputs and weights ×1e3: both caps saturate, σ at 0 or 1",
        "cap": "gate pre-activations around c_g and up pre-activations around c_u",
    }
    default_sizes = {"d": 24, "h": 13, "N": 3}
    graph_file = "channel_expert_tiny.json"

    def sample(self, rng, kind, sizes):
        d, h, n = sizes["d"], sizes["h"], sizes["N"]
        s = magnitude(kind)
        w = situ_weights(rng, d, h, d, (), s)
        x = gaussian(rng, (n, d), 2.0 * s)
        if kind == "cap":
            w["gate"] *= 2.0
            w["up"] *= 12.0
        return {"gateWeight": w["gate"], "upWeight": w["up"], "downWeight": w["down"], "x": x}

    def shrink_sizes(self, sizes):
        return [{"d": d, "h": h, "N": 1} for d, h in ((2, 2), (4, 3), (8, 6)) if d < sizes["d"]] + (
            [{**sizes, "N": 1}] if sizes["N"] > 1 else [])

    def graph_fits(self, case):
        return (case.sizes["d"], case.sizes["h"]) == (self.default_sizes["d"], self.default_sizes["h"])

    def module(self, case: Case, dtype: torch.dtype, device: str) -> layers.SituExpert:
        d, h = case.sizes["d"], case.sizes["h"]
        cfg = torch_config()
        spec = {k: t64(v) for k, v in self.spec_params(case).items() if k != "x"}
        return load_module(layers.SituExpert(d, h, cfg.situ_gate_cap, cfg.situ_up_cap),
                           adapter.to_hub(adapter.expert_rules(d, h), spec), dtype, device)

    def torch_outputs(self, case, dtype, device):
        ex = self.module(case, dtype, device)
        with torch.no_grad():
            y = ex(t64(case.tensors["x"]).to(device=device, dtype=dtype))
        return {"torch": {"y": to_np(y)}}

    def numpy_outputs(self, case):
        t = case.tensors
        return {"y": ref.expert(t["x"], t["gateWeight"], t["upWeight"], t["downWeight"], self.own_config())}

    def _graph(self, case, dtype, device, store=None):
        t, cfg = case.tensors, self.own_config()
        params = {k: t64(t[k]) for k in ("gateWeight", "upWeight", "downWeight")}
        return run_graph_rows(self.graph_file, params, t["x"], {"gateCap": cfg["gate_cap"], "upCap": cfg["up_cap"]},
                              dtype, device, store)

    def graph_outputs(self, case, device):
        return {"y": self._graph(case, F64, device)}

    def lean_case(self, case):
        return dataclasses.replace(case, tensors={**case.tensors, "x": case.tensors["x"][0]})

    def lean_slice(self, case, out):
        return {"y": out["y"][0]}

    def lean_output_shapes(self, case):
        return {"y": (case.sizes["d"],)}

    def lowp_checks(self, case, dtype, device):
        rc = rounded(case, dtype)
        want, model = self.numpy_outputs(rc)["y"], self.error_model(case.sizes)
        checks = [LowpCheck("torch", "numpy", "y", self.torch_outputs(rc, dtype, device)["torch"]["y"], want, model)]
        if self.graph_available(case):
            checks.append(LowpCheck("graph", "numpy", "y", self._graph(rc, torch.float32, device, dtype), want, model))
        return checks

    def error_model(self, sizes):
        # chain: x, G stored; dot of length d; soft cap (div, tanh, mul), sigmoid (neg, exp,
        # add, div), two products; dot of length h with D; output store
        return ErrorModel(stores=14, accum=sizes["d"] + sizes["h"], amp=2.0)


class LatentMoEComponent(ExecComponent):
    name = "latent_moe"
    summary = "Stable LatentMoE with its own top-k route on N tokens (Lean forwardAuto/route; LatentMoE)"
    template = "latent_moe"
    kinds = {
        "random": "unit-scale tokens, small selection biases",
        "tie": "exact ties at the top-k boundary: three experts with equal router columns and biases",
        "near_tie": "the k-th and (k+1)-th adjusted scores 1e-9 apart, made through the correction bias",
        "small": "inputs and weights ×1e-3",
        "large": "inputs and weights ×1e3: saturated router sigmoids and soft caps",
        "eps": "the routed sum near 0: its RMSNorm in the ε regime",
    }
    default_sizes = {"d": 24, "l": 12, "hs": 13, "hr": 13, "S": 2, "E": 6, "k": 2, "N": 3}
    graph_file = "channel_latent_moe_tiny.json"
    stacked = {"moe.shared.gate": "moe.shared.gate[{i}]", "moe.shared.up": "moe.shared.up[{i}]",
               "moe.shared.down": "moe.shared.down[{i}]", "moe.expert.gate": "moe.expert.gate[{i}]",
               "moe.expert.up": "moe.expert.up[{i}]", "moe.expert.down": "moe.expert.down[{i}]"}

    def config(self, sizes):
        return torch_config(hidden_size=sizes["d"], routed_expert_hidden_size=sizes["l"],
                            moe_intermediate_size=sizes["hs"], num_shared_experts=sizes["S"], num_experts=sizes["E"],
                            num_experts_per_token=sizes["k"])

    def shrink_sizes(self, sizes):
        return [{**sizes, "N": 1}] if sizes["N"] > 1 else []

    def sample(self, rng, kind, sizes):
        if sizes["hs"] != sizes["hr"]:
            raise ValueError("pybridge uses one expert hidden width (moe_intermediate_size): hs must equal hr")
        d, l, h, S, E, k, n = (sizes[x] for x in ("d", "l", "hs", "S", "E", "k", "N"))
        s = magnitude(kind)
        shared = situ_weights(rng, d, h, d, (S,), s)
        routed = situ_weights(rng, l, h, l, (E,), s)
        if kind == "eps":
            routed["down"] *= 1e-5
        router = gaussian(rng, (d, E), s * d**-0.5)
        bias = gaussian(rng, (E,), 0.1)
        x = gaussian(rng, (n, d), 2.0 * s)
        if kind == "tie":
            # three experts with identical router columns and the largest equal bias compete for
            # k slots: exact ties, decided by the lowest-index rule. Tokens and router entries
            # are dyadic with few bits, so every dot product is exact in any summation order
            # (and at every precision): the tie holds bitwise in every leg.
            x = np.round(x * 4) / 4
            router = np.round(router * 8) / 8
            tied = [1, 3, 4][: k + 1]
            for e in tied:
                router[:, e] = router[:, tied[0]]
                bias[e] = 1.0
        tensors = {
            "router.weight": router, "router.bias": bias, "moe.downProject": gaussian(rng, (d, l), s * d**-0.5),
            "moe.upProject": gaussian(rng, (l, d), s * l**-0.5), "moe.routedNormScale": rng.uniform(0.5, 1.5, l),
            "moe.shared.gate": shared["gate"], "moe.shared.up": shared["up"], "moe.shared.down": shared["down"],
            "moe.expert.gate": routed["gate"], "moe.expert.up": routed["up"], "moe.expert.down": routed["down"],
            "x": x,
        }
        if kind == "near_tie":
            # row 0: move the (k+1)-th expert to 1e-9 below the k-th through its bias
            raw = ref.router_scores(x[0], router)
            order = ref.top_k(raw + bias, E)
            a, b = order[k - 1], order[k]
            bias[b] = raw[a] + bias[a] - raw[b] - 1e-9
        return tensors

    def torch_module(self, case: Case, dtype: torch.dtype, device: str) -> moe.LatentMoE:
        spec = {k: t64(v) for k, v in self.spec_params(case).items() if k != "x"}
        return load_module(moe.LatentMoE(self.config(case.sizes)), adapter.to_hub(adapter.moe_rules(self.config(case.sizes)), spec),
                           dtype, device)

    def torch_outputs(self, case, dtype, device):
        m = self.torch_module(case, dtype, device)
        x = t64(case.tensors["x"]).to(device=device, dtype=dtype)
        with torch.no_grad():
            y = m(x[None])[0]
            route, _ = m.gate(x)
        return {"torch": {"y": to_np(y), "route": np.sort(route.cpu().numpy(), axis=-1).astype(np.float64)}}

    def numpy_rows(self, case: Case, routes: list[list[int]] | None = None) -> list[tuple[np.ndarray, list[int], np.ndarray]]:
        p, sz = self.spec_params(case), case.sizes
        cfg = {**self.own_config(), "top_k": sz["k"]}
        return [ref.latent_moe(x, p, cfg, sz["S"], sz["E"], None if routes is None else routes[i])
                for i, x in enumerate(case.tensors["x"])]

    def numpy_outputs(self, case):
        rows = self.numpy_rows(case)
        return {"y": np.stack([r[0] for r in rows]), "route": np.array([sorted(r[1]) for r in rows], dtype=np.float64)}

    def _graph(self, case, routes, dtype, device, store=None):
        """The route-staged export, row by row, fed `routes` (chosen outside the graph)."""
        cg, cfg = compiled(self.graph_file, dtype, device), self.own_config()
        spec = {k: t64(v) for k, v in self.spec_params(case).items() if k != "x"}
        pad = cg.graph.params[0].shape[1] - case.sizes["hs"]  # the export's shared experts are wider: zero units add 0
        for j in range(case.sizes["S"]):
            for part, widths in (("gate", (0, pad)), ("up", (0, pad)), ("down", (0, 0, 0, pad))):
                spec[f"moe.shared.{part}[{j}]"] = torch.nn.functional.pad(spec[f"moe.shared.{part}[{j}]"], widths)
        ys = []
        for x, route in zip(case.tensors["x"], routes):
            params = adapter.graph_params(cg.graph, spec | adapter.stage_route(spec, route), prefix="moe.")
            y = cg(params, {"input": t64(x), "gateCap": t64(np.array(cfg["gate_cap"])), "upCap": t64(np.array(cfg["up_cap"]))})
            ys.append(to_np(y["output"] if store is None else y["output"].to(store)))
        return np.stack(ys)

    def graph_outputs(self, case, device):
        routes = [r[1] for r in self.numpy_rows(case)]
        return {"y": self._graph(case, routes, F64, device), "route": np.array([sorted(r) for r in routes], np.float64)}

    def graph_fits(self, case):
        return {k: v for k, v in case.sizes.items() if k != "N"} == {k: v for k, v in self.default_sizes.items() if k != "N"}

    def lean_case(self, case):
        return dataclasses.replace(case, tensors={**case.tensors, "x": case.tensors["x"][0]})

    def lean_slice(self, case, out):
        return {k: v[0] for k, v in out.items()}

    def lean_output_shapes(self, case):
        return {"y": (case.sizes["d"],), "route": (case.sizes["k"],)}

    def lean_postprocess(self, case, out):
        return {**out, "route": np.sort(out["route"])}

    def exact_outputs(self):
        return ("route",)

    def score_model(self, sizes) -> ErrorModel:
        """The router's adjusted scores: a dot of length d, σ (4 operations), the bias add, at
        the compute precision (no storage rounding: the route is chosen in float32)."""
        return ErrorModel(stores=8, accum=sizes["d"], amp=1.0, out_stores=0)

    def lowp_checks(self, case, dtype, device):
        """The torch run and the graph on the rounded tokens and weights against the NumPy
        reference on the same. A run's route may differ from the reference's only at a near
        tie: where every expert it chose has a reference adjusted score within the score
        tolerance of every expert it left out, the output is compared with the reference on the
        run's route; otherwise the route comparison fails."""
        from difftest.compare import tolerance

        rc = rounded(case, dtype)
        want_rows = self.numpy_rows(rc)
        got = self.torch_outputs(rc, dtype, device)["torch"]
        score_tol = tolerance(self.score_model(case.sizes), str(dtype).removeprefix("torch."))
        routes, notes = [], []
        for i, (row, (_, route, adjusted)) in enumerate(zip(got["route"], want_rows)):
            chosen = [int(e) for e in row]
            left = [e for e in range(case.sizes["E"]) if e not in chosen]
            gap = float(max(adjusted[left]) - min(adjusted[chosen])) if left else 0.0
            near = sorted(chosen) != sorted(route) and gap <= score_tol * float(np.abs(adjusted).max())
            routes.append(chosen if near else route)
            if near:
                notes.append(f"row {i}: near tie (score gap {gap:.1e}), reference on the run's route {chosen}")
        want = self.numpy_rows(rc, routes)
        y_want = np.stack([r[0] for r in want])
        route_want = np.array([sorted(r) for r in routes], np.float64)
        model, note = self.error_model(case.sizes), "; ".join(notes)
        checks = [LowpCheck("torch", "numpy", "y", got["y"], y_want, model, note=note),
                  LowpCheck("torch", "numpy", "route", got["route"], route_want, model, exact=True, note=note)]
        if self.graph_available(case):
            checks.append(LowpCheck("graph", "numpy", "y", self._graph(rc, routes, torch.float32, device, dtype), y_want, model))
        return checks

    def error_model(self, sizes):
        # longest chain: router dot (d) and sigmoid -> mixture weight (div by a k-sum) -> routed
        # expert (as the expert: dots l and hr) -> k-sum -> RMSNorm (mean of l squares, sqrt,
        # div, gain) -> dot l with W_up -> add shared path
        return ErrorModel(stores=28, accum=sizes["d"] + 2 * sizes["l"] + sizes["hr"] + sizes["k"] + sizes["l"], amp=4.0)


