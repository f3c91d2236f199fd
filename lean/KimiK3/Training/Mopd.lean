module

public import KimiK3.Core.LogFacts

/-!
# MOPD: the clipped log-ratio reward and the post-training controls (report §4.1, Eq. 15; k3-spec §2.12)

* Eq. 15: `r_t = clip_{[−R, R]} (log (π_teacher(y_t) / π_student(y_t)))` (`reward`), with
  `clip R x = max (−R) (min R x)` (`clip`, reconstructed by the spec from `reward_mem_interval`);
  probabilities are taken in `(0, 1]` (`StrictProbability`) so `log 0` never occurs.
  **`reward_mem_interval`** (`0 ≤ R ⇒ −R ≤ r ≤ R`, for any arguments), `reward_swap` (swapping
  teacher and student flips the sign), `reward_self` (equal probabilities give 0),
  `reward_eq_log_of_mem`, `reward_nonneg_of_le`;
* the worked example teacher `0.70`, student `0.08`: `exampleRatio` (the ratio is exactly
  `35/4 = 8.75` in every ordered field), **`exampleReward`** (with `R = 5` the clip is inactive:
  the reward is exactly `log (35/4)`, given the tangent bound `1 + x ≤ exp x`, true over ℝ),
  `exampleReward_swap` (`−log (35/4)`); the value `ln 8.75 ≈ 2.169054` itself is checked at `Float`
  (`tests/lean/TrainingChecks.lean`), not proved: the scalar laws do not fix `exp` numerically;
* the 9 specialists as a typed 3 × 3 index, `teacherIndex d e = effort + 3 · domain`, a bijection
  onto `Fin 9` (`teacherOfIndex_teacherIndex`, `teacherIndex_teacherOfIndex`);
* the budget override (reward `−1` when the length exceeds `τ · b₀`), **`budgetOverride_idem`**;
* the verbosity rule of the GenRM tournaments (a response longer than `σ ×` the cold-start
  verbosity loses; the first candidate is checked first): `verbosityWinner_of_first_overlong`
  (**the first-candidate rule**), `verbosityWinner_of_second_overlong`, `verbosityWinner_of_within`.

The index order, the strict `>` at both limits and the first-candidate order are the
reconstruction `pybridge/mopd.py` also uses; R_max, τ, σ and b₀ are not disclosed (spec §6
item 15) and are arguments.
-/

@[expose] public section

namespace KimiK3.Training.Mopd

open KimiK3

variable {α : Type}

/-! ## Eq. 15 -/

section Defs

variable [Scalar α]

/-- **Clip to `[−R, R]`** (k3-spec §2.12, reconstructed): `max (−R) (min R x)`, `min R x`
written `if R ≤ x then R else x` (`Scalar` has no `min`). -/
@[macro_inline] def clip (R x : α) : α := max (-R) (if R ≤ x then R else x)

/-- **The MOPD reward** (report Eq. 15; k3-spec §2.12): `clip R (log (teacher / student))`. -/
@[macro_inline] def reward (R teacher student : α) : α := clip R (Scalar.log (teacher / student))

