module

public import KimiK3.Microscaling.Matrix
public import KimiK3.Microscaling.Lipschitz
public import KimiK3.Channel.Expert

/-!
# An MXFP4 expert and its output error

`MXFP4Expert nd nh o` holds the three projections of an expert (`Channel/Expert.lean`) in MXFP4,
in blocks of 32 along each projection's input axis: gate and up `[32·nd, 32·nh]`, down
`[32·nh, o]`. `dequantize` gives the expert at the exact dequantized weights, `quantize rule`
quantizes a full-precision expert.

* `Expert.abs_forward_sub_le` — for any two experts whose weights differ entrywise by at most
  `bG`, `bU`, `bD`: `|y'_k − y_k| ≤ Σ_j (c_g c_u bD_jk + |D_jk| ((1 + c_g/4) c_u ΔG_j + c_g ΔU_j))`,
  `ΔG_j = Σ_i |x_i| bG_ij`, `ΔU_j = Σ_i |x_i| bU_ij` (SiTU's bound `c_g c_u` and its Lipschitz
  constants, `Lipschitz.lean`);
* **`MXFP4Expert.abs_forward_dequantize_sub_le`** — any MXFP4 expert whose dequantized weights
  are within their block scales of a full-precision expert's: the same bound with `bG, bU, bD`
  the weight scales (`errorBound`);
* `MXFP4Expert.abs_forward_quantize_sub_le` — the case of the ceil rule, whose weights meet that
  hypothesis by themselves.
-/

@[expose] public section

namespace KimiK3

variable {α : Type} {d h o : Nat}

