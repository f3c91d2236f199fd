module

public import KimiK3.Exec.RatScalar
public import KimiK3.KimiLinear.Recurrence
public import KimiK3.KimiLinear.MoE

/-!
# Kimi Linear worked examples, exact at `Rat` (k3-spec §7)

Evaluated in the kernel (`decide +kernel`) at the exact rationals of `Exec/RatScalar.lean`; none
uses `exp`, `log`, `sigmoid` or `sqrt`, whose `Rat` stand-ins carry no meaning.

* transformers' recurrence order at the scalar delta rule `s = 6, α = 0.8, v = 10, β = 0.5`:
  state and readout **7.4** (`recurrentStep_scalar_eval`), hence K3's `KDA.step` reads 7.4
  too (`kda_step_scalar_via_recurrence`, through `recurrentStep_eq_step`);
* the toy 2×1 run reads **3** in transformers' order (`recurrentStep_toy_reads_three`);
* routed scaling at `ρ = 2.446` on raw scores `(0.8, 0.7, 0.6, 0.2)` with route `(2, 0)`:
  weights **3669/3500** and **1223/875**, `ρ · 3/7` and `ρ · 4/7`, summing to `ρ`
  (`scaledWeights_example`).
-/

@[expose] public section

noncomputable section

namespace KimiK3

namespace KimiLinear

namespace Examples

/-- transformers' order on the 1×1 scalar delta rule: `6·0.8 + 0.5·(10 − 6·0.8) = 7.4`. -/
theorem recurrentStep_scalar_eval :
    (recurrentStep (KDA.scalarState (6 : Rat)) (KDA.scalarInput (4 / 5) 10 (1 / 2))).2 0 = 37 / 5 ∧
      (recurrentStep (KDA.scalarState (6 : Rat)) (KDA.scalarInput (4 / 5) 10 (1 / 2))).1 0 0 =
        37 / 5 := by
  decide +kernel

/-- K3's `KDA.step` reads 7.4, computed through transformers' order (`recurrentStep_eq_step`). -/
theorem kda_step_scalar_via_recurrence :
    (KDA.step (KDA.scalarState (6 : Rat)) (KDA.scalarInput (4 / 5) 10 (1 / 2))).2 0 = 37 / 5 := by
  rw [← recurrentStep_eq_step]
  exact recurrentStep_scalar_eval.1

/-- The toy 2×1 run (`q = k = [1, 0]`, `v = [3]`, retention 1, `β = 1`) reads 3 in
transformers' order. -/
theorem recurrentStep_toy_reads_three :
    (recurrentStep (KDA.State.zero 2 1) (KDA.toyInput (α := Rat))).2 0 = 3 := by
  decide +kernel

/-- The raw scores `(0.8, 0.7, 0.6, 0.2)`. -/
def scores : Tensor Rat [4] :=
  fun e => if e = 0 then 8 / 10 else if e = 1 then 7 / 10 else if e = 2 then 6 / 10 else 2 / 10

/-- The route `(2, 0)` (the router example's top-2 after the bias `+0.3` on expert 2). -/
def route : Fin 2 → Fin 4 := fun i => if i = 0 then 2 else 0

/-- **Routed scaling** at `ρ = 2.446`: the weights are `ρ · 3/7 = 3669/3500` and
`ρ · 4/7 = 1223/875`, and they sum to `ρ`. -/
theorem scaledWeights_example :
    (2446 / 1000 : Rat) * Router.mixtureWeights scores route 0 = 3669 / 3500 ∧
      (2446 / 1000 : Rat) * Router.mixtureWeights scores route 1 = 1223 / 875 ∧
      finSum 2 (fun i => (2446 / 1000 : Rat) * Router.mixtureWeights scores route i) = 2446 / 1000 := by
  decide +kernel

end Examples

end KimiLinear

end KimiK3
