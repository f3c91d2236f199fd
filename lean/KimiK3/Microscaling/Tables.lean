module

public import KimiK3.Microscaling.Kernel

/-!
# Code tables and encodings in `Float`, for the exhaustive tests

The library's decoders, encoders, block quantizer and scale rules evaluated at `Float` and
printed as one JSON line per table (`{"check": name, …}`). Exact here: every finite value of
these formats, every E8M0 scale, every midpoint between consecutive values and their products
with the powers of two used below are binary64 numbers, and the operations the definitions
perform on them (casts of naturals below `2^53`, halving, division by a power of two) are exact.

`tests/lean/MicroscalingTables.lean` prints them (evaluated in one bundle, `codegen.bundle`);
`tests/test_microscaling_tables.py` compares them code by code with torch, torchao and ml_dtypes.
Each encoding table lists its inputs' bits beside the codes, so the test checks that the Lean
leg encoded exactly the inputs its own independent enumeration expects.
-/

@[expose] public section

namespace KimiK3.Microscaling.Tables

open KimiK3

/-- `f 0, …, f (n − 1)` separated by commas. -/
def joinUpTo (f : Nat → String) : Nat → String
  | 0 => ""
  | n + 1 => if n = 0 then f 0 else joinUpTo f n ++ ", " ++ f n

/-- The bit pattern of a binary64 value, in decimal. -/
def floatBits (x : Float) : String := toString x.toBits

/-- One JSON line `{"check": name, fields}`. -/
def jsonLine (name fields : String) : String := "{\"check\": \"" ++ name ++ "\", " ++ fields ++ "}"

/-- Entry `c` of a decode table: the value's bits, or `null` for a NaN/infinity code. -/
def decodeEntry (f : FloatFormat) (c : Nat) : String :=
  if h : c < f.codeCount then
    if f.isFinite ⟨c, h⟩ then floatBits (f.decode (α := Float) ⟨c, h⟩) else "null"
  else "null"

/-- **Decode table**: the value of every code of `f`, in code order (`null`: excluded code). -/
def decodeTable (name : String) (f : FloatFormat) : String :=
  jsonLine name ("\"bits\": [" ++ joinUpTo (decodeEntry f) f.codeCount ++ "]")

/-- Entry `c` of a round-trip table: `encode (decode c)`, or `null` for a NaN/infinity code. -/
def roundTripEntry (f : FloatFormat) (c : Nat) : String :=
  if h : c < f.codeCount then
    if f.isFinite ⟨c, h⟩ then toString (f.encode (f.decode (α := Float) ⟨c, h⟩)).val else "null"
  else "null"

/-- **Decode → encode** on every code of `f`. -/
def roundTripTable (name : String) (f : FloatFormat) : String :=
  jsonLine name ("\"codes\": [" ++ joinUpTo (roundTripEntry f) f.codeCount ++ "]")

/-- **E8M0 decode table**: `2^(e − 127)` for codes `0 … 254`, `null` for 255 (NaN). -/
def e8m0Table : String :=
  jsonLine "decode_e8m0" ("\"bits\": [" ++
    joinUpTo (fun e => if h : e < 255 then floatBits (E8M0.decode (α := Float) ⟨e, by omega⟩) else "null") 256 ++
    "]")

/-- **E8M0 decode → encode** on the finite codes `0 … 254`. -/
def e8m0RoundTrip : String :=
  jsonLine "roundtrip_e8m0" ("\"codes\": [" ++
    joinUpTo (fun e => if h : e < 255 then toString (E8M0.encode (E8M0.decode (α := Float) ⟨e, by omega⟩)).val
      else "null") 255 ++ "]")

