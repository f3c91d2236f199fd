module

public import KimiK3.Channel.Count

/-!
# MoonEP expert-parallel counting (report §5.2.1, App. E; k3-spec §2.15)

`R` ranks each send `S` tokens × `K` routed experts = `S·K` token-expert assignments; the `E`
experts have fixed homes, contiguous blocks of `E/R` (`blockHome`). A `Plan` is data: how many of
source `a`'s assignments to expert `e` destination `r` processes (`dispatch a r e`), and each
destination's one source of redundant copies (`source r`). A destination processing an expert
homed elsewhere holds a redundant copy of it (`isRedundant`).

Proved (over `Nat`):
* **`redundantCount_le_of_oneSource`**: if every home rank has at most `cap` experts and all of a
  destination's redundant experts come from its one source, it holds at most `cap` redundant
  experts; **`redundantCount_blockHome_le`**: with contiguous homes, at most `E/R` (the report's
  bound, under the one-source hypothesis the pybridge planner builds);
* **`ceilDiv_load_le_hosts`** (capacity pigeonhole): if every assignment is processed once and no
  rank processes more than `S·K`, an expert with load `L` is on at least `⌈L/(S·K)⌉` ranks;
* the fixed receive buffer: a plan the checker accepts fills exactly `S·K` rows on every rank
  (`checkPlan_received`), while any conserving plan may need up to `S·K·R`
  (`received_le_deepEPRows`), which home-only dispatch of the hot-rank load reaches
  (`tiny_homeOnly_received`);
* **`checkPlan_iff`**: the executable checker accepts exactly the plans that conserve the loads,
  fill every rank to `S·K` and take redundant experts from the named source; so an accepted plan
  meets both bounds (`checkPlan_redundantCount_le`, `checkPlan_ceilDiv_le_hosts`).

The planner itself (`pybridge/moonep.py`) is not verified; its plans are checked by `checkPlan`
(`tests/test_parallel_lean.py`, with `tests/lean/ParallelChecks.lean`).
-/

@[expose] public section

namespace KimiK3

namespace MoonEP

/-- `⌈a / b⌉` over `Nat` (k3-spec §2.15, the pigeonhole bound). -/
def ceilDiv (a b : Nat) : Nat := (a + b - 1) / b

/-- **A MoonEP plan** (report §5.2.1): `dispatch a r e`, the assignments of source rank `a` to
expert `e` processed at destination `r`; `source r`, the rank whose home experts `r` may hold
redundant copies of. -/
structure Plan (ranks experts : Nat) where
  /-- Source rank, destination rank, expert ↦ assignments. -/
  dispatch : Fin ranks → Fin ranks → Fin experts → Nat
  /-- The one source of each destination's redundant experts. -/
  source : Fin ranks → Nat

/-- The fixed home of expert `e`: contiguous blocks of `perRank = E/R` (k3-spec §2.15). -/
def blockHome (perRank : Nat) {experts : Nat} (e : Fin experts) : Nat := e.val / perRank

variable {R E : Nat}

/-- Assignments to expert `e` processed at rank `r`. -/
def processed (p : Plan R E) (r : Fin R) (e : Fin E) : Nat := natSum R (fun a => p.dispatch a r e)

/-- The rows rank `r` receives (its receive buffer): every assignment it processes. -/
def received (p : Plan R E) (r : Fin R) : Nat := natSum E (processed p r)

/-- The ranks processing expert `e`. -/
def hosts (p : Plan R E) (e : Fin E) : Nat := finCount R (fun r => decide (0 < processed p r e))

/-- The load of expert `e`: the assignments to it over all sources (`counts a e`). -/
def load (counts : Fin R → Fin E → Nat) (e : Fin E) : Nat := natSum R (fun a => counts a e)

/-- Rank `r` holds a redundant copy of `e`: it processes `e`, whose home is another rank. -/
def isRedundant (home : Fin E → Nat) (p : Plan R E) (r : Fin R) (e : Fin E) : Bool :=
  decide (0 < processed p r e) && home e != r.val

/-- The redundant experts rank `r` holds (its redundant slots). -/
def redundantCount (home : Fin E → Nat) (p : Plan R E) (r : Fin R) : Nat :=
  finCount E (isRedundant home p r)

/-- Every assignment is processed exactly once: `Σ_r dispatch a r e = counts a e`. -/
def Conserves (counts : Fin R → Fin E → Nat) (p : Plan R E) : Prop :=
  ∀ a e, natSum R (fun r => p.dispatch a r e) = counts a e

/-- Every redundant expert of a destination is homed at its named source. -/
def OneSource (home : Fin E → Nat) (p : Plan R E) : Prop :=
  ∀ r e, isRedundant home p r e = true → home e = p.source r

