module

public import KimiK3.Core.Sum
public import KimiK3.Channel.SiTU

/-!
# Order facts used by the microscaling and rounding-error theorems

Facts over an ordered scalar field that Core does not (yet) provide: casts of natural numbers
are monotone, inverses are antitone, products of inequalities, powers `(1 + u)^n`, absolute
values of quotients, and the bounds of `finMaxFrom` (Core `Kernel`'s running maximum). They are
general; candidates for `Core/ScalarFacts`, `Core/Sum` and `Core/Reduce`.

The absolute-value lemmas this file builds on (`abs_le_iff'`, `abs_mul'`, `abs_neg'`, …) come
with `KimiK3.Channel.SiTU`'s imports.
-/

@[expose] public section

namespace KimiK3

variable {α : Type} [OrderedScalarField α]

/-- Casts of natural numbers are monotone. -/
theorem natCast_le_natCast' {a b : Nat} (h : a ≤ b) : (a : α) ≤ (b : α) := by
  obtain ⟨k, rfl⟩ := Nat.exists_eq_add_of_le h
  have e : ((a + k : Nat) : α) = (a : α) + (k : α) := Lean.Grind.Semiring.natCast_add a k
  have : (0 : α) ≤ (k : α) := by grind
  grind

/-- Casts of natural numbers are strictly monotone. -/
theorem natCast_lt_natCast' {a b : Nat} (h : a < b) : (a : α) < (b : α) := by
  have h1 := natCast_le_natCast' (α := α) (Nat.succ_le_of_lt h)
  have e : ((a + 1 : Nat) : α) = (a : α) + 1 := Lean.Grind.Semiring.natCast_succ a
  have := Lean.Grind.OrderedRing.zero_lt_one (R := α)
  grind

/-- A positive natural number is a positive scalar. -/
theorem natCast_pos' {a : Nat} (h : 0 < a) : (0 : α) < (a : α) := by
  have := natCast_lt_natCast' (α := α) h
  have e : ((0 : Nat) : α) = 0 := Lean.Grind.Semiring.natCast_zero
  grind

/-- The inverse of a nonnegative scalar is nonnegative. -/
theorem inv_nonneg'' {a : α} (h : 0 ≤ a) : 0 ≤ a⁻¹ := by
  rcases lt_or_eq_of_le' h with h | h
  · have := inv_pos' h; grind
  · rw [← h, Lean.Grind.Field.inv_zero]; grind

/-- A product of a nonnegative and a nonpositive scalar is nonpositive. -/
theorem mul_nonpos_of_nonneg_of_nonpos' {a b : α} (ha : 0 ≤ a) (hb : b ≤ 0) : a * b ≤ 0 := by
  have := mul_nonneg' ha (show 0 ≤ -b by grind); grind

/-- Products of inequalities between nonnegative scalars. -/
theorem mul_le_mul'' {a b c d : α} (h1 : a ≤ b) (h2 : c ≤ d) (hb : 0 ≤ b) (hc : 0 ≤ c) :
    a * c ≤ b * d := by
  have := mul_le_mul_of_nonneg_right' h1 hc
  have := mul_le_mul_of_nonneg_left' h2 hb
  grind

/-- Inverses of positive scalars are antitone. -/
theorem inv_le_inv_of_le' {a b : α} (ha : 0 < a) (h : a ≤ b) : b⁻¹ ≤ a⁻¹ := by
  have hb : 0 < b := by grind
  have hia := inv_pos' ha
  have hib := inv_pos' hb
  have := mul_le_mul_of_nonneg_right' (mul_le_mul_of_nonneg_right' h (Std.le_of_lt hia)) (Std.le_of_lt hib)
  have e1 : a * a⁻¹ * b⁻¹ = b⁻¹ := by grind
  have e2 : b * a⁻¹ * b⁻¹ = a⁻¹ := by grind
  grind

