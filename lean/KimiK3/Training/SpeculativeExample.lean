module

public import KimiK3.Training.DraftLoss
public import KimiK3.Exec.RatScalar

/-!
# The report's speculative-sampling example, proved exactly (k3-spec §2.14)

Target `p = (0.55, 0.30, 0.15)`, draft `q = (0.25, 0.45, 0.30)`, over every ordered scalar field
(so over ℝ and ℚ alike):

* `exampleOverlap`: the overlap is `(0.25, 0.30, 0.15)`; `exampleAcceptanceRate`: it sums to
  `0.70`; `exampleTotalVariation`: TV `= 0.30`;
* `exampleAcceptProbability`: the drafted tokens are accepted with probabilities `1, 2/3, 1/2`;
* `exampleResidual`: the residual numerator is `(0.30, 0, 0)` with mass `0.30`;
  **`exampleCorrection`**: the correction is `(1, 0, 0)`, so it always picks token 0;
* `exampleLikelihoodLoss`: the loss is the finite `−log 0.70` (≈ 0.3567 over ℝ);
* **`exampleEmit`**: one speculative step emits `p` exactly (from `emitProbability_eq_target`);
* `…_rat`: the same at `Rat` (`Exec/RatScalar.lean`, a model of `OrderedScalarField`), so the
  hypotheses are satisfiable; `exampleCorrection_rat_eval` evaluates the correction at `Rat` in
  the kernel (`decide +kernel`), independently of the field proof.
-/

@[expose] public section

namespace KimiK3.Training

open KimiK3

variable {α : Type}

/-- The vector `(a, b, c)` over `Fin 3`. -/
def vec3 (a b c : α) : Fin 3 → α
  | ⟨0, _⟩ => a
  | ⟨1, _⟩ => b
  | _ => c

/-- The example's target distribution `p = (0.55, 0.30, 0.15)` (k3-spec §2.14). -/
def exampleTarget [Scalar α] : Fin 3 → α := vec3 (11 / 20) (3 / 10) (3 / 20)

/-- The example's draft distribution `q = (0.25, 0.45, 0.30)` (k3-spec §2.14). -/
def exampleDraft [Scalar α] : Fin 3 → α := vec3 (1 / 4) (9 / 20) (3 / 10)

section Ordered

variable [OrderedScalarField α]

/-- The example's target is a distribution. -/
theorem exampleTarget_isDistribution : IsDistribution (exampleTarget (α := α)) where
  nonneg i := by
    match i with
    | ⟨0, _⟩ => show (0 : α) ≤ 11 / 20; grind
    | ⟨1, _⟩ => show (0 : α) ≤ 3 / 10; grind
    | ⟨2, _⟩ => show (0 : α) ≤ 3 / 20; grind
  sum_eq_one := by
    rw [finSum_three]; show (11 / 20 + 3 / 10 : α) + 3 / 20 = 1; grind

/-- The example's draft is a distribution. -/
theorem exampleDraft_isDistribution : IsDistribution (exampleDraft (α := α)) where
  nonneg i := by
    match i with
    | ⟨0, _⟩ => show (0 : α) ≤ 1 / 4; grind
    | ⟨1, _⟩ => show (0 : α) ≤ 9 / 20; grind
    | ⟨2, _⟩ => show (0 : α) ≤ 3 / 10; grind
  sum_eq_one := by
    rw [finSum_three]; show (1 / 4 + 9 / 20 : α) + 3 / 10 = 1; grind

