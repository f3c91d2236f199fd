module

public import KimiK3.Channel.QuantileHistogram

/-!
# Quantile Balancing: bin selection, interpolation and their guarantees (report App. D)

From a (pooled) histogram of required biases `t_i` (`QuantileHistogram.lean`) and a target load
`k`, QB picks a bias:

1. **Bin selection** (`selectBin`): scan the bins upward and take the first bin `b` whose
   cumulative count reaches `k`. It satisfies `IsSelectedBin`:
   `prefixCount b < k ≤ prefixCount (b+1)` (`selectBin_spec`), exists for `1 ≤ k ≤ n`
   (`selectBin_isSome`) and is the only bin that does (`isSelectedBin_unique`).
2. **Interpolation** (`estimate`): `edge b + ((k − prefixCount b) / count b)·width`, the report's
   linear interpolation inside the bin; the fraction lies in `(0, 1]` (`binFraction_pos`,
   `binFraction_le_one`), so the estimate lies in the chosen bin (`estimate_mem_bin`).

**What is guaranteed.**
* *Threshold* (`estimate_within_width`): the true quantile — the `k`-th smallest required bias
  `q` (`IsKthSmallest`: `#{t < q} < k ≤ #{t ≤ q}`) — lies in the chosen bin, so the estimate is
  within one bin width of it, provided `q` lies in the histogram's range (`lower ≤ q ≤ edge bins`,
  implied when all values do: `isKthSmallest_mem_range`).
* *Routed count* (`routedTokenCount_estimate`): the bias routes `r` tokens with
  `k ≤ r + count b` and `r < k + count b`, i.e. `|r − k| < count b` except `r = k − count b`.
  This is **all** that "within one bin width" gives in tokens: the error is bounded by the
  number of tokens that share the chosen bin, which the width alone does not bound (tied values
  put every token in one bin; `QuantileHistogramExample.lean`).
-/

@[expose] public section

namespace KimiK3

namespace QuantileBalancing

variable {α : Type}

/-- The first bin `b ≥ start` (at most `fuel` bins) whose cumulative count reaches `k`. -/
def firstReaching (h : Nat → Nat) (k : Nat) : Nat → Nat → Option Nat
  | _, 0 => none
  | b, fuel + 1 => if k ≤ prefixCount h (b + 1) then some b else firstReaching h k (b + 1) fuel

/-- **Bin selection** (report App. D): the first of the `bins` bins whose cumulative count
reaches the target load `k`. -/
def selectBin (h : Nat → Nat) (bins k : Nat) : Option Nat := firstReaching h k 0 bins

/-- Bin `b` holds the `k`-th smallest value: `prefixCount b < k ≤ prefixCount (b+1)`. -/
def IsSelectedBin (h : Nat → Nat) (k b : Nat) : Prop :=
  prefixCount h b < k ∧ k ≤ prefixCount h (b + 1)

/-- The interpolation fraction `(k − prefixCount b) / count b` inside bin `b` (report App. D). -/
def binFraction [Scalar α] (h : Nat → Nat) (k b : Nat) : α :=
  ((k - prefixCount h b : Nat) : α) / ((h b : Nat) : α)

/-- **The histogram estimate** of the `k`-th smallest required bias (report App. D, linear
interpolation): `edge b + binFraction·width`. -/
def estimate [Scalar α] (cfg : HistogramConfig α) (h : Nat → Nat) (k b : Nat) : α :=
  cfg.edge b + binFraction h k b * cfg.width

/-- `q` is the `k`-th smallest of the values: `#{t < q} < k ≤ #{t ≤ q}` (the true quantile the
histogram estimates; in margins, the `k`-th largest margin). -/
def IsKthSmallest [Scalar α] {n : Nat} (k : Nat) (values : Fin n → α) (q : α) : Prop :=
  belowCount values q < k ∧ k ≤ atMostCount values q

/-! ## Selection -/

theorem firstReaching_spec {h : Nat → Nat} {k : Nat} :
    ∀ (fuel start b : Nat), prefixCount h start < k → firstReaching h k start fuel = some b →
      IsSelectedBin h k b ∧ b < start + fuel
  | 0, _, _, _, hb => by simp [firstReaching] at hb
  | fuel + 1, start, b, hs, hb => by
    simp only [firstReaching] at hb
    split at hb
    · rename_i hk; cases hb; exact ⟨⟨hs, hk⟩, by omega⟩
    · rename_i hk
      have := firstReaching_spec fuel (start + 1) b (by omega) hb
      exact ⟨this.1, by omega⟩

