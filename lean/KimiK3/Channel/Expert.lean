module

public import KimiK3.Core.MatMul
public import KimiK3.Channel.SiTU

/-!
# The expert FFN (report §2.3.2, App. B, Eq. 18–19)

`Expert α d h o` holds `gateWeight, upWeight : [d, h]` and `downWeight : [h, o]` (row-vector
convention, weights `[in, out]`). `Expert.forward`:
`g = x G`, `u = x U`, `z = SiTU(c_g, c_u, g, u)`, `y = z D`.

Bounds: `Expert.abs_forward_le` (`|y_k| ≤ c_g·c_u·Σ_j |D_jk|`) and
`Expert.abs_forward_le_paper` (`|y_k| ≤ 100·Σ_j |D_jk|` at caps 4, 25).
-/

@[expose] public section

namespace KimiK3

/-- An expert FFN with input width `inputDim`, hidden width `hiddenDim`, output width
`outputDim`; weights stored `[in, out]` (report §2.3.2). -/
structure Expert (α : Type) (inputDim hiddenDim outputDim : Nat) where
  /-- Gate projection `G : [d, h]`. -/
  gateWeight : Tensor α [inputDim, hiddenDim]
  /-- Up projection `U : [d, h]`. -/
  upWeight : Tensor α [inputDim, hiddenDim]
  /-- Down projection `D : [h, o]`. -/
  downWeight : Tensor α [hiddenDim, outputDim]

namespace Expert

variable {α : Type} {d h o : Nat}

/-- The hidden activation `z = SiTU(c_g, c_u, x G, x U)` (report Eq. 19). -/
@[macro_inline] def hidden [Scalar α] (expert : Expert α d h o) (gateCap upCap : α)
    (x : Tensor α [d]) : Tensor α [h] :=
  SiTU.vector gateCap upCap (Tensor.vecMatMul x expert.gateWeight)
    (Tensor.vecMatMul x expert.upWeight)

/-- The expert forward pass `y = SiTU(c_g, c_u, x G, x U) D` (report Eq. 18–19). -/
@[macro_inline] def forward [Scalar α] (expert : Expert α d h o) (gateCap upCap : α)
    (x : Tensor α [d]) : Tensor α [o] :=
  let gate := Tensor.vecMatMul x expert.gateWeight
  let up := Tensor.vecMatMul x expert.upWeight
  Tensor.vecMatMul (SiTU.vector gateCap upCap gate up) expert.downWeight

theorem forward_eq_hidden [Scalar α] (expert : Expert α d h o) (gateCap upCap : α)
    (x : Tensor α [d]) :
    expert.forward gateCap upCap x = Tensor.vecMatMul (expert.hidden gateCap upCap x)
      expert.downWeight := rfl

/-- Coordinate form: `y_k = Σ_j SiTU(c_g, c_u, g_j, u_j) D_jk` with `g_j = Σ_i x_i G_ij`,
`u_j = Σ_i x_i U_ij`. -/
theorem forward_apply [Scalar α] (expert : Expert α d h o) (gateCap upCap : α)
    (x : Tensor α [d]) (k : Fin o) :
    expert.forward gateCap upCap x k =
      finSum h (fun j => SiTU.scalar gateCap upCap
        (finSum d (fun i => x i * expert.gateWeight i j))
        (finSum d (fun i => x i * expert.upWeight i j)) * expert.downWeight j k) := rfl

/-- **Output bound** (report Eq. 19 bound, by the triangle inequality): for nonnegative caps,
`|y_k| ≤ c_g · c_u · Σ_j |D_jk|`. -/
theorem abs_forward_le [ScalarLaws α] {gateCap upCap : α} (hGate : 0 ≤ gateCap)
    (hUp : 0 ≤ upCap) (expert : Expert α d h o) (x : Tensor α [d]) (k : Fin o) :
    Scalar.abs (expert.forward gateCap upCap x k) ≤
      gateCap * upCap * finSum h (fun j => Scalar.abs (expert.downWeight j k)) := by
  rw [forward_eq_hidden, Tensor.vecMatMul_apply, ← finSum_mul_left]
  refine Std.le_trans (abs_finSum_le _ _) (finSum_le_finSum (fun j => ?_))
  rw [abs_mul']
  exact mul_le_mul_of_nonneg_right' (SiTU.abs_vector_le hGate hUp _ _ j) (abs_nonneg _)

/-- The output bound at the paper's caps: `|y_k| ≤ 100 · Σ_j |D_jk|`. -/
theorem abs_forward_le_paper [ScalarLaws α] (expert : Expert α d h o) (x : Tensor α [d])
    (k : Fin o) :
    Scalar.abs (expert.forward 4 25 x k) ≤
      100 * finSum h (fun j => Scalar.abs (expert.downWeight j k)) := by
  have := abs_forward_le (α := α) (gateCap := 4) (upCap := 25) (by grind) (by grind) expert x k
  grind

end Expert

end KimiK3
