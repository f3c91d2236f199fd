module

public import KimiK3.Graph.Kernel
public import KimiK3.Graph.PackedModel
public import KimiK3.Graph.KDALayerGraphEval

/-!
# The decoder graph's environments from a model (k3-spec §3 rung 03)

The parameters, inputs and outputs of `Decoder.program` as environments built from a language
model, staged routes and packed states: `paramsEnv` (every layer's parameters for its route,
then the final ones), `inputsEnv` (the embedding row, the SiTU caps, the MLA score scale, every
layer's packed state), `outputsEnv` (the logits, every layer's new packed state and router
scores). `Decoder.program_eval` (`DecoderEval.lean`) states the program's meaning with them.
Proof-only (`noncomputable`).
-/

@[expose] public section

namespace KimiK3

namespace Decoder

variable {α : Type}

/-! ## Environments from the model -/

noncomputable section Envs

variable [Scalar α] (c : Config) (T : Nat)

/-- The all-zero environment of a context. -/
def zerosEnv : (Γ : List Shape) → Env α Γ
  | [] => .nil
  | s :: Γ => .cons (Tensor.fill 0 s) (zerosEnv Γ)

/-- A retrieval's query, unit gain and pre-norm gain. -/
def resEnv (pre part : String) (q γ : Tensor α [c.hiddenDim]) : Env α (Signature.shapes (resSig c pre part)) :=
  .cons q (.cons (fun _ => 1) (.cons γ .nil))

/-- A sequence mixer's parameters at a layer of kind `k` (zeros when the kinds differ). -/
def mixerParamsEnv (pre : String) : (k : AttentionKind) → SequenceMixer α c →
    Env α (Signature.shapes (mixerParamSig c pre k))
  | .kda, .kda p _ _ => Env.toPrefix _ (kdaSig c) (KDA.layerParamsEnv p)
  | .mla, .mla p _ => Env.toPrefix _ (mlaSig c) (GatedMLA.paramsEnv p)
  | .kda, .mla .. => zerosEnv _
  | .mla, .kda .. => zerosEnv _

/-- A channel mixer's parameters for a route: the dense expert, or the LatentMoE layer's
parameters for the route (`MoEModel.parameters`) and its full router (zeros when the kinds
differ). -/
def channelParamsEnv (pre : String) (route : Fin c.activeExperts → Fin c.numRoutedExperts) :
    (moe : Bool) → ChannelMixer α c → Env α (Signature.shapes (channelParamSig c pre moe))
  | false, .dense e => Env.toPrefix _ (denseSig c) (ExpertGraph.parameters e)
  | true, .moe layer _ => Env.appendSig _ (Env.toPrefix _ (moeSig c) (MoEModel.parameters layer route))
      (.cons layer.routerWeight (.cons layer.routerBias .nil))
  | false, .moe .. => zerosEnv _
  | true, .dense _ => zerosEnv _

/-- The parameters of (1-based) layer `n` for a route. -/
def layerParamsEnv (n : Nat) (layer : BackboneLayer α c) (route : Fin c.activeExperts → Fin c.numRoutedExperts) :
    Env α (Signature.shapes (layerParamSig c n)) :=
  Env.appendSig _ (resEnv c (layerPre n) "seq" layer.sequenceQuery layer.sequenceNormScale) <|
  Env.appendSig _ (mixerParamsEnv c (layerPre n) (c.attentionKindAt n) layer.sequence) <|
  Env.appendSig _ (resEnv c (layerPre n) "chan" layer.channelQuery layer.channelNormScale)
    (channelParamsEnv c (layerPre n) route (c.isMoE n) layer.channel)

/-- The final parameters of a model. -/
def finalEnv (model : LanguageModel α c) : Env α (Signature.shapes (finalSig c)) :=
  Env.appendSig _ (resEnv c "" "final" model.finalQuery model.finalNormScale) (.cons model.head .nil)

/-- The parameters of layers `n, …, n + k − 1` and the final ones. -/
def layersParamsEnv (model : LanguageModel α c) (routes : Nat → Fin c.activeExperts → Fin c.numRoutedExperts) :
    (n k : Nat) → List (BackboneLayer α c) → Env α (Signature.shapes (layersParamSig c n k))
  | _, 0, _ => finalEnv c model
  | n, k + 1, layer :: layers =>
    Env.appendSig _ (layerParamsEnv c n layer (routes n)) (layersParamsEnv model routes (n + 1) k layers)
  | _, _ + 1, [] => zerosEnv _

/-- **The graph's parameters from a model and staged routes** (`routes n`: the route of the
1-based layer `n`). -/
def paramsEnv (model : LanguageModel α c) (routes : Nat → Fin c.activeExperts → Fin c.numRoutedExperts) :
    Env α (Signature.shapes (paramSig c)) :=
  layersParamsEnv c model routes 1 c.numLayers model.layers

