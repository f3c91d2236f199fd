module

public import KimiK3.Core.MatMul
public import KimiK3.Channel.Route
public import KimiK3.Core.ScalarFacts

/-!
# The router: scores, bias-adjusted selection, mixture weights (report §2.3, Eq. 12–13)

* raw scores `s_e = σ((x R)_e)` with router weight `R : [d, E]` (`scores`);
* bias-adjusted scores `a_e = s_e + b_e` (Eq. 13), used **only for selection** (`adjusted`);
* the route: top-k of the adjusted scores with the tie rule of `Routing.Beats`
  (`route`, `route_isTopK`);
* mixture weights from the **raw** scores renormalized over the chosen experts:
  `w_i = s_{e_i} / Σ_j s_{e_j}` (`mixtureWeights`); they are nonnegative and sum to one
  (`mixtureWeights_nonneg`, `finSum_mixtureWeights`) and do not depend on the bias except
  through the route (`mixtureWeights` takes no bias).
-/

@[expose] public section

namespace KimiK3

namespace Router

variable {α : Type}

/-- Raw sigmoid router scores `s_e = σ((x R)_e)` (report Eq. 12). -/
@[macro_inline] def scores [Scalar α] {d E : Nat} (routerWeight : Tensor α [d, E])
    (x : Tensor α [d]) : Tensor α [E] :=
  fun e => Scalar.sigmoid (Tensor.vecMatMul x routerWeight e)

/-- Bias-adjusted scores `a_e = s_e + b_e` (report Eq. 13), used only to select experts. -/
@[macro_inline] def adjusted [Scalar α] {E : Nat} (rawScores bias : Tensor α [E]) : Tensor α [E] :=
  fun e => rawScores e + bias e

/-- The route: top-`k` experts of the adjusted scores, ties to the lowest index
(report §2.3, `StableLatentMoE.route`). -/
@[macro_inline] def route [Scalar α] {E k : Nat} (rawScores bias : Tensor α [E]) (hk : k ≤ E) :
    Fin k → Fin E :=
  Routing.topKSlots (adjusted rawScores bias) hk

/-- Mixture weights from the **raw** scores renormalized over the chosen experts:
`w_i = s_{e_i} / Σ_j s_{e_j}` (report §2.3; spec §2.7). -/
@[macro_inline] def mixtureWeights [Scalar α] {E k : Nat} (rawScores : Tensor α [E])
    (slot : Fin k → Fin E) : Tensor α [k] :=
  fun i => rawScores (slot i) / finSum k (fun j => rawScores (slot j))

section Laws

variable [OrderedScalarField α]

/-- The route is a top-k of the adjusted scores (report `route_isTopK`). -/
theorem route_isTopK {E k : Nat} (rawScores bias : Tensor α [E]) (hk : k ≤ E) :
    Routing.IsTopK (adjusted rawScores bias) (route rawScores bias hk) :=
  Routing.topKSlots_isTopK _ hk

/-- The route never repeats an expert. -/
theorem route_injective {E k : Nat} (rawScores bias : Tensor α [E]) (hk : k ≤ E) (i j : Fin k)
    (h : route rawScores bias hk i = route rawScores bias hk j) : i = j :=
  Routing.topKSlots_injective _ hk i j h

/-- The route as a `Route` (injective slots). -/
@[macro_inline] def routeOf {E k : Nat} (rawScores bias : Tensor α [E]) (hk : k ≤ E) : Routing.Route E k :=
  Routing.chooseTopK (adjusted rawScores bias) hk

/-- Mixture weights are nonnegative when the raw scores are positive. -/
theorem mixtureWeights_nonneg {E k : Nat} {rawScores : Tensor α [E]} (hpos : ∀ e, 0 < rawScores e)
    (slot : Fin k → Fin E) (i : Fin k) : 0 ≤ mixtureWeights rawScores slot i := by
  unfold mixtureWeights
  have hsum : 0 < finSum k (fun j => rawScores (slot j)) := by
    have := le_finSum (n := k) (f := fun j => rawScores (slot j))
      (fun j => Std.le_of_lt (hpos (slot j))) i
    have := hpos (slot i); grind
  exact Std.le_of_lt (div_pos' (hpos _) hsum)

/-- Mixture weights sum to one (for `k > 0` and positive raw scores). -/
theorem finSum_mixtureWeights {E k : Nat} {rawScores : Tensor α [E]} (hpos : ∀ e, 0 < rawScores e)
    (slot : Fin (k + 1) → Fin E) : finSum (k + 1) (mixtureWeights rawScores slot) = 1 := by
  unfold mixtureWeights
  rw [finSum_div]
  have : 0 < finSum (k + 1) (fun j => rawScores (slot j)) := finSum_pos (fun j => hpos (slot j))
  have hne : finSum (k + 1) (fun j => rawScores (slot j)) ≠ 0 := by grind
  grind

/-- **Bias centering** (report App. D; spec `centerBias_score_ge_iff`): subtracting a common
constant from every score (e.g. the mean bias) does not change who beats whom. -/
theorem centerBias_beats_iff {E : Nat} (score : Fin E → α) (c : α) (a b : Fin E) :
    Routing.Beats (fun e => score e - c) a b ↔ Routing.Beats score a b := by
  unfold Routing.Beats; grind

/-- Centering does not change the top-k property (spec `centerBias_isTopK_iff`). -/
theorem centerBias_isTopK_iff {E k : Nat} (score : Fin E → α) (c : α) (slot : Fin k → Fin E) :
    Routing.IsTopK (fun e => score e - c) slot ↔ Routing.IsTopK score slot := by
  unfold Routing.IsTopK; simp only [centerBias_beats_iff]

/-- Centering does not change ranks. -/
theorem centerBias_rank {E : Nat} (score : Fin E → α) (c : α) :
    Routing.rank (fun e => score e - c) = Routing.rank score := by
  funext e; unfold Routing.rank
  exact finCount_congr (fun x => decide_eq_decide.mpr (centerBias_beats_iff score c x e))

/-- Centering does not change the computed route. -/
theorem centerBias_topKSlots {E k : Nat} (score : Fin E → α) (c : α) (hk : k ≤ E) :
    Routing.topKSlots (fun e => score e - c) hk = Routing.topKSlots score hk := by
  funext i; unfold Routing.topKSlots Routing.expertOfRank; rw [centerBias_rank]

end Laws

section ScalarLawsSection

variable [ScalarLaws α]

/-- Raw sigmoid scores are positive. -/
theorem scores_pos {d E : Nat} (routerWeight : Tensor α [d, E]) (x : Tensor α [d]) (e : Fin E) :
    0 < scores routerWeight x e := sigmoid_pos _

end ScalarLawsSection

end Router

end KimiK3
