"""Sequence mixers: the KDA recurrence, the KDA layer and Gated MLA (k3-spec §2.2–2.3)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from difftest.case import Case
from difftest.components.base import TINY_CONFIG, Component, ErrorModel, copy_weight, t64, to_np
from difftest.components.channel import compiled
from difftest.inputs import gaussian, scale_for_kind
from pybridge import kda, mla
from pybridge.config import load_config


def unit_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


class KDARecurrenceComponent(Component):
    name = "kda_recurrence"
    summary = "KDA heads over a sequence from a state (Lean KDA.runF; kda_chunked, kda_recurrent)"
    template = "kda_recurrence"
    lean_targets = ("KimiK3.Exec.Kernel",)
    lean_default = True  # the executable spec (KimiK3.Exec)
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
    lean_targets = ("KimiK3.Exec.Kernel",)
    lean_default = True  # the executable spec (KimiK3.Exec)
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

    def module(self, case: Case) -> kda.KimiDeltaAttention:
        """pybridge's layer with the case's weights (hub layouts; no dt_bias: see docs)."""
        t, s = case.tensors, case.sizes
        D, H, K, V, W, R = (s[k] for k in "DHKVWR")
        m = kda.KimiDeltaAttention(self.config(s)).double()
        copy_weight(m.q_proj.weight, t["Wq"].reshape(D, H * K).T)
        copy_weight(m.k_proj.weight, t["Wk"].reshape(D, H * K).T)
        copy_weight(m.v_proj.weight, t["Wv"].reshape(D, H * V).T)
        copy_weight(m.q_conv1d.weight, t["conv_q"].reshape(W, H * K).T[:, None, :])
        copy_weight(m.k_conv1d.weight, t["conv_k"].reshape(W, H * K).T[:, None, :])
        copy_weight(m.v_conv1d.weight, t["conv_v"].reshape(W, H * V).T[:, None, :])
        copy_weight(m.f_a_proj.weight, t["decay_down"].T)
        copy_weight(m.f_b_proj.weight, t["decay_up"].reshape(R, H * K).T)
        copy_weight(m.dt_bias, np.zeros(H * K))  # the Lean layer has no dt_bias
        copy_weight(m.A_log, t["log_scale"])
        copy_weight(m.b_proj.weight, t["beta_proj"].T)
        copy_weight(m.g_proj.weight, t["gate"].reshape(D, H * V).T)
        copy_weight(m.o_norm.weight, t["out_norm"])
        copy_weight(m.o_proj.weight, t["out_proj"].reshape(H * V, D).T)
        m.o_norm.eps = float(t["eps"])
        m.lower_bound = float(t["log_floor"])
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


def _mla_spec_params(t: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """The MLA export's parameters (names of mla_packed_step_tiny) from a case's spec tensors."""
    names = {"query_down": "query_down", "query_norm_scale": "query_norm", "kv_down": "kv_down",
             "kv_norm_scale": "kv_norm", "shared_key_down": "shared_key_down", "query_content_up": "qc_up",
             "query_shared_up": "qs_up", "key_up": "key_up", "value_up": "value_up", "gate_weight": "gate",
             "output_weight": "out"}
    return {graph_name: t64(t[name]) for graph_name, name in names.items()}


class MLAComponent(Component):
    name = "mla"
    summary = "Gated MLA over a sequence (Lean GatedMLA.forward; GatedMLA prefill and decode)"
    template = "mla"
    lean_targets = ("KimiK3.Exec.Kernel",)
    lean_default = True  # the executable spec (KimiK3.Exec)
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

    def module(self, case: Case) -> mla.GatedMLA:
        t, s = case.tensors, case.sizes
        D, H, Lq, Lkv, C, R, V = (s[k] for k in ("D", "H", "Lq", "Lkv", "C", "R", "V"))
        m = mla.GatedMLA(self.config(s)).double()
        copy_weight(m.q_a_proj.weight, t["query_down"].T)
        copy_weight(m.q_a_layernorm.weight, t["query_norm"])
        q_b = np.concatenate([t["qc_up"].transpose(0, 2, 1), t["qs_up"].transpose(0, 2, 1)], axis=1)
        copy_weight(m.q_b_proj.weight, q_b.reshape(H * (C + R), Lq))
        copy_weight(m.kv_a_proj_with_mqa.weight, np.concatenate([t["kv_down"].T, t["shared_key_down"].T], 0))
        copy_weight(m.kv_a_layernorm.weight, t["kv_norm"])
        kv_b = np.concatenate([t["key_up"].transpose(0, 2, 1), t["value_up"].transpose(0, 2, 1)], axis=1)
        copy_weight(m.kv_b_proj.weight, kv_b.reshape(H * (C + V), Lkv))
        copy_weight(m.g_proj.weight, t["gate"].reshape(D, H * V).T)
        copy_weight(m.o_proj.weight, t["out"].reshape(H * V, D).T)
        m.q_a_layernorm.eps = m.kv_a_layernorm.eps = float(t["eps"])
        m.score_scale = float(t["score_scale"])
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
        r = cg(_mla_spec_params(case.tensors), {"latent_cache": cache.latent[0], "shared_key_cache": cache.shared_key[0],
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
