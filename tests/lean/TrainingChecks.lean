-- bundle: KimiK3.Training.DraftLoss KimiK3.Training.Muon KimiK3.Training.Mopd
/-!
# Training: EAGLE-3 fusion, training-time test, speculative sampling and the loss at `Float`

Hand-computed values (comments beside each check). The dyadic example
`p = (1/2, 1/4, 1/4)`, `q = (1/4, 1/2, 1/4)` is exact in binary64: overlap `3/4`, TV `1/4`,
acceptance `(1, 1/2, 1)`, correction `(1, 0, 0)`, one step emits `p`. The report's example
`p = (0.55, 0.30, 0.15)`, `q = (0.25, 0.45, 0.30)` is checked within `1e-12`. Run by
`tests/test_lean_checks.py`; the exact `Rat` comparison with pybridge is
`tests/test_speculative_lean.py`. The Per-Head Muon layout, the Gram residual's max entry, the
MOPD reward (`ln 8.75 ≈ 2.169054`), teacher index, budget override and verbosity rule end the
file (comparisons with pybridge: `tests/test_muon_lean.py`, `tests/test_mopd_lean.py`).
-/

namespace KimiK3.TrainingChecks

open KimiK3 KimiK3.Training

/-- `|a - b| ≤ tol`. -/
def near (a b tol : Float) : Bool := (if a ≤ b then b - a else a - b) ≤ tol

/-- The vector `(a, b, c)`. -/
def v3 (a b c : Float) : Fin 3 → Float := fun i => listGetD 0 [a, b, c] i.val

/-- The low, middle, high features `[[0, 1], [10, 11], [20, 21]]`. -/
def features : Tensor Float [3, 2] := fun j i => Float.ofNat (10 * j.val + i.val)

-- [0 0 I] gives the high feature (20, 21)
#guard FeatureFusion.forward (FeatureFusion.initialFusion 2) features ⟨0, by decide⟩ == 20
#guard FeatureFusion.forward (FeatureFusion.initialFusion 2) features ⟨1, by decide⟩ == 21
-- [I 0 I] adds the low feature: (0 + 20, 1 + 21)
#guard FeatureFusion.forward (fun j => if j.val = 1 then FeatureFusion.zero 2 else FeatureFusion.identity 2)
  features ⟨1, by decide⟩ == 22

/-- A toy self-feeding draft: cache counts steps, the new feature is `2 f + token`, the output is
the feature it was fed. -/
def toy : SelfFeedingDraft Nat Float Nat Float :=
  ⟨fun cache token feature => (cache + 1, 2 * feature + Float.ofNat token, feature)⟩

-- from feature 1 on tokens 1, 2, 3: outputs 1, 3 (= 2·1 + 1), 8 (= 2·3 + 2); final (3, 19)
#guard (toy.trainingTimeTest [1, 2, 3] (0, 1)).2 == [1, 3, 8]
#guard (toy.trainingTimeTest [1, 2, 3] (0, 1)).1.1 == 3
#guard (toy.trainingTimeTest [1, 2, 3] (0, 1)).1.2 == 19

/-- The dyadic example's target. -/
def p : Fin 3 → Float := v3 0.5 0.25 0.25
/-- The dyadic example's draft. -/
def q : Fin 3 → Float := v3 0.25 0.5 0.25

#guard acceptanceRate p q == 0.75
#guard totalVariation p q == 0.25
#guard acceptProbability p q ⟨0, by decide⟩ == 1 && acceptProbability p q ⟨1, by decide⟩ == 0.5 &&
  acceptProbability p q ⟨2, by decide⟩ == 1
#guard correctionDistribution p q ⟨0, by decide⟩ == 1 && correctionDistribution p q ⟨1, by decide⟩ == 0 &&
  correctionDistribution p q ⟨2, by decide⟩ == 0
#guard emitProbability p q ⟨0, by decide⟩ == 0.5 && emitProbability p q ⟨1, by decide⟩ == 0.25 &&
  emitProbability p q ⟨2, by decide⟩ == 0.25

/-- The report's example target `(0.55, 0.30, 0.15)`. -/
def pr : Fin 3 → Float := v3 0.55 0.30 0.15
/-- The report's example draft `(0.25, 0.45, 0.30)`. -/
def qr : Fin 3 → Float := v3 0.25 0.45 0.30

#guard near (acceptanceRate pr qr) 0.70 1e-12 && near (totalVariation pr qr) 0.30 1e-12
#guard near (correctionDistribution pr qr ⟨0, by decide⟩) 1 1e-12 &&
  correctionDistribution pr qr ⟨1, by decide⟩ == 0 && correctionDistribution pr qr ⟨2, by decide⟩ == 0
