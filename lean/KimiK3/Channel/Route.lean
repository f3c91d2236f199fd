module

public import KimiK3.Channel.Count

/-!
# Top-k routes with a stated tie rule (report §2.3, Eq. 13; spec §6 item 7)

Scores live in any type with a decidable linear order (`Float` through `Scalar`, or `Nat`,
`Int`, … for exact checks).

* **Tie rule.** `Beats score a b` ("expert `a` beats expert `b`"):
  `score b < score a ∨ (score a = score b ∧ a < b)` — the higher score wins, and among equal
  scores the **lowest expert index wins** (`beats_iff`). It is a strict total order
  (`beats_irrefl`, `beats_trans`, `beats_total`).
* `Route E k`: slots `Fin k → Fin E`, injective (no expert twice).
* `IsTopK score slot`: every chosen expert beats every unchosen one (the route's image is the
  set of the `k` best experts; the slot order is not constrained).
* `chooseTopK`: the executable top-k. Slot `i` holds the expert of rank `i`, where
  `rank e = #{e' | e' beats e}`; so slots are sorted best first (`chooseTopK_sorted`) and
  `chooseTopK_isTopK` holds.
* **Route checker** `checkRoute score slot : Bool` decides whether a route given from outside
  (e.g. produced by a GPU kernel) is injective and a top-k of `score` under the tie rule:
  `checkRoute_iff`.
-/

@[expose] public section

set_option linter.unusedSectionVars false

namespace KimiK3

namespace Routing

variable {α : Type} [LT α] [LE α] [DecidableRel (α := α) (· < ·)] [DecidableRel (α := α) (· ≤ ·)]

/-- Expert `a` beats expert `b` under `score`: a higher score wins; equal scores are broken
by the **lower expert index** (report Eq. 13 selection; tie rule of this project). Reducible,
so its decidability is that of `∨`/`∧` (no generic instance of our own to compile). -/
abbrev Beats {E : Nat} (score : Fin E → α) (a b : Fin E) : Prop :=
  score b < score a ∨ (score b ≤ score a ∧ a.val < b.val)


/-- The rank of an expert: how many experts beat it (0 = best). -/
@[macro_inline] def rank {E : Nat} (score : Fin E → α) (e : Fin E) : Nat :=
  finCount E (fun x => decide (Beats score x e))

/-- A route: `k` slots holding pairwise distinct experts out of `E` (report §2.3). -/
structure Route (E k : Nat) where
  /-- The expert in each slot. -/
  slot : Fin k → Fin E
  /-- No expert is used twice. -/
  injective : ∀ i j, slot i = slot j → i = j

/-- A slot assignment is a top-k of `score`: every chosen expert beats every unchosen one
(report Eq. 13 with the tie rule `Beats`). -/
def IsTopK {E k : Nat} (score : Fin E → α) (slot : Fin k → Fin E) : Prop :=
  ∀ i e, (∀ j, slot j ≠ e) → Beats score (slot i) e

/-- A route is a top-k of `score`. -/
def Route.IsTopK {E k : Nat} (route : Route E k) (score : Fin E → α) : Prop :=
  Routing.IsTopK score route.slot

/-- The expert of rank `i`, found by search over the (memoized) ranks. -/
@[macro_inline] def expertOfRank {E : Nat} (score : Fin E → α) (i : Nat) (hi : i < E) : Fin E :=
  let r := memoNat (fun e => rank score e)
  match findFin E (fun e => r e == i) with
  | some e => e
  | none => ⟨i, hi⟩

/-- The executable top-k slots (report §2.3, `Route.chooseTopK`): slot `i` holds the expert
of rank `i`, best first, ties broken by lowest index. Computable for any scores (e.g. `Float`). -/
@[macro_inline] def topKSlots {E k : Nat} (score : Fin E → α) (hk : k ≤ E) (i : Fin k) : Fin E :=
  expertOfRank score i.val (by omega)

/-- The route checker (closes "runtime top-k"): `true` iff `slot` is injective and a top-k of
`score` under the tie rule. Computable; `decide`/`rfl` evaluate it on concrete scores. -/
@[macro_inline] def checkRoute {E k : Nat} (score : Fin E → α) (slot : Fin k → Fin E) : Bool :=
  allFin k (fun i => allFin k (fun j => decide (i = j) || decide (slot i ≠ slot j))) &&
    allFin k (fun i => allFin E (fun e =>
      anyFin k (fun j => decide (slot j = e)) || decide (Beats score (slot i) e)))

