module

public import KimiK3.Graph.Routes
public import KimiK3.Graph.DecoderEval

/-!
# The decoder graph and the public language model (k3-spec §4 rung 04)

The public causal model (`LanguageModel.step`, `run`, `logits`) holds MLA caches as lists of
entries; the graph holds them packed as `[T, ·]` tensors, with staged routes. This file joins
them:

* `PackedState.ofMixer T`, `packStates T`: the public state packed for `T` past tokens;
  `MixerState.Fits`, `StatesFit`: every MLA layer holds an MLA cache of `T` entries and every
  KDA layer a KDA state (true after any `T` tokens from the initial state: `run_statesFit`);
* `BackboneLayer.packedStepAuto_ofMixer`, `LanguageModel.packedStepAuto_pack`: the packed step
  with own routing on the packed public state is the public step, packed;
* **`Decoder.program_eval_step`**: the graph on the packed public state, with staged routes
  that pass the checker on the graph's own router scores, computes the public token step's
  logits and the packing of its new state;
* **`Decoder.program_eval_run`**: applied token by token (the graph for `t` past tokens at
  position `t`), the graph's logits are the model's full-sequence logits `LanguageModel.logits`
  (through `LanguageModel.run_eq_logits`), for every configuration and token sequence.
-/

@[expose] public section

namespace KimiK3

noncomputable section

variable {α : Type} [Scalar α] {c : Config}

/-- A public mixer state packed for `T` past tokens (an MLA cache as its rows, `packLatent`,
`packShared`). -/
def PackedState.ofMixer (T : Nat) : MixerState α c → PackedState α c T
  | .kda s => .kda s
  | .mla cache => .mla (GatedMLA.packLatent T cache) (GatedMLA.packShared T cache)

/-- The public states of the layers, packed for `T` past tokens. -/
def packStates (T : Nat) : List (MixerState α c) → List (PackedState α c T)
  | [] => []
  | s :: states => PackedState.ofMixer T s :: packStates T states

/-- A public state fits a layer after `T` tokens: a KDA layer holds a KDA state, an MLA layer an
MLA cache of `T` entries. -/
def MixerState.Fits (T : Nat) : SequenceMixer α c → MixerState α c → Prop
  | .kda .., .kda _ => True
  | .mla .., .mla cache => cache.length = T
  | _, _ => False

/-- Every layer's public state fits it after `T` tokens (one state per layer). -/
def StatesFit (T : Nat) : List (BackboneLayer α c) → List (MixerState α c) → Prop
  | [], [] => True
  | layer :: layers, s :: states => MixerState.Fits T layer.sequence s ∧ StatesFit T layers states
  | _, _ => False

/-- Every layer's new packed state and router scores, from the new public states and the
scores. -/
def packOutputs (T : Nat) : List (MixerState α c) → List (Tensor α [c.numRoutedExperts]) →
    List (PackedState α c T × Tensor α [c.numRoutedExperts])
  | s :: states, r :: scores => (PackedState.ofMixer T s, r) :: packOutputs T states scores
  | _, _ => []

end

section Laws

variable {α : Type} [ScalarField α] {c : Config}

/-- A mixer step on a fitting packed state is the public step, packed. -/
theorem SequenceMixer.packedStep_ofMixer {T : Nat} (m : SequenceMixer α c) (s : MixerState α c)
    (hs : MixerState.Fits T m s) (x : Tensor α [c.hiddenDim]) :
    m.packedStep (PackedState.ofMixer T s) x = (PackedState.ofMixer (T + 1) (m.step s x).1, (m.step s x).2) := by
  cases m <;> cases s <;> simp only [MixerState.Fits] at hs
  · rfl
  · simp only [PackedState.ofMixer, SequenceMixer.packedStep, SequenceMixer.step,
      GatedMLA.stepPacked_pack _ _ _ T hs]

omit [ScalarField α] in
/-- The depth state with its partial sum memoized is the depth state. -/
theorem BlockState.memoPartial_eq {d : Nat} (s : BlockState α d) : s.memoPartial = s := by
  simp [BlockState.memoPartial]

/-- **One layer with its own routing on a fitting packed state is the public layer step,
packed**: the new packed state is the packing of the public one, the depth states agree. -/
theorem BackboneLayer.packedStepAuto_ofMixer {T : Nat} (layer : BackboneLayer α c) (s : MixerState α c)
    (hs : MixerState.Fits T layer.sequence s) (depth : BlockState α c.hiddenDim) :
    (layer.packedStepAuto (PackedState.ofMixer T s) depth).1 = PackedState.ofMixer (T + 1) (layer.forwardToken s depth).1 ∧
      (layer.packedStepAuto (PackedState.ofMixer T s) depth).2.2 = (layer.forwardToken s depth).2 := by
  simp only [BackboneLayer.packedStepAuto, BackboneLayer.forwardToken, BackboneLayer.sequenceInput,
    BackboneLayer.commit, Seq.memoFn_eq, BlockState.memoPartial_eq, BackboneLayer.seqInput,
    BackboneLayer.chanInput, SequenceMixer.packedStep_ofMixer _ s hs]
  exact ⟨trivial, trivial⟩

