module

public import KimiK3.KimiLinear.Decoder
public import KimiK3.KimiLinear.MLAMasked
public import KimiK3.Model.ScanFusion

/-!
# Kimi Linear prefill = token by token (k3-spec §3 `run_eq_logits`, §7)

transformers 5.23's prefill (`KimiLinearModel.forward`, `models/kimi_linear/modeling_kimi_linear.py`)
is **layer-major**: the whole prompt's hidden states pass through one `KimiLinearDecoderLayer`
after the other; each KDA layer runs its recurrence over all tokens (fla's `chunk_kda`), each MLA
layer attends over all tokens at once under the causal mask (`create_causal_mask`). The variant's
reference model (`KimiLinear.Model`, `Decoder.lean`) is **token-major**: one token through every
layer, each layer with its own state, then the next token (`Model.run`, `Model.logits`). This file
defines the layer-major form and proves the two equal, logits and final states, as K3's
`LanguageModel.run_eq_logits` (`Model/Streaming.lean`) does for K3's model.

Definitions:
* `Mixer.forwardFrom` — a mixer over a sequence from a state, as its causal scan;
* `Mixer.forwardFull` — its full-sequence form: KDA's own recurrence (`layerStep` scanned; fla's
  chunked kernel is that recurrence, see K3's `Sequence/KDAChunk.lean` — the variant's step is
  `KDA.step`, `LayerFacts.layerStep_eq`), MLA's masked attention over all tokens
  (`MLA.maskedForwardFrom`, low-rank or direct query);
* `DecoderLayer.prefillWith` — one decoder layer over a whole sequence from a state, with a given
  mixer evaluation: pre-norm of every token, the mixer over all of them, residual, MLP per token;
* `Model.prefillWith` — every layer over the whole sequence, first layer first, then the head
  reads every token; `Model.prefill` — from the initial state with `Mixer.forwardFull`: the
  variant's prefill.

Proved:
* **`Model.run_eq_prefillWith_forwardFrom`** (`[Scalar α]`, no law, so `Float` too): from any
  state (one per layer, or fewer), token-by-token evaluation gives the final states and logits
  of the layer-major evaluation with every mixer as its causal scan — a scan fusion
  (`ModelList.run_stackStep`, `Model/ScanFusion.lean`; per layer `DecoderLayer.run_step_eq_prefillWith`);
* **`Mixer.forwardFull_kda`** (no law), **`Mixer.forwardFull_mla`**, **`Mixer.forwardFull_mlaDirect`**
  (`ScalarLaws`: the masked softmax and the step softmax subtract different maxima, equal over the
  reals, not in floating point), together **`Mixer.forwardFull_eq_forwardFrom`**, from any state of
  the mixer's kind (`Mixer.Fits`: what `initialState` and every step leave);
* **`Model.run_eq_prefill`**, **`Model.logits_eq_prefill`** (`ScalarLaws`): the prefill of a prompt
  gives the token-by-token logits and final states, for every schedule of KDA layers, MLA layers
  with the low-rank or the direct query, dense SwiGLU and MoE MLPs;
* **`Model.run_append_eq_prefill_then_run`** (`ScalarLaws`): prefilling a prompt, then decoding the
  rest token by token from the states the prefill left, is the token-by-token run over the whole
  sequence; `Model.run_append` (no law), `Model.prefill_logits_length`;
