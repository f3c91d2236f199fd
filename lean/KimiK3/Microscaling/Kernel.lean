module

public import KimiK3.Core.Kernel

/-!
# Executable definitions of the microscaling formats

Every executable definition of this folder, so that an evaluation bundle (`codegen.bundle`)
needs only `Core.Scalar`, `Core.Kernel` and this file (like Core's `Kernel.lean`); the theorems
about them are in the files of their concepts (`Round.lean`, `FloatFormat.lean`, `E8M0.lean`,
`ScaleRule.lean`, `Block.lean`, `MXFP4.lean`, `Matrix.lean`).

* `firstFalse` — bisection for the boundary of an antitone predicate;
* `roundIndex` — **round to nearest, ties to even, saturating** over a strictly increasing value
  table: the index of the nearest value, the even index at a midpoint, `0` below the first value
  and `N` above the last;
* `FloatFormat` with `decode` and `encode`, and the formats `e2m1`, `e4m3`, `e5m2`;
* `E8M0` with `scaleValue`, `decode`, `encode`;
* `ScaleRule` (`ocpFloor`, `ceil`) and `ScaleRule.code`;
* `Block` (`decode`, `dot`, `amax`, `quantizeWithScale`, `quantize`), MXFP4's names, and MX
  vectors and matrices (`MXVector`, `MXMatrix`, `quantizeVector`, `quantizeMatrix`).

Generic (scalar-polymorphic) definitions are `@[macro_inline]`: the offline compiler cannot
compile generic code calling another module's generic code (Core `Kernel`), so they are inlined
at their concrete (`Float`) call sites; `firstFalse` and `units` are monomorphic.
-/

@[expose] public section

namespace KimiK3.Microscaling

open KimiK3

/-! ## Binary search -/

/-- The least `k ∈ [lo, hi)` with `p k = false`, or `hi` if there is none, found by bisection;
correct when `p` is antitone on `[lo, hi)` (`firstFalse_spec`). -/
def firstFalse (p : Nat → Bool) (lo hi : Nat) : Nat :=
  if h : lo < hi then
    if p ((lo + hi) / 2) then firstFalse p ((lo + hi) / 2 + 1) hi else firstFalse p lo ((lo + hi) / 2)
  else lo
termination_by hi - lo
decreasing_by all_goals omega

/-- The search stays in `[lo, hi]`. -/
theorem firstFalse_mem (p : Nat → Bool) (lo hi : Nat) (hle : lo ≤ hi) :
    lo ≤ firstFalse p lo hi ∧ firstFalse p lo hi ≤ hi := by
  rw [firstFalse]
  split
  · rename_i h
    split
    · have := firstFalse_mem p ((lo + hi) / 2 + 1) hi (by omega); omega
    · have := firstFalse_mem p lo ((lo + hi) / 2) (by omega); omega
  · omega
termination_by hi - lo
decreasing_by all_goals omega

/-- The search's result is at most `hi`. -/
theorem firstFalse_le (p : Nat → Bool) (lo hi : Nat) (hle : lo ≤ hi) : firstFalse p lo hi ≤ hi :=
  (firstFalse_mem p lo hi hle).2

/-! ## Round to nearest, ties to even, saturating -/

variable {α : Type}

/-- The midpoint `(v k + v (k+1)) / 2` between two consecutive values. -/
@[macro_inline] def midpoint [Scalar α] (v : Nat → α) (k : Nat) : α := (v k + v (k + 1)) / 2

/-- Whether `t` rounds past the midpoint above `v k`: it lies above the midpoint, or on it when
`k` is odd (so a tie goes to the even index `k + 1`). -/
@[macro_inline] def roundsPast [Scalar α] (v : Nat → α) (t : α) (k : Nat) : Bool :=
  if k % 2 = 1 then decide (midpoint v k ≤ t) else decide (midpoint v k < t)

/-- **Round to nearest, ties to even, saturating** (index form): the index `k ≤ N` of the value
of `v 0 < … < v N` nearest to `t`, the even one at a midpoint, `0` below `v 0` and `N` above
`v N`; a binary search for the first midpoint `t` does not round past. -/
@[macro_inline] def roundIndex [Scalar α] (v : Nat → α) (N : Nat) (t : α) : Nat :=
  firstFalse (fun k => roundsPast v t k) 0 N

/-- The rounded index is at most `N`. -/
theorem roundIndex_le [Scalar α] (v : Nat → α) (N : Nat) (t : α) : roundIndex v N t ≤ N :=
  firstFalse_le _ 0 N (Nat.zero_le N)

/-! ## Element formats -/

/-- A sign-magnitude binary floating-point element format (OCP MX v1.0 §5.3, OCP FP8): sign bit,
`expBits` exponent bits (bias `2^(expBits−1) − 1`), `manBits` mantissa bits, subnormals; the
finite magnitude codes are `0 … maxMag`, the codes above are NaN/infinity and excluded. -/
structure FloatFormat where
  /-- Exponent bits. -/
  expBits : Nat
  /-- Mantissa bits. -/
  manBits : Nat
  /-- The largest finite magnitude code. -/
  maxMag : Nat
  /-- Finite magnitude codes are magnitude codes. -/
  maxMag_lt : maxMag < 2 ^ (expBits + manBits)

namespace FloatFormat

/-- Number of magnitude codes, `2^(expBits + manBits)` (the sign bit's weight). -/
def magCount (f : FloatFormat) : Nat := 2 ^ (f.expBits + f.manBits)

/-- Number of codes, sign included. -/
def codeCount (f : FloatFormat) : Nat := 2 * f.magCount

/-- The exponent bias `2^(expBits−1) − 1`. -/
def bias (f : FloatFormat) : Nat := 2 ^ (f.expBits - 1) - 1

/-- The smallest subnormal is `2^−unitExp`, `unitExp = bias + manBits − 1`. -/
def unitExp (f : FloatFormat) : Nat := f.bias + f.manBits - 1

/-- The unbiased exponent of the largest finite value (`emax` of OCP MX v1.0, Table 1). -/
def emax (f : FloatFormat) : Nat := f.maxMag / 2 ^ f.manBits - f.bias

/-- Magnitude code `k` in units of the smallest subnormal: `m` for a subnormal (exponent field
0), `(2^M + m) · 2^(e−1)` for exponent field `e ≥ 1` and mantissa `m`. -/
def units (f : FloatFormat) (k : Nat) : Nat :=
  if k < 2 ^ f.manBits then k else (2 ^ f.manBits + k % 2 ^ f.manBits) * 2 ^ (k / 2 ^ f.manBits - 1)

/-- Well-formed: the finite magnitudes strictly increase with their codes. -/
def WF (f : FloatFormat) : Prop := ∀ k, k < f.maxMag → f.units k < f.units (k + 1)

/-- The magnitude code of a code (the code without its sign bit). -/
def magCode (f : FloatFormat) (c : Fin f.codeCount) : Nat :=
  if c.val < f.magCount then c.val else c.val - f.magCount

/-- Whether a code is finite (not NaN or infinity). -/
def isFinite (f : FloatFormat) (c : Fin f.codeCount) : Bool := decide (f.magCode c ≤ f.maxMag)

/-- The negative-zero code (sign bit only). -/
def negZero (f : FloatFormat) : Fin f.codeCount :=
  ⟨f.magCount, by unfold codeCount magCount; have := Nat.two_pow_pos (f.expBits + f.manBits); omega⟩

/-- The code with the sign bit flipped. -/
def negate (f : FloatFormat) (c : Fin f.codeCount) : Fin f.codeCount :=
  if h : c.val < f.magCount then ⟨c.val + f.magCount, by unfold codeCount; omega⟩
  else ⟨c.val - f.magCount, by have := c.isLt; unfold codeCount at this; omega⟩

/-- The value of magnitude code `k`: `units k · 2^−unitExp`. -/
@[macro_inline] def magnitude [Scalar α] (f : FloatFormat) (k : Nat) : α :=
  (f.units k : α) / ((2 ^ f.unitExp : Nat) : α)

/-- The largest finite value, `magnitude maxMag`. -/
@[macro_inline] def maxValue [Scalar α] (f : FloatFormat) : α := f.magnitude f.maxMag

/-- **Decoder**: the top bit is the sign, the rest the magnitude code. -/
@[macro_inline] def decode [Scalar α] (f : FloatFormat) (c : Fin f.codeCount) : α :=
  if c.val < f.magCount then f.magnitude c.val else -(f.magnitude (c.val - f.magCount))

theorem magCount_pos (f : FloatFormat) : 0 < f.magCount := Nat.two_pow_pos _

theorem roundIndex_lt_magCount [Scalar α] (f : FloatFormat) (t : α) :
    roundIndex (fun k => f.magnitude (α := α) k) f.maxMag t < f.magCount :=
  Nat.lt_of_le_of_lt (roundIndex_le _ _ _) f.maxMag_lt

/-- **Encoder: round to nearest, ties to even, saturating.** A nonnegative `t` gets the
magnitude code nearest to it (the even code at a tie, `maxMag` above `maxValue`); a negative `t`
gets the sign bit and the code of `−t`. NaN and infinity codes are never produced. -/
@[macro_inline] def encode [Scalar α] (f : FloatFormat) (t : α) : Fin f.codeCount :=
  if t < 0 then
    ⟨f.magCount + roundIndex (fun k => f.magnitude (α := α) k) f.maxMag (-t), by
      have := f.roundIndex_lt_magCount (-t); unfold codeCount; omega⟩
  else
    ⟨roundIndex (fun k => f.magnitude (α := α) k) f.maxMag t, by
      have := f.roundIndex_lt_magCount t; unfold codeCount; omega⟩

end FloatFormat

/-- E2M1, MXFP4's element format: 2 exponent bits, 1 mantissa bit, 8 finite magnitudes. -/
def e2m1 : FloatFormat := ⟨2, 1, 7, by decide⟩

/-- FP8 E4M3 (`float8_e4m3fn`): finite magnitude codes `0 … 0x7E` (`0x7F` is NaN). -/
def e4m3 : FloatFormat := ⟨4, 3, 126, by decide⟩

/-- FP8 E5M2: finite magnitude codes `0 … 0x7B` (exponent field 31 is infinity/NaN). -/
def e5m2 : FloatFormat := ⟨5, 2, 123, by decide⟩

/-! ## E8M0 scales -/

/-- An E8M0 code (OCP MX v1.0 §5.4): 8 exponent bits, bias 127; code 255 is NaN. -/
abbrev E8M0 := Fin 256

namespace E8M0

/-- Whether an E8M0 code is finite (every code but 255). -/
def isFinite (e : E8M0) : Bool := decide (e.val < 255)

/-- `2^(e − 127)`, the value of E8M0 code `e`. -/
@[macro_inline] def scaleValue [Scalar α] (e : Nat) : α :=
  if 127 ≤ e then ((2 ^ (e - 127) : Nat) : α) else (((2 ^ (127 - e) : Nat) : α))⁻¹

/-- **Decoder**: code `e` is `2^(e − 127)` (finite codes; code 255, NaN, is excluded). -/
@[macro_inline] def decode [Scalar α] (e : E8M0) : α := scaleValue e.val

/-- **Encoder**: round to nearest, ties to the even code, saturating at `2^−127` and `2^127`;
NaN is never produced. -/
@[macro_inline] def encode [Scalar α] (t : α) : E8M0 :=
  ⟨roundIndex (fun k => scaleValue (α := α) k) 254 t, by
    have := roundIndex_le (fun k => scaleValue (α := α) k) 254 t; omega⟩

end E8M0

/-! ## Scale rules -/

/-- How a block's shared scale is chosen from its largest magnitude. -/
inductive ScaleRule where
  /-- OCP MX v1.0 §6.3: `s = 2^(⌊log₂ amax⌋ − emax)`; may clip. -/
  | ocpFloor
  /-- `s = 2^⌈log₂ (amax / maxValue)⌉`, the smallest power of two that does not clip. -/
  | ceil
  deriving DecidableEq

namespace ScaleRule

/-- The E8M0 code a rule picks for element format `f` and largest magnitude `amax`, clamped to
`0 … 254` (never the NaN code): `ocpFloor` the largest code with `2^emax · s ≤ amax`, `ceil` the
least code with `amax ≤ maxValue · s`; both found by binary search. -/
@[macro_inline] def code [Scalar α] (rule : ScaleRule) (f : FloatFormat) (amax : α) : Nat :=
  match rule with
  | .ocpFloor => firstFalse (fun c => decide (((2 ^ f.emax : Nat) : α) * E8M0.scaleValue (c + 1) ≤ amax)) 0 254
  | .ceil => firstFalse (fun c => decide (f.maxValue * E8M0.scaleValue (α := α) c < amax)) 0 254

/-- A rule's code is at most 254 (finite). -/
theorem code_le [Scalar α] (rule : ScaleRule) (f : FloatFormat) (amax : α) : rule.code f amax ≤ 254 := by
  cases rule <;> exact firstFalse_le _ 0 254 (by decide)

/-- The rule's code as an E8M0 code. -/
@[macro_inline] def scale [Scalar α] (rule : ScaleRule) (f : FloatFormat) (amax : α) : E8M0 :=
  ⟨rule.code f amax, by have := rule.code_le f amax; omega⟩

end ScaleRule

/-! ## Blocks -/

/-- An MX block: one shared E8M0 scale and `size` element codes (OCP MX v1.0 §5; K3: 32). -/
structure Block (size : Nat) (Code : Type) where
  /-- The shared scale. -/
  scale : E8M0
  /-- The element codes. -/
  element : Fin size → Code

namespace Block

variable {size : Nat} {Code CodeA CodeB : Type}

/-- Element `i` of a block: `2^(scale − 127) · decodeElement (element i)`. -/
@[macro_inline] def decode [Scalar α] (decodeElement : Code → α) (b : Block size Code) (i : Fin size) : α :=
  E8M0.decode b.scale * decodeElement (b.element i)

/-- The dot product of two decoded blocks. -/
@[macro_inline] def dot [Scalar α] (decodeA : CodeA → α) (decodeB : CodeB → α) (a : Block size CodeA)
    (b : Block size CodeB) : α :=
  finSum size (fun i => a.decode decodeA i * b.decode decodeB i)

/-- The largest magnitude of a block of scalars (`0` for an empty block). -/
@[macro_inline] def amax [Scalar α] (x : Fin size → α) : α := finMaxFrom 0 size (fun i => Scalar.abs (x i))

/-- **Quantize with a given scale**: element `i` is the encoding of `x i / s`. -/
@[macro_inline] def quantizeWithScale [Scalar α] (f : FloatFormat) (scale : E8M0) (x : Fin size → α) :
    Block size (Fin f.codeCount) :=
  ⟨scale, fun i => f.encode (x i / E8M0.decode scale)⟩

/-- **Quantize with a scale rule**: the scale `rule` picks for the block's largest magnitude. -/
@[macro_inline] def quantize [Scalar α] (f : FloatFormat) (rule : ScaleRule) (x : Fin size → α) :
    Block size (Fin f.codeCount) :=
  quantizeWithScale f (rule.scale f (amax x)) x

end Block

/-! ## MXFP4 -/

/-- An E2M1 code (4 bits). -/
abbrev E2M1 := Fin e2m1.codeCount

/-- An MXFP4 block: an E8M0 scale and 32 E2M1 codes. -/
abbrev MXFP4Block := Block 32 E2M1

/-- The E2M1 decoder. -/
@[macro_inline] def decodeE2M1 [Scalar α] (c : E2M1) : α := e2m1.decode c

/-- The E2M1 encoder: round to nearest, ties to even, saturating at ±6. -/
@[macro_inline] def quantizeE2M1 [Scalar α] (t : α) : E2M1 := e2m1.encode t

/-- An MXFP4 block with a given scale. -/
@[macro_inline] def quantizeMXFP4Block [Scalar α] (scale : E8M0) (values : Fin 32 → α) : MXFP4Block :=
  Block.quantizeWithScale e2m1 scale values

/-- An MXFP4 block with the scale a rule picks. -/
@[macro_inline] def quantizeMXFP4 [Scalar α] (rule : ScaleRule) (values : Fin 32 → α) : MXFP4Block :=
  Block.quantize e2m1 rule values

/-! ## MX vectors and matrices -/

/-- The block of a flat index: `i / size`. -/
def blockOf {nb size : Nat} (i : Fin (nb * size)) : Fin nb :=
  ⟨i.val / size, Nat.div_lt_of_lt_mul (Nat.lt_of_lt_of_eq i.isLt (Nat.mul_comm nb size))⟩

theorem size_pos_of_index {nb size : Nat} (i : Fin (nb * size)) : 0 < size :=
  Nat.pos_of_ne_zero (fun h => absurd (Nat.lt_of_lt_of_eq i.isLt (by rw [h, Nat.mul_zero]))
    (Nat.not_lt_zero _))

/-- The position of a flat index in its block: `i % size`. -/
def offsetOf {nb size : Nat} (i : Fin (nb * size)) : Fin size :=
  ⟨i.val % size, Nat.mod_lt _ (size_pos_of_index i)⟩

/-- The flat index of position `j` of block `b`: `b · size + j`. -/
def flatIndex {nb size : Nat} (b : Fin nb) (j : Fin size) : Fin (nb * size) :=
  ⟨b.val * size + j.val, by
    have h1 := Nat.mul_le_mul_right size (show b.val + 1 ≤ nb from b.isLt)
    rw [Nat.succ_mul] at h1
    have := j.isLt
    omega⟩

/-- A vector of `nb · size` scalars quantized in `nb` MX blocks of `size`. -/
abbrev MXVector (nb size : Nat) (Code : Type) := Fin nb → Block size Code

/-- A matrix `[nb · size, m]` quantized in MX blocks along its input axis: `nb` blocks of `size`
for each output column. -/
structure MXMatrix (nb size m : Nat) (Code : Type) where
  /-- The blocks of output column `k`. -/
  column : Fin m → MXVector nb size Code

variable {nb size m : Nat} {Code : Type}

namespace MXVector

/-- The decoded vector. -/
@[macro_inline] def decode [Scalar α] (decodeElement : Code → α) (v : MXVector nb size Code) :
    Tensor α [nb * size] :=
  fun i => (v (blockOf i)).decode decodeElement (offsetOf i)

/-- The scale of the block holding entry `i`. -/
@[macro_inline] def scaleAt [Scalar α] (v : MXVector nb size Code) (i : Fin (nb * size)) : α :=
  E8M0.decode (v (blockOf i)).scale

end MXVector

namespace MXMatrix

/-- The decoded matrix. -/
@[macro_inline] def decode [Scalar α] (decodeElement : Code → α) (w : MXMatrix nb size m Code) :
    Tensor α [nb * size, m] :=
  fun i k => (w.column k).decode decodeElement i

/-- The scale of the block holding entry `(i, k)`. -/
@[macro_inline] def scaleAt [Scalar α] (w : MXMatrix nb size m Code) (i : Fin (nb * size)) (k : Fin m) : α :=
  (w.column k).scaleAt i

end MXMatrix

/-- Quantize a vector block by block. -/
@[macro_inline] def quantizeVector [Scalar α] (f : FloatFormat) (rule : ScaleRule) (x : Tensor α [nb * size]) :
    MXVector nb size (Fin f.codeCount) :=
  fun b => Block.quantize f rule (fun j => x (flatIndex b j))

/-- Quantize a matrix `[in, out]` in blocks along its input axis. -/
@[macro_inline] def quantizeMatrix [Scalar α] (f : FloatFormat) (rule : ScaleRule) (w : Tensor α [nb * size, m]) :
    MXMatrix nb size m (Fin f.codeCount) :=
  ⟨fun k => quantizeVector f rule (fun i => w i k)⟩

end KimiK3.Microscaling
