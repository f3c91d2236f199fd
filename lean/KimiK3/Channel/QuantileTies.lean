module

public import KimiK3.Channel.QuantileThreshold

/-!
# Quantile Balancing: tie resolution (report App. C; k3-spec §2.8, tie example)

With tied values no strict threshold routes exactly `k` tokens (`tie_example`: margins `{0, 0}`,
`k = 1`). The report gives no rule; this project resolves ties **by index**, the rule of
`Routing.Beats` (lower index wins):

**Rule** (`tieRouted`). With bias `β` and target load `k`, route every token whose required bias
is `< β`; among the tokens tied at `β`, route the lowest-indexed ones, as many as are still
missing (`k − #{t < β}`).

* `tieRoutedCount_eq`: it routes `max (#{t < β}) (min k #{t ≤ β})` tokens, for every `β`;
* `tieRoutedCount_eq_target`: exactly `k` whenever `#{t < β} ≤ k ≤ #{t ≤ β}`; in margins this is
  the condition of `coordinateObjective_minimum_iff`, so at every minimizer θ of `F_k` the tie
  rule with bias `−θ` routes exactly `k` (`tieRoutedCount_eq_target_of_minimum`);
* `tieRoutedCount_kthSmallest`: exactly `k` at the `k`-th smallest value `q`, which is unique
  (`isKthSmallest_unique`), so the routed set is a function of the values and `k` alone;
* `tieRouted_eq_of_no_tie`: without a value at `β` the rule is the strict rule `t < β`.

At the histogram's estimate `β` (`QuantileThreshold.lean`) the rule can still miss `k`: the
estimate need not satisfy `#{t < β} ≤ k ≤ #{t ≤ β}`; the exact count needs the exact value `q`.
-/

@[expose] public section

namespace KimiK3

namespace QuantileBalancing

variable {α : Type}

/-- Indices before `i` that pass `p`: `#{j < i | p j}`. -/
def countBefore {n : Nat} (p : Fin n → Bool) (i : Fin n) : Nat :=
  finCount i.val (fun j => p ⟨j.val, Nat.lt_trans j.isLt i.isLt⟩)

/-- `t` is tied with `β`: `t ≤ β ∧ β ≤ t` (no decidable equality needed). -/
def isTie [Scalar α] (β t : α) : Bool := decide (t ≤ β) && decide (β ≤ t)

