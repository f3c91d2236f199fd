module

public import KimiK3.Core.Scalar

/-!
# Consequences of the scalar laws

Derived facts used by the operation lemmas and the components: `max`, absolute value (the
triangle inequality, `|x y| = |x| |y|`, interval bounds of products), monotonicity and sign
facts of products, inverses and quotients, `exp` monotonicity, sigmoid bounds `0 < σ(x) < 1`,
square-root positivity.
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

/-- `|x| ≤ c` exactly when `-c ≤ x ≤ c`. -/
theorem abs_le_iff' {x c : α} : Scalar.abs x ≤ c ↔ -c ≤ x ∧ x ≤ c := by
  have h1 := le_abs_self x; have h2 := neg_le_abs x
  constructor
  · intro h; constructor <;> grind
  · intro ⟨h3, h4⟩
    unfold Scalar.abs
    rcases max_eq_or x (-x) with h | h <;> rw [h] <;> grind

/-- Multiplying by a nonnegative number on the left is monotone. -/
theorem mul_le_mul_of_nonneg_left' {a b c : α} (h : a ≤ b) (hc : 0 ≤ c) : c * a ≤ c * b := by
  have := mul_nonneg' hc (show 0 ≤ b - a by grind); grind

/-- Multiplying by a nonnegative number on the right is monotone. -/
theorem mul_le_mul_of_nonneg_right' {a b c : α} (h : a ≤ b) (hc : 0 ≤ c) : a * c ≤ b * c := by
  have := mul_nonneg' (show 0 ≤ b - a by grind) hc; grind

/-- If `-a ≤ x ≤ a` and `-b ≤ y ≤ b` then `-(a b) ≤ x y ≤ a b`. -/
theorem mul_mem_interval {a b x y : α} (hx1 : -a ≤ x) (hx2 : x ≤ a) (hy1 : -b ≤ y)
    (hy2 : y ≤ b) : -(a * b) ≤ x * y ∧ x * y ≤ a * b := by
  rcases lt_or_le' x 0 with hx | hx
  · have p1 := mul_nonneg' (show 0 ≤ a + x by grind) (show 0 ≤ b by grind)
    have p2 := mul_nonneg' (show 0 ≤ -x by grind) (show 0 ≤ b + y by grind)
    have p3 := mul_nonneg' (show 0 ≤ -x by grind) (show 0 ≤ b - y by grind)
    constructor <;> grind
  · have p1 := mul_nonneg' (show 0 ≤ a - x by grind) (show 0 ≤ b by grind)
    have p2 := mul_nonneg' hx (show 0 ≤ b - y by grind)
    have p3 := mul_nonneg' hx (show 0 ≤ b + y by grind)
    constructor <;> grind

