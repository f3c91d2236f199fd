module

public import KimiK3.Sequence.KDA
public import KimiK3.Sequence.Graphs
public import KimiK3.Core.GraphEval

/-!
# The KDA head step as a typed graph, with its denotation theorem (k3-spec §2.2, Eq. 1)

`headStepModel keyDim valueDim` (defined in `Graphs.lean`) is a `Core` graph (`Model`) with inputs `state : [keyDim,
valueDim]`, `key`, `value`, `retention : [keyDim]`… and outputs the updated state and the
readout. Its nodes: the retention broadcast over value columns (`broadcast`, `swapAxes01`), the
decay `mul` (bound once with `let1`), the correction `vecMatMul`, two `outer` products, two
`β`-scaled `mul`s (β broadcast to `[keyDim, valueDim]`), `sub` and `add`, and the readout
`vecMatMul`.

Proved: `headStepModel_specFwd` — the graph denotes `KDA.update` and `KDA.read` of the
reference step (`KDA.step`), for every lawful scalar model. `headStepJsonTiny` is its JSON
export on the tiny fixture's dimensions. The packed multi-head version is still open.
-/

@[expose] public section

namespace KimiK3

namespace KDA

variable {α : Type}

/-- The update term denotes `KDA.update`. -/
theorem eval_updateTerm [ScalarField α] {keyDim valueDim : Nat} (S : State α keyDim valueDim)
    (x : Input α keyDim valueDim) :
    (updateTerm keyDim valueDim).eval
        (.cons S (.cons x.key (.cons x.value (.cons x.retention (.cons x.writeStrength (.cons x.query .nil)))))) =
      update S x := by
  funext r c
  simp [updateTerm, update_get2, Tensor.vecMatMul_apply, BinaryFn.apply]
  grind

/-- **Denotation of the KDA head step graph**: it computes the reference step `KDA.step`
(updated state, readout of the updated state). -/
theorem headStepModel_specFwd [ScalarField α] {keyDim valueDim : Nat} (S : State α keyDim valueDim)
    (x : Input α keyDim valueDim) :
    (headStepModel keyDim valueDim).specFwd .nil
        (.cons S (.cons x.key (.cons x.value (.cons x.retention (.cons x.writeStrength (.cons x.query .nil)))))) =
      .cons (step S x).1 (.cons (step S x).2 .nil) := by
  simp [Model.specFwd, headStepModel, eval_updateTerm]
  have h : Tensor.vecMatMul x.query (update S x) = read (update S x) x.query := by
    funext c; simp [read, Tensor.vecMatMul_apply]
  rw [h]

end KDA

end KimiK3