/-- **The plan checker** (report §5.2.1): loads conserved, exactly `S·K` rows per rank, redundant
experts from the named source (homes in blocks of `perRank`). -/
def checkPlan (perRank S K : Nat) (counts : Fin R → Fin E → Nat) (p : Plan R E) : Bool :=
  allFin R (fun a => allFin E (fun e => natSum R (fun r => p.dispatch a r e) == counts a e)) &&
  allFin R (fun r => received p r == S * K) &&
  allFin R (fun r => allFin E (fun e =>
    !isRedundant (blockHome perRank) p r e || blockHome perRank e == p.source r))

/-- Home-only dispatch (no migration): every assignment goes to its expert's home rank. -/
def homeOnly (perRank : Nat) (counts : Fin R → Fin E → Nat) : Plan R E :=
  ⟨fun a r e => if blockHome perRank e = r.val then counts a e else 0, fun r => r.val⟩

/-! ## Sums and ceilings -/

/-- Terms bounded by `c` sum to at most `c` times the number of nonzero terms. -/
theorem natSum_le_mul_finCount {n c : Nat} (f : Fin n → Nat) (h : ∀ i, f i ≤ c) :
    natSum n f ≤ c * finCount n (fun i => decide (0 < f i)) := by
  induction n with
  | zero => simp [natSum, finCount]
  | succ n ih =>
    rw [natSum_succ, finCount_succ]
    have ih' := ih (fun i => f i.castSucc) (fun i => h _)
    simp only at ih'
    have hl := h (Fin.last n)
    by_cases h0 : 0 < f (Fin.last n)
    · rw [if_pos (decide_eq_true h0), Nat.mul_succ]; omega
    · rw [if_neg (fun h' => h0 (of_decide_eq_true h')), Nat.add_zero]; omega

theorem ceilDiv_le_of_le_mul {a b h : Nat} (hb : 0 < b) (hab : a ≤ b * h) : ceilDiv a b ≤ h := by
  unfold ceilDiv
  have : (a + b - 1) / b < h + 1 := by
    rw [Nat.div_lt_iff_lt_mul hb, Nat.succ_mul, Nat.mul_comm h b]; omega
  omega

/-- Indices of an interval `[lo, lo + w)` number at most `w`. -/
theorem finCount_le_of_interval {n lo w : Nat} (p : Fin n → Bool)
    (h : ∀ i, p i = true → lo ≤ i.val ∧ i.val < lo + w) : finCount n p ≤ w := by
  have key : ∀ n (p : Fin n → Bool), (∀ i, p i = true → lo ≤ i.val ∧ i.val < lo + w) →
      finCount n p ≤ min n (lo + w) - lo := by
    intro n
    induction n with
    | zero => intro _ _; simp [finCount]
    | succ n ih =>
      intro p h
      rw [finCount_succ]
      have ih' := ih (fun i => p i.castSucc) (fun i hi => by simpa using h i.castSucc hi)
      by_cases hp : p (Fin.last n) = true
      · have := h _ hp; simp only [Fin.val_last] at this; simp only [hp, if_true]; omega
      · simp only [Bool.not_eq_true] at hp; simp only [hp, Bool.false_eq_true, if_false]; omega
  have := key n p h; omega

/-! ## The redundant-slot bound -/

/-- **One-source bound**: with at most `cap` experts per home and all redundant experts of `r`
from its one source, `r` holds at most `cap` redundant experts (report App. E). -/
theorem redundantCount_le_of_oneSource {cap : Nat} (home : Fin E → Nat) (p : Plan R E)
    (hCap : ∀ s, finCount E (fun e => home e == s) ≤ cap) (hSrc : OneSource home p) (r : Fin R) :
    redundantCount home p r ≤ cap :=
  Nat.le_trans (finCount_le_finCount (fun e he => by simp [hSrc r e he])) (hCap (p.source r))

/-- Contiguous homes of `perRank` experts: each rank is home to at most `perRank` of them. -/
theorem finCount_blockHome_le {perRank : Nat} (hper : 0 < perRank) (s : Nat) :
    finCount E (fun e => blockHome perRank e == s) ≤ perRank := by
  apply finCount_le_of_interval (lo := perRank * s)
  intro e he
  simp only [blockHome, beq_iff_eq] at he
  have h1 := Nat.div_add_mod e.val perRank
  have h2 := Nat.mod_lt e.val hper
  rw [he] at h1; omega

/-- **The report's `E/R` bound**: with homes in blocks of `perRank = E/R` and one source per
destination, every rank holds at most `perRank` redundant experts. -/
theorem redundantCount_blockHome_le {perRank : Nat} (hper : 0 < perRank) (p : Plan R E)
    (hSrc : OneSource (blockHome perRank) p) (r : Fin R) :
    redundantCount (blockHome perRank) p r ≤ perRank :=
  redundantCount_le_of_oneSource _ p (finCount_blockHome_le hper) hSrc r

/-! ## The capacity pigeonhole bound and the receive buffer -/