/-- A strict probability: a scalar in `(0, 1]` (k3-spec §2.12, `StrictProbability`). -/
def StrictProbability (α : Type) [Scalar α] := {p : α // 0 < p ∧ p ≤ 1}

/-- Eq. 15 on strict probabilities. -/
def StrictProbability.reward (R : α) (teacher student : StrictProbability α) : α :=
  Mopd.reward R teacher.val student.val

end Defs

section Ordered

variable [OrderedScalarField α]

/-- A clipped value lies in `[−R, R]` when `0 ≤ R`. -/
theorem clip_mem_interval {R : α} (hR : 0 ≤ R) (x : α) : -R ≤ clip R x ∧ clip R x ≤ R := by
  unfold clip; rw [OrderedScalarField.max_def]
  repeat' split
  all_goals constructor <;> grind

/-- Clipping leaves a value of `[−R, R]` unchanged. -/
theorem clip_of_mem {R x : α} (h1 : -R ≤ x) (h2 : x ≤ R) : clip R x = x := by
  unfold clip; rw [OrderedScalarField.max_def]
  repeat' split
  all_goals grind

/-- Clipping is odd: `clip R (−x) = −clip R x` when `0 ≤ R`. -/
theorem clip_neg {R : α} (hR : 0 ≤ R) (x : α) : clip R (-x) = -clip R x := by
  unfold clip; rw [OrderedScalarField.max_def, OrderedScalarField.max_def]
  repeat' split
  all_goals grind

/-- Clipping twice is clipping once. -/
theorem clip_idem {R : α} (hR : 0 ≤ R) (x : α) : clip R (clip R x) = clip R x :=
  clip_of_mem (clip_mem_interval hR x).1 (clip_mem_interval hR x).2

/-- **`reward_mem_interval`** (k3-spec §2.12): `−R ≤ reward ≤ R` when `0 ≤ R`, for any
arguments. -/
theorem reward_mem_interval {R : α} (hR : 0 ≤ R) (teacher student : α) :
    -R ≤ reward R teacher student ∧ reward R teacher student ≤ R :=
  clip_mem_interval hR _

/-- `reward_mem_interval` on strict probabilities. -/
theorem StrictProbability.reward_mem_interval {R : α} (hR : 0 ≤ R) (teacher student : StrictProbability α) :
    -R ≤ teacher.reward R student ∧ teacher.reward R student ≤ R :=
  clip_mem_interval hR _

/-- The reward is the log-ratio itself when that lies in `[−R, R]`. -/
theorem reward_eq_log_of_mem {R teacher student : α} (h1 : -R ≤ Scalar.log (teacher / student))
    (h2 : Scalar.log (teacher / student) ≤ R) :
    reward R teacher student = Scalar.log (teacher / student) :=
  clip_of_mem h1 h2

/-- The example's ratio `0.70 / 0.08 = 35/4` (`8.75`), exactly, in every ordered field. -/
theorem exampleRatio : (7 / 10 : α) / (8 / 100) = 35 / 4 := by grind

end Ordered

section Laws

variable [ScalarLaws α]

/-- **Swapping teacher and student flips the sign** (`0 ≤ R`, positive probabilities). -/
theorem reward_swap {R teacher student : α} (hR : 0 ≤ R) (ht : 0 < teacher) (hs : 0 < student) :
    reward R student teacher = -reward R teacher student := by
  unfold reward; rw [log_div_flip ht hs, clip_neg hR]

/-- **Equal probabilities give reward 0** (`0 ≤ R`, positive probability). -/
theorem reward_self {R p : α} (hR : 0 ≤ R) (hp : 0 < p) : reward R p p = 0 := by
  have e : p / p = 1 := by
    rw [Lean.Grind.Field.div_eq_mul_inv]; exact Lean.Grind.Field.mul_inv_cancel (by grind)
  unfold reward; rw [e, log_one_eq_zero]
  exact clip_of_mem (by grind) hR

/-- A teacher at least as confident as the student gives a nonnegative reward. -/
theorem reward_nonneg_of_le {R teacher student : α} (hR : 0 ≤ R) (hs : 0 < student)
    (h : student ≤ teacher) : 0 ≤ reward R teacher student := by
  have hne : student ≠ 0 := by grind
  have h1 : 1 ≤ teacher / student := by
    have e : student / student = 1 := by
      rw [Lean.Grind.Field.div_eq_mul_inv]; exact Lean.Grind.Field.mul_inv_cancel hne
    have := mul_le_mul_of_nonneg_right' h (inv_nonneg' (Std.le_of_lt hs))
    rw [Lean.Grind.Field.div_eq_mul_inv] at e ⊢; grind
  have hl := log_nonneg_of_one_le h1
  unfold reward clip; rw [OrderedScalarField.max_def]
  repeat' split
  all_goals grind