/-- The graph's inputs of a KDA layer state: window rows `1, …, W − 1` and the head states. -/
def kdaStateEnv (pre : String) (s : KDA.LayerState α c.kdaDims) :
    Env α (Signature.shapes (stateSig c T pre .kda)) :=
  Env.appendSig _ (Env.ofRep (c.kdaConvWidth - 1) (fun j => s.window ⟨j.val + 1, by show j.val + 1 < c.kdaConvWidth; omega⟩)) (.cons s.heads .nil)

/-- A layer's packed state as graph inputs at a layer of kind `k` (a state of the other kind
is the zero state, as `SequenceMixer.packedStep` reads it). -/
def stateEnv (pre : String) : (k : AttentionKind) → PackedState α c T → Env α (Signature.shapes (stateSig c T pre k))
  | .kda, .kda s => kdaStateEnv c T pre s
  | .kda, .mla .. => kdaStateEnv c T pre (KDA.LayerState.zero c.kdaDims)
  | .mla, .mla lat sh => .cons lat (.cons sh .nil)
  | .mla, .kda _ => .cons (fun _ _ => 0) (.cons (fun _ _ => 0) .nil)

/-- The packed states of layers `n, …, n + k − 1`. -/
def layersStateEnv : (n k : Nat) → List (PackedState α c T) → Env α (Signature.shapes (layersStateSig c T n k))
  | _, 0, _ => .nil
  | n, k + 1, s :: states => Env.appendSig _ (stateEnv c T (layerPre n) (c.attentionKindAt n) s)
      (layersStateEnv (n + 1) k states)
  | _, _ + 1, [] => zerosEnv _

/-- **The graph's inputs**: the embedding row, the configuration's SiTU caps and MLA score
scale, every layer's packed state. -/
def inputsEnv (states : List (PackedState α c T)) (x : Tensor α [c.hiddenDim]) :
    Env α (Signature.shapes (inputSig c T)) :=
  Env.appendSig _ (.cons x (.cons (show Tensor α [] from (c.gateCap : α))
    (.cons (show Tensor α [] from (c.upCap : α)) (.cons (show Tensor α [] from c.scoreScale) .nil))))
    (layersStateEnv c T 1 c.numLayers states)

/-- A layer's new packed state as graph outputs at a layer of kind `k`. -/
def mixerOutEnv (pre : String) : (k : AttentionKind) → PackedState α c (T + 1) →
    Env α (Signature.shapes (mixerOutSig c T pre k))
  | .kda, .kda s => Env.appendSig _ (Env.ofRep (c.kdaConvWidth - 1) (fun j => s.window ⟨j.val + 1, by show j.val + 1 < c.kdaConvWidth; omega⟩))
      (.cons s.heads .nil)
  | .mla, .mla lat sh => .cons lat (.cons sh .nil)
  | .kda, .mla .. => zerosEnv _
  | .mla, .kda _ => zerosEnv _

/-- A layer's router scores as graph outputs (nothing for a dense layer). -/
def channelOutEnv (pre : String) : (moe : Bool) → Tensor α [c.numRoutedExperts] →
    Env α (Signature.shapes (channelOutSig c pre moe))
  | false, _ => .nil
  | true, scores => .cons scores .nil

/-- The outputs of (1-based) layer `n`. -/
def layerOutEnv (n : Nat) (o : PackedState α c (T + 1) × Tensor α [c.numRoutedExperts]) :
    Env α (Signature.shapes (layerOutSig c T n)) :=
  Env.appendSig _ (mixerOutEnv c T (layerPre n) (c.attentionKindAt n) o.1) (channelOutEnv c (layerPre n) (c.isMoE n) o.2)

/-- The outputs of layers `n, …, n + k − 1`. -/
def layersOutEnv : (n k : Nat) → List (PackedState α c (T + 1) × Tensor α [c.numRoutedExperts]) →
    Env α (Signature.shapes (layersOutSig c T n k))
  | _, 0, _ => .nil
  | n, k + 1, o :: os => Env.appendSig _ (layerOutEnv c T n o) (layersOutEnv (n + 1) k os)
  | _, _ + 1, [] => zerosEnv _

/-- **The graph's outputs of a packed token step**: the logits, then every layer's new packed
state and router scores. -/
def outputsEnv (r : List (PackedState α c (T + 1) × Tensor α [c.numRoutedExperts]) × Tensor α [c.vocabSize]) :
    Env α (Signature.shapes (outputSig c T)) :=
  .cons r.2 (layersOutEnv c T 1 c.numLayers r.1)

end Envs

end Decoder

end KimiK3
