module

public import KimiK3.Core.LogFacts
public import KimiK3.Training.Draft
public import KimiK3.Training.Speculative

/-!
# The EAGLE-3 likelihood loss, with `+∞` for zero overlap (report §4.1.4, Eq. 16; k3-spec §2.14)

Eq. 16 (reconstructed): `L = Σ_{step=0..6} −log Σ_y min(p_step(y), q_step(y))`, `p` the frozen
target's distribution and `q` the draft's at each of the seven steps; no ground-truth
cross-entropy term. Zero overlap makes a term `+∞`, never `log 0`: losses live in `ELoss α`,
the scalars with a top element `⊤` that absorbs addition.

* `likelihoodLoss p q`: `⊤` when `acceptanceRate p q ≤ 0`, else `−log (acceptanceRate p q)`;
  **`likelihoodLoss_eq_top_iff`** (distributions: `= ⊤ ↔ acceptanceRate p q = 0`),
  `likelihoodLoss_of_pos`, `likelihoodLoss_nonneg` (over `ScalarLaws`: the overlap is at most
  one, so the loss is `≥ 0`);
* `sevenStepLikelihoodLoss p q` over the steps `Fin 7`; **`sevenStepLikelihoodLoss_eq_top_iff`**
  (`⊤` exactly when some step has zero overlap), `sevenStepLikelihoodLoss_of_pos` (otherwise
  the finite sum `Σ −log acceptance`);
* `trainingTimeTestLoss`: the seven draft distributions produced by the self-feeding
  training-time test (`Draft.lean`) against the target's, with
  `trainingTimeTestLoss_eq_top_iff`.
-/

@[expose] public section

namespace KimiK3.Training

open KimiK3

variable {α : Type}

/-- **A loss value** (k3-spec §2.14): a finite scalar or `⊤` (`+∞`), so that zero overlap gives
`+∞` instead of `log 0`. -/
inductive ELoss (α : Type) where
  /-- A finite loss. -/
  | finite (x : α)
  /-- `+∞`. -/
  | top

namespace ELoss

/-- Addition of losses: `⊤` absorbs, finite values add. -/
@[macro_inline] def add [Scalar α] : ELoss α → ELoss α → ELoss α
  | finite x, finite y => finite (x + y)
  | _, _ => top

/-- The sum `f 0 + … + f (k − 1)` of `k` losses (`finite 0` for `k = 0`). -/
def sum [Scalar α] : (k : Nat) → (Fin k → ELoss α) → ELoss α
  | 0, _ => finite 0
  | k + 1, f => add (sum k (fun i => f i.castSucc)) (f (Fin.last k))

variable [Scalar α]

/-- A sum of losses is `⊤` exactly when one of them is. -/
theorem sum_eq_top_iff : ∀ (k : Nat) (f : Fin k → ELoss α), sum k f = top ↔ ∃ i, f i = top
  | 0, f => by
    constructor
    · intro h; cases h
    · intro ⟨i, _⟩; exact i.elim0
  | k + 1, f => by
    have ih := sum_eq_top_iff k (fun i => f i.castSucc)
    show add (sum k (fun i => f i.castSucc)) (f (Fin.last k)) = top ↔ _
    constructor
    · intro h
      cases hs : sum k (fun i => f i.castSucc) with
      | top => obtain ⟨i, hi⟩ := ih.mp hs; exact ⟨i.castSucc, hi⟩
      | finite x =>
        cases hl : f (Fin.last k) with
        | top => exact ⟨Fin.last k, hl⟩
        | finite y => rw [hs, hl] at h; cases h
    · intro ⟨i, hi⟩
      cases i using Fin.lastCases with
      | last => rw [hi]; cases sum k (fun i => f i.castSucc) <;> rfl
      | cast j => rw [ih.mpr ⟨j, hi⟩]; rfl

/-- A sum of finite losses is the finite sum. -/
theorem sum_finite : ∀ (k : Nat) (f : Fin k → α), sum k (fun i => finite (f i)) = finite (finSum k f)
  | 0, _ => rfl
  | k + 1, f => by
    show add (sum k (fun i => finite (f i.castSucc))) (finite (f (Fin.last k))) = _
    rw [sum_finite k]; rfl

end ELoss

section Defs

variable [Scalar α] {n : Nat}

/-- **The one-step likelihood loss** `−log Σ_y min(p_y, q_y)` (report Eq. 16; k3-spec §2.14),
`⊤` (`+∞`) when the overlap is not positive, so `log 0` never occurs. -/
@[macro_inline] def likelihoodLoss (p q : Fin n → α) : ELoss α :=
  if acceptanceRate p q ≤ 0 then .top else .finite (-Scalar.log (acceptanceRate p q))

/-- **The seven-step likelihood loss** (report Eq. 16, reconstructed; k3-spec §2.14):
`Σ_{step < 7} −log Σ_y min(p_step(y), q_step(y))` for the target's distributions `p step` and
the draft's `q step`, with no ground-truth cross-entropy term. -/
@[macro_inline] def sevenStepLikelihoodLoss (p q : Fin 7 → Fin n → α) : ELoss α :=
  ELoss.sum 7 (fun step => likelihoodLoss (p step) (q step))

end Defs

section Ordered

variable [OrderedScalarField α] {n : Nat}