theorem firstReaching_isSome {h : Nat → Nat} {k : Nat} :
    ∀ (fuel start : Nat), prefixCount h start < k → k ≤ prefixCount h (start + fuel) →
      ∃ b, firstReaching h k start fuel = some b
  | 0, _, hs, hk => by simp at hk; omega
  | fuel + 1, start, hs, hk => by
    simp only [firstReaching]
    split
    · exact ⟨_, rfl⟩
    · rename_i hk'
      exact firstReaching_isSome fuel (start + 1) (by omega) (by rw [Nat.add_assoc, Nat.add_comm 1]; exact hk)

/-- **What selection picks** (for `k ≥ 1`): a bin below `bins` holding the `k`-th value. -/
theorem selectBin_spec {h : Nat → Nat} {bins k b : Nat} (hk : 0 < k)
    (hb : selectBin h bins k = some b) : IsSelectedBin h k b ∧ b < bins := by
  have := firstReaching_spec bins 0 b (by show 0 < k; exact hk) hb
  exact ⟨this.1, by omega⟩

/-- Selection succeeds whenever `1 ≤ k ≤` the total count. -/
theorem selectBin_isSome {h : Nat → Nat} {bins k : Nat} (hk : 0 < k)
    (hn : k ≤ prefixCount h bins) : ∃ b, selectBin h bins k = some b :=
  firstReaching_isSome bins 0 (by show 0 < k; exact hk) (by rw [Nat.zero_add]; exact hn)

/-- **Selection is deterministic**: at most one bin satisfies `IsSelectedBin`. -/
theorem isSelectedBin_unique {h : Nat → Nat} {k b c : Nat} (hb : IsSelectedBin h k b)
    (hc : IsSelectedBin h k c) : b = c := by
  rcases Nat.lt_trichotomy b c with hlt | heq | hgt
  · have := prefixCount_mono h (show b + 1 ≤ c by omega); unfold IsSelectedBin at *; omega
  · exact heq
  · have := prefixCount_mono h (show c + 1 ≤ b by omega); unfold IsSelectedBin at *; omega

/-! ## Interpolation -/

section Ordered

variable [OrderedScalarField α]

