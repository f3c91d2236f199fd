module

public import KimiK3.Exec.RatScalar
public import KimiK3.Exec.KDA
public import KimiK3.Exec.Channel
public import KimiK3.Channel.RouterExample
public import KimiK3.Channel.AppendixC

/-!
# The report's worked examples, evaluated exactly at `Rat`

Each `…_eval` theorem evaluates the executable definition at `Rat` in the kernel
(`decide +kernel`: the kernel reduces the computation; no `native_decide`, no compiled code
is trusted). The equality theorems (`Exec.KDA.step_eq`, `Exec.topK_eq`, …) then turn each into
a statement about the reference definition:

* KDA scalar delta rule `s = 6, α = 0.8, v = 10, β = 0.5`: **7.4** (`kda_step_example`);
* order sensitivity from `s = 0`, `α = β = 0.5`: values `2, 10` read **5.25**, values `10, 2`
  read **2.25**, through the executable scan (`kda_run_two_then_ten`, `kda_run_ten_then_two`);
* the toy 2×1 run reads **3** (`kda_toy_reads_three`);
* the router example: raw scores `(0.8, 0.7, 0.6, 0.2)`, bias `+0.3` on expert 2, top-2 picks
  experts 2 then 0 (`router_route_example`) with mixture weights **3/7** and **4/7**
  (`router_weights_example`);
* Appendix C (reference definitions evaluated directly): margins `{1, 0}`, `k = 1`:
  `F(−1) = 2`, `F(0) = F(1) = 1`, `F(2) = 2`, strict count 0 at θ = 1 and 1 at θ = 0
  (`appendixC_values`); tie margins `{0, 0}`: `F(0) = 0`, strict count 0, weak count 2
  (`appendixC_tie_values`).

None of these uses `exp`, `log`, `tanh`, `sigmoid` or `sqrt`, whose `Rat` stand-ins carry no
meaning (`RatScalar.lean`).
-/

@[expose] public section

noncomputable section

namespace KimiK3

namespace Exec

namespace RatExamples

/-! ## KDA -/

/-- The 1×1 state holding `s`. -/
def scalarState (s : Rat) : Arr Rat [1, 1] := Arr.fill _ s

/-- The 1×1 input with `k = q = 1`, retention `a`, value `v`, write strength `b`. -/
def scalarInput (a v b : Rat) : KDA.Input Rat 1 1 :=
  ⟨Arr.fill _ 1, Arr.fill _ 1, Arr.fill _ v, Arr.fill _ a, b⟩

theorem scalarState_toTensor (s : Rat) : (scalarState s).toTensor = KimiK3.KDA.scalarState s := by
  unfold scalarState; rw [Arr.toTensor_fill]; rfl

theorem scalarInput_toSpec (a v b : Rat) :
    (scalarInput a v b).toSpec = KimiK3.KDA.scalarInput a v b := by
  simp only [scalarInput, KDA.Input.toSpec, Arr.toTensor_fill]; rfl

theorem kda_step_eval : (KDA.step (scalarState 6) (scalarInput (4 / 5) 10 (1 / 2))).2.get 0 = 37 / 5 := by
  decide +kernel

/-- **KDA 7.4**: the reference `KDA.step` at `s = 6, α = 0.8, v = 10, β = 0.5` reads `7.4`. -/
theorem kda_step_example :
    (KimiK3.KDA.step (KimiK3.KDA.scalarState (6 : Rat)) (KimiK3.KDA.scalarInput (4 / 5) 10 (1 / 2))).2 0 =
      37 / 5 := by
  rw [← scalarState_toTensor, ← scalarInput_toSpec, ← KDA.step_snd_eq, Arr.toTensor_apply1]
  exact kda_step_eval

/-- The last readout of the executable scan over 1×1 tokens with values `vs`. -/
def lastRead (vs : List Rat) : Rat :=
  listGet 0 (listMap (fun o : Arr Rat [1] => o.get 0)
    (KDA.run (scalarState 0) (listMap (fun v => scalarInput (1 / 2) v (1 / 2)) vs)).2) (listLen vs - 1)

theorem kda_run_two_then_ten_eval : lastRead [2, 10] = 21 / 4 := by decide +kernel

