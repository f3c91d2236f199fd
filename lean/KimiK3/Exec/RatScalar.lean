module

public import KimiK3.Core.Scalar

/-!
# Exact rational scalars: a model of the ordered-field laws

`OrderedScalarField Rat`: Lean core's `Rat` with its field operations, its order and `max`. This
exhibits a model of `ScalarField` and `OrderedScalarField` (the classes the theorems of the
library assume), and lets the worked examples of the report be checked by exact evaluation
(`RatExamples.lean`).

**Not a model of `ScalarLaws`.** `Scalar` also asks for `exp`, `log`, `tanh`, `sigmoid` and
`sqrt`; no rational function satisfies their laws, so `Rat` carries stand-ins, their first-order
Taylor polynomials (`exp x = 1 + x`, `log x = x − 1`, `tanh x = x`, `sigmoid x = 1/2 + x/4`,
`sqrt x = (1 + x)/2`), chosen only so that evaluation is defined. Nothing about them is claimed:
`ScalarLaws Rat` is not declared, and the exact examples use none of them.

The instances are `noncomputable`: the offline compiler cannot compile code that refers to the
private helpers of Lean core's `Rat` instances. Exact evaluation therefore runs in the kernel
(`decide +kernel`), which needs no compiled code.
-/

@[expose] public section

namespace KimiK3

namespace RatOps

/-- Stand-in for `exp` (first-order Taylor polynomial at 0): `1 + x`. Not the exponential. -/
def exp (x : Rat) : Rat := 1 + x

/-- Stand-in for `log` (first-order Taylor polynomial at 1): `x − 1`. Not the logarithm. -/
def log (x : Rat) : Rat := x - 1

/-- Stand-in for `tanh` (first-order Taylor polynomial at 0): `x`. -/
def tanh (x : Rat) : Rat := x

/-- Stand-in for the logistic sigmoid (first-order Taylor polynomial at 0): `1/2 + x/4`. -/
def sigmoid (x : Rat) : Rat := 1 / 2 + x / 4

/-- Stand-in for the square root (first-order Taylor polynomial at 1): `(1 + x) / 2`. -/
def sqrt (x : Rat) : Rat := (1 + x) / 2

end RatOps

/-- The exact rational scalar: `Rat`'s arithmetic, order and `max`, with the stand-ins of
`RatOps` for the transcendental functions. -/
noncomputable instance instScalarRat : Scalar Rat where
  toAdd := inferInstance
  toSub := inferInstance
  toMul := inferInstance
  toNeg := inferInstance
  toDiv := inferInstance
  toInv := inferInstance
  toMax := inferInstance
  toLE := inferInstance
  toLT := inferInstance
  natCast := inferInstance
  ofNat _ := inferInstance
  exp := RatOps.exp
  log := RatOps.log
  tanh := RatOps.tanh
  sigmoid := RatOps.sigmoid
  sqrt := RatOps.sqrt
  decLe a b := inferInstanceAs (Decidable (a ≤ b))
  decLt a b := inferInstanceAs (Decidable (a < b))

/-- **`Rat` is an ordered scalar field**: a model of `ScalarField` and `OrderedScalarField`. -/
noncomputable instance instOrderedScalarFieldRat : OrderedScalarField Rat :=
  { instScalarRat, Lean.Grind.instFieldRat, Lean.Grind.instIsLinearOrderRat,
    Lean.Grind.instLawfulOrderLTRat, Lean.Grind.instOrderedRingRat with
    max_def := fun _ _ => Rat.max_def }

end KimiK3
