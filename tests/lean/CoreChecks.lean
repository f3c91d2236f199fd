-- bundle: KimiK3.Core.Examples
/-!
# Core: every tensor operation and the example graphs at `Float`

Every operation of `Core/Kernel.lean` runs at `Float` on literal tensors with hand-computed
results (compared entrywise within `1e-6`); the example models of `Core/Examples.lean` run on
fixed weights. Run by `tests/test_lean_checks.py`.
-/

namespace KimiK3.EvalCheck

open Tensor

/-- Entrywise agreement within `1e-6`. -/
def close (s : Shape) (t u : Tensor Float s) : Bool := approxEqF 1e-6 s t u

/-- A `Float` literal tensor. -/
def lit (s : Shape) (l : ListRep Float s) : Tensor Float s := ofListsF s l

/-- `[[1, 2], [3, 4]]`. -/
def a : Tensor Float [2, 2] := lit [2, 2] [[1, 2], [3, 4]]
/-- `[[5, 6], [7, 8]]`. -/
def b : Tensor Float [2, 2] := lit [2, 2] [[5, 6], [7, 8]]

-- literals, scalars and the empty vector
#guard toListsF [2, 2] a == [[1, 2], [3, 4]]
#guard toListsF [] (lit [] 2.5) == 2.5
#guard toListsF [0] (lit [0] []) == []
#guard toListsF [2, 3] (fill 1.5 [2, 3]) == [[1.5, 1.5, 1.5], [1.5, 1.5, 1.5]]
#guard close [2, 2] (memo [2, 2] a) a
-- elementwise
#guard close [2, 2] (add [2, 2] a b) (lit [2, 2] [[6, 8], [10, 12]])
#guard close [2, 2] (sub [2, 2] a b) (lit [2, 2] [[-4, -4], [-4, -4]])
#guard close [2, 2] (mul [2, 2] a b) (lit [2, 2] [[5, 12], [21, 32]])
#guard close [2, 2] (div [2, 2] b a) (lit [2, 2] [[5, 3], [7 / 3, 2]])
#guard close [2, 2] (neg [2, 2] a) (lit [2, 2] [[-1, -2], [-3, -4]])
#guard close [2, 2] (scale 2 [2, 2] a) (lit [2, 2] [[2, 4], [6, 8]])
#guard close [2, 2] (map (fun x => x * x) [2, 2] a) (lit [2, 2] [[1, 4], [9, 16]])
#guard close [2] (zipWith max [2] (lit [2] [1, 5]) (lit [2] [3, 2])) (lit [2] [3, 5])
#guard close [2, 2] (broadcast 2 (lit [2] [1, 2])) (lit [2, 2] [[1, 2], [1, 2]])
#guard close [4] (map Scalar.exp [4] (lit [4] [0, 1, 0, 0]))
  (lit [4] [1, 2.718281828459045, 1, 1])
#guard close [3] (map Scalar.tanh [3] (lit [3] [0, 1, -1])) (lit [3] [0, 0.7615941559557649, -0.7615941559557649])
#guard close [2] (map Scalar.sigmoid [2] (lit [2] [0, 2])) (lit [2] [0.5, 0.8807970779778823])
#guard close [2] (map Scalar.log [2] (lit [2] [1, 2.718281828459045])) (lit [2] [0, 1])
#guard close [2] (map Scalar.sqrt [2] (lit [2] [4, 2])) (lit [2] [2, 1.4142135623730951])
-- reductions
#guard close [2] (sumLast [2] a) (lit [2] [3, 7])
#guard close [2] (meanLast [2] a) (lit [2] [1.5, 3.5])
#guard close [2] (sum0 [2] a) (lit [2] [4, 6])
#guard close [] (finSum 4 (lit [4] [1, 2, 3, 4])) 10
#guard close [] (vecMax (lit [4] [1, 7, 3, 4])) 7
-- products, row-vector convention y = x W with W stored [in, out]
#guard close [3] (vecMatMul (lit [2] [1, 2]) (lit [2, 3] [[1, 2, 3], [4, 5, 6]])) (lit [3] [9, 12, 15])
#guard close [2, 2] (matMul a b) (lit [2, 2] [[19, 22], [43, 50]])
#guard close [2, 1, 1] (batchedMatMul (lit [2, 1, 2] [[[1, 2]], [[3, 4]]]) (lit [2, 2, 1] [[[1], [1]], [[2], [0]]]))
  (lit [2, 1, 1] [[[3]], [[6]]])
