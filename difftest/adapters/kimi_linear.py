"""Built-in adapters: transformers' Kimi Linear (`transformers.models.kimi_linear`).

Covered: `kda_recurrence`, by the torch fallbacks `recurrent_kimi_delta_attention` and
`chunk_kimi_delta_attention` (their undecorated `__wrapped__` functions: with fla installed the
decorated names dispatch to fla's Triton kernels). The mapping: `g = log α` (float32, as the
layer computes its gate), K3's `beta` and `[B, H, K, V]` state. The kernels hard-code the query
scale K^-1/2; K3's readout scale is 1, so the adapter passes `q · √K` (one extra rounding of q,
inside the stage's input rounding budget). The kernels compute in float32 whatever the input
dtype, so they are checked at float32 and bfloat16 storage only.

Not covered, where Kimi Linear's architecture differs from K3 (no exact mapping exists):
K3's layers (`NOT_COVERED`). Those of Kimi Linear are checked against the Kimi Linear variant of
the spec instead (`kimi-linear`, `layers()`): its KDA layer, MLA attention, MoE block and the
whole tiny `KimiLinearForCausalLM`, against `pybridge.kimi_linear` (components `kimi_linear_*`,
`difftest.components.kimi_linear`). They run transformers' own classes from the float64 copy of
its modeling file (`kimi_linear_f64`: the float32 casts made float64, the kernel-hub decorators
removed), with the case's hub-named weights mapped to transformers' names by
`pybridge.adapter.kimi_linear_to_transformers`. At float32 they run transformers' own float32
computation (the same file with only the decorators removed) on the case rounded to float32,
against pybridge's variant in float64 on those values, under the stage's float32 tolerance.
Not at bfloat16: transformers' layers store every projection's output in bfloat16, beyond the
one-store error model of a stage (docs/tolerances.md). The whole model: float64 only.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from difftest.adapters import Call, NotCovered

VARIANT = " (checked as the Kimi Linear variant: kimi_linear_* components, adapter kimi-linear)"
NOT_COVERED = {
    "kda_layer": "Kimi Linear's decay gate is −exp(A_log)·softplus(f + dt_bias), not K3's lower-bounded sigmoid; "
                 "its output gate is low-rank; its kernels hard-code the K^-1/2 query scale",
    "mla": "Kimi Linear's MLA has no output gate (K3: y = W_o (attn ⊙ σ(x W_g)))",
    "expert": "Kimi Linear's experts are SwiGLU (SiLU(xG) ⊙ xU), K3's SiTU soft-caps both branches",
    "latent_moe": "Kimi Linear's MoE is DeepSeek-style SwiGLU without the latent projection, with a routed scaling factor",
    "attnres": "Kimi Linear has plain residual connections, no AttnRes depth state",
    "decoder_step": "the whole model differs in the layers above",
}


class KimiLinearKDA:
    """A Kimi Linear KDA kernel (torch fallback) as K3's `kda_recurrence`."""

    dtypes = ("float32", "bfloat16")

    def __init__(self, name: str, kernel: Callable):
        self.name, self.kernel = name, kernel
        self.description = f"transformers {kernel.__name__} (torch fallback): g = log α, q·√K against its K^-1/2 scale"
        for comp, reason in NOT_COVERED.items():
            setattr(self, comp, NotCovered(reason + VARIANT))

    def kda_recurrence(self, call: Call) -> dict[str, torch.Tensor]:
        t = call.tensors
        q, K = t["q"], t["q"].shape[-1]
        o, s = self.kernel(q.float() * K**0.5, t["k"], t["v"], t["retention"].float().log(), t["beta"],
                           initial_state=t["state"].float(), output_final_state=True)
        return {"o": o, "state": s}


def _fallback(name: str) -> Callable:
    from transformers.models.kimi_linear import modeling_kimi_linear

    fn = getattr(modeling_kimi_linear, name)
    return getattr(fn, "__wrapped__", fn)


def recurrent() -> KimiLinearKDA:
    return KimiLinearKDA("kimi-linear-recurrent", _fallback("recurrent_kimi_delta_attention"))


def chunk() -> KimiLinearKDA:
    return KimiLinearKDA("kimi-linear-chunk", _fallback("chunk_kimi_delta_attention"))


