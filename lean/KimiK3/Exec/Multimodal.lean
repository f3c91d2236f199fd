module

public import KimiK3.Exec.Model
public import KimiK3.Exec.Vision
public import KimiK3.Vision.Splice

/-!
# The executable multimodal prefill equals the reference (k3-spec §2.5, §2.9, §7; report §2.4)

The prompt's placeholder ids are replaced by the visual rows in reading order, then the language
model runs token by token from its initial state (`Vision.multimodalPrefill`). For every
`[Scalar α]` (no laws) and every configuration:

* `Exec.LanguageModel.runEmbedded_eq`: token-by-token evaluation of array-backed rows is
  `LanguageModel.runEmbedded`;
* `Exec.LanguageModel.spliceRows_eq`: the executable splice of ids (`spliceRows`) stores the rows
  that `embedSlots` reads for the slots of `Vision.spliceFrom`;
* **`Exec.Vision.multimodalPrefill_eq`**: the executable prefill is `Vision.multimodalPrefill`
  (final state and the logits of every position) for every prompt whose placeholder count is the
  number of visual rows;
* and over `[TrigScalar α]`, **`Exec.Vision.multimodalPrefill_clipFeatures_eq`**: one clip through
  the executable tower (the library's `Vision.embed` stored once, `encode`, `mergeProject`), its
  rows spliced into the prompt and run through the executable model, is
  `Vision.multimodalPrefill` of `Vision.clipFeatures` (what `multimodal_prefill`'s Lean leg
  evaluates).

The executable splice takes no proof that the counts agree: on a prompt with more placeholders
than visual rows it reads the missing rows as zeros (`Arr.get` past the end), and the theorems
say nothing about such a prompt; the reference has no splice for it, and pybridge rejects it
(`multimodal.splice`: the two counts named).
-/

@[expose] public section

namespace KimiK3

namespace Exec

variable {α : Type} {c : Config}

namespace LanguageModel

variable [Scalar α]

/-- **Executable token-by-token evaluation of embedding rows is `LanguageModel.runEmbedded`**:
the final state and the logits of every row. -/
theorem runEmbedded_eq (model : LanguageModel α c.execDims) (states : State α c.execDims)
    (xs : List (Arr α [c.hiddenDim])) :
    (stateToSpec (model.runEmbedded states xs).1, listMap Arr.toTensor (model.runEmbedded states xs).2) =
      model.toSpec.runEmbedded (stateToSpec states) (listMap Arr.toTensor xs) := by
  unfold runEmbedded KimiK3.LanguageModel.runEmbedded
  rw [scan_map model.stepEmbedded model.toSpec.stepEmbedded stateToSpec Arr.toTensor Arr.toTensor
    (fun s x => stepEmbedded_eq model s x), scan_eq_run]

/-- **The executable splice stores the rows the reference splice reads**: from visual row `k` on,
the rows of `spliceRows` at the placeholder `ph` are `embedSlots` of `Vision.spliceFrom`. -/
theorem spliceRows_eq {N : Nat} (model : LanguageModel α c.execDims) (visual : Arr α [N, c.hiddenDim])
    (ph : Fin c.vocabSize) (tokens : List (Fin c.vocabSize)) (k : Nat)
    (h : k + KimiK3.Vision.placeholderCount ph tokens = N) :
    listMap Arr.toTensor (model.spliceRows visual ph.val (listMap Fin.val tokens) k) =
      model.toSpec.embedSlots visual.toTensor (KimiK3.Vision.spliceFrom ph N tokens k h) := by
  induction tokens generalizing k with
  | nil => rfl
  | cons t ts ih =>
    by_cases ht : t = ph
    · have hv : t.val = ph.val := congrArg Fin.val ht
      have hk : k < N := by
        simp only [KimiK3.Vision.placeholderCount, ht, if_true] at h; omega
      have h' : k + 1 + KimiK3.Vision.placeholderCount ph ts = N := by
        simp only [KimiK3.Vision.placeholderCount, ht, if_true] at h; omega
      simp only [listMap, spliceRows, if_pos hv, KimiK3.Vision.spliceFrom, dif_pos ht]
      exact congr (congrArg List.cons (Arr.toTensor_row visual ⟨k, hk⟩)) (ih (k + 1) h')
    · have hv : t.val ≠ ph.val := fun e => ht (Fin.ext e)
      have h' : k + KimiK3.Vision.placeholderCount ph ts = N := by
        simp only [KimiK3.Vision.placeholderCount, ht, if_false] at h; omega
      simp only [listMap, spliceRows, if_neg hv, KimiK3.Vision.spliceFrom, dif_neg ht]
      exact congr (congrArg List.cons (embed_eq model t)) (ih k h')

end LanguageModel

namespace Vision

/-- **The executable multimodal prefill is `Vision.multimodalPrefill`** (k3-spec §2.5): for a
prompt whose placeholder count equals the number `N` of visual rows, the final state and the
logits of every position. -/
theorem multimodalPrefill_eq [Scalar α] {N : Nat} (model : LanguageModel α c.execDims)
    (visual : Arr α [N, c.hiddenDim]) (ph : Fin c.vocabSize) (tokens : List (Fin c.vocabSize))
    (h : KimiK3.Vision.placeholderCount ph tokens = N) :
    (LanguageModel.stateToSpec (multimodalPrefill model visual ph.val (listMap Fin.val tokens)).1,
      listMap Arr.toTensor (multimodalPrefill model visual ph.val (listMap Fin.val tokens)).2) =
      KimiK3.Vision.multimodalPrefill model.toSpec visual.toTensor ph tokens h := by
  unfold multimodalPrefill KimiK3.Vision.multimodalPrefill KimiK3.Vision.splice
  rw [LanguageModel.runEmbedded_eq, LanguageModel.spliceRows_eq model visual ph tokens 0 (by omega),
    LanguageModel.initialState_eq]

/-- **One clip through the executable tower and model is `Vision.multimodalPrefill` of
`Vision.clipFeatures`** (k3-spec §2.5, §7; report §2.4): the library's patch embedding stored
once, the executable encoder and merge-and-project (as in `clipFeatures_eq`), the `h'·w'` visual
rows spliced into a prompt with exactly `h'·w'` placeholders and run through the executable
language model from its initial state (what `multimodal_prefill`'s Lean leg evaluates). -/
theorem multimodalPrefill_clipFeatures_eq [TrigScalar α] {P D H₀ W₀ A R V M mH mW : Nat}
    (model : LanguageModel α c.execDims) (emb : KimiK3.Vision.Embedding α P D H₀ W₀)
    (blocks : List (Block α D A R V M)) (finalNorm : Arr α [D])
    (p : Projector α (mH * (mW * D)) c.hiddenDim) (eps projEps theta : α) (F t h' w' : Nat) (hF : t ≤ F)
    (cos sin : Tensor α [t * ((h' * mH) * (w' * mW)), 2 * R])
    (patches : Tensor α [t * ((h' * mH) * (w' * mW)), P]) (ph : Fin c.vocabSize)
    (tokens : List (Fin c.vocabSize)) (h : KimiK3.Vision.placeholderCount ph tokens = h' * w') :
    let visual := mergeProject p projEps (encode blocks finalNorm eps (scoreScale R)
      (ropeCos theta R t (h' * mH) (w' * mW)) (ropeSin theta R t (h' * mH) (w' * mW))
      (Arr.ofTensor _ (KimiK3.Vision.embed emb
        ({ rows := KimiK3.Vision.weightMatrix H₀ (h' * mH), cols := KimiK3.Vision.weightMatrix W₀ (w' * mW),
           time := KimiK3.Vision.timeRows t hF (KimiK3.Vision.timeTable F D),
           cos := cos, sin := sin } :
          KimiK3.Vision.GridTables α t (h' * mH) (w' * mW) D H₀ W₀ R) patches)))
    (LanguageModel.stateToSpec (multimodalPrefill model visual ph.val (listMap Fin.val tokens)).1,
      listMap Arr.toTensor (multimodalPrefill model visual ph.val (listMap Fin.val tokens)).2) =
      KimiK3.Vision.multimodalPrefill model.toSpec
        (KimiK3.Vision.clipFeatures
          (⟨emb, listMap Block.toSpec blocks, finalNorm.toTensor, p.toSpec⟩ :
            KimiK3.Vision.MoonViT α P D H₀ W₀ A R V M mH mW c.hiddenDim) eps projEps theta F t h' w' hF patches)
        ph tokens h := by
  intro visual
  exact (multimodalPrefill_eq model visual ph tokens h).trans
    (congrArg (fun v => KimiK3.Vision.multimodalPrefill model.toSpec v ph tokens h)
      (clipFeatures_eq emb blocks finalNorm p eps projEps theta F t h' w' hF cos sin patches))

end Vision

end Exec

end KimiK3
