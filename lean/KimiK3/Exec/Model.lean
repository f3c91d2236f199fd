module

public import KimiK3.Exec.Channel
public import KimiK3.Exec.KDA
public import KimiK3.Exec.MLA
public import KimiK3.Exec.Depth
public import KimiK3.Model.Streaming

/-!
# The executable backbone and language model equal the reference (k3-spec §2.5)

`Config.execDims c` are the widths the executable model reads from a configuration `c`; the
array-backed mixers, layers and model at `c.execDims` convert (`toSpec`) to the reference ones
at `c`. For every `[Scalar α]` and every configuration:

* `Exec.SequenceMixer.initialState_eq`, **`SequenceMixer.step_eq`** (KDA `layerStep` or MLA
  `step`), **`ChannelMixer.forward_eq`** (dense expert or `forwardAuto`);
* `Exec.BlockState.memoPartial_eq`, `Exec.BackboneLayer.sequenceInput_eq`, `commit_eq`,
  **`forwardToken_eq`** (new mixer state and depth state of `BackboneLayer.forwardToken`);
* `Exec.LanguageModel.initialState_eq`, `embed_eq`, `readout_eq`, `layersToken_eq`,
  `stepEmbedded_eq`, **`step_eq`** (new state and logits of `LanguageModel.step`) and
  **`run_eq`** (`LanguageModel.run`: the final state and the logits of every token).
-/

@[expose] public section

namespace KimiK3

/-- The widths and counts of a configuration that the executable model reads. -/
def Config.execDims (c : Config) : Exec.ModelDims :=
  ⟨c.vocabSize, c.hiddenDim, c.attnResBlockSize, c.mlaHeads, c.queryLatentDim, c.kvLatentDim,
   c.contentKeyDim, c.sharedKeyDim, c.valueDim, c.kdaHeads, c.kdaKeyDim, c.kdaValueDim,
   c.kdaConvWidth, c.kdaDecayRank, c.denseHiddenDim, c.latentDim, c.expertHiddenDim,
   c.numSharedExperts, c.numRoutedExperts, c.activeExperts, c.gateCap, c.upCap⟩

namespace Exec

variable {α : Type} [Scalar α] {c : Config}

/-! ## Mixers -/

/-- The reference sequence mixer of an array-backed one. -/
noncomputable def SequenceMixer.toSpec : SequenceMixer α c.execDims → KimiK3.SequenceMixer α c
  | .kda p logFloor l2Eps => .kda p.toSpec logFloor l2Eps
  | .mla p scoreScale => .mla p.toSpec scoreScale

/-- The reference mixer state of an array-backed one. -/
noncomputable def MixerState.toSpec : MixerState α c.execDims → KimiK3.MixerState α c
  | .kda s => .kda s.toSpec
  | .mla cache => .mla (GatedMLA.cacheToSpec cache)

/-- The reference channel mixer of an array-backed one. -/
noncomputable def ChannelMixer.toSpec : ChannelMixer α c.execDims → KimiK3.ChannelMixer α c
  | .dense e => .dense e.toSpec
  | .moe layer hActive => .moe layer.toSpec hActive

theorem SequenceMixer.initialState_eq (mixer : SequenceMixer α c.execDims) :
    mixer.initialState.toSpec = mixer.toSpec.initialState := by
  cases mixer with
  | kda p logFloor l2Eps =>
    simp only [initialState, toSpec, KimiK3.SequenceMixer.initialState, MixerState.toSpec,
      KDA.LayerState.zero_toSpec]
    rfl
  | mla p scoreScale => rfl

/-- **One executable mixer step is `SequenceMixer.step`.** -/
theorem SequenceMixer.step_eq (mixer : SequenceMixer α c.execDims) (s : MixerState α c.execDims)
    (x : Arr α [c.hiddenDim]) :
    ((mixer.step s x).1.toSpec, (mixer.step s x).2.toTensor) = mixer.toSpec.step s.toSpec x.toTensor := by
  cases mixer with
  | kda p logFloor l2Eps =>
    have hz : (KDA.LayerState.zero (α := α) c.execDims.kda).toSpec = KimiK3.KDA.LayerState.zero c.kdaDims :=
      KDA.LayerState.zero_toSpec _
    cases s with
    | kda st =>
      simp only [step, toSpec, KimiK3.SequenceMixer.step, MixerState.toSpec]
      rw [← KDA.layerStep_eq]
    | mla cache =>
      simp only [step, toSpec, KimiK3.SequenceMixer.step, MixerState.toSpec]
      rw [← hz, ← KDA.layerStep_eq]
  | mla p scoreScale =>
    cases s with
    | kda st =>
      simp only [step, toSpec, KimiK3.SequenceMixer.step, MixerState.toSpec]
      rw [show ([] : KimiK3.GatedMLA.Cache α c.mlaDims) = GatedMLA.cacheToSpec [] from rfl,
        ← GatedMLA.step_eq]
    | mla cache =>
      simp only [step, toSpec, KimiK3.SequenceMixer.step, MixerState.toSpec]
      rw [← GatedMLA.step_eq]

