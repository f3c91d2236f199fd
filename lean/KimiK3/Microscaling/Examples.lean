module

public import KimiK3.Microscaling.MXFP4
public import KimiK3.Exec.RatScalar

/-!
# The report's microscaling examples, proved exactly

Over every ordered scalar field (so over ℝ and ℚ alike):

* `quantizeE2M1_example` — 2.70 quantizes to 3.00 with error 0.30 (k3-spec §2.13);
* `quantizeE2M1_ties` — the seven E2M1 midpoints 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 go to the
  even codes 0 (0), 2 (1), 2 (1), 4 (2), 4 (2), 6 (4), 6 (4); `quantizeE2M1_saturates` — 7 and
  −100 saturate to ±6;
* `mxfp4_half_scale_example` — an MXFP4 block with scale `1/2` (code 126) has error at most
  `1/2` on `[−3, 3]`;
* `E8M0.encode_three` (in `E8M0.lean`) — the E8M0 tie at 3 goes to 2.0;
* `quantizeE2M1_example_rat`, `mxfp4_half_scale_example_rat` — the same at `Rat`
  (`Exec/RatScalar.lean`, a model of `OrderedScalarField`), so the hypotheses are satisfiable.
-/

@[expose] public section

namespace KimiK3.Microscaling

open KimiK3

variable {α : Type} [OrderedScalarField α]

/-- **Worked example**: `quantizeE2M1 2.7` is code 5, value 3, error `3/10`. -/
theorem quantizeE2M1_example :
    (quantizeE2M1 (27 / 10 : α)).val = 5 ∧ decodeE2M1 (α := α) (quantizeE2M1 (27 / 10 : α)) = 3 ∧
      Scalar.abs (decodeE2M1 (α := α) (quantizeE2M1 (27 / 10 : α)) - 27 / 10) = 3 / 10 := by
  obtain ⟨_, _, _, _, m4, m5, m6, _⟩ := e2m1_magnitudes (α := α)
  have hround : roundIndex (fun k => e2m1.magnitude (α := α) k) e2m1.maxMag (27 / 10) = 5 := by
    refine roundIndex_eq_of_between (e2m1.magnitude_strictMono e2m1_wf) (by decide)
      (fun _ => ?_) (fun _ => ?_)
    · show (e2m1.magnitude (α := α) 4 + e2m1.magnitude (α := α) 5) / 2 < 27 / 10
      rw [m4, m5]; grind
    · show 27 / 10 < (e2m1.magnitude (α := α) 5 + e2m1.magnitude (α := α) 6) / 2
      rw [m5, m6]; grind
  have hnn : ¬ ((27 / 10 : α) < 0) := by grind
  have hcode : (quantizeE2M1 (27 / 10 : α)).val = 5 := by
    unfold quantizeE2M1 FloatFormat.encode; simp only [hnn, if_false]; exact hround
  have hval : decodeE2M1 (α := α) (quantizeE2M1 (27 / 10 : α)) = 3 := by
    unfold decodeE2M1 quantizeE2M1; rw [e2m1.decode_encode]; simp only [hnn, if_false]; rw [hround, m5]
  refine ⟨hcode, hval, ?_⟩
  rw [hval]
  have e : (3 : α) - 27 / 10 = 3 / 10 := by grind
  rw [e, abs_of_nonneg (by grind)]

/-- The E2M1 value halfway between magnitude codes `k` and `k+1` goes to the even code. -/
theorem quantizeE2M1_tie {k : Nat} (hk : k < 7) {t : α}
    (ht : (e2m1.magnitude (α := α) k + e2m1.magnitude (α := α) (k + 1)) / 2 = t) :
    (quantizeE2M1 t).val = if k % 2 = 1 then k + 1 else k := by
  rw [← ht]; exact e2m1.encode_midpoint e2m1_wf hk

