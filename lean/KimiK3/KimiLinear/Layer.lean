module

public import KimiK3.KimiLinear.DecayGate
public import KimiK3.Sequence.Kernel

/-!
# The Kimi Linear KDA layer (k3-spec §7; transformers `KimiLinearDeltaAttention`)

transformers 5.23's `KimiLinearDeltaAttention` (`models/kimi_linear/modeling_kimi_linear.py`)
is K3's KDA layer (`KDA.layerStep`: projections, depthwise causal convolution of width
`convWidth` over the raw layer inputs, SiLU, L2 normalization with `ε = 10⁻⁶`,
`β = σ(x W_β)`, the delta-rule recurrence, per-head RMSNorm of the readout, the output
projection) except for three points, each a definition here:

* **decay gate** `g = −exp(A_log) · softplus(x W_down W_up + dt_bias)` (`KimiLinear.logDecay`,
  class `KimiLinearForgetGate`) instead of K3's `g_min σ(e^{s}(z + b))`;
* **low-rank output gate** `σ((x W_gd) W_gu)` (`g_a_proj` to width `gateRank`, then `g_b_proj`),
  multiplying the RMS-normalized readout (class `KimiLinearRMSNormGated`:
  `RMSNorm(o) · weight · σ(gate)`), instead of K3's full-rank `σ(x G)`;
* **query scale**: the kernels hard-code `q · K^{-1/2}` after the L2 norm
  (`recurrent_kimi_delta_attention`: `scale = 1 / (query.shape[-1] ** 0.5)`); here it is the
  config value `queryScale` with `defaultQueryScale K = 1/√K` (k3-spec §7 "KDA query scale").

The hub tensors: `q_proj, k_proj, v_proj` (`queryProj, keyProj, valueProj`), `conv1d`
(`queryConv, keyConv, valueConv`, split of the fused `3·H·K` channels), `f_a_proj, f_b_proj`
(`decayDown, decayUp`), `dt_bias` (`decayBias`), `A_log` (`decayLogRate`), `b_proj`
(`betaProj`), `g_a_proj, g_b_proj` (`gateDown, gateUp`), `o_norm.weight` (`outNormScale`),
`o_proj` (`outputProj`); `normEps` is `rms_norm_eps`. Theorems relating this layer to K3's:
`KimiLinear/LayerFacts.lean`.
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

/-- The dimensions of a Kimi Linear KDA layer: K3's `KDA.LayerDims` plus the rank of the
low-rank output gate (transformers: `g_a_proj` has width `linear_head_dim`, as `f_a_proj`). -/
structure LayerDims extends KDA.LayerDims where
  /-- Rank of the low-rank output gate (`g_a_proj` output width). -/
  gateRank : Nat

