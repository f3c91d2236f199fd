module

public import KimiK3.Core.Elementwise
public import KimiK3.Core.Sum

/-!
# RMSNorm and L2 normalization along the last axis

Definitions (in `Kernel`), for a vector `x` of length `n`:
* `rmsNormVec ε x g`, `y_j = x_j / √(Σ_k x_k² / n + ε) · g_j`;
* `l2NormVec ε x`, `y_j = x_j / √(Σ_k x_k² + ε)`.

Proved here: the coordinate formulas, and (for every model of `ScalarLaws`) that both
denominators are positive when `ε > 0`, so neither operation divides by zero.
-/

@[expose] public section

namespace KimiK3

namespace Tensor

variable {α : Type}

/-- Coordinate formula of RMSNorm. -/
theorem rmsNormVec_apply [Scalar α] (eps : α) {n : Nat} (x g : Tensor α [n]) (j : Fin n) :
    rmsNormVec eps x g j =
      x j / Scalar.sqrt (finSum n (fun k => x k * x k) / (n : α) + eps) * g j := rfl

/-- Coordinate formula of L2 normalization. -/
theorem l2NormVec_apply [Scalar α] (eps : α) {n : Nat} (x : Tensor α [n]) (j : Fin n) :
    l2NormVec eps x j = x j / Scalar.sqrt (finSum n (fun k => x k * x k) + eps) := rfl

@[simp] theorem rmsNormLast_nil [Scalar α] (eps : α) {n : Nat} (x g : Tensor α [n]) :
    rmsNormLast eps [] x g = rmsNormVec eps x g := rfl

@[simp] theorem rmsNormLast_cons_apply [Scalar α] (eps : α) (m : Nat) (s : Shape) {n : Nat}
    (x : Tensor α (Shape.append (m :: s) [n])) (g : Tensor α [n]) (i : Fin m) :
    rmsNormLast eps (m :: s) x g i = rmsNormLast eps s (x i) g := rfl

@[simp] theorem l2NormLast_nil [Scalar α] (eps : α) {n : Nat} (x : Tensor α [n]) :
    l2NormLast eps [] x = l2NormVec eps x := rfl

@[simp] theorem l2NormLast_cons_apply [Scalar α] (eps : α) (m : Nat) (s : Shape) {n : Nat}
    (x : Tensor α (Shape.append (m :: s) [n])) (i : Fin m) :
    l2NormLast eps (m :: s) x i = l2NormLast eps s (x i) := rfl

/-- `l2NormLast` over one leading axis, unapplied. -/
theorem l2NormLast_eta [Scalar α] (eps : α) (H n : Nat) (x : Tensor α [H, n]) :
    Tensor.l2NormLast eps [H] x = fun h => Tensor.l2NormVec eps (x h) := rfl

/-- `rmsNormLast` over one leading axis, unapplied. -/
theorem rmsNormLast_eta [Scalar α] (eps : α) (H n : Nat) (x : Tensor α [H, n]) (g : Tensor α [n]) :
    Tensor.rmsNormLast eps [H] x g = fun h => Tensor.rmsNormVec eps (x h) g := rfl

section Laws

variable [ScalarLaws α]

/-- A sum of squares is nonnegative. -/
theorem sumSq_nonneg {n : Nat} (x : Tensor α [n]) : 0 ≤ finSum n (fun k => x k * x k) :=
  finSum_nonneg (fun k => mul_self_nonneg' (x k))

/-- The RMSNorm denominator is positive when `ε > 0`. -/
theorem rmsNorm_denom_pos (eps : α) (heps : 0 < eps) {n : Nat} (x : Tensor α [n]) :
    0 < Scalar.sqrt (finSum n (fun k => x k * x k) / (n : α) + eps) := by
  apply sqrt_pos
  have h1 := sumSq_nonneg x
  have h2 := inv_nonneg' (natCast_nonneg' (α := α) n)
  have h3 := mul_nonneg' h1 h2
  rw [Lean.Grind.Field.div_eq_mul_inv]; grind

/-- The L2-normalization denominator is positive when `ε > 0`. -/
theorem l2Norm_denom_pos (eps : α) (heps : 0 < eps) {n : Nat} (x : Tensor α [n]) :
    0 < Scalar.sqrt (finSum n (fun k => x k * x k) + eps) := by
  apply sqrt_pos
  have := sumSq_nonneg x; grind

end Laws

end Tensor

end KimiK3