theorem kda_run_ten_then_two_eval : lastRead [10, 2] = 9 / 4 := by decide +kernel

/-- The reference scan's last readout, as `lastRead`. -/
theorem lastRead_eq (vs : List Rat) :
    lastRead vs = listGet 0 (listMap (fun o : Tensor Rat [1] => o 0)
      (CausalScan.run KimiK3.KDA.step (KimiK3.KDA.scalarState 0)
        (listMap (fun v => KimiK3.KDA.scalarInput (1 / 2) v (1 / 2)) vs)).2) (listLen vs - 1) := by
  have h := congrArg Prod.snd (KDA.run_eq (scalarState 0) (listMap (fun v => scalarInput (1 / 2) v (1 / 2)) vs))
  simp only at h
  have hin : listMap KDA.Input.toSpec (listMap (fun v => scalarInput (1 / 2) v (1 / 2)) vs) =
      listMap (fun v => KimiK3.KDA.scalarInput (1 / 2) v (1 / 2)) vs := by
    simp only [listMap_eq, List.map_map]
    congr 1; funext v; exact scalarInput_toSpec _ _ _
  rw [hin, scalarState_toTensor] at h
  rw [← h]
  unfold lastRead
  congr 1
  simp only [listMap_eq, List.map_map]
  congr 1

/-- **Order sensitivity, 5.25**: the reference KDA scan reads `5.25` after values `2, 10`. -/
theorem kda_run_two_then_ten :
    listGet 0 (listMap (fun o : Tensor Rat [1] => o 0)
      (CausalScan.run KimiK3.KDA.step (KimiK3.KDA.scalarState 0)
        [KimiK3.KDA.scalarInput (1 / 2) 2 (1 / 2), KimiK3.KDA.scalarInput (1 / 2) 10 (1 / 2)]).2) 1 = 21 / 4 := by
  have := lastRead_eq [2, 10]
  rw [kda_run_two_then_ten_eval] at this
  exact this.symm

/-- **Order sensitivity, 2.25**: after values `10, 2` the reference KDA scan reads `2.25`. -/
theorem kda_run_ten_then_two :
    listGet 0 (listMap (fun o : Tensor Rat [1] => o 0)
      (CausalScan.run KimiK3.KDA.step (KimiK3.KDA.scalarState 0)
        [KimiK3.KDA.scalarInput (1 / 2) 10 (1 / 2), KimiK3.KDA.scalarInput (1 / 2) 2 (1 / 2)]).2) 1 = 9 / 4 := by
  have := lastRead_eq [10, 2]
  rw [kda_run_ten_then_two_eval] at this
  exact this.symm

/-- The toy input: `q = k = [1, 0]`, `v = [3]`, retention `[1, 1]`, `β = 1`. -/
def toyInput : KDA.Input Rat 2 1 :=
  ⟨Arr.vec 2 (fun i => if i = 0 then 1 else 0), Arr.vec 2 (fun i => if i = 0 then 1 else 0),
   Arr.fill _ 3, Arr.fill _ 1, 1⟩

theorem kda_toy_eval : (KDA.step (Arr.fill [2, 1] 0) toyInput).2.get 0 = 3 := by decide +kernel

/-- **Toy run reads 3**: the reference `KDA.step` from the zero 2×1 state. -/
theorem kda_toy_reads_three :
    (KimiK3.KDA.step (KimiK3.KDA.State.zero 2 1) (KimiK3.KDA.toyInput (α := Rat))).2 0 = 3 := by
  have hS : (Arr.fill [2, 1] (0 : Rat)).toTensor = KimiK3.KDA.State.zero 2 1 := by
    rw [Arr.toTensor_fill]; rfl
  have hx : toyInput.toSpec = KimiK3.KDA.toyInput (α := Rat) := by
    simp only [toyInput, KDA.Input.toSpec, Arr.toTensor_fill, Arr.toTensor_vec, KimiK3.KDA.toyInput]
    congr 1 <;> first | rfl | (funext i; simp [Fin.ext_iff])
  rw [← hS, ← hx, ← KDA.step_snd_eq, Arr.toTensor_apply1]
  exact kda_toy_eval

/-! ## The router -/

