module

public import KimiK3.Model.Config
public import KimiK3.Model.Combinators
public import KimiK3.Sequence.CausalScan
public import KimiK3.Depth.Kernel
public import KimiK3.Channel.LatentMoE

/-!
# The backbone layer (k3-spec §2.1, §2.5; report Fig. 2, §§2.1–2.3)

A layer of K3 at one token: an AttnRes retrieval feeds the sequence mixer (KDA or Gated MLA,
with its causal state), a second retrieval, which already sees the sequence output in the
partial block, feeds the channel mixer (dense SiTU FFN or Stable LatentMoE), and the layer
commits once to the depth state. There is **no ordinary residual addition**: a layer's outputs
reach later layers only through the depth state (`BlockState`, `Depth/Kernel.lean`).

```
seqIn   = RMSNorm_ε(retrieve_ε' w_seq depth) ⊙ γ_seq
(s', seqOut) = sequence.step s seqIn
chanIn  = RMSNorm_ε(retrieveAfterSequence_ε' w_chan depth seqOut) ⊙ γ_chan
chanOut = channel chanIn
depth'  = finishLayer B depth seqOut chanOut
```
(`pybridge/model.py` `DecoderLayer.forward`: its `input_layernorm`/`post_attention_layernorm`
weights are `γ_seq`/`γ_chan`, the retrieval queries are the products of the `*_res_norm`
weights and the `*_res_proj` rows.)

Also here: the layer-major form of one layer over a whole sequence (`forwardSequence`), which
`Streaming.lean` proves equal to the token-by-token scan.

Executable definitions are `@[macro_inline]`, loops go through `ModelList` (`Combinators.lean`) and
`CausalScan.run` (why: `Core/README.md`, "Toolchain constraints").
-/

@[expose] public section

namespace KimiK3

namespace Config

/-- The KDA layer dimensions of a configuration. -/
def kdaDims (c : Config) : KDA.LayerDims :=
  ⟨c.hiddenDim, c.kdaHeads, c.kdaKeyDim, c.kdaValueDim, c.kdaConvWidth, c.kdaDecayRank⟩

/-- The Gated MLA dimensions of a configuration. -/
def mlaDims (c : Config) : GatedMLA.Dims :=
  ⟨c.hiddenDim, c.mlaHeads, c.queryLatentDim, c.kvLatentDim, c.contentKeyDim, c.sharedKeyDim,
   c.valueDim⟩

end Config

/-- **A sequence mixer** (k3-spec §2.1): a KDA layer with its log-decay floor `g_min` and L2
normalization ε, or a Gated MLA layer with its score scale. -/
inductive SequenceMixer (α : Type) (c : Config) where
  /-- Kimi Delta Attention (report §2.1.1). -/
  | kda (params : KDA.LayerParams α c.kdaDims) (logFloor l2Eps : α)
  /-- Gated MLA (report §2.1.2, Eq. 7). -/
  | mla (params : GatedMLA.Params α c.mlaDims) (scoreScale : α)

/-- **The causal state of a sequence mixer** (k3-spec §2.1): the KDA layer state (convolution
window and per-head recurrent states) or the MLA latent cache. -/
inductive MixerState (α : Type) (c : Config) where
  /-- The state of a KDA layer. -/
  | kda (state : KDA.LayerState α c.kdaDims)
  /-- The cache of a Gated MLA layer, oldest entry first. -/
  | mla (cache : GatedMLA.Cache α c.mlaDims)

namespace SequenceMixer

variable {α : Type} [Scalar α] {c : Config}

/-- The state before the first token: zero KDA state, empty MLA cache (k3-spec §2.1). -/
@[macro_inline] def initialState : SequenceMixer α c → MixerState α c
  | .kda .. => .kda (KDA.LayerState.zero c.kdaDims)
  | .mla .. => .mla []

/-- **One token of a sequence mixer** (k3-spec §2.1): KDA → `KDA.layerStep`, MLA →
`GatedMLA.step`. A state of the other kind (never produced from `initialState`) is read as the
initial state. -/
@[macro_inline] def step (m : SequenceMixer α c) (s : MixerState α c) (x : Tensor α [c.hiddenDim]) :
    MixerState α c × Tensor α [c.hiddenDim] :=
  match m with
  | .kda p logFloor l2Eps =>
    let st := match s with
      | .kda st => st
      | .mla _ => KDA.LayerState.zero c.kdaDims
    let r := KDA.layerStep p logFloor l2Eps st x
    (.kda r.1, r.2)
  | .mla p scoreScale =>
    let cache := match s with
      | .kda _ => []
      | .mla cache => cache
    let r := GatedMLA.step p scoreScale cache x
    (.mla r.1, r.2)

