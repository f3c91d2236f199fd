module

public import KimiK3.Microscaling.Lemmas

/-!
# The standard model of floating-point arithmetic (Higham §2.2) and `γ_n`

`RoundsTo u x y` says `y` is `x` rounded with unit roundoff `u`: `y = x (1 + δ)` for some
`|δ| ≤ u`. It is the model `fl(a ∘ b) = (a ∘ b)(1 + δ)` of every rounded operation (u = 2⁻⁵³ for
binary64, 2⁻²⁴ for binary32, 2⁻⁸ for bfloat16, ignoring underflow and overflow). The error
theorems of `difftest`'s tolerances are stated with it, over any ordered scalar field:

* `RoundsTo.abs_sub_le`, `roundsTo_iff` — the model is `|y − x| ≤ u |x|`;
* `RoundsTo.sumSq_sub_le` — rounding a vector entrywise: `Σ (ŷ_i − y_i)² ≤ u² Σ y_i²` (the
  relative 2-norm error of a store is at most `u`);
* `gamma n u = n u / (1 − n u)` and `one_add_pow_sub_one_le_gamma`: `(1 + u)^n − 1 ≤ γ_n` for
  `n u < 1` (Higham Lemma 3.1).

What the model does not cover: a rounding model is an assumption about the arithmetic (Float is
not a model of the field laws), and the probabilistic `√n` growth `difftest` uses for the
compute term (Higham & Mary 2019) is a statistical model, not a theorem here.
-/

@[expose] public section

namespace KimiK3.Rounding

open KimiK3

variable {α : Type} [OrderedScalarField α]

/-- **The standard model**: `y` is `x` rounded with unit roundoff `u`, `y = x (1 + δ)` with
`|δ| ≤ u` (Higham §2.2). -/
def RoundsTo (u x y : α) : Prop := ∃ δ : α, Scalar.abs δ ≤ u ∧ y = x * (1 + δ)

/-- A rounded value is within `u |x|` of `x`. -/
theorem RoundsTo.abs_sub_le {u x y : α} (h : RoundsTo u x y) : Scalar.abs (y - x) ≤ u * Scalar.abs x := by
  obtain ⟨δ, hδ, rfl⟩ := h
  have e : x * (1 + δ) - x = x * δ := by grind
  rw [e, abs_mul']
  have := mul_le_mul_of_nonneg_left' hδ (abs_nonneg x)
  grind

/-- Being within `u |x|` of `x` is being `x` rounded (for `u ≥ 0`). -/
theorem roundsTo_of_abs_sub_le {u x y : α} (hu : 0 ≤ u) (h : Scalar.abs (y - x) ≤ u * Scalar.abs x) :
    RoundsTo u x y := by
  by_cases hx : x = 0
  · subst hx
    have : Scalar.abs y ≤ 0 := by
      have e : Scalar.abs (0 : α) = 0 := abs_of_nonneg (Std.le_refl _)
      rw [e] at h; have e2 : y - 0 = y := by grind
      rw [e2] at h; grind
    have hy : y = 0 := by have := abs_le_iff'.mp this; grind
    exact ⟨0, by rw [abs_of_nonneg (Std.le_refl _)]; exact hu, by rw [hy]; grind⟩
  · have hax : 0 < Scalar.abs x := abs_pos_of_ne_zero' hx
    refine ⟨(y - x) / x, ?_, by grind⟩
    have e : Scalar.abs ((y - x) / x) * Scalar.abs x = Scalar.abs (y - x) := by
      rw [← abs_mul']; congr 1; grind
    exact le_of_mul_le_mul_right' (by rw [e]; exact h) hax

/-- The standard model is `|y − x| ≤ u |x|`. -/
theorem roundsTo_iff {u x y : α} (hu : 0 ≤ u) : RoundsTo u x y ↔ Scalar.abs (y - x) ≤ u * Scalar.abs x :=
  ⟨RoundsTo.abs_sub_le, roundsTo_of_abs_sub_le hu⟩

/-- **Rounding a vector**: if every entry is rounded, `Σ (ŷ_i − y_i)² ≤ u² Σ y_i²`, so the relative
2-norm error is at most `u`. -/
theorem RoundsTo.sumSq_sub_le {u : α} {n : Nat} {y y' : Fin n → α}
    (h : ∀ i, RoundsTo u (y i) (y' i)) :
    finSum n (fun i => (y' i - y i) * (y' i - y i)) ≤ u * u * finSum n (fun i => y i * y i) := by
  rw [← finSum_mul_left]
  refine finSum_le_finSum (fun i => ?_)
  have h1 := (h i).abs_sub_le
  have h2 := mul_self_le_mul_self' (abs_nonneg _) h1
  rw [abs_mul_abs_self'] at h2
  have e : u * Scalar.abs (y i) * (u * Scalar.abs (y i)) = u * u * (Scalar.abs (y i) * Scalar.abs (y i)) := by
    grind
  rw [e, abs_mul_abs_self'] at h2
  exact h2

/-- `γ_n = n u / (1 − n u)` (Higham Lemma 3.1). -/
def gamma (n : Nat) (u : α) : α := (n : α) * u / (1 - (n : α) * u)

/-- `(1 + u)^n (1 − n u) ≤ 1` for `u ≥ 0`. -/
theorem one_add_pow_mul_le {u : α} (hu : 0 ≤ u) (n : Nat) : (1 + u) ^ n * (1 - (n : α) * u) ≤ 1 := by
  induction n with
  | zero => rw [Lean.Grind.Semiring.pow_zero]; grind
  | succ n ih =>
    rw [Lean.Grind.Semiring.pow_succ, Lean.Grind.Semiring.natCast_succ]
    have hp := pow_nonneg' (show 0 ≤ 1 + u by grind) n
    have h1 := mul_nonneg' hp (mul_nonneg' hu hu)
    have hn : (0 : α) ≤ (n : α) := by grind
    have h2 := mul_nonneg' h1 hn
    grind

/-- `γ_n` is nonnegative when `n u < 1`. -/
theorem gamma_nonneg {u : α} (hu : 0 ≤ u) {n : Nat} (h : (n : α) * u < 1) : 0 ≤ gamma n u := by
  unfold gamma
  have hn : (0 : α) ≤ (n : α) := by grind
  exact (le_div_iff_mul_le' (show (0 : α) < 1 - n * u by grind)).mpr (by grind [mul_nonneg' hn hu])

/-- **`(1 + u)^n − 1 ≤ γ_n`** for `u ≥ 0` and `n u < 1` (Higham Lemma 3.1). -/
theorem one_add_pow_sub_one_le_gamma {u : α} (hu : 0 ≤ u) {n : Nat} (h : (n : α) * u < 1) :
    (1 + u) ^ n - 1 ≤ gamma n u := by
  unfold gamma
  have hd : (0 : α) < 1 - n * u := by grind
  have := one_add_pow_mul_le hu n
  exact (le_div_iff_mul_le' hd).mpr (by grind)

/-- `(1 + u)^n − 1 ≥ 0` for `u ≥ 0`. -/
theorem one_add_pow_sub_one_nonneg {u : α} (hu : 0 ≤ u) (n : Nat) : 0 ≤ (1 + u) ^ n - 1 := by
  have := one_le_pow' (show (1 : α) ≤ 1 + u by grind) n; grind

end KimiK3.Rounding
