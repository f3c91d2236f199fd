module

/-!
# Scalars: one interface for proofs and execution

`Scalar α` bundles every scalar operation the K3 specification uses. Definitions of tensor
operations only ask for `[Scalar α]`, so they run on `Float`/`Float32` and can be reasoned
about for any lawful model.

Laws live in separate classes:
* `ScalarField α` — `Scalar α` whose arithmetic is a `Lean.Grind.Field` (so `grind` works);
* `OrderedScalarField α` — additionally a linear order compatible with the field operations
  (the hypotheses `grind` needs for linear arithmetic) and `max` given by the order;
* `ScalarLaws α` — the facts about `exp`, `log`, `tanh`, `sigmoid`, `sqrt` that K3's theorems
  use.

A theorem stated with these classes holds for the real numbers and for every other model of
them. `Float` is *not* a model (its arithmetic rounds); it only carries the executable
instance.
-/

@[expose] public section

namespace KimiK3

/-- The scalar operations of the specification: field arithmetic, comparisons, `max`, and the
transcendental functions `exp`, `log`, `tanh`, `sigmoid`, `sqrt`. -/
class Scalar (α : Type) extends Add α, Sub α, Mul α, Neg α, Div α, Inv α, Max α, LE α, LT α where
  /-- Natural numbers as scalars (used for means and counts). -/
  [natCast : NatCast α]
  /-- Numeric literals. -/
  [ofNat : (n : Nat) → OfNat α n]
  /-- The exponential function. -/
  exp : α → α
  /-- The natural logarithm. -/
  log : α → α
  /-- The hyperbolic tangent. -/
  tanh : α → α
  /-- The logistic sigmoid `1 / (1 + exp (-x))`. -/
  sigmoid : α → α
  /-- The square root. -/
  sqrt : α → α
  /-- `≤` is decidable. -/
  decLe : DecidableRel (α := α) (· ≤ ·)
  /-- `<` is decidable. -/
  decLt : DecidableRel (α := α) (· < ·)

attribute [instance] Scalar.natCast Scalar.ofNat Scalar.decLe Scalar.decLt

namespace Scalar

/-- Absolute value, `max x (-x)`. -/
def abs {α : Type} [Scalar α] (x : α) : α := max x (-x)

end Scalar

namespace FloatOps

/-! Each executable operation of `Float` wrapped in a compiled function of our own: passing the
built-in `Float` operations themselves as closures does not compile offline. -/

/-- Natural number to `Float`. -/
@[noinline] def ofNat (n : Nat) : Float := Float.ofNat n
/-- Addition. -/
@[noinline] def add (a b : Float) : Float := a + b
/-- Subtraction. -/
@[noinline] def sub (a b : Float) : Float := a - b
/-- Multiplication. -/
@[noinline] def mul (a b : Float) : Float := a * b
/-- Division. -/
@[noinline] def div (a b : Float) : Float := a / b
/-- Negation. -/
@[noinline] def neg (a : Float) : Float := -a
/-- Reciprocal. -/
@[noinline] def inv (a : Float) : Float := 1 / a
/-- Maximum (the second argument when the two compare equal). -/
@[noinline] def max (a b : Float) : Float := if a ≤ b then b else a
/-- Exponential. -/
@[noinline] def exp (a : Float) : Float := Float.exp a
/-- Natural logarithm. -/
@[noinline] def log (a : Float) : Float := Float.log a
/-- Hyperbolic tangent. -/
@[noinline] def tanh (a : Float) : Float := Float.tanh a
/-- Logistic sigmoid `1 / (1 + exp (-x))`. -/
@[noinline] def sigmoid (a : Float) : Float := 1 / (1 + Float.exp (-a))
/-- Square root. -/
@[noinline] def sqrt (a : Float) : Float := Float.sqrt a
/-- Decide `≤`. -/
@[noinline] def decLe (a b : Float) : Decidable (a ≤ b) := Float.decLe a b
/-- Decide `<`. -/
@[noinline] def decLt (a b : Float) : Decidable (a < b) := Float.decLt a b

end FloatOps

/-- The executable `Float` (IEEE binary64) scalar. -/
instance instScalarFloat : Scalar Float where
  add := FloatOps.add
  sub := FloatOps.sub
  mul := FloatOps.mul
  div := FloatOps.div
  neg := FloatOps.neg
  inv := FloatOps.inv
  max := FloatOps.max
  le := (· ≤ ·)
  lt := (· < ·)
  natCast := ⟨FloatOps.ofNat⟩
  ofNat n := ⟨FloatOps.ofNat n⟩
  exp := FloatOps.exp
  log := FloatOps.log
  tanh := FloatOps.tanh
  sigmoid := FloatOps.sigmoid
  sqrt := FloatOps.sqrt
  decLe := FloatOps.decLe
  decLt := FloatOps.decLt

namespace Float32Ops

/-! Each executable operation of `Float32` wrapped in a compiled function of our own: passing the
built-in `Float32` operations themselves as closures does not compile offline. -/