#guard close [2, 3] (outer (lit [2] [1, 2]) (lit [3] [3, 4, 5])) (lit [2, 3] [[3, 4, 5], [6, 8, 10]])
#guard close [] (dot (lit [3] [1, 2, 3]) (lit [3] [4, 5, 6])) 32
-- layout
#guard close [2, 2] (transpose a) (lit [2, 2] [[1, 3], [2, 4]])
#guard close [3, 2, 1] (swapAxes01 (lit [2, 3, 1] [[[1], [2], [3]], [[4], [5], [6]]]))
  (lit [3, 2, 1] [[[1], [4]], [[2], [5]], [[3], [6]]])
#guard close [3, 2] (reshape (s := [2, 3]) [3, 2] rfl (lit [2, 3] [[1, 2, 3], [4, 5, 6]])) (lit [3, 2] [[1, 2], [3, 4], [5, 6]])
#guard close [4] (reshape (s := [2, 2]) [4] rfl a) (lit [4] [1, 2, 3, 4])
#guard close [3] (concat0 (s := []) (lit [2] [1, 2]) (lit [1] [3])) (lit [3] [1, 2, 3])
#guard close [3, 2] (concat0 a (lit [1, 2] [[9, 9]])) (lit [3, 2] [[1, 2], [3, 4], [9, 9]])
#guard close [2, 3] (concatLast [2] a (lit [2, 1] [[5], [6]])) (lit [2, 3] [[1, 2, 5], [3, 4, 6]])
-- softmax and normalizations
#guard close [2] (softmaxVec (lit [2] [0, 0])) (lit [2] [0.5, 0.5])
#guard close [3] (softmaxVec (lit [3] [1, 2, 3]))
  (lit [3] [0.09003057317038046, 0.24472847105479767, 0.6652409557748219])
#guard close [2, 2] (softmaxLast [2] (lit [2, 2] [[0, 0], [1000, 1000]])) (lit [2, 2] [[0.5, 0.5], [0.5, 0.5]])
#guard close [2] (rmsNormVec 0 (lit [2] [3, 4]) (lit [2] [1, 2]))
  (lit [2] [0.848528137423857, 2.262741699796952])
#guard close [1, 2] (rmsNormLast 0 [1] (lit [1, 2] [[3, 4]]) (lit [2] [1, 2]))
  (lit [1, 2] [[0.848528137423857, 2.262741699796952]])
#guard close [2] (l2NormVec 0 (lit [2] [3, 4])) (lit [2] [0.6, 0.8])
#guard close [1, 2] (l2NormLast 1e-6 [1] (lit [1, 2] [[0, 0]])) (lit [1, 2] [[0, 0]])

-- the `erf` node at `Float` (the `TrigScalar Float` instance's `FloatOps.erf`) against Python's
-- `math.erf(-0.5)`, `math.erf(0)`, `math.erf(1.25)`, `math.erf(3)`
#guard close [2, 2] ((PrimOp.erf (α := Float) [2, 2]).eval (.cons (lit [2, 2] [[-0.5, 0], [1.25, 3]]) .nil))
  (lit [2, 2] [[-0.5204998778130465, 0], [0.9229001282564582, 0.9999779095030014]])

-- graphs: `linearSoftmax` shares `h = x W` between two outputs
/-- The outputs of `linearSoftmax 2 3` on fixed weights and input. -/
def linearSoftmaxOut : Env Float [[3], [3]] :=
  (Examples.linearSoftmax 2 3).specFwd
    (.cons (lit [2, 3] [[1, 0, 0], [0, 1, 0]]) (.cons (lit [3] [0, 0, 1]) .nil))
    (.cons (lit [2] [1, 2]) .nil)

#guard close [3] linearSoftmaxOut.tail.head (lit [3] [1, 2, 0])
#guard close [3] linearSoftmaxOut.head (softmaxVec (lit [3] [1, 2, 1]))

/-- The output of `rmsMlp` with identity weights on one row. -/
def rmsMlpOut : Env Float [[1, 2]] :=
  (Examples.rmsMlp 0 1 2).specFwd
    (.cons (lit [2] [1, 2]) (.cons (lit [2, 2] [[1, 0], [0, 1]]) .nil))
    (.cons (lit [1, 2] [[3, 4]]) .nil)

#guard close [1, 2] rmsMlpOut.head
  (lit [1, 2] [[Float.tanh 0.848528137423857, Float.tanh 2.262741699796952]])

/-- The outputs of `layoutMix`. -/
def layoutMixOut : Env Float [[9], [3]] :=
  (Examples.layoutMix).specFwd .nil
    (.cons (lit [2, 3] [[1, 2, 3], [4, 5, 6]]) (.cons (lit [1, 3] [[7, 8, 9]]) .nil))

#guard close [9] layoutMixOut.head (lit [9] [1, 4, 7, 2, 5, 8, 3, 6, 9])
#guard close [3] layoutMixOut.tail.head (lit [3] [4, 5, 6])

end KimiK3.EvalCheck
