module

public import KimiK3.Sequence.KernelLemmas
public import KimiK3.Sequence.CausalScan

/-!
# Gated MLA: cache length and the list↔packed bridge (k3-spec §2.3, report Eq. 7)

The cache of a Gated MLA layer is a `List` of entries, one per past token: the normalized KV
latent `c_kv` and the unrotated shared key `k_s` (NoPE). A step appends the current token's
entry *first*, then every head attends over past and current entries (definitions in
`Kernel.lean`: `GatedMLA.step` on the list cache, `GatedMLA.stepPacked` on fixed-shape caches
`[T, kvLatentDim]`, `[T, sharedKeyDim]`, both through the same `GatedMLA.attend`).

Proved: `step_cache_length`; `step_cache` (the new cache is the old one with the current entry
appended); and the **list↔packed bridge** `stepPacked_pack` (open in the article): packing a
list cache of length `T` and running the packed step gives the list step's output and the
packing of the list step's new cache.
-/

@[expose] public section

namespace KimiK3

namespace GatedMLA

variable {α : Type} [Scalar α] {d : Dims}

/-- The new cache of a step is the old cache with the current entry appended. -/
theorem step_cache (p : Params α d) (scoreScale : α) (cache : Cache α d)
    (x : Tensor α [d.modelDim]) : (step p scoreScale cache x).1 = cache ++ [entry p x] := by
  simp [step]

/-- **`step_cache_length`**: a step appends exactly one entry. -/
theorem step_cache_length (p : Params α d) (scoreScale : α) (cache : Cache α d)
    (x : Tensor α [d.modelDim]) : (step p scoreScale cache x).1.length = cache.length + 1 := by
  simp [step]

/-- The output of a step attends over the packed new cache, `T + 1` rows for a cache of
length `T`. -/
theorem step_output (p : Params α d) (scoreScale : α) (cache : Cache α d) (T : Nat)
    (h : cache.length = T) (x : Tensor α [d.modelDim]) :
    (step p scoreScale cache x).2 =
      attend p x scoreScale (T + 1) (packLatent (T + 1) (cache ++ [entry p x]))
        (packShared (T + 1) (cache ++ [entry p x])) := by
  have hn : Seq.listLen (Seq.listAppend cache [entry p x]) = T + 1 := by simp [h]
  simp only [step]
  generalize Seq.listLen (Seq.listAppend cache [entry p x]) = n at hn
  subst hn
  simp

/-- The packed rows of a cache with one entry appended: the old rows, then the entry. -/
theorem packRow_append (cache : Cache α d) (T : Nat) (h : cache.length = T) (e : Entry α d)
    (j : Fin (T + 1)) :
    Seq.listGet Entry.zero (cache ++ [e]) j.val =
      if j.val < T then Seq.listGet Entry.zero cache j.val else e := by
  rw [Seq.listGet_eq_getElem _ _ _ (by simp; omega)]
  split
  · rw [Seq.listGet_eq_getElem _ _ _ (by omega), List.getElem_append_left (by omega)]
  · rename_i hj
    have : j.val = cache.length := by have := j.isLt; omega
    simp [this]

/-- Packing a cache with an entry appended (latent part) appends the entry's row. -/
theorem packLatent_append (cache : Cache α d) (T : Nat) (h : cache.length = T) (e : Entry α d) :
    packLatent (T + 1) (cache ++ [e]) = appendRow (packLatent T cache) e.latent := by
  funext j
  simp only [packLatent, appendRow, packRow_append cache T h e j]
  split <;> rfl

/-- Packing a cache with an entry appended (shared-key part) appends the entry's row. -/
theorem packShared_append (cache : Cache α d) (T : Nat) (h : cache.length = T) (e : Entry α d) :
    packShared (T + 1) (cache ++ [e]) = appendRow (packShared T cache) e.sharedKey := by
  funext j
  simp only [packShared, appendRow, packRow_append cache T h e j]
  split <;> rfl

/-- **The list↔packed bridge** (open in the article): for a list cache of length `T`, packing it
and running the packed step gives the packing of the list step's new cache (both parts) and
the list step's output. -/
theorem stepPacked_pack (p : Params α d) (scoreScale : α) (cache : Cache α d) (T : Nat)
    (h : cache.length = T) (x : Tensor α [d.modelDim]) :
    stepPacked p scoreScale (packLatent T cache) (packShared T cache) x =
      (packLatent (T + 1) (step p scoreScale cache x).1,
       packShared (T + 1) (step p scoreScale cache x).1,
       (step p scoreScale cache x).2) := by
  rw [step_output p scoreScale cache T h x, step_cache, packLatent_append cache T h,
    packShared_append cache T h]
  rfl

/-- The packed caches after the packed step have the list cache's new length (`T + 1` rows for
`T + 1` entries). -/
theorem step_pack_length (p : Params α d) (scoreScale : α) (cache : Cache α d) (T : Nat)
    (h : cache.length = T) (x : Tensor α [d.modelDim]) :
    (step p scoreScale cache x).1.length = T + 1 := by
  rw [step_cache_length, h]

/-- The sequence form of the layer (`forward`) has one output per token. -/
theorem forward_length (p : Params α d) (scoreScale : α) (xs : List (Tensor α [d.modelDim])) :
    (forward p scoreScale xs).length = xs.length :=
  CausalScan.outputs_length _ _ _

end GatedMLA

end KimiK3
