module

public import KimiK3.Exec.Ops

/-!
# The executable Gated MLA equals the reference (k3-spec §2.3, report Eq. 7)

For every `[Scalar α]`: `Exec.GatedMLA.queryLatent_eq`, `entry_eq`, `gate_eq`, `scores_eq`,
`headOutputsWith_eq`, `attendWith_eq` (any attention-weight function that commutes with
`toTensor`), `attend_eq`, `packLatent_eq`, `packShared_eq`, **`step_eq`** (the list-cache step:
new cache and output of `GatedMLA.step`) and **`forward_eq`** (`GatedMLA.forward`).
-/

@[expose] public section

namespace KimiK3

namespace Exec

namespace GatedMLA

variable {α : Type} [Scalar α] {d : KimiK3.GatedMLA.Dims}

/-- The reference parameters of array-backed ones. -/
noncomputable def Params.toSpec (p : Params α d) : KimiK3.GatedMLA.Params α d :=
  ⟨p.queryDown.toTensor, p.queryNormScale.toTensor, p.kvDown.toTensor, p.kvNormScale.toTensor,
   p.sharedKeyDown.toTensor, p.queryContentUp.toTensor, p.querySharedUp.toTensor, p.keyUp.toTensor,
   p.valueUp.toTensor, p.gateWeight.toTensor, p.outputWeight.toTensor, p.normEps⟩

/-- The reference entry of an array-backed one. -/
noncomputable def Entry.toSpec (e : Entry α d) : KimiK3.GatedMLA.Entry α d :=
  ⟨e.latent.toTensor, e.sharedKey.toTensor⟩

/-- The reference cache of an array-backed one. -/
noncomputable def cacheToSpec (cache : Cache α d) : KimiK3.GatedMLA.Cache α d :=
  listMap Entry.toSpec cache

theorem queryLatent_eq (p : Params α d) (x : Arr α [d.modelDim]) :
    (queryLatent p x).toTensor = KimiK3.GatedMLA.queryLatent p.toSpec x.toTensor := by
  simp only [queryLatent, KimiK3.GatedMLA.queryLatent, Arr.toTensor_rmsNorm_seq,
    Arr.toTensor_vecMatMul_seq]
  rfl

theorem entry_eq (p : Params α d) (x : Arr α [d.modelDim]) :
    (entry p x).toSpec = KimiK3.GatedMLA.entry p.toSpec x.toTensor := by
  simp only [entry, KimiK3.GatedMLA.entry, Entry.toSpec, Seq.memoFn_eq, Arr.toTensor_rmsNorm_seq,
    Arr.toTensor_vecMatMul_seq]
  rfl

theorem gate_eq (p : Params α d) (x : Arr α [d.modelDim]) :
    (gate p x).toTensor = KimiK3.GatedMLA.gate p.toSpec x.toTensor := by
  funext h c
  simp [gate, KimiK3.GatedMLA.gate, sumTo_eq, Params.toSpec]

theorem scores_eq (p : Params α d) (cq : Arr α [d.queryLatentDim]) (scoreScale : α) (h : Fin d.heads)
    (n : Nat) (latent : Arr α [n, d.kvLatentDim]) (shared : Arr α [n, d.sharedKeyDim]) :
    (scores p cq scoreScale h.val n latent shared).toTensor =
      KimiK3.GatedMLA.scores p.toSpec cq.toTensor scoreScale h n latent.toTensor shared.toTensor := by
  funext j
  simp only [scores, KimiK3.GatedMLA.scores, Seq.memoFn_eq, Arr.toTensor_apply1, Arr.get_vec _ j.isLt]
  rw [Arr.dot_eq_seq, Arr.dot_eq_seq, Arr.toTensor_vecMatMul_seq, Arr.toTensor_vecMatMul_seq,
    Arr.toTensor_vecMatMul_seq, Arr.toTensor_row, Arr.toTensor_row, Arr.toTensor_slice3,
    Arr.toTensor_slice3, Arr.toTensor_slice3]
  rfl

theorem headOutputsWith_eq (wf : (n : Nat) → Arr α [n] → Arr α [n])
    (wf' : (n : Nat) → Tensor α [n] → Tensor α [n]) (hwf : ∀ n v, (wf n v).toTensor = wf' n v.toTensor)
    (p : Params α d) (x : Arr α [d.modelDim]) (scoreScale : α) (n : Nat)
    (latent : Arr α [n, d.kvLatentDim]) (shared : Arr α [n, d.sharedKeyDim]) :
    (headOutputsWith wf p x scoreScale n latent shared).toTensor =
      KimiK3.GatedMLA.headOutputsWith wf' p.toSpec x.toTensor scoreScale n latent.toTensor shared.toTensor := by
  funext h c
  simp only [headOutputsWith, KimiK3.GatedMLA.headOutputsWith, Seq.memoFn_eq, Arr.toTensor_apply2,
    Arr.get_mat _ h.isLt c.isLt, sumTo_eq, Seq.sum_eq]
  congr 1
  funext j
  rw [arrayGetD_arrayOfFn, if_pos h.isLt, arrayGetD_arrayOfFn, if_pos h.isLt,
    ← Arr.toTensor_apply1, hwf, scores_eq, queryLatent_eq, ← Arr.toTensor_apply2,
    Arr.toTensor_matMul, Arr.toTensor_slice3]
  simp [Tensor.matMul, Tensor.vecMatMul, Params.toSpec]

