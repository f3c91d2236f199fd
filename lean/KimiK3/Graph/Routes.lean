module

public import KimiK3.Graph.PackedModel
public import KimiK3.Channel.TopKUnique
public import KimiK3.Sequence.KernelLemmas
public import KimiK3.Model.Streaming

/-!
# Routes at runtime: top-k outside the graph, checked (k3-spec §4 rung 05 "runtime top-k")

The decoder graph takes every MoE layer's route as staged parameters. This file proves that a
staged route that passes the route checker on the graph's own router scores gives the model
with its own routing:

* **slot-order invariance**: `StableLatentMoE.forward` depends on a route only through how many
  slots hold each expert (`forward_eq_of_slotCount`); two injective routes with the same experts
  give the same output in any slot order (`forward_eq_of_same_experts`);
* `forward_eq_forwardAuto_of_checkRoute`: a route accepted by `Routing.checkRoute` on the
  layer's bias-adjusted scores gives `forwardAuto`;
* `BackboneLayer.packedStepAuto`, `LanguageModel.packedStepAuto`: the packed step with every
  MoE layer routing itself (`ChannelMixer.forward`, the public channel mixer);
* `LanguageModel.RoutesPass`: every MoE layer's staged route passes the checker on the router
  scores the packed step outputs (exactly the graph's `router_scores` outputs, by
  `Decoder.program_eval`); **`LanguageModel.packedStep_eq_packedStepAuto`**: then the staged
  step is the auto-routed step;
* the checker at `Float` on lists, for a runtime: `Routing.checkRouteF` (`Channel/RouteCheck.lean`,
  `checkRouteF_ofFn`: it is `Routing.checkRoute` on the lists' functions).
-/

@[expose] public section

namespace KimiK3

/-! ## Slot-order invariance -/

namespace StableLatentMoE

variable {α : Type} {d l hs hr S E k : Nat}

/-- How many slots of a route hold expert `e`. -/
noncomputable def slotCount [Scalar α] (route : Fin k → Fin E) (e : Fin E) : α :=
  finSum k (fun i => if route i = e then 1 else 0)

section Field

variable [ScalarField α]

/-- A sum over a route's slots is a sum over experts weighted by their slot counts. -/
theorem finSum_route (route : Fin k → Fin E) (f : Fin E → α) :
    finSum k (fun i => f (route i)) = finSum E (fun e => slotCount route e * f e) := by
  have h : ∀ i, f (route i) = finSum E (fun e => (if e = route i then 1 else 0) * f e) :=
    fun i => (finSum_delta_mul E (route i) f).symm
  rw [finSum_congr h, finSum_comm]
  apply finSum_congr
  intro e
  rw [slotCount, ← finSum_mul_right]
  apply finSum_congr
  intro i
  by_cases he : e = route i
  · subst he; simp
  · have : ¬ route i = e := fun h => he h.symm
    simp [he, this]

/-- **Slot-order invariance**: two routes with the same number of slots per expert give the
same layer output. -/
theorem forward_eq_of_slotCount (moe : StableLatentMoE α d l hs hr S E) (r₁ r₂ : Fin k → Fin E)
    (h : ∀ e, slotCount (α := α) r₁ e = slotCount r₂ e) (gateCap upCap : α) (x : Tensor α [d]) :
    moe.forward r₁ gateCap upCap x = moe.forward r₂ gateCap upCap x := by
  have hsum : ∀ (f : Fin E → α), finSum k (fun i => f (r₁ i)) = finSum k (fun i => f (r₂ i)) := by
    intro f
    rw [finSum_route, finSum_route]
    exact finSum_congr (fun e => by rw [h e])
  have hagg : moe.routedAggregate r₁ gateCap upCap x = moe.routedAggregate r₂ gateCap upCap x := by
    funext c
    simp only [routedAggregate, Router.mixtureWeights]
    rw [hsum (fun e => moe.rawScores x e)]
    exact hsum (fun e => moe.routedScale * (moe.rawScores x e / finSum k (fun j => moe.rawScores x (r₂ j))) *
      (moe.routed e).forward gateCap upCap (Tensor.vecMatMul x moe.downProject) c)
  simp only [forward, hagg]

/-- An injective route holds each of its experts in exactly one slot. -/
theorem slotCount_of_injective (route : Fin k → Fin E) (hinj : ∀ i j, route i = route j → i = j)
    (e : Fin E) : slotCount (α := α) route e = if ∃ i, route i = e then 1 else 0 := by
  by_cases h : ∃ i, route i = e
  · obtain ⟨i₀, hi₀⟩ := h
    simp only [show ∃ i, route i = e from ⟨i₀, hi₀⟩, if_true, slotCount]
    have : ∀ i, (if route i = e then (1 : α) else 0) = (if i = i₀ then 1 else 0) * 1 := by
      intro i
      by_cases hi : i = i₀
      · subst hi; simp [hi₀]; grind
      · have : ¬ route i = e := fun h' => hi (hinj i i₀ (h'.trans hi₀.symm))
        simp [hi, this]; grind
    rw [finSum_congr this, finSum_delta_mul k i₀ (fun _ => (1 : α))]
  · simp only [h, if_false, slotCount]
    have : ∀ i, (if route i = e then (1 : α) else 0) = 0 := fun i => by
      have : ¬ route i = e := fun h' => h ⟨i, h'⟩
      simp [this]
    rw [finSum_congr this, finSum_const_zero]

