module

public import KimiK3.Sequence.KDA
public import KimiK3.Sequence.Retention
public import KimiK3.Sequence.CausalScan

/-!
# The KDA layer step (k3-spec §2.2 steps 1–7, report Eq. 2–6)

The layer (defined in `Kernel.lean`: `KDA.layerStep`) keeps the last `convWidth` inputs for
its short causal depthwise convolution and one recurrent state per head. Per token it shifts
the window, projects and convolves `q, k, v`, applies SiLU, L2-normalizes `q` and `k`, computes
the bounded retention from a low-rank logit and `β = σ(x W_β)`, runs `KDA.step` on every head,
then gates, normalizes and projects the readouts.

Proved: the new head states are exactly `KDA.update` of the old ones with the prepared inputs
(`layerStep_heads`); the window shifts by one (`layerStep_window_last`, `layerStep_window_shift`);
every prepared retention lies in `(e^{g_min}, 1)` (`prepare_retention_bounds`) and the write
strength in `(0, 1)` (`prepare_writeStrength_bounds`); the sequence form has one output per
token (`layerForward_length`).
-/

@[expose] public section

namespace KimiK3

namespace KDA

variable {α : Type} {d : LayerDims}

/-- The head states after a layer step are `KDA.update` of the previous head states with the
prepared inputs (heads are independent). -/
theorem layerStep_heads [Scalar α] (p : LayerParams α d) (logFloor l2Eps : α) (s : LayerState α d)
    (x : Tensor α [d.modelDim]) (h : Fin d.heads) :
    (layerStep p logFloor l2Eps s x).1.heads h =
      update (s.heads h) (prepare p logFloor l2Eps (shiftWindow s.window x) x h) := by
  simp [layerStep]

/-- The newest window row after a step is the current token. -/
theorem layerStep_window_last [Scalar α] (p : LayerParams α d) (logFloor l2Eps : α)
    (s : LayerState α d) (x : Tensor α [d.modelDim]) (w : Fin d.convWidth)
    (hw : w.val + 1 = d.convWidth) : (layerStep p logFloor l2Eps s x).1.window w = x := by
  simp only [layerStep, Seq.memo2_eq, shiftWindow]
  split
  · omega
  · rfl

/-- The other window rows move one place towards the oldest end. -/
theorem layerStep_window_shift [Scalar α] (p : LayerParams α d) (logFloor l2Eps : α)
    (s : LayerState α d) (x : Tensor α [d.modelDim]) (w : Fin d.convWidth)
    (hw : w.val + 1 < d.convWidth) :
    (layerStep p logFloor l2Eps s x).1.window w = s.window ⟨w.val + 1, hw⟩ := by
  simp only [layerStep, Seq.memo2_eq, shiftWindow]
  split
  · rfl
  · omega

/-- **Retention bounds in the layer**: with a negative floor `g_min`, every prepared retention
lies strictly between `e^{g_min}` and `1` (report Eq. 5; at `g_min = −5`, `e^{−5} < α < 1`). -/
theorem prepare_retention_bounds [ScalarLaws α] (p : LayerParams α d) {logFloor : α}
    (hf : logFloor < 0) (l2Eps : α) (window : Tensor α [d.convWidth, d.modelDim])
    (x : Tensor α [d.modelDim]) (h : Fin d.heads) (i : Fin d.keyDim) :
    Scalar.exp logFloor < (prepare p logFloor l2Eps window x h).retention i ∧
      (prepare p logFloor l2Eps window x h).retention i < 1 := by
  simp only [prepare, Seq.memoFn_eq]
  exact retention_bounds hf _ _

/-- The prepared write strength `β = σ(x W_β)` lies strictly between `0` and `1`. -/
theorem prepare_writeStrength_bounds [ScalarLaws α] (p : LayerParams α d) (logFloor l2Eps : α)
    (window : Tensor α [d.convWidth, d.modelDim]) (x : Tensor α [d.modelDim]) (h : Fin d.heads) :
    0 < (prepare p logFloor l2Eps window x h).writeStrength ∧
      (prepare p logFloor l2Eps window x h).writeStrength < 1 := by
  simp only [prepare]
  exact ⟨sigmoid_pos _, sigmoid_lt_one _⟩

/-- The sequence form of the layer has one output per token. -/
theorem layerForward_length [Scalar α] (p : LayerParams α d) (logFloor l2Eps : α)
    (xs : List (Tensor α [d.modelDim])) : (layerForward p logFloor l2Eps xs).length = xs.length :=
  CausalScan.outputs_length _ _ _

end KDA

end KimiK3