/-- **The executable channel mixer is `ChannelMixer.forward`.** -/
theorem ChannelMixer.forward_eq (mixer : ChannelMixer α c.execDims) (x : Arr α [c.hiddenDim]) :
    (mixer.forward x).toTensor = mixer.toSpec.forward x.toTensor := by
  cases mixer with
  | dense e => exact Expert.forward_eq e _ _ x
  | moe layer hActive =>
    simp only [forward, toSpec]
    rw [KimiK3.ChannelMixer.forward_moe, StableLatentMoE.forwardAuto_eq layer hActive]
    rfl

/-! ## The backbone layer -/

/-- The reference layer of an array-backed one. -/
noncomputable def BackboneLayer.toSpec (layer : BackboneLayer α c.execDims) : KimiK3.BackboneLayer α c :=
  ⟨layer.sequence.toSpec, layer.channel.toSpec, layer.sequenceQuery.toTensor, layer.channelQuery.toTensor,
   layer.sequenceNormScale.toTensor, layer.channelNormScale.toTensor, layer.retrievalEps,
   layer.normEps⟩

omit [Scalar α] in
theorem BlockState.memoPartial_eq {d : Nat} (s : KimiK3.BlockState α d) : s.memoPartial = s := by
  simp only [KimiK3.BlockState.memoPartial, Seq.memoFn_eq]

namespace BackboneLayer

theorem sequenceInput_eq (layer : BackboneLayer α c.execDims) (depth : BlockState α c.hiddenDim) :
    (layer.sequenceInput depth).toTensor = layer.toSpec.sequenceInput depth.toSpec := by
  simp only [sequenceInput, KimiK3.BackboneLayer.sequenceInput, Seq.memoFn_eq, Arr.toTensor_rmsNorm_seq,
    BlockState.retrieve_eq]
  rfl

theorem commit_eq (layer : BackboneLayer α c.execDims) (depth : BlockState α c.hiddenDim)
    (seqOut : Arr α [c.hiddenDim]) :
    (layer.commit depth seqOut).toSpec = layer.toSpec.commit depth.toSpec seqOut.toTensor := by
  simp only [commit, KimiK3.BackboneLayer.commit, Seq.memoFn_eq, BlockState.memoPartial_eq,
    BlockState.finishLayer_eq, ChannelMixer.forward_eq, Arr.toTensor_rmsNorm_seq,
    BlockState.retrieveAfterSequence_eq]
  rfl

/-- **One executable layer token is `BackboneLayer.forwardToken`** (mixer state and depth
state). -/
theorem forwardToken_eq (layer : BackboneLayer α c.execDims) (s : MixerState α c.execDims)
    (depth : BlockState α c.hiddenDim) :
    ((layer.forwardToken s depth).1.toSpec, (layer.forwardToken s depth).2.toSpec) =
      layer.toSpec.forwardToken s.toSpec depth.toSpec := by
  simp only [forwardToken, KimiK3.BackboneLayer.forwardToken]
  rw [← sequenceInput_eq]
  have h := SequenceMixer.step_eq layer.sequence s (layer.sequenceInput depth)
  have h1 := congrArg Prod.fst h
  have h2 := congrArg Prod.snd h
  simp only at h1 h2
  rw [commit_eq, h1, h2]
  rfl

end BackboneLayer

/-! ## The language model -/

