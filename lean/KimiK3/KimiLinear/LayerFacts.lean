module

public import KimiK3.KimiLinear.Layer
public import KimiK3.Sequence.KernelLemmas
public import KimiK3.Sequence.CausalScan

/-!
# The Kimi Linear KDA layer against K3's (k3-spec §7)

Proved (over any lawful scalar model, so for the reals):

* `prepare_eq_k3Prepare`: the prepared head inputs are K3's `KDA.prepare` of the shared tensors
  (`LayerParams.toK3`) with only the retention replaced by the softplus gate's;
* `output_eq_k3Output`: the low-rank gated output is K3's full-rank gated output
  `KDA.output` at the multiplied-out gate weight `G = W_gd W_gu` (`lowRankGateWeight`);
* `layerStep_eq`: the layer step factors through K3's recurrence `KDA.step` on every head and
  K3's output;
* `layerStep_heads`, `prepare_retention_mem` (`0 < α < 1`), `prepare_writeStrength_mem`,
  `prepare_query_eq` (the same scaled query as K3), `defaultQueryScale_mul_self_mul`
  (`(K^{-1/2})² · K = 1`) and `layerForward_length`.
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

variable {α : Type} {d : LayerDims}

/-- A low-rank logit multiplied out: `Σ_r (Σ_m x_m D[m, r]) U[r, h, c] =
Σ_m x_m (Σ_r D[m, r] U[r, h, c])`. -/
theorem lowRank_logit [ScalarField α] {M R H C : Nat} (x : Tensor α [M]) (D : Tensor α [M, R])
    (U : Tensor α [R, H, C]) (h : Fin H) (c : Fin C) :
    finSum R (fun r => finSum M (fun m => x m * D m r) * U r h c) =
      finSum M (fun m => x m * finSum R (fun r => D m r * U r h c)) := by
  have e1 : finSum R (fun r => finSum M (fun m => x m * D m r) * U r h c) =
      finSum R (fun r => finSum M (fun m => x m * D m r * U r h c)) :=
    finSum_congr (fun r => by rw [← finSum_mul_right])
  rw [e1, finSum_comm]
  exact finSum_congr (fun m => by rw [← finSum_mul_left]; exact finSum_congr (fun r => by grind))

/-- **The prepared inputs are K3's, with the softplus retention**: every field of
`KimiLinear.prepare` is the field of K3's `KDA.prepare` at the shared tensors (any floor
`logFloor`, unused by the fields kept), except the retention, which is
`exp(−exp(A_log[h]) softplus(z + dt_bias))`. -/
theorem prepare_eq_k3Prepare [Scalar α] (p : LayerParams α d) (logFloor l2Eps : α)
    (window : Tensor α [d.convWidth, d.modelDim]) (x : Tensor α [d.modelDim]) (h : Fin d.heads) :
    prepare p l2Eps window x h =
      { KDA.prepare p.toK3 logFloor l2Eps window x h with
        retention := fun i => retention (p.decayLogRate h)
          (finSum d.decayRank (fun r => Seq.vecMatMul x p.decayDown r * p.decayUp r h i) +
            p.decayBias h i) } := by
  simp only [prepare, KDA.prepare, LayerParams.toK3, Seq.memoFn_eq, Seq.memo2_eq, Seq.sum_eq]

/-- The query is K3's: the L2-normalized, SiLU-activated convolution times `queryScale`. -/
theorem prepare_query_eq [Scalar α] (p : LayerParams α d) (logFloor l2Eps : α)
    (window : Tensor α [d.convWidth, d.modelDim]) (x : Tensor α [d.modelDim]) (h : Fin d.heads) :
    (prepare p l2Eps window x h).query = (KDA.prepare p.toK3 logFloor l2Eps window x h).query := by
  rw [prepare_eq_k3Prepare p logFloor]

/-- **The low-rank output gate is the full-rank gate of the product weight**: Kimi Linear's
output `Σ_h Σ_c RMSNorm(o_h)[c] σ((x W_gd) W_gu)[h, c] W_o[h, c, f]` equals K3's `KDA.output`
with `G = W_gd W_gu`. -/
theorem output_eq_k3Output [ScalarField α] (p : LayerParams α d) (x : Tensor α [d.modelDim])
    (o : Tensor α [d.heads, d.valueDim]) : output p x o = KDA.output p.toK3 x o := by
  funext f
  simp only [output, KDA.output, LayerParams.toK3, lowRankGateWeight, Seq.memoFn_eq,
    Seq.memo2_eq, Seq.sum_eq, Seq.vecMatMul_apply]
  refine finSum_congr (fun h => finSum_congr (fun c => ?_))
  rw [lowRank_logit]
  grind