/-- The parameters of a Kimi Linear KDA layer, `[in, out]` layout (k3-spec §7; transformers
`KimiLinearDeltaAttention.__init__` and `KimiLinearForgetGate.__init__`). -/
structure LayerParams (α : Type) (d : LayerDims) where
  /-- Query projection `[modelDim, heads, keyDim]` (`q_proj`). -/
  queryProj : Tensor α [d.modelDim, d.heads, d.keyDim]
  /-- Key projection `[modelDim, heads, keyDim]` (`k_proj`). -/
  keyProj : Tensor α [d.modelDim, d.heads, d.keyDim]
  /-- Value projection `[modelDim, heads, valueDim]` (`v_proj`). -/
  valueProj : Tensor α [d.modelDim, d.heads, d.valueDim]
  /-- Depthwise causal convolution of the queries, oldest tap first (`conv1d`, query part). -/
  queryConv : Tensor α [d.convWidth, d.heads, d.keyDim]
  /-- Depthwise causal convolution of the keys (`conv1d`, key part). -/
  keyConv : Tensor α [d.convWidth, d.heads, d.keyDim]
  /-- Depthwise causal convolution of the values (`conv1d`, value part). -/
  valueConv : Tensor α [d.convWidth, d.heads, d.valueDim]
  /-- Decay logit, down part `[modelDim, decayRank]` (`f_a_proj`). -/
  decayDown : Tensor α [d.modelDim, d.decayRank]
  /-- Decay logit, up part `[decayRank, heads, keyDim]` (`f_b_proj`). -/
  decayUp : Tensor α [d.decayRank, d.heads, d.keyDim]
  /-- Decay logit bias `[heads, keyDim]` (`dt_bias`, head-major). -/
  decayBias : Tensor α [d.heads, d.keyDim]
  /-- The log decay rate `A_log`, one per head: `g = −exp(A_log) softplus(z + dt_bias)`. -/
  decayLogRate : Tensor α [d.heads]
  /-- Write-strength projection `[modelDim, heads]` (`b_proj`): `β = σ(x W_β)`. -/
  betaProj : Tensor α [d.modelDim, d.heads]
  /-- Output gate, down part `[modelDim, gateRank]` (`g_a_proj`). -/
  gateDown : Tensor α [d.modelDim, d.gateRank]
  /-- Output gate, up part `[gateRank, heads, valueDim]` (`g_b_proj`). -/
  gateUp : Tensor α [d.gateRank, d.heads, d.valueDim]
  /-- Gain of the per-head output RMSNorm `[valueDim]` (`o_norm.weight`). -/
  outNormScale : Tensor α [d.valueDim]
  /-- Output projection `[heads, valueDim, modelDim]` (`o_proj`). -/
  outputProj : Tensor α [d.heads, d.valueDim, d.modelDim]
  /-- The output RMSNorm ε (`rms_norm_eps`). -/
  normEps : α
  /-- The query scale applied after the L2 norm (transformers and fla: `K^{-1/2}`,
  `defaultQueryScale`). -/
  queryScale : α

variable {α : Type} [Scalar α] {d : LayerDims}

/-- The query scale Kimi Linear's kernels hard-code, `1/√keyDim` (k3-spec §7 "KDA query
scale"; transformers `recurrent_kimi_delta_attention`, `scale = 1 / (query.shape[-1] ** 0.5)`). -/
@[macro_inline] def defaultQueryScale (keyDim : Nat) : α := 1 / Scalar.sqrt (keyDim : α)

/-- The full-rank gate weight of the low-rank gate, `G[m, h, c] = Σ_r W_gd[m, r] W_gu[r, h, c]`
(k3-spec §7: the product of `g_a_proj` and `g_b_proj`). -/
@[macro_inline] def lowRankGateWeight (p : LayerParams α d) : Tensor α [d.modelDim, d.heads, d.valueDim] :=
  fun m h c => finSum d.gateRank (fun r => p.gateDown m r * p.gateUp r h c)

/-- The K3 layer parameters sharing every tensor of `p`, with `A_log` as K3's decay log-scale
and the low-rank gate multiplied out into K3's full-rank gate weight (k3-spec §7). -/
@[macro_inline] def LayerParams.toK3 (p : LayerParams α d) : KDA.LayerParams α d.toLayerDims where
  queryProj := p.queryProj
  keyProj := p.keyProj
  valueProj := p.valueProj
  queryConv := p.queryConv
  keyConv := p.keyConv
  valueConv := p.valueConv
  decayDown := p.decayDown
  decayUp := p.decayUp
  decayBias := p.decayBias
  decayLogScale := p.decayLogRate
  betaProj := p.betaProj
  gateWeight := lowRankGateWeight p
  outNormScale := p.outNormScale
  outputProj := p.outputProj
  normEps := p.normEps
  queryScale := p.queryScale

