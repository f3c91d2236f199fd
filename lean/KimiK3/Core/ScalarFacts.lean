module

public import KimiK3.Core.Scalar

/-!
# Consequences of the scalar laws

Derived facts used by the operation lemmas: `max`, absolute value, `exp` monotonicity,
sigmoid bounds, square-root positivity.
-/

@[expose] public section

namespace KimiK3

variable {α : Type}

section Ordered

variable [OrderedScalarField α]

/-- A weak inequality is strict or an equality. -/
theorem lt_or_eq_of_le' {a b : α} (h : a ≤ b) : a < b ∨ a = b := by grind

/-- Any two scalars compare. -/
theorem lt_or_le' (a b : α) : a < b ∨ b ≤ a := by grind

/-- `max a b` is at least `a`. -/
theorem le_max_left' (a b : α) : a ≤ max a b := by
  rw [OrderedScalarField.max_def]; split <;> grind

/-- `max a b` is at least `b`. -/
theorem le_max_right' (a b : α) : b ≤ max a b := by
  rw [OrderedScalarField.max_def]; split <;> grind

/-- `max a b` is one of its arguments. -/
theorem max_eq_or (a b : α) : max a b = a ∨ max a b = b := by
  rw [OrderedScalarField.max_def]; split <;> simp

/-- A number is at most its absolute value. -/
theorem le_abs_self (x : α) : x ≤ Scalar.abs x := le_max_left' x (-x)

/-- The negation of a number is at most its absolute value. -/
theorem neg_le_abs (x : α) : -x ≤ Scalar.abs x := le_max_right' x (-x)

/-- Absolute values are nonnegative. -/
theorem abs_nonneg (x : α) : 0 ≤ Scalar.abs x := by
  have h1 := le_abs_self x; have h2 := neg_le_abs x; grind

/-- The absolute value of a nonnegative number is itself. -/
theorem abs_of_nonneg {x : α} (h : 0 ≤ x) : Scalar.abs x = x := by
  unfold Scalar.abs; rw [OrderedScalarField.max_def]; split <;> grind

/-- Triangle inequality. -/
theorem abs_add_le (x y : α) : Scalar.abs (x + y) ≤ Scalar.abs x + Scalar.abs y := by
  have h1 := le_abs_self x; have h2 := neg_le_abs x
  have h3 := le_abs_self y; have h4 := neg_le_abs y
  unfold Scalar.abs at *
  rcases max_eq_or (x + y) (-(x + y)) with h | h <;> rw [h] <;> grind

/-- The product of positive numbers is positive. -/
theorem mul_pos' {a b : α} (ha : 0 < a) (hb : 0 < b) : 0 < a * b := by
  have := Lean.Grind.OrderedRing.mul_lt_mul_of_pos_left hb ha
  grind

/-- The product of nonnegative numbers is nonnegative. -/
theorem mul_nonneg' {a b : α} (ha : 0 ≤ a) (hb : 0 ≤ b) : 0 ≤ a * b := by
  rcases lt_or_eq_of_le' ha with ha | ha
  · rcases lt_or_eq_of_le' hb with hb | hb
    · have := mul_pos' ha hb; grind
    · subst hb; grind
  · subst ha; grind

/-- The inverse of a positive number is positive. -/
theorem inv_pos' {a : α} (ha : 0 < a) : 0 < a⁻¹ := by
  have hne : a ≠ 0 := by grind
  have h1 : a * a⁻¹ = 1 := Lean.Grind.Field.mul_inv_cancel hne
  rcases lt_or_le' (0 : α) a⁻¹ with h | h
  · exact h
  · exfalso
    have : a * a⁻¹ ≤ 0 := by
      rcases lt_or_eq_of_le' h with h | h
      · have := Lean.Grind.OrderedRing.mul_lt_mul_of_pos_left h ha; grind
      · rw [h]; grind
    have := Lean.Grind.OrderedRing.zero_lt_one (R := α)
    grind

/-- A quotient of positive numbers is positive. -/
theorem div_pos' {a b : α} (ha : 0 < a) (hb : 0 < b) : 0 < a / b := by
  rw [Lean.Grind.Field.div_eq_mul_inv]; exact mul_pos' ha (inv_pos' hb)

end Ordered

section Laws

variable [ScalarLaws α]

/-- `exp` is monotone. -/
theorem exp_le_exp {x y : α} (h : x ≤ y) : Scalar.exp x ≤ Scalar.exp y := by
  rcases lt_or_eq_of_le' h with h | h
  · have := ScalarLaws.exp_lt_exp h; grind
  · rw [h]; grind

/-- The sigmoid is positive. -/
theorem sigmoid_pos (x : α) : 0 < Scalar.sigmoid x := by
  rw [ScalarLaws.sigmoid_eq]
  have := ScalarLaws.exp_pos (-x)
  exact div_pos' (by have := Lean.Grind.OrderedRing.zero_lt_one (R := α); grind) (by grind)

/-- The square root of a positive number is positive. -/
theorem sqrt_pos {x : α} (h : 0 < x) : 0 < Scalar.sqrt x := by
  have h1 := ScalarLaws.sqrt_nonneg x
  have h2 := ScalarLaws.sqrt_mul_self (Std.le_of_lt h)
  rcases lt_or_eq_of_le' h1 with h1 | h1
  · exact h1
  · rw [← h1] at h2; grind

end Laws

end KimiK3