#guard near (emitProbability pr qr ⟨0, by decide⟩) 0.55 1e-12 && near (emitProbability pr qr ⟨1, by decide⟩) 0.30 1e-12

/-- Whether a loss is `+∞`. -/
def isTop : ELoss Float → Bool
  | .top => true
  | .finite _ => false

/-- The finite value of a loss (`-1` for `+∞`). -/
def value : ELoss Float → Float
  | .top => -1
  | .finite x => x

-- −ln 0.70 ≈ 0.356675; disjoint supports give +∞, not log 0
#guard near (value (likelihoodLoss pr qr)) 0.356675 1e-6
#guard isTop (likelihoodLoss (fun i : Fin 2 => if i.val = 0 then 1 else 0) (fun i => if i.val = 0 then 0 else 1))
#guard isTop (sevenStepLikelihoodLoss (fun s => if s.val = 3 then v3 1 0 0 else pr) (fun _ => v3 0 0.5 0.5))
#guard near (value (sevenStepLikelihoodLoss (fun _ => pr) (fun _ => qr))) (7 * 0.356675) 1e-5


/-! ## Per-Head Muon (`Training/Muon.lean`) and MOPD (`Training/Mopd.lean`) at `Float` -/

section MuonMopd

open KimiK3.Training.Muon KimiK3.Training.Mopd

/-- `m[r, k] = 10 r + k`, 2 rows, 3 heads of 2 columns. -/
def muonM : Tensor Float [2, 3 * 2] := fun r k => Float.ofNat (10 * r.val + k.val)

-- head-major: head 1 owns columns 2, 3; head 2 column 1 is column 5 (= 1 + 2·2)
#guard split (heads := 3) (columns := 2) muonM ⟨1, by decide⟩ ⟨0, by decide⟩ ⟨0, by decide⟩ == 2 &&
  split (heads := 3) (columns := 2) muonM ⟨1, by decide⟩ ⟨1, by decide⟩ ⟨1, by decide⟩ == 13 &&
  split (heads := 3) (columns := 2) muonM ⟨2, by decide⟩ ⟨1, by decide⟩ ⟨1, by decide⟩ == 15
#guard (finList 2 fun r => finList 6 fun k => merge (split (heads := 3) (columns := 2) muonM) r k) ==
  (finList 2 fun r => finList 6 fun k => muonM r k)

/-- A 3 × 2 block with orthonormal columns (a column-permuted identity's first two columns). -/
def muonQ : Tensor Float [3, 2] := fun r c => if r.val = 1 - c.val then 1 else 0

-- MᵀM = I exactly; the unnormalized `2 Q` has residual max entry 3 (= 4 − 1)
#guard maxAbsEntry (gramResidual muonQ) == 0 &&
  maxAbsEntry (gramResidual (fun r c => 2 * muonQ r c)) == 3

-- 0.70 / 0.08 rounds to 8.75 in binary64; ln 8.75 ≈ 2.1690537 (the report's 2.169), inside R = 5
#guard near (reward 5 0.70 0.08) 2.169054 1e-6 && near (reward 5 0.08 0.70) (-2.169054) 1e-6 &&
  reward (5 : Float) 0.3 0.3 == 0 && reward (5 : Float) 1 1e-300 == 5 && reward (5 : Float) 1e-300 1 == -5 &&
  reward (0 : Float) 0.7 0.08 == 0

#guard (teacherIndex .generalTasks .low).val == 0 && (teacherIndex .generalAgents .max).val == 5 &&
  (teacherIndex .codingAgents .high).val == 7

-- τ b₀ = 1.5 · 100 = 150: 150 tokens keep the reward, 151 get −1, twice the same
#guard budgetOverride (0.5 : Float) 150 1.5 100 == 0.5 && budgetOverride (0.5 : Float) 151 1.5 100 == -1 &&
  budgetOverride (budgetOverride (0.5 : Float) 151 1.5 100) 151 1.5 100 == -1

-- limit σ v = 2 · 50 = 100: both overlong → the first loses; the second overlong → the first wins
#guard verbosityWinner 101 120 (2 : Float) 50 true == 1 && verbosityWinner 100 101 (2 : Float) 50 false == 0 &&
  verbosityWinner 100 100 (2 : Float) 50 true == 0 && verbosityWinner 99 100 (2 : Float) 50 false == 1

end MuonMopd

end KimiK3.TrainingChecks
