module

public import KimiK3.Sequence.MLA
public import KimiK3.Sequence.CausalScan
public import KimiK3.Core.ScalarFacts

/-!
# Masked full-sequence Gated MLA equals the token-by-token scan (k3-spec §2.0, §2.3)

The parallel form (`GatedMLA.maskedForward`, `Kernel.lean`) computes every token's cache entry,
packs all `T` rows once, and lets position `t` attend over all rows with the causal mask
`j ≤ t` applied by *true exclusion* (`Seq.maskedSoftmax`: masked positions get weight exactly
`0`, no finite sentinel).

Proved: future positions get weight exactly zero (`maskedSoftmax_future`); the softmax does not
depend on its stabilizing shift (`softmax_eq_exp`, `maskedSoftmax_eq_exp`); masked attention
at position `t` over `T` rows equals the step attention over the first `t + 1` rows
(`attendWith_masked_eq`); hence the masked full-sequence form equals the causal scan of
`GatedMLA.step` (`maskedForward_eq_forward`).
-/

@[expose] public section

namespace KimiK3

variable {α : Type}

section Laws

variable [ScalarLaws α]

namespace GatedMLA

variable {d : Dims}

/-- **Masked attention at position `t` over `T` rows equals the step attention over the first
`t + 1` rows** (the mask excludes the future exactly). -/
theorem attendWith_masked_eq (p : Params α d) (x : Tensor α [d.modelDim]) (scoreScale : α)
    (T t : Nat) (ht : t < T) (lat : Tensor α [T, d.kvLatentDim]) (sh : Tensor α [T, d.sharedKeyDim]) :
    attendWith (fun _ v => Seq.maskedSoftmax t v) p x scoreScale T lat sh =
      attend p x scoreScale (t + 1) (fun j => lat ⟨j.val, by omega⟩) (fun j => sh ⟨j.val, by omega⟩) := by
  obtain ⟨T', rfl⟩ : ∃ T', T = T' + 1 := ⟨T - 1, by omega⟩
  simp only [attend, attendWith]
  congr 1
  funext f
  congr 1; funext h; congr 1; funext c
  congr 1; congr 1
  simp only [headOutputsWith, Seq.memoFn_eq, Seq.memo2_eq, Seq.sum_eq]
  generalize hs : scores p (queryLatent p x) scoreScale h (T' + 1) lat sh = s
  have hs' : scores p (queryLatent p x) scoreScale h (t + 1)
      (fun j => lat ⟨j.val, by omega⟩) (fun j => sh ⟨j.val, by omega⟩) =
      fun j => s ⟨j.val, by omega⟩ := by rw [← hs]; rfl
  rw [hs']
  simp only [Seq.maskedSoftmax_eq_exp, Seq.softmax_eq_exp]
  rw [finSum_mask (T' + 1) t ht (fun j => Scalar.exp (s j))]
  generalize finSum (t + 1) (fun j => Scalar.exp (s ⟨j.val, by omega⟩)) = Z
  have e : ∀ j : Fin (T' + 1),
      (if j.val ≤ t then Scalar.exp (s j) else 0) / Z * Seq.vecMatMul (lat j) (p.valueUp h) c =
        if j.val ≤ t then Scalar.exp (s j) / Z * Seq.vecMatMul (lat j) (p.valueUp h) c else 0 :=
    fun j => by split <;> grind
  rw [finSum_congr e, finSum_mask (T' + 1) t ht]

/-- The outputs of the scan from the cache of the processed prefix `pre` are the masked
outputs over the packed entries of the whole sequence `pre ++ rest`. -/
theorem entries_length (p : Params α d) (xs : List (Tensor α [d.modelDim])) :
    (entries p xs).length = xs.length := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp [entries, ih]

theorem entries_append (p : Params α d) (xs ys : List (Tensor α [d.modelDim])) :
    entries p (xs ++ ys) = entries p xs ++ entries p ys := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp [entries, ih]

theorem listGet_append_left {β : Type} (dflt : β) (xs ys : List β) (i : Nat) (h : i < xs.length) :
    Seq.listGet dflt (xs ++ ys) i = Seq.listGet dflt xs i := by
  rw [Seq.listGet_eq_getElem _ _ _ (by simp; omega), Seq.listGet_eq_getElem _ _ _ h,
    List.getElem_append_left h]

theorem run_eq_maskedOutputs (p : Params α d) (scoreScale : α)
    (pre rest : List (Tensor α [d.modelDim])) :
    (CausalScan.run (step p scoreScale) (entries p pre) rest).2 =
      maskedOutputs p scoreScale (pre ++ rest).length
        (packLatent (pre ++ rest).length (entries p (pre ++ rest)))
        (packShared (pre ++ rest).length (entries p (pre ++ rest))) pre.length rest := by
  induction rest generalizing pre with
  | nil => rfl
  | cons x rest ih =>
    have e : pre ++ [x] ++ rest = pre ++ x :: rest := by simp
    have ih' := ih (pre ++ [x])
    rw [e] at ih'
    have hl : (pre ++ [x]).length = pre.length + 1 := by simp
    rw [hl] at ih'
    have ee : entries p pre ++ [entry p x] = entries p (pre ++ [x]) := by
      rw [entries_append]; rfl
    rw [CausalScan.run_cons, step_cache, ee, ih']
    show _ :: _ = attendWith (fun _ v => Seq.maskedSoftmax pre.length v) p x scoreScale _ _ _ ::
      maskedOutputs p scoreScale _ _ _ (pre.length + 1) rest
    congr 1
    have hT : pre.length < (pre ++ x :: rest).length := by simp
    rw [attendWith_masked_eq p x scoreScale _ pre.length hT,
      step_output p scoreScale (entries p pre) pre.length (entries_length p pre) x]
    have hrow : ∀ j : Fin (pre.length + 1),
        Seq.listGet Entry.zero (entries p pre ++ [entry p x]) j.val =
          Seq.listGet Entry.zero (entries p (pre ++ x :: rest)) j.val := by
      intro j
      have e2 : entries p (pre ++ x :: rest) =
          (entries p pre ++ [entry p x]) ++ entries p rest := by
        rw [entries_append, List.append_assoc]; rfl
      rw [e2]
      exact (listGet_append_left _ (entries p pre ++ [entry p x]) (entries p rest) _
        (by simp [entries_length])).symm
    congr 1
    · funext j; simp only [packLatent, hrow j]
    · funext j; simp only [packShared, hrow j]

/-- **The masked full-sequence form of Gated MLA equals the token-by-token scan**
(`forward`), output for output. -/
theorem maskedForward_eq_forward (p : Params α d) (scoreScale : α) (xs : List (Tensor α [d.modelDim])) :
    maskedForward p scoreScale xs = forward p scoreScale xs := by
  have h := run_eq_maskedOutputs p scoreScale [] xs
  simp only [List.nil_append, List.length_nil, entries] at h
  simp only [maskedForward, forward, Seq.memo2_eq]
  rw [Seq.listLen_eq, h]

end GatedMLA

end Laws

end KimiK3
