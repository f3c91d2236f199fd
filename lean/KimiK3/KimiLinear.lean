module

public import KimiK3.KimiLinear.DecayGate
public import KimiK3.KimiLinear.Recurrence
public import KimiK3.KimiLinear.Layer
public import KimiK3.KimiLinear.LayerFacts
public import KimiK3.KimiLinear.MLA
public import KimiK3.KimiLinear.MoE
public import KimiK3.KimiLinear.Decoder
public import KimiK3.KimiLinear.MLAMasked
public import KimiK3.KimiLinear.Prefill
public import KimiK3.KimiLinear.Config
public import KimiK3.KimiLinear.Build
public import KimiK3.KimiLinear.Examples
public import KimiK3.KimiLinear.SwiGLUGraph
public import KimiK3.KimiLinear.DecayGateGraph

/-!
# The Kimi Linear variant (k3-spec §7, "Kimi Linear in transformers 5.23")

Aggregator of `KimiK3/KimiLinear/`: the architecture of transformers' Kimi Linear where it
differs from K3 — the softplus decay gate, the low-rank output gate, the fixed query scale, MLA
without an output gate and the SwiGLU MoE with a routed scaling factor — stated against the K3
definitions it shares — the decoder and whole model, their prefill (layer-major, masked MLA)
proved equal to the token-by-token run (`Model.run_eq_prefill`), and the configuration with its
layer schedule (`KimiLinear.Config`, `kimiLinear48B`, `Config.model`). See `KimiLinear/README.md`.
-/