theorem scanLayers_map {ℓ σ γ ℓ' σ' γ' : Type} (f : ℓ → σ → γ → σ × γ) (g : ℓ' → σ' → γ' → σ' × γ')
    (cl : ℓ → ℓ') (cs : σ → σ') (cx : γ → γ')
    (h : ∀ l s x, (cs (f l s x).1, cx (f l s x).2) = g (cl l) (cs s) (cx x)) :
    ∀ (ls : List ℓ) (ss : List σ) (x : γ),
      (cx (scanLayers f ls ss x).1, listMap cs (scanLayers f ls ss x).2) =
        ModelList.scanLayers g (listMap cl ls) (listMap cs ss) (cx x)
  | [], _, _ => rfl
  | _ :: _, [], _ => rfl
  | l :: ls, s :: ss, x => by
    simp only [scanLayers, ModelList.scanLayers, listMap]
    rw [← h l s x]
    simp only [← scanLayers_map f g cl cs cx h ls ss (f l s x).2]

/-- The reference model of an array-backed one. -/
noncomputable def LanguageModel.toSpec (model : LanguageModel α c.execDims) : KimiK3.LanguageModel α c :=
  ⟨model.embedding.toTensor, listMap BackboneLayer.toSpec model.layers, model.finalQuery.toTensor,
   model.finalNormScale.toTensor, model.head.toTensor, model.retrievalEps, model.normEps⟩

/-- The reference model state of an array-backed one. -/
noncomputable def LanguageModel.stateToSpec (states : LanguageModel.State α c.execDims) :
    KimiK3.LanguageModel.State α c :=
  listMap MixerState.toSpec states

namespace LanguageModel

theorem initialState_eq (model : LanguageModel α c.execDims) :
    stateToSpec model.initialState = model.toSpec.initialState := by
  simp only [initialState, KimiK3.LanguageModel.initialState, stateToSpec, toSpec, listMap_eq,
    ModelList.map_eq, List.map_map]
  congr 1
  funext layer
  exact SequenceMixer.initialState_eq layer.sequence

theorem embed_eq (model : LanguageModel α c.execDims) (token : Fin c.vocabSize) :
    (model.embed token.val).toTensor = model.toSpec.embed token :=
  Arr.toTensor_row model.embedding token

theorem readout_eq (model : LanguageModel α c.execDims) (depth : BlockState α c.hiddenDim) :
    (model.readout depth).toTensor = model.toSpec.readout depth.toSpec := by
  simp only [readout, KimiK3.LanguageModel.readout, Seq.memoFn_eq, Arr.toTensor_vecMatMul_seq,
    Arr.toTensor_rmsNorm_seq, BlockState.retrieve_eq]
  rfl

theorem layersToken_eq (model : LanguageModel α c.execDims) (states : State α c.execDims)
    (depth : BlockState α c.hiddenDim) :
    ((model.layersToken states depth).1.toSpec, stateToSpec (model.layersToken states depth).2) =
      model.toSpec.layersToken (stateToSpec states) depth.toSpec :=
  scanLayers_map _ _ BackboneLayer.toSpec MixerState.toSpec BlockState.toSpec
    (fun layer s d => BackboneLayer.forwardToken_eq layer s d) model.layers states depth

theorem stepEmbedded_eq (model : LanguageModel α c.execDims) (states : State α c.execDims)
    (x : Arr α [c.hiddenDim]) :
    (stateToSpec (model.stepEmbedded states x).1, (model.stepEmbedded states x).2.toTensor) =
      model.toSpec.stepEmbedded (stateToSpec states) x.toTensor := by
  simp only [stepEmbedded, KimiK3.LanguageModel.stepEmbedded]
  rw [← BlockState.initial_toSpec, ← layersToken_eq, readout_eq]

/-- **One executable token step is `LanguageModel.step`** (new state and logits). -/
theorem step_eq (model : LanguageModel α c.execDims) (states : State α c.execDims)
    (token : Fin c.vocabSize) :
    (stateToSpec (model.step states token.val).1, (model.step states token.val).2.toTensor) =
      model.toSpec.step (stateToSpec states) token := by
  simp only [step, KimiK3.LanguageModel.step]
  rw [← embed_eq, stepEmbedded_eq]

/-- **Executable token-by-token evaluation is `LanguageModel.run`**: the final state and the
logits of every token. -/
theorem run_eq (model : LanguageModel α c.execDims) (states : State α c.execDims)
    (tokens : List (Fin c.vocabSize)) :
    (stateToSpec (model.run states (listMap Fin.val tokens)).1,
      listMap Arr.toTensor (model.run states (listMap Fin.val tokens)).2) =
      model.toSpec.run (stateToSpec states) tokens := by
  unfold run KimiK3.LanguageModel.run
  rw [scan_map_inputs model.step model.toSpec.step stateToSpec Fin.val Arr.toTensor
    (fun s t => step_eq model s t), scan_eq_run]

end LanguageModel

end Exec

end KimiK3
