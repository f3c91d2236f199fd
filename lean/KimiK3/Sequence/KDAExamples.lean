module

public import KimiK3.Sequence.CausalScan
public import KimiK3.Sequence.KDA
public import KimiK3.Core.ScalarFacts

/-!
# KDA worked examples (k3-spec §2.2, "Scalar intuition" and "Toy Lean run")

With `d_k = d_v = 1` and `k = q = 1` the KDA update is the scalar delta rule
`s' = α s + β (v − α s)` (`step_scalar`). Proved over every ordered scalar field:

* `s = 6, α = 0.8, v = 10, β = 0.5` gives `7.4`; `β = 1` gives exactly `v = 10`; `β = 0` only
  decays (`4.8`);
* order sensitivity from `s = 0`, `α = β = 0.5`: values `2` then `10` end at `5.25`, values `10`
  then `2` end at `2.25` (`scan_two_then_ten`, `scan_ten_then_two`);
* the toy 2×1 run (`q = k = [1, 0]`, `v = [3]`, retention `[1, 1]`, `β = 1`) reads `3`
  (`toy_step_reads_three`).

The same runs are evaluated at `Float` in `Checks.lean`.
-/

@[expose] public section

namespace KimiK3

namespace KDA

variable {α : Type}

section Field

variable [ScalarField α]

/-- **The 1×1 KDA step is the scalar delta rule** (output and state). -/
theorem step_scalar (s a v b : α) :
    (step (scalarState s) (scalarInput a v b)).2 0 = scalarDelta s a v b ∧
      (step (scalarState s) (scalarInput a v b)).1 = scalarState (scalarDelta s a v b) := by
  constructor
  · rw [step_snd, read_apply, finSum_one, update_get2, finSum_one]
    simp only [scalarInput, scalarState, scalarDelta]; grind
  · rw [step_fst]; funext i j
    have hi : i = 0 := Fin.ext (by omega)
    have hj : j = 0 := Fin.ext (by omega)
    subst hi; subst hj
    rw [update_get2, finSum_one]
    simp only [scalarInput, scalarState, scalarDelta]; grind

/-- **Toy run**: from the zero 2×1 state the toy input reads `3` at output coordinate 0. -/
theorem toy_step_reads_three :
    (step (State.zero 2 1) (toyInput (α := α))).2 0 = 3 := by
  rw [step_snd, read_apply]
  simp only [finSum_succ, finSum_zero, update_get2, toyInput, State.zero]
  simp
  grind

end Field

section Ordered

variable [OrderedScalarField α]

/-- `s = 6, α = 0.8, v = 10, β = 0.5`: decayed prediction `4.8`, error `5.2`, new memory `7.4`. -/
theorem scalarDelta_example : scalarDelta (6 : α) (4 / 5) 10 (1 / 2) = 37 / 5 := by
  unfold scalarDelta; grind

/-- With `β = 1` the new memory is exactly `v = 10`. -/
theorem scalarDelta_example_beta_one : scalarDelta (6 : α) (4 / 5) 10 1 = 10 := by
  unfold scalarDelta; grind

/-- With `β = 0` only the decay is applied: `0.8 · 6 = 4.8`. -/
theorem scalarDelta_example_beta_zero : scalarDelta (6 : α) (4 / 5) 10 0 = 24 / 5 := by
  unfold scalarDelta; grind

/-- Order sensitivity: from `s = 0`, `α = β = 0.5`, values `2` then `10` end at `5.25`. -/
theorem scan_two_then_ten :
    scalarDelta (scalarDelta (0 : α) (1 / 2) 2 (1 / 2)) (1 / 2) 10 (1 / 2) = 21 / 4 := by
  unfold scalarDelta; grind

/-- Order sensitivity: from `s = 0`, `α = β = 0.5`, values `10` then `2` end at `2.25`. -/
theorem scan_ten_then_two :
    scalarDelta (scalarDelta (0 : α) (1 / 2) 10 (1 / 2)) (1 / 2) 2 (1 / 2) = 9 / 4 := by
  unfold scalarDelta; grind

/-- The same order sensitivity through the real KDA scan of two 1×1 tokens. -/
theorem run_two_then_ten :
    (CausalScan.run step (scalarState (0 : α))
      [scalarInput (1 / 2) 2 (1 / 2), scalarInput (1 / 2) 10 (1 / 2)]).1 = scalarState (21 / 4) := by
  simp only [CausalScan.run_cons, CausalScan.run_nil, (step_scalar _ _ _ _).2]
  rw [scan_two_then_ten]

end Ordered

end KDA

end KimiK3
