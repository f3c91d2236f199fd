module

public import KimiK3.KimiLinear.MLA
public import KimiK3.Sequence.MLAMasked

/-!
# Kimi Linear MLA over a whole sequence: masked attention = the causal scan (k3-spec §7, §2.0)

transformers 5.23's prefill (`KimiLinearModel.forward`, `models/kimi_linear/modeling_kimi_linear.py`)
runs each `KimiLinearAttention` layer over all the prompt's tokens at once: every token's cache
entry is computed (and appended to the cache of the tokens before the prompt, if any), and
position `t` attends over all rows under the causal mask (`create_causal_mask`), rows after `t`
excluded. The layer is the one of `KimiLinear/MLA.lean`: K3's MLA without the output gate, with
the low-rank query (`q_lora_rank` set, `MLA.step`) or the direct one (`q_lora_rank = None`,
`MLA.stepDirect`).

Definitions: `stepWith` (one causal step with the query latent read by a function `query`, so
that both query paths are one step: `step_eq_stepWith`, `stepDirect_eq_stepWith`),
`maskedOutputsOf`, `maskedForwardFrom` (the masked full-sequence form from a cache).

Proved, as K3's `GatedMLA.maskedForward_eq_forward` (`Sequence/MLAMasked.lean`) but for the
ungated attention and from any cache: `headOutputsOf_masked_eq`, `attendOf_masked_eq` (masked
attention at `t` over `T` rows = softmax attention over the first `t + 1`), `run_stepWith_cache`
(the scan's cache is the old cache and the new entries, no law), and
**`run_stepWith_eq_maskedForwardFrom`**, **`run_step_eq_maskedForwardFrom`**,
**`run_stepDirect_eq_maskedForwardFrom`** (the scan from a cache = the masked form from it, cache
and outputs). The last three need `ScalarLaws`: the masked softmax and the step softmax subtract
different maxima, equal over the reals, not in floating point.
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

namespace MLA

variable {α : Type} {d : GatedMLA.Dims}

section Scalar

variable [Scalar α]

/-- **One causal ungated MLA step with the query latent `query x`** (k3-spec §7; transformers
`KimiLinearAttention.forward` at one token): append K3's entry of `x`, attend over past and
current entries (`attendOf` with the softmax), no output gate. `step` is the instance at K3's
query latent `RMSNorm(x W_qd) ⊙ γ_q` (`q_lora_rank` set), `stepDirect` the one at `x` itself
(`q_lora_rank = None`). -/
@[macro_inline] def stepWith (query : Tensor α [d.modelDim] → Tensor α [d.queryLatentDim])
    (p : GatedMLA.Params α d) (scoreScale : α) (cache : GatedMLA.Cache α d)
    (x : Tensor α [d.modelDim]) : GatedMLA.Cache α d × Tensor α [d.modelDim] :=
  let cache' := Seq.listAppend cache [GatedMLA.entry p x]
  let n := Seq.listLen cache'
  (cache', attendOf (fun _ v => Seq.softmax v) p (query x) scoreScale n
    (GatedMLA.packLatent n cache') (GatedMLA.packShared n cache'))

/-- The outputs of the masked full-sequence form for the tokens `xs` at positions `t, t+1, …`:
each attends (ungated, query latent `query x`) over all `T` packed rows with the causal mask at
its position (k3-spec §2.0: true exclusion, `Seq.maskedSoftmax`). -/
noncomputable def maskedOutputsOf (query : Tensor α [d.modelDim] → Tensor α [d.queryLatentDim])
    (p : GatedMLA.Params α d) (scoreScale : α) (T : Nat) (lat : Tensor α [T, d.kvLatentDim])
    (sh : Tensor α [T, d.sharedKeyDim]) : Nat → List (Tensor α [d.modelDim]) → List (Tensor α [d.modelDim])
  | _, [] => []
  | t, x :: xs => attendOf (fun _ v => Seq.maskedSoftmax t v) p (query x) scoreScale T lat sh ::
      maskedOutputsOf query p scoreScale T lat sh (t + 1) xs

/-- **The masked full-sequence form of the Kimi Linear MLA layer from a cache** (k3-spec §7;
transformers' prefill of `KimiLinearAttention` with a `past_key_values` cache and
`create_causal_mask`): the entries of all tokens `xs` are appended to `cache` at once; the token
at position `t` of `xs` attends over all rows with the mask `j ≤ cache.length + t`. Returns the
new cache and the outputs. -/
noncomputable def maskedForwardFrom (query : Tensor α [d.modelDim] → Tensor α [d.queryLatentDim])
    (p : GatedMLA.Params α d) (scoreScale : α) (cache : GatedMLA.Cache α d)
    (xs : List (Tensor α [d.modelDim])) : GatedMLA.Cache α d × List (Tensor α [d.modelDim]) :=
  let all := cache ++ GatedMLA.entries p xs
  (all, maskedOutputsOf query p scoreScale all.length (GatedMLA.packLatent all.length all)
    (GatedMLA.packShared all.length all) cache.length xs)

/-- The low-rank-query step is `stepWith` at K3's query latent. -/
theorem step_eq_stepWith (p : GatedMLA.Params α d) (scoreScale : α) :
    step p scoreScale = stepWith (GatedMLA.queryLatent p) p scoreScale := by
  funext cache x
  simp only [step, stepWith, attend, attendWith_eq_attendOf]

/-- The direct-query step is `stepWith` at the layer input. -/
theorem stepDirect_eq_stepWith (p : GatedMLA.Params α d) (hq : d.queryLatentDim = d.modelDim)
    (scoreScale : α) : stepDirect p hq scoreScale = stepWith (directQuery hq) p scoreScale := rfl

/-- A step's output attends over the `T + 1` packed rows of the old cache (length `T`) with the
new entry appended. -/
theorem stepWith_eq (query : Tensor α [d.modelDim] → Tensor α [d.queryLatentDim])
    (p : GatedMLA.Params α d) (scoreScale : α) (cache : GatedMLA.Cache α d) (x : Tensor α [d.modelDim]) :
    stepWith query p scoreScale cache x =
      (cache ++ [GatedMLA.entry p x],
       attendOf (fun _ v => Seq.softmax v) p (query x) scoreScale (cache.length + 1)
        (GatedMLA.packLatent (cache.length + 1) (cache ++ [GatedMLA.entry p x]))
        (GatedMLA.packShared (cache.length + 1) (cache ++ [GatedMLA.entry p x]))) := by
  have hn : Seq.listLen (Seq.listAppend cache [GatedMLA.entry p x]) = cache.length + 1 := by simp
  simp only [stepWith]
  generalize Seq.listLen (Seq.listAppend cache [GatedMLA.entry p x]) = n at hn
  subst hn
  simp

/-- **The scan's cache** is the old cache followed by the entries of the tokens (no law). -/
theorem run_stepWith_cache (query : Tensor α [d.modelDim] → Tensor α [d.queryLatentDim])
    (p : GatedMLA.Params α d) (scoreScale : α) (cache : GatedMLA.Cache α d)
    (xs : List (Tensor α [d.modelDim])) :
    (CausalScan.run (stepWith query p scoreScale) cache xs).1 = cache ++ GatedMLA.entries p xs := by
  induction xs generalizing cache with
  | nil => simp [GatedMLA.entries]
  | cons x xs ih => rw [CausalScan.run_cons, ih, stepWith_eq]; simp [GatedMLA.entries]

end Scalar

section Laws

variable [ScalarLaws α]

/-- **Masked head outputs at position `t` over `T` rows are the softmax head outputs over the
first `t + 1` rows** (the mask excludes the future exactly). -/
theorem headOutputsOf_masked_eq (p : GatedMLA.Params α d) (cq : Tensor α [d.queryLatentDim])
    (scoreScale : α) (T t : Nat) (ht : t < T) (lat : Tensor α [T, d.kvLatentDim])
    (sh : Tensor α [T, d.sharedKeyDim]) :
    headOutputsOf (fun _ v => Seq.maskedSoftmax t v) p cq scoreScale T lat sh =
      headOutputsOf (fun _ v => Seq.softmax v) p cq scoreScale (t + 1)
        (fun j => lat ⟨j.val, by omega⟩) (fun j => sh ⟨j.val, by omega⟩) := by
  obtain ⟨T', rfl⟩ : ∃ T', T = T' + 1 := ⟨T - 1, by omega⟩
  funext h c
  simp only [headOutputsOf, Seq.memoFn_eq, Seq.sum_eq]
  generalize hs : GatedMLA.scores p cq scoreScale h (T' + 1) lat sh = s
  have hs' : GatedMLA.scores p cq scoreScale h (t + 1)
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

/-- **Masked ungated attention at position `t` over `T` rows equals the step attention over the
first `t + 1` rows.** -/
theorem attendOf_masked_eq (p : GatedMLA.Params α d) (cq : Tensor α [d.queryLatentDim])
    (scoreScale : α) (T t : Nat) (ht : t < T) (lat : Tensor α [T, d.kvLatentDim])
    (sh : Tensor α [T, d.sharedKeyDim]) :
    attendOf (fun _ v => Seq.maskedSoftmax t v) p cq scoreScale T lat sh =
      attendOf (fun _ v => Seq.softmax v) p cq scoreScale (t + 1)
        (fun j => lat ⟨j.val, by omega⟩) (fun j => sh ⟨j.val, by omega⟩) := by
  simp only [attendOf, headOutputsOf_masked_eq p cq scoreScale T t ht lat sh]

/-- The scan's outputs from `cache` are the masked outputs over the packed rows of the cache
and all the tokens' entries. -/
theorem run_stepWith_outputs (query : Tensor α [d.modelDim] → Tensor α [d.queryLatentDim])
    (p : GatedMLA.Params α d) (scoreScale : α) (cache : GatedMLA.Cache α d)
    (xs : List (Tensor α [d.modelDim])) :
    (CausalScan.run (stepWith query p scoreScale) cache xs).2 =
      maskedOutputsOf query p scoreScale (cache ++ GatedMLA.entries p xs).length
        (GatedMLA.packLatent (cache ++ GatedMLA.entries p xs).length (cache ++ GatedMLA.entries p xs))
        (GatedMLA.packShared (cache ++ GatedMLA.entries p xs).length (cache ++ GatedMLA.entries p xs))
        cache.length xs := by
  induction xs generalizing cache with
  | nil => rfl
  | cons x xs ih =>
    have e : cache ++ [GatedMLA.entry p x] ++ GatedMLA.entries p xs =
        cache ++ GatedMLA.entries p (x :: xs) := by simp [GatedMLA.entries]
    have hl : (cache ++ [GatedMLA.entry p x]).length = cache.length + 1 := by simp
    rw [CausalScan.run_cons, stepWith_eq]
    dsimp only
    rw [ih, e, hl]
    simp only [maskedOutputsOf]
    congr 1
    have hT : cache.length < (cache ++ GatedMLA.entries p (x :: xs)).length := by
      simp only [GatedMLA.entries, List.length_append, List.length_cons]; omega
    rw [attendOf_masked_eq p (query x) scoreScale _ cache.length hT]
    have hrow : ∀ j : Fin (cache.length + 1),
        Seq.listGet GatedMLA.Entry.zero (cache ++ [GatedMLA.entry p x]) j.val =
          Seq.listGet GatedMLA.Entry.zero (cache ++ GatedMLA.entries p (x :: xs)) j.val := by
      intro j
      rw [← e]
      exact (GatedMLA.listGet_append_left _ (cache ++ [GatedMLA.entry p x]) (GatedMLA.entries p xs) _
        (by simp only [List.length_append, List.length_singleton]; exact j.isLt)).symm
    congr 1
    · funext j; simp only [GatedMLA.packLatent, hrow j]
    · funext j; simp only [GatedMLA.packShared, hrow j]

/-- **The causal scan of `stepWith` from a cache is the masked full-sequence form from it**:
the same new cache and the same outputs. -/
theorem run_stepWith_eq_maskedForwardFrom (query : Tensor α [d.modelDim] → Tensor α [d.queryLatentDim])
    (p : GatedMLA.Params α d) (scoreScale : α) (cache : GatedMLA.Cache α d)
    (xs : List (Tensor α [d.modelDim])) :
    CausalScan.run (stepWith query p scoreScale) cache xs = maskedForwardFrom query p scoreScale cache xs := by
  apply Prod.ext
  · exact run_stepWith_cache query p scoreScale cache xs
  · exact run_stepWith_outputs query p scoreScale cache xs

/-- **Low-rank query** (`q_lora_rank` set): the causal scan of `MLA.step` from a cache is the
masked full-sequence form at K3's query latent. -/
theorem run_step_eq_maskedForwardFrom (p : GatedMLA.Params α d) (scoreScale : α)
    (cache : GatedMLA.Cache α d) (xs : List (Tensor α [d.modelDim])) :
    CausalScan.run (step p scoreScale) cache xs =
      maskedForwardFrom (GatedMLA.queryLatent p) p scoreScale cache xs := by
  rw [step_eq_stepWith, run_stepWith_eq_maskedForwardFrom]

/-- **Direct query** (`q_lora_rank = None`): the causal scan of `MLA.stepDirect` from a cache is
the masked full-sequence form at the layer input. -/
theorem run_stepDirect_eq_maskedForwardFrom (p : GatedMLA.Params α d)
    (hq : d.queryLatentDim = d.modelDim) (scoreScale : α) (cache : GatedMLA.Cache α d)
    (xs : List (Tensor α [d.modelDim])) :
    CausalScan.run (stepDirect p hq scoreScale) cache xs =
      maskedForwardFrom (directQuery hq) p scoreScale cache xs := by
  rw [stepDirect_eq_stepWith, run_stepWith_eq_maskedForwardFrom]

end Laws

end MLA

end KimiLinear

end KimiK3
