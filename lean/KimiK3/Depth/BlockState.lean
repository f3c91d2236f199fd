module

public import KimiK3.Depth.Kernel
public import KimiK3.Sequence.KernelLemmas

/-!
# The depth block state: well-formedness and layer accounting (k3-spec §2.4, §2.5)

Proved for every block size `B > 0` and any layer outputs:
* `initial_wf`, `finishLayer_wf`, `commitAll_wf`: the partial block never reaches `B` layers;
* `layers_finishLayer`: one commit adds exactly one layer to
  `layers B s = B · #blocks + count` (every layer is committed once, none counted twice);
* `finishLayer_full`/`finishLayer_not_full`: a commit that fills the block appends it to the
  completed list and leaves an empty partial block (sum zero, count zero);
* `commitAll_initial_blocks_length`, `commitAll_initial_count`, `commitAll_initial_sources_length`:
  after `n` commits from `initial`, `n / B` completed blocks, a partial block of `n % B` layers and
  `1 + n / B + [n % B ≠ 0]` sources;
* the report's numbers: 93 layers at `B = 12` give 7 completed blocks, a partial block of 9 and
  9 sources (`paper_93_layers`); 17 layers give 1 completed block and a partial block of 5
  (`widget_17_layers`); `B = 3`, three commits fold the partial block (`three_commits_fold`).
-/

@[expose] public section

namespace KimiK3

namespace BlockState

variable {α : Type} [Scalar α] {d : Nat}

/-- The number of layers a state has absorbed at block size `blockSize`: `B` per completed block
plus the layers of the partial block (k3-spec §2.4). For proofs only (`List.length` does not
compile offline). -/
noncomputable def layers (blockSize : Nat) (s : BlockState α d) : Nat := blockSize * s.blocks.length + s.count

/-- The initial state is well formed for every positive block size. -/
theorem initial_wf {blockSize : Nat} (h : 0 < blockSize) (e : Tensor α [d]) :
    (initial e).WF blockSize := h

/-- The initial state has absorbed no layer. -/
@[simp] theorem layers_initial (blockSize : Nat) (e : Tensor α [d]) :
    (initial e).layers blockSize = 0 := by
  simp [layers, initial]

/-- A commit that fills the block: the block sum `(P + seqOut) + chanOut` is appended to the
completed list and the partial block starts empty (sum zero, count zero). -/
theorem finishLayer_full {blockSize : Nat} (s : BlockState α d) (seqOut chanOut : Tensor α [d])
    (h : s.count + 1 = blockSize) :
    s.finishLayer blockSize seqOut chanOut =
      ⟨s.embedding, s.blocks ++ [fun k => s.afterSequence seqOut k + chanOut k], fun _ => 0, 0⟩ := by
  simp [finishLayer, h]

/-- A commit that does not fill the block adds the layer to the partial sum. -/
theorem finishLayer_not_full {blockSize : Nat} (s : BlockState α d) (seqOut chanOut : Tensor α [d])
    (h : s.count + 1 ≠ blockSize) :
    s.finishLayer blockSize seqOut chanOut =
      ⟨s.embedding, s.blocks, fun k => s.afterSequence seqOut k + chanOut k, s.count + 1⟩ := by
  simp [finishLayer, h]

/-- A commit keeps the embedding. -/
@[simp] theorem finishLayer_embedding (blockSize : Nat) (s : BlockState α d)
    (seqOut chanOut : Tensor α [d]) : (s.finishLayer blockSize seqOut chanOut).embedding = s.embedding := by
  simp only [finishLayer]; split <;> rfl

/-- **A commit preserves well-formedness** (k3-spec §2.5, `finishLayer_wf`). -/
theorem finishLayer_wf {blockSize : Nat} (hB : 0 < blockSize) {s : BlockState α d} (hs : s.WF blockSize)
    (seqOut chanOut : Tensor α [d]) : (s.finishLayer blockSize seqOut chanOut).WF blockSize := by
  unfold WF at *
  by_cases h : s.count + 1 = blockSize
  · rw [finishLayer_full s seqOut chanOut h]; exact hB
  · rw [finishLayer_not_full s seqOut chanOut h]; show s.count + 1 < blockSize; omega