/-- **Zero overlap, infinite loss** (`likelihoodLoss_eq_top_iff`, k3-spec §2.14): for
nonnegative weights the loss is `⊤` exactly when the acceptance rate is zero. -/
theorem likelihoodLoss_eq_top_iff {p q : Fin n → α} (hp : ∀ y, 0 ≤ p y) (hq : ∀ y, 0 ≤ q y) :
    likelihoodLoss p q = .top ↔ acceptanceRate p q = 0 := by
  have h0 := acceptanceRate_nonneg hp hq
  unfold likelihoodLoss
  by_cases h : acceptanceRate p q ≤ 0
  · rw [if_pos h]; exact ⟨fun _ => by grind, fun _ => rfl⟩
  · rw [if_neg h]; exact ⟨fun e => (by cases e), fun e => (by grind)⟩

/-- With positive overlap the loss is `−log` of the acceptance rate. -/
theorem likelihoodLoss_of_pos {p q : Fin n → α} (h : 0 < acceptanceRate p q) :
    likelihoodLoss p q = .finite (-Scalar.log (acceptanceRate p q)) := by
  unfold likelihoodLoss; rw [if_neg (by grind)]

/-- **The seven-step loss is `+∞` exactly when a step has zero overlap**. -/
theorem sevenStepLikelihoodLoss_eq_top_iff {p q : Fin 7 → Fin n → α}
    (hp : ∀ s y, 0 ≤ p s y) (hq : ∀ s y, 0 ≤ q s y) :
    sevenStepLikelihoodLoss p q = .top ↔ ∃ step, acceptanceRate (p step) (q step) = 0 := by
  unfold sevenStepLikelihoodLoss
  rw [ELoss.sum_eq_top_iff]
  exact ⟨fun ⟨s, h⟩ => ⟨s, (likelihoodLoss_eq_top_iff (hp s) (hq s)).mp h⟩,
    fun ⟨s, h⟩ => ⟨s, (likelihoodLoss_eq_top_iff (hp s) (hq s)).mpr h⟩⟩

/-- With positive overlap at every step, the seven-step loss is `Σ_step −log acceptance`. -/
theorem sevenStepLikelihoodLoss_of_pos {p q : Fin 7 → Fin n → α}
    (h : ∀ step, 0 < acceptanceRate (p step) (q step)) :
    sevenStepLikelihoodLoss p q =
      .finite (finSum 7 (fun step => -Scalar.log (acceptanceRate (p step) (q step)))) := by
  unfold sevenStepLikelihoodLoss
  rw [← ELoss.sum_finite]
  exact congrArg (ELoss.sum 7) (funext fun s => likelihoodLoss_of_pos (h s))

end Ordered

section Laws

variable [ScalarLaws α] {n : Nat}

/-- **The loss is nonnegative**: for distributions the overlap is at most one. -/
theorem likelihoodLoss_nonneg {p q : Fin n → α} (hp : IsDistribution p)
    (h : 0 < acceptanceRate p q) :
    ∃ x, likelihoodLoss p q = .finite x ∧ 0 ≤ x := by
  refine ⟨_, likelihoodLoss_of_pos h, ?_⟩
  have h1 : acceptanceRate p q ≤ 1 := by
    have := residualMass_nonneg q hp.sum_eq_one; unfold residualMass at this; grind
  have := log_nonpos_of_le_one h h1; grind

end Laws

section TrainingTimeTest

variable {Cache Feature Token : Type} [Scalar α] {n : Nat}

/-- The `step`-th of the draft distributions `qs` (the zero vector past the end). -/
@[macro_inline] def draftAt (qs : List (Fin n → α)) (step : Nat) : Fin n → α :=
  listGetD (fun _ => 0) qs step

/-- **The training-time-test loss** (report Eq. 16; k3-spec §2.14): the draft runs
self-feeding on the seven `tokens` from `state` (`SelfFeedingDraft.trainingTimeTest`), and its
seven output distributions are scored against the target's `p` with the seven-step likelihood
loss. -/
@[macro_inline] def trainingTimeTestLoss (model : SelfFeedingDraft Cache Feature Token (Fin n → α))
    (state : Cache × Feature) (tokens : Fin 7 → Token) (p : Fin 7 → Fin n → α) : ELoss α :=
  sevenStepLikelihoodLoss p
    (fun step => draftAt (model.trainingTimeTest (finList 7 tokens) state).2 step.val)

end TrainingTimeTest

/-- **The training-time-test loss is `+∞` exactly when some step's self-fed draft distribution
has no overlap with the target's.** -/
theorem trainingTimeTestLoss_eq_top_iff [OrderedScalarField α] {n : Nat} {Cache Feature Token : Type}
    (model : SelfFeedingDraft Cache Feature Token (Fin n → α)) (state : Cache × Feature)
    (tokens : Fin 7 → Token) {p : Fin 7 → Fin n → α} (hp : ∀ s y, 0 ≤ p s y)
    (hq : ∀ s y, 0 ≤ draftAt (model.trainingTimeTest (finList 7 tokens) state).2 s y) :
    trainingTimeTestLoss model state tokens p = .top ↔
      ∃ step : Fin 7, acceptanceRate (p step)
        (draftAt (model.trainingTimeTest (finList 7 tokens) state).2 step.val) = 0 :=
  sevenStepLikelihoodLoss_eq_top_iff hp (fun s => hq s.val)

end KimiK3.Training