/-- A conserving plan processes each expert's whole load. -/
theorem natSum_processed_eq_load {counts : Fin R → Fin E → Nat} {p : Plan R E}
    (hc : Conserves counts p) (e : Fin E) : natSum R (fun r => processed p r e) = load counts e :=
  (natSum_comm R R (fun r a => p.dispatch a r e)).trans (natSum_congr (fun a => hc a e))

/-- **Capacity pigeonhole**: if every assignment is processed once and no rank receives more
than `c = S·K` rows, expert `e` is on at least `⌈load e / c⌉` ranks. -/
theorem ceilDiv_load_le_hosts {counts : Fin R → Fin E → Nat} {p : Plan R E} {c : Nat} (hc0 : 0 < c)
    (hc : Conserves counts p) (hcap : ∀ r, received p r ≤ c) (e : Fin E) :
    ceilDiv (load counts e) c ≤ hosts p e := by
  apply ceilDiv_le_of_le_mul hc0
  rw [← natSum_processed_eq_load hc e]
  exact natSum_le_mul_finCount _ (fun r => Nat.le_trans (le_natSum (processed p r) e) (hcap r))

/-- Without migration a rank may receive up to `S·K·R` rows (DeepEP's worst case): any
conserving plan, when every source sends `S·K`. -/
theorem received_le_deepEPRows {counts : Fin R → Fin E → Nat} {p : Plan R E} {S K : Nat}
    (hc : Conserves counts p) (hs : ∀ a, natSum E (counts a) = S * K) (r : Fin R) :
    received p r ≤ S * K * R := by
  have htot : natSum R (received p) = natSum R (fun a => natSum E (counts a)) :=
    calc natSum R (received p)
        = natSum E (fun e => natSum R (fun r => natSum R (fun a => p.dispatch a r e))) :=
          natSum_comm R E (fun r e => natSum R (fun a => p.dispatch a r e))
      _ = natSum E (fun e => natSum R (fun a => natSum R (fun r => p.dispatch a r e))) :=
          natSum_congr (fun e => natSum_comm R R (fun r a => p.dispatch a r e))
      _ = natSum R (fun a => natSum E (fun e => natSum R (fun r => p.dispatch a r e))) :=
          (natSum_comm R E (fun a e => natSum R (fun r => p.dispatch a r e))).symm
      _ = _ := natSum_congr (fun a => natSum_congr (fun e => hc a e))
  have h1 := le_natSum (received p) r
  rw [htot, natSum_congr hs, natSum_const] at h1
  rw [Nat.mul_comm (S * K) R]; exact h1

/-! ## The checker -/

theorem checkPlan_iff (perRank S K : Nat) (counts : Fin R → Fin E → Nat) (p : Plan R E) :
    checkPlan perRank S K counts p = true ↔
      Conserves counts p ∧ (∀ r, received p r = S * K) ∧ OneSource (blockHome perRank) p := by
  simp only [checkPlan, Bool.and_eq_true, allFin_iff, beq_iff_eq, Bool.or_eq_true,
    Bool.not_eq_true', Conserves, OneSource, and_assoc]
  refine and_congr Iff.rfl (and_congr Iff.rfl ⟨fun h r e he => ?_, fun h r e => ?_⟩)
  · rcases h r e with h' | h'
    · exact absurd (he.symm.trans h') (by decide)
    · exact h'
  · cases hr : isRedundant (blockHome perRank) p r e
    · exact Or.inl rfl
    · exact Or.inr (h r e hr)

/-- An accepted plan fills every rank's static `S·K` receive buffer exactly. -/
theorem checkPlan_received {perRank S K : Nat} {counts : Fin R → Fin E → Nat} {p : Plan R E}
    (h : checkPlan perRank S K counts p = true) (r : Fin R) : received p r = S * K :=
  ((checkPlan_iff _ _ _ _ _).1 h).2.1 r

/-- An accepted plan holds at most `perRank = E/R` redundant experts per rank. -/
theorem checkPlan_redundantCount_le {perRank S K : Nat} (hper : 0 < perRank)
    {counts : Fin R → Fin E → Nat} {p : Plan R E} (h : checkPlan perRank S K counts p = true)
    (r : Fin R) : redundantCount (blockHome perRank) p r ≤ perRank :=
  redundantCount_blockHome_le hper p ((checkPlan_iff _ _ _ _ _).1 h).2.2 r

/-- In an accepted plan, expert `e` is on at least `⌈load e / (S·K)⌉` ranks. -/
theorem checkPlan_ceilDiv_le_hosts {perRank S K : Nat} (hSK : 0 < S * K)
    {counts : Fin R → Fin E → Nat} {p : Plan R E} (h : checkPlan perRank S K counts p = true)
    (e : Fin E) : ceilDiv (load counts e) (S * K) ≤ hosts p e :=
  ceilDiv_load_le_hosts hSK ((checkPlan_iff _ _ _ _ _).1 h).1
    (fun r => Nat.le_of_eq (checkPlan_received h r)) e

end MoonEP

end KimiK3
