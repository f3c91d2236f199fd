module

public import KimiK3.Model.LanguageModel

/-!
# The packed token step of the language model (k3-spec §2.5, §4 rungs 03–04)

The graph of the whole token step (`Decoder.program`) works on **packed** causal states: a KDA
layer's own state tensors, and an MLA cache of `T` past tokens as two `[T, ·]` tensors (the
graph has fixed shapes). Top-k is not a graph node: the route of every MoE layer is **staged**,
given from outside. This file is the reference for that graph:

* `PackedState α c T`: one layer's packed state;
* `SequenceMixer.packedStep` (KDA `layerStep`, MLA `stepPacked`), `ChannelMixer.forwardRouted`
  (dense expert, or LatentMoE `forward` on the staged route), `ChannelMixer.routerScores` (the
  bias-adjusted scores a runtime checks its route against), `BackboneLayer.packedStep`;
* `LanguageModel.packedLayers`, **`LanguageModel.packedStep`**: one token through every layer,
  then the head;
* `LanguageModel.Conforms`: a model whose layers follow the configuration's schedule
  (`Config.attentionKindAt`, `Config.isMoE`) and whose real hyperparameters are the
  configuration's (every ε, the scales, `g_min`, the routed scaling factor).

The packed step is related to the public `LanguageModel.step` (list caches, own routing) in
`DecoderPublic.lean` and `Routes.lean`.
-/

@[expose] public section

namespace KimiK3

/-- **The packed causal state of one layer** after `T` tokens: the KDA layer state, or the MLA
cache as its latent rows `[T, kvLatentDim]` and shared-key rows `[T, sharedKeyDim]`. -/
inductive PackedState (α : Type) (c : Config) (T : Nat) where
  /-- A KDA layer's window and head states. -/
  | kda (state : KDA.LayerState α c.kdaDims)
  /-- An MLA layer's packed cache. -/
  | mla (latent : Tensor α [T, c.kvLatentDim]) (sharedKey : Tensor α [T, c.sharedKeyDim])

noncomputable section

variable {α : Type} [Scalar α] {c : Config} {T : Nat}

namespace SequenceMixer

/-- **One packed step of a sequence mixer**: KDA → `KDA.layerStep`, MLA → `GatedMLA.stepPacked`
(the cache grows to `T + 1` rows). A state of the other kind is read as the zero state. -/
def packedStep (m : SequenceMixer α c) (s : PackedState α c T) (x : Tensor α [c.hiddenDim]) :
    PackedState α c (T + 1) × Tensor α [c.hiddenDim] :=
  match m, s with
  | .kda p logFloor l2Eps, .kda st =>
    let r := KDA.layerStep p logFloor l2Eps st x
    (.kda r.1, r.2)
  | .kda p logFloor l2Eps, .mla .. =>
    let r := KDA.layerStep p logFloor l2Eps (KDA.LayerState.zero c.kdaDims) x
    (.kda r.1, r.2)
  | .mla p scoreScale, .mla lat sh =>
    let r := GatedMLA.stepPacked p scoreScale lat sh x
    (.mla r.1 r.2.1, r.2.2)
  | .mla p scoreScale, .kda _ =>
    let r := GatedMLA.stepPacked p scoreScale (fun _ _ => 0) (fun _ _ => 0) x
    (.mla r.1 r.2.1, r.2.2)

/-- **A mixer follows the schedule and the configuration** at a layer of kind `k`: the same
kind, and its real hyperparameters are the configuration's (KDA: `g_min`, the L2 ε, the
output-norm ε, the query scale; MLA: the score scale and the latent-norm ε). -/
def Conforms (c : Config) : AttentionKind → SequenceMixer α c → Prop
  | .kda, .kda p logFloor l2Eps => logFloor = c.logFloor ∧ l2Eps = c.kdaL2Eps.toScalar ∧
      p.normEps = c.kdaOutputNormEps.toScalar ∧ p.queryScale = c.queryScale
  | .mla, .mla p scoreScale => scoreScale = c.scoreScale ∧ p.normEps = c.mlaLatentNormEps.toScalar
  | _, _ => False

end SequenceMixer

namespace ChannelMixer

/-- **A channel mixer on a staged route**: the dense expert, or the LatentMoE layer's
`forward` with the given route (top-k happens outside). -/
def forwardRouted (m : ChannelMixer α c) (route : Fin c.activeExperts → Fin c.numRoutedExperts)
    (x : Tensor α [c.hiddenDim]) : Tensor α [c.hiddenDim] :=
  match m with
  | .dense expert => expert.forward (c.gateCap : α) (c.upCap : α) x
  | .moe layer _ => layer.forward route (c.gateCap : α) (c.upCap : α) x

/-- The bias-adjusted router scores `σ(x R) + b` of a LatentMoE layer (zero for a dense one):
what a runtime checks its staged route against. -/
def routerScores (m : ChannelMixer α c) (x : Tensor α [c.hiddenDim]) : Tensor α [c.numRoutedExperts] :=
  match m with
  | .dense _ => fun _ => 0
  | .moe layer _ => layer.adjustedRouterScores x

/-- **A channel mixer follows the schedule and the configuration**: dense where the schedule
has a dense layer; LatentMoE where it has one, with the configuration's routed-norm ε and
routed scaling factor. -/
def Conforms (c : Config) : Bool → ChannelMixer α c → Prop
  | false, .dense _ => True
  | true, .moe layer _ => layer.normEps = c.moeNormEps.toScalar ∧ layer.routedScale = c.routedScale.toScalar
  | _, _ => False

