module

public import KimiK3.Model.LanguageModel
public import KimiK3.Sequence.MLAMasked

/-!
# Streaming = full sequence (k3-spec §3 `run_eq_logits`, `run_append`)

**`LanguageModel.run_eq_logits`**: evaluating the model token by token (each token through
every layer, the layers' mixer states carried from token to token) gives exactly the
layer-major full-sequence logits (every layer over the whole sequence, its sequence mixer in
full-sequence form: KDA `layerForward`, MLA masked attention). The proof is a scan fusion:
a stack of stateful per-token maps, scanned over the tokens, is the composition of the
per-layer scans (`run_compose`, `run_simulate`, `run_pre_zip`), by induction over the layers
(`run_layersToken`); then each mixer's scan is its full-sequence form
(`SequenceMixer.forwardFull_eq_forward`: KDA by definition, MLA by `maskedForward_eq_forward`).

The fusion (`run_eq_logitsWith_forward`) needs no scalar law (`[Scalar α]`); the last step needs
`ScalarLaws α` only because the masked MLA softmax and the step softmax subtract different
maxima (equal over the reals, not in floating point).

**`LanguageModel.run_append`**: splitting the input anywhere and resuming from the first
chunk's state gives the same logits and the same final state.
-/

@[expose] public section

namespace KimiK3

/-! ## List combinators equal their `List` counterparts -/

namespace ModelList

variable {β γ δ σ ℓ : Type}

@[simp] theorem map_eq (f : β → γ) (xs : List β) : map f xs = xs.map f := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp [map, ih]

@[simp] theorem zipWith_eq (f : β → γ → δ) (xs : List β) (ys : List γ) :
    zipWith f xs ys = List.zipWith f xs ys := by
  induction xs generalizing ys with
  | nil => cases ys <;> rfl
  | cons x xs ih => cases ys <;> simp [zipWith, ih]

theorem foldl_eq (f : β → γ → γ) (ls : List β) (x : γ) :
    foldl f ls x = ls.foldl (fun x l => f l x) x := by
  induction ls generalizing x with
  | nil => rfl
  | cons l ls ih => simp [foldl, ih]

end ModelList

/-! ## Scan laws used by the fusion -/

namespace CausalScan

variable {σ τ ι β γ ο : Type}

/-- A scan whose step maps every state `φ s` as `f` maps `s` is the image of `f`'s scan. -/
theorem run_simulate (φ : σ → τ) (f : σ → ι → σ × ο) (g : τ → ι → τ × ο)
    (h : ∀ s x, g (φ s) x = (φ (f s x).1, (f s x).2)) (s : σ) (xs : List ι) :
    run g (φ s) xs = (φ (run f s xs).1, (run f s xs).2) := by
  induction xs generalizing s with
  | nil => rfl
  | cons x xs ih => simp only [run_cons, h, ih]

/-- **Scan composition**: scanning `f` then `g` in one pass (paired states) is scanning `f`,
then scanning `g` over `f`'s outputs. -/
theorem run_compose (f : σ → ι → σ × β) (g : τ → β → τ × ο) (s : σ) (t : τ) (xs : List ι) :
    run (fun (p : σ × τ) x => (((f p.1 x).1, (g p.2 (f p.1 x).2).1), (g p.2 (f p.1 x).2).2)) (s, t) xs =
      (((run f s xs).1, (run g t (run f s xs).2).1), (run g t (run f s xs).2).2) := by
  induction xs generalizing s t with
  | nil => rfl
  | cons x xs ih => simp only [run_cons, ih]

/-- A step that reads its input through `pre` and writes its output with `post`, which may also
see the input: the scan is the inner scan over the mapped inputs, zipped back. -/
theorem run_pre_zip (f : σ → β → σ × γ) (pre : ι → β) (post : ι → γ → ο) (g : σ → ι → σ × ο)
    (hg : ∀ s x, g s x = ((f s (pre x)).1, post x (f s (pre x)).2)) (s : σ) (xs : List ι) :
    run g s xs = ((run f s (xs.map pre)).1, List.zipWith post xs (run f s (xs.map pre)).2) := by
  induction xs generalizing s with
  | nil => rfl
  | cons x xs ih => simp only [run_cons, hg, ih, List.map_cons, List.zipWith_cons_cons]

/-- A step that passes its input through unchanged outputs the inputs. -/
theorem run_outputs_id (g : σ → ι → σ × ι) (hg : ∀ s x, (g s x).2 = x) (s : σ) (xs : List ι) :
    (run g s xs).2 = xs := by
  induction xs generalizing s with
  | nil => rfl
  | cons x xs ih => simp only [run_cons, hg, ih]

/-- A step that keeps the state `s` and passes its input through outputs the inputs. -/
theorem run_outputs_fixed (g : σ → ι → σ × ι) (s : σ) (hg : ∀ x, g s x = (s, x)) (xs : List ι) :
    (run g s xs).2 = xs := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp only [run_cons, hg, ih]

/-- Mapping the inputs first. -/
theorem run_map_input (f : σ → β → σ × ο) (e : ι → β) (s : σ) (xs : List ι) :
    run (fun s x => f s (e x)) s xs = run f s (xs.map e) := by
  induction xs generalizing s with
  | nil => rfl
  | cons x xs ih => simp only [run_cons, ih, List.map_cons]

end CausalScan

theorem List.zipWith_snd_eq_map {β γ ο : Type} (h : γ → ο) (xs : List β) (ys : List γ)
    (hl : ys.length = xs.length) : List.zipWith (fun _ y => h y) xs ys = ys.map h := by
  induction xs generalizing ys with
  | nil => cases ys <;> simp_all
  | cons x xs ih => cases ys <;> simp_all

/-! ## Sequence mixers: the scan is the full-sequence form -/

namespace SequenceMixer

variable {α : Type} {c : Config}

/-- A KDA mixer's scan is `KDA.layerForward` (no law needed). -/
theorem forward_kda [Scalar α] (p : KDA.LayerParams α c.kdaDims) (logFloor l2Eps : α)
    (xs : List (Tensor α [c.hiddenDim])) :
    (SequenceMixer.kda p logFloor l2Eps).forward xs = KDA.layerForward p logFloor l2Eps xs := by
  simp only [forward, KDA.layerForward, initialState]
  rw [CausalScan.run_simulate MixerState.kda (KDA.layerStep p logFloor l2Eps) _ (fun _ _ => rfl)]

/-- An MLA mixer's scan is `GatedMLA.forward` (no law needed). -/
theorem forward_mla [Scalar α] (p : GatedMLA.Params α c.mlaDims) (scoreScale : α)
    (xs : List (Tensor α [c.hiddenDim])) :
    (SequenceMixer.mla p scoreScale).forward xs = GatedMLA.forward p scoreScale xs := by
  simp only [forward, GatedMLA.forward, initialState]
  rw [CausalScan.run_simulate MixerState.mla (GatedMLA.step p scoreScale) _ (fun _ _ => rfl)]

/-- **The full-sequence form of a mixer equals its causal scan**. -/
theorem forwardFull_eq_forward [ScalarLaws α] (m : SequenceMixer α c) (xs : List (Tensor α [c.hiddenDim])) :
    m.forwardFull xs = m.forward xs := by
  cases m with
  | kda p logFloor l2Eps => rw [forward_kda]; rfl
  | mla p scoreScale => rw [forward_mla]; exact GatedMLA.maskedForward_eq_forward p scoreScale xs

end SequenceMixer

/-- The MoE channel mixer is `StableLatentMoE.forwardAuto` (the memoization changes nothing). -/
theorem ChannelMixer.forward_moe {α : Type} [Scalar α] {c : Config}
    (layer : StableLatentMoE α c.hiddenDim c.latentDim c.expertHiddenDim c.expertHiddenDim
      c.numSharedExperts c.numRoutedExperts) (hActive : c.activeExperts ≤ c.numRoutedExperts)
    (x : Tensor α [c.hiddenDim]) :
    (ChannelMixer.moe layer hActive).forward x =
      layer.forwardAuto (k := c.activeExperts) hActive (c.gateCap : α) (c.upCap : α) x := by
  simp only [ChannelMixer.forward, Seq.memoFn_eq]
  rfl

/-! ## One layer: token-major = layer-major -/

namespace BackboneLayer

variable {α : Type} [Scalar α] {c : Config}

/-- **One layer scanned over the tokens' depth states** is the mixer's scan over the sequence
inputs, zipped with the commits. -/
theorem run_forwardToken (layer : BackboneLayer α c) (s : MixerState α c)
    (depths : List (BlockState α c.hiddenDim)) :
    CausalScan.run layer.forwardToken s depths =
      ((CausalScan.run layer.sequence.step s (depths.map layer.sequenceInput)).1,
       List.zipWith layer.commit depths
         (CausalScan.run layer.sequence.step s (depths.map layer.sequenceInput)).2) :=
  CausalScan.run_pre_zip layer.sequence.step layer.sequenceInput layer.commit _ (fun _ _ => rfl) s depths

end BackboneLayer

/-! ## The whole model -/

namespace LanguageModel

variable {α : Type} {c : Config}

section Scalar

variable [Scalar α]

/-- The stack of layers as a scan step on the mixer states (states first). -/
noncomputable def stackStep (layers : List (BackboneLayer α c)) (states : State α c)
    (depth : BlockState α c.hiddenDim) : State α c × BlockState α c.hiddenDim :=
  let r := ModelList.scanLayers (fun layer s d => layer.forwardToken s d) layers states depth
  (r.2, r.1)

/-- Layer-major evaluation of the depth states from given mixer states: each layer's mixer
scans all tokens' sequence inputs from its state, then every token commits. -/
noncomputable def layerMajorFrom : List (BackboneLayer α c) → State α c →
    List (BlockState α c.hiddenDim) → List (BlockState α c.hiddenDim)
  | l :: ls, s :: ss, depths =>
    layerMajorFrom ls ss (List.zipWith l.commit depths
      (CausalScan.run l.sequence.step s (depths.map l.sequenceInput)).2)
  | _, _, depths => depths

/-- **Scan fusion over the layers**: the token-major scan of the layer stack outputs the
layer-major depth states. -/
theorem run_stackStep (layers : List (BackboneLayer α c)) (states : State α c)
    (depths : List (BlockState α c.hiddenDim)) :
    (CausalScan.run (stackStep layers) states depths).2 = layerMajorFrom layers states depths := by
  induction layers generalizing states depths with
  | nil =>
    exact CausalScan.run_outputs_id _ (fun _ _ => rfl) states depths
  | cons l ls ih =>
    cases states with
    | nil =>
      rw [show layerMajorFrom (l :: ls) [] depths = depths from rfl]
      exact CausalScan.run_outputs_fixed (stackStep (l :: ls)) [] (fun _ => rfl) depths
    | cons s ss =>
      have hsim := CausalScan.run_simulate (fun (p : MixerState α c × State α c) => p.1 :: p.2)
        (fun (p : MixerState α c × State α c) d =>
          (((l.forwardToken p.1 d).1, (stackStep ls p.2 (l.forwardToken p.1 d).2).1),
           (stackStep ls p.2 (l.forwardToken p.1 d).2).2))
        (stackStep (l :: ls)) (fun _ _ => rfl) (s, ss) depths
      simp only at hsim
      rw [hsim, CausalScan.run_compose, ih, BackboneLayer.run_forwardToken]
      rfl

/-- From the initial mixer states, layer-major evaluation is the fold of
`BackboneLayer.forwardSequence` with each mixer's scan `SequenceMixer.forward`. -/
theorem layerMajorFrom_initial (layers : List (BackboneLayer α c))
    (depths : List (BlockState α c.hiddenDim)) :
    layerMajorFrom layers (layers.map (fun l => l.sequence.initialState)) depths =
      ModelList.foldl (fun layer ds => layer.forwardSequence SequenceMixer.forward ds) layers depths := by
  induction layers generalizing depths with
  | nil => rfl
  | cons l ls ih =>
    simp only [List.map_cons, layerMajorFrom, ih]
    simp [ModelList.foldl, BackboneLayer.forwardSequence, SequenceMixer.forward]

/-- **Token-by-token evaluation of embedding rows = layer-major evaluation** with every mixer
as its causal scan (no scalar law needed). -/
theorem runEmbedded_eq_logitsWith_forward (model : LanguageModel α c)
    (xs : List (Tensor α [c.hiddenDim])) :
    (model.runEmbedded model.initialState xs).2 = model.logitsWith SequenceMixer.forward xs := by
  have h := CausalScan.run_pre_zip (stackStep model.layers) BlockState.initial
    (fun _ d => model.readout d) model.stepEmbedded (fun _ _ => rfl) model.initialState xs
  simp only [runEmbedded]
  rw [h]
  simp only [logitsWith, initialState, ModelList.map_eq]
  rw [List.zipWith_snd_eq_map _ _ _ (by rw [CausalScan.outputs_length, List.length_map]),
    run_stackStep, layerMajorFrom_initial]

/-- `run` on token ids is `runEmbedded` on their embedding rows. -/
theorem run_eq_runEmbedded (model : LanguageModel α c) (s : State α c) (tokens : List (Fin c.vocabSize)) :
    model.run s tokens = model.runEmbedded s (tokens.map model.embed) :=
  CausalScan.run_map_input model.stepEmbedded model.embed s tokens

/-- **Token-by-token evaluation = layer-major evaluation** on token ids, every mixer as its
causal scan (no scalar law needed). -/
theorem run_eq_logitsWith_forward (model : LanguageModel α c) (tokens : List (Fin c.vocabSize)) :
    (model.run model.initialState tokens).2 =
      model.logitsWith SequenceMixer.forward (tokens.map model.embed) := by
  rw [run_eq_runEmbedded, runEmbedded_eq_logitsWith_forward]

/-- **`run_append`** (k3-spec §3): splitting the tokens anywhere and resuming from the state the
first chunk left gives the same final state and the same logits, concatenated. -/
theorem run_append (model : LanguageModel α c) (s : State α c) (xs ys : List (Fin c.vocabSize)) :
    model.run s (xs ++ ys) =
      ((model.run (model.run s xs).1 ys).1, (model.run s xs).2 ++ (model.run (model.run s xs).1 ys).2) :=
  CausalScan.run_append model.step s xs ys

/-- `run_append` for embedding rows (e.g. a multimodal sequence). -/
theorem runEmbedded_append (model : LanguageModel α c) (s : State α c) (xs ys : List (Tensor α [c.hiddenDim])) :
    model.runEmbedded s (xs ++ ys) =
      ((model.runEmbedded (model.runEmbedded s xs).1 ys).1,
       (model.runEmbedded s xs).2 ++ (model.runEmbedded (model.runEmbedded s xs).1 ys).2) :=
  CausalScan.run_append model.stepEmbedded s xs ys

/-- One logit vector per token. -/
theorem run_length (model : LanguageModel α c) (s : State α c) (tokens : List (Fin c.vocabSize)) :
    (model.run s tokens).2.length = tokens.length :=
  CausalScan.outputs_length model.step s tokens

end Scalar

section Laws

variable [ScalarLaws α]

theorem logitsWith_forwardFull (model : LanguageModel α c) (xs : List (Tensor α [c.hiddenDim])) :
    model.logitsWith SequenceMixer.forwardFull xs = model.logitsWith SequenceMixer.forward xs := by
  have : (SequenceMixer.forwardFull : SequenceMixer α c → _ → _) = SequenceMixer.forward :=
    funext fun m => funext fun xs => m.forwardFull_eq_forward xs
  rw [this]

/-- **`run_eq_logits`** (k3-spec §3): token-by-token causal evaluation from the initial state
gives exactly the full-sequence logits (layer-major, KDA `layerForward`, MLA masked
attention), for every model and every lawful scalar type. -/
theorem run_eq_logits (model : LanguageModel α c) (tokens : List (Fin c.vocabSize)) :
    (model.run model.initialState tokens).2 = model.logits tokens := by
  rw [run_eq_logitsWith_forward, logits, logitsWith_forwardFull, ModelList.map_eq]

/-- `run_eq_logits` for embedding rows (e.g. a multimodal sequence). -/
theorem runEmbedded_eq_logitsWith (model : LanguageModel α c) (xs : List (Tensor α [c.hiddenDim])) :
    (model.runEmbedded model.initialState xs).2 = model.logitsWith SequenceMixer.forwardFull xs := by
  rw [runEmbedded_eq_logitsWith_forward, logitsWith_forwardFull]

end Laws

end LanguageModel

end KimiK3
