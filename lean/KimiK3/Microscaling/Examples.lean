module

public import KimiK3.Microscaling.MXFP4

/-!
# The report's microscaling examples, proved exactly

Over every ordered scalar field (so over ℝ and ℚ alike):

* `quantizeE2M1_example` — 2.70 quantizes to 3.00 with error 0.30 (k3-spec §2.13);
* `quantizeE2M1_ties` — the seven E2M1 midpoints 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 go to the
  even codes 0 (0), 2 (1), 2 (1), 4 (2), 4 (2), 6 (4), 6 (4); `quantizeE2M1_saturates` — 7 and
  −100 saturate to ±6;
* `mxfp4_half_scale_example` — an MXFP4 block with scale `1/2` (code 126) has error at most
  `1/2` on `[−3, 3]`;
* `E8M0.encode_three` (in `E8M0.lean`) — the E8M0 tie at 3 goes to 2.0.
-/

@[expose] public section

namespace KimiK3.Microscaling

open KimiK3

variable {α : Type} [OrderedScalarField α]

/-- **Worked example**: `quantizeE2M1 2.7` is code 5, value 3, error `3/10`. -/
theorem quantizeE2M1_example :
    (quantizeE2M1 (27 / 10 : α)).val = 5 ∧ decodeE2M1 (quantizeE2M1 (27 / 10 : α)) = 3 ∧
      Scalar.abs (decodeE2M1 (quantizeE2M1 (27 / 10 : α)) - 27 / 10) = 3 / 10 := by
  obtain ⟨_, _, _, _, m4, m5, m6, _⟩ := e2m1_magnitudes (α := α)
  have hround : roundIndex (fun k => e2m1.magnitude (α := α) k) e2m1.maxMag (27 / 10) = 5 := by
    refine roundIndex_eq_of_between (e2m1.magnitude_strictMono e2m1_wf) (by decide)
      (fun _ => ?_) (fun _ => ?_)
    · simp only [midpoint, show 5 - 1 = 4 by rfl, show 4 + 1 = 5 by rfl, m4, m5]; grind
    · simp only [midpoint, show 5 + 1 = 6 by rfl, m5, m6]; grind
  have hnn : ¬ ((27 / 10 : α) < 0) := by grind
  have hcode : (quantizeE2M1 (27 / 10 : α)).val = 5 := by
    unfold quantizeE2M1 FloatFormat.encode; simp only [hnn, if_false]; exact hround
  have hval : decodeE2M1 (quantizeE2M1 (27 / 10 : α)) = 3 := by
    unfold decodeE2M1; rw [e2m1.decode_encode]; simp only [hnn, if_false]; rw [hround, m5]
  refine ⟨hcode, hval, ?_⟩
  rw [hval]
  have e : (3 : α) - 27 / 10 = 3 / 10 := by grind
  rw [e, abs_of_nonneg (by grind)]

/-- The E2M1 midpoint between codes `k` and `k+1` goes to the even code. -/
theorem quantizeE2M1_midpoint (k : Nat) (hk : k < 7) :
    (quantizeE2M1 (midpoint (fun j => e2m1.magnitude (α := α) j) k)).val =
      if k % 2 = 1 then k + 1 else k :=
  e2m1.encode_midpoint e2m1_wf hk

