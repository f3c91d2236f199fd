module

public import KimiK3.Microscaling.Formats
public import KimiK3.Microscaling.E8M0

/-!
# Scale rules: how a block's shared E8M0 scale is chosen

A rule maps the block's largest magnitude `amax` to an E8M0 code `c` (clamped to `0 … 254`),
scale `s = 2^(c − 127)`. Two rules, as a parameter:

* `ocpFloor` — OCP MX v1.0 §6.3: `s = 2^(⌊log₂ amax⌋ − emax)`, `emax` the element format's
  largest exponent (2 for E2M1). Then `amax / s ∈ [2^emax, 2^(emax+1))` (`ocpFloor_spec`), which
  for E2M1 is `[4, 8)`: elements in `(6 s, 8 s)` are **clipped** to `±6 s`.
* `ceil` — `s = 2^⌈log₂ (amax / maxValue)⌉`, the smallest power of two with
  `amax ≤ maxValue · s`: it **never clips** (`ceil_range`), and no smaller scale would do
  (`ceil_minimal`).

Which rule guarantees the range hypothesis `|x| ≤ 6 · s` of the MXFP4 error theorem: `ceil`
always (given `amax ≤ 6 · 2^127`); `ocpFloor` not: `ocpFloor_range_counterexample` (a block with
`amax = 7` gets `s = 1`, and `7 > 6 · 1`).
-/

@[expose] public section

namespace KimiK3.Microscaling

open KimiK3

namespace ScaleRule

variable {α : Type}

section Ordered

variable [OrderedScalarField α]

theorem ceil_antitone (f : FloatFormat) (amax : α) :
    ∀ i j, i ≤ j → j < 254 → decide (f.maxValue * E8M0.scaleValue (α := α) j < amax) = true →
      decide (f.maxValue * E8M0.scaleValue (α := α) i < amax) = true := by
  intro i j hij _ hj
  simp only [decide_eq_true_eq] at hj ⊢
  have := mul_le_mul_of_nonneg_left' (E8M0.scaleValue_le_scaleValue (α := α) hij) (f.maxValue_nonneg (α := α))
  exact Std.lt_of_le_of_lt this hj

