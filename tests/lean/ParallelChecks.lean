-- bundle: KimiK3.Sequence.ContextParallel KimiK3.Channel.MoonEPExample
/-!
# Parallel execution: context-parallel composition at `Float`, MoonEP counting at `Nat`

Hand-computed values (comments beside each check). `composeAll` is the rank-order fold of
`AffineSummary.andThen` (`lean/KimiK3/Sequence/ContextParallel.lean`); the MoonEP plans are the
worked examples of `lean/KimiK3/Channel/MoonEPExample.lean` plus a rejected variant of each.
-/

open KimiK3 KimiK3.MoonEP

/-- The scalar map `s ↦ a s + b` as a 1 × 1 summary. -/
def scalarMap (a b : Float) : AffineSummary Float 1 1 := ⟨fun _ _ => a, fun _ _ => b⟩

def offset11 (s : AffineSummary Float 1 1) : Float := s.offset 0 0
def transition11 (s : AffineSummary Float 1 1) : Float := s.transition 0 0

-- k3-spec §2.2: A(s) = 2s + 1 then B(s) = 3s gives B(A(s)) = 6s + 3; the other order 6s + 1.
#guard transition11 (AffineSummary.composeAll [scalarMap 2 1, scalarMap 3 0]) == 6
#guard offset11 (AffineSummary.composeAll [scalarMap 2 1, scalarMap 3 0]) == 3
#guard offset11 (AffineSummary.composeAll [scalarMap 3 0, scalarMap 2 1]) == 1
-- three ranks: s ↦ 2s + 1, then 3s, then s − 4: 6s + 3 − 4 = 6s − 1; from s₀ = 2: 11.
#guard offset11 (AffineSummary.composeAll [scalarMap 2 1, scalarMap 3 0, scalarMap 1 (-4)]) == -1
#guard (AffineSummary.composeAll [scalarMap 2 1, scalarMap 3 0, scalarMap 1 (-4)]).apply (fun _ _ => 2) 0 0 == 11
-- incoming states of ranks 0, 1, 2 from s₀ = 2: 2, 2·2 + 1 = 5, 3·5 = 15
#guard (AffineSummary.composeAll ([] : List (AffineSummary Float 1 1))).apply (fun _ _ => 2) 0 0 == 2
#guard (AffineSummary.composeAll [scalarMap 2 1]).apply (fun _ _ => 2) 0 0 == 5
#guard (AffineSummary.composeAll [scalarMap 2 1, scalarMap 3 0]).apply (fun _ _ => 2) 0 0 == 15
-- 2 × 2: A₁ = [[1, 1], [0, 1]], B₁ = I; A₂ = [[2, 0], [0, 3]], B₂ = 0:
-- A₂A₁ = [[2, 2], [0, 3]], A₂B₁ + B₂ = [[2, 0], [0, 3]]
def shear : AffineSummary Float 2 2 :=
  ⟨fun r c => if r.val ≤ c.val then 1 else 0, fun r c => if r = c then 1 else 0⟩
def diag23 : AffineSummary Float 2 2 :=
  ⟨fun r c => if r = c then (if r.val = 0 then 2 else 3) else 0, fun _ _ => 0⟩
#guard finList 2 (fun r => finList 2 (fun c => (AffineSummary.composeAll [shear, diag23]).transition r c)) == [[2, 2], [0, 3]]
#guard finList 2 (fun r => finList 2 (fun c => (AffineSummary.composeAll [shear, diag23]).offset r c)) == [[2, 0], [0, 3]]
-- reversed order: A₁A₂ = [[2, 3], [0, 3]]
#guard finList 2 (fun r => finList 2 (fun c => (AffineSummary.composeAll [diag23, shear]).transition r c)) == [[2, 3], [0, 3]]

-- MoonEP, tiny hot rank (R = 2, E = 4, S = K = 2): accepted; rows 4, 4; redundant 0, 1;
-- home-only: rows 8 = S·K·R and 0, rejected.
#guard checkPlan 2 2 2 tinyCounts tinyPlan
#guard finList 2 (received tinyPlan) == [4, 4]
#guard finList 2 (redundantCount (blockHome 2) tinyPlan) == [0, 1]
#guard finList 4 (hosts tinyPlan) == [1, 1, 0, 0]
#guard finList 2 (received (homeOnly 2 tinyCounts)) == [8, 0]
#guard !checkPlan 2 2 2 tinyCounts (homeOnly 2 tinyCounts)
-- naming the wrong source (rank 1 for rank 1) is rejected
#guard !checkPlan 2 2 2 tinyCounts ⟨tinyPlan.dispatch, fun _ => 1⟩
-- one hot expert (R = E = 4, S = K = 1): load 4, ⌈4/1⌉ = 4 hosts; each rank 1 redundant ≤ E/R = 1
#guard checkPlan 1 1 1 hotExpertCounts hotExpertPlan
#guard load hotExpertCounts 0 == 4 && hosts hotExpertPlan 0 == 4 && ceilDiv 4 1 == 4
#guard finList 4 (redundantCount (blockHome 1) hotExpertPlan) == [0, 1, 1, 1]
-- paper sizes: ⌈3000/1024⌉ = 3, ⌈1024/1024⌉ = 1, ⌈1025/1024⌉ = 2, E/R = 14
#guard ceilDiv 3000 (64 * 16) == 3 && ceilDiv 1024 1024 == 1 && ceilDiv 1025 1024 == 2 && 896 / 64 == 14