/-- Inverses of positive scalars are strictly antitone. -/
theorem inv_lt_inv_of_lt' {a b : α} (ha : 0 < a) (h : a < b) : b⁻¹ < a⁻¹ := by
  have hb : 0 < b := by grind
  have hia := inv_pos' ha
  have hib := inv_pos' hb
  have := Lean.Grind.OrderedRing.mul_lt_mul_of_pos_right h (mul_pos' hia hib)
  have e1 : a * (a⁻¹ * b⁻¹) = b⁻¹ := by grind
  have e2 : b * (a⁻¹ * b⁻¹) = a⁻¹ := by grind
  grind

/-- Dividing by a positive scalar preserves `≤`. -/
theorem div_le_div_of_le_right' {a b c : α} (hc : 0 < c) (h : a ≤ b) : a / c ≤ b / c := by
  simp only [Lean.Grind.Field.div_eq_mul_inv]
  exact mul_le_mul_of_nonneg_right' h (Std.le_of_lt (inv_pos' hc))

/-- `a / c ≤ b` exactly when `a ≤ b · c`, for `c > 0`. -/
theorem div_le_iff_le_mul' {a b c : α} (hc : 0 < c) : a / c ≤ b ↔ a ≤ b * c := by
  constructor
  · intro h
    have := mul_le_mul_of_nonneg_right' h (Std.le_of_lt hc)
    have e : a / c * c = a := by grind
    grind
  · intro h
    have := div_le_div_of_le_right' hc h
    have e : b * c / c = b := by grind
    grind

/-- `a ≤ b / c` exactly when `a · c ≤ b`, for `c > 0`. -/
theorem le_div_iff_mul_le' {a b c : α} (hc : 0 < c) : a ≤ b / c ↔ a * c ≤ b := by
  constructor
  · intro h
    have := mul_le_mul_of_nonneg_right' h (Std.le_of_lt hc)
    have e : b / c * c = b := by grind
    grind
  · intro h
    have := div_le_div_of_le_right' hc h
    have e : a * c / c = a := by grind
    grind

/-- A positive factor cancels from an inequality. -/
theorem le_of_mul_le_mul_right' {a b c : α} (h : a * c ≤ b * c) (hc : 0 < c) : a ≤ b := by
  have := div_le_div_of_le_right' hc h
  have e1 : a * c / c = a := by grind
  have e2 : b * c / c = b := by grind
  grind

/-- `|c · x| = c · |x|` for `c ≥ 0`. -/
theorem abs_mul_of_nonneg_left' {c : α} (hc : 0 ≤ c) (x : α) :
    Scalar.abs (c * x) = c * Scalar.abs x := by
  rw [abs_mul', abs_of_nonneg hc]

/-- `|x / c| = |x| / c` for `c > 0`. -/
theorem abs_div_of_pos' {c : α} (hc : 0 < c) (x : α) : Scalar.abs (x / c) = Scalar.abs x / c := by
  simp only [Lean.Grind.Field.div_eq_mul_inv]
  rw [abs_mul', abs_of_nonneg (Std.le_of_lt (inv_pos' hc))]

/-- `|0| = 0`. -/
theorem abs_zero' : Scalar.abs (0 : α) = 0 := abs_of_nonneg (Std.le_refl _)

/-- A nonzero scalar has a positive absolute value. -/
theorem abs_pos_of_ne_zero' {x : α} (hx : x ≠ 0) : 0 < Scalar.abs x := by
  rcases lt_or_eq_of_le' (abs_nonneg x) with h | h
  · exact h
  · have := abs_le_iff'.mp (show Scalar.abs x ≤ 0 by grind)
    exact absurd (show x = 0 by grind) hx

/-- Squares are nonnegative. -/
theorem mul_self_nonneg'' (x : α) : 0 ≤ x * x := by
  rcases lt_or_le' x 0 with h | h
  · have := mul_nonneg' (a := -x) (b := -x) (by grind) (by grind); grind
  · exact mul_nonneg' h h