/-- The checker is exactly injectivity plus the top-k property. -/
theorem checkRoute_iff {E k : Nat} (score : Fin E → α) (slot : Fin k → Fin E) :
    checkRoute score slot = true ↔ (∀ i j, slot i = slot j → i = j) ∧ IsTopK score slot := by
  unfold checkRoute IsTopK
  simp only [Bool.and_eq_true, allFin_iff, Bool.or_eq_true, anyFin_iff, decide_eq_true_eq]
  constructor
  · rintro ⟨h1, h2⟩
    refine ⟨fun i j e => ?_, fun i e he => ?_⟩
    · rcases h1 i j with h | h
      · exact h
      · exact absurd e h
    · rcases h2 i e with ⟨j, hj⟩ | h
      · exact absurd hj (he j)
      · exact h
  · rintro ⟨h1, h2⟩
    refine ⟨fun i j => ?_, fun i e => ?_⟩
    · by_cases h : i = j
      · exact Or.inl h
      · exact Or.inr (fun e => h (h1 i j e))
    · by_cases h : ∃ j, slot j = e
      · exact Or.inl h
      · exact Or.inr (h2 i e (fun j hj => h ⟨j, hj⟩))

section LinearOrder

variable [Std.IsLinearOrder α] [Std.LawfulOrderLT α]

/-- The tie rule spelled out: `a` beats `b` iff its score is higher, or the scores are equal
and `a` has the lower index. -/
theorem beats_iff {E : Nat} (score : Fin E → α) (a b : Fin E) :
    Beats score a b ↔ score b < score a ∨ (score a = score b ∧ a.val < b.val) := by
  unfold Beats; constructor <;> intro h <;> grind

/-- No expert beats itself. -/
theorem beats_irrefl {E : Nat} (score : Fin E → α) (a : Fin E) : ¬ Beats score a a := by
  unfold Beats; grind

/-- `Beats` is transitive. -/
theorem beats_trans {E : Nat} (score : Fin E → α) {a b c : Fin E} (h1 : Beats score a b)
    (h2 : Beats score b c) : Beats score a c := by
  unfold Beats at *; grind

/-- `Beats` is total on distinct experts. -/
theorem beats_total {E : Nat} (score : Fin E → α) {a b : Fin E} (h : a ≠ b) :
    Beats score a b ∨ Beats score b a := by
  have hv : a.val ≠ b.val := fun e => h (Fin.ext e)
  unfold Beats; grind

/-- `Beats` is asymmetric. -/
theorem beats_asymm {E : Nat} (score : Fin E → α) {a b : Fin E} (h : Beats score a b) :
    ¬ Beats score b a := fun h' => beats_irrefl score a (beats_trans score h h')

/-- A better expert has a smaller rank. -/
theorem rank_lt_rank {E : Nat} (score : Fin E → α) {a b : Fin E} (h : Beats score a b) :
    rank score a < rank score b :=
  finCount_lt_finCount (j := a)
    (fun _ hx => decide_eq_true (beats_trans score (of_decide_eq_true hx) h))
    (decide_eq_false (beats_irrefl score a)) (decide_eq_true h)

/-- Ranks are below the number of experts. -/
theorem rank_lt {E : Nat} (score : Fin E → α) (e : Fin E) : rank score e < E := by
  have := finCount_lt_finCount (p := fun x => decide (Beats score x e)) (q := fun _ => true)
    (j := e) (fun _ _ => rfl) (decide_eq_false (beats_irrefl score e)) rfl
  rwa [finCount_eq_self (fun _ => rfl)] at this

