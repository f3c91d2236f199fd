module

public import KimiK3.Core.Elementwise
public import KimiK3.Core.Sum

/-!
# Softmax along the last axis

`softmaxVec x` (defined in `Kernel`) is `y_j = exp (x_j - m) / Σ_k exp (x_k - m)` with `m` the
largest entry of `x` (the usual overflow guard). Proved here, for every model of
`ScalarLaws`: the coordinate formula, positivity, and that the entries sum to one. These hold
for any shift `m`, so they do not depend on `m` being the maximum.
-/

@[expose] public section

namespace KimiK3

namespace Tensor

variable {α : Type}

/-- Coordinate formula of the softmax of a vector. -/
theorem softmaxVec_apply [Scalar α] {n : Nat} (x : Tensor α [n]) (j : Fin n) :
    softmaxVec x j =
      Scalar.exp (x j - vecMax x) / finSum n (fun k => Scalar.exp (x k - vecMax x)) := rfl

@[simp] theorem softmaxLast_nil [Scalar α] {n : Nat} (x : Tensor α [n]) :
    softmaxLast [] x = softmaxVec x := rfl

@[simp] theorem softmaxLast_cons_apply [Scalar α] (m : Nat) (s : Shape) {n : Nat}
    (x : Tensor α (Shape.append (m :: s) [n])) (i : Fin m) : softmaxLast (m :: s) x i = softmaxLast s (x i) :=
  rfl

variable [ScalarLaws α]

/-- The softmax normalizer is positive. -/
theorem softmax_normalizer_pos {n : Nat} (x : Tensor α [n + 1]) (c : α) :
    0 < finSum (n + 1) (fun k => Scalar.exp (x k - c)) :=
  finSum_pos (fun _ => ScalarLaws.exp_pos _)

/-- Every softmax weight is positive. -/
theorem softmaxVec_pos {n : Nat} (x : Tensor α [n]) (j : Fin n) : 0 < softmaxVec x j := by
  cases n with
  | zero => exact j.elim0
  | succ n =>
    rw [softmaxVec_apply]
    exact div_pos' (ScalarLaws.exp_pos _) (softmax_normalizer_pos x _)

/-- The softmax weights of a nonempty vector sum to one. -/
theorem finSum_softmaxVec {n : Nat} (x : Tensor α [n + 1]) :
    finSum (n + 1) (softmaxVec x) = 1 := by
  have hz := softmax_normalizer_pos x (vecMax x)
  have hne : finSum (n + 1) (fun k => Scalar.exp (x k - vecMax x)) ≠ 0 := by grind
  have e : softmaxVec x = fun j => Scalar.exp (x j - vecMax x) /
      finSum (n + 1) (fun k => Scalar.exp (x k - vecMax x)) := rfl
  rw [e, finSum_div, Lean.Grind.Field.div_eq_mul_inv, Lean.Grind.Field.mul_inv_cancel hne]

/-- Every softmax weight is at most one. -/
theorem softmaxVec_le_one {n : Nat} (x : Tensor α [n]) (j : Fin n) : softmaxVec x j ≤ 1 := by
  cases n with
  | zero => exact j.elim0
  | succ n =>
    have := le_finSum (f := softmaxVec x) (fun i => by have := softmaxVec_pos x i; grind) j
    rw [finSum_softmaxVec] at this; exact this

end Tensor

end KimiK3
