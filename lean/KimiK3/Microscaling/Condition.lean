module

public import KimiK3.Microscaling.RoundingModel

/-!
# Elementwise functions: condition numbers and one-stage error

`RelCondition f κ ε x`: every relative perturbation of `x` up to `ε` changes `f x` by at most
`κ ε |f x|` — `κ` bounds the relative condition number `|x f'(x) / f(x)|` near `x`.

* **`elementwise_rel_error_le`** — a rounded evaluation of `f` at a perturbed argument:
  `|fl(f x̂) − f x| ≤ (u + κ ε + u κ ε) |f x|` (first order: `u + κ ε`, the rule `difftest` uses);
* `RelCondition.comp` — condition bounds multiply along a composition;
* proved condition bounds: `relCondition_mul_left` (κ = 1), `relCondition_sqrt` (κ = 1 for
  `ε ≤ 1`; the true value is 1/2), `relCondition_inv` (κ = 1/(1 − ε)), and for `exp`
  `abs_exp_sub_le` (`|e^{x'} − e^x| ≤ (e^{|x' − x|} − 1) e^x`, i.e. κ ≈ |x|);
* the condition numbers of `tanh`, `softCap` (κ ≤ 1) and `σ` (κ = |x| (1 − σ x)) need
  derivatives, which Core's laws do not state; `difftest` uses them as stated facts about the
  reals (docs/tolerances.md).
-/

@[expose] public section

namespace KimiK3.Rounding

open KimiK3

variable {α : Type}

section Ordered

variable [OrderedScalarField α]

