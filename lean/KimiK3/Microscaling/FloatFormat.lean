module

public import KimiK3.Microscaling.Round

/-!
# Binary floating-point element formats: decoder and encoder

`FloatFormat` describes a sign-magnitude binary format in the style of OCP MX v1.0 and OCP FP8:
one sign bit (the top bit), `expBits` exponent bits with bias `2^(expBits−1) − 1`, `manBits`
mantissa bits, subnormals, and finite magnitude codes `0 … maxMag`. Magnitude codes above
`maxMag` are NaN or infinity; they are **excluded**: `decode` gives them no meaning that any
theorem uses, `isFinite` says which codes are finite, and `encode` never produces them.

Every finite magnitude is an integer multiple of the smallest subnormal `2^−unitExp`:
`units k` is that integer (`m` for a subnormal, `(2^M + m) · 2^(e−1)` for a normal code with
exponent field `e ≥ 1` and mantissa `m`), so order facts about the values reduce to facts about
natural numbers (`WF`, checked by `decide` for each format in `Formats.lean`).

* `decode c` — `±units (mag c) · 2^−unitExp`;
* `encode t` — **round to nearest, ties to even, saturating** at `±maxValue`
  (`Round.lean`); a negative `t` gets the sign bit, so `t ∈ (−midpoint, 0)` gives the
  negative-zero code, as IEEE rounding does.

Proved (for well-formed formats, any ordered scalar field): decode bounds and symmetry
(`abs_decode_le`, `decode_negate`), encode gives finite codes (`encode_isFinite`), decode →
encode is the identity on finite codes other than negative zero (`encode_decode`; the scalar
field has one zero), the tie rule (`encode_midpoint`), saturation (`decode_encode_of_le`), and
the per-element error `|decode (encode t) − t| ≤ (r |t| + a) / 2` for `|t| ≤ maxValue`
(`abs_decode_encode_sub_le`).
-/

@[expose] public section

namespace KimiK3.Microscaling

open KimiK3

namespace FloatFormat

variable {α : Type}

/-- Encoding gives finite codes only. -/
theorem encode_isFinite [Scalar α] (f : FloatFormat) (t : α) : f.isFinite (f.encode t) = true := by
  have h1 := roundIndex_le (fun k => f.magnitude (α := α) k) f.maxMag t
  have h2 := roundIndex_le (fun k => f.magnitude (α := α) k) f.maxMag (-t)
  have h3 := f.maxMag_lt
  unfold isFinite magCode encode
  split <;> simp only [decide_eq_true_eq] <;> unfold magCount at * <;> split <;> omega

/-- The sign bit flips the sign of the value. -/
theorem decode_negate [ScalarField α] (f : FloatFormat) (c : Fin f.codeCount) :
    f.decode (α := α) (f.negate c) = -f.decode (α := α) c := by
  unfold decode negate
  by_cases h : c.val < f.magCount
  · simp only [h, dite_true]
    have : ¬ (c.val + f.magCount < f.magCount) := by omega
    simp only [this, if_false, if_true, Nat.add_sub_cancel]
  · simp only [h, dite_false, if_false]
    have : c.val - f.magCount < f.magCount := by have := c.isLt; unfold codeCount at this; omega
    simp only [this, if_true]; grind

/-- Flipping the sign bit keeps a code finite (or not). -/
theorem isFinite_negate (f : FloatFormat) (c : Fin f.codeCount) :
    f.isFinite (f.negate c) = f.isFinite c := by
  unfold isFinite magCode negate
  by_cases h : c.val < f.magCount
  · simp only [h, dite_true, if_true]
    have : ¬ (c.val + f.magCount < f.magCount) := by omega
    simp only [this, if_false, Nat.add_sub_cancel]
  · simp only [h, dite_false, if_false]
    have : c.val - f.magCount < f.magCount := by have := c.isLt; unfold codeCount at this; omega
    simp only [this, if_true]

section Ordered

variable [OrderedScalarField α] (f : FloatFormat)

theorem twoPow_unitExp_pos : (0 : α) < ((2 ^ f.unitExp : Nat) : α) :=
  natCast_pos' (Nat.two_pow_pos _)