/-- A smaller rank means a better expert. -/
theorem beats_of_rank_lt {E : Nat} (score : Fin E → α) {a b : Fin E}
    (h : rank score a < rank score b) : Beats score a b := by
  by_cases hab : a = b
  · subst hab; exact absurd h (Nat.lt_irrefl _)
  · rcases beats_total score hab with h' | h'
    · exact h'
    · exact absurd (rank_lt_rank score h') (by omega)

/-- Distinct experts have distinct ranks. -/
theorem rank_injective {E : Nat} (score : Fin E → α) {a b : Fin E}
    (h : rank score a = rank score b) : a = b := by
  by_cases hab : a = b
  · exact hab
  · rcases beats_total score hab with h' | h'
    · exact absurd (rank_lt_rank score h') (by omega)
    · exact absurd (rank_lt_rank score h') (by omega)

/-- Every rank below `E` is taken (pigeonhole). -/
theorem exists_rank_eq {E : Nat} (score : Fin E → α) (i : Nat) (hi : i < E) :
    ∃ e, rank score e = i := by
  obtain ⟨e, he⟩ := fin_surjective_of_injective E (fun e => ⟨rank score e, rank_lt score e⟩)
    (fun a b h => rank_injective score (congrArg Fin.val h)) ⟨i, hi⟩
  exact ⟨e, congrArg Fin.val he⟩

/-- `expertOfRank score i` has rank `i`. -/
theorem rank_expertOfRank {E : Nat} (score : Fin E → α) (i : Nat) (hi : i < E) :
    rank score (expertOfRank score i hi) = i := by
  unfold expertOfRank
  simp only [memoNat_eq]
  split
  · rename_i e he
    have := findFin_spec he
    simpa using this
  · rename_i hnone
    obtain ⟨e, he⟩ := exists_rank_eq score i hi
    obtain ⟨j, hj⟩ := findFin_isSome (p := fun e => rank score e == i) (i := e) (by simp [he])
    rw [hj] at hnone; cases hnone

/-- The expert in slot `i` of `topKSlots` has rank `i`. -/
theorem rank_topKSlots {E k : Nat} (score : Fin E → α) (hk : k ≤ E) (i : Fin k) :
    rank score (topKSlots score hk i) = i.val :=
  rank_expertOfRank score i.val _

/-- `topKSlots` never repeats an expert. -/
theorem topKSlots_injective {E k : Nat} (score : Fin E → α) (hk : k ≤ E) (i j : Fin k)
    (h : topKSlots score hk i = topKSlots score hk j) : i = j := by
  have := congrArg (rank score) h
  rw [rank_topKSlots, rank_topKSlots] at this
  exact Fin.ext this

/-- The slots of `topKSlots` are sorted best first. -/
theorem topKSlots_sorted {E k : Nat} (score : Fin E → α) (hk : k ≤ E) {i j : Fin k}
    (h : i.val < j.val) : Beats score (topKSlots score hk i) (topKSlots score hk j) :=
  beats_of_rank_lt score (by rw [rank_topKSlots, rank_topKSlots]; exact h)

/-- An expert outside `topKSlots` has rank at least `k`. -/
theorem le_rank_of_not_chosen {E k : Nat} (score : Fin E → α) (hk : k ≤ E) {e : Fin E}
    (he : ∀ j, topKSlots score hk j ≠ e) : k ≤ rank score e := by
  rcases Nat.lt_or_ge (rank score e) k with h | h
  · exfalso
    apply he ⟨rank score e, h⟩
    apply rank_injective score
    rw [rank_topKSlots]
  · exact h

/-- `topKSlots` is a top-k of the scores under the tie rule. -/
theorem topKSlots_isTopK {E k : Nat} (score : Fin E → α) (hk : k ≤ E) :
    IsTopK score (topKSlots score hk) := by
  intro i e he
  have := le_rank_of_not_chosen score hk he
  exact beats_of_rank_lt score (by rw [rank_topKSlots]; omega)

/-- The top-k route of `score` (report §2.3, `Route.chooseTopK`). -/
@[macro_inline] def chooseTopK {E k : Nat} (score : Fin E → α) (hk : k ≤ E) : Route E k where
  slot := topKSlots score hk
  injective := topKSlots_injective score hk

/-- `chooseTopK` is a top-k (report `Route.chooseTopK_isTopK`). -/
theorem chooseTopK_isTopK {E k : Nat} (score : Fin E → α) (hk : k ≤ E) :
    (chooseTopK score hk).IsTopK score :=
  topKSlots_isTopK score hk

/-- The checker accepts the route `topKSlots` computes. -/
theorem checkRoute_topKSlots {E k : Nat} (score : Fin E → α) (hk : k ≤ E) :
    checkRoute score (topKSlots score hk) = true :=
  (checkRoute_iff score _).mpr ⟨topKSlots_injective score hk, topKSlots_isTopK score hk⟩

/-- A route accepted by the checker, as a `Route` with its top-k certificate. -/
@[macro_inline] def Route.ofChecked {E k : Nat} (score : Fin E → α) (slot : Fin k → Fin E)
    (h : checkRoute score slot = true) : Route E k where
  slot := slot
  injective := ((checkRoute_iff score slot).mp h).1

theorem Route.ofChecked_isTopK {E k : Nat} (score : Fin E → α) (slot : Fin k → Fin E)
    (h : checkRoute score slot = true) : (Route.ofChecked score slot h).IsTopK score :=
  ((checkRoute_iff score slot).mp h).2

end LinearOrder

end Routing

end KimiK3
