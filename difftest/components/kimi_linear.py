"""The Kimi Linear variant's components (k3-spec §7; `pybridge.kimi_linear`): `kimi_linear_kda`,
`kimi_linear_mla`, `kimi_linear_moe` and the whole tiny model `kimi_linear_model`.

The spec leg is pybridge's variant (`torch_outputs`, kept with `--no-pybridge` too:
`spec_is_pybridge`), built from a hub-form `config.json` (`hub_config`) through pybridge's config
reader. Every component has a Lean leg: the executable specification `Exec.KimiLinear`
(templates `kimi_linear_{kda,mla,moe,model}.lean.j2`; `Exec.KimiLinear.layerForward_eq`,
`MLA.forward_eq`/`forwardDirect_eq`, `MoE.forwardAuto_eq`, `Model.logits_eq`: equal to the reference
definitions of `KimiK3.KimiLinear`) on row 0 of the case, its weights moved from the hub's `[out, in]`
layout to the spec's `[in, out]` one (`kda_spec`, `mla_spec`, `moe_spec`, `lean_case`) and its
configuration and layer schedule read from the hub config here (`lean_config`, `lean_layers`).
There is no NumPy leg. An adapter (`--impl kimi-linear`, transformers' own layers) is compared with
pybridge's variant and the Lean leg: at float64, and at float32 on the case rounded to float32
against pybridge's variant in float64 on the same rounded values (`adapters.legs.lowp_checks`; the
whole model at float64 only, `legs.FLOAT64_ONLY`). pybridge's own float32/bfloat16 path is not
checked (`lowp_checks`): its only float64 reference would be pybridge itself.

Case tensors are the block's weights under the hub's names relative to the block (pybridge's
`init_random_`: unit-variance projections, A_log = log U(1, 16), small dt_bias and selection
biases), and the input `xs [B, T, D]` (`x [N, D]` for the MoE); `kimi_linear_model` has `ids
[B, T]` and `model_seed` (the seeded tiny model). Kinds: `random`, `large` (inputs ×30: the
softplus gate's z > 20 branch, saturated sigmoids) and, for KDA, `long` (T = 40).
"""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import torch

from difftest.case import Case
from difftest.components.base import Component, ErrorModel, t64, to_np

#: the tiny variant's hub config (the shape of moonshotai/Kimi-Linear-*'s config.json)
TINY = {
    "model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"], "vocab_size": 61, "hidden_size": 16,
    "num_hidden_layers": 4, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "hidden_act": "silu",
    "num_attention_heads": 2, "num_key_value_heads": 2, "q_lora_rank": None, "kv_lora_rank": 7,
    "qk_nope_head_dim": 4, "qk_rope_head_dim": 3, "v_head_dim": 5, "mla_use_nope": True,
    "intermediate_size": 20, "moe_intermediate_size": 6, "num_experts": 4, "num_experts_per_token": 2,
    "num_shared_experts": 1, "routed_scaling_factor": 2.446, "moe_renormalize": True,
    "moe_router_activation_func": "sigmoid", "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "num_expert_group": 1, "topk_group": 1,
    "linear_attn_config": {"head_dim": 6, "num_heads": 2, "short_conv_kernel_size": 4,
                           "kda_layers": [1, 2, 4], "full_attn_layers": [3]},
}
KDA_LAYER, MLA_LAYER, MOE_LAYER = 0, 2, 1
#: the constants transformers 5.23 hard-codes for the variant (k3-spec §7), read by the Lean leg:
#: the L2-norm ε of q and k (`l2norm`, 1e-6) and the MLA latent RMSNorm ε (`KimiLinearAttention`, 1e-6)
L2_EPS, LATENT_EPS = 1e-6, 1e-6


def hub_config(sizes: dict[str, int] | None = None) -> dict:
    """The tiny hub config, with `q_lora_rank` from `sizes` (0: none, one `q_proj`)."""
    d = dict(TINY)
    if sizes and sizes.get("Lq"):
        d["q_lora_rank"] = sizes["Lq"]
    return d


@cache
def _config(q_lora: int):
    from pybridge.config import config_from_dict

    return config_from_dict(hub_config({"Lq": q_lora}))


