module

public import KimiK3.Core.Sum

/-!
# Speculative sampling over a finite vocabulary: lossless (report §4.1.4, Eq. 16; k3-spec §2.14)

A target distribution `p` and a draft distribution `q` over `Fin n` (nonnegative, summing to
one: `IsDistribution`). One step of speculative sampling draws `y ∼ q`, accepts it with
probability `min(1, p_y / q_y)` (`acceptProbability`), and otherwise emits a token drawn from the
residual correction `(p − q)⁺ / (1 − Σ min(p, q))` (`correctionDistribution`).

* `overlap p q y = min(p_y, q_y)`, `acceptanceRate p q = Σ_y min(p_y, q_y)`,
  `totalVariation p q = ½ Σ_y |p_y − q_y|`;
  **`acceptanceRate_eq_one_sub_totalVariation`**: acceptance = 1 − TV;
* `mul_acceptProbability`: a proposed `y` contributes `q_y · min(1, p_y/q_y) = min(p_y, q_y)`
  (also when `q_y = 0`, where the token is never proposed);
* `residualNumerator p q y = p_y − min(p_y, q_y)` (`= max(p_y − q_y, 0)`,
  `residualNumerator_eq_max`), `residualMass p q = 1 − acceptanceRate p q` (`= TV`,
  `residualMass_eq_totalVariation`), `correctionDistribution = residualNumerator / residualMass`;
  a distribution when `acceptanceRate < 1` (`correctionDistribution_isDistribution`);
* **`accepted_add_corrected_eq_target`**: `q_y min(1, p_y/q_y) + (1 − Σ min) · correction_y = p_y`;
* `rejectionProbability p q = Σ_y q_y (1 − min(1, p_y/q_y))` equals `residualMass`
  (`rejectionProbability_eq_residualMass`);