/-- `|a − b| = |b − a|`. -/
theorem abs_sub_comm' (a b : α) : Scalar.abs (a - b) = Scalar.abs (b - a) := by
  rw [← abs_neg' (a - b)]; congr 1; grind

/-- `|x| · |x| = x · x`. -/
theorem abs_mul_abs_self' (x : α) : Scalar.abs x * Scalar.abs x = x * x := by
  rcases abs_eq_or x with h | h <;> rw [h] <;> grind

/-- Squares are monotone on nonnegative scalars. -/
theorem mul_self_le_mul_self' {a b : α} (ha : 0 ≤ a) (h : a ≤ b) : a * a ≤ b * b :=
  mul_le_mul'' h h (by grind) ha

/-- Nonnegative scalars compare as their squares do. -/
theorem le_of_mul_self_le_mul_self' {a b : α} (hb : 0 ≤ b) (h : a * a ≤ b * b) : a ≤ b := by
  rcases lt_or_le' b a with hab | hab
  · have := Lean.Grind.OrderedRing.mul_lt_mul_of_pos_left hab (show 0 < a by grind)
    have := mul_le_mul_of_nonneg_right' (Std.le_of_lt hab) hb
    grind
  · exact hab

/-- Powers of a nonnegative scalar are nonnegative. -/
theorem pow_nonneg' {a : α} (h : 0 ≤ a) (n : Nat) : 0 ≤ a ^ n := by
  induction n with
  | zero => rw [Lean.Grind.Semiring.pow_zero]; exact Std.le_of_lt Lean.Grind.OrderedRing.zero_lt_one
  | succ n ih => rw [Lean.Grind.Semiring.pow_succ]; exact mul_nonneg' ih h

/-- Powers of a scalar at least one are at least one. -/
theorem one_le_pow' {a : α} (h : 1 ≤ a) (n : Nat) : 1 ≤ a ^ n := by
  induction n with
  | zero => rw [Lean.Grind.Semiring.pow_zero]; exact Std.le_refl _
  | succ n ih =>
    rw [Lean.Grind.Semiring.pow_succ]
    have := mul_le_mul'' ih h (by grind) (by grind)
    grind

/-- Powers of a scalar at least one grow with the exponent. -/
theorem pow_le_pow_succ' {a : α} (h : 1 ≤ a) (n : Nat) : a ^ n ≤ a ^ (n + 1) := by
  rw [Lean.Grind.Semiring.pow_succ]
  have := mul_le_mul_of_nonneg_left' h (pow_nonneg' (show 0 ≤ a by grind) n)
  grind

/-- Powers of a scalar at least one are monotone in the exponent. -/
theorem pow_le_pow_of_le' {a : α} (h : 1 ≤ a) {m n : Nat} (hmn : m ≤ n) : a ^ m ≤ a ^ n := by
  induction n with
  | zero => rw [Nat.le_zero.mp hmn]; exact Std.le_refl _
  | succ n ih =>
    rcases Nat.lt_or_ge m (n + 1) with hlt | hge
    · exact Std.le_trans (ih (by omega)) (pow_le_pow_succ' h n)
    · rw [show m = n + 1 by omega]; exact Std.le_refl _

/-! ## The running maximum `finMaxFrom` -/

/-- The running maximum is at least its start value. -/
theorem le_finMaxFrom_acc (acc : α) (n : Nat) (f : Fin n → α) : acc ≤ finMaxFrom acc n f := by
  induction n generalizing acc with
  | zero => exact Std.le_refl _
  | succ n ih => exact Std.le_trans (le_max_left' _ _) (ih _ _)

/-- The running maximum is at least every entry. -/
theorem le_finMaxFrom (acc : α) (n : Nat) (f : Fin n → α) (i : Fin n) : f i ≤ finMaxFrom acc n f := by
  induction n generalizing acc with
  | zero => exact i.elim0
  | succ n ih =>
    show f i ≤ finMaxFrom (max acc (f ⟨n, by omega⟩)) n (fun j => f ⟨j.val, by omega⟩)
    by_cases hi : i.val = n
    · have e : f i = f ⟨n, by omega⟩ := by congr 1; exact Fin.ext hi
      rw [e]; exact Std.le_trans (le_max_right' _ _) (le_finMaxFrom_acc _ _ _)
    · have := ih (max acc (f ⟨n, by omega⟩)) (fun j => f ⟨j.val, by omega⟩) ⟨i.val, by omega⟩
      exact this

/-- The running maximum of entries at most `c`, started at most `c`, is at most `c`. -/
theorem finMaxFrom_le {acc c : α} (hacc : acc ≤ c) (n : Nat) (f : Fin n → α) (hf : ∀ i, f i ≤ c) :
    finMaxFrom acc n f ≤ c := by
  induction n generalizing acc with
  | zero => exact hacc
  | succ n ih =>
    show finMaxFrom (max acc (f ⟨n, by omega⟩)) n (fun j => f ⟨j.val, by omega⟩) ≤ c
    refine ih ?_ (fun j => f ⟨j.val, by omega⟩) (fun j => hf _)
    rw [OrderedScalarField.max_def]; split
    · exact hf _
    · exact hacc

end KimiK3
