module

public import KimiK3.Core.Examples
public import KimiK3.Core.GraphEval

/-!
# Meaning of the example graphs

For each model of `Examples`, a theorem `specFwd params inputs = formula`, proved from the
per-primitive `eval` lemmas.
-/

@[expose] public section

namespace KimiK3

namespace Examples

variable {α : Type}

variable [Scalar α]

/-- Meaning of `linearSoftmax`: `probs = softmax (x W + b)`, `hidden = x W`. -/
theorem linearSoftmax_specFwd (n m : Nat) (w : Tensor α [n, m]) (b : Tensor α [m])
    (x : Tensor α [n]) :
    (linearSoftmax n m).specFwd (.cons w (.cons b .nil)) (.cons x .nil) =
      .cons (Tensor.softmaxVec (Tensor.zipWith (· + ·) [m] (Tensor.vecMatMul x w) b))
        (.cons (Tensor.vecMatMul x w) .nil) := by
  simp [Model.specFwd, linearSoftmax, Env.append]
  rfl

/-- Meaning of `rmsMlp`: `y = tanh (RMSNorm_ε(x; g) W)` entrywise. -/
theorem rmsMlp_specFwd (eps : α) (p n : Nat) (g : Tensor α [n]) (w : Tensor α [n, n])
    (x : Tensor α [p, n]) :
    (rmsMlp eps p n).specFwd (.cons g (.cons w .nil)) (.cons x .nil) =
      .cons (Tensor.map Scalar.tanh [p, n] (Tensor.matMul (Tensor.rmsNormLast eps [p] x g) w))
        .nil := by
  simp [Model.specFwd, rmsMlp, Env.append]
  rfl

end Examples

end KimiK3