/-- The raw scores `(0.8, 0.7, 0.6, 0.2)`. -/
def rawScores : Arr Rat [4] :=
  Arr.vec 4 (fun e => if e = 0 then 8 / 10 else if e = 1 then 7 / 10 else if e = 2 then 6 / 10 else 2 / 10)

/-- The bias `+0.3` on expert 2. -/
def bias : Arr Rat [4] := Arr.vec 4 (fun e => if e = 2 then 3 / 10 else 0)

theorem router_route_eval :
    arrayGetD (topK 2 (adjustedScores rawScores bias)) 0 0 = 2 ∧
      arrayGetD (topK 2 (adjustedScores rawScores bias)) 1 0 = 0 := by
  decide +kernel

theorem router_weights_eval :
    (mixtureWeights 2 rawScores (topK 2 (adjustedScores rawScores bias))).get 0 = 3 / 7 ∧
      (mixtureWeights 2 rawScores (topK 2 (adjustedScores rawScores bias))).get 1 = 4 / 7 := by
  decide +kernel

theorem rawScores_toTensor : rawScores.toTensor = RouterExample.rawScores (α := Rat) := by
  funext e; simp [rawScores, RouterExample.rawScores]

/-- **The route with the bias**: the reference top-2 of the adjusted scores is experts 2, 0. -/
theorem router_route_example :
    (Router.route rawScores.toTensor bias.toTensor (k := 2) (by decide) 0).val = 2 ∧
      (Router.route rawScores.toTensor bias.toTensor (k := 2) (by decide) 1).val = 0 := by
  unfold Router.route
  rw [← adjustedScores_eq, ← topK_eq _ (by decide) 0, ← topK_eq _ (by decide) 1]
  exact router_route_eval

/-- **Mixture weights 3/7 and 4/7**: the reference weights of the biased route, from the raw
scores `(0.8, 0.7, 0.6, 0.2)`. -/
theorem router_weights_example :
    Router.mixtureWeights (RouterExample.rawScores (α := Rat))
        (Router.route rawScores.toTensor bias.toTensor (k := 2) (by decide)) 0 = 3 / 7 ∧
      Router.mixtureWeights (RouterExample.rawScores (α := Rat))
        (Router.route rawScores.toTensor bias.toTensor (k := 2) (by decide)) 1 = 4 / 7 := by
  have hr : Router.route rawScores.toTensor bias.toTensor (k := 2) (by decide) =
      routeSlot (topK 2 (adjustedScores rawScores bias)) (topK_lt _ (by decide)) := by
    unfold Router.route; rw [routeSlot_topK, adjustedScores_eq]
  rw [hr, ← rawScores_toTensor, ← mixtureWeights_eq, Arr.toTensor_apply1, Arr.toTensor_apply1]
  exact router_weights_eval

/-! ## Appendix C -/

open QuantileBalancing in
/-- **Appendix C counterexample, by evaluation**: margins `{1, 0}`, `k = 1`: `F(−1) = 2`,
`F(0) = F(1) = 1`, `F(2) = 2`; strict count 0 at θ = 1, 1 at θ = 0; weak count 1 at θ = 1. -/
theorem appendixC_values :
    coordinateObjective (1 : Rat) cexMargins (-1) = 2 ∧ coordinateObjective (1 : Rat) cexMargins 0 = 1 ∧
      coordinateObjective (1 : Rat) cexMargins 1 = 1 ∧ coordinateObjective (1 : Rat) cexMargins 2 = 2 ∧
      exceedanceCount (cexMargins (α := Rat)) 1 = 0 ∧ exceedanceCount (cexMargins (α := Rat)) 0 = 1 ∧
      atLeastCount (cexMargins (α := Rat)) 1 = 1 := by
  decide +kernel

open QuantileBalancing in
/-- **Appendix C tie example, by evaluation**: margins `{0, 0}`, `k = 1`: `F(0) = 0`, strict
count 0 and weak count 2 at θ = 0 (so `0 ≤ 1 ≤ 2`). -/
theorem appendixC_tie_values :
    coordinateObjective (1 : Rat) tieMargins 0 = 0 ∧ exceedanceCount (tieMargins (α := Rat)) 0 = 0 ∧
      atLeastCount (tieMargins (α := Rat)) 0 = 2 := by
  decide +kernel

end RatExamples

end Exec

end KimiK3

end
