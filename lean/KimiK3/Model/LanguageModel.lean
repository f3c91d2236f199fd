module

public import KimiK3.Model.Backbone

/-!
# The language model (k3-spec §2.5; report Fig. 2)

Token embedding, the stack of backbone layers, and the final retrieval + RMSNorm + vocabulary
head. Two evaluation orders:

* **token-major, causal** (`step`, `run`): one token at a time through every layer, each layer
  with its own mixer state; the model state is the list of the layers' mixer states;
* **layer-major, full sequence** (`logits`): every layer processes the whole sequence at once,
  its sequence mixer in full-sequence form (KDA `layerForward`, MLA masked attention).

`Streaming.lean` proves them equal (`run_eq_logits`) and that a run can be split anywhere
(`run_append`). Inputs are token ids (`step`, `run`, `logits`) or embedding rows
(`stepEmbedded`, `runEmbedded`, `logitsWith`), e.g. the rows of a multimodal embedding
(`Embedding.lean`).
-/

@[expose] public section

namespace KimiK3

/-- **The language model** (k3-spec §2.5): embedding table `[vocab, d]`, the layers in order
(layer `i`, 0-based, is paper layer `i + 1`), the final retrieval query and RMSNorm gain, the
vocabulary head `[d, vocab]` (`[in, out]`), and the stabilizers `ε'` of the final retrieval's
score norm (config `attn_res_norm_eps`) and `ε` of the final norm (config `final_norm_eps`). The
AttnRes block size is the configuration's. -/
structure LanguageModel (α : Type) (c : Config) where
  /-- Token embedding table `[vocab, d]`. -/
  embedding : Tensor α [c.vocabSize, c.hiddenDim]
  /-- The backbone layers, first layer first. -/
  layers : List (BackboneLayer α c)
  /-- The query of the final retrieval. -/
  finalQuery : Tensor α [c.hiddenDim]
  /-- The gain of the final RMSNorm. -/
  finalNormScale : Tensor α [c.hiddenDim]
  /-- The vocabulary head `[d, vocab]`. -/
  head : Tensor α [c.hiddenDim, c.vocabSize]
  /-- The stabilizer `ε'` of the final retrieval's score norm. -/
  retrievalEps : α
  /-- The stabilizer `ε` of the final RMSNorm (`model.norm`). -/
  normEps : α

namespace LanguageModel

variable {α : Type} [Scalar α] {c : Config}

/-- The model state: one mixer state per layer, in layer order. -/
abbrev State (α : Type) (c : Config) := List (MixerState α c)

/-- The state before the first token: every layer's initial mixer state. -/
@[macro_inline] def initialState (model : LanguageModel α c) : State α c :=
  ModelList.map (fun layer => layer.sequence.initialState) model.layers

/-- The embedding row of a token id. -/
@[macro_inline] def embed (model : LanguageModel α c) (token : Fin c.vocabSize) : Tensor α [c.hiddenDim] :=
  model.embedding token

/-- **The final head** (k3-spec §2.5 `finishDecoder`):
`logits = (RMSNorm_ε(retrieve_ε' w_final depth) ⊙ γ_final) · head`. -/
@[macro_inline] def readout (model : LanguageModel α c) (depth : BlockState α c.hiddenDim) :
    Tensor α [c.vocabSize] :=
  let h := Seq.memoFn (Seq.rmsNorm model.normEps (depth.retrieve model.retrievalEps model.finalQuery)
    model.finalNormScale)
  Seq.memoFn (Seq.vecMatMul h model.head)

/-- One token's depth state through every layer (each with its own mixer state); returns the
final depth state and the new mixer states. -/
@[macro_inline] def layersToken (model : LanguageModel α c) (states : State α c)
    (depth : BlockState α c.hiddenDim) : BlockState α c.hiddenDim × State α c :=
  ModelList.scanLayers (fun layer s d => layer.forwardToken s d) model.layers states depth

/-- **One causal step on an embedding row** (k3-spec §2.5): the depth state starts from the
row alone (`BlockState.initial`), passes through every layer, and the head reads it. -/
@[macro_inline] def stepEmbedded (model : LanguageModel α c) (states : State α c)
    (x : Tensor α [c.hiddenDim]) : State α c × Tensor α [c.vocabSize] :=
  let r := model.layersToken states (BlockState.initial x)
  (r.2, model.readout r.1)

/-- **One causal step on a token id**: embed, then `stepEmbedded`. -/
@[macro_inline] def step (model : LanguageModel α c) (states : State α c) (token : Fin c.vocabSize) :
    State α c × Tensor α [c.vocabSize] :=
  model.stepEmbedded states (model.embed token)

/-- **Token-by-token evaluation** of embedding rows from state `s`: the final state and one
logit vector per row. -/
@[macro_inline] def runEmbedded (model : LanguageModel α c) (s : State α c)
    (xs : List (Tensor α [c.hiddenDim])) : State α c × List (Tensor α [c.vocabSize]) :=
  CausalScan.run model.stepEmbedded s xs

/-- **Token-by-token evaluation** of token ids from state `s` (k3-spec §3 `LanguageModel.run`). -/
@[macro_inline] def run (model : LanguageModel α c) (s : State α c) (tokens : List (Fin c.vocabSize)) :
    State α c × List (Tensor α [c.vocabSize]) :=
  CausalScan.run model.step s tokens

/-- **Layer-major evaluation** of embedding rows with the sequence-mixer evaluation
`seqForward`: the depth states of all tokens pass through one layer after the other
(`BackboneLayer.forwardSequence`), then the head reads each. -/
@[macro_inline] def logitsWith (model : LanguageModel α c)
    (seqForward : SequenceMixer α c → List (Tensor α [c.hiddenDim]) → List (Tensor α [c.hiddenDim]))
    (xs : List (Tensor α [c.hiddenDim])) : List (Tensor α [c.vocabSize]) :=
  ModelList.map model.readout
    (ModelList.foldl (fun layer depths => layer.forwardSequence seqForward depths) model.layers
      (ModelList.map BlockState.initial xs))

/-- **The full-sequence logits** of token ids (k3-spec §3 `LanguageModel.logits`): layer-major,
each layer's sequence mixer over the whole sequence at once in its full-sequence form
(`SequenceMixer.forwardFull`: KDA `layerForward`, MLA masked attention). -/
@[macro_inline] def logits (model : LanguageModel α c) (tokens : List (Fin c.vocabSize)) :
    List (Tensor α [c.vocabSize]) :=
  model.logitsWith SequenceMixer.forwardFull (ModelList.map model.embed tokens)

end LanguageModel

end KimiK3
