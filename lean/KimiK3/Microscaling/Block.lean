module

public import KimiK3.Microscaling.ScaleRule

/-!
# MX blocks (OCP MX v1.0 §5): one shared E8M0 scale, `size` element codes

`Block size Code` has a `scale : E8M0` and `element : Fin size → Code`; K3's blocks have
`size = 32`. Element `i` decodes to `2^(scale − 127) · decodeElement (element i)`.

* `Block.dot_eq_scale_mul_sum` — a block dot product is the product of the two scales times the
  dot product of the decoded elements (the factorization blockwise kernels rely on);
* `Block.quantizeWithScale f s x` — element `i` is `f.encode (x i / s)`;
  `Block.quantize f rule x` — the scale chosen by `rule` from the block's largest magnitude
  `Block.amax x`;
* `Block.abs_quantizeWithScale_sub_le` — for `|x i| ≤ maxValue · s` the error is at most
  `(r |x i| + a s) / 2`, given the element format's gap bound `(r, a)`;
* `Block.abs_quantize_ceil_sub_le` — with the ceil rule the range hypothesis holds by itself
  (`ScaleRule.ceil_range`), so the bound holds for every block that fits the largest scale.
-/

@[expose] public section

namespace KimiK3.Microscaling

open KimiK3

namespace Block

variable {α : Type} {size : Nat} {Code CodeA CodeB : Type}

/-- **Block dot product = scale × sum**: `Σ_i (s_a A_i)(s_b B_i) = s_a s_b Σ_i A_i B_i`. -/
theorem dot_eq_scale_mul_sum [ScalarField α] (decodeA : CodeA → α) (decodeB : CodeB → α)
    (a : Block size CodeA) (b : Block size CodeB) :
    a.dot decodeA decodeB b = E8M0.decode a.scale * E8M0.decode b.scale *
      finSum size (fun i => decodeA (a.element i) * decodeB (b.element i)) := by
  unfold dot decode
  rw [← finSum_mul_left]
  exact finSum_congr (fun i => by grind)

theorem decode_quantizeWithScale [Scalar α] (f : FloatFormat) (scale : E8M0) (x : Fin size → α)
    (i : Fin size) :
    (quantizeWithScale f scale x).decode (f.decode (α := α)) i =
      E8M0.decode scale * f.decode (f.encode (x i / E8M0.decode scale)) := rfl

/-- The scale a quantized block carries is the rule's. -/
theorem quantize_scale [Scalar α] (f : FloatFormat) (rule : ScaleRule) (x : Fin size → α) :
    (quantize f rule x).scale = rule.scale f (amax x) := rfl

/-- Quantized blocks have finite scales. -/
theorem quantize_scale_isFinite [Scalar α] (f : FloatFormat) (rule : ScaleRule) (x : Fin size → α) :
    E8M0.isFinite (quantize f rule x).scale = true := by
  have := rule.code_le f (amax x)
  unfold E8M0.isFinite; simp only [decide_eq_true_eq]
  show rule.code f (amax x) < 255
  omega

section Ordered

variable [OrderedScalarField α]

/-- Every element's magnitude is at most the block's `amax`. -/
theorem le_amax (x : Fin size → α) (i : Fin size) : Scalar.abs (x i) ≤ amax x :=
  le_finMaxFrom 0 size (fun i => Scalar.abs (x i)) i

/-- A bound on every magnitude bounds `amax`. -/
theorem amax_le {x : Fin size → α} {c : α} (hc : 0 ≤ c) (h : ∀ i, Scalar.abs (x i) ≤ c) : amax x ≤ c :=
  finMaxFrom_le hc size _ h

/-- **Block quantization error, given the range hypothesis** `|x i| ≤ maxValue · s`: at most
`(r |x i| + a s) / 2` for an element format whose gaps are at most `r · v + a`. -/
theorem abs_quantizeWithScale_sub_le (f : FloatFormat) (hf : f.WF) {r a : α} (hr : 0 ≤ r) (ha : 0 ≤ a)
    (hgap : ∀ k, k < f.maxMag → f.magnitude (α := α) (k + 1) - f.magnitude k ≤ r * f.magnitude k + a)
    (scale : E8M0) (x : Fin size → α) (i : Fin size)
    (hRange : Scalar.abs (x i) ≤ f.maxValue * E8M0.decode scale) :
    Scalar.abs ((quantizeWithScale f scale x).decode f.decode i - x i) ≤
      (r * Scalar.abs (x i) + a * E8M0.decode scale) / 2 := by
  rw [decode_quantizeWithScale]
  have hs := E8M0.decode_pos (α := α) scale
  have e2 : Scalar.abs (x i / E8M0.decode scale) = Scalar.abs (x i) / E8M0.decode scale :=
    abs_div_of_pos' hs (x i)
  have ht : Scalar.abs (x i / E8M0.decode scale) ≤ f.maxValue := by
    rw [e2]; exact (div_le_iff_le_mul' hs).mpr hRange
  have key := f.abs_decode_encode_sub_le hf hr ha hgap ht
  have e1 : E8M0.decode scale * f.decode (f.encode (x i / E8M0.decode scale)) - x i =
      E8M0.decode scale * (f.decode (f.encode (x i / E8M0.decode scale)) - x i / E8M0.decode scale) := by
    grind
  rw [e1, abs_mul_of_nonneg_left' (Std.le_of_lt hs)]
  rw [e2] at key
  have h3 := mul_le_mul_of_nonneg_left' key (Std.le_of_lt hs)
  have e3 : E8M0.decode scale * ((r * (Scalar.abs (x i) / E8M0.decode scale) + a) / 2) =
      (r * Scalar.abs (x i) + a * E8M0.decode scale) / 2 := by grind
  rw [e3] at h3; exact h3

/-- **Block quantization error with the ceil rule**: no range hypothesis beyond the block
fitting the largest scale, `amax ≤ maxValue · 2^127`. -/
theorem abs_quantize_ceil_sub_le (f : FloatFormat) (hf : f.WF) {r a : α} (hr : 0 ≤ r) (ha : 0 ≤ a)
    (hgap : ∀ k, k < f.maxMag → f.magnitude (α := α) (k + 1) - f.magnitude k ≤ r * f.magnitude k + a)
    (x : Fin size → α) (hfit : amax x ≤ f.maxValue * E8M0.scaleValue 254) (i : Fin size) :
    Scalar.abs ((quantize f .ceil x).decode f.decode i - x i) ≤
      (r * Scalar.abs (x i) + a * E8M0.decode (quantize f .ceil x).scale) / 2 :=
  abs_quantizeWithScale_sub_le f hf hr ha hgap _ x i
    (Std.le_trans (le_amax x i) (ScaleRule.ceil_range f hfit))

end Ordered

end Block

end KimiK3.Microscaling
