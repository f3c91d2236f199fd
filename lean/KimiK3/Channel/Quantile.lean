module

public import KimiK3.Channel.Count
public import KimiK3.Core.ScalarFacts

/-!
# Quantile Balancing (report §2.3.3, App. C–D, Eq. 24)

For one expert, token `i` has margin `m_i = rawScore_i − cutoff_i`. With a target load `k`
(any scalar: fractional loads are allowed) the coordinate (dual) objective is

`F_k(θ) = k·θ + Σ_i max(0, m_i − θ)`  (`coordinateObjective`).

Main result, `coordinateObjective_minimum_iff`: θ minimizes `F_k` **iff**
`exceedanceCount m θ ≤ k ≤ atLeastCount m θ`, where `exceedanceCount` counts `m_i > θ`
(strict) and `atLeastCount` counts `m_i ≥ θ` (weak). Ties are allowed. The proof uses only
finite hinge inequalities: no derivatives, no limits.

This is the corrected form of App. C Eq. 24 ("F is minimized exactly when k margins lie above
θ"): `appendixC_counterexample` (margins {1, 0}, k = 1: θ = 1 minimizes F while its strict count
is 0) shows the uncorrected claim is false. `routedTokenCount_neg_eq`: bias `−θ` routes exactly
the target load when θ is an exact quantile.
-/

@[expose] public section

namespace KimiK3

namespace QuantileBalancing

variable {α : Type}

/-- The hinge `max(0, x)` of the coordinate objective (App. C Eq. 24). -/
def hinge [Scalar α] (x : α) : α := max 0 x

/-- Strict count `#{i | m_i > θ}` (App. C): the tokens routed by bias `−θ`. -/
def exceedanceCount [Scalar α] {n : Nat} (margins : Fin n → α) (θ : α) : Nat :=
  finCount n (fun i => decide (θ < margins i))

/-- Weak count `#{i | m_i ≥ θ}` (App. C). -/
def atLeastCount [Scalar α] {n : Nat} (margins : Fin n → α) (θ : α) : Nat :=
  finCount n (fun i => decide (θ ≤ margins i))

