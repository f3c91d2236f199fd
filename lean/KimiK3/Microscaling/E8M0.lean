module

public import KimiK3.Microscaling.Round

/-!
# E8M0, the shared scale of an MX block (OCP MX v1.0 §5.4)

An E8M0 code `e` is 8 exponent bits: no sign, no mantissa, bias 127. Codes `0 … 254` are the
powers of two `2^(e − 127)`, from `2^−127` to `2^127`; code 255 is NaN and excluded
(`isFinite`). There is no zero.

* `scaleValue e = 2^(e − 127)` (for any natural `e`; the decoder reads it at finite codes);
* `encode t` — round to nearest, ties to the even code, saturating at codes 0 and 254 (never
  NaN). This is the rule stated for this project. **torch's cast to `float8_e8m0fnu` differs**:
  it rounds up (3.0 → 4.0, where this encoder gives 2.0, `encode_three`).

Proved: positivity (`scaleValue_pos`), doubling (`scaleValue_succ`), strict monotonicity, decode
→ encode is the identity on finite codes (`encode_decode`), the relative error of the encoder
(`abs_decode_encode_sub_le`: at most half of `t` on `[2^−127, 2^127]`).
-/

@[expose] public section

namespace KimiK3.Microscaling

open KimiK3

namespace E8M0

variable {α : Type}

/-- Encoding gives finite codes only. -/
theorem encode_isFinite [Scalar α] (t : α) : isFinite (encode t) = true := by
  have := roundIndex_le (fun k => scaleValue (α := α) k) 254 t
  unfold isFinite encode; simp only [decide_eq_true_eq]; omega

section Ordered

variable [OrderedScalarField α]

/-- E8M0 values are positive. -/
theorem scaleValue_pos (e : Nat) : 0 < scaleValue (α := α) e := by
  unfold scaleValue; split
  · exact natCast_pos' (Nat.two_pow_pos _)
  · exact inv_pos' (natCast_pos' (Nat.two_pow_pos _))

/-- Finite E8M0 scales are positive. -/
theorem decode_pos (e : E8M0) : 0 < decode (α := α) e := scaleValue_pos _

/-- Consecutive codes differ by a factor of two. -/
theorem scaleValue_succ (e : Nat) : scaleValue (α := α) (e + 1) = 2 * scaleValue e := by
  unfold scaleValue
  by_cases h : 127 ≤ e
  · simp only [show 127 ≤ e + 1 by omega, h, if_true]
    rw [show e + 1 - 127 = (e - 127) + 1 by omega, Nat.pow_succ, Lean.Grind.Semiring.natCast_mul]
    grind
  · simp only [h, if_false]
    by_cases h' : e = 126
    · subst h'; simp only [show 127 ≤ 126 + 1 by omega, if_true]
      have e1 : ((2 ^ (126 + 1 - 127) : Nat) : α) = 1 := by
        rw [show 2 ^ (126 + 1 - 127) = 1 by decide]; grind
      have e2 : ((2 ^ (127 - 126) : Nat) : α) = 2 := by
        rw [show 2 ^ (127 - 126) = 2 by decide]; grind
      rw [e1, e2]; grind
    · simp only [show ¬ 127 ≤ e + 1 by omega, if_false]
      have hp := natCast_pos' (α := α) (Nat.two_pow_pos (127 - (e + 1)))
      rw [show 127 - e = (127 - (e + 1)) + 1 by omega, Nat.pow_succ, Lean.Grind.Semiring.natCast_mul]
      have : ((2 ^ (127 - (e + 1)) : Nat) : α) ≠ 0 := by grind
      grind

/-- E8M0 values strictly increase with their codes. -/
theorem scaleValue_strictMono (N : Nat) : StrictMonoUpTo (fun e => scaleValue (α := α) e) N := by
  intro k _
  have := scaleValue_pos (α := α) k
  show scaleValue k < scaleValue (k + 1)
  rw [scaleValue_succ]; grind

/-- E8M0 values are monotone in their codes. -/
theorem scaleValue_le_scaleValue {i j : Nat} (h : i ≤ j) : scaleValue (α := α) i ≤ scaleValue j :=
  (scaleValue_strictMono (α := α) j).le (v := fun e => scaleValue (α := α) e) h (Nat.le_refl _)

/-- Code 127 is `1`. -/
theorem scaleValue_127 : scaleValue (α := α) 127 = 1 := by
  unfold scaleValue; simp only [show 127 ≤ 127 by omega, if_true]
  rw [show 2 ^ (127 - 127) = 1 by decide]; grind

/-- Code 126 is `1/2`. -/
theorem scaleValue_126 : scaleValue (α := α) 126 = 1 / 2 := by
  have := scaleValue_succ (α := α) 126
  rw [scaleValue_127] at this; grind

/-- Code 128 is `2`. -/
theorem scaleValue_128 : scaleValue (α := α) 128 = 2 := by
  rw [scaleValue_succ, scaleValue_127]; grind

/-- **Decode → encode is the identity** on every finite E8M0 code. -/
theorem encode_decode (e : E8M0) (he : isFinite e = true) : encode (decode (α := α) e) = e := by
  unfold isFinite at he; simp only [decide_eq_true_eq] at he
  apply Fin.ext
  exact roundIndex_value (scaleValue_strictMono (α := α) 254) (show e.val ≤ 254 by omega)

/-- **Encoder error**: on `[2^−127, 2^127]` the nearest power of two is within `t / 2`. -/
theorem abs_decode_encode_sub_le {t : α} (h0 : scaleValue 0 ≤ t) (h1 : t ≤ scaleValue 254) :
    Scalar.abs (decode (encode t) - t) ≤ t / 2 := by
  have := abs_roundIndex_sub_le (scaleValue_strictMono (α := α) 254) (r := 1) (a := 0) (t := t)
    (by grind) (by grind) (fun k _ => by
      show scaleValue (k + 1) - scaleValue k ≤ 1 * scaleValue k + 0
      rw [scaleValue_succ]; grind)
    (Std.le_of_lt (scaleValue_pos 0)) h0 h1
  have e : (1 * t + 0) / 2 = t / 2 := by grind
  rw [e] at this; exact this

/-- **The E8M0 tie rule at 3**: `3 = (2 + 4) / 2` encodes to code 128 (`2.0`, the even code).
torch's `float8_e8m0fnu` cast gives code 129 (`4.0`): it rounds up. -/
theorem encode_three : (encode (3 : α)).val = 128 := by
  have h := roundIndex_midpoint (scaleValue_strictMono (α := α) 254) (k := 128) (by decide)
  have h4 : scaleValue (α := α) (128 + 1) = 4 := by rw [scaleValue_succ, scaleValue_128]; grind
  have hm : midpoint (fun e => scaleValue (α := α) e) 128 = 3 := by
    show (scaleValue (α := α) 128 + scaleValue (α := α) (128 + 1)) / 2 = 3
    rw [h4, scaleValue_128]; grind
  rw [hm] at h
  show roundIndex (fun e => scaleValue (α := α) e) 254 3 = 128
  rw [h]; decide

end Ordered

end E8M0

end KimiK3.Microscaling