/-- **Each commit adds exactly one layer**: `B · #blocks + count` grows by one, so every layer is
committed once and none is counted both in a completed block and in the partial block. -/
theorem layers_finishLayer (blockSize : Nat) (s : BlockState α d) (seqOut chanOut : Tensor α [d]) :
    (s.finishLayer blockSize seqOut chanOut).layers blockSize = s.layers blockSize + 1 := by
  by_cases h : s.count + 1 = blockSize
  · rw [finishLayer_full s seqOut chanOut h]
    simp only [layers, List.length_append, List.length_singleton, Nat.mul_add, Nat.mul_one]; omega
  · rw [finishLayer_not_full s seqOut chanOut h]
    simp only [layers]; omega

@[simp] theorem commitAll_nil (blockSize : Nat) (s : BlockState α d) : s.commitAll blockSize [] = s := rfl

theorem commitAll_cons (blockSize : Nat) (s : BlockState α d) (o : Tensor α [d] × Tensor α [d])
    (outs : List (Tensor α [d] × Tensor α [d])) :
    s.commitAll blockSize (o :: outs) = (s.finishLayer blockSize o.1 o.2).commitAll blockSize outs := rfl

/-- Committing many layers keeps the embedding (always source 0). -/
@[simp] theorem commitAll_embedding (blockSize : Nat) (s : BlockState α d)
    (outs : List (Tensor α [d] × Tensor α [d])) : (s.commitAll blockSize outs).embedding = s.embedding := by
  induction outs generalizing s with
  | nil => rfl
  | cons o outs ih => rw [commitAll_cons, ih, finishLayer_embedding]

/-- Committing many layers preserves well-formedness. -/
theorem commitAll_wf {blockSize : Nat} (hB : 0 < blockSize) {s : BlockState α d} (hs : s.WF blockSize)
    (outs : List (Tensor α [d] × Tensor α [d])) : (s.commitAll blockSize outs).WF blockSize := by
  induction outs generalizing s with
  | nil => exact hs
  | cons o outs ih => rw [commitAll_cons]; exact ih (finishLayer_wf hB hs o.1 o.2)

/-- Committing `outs` adds exactly `outs.length` layers. -/
theorem layers_commitAll (blockSize : Nat) (s : BlockState α d) (outs : List (Tensor α [d] × Tensor α [d])) :
    (s.commitAll blockSize outs).layers blockSize = s.layers blockSize + outs.length := by
  induction outs generalizing s with
  | nil => rfl
  | cons o outs ih => rw [commitAll_cons, ih, layers_finishLayer, List.length_cons]; omega

omit [Scalar α] in
/-- The number of sources: the embedding, the completed blocks and a non-empty partial block. -/
theorem sources_length (s : BlockState α d) :
    s.sources.length = 1 + s.blocks.length + (if s.count = 0 then 0 else 1) := by
  simp only [sources, Seq.listAppend_eq, List.length_cons, List.length_append]
  split <;> simp <;> omega

omit [Scalar α] in
/-- The embedding is source 0. -/
theorem sources_head (s : BlockState α d) : s.sources.head? = some s.embedding := rfl

omit [Scalar α] in
/-- A well-formed state with `layers = n` has `n / B` completed blocks and `n % B` partial layers. -/
theorem blocks_count_of_layers {blockSize : Nat} (s : BlockState α d) (hs : s.WF blockSize) :
    s.blocks.length = s.layers blockSize / blockSize ∧ s.count = s.layers blockSize % blockSize := by
  unfold WF at hs
  have hB : 0 < blockSize := by omega
  simp only [layers]
  constructor
  · rw [Nat.mul_add_div hB, Nat.div_eq_of_lt hs, Nat.add_zero]
  · rw [Nat.mul_add_mod, Nat.mod_eq_of_lt hs]