* `emitProbability p q i`: the probability that one step emits `i`, by the law of total
  probability over the draft's draw; **`emitProbability_eq_target`**: it is `p_i`, for every
  pair of distributions; no case is excluded: when `q_i = 0` the token is only ever emitted by
  the correction, and when `TV = 0` (`p = q`) every draft is accepted and the correction, which
  is then `0 / 0 = 0` (the field's total inverse), has weight `0`.

Generic executable definitions are `@[macro_inline]` (`Core/README.md`, "Toolchain constraints").
-/

@[expose] public section

namespace KimiK3.Training

open KimiK3

variable {α : Type}

/-- **A probability distribution over `Fin n`** (k3-spec §2.14): nonnegative weights summing to
one. -/
structure IsDistribution [Scalar α] {n : Nat} (p : Fin n → α) : Prop where
  /-- Every weight is nonnegative. -/
  nonneg : ∀ i, 0 ≤ p i
  /-- The weights sum to one. -/
  sum_eq_one : finSum n p = 1

section Defs

variable [Scalar α] {n : Nat}

/-- The overlap `min(p_y, q_y)` of two distributions at `y` (report Eq. 16; k3-spec §2.14). -/
@[macro_inline] def overlap (p q : Fin n → α) (y : Fin n) : α := if p y ≤ q y then p y else q y

/-- **Acceptance rate** `Σ_y min(p_y, q_y)` (report Eq. 16; k3-spec §2.14): the probability that
a draft token drawn from `q` is accepted against the target `p`. -/
@[macro_inline] def acceptanceRate (p q : Fin n → α) : α := finSum n (fun y => overlap p q y)

/-- **Total variation distance** `½ Σ_y |p_y − q_y|` (k3-spec §2.14). -/
@[macro_inline] def totalVariation (p q : Fin n → α) : α :=
  finSum n (fun y => Scalar.abs (p y - q y)) / 2

/-- **Acceptance probability** of a proposed token `y`: `min(1, p_y / q_y)` (k3-spec §2.14;
`pybridge.speculative.acceptance_probability`), written `1` when `q_y ≤ p_y` (this covers
`q_y = 0`, a token the draft never proposes). -/
@[macro_inline] def acceptProbability (p q : Fin n → α) (y : Fin n) : α :=
  if q y ≤ p y then 1 else p y / q y

/-- The residual numerator `p_y − min(p_y, q_y)`, that is `max(p_y − q_y, 0)` (k3-spec §2.14). -/
@[macro_inline] def residualNumerator (p q : Fin n → α) (y : Fin n) : α := p y - overlap p q y

/-- The residual mass `1 − Σ_y min(p_y, q_y)`: the probability of a rejection (k3-spec §2.14). -/
@[macro_inline] def residualMass (p q : Fin n → α) : α := 1 - acceptanceRate p q

/-- **The correction distribution** `(p − q)⁺ / (1 − Σ min(p, q))` (k3-spec §2.14;
`pybridge.speculative.residual_distribution`): what a rejected step emits. A distribution when
`acceptanceRate p q < 1` (`correctionDistribution_isDistribution`); otherwise it is `0` (the
field's `x / 0 = 0`) and has weight `0` in the step. -/
@[macro_inline] def correctionDistribution (p q : Fin n → α) (y : Fin n) : α :=
  residualNumerator p q y / residualMass p q

/-- The probability that the draft's proposal is rejected: `Σ_y q_y (1 − min(1, p_y/q_y))`. -/
@[macro_inline] def rejectionProbability (p q : Fin n → α) : α :=
  finSum n (fun y => q y * (1 - acceptProbability p q y))

/-- **The output distribution of one speculative-sampling step** (report §4.1.4; k3-spec §2.14):
the probability that the step emits `i`, summed over the draft's draw `y ∼ q`: accepted (with
probability `min(1, p_y/q_y)`) it emits `y`, rejected it emits a draw from the correction. -/
@[macro_inline] def emitProbability (p q : Fin n → α) (i : Fin n) : α :=
  finSum n (fun y => q y * (acceptProbability p q y * (if y = i then 1 else 0) +
    (1 - acceptProbability p q y) * correctionDistribution p q i))

end Defs

section Ordered

variable [OrderedScalarField α] {n : Nat}

/-- `min(a, b) = (a + b − |a − b|) / 2`, pointwise. -/
theorem overlap_eq_half (p q : Fin n → α) (y : Fin n) :
    overlap p q y = (p y + q y - Scalar.abs (p y - q y)) / 2 := by
  unfold overlap Scalar.abs
  rw [OrderedScalarField.max_def]
  split <;> split <;> grind

/-- The overlap is at most the target weight. -/
theorem overlap_le_left (p q : Fin n → α) (y : Fin n) : overlap p q y ≤ p y := by
  unfold overlap; split <;> grind

/-- The overlap is at most the draft weight. -/
theorem overlap_le_right (p q : Fin n → α) (y : Fin n) : overlap p q y ≤ q y := by
  unfold overlap; split <;> grind

/-- The overlap of nonnegative weights is nonnegative. -/
theorem overlap_nonneg {p q : Fin n → α} (hp : ∀ y, 0 ≤ p y) (hq : ∀ y, 0 ≤ q y) (y : Fin n) :
    0 ≤ overlap p q y := by
  unfold overlap; have := hp y; have := hq y; split <;> grind

/-- The acceptance rate of nonnegative weights is nonnegative. -/
theorem acceptanceRate_nonneg {p q : Fin n → α} (hp : ∀ y, 0 ≤ p y) (hq : ∀ y, 0 ≤ q y) :
    0 ≤ acceptanceRate p q :=
  finSum_nonneg (overlap_nonneg hp hq)

/-- **Acceptance = 1 − total variation** (`acceptanceRate_eq_one_sub_totalVariation`, k3-spec
§2.14): for weights summing to one, `Σ min(p, q) = 1 − ½ Σ |p − q|`. -/
theorem acceptanceRate_eq_one_sub_totalVariation {p q : Fin n → α} (hp : finSum n p = 1)
    (hq : finSum n q = 1) : acceptanceRate p q = 1 - totalVariation p q := by
  unfold acceptanceRate totalVariation
  rw [finSum_congr (overlap_eq_half p q), finSum_div, finSum_sub, finSum_add, hp, hq]
  grind

/-- A proposed token contributes its overlap: `q_y · min(1, p_y/q_y) = min(p_y, q_y)`; when
`q_y = 0` both sides are `0`. -/
theorem mul_acceptProbability {p q : Fin n → α} (hp : ∀ y, 0 ≤ p y) (hq : ∀ y, 0 ≤ q y)
    (y : Fin n) : q y * acceptProbability p q y = overlap p q y := by
  unfold acceptProbability overlap
  have h0 := hp y; have h1 := hq y
  by_cases h : q y ≤ p y
  · rw [if_pos h]; split <;> grind
  · rw [if_neg h]
    have hne : q y ≠ 0 := by grind
    have hpq : p y ≤ q y := by grind
    rw [if_pos hpq, Lean.Grind.Field.div_eq_mul_inv]
    have := Lean.Grind.Field.mul_inv_cancel hne
    grind

/-- The acceptance probability lies in `[0, 1]`. -/
theorem acceptProbability_mem {p q : Fin n → α} (hp : ∀ y, 0 ≤ p y) (hq : ∀ y, 0 ≤ q y)
    (y : Fin n) : 0 ≤ acceptProbability p q y ∧ acceptProbability p q y ≤ 1 := by
  unfold acceptProbability
  have h0 := hp y; have h1 := hq y
  by_cases h : q y ≤ p y
  · rw [if_pos h]; have := zero_lt_one' (α := α); constructor <;> grind
  · rw [if_neg h, Lean.Grind.Field.div_eq_mul_inv]
    have hpos : 0 < q y := by grind
    have hi := inv_pos' hpos
    have hc := Lean.Grind.Field.mul_inv_cancel (show q y ≠ 0 by grind)
    have h2 := mul_nonneg' h0 (Std.le_of_lt hi)
    have h3 := mul_le_mul_of_nonneg_right' (show p y ≤ q y by grind) (Std.le_of_lt hi)
    constructor <;> grind

/-- The residual numerator is `p_y − min(p_y, q_y)` (`residualNumerator_eq_sub_min`). -/
theorem residualNumerator_eq_sub_min (p q : Fin n → α) (y : Fin n) :
    residualNumerator p q y = p y - overlap p q y := rfl

/-- The residual numerator is `max(p_y − q_y, 0)`. -/
theorem residualNumerator_eq_max (p q : Fin n → α) (y : Fin n) :
    residualNumerator p q y = max (p y - q y) 0 := by
  unfold residualNumerator overlap
  rw [OrderedScalarField.max_def]
  split <;> split <;> grind

/-- The residual numerator is nonnegative. -/
theorem residualNumerator_nonneg (p q : Fin n → α) (y : Fin n) : 0 ≤ residualNumerator p q y := by
  have := overlap_le_left p q y; unfold residualNumerator; grind

/-- The residual numerators of a target summing to one sum to the residual mass. -/
theorem finSum_residualNumerator {p : Fin n → α} (q : Fin n → α) (hp : finSum n p = 1) :
    finSum n (residualNumerator p q) = residualMass p q := by
  unfold residualMass acceptanceRate
  show finSum n (fun y => p y - overlap p q y) = _
  rw [finSum_sub, hp]

/-- The residual mass is the total variation (weights summing to one). -/
theorem residualMass_eq_totalVariation {p q : Fin n → α} (hp : finSum n p = 1)
    (hq : finSum n q = 1) : residualMass p q = totalVariation p q := by
  unfold residualMass; rw [acceptanceRate_eq_one_sub_totalVariation hp hq]; grind

/-- The residual mass is nonnegative: the acceptance rate is at most one. -/
theorem residualMass_nonneg {p : Fin n → α} (q : Fin n → α) (hp : finSum n p = 1) :
    0 ≤ residualMass p q := by
  rw [← finSum_residualNumerator q hp]; exact finSum_nonneg (residualNumerator_nonneg p q)

/-- With no residual mass (`acceptanceRate = 1`) every residual numerator is zero. -/
theorem residualNumerator_eq_zero {p : Fin n → α} (q : Fin n → α) (hp : finSum n p = 1)
    (h0 : residualMass p q = 0) (y : Fin n) : residualNumerator p q y = 0 := by
  have h1 := le_finSum (residualNumerator_nonneg p q) y
  rw [finSum_residualNumerator q hp, h0] at h1
  have h2 := residualNumerator_nonneg p q y
  grind

/-- **Residual mass times correction is the residual numerator**, whether or not the residual
mass vanishes. -/
theorem residualMass_mul_correctionDistribution {p : Fin n → α} (q : Fin n → α)
    (hp : finSum n p = 1) (y : Fin n) :
    residualMass p q * correctionDistribution p q y = residualNumerator p q y := by
  unfold correctionDistribution
  rw [Lean.Grind.Field.div_eq_mul_inv]
  rcases lt_or_eq_of_le' (residualMass_nonneg q hp) with h | h
  · have := Lean.Grind.Field.mul_inv_cancel (show residualMass p q ≠ 0 by grind)
    grind
  · rw [residualNumerator_eq_zero q hp h.symm y, ← h]; grind

/-- **Accepted plus corrected is the target** (`accepted_add_corrected_eq_target`, k3-spec
§2.14): `q_y · min(1, p_y/q_y) + (1 − Σ min(p, q)) · correction_y = p_y`. -/
theorem accepted_add_corrected_eq_target {p q : Fin n → α} (hp : IsDistribution p)
    (hq : ∀ y, 0 ≤ q y) (y : Fin n) :
    q y * acceptProbability p q y + residualMass p q * correctionDistribution p q y = p y := by
  rw [mul_acceptProbability hp.nonneg hq, residualMass_mul_correctionDistribution q hp.sum_eq_one]
  unfold residualNumerator; grind

/-- **The correction is a distribution** when a rejection is possible (`acceptanceRate < 1`). -/
theorem correctionDistribution_isDistribution {p q : Fin n → α} (hp : finSum n p = 1)
    (hReject : acceptanceRate p q < 1) : IsDistribution (correctionDistribution p q) where
  nonneg y := by
    unfold correctionDistribution
    rw [Lean.Grind.Field.div_eq_mul_inv]
    have hm : 0 < residualMass p q := by unfold residualMass; grind
    exact mul_nonneg' (residualNumerator_nonneg p q y) (Std.le_of_lt (inv_pos' hm))
  sum_eq_one := by
    have hm : 0 < residualMass p q := by unfold residualMass; grind
    unfold correctionDistribution
    rw [finSum_div, finSum_residualNumerator q hp, Lean.Grind.Field.div_eq_mul_inv,
      Lean.Grind.Field.mul_inv_cancel (show residualMass p q ≠ 0 by grind)]