/-- **Tie resolution by index** (this project's rule; report App. C leaves it open): token `i`
is routed with bias `β` and target `k` iff `t_i < β`, or `t_i = β` and fewer than
`k − #{t < β}` tied tokens come before it. -/
def tieRouted [Scalar α] {n : Nat} (values : Fin n → α) (β : α) (k : Nat) (i : Fin n) : Bool :=
  decide (values i < β) ||
    (isTie β (values i) &&
      decide (countBefore (fun j => isTie β (values j)) i < k - belowCount values β))

/-- The number of tokens the tie rule routes. -/
def tieRoutedCount [Scalar α] {n : Nat} (values : Fin n → α) (β : α) (k : Nat) : Nat :=
  finCount n (tieRouted values β k)

/-- Taking the first `r` indices that pass `p` takes `min r #p` of them. -/
theorem finCount_first {n : Nat} (p : Fin n → Bool) (r : Nat) :
    finCount n (fun i => p i && decide (countBefore p i < r)) = min r (finCount n p) := by
  induction n with
  | zero => simp [finCount]
  | succ n ih =>
    rw [finCount_succ, finCount_succ]
    have e1 : ∀ i : Fin n, countBefore p i.castSucc = countBefore (fun j => p j.castSucc) i :=
      fun _ => rfl
    have e2 : countBefore p (Fin.last n) = finCount n (fun j => p j.castSucc) := rfl
    simp only [e1, e2]
    rw [ih (fun j => p j.castSucc)]
    cases p (Fin.last n)
    · simp
    · simp only [Bool.true_and, decide_eq_true_eq]
      split <;> simp <;> omega

section Ordered

variable [OrderedScalarField α]

/-- `#{t ≤ β} = #{t < β} + #{t = β}`. -/
theorem atMostCount_eq {n : Nat} (values : Fin n → α) (β : α) :
    atMostCount values β = belowCount values β + finCount n (fun i => isTie β (values i)) := by
  unfold atMostCount belowCount
  rw [finCount_add_of_disjoint (fun i => by simp only [isTie, Bool.and_eq_true, decide_eq_true_eq]; grind)]
  exact finCount_congr (fun i => Bool.eq_iff_iff.mpr (by
    simp only [isTie, Bool.or_eq_true, Bool.and_eq_true, decide_eq_true_eq]; grind))

/-- **The tie rule's count**: `max (#{t < β}) (min k #{t ≤ β})`, for every bias `β`. -/
theorem tieRoutedCount_eq {n : Nat} (values : Fin n → α) (β : α) (k : Nat) :
    tieRoutedCount values β k = max (belowCount values β) (min k (atMostCount values β)) := by
  have h1 : tieRoutedCount values β k = belowCount values β +
      finCount n (fun i => isTie β (values i) &&
        decide (countBefore (fun j => isTie β (values j)) i < k - belowCount values β)) := by
    unfold tieRoutedCount tieRouted belowCount
    rw [finCount_add_of_disjoint (fun i => by
      simp only [isTie, Bool.and_eq_true, decide_eq_true_eq]; grind)]
  have h2 : finCount n (fun i => isTie β (values i) &&
        decide (countBefore (fun j => isTie β (values j)) i < k - belowCount values β)) =
      min (k - belowCount values β) (finCount n (fun i => isTie β (values i))) :=
    finCount_first _ _
  have h3 := atMostCount_eq values β
  omega

/-- **Exact load under ties**: if `#{t < β} ≤ k ≤ #{t ≤ β}`, the tie rule routes exactly `k`. -/
theorem tieRoutedCount_eq_target {n : Nat} {values : Fin n → α} {β : α} {k : Nat}
    (h1 : belowCount values β ≤ k) (h2 : k ≤ atMostCount values β) :
    tieRoutedCount values β k = k := by
  rw [tieRoutedCount_eq]; omega

/-- At the `k`-th smallest value the tie rule routes exactly `k` tokens. -/
theorem tieRoutedCount_kthSmallest {n : Nat} {values : Fin n → α} {k : Nat} {q : α}
    (hq : IsKthSmallest k values q) : tieRoutedCount values q k = k :=
  tieRoutedCount_eq_target (Nat.le_of_lt hq.1) hq.2

/-- **Determinism**: the `k`-th smallest value is unique, so the tie rule at it routes a set
determined by the values and `k` alone. -/
theorem isKthSmallest_unique {n : Nat} {values : Fin n → α} {k : Nat} {q q' : α}
    (hq : IsKthSmallest k values q) (hq' : IsKthSmallest k values q') : q = q' := by
  unfold IsKthSmallest belowCount atMostCount at hq hq'
  have key : ∀ {a b : α}, a < b → finCount n (fun i => decide (values i ≤ a)) ≤
      finCount n (fun i => decide (values i < b)) := fun hab =>
    finCount_le_finCount (fun i hi => by simp only [decide_eq_true_eq] at hi ⊢; grind)
  rcases lt_or_le' q q' with h | h
  · have := key h; omega
  · rcases lt_or_eq_of_le' h with h | h
    · have := key h; omega
    · exact h.symm

/-- **Every minimizer of the coordinate objective routes exactly `k` under the tie rule**
(App. C Eq. 24, corrected): if θ minimizes `F_k` for the margins `m`, the tie rule with the
required biases `−m` and bias `−θ` routes exactly `k` tokens, ties included. -/
theorem tieRoutedCount_eq_target_of_minimum {n : Nat} {k : Nat} {margins : Fin n → α} {θ : α}
    (hMin : ∀ c, coordinateObjective (k : α) margins θ ≤ coordinateObjective (k : α) margins c) :
    tieRoutedCount (fun i => -margins i) (-θ) k = k := by
  obtain ⟨h1, h2⟩ := (coordinateObjective_minimum_iff (k : α) margins θ).mp hMin
  have e1 : belowCount (fun i => -margins i) (-θ) = exceedanceCount margins θ :=
    finCount_congr (fun i => decide_eq_decide.mpr (by grind))
  have e2 : atMostCount (fun i => -margins i) (-θ) = atLeastCount margins θ :=
    finCount_congr (fun i => decide_eq_decide.mpr (by grind))
  apply tieRoutedCount_eq_target
  · rw [e1]; exact le_of_natCast_le h1
  · rw [e2]; exact le_of_natCast_le h2

/-- Without a value tied at `β`, the tie rule is the strict rule `t < β`. -/
theorem tieRouted_eq_of_no_tie {n : Nat} {values : Fin n → α} {β : α} (k : Nat)
    (h : ∀ i, isTie β (values i) = false) (i : Fin n) :
    tieRouted values β k i = decide (values i < β) := by
  simp [tieRouted, h i]

end Ordered

end QuantileBalancing

end KimiK3
