module

public import KimiK3.Channel.Route

/-!
# A top-k set is unique (closes "runtime top-k" with the model's own route)

Under the tie rule `Routing.Beats`, the experts of any injective top-k route are exactly the
experts of rank below `k` (`mem_image_iff_rank_lt`). Hence a route produced at run time (say by
a GPU kernel) that passes `checkRoute` chooses the **same set** of experts as the model's
`topKSlots` (`checkRoute_same_experts`); only the slot order may differ.
-/

@[expose] public section

namespace KimiK3

/-- The count of a disjunction is at most the sum of the counts. -/
theorem finCount_or_le {n : Nat} (p q : Fin n → Bool) :
    finCount n (fun i => p i || q i) ≤ finCount n p + finCount n q := by
  induction n with
  | zero => exact Nat.le_refl 0
  | succ n ih =>
    rw [finCount_succ, finCount_succ, finCount_succ]
    have := ih (fun i => p i.castSucc) (fun i => q i.castSucc)
    cases p (Fin.last n) <;> cases q (Fin.last n) <;> simp <;> omega

/-- At most one index equals a given one. -/
theorem finCount_eq_le_one {n : Nat} (a : Fin n) : finCount n (fun i => decide (a = i)) ≤ 1 := by
  induction n with
  | zero => exact a.elim0
  | succ n ih =>
    rw [finCount_succ]
    by_cases ha : a = Fin.last n
    · subst ha
      have : finCount n (fun i => decide (Fin.last n = i.castSucc)) = 0 :=
        finCount_eq_zero (fun i => decide_eq_false (fun h => by
          have := congrArg Fin.val h; simp at this; omega))
      rw [this]; simp
    · have hlt : a.val < n := by
        have := a.isLt; have : a.val ≠ n := fun e => ha (Fin.ext e); omega
      have hih := ih ⟨a.val, hlt⟩
      have e1 : (fun i : Fin n => decide (a = i.castSucc)) = fun i => decide (⟨a.val, hlt⟩ = i) := by
        funext i; apply decide_eq_decide.mpr
        constructor
        · intro h; apply Fin.ext; have := congrArg Fin.val h; simp at this; exact this
        · intro h; apply Fin.ext; have := congrArg Fin.val h; simp at this; exact this
      rw [e1]
      have hd : decide (a = Fin.last n) = false := decide_eq_false ha
      rw [hd]; simpa using hih

namespace Routing

/-- Whether expert `x` is in the image of the slots. -/
def inImage {E k : Nat} (slot : Fin k → Fin E) (x : Fin E) : Bool :=
  anyFin k (fun j => decide (slot j = x))

theorem inImage_iff {E k : Nat} (slot : Fin k → Fin E) (x : Fin E) :
    inImage slot x = true ↔ ∃ j, slot j = x := by
  unfold inImage; rw [anyFin_iff]; simp

/-- `k` slots hold at most `k` experts. -/
theorem finCount_inImage_le {E : Nat} : (k : Nat) → (slot : Fin k → Fin E) →
    finCount E (inImage slot) ≤ k
  | 0, _ => by
    exact Nat.le_of_eq (finCount_eq_zero (fun _ => rfl))
  | k + 1, slot => by
    have h1 := finCount_or_le (inImage (fun j : Fin k => slot ⟨j.val, by omega⟩))
      (fun i => decide (slot ⟨k, by omega⟩ = i))
    have h2 := finCount_inImage_le k (fun j : Fin k => slot ⟨j.val, by omega⟩)
    have h3 := finCount_eq_le_one (slot ⟨k, by omega⟩)
    have e : inImage slot = fun i => inImage (fun j : Fin k => slot ⟨j.val, by omega⟩) i ||
        decide (slot ⟨k, by omega⟩ = i) := rfl
    rw [e]; omega