/-- **Two injective routes with the same experts give the same output**, in any slot order. -/
theorem forward_eq_of_same_experts (moe : StableLatentMoE α d l hs hr S E) (r₁ r₂ : Fin k → Fin E)
    (h₁ : ∀ i j, r₁ i = r₁ j → i = j) (h₂ : ∀ i j, r₂ i = r₂ j → i = j)
    (hsame : ∀ e, (∃ i, r₁ i = e) ↔ (∃ i, r₂ i = e)) (gateCap upCap : α) (x : Tensor α [d]) :
    moe.forward r₁ gateCap upCap x = moe.forward r₂ gateCap upCap x :=
  moe.forward_eq_of_slotCount r₁ r₂ (fun e => by
    rw [slotCount_of_injective r₁ h₁, slotCount_of_injective r₂ h₂]
    by_cases h : ∃ i, r₁ i = e
    · simp [h, (hsame e).mp h]
    · have h' : ¬ ∃ i, r₂ i = e := fun h' => h ((hsame e).mpr h')
      simp only [h, h', if_false]) gateCap upCap x

end Field

/-- **A checked route gives the layer with its own routing**: if the staged route passes the
checker on the layer's bias-adjusted scores at `x`, the layer on that route is `forwardAuto`
(the same experts as top-k, slot order irrelevant). -/
theorem forward_eq_forwardAuto_of_checkRoute [OrderedScalarField α] (moe : StableLatentMoE α d l hs hr S E)
    (hk : k ≤ E) (route : Fin k → Fin E) (x : Tensor α [d]) (gateCap upCap : α)
    (h : Routing.checkRoute (moe.adjustedRouterScores x) route = true) :
    moe.forward route gateCap upCap x = moe.forwardAuto hk gateCap upCap x :=
  moe.forward_eq_of_same_experts route (moe.route hk x) ((Routing.checkRoute_iff _ _).mp h).1
    (Routing.topKSlots_injective _ hk) (Routing.checkRoute_same_experts _ hk route h) gateCap upCap x

end StableLatentMoE

/-! ## The auto-routed packed step -/

noncomputable section

variable {α : Type} [Scalar α] {c : Config} {T : Nat}

namespace BackboneLayer

/-- **One packed layer step with the layer's own routing** (`ChannelMixer.forward`: dense, or
LatentMoE top-k): as `packedStep`, the channel mixer choosing its own route. -/
def packedStepAuto (layer : BackboneLayer α c) (s : PackedState α c T) (depth : BlockState α c.hiddenDim) :
    PackedState α c (T + 1) × Tensor α [c.numRoutedExperts] × BlockState α c.hiddenDim :=
  let r := layer.sequence.packedStep s (layer.seqInput depth)
  let chanIn := layer.chanInput depth r.2
  (r.1, layer.channel.routerScores chanIn, depth.finishLayer c.attnResBlockSize r.2 (layer.channel.forward chanIn))

end BackboneLayer

namespace LanguageModel

/-- Layers `n, n + 1, …` on packed states, each routing itself. -/
def packedLayersAuto : Nat → List (BackboneLayer α c) → List (PackedState α c T) → BlockState α c.hiddenDim →
    List (PackedState α c (T + 1) × Tensor α [c.numRoutedExperts]) × BlockState α c.hiddenDim
  | n, layer :: layers, s :: states, depth =>
    let r := layer.packedStepAuto s depth
    let rest := packedLayersAuto (n + 1) layers states r.2.2
    ((r.1, r.2.1) :: rest.1, rest.2)
  | _, _, _, depth => ([], depth)

/-- **The packed token step with every MoE layer routing itself.** -/
def packedStepAuto (model : LanguageModel α c) (states : List (PackedState α c T)) (x : Tensor α [c.hiddenDim]) :
    List (PackedState α c (T + 1) × Tensor α [c.numRoutedExperts]) × Tensor α [c.vocabSize] :=
  let r := packedLayersAuto 1 model.layers states (BlockState.initial x)
  (r.1, model.readout r.2)

/-- **The staged routes pass the checker** on the router scores of the layers' outputs `os`
(layers `n, n + 1, …`): each MoE layer's route (`routes n`) is accepted by `Routing.checkRoute`
on that layer's output scores. -/
def RoutesPass (c : Config) (routes : Nat → Fin c.activeExperts → Fin c.numRoutedExperts) :
    Nat → List (PackedState α c (T + 1) × Tensor α [c.numRoutedExperts]) → Prop
  | _, [] => True
  | n, o :: os => (c.isMoE n = true → Routing.checkRoute o.2 (routes n) = true) ∧ RoutesPass c routes (n + 1) os

end LanguageModel

end

section Checked

variable {α : Type} [OrderedScalarField α] {c : Config} {T : Nat}

/-- A layer step on a route accepted by the checker on its router scores is the auto-routed
step. -/
theorem BackboneLayer.packedStep_eq_packedStepAuto (layer : BackboneLayer α c) (n : Nat) (hl : layer.Conforms n)
    (route : Fin c.activeExperts → Fin c.numRoutedExperts) (s : PackedState α c T) (depth : BlockState α c.hiddenDim)
    (h : c.isMoE n = true → Routing.checkRoute (layer.packedStep route s depth).2.1 route = true) :
    layer.packedStep route s depth = layer.packedStepAuto s depth := by
  have hch := hl.channel
  unfold BackboneLayer.packedStep at h ⊢
  unfold BackboneLayer.packedStepAuto
  dsimp only at h ⊢
  generalize layer.chanInput depth (layer.sequence.packedStep s (layer.seqInput depth)).2 = x at h ⊢
  generalize layer.channel = ch at hch h ⊢
  cases ch with
  | dense e => rfl
  | moe m hA =>
    cases hmoe : c.isMoE n
    · rw [hmoe] at hch; cases hch
    · simp only [ChannelMixer.routerScores] at h
      simp only [ChannelMixer.forwardRouted, ChannelMixer.forward_moe,
        StableLatentMoE.forward_eq_forwardAuto_of_checkRoute m hA route _ _ _ (h (by simp [hmoe]))]

/-- **A checked staged step is the auto-routed step** (k3-spec §4 rung 05, runtime top-k):
if every MoE layer's staged route passes the checker on the router scores the step outputs,
the packed step on the staged routes is the packed step with every layer routing itself. -/
theorem LanguageModel.packedLayers_eq_packedLayersAuto (routes : Nat → Fin c.activeExperts → Fin c.numRoutedExperts) :
    (n : Nat) → (layers : List (BackboneLayer α c)) → (states : List (PackedState α c T)) →
    (depth : BlockState α c.hiddenDim) → LanguageModel.LayersConform n layers →
    LanguageModel.RoutesPass c routes n (LanguageModel.packedLayers routes n layers states depth).1 →
    LanguageModel.packedLayers routes n layers states depth = LanguageModel.packedLayersAuto n layers states depth
  | n, layer :: layers, s :: states, depth, hc, hp => by
    simp only [LanguageModel.packedLayers, LanguageModel.RoutesPass] at hp
    have h1 := layer.packedStep_eq_packedStepAuto n hc.1 (routes n) s depth hp.1
    simp only [LanguageModel.packedLayers, LanguageModel.packedLayersAuto]
    rw [h1] at hp ⊢
    rw [LanguageModel.packedLayers_eq_packedLayersAuto routes (n + 1) layers states _ hc.2 hp.2]
  | _, [], _, _, _, _ => by simp [LanguageModel.packedLayers, LanguageModel.packedLayersAuto]
  | _, _ :: _, [], _, _, _ => by simp [LanguageModel.packedLayers, LanguageModel.packedLayersAuto]

/-- **A checked staged token step is the auto-routed token step.** -/
theorem LanguageModel.packedStep_eq_packedStepAuto (model : LanguageModel α c) (hm : model.Conforms)
    (routes : Nat → Fin c.activeExperts → Fin c.numRoutedExperts) (states : List (PackedState α c T))
    (x : Tensor α [c.hiddenDim]) (hp : LanguageModel.RoutesPass c routes 1 (model.packedStep routes states x).1) :
    model.packedStep routes states x = model.packedStepAuto states x := by
  simp only [LanguageModel.packedStep, LanguageModel.packedStepAuto] at hp ⊢
  rw [LanguageModel.packedLayers_eq_packedLayersAuto routes 1 model.layers states _ hm.layers hp]

end Checked

end KimiK3