/-- **A rejection has probability `1 − Σ min(p, q)`**: `Σ_y q_y (1 − min(1, p_y/q_y))` is the
residual mass. -/
theorem rejectionProbability_eq_residualMass {p q : Fin n → α} (hp : ∀ y, 0 ≤ p y)
    (hq : IsDistribution q) : rejectionProbability p q = residualMass p q := by
  unfold rejectionProbability residualMass acceptanceRate
  have h : ∀ y, q y * (1 - acceptProbability p q y) = q y - overlap p q y := fun y => by
    have := mul_acceptProbability hp hq.nonneg y; grind
  rw [finSum_congr h, finSum_sub, hq.sum_eq_one]

/-- **Speculative sampling is lossless** (report §4.1.4; k3-spec §2.14): for any target `p` and
draft `q` distributions over `Fin n`, one step of speculative sampling (draw `y ∼ q`, accept with
probability `min(1, p_y/q_y)`, otherwise emit a draw from the correction) emits each token `i`
with exactly the target's probability `p_i`. No case is excluded (`q_i = 0`, `TV = 0`). -/
theorem emitProbability_eq_target {p q : Fin n → α} (hp : IsDistribution p)
    (hq : IsDistribution q) (i : Fin n) : emitProbability p q i = p i := by
  unfold emitProbability
  have h : ∀ y, q y * (acceptProbability p q y * (if y = i then 1 else 0) +
      (1 - acceptProbability p q y) * correctionDistribution p q i) =
      (q y * acceptProbability p q y) * (if y = i then 1 else 0) +
      (q y * (1 - acceptProbability p q y)) * correctionDistribution p q i := fun _ => by grind
  rw [finSum_congr h, finSum_add, finSum_mul_delta,
    finSum_mul_right n (correctionDistribution p q i) (fun y => q y * (1 - acceptProbability p q y))]
  show q i * acceptProbability p q i + rejectionProbability p q * correctionDistribution p q i = p i
  rw [rejectionProbability_eq_residualMass hp.nonneg hq]
  exact accepted_add_corrected_eq_target hp hq.nonneg i

/-- The emitted tokens' probabilities form the target distribution. -/
theorem emitProbability_isDistribution {p q : Fin n → α} (hp : IsDistribution p)
    (hq : IsDistribution q) : IsDistribution (emitProbability p q) := by
  have e : emitProbability p q = p := funext (emitProbability_eq_target hp hq)
  rw [e]; exact hp

end Ordered

end KimiK3.Training
