module

public import KimiK3.Core.Kernel

/-!
# Example graphs (definitions)

Small models used by the evaluation checks and the JSON export tests;
their meaning is proved in `GraphExamples`.

* `linearSoftmax n m`: parameters `W : [n, m]`, `b : [m]`, input `x : [n]`; the hidden value
  `h = x W` is bound once with `let1` and used twice: outputs `probs = softmax (h + b)` and
  `hidden = h`.
* `layoutMix`: concatenation, transpose, reshape and a mean, no parameters.
* `rmsMlp p n`: parameters `g : [n]`, `W : [n, n]`, input `x : [p, n]`; output
  `y = tanh (RMSNorm_ε(x; g) W)`.
-/

@[expose] public section

namespace KimiK3

namespace Examples

variable {α : Type}

/-- Softmax of an affine map, sharing the product `x W` between two outputs with `let1`. -/
def linearSoftmax (n m : Nat) : Model α where
  params := [("W", [n, m]), ("b", [m])]
  inputs := [("x", [n])]
  outputs := [("probs", [m]), ("hidden", [m])]
  body :=
    let h : Term α [[n, m], [m], [n]] [m] :=
      .op (.vecMatMul n m) (.cons (.var (.there (.there .here))) (.cons (.var .here) .nil))
    let probs : Term α [[m], [n, m], [m], [n]] [m] :=
      .op (.softmaxLast [] m)
        (.cons (.op (.binary .add [m])
          (.cons (.var .here) (.cons (.var (.there (.there .here))) .nil))) .nil)
    .cons (.let1 h probs) (.cons h .nil)

/-- RMSNorm with gain, then a square linear map and `tanh`, on a batch of rows. -/
def rmsMlp (eps : α) (p n : Nat) : Model α where
  params := [("g", [n]), ("W", [n, n])]
  inputs := [("x", [p, n])]
  outputs := [("y", [p, n])]
  body :=
    .cons (.op (.unary .tanh [p, n])
      (.cons (.op (.matMul p n n)
        (.cons (.op (.rmsNormLast eps [p] n)
            (.cons (.var (.there (.there .here))) (.cons (.var .here) .nil)))
          (.cons (.var (.there .here)) .nil))) .nil)) .nil

/-- Layout operations without parameters: `c = concat0 a b`, outputs `flat = reshape (cᵀ)`
and `rowMean = meanLast cᵀ`; `cᵀ` is shared with `let1`. -/
def layoutMix : Model α where
  params := []
  inputs := [("a", [2, 3]), ("b", [1, 3])]
  outputs := [("flat", [9]), ("rowMean", [3])]
  body :=
    let t : Term α [[2, 3], [1, 3]] [3, 3] :=
      .op (.swapAxes01 3 3 [])
        (.cons (.op (.concat0 2 1 [3]) (.cons (.var .here) (.cons (.var (.there .here)) .nil))) .nil)
    .cons (.let1 t (.op (.reshape [3, 3] [9] rfl) (.cons (.var .here) .nil)))
      (.cons (.let1 t (.op (.meanLast [3] 3) (.cons (.var .here) .nil))) .nil)

end Examples

end KimiK3