/-- **The layer step factors through K3's recurrence**: the window shifts as in K3, every head
runs K3's `KDA.step` on the Kimi Linear inputs, and the output is K3's `KDA.output` at the
multiplied-out gate. -/
theorem layerStep_eq [ScalarField α] (p : LayerParams α d) (l2Eps : α)
    (s : KDA.LayerState α d.toLayerDims) (x : Tensor α [d.modelDim]) :
    layerStep p l2Eps s x =
      (⟨KDA.shiftWindow s.window x,
        fun h => (KDA.step (s.heads h) (prepare p l2Eps (KDA.shiftWindow s.window x) x h)).1⟩,
       KDA.output p.toK3 x
        (fun h => (KDA.step (s.heads h) (prepare p l2Eps (KDA.shiftWindow s.window x) x h)).2)) := by
  simp only [layerStep, Seq.memo2_eq, Seq.memoFn_eq, output_eq_k3Output]

/-- The head states after a step are `KDA.update` of the previous ones with the prepared
inputs. -/
theorem layerStep_heads [Scalar α] (p : LayerParams α d) (l2Eps : α)
    (s : KDA.LayerState α d.toLayerDims) (x : Tensor α [d.modelDim]) (h : Fin d.heads) :
    (layerStep p l2Eps s x).1.heads h =
      KDA.update (s.heads h) (prepare p l2Eps (KDA.shiftWindow s.window x) x h) := by
  simp [layerStep, KDA.step]

/-- **Retention bounds in the layer**: every prepared retention lies in `(0, 1)`; there is no
positive floor as in K3's `KDA.prepare_retention_bounds`. -/
theorem prepare_retention_mem [ScalarLaws α] (p : LayerParams α d) (l2Eps : α)
    (window : Tensor α [d.convWidth, d.modelDim]) (x : Tensor α [d.modelDim]) (h : Fin d.heads)
    (i : Fin d.keyDim) :
    0 < (prepare p l2Eps window x h).retention i ∧ (prepare p l2Eps window x h).retention i < 1 := by
  simp only [prepare, Seq.memoFn_eq]
  exact retention_mem _ _

/-- The prepared write strength `β = σ(x W_β)` lies in `(0, 1)`. -/
theorem prepare_writeStrength_mem [ScalarLaws α] (p : LayerParams α d) (l2Eps : α)
    (window : Tensor α [d.convWidth, d.modelDim]) (x : Tensor α [d.modelDim]) (h : Fin d.heads) :
    0 < (prepare p l2Eps window x h).writeStrength ∧
      (prepare p l2Eps window x h).writeStrength < 1 := by
  simp only [prepare]
  exact ⟨sigmoid_pos _, sigmoid_lt_one _⟩

/-- The default query scale is `K^{-1/2}`: `(1/√K)² · K = 1` for `K > 0`. -/
theorem defaultQueryScale_mul_self_mul [ScalarLaws α] (keyDim : Nat) (hK : (0 : α) < keyDim) :
    defaultQueryScale (α := α) keyDim * defaultQueryScale keyDim * (keyDim : α) = 1 := by
  have hs := ScalarLaws.sqrt_mul_self (Std.le_of_lt hK)
  have hpos := sqrt_pos hK
  have key : ∀ s : α, s ≠ 0 → 1 / s * (1 / s) * (s * s) = 1 := by
    intro s hs0
    rw [Lean.Grind.Field.div_eq_mul_inv]
    have := Lean.Grind.Field.mul_inv_cancel hs0
    grind
  unfold defaultQueryScale
  have := key (Scalar.sqrt (keyDim : α)) (by grind)
  rwa [hs] at this

/-- The sequence form has one output per token. -/
theorem layerForward_length [Scalar α] (p : LayerParams α d) (l2Eps : α)
    (xs : List (Tensor α [d.modelDim])) : (layerForward p l2Eps xs).length = xs.length :=
  CausalScan.outputs_length _ _ _

end KimiLinear

end KimiK3