/-- **Layers with their own routing on fitting packed states are the public layers, packed.** -/
theorem LanguageModel.packedLayersAuto_pack (T : Nat) : (n : Nat) → (layers : List (BackboneLayer α c)) →
    (states : List (MixerState α c)) → StatesFit T layers states → (depth : BlockState α c.hiddenDim) →
    (LanguageModel.packedLayersAuto n layers (packStates T states) depth).1 =
        packOutputs (T + 1) (ModelList.scanLayers (fun layer s d => layer.forwardToken s d) layers states depth).2
          ((LanguageModel.packedLayersAuto n layers (packStates T states) depth).1.map Prod.snd) ∧
      (LanguageModel.packedLayersAuto n layers (packStates T states) depth).2 =
        (ModelList.scanLayers (fun layer s d => layer.forwardToken s d) layers states depth).1
  | _, [], [], _, _ => ⟨rfl, rfl⟩
  | n, layer :: layers, s :: states, hfit, depth => by
    obtain ⟨h1, h2⟩ := layer.packedStepAuto_ofMixer s hfit.1 depth
    have ih := LanguageModel.packedLayersAuto_pack T (n + 1) layers states hfit.2 (layer.forwardToken s depth).2
    simp only [LanguageModel.packedLayersAuto, packStates, ModelList.scanLayers, List.map_cons, packOutputs]
    rw [h2, h1]
    exact ⟨by rw [← ih.1], ih.2⟩
  | _, [], _ :: _, hfit, _ => hfit.elim
  | _, _ :: _, [], hfit, _ => hfit.elim

/-- **The packed token step with own routing on the packed public state is the public token
step** (k3-spec §4 rung 04): the same logits, and the new packed states are the packing of the
public ones (with the router scores the step computed). -/
theorem LanguageModel.packedStepAuto_pack (model : LanguageModel α c) (T : Nat) (states : List (MixerState α c))
    (hfit : StatesFit T model.layers states) (x : Tensor α [c.hiddenDim]) :
    model.packedStepAuto (packStates T states) x =
      (packOutputs (T + 1) (model.stepEmbedded states x).1
          ((model.packedStepAuto (packStates T states) x).1.map Prod.snd),
        (model.stepEmbedded states x).2) := by
  have h := LanguageModel.packedLayersAuto_pack T 1 model.layers states hfit (BlockState.initial x)
  simp only [LanguageModel.packedStepAuto, LanguageModel.stepEmbedded, LanguageModel.layersToken]
  rw [← h.1, h.2]

/-- The initial public state fits every layer with no past tokens. -/
theorem LanguageModel.initialState_fits (model : LanguageModel α c) : StatesFit 0 model.layers model.initialState := by
  simp only [LanguageModel.initialState]
  induction model.layers with
  | nil => exact trivial
  | cons layer layers ih =>
    refine ⟨?_, ih⟩
    cases h : layer.sequence <;> simp [SequenceMixer.initialState, MixerState.Fits, h]

/-- One public step keeps the states fitting, one more past token. -/
theorem LanguageModel.stepEmbedded_fits (model : LanguageModel α c) (T : Nat) (states : List (MixerState α c))
    (hfit : StatesFit T model.layers states) (x : Tensor α [c.hiddenDim]) :
    StatesFit (T + 1) model.layers (model.stepEmbedded states x).1 := by
  simp only [LanguageModel.stepEmbedded, LanguageModel.layersToken]
  generalize BlockState.initial x = depth
  generalize model.layers = layers at hfit ⊢
  induction layers generalizing states depth with
  | nil => cases states <;> simp_all [StatesFit, ModelList.scanLayers]
  | cons layer layers ih =>
    cases states with
    | nil => exact hfit.elim
    | cons s states =>
      refine ⟨?_, ih states _ hfit.2⟩
      have hs := hfit.1
      simp only [BackboneLayer.forwardToken]
      cases hseq : layer.sequence <;> rw [hseq] at hs <;> cases s <;> simp only [MixerState.Fits] at hs
      · simp [SequenceMixer.step, MixerState.Fits]
      · simp [SequenceMixer.step, MixerState.Fits, GatedMLA.step_cache_length, hs]

/-- After `T` tokens from the initial state every layer's public state fits it. -/
theorem LanguageModel.run_statesFit (model : LanguageModel α c) (tokens : List (Fin c.vocabSize)) :
    StatesFit tokens.length model.layers (model.run model.initialState tokens).1 := by
  suffices h : ∀ (T : Nat) (s : State α c), StatesFit T model.layers s →
      StatesFit (T + tokens.length) model.layers (model.run s tokens).1 by
    simpa using h 0 model.initialState model.initialState_fits
  induction tokens with
  | nil => intro T s hs; simpa [LanguageModel.run, CausalScan.run] using hs
  | cons t ts ih =>
    intro T s hs
    have := ih (T + 1) _ (model.stepEmbedded_fits T s hs (model.embed t))
    simp only [LanguageModel.run, CausalScan.run, List.length_cons] at this ⊢
    rw [show T + (ts.length + 1) = T + 1 + ts.length by omega]
    exact this

