module

public import KimiK3.Microscaling.Kernel

/-!
# Code tables and block quantizations in `Float`, for the exhaustive tests

The library's decoders, encoders and block quantizer evaluated at `Float` (exact here: every
finite value of these formats, every E8M0 scale and every midpoint is a binary64 number, and the
operations on them are exact) and printed as text, one line per call: `Float.toBits` of decoded
values, code numbers of encodings. `tests/test_microscaling.py` evaluates them in one bundle
(`codegen.bundle`) and compares them code by code with torch and ml_dtypes.
-/

@[expose] public section

namespace KimiK3.Microscaling.Tables

open KimiK3

/-- `f 0, …, f (n − 1)` separated by spaces. -/
def joinUpTo (f : Nat → String) : Nat → String
  | 0 => ""
  | n + 1 => if n = 0 then f 0 else joinUpTo f n ++ " " ++ f n

/-- The bit pattern of a binary64 value, in decimal. -/
def floatBits (x : Float) : String := toString x.toBits

/-- Entry `c` of a decode table: the value's bits, or `nan` for a NaN/infinity code. -/
def decodeEntry (f : FloatFormat) (c : Nat) : String :=
  if h : c < f.codeCount then
    if f.isFinite ⟨c, h⟩ then floatBits (f.decode (α := Float) ⟨c, h⟩) else "nan"
  else ""

/-- The decoded value of every code of `f`, in code order. -/
def decodeTable (f : FloatFormat) : String := joinUpTo (decodeEntry f) f.codeCount

/-- The value of every E8M0 code, `nan` for code 255. -/
def e8m0Table : String :=
  joinUpTo (fun e => if e < 255 then floatBits (E8M0.scaleValue (α := Float) e) else "nan") 256

/-- The codes `f.encode` gives the listed scalars. -/
def encodeList (f : FloatFormat) : List Float → String
  | [] => ""
  | [x] => toString (f.encode x).val
  | x :: xs => toString (f.encode x).val ++ " " ++ encodeList f xs

/-- The codes `E8M0.encode` gives the listed scalars. -/
def e8m0EncodeList : List Float → String
  | [] => ""
  | [x] => toString (E8M0.encode x).val
  | x :: xs => toString (E8M0.encode x).val ++ " " ++ e8m0EncodeList xs

/-- Entry `i` of a list (`0` past its end). -/
def listGet : List Float → Nat → Float
  | [], _ => 0
  | x :: _, 0 => x
  | _ :: xs, i + 1 => listGet xs i

/-- A block of 32 scalars quantized with element format `f` and scale rule `rule`:
`scale:c₀ c₁ … c₃₁` (E8M0 code, element codes). -/
def quantizeBlock (f : FloatFormat) (rule : ScaleRule) (xs : List Float) : String :=
  let b := Block.quantize (size := 32) f rule (fun i => listGet xs i.val)
  toString b.scale.val ++ ":" ++
    joinUpTo (fun i => if h : i < 32 then toString (b.element ⟨i, h⟩).val else "") 32

/-- The scale code a rule picks for a largest magnitude `amax`. -/
def scaleCode (f : FloatFormat) (rule : ScaleRule) (amax : Float) : String :=
  toString (rule.code f amax)

end KimiK3.Microscaling.Tables
