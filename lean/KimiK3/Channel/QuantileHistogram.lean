module

public import KimiK3.Channel.Quantile

/-!
# Quantile Balancing: the pooled histogram (report App. D; k3-spec §2.8)

QB estimates each expert's bias from a histogram of **required biases**
`t_i = cutoff_i − rawScore_i` (the negated margins of `Quantile.lean`): token `i` is routed with
bias `β` iff `t_i < β` (`routedTokenCount_eq_belowCount`). The histogram has `bins` bins of
width `width` from `lower`: bin `b` holds the values in `[edge b, edge (b+1))`,
`edge b = lower + b·width`; values below `lower` go to bin 0 and values at or above
`edge bins` to the last bin (clamping, so every value lies in exactly one bin and no count is
lost). Bin membership is stated with comparisons only (`inBin`), so no floor is needed over an
abstract field.

* **Pooling** (`shardHistogram_pooled`): assign each token to any rank or micro-batch
  (`shard : Fin n → Fin R`); the sum of the per-shard histograms is the histogram of all tokens.
* **Cumulative counts** (`prefixCount_binCount`): the tokens in bins `< b` are exactly those
  below edge `b` (`belowEdge`, clamped), so the histogram sees the same cumulative counts as
  the exact values at every interior edge.
* `routedTokenCount_eq_belowCount`: the routing count of `Quantile.lean` in these terms.
-/

@[expose] public section

namespace KimiK3

namespace QuantileBalancing

/-- A uniform histogram layout (report App. D; the bin configuration is not stated, k3-spec §6
item 9): `bins` bins of width `width` from `lower`. -/
structure HistogramConfig (α : Type) where
  /-- Lower edge of bin 0. -/
  lower : α
  /-- Width of every bin. -/
  width : α
  /-- Number of bins. -/
  bins : Nat

variable {α : Type}

namespace HistogramConfig

variable [Scalar α] (cfg : HistogramConfig α)