/-- **The mixer over a whole sequence**, token by token from the initial state (k3-spec §2.1). -/
@[macro_inline] def forward (m : SequenceMixer α c) (xs : List (Tensor α [c.hiddenDim])) :
    List (Tensor α [c.hiddenDim]) :=
  (CausalScan.run m.step m.initialState xs).2

/-- **The full-sequence form** of a mixer: KDA's `layerForward`, MLA's masked full-sequence
attention `maskedForward` (all cache entries at once, causal mask). Equal to `forward`
(`forwardFull_eq_forward`, `Streaming.lean`). -/
@[macro_inline] def forwardFull (m : SequenceMixer α c) (xs : List (Tensor α [c.hiddenDim])) :
    List (Tensor α [c.hiddenDim]) :=
  match m with
  | .kda p logFloor l2Eps => KDA.layerForward p logFloor l2Eps xs
  | .mla p scoreScale => GatedMLA.maskedForward p scoreScale xs

/-- A sequence mixer has one output per input (k3-spec §2.1). -/
theorem forward_length (m : SequenceMixer α c) (xs : List (Tensor α [c.hiddenDim])) :
    (m.forward xs).length = xs.length :=
  CausalScan.outputs_length m.step m.initialState xs

end SequenceMixer

/-- **A channel mixer** (k3-spec §2.6–2.7): the dense SiTU expert FFN
(`intermediate_size` hidden) or a Stable LatentMoE layer with its own top-`k` route
(`k = num_experts_per_token`, which the constructor requires to be at most the routed experts). -/
inductive ChannelMixer (α : Type) (c : Config) where
  /-- The dense FFN: one SiTU expert at model width. -/
  | dense (expert : Expert α c.hiddenDim c.denseHiddenDim c.hiddenDim)
  /-- Stable LatentMoE: shared experts at model width, routed experts at the latent width. -/
  | moe (layer : StableLatentMoE α c.hiddenDim c.latentDim c.expertHiddenDim c.expertHiddenDim
      c.numSharedExperts c.numRoutedExperts) (hActive : c.activeExperts ≤ c.numRoutedExperts)

namespace ChannelMixer

variable {α : Type} [Scalar α] {c : Config}

/-- The channel mixer on one token, with the SiTU caps of the configuration
(`activation_situ_beta`, `activation_situ_linear_beta`). The MoE case is
`StableLatentMoE.forwardAuto` with the route, the shared output, the routed aggregate and the
up-projected path memoized (equal to it: `ChannelMixer.forward_moe`, `Streaming.lean`), so
that each is computed once per token. -/
@[macro_inline] def forward (m : ChannelMixer α c) (x : Tensor α [c.hiddenDim]) : Tensor α [c.hiddenDim] :=
  match m with
  | .dense expert => expert.forward (c.gateCap : α) (c.upCap : α) x
  | .moe layer hActive =>
    let route := Seq.memoFn (layer.route (k := c.activeExperts) hActive x)
    let shared := Seq.memoFn (layer.sharedOutput (c.gateCap : α) (c.upCap : α) x)
    let routed := Seq.memoFn (layer.routedAggregate route (c.gateCap : α) (c.upCap : α) x)
    let up := Seq.memoFn (Tensor.vecMatMul (Tensor.rmsNormVec layer.normEps routed layer.routedNormScale)
      layer.upProject)
    fun k => shared k + up k

end ChannelMixer

/-- **A backbone layer** (k3-spec §2.5): sequence and channel mixer, the two AttnRes retrieval
queries, the gains of the two input RMSNorms, and two stabilizers: `ε'` of the retrievals' score
norms (config `attn_res_norm_eps`) and `ε` of the two pre-norms (config `rms_norm_eps`). -/
structure BackboneLayer (α : Type) (c : Config) where
  /-- The sequence mixer (KDA or MLA, by `Config.attentionKindAt`). -/
  sequence : SequenceMixer α c
  /-- The channel mixer (dense or MoE, by `Config.isMoE`). -/
  channel : ChannelMixer α c
  /-- The retrieval query `w_seq` of the sequence mixer's input. -/
  sequenceQuery : Tensor α [c.hiddenDim]
  /-- The retrieval query `w_chan` of the channel mixer's input. -/
  channelQuery : Tensor α [c.hiddenDim]
  /-- The RMSNorm gain of the sequence mixer's input. -/
  sequenceNormScale : Tensor α [c.hiddenDim]
  /-- The RMSNorm gain of the channel mixer's input. -/
  channelNormScale : Tensor α [c.hiddenDim]
  /-- The stabilizer `ε'` of the two retrievals' unit-gain score norms. -/
  retrievalEps : α
  /-- The stabilizer `ε` of the two pre-norms (`input_layernorm`, `post_attention_layernorm`). -/
  normEps : α