/-- **Expert output error from weight errors**: if `|G' − G| ≤ bG`, `|U' − U| ≤ bU`,
`|D' − D| ≤ bD` entrywise and the caps are positive, then
`|y'_k − y_k| ≤ Σ_j (c_g c_u bD_jk + |D_jk| ((1 + c_g/4) c_u Σ_i |x_i| bG_ij + c_g Σ_i |x_i| bU_ij))`. -/
theorem Expert.abs_forward_sub_le [ScalarLaws α] [LipschitzLaws α] {gateCap upCap : α}
    (hg : 0 < gateCap) (hu : 0 < upCap) (e e' : Expert α d h o) (x : Tensor α [d])
    (bG bU : Fin d → Fin h → α) (bD : Fin h → Fin o → α)
    (hG : ∀ i j, Scalar.abs (e'.gateWeight i j - e.gateWeight i j) ≤ bG i j)
    (hU : ∀ i j, Scalar.abs (e'.upWeight i j - e.upWeight i j) ≤ bU i j)
    (hD : ∀ j k, Scalar.abs (e'.downWeight j k - e.downWeight j k) ≤ bD j k) (k : Fin o) :
    Scalar.abs (e'.forward gateCap upCap x k - e.forward gateCap upCap x k) ≤
      finSum h (fun j => gateCap * upCap * bD j k + Scalar.abs (e.downWeight j k) *
        ((1 + gateCap / 4) * upCap * finSum d (fun i => Scalar.abs (x i) * bG i j) +
          gateCap * finSum d (fun i => Scalar.abs (x i) * bU i j))) := by
  rw [Expert.forward_eq_hidden, Expert.forward_eq_hidden]
  have hz : ∀ j, Scalar.abs (e'.hidden gateCap upCap x j - e.hidden gateCap upCap x j) ≤
      (1 + gateCap / 4) * upCap * finSum d (fun i => Scalar.abs (x i) * bG i j) +
        gateCap * finSum d (fun i => Scalar.abs (x i) * bU i j) := by
    intro j
    have h1 := SiTU.abs_scalar_sub_le hg hu (Tensor.vecMatMul x e.gateWeight j) (Tensor.vecMatMul x e.upWeight j)
      (Tensor.vecMatMul x e'.gateWeight j) (Tensor.vecMatMul x e'.upWeight j)
    have h2 := Microscaling.abs_vecMatMul_sub_right_le x e.gateWeight e'.gateWeight bG hG j
    have h3 := Microscaling.abs_vecMatMul_sub_right_le x e.upWeight e'.upWeight bU hU j
    have p2 := mul_le_mul_of_nonneg_left' h2
      (mul_nonneg' (show (0 : α) ≤ 1 + gateCap / 4 by grind) (Std.le_of_lt hu))
    have p3 := mul_le_mul_of_nonneg_left' h3 (Std.le_of_lt hg)
    show Scalar.abs (SiTU.scalar gateCap upCap (Tensor.vecMatMul x e'.gateWeight j) (Tensor.vecMatMul x e'.upWeight j) -
      SiTU.scalar gateCap upCap (Tensor.vecMatMul x e.gateWeight j) (Tensor.vecMatMul x e.upWeight j)) ≤ _
    grind
  have := Microscaling.abs_vecMatMul_sub_le (e.hidden gateCap upCap x) (e'.hidden gateCap upCap x)
    e.downWeight e'.downWeight _ bD hz hD k
  refine Std.le_trans this (finSum_le_finSum (fun j => ?_))
  have hzb := SiTU.abs_vector_le (Std.le_of_lt hg) (Std.le_of_lt hu)
    (Tensor.vecMatMul x e'.gateWeight) (Tensor.vecMatMul x e'.upWeight) j
  have hb0 : 0 ≤ bD j k := Std.le_trans (abs_nonneg _) (hD j k)
  have := mul_le_mul_of_nonneg_right' hzb hb0
  have e1 : e'.hidden gateCap upCap x j =
      SiTU.vector gateCap upCap (Tensor.vecMatMul x e'.gateWeight) (Tensor.vecMatMul x e'.upWeight) j := rfl
  rw [e1]
  grind

namespace Microscaling

/-- An expert with MXFP4 weights, blocks of 32 along each projection's input axis. -/
structure MXFP4Expert (nd nh o : Nat) where
  /-- Gate projection `[32·nd, 32·nh]`. -/
  gate : MXMatrix nd 32 (nh * 32) E2M1
  /-- Up projection `[32·nd, 32·nh]`. -/
  up : MXMatrix nd 32 (nh * 32) E2M1
  /-- Down projection `[32·nh, o]`. -/
  down : MXMatrix nh 32 o E2M1

namespace MXFP4Expert

variable {nd nh : Nat}

/-- The expert at the exact dequantized weights. -/
@[macro_inline] def dequantize [Scalar α] (q : MXFP4Expert nd nh o) : Expert α (nd * 32) (nh * 32) o :=
  ⟨q.gate.decode decodeE2M1, q.up.decode decodeE2M1, q.down.decode decodeE2M1⟩

/-- Quantize a full-precision expert's three projections to MXFP4. -/
@[macro_inline] def quantize [Scalar α] (rule : ScaleRule) (e : Expert α (nd * 32) (nh * 32) o) :
    MXFP4Expert nd nh o :=
  ⟨quantizeMatrix e2m1 rule e.gateWeight, quantizeMatrix e2m1 rule e.upWeight,
    quantizeMatrix e2m1 rule e.downWeight⟩

/-- The proved bound on output `k`'s quantization error (`abs_forward_quantize_sub_le`):
`Σ_j (c_g c_u sD_jk + |D_jk| ((1 + c_g/4) c_u Σ_i |x_i| sG_ij + c_g Σ_i |x_i| sU_ij))`, with `s`
the block scales of `q`. -/
@[macro_inline] def errorBound [Scalar α] (q : MXFP4Expert nd nh o) (e : Expert α (nd * 32) (nh * 32) o)
    (gateCap upCap : α) (x : Tensor α [nd * 32]) (k : Fin o) : α :=
  finSum (nh * 32) (fun j => gateCap * upCap * q.down.scaleAt j k + Scalar.abs (e.downWeight j k) *
    ((1 + gateCap / 4) * upCap * finSum (nd * 32) (fun i => Scalar.abs (x i) * q.gate.scaleAt i j) +
      gateCap * finSum (nd * 32) (fun i => Scalar.abs (x i) * q.up.scaleAt i j)))

/-- **MXFP4 expert output error, any scales** (the statement `difftest`'s `mxfp4_expert` checks):
if every dequantized weight of `q` is within its block's scale of the full-precision weight of
`e` (`|Ŵ − W| ≤ s`, e.g. by `quantizeMXFP4Block_error_le` for `|W| ≤ 6 s` or
`quantizeMXFP4Block_error_le_of_abs_le_seven` for `|W| ≤ 7 s`, whatever rule chose the scales),
then for positive caps every output is within `errorBound`:
`|ŷ_k − y_k| ≤ Σ_j (c_g c_u sD_jk + |D_jk| ((1 + c_g/4) c_u Σ_i |x_i| sG_ij + c_g Σ_i |x_i| sU_ij))`. -/
theorem abs_forward_dequantize_sub_le [ScalarLaws α] [LipschitzLaws α] {gateCap upCap : α}
    (hg : 0 < gateCap) (hu : 0 < upCap) (q : MXFP4Expert nd nh o) (e : Expert α (nd * 32) (nh * 32) o)
    (hG : ∀ i j, Scalar.abs (q.gate.decode decodeE2M1 i j - e.gateWeight i j) ≤ q.gate.scaleAt i j)
    (hU : ∀ i j, Scalar.abs (q.up.decode decodeE2M1 i j - e.upWeight i j) ≤ q.up.scaleAt i j)
    (hD : ∀ j k, Scalar.abs (q.down.decode decodeE2M1 j k - e.downWeight j k) ≤ q.down.scaleAt j k)
    (x : Tensor α [nd * 32]) (k : Fin o) :
    Scalar.abs (q.dequantize.forward gateCap upCap x k - e.forward gateCap upCap x k) ≤
      q.errorBound e gateCap upCap x k :=
  Expert.abs_forward_sub_le hg hu e q.dequantize x _ _ _ hG hU hD k

/-- **MXFP4 expert output error, ceil rule**: the expert at its MXFP4 weights quantized with the
ceil rule is within `errorBound` of the full-precision expert, for positive caps and weights
that fit the largest scale (`|w| ≤ 6 · 2^127`); no other range hypothesis. -/
theorem abs_forward_quantize_sub_le [ScalarLaws α] [LipschitzLaws α] {gateCap upCap : α}
    (hg : 0 < gateCap) (hu : 0 < upCap) (e : Expert α (nd * 32) (nh * 32) o)
    (hfit : ∀ i j, Scalar.abs (e.gateWeight i j) ≤ 6 * E8M0.scaleValue 254 ∧
      Scalar.abs (e.upWeight i j) ≤ 6 * E8M0.scaleValue 254)
    (hfitD : ∀ j k, Scalar.abs (e.downWeight j k) ≤ 6 * E8M0.scaleValue 254)
    (x : Tensor α [nd * 32]) (k : Fin o) :
    Scalar.abs ((quantize .ceil e).dequantize.forward gateCap upCap x k - e.forward gateCap upCap x k) ≤
      (quantize .ceil e).errorBound e gateCap upCap x k :=
  abs_forward_dequantize_sub_le hg hu (quantize .ceil e) e
    (fun i j => abs_quantizeMatrix_mxfp4_sub_le e.gateWeight (fun i j => (hfit i j).1) i j)
    (fun i j => abs_quantizeMatrix_mxfp4_sub_le e.upWeight (fun i j => (hfit i j).2) i j)
    (fun j k => abs_quantizeMatrix_mxfp4_sub_le e.downWeight hfitD j k) x k

end MXFP4Expert

end Microscaling

end KimiK3
