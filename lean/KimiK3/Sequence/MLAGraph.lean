module

public import KimiK3.Sequence.KDAPacked
public import KimiK3.Sequence.MLA

/-!
# The packed Gated MLA step graph denotes the packed step (k3-spec §2.3, Eq. 7)

`GatedMLA.stepModel` (defined in `Graphs.lean`) is the typed graph of one packed MLA step.
Proved: `stepModel_specFwd` — for every scalar model it computes `GatedMLA.stepPacked` (both new
caches and the output); combined with the list↔packed bridge `stepPacked_pack`, the graph run
on the packed list cache computes the list step `GatedMLA.step` (`stepModel_specFwd_pack`).
The kernel/`Core` agreement lemmas it uses (`Seq.softmax_eq_core`, `Seq.rmsNorm_eq_core`,
`Seq.vecMatMul_eq_core`, `appendRow_eq_concat0`) are in `KernelLemmas.lean`.
-/

@[expose] public section

namespace KimiK3

namespace GatedMLA

variable {α : Type}

section Graph

variable [Scalar α]

/-- The output of the packed MLA graph is the output of `stepPacked`. -/
theorem stepModel_specFwd_output (p : Params α d) (scoreScale : α) {T : Nat}
    (latC : Tensor α [T, d.kvLatentDim]) (shC : Tensor α [T, d.sharedKeyDim]) (x : Tensor α [d.modelDim]) :
    Env.head (Env.tail (Env.tail ((stepModel p.normEps T d).specFwd (paramsEnv p)
      (.cons latC (.cons shC (.cons x (.cons scoreScale .nil))))))) =
      (stepPacked p scoreScale latC shC x).2.2 := by
  funext f
  simp [Model.specFwd, stepModel, stepParams, stepInputs, Vars.all, Vars.from, Signature.shapes,
    Shape.appendList, paramsEnv, Env.head, Env.tail, stepPacked, attend, attendWith,
    headOutputsWith, scores, gate, queryLatent, entry, Seq.softmax_eq_core, Seq.rmsNorm_eq_core,
    appendRow_eq_concat0, Tensor.sumLast, BinaryFn.apply, UnaryFn.apply, KDA.eval_batchedReadTerm',
    KDA.eval_expandMidTerm', PrimOp.eval_binary3, PrimOp.eval_binary2, Tensor.swapAxes01_eta,
    Tensor.broadcast_eta, Tensor.zipWith_eta, Tensor.map_eta, Seq.vecMatMul_eq_core]

/-- **Denotation of the packed Gated MLA step graph**: for every scalar model, the graph computes
the reference packed step `stepPacked` (both new caches and the output); with the list↔packed
bridge `stepPacked_pack` it computes the list step `GatedMLA.step`. -/
theorem stepModel_specFwd (p : Params α d) (scoreScale : α) {T : Nat}
    (latC : Tensor α [T, d.kvLatentDim]) (shC : Tensor α [T, d.sharedKeyDim]) (x : Tensor α [d.modelDim]) :
    (stepModel p.normEps T d).specFwd (paramsEnv p) (.cons latC (.cons shC (.cons x (.cons scoreScale .nil)))) =
      .cons (stepPacked p scoreScale latC shC x).1
        (.cons (stepPacked p scoreScale latC shC x).2.1 (.cons (stepPacked p scoreScale latC shC x).2.2 .nil)) := by
  refine (env_eq3 _).trans ?_
  rw [stepModel_specFwd_output]
  congr 1
  · funext i k
    simp [Model.specFwd, stepModel, stepParams, stepInputs, Vars.all, Vars.from, Signature.shapes,
      Shape.appendList, paramsEnv, Env.head, stepPacked, entry, Seq.rmsNorm_eq_core,
      appendRow_eq_concat0, Seq.vecMatMul_eq_core, Tensor.broadcast_eta]
  · congr 1
    funext i k
    simp [Model.specFwd, stepModel, stepParams, stepInputs, Vars.all, Vars.from, Signature.shapes,
      Shape.appendList, paramsEnv, Env.head, Env.tail, stepPacked, entry,
      appendRow_eq_concat0, Seq.vecMatMul_eq_core, Tensor.broadcast_eta]

/-- **The MLA graph on the packed list cache computes the list step**: for a list cache of
length `T`, running `stepModel` on `packLatent T cache`, `packShared T cache` gives the packing
of the list step's new cache and its output. -/
theorem stepModel_specFwd_pack (p : Params α d) (scoreScale : α) (cache : Cache α d) (T : Nat)
    (h : cache.length = T) (x : Tensor α [d.modelDim]) :
    (stepModel p.normEps T d).specFwd (paramsEnv p)
        (.cons (packLatent T cache) (.cons (packShared T cache) (.cons x (.cons scoreScale .nil)))) =
      .cons (packLatent (T + 1) (step p scoreScale cache x).1)
        (.cons (packShared (T + 1) (step p scoreScale cache x).1)
          (.cons (step p scoreScale cache x).2 .nil)) := by
  rw [stepModel_specFwd, stepPacked_pack p scoreScale cache T h x]

end Graph

end GatedMLA

end KimiK3
