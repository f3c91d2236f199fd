module

public import KimiK3.Channel.QuantileTies
public import KimiK3.Exec.RatScalar

/-!
# Quantile Balancing's histogram, worked exactly at `Rat` (report App. D)

Layout: 8 bins of width `1/4` from 0 (range `[0, 2]`). Every statement is evaluated by the
kernel (`decide +kernel`) at the exact rationals of `Exec/RatScalar.lean`.

* **Spread values** `t = (3/10, 1/2, 1/2, 9/10, 13/10, 17/10)`, target `k = 3`: counts
  `(0, 1, 2, 1, 0, 1, 1, 0)`, equal to the sum of the two shards' histograms (tokens 0, 2, 4 and
  1, 3, 5); bin 2 is selected (cumulative 1 before it, 3 through it), fraction `2/2`, estimate
  `3/4`; the 3rd smallest value is `1/2`, so the error `1/4` is exactly one bin width (the bound
  is tight); bias `3/4` routes exactly 3 tokens (`spread_example`).
* **Tied values** `t = (1/2, 1/2, 1/2, 1/2)`, `k = 2`: all 4 in bin 2, estimate `5/8`, within
  `1/8` of the true `1/2`, yet it routes **4** tokens: the count guarantee (`< k + count b = 6`)
  is all the width bound gives. The tie rule at the true value `1/2` routes tokens 0 and 1:
  exactly 2 (`tied_example`).
-/

@[expose] public section

noncomputable section

namespace KimiK3

namespace QuantileBalancing

/-- The example layout: 8 bins of width `1/4` from 0. -/
def exampleConfig : HistogramConfig Rat := { lower := 0, width := 1 / 4, bins := 8 }

/-- The spread required biases `(3/10, 1/2, 1/2, 9/10, 13/10, 17/10)`. -/
def spreadValues : Fin 6 → Rat :=
  fun i => [3 / 10, 1 / 2, 1 / 2, 9 / 10, 13 / 10, 17 / 10].getD i.val 0

/-- Two shards: even tokens on rank 0, odd tokens on rank 1. -/
def spreadShard : Fin 6 → Fin 2 := fun i => ⟨i.val % 2, Nat.mod_lt _ (by decide)⟩

/-- Four tied required biases `1/2`. -/
def tiedValues : Fin 4 → Rat := fun _ => 1 / 2

/-- **Spread example**: counts, pooling, selection, estimate `3/4`, true quantile `1/2` (error
one bin width), routed count 3. -/
theorem spread_example :
    (List.range 8).map (binCount exampleConfig spreadValues) = [0, 1, 2, 1, 0, 1, 1, 0] ∧
    (List.range 8).map (pool (shardHistogram exampleConfig spreadValues spreadShard)) =
      [0, 1, 2, 1, 0, 1, 1, 0] ∧
    selectBin (binCount exampleConfig spreadValues) 8 3 = some 2 ∧
    estimate exampleConfig (binCount exampleConfig spreadValues) 3 2 = 3 / 4 ∧
    (belowCount spreadValues (1 / 2) = 1 ∧ atMostCount spreadValues (1 / 2) = 3) ∧
    belowCount spreadValues (3 / 4) = 3 := by
  decide +kernel

/-- **Tied example**: estimate `5/8` routes 4 tokens for `k = 2`; the tie rule at the true
value `1/2` routes tokens 0 and 1, exactly 2. -/
theorem tied_example :
    selectBin (binCount exampleConfig tiedValues) 8 2 = some 2 ∧
    estimate exampleConfig (binCount exampleConfig tiedValues) 2 2 = 5 / 8 ∧
    belowCount tiedValues (5 / 8) = 4 ∧
    (belowCount tiedValues (1 / 2) = 0 ∧ atMostCount tiedValues (1 / 2) = 4) ∧
    (tieRouted tiedValues (1 / 2) 2 0, tieRouted tiedValues (1 / 2) 2 1, tieRouted tiedValues (1 / 2) 2 2,
      tieRouted tiedValues (1 / 2) 2 3) = (true, true, false, false) ∧
    tieRoutedCount tiedValues (1 / 2) 2 = 2 := by
  decide +kernel

/-- The 3rd smallest spread value is `1/2`, and the estimate is within one bin width of it, as
`estimate_within_width` guarantees (here with equality). -/
theorem spread_kthSmallest :
    IsKthSmallest 3 spreadValues (1 / 2) ∧
      estimate exampleConfig (binCount exampleConfig spreadValues) 3 2 - 1 / 2 = exampleConfig.width := by
  unfold IsKthSmallest
  decide +kernel

end QuantileBalancing

end KimiK3
