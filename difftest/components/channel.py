"""Channel mixers: the SiTU expert and Stable LatentMoE (k3-spec §2.6–2.7)."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import torch

from difftest.components.base import GRAPHS, TINY_CONFIG, Component, ErrorModel, copy_weight, t64, to_np
from difftest.inputs import gaussian, scale_for_kind
from pybridge import layers, moe
from pybridge.config import load_config
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph


@cache
def compiled(file: str, dtype: torch.dtype, device: str):
    """A graph export compiled once per dtype and device."""
    return compile_graph(load_graph(GRAPHS / file), dtype=dtype, device=device)


def caps() -> tuple[float, float]:
    cfg = load_config(TINY_CONFIG)
    return cfg.situ_gate_cap, cfg.situ_up_cap


def situ_weights(rng: np.random.Generator, d: int, h: int, o: int, lead: tuple[int, ...] = ()) -> dict[str, np.ndarray]:
    """Gate and up `[in, out]` weights with unit-variance outputs, down with fan-in scaling."""
    return {
        "G": gaussian(rng, (*lead, d, h), d**-0.5),
        "U": gaussian(rng, (*lead, d, h), d**-0.5),
        "D": gaussian(rng, (*lead, h, o), h**-0.5),
    }


class ExpertComponent(Component):
    name = "expert"
    summary = "SiTU expert y = SiTU(c_g, c_u, xG, xU) D (Lean Expert.forward; SituExpert)"
    template = "expert"
    lean_targets = ("KimiK3.Exec.Kernel",)
    lean_default = True  # the executable spec (KimiK3.Exec)
    kinds = ("random", "saturate", "tiny")
    default_sizes = {"d": 24, "h": 13}
    graph_file = "channel_expert_tiny.json"

    def sample(self, rng, kind, sizes):
        d, h = sizes["d"], sizes["h"]
        gate_cap, up_cap = caps()
        w = situ_weights(rng, d, h, d)
        # x of norm about 2*sqrt(d): pre-activations of size ~2, so both soft caps bend
        return {**w, "x": gaussian(rng, (d,), 2.0 * scale_for_kind(kind)),
                "gate_cap": np.array(gate_cap), "up_cap": np.array(up_cap)}

    def shrink_sizes(self, sizes):
        return [{"d": d, "h": h} for d, h in ((2, 2), (4, 3), (8, 6)) if d < sizes["d"]]

    def torch_outputs(self, case, dtype, device):
        t = case.tensors
        d, h = case.sizes["d"], case.sizes["h"]
        ex = layers.SituExpert(d, h, float(t["gate_cap"]), float(t["up_cap"])).double()
        copy_weight(ex.w1.weight, t["G"].T)
        copy_weight(ex.w3.weight, t["U"].T)
        copy_weight(ex.w2.weight, t["D"].T)
        ex = ex.to(device=device, dtype=dtype)
        with torch.no_grad():
            y = ex(t64(t["x"]).to(device=device, dtype=dtype)[None])[0]
        return {"torch": {"y": to_np(y)}}

    def graph_outputs(self, case, dtype, device):
        t = case.tensors
        cg = compiled(self.graph_file, dtype, device)
        params = {"gateWeight": t64(t["G"]), "upWeight": t64(t["U"]), "downWeight": t64(t["D"])}
        inputs = {"input": t64(t["x"]), "gateCap": t64(t["gate_cap"]), "upCap": t64(t["up_cap"])}
        return {"y": to_np(cg(params, inputs)["output"])}

    def lean_output_shapes(self, case):
        return {"y": (case.sizes["d"],)}

    def error_model(self, sizes):
        # chain: x, G stored; dot of length d; soft cap (div, tanh, mul), sigmoid (neg, exp,
        # add, div), two products; dot of length h with D; output store
        return ErrorModel(stores=14, accum=sizes["d"] + sizes["h"], amp=2.0)


class LatentMoEComponent(Component):
    name = "latent_moe"
    summary = "Stable LatentMoE with its own top-k route (Lean forwardAuto/route; LatentMoE)"
    template = "latent_moe"
    lean_targets = ("KimiK3.Exec.Kernel",)
    lean_default = True  # the executable spec (KimiK3.Exec)
    kinds = ("random", "saturate", "tie", "tiny")
    default_sizes = {"d": 24, "l": 12, "hs": 13, "hr": 13, "S": 2, "E": 6, "k": 2}
    graph_file = "channel_latent_moe_tiny.json"

    def config(self, sizes):
        cfg = load_config(TINY_CONFIG)
        return dataclasses.replace(
            cfg, hidden_size=sizes["d"], routed_expert_hidden_size=sizes["l"], moe_intermediate_size=sizes["hs"],
            num_shared_experts=sizes["S"], num_experts=sizes["E"], num_experts_per_token=sizes["k"],
            routed_scaling_factor=1.0,
        )

    def sample(self, rng, kind, sizes):
        if sizes["hs"] != sizes["hr"]:
            raise ValueError("pybridge uses one expert hidden width (moe_intermediate_size): hs must equal hr")
        d, l, h, S, E = sizes["d"], sizes["l"], sizes["hs"], sizes["S"], sizes["E"]
        cfg = self.config(sizes)
        shared = situ_weights(rng, d, h, d, (S,))
        routed = situ_weights(rng, l, h, l, (E,))
        router = gaussian(rng, (d, E), d**-0.5)
        bias = gaussian(rng, (E,), 0.1)
        x = gaussian(rng, (d,), 2.0 * scale_for_kind(kind))
        if kind == "tie":
            # three experts with identical router columns and the largest equal bias compete for
            # k slots: exact ties, decided by the lowest-index rule
            tied = [1, 3, 4][: sizes["k"] + 1]
            for e in tied:
                router[:, e] = router[:, tied[0]]
                bias[e] = 1.0
        return {
            "shared_G": shared["G"], "shared_U": shared["U"], "shared_D": shared["D"],
            "down": gaussian(rng, (d, l), d**-0.5), "router": router, "bias": bias,
            "routed_G": routed["G"], "routed_U": routed["U"], "routed_D": routed["D"],
            "norm_scale": rng.uniform(0.5, 1.5, l), "eps": np.array(cfg.rms_norm_eps),
            "up": gaussian(rng, (l, d), l**-0.5), "x": x,
            "gate_cap": np.array(cfg.situ_gate_cap), "up_cap": np.array(cfg.situ_up_cap),
        }

    def torch_outputs(self, case, dtype, device):
        t, sz = case.tensors, case.sizes
        m = moe.LatentMoE(self.config(sz)).double()
        m.routed_expert_norm.eps = float(t["eps"])
        copy_weight(m.shared_experts.gate_proj.weight, np.concatenate([g.T for g in t["shared_G"]], 0))
        copy_weight(m.shared_experts.up_proj.weight, np.concatenate([u.T for u in t["shared_U"]], 0))
        copy_weight(m.shared_experts.down_proj.weight, np.concatenate([dn.T for dn in t["shared_D"]], 1))
        copy_weight(m.gate.weight, t["router"].T)
        copy_weight(m.gate.e_score_correction_bias, t["bias"])
        for e, ex in enumerate(m.experts):
            copy_weight(ex.w1.weight, t["routed_G"][e].T)
            copy_weight(ex.w3.weight, t["routed_U"][e].T)
            copy_weight(ex.w2.weight, t["routed_D"][e].T)
        copy_weight(m.routed_expert_down_proj.weight, t["down"].T)
        copy_weight(m.routed_expert_up_proj.weight, t["up"].T)
        copy_weight(m.routed_expert_norm.weight, t["norm_scale"])
        m = m.to(device=device, dtype=dtype)
        x = t64(t["x"]).to(device=device, dtype=dtype)
        with torch.no_grad():
            y = m(x[None, None])[0, 0]
            route, _ = m.gate(x[None])
        return {"torch": {"y": to_np(y), "route": route[0].cpu().numpy().astype(np.float64)}}

    def reference_route(self, case) -> np.ndarray:
        """Top-k of the bias-adjusted float64 scores, ties to the lowest index (numpy)."""
        return np.argsort(-self.adjusted_scores(case), kind="stable")[: case.sizes["k"]]

    def adjusted_scores(self, case) -> np.ndarray:
        """σ(x R) + b, one column at a time so that equal columns give bitwise equal scores
        (a matrix-vector kernel may sum different columns in different orders)."""
        t = case.tensors
        logits = np.array([np.dot(t["x"], np.ascontiguousarray(t["router"][:, e])) for e in range(case.sizes["E"])])
        return 1.0 / (1.0 + np.exp(-logits)) + t["bias"]

    def graph_outputs(self, case, dtype, device, route=None):
        """The route-staged export, fed the route computed outside the graph (or `route`)."""
        t = case.tensors
        cg = compiled(self.graph_file, dtype, device)
        route = self.reference_route(case) if route is None else [int(e) for e in route]
        width = cg.graph.params[0].shape[1]
        pad = width - case.sizes["hs"]  # the export's shared experts are wider: zero units add exactly 0
        params = {"downProject": t64(t["down"]), "upProject": t64(t["up"]), "routedNormScale": t64(t["norm_scale"])}
        for j in range(case.sizes["S"]):
            params[f"shared.gate[{j}]"] = t64(np.pad(t["shared_G"][j], ((0, 0), (0, pad))))
            params[f"shared.up[{j}]"] = t64(np.pad(t["shared_U"][j], ((0, 0), (0, pad))))
            params[f"shared.down[{j}]"] = t64(np.pad(t["shared_D"][j], ((0, pad), (0, 0))))
        for k, e in enumerate(route):
            params[f"slot.router[{k}]"] = t64(t["router"][:, e])
            params[f"slot.gate[{k}]"] = t64(t["routed_G"][e])
            params[f"slot.up[{k}]"] = t64(t["routed_U"][e])
            params[f"slot.down[{k}]"] = t64(t["routed_D"][e])
        inputs = {"input": t64(t["x"]), "gateCap": t64(t["gate_cap"]), "upCap": t64(t["up_cap"])}
        return {"y": to_np(cg(params, inputs)["output"]), "route": np.array(route, dtype=np.float64)}

    def lean_output_shapes(self, case):
        return {"y": (case.sizes["d"],), "route": (case.sizes["k"],)}

    def exact_outputs(self):
        return ("route",)

    def lowp_reference(self, case, got, ref, dtype):
        """A low-precision route may differ from the float64 one only at a near tie: if every
        expert it chose has a float64 adjusted score within the score tolerance of every expert
        it left out, the reference becomes the float64 graph evaluated on that route (the export
        is route-staged); otherwise the route comparison fails."""
        from difftest.compare import tolerance

        if "route" not in got or np.array_equal(got["route"], ref["route"]) or not self.graph_available(case):
            return ref, ""
        chosen = [int(e) for e in got["route"]]
        left = [e for e in range(case.sizes["E"]) if e not in chosen]
        scores = self.adjusted_scores(case)
        gap = float(max(scores[left]) - min(scores[chosen])) if left else 0.0
        score_tol = tolerance(ErrorModel(stores=8, accum=case.sizes["d"], amp=1.0), dtype)
        if gap > score_tol:
            return ref, ""
        near = self.graph_outputs(case, torch.float64, "cpu", route=chosen)
        return near, f"near tie (score gap {gap:.1e} <= {score_tol:.1e}): reference = float64 graph on the {dtype} route {chosen}"

    def error_model(self, sizes):
        # longest chain: router dot (d) and sigmoid -> mixture weight (div by a k-sum) -> routed
        # expert (as the expert: dots l and hr) -> k-sum -> RMSNorm (mean of l squares, sqrt,
        # div, gain) -> dot l with W_up -> add shared path
        return ErrorModel(stores=28, accum=sizes["d"] + 2 * sizes["l"] + sizes["hr"] + sizes["k"] + sizes["l"],
                          amp=4.0)
