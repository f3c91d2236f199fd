module

public import KimiK3.Microscaling.RoundingModel
public import KimiK3.Core.Softmax

/-!
# Sensitivity of the softmax (one-stage bound for the tolerances)

* `normalize_ratio_le` — normalizing positive weights: if every weight moves by at most a factor
  `R ≥ 1` (`w'_k ≤ R w_k`, `w_k ≤ R w'_k`), every normalized weight moves by at most the factor
  `R²`, so `|p'_j − p_j| ≤ (R² − 1) p_j`;
* **`softmaxVec_perturb_le`** — scores off by at most `η` (absolutely) change every softmax weight
  by at most `(e^{2η} − 1)` of itself (first order `2η`, the factor 2 `difftest` uses); the same
  lemma with `R = 1/(1 − u)` covers exponentials evaluated with relative error `u`.
-/

@[expose] public section

namespace KimiK3.Rounding

open KimiK3

variable {α : Type}

/-- One side of the normalization ratio: `w'_j / Σ w' ≤ R² · w_j / Σ w`. -/
theorem normalize_ratio_upper [OrderedScalarField α] {n : Nat} {w w' : Fin n → α} (hw : ∀ k, 0 < w k)
    (hw' : ∀ k, 0 < w' k) {R : α} (hR : 1 ≤ R) (h1 : ∀ k, w' k ≤ R * w k) (h2 : ∀ k, w k ≤ R * w' k)
    (j : Fin n) : w' j / finSum n w' ≤ R * R * (w j / finSum n w) := by
  have hW : 0 < finSum n w := Std.lt_of_lt_of_le (hw j) (le_finSum (fun k => Std.le_of_lt (hw k)) j)
  have hW' : 0 < finSum n w' := Std.lt_of_lt_of_le (hw' j) (le_finSum (fun k => Std.le_of_lt (hw' k)) j)
  have hW2 : finSum n w ≤ R * finSum n w' := by rw [← finSum_mul_left]; exact finSum_le_finSum h2
  have hR0 : 0 ≤ R := by grind
  -- `w'_j Σw ≤ R w_j Σw ≤ R w_j · R Σw'`
  have p1 := mul_le_mul_of_nonneg_right' (h1 j) (Std.le_of_lt hW)
  have p2 := mul_le_mul_of_nonneg_left' hW2 (mul_nonneg' hR0 (Std.le_of_lt (hw j)))
  have hne : finSum n w ≠ 0 := by grind
  have hne' : finSum n w' ≠ 0 := by grind
  have e1 : w' j / finSum n w' * (finSum n w * finSum n w') = w' j * finSum n w := by grind
  have e2 : R * R * (w j / finSum n w) * (finSum n w * finSum n w') = R * w j * (R * finSum n w') := by
    grind
  have key : w' j / finSum n w' * (finSum n w * finSum n w') ≤
      R * R * (w j / finSum n w) * (finSum n w * finSum n w') := by
    rw [e1, e2]; exact Std.le_trans p1 p2
  exact le_of_mul_le_mul_right' key (mul_pos' hW hW')

/-- **Normalizing perturbed positive weights**: if every weight moves by at most a factor `R ≥ 1`,
every normalized weight moves by at most `(R² − 1)` of itself. -/
theorem normalize_ratio_le [OrderedScalarField α] {n : Nat} {w w' : Fin n → α} (hw : ∀ k, 0 < w k)
    (hw' : ∀ k, 0 < w' k) {R : α} (hR : 1 ≤ R) (h1 : ∀ k, w' k ≤ R * w k) (h2 : ∀ k, w k ≤ R * w' k)
    (j : Fin n) :
    Scalar.abs (w' j / finSum n w' - w j / finSum n w) ≤ (R * R - 1) * (w j / finSum n w) := by
  have up := normalize_ratio_upper hw hw' hR h1 h2 j
  have lo := normalize_ratio_upper hw' hw hR h2 h1 j
  have hW : 0 < finSum n w := Std.lt_of_lt_of_le (hw j) (le_finSum (fun k => Std.le_of_lt (hw k)) j)
  have hp : 0 ≤ w j / finSum n w := Std.le_of_lt (div_pos' (hw j) hW)
  have hS : 1 ≤ R * R := by have := mul_le_mul'' hR hR (by grind) (by grind); grind
  -- `p − p' ≤ (S − 1) p` from `p ≤ S p'`, multiplying by `S > 0`
  have hsq := mul_nonneg' (mul_self_nonneg'' (R * R - 1)) hp
  have hlow : (w j / finSum n w - w' j / finSum n w') * (R * R) ≤ (R * R - 1) * (w j / finSum n w) * (R * R) := by
    grind
  have hlow' := le_of_mul_le_mul_right' hlow (by grind)
  rw [abs_le_iff']; constructor <;> grind

/-- The softmax without its overflow shift: `softmax(x)_j = e^{x_j} / Σ_k e^{x_k}`. -/
theorem softmaxVec_eq_exp_div [ScalarLaws α] {n : Nat} (x : Tensor α [n]) (j : Fin n) :
    Tensor.softmaxVec x j = Scalar.exp (x j) / finSum n (fun k => Scalar.exp (x k)) := by
  rw [Tensor.softmaxVec_apply]
  have e1 : ∀ k, Scalar.exp (x k - Tensor.vecMax x) = Scalar.exp (x k) * Scalar.exp (-Tensor.vecMax x) :=
    fun k => by rw [← ScalarLaws.exp_add]; congr 1; grind
  simp only [e1]
  rw [finSum_mul_right]
  have hE := ScalarLaws.exp_pos (-Tensor.vecMax x)
  have hS : 0 < finSum n (fun k => Scalar.exp (x k)) :=
    Std.lt_of_lt_of_le (ScalarLaws.exp_pos (x j))
      (le_finSum (f := fun k => Scalar.exp (x k)) (fun k => Std.le_of_lt (ScalarLaws.exp_pos _)) j)
  have : Scalar.exp (-Tensor.vecMax x) ≠ 0 := by grind
  have : finSum n (fun k => Scalar.exp (x k)) ≠ 0 := by grind
  grind

/-- **Softmax sensitivity**: scores off by at most `η` change every softmax weight by at most
`(e^{2η} − 1)` of itself. -/
theorem softmaxVec_perturb_le [ScalarLaws α] {n : Nat} (x x' : Tensor α [n]) {η : α}
    (hx : ∀ k, Scalar.abs (x' k - x k) ≤ η) (j : Fin n) :
    Scalar.abs (Tensor.softmaxVec x' j - Tensor.softmaxVec x j) ≤
      (Scalar.exp (2 * η) - 1) * Tensor.softmaxVec x j := by
  rw [softmaxVec_eq_exp_div x' j, softmaxVec_eq_exp_div x j]
  have hη : 0 ≤ η := Std.le_trans (abs_nonneg _) (hx j)
  have hR : 1 ≤ Scalar.exp η := by rw [← ScalarLaws.exp_zero (α := α)]; exact exp_le_exp hη
  have hRR : Scalar.exp η * Scalar.exp η = Scalar.exp (2 * η) := by
    rw [← ScalarLaws.exp_add]; congr 1; grind
  have shift : ∀ a b : α, Scalar.exp a = Scalar.exp b * Scalar.exp (a - b) := fun a b => by
    rw [← ScalarLaws.exp_add]; congr 1; grind
  have h1 : ∀ k, Scalar.exp (x' k) ≤ Scalar.exp η * Scalar.exp (x k) := fun k => by
    rw [shift (x' k) (x k)]
    have := mul_le_mul_of_nonneg_left' (exp_le_exp (Std.le_trans (le_abs_self _) (hx k)))
      (Std.le_of_lt (ScalarLaws.exp_pos (x k)))
    grind
  have h2 : ∀ k, Scalar.exp (x k) ≤ Scalar.exp η * Scalar.exp (x' k) := fun k => by
    rw [shift (x k) (x' k)]
    have hk : x k - x' k ≤ η := by have := neg_le_abs (x' k - x k); have := hx k; grind
    have := mul_le_mul_of_nonneg_left' (exp_le_exp hk) (Std.le_of_lt (ScalarLaws.exp_pos (x' k)))
    grind
  have := normalize_ratio_le (w := fun k => Scalar.exp (x k)) (w' := fun k => Scalar.exp (x' k))
    (fun k => ScalarLaws.exp_pos _) (fun k => ScalarLaws.exp_pos _) hR h1 h2 j
  rw [hRR] at this; exact this

end KimiK3.Rounding
