module

public import KimiK3.Sequence.KDAGraph

/-!
# The packed multi-head KDA graph: recurrence and readout (k3-spec §2.2, `GraphSpec/KDA.lean`)

`packedStepModel heads keyDim valueDim` (defined in `Graphs.lean`) takes the packed head states `[heads, keyDim,
valueDim]`, keys, values, retentions and queries `[heads, ·]` and write strengths `[heads]`, and
returns the updated states and the readouts `[heads, valueDim]`. Broadcasting a `[heads, keyDim]`
tensor along a new *last* axis is spelled with `reshape`/`broadcast`/`swapAxes01`/`reshape`
(`expandLastTerm`); the batched readout/correction uses `batchedMatMul` between reshaped rows
(`batchedReadTerm`).

Proved: `packedStepModel_specFwd` — the graph denotes, head by head, the reference `KDA.step`
(heads are independent); `eval_packedUpdateTerm`; the eval lemmas of the graph helpers (with
unapplied forms `eval_batchedReadTerm'`, `eval_expandMidTerm'`). The reshape coordinate lemmas
they use (`Tensor.reshape_flat2`, …) are in `Core/Layout.lean`. `packedStepJsonTiny` is the
graph's JSON export on the tiny fixture's dimensions.
-/

@[expose] public section

namespace KimiK3

variable {α : Type}

namespace KDA

section Eval

variable [Scalar α]

@[simp] theorem eval_expandLastTerm {Γ : List Shape} (H K V : Nat) (t : Term α Γ [H, K]) (env : Env α Γ)
    (h : Fin H) (k : Fin K) (c : Fin V) : (expandLastTerm H K V t).eval env h k c = t.eval env h k := by
  simp only [expandLastTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_reshape,
    PrimOp.eval_swapAxes01, PrimOp.eval_broadcast]
  rw [Tensor.reshape_unflat3]
  simp only [Tensor.swapAxes01_apply, Tensor.broadcast_apply]
  rw [Tensor.reshape_flat2]
  have hK : 0 < K := by have := k.isLt; omega
  have hd : (h.val * K + k.val) / K = h.val := by
    rw [show h.val * K + k.val = k.val + h.val * K by omega, Nat.add_mul_div_right _ _ hK,
      Nat.div_eq_of_lt k.isLt]; omega
  have hm : (h.val * K + k.val) % K = k.val := by
    rw [show h.val * K + k.val = k.val + h.val * K by omega, Nat.add_mul_mod_self_right,
      Nat.mod_eq_of_lt k.isLt]
  simp only [hd, hm]

@[simp] theorem eval_expandMidTerm {Γ : List Shape} (H K V : Nat) (t : Term α Γ [H, V]) (env : Env α Γ)
    (h : Fin H) (k : Fin K) (c : Fin V) : (expandMidTerm H K V t).eval env h k c = t.eval env h c := by
  simp [expandMidTerm]

@[simp] theorem eval_expandHeadTerm {Γ : List Shape} (H V : Nat) (t : Term α Γ [H]) (env : Env α Γ)
    (h : Fin H) (c : Fin V) : (expandHeadTerm H V t).eval env h c = t.eval env h := by
  simp [expandHeadTerm]

@[simp] theorem eval_batchedReadTerm {Γ : List Shape} (H K V : Nat) (q : Term α Γ [H, K])
    (m : Term α Γ [H, K, V]) (env : Env α Γ) (h : Fin H) (c : Fin V) :
    (batchedReadTerm H K V q m).eval env h c =
      finSum K (fun r => q.eval env h r * m.eval env h r c) := by
  simp only [batchedReadTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_reshape,
    PrimOp.eval_batchedMatMul]
  rw [Tensor.reshape_unrows]
  simp only [Tensor.batchedMatMul_apply, Tensor.reshape_rows]

/-- `eval_batchedReadTerm`, unapplied. -/
theorem eval_batchedReadTerm' {Γ : List Shape} (H K V : Nat) (q : Term α Γ [H, K])
    (m : Term α Γ [H, K, V]) (env : Env α Γ) :
    (KDA.batchedReadTerm H K V q m).eval env =
      fun h c => finSum K (fun r => q.eval env h r * m.eval env h r c) := by
  funext h c; exact eval_batchedReadTerm H K V q m env h c

/-- `eval_expandMidTerm`, unapplied. -/
theorem eval_expandMidTerm' {Γ : List Shape} (H K V : Nat) (t : Term α Γ [H, V]) (env : Env α Γ) :
    (KDA.expandMidTerm H K V t).eval env = fun h _ c => t.eval env h c := by
  funext h k c; exact eval_expandMidTerm H K V t env h k c

end Eval

/-- The packed update term denotes `KDA.update` head by head. -/
theorem eval_packedUpdateTerm [ScalarField α] {H K V : Nat} (S : Tensor α [H, K, V])
    (key : Tensor α [H, K]) (value : Tensor α [H, V]) (ret : Tensor α [H, K]) (beta : Tensor α [H])
    (query : Tensor α [H, K]) :
    (packedUpdateTerm H K V).eval
        (.cons S (.cons key (.cons value (.cons ret (.cons beta (.cons query .nil)))))) =
      fun h => update (S h) (headInput key value ret beta query h) := by
  funext h r c
  simp [packedUpdateTerm, update_get2, headInput, BinaryFn.apply]
  grind

/-- **Denotation of the packed multi-head KDA graph**: head by head, the updated states and the
readouts are those of the reference step `KDA.step` (heads are independent). -/
theorem packedStepModel_specFwd [ScalarField α] {H K V : Nat} (S : Tensor α [H, K, V])
    (key : Tensor α [H, K]) (value : Tensor α [H, V]) (ret : Tensor α [H, K]) (beta : Tensor α [H])
    (query : Tensor α [H, K]) :
    (packedStepModel H K V).specFwd .nil
        (.cons S (.cons key (.cons value (.cons ret (.cons beta (.cons query .nil)))))) =
      .cons (fun h => (step (S h) (headInput key value ret beta query h)).1)
        (.cons (fun h => (step (S h) (headInput key value ret beta query h)).2) .nil) := by
  simp only [step_fst, step_snd]
  simp [Model.specFwd, packedStepModel, eval_packedUpdateTerm]
  congr 1
  congr 1
  funext h c
  simp [read, headInput]

end KDA

end KimiK3