class KimiLinearLayers:
    """transformers 5.23's Kimi Linear layers and model (float64 copy) as the Kimi Linear variant's
    components; K3's components are `NotCovered` (`NOT_COVERED`)."""

    name = "kimi-linear"
    dtypes = ("float64", "float32")
    description = ("transformers KimiLinearDeltaAttention, KimiLinearAttention, KimiLinearMoE, KimiLinearForCausalLM "
                   "(float64 copy of modeling_kimi_linear) against the Kimi Linear variant")

    def __init__(self, source=None):
        self.source = source  # a module with transformers' classes (default: the float64 / float32 copies)
        if source is not None:
            self.dtypes = ("float64",)  # a planted copy of the float64 source
        for comp, reason in NOT_COVERED.items():
            setattr(self, comp, NotCovered(reason + VARIANT))
        self.kda_recurrence = NotCovered("see the kimi-linear-recurrent and kimi-linear-chunk adapters")

    def classes(self, dtype: torch.dtype = torch.float64):
        """transformers' classes: the float64 copy at float64, the decorator-free float32 copy
        (its own float32 computation) otherwise; a planted `source` at every dtype."""
        from difftest.adapters import kimi_linear_f64

        if self.source is not None:
            return self.source
        return kimi_linear_f64.module() if dtype == torch.float64 else kimi_linear_f64.module(float64=False)

    def build(self, call: Call, cls_name: str, *args) -> torch.nn.Module:
        """transformers' `cls_name` on the case's config, with the case's weights (hub names)."""
        from difftest.components.kimi_linear import hub_config
        from pybridge.adapter import kimi_linear_to_transformers

        src = self.classes(call.dtype)
        cfg = hf_config(checkpoint_config(call) or hub_config(call.sizes))
        m = getattr(src, cls_name)(cfg, *args).to(device=call.device, dtype=call.dtype)
        m.load_state_dict(kimi_linear_to_transformers(call.hub()))
        return m.eval()

    def kimi_linear_kda(self, call: Call) -> dict[str, torch.Tensor]:
        from difftest.components.kimi_linear import KDA_LAYER

        return {"y": self.build(call, "KimiLinearDeltaAttention", call.sizes.get("layer", KDA_LAYER))(call.tensors["xs"])}

    def kimi_linear_mla(self, call: Call) -> dict[str, torch.Tensor]:
        from difftest.components.kimi_linear import MLA_LAYER

        xs = call.tensors["xs"]
        T = xs.shape[1]
        mask = torch.full((T, T), float("-inf"), dtype=xs.dtype, device=xs.device).triu(1)[None, None]
        return {"y": self.build(call, "KimiLinearAttention", call.sizes.get("layer", MLA_LAYER))(xs, attention_mask=mask)[0]}

    def kimi_linear_moe(self, call: Call) -> dict[str, torch.Tensor]:
        return {"y": self.build(call, "KimiLinearMoE")(call.tensors["x"])}

    def kimi_linear_model(self, call: Call) -> dict[str, torch.Tensor]:
        from difftest.components.kimi_linear import TINY

        ids = call.tensors["ids"].long().clamp(0, TINY["vocab_size"] - 1)
        return {"logits": self.build(call, "KimiLinearForCausalLM")(input_ids=ids).logits}


def checkpoint_config(call: Call) -> dict | None:
    """The hub config of the checkpoint a call comes from (`difftest checkpoint`), None for the tiny one."""
    import json

    from difftest.config import TINY_CONFIG

    if call.config_path == TINY_CONFIG:
        return None
    raw = json.loads(call.config_path.read_text(encoding="utf-8"))
    return raw.get("text_config", raw)


def hf_config(hub: dict):
    """transformers' `KimiLinearConfig` of a hub config dict (eager attention and experts: the
    torch code paths)."""
    from transformers import KimiLinearConfig

    d = {**hub, "pad_token_id": None, "bos_token_id": None, "eos_token_id": None}
    return KimiLinearConfig.from_dict(d, attn_implementation="eager", experts_implementation="eager")


def layers() -> KimiLinearLayers:
    return KimiLinearLayers()
