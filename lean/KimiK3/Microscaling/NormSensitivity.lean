module

public import KimiK3.Microscaling.RoundingModel
public import KimiK3.Core.Norm

/-!
# Sensitivity of RMSNorm and L2 normalization (one-stage bounds for the tolerances)

A relative perturbation of the input of at most `δ` (entrywise, `|x'_k − x_k| ≤ δ |x_k|`, e.g.
the rounding of a stored vector, `δ = u`) changes every output coordinate of
`Tensor.rmsNormVec ε x g` (`x_j / √(Σ x_k²/n + ε) · g_j`) and of `Tensor.l2NormVec ε x` by at most
`2δ / (1 − δ)` of itself (first order: the factor 2 `difftest` uses):

* `rmsNormVec_rel_perturb_le`, `l2NormVec_rel_perturb_le`;
* behind them: `sumSq_perturb`, `add_eps_perturb`, `sqrt_perturb` (the normalizer moves by at
  most `δ` relatively) and `abs_div_sub_div_le` (a perturbed numerator over a perturbed
  normalizer).

The square-root facts they need (`eq_sqrt_of_mul_self`, `sqrt_le_sqrt'`, `sqrt_mul_self_mul`)
follow from `ScalarLaws`.
-/

@[expose] public section

namespace KimiK3.Rounding

open KimiK3

variable {α : Type}