/-- **The overlap** `min(p, q) = (0.25, 0.30, 0.15)`. -/
theorem exampleOverlap :
    overlap (exampleTarget (α := α)) exampleDraft 0 = 1 / 4 ∧
      overlap (exampleTarget (α := α)) exampleDraft 1 = 3 / 10 ∧
      overlap (exampleTarget (α := α)) exampleDraft 2 = 3 / 20 := by
  refine ⟨?_, ?_, ?_⟩
  · show (if (11 / 20 : α) ≤ 1 / 4 then 11 / 20 else 1 / 4) = 1 / 4
    rw [if_neg (by grind)]
  · show (if (3 / 10 : α) ≤ 9 / 20 then 3 / 10 else 9 / 20) = 3 / 10
    rw [if_pos (by grind)]
  · show (if (3 / 20 : α) ≤ 3 / 10 then 3 / 20 else 3 / 10) = 3 / 20
    rw [if_pos (by grind)]

/-- **Overlap 0.70**: the acceptance rate of the example. -/
theorem exampleAcceptanceRate : acceptanceRate (exampleTarget (α := α)) exampleDraft = 7 / 10 := by
  obtain ⟨h0, h1, h2⟩ := exampleOverlap (α := α)
  show finSum 3 (fun y => overlap exampleTarget exampleDraft y) = 7 / 10
  rw [finSum_three, h0, h1, h2]; grind

/-- **TV 0.30**: the total variation of the example, computed from its definition. -/
theorem exampleTotalVariation : totalVariation (exampleTarget (α := α)) exampleDraft = 3 / 10 := by
  show finSum 3 (fun y => Scalar.abs (exampleTarget y - exampleDraft y)) / 2 = 3 / 10
  rw [finSum_three]
  show ((Scalar.abs ((11 / 20 : α) - 1 / 4) + Scalar.abs ((3 / 10 : α) - 9 / 20)) +
      Scalar.abs ((3 / 20 : α) - 3 / 10)) / 2 = 3 / 10
  have e1 : (11 / 20 : α) - 1 / 4 = 3 / 10 := by grind
  have e2 : (3 / 10 : α) - 9 / 20 = -(3 / 20) := by grind
  have e3 : (3 / 20 : α) - 3 / 10 = -(3 / 20) := by grind
  rw [e1, e2, e3, abs_neg', abs_of_nonneg (show (0 : α) ≤ 3 / 10 by grind),
    abs_of_nonneg (show (0 : α) ≤ 3 / 20 by grind)]
  grind

/-- **The acceptance probabilities** `min(1, p/q)` of the three drafted tokens: `1, 2/3, 1/2`. -/
theorem exampleAcceptProbability :
    acceptProbability (exampleTarget (α := α)) exampleDraft 0 = 1 ∧
      acceptProbability (exampleTarget (α := α)) exampleDraft 1 = 2 / 3 ∧
      acceptProbability (exampleTarget (α := α)) exampleDraft 2 = 1 / 2 := by
  refine ⟨?_, ?_, ?_⟩
  · show (if (1 / 4 : α) ≤ 11 / 20 then 1 else 11 / 20 / (1 / 4)) = 1
    rw [if_pos (by grind)]
  · show (if (9 / 20 : α) ≤ 3 / 10 then 1 else 3 / 10 / (9 / 20)) = 2 / 3
    rw [if_neg (by grind)]; grind
  · show (if (3 / 10 : α) ≤ 3 / 20 then 1 else 3 / 20 / (3 / 10)) = 1 / 2
    rw [if_neg (by grind)]; grind

/-- **The residual** `(p − q)⁺ = (0.30, 0, 0)`, with mass `0.30`. -/
theorem exampleResidual :
    residualNumerator (exampleTarget (α := α)) exampleDraft 0 = 3 / 10 ∧
      residualNumerator (exampleTarget (α := α)) exampleDraft 1 = 0 ∧
      residualNumerator (exampleTarget (α := α)) exampleDraft 2 = 0 ∧
      residualMass (exampleTarget (α := α)) exampleDraft = 3 / 10 := by
  obtain ⟨h0, h1, h2⟩ := exampleOverlap (α := α)
  refine ⟨?_, ?_, ?_, ?_⟩
  · show (11 / 20 : α) - overlap exampleTarget exampleDraft 0 = 3 / 10
    rw [h0]; grind
  · show (3 / 10 : α) - overlap exampleTarget exampleDraft 1 = 0
    rw [h1]; grind
  · show (3 / 20 : α) - overlap exampleTarget exampleDraft 2 = 0
    rw [h2]; grind
  · show 1 - acceptanceRate (exampleTarget (α := α)) exampleDraft = 3 / 10
    rw [exampleAcceptanceRate]; grind