/-- The coordinate (dual) objective `F_k(θ) = k·θ + Σ_i max(0, m_i − θ)` (App. C Eq. 24,
reconstructed). `macro_inline`: generic code calling Core's generic `finSum` compiles only
when inlined at a concrete scalar type (see Core's `Kernel`). -/
@[macro_inline] def coordinateObjective [Scalar α] {n : Nat} (targetLoad : α) (margins : Fin n → α) (θ : α) :
    α :=
  targetLoad * θ + finSum n (fun i => hinge (margins i - θ))

/-- The number of tokens routed to the expert with bias `b`: `#{i | cutoff_i < rawScore_i + b}`
(strict, App. C's routing convention, report §2.3.3). -/
def routedTokenCount [Scalar α] {n : Nat} (rawScore cutoff : Fin n → α) (bias : α) : Nat :=
  finCount n (fun i => decide (cutoff i < rawScore i + bias))

/-- θ is an exact target quantile: exactly `targetLoad` margins lie strictly above θ (App. C).
Ties at θ are excluded, following App. C's routing convention. -/
def IsExactTargetQuantile [Scalar α] {n : Nat} (targetLoad : Nat) (margins : Fin n → α) (θ : α) :
    Prop :=
  exceedanceCount margins θ = targetLoad

section Ordered

variable [OrderedScalarField α]

theorem hinge_eq_self {x : α} (h : 0 ≤ x) : hinge x = x := by
  unfold hinge; rw [OrderedScalarField.max_def]; split <;> grind

theorem hinge_eq_zero {x : α} (h : x ≤ 0) : hinge x = 0 := by
  unfold hinge; rw [OrderedScalarField.max_def]; split <;> grind

theorem hinge_nonneg (x : α) : 0 ≤ hinge x := le_max_left' 0 x

theorem le_hinge (x : α) : x ≤ hinge x := le_max_right' 0 x

/-- Hinge inequality (used to the right of θ, `θ ≤ c`; it holds for every `c`):
`max(0, m − c) ≥ max(0, m − θ) − (c − θ)·[m > θ]`. -/
theorem hinge_sub_ge_right (m θ c : α) :
    hinge (m - θ) - (c - θ) * (if decide (θ < m) = true then 1 else 0) ≤ hinge (m - c) := by
  have h1 := hinge_nonneg (m - c); have h2 := le_hinge (m - c)
  by_cases h : θ < m
  · simp only [h, decide_true, if_true]; rw [hinge_eq_self (by grind)]; grind
  · simp only [h, decide_false, Bool.false_eq_true, if_false]
    rw [hinge_eq_zero (by grind)]; grind

/-- Hinge inequality (used to the left of θ, `c ≤ θ`; it holds for every `c`):
`max(0, m − c) ≥ max(0, m − θ) + (θ − c)·[m ≥ θ]`. -/
theorem hinge_sub_ge_left (m θ c : α) :
    hinge (m - θ) + (θ - c) * (if decide (θ ≤ m) = true then 1 else 0) ≤ hinge (m - c) := by
  have h1 := hinge_nonneg (m - c); have h2 := le_hinge (m - c)
  by_cases h : θ ≤ m
  · simp only [h, decide_true, if_true]; rw [hinge_eq_self (by grind)]; grind
  · simp only [h, decide_false, Bool.false_eq_true, if_false]
    rw [hinge_eq_zero (by grind)]; grind

/-- The strict count, as a scalar, is the sum of the indicator of `m_i > θ`. -/
theorem exceedanceCount_cast {n : Nat} (margins : Fin n → α) (θ : α) :
    ((exceedanceCount margins θ : Nat) : α) =
      finSum n (fun i => if decide (θ < margins i) = true then 1 else 0) :=
  natCast_finCount n _

/-- The weak count, as a scalar, is the sum of the indicator of `m_i ≥ θ`. -/
theorem atLeastCount_cast {n : Nat} (margins : Fin n → α) (θ : α) :
    ((atLeastCount margins θ : Nat) : α) =
      finSum n (fun i => if decide (θ ≤ margins i) = true then 1 else 0) :=
  natCast_finCount n _

/-- The strict count is at most the weak count (as scalars). -/
theorem exceedanceCount_cast_le_atLeastCount_cast {n : Nat} (margins : Fin n → α) (θ : α) :
    ((exceedanceCount margins θ : Nat) : α) ≤ ((atLeastCount margins θ : Nat) : α) := by
  rw [exceedanceCount_cast, atLeastCount_cast]
  apply finSum_le_finSum; intro i
  by_cases h : θ < margins i
  · have h' : θ ≤ margins i := by grind
    simp only [h, h', decide_true, if_true]; grind
  · simp only [h, decide_false, Bool.false_eq_true, if_false]; split <;> grind

/-- Sufficiency: if `strict(θ) ≤ k ≤ weak(θ)` then θ minimizes `F_k`. -/
theorem coordinateObjective_le_of_counts {n : Nat} {targetLoad : α} {margins : Fin n → α} {θ : α}
    (hStrict : ((exceedanceCount margins θ : Nat) : α) ≤ targetLoad)
    (hWeak : targetLoad ≤ ((atLeastCount margins θ : Nat) : α)) (c : α) :
    coordinateObjective targetLoad margins θ ≤ coordinateObjective targetLoad margins c := by
  unfold coordinateObjective
  rcases lt_or_le' c θ with hc | hc
  · have hsum := finSum_le_finSum (n := n)
      (f := fun i => hinge (margins i - θ) + (θ - c) * (if decide (θ ≤ margins i) = true then 1 else 0))
      (g := fun i => hinge (margins i - c)) (fun i => hinge_sub_ge_left _ _ _)
    rw [finSum_add, finSum_mul_left, ← atLeastCount_cast] at hsum
    have := mul_nonneg' (show 0 ≤ θ - c by grind)
      (show 0 ≤ ((atLeastCount margins θ : Nat) : α) - targetLoad by grind)
    grind
  · have hsum := finSum_le_finSum (n := n)
      (f := fun i => hinge (margins i - θ) - (c - θ) * (if decide (θ < margins i) = true then 1 else 0))
      (g := fun i => hinge (margins i - c)) (fun i => hinge_sub_ge_right _ _ _)
    rw [finSum_sub, finSum_mul_left, ← exceedanceCount_cast] at hsum
    have := mul_nonneg' (show 0 ≤ c - θ by grind)
      (show 0 ≤ targetLoad - ((exceedanceCount margins θ : Nat) : α) by grind)
    grind

/-- Above any θ there is a gap `δ > 0` free of margins: every margin above θ is `≥ θ + δ`. -/
theorem exists_gap_above {n : Nat} (margins : Fin n → α) (θ : α) :
    ∃ δ : α, 0 < δ ∧ ∀ i, θ < margins i → θ + δ ≤ margins i := by
  induction n with
  | zero => exact ⟨1, zero_lt_one', fun i => i.elim0⟩
  | succ n ih =>
    obtain ⟨δ, hδ, hgap⟩ := ih (fun i => margins i.castSucc)
    by_cases hx : θ < margins (Fin.last n)
    · by_cases hle : δ ≤ margins (Fin.last n) - θ
      · refine ⟨δ, hδ, fun i => Fin.lastCases (fun _ => by grind) (fun j hj => hgap j hj) i⟩
      · refine ⟨margins (Fin.last n) - θ, by grind,
          fun i => Fin.lastCases (fun _ => by grind) (fun j hj => ?_) i⟩
        have := hgap j hj; grind
    · exact ⟨δ, hδ, fun i => Fin.lastCases (fun h => absurd h hx) (fun j hj => hgap j hj) i⟩

/-- Below any θ there is a gap `δ > 0` free of margins: every margin below θ is `≤ θ − δ`. -/
theorem exists_gap_below {n : Nat} (margins : Fin n → α) (θ : α) :
    ∃ δ : α, 0 < δ ∧ ∀ i, margins i < θ → margins i ≤ θ - δ := by
  obtain ⟨δ, hδ, hgap⟩ := exists_gap_above (fun i => -margins i) (-θ)
  exact ⟨δ, hδ, fun i hi => by have := hgap i (by grind); grind⟩

/-- Necessity of the strict bound: a minimizer θ has `strict(θ) ≤ k`. -/
theorem strict_count_le_of_minimum {n : Nat} {targetLoad : α} {margins : Fin n → α} {θ : α}
    (hMin : ∀ c, coordinateObjective targetLoad margins θ ≤ coordinateObjective targetLoad margins c) :
    ((exceedanceCount margins θ : Nat) : α) ≤ targetLoad := by
  obtain ⟨δ, hδ, hgap⟩ := exists_gap_above margins θ
  have hterm : ∀ i, hinge (margins i - (θ + δ)) =
      hinge (margins i - θ) - δ * (if decide (θ < margins i) = true then 1 else 0) := by
    intro i
    by_cases h : θ < margins i
    · have := hgap i h
      simp only [h, decide_true, if_true]
      rw [hinge_eq_self (by grind), hinge_eq_self (by grind)]; grind
    · simp only [h, decide_false, Bool.false_eq_true, if_false]
      rw [hinge_eq_zero (by grind), hinge_eq_zero (by grind)]; grind
  have hc := hMin (θ + δ)
  unfold coordinateObjective at hc
  rw [finSum_congr hterm, finSum_sub, finSum_mul_left, ← exceedanceCount_cast] at hc
  exact (by
    have := nonneg_of_mul_nonneg_left' hδ
      (show 0 ≤ δ * (targetLoad - ((exceedanceCount margins θ : Nat) : α)) by grind)
    grind)

/-- Necessity of the weak bound: a minimizer θ has `k ≤ weak(θ)`. -/
theorem target_le_weak_count_of_minimum {n : Nat} {targetLoad : α} {margins : Fin n → α} {θ : α}
    (hMin : ∀ c, coordinateObjective targetLoad margins θ ≤ coordinateObjective targetLoad margins c) :
    targetLoad ≤ ((atLeastCount margins θ : Nat) : α) := by
  obtain ⟨δ, hδ, hgap⟩ := exists_gap_below margins θ
  have hterm : ∀ i, hinge (margins i - (θ - δ)) =
      hinge (margins i - θ) + δ * (if decide (θ ≤ margins i) = true then 1 else 0) := by
    intro i
    by_cases h : θ ≤ margins i
    · simp only [h, decide_true, if_true]
      rw [hinge_eq_self (by grind), hinge_eq_self (by grind)]; grind
    · have := hgap i (by grind)
      simp only [h, decide_false, Bool.false_eq_true, if_false]
      rw [hinge_eq_zero (by grind), hinge_eq_zero (by grind)]; grind
  have hc := hMin (θ - δ)
  unfold coordinateObjective at hc
  rw [finSum_congr hterm, finSum_add, finSum_mul_left, ← atLeastCount_cast] at hc
  exact (by
    have := nonneg_of_mul_nonneg_left' hδ
      (show 0 ≤ δ * (((atLeastCount margins θ : Nat) : α) - targetLoad) by grind)
    grind)

/-- **Corrected App. C Eq. 24.** θ minimizes `F_k(θ) = k·θ + Σ_i max(0, m_i − θ)` iff
`#{m_i > θ} ≤ k ≤ #{m_i ≥ θ}`; `k` may be fractional and margins may tie. -/
theorem coordinateObjective_minimum_iff {n : Nat} (targetLoad : α) (margins : Fin n → α) (θ : α) :
    (∀ c, coordinateObjective targetLoad margins θ ≤ coordinateObjective targetLoad margins c) ↔
      ((exceedanceCount margins θ : Nat) : α) ≤ targetLoad ∧
        targetLoad ≤ ((atLeastCount margins θ : Nat) : α) :=
  ⟨fun h => ⟨strict_count_le_of_minimum h, target_le_weak_count_of_minimum h⟩,
    fun h => coordinateObjective_le_of_counts h.1 h.2⟩

/-- An exact target quantile minimizes the coordinate objective (App. C). -/
theorem coordinateObjective_le_of_exact_quantile {n : Nat} {targetLoad : Nat}
    {margins : Fin n → α} {θ : α} (hQuantile : IsExactTargetQuantile targetLoad margins θ)
    (c : α) :
    coordinateObjective (targetLoad : α) margins θ ≤ coordinateObjective (targetLoad : α) margins c := by
  unfold IsExactTargetQuantile at hQuantile
  have := exceedanceCount_cast_le_atLeastCount_cast margins θ
  rw [hQuantile] at this
  exact coordinateObjective_le_of_counts (by rw [hQuantile]; grind) this c

/-- With bias `−θ`, the routed tokens are exactly those whose margin exceeds θ. -/
theorem routedTokenCount_neg_eq_exceedanceCount {n : Nat} (rawScore cutoff : Fin n → α) (θ : α) :
    routedTokenCount rawScore cutoff (-θ) = exceedanceCount (fun i => rawScore i - cutoff i) θ := by
  unfold routedTokenCount exceedanceCount
  apply finCount_congr; intro i
  apply decide_eq_decide.mpr; grind

/-- **Bias −θ routes the target load** (App. C): if θ is an exact target quantile of the margins
`rawScore_i − cutoff_i`, the bias `−θ` routes exactly `targetLoad` tokens. -/
theorem routedTokenCount_neg_eq {n : Nat} {targetLoad : Nat} {rawScore cutoff : Fin n → α} {θ : α}
    (hQuantile : IsExactTargetQuantile targetLoad (fun i => rawScore i - cutoff i) θ) :
    routedTokenCount rawScore cutoff (-θ) = targetLoad := by
  rw [routedTokenCount_neg_eq_exceedanceCount]; exact hQuantile

end Ordered

end QuantileBalancing

end KimiK3
