module

public import KimiK3.Model.LanguageModel
public import KimiK3.Sequence.KernelLemmas

/-!
# How many AttnRes sources a token has (k3-spec §1, §2.4)

Each layer commits once to the depth state, so after `L` layers the token's depth state holds
`L / B` completed blocks and a partial block of `L % B` layers (`layersToken_progress`). The
final retrieval therefore reads `1 + L / B + [L % B ≠ 0]` sources
(`LanguageModel.final_sources_length`): for the paper's 93 layers and blocks of 12, the
embedding, 7 completed blocks and the partial block of 9 layers, **9 sources**
(`paperModel_final_sources`).
-/

@[expose] public section

namespace KimiK3

namespace BackboneLayer

variable {α : Type} [Scalar α] {c : Config}

/-- One layer advances the depth position `blocks · B + count` by one and keeps the partial block
below the block size. -/
theorem forwardToken_progress (layer : BackboneLayer α c) (s : MixerState α c)
    (depth : BlockState α c.hiddenDim) (h : depth.count < c.attnResBlockSize) :
    (layer.forwardToken s depth).2.blocks.length * c.attnResBlockSize + (layer.forwardToken s depth).2.count =
      depth.blocks.length * c.attnResBlockSize + depth.count + 1 ∧
    (layer.forwardToken s depth).2.count < c.attnResBlockSize := by
  simp only [forwardToken, commit, BlockState.memoPartial, BlockState.finishLayer]
  split
  · simp only [Seq.listAppend_eq, List.length_append, List.length_cons, List.length_nil,
      Nat.add_mul, Nat.one_mul]
    omega
  · simp only
    omega

end BackboneLayer

namespace LanguageModel

variable {α : Type} [Scalar α] {c : Config}

/-- Through a stack of `ls.length` layers (with as many states) the depth position advances by
`ls.length`, and the partial block stays below the block size. -/
theorem layersToken_progress : ∀ (ls : List (BackboneLayer α c)) (ss : State α c)
    (depth : BlockState α c.hiddenDim), ss.length = ls.length → depth.count < c.attnResBlockSize →
    (ModelList.scanLayers (fun layer s d => layer.forwardToken s d) ls ss depth).1.blocks.length *
        c.attnResBlockSize + (ModelList.scanLayers (fun layer s d => layer.forwardToken s d) ls ss depth).1.count =
      depth.blocks.length * c.attnResBlockSize + depth.count + ls.length ∧
    (ModelList.scanLayers (fun layer s d => layer.forwardToken s d) ls ss depth).1.count < c.attnResBlockSize
  | [], _, depth, _, h => ⟨rfl, h⟩
  | _ :: _, [], _, hl, _ => by simp at hl
  | l :: ls, s :: ss, depth, hl, h => by
    have h1 := l.forwardToken_progress s depth h
    have h2 := layersToken_progress ls ss (l.forwardToken s depth).2 (by simpa using hl) h1.2
    simp only [ModelList.scanLayers, List.length_cons]
    omega

/-- **The number of sources of the final retrieval** after all layers: the embedding, `L / B`
completed blocks, and the partial block when `B` does not divide `L`. -/
theorem final_sources_length (model : LanguageModel α c) (states : State α c)
    (hs : states.length = model.layers.length) (hB : 0 < c.attnResBlockSize) (x : Tensor α [c.hiddenDim]) :
    (model.layersToken states (BlockState.initial x)).1.sources.length =
      1 + model.layers.length / c.attnResBlockSize +
        (if model.layers.length % c.attnResBlockSize = 0 then 0 else 1) := by
  have h := layersToken_progress model.layers states (BlockState.initial x) hs hB
  simp only [layersToken]
  generalize (ModelList.scanLayers (fun layer s d => layer.forwardToken s d) model.layers states
    (BlockState.initial x)).1 = d at h ⊢
  obtain ⟨h1, h2⟩ := h
  simp only [BlockState.initial, List.length_nil, Nat.zero_mul, Nat.add_zero, Nat.zero_add] at h1
  have hdiv : model.layers.length / c.attnResBlockSize = d.blocks.length := by
    rw [← h1, Nat.add_comm, Nat.add_mul_div_right _ _ hB, Nat.div_eq_of_lt h2, Nat.zero_add]
  have hmod : model.layers.length % c.attnResBlockSize = d.count := by
    rw [← h1, Nat.add_comm, Nat.add_mul_mod_self_right, Nat.mod_eq_of_lt h2]
  rw [hdiv, hmod]
  simp only [BlockState.sources, Seq.listAppend_eq, List.length_cons, List.length_append]
  split <;> simp <;> omega

/-- **A model of the paper configuration with its 93 layers reads 9 sources** at the final
retrieval (k3-spec §1: the embedding, 7 completed blocks of 12 layers, the partial block of 9). -/
theorem paperModel_final_sources (model : LanguageModel α paperConfig) (states : State α paperConfig)
    (hl : model.layers.length = 93) (hs : states.length = 93) (x : Tensor α [paperConfig.hiddenDim]) :
    (model.layersToken states (BlockState.initial x)).1.sources.length = 9 := by
  rw [final_sources_length model states (by rw [hs, hl]) (by decide) x, hl]
  rfl

end LanguageModel

end KimiK3