theorem attendWith_eq (wf : (n : Nat) → Arr α [n] → Arr α [n])
    (wf' : (n : Nat) → Tensor α [n] → Tensor α [n]) (hwf : ∀ n v, (wf n v).toTensor = wf' n v.toTensor)
    (p : Params α d) (x : Arr α [d.modelDim]) (scoreScale : α) (n : Nat)
    (latent : Arr α [n, d.kvLatentDim]) (shared : Arr α [n, d.sharedKeyDim]) :
    (attendWith wf p x scoreScale n latent shared).toTensor =
      KimiK3.GatedMLA.attendWith wf' p.toSpec x.toTensor scoreScale n latent.toTensor shared.toTensor := by
  funext f
  simp only [attendWith, KimiK3.GatedMLA.attendWith, Seq.memo2_eq, Arr.toTensor_apply1,
    Arr.get_vec _ f.isLt, sumTo_eq, Seq.sum_eq]
  congr 1; funext h; congr 1; funext c
  rw [← Arr.toTensor_apply2 (gate p x) h c, ← Arr.toTensor_apply2 (headOutputsWith wf p x scoreScale n latent shared) h c,
    gate_eq, headOutputsWith_eq wf wf' hwf]
  simp [Params.toSpec]

theorem attend_eq (p : Params α d) (x : Arr α [d.modelDim]) (scoreScale : α) (n : Nat)
    (latent : Arr α [n, d.kvLatentDim]) (shared : Arr α [n, d.sharedKeyDim]) :
    (attend p x scoreScale n latent shared).toTensor =
      KimiK3.GatedMLA.attend p.toSpec x.toTensor scoreScale n latent.toTensor shared.toTensor :=
  attendWith_eq _ _ (fun _ v => Arr.toTensor_softmax_seq v) p x scoreScale n latent shared

theorem entry_zero_toSpec : (Entry.zero (α := α) (d := d)).toSpec = KimiK3.GatedMLA.Entry.zero := by
  simp only [Entry.zero, Entry.toSpec, zeros, Arr.toTensor_fill, KimiK3.GatedMLA.Entry.zero]
  rfl

theorem listGet_cacheToSpec (cache : Cache α d) (i : Nat) :
    Seq.listGet KimiK3.GatedMLA.Entry.zero (cacheToSpec cache) i = (listGet Entry.zero cache i).toSpec := by
  rw [← listGet_eq_seq, ← entry_zero_toSpec, cacheToSpec, listGet_map]

theorem packLatent_eq (n : Nat) (cache : Cache α d) :
    (packLatent n cache).toTensor = KimiK3.GatedMLA.packLatent n (cacheToSpec cache) := by
  funext j c
  simp only [packLatent, KimiK3.GatedMLA.packLatent, Arr.toTensor_apply2, Arr.get_mat _ j.isLt c.isLt,
    listGet_cacheToSpec]
  simp [Entry.toSpec]

theorem packShared_eq (n : Nat) (cache : Cache α d) :
    (packShared n cache).toTensor = KimiK3.GatedMLA.packShared n (cacheToSpec cache) := by
  funext j c
  simp only [packShared, KimiK3.GatedMLA.packShared, Arr.toTensor_apply2, Arr.get_mat _ j.isLt c.isLt,
    listGet_cacheToSpec]
  simp [Entry.toSpec]

/-- **One executable MLA step is `GatedMLA.step`** (new cache and output). -/
theorem step_eq (p : Params α d) (scoreScale : α) (cache : Cache α d) (x : Arr α [d.modelDim]) :
    (cacheToSpec (step p scoreScale cache x).1, (step p scoreScale cache x).2.toTensor) =
      KimiK3.GatedMLA.step p.toSpec scoreScale (cacheToSpec cache) x.toTensor := by
  have hcache : Seq.listAppend (cacheToSpec cache) [KimiK3.GatedMLA.entry p.toSpec x.toTensor] =
      cacheToSpec (listAppend cache [entry p x]) := by
    unfold cacheToSpec
    rw [listMap_append, ← listAppend_eq_seq]
    simp only [listMap, entry_eq]
  have hlen : Seq.listLen (cacheToSpec (listAppend cache [entry p x])) = listLen (listAppend cache [entry p x]) := by
    rw [← listLen_eq_seq, cacheToSpec, listLen_map]
  simp only [step, KimiK3.GatedMLA.step]
  rw [hcache, hlen, attend_eq, packLatent_eq, packShared_eq]

/-- **The executable MLA layer over a sequence is `GatedMLA.forward`.** -/
theorem forward_eq (p : Params α d) (scoreScale : α) (xs : List (Arr α [d.modelDim])) :
    listMap Arr.toTensor (forward p scoreScale xs) =
      KimiK3.GatedMLA.forward p.toSpec scoreScale (listMap Arr.toTensor xs) := by
  unfold forward KimiK3.GatedMLA.forward
  have h := scan_map (step p scoreScale) (KimiK3.GatedMLA.step p.toSpec scoreScale) cacheToSpec
    Arr.toTensor Arr.toTensor (fun s x => step_eq p scoreScale s x) [] xs
  rw [scan_eq_run (KimiK3.GatedMLA.step p.toSpec scoreScale)] at h
  exact congrArg Prod.snd h

end GatedMLA

end Exec

end KimiK3