/-- The depth state with its partial sum memoized (equal to it); keeps the per-coordinate cost
of the partial sum constant from layer to layer. -/
@[macro_inline] def BlockState.memoPartial {α : Type} {d : Nat} (s : BlockState α d) : BlockState α d :=
  ⟨s.embedding, s.blocks, Seq.memoFn s.partialSum, s.count⟩

namespace BackboneLayer

variable {α : Type} [Scalar α] {c : Config}

/-- The sequence mixer's input `RMSNorm_ε(retrieve_ε' w_seq depth) ⊙ γ_seq` (k3-spec §2.5). -/
@[macro_inline] def sequenceInput (layer : BackboneLayer α c) (depth : BlockState α c.hiddenDim) :
    Tensor α [c.hiddenDim] :=
  Seq.memoFn (Seq.rmsNorm layer.normEps (depth.retrieve layer.retrievalEps layer.sequenceQuery)
    layer.sequenceNormScale)

/-- The rest of the layer once the sequence output is known (k3-spec §2.5): the channel input
`RMSNorm_ε(retrieveAfterSequence_ε' w_chan depth seqOut) ⊙ γ_chan`, the channel output, and the
single commit `finishLayer B depth seqOut chanOut`. -/
@[macro_inline] def commit (layer : BackboneLayer α c) (depth : BlockState α c.hiddenDim)
    (seqOut : Tensor α [c.hiddenDim]) : BlockState α c.hiddenDim :=
  let seqOut := Seq.memoFn seqOut
  let chanIn := Seq.memoFn (Seq.rmsNorm layer.normEps
    (depth.retrieveAfterSequence layer.retrievalEps layer.channelQuery seqOut) layer.channelNormScale)
  let chanOut := Seq.memoFn (layer.channel.forward chanIn)
  (depth.finishLayer c.attnResBlockSize seqOut chanOut).memoPartial

/-- **One layer at one token** (k3-spec §2.5 `BackboneLayer.forwardToken`): retrieve, run the
sequence mixer one step, retrieve again with the sequence output in the partial block, run the
channel mixer, commit once. Returns the mixer's new state and the new depth state. -/
@[macro_inline] def forwardToken (layer : BackboneLayer α c) (s : MixerState α c)
    (depth : BlockState α c.hiddenDim) : MixerState α c × BlockState α c.hiddenDim :=
  let r := layer.sequence.step s (layer.sequenceInput depth)
  (r.1, layer.commit depth r.2)

/-- **One layer over a whole sequence, layer-major**: every token's sequence input, the
sequence mixer over all of them at once (`seqForward`, e.g. `SequenceMixer.forwardFull`), then
every token's commit. -/
@[macro_inline] def forwardSequence (layer : BackboneLayer α c)
    (seqForward : SequenceMixer α c → List (Tensor α [c.hiddenDim]) → List (Tensor α [c.hiddenDim]))
    (depths : List (BlockState α c.hiddenDim)) : List (BlockState α c.hiddenDim) :=
  ModelList.zipWith layer.commit depths
    (seqForward layer.sequence (ModelList.map layer.sequenceInput depths))

/-- **The depth invariant is preserved** (k3-spec §2.5 `forwardToken_depth_wf`): if the
partial block is below the block size before the layer, it is after. -/
theorem forwardToken_depth_wf (layer : BackboneLayer α c) (s : MixerState α c)
    (depth : BlockState α c.hiddenDim) (h : depth.WF c.attnResBlockSize) :
    (layer.forwardToken s depth).2.WF c.attnResBlockSize := by
  simp only [forwardToken, commit, BlockState.memoPartial, BlockState.finishLayer, BlockState.WF] at h ⊢
  split <;> simp <;> omega

end BackboneLayer

end KimiK3
