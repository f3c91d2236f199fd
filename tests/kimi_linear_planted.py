"""transformers' Kimi Linear (the float64 copy, `difftest.adapters.kimi_linear_f64`) with one
planted bug each, as adapters of the Kimi Linear variant (tests/test_kimi_linear*.py). Importable
by spec (`kimi_linear_planted:NAME`) so a failure's reproducer replays."""

from __future__ import annotations

from difftest.adapters import kimi_linear, kimi_linear_f64

#: transformers' prefill conv reads one token ahead: output t uses x_{t-W+2} .. x_{t+1}
SHIFTED_CONV = (("    )[:, :, :seq_len]\n", "    )[:, :, 1 : seq_len + 1]\n"),)
#: the forget gate without dt_bias: g = -exp(A_log) softplus(f)
NO_DT_BIAS = (("(forget_gate.double() + self.dt_bias.double().view(1, 1, -1))", "(forget_gate.double())"),)
#: the router without its routed scaling factor
NO_ROUTED_SCALING = (("topk_weights = topk_weights * self.routed_scaling_factor", "topk_weights = topk_weights"),)


def _planted(name: str, edits: tuple) -> kimi_linear.KimiLinearLayers:
    layers = kimi_linear.KimiLinearLayers(kimi_linear_f64.module(edits))
    layers.name = name
    return layers


def kimi_shifted_conv() -> kimi_linear.KimiLinearLayers:
    return _planted("kimi-linear-shifted-conv", SHIFTED_CONV)


def kimi_no_dt_bias() -> kimi_linear.KimiLinearLayers:
    return _planted("kimi-linear-no-dt-bias", NO_DT_BIAS)


def kimi_no_routed_scaling() -> kimi_linear.KimiLinearLayers:
    return _planted("kimi-linear-no-routed-scaling", NO_ROUTED_SCALING)


def kimi_shifted_conv_f32() -> kimi_linear.KimiLinearLayers:
    """The shifted conv in transformers' own float32 code (decorators removed only), at float32."""
    layers = kimi_linear.KimiLinearLayers(kimi_linear_f64.module(SHIFTED_CONV, float64=False))
    layers.name, layers.dtypes = "kimi-linear-shifted-conv-f32", ("float32",)
    return layers