/-- Magnitude code `0` is zero. -/
theorem magnitude_zero : f.magnitude (α := α) 0 = 0 := by
  have : f.units 0 = 0 := by unfold units; simp [Nat.two_pow_pos]
  unfold magnitude; rw [this]; grind

/-- Magnitudes are nonnegative. -/
theorem magnitude_nonneg (k : Nat) : 0 ≤ f.magnitude (α := α) k := by
  unfold magnitude
  have h1 : (0 : α) ≤ (f.units k : α) := by grind
  have := twoPow_unitExp_pos (α := α) f
  simp only [Lean.Grind.Field.div_eq_mul_inv]
  exact mul_nonneg' h1 (Std.le_of_lt (inv_pos' this))

/-- Magnitudes of a well-formed format increase strictly with their codes. -/
theorem magnitude_strictMono (hf : f.WF) : StrictMonoUpTo (fun k => f.magnitude (α := α) k) f.maxMag := by
  intro k hk
  have := natCast_lt_natCast' (α := α) (hf k hk)
  have hd := twoPow_unitExp_pos (α := α) f
  simp only [magnitude, Lean.Grind.Field.div_eq_mul_inv]
  exact Lean.Grind.OrderedRing.mul_lt_mul_of_pos_right this (inv_pos' hd)

/-- Finite magnitudes are at most `maxValue`. -/
theorem magnitude_le_maxValue (hf : f.WF) {k : Nat} (hk : k ≤ f.maxMag) :
    f.magnitude (α := α) k ≤ f.maxValue :=
  (magnitude_strictMono f hf).le (v := fun k => f.magnitude (α := α) k) hk (Nat.le_refl _)

/-- `maxValue` is nonnegative. -/
theorem maxValue_nonneg : (0 : α) ≤ f.maxValue := magnitude_nonneg f _

/-- **Decode bound**: every finite code decodes into `[−maxValue, maxValue]`. -/
theorem abs_decode_le (hf : f.WF) (c : Fin f.codeCount) (hc : f.isFinite c = true) :
    Scalar.abs (f.decode (α := α) c) ≤ f.maxValue := by
  unfold isFinite magCode at hc
  unfold decode
  split
  · rename_i h
    simp only [h, if_true, decide_eq_true_eq] at hc
    rw [abs_of_nonneg (magnitude_nonneg f _)]; exact magnitude_le_maxValue f hf hc
  · rename_i h
    simp only [h, if_false, decide_eq_true_eq] at hc
    rw [abs_neg', abs_of_nonneg (magnitude_nonneg f _)]; exact magnitude_le_maxValue f hf hc

/-- The value of an encoded scalar: the rounded magnitude of `|t|`, with `t`'s sign. -/
theorem decode_encode (t : α) :
    f.decode (α := α) (f.encode t) =
      if t < 0 then -f.magnitude (α := α) (roundIndex (fun k => f.magnitude (α := α) k) f.maxMag (-t))
      else f.magnitude (α := α) (roundIndex (fun k => f.magnitude (α := α) k) f.maxMag t) := by
  have h1 := f.roundIndex_lt_magCount t
  have h2 := f.roundIndex_lt_magCount (-t)
  unfold encode
  split
  · unfold decode
    simp only [show ¬ (f.magCount + roundIndex (fun k => f.magnitude (α := α) k) f.maxMag (-t) < f.magCount) by omega,
      if_false, Nat.add_sub_cancel_left]
  · unfold decode; simp only [h1, if_true]

/-- **Decode → encode is the identity** on every finite code except negative zero (which
decodes to `0` and encodes back to the positive-zero code: the scalar field has one zero). -/
theorem encode_decode (hf : f.WF) (c : Fin f.codeCount) (hc : f.isFinite c = true)
    (h0 : c ≠ f.negZero) : f.encode (f.decode (α := α) c) = c := by
  have hv := magnitude_strictMono (α := α) f hf
  unfold isFinite magCode at hc
  apply Fin.ext
  by_cases h : c.val < f.magCount
  · simp only [h, if_true, decide_eq_true_eq] at hc
    have hd : f.decode (α := α) c = f.magnitude c.val := by unfold decode; simp only [h, if_true]
    have hnn := magnitude_nonneg (α := α) f c.val
    unfold encode; rw [hd]
    have : ¬ (f.magnitude (α := α) c.val < 0) := by grind
    simp only [this, if_false]
    exact roundIndex_value hv hc
  · simp only [h, if_false, decide_eq_true_eq] at hc
    have hne : c.val ≠ f.magCount := fun e => h0 (Fin.ext e)
    have hd : f.decode (α := α) c = -f.magnitude (c.val - f.magCount) := by
      unfold decode; simp only [h, if_false]
    have hpos : 0 < f.magnitude (α := α) (c.val - f.magCount) := by
      have := hv.lt (i := 0) (j := c.val - f.magCount) (by omega) hc
      rw [magnitude_zero] at this; exact this
    unfold encode; rw [hd]
    have : -f.magnitude (α := α) (c.val - f.magCount) < 0 := by grind
    simp only [this, if_true]
    have e : -(-f.magnitude (α := α) (c.val - f.magCount)) = f.magnitude (c.val - f.magCount) := by grind
    rw [e, roundIndex_value hv hc]; omega

/-- **Saturation**: scalars at or above `maxValue` encode to the largest finite value. -/
theorem decode_encode_of_le (hf : f.WF) {t : α} (ht : f.maxValue ≤ t) :
    f.decode (α := α) (f.encode t) = f.maxValue := by
  have hv := magnitude_strictMono (α := α) f hf
  have := maxValue_nonneg (α := α) f
  rw [decode_encode]
  have : ¬ t < 0 := by grind
  simp only [this, if_false]
  rw [roundIndex_of_le hv ht]; rfl

/-- **Saturation below**: negative scalars at or below `−maxValue` encode to `−maxValue`. -/
theorem decode_encode_of_le_neg (hf : f.WF) {t : α} (hneg : t < 0) (ht : t ≤ -f.maxValue) :
    f.decode (α := α) (f.encode t) = -f.maxValue := by
  have hv := magnitude_strictMono (α := α) f hf
  rw [decode_encode]
  simp only [hneg, if_true]
  rw [roundIndex_of_le hv (show f.magnitude f.maxMag ≤ -t by show f.maxValue ≤ -t; grind)]; rfl

/-- **The tie rule**: the midpoint between magnitude codes `k` and `k + 1` encodes to the even
one of the two. -/
theorem encode_midpoint (hf : f.WF) {k : Nat} (hk : k < f.maxMag) :
    (f.encode (midpoint (fun j => f.magnitude (α := α) j) k)).val = if k % 2 = 1 then k + 1 else k := by
  have hv := magnitude_strictMono (α := α) f hf
  have h1 := magnitude_nonneg (α := α) f k
  have h2 := magnitude_nonneg (α := α) f (k + 1)
  have : ¬ (midpoint (fun j => f.magnitude (α := α) j) k < 0) := by unfold midpoint; grind
  unfold encode; simp only [this, if_false]
  exact roundIndex_midpoint hv hk

/-- **Per-element quantization error.** If every gap between consecutive finite magnitudes is at
most `r · magnitude k + a`, then every `t` with `|t| ≤ maxValue` is encoded within
`(r |t| + a) / 2`. -/
theorem abs_decode_encode_sub_le (hf : f.WF) {r a : α} (hr : 0 ≤ r) (ha : 0 ≤ a)
    (hgap : ∀ k, k < f.maxMag → f.magnitude (α := α) (k + 1) - f.magnitude k ≤ r * f.magnitude k + a)
    {t : α} (ht : Scalar.abs t ≤ f.maxValue) :
    Scalar.abs (f.decode (f.encode t) - t) ≤ (r * Scalar.abs t + a) / 2 := by
  have hv := magnitude_strictMono (α := α) f hf
  have h0 : f.magnitude (α := α) 0 = 0 := magnitude_zero f
  have hle := (abs_le_iff'.mp ht)
  rw [decode_encode]
  split
  · rename_i hneg
    have hab : Scalar.abs t = -t := by rw [← abs_neg' t, abs_of_nonneg (by grind)]
    have := abs_roundIndex_sub_le hv hr ha hgap (by rw [h0]; exact Std.le_refl _)
      (show f.magnitude 0 ≤ -t by rw [h0]; grind) (show -t ≤ f.maxValue by have := hle.1; grind)
    rw [hab]
    have e : -f.magnitude (α := α) (roundIndex (fun k => f.magnitude (α := α) k) f.maxMag (-t)) - t =
        -(f.magnitude (roundIndex (fun k => f.magnitude (α := α) k) f.maxMag (-t)) - -t) := by grind
    rw [e, abs_neg']; exact this
  · rename_i hnn
    have hab : Scalar.abs t = t := abs_of_nonneg (by grind)
    have := abs_roundIndex_sub_le hv hr ha hgap (by rw [h0]; exact Std.le_refl _)
      (show f.magnitude 0 ≤ t by rw [h0]; grind) hle.2
    rw [hab]; exact this

/-- Gaps measured in units: if consecutive `units` differ by at most `g`, consecutive magnitudes
differ by at most `g · 2^−unitExp`. -/
theorem magnitude_gap_le_of_units {g : Nat} (hg : ∀ k, k < f.maxMag → f.units (k + 1) - f.units k ≤ g)
    (hf : f.WF) (k : Nat) (hk : k < f.maxMag) :
    f.magnitude (α := α) (k + 1) - f.magnitude k ≤ 0 * f.magnitude k + (g : α) / ((2 ^ f.unitExp : Nat) : α) := by
  have h1 := hg k hk
  have h2 := hf k hk
  have e : ((f.units (k + 1) : Nat) : α) = (f.units k : α) + ((f.units (k + 1) - f.units k : Nat) : α) := by
    rw [← Lean.Grind.Semiring.natCast_add]; congr 1; omega
  have h3 := natCast_le_natCast' (α := α) h1
  have hd := twoPow_unitExp_pos (α := α) f
  have := div_le_div_of_le_right' hd h3
  unfold magnitude; rw [e]; grind

/-- Relative gaps: if `2^M · (units (k+1) − units k) ≤ units k + 2^M`, consecutive magnitudes
differ by at most `magnitude k / 2^M + 2^−unitExp` (one unit in the last place of a normal value,
one subnormal step below). -/
theorem magnitude_gap_le_of_rel
    (hg : ∀ k, k < f.maxMag → 2 ^ f.manBits * (f.units (k + 1) - f.units k) ≤ f.units k + 2 ^ f.manBits)
    (hf : f.WF) (k : Nat) (hk : k < f.maxMag) :
    f.magnitude (α := α) (k + 1) - f.magnitude k ≤
      ((2 ^ f.manBits : Nat) : α)⁻¹ * f.magnitude k + ((2 ^ f.unitExp : Nat) : α)⁻¹ := by
  have h1 := natCast_le_natCast' (α := α) (hg k hk)
  have h2 := hf k hk
  have hP := natCast_pos' (α := α) (Nat.two_pow_pos f.manBits)
  have hT := twoPow_unitExp_pos (α := α) f
  have e : ((f.units (k + 1) : Nat) : α) = (f.units k : α) + ((f.units (k + 1) - f.units k : Nat) : α) := by
    rw [← Lean.Grind.Semiring.natCast_add]; congr 1; omega
  rw [Lean.Grind.Semiring.natCast_mul, Lean.Grind.Semiring.natCast_add] at h1
  -- `D ≤ U₀ / P + 1` for the gap `D` in units
  have hD : ((f.units (k + 1) - f.units k : Nat) : α) ≤
      (f.units k : α) * ((2 ^ f.manBits : Nat) : α)⁻¹ + 1 := by
    have h3 := (le_div_iff_mul_le' hP).mpr (show ((f.units (k + 1) - f.units k : Nat) : α) *
      ((2 ^ f.manBits : Nat) : α) ≤ (f.units k : α) + ((2 ^ f.manBits : Nat) : α) by grind)
    have e2 : ((f.units k : α) + ((2 ^ f.manBits : Nat) : α)) / ((2 ^ f.manBits : Nat) : α) =
        (f.units k : α) * ((2 ^ f.manBits : Nat) : α)⁻¹ + 1 := by grind
    rw [e2] at h3; exact h3
  have h4 := mul_le_mul_of_nonneg_right' hD (Std.le_of_lt (inv_pos' hT))
  unfold magnitude
  simp only [Lean.Grind.Field.div_eq_mul_inv]
  rw [e]
  grind

end Ordered

end FloatFormat

end KimiK3.Microscaling