/-- Natural number to `Float32`. -/
@[noinline] def ofNat (n : Nat) : Float32 := Float32.ofNat n
/-- Addition. -/
@[noinline] def add (a b : Float32) : Float32 := a + b
/-- Subtraction. -/
@[noinline] def sub (a b : Float32) : Float32 := a - b
/-- Multiplication. -/
@[noinline] def mul (a b : Float32) : Float32 := a * b
/-- Division. -/
@[noinline] def div (a b : Float32) : Float32 := a / b
/-- Negation. -/
@[noinline] def neg (a : Float32) : Float32 := -a
/-- Reciprocal. -/
@[noinline] def inv (a : Float32) : Float32 := 1 / a
/-- Maximum (the second argument when the two compare equal). -/
@[noinline] def max (a b : Float32) : Float32 := if a ≤ b then b else a
/-- Exponential. -/
@[noinline] def exp (a : Float32) : Float32 := Float32.exp a
/-- Natural logarithm. -/
@[noinline] def log (a : Float32) : Float32 := Float32.log a
/-- Hyperbolic tangent. -/
@[noinline] def tanh (a : Float32) : Float32 := Float32.tanh a
/-- Logistic sigmoid `1 / (1 + exp (-x))`. -/
@[noinline] def sigmoid (a : Float32) : Float32 := 1 / (1 + Float32.exp (-a))
/-- Square root. -/
@[noinline] def sqrt (a : Float32) : Float32 := Float32.sqrt a
/-- Decide `≤`. -/
@[noinline] def decLe (a b : Float32) : Decidable (a ≤ b) := Float32.decLe a b
/-- Decide `<`. -/
@[noinline] def decLt (a b : Float32) : Decidable (a < b) := Float32.decLt a b

end Float32Ops

/-- The executable `Float32` (IEEE binary32) scalar. -/
instance instScalarFloat32 : Scalar Float32 where
  add := Float32Ops.add
  sub := Float32Ops.sub
  mul := Float32Ops.mul
  div := Float32Ops.div
  neg := Float32Ops.neg
  inv := Float32Ops.inv
  max := Float32Ops.max
  le := (· ≤ ·)
  lt := (· < ·)
  natCast := ⟨Float32Ops.ofNat⟩
  ofNat n := ⟨Float32Ops.ofNat n⟩
  exp := Float32Ops.exp
  log := Float32Ops.log
  tanh := Float32Ops.tanh
  sigmoid := Float32Ops.sigmoid
  sqrt := Float32Ops.sqrt
  decLe := Float32Ops.decLe
  decLt := Float32Ops.decLt

/-- A scalar type whose arithmetic is a field in the sense of `Lean.Grind.Field`. -/
class ScalarField (α : Type) extends Scalar α, Lean.Grind.Field α

/-- A scalar field with a linear order compatible with its arithmetic, and `max` given by the
order. These are exactly the hypotheses `grind` needs for linear arithmetic. -/
class OrderedScalarField (α : Type) extends ScalarField α, Std.IsLinearOrder α,
    Std.LawfulOrderLT α, Lean.Grind.OrderedRing α where
  /-- `max` picks the larger argument. -/
  max_def : ∀ a b : α, max a b = if a ≤ b then b else a

/-- Facts about the transcendental functions, as assumptions on the scalar model. The reals
satisfy all of them. -/
class ScalarLaws (α : Type) extends OrderedScalarField α where
  /-- `exp` is positive. -/
  exp_pos : ∀ x : α, 0 < Scalar.exp x
  /-- `exp 0 = 1`. -/
  exp_zero : Scalar.exp (0 : α) = 1
  /-- `exp` turns sums into products. -/
  exp_add : ∀ x y : α, Scalar.exp (x + y) = Scalar.exp x * Scalar.exp y
  /-- `exp` is strictly increasing. -/
  exp_lt_exp : ∀ {x y : α}, x < y → Scalar.exp x < Scalar.exp y
  /-- `log` inverts `exp`. -/
  log_exp : ∀ x : α, Scalar.log (Scalar.exp x) = x
  /-- `exp` inverts `log` on positive numbers. -/
  exp_log : ∀ {x : α}, 0 < x → Scalar.exp (Scalar.log x) = x
  /-- `tanh` is at least `-1`. -/
  neg_one_le_tanh : ∀ x : α, -1 ≤ Scalar.tanh x
  /-- `tanh` is at most `1`. -/
  tanh_le_one : ∀ x : α, Scalar.tanh x ≤ 1
  /-- The sigmoid is the logistic function. -/
  sigmoid_eq : ∀ x : α, Scalar.sigmoid x = 1 / (1 + Scalar.exp (-x))
  /-- Square roots are nonnegative. -/
  sqrt_nonneg : ∀ x : α, 0 ≤ Scalar.sqrt x
  /-- The square root of a nonnegative number squares back to it. -/
  sqrt_mul_self : ∀ {x : α}, 0 ≤ x → Scalar.sqrt x * Scalar.sqrt x = x

end KimiK3