/-- Injective slots hold exactly `k` experts (at least `k`). -/
theorem le_finCount_inImage {E : Nat} : (k : Nat) → (slot : Fin k → Fin E) →
    (∀ i j, slot i = slot j → i = j) → k ≤ finCount E (inImage slot)
  | 0, _, _ => Nat.zero_le _
  | k + 1, slot, hinj => by
    let slot' : Fin k → Fin E := fun j => slot ⟨j.val, by omega⟩
    have h2 := le_finCount_inImage k slot' (fun i j h => by
      have := hinj _ _ h; apply Fin.ext; have := congrArg Fin.val this; simpa using this)
    have e : inImage slot = fun x => inImage slot' x || decide (slot ⟨k, by omega⟩ = x) := rfl
    have hnot : inImage slot' (slot ⟨k, by omega⟩) = false := by
      cases h : inImage slot' (slot ⟨k, by omega⟩)
      · rfl
      · obtain ⟨j, hj⟩ := (inImage_iff _ _).mp h
        have := congrArg Fin.val (hinj _ _ hj); simp at this; omega
    have := finCount_lt_finCount (p := inImage slot')
      (q := fun x => inImage slot' x || decide (slot ⟨k, by omega⟩ = x))
      (fun x hx => by simp [hx]) (j := slot ⟨k, by omega⟩) hnot (by simp)
    rw [e]; omega

variable {α : Type} [LT α] [LE α] [DecidableRel (α := α) (· < ·)] [DecidableRel (α := α) (· ≤ ·)]
  [Std.IsLinearOrder α] [Std.LawfulOrderLT α]

/-- **The top-k set is unique**: in an injective top-k route, an expert is chosen iff its rank
is below `k`. -/
theorem mem_image_iff_rank_lt {E k : Nat} (score : Fin E → α) (slot : Fin k → Fin E)
    (hinj : ∀ i j, slot i = slot j → i = j) (htop : IsTopK score slot) (e : Fin E) :
    (∃ j, slot j = e) ↔ rank score e < k := by
  constructor
  · rintro ⟨j, rfl⟩
    have hsub : ∀ x, decide (Beats score x (slot j)) = true → inImage slot x = true := by
      intro x hx
      cases h : inImage slot x
      · have hnot : ∀ i, slot i ≠ x := fun i hi => by
          have := (inImage_iff slot x).mpr ⟨i, hi⟩; rw [h] at this; cases this
        exact absurd (of_decide_eq_true hx) (beats_asymm score (htop j x hnot))
      · rfl
    have hlt := finCount_lt_finCount (p := fun x => decide (Beats score x (slot j)))
      (q := inImage slot) hsub (j := slot j) (decide_eq_false (beats_irrefl score _))
      ((inImage_iff slot _).mpr ⟨j, rfl⟩)
    have := finCount_inImage_le k slot
    unfold rank; omega
  · intro hr
    cases Classical.em (∃ j, slot j = e) with
    | inl h => exact h
    | inr h =>
      exfalso
      have hsub : ∀ x, inImage slot x = true → decide (Beats score x e) = true := by
        intro x hx
        obtain ⟨i, rfl⟩ := (inImage_iff slot x).mp hx
        exact decide_eq_true (htop i e (fun j hj => h ⟨j, hj⟩))
      have h1 := finCount_le_finCount hsub
      have h2 := le_finCount_inImage k slot hinj
      unfold rank at hr; omega

/-- **Runtime top-k closes**: a route that passes the checker chooses exactly the experts of the
model's own route `topKSlots` (possibly in another slot order). -/
theorem checkRoute_same_experts {E k : Nat} (score : Fin E → α) (hk : k ≤ E)
    (slot : Fin k → Fin E) (h : checkRoute score slot = true) (e : Fin E) :
    (∃ j, slot j = e) ↔ ∃ j, topKSlots score hk j = e := by
  have ⟨hinj, htop⟩ := (checkRoute_iff score slot).mp h
  rw [mem_image_iff_rank_lt score slot hinj htop,
    mem_image_iff_rank_lt score _ (topKSlots_injective score hk) (topKSlots_isTopK score hk)]

end Routing

end KimiK3