/-- **Dividing by a perturbed normalizer**: if `(1 − δ) r ≤ r' ≤ (1 + δ) r` and
`|x' − x| ≤ δ |x|`, then `|x'/r' − x/r| ≤ 2δ/(1 − δ) · |x/r|`. -/
theorem abs_div_sub_div_le [OrderedScalarField α] {r r' x x' δ : α} (hr : 0 < r)
    (hδ1 : δ < 1) (hlo : (1 - δ) * r ≤ r') (hhi : r' ≤ (1 + δ) * r)
    (hx : Scalar.abs (x' - x) ≤ δ * Scalar.abs x) :
    Scalar.abs (x' / r' - x / r) ≤ 2 * δ / (1 - δ) * Scalar.abs (x / r) := by
  have hd : 0 < (1 - δ) * r := mul_pos' (by grind) hr
  have hr' : 0 < r' := Std.lt_of_lt_of_le hd hlo
  have hA : (x' / r' - x / r) * (r * r') = (x' - x) * r + x * (r - r') := by grind
  have hrr : Scalar.abs (r - r') ≤ δ * r := by rw [abs_le_iff']; constructor <;> grind
  have t := abs_add_le ((x' - x) * r) (x * (r - r'))
  rw [abs_mul', abs_mul', abs_of_nonneg (Std.le_of_lt hr)] at t
  have p1 := mul_le_mul_of_nonneg_right' hx (Std.le_of_lt hr)
  have p2 := mul_le_mul_of_nonneg_left' hrr (abs_nonneg x)
  have hnum : Scalar.abs ((x' / r' - x / r) * (r * r')) ≤ 2 * δ * Scalar.abs x * r := by rw [hA]; grind
  rw [abs_mul', abs_of_nonneg (Std.le_of_lt (mul_pos' hr hr'))] at hnum
  have h1 : Scalar.abs (x' / r' - x / r) * r' ≤ 2 * δ * Scalar.abs x :=
    le_of_mul_le_mul_right' (c := r) (by grind) hr
  have h2 := mul_le_mul_of_nonneg_left' hlo (abs_nonneg (x' / r' - x / r))
  have h4 := (le_div_iff_mul_le' hd).mpr (Std.le_trans h2 h1)
  rw [abs_div_of_pos' hr]
  have hne : (1 - δ) ≠ 0 := by grind
  have hrne : r ≠ 0 := by grind
  have e : 2 * δ * Scalar.abs x / ((1 - δ) * r) = 2 * δ / (1 - δ) * (Scalar.abs x / r) := by grind
  rw [e] at h4; exact h4

variable [ScalarLaws α]

/-- A nonnegative square root of `Q` is `√Q`. -/
theorem eq_sqrt_of_mul_self {r Q : α} (hr : 0 ≤ r) (h : r * r = Q) : r = Scalar.sqrt Q := by
  have hQ : 0 ≤ Q := by rw [← h]; exact mul_self_nonneg'' r
  have hs := ScalarLaws.sqrt_nonneg Q
  have hs2 := ScalarLaws.sqrt_mul_self hQ
  have e : (r - Scalar.sqrt Q) * (r + Scalar.sqrt Q) = 0 := by grind
  by_cases hz : r + Scalar.sqrt Q = 0
  · grind
  · have e2 : r - Scalar.sqrt Q = (r - Scalar.sqrt Q) * (r + Scalar.sqrt Q) * (r + Scalar.sqrt Q)⁻¹ := by
      grind
    rw [e, show (0 : α) * (r + Scalar.sqrt Q)⁻¹ = 0 by grind] at e2
    grind

/-- The square root is monotone. -/
theorem sqrt_le_sqrt' {a b : α} (ha : 0 ≤ a) (h : a ≤ b) : Scalar.sqrt a ≤ Scalar.sqrt b :=
  le_of_mul_self_le_mul_self' (ScalarLaws.sqrt_nonneg b) (by
    rw [ScalarLaws.sqrt_mul_self ha, ScalarLaws.sqrt_mul_self (Std.le_trans ha h)]; exact h)

/-- `√(k² Q) = k √Q` for `k, Q ≥ 0`. -/
theorem sqrt_mul_self_mul {k Q : α} (hk : 0 ≤ k) (hQ : 0 ≤ Q) :
    Scalar.sqrt (k * k * Q) = k * Scalar.sqrt Q := by
  have := ScalarLaws.sqrt_mul_self hQ
  exact (eq_sqrt_of_mul_self (mul_nonneg' hk (ScalarLaws.sqrt_nonneg Q)) (by grind)).symm

/-- A relative perturbation of at most `δ` moves the sum of squares by at most the factors
`(1 ∓ δ)²`. -/
theorem sumSq_perturb {δ : α} (hδ1 : δ < 1) {n : Nat} (x x' : Fin n → α)
    (hx : ∀ k, Scalar.abs (x' k - x k) ≤ δ * Scalar.abs (x k)) :
    (1 - δ) * (1 - δ) * finSum n (fun k => x k * x k) ≤ finSum n (fun k => x' k * x' k) ∧
      finSum n (fun k => x' k * x' k) ≤ (1 + δ) * (1 + δ) * finSum n (fun k => x k * x k) := by
  rw [← finSum_mul_left, ← finSum_mul_left]
  constructor <;> refine finSum_le_finSum (fun k => ?_)
  · have t := abs_add_le (x' k) (x k - x' k)
    have e : x' k + (x k - x' k) = x k := by grind
    rw [e, abs_sub_comm'] at t
    have h := hx k
    have hlo : (1 - δ) * Scalar.abs (x k) ≤ Scalar.abs (x' k) := by grind
    have := mul_self_le_mul_self' (mul_nonneg' (by grind) (abs_nonneg _)) hlo
    rw [abs_mul_abs_self'] at this
    have e2 : (1 - δ) * Scalar.abs (x k) * ((1 - δ) * Scalar.abs (x k)) =
        (1 - δ) * (1 - δ) * (Scalar.abs (x k) * Scalar.abs (x k)) := by grind
    rw [e2, abs_mul_abs_self'] at this; exact this
  · have t := abs_add_le (x k) (x' k - x k)
    have e : x k + (x' k - x k) = x' k := by grind
    rw [e] at t
    have h := hx k
    have hhi : Scalar.abs (x' k) ≤ (1 + δ) * Scalar.abs (x k) := by grind
    have := mul_self_le_mul_self' (abs_nonneg _) hhi
    rw [abs_mul_abs_self'] at this
    have e2 : (1 + δ) * Scalar.abs (x k) * ((1 + δ) * Scalar.abs (x k)) =
        (1 + δ) * (1 + δ) * (Scalar.abs (x k) * Scalar.abs (x k)) := by grind
    rw [e2, abs_mul_abs_self'] at this; exact this

/-- Adding `ε ≥ 0` keeps the factors: if `(1 − δ)² S ≤ S' ≤ (1 + δ)² S` then the same holds for
`S + ε` and `S' + ε`. -/
theorem add_eps_perturb {S S' eps δ : α} (heps : 0 ≤ eps) (hδ : 0 ≤ δ) (hδ1 : δ < 1)
    (hlo : (1 - δ) * (1 - δ) * S ≤ S') (hhi : S' ≤ (1 + δ) * (1 + δ) * S) :
    (1 - δ) * (1 - δ) * (S + eps) ≤ S' + eps ∧ S' + eps ≤ (1 + δ) * (1 + δ) * (S + eps) := by
  have hdd := mul_self_nonneg'' δ
  have hδδ := mul_le_mul_of_nonneg_left' (show δ ≤ 1 by grind) hδ
  have p3 := mul_le_mul_of_nonneg_right' (show (1 - δ) * (1 - δ) ≤ 1 by grind) heps
  have p4 := mul_le_mul_of_nonneg_right' (show 1 ≤ (1 + δ) * (1 + δ) by grind) heps
  constructor <;> grind

/-- **The normalizer moves by at most `δ` relatively**: if `(1 − δ)² Q ≤ Q' ≤ (1 + δ)² Q`
(`Q ≥ 0`), then `(1 − δ) √Q ≤ √Q' ≤ (1 + δ) √Q`. -/
theorem sqrt_perturb {Q Q' δ : α} (hQ : 0 ≤ Q) (hδ : 0 ≤ δ) (hδ1 : δ < 1)
    (hlo : (1 - δ) * (1 - δ) * Q ≤ Q') (hhi : Q' ≤ (1 + δ) * (1 + δ) * Q) :
    (1 - δ) * Scalar.sqrt Q ≤ Scalar.sqrt Q' ∧ Scalar.sqrt Q' ≤ (1 + δ) * Scalar.sqrt Q := by
  have h0 : 0 ≤ (1 - δ) * (1 - δ) * Q := mul_nonneg' (mul_self_nonneg'' _) hQ
  constructor
  · rw [← sqrt_mul_self_mul (show 0 ≤ 1 - δ by grind) hQ]
    exact sqrt_le_sqrt' h0 hlo
  · rw [← sqrt_mul_self_mul (show 0 ≤ 1 + δ by grind) hQ]
    exact sqrt_le_sqrt' (Std.le_trans h0 hlo) hhi

/-- **RMSNorm sensitivity**: a relative input perturbation of at most `δ < 1` changes every
output coordinate by at most `2δ / (1 − δ)` of itself (`ε > 0`). -/
theorem rmsNormVec_rel_perturb_le {eps δ : α} (heps : 0 < eps) (hδ : 0 ≤ δ) (hδ1 : δ < 1) {n : Nat}
    (x x' g : Tensor α [n]) (hx : ∀ k, Scalar.abs (x' k - x k) ≤ δ * Scalar.abs (x k)) (j : Fin n) :
    Scalar.abs (Tensor.rmsNormVec eps x' g j - Tensor.rmsNormVec eps x g j) ≤
      2 * δ / (1 - δ) * Scalar.abs (Tensor.rmsNormVec eps x g j) := by
  rw [Tensor.rmsNormVec_apply, Tensor.rmsNormVec_apply]
  have hn : (0 : α) < (n : α) := natCast_pos' (by have := j.isLt; omega)
  have hnne : (n : α) ≠ 0 := by grind
  obtain ⟨hlo, hhi⟩ := sumSq_perturb hδ1 x x' hx
  have hS := finSum_nonneg (fun k => mul_self_nonneg'' (x k))
  have hlo' := div_le_div_of_le_right' hn hlo
  have hhi' := div_le_div_of_le_right' hn hhi
  have e1 : (1 - δ) * (1 - δ) * finSum n (fun k => x k * x k) / (n : α) =
      (1 - δ) * (1 - δ) * (finSum n (fun k => x k * x k) / (n : α)) := by grind
  have e2 : (1 + δ) * (1 + δ) * finSum n (fun k => x k * x k) / (n : α) =
      (1 + δ) * (1 + δ) * (finSum n (fun k => x k * x k) / (n : α)) := by grind
  rw [e1] at hlo'; rw [e2] at hhi'
  obtain ⟨q1, q2⟩ := add_eps_perturb (Std.le_of_lt heps) hδ hδ1 hlo' hhi'
  have hQ : 0 < finSum n (fun k => x k * x k) / (n : α) + eps := by
    have := (le_div_iff_mul_le' hn).mpr (show 0 * (n : α) ≤ finSum n (fun k => x k * x k) by grind)
    grind
  obtain ⟨r1, r2⟩ := sqrt_perturb (Std.le_of_lt hQ) hδ hδ1 q1 q2
  have key := abs_div_sub_div_le (sqrt_pos hQ) hδ1 r1 r2 (hx j)
  have e : x' j / Scalar.sqrt (finSum n (fun k => x' k * x' k) / (n : α) + eps) * g j -
      x j / Scalar.sqrt (finSum n (fun k => x k * x k) / (n : α) + eps) * g j =
      (x' j / Scalar.sqrt (finSum n (fun k => x' k * x' k) / (n : α) + eps) -
        x j / Scalar.sqrt (finSum n (fun k => x k * x k) / (n : α) + eps)) * g j := by grind
  rw [e, abs_mul', abs_mul']
  have := mul_le_mul_of_nonneg_right' key (abs_nonneg (g j))
  grind

/-- **L2-normalization sensitivity**: a relative input perturbation of at most `δ < 1` changes
every output coordinate by at most `2δ / (1 − δ)` of itself (`ε > 0`). -/
theorem l2NormVec_rel_perturb_le {eps δ : α} (heps : 0 < eps) (hδ : 0 ≤ δ) (hδ1 : δ < 1) {n : Nat}
    (x x' : Tensor α [n]) (hx : ∀ k, Scalar.abs (x' k - x k) ≤ δ * Scalar.abs (x k)) (j : Fin n) :
    Scalar.abs (Tensor.l2NormVec eps x' j - Tensor.l2NormVec eps x j) ≤
      2 * δ / (1 - δ) * Scalar.abs (Tensor.l2NormVec eps x j) := by
  rw [Tensor.l2NormVec_apply, Tensor.l2NormVec_apply]
  obtain ⟨hlo, hhi⟩ := sumSq_perturb hδ1 x x' hx
  obtain ⟨q1, q2⟩ := add_eps_perturb (Std.le_of_lt heps) hδ hδ1 hlo hhi
  have hQ : 0 < finSum n (fun k => x k * x k) + eps := by
    have := finSum_nonneg (fun k => mul_self_nonneg'' (x k)); grind
  obtain ⟨r1, r2⟩ := sqrt_perturb (Std.le_of_lt hQ) hδ hδ1 q1 q2
  exact abs_div_sub_div_le (sqrt_pos hQ) hδ1 r1 r2 (hx j)

end KimiK3.Rounding