/-- The encoding probes of an element format, before scaling: probe `j` for `j < 2N + 1`
(`N = maxMag`) is magnitude `j / 2` (`j` even) or the midpoint between magnitudes `(j − 1) / 2`
and `(j + 1) / 2` (`j` odd); probe `2N + 1` is `2 · maxValue` (saturation); probes
`2N + 2 + j` are the negatives of the first `2N + 2`. -/
def elementProbe (f : FloatFormat) (j : Nat) : Float :=
  let n := 2 * f.maxMag + 2
  let k := if j < n then j else j - n
  let v : Float :=
    if k = 2 * f.maxMag + 1 then 2 * f.maxValue (α := Float)
    else if k % 2 = 0 then f.magnitude (α := Float) (k / 2)
    else midpoint (fun i => f.magnitude (α := Float) i) (k / 2)
  if j < n then v else -v

/-- The number of element probes, `2 (2 · maxMag + 2)`. -/
def elementProbeCount (f : FloatFormat) : Nat := 2 * (2 * f.maxMag + 2)

/-- The code the block quantizer gives probe `j` times the scale of E8M0 code `scale`: element 0
of `Block.quantizeWithScale f scale` on a one-element block. -/
def elementEncodeEntry (f : FloatFormat) (scale : E8M0) (j : Nat) : String :=
  let x := elementProbe f j * E8M0.decode (α := Float) scale
  toString ((Block.quantizeWithScale (size := 1) f scale (fun _ => x)).element 0).val

/-- **Element encodings at a block scale**: every probe times `2^(scale − 127)`, with the code the
block quantizer gives it (inputs as bits). -/
def elementEncodeTable (name : String) (f : FloatFormat) (scale : E8M0) : String :=
  jsonLine name ("\"scale\": " ++ toString scale.val ++ ", \"inputs\": [" ++
    joinUpTo (fun j => floatBits (elementProbe f j * E8M0.decode (α := Float) scale)) (elementProbeCount f) ++
    "], \"codes\": [" ++ joinUpTo (elementEncodeEntry f scale) (elementProbeCount f) ++ "]")

/-- The E8M0 encoding probes: probe `j` for `j < 509` is `scaleValue (j / 2)` (`j` even) or the
midpoint `3 · 2^((j − 1)/2 − 128)` between codes `(j − 1) / 2` and `(j + 1) / 2` (`j` odd);
probe 509 is `2^−128` and probe 510 is `2^128` (saturation below and above). -/
def e8m0Probe (j : Nat) : Float :=
  if j = 509 then E8M0.scaleValue (α := Float) 0 / 2
  else if j = 510 then E8M0.scaleValue (α := Float) 254 * 2
  else if j % 2 = 0 then E8M0.scaleValue (α := Float) (j / 2)
  else midpoint (fun e => E8M0.scaleValue (α := Float) e) (j / 2)

/-- **E8M0 encodings** of every probe (inputs as bits). -/
def e8m0EncodeTable : String :=
  jsonLine "encode_e8m0" ("\"inputs\": [" ++ joinUpTo (fun j => floatBits (e8m0Probe j)) 511 ++
    "], \"codes\": [" ++ joinUpTo (fun j => toString (E8M0.encode (e8m0Probe j)).val) 511 ++ "]")

/-- The scale-rule probes for an element format: `amax = v · 2^(i − 3)` for `i < 8` and `v` each
of E2M1's nonzero magnitudes and midpoints, `1/2 … 6` in steps of `1/4` (23 values), plus
`6.5` and `7.5`: probe `j` is value `j % 25` at exponent `j / 25`. -/
def scaleProbe (j : Nat) : Float :=
  let v : Float := if j % 25 = 23 then 6.5 else if j % 25 = 24 then 7.5 else (Float.ofNat (j % 25 + 2)) / 4
  v * E8M0.scaleValue (α := Float) (124 + j / 25)

/-- **Scale codes** a rule picks for every scale probe (inputs as bits). -/
def scaleRuleTable (name : String) (f : FloatFormat) (rule : ScaleRule) : String :=
  jsonLine name ("\"inputs\": [" ++ joinUpTo (fun j => floatBits (scaleProbe j)) 200 ++
    "], \"codes\": [" ++ joinUpTo (fun j => toString (rule.code f (scaleProbe j))) 200 ++ "]")

end KimiK3.Microscaling.Tables