* prefill from a cache (transformers' prefill with `past_key_values`): **`Model.run_eq_prefillWith_forwardFull`**
  from any states that fit the layers (`Model.StatesFit`: one per layer, each of its mixer's kind;
  `initialState_fits`, `run_fits`), and **`Model.run_append_eq_chunked_prefill`** (prefill one
  chunk, then the next from its states = the token-by-token run over both).
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

variable {α : Type} {m : Dims}

/-! ## Mixers: the causal scan and the full-sequence form -/

namespace Mixer

section Scalar

variable [Scalar α]

/-- **A mixer over a sequence from state `s`, as its causal scan** (k3-spec §2.1 `forward`, from
any state): the final state and one output per input. -/
@[macro_inline] def forwardFrom (mixer : Mixer α m) (s : MixerState α m)
    (xs : List (Tensor α [m.hidden])) : MixerState α m × List (Tensor α [m.hidden]) :=
  CausalScan.run mixer.step s xs

/-- **The full-sequence form of a mixer from state `s`** (k3-spec §7; transformers' prefill of
`KimiLinearDeltaAttention` and `KimiLinearAttention` over all tokens at once): KDA runs its
recurrence over the tokens (`layerStep` scanned from the state's window and head states), MLA
appends all the tokens' entries to the cache and attends under the causal mask
(`MLA.maskedForwardFrom`, query latent `RMSNorm(x W_qd) ⊙ γ_q` or `x` itself). A state of the other
kind is read as the initial state, as `Mixer.step` does. -/
noncomputable def forwardFull (mixer : Mixer α m) (s : MixerState α m)
    (xs : List (Tensor α [m.hidden])) : MixerState α m × List (Tensor α [m.hidden]) :=
  match mixer with
  | .kda p l2Eps =>
    let st := match s with
      | .kda st => st
      | .mla _ => KDA.LayerState.zero m.kda.toLayerDims
    let r := CausalScan.run (layerStep p l2Eps) st xs
    (.kda r.1, r.2)
  | .mla p scoreScale =>
    let cache := match s with
      | .kda _ => []
      | .mla cache => cache
    let r := MLA.maskedForwardFrom (GatedMLA.queryLatent p) p scoreScale cache xs
    (.mla r.1, r.2)
  | .mlaDirect p hq scoreScale =>
    let cache := match s with
      | .kda _ => []
      | .mla cache => cache
    let r := MLA.maskedForwardFrom (MLA.directQuery hq) p scoreScale cache xs
    (.mla r.1, r.2)

/-- A KDA mixer's scan from a KDA state is the variant layer's own scan, in the mixer state. -/
theorem forwardFrom_kda (p : LayerParams α m.kda) (l2Eps : α) (st : KDA.LayerState α m.kda.toLayerDims)
    (xs : List (Tensor α [m.hidden])) :
    (Mixer.kda p l2Eps).forwardFrom (.kda st) xs =
      (.kda (CausalScan.run (layerStep p l2Eps) st xs).1, (CausalScan.run (layerStep p l2Eps) st xs).2) :=
  CausalScan.run_simulate MixerState.kda (layerStep p l2Eps) _ (fun _ _ => rfl) st xs

/-- An MLA mixer's scan (low-rank query) from a cache is `MLA.step`'s scan, in the mixer state. -/
theorem forwardFrom_mla (p : GatedMLA.Params α m.mla) (scoreScale : α) (cache : GatedMLA.Cache α m.mla)
    (xs : List (Tensor α [m.hidden])) :
    (Mixer.mla p scoreScale).forwardFrom (.mla cache) xs =
      (.mla (CausalScan.run (MLA.step p scoreScale) cache xs).1,
       (CausalScan.run (MLA.step p scoreScale) cache xs).2) :=
  CausalScan.run_simulate MixerState.mla (MLA.step p scoreScale) _ (fun _ _ => rfl) cache xs

/-- An MLA mixer's scan (direct query) from a cache is `MLA.stepDirect`'s scan, in the mixer
state. -/
theorem forwardFrom_mlaDirect (p : GatedMLA.Params α m.mla) (hq : m.mla.queryLatentDim = m.mla.modelDim)
    (scoreScale : α) (cache : GatedMLA.Cache α m.mla) (xs : List (Tensor α [m.hidden])) :
    (Mixer.mlaDirect p hq scoreScale).forwardFrom (.mla cache) xs =
      (.mla (CausalScan.run (MLA.stepDirect p hq scoreScale) cache xs).1,
       (CausalScan.run (MLA.stepDirect p hq scoreScale) cache xs).2) :=
  CausalScan.run_simulate MixerState.mla (MLA.stepDirect p hq scoreScale) _ (fun _ _ => rfl) cache xs

/-- **KDA: the full-sequence form is the causal scan**, from any KDA state (no law). -/
theorem forwardFull_kda (p : LayerParams α m.kda) (l2Eps : α) (st : KDA.LayerState α m.kda.toLayerDims)
    (xs : List (Tensor α [m.hidden])) :
    (Mixer.kda p l2Eps).forwardFull (.kda st) xs = (Mixer.kda p l2Eps).forwardFrom (.kda st) xs := by
  rw [forwardFrom_kda]
  rfl

/-- Whether a state is of the mixer's kind — a KDA state for KDA, a cache for MLA — as the initial
state and every step make it (`initialState_fits`, `step_fits`). -/
def Fits : Mixer α m → MixerState α m → Prop
  | .kda .., .kda _ => True
  | .mla .., .mla _ => True
  | .mlaDirect .., .mla _ => True
  | _, _ => False

/-- The initial state is of the mixer's kind. -/
theorem initialState_fits (mixer : Mixer α m) : mixer.Fits mixer.initialState := by
  cases mixer <;> trivial

/-- A step leaves a state of the mixer's kind, from any state. -/
theorem step_fits (mixer : Mixer α m) (s : MixerState α m) (x : Tensor α [m.hidden]) :
    mixer.Fits (mixer.step s x).1 := by
  cases mixer <;> trivial

/-- The scan from a state of the mixer's kind ends in one. -/
theorem forwardFrom_fits (mixer : Mixer α m) (s : MixerState α m) (hs : mixer.Fits s)
    (xs : List (Tensor α [m.hidden])) : mixer.Fits (mixer.forwardFrom s xs).1 := by
  induction xs generalizing s with
  | nil => exact hs
  | cons x xs ih =>
    simp only [forwardFrom, CausalScan.run_cons]
    exact ih _ (step_fits mixer s x)

end Scalar

section Laws

variable [ScalarLaws α]

/-- **MLA with the low-rank query: the masked full-sequence form is the causal scan**, from any
cache (new cache and outputs). -/
theorem forwardFull_mla (p : GatedMLA.Params α m.mla) (scoreScale : α) (cache : GatedMLA.Cache α m.mla)
    (xs : List (Tensor α [m.hidden])) :
    (Mixer.mla p scoreScale).forwardFull (.mla cache) xs = (Mixer.mla p scoreScale).forwardFrom (.mla cache) xs := by
  rw [forwardFrom_mla, MLA.run_step_eq_maskedForwardFrom]
  rfl

/-- **MLA with the direct query: the masked full-sequence form is the causal scan**, from any
cache (new cache and outputs). -/
theorem forwardFull_mlaDirect (p : GatedMLA.Params α m.mla) (hq : m.mla.queryLatentDim = m.mla.modelDim)
    (scoreScale : α) (cache : GatedMLA.Cache α m.mla) (xs : List (Tensor α [m.hidden])) :
    (Mixer.mlaDirect p hq scoreScale).forwardFull (.mla cache) xs =
      (Mixer.mlaDirect p hq scoreScale).forwardFrom (.mla cache) xs := by
  rw [forwardFrom_mlaDirect, MLA.run_stepDirect_eq_maskedForwardFrom]
  rfl

/-- **Every mixer's full-sequence form is its causal scan**, from any state of its kind (new state
and outputs): KDA, MLA with the low-rank or the direct query. -/
theorem forwardFull_eq_forwardFrom (mixer : Mixer α m) (s : MixerState α m) (hs : mixer.Fits s)
    (xs : List (Tensor α [m.hidden])) : mixer.forwardFull s xs = mixer.forwardFrom s xs := by
  cases mixer with
  | kda p l2Eps =>
    cases s with
    | kda st => exact forwardFull_kda p l2Eps st xs
    | mla _ => exact (hs : False).elim
  | mla p scoreScale =>
    cases s with
    | kda _ => exact (hs : False).elim
    | mla cache => exact forwardFull_mla p scoreScale cache xs
  | mlaDirect p hq scoreScale =>
    cases s with
    | kda _ => exact (hs : False).elim
    | mla cache => exact forwardFull_mlaDirect p hq scoreScale cache xs

/-- **Every mixer's full-sequence form from its initial state is its causal scan.** -/
theorem forwardFull_initialState (mixer : Mixer α m) (xs : List (Tensor α [m.hidden])) :
    mixer.forwardFull mixer.initialState xs = mixer.forwardFrom mixer.initialState xs :=
  forwardFull_eq_forwardFrom mixer _ (initialState_fits mixer) xs

end Laws

end Mixer

/-! ## One decoder layer over a whole sequence -/

namespace DecoderLayer

section Scalar

variable [Scalar α]

/-- **A decoder layer over a whole sequence from mixer state `s`** (k3-spec §7; transformers
`KimiLinearDecoderLayer.forward` on all tokens at once), with the mixer evaluated by `seq`
(`Mixer.forwardFrom`: its causal scan; `Mixer.forwardFull`: its full-sequence form): every token's
pre-norm `RMSNorm_ε(x) ⊙ γ_in`, the mixer over all of them, the residual `h = x + Mixer(…)` and
the MLP residual `h + MLP(RMSNorm_ε(h) ⊙ γ_post)` per token. Returns the mixer's final state and
the outputs. -/
@[macro_inline] def prefillWith
    (seq : Mixer α m → MixerState α m → List (Tensor α [m.hidden]) →
      MixerState α m × List (Tensor α [m.hidden]))
    (layer : DecoderLayer α m) (s : MixerState α m) (xs : List (Tensor α [m.hidden])) :
    MixerState α m × List (Tensor α [m.hidden]) :=
  let r := seq layer.mixer s
    (ModelList.map (fun x => Seq.memoFn (Seq.rmsNorm layer.normEps x layer.inputNormScale)) xs)
  (r.1, ModelList.zipWith (fun x o => layer.mlp (Seq.memoFn (fun i => x i + o i))) xs r.2)

/-- **One layer: token by token = over the whole sequence** (no law): scanning the layer's step
over the tokens from state `s` gives the final state and outputs of `prefillWith` with the
mixer's causal scan. -/
theorem run_step_eq_prefillWith (layer : DecoderLayer α m) (s : MixerState α m)
    (xs : List (Tensor α [m.hidden])) :
    CausalScan.run layer.step s xs = layer.prefillWith Mixer.forwardFrom s xs := by
  rw [CausalScan.run_pre_zip layer.mixer.step
    (fun x => Seq.memoFn (Seq.rmsNorm layer.normEps x layer.inputNormScale))
    (fun x o => layer.mlp (Seq.memoFn (fun i => x i + o i))) layer.step (fun _ _ => rfl) s xs]
  simp only [prefillWith, Mixer.forwardFrom, ModelList.map_eq, ModelList.zipWith_eq]

/-- `DecoderLayer.forward` (the layer over a sequence from its initial state) is the layer-major
form's outputs. -/
theorem forward_eq_prefillWith (layer : DecoderLayer α m) (xs : List (Tensor α [m.hidden])) :
    layer.forward xs = (layer.prefillWith Mixer.forwardFrom layer.mixer.initialState xs).2 := by
  rw [← run_step_eq_prefillWith]
  rfl

end Scalar

/-- From a state of the mixer's kind, the layer with the full-sequence mixer is the layer with the
causal scan. -/
theorem prefillWith_forwardFull_of_fits [ScalarLaws α] (layer : DecoderLayer α m)
    (s : MixerState α m) (hs : layer.mixer.Fits s) (xs : List (Tensor α [m.hidden])) :
    layer.prefillWith Mixer.forwardFull s xs = layer.prefillWith Mixer.forwardFrom s xs := by
  simp only [prefillWith, Mixer.forwardFull_eq_forwardFrom layer.mixer s hs]

/-- The layer-major layer from a state of its mixer's kind leaves one. -/
theorem prefillWith_forwardFrom_fits [Scalar α] (layer : DecoderLayer α m) (s : MixerState α m)
    (hs : layer.mixer.Fits s) (xs : List (Tensor α [m.hidden])) :
    layer.mixer.Fits (layer.prefillWith Mixer.forwardFrom s xs).1 :=
  Mixer.forwardFrom_fits layer.mixer s hs _

end DecoderLayer

/-! ## The whole model -/

namespace Model

section Scalar

variable [Scalar α]

/-- **Layer-major evaluation of token ids from states `s`** (k3-spec §7; transformers
`KimiLinearModel.forward` then `lm_head`), with the mixers evaluated by `seq`: embed every token,
pass the whole sequence through each layer in turn (`DecoderLayer.prefillWith`, layer `i` from
state `i`), then the head reads every token. Returns the layers' final states and one logit vector
per token. -/
@[macro_inline] def prefillWith
    (seq : Mixer α m → MixerState α m → List (Tensor α [m.hidden]) →
      MixerState α m × List (Tensor α [m.hidden]))
    (model : Model α m) (s : State α m) (tokens : List (Fin m.vocab)) :
    State α m × List (Tensor α [m.vocab]) :=
  let r := ModelList.scanLayers (fun layer s xs => layer.prefillWith seq s xs) model.layers s
    (ModelList.map model.embedding tokens)
  (r.2, ModelList.map model.readout r.1)

/-- **The prefill of a prompt** (k3-spec §7; transformers' `KimiLinearForCausalLM.forward` on the
whole prompt from an empty cache): layer-major from the initial state, every mixer in its
full-sequence form (`Mixer.forwardFull`: KDA recurrence, masked MLA attention). Returns the states
the prompt leaves (for decoding on) and the prompt's logits. -/
noncomputable def prefill (model : Model α m) (tokens : List (Fin m.vocab)) :
    State α m × List (Tensor α [m.vocab]) :=
  model.prefillWith Mixer.forwardFull model.initialState tokens

/-- One initial state per layer. -/
theorem initialState_length (model : Model α m) : model.initialState.length = model.layers.length := by
  simp [initialState, ModelList.map_eq]

/-- **Token by token = layer-major with every mixer as its causal scan** (no scalar law, so at
`Float` too): from any states, at most one per layer, `Model.run` gives the final states and
logits of `Model.prefillWith Mixer.forwardFrom`. -/
theorem run_eq_prefillWith_forwardFrom (model : Model α m) (s : State α m)
    (hs : s.length ≤ model.layers.length) (tokens : List (Fin m.vocab)) :
    model.run s tokens = model.prefillWith Mixer.forwardFrom s tokens := by
  have h := CausalScan.run_pre_zip (ModelList.stackStep DecoderLayer.step model.layers)
    (fun t => model.embedding t) (fun _ y => model.readout y) model.step (fun _ _ => rfl) s tokens
  show CausalScan.run model.step s tokens = _
  rw [h, List.zipWith_snd_eq_map _ _ _ (by rw [CausalScan.outputs_length, List.length_map]),
    ModelList.run_stackStep _ _ _ hs]
  simp only [Model.prefillWith, ModelList.map_eq, ← DecoderLayer.run_step_eq_prefillWith]

/-- **`run_append`** for the variant (k3-spec §3): splitting the tokens anywhere and resuming from
the states the first part left gives the same final states and the same logits, concatenated. -/
theorem run_append (model : Model α m) (s : State α m) (xs ys : List (Fin m.vocab)) :
    model.run s (xs ++ ys) =
      ((model.run (model.run s xs).1 ys).1, (model.run s xs).2 ++ (model.run (model.run s xs).1 ys).2) :=
  CausalScan.run_append model.step s xs ys

/-- Whether the states are one per layer, each of its layer's mixer kind (`Mixer.Fits`): what
the initial state and every run leave (`initialState_fits`, `run_fits`). -/
def StatesFit : List (DecoderLayer α m) → State α m → Prop
  | l :: ls, s :: ss => l.mixer.Fits s ∧ StatesFit ls ss
  | [], [] => True
  | _, _ => False

omit [Scalar α] in
/-- Fitting states are at most one per layer. -/
theorem StatesFit.length_le : ∀ (layers : List (DecoderLayer α m)) (s : State α m),
    StatesFit layers s → s.length ≤ layers.length
  | _ :: ls, _ :: ss, h => Nat.succ_le_succ (StatesFit.length_le ls ss h.2)
  | [], [], _ => Nat.le_refl _
  | [], _ :: _, h => (h : False).elim
  | _ :: _, [], _ => Nat.zero_le _

/-- The initial states fit the layers. -/
theorem initialState_fits (model : Model α m) : StatesFit model.layers model.initialState := by
  simp only [initialState]
  induction model.layers with
  | nil => trivial
  | cons l ls ih => exact ⟨Mixer.initialState_fits l.mixer, ih⟩

/-- The layer-major evaluation with the causal scans keeps fitting states fitting. -/
theorem scanLayers_forwardFrom_fits : ∀ (layers : List (DecoderLayer α m)) (s : State α m)
    (xs : List (Tensor α [m.hidden])), StatesFit layers s →
    StatesFit layers (ModelList.scanLayers (fun layer s xs => layer.prefillWith Mixer.forwardFrom s xs)
      layers s xs).2
  | l :: ls, s :: ss, xs, h =>
    ⟨DecoderLayer.prefillWith_forwardFrom_fits l s h.1 xs, scanLayers_forwardFrom_fits ls ss _ h.2⟩
  | [], [], _, _ => trivial
  | [], _ :: _, _, h => (h : False).elim
  | _ :: _, [], _, h => (h : False).elim

/-- **A run from fitting states ends in fitting states** (one per layer, each of its kind). -/
theorem run_fits (model : Model α m) (s : State α m) (hs : StatesFit model.layers s)
    (tokens : List (Fin m.vocab)) : StatesFit model.layers (model.run s tokens).1 := by
  rw [run_eq_prefillWith_forwardFrom model s (StatesFit.length_le _ _ hs)]
  exact scanLayers_forwardFrom_fits _ _ _ hs

end Scalar

section Laws

variable [ScalarLaws α]

/-- From fitting states, the layer-major evaluation with the full-sequence mixers is the one with
their causal scans. -/
theorem prefillWith_forwardFull_of_fits (model : Model α m) (s : State α m)
    (hs : StatesFit model.layers s) (tokens : List (Fin m.vocab)) :
    model.prefillWith Mixer.forwardFull s tokens = model.prefillWith Mixer.forwardFrom s tokens := by
  suffices h : ∀ (layers : List (DecoderLayer α m)) (s : State α m) (xs : List (Tensor α [m.hidden])),
      StatesFit layers s →
      ModelList.scanLayers (fun layer s xs => layer.prefillWith Mixer.forwardFull s xs) layers s xs =
        ModelList.scanLayers (fun layer s xs => layer.prefillWith Mixer.forwardFrom s xs) layers s xs by
    simp only [Model.prefillWith, h model.layers s _ hs]
  intro layers
  induction layers with
  | nil => intro s xs _; cases s <;> rfl
  | cons l ls ih =>
    intro s xs hs
    cases s with
    | nil => rfl
    | cons s ss =>
      simp only [ModelList.scanLayers, DecoderLayer.prefillWith_forwardFull_of_fits l s hs.1, ih ss _ hs.2]

/-- From the initial states, the layer-major evaluation with the full-sequence mixers is the one
with their causal scans. -/
theorem prefillWith_forwardFull_initialState (model : Model α m) (tokens : List (Fin m.vocab)) :
    model.prefillWith Mixer.forwardFull model.initialState tokens =
      model.prefillWith Mixer.forwardFrom model.initialState tokens :=
  prefillWith_forwardFull_of_fits model _ (initialState_fits model) tokens

/-- **Prefill = token by token** (k3-spec §3 `run_eq_logits` for the variant): the prefill of a
prompt gives exactly the final states and logits of feeding its tokens one at a time from the
initial state, for every model (any schedule of KDA and MLA layers, low-rank or direct MLA query,
dense or MoE MLPs) and every lawful scalar type. -/
theorem run_eq_prefill (model : Model α m) (tokens : List (Fin m.vocab)) :
    model.run model.initialState tokens = model.prefill tokens := by
  rw [prefill, prefillWith_forwardFull_initialState,
    run_eq_prefillWith_forwardFrom _ _ (Nat.le_of_eq (initialState_length model))]

/-- **The variant's logits are the prefill's logits.** -/
theorem logits_eq_prefill (model : Model α m) (tokens : List (Fin m.vocab)) :
    model.logits tokens = (model.prefill tokens).2 := by
  rw [← run_eq_prefill]
  rfl

/-- **Prefill, then decode**: prefilling `prompt` and running `rest` token by token from the
states the prefill left gives the token-by-token run over `prompt ++ rest`: the same final states,
and the prompt's prefill logits followed by the decoded tokens' logits. -/
theorem run_append_eq_prefill_then_run (model : Model α m) (prompt rest : List (Fin m.vocab)) :
    model.run model.initialState (prompt ++ rest) =
      ((model.run (model.prefill prompt).1 rest).1,
       (model.prefill prompt).2 ++ (model.run (model.prefill prompt).1 rest).2) := by
  rw [← run_eq_prefill]
  exact run_append model model.initialState prompt rest

/-- **Prefill from a cache = token by token** (transformers' prefill with `past_key_values`):
from states that fit the layers (e.g. what an earlier prefill or run left, `run_fits`), the
layer-major evaluation with the full-sequence mixers gives the run's final states and logits. -/
theorem run_eq_prefillWith_forwardFull (model : Model α m) (s : State α m)
    (hs : StatesFit model.layers s) (tokens : List (Fin m.vocab)) :
    model.run s tokens = model.prefillWith Mixer.forwardFull s tokens := by
  rw [prefillWith_forwardFull_of_fits model s hs,
    run_eq_prefillWith_forwardFrom model s (StatesFit.length_le _ _ hs)]

/-- **Chunked prefill**: prefilling `first`, then prefilling `second` from the states it left
(layer-major, masked MLA over the cache and the new tokens), gives the token-by-token run over
`first ++ second`: the same final states, and the two chunks' logits in order. -/
theorem run_append_eq_chunked_prefill (model : Model α m) (first second : List (Fin m.vocab)) :
    model.run model.initialState (first ++ second) =
      ((model.prefillWith Mixer.forwardFull (model.prefill first).1 second).1,
       (model.prefill first).2 ++ (model.prefillWith Mixer.forwardFull (model.prefill first).1 second).2) := by
  have hs : StatesFit model.layers (model.prefill first).1 := by
    rw [← run_eq_prefill]
    exact run_fits model _ (initialState_fits model) first
  rw [run_append_eq_prefill_then_run, run_eq_prefillWith_forwardFull model _ hs]

/-- One logit vector per prompt token. -/
theorem prefill_logits_length (model : Model α m) (tokens : List (Fin m.vocab)) :
    (model.prefill tokens).2.length = tokens.length := by
  rw [← run_eq_prefill]
  exact CausalScan.outputs_length _ _ _

end Laws

end Model

end KimiLinear

end KimiK3