/-- **The E2M1 tie rule**: each midpoint goes to the even code. -/
theorem quantizeE2M1_ties :
    (quantizeE2M1 (1 / 4 : α)).val = 0 ∧ (quantizeE2M1 (3 / 4 : α)).val = 2 ∧
      (quantizeE2M1 (5 / 4 : α)).val = 2 ∧ (quantizeE2M1 (7 / 4 : α)).val = 4 ∧
      (quantizeE2M1 (5 / 2 : α)).val = 4 ∧ (quantizeE2M1 (7 / 2 : α)).val = 6 ∧
      (quantizeE2M1 (5 : α)).val = 6 := by
  obtain ⟨m0, m1, m2, m3, m4, m5, m6, m7⟩ := e2m1_magnitudes (α := α)
  have t0 := quantizeE2M1_midpoint (α := α) 0 (by decide)
  have t1 := quantizeE2M1_midpoint (α := α) 1 (by decide)
  have t2 := quantizeE2M1_midpoint (α := α) 2 (by decide)
  have t3 := quantizeE2M1_midpoint (α := α) 3 (by decide)
  have t4 := quantizeE2M1_midpoint (α := α) 4 (by decide)
  have t5 := quantizeE2M1_midpoint (α := α) 5 (by decide)
  have t6 := quantizeE2M1_midpoint (α := α) 6 (by decide)
  simp only [midpoint, show 0 + 1 = 1 by rfl, show 1 + 1 = 2 by rfl, show 2 + 1 = 3 by rfl,
    show 3 + 1 = 4 by rfl, show 4 + 1 = 5 by rfl, show 5 + 1 = 6 by rfl, show 6 + 1 = 7 by rfl,
    m0, m1, m2, m3, m4, m5, m6, m7] at t0 t1 t2 t3 t4 t5 t6
  have e0 : ((0 : α) + 1 / 2) / 2 = 1 / 4 := by grind
  have e1 : ((1 / 2 : α) + 1) / 2 = 3 / 4 := by grind
  have e2 : ((1 : α) + 3 / 2) / 2 = 5 / 4 := by grind
  have e3 : ((3 / 2 : α) + 2) / 2 = 7 / 4 := by grind
  have e4 : ((2 : α) + 3) / 2 = 5 / 2 := by grind
  have e5 : ((3 : α) + 4) / 2 = 7 / 2 := by grind
  have e6 : ((4 : α) + 6) / 2 = 5 := by grind
  rw [e0] at t0; rw [e1] at t1; rw [e2] at t2; rw [e3] at t3; rw [e4] at t4; rw [e5] at t5
  rw [e6] at t6
  exact ⟨t0, t1, t2, t3, t4, t5, t6⟩

/-- **Saturation**: 7 encodes to 6 and −100 to −6. -/
theorem quantizeE2M1_saturates :
    decodeE2M1 (quantizeE2M1 (7 : α)) = 6 ∧ decodeE2M1 (quantizeE2M1 (-100 : α)) = -6 := by
  constructor
  · unfold decodeE2M1 quantizeE2M1
    rw [e2m1.decode_encode_of_le e2m1_wf (by rw [e2m1_maxValue]; grind), e2m1_maxValue]
  · have hneg : (-100 : α) < 0 := by grind
    have hv := e2m1.magnitude_strictMono (α := α) e2m1_wf
    unfold decodeE2M1 quantizeE2M1
    rw [e2m1.decode_encode]; simp only [hneg, if_true]
    have e : -(-100 : α) = 100 := by grind
    rw [e, roundIndex_of_le hv (by show e2m1.maxValue ≤ 100; rw [e2m1_maxValue]; grind)]
    show -e2m1.maxValue = -6
    rw [e2m1_maxValue]

/-- **Worked example**: an MXFP4 block with scale `1/2` (E8M0 code 126) quantizes every element
of `[−3, 3]` with error at most `1/2`. -/
theorem mxfp4_half_scale_example (values : Fin 32 → α) (h : ∀ i, Scalar.abs (values i) ≤ 3)
    (i : Fin 32) :
    Scalar.abs ((quantizeMXFP4Block 126 values).decode decodeE2M1 i - values i) ≤ 1 / 2 := by
  have hs : E8M0.decode (α := α) (126 : E8M0) = 1 / 2 := E8M0.scaleValue_126
  have := quantizeMXFP4Block_error_le (α := α) 126 values (fun j => by rw [hs]; have := h j; grind) i
  rw [hs] at this; exact this

end KimiK3.Microscaling