/-- **The correction picks token 0**: the correction distribution is `(1, 0, 0)`. -/
theorem exampleCorrection :
    correctionDistribution (exampleTarget (α := α)) exampleDraft 0 = 1 ∧
      correctionDistribution (exampleTarget (α := α)) exampleDraft 1 = 0 ∧
      correctionDistribution (exampleTarget (α := α)) exampleDraft 2 = 0 := by
  obtain ⟨r0, r1, r2, m⟩ := exampleResidual (α := α)
  refine ⟨?_, ?_, ?_⟩
  · show residualNumerator exampleTarget exampleDraft 0 / residualMass exampleTarget exampleDraft = 1
    rw [r0, m, Lean.Grind.Field.div_eq_mul_inv,
      Lean.Grind.Field.mul_inv_cancel (show (3 / 10 : α) ≠ 0 by grind)]
  · show residualNumerator exampleTarget exampleDraft 1 / residualMass exampleTarget exampleDraft = 0
    rw [r1, m]; grind
  · show residualNumerator exampleTarget exampleDraft 2 / residualMass exampleTarget exampleDraft = 0
    rw [r2, m]; grind

/-- **The loss** is the finite `−log 0.70` (≈ 0.3567 over ℝ). -/
theorem exampleLikelihoodLoss :
    likelihoodLoss (exampleTarget (α := α)) exampleDraft = .finite (-Scalar.log (7 / 10)) := by
  rw [likelihoodLoss_of_pos (by rw [exampleAcceptanceRate]; grind), exampleAcceptanceRate]

/-- **One speculative step emits exactly `p`** on the example. -/
theorem exampleEmit (i : Fin 3) :
    emitProbability (exampleTarget (α := α)) exampleDraft i = exampleTarget i :=
  emitProbability_eq_target exampleTarget_isDistribution exampleDraft_isDistribution i

end Ordered

/-! ## At `Rat` -/

/-- **Overlap 0.70 at `Rat`.** -/
theorem exampleAcceptanceRate_rat :
    acceptanceRate (exampleTarget (α := Rat)) exampleDraft = 7 / 10 := exampleAcceptanceRate

/-- **TV 0.30 at `Rat`.** -/
theorem exampleTotalVariation_rat :
    totalVariation (exampleTarget (α := Rat)) exampleDraft = 3 / 10 := exampleTotalVariation

/-- **The correction picks token 0, at `Rat`.** -/
theorem exampleCorrection_rat :
    correctionDistribution (exampleTarget (α := Rat)) exampleDraft 0 = 1 ∧
      correctionDistribution (exampleTarget (α := Rat)) exampleDraft 1 = 0 ∧
      correctionDistribution (exampleTarget (α := Rat)) exampleDraft 2 = 0 := exampleCorrection

/-- **The correction at `Rat`, by evaluation in the kernel** (`decide +kernel`), independent of
the field proof above. -/
theorem exampleCorrection_rat_eval :
    correctionDistribution (exampleTarget (α := Rat)) exampleDraft 0 = 1 ∧
      correctionDistribution (exampleTarget (α := Rat)) exampleDraft 1 = 0 ∧
      correctionDistribution (exampleTarget (α := Rat)) exampleDraft 2 = 0 := by
  decide +kernel

/-- **One step emits `p` at `Rat`.** -/
theorem exampleEmit_rat (i : Fin 3) :
    emitProbability (exampleTarget (α := Rat)) exampleDraft i = exampleTarget i := exampleEmit i

end KimiK3.Training