/-- **The worked example** (k3-spec §2.12): teacher `0.70`, student `0.08`, `R = 5`; the clip is
inactive and the reward is exactly `log (35/4)` (`ln 8.75 ≈ 2.169` over ℝ). The tangent bound
`1 + x ≤ exp x` (true over ℝ; the scalar laws alone allow any `exp (c x)`) gives
`exp 5 ≥ (7/2)² > 35/4`. -/
theorem exampleReward (hTangent : ∀ x : α, 1 + x ≤ Scalar.exp x) :
    reward 5 (7 / 10 : α) (8 / 100) = Scalar.log (35 / 4) := by
  rw [reward, exampleRatio]
  have hlo : 0 ≤ Scalar.log (35 / 4 : α) := log_nonneg_of_one_le (by grind)
  have hh := hTangent (5 / 2)
  have h7 : (0 : α) ≤ 7 / 2 := by grind
  have e5 : Scalar.exp (5 : α) = Scalar.exp (5 / 2) * Scalar.exp (5 / 2) := by
    rw [← ScalarLaws.exp_add]; congr 1; grind
  have m1 := mul_le_mul_of_nonneg_right' (show (7 / 2 : α) ≤ Scalar.exp (5 / 2) by grind) h7
  have m2 := mul_le_mul_of_nonneg_left' (show (7 / 2 : α) ≤ Scalar.exp (5 / 2) by grind)
    (show 0 ≤ Scalar.exp (5 / 2 : α) by have := ScalarLaws.exp_pos (5 / 2 : α); grind)
  have hup : Scalar.log (35 / 4 : α) ≤ 5 :=
    log_le_of_le_exp (by grind) (by rw [e5]; grind)
  exact clip_of_mem (by grind) hup

/-- The example swapped (teacher `0.08`, student `0.70`): `−log (35/4)`. -/
theorem exampleReward_swap (hTangent : ∀ x : α, 1 + x ≤ Scalar.exp x) :
    reward 5 (8 / 100 : α) (7 / 10) = -Scalar.log (35 / 4) := by
  rw [reward_swap (by grind) (by grind) (by grind), exampleReward hTangent]

end Laws

/-- The example's ratio at `Rat`, evaluated in the kernel: `0.70 / 0.08 = 8.75`. -/
theorem exampleRatio_rat : (7 / 10 : Rat) / (8 / 100) = 35 / 4 := by decide +kernel

/-! ## The 3 × 3 teacher index -/

/-- The three RL domains (report §4.1). -/
inductive Domain where
  | generalTasks | generalAgents | codingAgents
  deriving DecidableEq, Repr

/-- The three reasoning efforts (report §4.1). -/
inductive Effort where
  | low | high | max
  deriving DecidableEq, Repr

/-- A domain's number `0, 1, 2`. -/
def Domain.toFin : Domain → Fin 3
  | .generalTasks => 0 | .generalAgents => 1 | .codingAgents => 2

/-- The domain of a number. -/
def Domain.ofFin : Fin 3 → Domain
  | ⟨0, _⟩ => .generalTasks | ⟨1, _⟩ => .generalAgents | _ => .codingAgents

/-- An effort's number `0, 1, 2`. -/
def Effort.toFin : Effort → Fin 3
  | .low => 0 | .high => 1 | .max => 2

/-- The effort of a number. -/
def Effort.ofFin : Fin 3 → Effort
  | ⟨0, _⟩ => .low | ⟨1, _⟩ => .high | _ => .max

/-- **The specialist of (domain, effort)** among the 9 RL teachers (report §4.1; k3-spec §2.12):
`effort + 3 · domain` (head-major, as `pybridge.mopd.teacher_index`). -/
def teacherIndex (d : Domain) (e : Effort) : Fin 9 :=
  ⟨e.toFin.val + 3 * d.toFin.val, by have := e.toFin.isLt; have := d.toFin.isLt; omega⟩

/-- The (domain, effort) of a teacher number: `(i / 3, i % 3)`. -/
def teacherOfIndex (i : Fin 9) : Domain × Effort :=
  (Domain.ofFin ⟨i.val / 3, by omega⟩, Effort.ofFin ⟨i.val % 3, by omega⟩)