def random_block(module: torch.nn.Module, seed: int) -> dict[str, np.ndarray]:
    """`module`'s parameters, seeded as pybridge's `init_random_` does, as float64 arrays."""
    from pybridge.checkpoint import init_random_

    init_random_(module.double(), seed)
    return {k: to_np(v) for k, v in module.state_dict().items()}


def contiguous(spec: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The Lean case's tensors, C-contiguous (the packed array is written row-major)."""
    return {k: np.ascontiguousarray(v) for k, v in spec.items()}


def kda_spec(t: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """A KDA block's weights (hub names relative to the block) in the spec's layout
    (`KimiLinear.LayerParams`), and its sizes: projections `[D, H, n]`, convolutions `[W, H, n]`
    (oldest tap first), `dt_bias [H, K]`, `A_log [H]`, gate `[D, r]`, `[r, H, V]`, output `[H, V, D]`."""
    la = TINY["linear_attn_config"]
    H, K, W = la["num_heads"], la["head_dim"], la["short_conv_kernel_size"]
    D, V, R = TINY["hidden_size"], la["head_dim"], t["f_a_proj.weight"].shape[0]
    G = t["g_a_proj.weight"].shape[0]

    def proj(name: str, n: int) -> np.ndarray:  # [H n, D] -> [D, H, n]
        return t[name].T.reshape(D, H, n)

    def conv(name: str, n: int) -> np.ndarray:  # [H n, 1, W] -> [W, H, n]
        return t[name][:, 0, :].T.reshape(W, H, n)

    spec = {
        "query_proj": proj("q_proj.weight", K), "key_proj": proj("k_proj.weight", K),
        "value_proj": proj("v_proj.weight", V), "query_conv": conv("q_conv1d.weight", K),
        "key_conv": conv("k_conv1d.weight", K), "value_conv": conv("v_conv1d.weight", V),
        "decay_down": t["f_a_proj.weight"].T, "decay_up": t["f_b_proj.weight"].T.reshape(R, H, K),
        "decay_bias": t["dt_bias"].reshape(H, K), "decay_log_rate": t["A_log"].reshape(H),
        "beta_proj": t["b_proj.weight"].T, "gate_down": t["g_a_proj.weight"].T,
        "gate_up": t["g_b_proj.weight"].T.reshape(G, H, V), "out_norm_scale": t["o_norm.weight"],
        "output_proj": t["o_proj.weight"].T.reshape(H, V, D),
    }
    return spec, {"D": D, "H": H, "K": K, "V": V, "W": W, "R": R, "G": G}


def mla_spec(t: dict[str, np.ndarray], Lq: int) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """An MLA block's weights in the spec's layout (`GatedMLA.Params`, gate unread), and its
    sizes: `kv_a_proj_with_mqa` split into `kv_down [D, Lkv]` and `shared_key_down [D, R]`,
    `kv_b_proj` into `key_up [H, Lkv, C]` and `value_up [H, Lkv, V]`, the query's up projection
    (`q_proj`, or `q_b_proj` after `q_a_proj`) into `query_content_up [H, L, C]` and
    `query_shared_up [H, L, R]`, `o_proj` as `[H, V, D]`. `Lq = 0` (`q_proj`): the direct-query
    path, with the query latent width `L = D` and no query-down weights (`sizes["direct"] = 1`)."""
    D, H, Lkv = TINY["hidden_size"], TINY["num_attention_heads"], TINY["kv_lora_rank"]
    C, R, V = TINY["qk_nope_head_dim"], TINY["qk_rope_head_dim"], TINY["v_head_dim"]
    L = Lq or D
    q_up = (t["q_b_proj.weight"] if Lq else t["q_proj.weight"]).T.reshape(L, H, C + R).transpose(1, 0, 2)
    kv_up = t["kv_b_proj.weight"].T.reshape(Lkv, H, C + V).transpose(1, 0, 2)
    kv_a = t["kv_a_proj_with_mqa.weight"]
    spec = {
        "kv_down": kv_a[:Lkv].T, "kv_norm_scale": t["kv_a_layernorm.weight"], "shared_key_down": kv_a[Lkv:].T,
        "query_content_up": q_up[:, :, :C], "query_shared_up": q_up[:, :, C:],
        "key_up": kv_up[:, :, :C], "value_up": kv_up[:, :, C:],
        "output_weight": t["o_proj.weight"].T.reshape(H, V, D),
    }
    if Lq:
        spec |= {"query_down": t["q_a_proj.weight"].T, "query_norm_scale": t["q_a_layernorm.weight"]}
    return spec, {"D": D, "H": H, "Lq": L, "Lkv": Lkv, "C": C, "R": R, "V": V, "direct": int(not Lq)}


def moe_spec(t: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """An MoE block's weights in the spec's layout (`KimiLinear.MoE`), and its sizes: each expert's
    `w1`, `w3`, `w2` as gate `[D, h]`, up `[D, h]`, down `[h, D]`, stacked over experts; the router
    `[D, E]`."""
    E = TINY["num_experts"]

    def stack(w: str) -> np.ndarray:
        return np.stack([t[f"experts.{e}.{w}.weight"].T for e in range(E)])

    spec = {
        "shared_gate": t["shared_experts.gate_proj.weight"].T, "shared_up": t["shared_experts.up_proj.weight"].T,
        "shared_down": t["shared_experts.down_proj.weight"].T, "router_weight": t["gate.weight"].T,
        "router_bias": t["gate.e_score_correction_bias"], "expert_gate": stack("w1"), "expert_up": stack("w3"),
        "expert_down": stack("w2"),
    }
    return spec, {"d": TINY["hidden_size"], "h": TINY["moe_intermediate_size"], "E": E,
                  "hs": TINY["moe_intermediate_size"] * TINY["num_shared_experts"], "k": TINY["num_experts_per_token"]}


class KimiLinearComponent(Component):
    """Common parts: the spec leg is pybridge's variant; the Lean leg (where `template` is set) runs
    `Exec.KimiLinear` on row 0 of the case (`lean_case`); no NumPy."""

    spec_is_pybridge = True
    lean_targets = ("KimiK3.Exec.Kernel",)
    lean_default = True
    kinds = {"random": "unit-variance inputs and weights", "large": "inputs ×30 (softplus z > 20, saturated gates)"}
    default_sizes = {"B": 2, "T": 9, "Lq": 0}
    inputs = ("xs",)

    def config(self, sizes: dict[str, int]):
        """pybridge's `KimiLinearConfig` of the tiny variant (`call.config()`)."""
        return _config(sizes.get("Lq", 0))

    def references(self) -> list[str]:
        return ["pybridge variant (the spec leg)"] + (["lean (Exec.KimiLinear)"] if self.template else [])

    def lean_config(self) -> dict:
        """The Lean leg's configuration: the hub config's values (`hub_config`, not pybridge's reader)
        and the constants transformers hard-codes (`L2_EPS`, `LATENT_EPS`); the query and score
        scales are computed in Lean (`KimiLinear.defaultQueryScale`, `MLA.defaultScoreScale`)."""
        d = hub_config()
        return {"norm_eps": d["rms_norm_eps"], "l2_eps": L2_EPS, "latent_eps": LATENT_EPS,
                "routed_scaling": d["routed_scaling_factor"]}

    def lean_slice(self, case: Case, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Row 0 of the batch (the Lean leg runs one sequence)."""
        return {"y": out["y"][0]}

    def lean_output_shapes(self, case: Case) -> dict[str, tuple[int, ...]]:
        return {"y": (case.sizes["T"], case.sizes["D"])}

    def module(self, sizes: dict[str, int]) -> torch.nn.Module:
        raise NotImplementedError

    def sample(self, rng, kind, sizes):
        seed = int(rng.integers(2**31))
        weights = random_block(self.module(sizes), seed)
        shape = (sizes["B"], sizes["T"], TINY["hidden_size"]) if self.inputs == ("xs",) else (sizes["B"] * sizes["T"], TINY["hidden_size"])
        x = rng.normal(size=shape) * (30.0 if kind == "large" else 1.0)
        return {self.inputs[0]: x, **weights}

    def hub_tensors(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """`call.hub()`: the block's weights under the hub's names (the case's names already)."""
        return {k: v for k, v in tensors.items() if k not in ("x", "xs", "ids", "model_seed")}

    def torch_outputs(self, case, dtype, device):
        """`pybridge`: the block on the whole input; `pybridge decode` (`second`): another path
        through the same code (token by token, or the recurrent kernel), so a run without an
        adapter still compares two legs."""
        m = self.module(case.sizes).to(torch.float64)
        m.load_state_dict({k: t64(v) for k, v in self.hub_tensors(case.tensors).items()})
        m = m.to(device=device, dtype=dtype)
        x = t64(case.tensors[self.inputs[0]]).to(device=device, dtype=dtype)
        with torch.no_grad():
            return {"pybridge": {"y": to_np(self.forward(m, x))}, self.second: {"y": to_np(self.decode(m, x))}}

    second = "pybridge decode"

    def forward(self, m: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return m(x, m.initial_state(x.shape[0], x))[0]

    def decode(self, m: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        """One token at a time through the layer's causal state."""
        st, ys = m.initial_state(x.shape[0], x), []
        for t in range(x.shape[1]):
            y, st = m(x[:, t : t + 1], st)
            ys.append(y)
        return torch.cat(ys, 1)

    def lowp_checks(self, case, dtype, device):
        """None for pybridge's own low-precision path: its only float64 reference would be
        pybridge's variant itself (no NumPy leg), and a low-precision check never takes the model
        under test as its reference (`runner`). Adapters are checked at float32 against pybridge's
        float64 variant (`adapters.legs.lowp_checks`)."""
        return []

    def shrink_sizes(self, sizes):
        return [dict(sizes, B=1, T=t) for t in (2, 4) if t < sizes["T"]]


class KimiLinearKDAComponent(KimiLinearComponent):
    name = "kimi_linear_kda"
    template = "kimi_linear_kda"
    summary = "Kimi Linear KDA layer: softplus decay gate, low-rank output gate, K^-1/2 query scale (pybridge variant)"
    kinds = {**KimiLinearComponent.kinds, "long": "T = 40 (several of pybridge's 16-token chunks)"}

    def sizes_for_kind(self, kind, thorough=False):
        return dict(self.default_sizes, T=40) if kind == "long" else dict(self.default_sizes)

    def module(self, sizes):
        from pybridge.kimi_linear import KimiLinearKDA

        return KimiLinearKDA(self.config(sizes))

    def lean_case(self, case):
        """Row 0's tokens and the weights in the spec's layout (`kda_spec`)."""
        spec, sizes = kda_spec(case.tensors)
        spec["xs"] = case.tensors["xs"][0]
        return dataclasses.replace(case, sizes={**sizes, "T": case.sizes["T"]}, tensors=contiguous(spec))

    def error_model(self, sizes):
        T, K, D = sizes["T"], sizes.get("K", TINY["linear_attn_config"]["head_dim"]), sizes.get("D", TINY["hidden_size"])
        # as kda_layer's: projection, conv, L2 norm, decay (softplus, exp), the recurrence over
        # T tokens, per-head RMSNorm, the low-rank gate (two dots), output
        return ErrorModel(stores=22 + 6 * T, accum=3 * D + 4 + 3 * K + T * K + 2 * K, amp=4.0)


class KimiLinearMLAComponent(KimiLinearComponent):
    name = "kimi_linear_mla"
    template = "kimi_linear_mla"
    summary = "Kimi Linear MLA (NoPE) without an output gate; q_proj or the low-rank query (pybridge variant)"
    kinds = {**KimiLinearComponent.kinds, "q_lora": "the low-rank query path (q_lora_rank 5)"}

    def sizes_for_kind(self, kind, thorough=False):
        return dict(self.default_sizes, Lq=5) if kind == "q_lora" else dict(self.default_sizes)

    def module(self, sizes):
        from pybridge.kimi_linear import KimiLinearMLA

        return KimiLinearMLA(self.config(sizes))

    def lean_case(self, case):
        """Row 0's tokens and the weights in the spec's layout (`mla_spec`)."""
        spec, sizes = mla_spec(case.tensors, case.sizes.get("Lq", 0))
        spec["xs"] = case.tensors["xs"][0]
        return dataclasses.replace(case, sizes={**sizes, "T": case.sizes["T"]}, tensors=contiguous(spec))

    def error_model(self, sizes):
        D, T, Lkv = sizes.get("D", TINY["hidden_size"]), sizes["T"], sizes.get("Lkv", TINY["kv_lora_rank"])
        C = sizes.get("C", TINY["qk_nope_head_dim"] + TINY["qk_rope_head_dim"])
        HV = sizes.get("HV", TINY["num_attention_heads"] * TINY["v_head_dim"])
        # query (D, or D and Lq with its norm), latents (D, RMSNorm Lkv), up projection (Lkv),
        # scores (C), softmax over T, value mix (T), output (H V)
        return ErrorModel(stores=30, accum=2 * D + 2 * Lkv + sizes.get("Lq", 0) + C + 2 * T + HV, amp=4.0)


class KimiLinearMoEComponent(KimiLinearComponent):
    name = "kimi_linear_moe"
    template = "kimi_linear_moe"
    summary = "Kimi Linear MoE: sigmoid router, selection bias, routed scaling, SwiGLU experts, shared expert (pybridge variant)"
    inputs = ("x",)

    def module(self, sizes):
        from pybridge.kimi_linear import RoutedScalingMoE

        return RoutedScalingMoE(self.config(sizes))

    def lean_case(self, case):
        """Every token, the weights in the spec's layout (`moe_spec`)."""
        spec, sizes = moe_spec(case.tensors)
        spec["x"] = case.tensors["x"]
        return dataclasses.replace(case, sizes={**sizes, "N": case.tensors["x"].shape[0]}, tensors=contiguous(spec))

    def lean_slice(self, case, out):
        return out

    def lean_output_shapes(self, case):
        return {"y": (case.sizes["N"], case.sizes["d"])}

    second = "pybridge per token"

    def forward(self, m, x):
        return m(x)

    def decode(self, m, x):
        return torch.cat([m(x[i : i + 1]) for i in range(x.shape[0])])

    def error_model(self, sizes):
        D, h = sizes.get("D", TINY["hidden_size"]), sizes.get("h", TINY["moe_intermediate_size"])
        k = sizes.get("k", TINY["num_experts_per_token"])
        # router dot (D), sigmoid, weight (a k-sum), expert (dots D and h), k-sum, shared expert
        return ErrorModel(stores=20, accum=2 * D + 2 * h + k, amp=4.0)


class KimiLinearModelComponent(KimiLinearComponent):
    name = "kimi_linear_model"
    template = "kimi_linear_model"
    summary = "the whole tiny Kimi Linear model (3 KDA + 1 MLA layer, dense + MoE): prefill logits (pybridge variant)"
    kinds = {"random": "random token ids, the seeded tiny model"}
    default_sizes = {"B": 2, "T": 7, "Lq": 0}

    def module(self, sizes):
        from pybridge.kimi_linear import KimiLinearForCausalLM

        return KimiLinearForCausalLM(self.config(sizes))

    def sample(self, rng, kind, sizes):
        return {"ids": rng.integers(0, TINY["vocab_size"], (sizes["B"], sizes["T"])).astype(np.float64),
                "model_seed": np.array(float(rng.integers(2**20)))}

    def seeded(self, case: Case) -> torch.nn.Module:
        from pybridge.checkpoint import init_random_

        return init_random_(self.module(case.sizes).double(), int(case.tensors["model_seed"]))

    def hub_tensors(self, tensors):
        from pybridge.checkpoint import init_random_

        m = init_random_(self.module(self.default_sizes).double(), int(tensors["model_seed"]))
        return dict(m.state_dict())

    def torch_outputs(self, case, dtype, device):
        m = self.seeded(case).to(device=device, dtype=dtype)
        ids = torch.from_numpy(np.asarray(case.tensors["ids"])).long().clamp(0, TINY["vocab_size"] - 1).to(device)
        with torch.no_grad():
            cache, steps = None, []
            for t in range(ids.shape[1]):
                logits, cache = m(ids[:, t : t + 1], cache)
                steps.append(logits)
            return {"pybridge": {"logits": to_np(m(ids)[0])}, "pybridge decode": {"logits": to_np(torch.cat(steps, 1))}}

    def lean_layers(self) -> list[dict]:
        """The layer schedule the Lean leg builds, read from the hub config (`hub_config`, not
        pybridge's reader): 0-based layer `i` is MLA iff `i + 1` is in
        `linear_attn_config.full_attn_layers`, else KDA; dense iff `i < first_k_dense_replace`."""
        d = hub_config()
        la = d["linear_attn_config"]
        return [{"index": i, "mixer": "mla" if i + 1 in la["full_attn_layers"] else "kda",
                 "mlp": "dense" if i < d["first_k_dense_replace"] else "moe"} for i in range(d["num_hidden_layers"])]

    def lean_case(self, case):
        """Row 0's token ids and every weight of the seeded model in the spec's layout
        (`KimiLinear.Model`): layer `i`'s tensors prefixed `l{i}_` (`kda_spec`, `mla_spec`, `moe_spec`,
        the dense MLP as gate `[D, I]`, up `[D, I]`, down `[I, D]`, the two pre-norm gains), the
        embedding `[vocab, D]`, the final norm gain and the head `[D, vocab]` (`lm_head`
        transposed)."""
        sd = {k: to_np(v) for k, v in self.hub_tensors(case.tensors).items()}
        spec: dict[str, np.ndarray] = {"embedding": sd["model.embed_tokens.weight"]}
        sizes: dict[str, int] = {}
        for layer in self.lean_layers():
            pre, p = f"model.layers.{layer['index']}.", f"l{layer['index']}_"
            block = {k[len(pre):]: v for k, v in sd.items() if k.startswith(pre)}
            attn = {k[len("self_attn."):]: v for k, v in block.items() if k.startswith("self_attn.")}
            mixer, mixer_sizes = kda_spec(attn) if layer["mixer"] == "kda" else mla_spec(attn, case.sizes.get("Lq", 0))
            sizes |= {("M" + k if layer["mixer"] == "mla" else k): n for k, n in mixer_sizes.items()}
            if layer["mlp"] == "moe":
                moe = {k[len("block_sparse_moe."):]: v for k, v in block.items() if k.startswith("block_sparse_moe.")}
                mlp, mlp_sizes = moe_spec(moe)
                sizes |= mlp_sizes
            else:
                mlp = {"dense_gate": block["mlp.gate_proj.weight"].T, "dense_up": block["mlp.up_proj.weight"].T,
                       "dense_down": block["mlp.down_proj.weight"].T}
            spec |= {p + k: v for k, v in (mixer | mlp).items()}
            spec |= {p + "input_norm": block["input_layernorm.weight"], p + "post_norm": block["post_attention_layernorm.weight"]}
        spec |= {"final_norm": sd["model.norm.weight"], "head": sd["lm_head.weight"].T, "ids": case.tensors["ids"][0]}
        sizes |= {"vocab": TINY["vocab_size"], "I": TINY["intermediate_size"], "T": case.sizes["T"]}
        return dataclasses.replace(case, sizes=sizes, tensors=contiguous(spec))

    def lean_context(self, case):
        """`cfg`, the layer schedule (`lean_layers`) and row 0's token ids (`tokens`, as Lean `Nat`
        literals; `ids` of the Lean case)."""
        tokens = [int(i) for i in case.tensors["ids"]]
        return {**super().lean_context(case), "layers": self.lean_layers(), "tokens": tokens}

    def lean_slice(self, case, out):
        return {"logits": out["logits"][0]}

    def lean_output_shapes(self, case):
        return {"logits": (case.sizes["T"], TINY["vocab_size"])}

    def lowp_checks(self, case, dtype, device):
        return []  # the whole model has no single-stage error budget (its layers are checked one by one)

    def error_model(self, sizes):
        D, T, L = TINY["hidden_size"], sizes["T"], TINY["num_hidden_layers"]
        per = 22 + 6 * T + 4 * D + 6 * TINY["linear_attn_config"]["head_dim"] + T * 6 + 2 * TINY["intermediate_size"]
        return ErrorModel(stores=L * per, accum=L * per + D, amp=4.0)
