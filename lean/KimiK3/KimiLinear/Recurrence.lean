module

public import KimiK3.Sequence.KernelLemmas

/-!
# Kimi Linear's recurrence is K3's KDA step (k3-spec §7, report Eq. 1)

transformers' torch fallback `recurrent_kimi_delta_attention` (`models/kimi_linear`) updates one
head in a different order from K3's factorized `KDA.update`:
```
S₁ = S ⊙ α              (rows scaled by the retention)
m  = kᵀ S₁               (kv_mem)
δ  = β (v − m)           (delta)
S₂ = S₁ + k δᵀ
o  = S₂ᵀ q
```
`recurrentStep` states exactly that, and `recurrentStep_eq_step` proves it equal to `KDA.step`
(state and readout) over any commutative field model, so the Kimi Linear layer can use the K3
recurrence unchanged (`KimiLinear.layerStep`).
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

variable {α : Type} {keyDim valueDim : Nat}

/-- The state after one token in transformers' order (k3-spec §7; transformers
`recurrent_kimi_delta_attention`): decay, `kv_mem = kᵀ S₁`, `delta = (v − kv_mem) β`,
`S₂ = S₁ + k deltaᵀ`. -/
@[macro_inline] def recurrentState [Scalar α] (S : KDA.State α keyDim valueDim)
    (x : KDA.Input α keyDim valueDim) : KDA.State α keyDim valueDim :=
  fun r c =>
    S r c * x.retention r + x.key r *
      ((x.value c - finSum keyDim (fun s => S s c * x.retention s * x.key s)) * x.writeStrength)

/-- One token in transformers' order: the new state and its readout
`o[c] = Σ_r S₂[r, c] q[r]` (transformers `recurrent_kimi_delta_attention`, the query already
scaled by `K^{-1/2}` there). -/
@[macro_inline] def recurrentStep [Scalar α] (S : KDA.State α keyDim valueDim) (x : KDA.Input α keyDim valueDim) :
    KDA.State α keyDim valueDim × Tensor α [valueDim] :=
  (recurrentState S x, fun c => finSum keyDim (fun r => recurrentState S x r c * x.query r))

variable [ScalarField α]

/-- transformers' state update equals K3's `KDA.update`. -/
theorem recurrentState_eq_update (S : KDA.State α keyDim valueDim)
    (x : KDA.Input α keyDim valueDim) : recurrentState S x = KDA.update S x := by
  funext r c
  have hm : finSum keyDim (fun s => S s c * x.retention s * x.key s) =
      finSum keyDim (fun s => x.key s * (x.retention s * S s c)) :=
    finSum_congr (fun s => by grind)
  simp only [recurrentState, KDA.update, KDA.decay, KDA.correction, Seq.memo2_eq, Seq.memoFn_eq,
    Seq.sum_eq, hm]
  grind

/-- **Kimi Linear's recurrence is `KDA.step`**: transformers' order of operations gives K3's
state and readout exactly. -/
theorem recurrentStep_eq_step (S : KDA.State α keyDim valueDim)
    (x : KDA.Input α keyDim valueDim) : recurrentStep S x = KDA.step S x := by
  simp only [recurrentStep, KDA.step, KDA.read, Seq.memo2_eq, recurrentState_eq_update]
  congr 1
  funext c
  simp only [Seq.vecMatMul_apply]
  exact finSum_congr (fun r => by grind)

end KimiLinear

end KimiK3