/-- **The E2M1 tie rule**: each midpoint goes to the even code. -/
theorem quantizeE2M1_ties :
    (quantizeE2M1 (1 / 4 : α)).val = 0 ∧ (quantizeE2M1 (3 / 4 : α)).val = 2 ∧
      (quantizeE2M1 (5 / 4 : α)).val = 2 ∧ (quantizeE2M1 (7 / 4 : α)).val = 4 ∧
      (quantizeE2M1 (5 / 2 : α)).val = 4 ∧ (quantizeE2M1 (7 / 2 : α)).val = 6 ∧
      (quantizeE2M1 (5 : α)).val = 6 := by
  obtain ⟨m0, m1, m2, m3, m4, m5, m6, m7⟩ := e2m1_magnitudes (α := α)
  refine ⟨quantizeE2M1_tie (k := 0) (by decide) ?_, quantizeE2M1_tie (k := 1) (by decide) ?_,
    quantizeE2M1_tie (k := 2) (by decide) ?_, quantizeE2M1_tie (k := 3) (by decide) ?_,
    quantizeE2M1_tie (k := 4) (by decide) ?_, quantizeE2M1_tie (k := 5) (by decide) ?_,
    quantizeE2M1_tie (k := 6) (by decide) ?_⟩
  · show (e2m1.magnitude (α := α) 0 + e2m1.magnitude (α := α) 1) / 2 = 1 / 4
    rw [m0, m1]; grind
  · show (e2m1.magnitude (α := α) 1 + e2m1.magnitude (α := α) 2) / 2 = 3 / 4
    rw [m1, m2]; grind
  · show (e2m1.magnitude (α := α) 2 + e2m1.magnitude (α := α) 3) / 2 = 5 / 4
    rw [m2, m3]; grind
  · show (e2m1.magnitude (α := α) 3 + e2m1.magnitude (α := α) 4) / 2 = 7 / 4
    rw [m3, m4]; grind
  · show (e2m1.magnitude (α := α) 4 + e2m1.magnitude (α := α) 5) / 2 = 5 / 2
    rw [m4, m5]; grind
  · show (e2m1.magnitude (α := α) 5 + e2m1.magnitude (α := α) 6) / 2 = 7 / 2
    rw [m5, m6]; grind
  · show (e2m1.magnitude (α := α) 6 + e2m1.magnitude (α := α) 7) / 2 = 5
    rw [m6, m7]; grind

/-- **Saturation**: 7 encodes to 6 and −100 to −6. -/
theorem quantizeE2M1_saturates :
    decodeE2M1 (α := α) (quantizeE2M1 (7 : α)) = 6 ∧ decodeE2M1 (α := α) (quantizeE2M1 (-100 : α)) = -6 := by
  constructor
  · unfold decodeE2M1 quantizeE2M1
    rw [e2m1.decode_encode_of_le (t := (7 : α)) e2m1_wf (by rw [e2m1_maxValue]; grind), e2m1_maxValue]
  · unfold decodeE2M1 quantizeE2M1
    rw [e2m1.decode_encode_of_le_neg (t := (-100 : α)) e2m1_wf (by grind) (by rw [e2m1_maxValue]; grind),
      e2m1_maxValue]

/-- **Worked example**: an MXFP4 block with scale `1/2` (E8M0 code 126) quantizes every element
of `[−3, 3]` with error at most `1/2`. -/
theorem mxfp4_half_scale_example (values : Fin 32 → α) (h : ∀ i, Scalar.abs (values i) ≤ 3)
    (i : Fin 32) :
    Scalar.abs ((quantizeMXFP4Block 126 values).decode decodeE2M1 i - values i) ≤ 1 / 2 := by
  have hs : E8M0.decode (α := α) (126 : E8M0) = 1 / 2 := E8M0.scaleValue_126
  have := quantizeMXFP4Block_error_le (α := α) 126 values (fun j => by rw [hs]; have := h j; grind) i
  rw [hs] at this; exact this

/-- **Worked example at `Rat`**: `2.7` quantizes to E2M1 code 5, value `3`, error `3/10`, exactly. -/
theorem quantizeE2M1_example_rat :
    (quantizeE2M1 (27 / 10 : Rat)).val = 5 ∧ decodeE2M1 (α := Rat) (quantizeE2M1 (27 / 10 : Rat)) = 3 ∧
      Scalar.abs (decodeE2M1 (α := Rat) (quantizeE2M1 (27 / 10 : Rat)) - 27 / 10) = 3 / 10 :=
  quantizeE2M1_example

/-- **Worked example at `Rat`**: scale `1/2` quantizes `[−3, 3]` with error at most `1/2`. -/
theorem mxfp4_half_scale_example_rat (values : Fin 32 → Rat) (h : ∀ i, Scalar.abs (values i) ≤ 3)
    (i : Fin 32) :
    Scalar.abs ((quantizeMXFP4Block 126 values).decode decodeE2M1 i - values i) ≤ 1 / 2 :=
  mxfp4_half_scale_example values h i

end KimiK3.Microscaling
