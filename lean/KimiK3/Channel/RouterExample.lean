module

public import KimiK3.Channel.Router

/-!
# The router bias example (report §2.3; spec §2.7), checked exactly

Four experts with raw sigmoid scores `(0.8, 0.7, 0.6, 0.2)`, top-2.
* Without bias, experts 0 and 1 (zero-based; the report's 1 and 2) are chosen.
* With bias `+0.3` on expert 2 (adjusted score 0.9), experts 2 and 0 are chosen
  (the report's 3 and 1), in that rank order.
* Their mixture weights use the **raw** scores: `0.6/1.4 = 3/7` and `0.8/1.4 = 4/7`.

Selection is checked by `decide` on the scores scaled by 10 (`Nat`: 8, 7, 6, 2 and bias 3),
which orders experts exactly as the real scores do; the weights are proved over any ordered
scalar field (so over ℝ), with exact arithmetic.
-/

@[expose] public section

namespace KimiK3

namespace RouterExample

open Routing

/-- Raw scores ×10. -/
def rawScores10 : Fin 4 → Nat := fun e => if e.val = 0 then 8 else if e.val = 1 then 7 else if e.val = 2 then 6 else 2

/-- Bias ×10: `+3` on expert 2. -/
def bias10 : Fin 4 → Nat := fun e => if e.val = 2 then 3 else 0

/-- Adjusted scores ×10: `(8, 7, 9, 2)`. -/
def adjusted10 : Fin 4 → Nat := fun e => rawScores10 e + bias10 e

/-- Without bias, the top-2 route is experts 0 then 1. -/
theorem route_without_bias :
    topKSlots rawScores10 (k := 2) (by decide) ⟨0, by decide⟩ = 0 ∧
      topKSlots rawScores10 (k := 2) (by decide) ⟨1, by decide⟩ = 1 := by decide

/-- With the bias, the top-2 route is experts 2 then 0. -/
theorem route_with_bias :
    topKSlots adjusted10 (k := 2) (by decide) ⟨0, by decide⟩ = 2 ∧
      topKSlots adjusted10 (k := 2) (by decide) ⟨1, by decide⟩ = 0 := by decide

/-- The route checker accepts `(2, 0)` for the adjusted scores … -/
theorem check_with_bias :
    checkRoute adjusted10 (fun i : Fin 2 => if i.val = 0 then (2 : Fin 4) else 0) = true := by
  decide

/-- … and rejects the unbiased choice `(0, 1)` (expert 2 beats expert 1). -/
theorem check_rejects_unbiased :
    checkRoute adjusted10 (fun i : Fin 2 => if i.val = 0 then (0 : Fin 4) else 1) = false := by
  decide

/-- Tie rule on equal scores: among experts with equal score the lowest index wins. -/
theorem tie_lowest_index :
    topKSlots (fun _ : Fin 3 => (5 : Nat)) (k := 2) (by decide) ⟨0, by decide⟩ = 0 ∧
      topKSlots (fun _ : Fin 3 => (5 : Nat)) (k := 2) (by decide) ⟨1, by decide⟩ = 1 ∧
      checkRoute (fun _ : Fin 3 => (5 : Nat)) (fun i : Fin 2 => if i.val = 0 then (0 : Fin 3) else 2)
        = false := by
  decide

section Field

variable {α : Type} [OrderedScalarField α]

/-- The raw scores `(0.8, 0.7, 0.6, 0.2)` in a scalar field. -/
def rawScores : Tensor α [4] := fun e =>
  if e.val = 0 then 8 / 10 else if e.val = 1 then 7 / 10 else if e.val = 2 then 6 / 10 else 2 / 10

/-- The route `(2, 0)` chosen with the bias. -/
def biasedRoute : Fin 2 → Fin 4 := fun i => if i.val = 0 then 2 else 0

/-- **Exact mixture weights**: `0.6/1.4 = 3/7` and `0.8/1.4 = 4/7`. -/
theorem mixtureWeights_example :
    Router.mixtureWeights (rawScores (α := α)) biasedRoute 0 = 3 / 7 ∧
      Router.mixtureWeights (rawScores (α := α)) biasedRoute 1 = 4 / 7 := by
  have h1 : (0 : α) < 1 := Lean.Grind.OrderedRing.zero_lt_one
  have hsum : finSum 2 (fun j => (rawScores (α := α)) (biasedRoute j)) = 14 / 10 := by
    simp only [finSum_succ, finSum_zero, rawScores, biasedRoute]
    simp; grind
  unfold Router.mixtureWeights
  rw [hsum]
  simp only [rawScores, biasedRoute]
  simp
  constructor <;> grind

end Field

end RouterExample

end KimiK3
