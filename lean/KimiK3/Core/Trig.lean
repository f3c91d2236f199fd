module

public import KimiK3.Core.Scalar

/-!
# Sine, cosine, erf and π: the scalar functions of MoonViT-V2 (k3-spec §7)

MoonViT-V2 needs four scalar functions the language model does not: `sin` and `cos` (its 2-D
RoPE and its sincos time table), `erf` (the projector's GELU) and the constant `π` (the
encoder MLP's tanh GELU, `√(2/π)`). `TrigScalar α` is `Scalar α` with them; `TrigLaws α` is
`ScalarLaws α` with the facts the vision theorems use. The reals satisfy all of them.

They sit in a class of their own, beside `Scalar` rather than in it, so that no existing model
of `Scalar` (`Float`, `Float32`, the exact `Rat` of `Exec/RatScalar.lean`) has to change and the
language-model modules, which never use them, do not depend on them. `Float` and `Float32` carry
executable instances, like `exp` and `tanh`: `sin`/`cos` are the C library's, `π` is the binary64
(binary32) rounding of π, and `erf` (absent from Lean's `Float`) is `FloatOps.erf` below, within
7 ulps of C's `erf` on `[-7, 7]` (200,000 random points against Python's `math.erf`, the same
algorithm in binary64; `tests/lean/VisionChecks.lean` checks it at fixed points against `math.erf`).
-/

@[expose] public section

namespace KimiK3

/-- **The scalar operations of MoonViT-V2** (k3-spec §7): `Scalar` with the sine and cosine (2-D
RoPE, the time table), the error function (the projector's GELU) and `π` (the tanh GELU). -/
class TrigScalar (α : Type) extends Scalar α where
  /-- The sine. -/
  sin : α → α
  /-- The cosine. -/
  cos : α → α
  /-- The error function `erf x = 2/√π ∫₀ˣ e^(−t²) dt`. -/
  erf : α → α
  /-- The constant `π`. -/
  pi : α

namespace FloatOps

/-- Sine. -/
@[noinline] def sin (a : Float) : Float := Float.sin a
/-- Cosine. -/
@[noinline] def cos (a : Float) : Float := Float.cos a
/-- `π` rounded to binary64 (Python's `math.pi`). -/
@[noinline] def pi : Float := 3.141592653589793

/-- The Maclaurin series of `erf` from term `n` on: `acc + Σ_{k ≥ n} term_k / (2k + 1)`, with
`term_k = (−1)^k x^(2k+1) / k!` carried in `term` (`x2 = x²`), stopped when a term no longer
changes the sum or after `fuel` terms. -/
def erfSeries (x2 term acc : Float) (n : Nat) : Nat → Float
  | 0 => acc
  | fuel + 1 =>
    let acc' := acc + term / Float.ofNat (2 * n + 1)
    if acc' == acc then acc
    else erfSeries x2 (-term * x2 / Float.ofNat (n + 1)) acc' (n + 1) fuel

/-- The continued fraction of `erfc` for `x > 0`,
`√π · e^(x²) · erfc x = 1 / (x + (1/2) / (x + 1 / (x + (3/2) / (x + …))))`: its denominator
`x + (1/2)/(x + …)`, evaluated from depth `n` up (`tail` is the value below depth `n`). -/
def erfcFraction (x tail : Float) : Nat → Float
  | 0 => x + tail
  | n + 1 => erfcFraction x (Float.ofNat (n + 1) / 2 / (x + tail)) n

/-- **The error function at binary64** (not in Lean's `Float`): the Maclaurin series for
`|x| < 3/2`, `1 − e^(−x²)/(√π · fraction)` with the `erfc` continued fraction (depth 120) for
`3/2 ≤ |x| < 6`, `±1` beyond (where `1 − erf x < 2^−53`), odd; NaN stays NaN. Within 7 ulps of
C's `erf` on `[−7, 7]`. -/
@[noinline] def erf (a : Float) : Float :=
  if a.isNaN then a else
  let x := if a < 0 then -a else a
  let y :=
    if x < 1.5 then 2 / Float.sqrt pi * erfSeries (x * x) x 0 0 200
    else if x < 6 then 1 - Float.exp (-(x * x)) / Float.sqrt pi / erfcFraction x 0 120
    else 1
  if a < 0 then -y else y

end FloatOps

/-- The executable `Float` sine, cosine, erf and `π`. -/
instance instTrigScalarFloat : TrigScalar Float :=
  { instScalarFloat with
    sin := FloatOps.sin, cos := FloatOps.cos, erf := FloatOps.erf, pi := FloatOps.pi }

namespace Float32Ops

/-- Sine. -/
@[noinline] def sin (a : Float32) : Float32 := Float32.sin a
/-- Cosine. -/
@[noinline] def cos (a : Float32) : Float32 := Float32.cos a
/-- `π` rounded to binary32. -/
@[noinline] def pi : Float32 := 3.14159265
/-- The error function: the binary64 one (`FloatOps.erf`), rounded to binary32. -/
@[noinline] def erf (a : Float32) : Float32 := (FloatOps.erf a.toFloat).toFloat32

end Float32Ops

/-- The executable `Float32` sine, cosine, erf and `π`. -/
instance instTrigScalarFloat32 : TrigScalar Float32 :=
  { instScalarFloat32 with
    sin := Float32Ops.sin, cos := Float32Ops.cos, erf := Float32Ops.erf, pi := Float32Ops.pi }

/-- **Facts about `sin`, `cos`, `erf` and `π`**, as assumptions on the scalar model (with those of
`ScalarLaws`). The reals satisfy all of them. -/
class TrigLaws (α : Type) extends ScalarLaws α, TrigScalar α where
  /-- `sin² x + cos² x = 1`. -/
  sin_sq_add_cos_sq : ∀ x : α, TrigScalar.sin x * TrigScalar.sin x + TrigScalar.cos x * TrigScalar.cos x = 1
  /-- The cosine of a difference. -/
  cos_sub : ∀ x y : α,
    TrigScalar.cos (x - y) = TrigScalar.cos x * TrigScalar.cos y + TrigScalar.sin x * TrigScalar.sin y
  /-- The sine of a difference. -/
  sin_sub : ∀ x y : α,
    TrigScalar.sin (x - y) = TrigScalar.sin x * TrigScalar.cos y - TrigScalar.cos x * TrigScalar.sin y
  /-- `erf` is odd. -/
  erf_neg : ∀ x : α, TrigScalar.erf (-x) = -TrigScalar.erf x
  /-- `erf` is at least `−1`. -/
  neg_one_le_erf : ∀ x : α, -1 ≤ TrigScalar.erf x
  /-- `erf` is at most `1`. -/
  erf_le_one : ∀ x : α, TrigScalar.erf x ≤ 1
  /-- `π` is positive. -/
  pi_pos : 0 < (TrigScalar.pi : α)

namespace Trig

/-! The laws of `TrigLaws` restated through `TrigScalar`'s operations, the form definitions over
`[TrigScalar α]` produce (a class field of `TrigLaws` is its own constant, equal to the
`TrigScalar` operation only after unfolding the parent projection). Proofs use these. -/

variable {α : Type} [TrigLaws α]

theorem sin_sq_add_cos_sq (x : α) :
    TrigScalar.sin x * TrigScalar.sin x + TrigScalar.cos x * TrigScalar.cos x = 1 :=
  TrigLaws.sin_sq_add_cos_sq x

theorem cos_sub (x y : α) :
    TrigScalar.cos (x - y) = TrigScalar.cos x * TrigScalar.cos y + TrigScalar.sin x * TrigScalar.sin y :=
  TrigLaws.cos_sub x y

theorem sin_sub (x y : α) :
    TrigScalar.sin (x - y) = TrigScalar.sin x * TrigScalar.cos y - TrigScalar.cos x * TrigScalar.sin y :=
  TrigLaws.sin_sub x y

theorem erf_neg (x : α) : TrigScalar.erf (-x) = -TrigScalar.erf x := TrigLaws.erf_neg x

theorem neg_one_le_erf (x : α) : -1 ≤ TrigScalar.erf x := TrigLaws.neg_one_le_erf x

theorem erf_le_one (x : α) : TrigScalar.erf x ≤ 1 := TrigLaws.erf_le_one x

theorem pi_pos : 0 < (TrigScalar.pi : α) := TrigLaws.pi_pos

/-- `cos 0 = 1` (from `cos (0 − 0) = cos² 0 + sin² 0 = 1`). -/
theorem cos_zero : TrigScalar.cos (0 : α) = 1 := by
  have h := cos_sub (0 : α) 0
  have h1 := sin_sq_add_cos_sq (0 : α)
  have e : (0 : α) - 0 = 0 := by grind
  rw [e] at h; grind

/-- `sin 0 = 0` (from `sin (0 − 0) = sin 0 cos 0 − cos 0 sin 0 = 0`). -/
theorem sin_zero : TrigScalar.sin (0 : α) = 0 := by
  have h := sin_sub (0 : α) 0
  have e : (0 : α) - 0 = 0 := by grind
  rw [e] at h; grind

end Trig

end KimiK3