/-- The prepared KDA inputs of head `h` for token `x` with the updated window (k3-spec §7;
transformers `KimiLinearDeltaAttention.forward`): as K3's `KDA.prepare` — projection and
depthwise convolution, SiLU, L2 normalization (`ε = l2Eps`), the query times `queryScale`,
`β = σ(x W_β)` — but with the Kimi Linear retention
`exp(−exp(A_log[h]) softplus(Σ_r (x W_down)[r] W_up[r, h, i] + dt_bias[h, i]))`. -/
@[macro_inline] def prepare (p : LayerParams α d) (l2Eps : α)
    (window : Tensor α [d.convWidth, d.modelDim]) (x : Tensor α [d.modelDim]) (h : Fin d.heads) :
    KDA.Input α d.keyDim d.valueDim :=
  let q := Seq.memo2 (KDA.projectConv window p.queryProj p.queryConv)
  let k := Seq.memo2 (KDA.projectConv window p.keyProj p.keyConv)
  let v := Seq.memo2 (KDA.projectConv window p.valueProj p.valueConv)
  let low := Seq.memoFn (Seq.vecMatMul x p.decayDown)
  let qn := Seq.memoFn (Seq.l2Normalize l2Eps (fun i => Seq.silu (q h i)))
  ⟨Seq.memoFn (fun i => p.queryScale * qn i),
   Seq.memoFn (Seq.l2Normalize l2Eps (fun i => Seq.silu (k h i))),
   Seq.memoFn (fun c => Seq.silu (v h c)),
   Seq.memoFn (fun i => retention (p.decayLogRate h)
     (Seq.sum d.decayRank (fun r => low r * p.decayUp r h i) + p.decayBias h i)),
   Scalar.sigmoid (Seq.sum d.modelDim (fun m => x m * p.betaProj m h))⟩

/-- The layer output from the per-head readouts `o : [heads, valueDim]` (k3-spec §7;
transformers `KimiLinearRMSNormGated.forward` then `o_proj`):
`y[f] = Σ_h Σ_c RMSNorm(o_h)[c] · σ((x W_gd) W_gu)[h, c] · W_o[h, c, f]`. -/
@[macro_inline] def output (p : LayerParams α d) (x : Tensor α [d.modelDim])
    (o : Tensor α [d.heads, d.valueDim]) : Tensor α [d.modelDim] :=
  let a := Seq.memoFn (Seq.vecMatMul x p.gateDown)
  let g := Seq.memo2 (fun h c => Scalar.sigmoid (Seq.sum d.gateRank (fun r => a r * p.gateUp r h c)))
  let n := Seq.memo2 (fun h => Seq.rmsNorm p.normEps (o h) p.outNormScale)
  fun f => Seq.sum d.heads (fun h => Seq.sum d.valueDim (fun c => n h c * g h c * p.outputProj h c f))

/-- **One token of the Kimi Linear KDA layer** (k3-spec §7; transformers
`KimiLinearDeltaAttention.forward` at one token with its cache): shift the window, prepare
every head, run K3's `KDA.step` on every head (transformers' recurrence is the same:
`recurrentStep_eq_step`), then the low-rank-gated, normalized output. -/
@[macro_inline] def layerStep (p : LayerParams α d) (l2Eps : α) (s : KDA.LayerState α d.toLayerDims)
    (x : Tensor α [d.modelDim]) : KDA.LayerState α d.toLayerDims × Tensor α [d.modelDim] :=
  let window := Seq.memo2 (KDA.shiftWindow s.window x)
  let r := Seq.memoFn (fun h => KDA.step (s.heads h) (prepare p l2Eps window x h))
  (⟨window, fun h => (r h).1⟩, output p x (fun h => (r h).2))

/-- The Kimi Linear KDA layer over a sequence from the zero state (k3-spec §2.1 `forward`). -/
@[macro_inline] def layerForward (p : LayerParams α d) (l2Eps : α)
    (xs : List (Tensor α [d.modelDim])) : List (Tensor α [d.modelDim]) :=
  (CausalScan.run (layerStep p l2Eps) (KDA.LayerState.zero d.toLayerDims) xs).2

end KimiLinear

end KimiK3