end Laws

namespace Decoder

section Graph

variable {α : Type} [OrderedScalarField α] (c : Config)

/-- The packed public states have one entry per layer. -/
theorem packStates_length {T : Nat} : (states : List (MixerState α c)) → (packStates T states).length = states.length
  | [] => rfl
  | _ :: states => by simp [packStates, packStates_length states]

omit [OrderedScalarField α] in
theorem StatesFit.length {T : Nat} : (layers : List (BackboneLayer α c)) → (states : List (MixerState α c)) →
    StatesFit T layers states → states.length = layers.length
  | [], [], _ => rfl
  | _ :: layers, _ :: states, h => by simp [StatesFit.length layers states h.2]
  | [], _ :: _, h => h.elim
  | _ :: _, [], h => h.elim

/-- **The graph on the packed public state computes the public token step** (k3-spec §4 rung
04 with rung 05's runtime top-k): for every configuration, every model following it, every
public state fitting its layers after `T` tokens, every embedding row, and staged routes that
pass the route checker on the graph's own router scores, the graph's outputs are the public
step's logits and the packing of its new state (with the router scores). -/
theorem program_eval_step (model : LanguageModel α c) (hm : model.Conforms) (T : Nat)
    (routes : Nat → Fin c.activeExperts → Fin c.numRoutedExperts) (states : List (MixerState α c))
    (hfit : StatesFit T model.layers states) (x : Tensor α [c.hiddenDim])
    (hpass : LanguageModel.RoutesPass c routes 1 (model.packedStep routes (packStates T states) x).1) :
    (program c T (Scalars.of c)).eval (paramsEnv c model routes) (inputsEnv c T (packStates T states) x) =
      outputsEnv c T (packOutputs (T + 1) (model.stepEmbedded states x).1
          ((model.packedStepAuto (packStates T states) x).1.map Prod.snd),
        (model.stepEmbedded states x).2) := by
  rw [program_eval c T model hm routes _ (by rw [packStates_length, StatesFit.length c _ _ hfit, hm.length]) x,
    LanguageModel.packedStep_eq_packedStepAuto model hm routes _ x hpass]
  exact congrArg (outputsEnv c T) (LanguageModel.packedStepAuto_pack model T states hfit x)

end Graph

section Run

variable {α : Type} [ScalarLaws α] (c : Config)

/-- **The graph applied token by token gives the full-sequence logits** (k3-spec §4 rung 04,
with `LanguageModel.run_eq_logits`): at every position `t` of every token sequence, the graph
for `t` past tokens on the packed public state after the first `t` tokens, with staged routes
that pass the checker on its own router scores, outputs the model's full-sequence logits at
`t`. -/
theorem program_eval_run (model : LanguageModel α c) (hm : model.Conforms) (tokens : List (Fin c.vocabSize))
    (t : Nat) (ht : t < tokens.length) (routes : Nat → Fin c.activeExperts → Fin c.numRoutedExperts)
    (hpass : LanguageModel.RoutesPass c routes 1
      (model.packedStep routes (packStates t (model.run model.initialState (tokens.take t)).1)
        (model.embed (tokens[t]'ht))).1) :
    Env.head ((program c t (Scalars.of c)).eval (paramsEnv c model routes)
        (inputsEnv c t (packStates t (model.run model.initialState (tokens.take t)).1) (model.embed (tokens[t]'ht)))) =
      (model.logits tokens)[t]'(by rw [← LanguageModel.run_eq_logits, LanguageModel.run_length]; exact ht) := by
  have hlen : (tokens.take t).length = t := by simp; omega
  have hfit := model.run_statesFit (tokens.take t)
  rw [hlen] at hfit
  rw [program_eval_step c model hm t routes _ hfit _ hpass]
  simp only [outputsEnv, Env.head]
  -- the run over the first `t` tokens, then the step on token `t`
  have hsplit : tokens = tokens.take t ++ (tokens[t]'ht :: tokens.drop (t + 1)) := by
    simp
  have hrun := LanguageModel.run_append model model.initialState (tokens.take t) (tokens[t]'ht :: tokens.drop (t + 1))
  rw [← hsplit] at hrun
  simp only [← LanguageModel.run_eq_logits, hrun]
  simp only [LanguageModel.run, CausalScan.run, LanguageModel.step]
  rw [List.getElem_append_right (by rw [CausalScan.outputs_length]; omega)]
  simp [CausalScan.outputs_length, hlen]

end Run

end Decoder

end KimiK3