/-- `κ` bounds `f`'s relative sensitivity at `x` for relative perturbations up to `ε`. -/
def RelCondition (f : α → α) (κ ε x : α) : Prop :=
  ∀ x', Scalar.abs (x' - x) ≤ ε * Scalar.abs x → Scalar.abs (f x' - f x) ≤ κ * ε * Scalar.abs (f x)

/-- **One elementwise stage**: the argument off by at most `ε` relatively, the result rounded
with unit roundoff `u`: `|fl(f x̂) − f x| ≤ (u + κ ε + u κ ε) |f x|`. -/
theorem elementwise_rel_error_le {f : α → α} {κ ε u x x' y : α} (hu : 0 ≤ u)
    (hf : RelCondition f κ ε x) (hx : Scalar.abs (x' - x) ≤ ε * Scalar.abs x) (hy : RoundsTo u (f x') y) :
    Scalar.abs (y - f x) ≤ (u + κ * ε + u * (κ * ε)) * Scalar.abs (f x) := by
  have h1 := hy.abs_sub_le
  have h2 := hf x' hx
  have t := abs_add_le (y - f x') (f x' - f x)
  have e : y - f x' + (f x' - f x) = y - f x := by grind
  rw [e] at t
  have t2 := abs_add_le (f x) (f x' - f x)
  have e2 : f x + (f x' - f x) = f x' := by grind
  rw [e2] at t2
  have p := mul_le_mul_of_nonneg_left' t2 hu
  have p2 := mul_le_mul_of_nonneg_left' h2 hu
  grind

/-- Condition bounds compose: `κ_f κ_g` for `f ∘ g`. -/
theorem RelCondition.comp {f g : α → α} {κf κg ε x : α} (hg : RelCondition g κg ε x)
    (hf : RelCondition f κf (κg * ε) (g x)) : RelCondition (fun t => f (g t)) (κf * κg) ε x := by
  intro x' hx
  have := hf (g x') (by have := hg x' hx; grind)
  grind

/-- Multiplying by a constant: `κ = 1`. -/
theorem relCondition_mul_left (c ε x : α) : RelCondition (fun t => c * t) 1 ε x := by
  intro x' hx
  have e : c * x' - c * x = c * (x' - x) := by grind
  show Scalar.abs (c * x' - c * x) ≤ 1 * ε * Scalar.abs (c * x)
  rw [e, abs_mul', abs_mul']
  have := mul_le_mul_of_nonneg_left' hx (abs_nonneg c)
  grind

/-- The reciprocal: `κ = 1 / (1 − ε)` for `ε < 1`. -/
theorem relCondition_inv {ε x : α} (hε : 0 ≤ ε) (hε1 : ε < 1) :
    RelCondition (fun t => t⁻¹) (1 / (1 - ε)) ε x := by
  intro x' hx
  show Scalar.abs (x'⁻¹ - x⁻¹) ≤ 1 / (1 - ε) * ε * Scalar.abs x⁻¹
  by_cases h0 : x = 0
  · subst h0
    rw [abs_of_nonneg (Std.le_refl _)] at hx
    have : Scalar.abs (x' - 0) ≤ 0 := by grind
    have hx' : x' = 0 := by have := abs_le_iff'.mp this; grind
    rw [hx', Lean.Grind.Field.inv_zero, show (0 : α) - 0 = 0 by grind, abs_zero']; grind
  · have hax : 0 < Scalar.abs x := abs_pos_of_ne_zero' h0
    -- `|x'| ≥ (1 − ε) |x| > 0`
    have t := abs_add_le x' (x - x')
    have e1 : x' + (x - x') = x := by grind
    rw [e1, abs_sub_comm'] at t
    have hx'lo : (1 - ε) * Scalar.abs x ≤ Scalar.abs x' := by grind
    have hpos : 0 < (1 - ε) * Scalar.abs x := mul_pos' (by grind) hax
    have hax' : 0 < Scalar.abs x' := Std.lt_of_lt_of_le hpos hx'lo
    have hx'0 : x' ≠ 0 := by intro h; rw [h, abs_of_nonneg (Std.le_refl _)] at hax'; grind
    have e2 : x'⁻¹ - x⁻¹ = (x - x') * (x'⁻¹ * x⁻¹) := by grind
    rw [e2, abs_mul', abs_mul', abs_sub_comm']
    have hinv : Scalar.abs x'⁻¹ * Scalar.abs x' = 1 := by rw [← abs_mul']; rw [show x'⁻¹ * x' = 1 by grind]; exact abs_of_nonneg (by grind)
    have hinv2 : Scalar.abs x⁻¹ * Scalar.abs x = 1 := by rw [← abs_mul']; rw [show x⁻¹ * x = 1 by grind]; exact abs_of_nonneg (by grind)
    have hi' : 0 ≤ Scalar.abs x'⁻¹ := abs_nonneg _
    have hi : 0 ≤ Scalar.abs x⁻¹ := abs_nonneg _
    -- `|x'⁻¹| ≤ 1 / ((1 − ε) |x|)`
    have h3 : Scalar.abs x'⁻¹ * ((1 - ε) * Scalar.abs x) ≤ 1 := by
      have := mul_le_mul_of_nonneg_left' hx'lo hi'; grind
    have p1 := mul_le_mul_of_nonneg_right' hx (mul_nonneg' hi' hi)
    have p2 := mul_le_mul_of_nonneg_right' h3 (mul_nonneg' hε hi)
    have hne : (1 - ε) ≠ 0 := by grind
    -- combine: `|x − x'| |x'⁻¹| |x⁻¹| ≤ ε |x| |x'⁻¹| |x⁻¹| ≤ ε |x⁻¹| / (1 − ε)`
    have key : ε * Scalar.abs x * (Scalar.abs x'⁻¹ * Scalar.abs x⁻¹) * (1 - ε) ≤ ε * Scalar.abs x⁻¹ := by
      grind
    have := (le_div_iff_mul_le' (show (0 : α) < 1 - ε by grind)).mpr key
    have e3 : ε * Scalar.abs x⁻¹ / (1 - ε) = 1 / (1 - ε) * ε * Scalar.abs x⁻¹ := by grind
    grind

end Ordered

section Laws

variable [ScalarLaws α]

/-- `1 − e^{−a} ≤ e^a − 1`. -/
theorem one_sub_exp_neg_le (a : α) : 1 - Scalar.exp (-a) ≤ Scalar.exp a - 1 := by
  have hE := ScalarLaws.exp_pos a
  have hprod : Scalar.exp a * Scalar.exp (-a) = 1 := by
    rw [← ScalarLaws.exp_add, show a + -a = 0 by grind, ScalarLaws.exp_zero]
  -- `(E − 1)² e^{−a} ≥ 0` and `E e^{−a} = 1`
  have hsq := mul_nonneg' (mul_self_nonneg'' (Scalar.exp a - 1)) (Std.le_of_lt (ScalarLaws.exp_pos (-a)))
  have e : (Scalar.exp a - 1) * (Scalar.exp a - 1) * Scalar.exp (-a) =
      Scalar.exp a * (Scalar.exp a * Scalar.exp (-a)) - 2 * (Scalar.exp a * Scalar.exp (-a)) +
        Scalar.exp (-a) := by grind
  rw [e, hprod] at hsq
  grind

/-- **The exponential's sensitivity**: `|e^{x'} − e^x| ≤ (e^{|x' − x|} − 1) e^x` (so `κ_exp ≈ |x|`). -/
theorem abs_exp_sub_le (x x' : α) :
    Scalar.abs (Scalar.exp x' - Scalar.exp x) ≤ (Scalar.exp (Scalar.abs (x' - x)) - 1) * Scalar.exp x := by
  have hx := ScalarLaws.exp_pos x
  have e : Scalar.exp x' = Scalar.exp x * Scalar.exp (x' - x) := by
    rw [← ScalarLaws.exp_add]; congr 1; grind
  rw [e]
  have e2 : Scalar.exp x * Scalar.exp (x' - x) - Scalar.exp x = Scalar.exp x * (Scalar.exp (x' - x) - 1) := by
    grind
  rw [e2, abs_mul', abs_of_nonneg (Std.le_of_lt hx)]
  have key : Scalar.abs (Scalar.exp (x' - x) - 1) ≤ Scalar.exp (Scalar.abs (x' - x)) - 1 := by
    rw [abs_le_iff']
    have h1 := le_abs_self (x' - x)
    have h2 := neg_le_abs (x' - x)
    have m1 := exp_le_exp h1
    have m2 := exp_le_exp (show -Scalar.abs (x' - x) ≤ x' - x by grind)
    have := one_sub_exp_neg_le (Scalar.abs (x' - x))
    constructor <;> grind
  have := mul_le_mul_of_nonneg_left' key (Std.le_of_lt hx)
  grind

end Laws

end KimiK3.Rounding
