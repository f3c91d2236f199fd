module

public import KimiK3.Microscaling.Block

/-!
# MXFP4: E2M1 elements, E8M0 scales, blocks of 32 (K3's routed-expert weights)

* `quantizeE2M1_error_le_one` — for `|t| ≤ 6`, `|decodeE2M1 (quantizeE2M1 t) − t| ≤ 1` (half the
  largest gap, 4 → 6);
* `quantizeMXFP4Block_error_le` — with the range hypothesis `|x i| ≤ 6 s`, every element of the
  block is within `s`;
* `quantizeMXFP4_ceil_error_le` — with the ceil scale rule, within `s` unconditionally (for
  blocks that fit the largest scale);
* `quantizeMXFP4_ocpFloor_counterexample` — with the OCP floor rule the bound fails: the block
  `(7.5, 0, …, 0)` gets `s = 1`, its first element saturates to 6, error `3/2 > s`.
-/

@[expose] public section

namespace KimiK3.Microscaling

open KimiK3

variable {α : Type}

section Ordered

variable [OrderedScalarField α]

/-- **E2M1 quantization error**: for `|t| ≤ 6`, the encoded value is within 1 of `t`. -/
theorem quantizeE2M1_error_le_one {t : α} (ht : Scalar.abs t ≤ 6) :
    Scalar.abs (decodeE2M1 (quantizeE2M1 t) - t) ≤ 1 := by
  have := e2m1.abs_decode_encode_sub_le (α := α) e2m1_wf (r := 0) (a := 2) (Std.le_refl _) (by grind)
    (fun k hk => e2m1_gap_le k hk) (by rw [e2m1_maxValue]; exact ht)
  have e : (0 * Scalar.abs t + 2) / 2 = (1 : α) := by grind
  rw [e] at this; exact this

