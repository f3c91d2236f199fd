"""Sequence mixers: the KDA recurrence, the KDA layer and Gated MLA (k3-spec §2.2–2.3)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from difftest.case import Case
from difftest.components.base import TINY_CONFIG, Component, ErrorModel, t64, to_np
from difftest.components.channel import compiled
from difftest.inputs import gaussian, scale_for_kind
from pybridge import adapter, kda, mla
from pybridge.config import load_config


def unit_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


class KDARecurrenceComponent(Component):
    name = "kda_recurrence"
    summary = "KDA heads over a sequence from a state (Lean KDA.runF; kda_chunked, kda_recurrent)"
    template = "kda_recurrence"
    lean_targets = ("KimiK3.Sequence.Kernel",)
    kinds = ("random", "long", "tiny")
    default_sizes = {"H": 2, "K": 5, "V": 7, "T": 6}
    graph_file = "kda_packed_step_tiny.json"
    unsupported = {("torch", "bfloat16", "cpu"): "kda_chunked's triangular solve has no bfloat16 CPU kernel in torch"}

    def sizes_for_kind(self, kind):
        return {**self.default_sizes, "T": 40} if kind == "long" else dict(self.default_sizes)

    def shrink_sizes(self, sizes):
        return [{**sizes, "T": t} for t in (1, 2, 4) if t < sizes["T"]]

    def graph_fits(self, case):
        return {k: v for k, v in case.sizes.items() if k != "T"} == {k: v for k, v in self.default_sizes.items() if k != "T"}

    def sample(self, rng, kind, sizes):
        H, K, V, T = sizes["H"], sizes["K"], sizes["V"], sizes["T"]
        floor = np.exp(-5.0)
        if kind == "long":
            # half the key channels near the floor e^-5, half near 1 (slow decay over 40 tokens)
            near_one = 1.0 - 0.02 * rng.random((T, H, K))
            near_floor = floor * (1.0 + 0.1 * rng.random((T, H, K)))
            retention = np.where(np.arange(K) % 2 == 0, near_one, near_floor)
        else:
            retention = floor + (1.0 - floor) * rng.random((T, H, K))
        key = unit_rows(rng, (T, H, K)) * (1e-7 if kind == "tiny" else 1.0)
        return {
            "state": gaussian(rng, (H, K, V), 1.0),
            "q": unit_rows(rng, (T, H, K)),
            "k": key,
            "v": gaussian(rng, (T, H, V), 1.0),
            "retention": retention,
            "beta": rng.random((T, H)),
        }

    def torch_outputs(self, case, dtype, device):
        t = {k: t64(v).to(device=device, dtype=dtype) for k, v in case.tensors.items()}
        args = (t["q"][None], t["k"][None], t["v"][None], t["retention"].log()[None], t["beta"][None], 1.0, t["state"][None])
        out = {}
        for impl, kernel in (("torch", kda.kda_chunked), ("torch_recurrent", kda.kda_recurrent)):
            if not self.runs(impl, dtype, device):
                continue
            o, s = kernel(*args)
            out[impl] = {"o": to_np(o[0]), "state": to_np(s[0])}
        return out

    def graph_outputs(self, case, dtype, device):
        cg = compiled(self.graph_file, dtype, device)
        t = {k: t64(v) for k, v in case.tensors.items()}
        state, outs = t["state"], []
        for i in range(case.sizes["T"]):
            r = cg({}, {"state": state, "key": t["k"][i], "value": t["v"][i], "retention": t["retention"][i],
                        "beta": t["beta"][i], "query": t["q"][i]})
            state = r["next_state"]
            outs.append(r["output"])
        return {"o": to_np(torch.stack(outs)), "state": to_np(state)}

    def lean_output_shapes(self, case):
        H, K, V, T = (case.sizes[k] for k in "HKVT")
        return {**{f"o{h}": (T, V) for h in range(H)}, **{f"state{h}": (K, V) for h in range(H)}}

    def lean_postprocess(self, case, out):
        H = case.sizes["H"]
        return {"o": np.stack([out[f"o{h}"] for h in range(H)], axis=1),
                "state": np.stack([out[f"state{h}"] for h in range(H)])}

    def error_model(self, sizes):
        # per token: decay, correction (dot K), delta and write (4 ops) on the state; the state
        # map is non-expansive (retention <= 1, |k| = 1, beta in [0, 1]), so errors add over T;
        # the read is a dot of length K
        T, K = sizes["T"], sizes["K"]
        return ErrorModel(stores=6 * T + 2, accum=T * K + K, amp=1.0)


class KDALayerComponent(Component):
    name = "kda_layer"
    summary = "KDA layer over a sequence (Lean KDA.layerForward; KimiDeltaAttention prefill and decode)"
    template = "kda_layer"
    lean_targets = ("KimiK3.Sequence.Kernel",)
    kinds = ("random", "saturate", "tiny")
    default_sizes = {"D": 24, "H": 2, "K": 5, "V": 7, "W": 4, "R": 15, "T": 3}
    graph_file = None  # hook: fixtures/graphs/kda_layer_step_tiny.json (stepgraph) joins here
    unsupported = {("torch", "bfloat16", "cpu"): "kda_chunked's triangular solve has no bfloat16 CPU kernel in torch"}

    def config(self, sizes):
        cfg = load_config(TINY_CONFIG)
        return dataclasses.replace(cfg, hidden_size=sizes["D"], kda_num_heads=sizes["H"], kda_head_k_dim=sizes["K"],
                                   kda_head_v_dim=sizes["V"], kda_conv_size=sizes["W"], kda_decay_rank=sizes["R"],
                                   kda_query_scale=1.0)

    def shrink_sizes(self, sizes):
        return [{**sizes, "T": t} for t in (1, 2) if t < sizes["T"]]

    def sample(self, rng, kind, sizes):
        D, H, K, V, W, R, T = (sizes[k] for k in "DHKVWRT")
        cfg = self.config(sizes)
        return {
            "Wq": gaussian(rng, (D, H, K), D**-0.5), "Wk": gaussian(rng, (D, H, K), D**-0.5),
            "Wv": gaussian(rng, (D, H, V), D**-0.5),
            "conv_q": gaussian(rng, (W, H, K), W**-0.5), "conv_k": gaussian(rng, (W, H, K), W**-0.5),
            "conv_v": gaussian(rng, (W, H, V), W**-0.5),
            "decay_down": gaussian(rng, (D, R), D**-0.5), "decay_up": gaussian(rng, (R, H, K), R**-0.5),
            "log_scale": gaussian(rng, (H,), 0.5), "beta_proj": gaussian(rng, (D, H), D**-0.5),
            "gate": gaussian(rng, (D, H, V), D**-0.5), "out_norm": rng.uniform(0.5, 1.5, V),
            "out_proj": gaussian(rng, (H, V, D), (H * V) ** -0.5),
            "eps": np.array(cfg.rms_norm_eps), "l2_eps": np.array(kda.L2_EPS),
            "log_floor": np.array(cfg.kda_gate_lower_bound),
            "xs": gaussian(rng, (T, D), scale_for_kind(kind)),
        }

    def spec_params(self, case: Case) -> dict[str, torch.Tensor]:
        """The case's weights under their spec names (`pybridge.adapter.kda_rules`); the Lean
        layer has no decay-logit bias yet, so `decay_bias` is 0."""
        t, W = case.tensors, case.sizes["W"]
        spec = {name: t64(t[key]) for name, key in (
            ("query_proj", "Wq"), ("key_proj", "Wk"), ("value_proj", "Wv"), ("decay_down", "decay_down"),
            ("decay_up", "decay_up"), ("decay_log_scale", "log_scale"), ("beta_proj", "beta_proj"),
            ("gate_weight", "gate"), ("out_norm_scale", "out_norm"), ("output_proj", "out_proj"))}
        for name, key in (("query", "conv_q"), ("key", "conv_k"), ("value", "conv_v")):
            spec.update({f"{name}_conv.{i}": t64(t[key][i]) for i in range(W)})
        spec["decay_bias"] = torch.zeros(case.sizes["H"], case.sizes["K"], dtype=torch.float64)
        return spec

    def module(self, case: Case) -> kda.KimiDeltaAttention:
        """pybridge's layer with the case's weights (hub layout through `pybridge.adapter`)."""
        m = kda.KimiDeltaAttention(self.config(case.sizes)).double()
        m.load_state_dict(adapter.to_hub(adapter.kda_rules(self.config(case.sizes)), self.spec_params(case)))
        m.o_norm.eps = float(case.tensors["eps"])
        m.lower_bound = float(case.tensors["log_floor"])
        return m

    def torch_outputs(self, case, dtype, device):
        m = self.module(case).to(device=device, dtype=dtype)
        xs = t64(case.tensors["xs"]).to(device=device, dtype=dtype)[None]
        out = {}
        with torch.no_grad():
            if self.runs("torch", dtype, device):
                y_prefill, _ = m(xs, m.initial_state(1, xs))
                out["torch"] = {"y": to_np(y_prefill[0])}
            st, ys = m.initial_state(1, xs), []
            for i in range(xs.shape[1]):
                y, st = m(xs[:, i : i + 1], st)
                ys.append(y[0, 0])
        out["torch_decode"] = {"y": to_np(torch.stack(ys))}
        return out

    def lean_output_shapes(self, case):
        return {"y": (case.sizes["T"], case.sizes["D"])}

    def error_model(self, sizes):
        D, K, V, W, R, T, H = (sizes[k] for k in "DKVWRTH")
        # projection (D) and conv (W), SiLU, L2 norm (K), decay (R, sigmoid, exp), the
        # recurrence over T tokens (as kda_recurrence), per-head RMSNorm (V), gate, output (H V)
        return ErrorModel(stores=20 + 6 * T, accum=D + W + K + R + T * K + V + H * V, amp=4.0)


class MLAComponent(Component):
    name = "mla"
    summary = "Gated MLA over a sequence (Lean GatedMLA.forward; GatedMLA prefill and decode)"
    template = "mla"
    lean_targets = ("KimiK3.Sequence.Kernel",)
    kinds = ("random", "saturate", "tiny")
    default_sizes = {"D": 24, "H": 3, "Lq": 10, "Lkv": 11, "C": 9, "R": 14, "V": 8, "T": 4}
    graph_file = "mla_packed_step_tiny.json"  # one decode step with 2 cached tokens: compared at t = 2

    def config(self, sizes):
        cfg = load_config(TINY_CONFIG)
        return dataclasses.replace(cfg, hidden_size=sizes["D"], num_attention_heads=sizes["H"], q_lora_rank=sizes["Lq"],
                                   kv_lora_rank=sizes["Lkv"], qk_nope_head_dim=sizes["C"], qk_rope_head_dim=sizes["R"],
                                   v_head_dim=sizes["V"])

    def shrink_sizes(self, sizes):
        return [{**sizes, "T": t} for t in (1, 2, 3) if t < sizes["T"]]

    def graph_fits(self, case):
        return {k: v for k, v in case.sizes.items() if k != "T"} == {k: v for k, v in self.default_sizes.items() if k != "T"} and case.sizes["T"] >= 3

    def sample(self, rng, kind, sizes):
        D, H, Lq, Lkv, C, R, V, T = (sizes[k] for k in ("D", "H", "Lq", "Lkv", "C", "R", "V", "T"))
        cfg = self.config(sizes)
        return {
            "query_down": gaussian(rng, (D, Lq), D**-0.5), "query_norm": rng.uniform(0.5, 1.5, Lq),
            "kv_down": gaussian(rng, (D, Lkv), D**-0.5), "kv_norm": rng.uniform(0.5, 1.5, Lkv),
            "shared_key_down": gaussian(rng, (D, R), D**-0.5),
            "qc_up": gaussian(rng, (H, Lq, C), Lq**-0.5), "qs_up": gaussian(rng, (H, Lq, R), Lq**-0.5),
            "key_up": gaussian(rng, (H, Lkv, C), Lkv**-0.5), "value_up": gaussian(rng, (H, Lkv, V), Lkv**-0.5),
            "gate": gaussian(rng, (D, H, V), D**-0.5), "out": gaussian(rng, (H, V, D), (H * V) ** -0.5),
            "eps": np.array(cfg.rms_norm_eps), "score_scale": np.array(cfg.mla_score_scale),
            "xs": gaussian(rng, (T, D), scale_for_kind(kind)),
        }

    def spec_params(self, case: Case) -> dict[str, torch.Tensor]:
        """The case's weights under their spec names (`pybridge.adapter.mla_rules`)."""
        t = case.tensors
        return {name: t64(t[key]) for name, key in (
            ("query_down", "query_down"), ("query_norm_scale", "query_norm"), ("kv_down", "kv_down"),
            ("kv_norm_scale", "kv_norm"), ("shared_key_down", "shared_key_down"), ("query_content_up", "qc_up"),
            ("query_shared_up", "qs_up"), ("key_up", "key_up"), ("value_up", "value_up"), ("gate_weight", "gate"),
            ("output_weight", "out"))}

    def module(self, case: Case) -> mla.GatedMLA:
        """pybridge's layer with the case's weights (hub layout through `pybridge.adapter`)."""
        m = mla.GatedMLA(self.config(case.sizes)).double()
        m.load_state_dict(adapter.to_hub(adapter.mla_rules(self.config(case.sizes)), self.spec_params(case)))
        m.q_a_layernorm.eps = m.kv_a_layernorm.eps = float(case.tensors["eps"])
        m.score_scale = float(case.tensors["score_scale"])
        return m

    def torch_outputs(self, case, dtype, device):
        m = self.module(case).to(device=device, dtype=dtype)
        xs = t64(case.tensors["xs"]).to(device=device, dtype=dtype)[None]
        with torch.no_grad():
            y_prefill, _ = m(xs, m.initial_state(1, xs))
            cache, ys = m.initial_state(1, xs), []
            for i in range(xs.shape[1]):
                y, cache = m(xs[:, i : i + 1], cache)
                ys.append(y[0, 0])
        out = {"torch": {"y": to_np(y_prefill[0])}, "torch_decode": {"y": to_np(torch.stack(ys))}}
        if case.sizes["T"] >= 3:
            for impl in out.values():
                impl["y_t2"] = impl["y"][2]
        return out

    def graph_outputs(self, case, dtype, device):
        """The packed decode step at position 2; the cache of tokens 0 and 1 comes from
        pybridge's float64 prefill (cache entries are checked through `y` of the other paths)."""
        m = self.module(case).to(torch.float64)
        xs = t64(case.tensors["xs"])[None]
        with torch.no_grad():
            _, cache = m(xs[:, :2], m.initial_state(1, xs))
        cg = compiled(self.graph_file, dtype, device)
        r = cg(self.spec_params(case), {"latent_cache": cache.latent[0], "shared_key_cache": cache.shared_key[0],
                                           "x": xs[0, 2], "score_scale": t64(case.tensors["score_scale"])})
        return {"y_t2": to_np(r["output"])}

    def lean_output_shapes(self, case):
        return {"y": (case.sizes["T"], case.sizes["D"])}

    def lean_postprocess(self, case, out):
        return {**out, "y_t2": out["y"][2]} if case.sizes["T"] >= 3 else out

    def error_model(self, sizes):
        D, Lq, Lkv, C, R, V, T, H = (sizes[k] for k in ("D", "Lq", "Lkv", "C", "R", "V", "T", "H"))
        # two down projections (D) with RMSNorm (Lq / Lkv), up projections (Lq, Lkv), scores
        # (C + R), softmax over T (amplifies absolute score errors by 2 max|score|), the value
        # mix (T, Lkv), gate and output (H V)
        return ErrorModel(stores=30, accum=D + 2 * Lkv + Lq + C + R + 2 * T + H * V, amp=4.0)