theorem ocpFloor_antitone (f : FloatFormat) (amax : α) :
    ∀ i j, i ≤ j → j < 254 → decide (((2 ^ f.emax : Nat) : α) * E8M0.scaleValue (j + 1) ≤ amax) = true →
      decide (((2 ^ f.emax : Nat) : α) * E8M0.scaleValue (i + 1) ≤ amax) = true := by
  intro i j hij _ hj
  simp only [decide_eq_true_eq] at hj ⊢
  have hp : (0 : α) ≤ ((2 ^ f.emax : Nat) : α) := Std.le_of_lt (natCast_pos' (Nat.two_pow_pos _))
  have := mul_le_mul_of_nonneg_left' (E8M0.scaleValue_le_scaleValue (α := α) (show i + 1 ≤ j + 1 by omega)) hp
  exact Std.le_trans this hj

/-- **The ceil rule's code**: below 254 it fits `amax` (`amax ≤ maxValue · s`), and above 0 the
next smaller scale would not (`maxValue · s / 2 < amax`). -/
theorem ceil_spec (f : FloatFormat) (amax : α) :
    (ceil.code f amax < 254 → amax ≤ f.maxValue * E8M0.scaleValue (ceil.code f amax)) ∧
      (0 < ceil.code f amax → f.maxValue * E8M0.scaleValue (ceil.code f amax - 1) < amax) := by
  obtain ⟨h3, h4⟩ := firstFalse_spec _ 0 254
    (fun i j _ hij hj hp => ceil_antitone (α := α) f amax i j hij hj hp)
  refine ⟨fun hlt => ?_, fun hpos => ?_⟩
  · have := h4 hlt
    simp only [decide_eq_false_iff_not] at this
    rcases lt_or_le' (f.maxValue * E8M0.scaleValue (α := α) (ceil.code f amax)) amax with h | h
    · exact absurd h this
    · exact h
  · have := h3 (ceil.code f amax - 1) (Nat.zero_le _) (Nat.sub_lt hpos Nat.one_pos)
    simpa using this

/-- **The ceil rule never clips**: if `amax` fits the largest scale at all
(`amax ≤ maxValue · 2^127`), it fits the chosen one. -/
theorem ceil_range (f : FloatFormat) {amax : α} (hfit : amax ≤ f.maxValue * E8M0.scaleValue 254) :
    amax ≤ f.maxValue * E8M0.scaleValue (ceil.code f amax) := by
  rcases Nat.lt_or_ge (ceil.code f amax) 254 with h | h
  · exact (ceil_spec f amax).1 h
  · rw [show ceil.code f amax = 254 by have := code_le (α := α) ceil f amax; omega]; exact hfit

/-- **The ceil rule is minimal**: a nonzero code's next smaller scale would clip. -/
theorem ceil_minimal (f : FloatFormat) {amax : α} (hpos : 0 < ceil.code f amax) :
    f.maxValue * E8M0.scaleValue (ceil.code f amax - 1) < amax :=
  (ceil_spec f amax).2 hpos

/-- **The OCP rule's code**: `2^emax · s ≤ amax` (above code 0) and `amax < 2^emax · 2 s`
(below code 254), i.e. `amax / s ∈ [2^emax, 2^(emax+1))`. -/
theorem ocpFloor_spec (f : FloatFormat) (amax : α) :
    (0 < ocpFloor.code f amax → ((2 ^ f.emax : Nat) : α) * E8M0.scaleValue (ocpFloor.code f amax) ≤ amax) ∧
      (ocpFloor.code f amax < 254 →
        amax < ((2 ^ f.emax : Nat) : α) * E8M0.scaleValue (ocpFloor.code f amax + 1)) := by
  obtain ⟨h3, h4⟩ := firstFalse_spec _ 0 254
    (fun i j _ hij hj hp => ocpFloor_antitone (α := α) f amax i j hij hj hp)
  refine ⟨fun hpos => ?_, fun hlt => ?_⟩
  · have := h3 (ocpFloor.code f amax - 1) (Nat.zero_le _) (Nat.sub_lt hpos Nat.one_pos)
    simp only [decide_eq_true_eq] at this
    rw [show ocpFloor.code f amax - 1 + 1 = ocpFloor.code f amax by omega] at this
    exact this
  · have := h4 hlt
    simp only [decide_eq_false_iff_not] at this
    rcases lt_or_le' amax (((2 ^ f.emax : Nat) : α) * E8M0.scaleValue (α := α) (ocpFloor.code f amax + 1)) with h | h
    · exact h
    · exact absurd h this

/-- The OCP rule on E2M1 at `amax = 7` picks code 127 (`s = 1`). -/
theorem ocpFloor_code_seven : ocpFloor.code e2m1 (7 : α) = 127 := by
  have h4 : ((2 ^ e2m1.emax : Nat) : α) = 4 := by rw [show 2 ^ e2m1.emax = 4 by decide]; grind
  refine firstFalse_eq_of _ 254 127 (by decide)
    (fun i j hij hj hp => ocpFloor_antitone (α := α) e2m1 7 i j hij hj hp) (fun i hi => ?_) (fun _ => ?_)
  · simp only [decide_eq_true_eq]
    have := E8M0.scaleValue_le_scaleValue (α := α) (show i + 1 ≤ 127 by omega)
    rw [E8M0.scaleValue_127] at this
    have hs := E8M0.scaleValue_pos (α := α) (i + 1)
    rw [h4]; grind
  · simp only [decide_eq_false_iff_not]
    rw [h4, E8M0.scaleValue_128]; grind

/-- **The OCP rule can violate the range hypothesis** `|x| ≤ 6 · s`: for E2M1 and `amax = 7` it
picks `s = 1`, and `7 > 6 · 1`. -/
theorem ocpFloor_range_counterexample :
    6 * E8M0.scaleValue (ocpFloor.code e2m1 (7 : α)) < (7 : α) := by
  rw [ocpFloor_code_seven, E8M0.scaleValue_127]; grind

/-- The ceil rule on E2M1 at `amax = 7` picks code 128 (`s = 2`, and `7 ≤ 6 · 2`). -/
theorem ceil_code_seven : ceil.code e2m1 (7 : α) = 128 := by
  refine firstFalse_eq_of _ 254 128 (by decide)
    (fun i j hij hj hp => ceil_antitone (α := α) e2m1 7 i j hij hj hp) (fun i hi => ?_) (fun _ => ?_)
  · simp only [decide_eq_true_eq]
    have := E8M0.scaleValue_le_scaleValue (α := α) (show i ≤ 127 by omega)
    rw [E8M0.scaleValue_127] at this
    rw [e2m1_maxValue]; grind
  · simp only [decide_eq_false_iff_not]
    rw [e2m1_maxValue, E8M0.scaleValue_128]; grind

end Ordered

end ScaleRule

end KimiK3.Microscaling
