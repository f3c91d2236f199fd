module

public import KimiK3.Microscaling.FloatFormat

/-!
# The element formats: E2M1, FP8 E4M3, FP8 E5M2

* `e2m1` — MXFP4's element (OCP MX v1.0 §5.3.3): 2 exponent bits, 1 mantissa bit, bias 1, no
  NaN or infinity; magnitudes `0, 0.5, 1, 1.5, 2, 3, 4, 6`.
* `e4m3` — FP8 E4M3 (OCP FP8, `float8_e4m3fn`): 4 exponent bits, 3 mantissa bits, bias 7; the
  magnitude code `0x7F` is NaN (excluded), no infinity; largest value 448, smallest subnormal `2^−9`.
* `e5m2` — FP8 E5M2 (OCP FP8, IEEE-like): 5 exponent bits, 2 mantissa bits, bias 15; exponent
  field 31 is infinity/NaN (excluded); largest value 57344, smallest subnormal `2^−16`.

The report leaves MXFP8's element open (k3-spec §2.13), so the block theorems take the format as
a parameter. Everything here is checked by `decide` on natural numbers (the `units` table) and
`grind` for the scalar values.
-/

@[expose] public section

namespace KimiK3.Microscaling

open KimiK3

theorem e2m1_wf : e2m1.WF := by unfold FloatFormat.WF; decide
theorem e4m3_wf : e4m3.WF := by unfold FloatFormat.WF; decide
theorem e5m2_wf : e5m2.WF := by unfold FloatFormat.WF; decide

theorem e2m1_codeCount : e2m1.codeCount = 16 := by decide
theorem e4m3_codeCount : e4m3.codeCount = 256 := by decide
theorem e5m2_codeCount : e5m2.codeCount = 256 := by decide

/-- The largest exponents (OCP MX v1.0 Table 1): E2M1 2, E4M3 8, E5M2 15. -/
theorem emax_values : e2m1.emax = 2 ∧ e4m3.emax = 8 ∧ e5m2.emax = 15 := by decide

/-- The smallest subnormals: E2M1 `2^−1`, E4M3 `2^−9`, E5M2 `2^−16`. -/
theorem unitExp_values : e2m1.unitExp = 1 ∧ e4m3.unitExp = 9 ∧ e5m2.unitExp = 16 := by decide

/-- Every gap between consecutive E2M1 magnitudes is at most 4 half-units (the gap 4 → 6). -/
theorem e2m1_units_gap : ∀ k, k < e2m1.maxMag → e2m1.units (k + 1) - e2m1.units k ≤ 4 := by decide

/-- E2M1 relative gaps (one unit in the last place: half the value, or one subnormal step). -/
theorem e2m1_rel_gap :
    ∀ k, k < e2m1.maxMag → 2 ^ e2m1.manBits * (e2m1.units (k + 1) - e2m1.units k) ≤
      e2m1.units k + 2 ^ e2m1.manBits := by decide

/-- E4M3 relative gaps (one unit in the last place: an eighth of the value, or `2^−9`). -/
theorem e4m3_rel_gap :
    ∀ k, k < e4m3.maxMag → 2 ^ e4m3.manBits * (e4m3.units (k + 1) - e4m3.units k) ≤
      e4m3.units k + 2 ^ e4m3.manBits := by decide

/-- E5M2 relative gaps (one unit in the last place: a quarter of the value, or `2^−16`). -/
theorem e5m2_rel_gap :
    ∀ k, k < e5m2.maxMag → 2 ^ e5m2.manBits * (e5m2.units (k + 1) - e5m2.units k) ≤
      e5m2.units k + 2 ^ e5m2.manBits := by decide

variable {α : Type} [OrderedScalarField α]

/-- A magnitude from its `units` and `2^unitExp`. -/
theorem magnitude_eq_of {f : FloatFormat} {k n d : Nat} (hn : f.units k = n) (hd : 2 ^ f.unitExp = d) :
    f.magnitude (α := α) k = (n : α) / (d : α) := by
  unfold FloatFormat.magnitude; rw [hn, hd]

/-- The E2M1 magnitudes: `0, 1/2, 1, 3/2, 2, 3, 4, 6`. -/
theorem e2m1_magnitudes :
    e2m1.magnitude (α := α) 0 = 0 ∧ e2m1.magnitude (α := α) 1 = 1 / 2 ∧
      e2m1.magnitude (α := α) 2 = 1 ∧ e2m1.magnitude (α := α) 3 = 3 / 2 ∧
      e2m1.magnitude (α := α) 4 = 2 ∧ e2m1.magnitude (α := α) 5 = 3 ∧
      e2m1.magnitude (α := α) 6 = 4 ∧ e2m1.magnitude (α := α) 7 = 6 := by
  refine ⟨?_, ?_, ?_, ?_, ?_, ?_, ?_, ?_⟩
  · rw [magnitude_eq_of (f := e2m1) (k := 0) (n := 0) (d := 2) (by decide) (by decide)]; grind
  · rw [magnitude_eq_of (f := e2m1) (k := 1) (n := 1) (d := 2) (by decide) (by decide)]; grind
  · rw [magnitude_eq_of (f := e2m1) (k := 2) (n := 2) (d := 2) (by decide) (by decide)]; grind
  · rw [magnitude_eq_of (f := e2m1) (k := 3) (n := 3) (d := 2) (by decide) (by decide)]; grind
  · rw [magnitude_eq_of (f := e2m1) (k := 4) (n := 4) (d := 2) (by decide) (by decide)]; grind
  · rw [magnitude_eq_of (f := e2m1) (k := 5) (n := 6) (d := 2) (by decide) (by decide)]; grind
  · rw [magnitude_eq_of (f := e2m1) (k := 6) (n := 8) (d := 2) (by decide) (by decide)]; grind
  · rw [magnitude_eq_of (f := e2m1) (k := 7) (n := 12) (d := 2) (by decide) (by decide)]; grind

/-- E2M1's largest value is 6. -/
theorem e2m1_maxValue : e2m1.maxValue (α := α) = 6 := e2m1_magnitudes.2.2.2.2.2.2.2

/-- E4M3's largest value is 448 (`1.75 · 2^8`). -/
theorem e4m3_maxValue : e4m3.maxValue (α := α) = 448 := by
  unfold FloatFormat.maxValue
  rw [magnitude_eq_of (f := e4m3) (k := e4m3.maxMag) (n := 229376) (d := 512) (by decide) (by decide)]; grind

/-- E5M2's largest finite value is 57344 (`1.75 · 2^15`). -/
theorem e5m2_maxValue : e5m2.maxValue (α := α) = 57344 := by
  unfold FloatFormat.maxValue
  rw [magnitude_eq_of (f := e5m2) (k := e5m2.maxMag) (n := 3758096384) (d := 65536) (by decide) (by decide)]; grind

/-- Consecutive E2M1 magnitudes differ by at most 2. -/
theorem e2m1_gap_le (k : Nat) (hk : k < e2m1.maxMag) :
    e2m1.magnitude (α := α) (k + 1) - e2m1.magnitude k ≤ 0 * e2m1.magnitude k + 2 := by
  have := FloatFormat.magnitude_gap_le_of_units (α := α) e2m1 e2m1_units_gap e2m1_wf k hk
  have e : ((4 : Nat) : α) / ((2 ^ e2m1.unitExp : Nat) : α) = 2 := by
    rw [show 2 ^ e2m1.unitExp = 2 by decide]; grind
  rw [e] at this; exact this

end KimiK3.Microscaling