/-- `|x y| ≤ a b` when `|x| ≤ a` and `|y| ≤ b`. -/
theorem abs_mul_le_mul {a b x y : α} (hx : Scalar.abs x ≤ a) (hy : Scalar.abs y ≤ b) :
    Scalar.abs (x * y) ≤ a * b := by
  rw [abs_le_iff'] at *
  exact mul_mem_interval hx.1 hx.2 hy.1 hy.2

/-- `|c x| ≤ c` when `0 ≤ c` and `-1 ≤ x ≤ 1`. -/
theorem abs_mul_le_of_unit {c x : α} (hc : 0 ≤ c) (h1 : -1 ≤ x) (h2 : x ≤ 1) :
    Scalar.abs (c * x) ≤ c := by
  rw [abs_le_iff']
  have := mul_mem_interval (a := c) (b := 1) (x := c) (y := x) (by grind) (by grind) h1 h2
  grind

/-- `|x|` is `x` or `-x`. -/
theorem abs_eq_or (x : α) : Scalar.abs x = x ∨ Scalar.abs x = -x := max_eq_or x (-x)

/-- `|-x| = |x|`. -/
theorem abs_neg' (x : α) : Scalar.abs (-x) = Scalar.abs x := by
  have h1 := le_abs_self x; have h2 := neg_le_abs x
  have h3 := le_abs_self (-x); have h4 := neg_le_abs (-x)
  rcases abs_eq_or x with h | h <;> rcases abs_eq_or (-x) with h' | h' <;> grind

/-- `|x y| = |x| |y|`. -/
theorem abs_mul' (x y : α) : Scalar.abs (x * y) = Scalar.abs x * Scalar.abs y := by
  rcases lt_or_le' x 0 with hx | hx <;> rcases lt_or_le' y 0 with hy | hy
  · have := mul_nonneg' (show 0 ≤ -x by grind) (show 0 ≤ -y by grind)
    rw [abs_of_nonneg (show 0 ≤ x * y by grind)]
    rw [← abs_neg' x, ← abs_neg' y, abs_of_nonneg (show 0 ≤ -x by grind),
      abs_of_nonneg (show 0 ≤ -y by grind)]; grind
  · have := mul_nonneg' (show 0 ≤ -x by grind) hy
    rw [← abs_neg' (x * y), abs_of_nonneg (show 0 ≤ -(x * y) by grind), ← abs_neg' x,
      abs_of_nonneg (show 0 ≤ -x by grind), abs_of_nonneg hy]; grind
  · have := mul_nonneg' hx (show 0 ≤ -y by grind)
    rw [← abs_neg' (x * y), abs_of_nonneg (show 0 ≤ -(x * y) by grind), ← abs_neg' y,
      abs_of_nonneg (show 0 ≤ -y by grind), abs_of_nonneg hx]; grind
  · have := mul_nonneg' hx hy
    rw [abs_of_nonneg this, abs_of_nonneg hx, abs_of_nonneg hy]

/-- If `0 < d` and `0 ≤ d x` then `0 ≤ x`. -/
theorem nonneg_of_mul_nonneg_left' {d x : α} (hd : 0 < d) (h : 0 ≤ d * x) : 0 ≤ x := by
  rcases lt_or_le' x 0 with hx | hx
  · have := mul_pos' hd (show 0 < -x by grind); grind
  · exact hx

/-- `0 < 1` in an ordered scalar field. -/
theorem zero_lt_one' : (0 : α) < 1 := Lean.Grind.OrderedRing.zero_lt_one

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

/-- Cancelling a positive common factor of a quotient. -/
theorem mul_div_mul_right_of_pos {a b c : α} (hc : 0 < c) : a * c / (b * c) = a / b := by
  have hne : c ≠ 0 := by grind
  rw [Lean.Grind.Field.div_eq_mul_inv, Lean.Grind.Field.div_eq_mul_inv]
  grind

/-- The sigmoid is strictly below one. -/
theorem sigmoid_lt_one (x : α) : Scalar.sigmoid x < 1 := by
  rw [ScalarLaws.sigmoid_eq]
  have hp := ScalarLaws.exp_pos (-x)
  have hd : (0 : α) < 1 + Scalar.exp (-x) := by grind
  have hi := inv_pos' hd
  have hm : (1 + Scalar.exp (-x)) * (1 + Scalar.exp (-x))⁻¹ = 1 :=
    Lean.Grind.Field.mul_inv_cancel (by grind)
  rw [Lean.Grind.Field.div_eq_mul_inv]
  -- if the inverse were `≥ 1`, then `d · d⁻¹ ≥ d > 1`
  rcases lt_or_le' ((1 + Scalar.exp (-x))⁻¹) 1 with h | h
  · grind
  · exfalso
    have := Lean.Grind.OrderedRing.mul_le_mul_of_nonneg_left h (Std.le_of_lt hd)
    grind

/-- Squares are nonnegative. -/
theorem mul_self_nonneg' (x : α) : 0 ≤ x * x := by
  rcases lt_or_le' x 0 with h | h
  · have := mul_nonneg' (a := -x) (b := -x) (by grind) (by grind); grind
  · exact mul_nonneg' h h

/-- Natural numbers are nonnegative scalars. -/
theorem natCast_nonneg' (n : Nat) : 0 ≤ (n : α) := by
  induction n with
  | zero => grind
  | succ n ih =>
    rw [Lean.Grind.Semiring.natCast_succ]
    have := Lean.Grind.OrderedRing.zero_lt_one (R := α); grind

/-- The inverse of a nonnegative number is nonnegative. -/
theorem inv_nonneg' {a : α} (h : 0 ≤ a) : 0 ≤ a⁻¹ := by
  rcases lt_or_eq_of_le' h with h | h
  · have := inv_pos' h; grind
  · rw [← h, Lean.Grind.Field.inv_zero]; grind

/-- The sigmoid is at most one. -/
theorem sigmoid_le_one (x : α) : Scalar.sigmoid x ≤ 1 := by
  have hs := sigmoid_pos x
  have he := ScalarLaws.exp_pos (-x)
  have hd : (1 + Scalar.exp (-x)) ≠ 0 := by grind
  have key : Scalar.sigmoid x * (1 + Scalar.exp (-x)) = 1 := by
    rw [ScalarLaws.sigmoid_eq]; grind
  have := mul_nonneg' (Std.le_of_lt hs) (Std.le_of_lt he)
  grind

end Laws

end KimiK3