/-- `teacherOfIndex` inverts `teacherIndex`. -/
theorem teacherOfIndex_teacherIndex (d : Domain) (e : Effort) :
    teacherOfIndex (teacherIndex d e) = (d, e) := by
  cases d <;> cases e <;> rfl

/-- `teacherIndex` inverts `teacherOfIndex`: with the above, a bijection onto `Fin 9`. -/
theorem teacherIndex_teacherOfIndex (i : Fin 9) :
    teacherIndex (teacherOfIndex i).1 (teacherOfIndex i).2 = i := by
  revert i; decide

/-- Distinct specialists have distinct numbers. -/
theorem teacherIndex_injective {d d' : Domain} {e e' : Effort}
    (h : teacherIndex d e = teacherIndex d' e') : d = d' ∧ e = e' := by
  have := congrArg teacherOfIndex h
  rw [teacherOfIndex_teacherIndex, teacherOfIndex_teacherIndex] at this
  cases this; exact ⟨rfl, rfl⟩

/-! ## Budget override and verbosity rule -/

section Controls

variable [Scalar α]

/-- **The budget override** (report §4.1; k3-spec §2.12): reward `−1` when the trajectory's
`length` exceeds `τ · b₀` (strictly), else the task reward. -/
@[macro_inline] def budgetOverride (taskReward : α) (length : Nat) (τ b₀ : α) : α :=
  if τ * b₀ < (length : α) then -1 else taskReward

/-- An over-budget trajectory gets `−1`. -/
theorem budgetOverride_of_lt {r τ b₀ : α} {length : Nat} (h : τ * b₀ < (length : α)) :
    budgetOverride r length τ b₀ = -1 := by
  unfold budgetOverride; rw [if_pos h]

/-- A trajectory within budget keeps its task reward. -/
theorem budgetOverride_of_not_lt {r τ b₀ : α} {length : Nat} (h : ¬ τ * b₀ < (length : α)) :
    budgetOverride r length τ b₀ = r := by
  unfold budgetOverride; rw [if_neg h]

/-- **`budgetOverride_idem`**: overriding an overridden reward changes nothing. -/
theorem budgetOverride_idem (r : α) (length : Nat) (τ b₀ : α) :
    budgetOverride (budgetOverride r length τ b₀) length τ b₀ = budgetOverride r length τ b₀ := by
  unfold budgetOverride; split <;> simp [*]

/-- **The verbosity rule** (report §4.1; k3-spec §2.12): the winner (`0` first, `1` second) of a
GenRM match; a response longer than `σ · v` (`v` the cold-start verbosity) loses, the first
candidate checked first; the judge decides only when neither is overlong. -/
@[macro_inline] def verbosityWinner (first second : Nat) (σ v : α) (judgePrefersFirst : Bool) : Fin 2 :=
  if σ * v < (first : α) then 1 else if σ * v < (second : α) then 0 else if judgePrefersFirst then 0 else 1

/-- **The first-candidate rule**: an overlong first response loses, whatever the second. -/
theorem verbosityWinner_of_first_overlong {first second : Nat} {σ v : α} (b : Bool)
    (h : σ * v < (first : α)) : verbosityWinner first second σ v b = 1 := by
  unfold verbosityWinner; rw [if_pos h]

/-- An overlong second response loses to a first one within the limit. -/
theorem verbosityWinner_of_second_overlong {first second : Nat} {σ v : α} (b : Bool)
    (h1 : ¬ σ * v < (first : α)) (h2 : σ * v < (second : α)) : verbosityWinner first second σ v b = 0 := by
  unfold verbosityWinner; rw [if_neg h1, if_pos h2]

/-- Within the limit, the judge decides. -/
theorem verbosityWinner_of_within {first second : Nat} {σ v : α} (b : Bool)
    (h1 : ¬ σ * v < (first : α)) (h2 : ¬ σ * v < (second : α)) :
    verbosityWinner first second σ v b = if b then 0 else 1 := by
  unfold verbosityWinner; rw [if_neg h1, if_neg h2]

end Controls

end KimiK3.Training.Mopd
