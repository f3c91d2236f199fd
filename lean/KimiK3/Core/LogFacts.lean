module

public import KimiK3.Core.ScalarFacts

/-!
# Logarithm facts from the scalar laws

Consequences of `ScalarLaws` for `log` on positive numbers: `log 1 = 0`, products and quotients,
the sign flip of an inverted ratio, strict monotonicity, and comparing a logarithm with a number
through `exp`. (Kept beside `ScalarFacts.lean` rather than in it so that adding them does not
rebuild every importer of `ScalarFacts`.)
-/

@[expose] public section

namespace KimiK3

variable {α : Type} [ScalarLaws α]

/-- `log 1 = 0`. -/
theorem log_one_eq_zero : Scalar.log (1 : α) = 0 := by
  have h := ScalarLaws.log_exp (0 : α)
  rw [ScalarLaws.exp_zero] at h; exact h

/-- `log (x y) = log x + log y` for positive `x`, `y`. -/
theorem log_mul_of_pos {x y : α} (hx : 0 < x) (hy : 0 < y) :
    Scalar.log (x * y) = Scalar.log x + Scalar.log y := by
  have h := ScalarLaws.exp_add (Scalar.log x) (Scalar.log y)
  rw [ScalarLaws.exp_log hx, ScalarLaws.exp_log hy] at h
  rw [← h, ScalarLaws.log_exp]

/-- `log (x / y) = log x − log y` for positive `x`, `y`. -/
theorem log_div_of_pos {x y : α} (hx : 0 < x) (hy : 0 < y) :
    Scalar.log (x / y) = Scalar.log x - Scalar.log y := by
  have hq : 0 < x / y := div_pos' hx hy
  have hne : y ≠ 0 := by grind
  have e : x / y * y = x := by
    rw [Lean.Grind.Field.div_eq_mul_inv]
    have := Lean.Grind.Field.mul_inv_cancel hne
    grind
  have h := log_mul_of_pos hq hy
  rw [e] at h; grind

/-- Inverting a ratio flips the sign of its logarithm: `log (y / x) = −log (x / y)`. -/
theorem log_div_flip {x y : α} (hx : 0 < x) (hy : 0 < y) :
    Scalar.log (y / x) = -Scalar.log (x / y) := by
  rw [log_div_of_pos hy hx, log_div_of_pos hx hy]; grind

/-- `log` is strictly increasing on positive numbers. -/
theorem log_lt_log {x y : α} (hx : 0 < x) (h : x < y) : Scalar.log x < Scalar.log y := by
  rcases lt_or_le' (Scalar.log x) (Scalar.log y) with h' | h'
  · exact h'
  · have := exp_le_exp h'
    rw [ScalarLaws.exp_log hx, ScalarLaws.exp_log (by grind)] at this; grind

/-- `log` is monotone on positive numbers. -/
theorem log_le_log {x y : α} (hx : 0 < x) (h : x ≤ y) : Scalar.log x ≤ Scalar.log y := by
  rcases lt_or_eq_of_le' h with h | h
  · exact Std.le_of_lt (log_lt_log hx h)
  · rw [h]; exact Std.le_refl _

/-- `log x ≤ c` when `x ≤ exp c` (`x` positive). -/
theorem log_le_of_le_exp {x c : α} (hx : 0 < x) (h : x ≤ Scalar.exp c) : Scalar.log x ≤ c := by
  have := log_le_log hx h; rwa [ScalarLaws.log_exp] at this

/-- `c ≤ log x` when `exp c ≤ x`. -/
theorem le_log_of_exp_le {x c : α} (h : Scalar.exp c ≤ x) : c ≤ Scalar.log x := by
  have := log_le_log (ScalarLaws.exp_pos c) h; rwa [ScalarLaws.log_exp] at this

/-- `0 ≤ log x` when `1 ≤ x`. -/
theorem log_nonneg_of_one_le {x : α} (h : 1 ≤ x) : 0 ≤ Scalar.log x := by
  have := log_le_log (zero_lt_one' (α := α)) h; rwa [log_one_eq_zero] at this

/-- `log x ≤ 0` when `0 < x ≤ 1`. -/
theorem log_nonpos_of_le_one {x : α} (hx : 0 < x) (h : x ≤ 1) : Scalar.log x ≤ 0 := by
  have := log_le_log hx h; rwa [log_one_eq_zero] at this

end KimiK3