/-- **E2M1 error up to 7**: for `|t| ≤ 7` the encoded value is still within 1 of `t` (between 6
and 7 it saturates to ±6). This is the range scale rules that clip below `7 s` need (e.g. the
rule of `compressed-tensors`, which rounds `amax` to a power of two at E2M1's precision first;
README). -/
theorem quantizeE2M1_error_le_one_of_abs_le_seven {t : α} (ht : Scalar.abs t ≤ 7) :
    Scalar.abs (decodeE2M1 (quantizeE2M1 t) - t) ≤ 1 := by
  rcases lt_or_le' 6 (Scalar.abs t) with h6 | h6
  · have hb := abs_le_iff'.mp ht
    unfold decodeE2M1 quantizeE2M1
    rcases lt_or_le' t 0 with hneg | hnn
    · have hab : Scalar.abs t = -t := by rw [← abs_neg' t, abs_of_nonneg (by grind)]
      rw [e2m1.decode_encode_of_le_neg e2m1_wf hneg (by rw [e2m1_maxValue]; grind), e2m1_maxValue]
      rw [abs_le_iff']; constructor <;> grind
    · have hab : Scalar.abs t = t := abs_of_nonneg hnn
      rw [e2m1.decode_encode_of_le (t := t) e2m1_wf (by rw [e2m1_maxValue]; grind), e2m1_maxValue]
      rw [abs_le_iff']; constructor <;> grind
  · exact quantizeE2M1_error_le_one h6

/-- **MXFP4 block error** (the seed's `quantizeMXFP4Block_error_le`): if every element satisfies
the range hypothesis `|x i| ≤ 6 s`, every decoded element is within `s` of it. -/
theorem quantizeMXFP4Block_error_le (scale : E8M0) (values : Fin 32 → α)
    (hRange : ∀ i, Scalar.abs (values i) ≤ 6 * E8M0.decode scale) (i : Fin 32) :
    Scalar.abs ((quantizeMXFP4Block scale values).decode decodeE2M1 i - values i) ≤ E8M0.decode scale := by
  have := Block.abs_quantizeWithScale_sub_le (α := α) e2m1 e2m1_wf (r := 0) (a := 2) (Std.le_refl _)
    (by grind) (fun k hk => e2m1_gap_le k hk) scale values i (by rw [e2m1_maxValue]; exact hRange i)
  have e : (0 * Scalar.abs (values i) + 2 * E8M0.decode (α := α) scale) / 2 = E8M0.decode scale := by grind
  rw [e] at this; exact this

/-- **MXFP4 block error up to `7 s`**: if every element satisfies `|x i| ≤ 7 s`, every decoded
element is within `s` of it (elements in `(6 s, 7 s]` saturate to `±6 s`). -/
theorem quantizeMXFP4Block_error_le_of_abs_le_seven (scale : E8M0) (values : Fin 32 → α)
    (hRange : ∀ i, Scalar.abs (values i) ≤ 7 * E8M0.decode scale) (i : Fin 32) :
    Scalar.abs ((quantizeMXFP4Block scale values).decode decodeE2M1 i - values i) ≤ E8M0.decode scale := by
  have hs := E8M0.decode_pos (α := α) scale
  have e2 : Scalar.abs (values i / E8M0.decode scale) = Scalar.abs (values i) / E8M0.decode scale :=
    abs_div_of_pos' hs (values i)
  have ht : Scalar.abs (values i / E8M0.decode scale) ≤ 7 := by
    rw [e2]; exact (div_le_iff_le_mul' hs).mpr (by have := hRange i; grind)
  have key := quantizeE2M1_error_le_one_of_abs_le_seven ht
  show Scalar.abs (E8M0.decode scale * decodeE2M1 (α := α) (quantizeE2M1 (values i / E8M0.decode scale)) - values i) ≤ _
  have e1 : E8M0.decode scale * decodeE2M1 (α := α) (quantizeE2M1 (values i / E8M0.decode scale)) - values i =
      E8M0.decode scale * (decodeE2M1 (α := α) (quantizeE2M1 (values i / E8M0.decode scale)) - values i / E8M0.decode scale) := by
    grind
  rw [e1, abs_mul_of_nonneg_left' (Std.le_of_lt hs)]
  have h3 := mul_le_mul_of_nonneg_left' key (Std.le_of_lt hs)
  grind

/-- **MXFP4 with the ceil rule**: every element within the block's scale, for every block whose
elements fit the largest scale (`|x i| ≤ 6 · 2^127`). -/
theorem quantizeMXFP4_ceil_error_le (values : Fin 32 → α)
    (hfit : ∀ i, Scalar.abs (values i) ≤ 6 * E8M0.scaleValue 254) (i : Fin 32) :
    Scalar.abs ((quantizeMXFP4 .ceil values).decode decodeE2M1 i - values i) ≤
      E8M0.decode (quantizeMXFP4 .ceil values).scale := by
  have hs := E8M0.scaleValue_pos (α := α) 254
  have hfit' : Block.amax values ≤ e2m1.maxValue * E8M0.scaleValue 254 := by
    rw [e2m1_maxValue]; exact Block.amax_le (by grind) hfit
  have := Block.abs_quantize_ceil_sub_le (α := α) e2m1 e2m1_wf (r := 0) (a := 2) (Std.le_refl _)
    (by grind) (fun k hk => e2m1_gap_le k hk) values hfit' i
  have e : (0 * Scalar.abs (values i) + 2 * E8M0.decode (α := α) (quantizeMXFP4 .ceil values).scale) / 2 =
      E8M0.decode (quantizeMXFP4 .ceil values).scale := by grind
  exact e ▸ this

/-- The OCP rule on E2M1 picks code 127 (`s = 1`) for every `amax ∈ [4, 8)`. -/
theorem ocpFloor_code_e2m1 {amax : α} (h1 : 4 ≤ amax) (h2 : amax < 8) :
    ScaleRule.ocpFloor.code e2m1 amax = 127 := by
  have h4 : ((2 ^ e2m1.emax : Nat) : α) = 4 := by rw [show 2 ^ e2m1.emax = 4 by decide]; grind
  refine firstFalse_eq_of _ 254 127 (by decide)
    (fun i j hij hj hp => ScaleRule.ocpFloor_antitone (α := α) e2m1 amax i j hij hj hp)
    (fun i hi => ?_) (fun _ => ?_)
  · simp only [decide_eq_true_eq]
    have := E8M0.scaleValue_le_scaleValue (α := α) (show i + 1 ≤ 127 by omega)
    rw [E8M0.scaleValue_127] at this
    have hs := E8M0.scaleValue_pos (α := α) (i + 1)
    rw [h4]; grind
  · simp only [decide_eq_false_iff_not]
    rw [h4, E8M0.scaleValue_128]; grind

/-- The block of the OCP counterexample: `7.5` then 31 zeros. -/
@[macro_inline] def clipValues [Scalar α] : Fin 32 → α := fun i => if i.val = 0 then 15 / 2 else 0

/-- **The OCP floor rule breaks the MXFP4 bound**: for `(7.5, 0, …, 0)` it picks `s = 1`
(`⌊log₂ 7.5⌋ − 2 = 0`), element 0 saturates to 6, and the error `3/2` exceeds `s`. -/
theorem quantizeMXFP4_ocpFloor_counterexample :
    E8M0.decode (α := α) (quantizeMXFP4 .ocpFloor (clipValues (α := α))).scale = 1 ∧
      (quantizeMXFP4 .ocpFloor (clipValues (α := α))).decode (decodeE2M1 (α := α)) 0 = 6 ∧
      Scalar.abs ((quantizeMXFP4 .ocpFloor (clipValues (α := α))).decode (decodeE2M1 (α := α)) 0 -
        clipValues (α := α) 0) = 3 / 2 := by
  have hv0 : clipValues (α := α) 0 = 15 / 2 := by simp [clipValues]
  have hamax : Block.amax (clipValues (α := α)) = 15 / 2 := by
    have h1 := Block.le_amax (clipValues (α := α)) 0
    rw [hv0, abs_of_nonneg (by grind)] at h1
    have h2 : Block.amax (clipValues (α := α)) ≤ 15 / 2 := Block.amax_le (by grind) (fun i => by
      unfold clipValues; split
      · rw [abs_of_nonneg (by grind)]; exact Std.le_refl _
      · rw [abs_of_nonneg (Std.le_refl _)]; grind)
    grind
  have hcode : ScaleRule.ocpFloor.code e2m1 (Block.amax (clipValues (α := α))) = 127 := by
    rw [hamax]; exact ocpFloor_code_e2m1 (by grind) (by grind)
  have hs : E8M0.decode (α := α) (quantizeMXFP4 .ocpFloor (clipValues (α := α))).scale = 1 := by
    show E8M0.scaleValue (ScaleRule.ocpFloor.code e2m1 (Block.amax (clipValues (α := α)))) = 1
    rw [hcode, E8M0.scaleValue_127]
  have hel : (quantizeMXFP4 .ocpFloor (clipValues (α := α))).decode (decodeE2M1 (α := α)) 0 = 6 := by
    show E8M0.decode (α := α) (quantizeMXFP4 .ocpFloor (clipValues (α := α))).scale *
      e2m1.decode (α := α) (e2m1.encode (clipValues (α := α) 0 /
        E8M0.decode (α := α) (quantizeMXFP4 .ocpFloor (clipValues (α := α))).scale)) = 6
    rw [hs, hv0]
    have e : (15 / 2 : α) / 1 = 15 / 2 := by grind
    rw [e, e2m1.decode_encode_of_le (t := (15 / 2 : α)) e2m1_wf (by rw [e2m1_maxValue]; grind), e2m1_maxValue]
    grind
  refine ⟨hs, hel, ?_⟩
  rw [hel, hv0]
  have e : (6 : α) - 15 / 2 = -(3 / 2) := by grind
  rw [e, abs_neg', abs_of_nonneg (by grind)]

end Ordered

end KimiK3.Microscaling
