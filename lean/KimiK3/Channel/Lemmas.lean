module

public import KimiK3.Core.ScalarFacts

/-!
# General order lemmas used by the channel mixers

Facts about products, absolute values and the sigmoid over an ordered scalar field that Core
does not (yet) provide. They are general and could move to `KimiK3.Core.ScalarFacts`.
-/

@[expose] public section

namespace KimiK3

variable {α : Type}

section Ordered

variable [OrderedScalarField α]

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

end Ordered

section Laws

variable [ScalarLaws α]

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

namespace KimiK3

variable {α : Type} [OrderedScalarField α]

/-- If `0 < d` and `0 ≤ d x` then `0 ≤ x`. -/
theorem nonneg_of_mul_nonneg_left' {d x : α} (hd : 0 < d) (h : 0 ≤ d * x) : 0 ≤ x := by
  rcases lt_or_le' x 0 with hx | hx
  · have := mul_pos' hd (show 0 < -x by grind); grind
  · exact hx

/-- `0 < 1` in an ordered scalar field. -/
theorem zero_lt_one' : (0 : α) < 1 := Lean.Grind.OrderedRing.zero_lt_one

end KimiK3
