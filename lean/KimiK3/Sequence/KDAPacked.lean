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
(heads are independent); `eval_packedUpdateTerm`; the coordinate lemmas of the four reshapes
used (`reshape_flat2`, `reshape_unflat3`, `reshape_rows`, `reshape_unrows`, general — candidates
for `Core`). `packedStepJsonTiny` is the graph's JSON export on the tiny fixture's dimensions.
-/

@[expose] public section

namespace KimiK3

variable {α : Type}

/-- Reading a `[H, K]` tensor flattened to `[H * K]`. -/
theorem reshape_flat2 {H K : Nat} (x : Tensor α [H, K]) (m : Fin (H * K)) :
    Tensor.reshape [H * K] (by simp [Shape.numel]) x m =
      x ⟨m.val / K, Nat.div_lt_of_lt_mul (Nat.lt_of_lt_of_eq m.isLt (Nat.mul_comm H K))⟩
        ⟨m.val % K, Nat.mod_lt _ (Nat.pos_of_ne_zero (fun h => by
          have hm : m.val < H * K := m.isLt
          have : H * K = 0 := by rw [h, Nat.mul_zero]
          omega))⟩ := by
  simp [Tensor.reshape, Tensor.ofFlat, Tensor.toFlat, Shape.numel]

/-- Unflattening `[H * K, V]` to `[H, K, V]`. -/
theorem reshape_unflat3 {H K V : Nat} (y : Tensor α [H * K, V]) (h : Fin H) (k : Fin K) (c : Fin V) :
    Tensor.reshape [H, K, V] (by simp [Shape.numel, Nat.mul_assoc]) y h k c =
      y ⟨h.val * K + k.val, by
          have := Nat.mul_le_mul_right K (show h.val + 1 ≤ H by omega)
          rw [Nat.succ_mul] at this; omega⟩ c := by
  simp [Tensor.reshape, Tensor.ofFlat, Tensor.toFlat, Shape.numel]
  have hV : 0 < V := by have := c.isLt; omega
  have e : h.val * (K * V) + (k.val * V + c.val) = c.val + (h.val * K + k.val) * V := by
    rw [Nat.add_mul, Nat.mul_assoc]; omega
  congr 1
  · apply Fin.ext
    show (h.val * (K * V) + (k.val * V + c.val)) / V = h.val * K + k.val
    rw [e, Nat.add_mul_div_right _ _ hV, Nat.div_eq_of_lt c.isLt]; omega
  · apply Fin.ext
    show (h.val * (K * V) + (k.val * V + c.val)) % V = c.val
    rw [e, Nat.add_mul_mod_self_right, Nat.mod_eq_of_lt c.isLt]

/-- Reading `[H, K]` as `[H, 1, K]` rows. -/
theorem reshape_rows {H K : Nat} (x : Tensor α [H, K]) (h : Fin H) (z : Fin 1) (k : Fin K) :
    Tensor.reshape [H, 1, K] (by simp [Shape.numel]) x h z k = x h k := by
  have hK : 0 < K := by have := k.isLt; omega
  have hd : (h.val * K + k.val) / K = h.val := by
    rw [show h.val * K + k.val = k.val + h.val * K by omega, Nat.add_mul_div_right _ _ hK,
      Nat.div_eq_of_lt k.isLt]; omega
  simp [Tensor.reshape, Tensor.ofFlat, Tensor.toFlat, Shape.numel]
  congr 1 <;> (try apply Fin.ext) <;> simp [hd, Nat.mod_eq_of_lt k.isLt]

/-- Reading `[H, 1, V]` as `[H, V]`. -/
theorem reshape_unrows {H V : Nat} (y : Tensor α [H, 1, V]) (h : Fin H) (c : Fin V) :
    Tensor.reshape [H, V] (by simp [Shape.numel]) y h c = y h 0 c := by
  have hV : 0 < V := by have := c.isLt; omega
  have hd : (h.val * V + c.val) / V = h.val := by
    rw [show h.val * V + c.val = c.val + h.val * V by omega, Nat.add_mul_div_right _ _ hV,
      Nat.div_eq_of_lt c.isLt]; omega
  have hm : (h.val * V + c.val) % V = c.val := by
    rw [show h.val * V + c.val = c.val + h.val * V by omega, Nat.add_mul_mod_self_right,
      Nat.mod_eq_of_lt c.isLt]
  -- `congr` closes the index goals with `hd` and `hm` (by assumption)
  simp [Tensor.reshape, Tensor.ofFlat, Tensor.toFlat, Shape.numel]
  congr 1 <;> (try congr 1) <;> (try apply Fin.ext) <;> simp [Nat.mod_eq_of_lt c.isLt]

namespace KDA

section Eval

variable [Scalar α]

@[simp] theorem eval_expandLastTerm {Γ : List Shape} (H K V : Nat) (t : Term α Γ [H, K]) (env : Env α Γ)
    (h : Fin H) (k : Fin K) (c : Fin V) : (expandLastTerm H K V t).eval env h k c = t.eval env h k := by
  simp only [expandLastTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_reshape,
    PrimOp.eval_swapAxes01, PrimOp.eval_broadcast]
  rw [reshape_unflat3]
  simp only [Tensor.swapAxes01_apply, Tensor.broadcast_apply]
  rw [reshape_flat2]
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
  rw [reshape_unrows]
  simp only [Tensor.batchedMatMul_apply, reshape_rows]

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