/-- Edge `b` of the layout: `lower + b·width` (report App. D). `macro_inline`: generic code of
another module calls it (see Core's `Kernel`). -/
@[macro_inline] def edge (b : Nat) : α := cfg.lower + (b : α) * cfg.width

/-- Value `t` lies in bin `b` (report App. D), clamped: `b < bins`, `edge b ≤ t` unless `b = 0`,
and `t < edge (b+1)` unless `b` is the last bin. -/
def inBin (b : Nat) (t : α) : Bool :=
  decide (b < cfg.bins) && (decide (b = 0) || decide (cfg.edge b ≤ t)) &&
    (decide (b + 1 = cfg.bins) || decide (t < cfg.edge (b + 1)))

/-- Value `t` lies in a bin `< b` (clamped): `b ≠ 0`, and `t < edge b` unless `b ≥ bins`. -/
def belowEdge (b : Nat) (t : α) : Bool :=
  decide (b ≠ 0) && (decide (cfg.bins ≤ b) || decide (t < cfg.edge b))

end HistogramConfig

/-- The count of bin `b`: `#{i | t_i ∈ bin b}` (report App. D). Bins `≥ bins` count 0. -/
def binCount [Scalar α] (cfg : HistogramConfig α) {n : Nat} (values : Fin n → α) (b : Nat) : Nat :=
  finCount n (fun i => cfg.inBin b (values i))

/-- The histogram of the tokens of one shard (rank or micro-batch) `r` (report App. D):
`#{i | shard i = r ∧ t_i ∈ bin b}`. -/
def shardHistogram [Scalar α] (cfg : HistogramConfig α) {n R : Nat} (values : Fin n → α)
    (shard : Fin n → Fin R) (r : Fin R) (b : Nat) : Nat :=
  finCount n (fun i => decide (shard i = r) && cfg.inBin b (values i))

/-- Pooling histograms across shards: bin by bin, their sum (report App. D: "counts are
additive"). -/
def pool {R : Nat} (hists : Fin R → Nat → Nat) (b : Nat) : Nat := natSum R (fun r => hists r b)

/-- Cumulative count of the bins `< b`: `h 0 + … + h (b−1)` (report App. D). -/
def prefixCount (h : Nat → Nat) : Nat → Nat
  | 0 => 0
  | b + 1 => prefixCount h b + h b

/-- Tokens whose required bias is below `β`: `#{i | t_i < β}`, the tokens bias `β` routes.
`macro_inline` (generic code of another module calls it). -/
@[macro_inline] def belowCount [Scalar α] {n : Nat} (values : Fin n → α) (β : α) : Nat :=
  finCount n (fun i => decide (values i < β))

/-- Tokens whose required bias is at most `β`: `#{i | t_i ≤ β}` (`macro_inline`, as `belowCount`). -/
@[macro_inline] def atMostCount [Scalar α] {n : Nat} (values : Fin n → α) (β : α) : Nat :=
  finCount n (fun i => decide (values i ≤ β))

/-! ## Counting facts -/

/-- Counts of disjoint tests add. -/
theorem finCount_add_of_disjoint {n : Nat} {p q : Fin n → Bool}
    (h : ∀ i, ¬ (p i = true ∧ q i = true)) :
    finCount n p + finCount n q = finCount n (fun i => p i || q i) := by
  induction n with
  | zero => rfl
  | succ n ih =>
    have := ih (p := fun i => p i.castSucc) (q := fun i => q i.castSucc) (fun i => h i.castSucc)
    rw [finCount_succ, finCount_succ, finCount_succ, ← this]
    have hl := h (Fin.last n)
    cases hp : p (Fin.last n) <;> cases hq : q (Fin.last n) <;> simp [hp, hq] at hl ⊢ <;> omega

/-- A count split by shards: summing each shard's count gives the count of all indices. -/
theorem natSum_finCount_shard {n R : Nat} (shard : Fin n → Fin R) (p : Fin n → Bool) :
    natSum R (fun r => finCount n (fun i => decide (shard i = r) && p i)) = finCount n p := by
  induction n with
  | zero => exact natSum_zero R
  | succ n ih =>
    simp only [finCount_succ]
    rw [natSum_add, ih (fun i => shard i.castSucc) (fun i => p i.castSucc)]
    congr 1
    cases p (Fin.last n)
    · simp only [Bool.and_false, Bool.false_eq_true, if_false]; exact natSum_zero R
    · simp only [Bool.and_true, decide_eq_true_eq]; exact natSum_indicator _ 1

/-- **Pooling is exact** (report App. D): whatever the assignment of tokens to ranks or
micro-batches, the pooled per-shard histograms are the histogram of all tokens. -/
theorem shardHistogram_pooled [Scalar α] (cfg : HistogramConfig α) {n R : Nat}
    (values : Fin n → α) (shard : Fin n → Fin R) (b : Nat) :
    pool (shardHistogram cfg values shard) b = binCount cfg values b :=
  natSum_finCount_shard shard _

/-- Cumulative counts commute with pooling. -/
theorem prefixCount_pool {R : Nat} (hists : Fin R → Nat → Nat) (b : Nat) :
    prefixCount (pool hists) b = natSum R (fun r => prefixCount (hists r) b) := by
  induction b with
  | zero => exact (natSum_zero R).symm
  | succ b ih => show prefixCount (pool hists) b + pool hists b = _; rw [ih]; exact (natSum_add R _ _).symm

/-- Cumulative counts are monotone in the bin. -/
theorem prefixCount_mono (h : Nat → Nat) {b c : Nat} (hbc : b ≤ c) : prefixCount h b ≤ prefixCount h c := by
  induction c with
  | zero => rw [Nat.le_zero.mp hbc]; exact Nat.le_refl _
  | succ c ih =>
    rcases Nat.lt_or_eq_of_le hbc with hlt | heq
    · have := ih (by omega); show _ ≤ prefixCount h c + h c; omega
    · rw [heq]; exact Nat.le_refl _

/-! ## The histogram's cumulative counts are the exact ones -/

section Ordered

variable [OrderedScalarField α] (cfg : HistogramConfig α)

theorem HistogramConfig.edge_zero : cfg.edge 0 = cfg.lower := by
  unfold HistogramConfig.edge; rw [Lean.Grind.Semiring.natCast_zero]; grind

theorem HistogramConfig.edge_succ (b : Nat) : cfg.edge (b + 1) = cfg.edge b + cfg.width := by
  unfold HistogramConfig.edge; rw [Lean.Grind.Semiring.natCast_succ]; grind

/-- Bin `b` is the step from "below edge `b`" to "below edge `b+1`" (needs `width ≥ 0`). -/
theorem HistogramConfig.belowEdge_succ (hBins : 0 < cfg.bins) (hWidth : 0 ≤ cfg.width)
    (b : Nat) (t : α) : cfg.belowEdge (b + 1) t = (cfg.belowEdge b t || cfg.inBin b t) := by
  have hmono := cfg.edge_succ b
  apply Bool.eq_iff_iff.mpr
  simp only [HistogramConfig.belowEdge, HistogramConfig.inBin, Bool.or_eq_true, Bool.and_eq_true,
    decide_eq_true_eq]
  grind

/-- No value lies both below edge `b` and in bin `b`. -/
theorem HistogramConfig.not_belowEdge_and_inBin (b : Nat) (t : α) :
    ¬ (cfg.belowEdge b t = true ∧ cfg.inBin b t = true) := by
  simp only [HistogramConfig.belowEdge, HistogramConfig.inBin, Bool.or_eq_true, Bool.and_eq_true,
    decide_eq_true_eq]
  grind

/-- **Cumulative counts are exact**: the tokens in bins `< b` are those below edge `b`
(clamped). -/
theorem prefixCount_binCount (hBins : 0 < cfg.bins) (hWidth : 0 ≤ cfg.width) {n : Nat}
    (values : Fin n → α) (b : Nat) :
    prefixCount (binCount cfg values) b = finCount n (fun i => cfg.belowEdge b (values i)) := by
  induction b with
  | zero =>
    exact (finCount_eq_zero (fun i => by simp [HistogramConfig.belowEdge])).symm
  | succ b ih =>
    show prefixCount (binCount cfg values) b + binCount cfg values b = _
    rw [ih, binCount, finCount_add_of_disjoint (fun i => cfg.not_belowEdge_and_inBin b (values i))]
    exact finCount_congr (fun i => (cfg.belowEdge_succ hBins hWidth b (values i)).symm)

/-- All tokens are counted: the cumulative count through the last bin is `n`. -/
theorem prefixCount_binCount_bins (hBins : 0 < cfg.bins) (hWidth : 0 ≤ cfg.width) {n : Nat}
    (values : Fin n → α) : prefixCount (binCount cfg values) cfg.bins = n := by
  rw [prefixCount_binCount cfg hBins hWidth]
  exact finCount_eq_self (fun i => by simp [HistogramConfig.belowEdge]; omega)

/-- Bias `β` routes the tokens whose required bias `cutoff_i − rawScore_i` is below `β`. -/
theorem routedTokenCount_eq_belowCount {n : Nat} (rawScore cutoff : Fin n → α) (β : α) :
    routedTokenCount rawScore cutoff β = belowCount (fun i => cutoff i - rawScore i) β := by
  unfold routedTokenCount belowCount
  exact finCount_congr (fun i => decide_eq_decide.mpr (by grind))

end Ordered

end QuantileBalancing

end KimiK3
