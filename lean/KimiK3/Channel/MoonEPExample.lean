module

public import KimiK3.Channel.MoonEP

/-!
# MoonEP worked examples (report §5.2.1, App. E; k3-spec §2.15)

By `decide` over `Nat`:
* tiny hot rank (R = 2, E = 4, E/R = 2, S = K = 2): every token picks experts 0 and 1, both homed
  at rank 0. Home-only dispatch sends rank 0 all `S·K·R = 8` rows (`tiny_homeOnly_received`);
  the plan moving expert 1 to rank 1 is accepted (`tiny_checkPlan`), fills `S·K = 4` rows per rank
  and holds one redundant expert (`tiny_redundantCount`);
* one hot expert (R = E = 4, S = K = 1): every rank's token picks expert 0, load 4 > S·K = 1, so
  any exact plan spreads it over `⌈4/1⌉ = 4` ranks; the plan that keeps each token at its source
  is accepted and meets the bound with equality (`hotExpert_hosts`);
* paper sizes (E = 896, R = 64, S = 64, K = 16): at most 14 redundant experts per rank for every
  one-source plan (`paper_redundantCount_le`), a 1,024-row receive buffer against DeepEP's 65,536
  (`paper_buffer_rows`), and an expert with load 3,000 on at least 3 ranks (`paper_ceilDiv_load`).
-/

@[expose] public section

namespace KimiK3

namespace MoonEP

/-- Tiny hot-rank load: each of a rank's 2 tokens picks experts 0 and 1. -/
def tinyCounts : Fin 2 → Fin 4 → Nat := fun _ e => if e.val < 2 then 2 else 0

/-- Rank `r` processes expert `r` from both sources; rank 1's redundant expert 1 comes from 0. -/
def tinyPlan : Plan 2 4 := ⟨fun _ r e => if e.val = r.val then 2 else 0, fun _ => 0⟩

theorem tiny_checkPlan : checkPlan 2 2 2 tinyCounts tinyPlan = true := by decide

theorem tiny_received : ∀ r, received tinyPlan r = 2 * 2 := by decide

theorem tiny_redundantCount : redundantCount (blockHome 2) tinyPlan 1 = 1 ∧
    redundantCount (blockHome 2) tinyPlan 0 = 0 := by decide

/-- Without migration, rank 0 receives DeepEP's worst case `S·K·R`, rank 1 nothing. -/
theorem tiny_homeOnly_received : received (homeOnly 2 tinyCounts) 0 = 2 * 2 * 2 ∧
    received (homeOnly 2 tinyCounts) 1 = 0 := by decide

/-- Every rank's one token picks expert 0 (K = 1). -/
def hotExpertCounts : Fin 4 → Fin 4 → Nat := fun _ e => if e.val = 0 then 1 else 0

/-- Each token stays at its source: expert 0 on all four ranks, from source 0's home. -/
def hotExpertPlan : Plan 4 4 := ⟨fun a r e => if a = r ∧ e.val = 0 then 1 else 0, fun _ => 0⟩

theorem hotExpert_checkPlan : checkPlan 1 1 1 hotExpertCounts hotExpertPlan = true := by decide

/-- The pigeonhole bound is met with equality: load 4, capacity 1, four hosts. -/
theorem hotExpert_hosts : ceilDiv (load hotExpertCounts 0) (1 * 1) = 4 ∧ hosts hotExpertPlan 0 = 4 := by
  decide

/-- Home-only dispatch of the hot expert fails the checker (rank 0 gets 4 rows, not 1). -/
theorem hotExpert_homeOnly_rejected : checkPlan 1 1 1 hotExpertCounts (homeOnly 1 hotExpertCounts) = false := by
  decide

/-- Paper sizes: `E/R = 896/64 = 14` redundant slots for every one-source plan. -/
theorem paper_redundantCount_le (p : Plan 64 896) (h : OneSource (blockHome 14) p) (r : Fin 64) :
    redundantCount (blockHome 14) p r ≤ 896 / 64 :=
  redundantCount_blockHome_le (by decide) p h r

/-- Paper sizes: the static buffer `S·K = 1024` rows against DeepEP's `S·K·R = 65536`. -/
theorem paper_buffer_rows : 64 * 16 = 1024 ∧ 64 * 16 * 64 = 65536 := by decide

/-- Paper sizes: an expert picked by 3,000 of the 4,096 tokens needs at least 3 ranks. -/
theorem paper_ceilDiv_load : ceilDiv 3000 (64 * 16) = 3 := by decide

end MoonEP

end KimiK3
