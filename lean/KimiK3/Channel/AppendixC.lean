module

public import KimiK3.Channel.Quantile

/-!
# The App. C Eq. 24 counterexample and the tie example (report App. C)

* `appendixC_counterexample`: margins `{1, 0}`, target load `k = 1`. θ = 1 minimizes
  `F_1` (every θ ∈ [0, 1] does), yet no margin lies strictly above 1: the strict count is 0 ≠ 1.
  So Eq. 24's "minimized exactly when k margins lie above θ" is false as stated;
  `coordinateObjective_minimum_iff` is the corrected form.
* `appendixC_report_choice`: the report's own choice θ = 0 is a minimizer with strict count 1.
* `tie_example`: margins `{0, 0}`, `k = 1`: θ = 0 minimizes `F_1`, yet no threshold θ has
  strict count exactly 1 — the router needs a tie-breaking rule.
-/

@[expose] public section

namespace KimiK3

namespace QuantileBalancing

variable {α : Type} [OrderedScalarField α]

/-- The margins `{1, 0}` of the App. C counterexample. -/
def cexMargins : Fin 2 → α := fun i => if i.val = 0 then 1 else 0

/-- **App. C Eq. 24 counterexample.** For margins `{1, 0}` and `k = 1`, θ = 1 minimizes the
coordinate objective while its strict count is 0 (not `k`). -/
theorem appendixC_counterexample :
    (∀ c, coordinateObjective (1 : α) cexMargins 1 ≤ coordinateObjective 1 cexMargins c) ∧
      exceedanceCount (cexMargins (α := α)) 1 = 0 := by
  have h0 := zero_lt_one' (α := α)
  have hS : exceedanceCount (cexMargins (α := α)) 1 = 0 := by
    unfold exceedanceCount
    apply finCount_eq_zero; intro i
    apply decide_eq_false; unfold cexMargins; split <;> grind
  have hW : atLeastCount (cexMargins (α := α)) 1 = 1 := by
    have a : ¬ (1 : α) ≤ 0 := by grind
    have b : (1 : α) ≤ 1 := by grind
    simp [atLeastCount, finCount, cexMargins, a, b]
  refine ⟨(coordinateObjective_minimum_iff _ _ _).mpr ⟨?_, ?_⟩, hS⟩
  · rw [hS]; (first | grind | (rw [Lean.Grind.Semiring.natCast_zero]; grind) | (rw [Lean.Grind.Semiring.natCast_one]; grind) | (rw [Lean.Grind.Semiring.natCast_ofNat]; grind) | (simp only [Lean.Grind.Semiring.natCast_zero, Lean.Grind.Semiring.natCast_one, Lean.Grind.Semiring.natCast_ofNat]; grind))
  · rw [hW]; (first | grind | (rw [Lean.Grind.Semiring.natCast_zero]; grind) | (rw [Lean.Grind.Semiring.natCast_one]; grind) | (rw [Lean.Grind.Semiring.natCast_ofNat]; grind) | (simp only [Lean.Grind.Semiring.natCast_zero, Lean.Grind.Semiring.natCast_one, Lean.Grind.Semiring.natCast_ofNat]; grind))

/-- The uncorrected Eq. 24 claim ("a minimizer has exactly `k` margins strictly above it") is
false. -/
theorem appendixC_eq24_false :
    ¬ ∀ θ : α, (∀ c, coordinateObjective (1 : α) cexMargins θ ≤ coordinateObjective 1 cexMargins c) →
      exceedanceCount (cexMargins (α := α)) θ = 1 := by
  intro h
  have := h 1 appendixC_counterexample.1
  rw [appendixC_counterexample.2] at this
  exact absurd this (by decide)

/-- The report's own choice θ = 0 is a minimizer for margins `{1, 0}`, `k = 1`, with strict
count exactly 1, so the balancing update itself is not wrong. -/
theorem appendixC_report_choice :
    (∀ c, coordinateObjective (1 : α) cexMargins 0 ≤ coordinateObjective 1 cexMargins c) ∧
      exceedanceCount (cexMargins (α := α)) 0 = 1 := by
  have h0 := zero_lt_one' (α := α)
  have hS : exceedanceCount (cexMargins (α := α)) 0 = 1 := by
    have a : ¬ (0 : α) < 0 := by grind
    simp [exceedanceCount, finCount, cexMargins, a, h0]
  have hW : atLeastCount (cexMargins (α := α)) 0 = 2 := by
    have a : (0 : α) ≤ 0 := by grind
    have b : (0 : α) ≤ 1 := by grind
    simp [atLeastCount, finCount, cexMargins, a, b]
  refine ⟨(coordinateObjective_minimum_iff _ _ _).mpr ⟨?_, ?_⟩, hS⟩
  · rw [hS]; (first | grind | (rw [Lean.Grind.Semiring.natCast_zero]; grind) | (rw [Lean.Grind.Semiring.natCast_one]; grind) | (rw [Lean.Grind.Semiring.natCast_ofNat]; grind) | (simp only [Lean.Grind.Semiring.natCast_zero, Lean.Grind.Semiring.natCast_one, Lean.Grind.Semiring.natCast_ofNat]; grind))
  · rw [hW]; (first | grind | (rw [Lean.Grind.Semiring.natCast_zero]; grind) | (rw [Lean.Grind.Semiring.natCast_one]; grind) | (rw [Lean.Grind.Semiring.natCast_ofNat]; grind) | (simp only [Lean.Grind.Semiring.natCast_zero, Lean.Grind.Semiring.natCast_one, Lean.Grind.Semiring.natCast_ofNat]; grind))

/-- The tied margins `{0, 0}`. -/
def tieMargins : Fin 2 → α := fun _ => 0

/-- **Tie example.** For margins `{0, 0}` and `k = 1`, θ = 0 minimizes the coordinate objective
(`0 ≤ 1 ≤ 2`), yet no threshold has strict count exactly 1. -/
theorem tie_example :
    (∀ c, coordinateObjective (1 : α) tieMargins 0 ≤ coordinateObjective 1 tieMargins c) ∧
      ∀ θ : α, exceedanceCount (tieMargins (α := α)) θ ≠ 1 := by
  have h0 := zero_lt_one' (α := α)
  constructor
  · apply (coordinateObjective_minimum_iff _ _ _).mpr
    have hS : exceedanceCount (tieMargins (α := α)) 0 = 0 :=
      finCount_eq_zero (fun _ => decide_eq_false (by unfold tieMargins; grind))
    have hW : atLeastCount (tieMargins (α := α)) 0 = 2 :=
      finCount_eq_self (fun _ => decide_eq_true (by unfold tieMargins; grind))
    rw [hS, hW]; constructor <;> (first | grind | (rw [Lean.Grind.Semiring.natCast_zero]; grind) | (rw [Lean.Grind.Semiring.natCast_one]; grind) | (rw [Lean.Grind.Semiring.natCast_ofNat]; grind) | (simp only [Lean.Grind.Semiring.natCast_zero, Lean.Grind.Semiring.natCast_one, Lean.Grind.Semiring.natCast_ofNat]; grind))
  · intro θ
    rcases lt_or_le' θ 0 with h | h
    · rw [exceedanceCount, finCount_eq_self (fun _ => decide_eq_true (by unfold tieMargins; grind))]
      decide
    · rw [exceedanceCount, finCount_eq_zero (fun _ => decide_eq_false (by unfold tieMargins; grind))]
      decide

end QuantileBalancing

end KimiK3