/-- Casts of naturals are nonnegative (at `OrderedScalarField`; Core's needs `ScalarLaws`). -/
theorem natCast_nonneg (a : Nat) : (0 : α) ≤ (a : α) := by
  induction a with
  | zero => rw [Lean.Grind.Semiring.natCast_zero]; grind
  | succ a ih => rw [Lean.Grind.Semiring.natCast_succ]; have := zero_lt_one' (α := α); grind

/-- Casts of naturals are monotone. -/
theorem natCast_le_natCast {a b : Nat} (h : a ≤ b) : (a : α) ≤ (b : α) := by
  obtain ⟨k, rfl⟩ := Nat.exists_eq_add_of_le h
  have e : ((a + k : Nat) : α) = (a : α) + (k : α) := Lean.Grind.Semiring.natCast_add a k
  have := natCast_nonneg (α := α) k
  grind

/-- A positive natural is a positive scalar. -/
theorem natCast_pos {a : Nat} (h : 0 < a) : (0 : α) < (a : α) := by
  obtain ⟨k, rfl⟩ := Nat.exists_eq_add_of_le h
  have e : ((1 + k : Nat) : α) = 1 + (k : α) := by
    rw [Lean.Grind.Semiring.natCast_add, Lean.Grind.Semiring.natCast_one]
  have := natCast_nonneg (α := α) k
  have := zero_lt_one' (α := α)
  grind

/-- Casts of naturals reflect the order. -/
theorem le_of_natCast_le {a b : Nat} (h : (a : α) ≤ (b : α)) : a ≤ b := by
  apply Classical.byContradiction; intro hlt
  have h1 := natCast_le_natCast (α := α) (show b + 1 ≤ a by omega)
  have e : ((b + 1 : Nat) : α) = (b : α) + 1 := Lean.Grind.Semiring.natCast_succ b
  have := zero_lt_one' (α := α)
  grind

/-- The selected bin is not empty, and `1 ≤ k − prefixCount b ≤ count b`. -/
theorem IsSelectedBin.bounds {h : Nat → Nat} {k b : Nat} (hs : IsSelectedBin h k b) :
    0 < h b ∧ 0 < k - prefixCount h b ∧ k - prefixCount h b ≤ h b := by
  have : prefixCount h (b + 1) = prefixCount h b + h b := rfl
  unfold IsSelectedBin at hs; omega

theorem binFraction_pos {h : Nat → Nat} {k b : Nat} (hs : IsSelectedBin h k b) :
    0 < (binFraction h k b : α) := by
  obtain ⟨h1, h2, _⟩ := hs.bounds
  exact div_pos' (natCast_pos h2) (natCast_pos h1)

theorem binFraction_le_one {h : Nat → Nat} {k b : Nat} (hs : IsSelectedBin h k b) :
    (binFraction h k b : α) ≤ 1 := by
  obtain ⟨h1, _, h3⟩ := hs.bounds
  have hc := natCast_pos (α := α) h1
  have hle := natCast_le_natCast (α := α) h3
  unfold binFraction
  rw [Lean.Grind.Field.div_eq_mul_inv]
  have hinv := inv_pos' hc
  have hne : ((h b : Nat) : α) ≠ 0 := by grind
  have h1' : ((h b : Nat) : α) * ((h b : Nat) : α)⁻¹ = 1 := Lean.Grind.Field.mul_inv_cancel hne
  have := mul_le_mul_of_nonneg_right' hle (show (0 : α) ≤ ((h b : Nat) : α)⁻¹ by grind)
  grind

/-- **The estimate lies in the chosen bin**: `edge b ≤ estimate ≤ edge (b+1)` (`width ≥ 0`). -/
theorem estimate_mem_bin (cfg : HistogramConfig α) (hWidth : 0 ≤ cfg.width) {h : Nat → Nat}
    {k b : Nat} (hs : IsSelectedBin h k b) :
    cfg.edge b ≤ estimate cfg h k b ∧ estimate cfg h k b ≤ cfg.edge (b + 1) := by
  have hf0 := binFraction_pos (α := α) hs
  have hf1 := binFraction_le_one (α := α) hs
  have h0 := mul_nonneg' (show (0 : α) ≤ binFraction h k b by grind) hWidth
  have h1 := mul_le_mul_of_nonneg_right' hf1 hWidth
  rw [cfg.edge_succ]; unfold estimate; grind

/-! ## The guarantees -/

/-- Any bias in bin `b` routes between `prefixCount b` and `prefixCount (b+1)` tokens. -/
theorem belowCount_mem_of_mem_bin (cfg : HistogramConfig α) (hBins : 0 < cfg.bins)
    (hWidth : 0 ≤ cfg.width) {n : Nat} (values : Fin n → α) {b : Nat} (hb : b < cfg.bins) {β : α}
    (h1 : cfg.edge b ≤ β) (h2 : β ≤ cfg.edge (b + 1)) :
    prefixCount (binCount cfg values) b ≤ belowCount values β ∧
      belowCount values β ≤ prefixCount (binCount cfg values) (b + 1) := by
  rw [prefixCount_binCount cfg hBins hWidth, prefixCount_binCount cfg hBins hWidth]
  constructor <;> apply finCount_le_finCount <;> intro i hi <;>
    simp only [HistogramConfig.belowEdge, Bool.and_eq_true, Bool.or_eq_true, decide_eq_true_eq] at hi ⊢ <;>
    grind

/-- **Routed-count guarantee**: with the selected bin's estimate as bias, the number `r` of
routed tokens satisfies `k ≤ r + count b` and `r < k + count b`. -/
theorem belowCount_estimate (cfg : HistogramConfig α) (hBins : 0 < cfg.bins)
    (hWidth : 0 ≤ cfg.width) {n : Nat} (values : Fin n → α) {k b : Nat}
    (hs : IsSelectedBin (binCount cfg values) k b) (hb : b < cfg.bins) :
    k ≤ belowCount values (estimate cfg (binCount cfg values) k b) + binCount cfg values b ∧
      belowCount values (estimate cfg (binCount cfg values) k b) < k + binCount cfg values b := by
  have hm := estimate_mem_bin cfg hWidth hs
  have hc := belowCount_mem_of_mem_bin cfg hBins hWidth values hb hm.1 hm.2
  have : prefixCount (binCount cfg values) (b + 1) =
    prefixCount (binCount cfg values) b + binCount cfg values b := rfl
  unfold IsSelectedBin at hs; omega

/-- The routed-count guarantee for the router (`routedTokenCount`, App. C's strict rule): the
required biases are `cutoff_i − rawScore_i`. -/
theorem routedTokenCount_estimate (cfg : HistogramConfig α) (hBins : 0 < cfg.bins)
    (hWidth : 0 ≤ cfg.width) {n : Nat} (rawScore cutoff : Fin n → α) {k b : Nat}
    (hs : IsSelectedBin (binCount cfg (fun i => cutoff i - rawScore i)) k b) (hb : b < cfg.bins) :
    let β := estimate cfg (binCount cfg (fun i => cutoff i - rawScore i)) k b
    let c := binCount cfg (fun i => cutoff i - rawScore i) b
    k ≤ routedTokenCount rawScore cutoff β + c ∧ routedTokenCount rawScore cutoff β < k + c := by
  simp only [routedTokenCount_eq_belowCount]
  exact belowCount_estimate cfg hBins hWidth _ hs hb

/-- **The true quantile lies in the selected bin** (when it lies in the histogram's range). -/
theorem isKthSmallest_mem_selectedBin (cfg : HistogramConfig α) (hBins : 0 < cfg.bins)
    (hWidth : 0 ≤ cfg.width) {n : Nat} {values : Fin n → α} {k b : Nat} {q : α}
    (hs : IsSelectedBin (binCount cfg values) k b) (hb : b < cfg.bins)
    (hq : IsKthSmallest k values q) (hLow : cfg.lower ≤ q) (hHigh : q ≤ cfg.edge cfg.bins) :
    cfg.edge b ≤ q ∧ q ≤ cfg.edge (b + 1) := by
  unfold IsSelectedBin at hs
  rw [prefixCount_binCount cfg hBins hWidth, prefixCount_binCount cfg hBins hWidth] at hs
  unfold IsKthSmallest belowCount atMostCount at hq
  have e0 := cfg.edge_zero
  constructor
  · apply Classical.byContradiction; intro hlt
    have : finCount n (fun i => decide (values i ≤ q)) ≤ finCount n (fun i => cfg.belowEdge b (values i)) := by
      apply finCount_le_finCount; intro i hi
      simp only [HistogramConfig.belowEdge, Bool.and_eq_true, Bool.or_eq_true, decide_eq_true_eq] at hi ⊢
      by_cases hb0 : b = 0
      · subst hb0; grind
      · grind
    omega
  · apply Classical.byContradiction; intro hlt
    have : finCount n (fun i => cfg.belowEdge (b + 1) (values i)) ≤ finCount n (fun i => decide (values i < q)) := by
      apply finCount_le_finCount; intro i hi
      simp only [HistogramConfig.belowEdge, Bool.and_eq_true, Bool.or_eq_true, decide_eq_true_eq] at hi ⊢
      by_cases hl : b + 1 = cfg.bins
      · rw [hl] at hlt; grind
      · grind
    omega

/-- If every value lies in `[lower, edge bins]`, so does the `k`-th smallest. -/
theorem isKthSmallest_mem_range (cfg : HistogramConfig α) {n : Nat} {values : Fin n → α} {k : Nat}
    {q : α} (hq : IsKthSmallest k values q)
    (hv : ∀ i, cfg.lower ≤ values i ∧ values i ≤ cfg.edge cfg.bins) :
    cfg.lower ≤ q ∧ q ≤ cfg.edge cfg.bins := by
  unfold IsKthSmallest belowCount atMostCount at hq
  constructor
  · apply Classical.byContradiction; intro hlt
    have : finCount n (fun i => decide (values i ≤ q)) = 0 :=
      finCount_eq_zero (fun i => by have := hv i; simp only [decide_eq_false_iff_not]; grind)
    omega
  · apply Classical.byContradiction; intro hlt
    have : finCount n (fun i => decide (values i < q)) = n :=
      finCount_eq_self (fun i => by have := hv i; simp only [decide_eq_true_eq]; grind)
    have := finCount_le (fun i => decide (values i ≤ q))
    omega

/-- **Interpolation error bound** (report App. D): the estimate is within one bin width of the
`k`-th smallest required bias, when that lies in the histogram's range. -/
theorem estimate_within_width (cfg : HistogramConfig α) (hBins : 0 < cfg.bins)
    (hWidth : 0 ≤ cfg.width) {n : Nat} {values : Fin n → α} {k b : Nat} {q : α}
    (hs : IsSelectedBin (binCount cfg values) k b) (hb : b < cfg.bins)
    (hq : IsKthSmallest k values q) (hLow : cfg.lower ≤ q) (hHigh : q ≤ cfg.edge cfg.bins) :
    estimate cfg (binCount cfg values) k b - q ≤ cfg.width ∧
      q - estimate cfg (binCount cfg values) k b ≤ cfg.width := by
  have hm := estimate_mem_bin cfg hWidth hs
  have hq' := isKthSmallest_mem_selectedBin cfg hBins hWidth hs hb hq hLow hHigh
  have := cfg.edge_succ b
  constructor <;> grind

end Ordered

end QuantileBalancing

end KimiK3
