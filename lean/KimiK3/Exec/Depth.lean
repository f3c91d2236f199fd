module

public import KimiK3.Exec.Ops
public import KimiK3.Depth.Kernel

/-!
# The executable Block Attention Residuals equal the reference (report Eq. 8–10, k3-spec §2.4)

For every `[Scalar α]`: `Exec.AttnRes.attendPacked_eq`, `attendList_eq`; for the depth state
(`Exec.BlockState.toSpec`): `initial_toSpec`, `sources_eq`, `afterSequence_eq`, **`retrieve_eq`**,
`retrieveAfterSequence_eq`, **`finishLayer_eq`**.
-/

@[expose] public section

namespace KimiK3

namespace Exec

variable {α : Type} [Scalar α]

theorem zeros_toTensor (d : Nat) : (zeros d : Arr α [d]).toTensor = fun _ => 0 := by
  simp only [zeros, Arr.toTensor_fill]; rfl

namespace AttnRes

theorem attendPacked_eq {n d : Nat} (eps : α) (query : Arr α [d]) (values : Arr α [n, d]) :
    (attendPacked eps query values).toTensor = KimiK3.AttnRes.attendPacked eps query.toTensor values.toTensor := by
  funext k
  simp only [attendPacked, KimiK3.AttnRes.attendPacked, Seq.memoFn_eq, Arr.toTensor_apply1,
    Arr.get_vec _ k.isLt, sumTo_eq, Seq.sum_eq]
  congr 1; funext i
  rw [← Arr.toTensor_apply1, Arr.toTensor_softmax_seq, ← Arr.toTensor_apply2]
  congr 3
  funext i'
  rw [Arr.toTensor_apply1, Arr.get_vec _ i'.isLt, Arr.dot_eq_seq, Arr.toTensor_rmsNorm_seq,
    Arr.toTensor_row, Arr.toTensor_fill]
  rfl

/-- Depth attention does not depend on how the source count is written. -/
theorem attendPacked_congr {n₁ n₂ d : Nat} (h : n₁ = n₂) (eps : α) (query : Tensor α [d])
    (a : Tensor α [n₁, d]) (b : Tensor α [n₂, d])
    (hab : ∀ (i : Fin n₁) (k : Fin d), a i k = b ⟨i.val, h ▸ i.isLt⟩ k) :
    KimiK3.AttnRes.attendPacked eps query a = KimiK3.AttnRes.attendPacked eps query b := by
  subst h
  congr
  funext i k
  exact hab i k

theorem attendList_eq {d : Nat} (eps : α) (query : Arr α [d]) (sources : List (Arr α [d])) :
    (attendList eps query sources).toTensor =
      KimiK3.AttnRes.attendList eps query.toTensor (listMap Arr.toTensor sources) := by
  unfold attendList KimiK3.AttnRes.attendList
  rw [attendPacked_eq]
  apply attendPacked_congr (by rw [← listLen_eq_seq, listLen_map])
  intro i k
  simp only [pack, KimiK3.AttnRes.pack, Arr.toTensor_apply2, Arr.get_mat _ i.isLt k.isLt]
  rw [← zeros_toTensor, ← listGet_eq_seq, listGet_map, Arr.toTensor_apply1]

end AttnRes

namespace BlockState

variable {d : Nat}

/-- The reference depth state of an array-backed one. -/
noncomputable def toSpec (s : BlockState α d) : KimiK3.BlockState α d :=
  ⟨s.embedding.toTensor, listMap Arr.toTensor s.blocks, s.partialSum.toTensor, s.count⟩

theorem initial_toSpec (embedding : Arr α [d]) :
    (initial embedding).toSpec = KimiK3.BlockState.initial embedding.toTensor := by
  simp only [initial, toSpec, KimiK3.BlockState.initial, zeros_toTensor]
  rfl

theorem sources_eq (s : BlockState α d) : listMap Arr.toTensor s.sources = s.toSpec.sources := by
  by_cases h : s.count = 0 <;>
    simp [sources, KimiK3.BlockState.sources, toSpec, h, listMap_eq, listAppend_eq]

theorem afterSequence_eq (s : BlockState α d) (seqOut : Arr α [d]) :
    (s.afterSequence seqOut).toTensor = s.toSpec.afterSequence seqOut.toTensor := by
  simp only [afterSequence, KimiK3.BlockState.afterSequence, toSpec]
  by_cases h : s.count = 0
  · simp [h]
  · simp only [h, if_false]; funext k; simp

/-- **Executable retrieval is `BlockState.retrieve`** (report Eq. 9–10). -/
theorem retrieve_eq (eps : α) (query : Arr α [d]) (s : BlockState α d) :
    (s.retrieve eps query).toTensor = s.toSpec.retrieve eps query.toTensor := by
  unfold retrieve KimiK3.BlockState.retrieve
  rw [AttnRes.attendList_eq, sources_eq]

theorem retrieveAfterSequence_eq (eps : α) (query : Arr α [d]) (s : BlockState α d) (seqOut : Arr α [d]) :
    (s.retrieveAfterSequence eps query seqOut).toTensor =
      s.toSpec.retrieveAfterSequence eps query.toTensor seqOut.toTensor := by
  unfold retrieveAfterSequence KimiK3.BlockState.retrieveAfterSequence
  rw [AttnRes.attendList_eq]
  congr 1
  simp only [listMap, listMap_append, afterSequence_eq]
  rw [listAppend_eq_seq]
  rfl

/-- **The executable commit is `BlockState.finishLayer`** (k3-spec §2.5). -/
theorem finishLayer_eq (blockSize : Nat) (s : BlockState α d) (seqOut chanOut : Arr α [d]) :
    (s.finishLayer blockSize seqOut chanOut).toSpec =
      s.toSpec.finishLayer blockSize seqOut.toTensor chanOut.toTensor := by
  have hp : (Arr.vec d (fun k => (s.afterSequence seqOut).get k + chanOut.get k)).toTensor =
      fun k => s.toSpec.afterSequence seqOut.toTensor k + chanOut.toTensor k := by
    funext k
    rw [Arr.toTensor_apply1, Arr.get_vec _ k.isLt, ← afterSequence_eq, Arr.toTensor_apply1,
      Arr.toTensor_apply1]
  simp only [finishLayer, KimiK3.BlockState.finishLayer]
  by_cases h : s.count + 1 = blockSize
  · have h' : s.toSpec.count + 1 = blockSize := h
    rw [if_pos h, if_pos h']
    simp only [toSpec, zeros_toTensor, listMap_eq, listAppend_eq, Seq.listAppend_eq, List.map_append,
      List.map_cons, List.map_nil, hp]
  · have h' : ¬ s.toSpec.count + 1 = blockSize := h
    rw [if_neg h, if_neg h']
    simp only [toSpec, hp]

end BlockState

end Exec

end KimiK3