/-- **`n` commits from the initial state leave `n / B` completed blocks.** -/
theorem commitAll_initial_blocks_length {blockSize : Nat} (hB : 0 < blockSize) (e : Tensor α [d])
    (outs : List (Tensor α [d] × Tensor α [d])) :
    ((initial e).commitAll blockSize outs).blocks.length = outs.length / blockSize := by
  have h := (blocks_count_of_layers _ (commitAll_wf hB (initial_wf hB e) outs)).1
  rw [layers_commitAll, layers_initial, Nat.zero_add] at h; exact h

/-- **`n` commits from the initial state leave a partial block of `n % B` layers.** -/
theorem commitAll_initial_count {blockSize : Nat} (hB : 0 < blockSize) (e : Tensor α [d])
    (outs : List (Tensor α [d] × Tensor α [d])) :
    ((initial e).commitAll blockSize outs).count = outs.length % blockSize := by
  have h := (blocks_count_of_layers _ (commitAll_wf hB (initial_wf hB e) outs)).2
  rw [layers_commitAll, layers_initial, Nat.zero_add] at h; exact h

/-- **After `n` commits the retrieval reads `1 + n / B + [n % B ≠ 0]` sources.** -/
theorem commitAll_initial_sources_length {blockSize : Nat} (hB : 0 < blockSize) (e : Tensor α [d])
    (outs : List (Tensor α [d] × Tensor α [d])) :
    ((initial e).commitAll blockSize outs).sources.length =
      1 + outs.length / blockSize + (if outs.length % blockSize = 0 then 0 else 1) := by
  rw [sources_length, commitAll_initial_blocks_length hB, commitAll_initial_count hB]

/-- **The report's 93-layer model** (k3-spec §2.4): with blocks of 12 layers, 7 completed blocks
(84 layers), a partial block of 9 and, with the embedding, 9 sources. -/
theorem paper_93_layers (e : Tensor α [d]) (outs : List (Tensor α [d] × Tensor α [d]))
    (h : outs.length = 93) :
    ((initial e).commitAll 12 outs).blocks.length = 7 ∧ ((initial e).commitAll 12 outs).count = 9 ∧
      ((initial e).commitAll 12 outs).sources.length = 9 := by
  refine ⟨?_, ?_, ?_⟩
  · rw [commitAll_initial_blocks_length (by decide), h]
  · rw [commitAll_initial_count (by decide), h]
  · rw [commitAll_initial_sources_length (by decide), h]; decide

/-- **The widget default of 17 layers** (k3-spec §2.4): one completed block and a partial block of
5 layers (3 sources). -/
theorem widget_17_layers (e : Tensor α [d]) (outs : List (Tensor α [d] × Tensor α [d]))
    (h : outs.length = 17) :
    ((initial e).commitAll 12 outs).blocks.length = 1 ∧ ((initial e).commitAll 12 outs).count = 5 ∧
      ((initial e).commitAll 12 outs).sources.length = 3 := by
  refine ⟨?_, ?_, ?_⟩
  · rw [commitAll_initial_blocks_length (by decide), h]
  · rw [commitAll_initial_count (by decide), h]
  · rw [commitAll_initial_sources_length (by decide), h]; decide

/-- **Block size 3, three commits**: the partial block is folded into the completed list as the
sum of the three layers' outputs, in commit order, and the partial block is empty again. -/
theorem three_commits_fold (e a₁ c₁ a₂ c₂ a₃ c₃ : Tensor α [d]) :
    (initial e).commitAll 3 [(a₁, c₁), (a₂, c₂), (a₃, c₃)] =
      ⟨e, [fun k => ((a₁ k + c₁ k + a₂ k) + c₂ k + a₃ k) + c₃ k], fun _ => 0, 0⟩ := by
  simp [commitAll, finishLayer, initial, afterSequence]

end BlockState

end KimiK3
