module

public import KimiK3.Microscaling.MXFP4
public import KimiK3.Core.MatMul

/-!
# MX vectors and matrices, and the error of a vector–matrix product

A vector of `nb · size` scalars is quantized in `nb` consecutive blocks (`MXVector`); a matrix
`[nb · size, m]` (weights `[in, out]`, the row-vector convention) in blocks along its input axis,
one `MXVector` per output column (`MXMatrix`) — in the hub's `[out, in]` layout these are the
blocks of each row, as compressed-tensors groups them.

* `abs_quantizeVector_ceil_sub_le`, `abs_quantizeMatrix_ceil_sub_le` — the block bound for every
  entry, with the entry's own block scale (`MXVector.scaleAt`, `MXMatrix.scaleAt`);
* `abs_vecMatMul_sub_le`, `abs_vecMatMul_sub_le'`, `abs_vecMatMul_sub_right_le` — the error of
  `x̂ Ŵ` against `x W` from entrywise bounds on both factors;
* **`vecMatMul_mxfp8_mxfp4_error_le`** — MXFP8 activations (element format `f`, e.g. E4M3) times
  MXFP4 weights, both with the ceil rule: `|(x̂ Ŵ)_k − (x W)_k| ≤ Σ_i (ε_i |W_ik| + |x_i| s_ik +
  ε_i s_ik)` with `ε_i = (|x_i| / 2^M + sx_i / 2^unitExp) / 2` (`sx_i` the activation scale of
  `x_i`'s block) and `s_ik` the weight scale of `W_ik`'s block; `vecMatMul_mxfp8e4m3_mxfp4_error_le`
  is the E4M3 case, `ε_i = |x_i| / 16 + sx_i / 1024`.
-/

@[expose] public section

namespace KimiK3.Microscaling

open KimiK3

theorem flatIndex_blockOf_offsetOf {nb size : Nat} (i : Fin (nb * size)) :
    flatIndex (blockOf i) (offsetOf i) = i := by
  apply Fin.ext
  show i.val / size * size + i.val % size = i.val
  have := Nat.div_add_mod i.val size
  rw [Nat.mul_comm] at this; exact this

variable {α : Type} {nb size m : Nat}

section Ordered

variable [OrderedScalarField α]

/-- **Every entry of a ceil-quantized vector** is within `(r |x_i| + a s_i) / 2` of `x_i`,
`s_i` its block's scale. -/
theorem abs_quantizeVector_ceil_sub_le (f : FloatFormat) (hf : f.WF) {r a : α} (hr : 0 ≤ r) (ha : 0 ≤ a)
    (hgap : ∀ k, k < f.maxMag → f.magnitude (α := α) (k + 1) - f.magnitude k ≤ r * f.magnitude k + a)
    (x : Tensor α [nb * size]) (hfit : ∀ i, Scalar.abs (x i) ≤ f.maxValue * E8M0.scaleValue 254)
    (i : Fin (nb * size)) :
    Scalar.abs ((quantizeVector f .ceil x).decode f.decode i - x i) ≤
      (r * Scalar.abs (x i) + a * (quantizeVector f .ceil x).scaleAt i) / 2 := by
  have hc : (0 : α) ≤ f.maxValue * E8M0.scaleValue 254 :=
    mul_nonneg' (f.maxValue_nonneg) (Std.le_of_lt (E8M0.scaleValue_pos 254))
  have := Block.abs_quantize_ceil_sub_le f hf hr ha hgap (fun j => x (flatIndex (blockOf i) j))
    (Block.amax_le hc (fun j => hfit _)) (offsetOf i)
  rw [flatIndex_blockOf_offsetOf] at this
  exact this

/-- **Every entry of a ceil-quantized matrix** is within `(r |W_ik| + a s_ik) / 2` of `W_ik`. -/
theorem abs_quantizeMatrix_ceil_sub_le (f : FloatFormat) (hf : f.WF) {r a : α} (hr : 0 ≤ r) (ha : 0 ≤ a)
    (hgap : ∀ k, k < f.maxMag → f.magnitude (α := α) (k + 1) - f.magnitude k ≤ r * f.magnitude k + a)
    (w : Tensor α [nb * size, m]) (hfit : ∀ i k, Scalar.abs (w i k) ≤ f.maxValue * E8M0.scaleValue 254)
    (i : Fin (nb * size)) (k : Fin m) :
    Scalar.abs ((quantizeMatrix f .ceil w).decode f.decode i k - w i k) ≤
      (r * Scalar.abs (w i k) + a * (quantizeMatrix f .ceil w).scaleAt i k) / 2 :=
  abs_quantizeVector_ceil_sub_le f hf hr ha hgap (fun i => w i k) (fun i => hfit i k) i

/-- **MXFP4 matrix error**: with the ceil rule every entry is within its block's scale. -/
theorem abs_quantizeMatrix_mxfp4_sub_le (w : Tensor α [nb * size, m])
    (hfit : ∀ i k, Scalar.abs (w i k) ≤ 6 * E8M0.scaleValue 254) (i : Fin (nb * size)) (k : Fin m) :
    Scalar.abs ((quantizeMatrix e2m1 .ceil w).decode decodeE2M1 i k - w i k) ≤
      (quantizeMatrix e2m1 .ceil w).scaleAt i k := by
  have := abs_quantizeMatrix_ceil_sub_le (α := α) e2m1 e2m1_wf (r := 0) (a := 2) (Std.le_refl _)
    (by grind) (fun k hk => e2m1_gap_le k hk) w (fun i k => by rw [e2m1_maxValue]; exact hfit i k) i k
  have e : (0 * Scalar.abs (w i k) + 2 * (quantizeMatrix e2m1 .ceil w).scaleAt (α := α) i k) / 2 =
      (quantizeMatrix e2m1 .ceil w).scaleAt i k := by grind
  exact e ▸ this

variable {n : Nat}

/-- **Vector–matrix product with perturbed factors** (in terms of the perturbed vector): if
`|x̂_i − x_i| ≤ a_i` and `|Ŵ_ik − W_ik| ≤ b_ik`, then
`|(x̂ Ŵ)_k − (x W)_k| ≤ Σ_i (|x̂_i| b_ik + a_i |W_ik|)`. -/
theorem abs_vecMatMul_sub_le (x x' : Tensor α [n]) (w w' : Tensor α [n, m]) (a : Fin n → α)
    (b : Fin n → Fin m → α) (ha : ∀ i, Scalar.abs (x' i - x i) ≤ a i)
    (hb : ∀ i k, Scalar.abs (w' i k - w i k) ≤ b i k) (k : Fin m) :
    Scalar.abs (Tensor.vecMatMul x' w' k - Tensor.vecMatMul x w k) ≤
      finSum n (fun i => Scalar.abs (x' i) * b i k + a i * Scalar.abs (w i k)) := by
  simp only [Tensor.vecMatMul_apply]
  rw [← finSum_sub]
  refine Std.le_trans (abs_finSum_le _ _) (finSum_le_finSum (fun i => ?_))
  have e : x' i * w' i k - x i * w i k = x' i * (w' i k - w i k) + (x' i - x i) * w i k := by grind
  rw [e]
  have t := abs_add_le (x' i * (w' i k - w i k)) ((x' i - x i) * w i k)
  rw [abs_mul', abs_mul'] at t
  have h1 := mul_le_mul_of_nonneg_left' (hb i k) (abs_nonneg (x' i))
  have h2 := mul_le_mul_of_nonneg_right' (ha i) (abs_nonneg (w i k))
  grind

/-- **Vector–matrix product with perturbed factors** (in terms of the exact vector):
`|(x̂ Ŵ)_k − (x W)_k| ≤ Σ_i (a_i |W_ik| + |x_i| b_ik + a_i b_ik)`. -/
theorem abs_vecMatMul_sub_le' (x x' : Tensor α [n]) (w w' : Tensor α [n, m]) (a : Fin n → α)
    (b : Fin n → Fin m → α) (ha : ∀ i, Scalar.abs (x' i - x i) ≤ a i)
    (hb : ∀ i k, Scalar.abs (w' i k - w i k) ≤ b i k) (k : Fin m) :
    Scalar.abs (Tensor.vecMatMul x' w' k - Tensor.vecMatMul x w k) ≤
      finSum n (fun i => a i * Scalar.abs (w i k) + Scalar.abs (x i) * b i k + a i * b i k) := by
  refine Std.le_trans (abs_vecMatMul_sub_le x x' w w' a b ha hb k) (finSum_le_finSum (fun i => ?_))
  have t := abs_add_le (x i) (x' i - x i)
  have e : x i + (x' i - x i) = x' i := by grind
  rw [e] at t
  have hb0 : 0 ≤ b i k := Std.le_trans (abs_nonneg _) (hb i k)
  have := mul_le_mul_of_nonneg_right' (show Scalar.abs (x' i) ≤ Scalar.abs (x i) + a i from
    Std.le_trans t (by have := ha i; grind)) hb0
  grind

/-- **Perturbed weights only**: `|(x Ŵ)_k − (x W)_k| ≤ Σ_i |x_i| b_ik`. -/
theorem abs_vecMatMul_sub_right_le (x : Tensor α [n]) (w w' : Tensor α [n, m]) (b : Fin n → Fin m → α)
    (hb : ∀ i k, Scalar.abs (w' i k - w i k) ≤ b i k) (k : Fin m) :
    Scalar.abs (Tensor.vecMatMul x w' k - Tensor.vecMatMul x w k) ≤
      finSum n (fun i => Scalar.abs (x i) * b i k) := by
  have := abs_vecMatMul_sub_le x x w w' (fun _ => 0) b
    (fun i => by rw [show x i - x i = 0 by grind, abs_of_nonneg (Std.le_refl _)]; exact Std.le_refl _) hb k
  refine Std.le_trans this (finSum_le_finSum (fun i => by grind))

/-- **MXFP8 activations × MXFP4 weights.** Activations quantized in blocks with element format
`f` (E4M3 or E5M2; relative gaps at most one unit in the last place), weights in MXFP4, both
with the ceil rule: the product's error is at most `Σ_i (ε_i |W_ik| + |x_i| s_ik + ε_i s_ik)`,
`ε_i = (|x_i| / 2^M + sx_i / 2^unitExp) / 2`. -/
theorem vecMatMul_mxfp8_mxfp4_error_le (f : FloatFormat) (hf : f.WF)
    (hrel : ∀ k, k < f.maxMag → 2 ^ f.manBits * (f.units (k + 1) - f.units k) ≤ f.units k + 2 ^ f.manBits)
    (x : Tensor α [nb * 32]) (w : Tensor α [nb * 32, m])
    (hx : ∀ i, Scalar.abs (x i) ≤ f.maxValue * E8M0.scaleValue 254)
    (hw : ∀ i k, Scalar.abs (w i k) ≤ 6 * E8M0.scaleValue 254) (k : Fin m) :
    Scalar.abs (Tensor.vecMatMul ((quantizeVector f .ceil x).decode f.decode)
        ((quantizeMatrix e2m1 .ceil w).decode decodeE2M1) k - Tensor.vecMatMul x w k) ≤
      finSum (nb * 32) (fun i =>
        (((2 ^ f.manBits : Nat) : α)⁻¹ * Scalar.abs (x i) +
            ((2 ^ f.unitExp : Nat) : α)⁻¹ * (quantizeVector f .ceil x).scaleAt i) / 2 * Scalar.abs (w i k) +
          Scalar.abs (x i) * (quantizeMatrix e2m1 .ceil w).scaleAt i k +
          (((2 ^ f.manBits : Nat) : α)⁻¹ * Scalar.abs (x i) +
            ((2 ^ f.unitExp : Nat) : α)⁻¹ * (quantizeVector f .ceil x).scaleAt i) / 2 *
            (quantizeMatrix e2m1 .ceil w).scaleAt i k) := by
  refine abs_vecMatMul_sub_le' _ _ _ _ _ _ (fun i => ?_) (fun i k => abs_quantizeMatrix_mxfp4_sub_le w hw i k) k
  exact abs_quantizeVector_ceil_sub_le f hf (Std.le_of_lt (inv_pos' (natCast_pos' (Nat.two_pow_pos _))))
    (Std.le_of_lt (inv_pos' (natCast_pos' (Nat.two_pow_pos _))))
    (fun j hj => f.magnitude_gap_le_of_rel hrel hf j hj) x hx i

/-- **MXFP8 (E4M3) activations × MXFP4 weights**: `ε_i = |x_i| / 16 + sx_i / 1024`. -/
theorem vecMatMul_mxfp8e4m3_mxfp4_error_le (x : Tensor α [nb * 32]) (w : Tensor α [nb * 32, m])
    (hx : ∀ i, Scalar.abs (x i) ≤ 448 * E8M0.scaleValue 254)
    (hw : ∀ i k, Scalar.abs (w i k) ≤ 6 * E8M0.scaleValue 254) (k : Fin m) :
    Scalar.abs (Tensor.vecMatMul ((quantizeVector e4m3 .ceil x).decode e4m3.decode)
        ((quantizeMatrix e2m1 .ceil w).decode decodeE2M1) k - Tensor.vecMatMul x w k) ≤
      finSum (nb * 32) (fun i =>
        (Scalar.abs (x i) / 16 + (quantizeVector e4m3 .ceil x).scaleAt i / 1024) * Scalar.abs (w i k) +
          Scalar.abs (x i) * (quantizeMatrix e2m1 .ceil w).scaleAt i k +
          (Scalar.abs (x i) / 16 + (quantizeVector e4m3 .ceil x).scaleAt i / 1024) *
            (quantizeMatrix e2m1 .ceil w).scaleAt i k) := by
  have := vecMatMul_mxfp8_mxfp4_error_le (α := α) e4m3 e4m3_wf e4m3_rel_gap x w
    (fun i => by rw [e4m3_maxValue]; exact hx i) hw k
  have hM : ((2 ^ e4m3.manBits : Nat) : α) = 8 := by rw [show 2 ^ e4m3.manBits = 8 by decide]; grind
  have hU : ((2 ^ e4m3.unitExp : Nat) : α) = 512 := by rw [show 2 ^ e4m3.unitExp = 512 by decide]; grind
  rw [hM, hU] at this
  refine Std.le_trans this (finSum_le_finSum (fun i => ?_))
  grind

end Ordered

end KimiK3.Microscaling