end ChannelMixer

namespace BackboneLayer

/-- The sequence mixer's input `RMSNorm_ε(retrieve_ε' w_seq depth) ⊙ γ_seq` (`sequenceInput`
without its memoization). -/
def seqInput (layer : BackboneLayer α c) (depth : BlockState α c.hiddenDim) : Tensor α [c.hiddenDim] :=
  Seq.rmsNorm layer.normEps (depth.retrieve layer.retrievalEps layer.sequenceQuery) layer.sequenceNormScale

/-- The channel mixer's input `RMSNorm_ε(retrieveAfterSequence_ε' w_chan depth seqOut) ⊙ γ_chan`. -/
def chanInput (layer : BackboneLayer α c) (depth : BlockState α c.hiddenDim) (seqOut : Tensor α [c.hiddenDim]) :
    Tensor α [c.hiddenDim] :=
  Seq.rmsNorm layer.normEps (depth.retrieveAfterSequence layer.retrievalEps layer.channelQuery seqOut)
    layer.channelNormScale

/-- **One packed layer step on a staged route** (k3-spec §2.5 with packed states): the sequence
input from the depth state, the packed mixer step, the channel input (retrieval with the
sequence output in the partial block), the channel mixer on the staged route, its router
scores, and the commit. Returns the new packed state, the router scores and the new depth
state. -/
def packedStep (layer : BackboneLayer α c) (route : Fin c.activeExperts → Fin c.numRoutedExperts)
    (s : PackedState α c T) (depth : BlockState α c.hiddenDim) :
    PackedState α c (T + 1) × Tensor α [c.numRoutedExperts] × BlockState α c.hiddenDim :=
  let r := layer.sequence.packedStep s (layer.seqInput depth)
  let chanIn := layer.chanInput depth r.2
  (r.1, layer.channel.routerScores chanIn,
    depth.finishLayer c.attnResBlockSize r.2 (layer.channel.forwardRouted route chanIn))

/-- **A layer follows the configuration** at (1-based) layer `n`: its mixers follow the
schedule and the configuration, its retrieval ε is `attn_res_norm_eps` and its pre-norm ε is
`rms_norm_eps`. -/
structure Conforms (layer : BackboneLayer α c) (n : Nat) : Prop where
  /-- The sequence mixer: `attentionKindAt n`. -/
  sequence : layer.sequence.Conforms c (c.attentionKindAt n)
  /-- The channel mixer: `isMoE n`. -/
  channel : layer.channel.Conforms c (c.isMoE n)
  /-- The retrieval ε. -/
  retrievalEps : layer.retrievalEps = c.attnResEps.toScalar
  /-- The pre-norm ε. -/
  normEps : layer.normEps = c.preNormEps.toScalar

end BackboneLayer

namespace LanguageModel

/-- Layers `n, n + 1, …` follow the configuration. -/
def LayersConform : Nat → List (BackboneLayer α c) → Prop
  | _, [] => True
  | n, layer :: layers => layer.Conforms n ∧ LayersConform (n + 1) layers

/-- **A language model follows its configuration**: one layer per configured layer, each
following the schedule and the configuration (`BackboneLayer.Conforms`), and the final
retrieval and norm with the configuration's ε. -/
structure Conforms (model : LanguageModel α c) : Prop where
  /-- `num_hidden_layers` layers. -/
  length : model.layers.length = c.numLayers
  /-- Every layer follows the configuration. -/
  layers : LayersConform 1 model.layers
  /-- The final retrieval's ε. -/
  retrievalEps : model.retrievalEps = c.attnResEps.toScalar
  /-- The final norm's ε. -/
  normEps : model.normEps = c.finalNormEps.toScalar

/-- Layers `n, n + 1, …` on packed states with the staged routes `routes n` (one route per
1-based layer; dense layers ignore theirs): each layer's new packed state and router scores,
and the final depth state. -/
def packedLayers (routes : Nat → Fin c.activeExperts → Fin c.numRoutedExperts) :
    Nat → List (BackboneLayer α c) → List (PackedState α c T) → BlockState α c.hiddenDim →
    List (PackedState α c (T + 1) × Tensor α [c.numRoutedExperts]) × BlockState α c.hiddenDim
  | n, layer :: layers, s :: states, depth =>
    let r := layer.packedStep (routes n) s depth
    let rest := packedLayers routes (n + 1) layers states r.2.2
    ((r.1, r.2.1) :: rest.1, rest.2)
  | _, _, _, depth => ([], depth)

/-- **The packed token step of the language model with staged routes** (k3-spec §2.5, §3 rung
03): from the embedding row `x`, every layer's packed step on its packed state with its staged
route, then the head. Returns every layer's new packed state and router scores, and the
logits. -/
def packedStep (model : LanguageModel α c) (routes : Nat → Fin c.activeExperts → Fin c.numRoutedExperts)
    (states : List (PackedState α c T)) (x : Tensor α [c.hiddenDim]) :
    List (PackedState α c (T + 1) × Tensor α [c.numRoutedExperts]) × Tensor α [c.vocabSize] :=
  let r := packedLayers routes 1 model.layers states (BlockState.initial x)
  (r.1, model.readout r.2)

end LanguageModel

end

end KimiK3
