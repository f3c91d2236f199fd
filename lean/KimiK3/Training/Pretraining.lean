module

public import KimiK3.Core.LogFacts
public import KimiK3.Core.Softmax
public import KimiK3.Microscaling.SoftmaxSensitivity

/-!
# The pretraining loss and its gradient, derived (report §§3.3–3.4; k3-spec §2.11)

`tokenLoss z y = −log softmax(z)_y`; the masked next-token loss
`nextTokenLoss Z targets mask = (Σ_{p supervised} tokenLoss (Z p) (targets p)) / |S|` (masked
positions feed the context but drop their loss term); the declared gradient
`nextTokenGradient Z targets mask p v = (softmax(Z p)_v − [v = targets p]) / |S|` for supervised
`p`, `0` for masked `p`.

**Derived, not declared.** For every model of `ScalarLaws`:

* `tokenLoss_eq`: `tokenLoss z y = log Σ_k exp z_k − z_y`;
* **`tokenLoss_add_eq`** (first-order expansion with the exact remainder): for every direction `h`,
  `tokenLoss (z + h) y = tokenLoss z y + Σ_v (softmax(z)_v − [v = y]) h_v + tokenRemainder z h`,
  `tokenRemainder z h = log Σ_k s_k exp h_k − Σ_k s_k h_k` (`s = softmax z`);
* **`nextTokenLoss_add_eq`**: the same for the masked loss, with `nextTokenGradient` as the linear
  term and the supervised remainders averaged; `nextTokenGradient_masked`: the gradient is `0` at
  masked positions;
* with the tangent facts of `ExpTangentLaws` (`1 + x ≤ exp x`; `exp x ≤ 1 + x + x²` for
  `|x| ≤ 1`; both true over ℝ, assumed like `ScalarLaws`): **`tokenRemainder_mem`**,
  `0 ≤ tokenRemainder z h ≤ Σ_k s_k (h_k − ū)²` (`ū = Σ s_k h_k`) when `|h_k − ū| ≤ 1`, so along
  `t h` the remainder is at most `t² Σ_k s_k (h_k − ū)²` (**`tokenRemainder_smul_le`**): the
  remainder is second order and the declared gradient is the derivative.
-/

@[expose] public section

namespace KimiK3.Training.Pretraining

open KimiK3 KimiK3.Tensor

variable {α : Type}

section Defs

variable [Scalar α]

/-- **Token loss** `−log softmax(z)_y` (report §§3.3–3.4; k3-spec §2.11). -/
@[macro_inline] def tokenLoss {V : Nat} (z : Tensor α [V]) (y : Fin V) : α :=
  -Scalar.log (softmaxVec z y)

/-- The number `|S|` of supervised positions (k3-spec §2.11). -/
@[macro_inline] def supervisedCount {T : Nat} (mask : Fin T → Bool) : α :=
  finSum T (fun p => if mask p then 1 else 0)

/-- **Masked next-token loss** (k3-spec §2.11): the mean token loss over the supervised
positions (`mask p = true`); masked positions only feed the context. -/
@[macro_inline] def nextTokenLoss {T V : Nat} (logits : Tensor α [T, V]) (targets : Fin T → Fin V)
    (mask : Fin T → Bool) : α :=
  finSum T (fun p => if mask p then tokenLoss (logits p) (targets p) else 0) / supervisedCount mask

/-- **The gradient of the masked loss** (k3-spec §2.11):
`(softmax(logits p)_v − [v = targets p]) / |S|` at supervised positions, `0` at masked ones;
`nextTokenLoss_add_eq` and `tokenRemainder_smul_le` prove it is the derivative. -/
@[macro_inline] def nextTokenGradient {T V : Nat} (logits : Tensor α [T, V]) (targets : Fin T → Fin V)
    (mask : Fin T → Bool) (p : Fin T) (v : Fin V) : α :=
  if mask p then (softmaxVec (logits p) v - (if v = targets p then 1 else 0)) / supervisedCount mask
  else 0

/-- The exact remainder of the first-order expansion of the token loss at `z` along `h`:
`log Σ_k s_k exp h_k − Σ_k s_k h_k`, `s = softmax z`. -/
@[macro_inline] def tokenRemainder {V : Nat} (z h : Tensor α [V]) : α :=
  Scalar.log (finSum V (fun k => softmaxVec z k * Scalar.exp (h k))) -
    finSum V (fun k => softmaxVec z k * h k)

end Defs

/-- The gradient vanishes at masked positions. -/
theorem nextTokenGradient_masked [Scalar α] {T V : Nat} (logits : Tensor α [T, V])
    (targets : Fin T → Fin V) {mask : Fin T → Bool} {p : Fin T} (h : mask p = false) (v : Fin V) :
    nextTokenGradient logits targets mask p v = 0 := by
  unfold nextTokenGradient; rw [h]; rfl

section Laws

variable [ScalarLaws α]

/-- The exponential sum of a vector with an entry is positive. -/
theorem finSum_exp_pos {V : Nat} (z : Tensor α [V]) (y : Fin V) :
    0 < finSum V (fun k => Scalar.exp (z k)) :=
  Std.lt_of_lt_of_le (ScalarLaws.exp_pos (z y))
    (le_finSum (f := fun k => Scalar.exp (z k)) (fun _ => Std.le_of_lt (ScalarLaws.exp_pos _)) y)

/-- **The token loss is log-sum-exp minus the target logit.** -/
theorem tokenLoss_eq {V : Nat} (z : Tensor α [V]) (y : Fin V) :
    tokenLoss z y = Scalar.log (finSum V (fun k => Scalar.exp (z k))) - z y := by
  unfold tokenLoss
  rw [Rounding.softmaxVec_eq_exp_div, log_div_of_pos (ScalarLaws.exp_pos _) (finSum_exp_pos z y),
    ScalarLaws.log_exp]
  grind

/-- **First-order expansion of the token loss with its exact remainder** (k3-spec §2.11):
`tokenLoss (z + h) y = tokenLoss z y + Σ_v (softmax(z)_v − [v = y]) h_v + tokenRemainder z h`. -/
theorem tokenLoss_add_eq {V : Nat} (z h : Tensor α [V]) (y : Fin V) :
    tokenLoss (fun k => z k + h k) y =
      tokenLoss z y + finSum V (fun v => (softmaxVec z v - (if v = y then 1 else 0)) * h v) +
        tokenRemainder z h := by
  have hS := finSum_exp_pos z y
  have hSne : finSum V (fun k => Scalar.exp (z k)) ≠ 0 := by grind
  have e1 : ∀ k, softmaxVec z k * Scalar.exp (h k) =
      Scalar.exp (z k + h k) * (finSum V (fun k => Scalar.exp (z k)))⁻¹ := fun k => by
    rw [Rounding.softmaxVec_eq_exp_div, ScalarLaws.exp_add, Lean.Grind.Field.div_eq_mul_inv]; grind
  have hA : 0 < finSum V (fun k => softmaxVec z k * Scalar.exp (h k)) :=
    Std.lt_of_lt_of_le (mul_pos' (softmaxVec_pos z y) (ScalarLaws.exp_pos (h y)))
      (le_finSum (f := fun k => softmaxVec z k * Scalar.exp (h k))
        (fun k => Std.le_of_lt (mul_pos' (softmaxVec_pos z k) (ScalarLaws.exp_pos (h k)))) y)
  have hsplit : finSum V (fun k => Scalar.exp (z k + h k)) =
      finSum V (fun k => Scalar.exp (z k)) * finSum V (fun k => softmaxVec z k * Scalar.exp (h k)) := by
    rw [finSum_congr e1, finSum_mul_right]
    have := Lean.Grind.Field.mul_inv_cancel hSne
    grind
  have hlin : finSum V (fun v => (softmaxVec z v - (if v = y then 1 else 0)) * h v) =
      finSum V (fun k => softmaxVec z k * h k) - h y := by
    have e2 : ∀ v, (softmaxVec z v - (if v = y then 1 else 0)) * h v =
        softmaxVec z v * h v - (if v = y then 1 else 0) * h v := fun v => by grind
    rw [finSum_congr e2, finSum_sub, finSum_delta_mul]
  rw [tokenLoss_eq, tokenLoss_eq, hsplit, log_mul_of_pos hS hA, hlin]
  unfold tokenRemainder
  grind

/-- **First-order expansion of the masked next-token loss with its exact remainder**
(k3-spec §2.11): along any direction `H` of the logits,
`L(Z + H) = L(Z) + Σ_{p,v} G_{p,v} H_{p,v} + (Σ_{p supervised} tokenRemainder (Z p) (H p)) / |S|`
with `G = nextTokenGradient` (`0` at masked positions). -/
theorem nextTokenLoss_add_eq {T V : Nat} (logits H : Tensor α [T, V]) (targets : Fin T → Fin V)
    (mask : Fin T → Bool) :
    nextTokenLoss (fun p k => logits p k + H p k) targets mask =
      nextTokenLoss logits targets mask +
        finSum T (fun p => finSum V (fun v => nextTokenGradient logits targets mask p v * H p v)) +
        finSum T (fun p => if mask p then tokenRemainder (logits p) (H p) else 0) /
          supervisedCount mask := by
  have hp : ∀ p, (if mask p then tokenLoss (fun k => logits p k + H p k) (targets p) else 0) =
      (if mask p then tokenLoss (logits p) (targets p) else 0) +
        (if mask p then finSum V (fun v => (softmaxVec (logits p) v -
          (if v = targets p then 1 else 0)) * H p v) else 0) +
        (if mask p then tokenRemainder (logits p) (H p) else 0) := fun p => by
    cases mask p
    · show (0 : α) = 0 + 0 + 0; grind
    · exact tokenLoss_add_eq (logits p) (H p) (targets p)
  have hg : ∀ p, finSum V (fun v => nextTokenGradient logits targets mask p v * H p v) =
      (if mask p then finSum V (fun v => (softmaxVec (logits p) v -
        (if v = targets p then 1 else 0)) * H p v) else 0) / supervisedCount mask := fun p => by
    unfold nextTokenGradient
    cases mask p
    · show finSum V (fun v => (0 : α) * H p v) = 0 / supervisedCount mask
      have e : ∀ v, (0 : α) * H p v = 0 := fun _ => by grind
      rw [finSum_congr e, finSum_const_zero]; grind
    · show finSum V (fun v => (softmaxVec (logits p) v - (if v = targets p then 1 else 0)) /
          supervisedCount mask * H p v) = _
      have e : ∀ v, (softmaxVec (logits p) v - (if v = targets p then 1 else 0)) /
          supervisedCount mask * H p v = (softmaxVec (logits p) v -
            (if v = targets p then 1 else 0)) * H p v / supervisedCount mask := fun _ => by
        simp only [Lean.Grind.Field.div_eq_mul_inv]; grind
      rw [finSum_congr e, finSum_div]; rfl
  unfold nextTokenLoss
  rw [finSum_congr hp, finSum_add, finSum_add, finSum_congr hg, finSum_div]
  simp only [Lean.Grind.Field.div_eq_mul_inv]
  grind

end Laws

/-- **Tangent facts of the exponential** (assumed, true over ℝ): `1 + x ≤ exp x`, and
`exp x ≤ 1 + x + x²` for `|x| ≤ 1` (over ℝ it holds for `x ≤ 1.79`). They fix `exp`'s derivative
at `0` to `1`, which `ScalarLaws` alone does not (any `x ↦ exp (c x)`, `c > 0`, satisfies it). -/
class ExpTangentLaws (α : Type) [ScalarLaws α] : Prop where
  /-- The tangent line at `0` lies below `exp`. -/
  one_add_le_exp : ∀ x : α, 1 + x ≤ Scalar.exp x
  /-- `exp` lies below its second-order bound near `0`. -/
  exp_le_one_add_add_sq : ∀ x : α, Scalar.abs x ≤ 1 → Scalar.exp x ≤ 1 + x + x * x

section Tangent

variable [ScalarLaws α] [ExpTangentLaws α]

/-- `log x ≤ x − 1` for positive `x`. -/
theorem log_le_sub_one {x : α} (hx : 0 < x) : Scalar.log x ≤ x - 1 := by
  have := ExpTangentLaws.one_add_le_exp (Scalar.log x)
  rw [ScalarLaws.exp_log hx] at this; grind

/-- For weights `s` summing to one and deviations `d` of zero mean (`Σ s_k d_k = 0`):
`1 ≤ Σ s_k exp d_k ≤ 1 + Σ s_k d_k²` when every `|d_k| ≤ 1`. -/
theorem one_le_finSum_mul_exp {n : Nat} {s d : Fin n → α} (hs : ∀ k, 0 ≤ s k)
    (h1 : finSum n s = 1) (h0 : finSum n (fun k => s k * d k) = 0)
    (hd : ∀ k, Scalar.abs (d k) ≤ 1) :
    1 ≤ finSum n (fun k => s k * Scalar.exp (d k)) ∧
      finSum n (fun k => s k * Scalar.exp (d k)) ≤ 1 + finSum n (fun k => s k * (d k * d k)) := by
  have lo : finSum n (fun k => s k * (1 + d k)) ≤ finSum n (fun k => s k * Scalar.exp (d k)) :=
    finSum_le_finSum (fun k => mul_le_mul_of_nonneg_left' (ExpTangentLaws.one_add_le_exp (d k)) (hs k))
  have hi : finSum n (fun k => s k * Scalar.exp (d k)) ≤ finSum n (fun k => s k * (1 + d k + d k * d k)) :=
    finSum_le_finSum (fun k => mul_le_mul_of_nonneg_left' (ExpTangentLaws.exp_le_one_add_add_sq (d k) (hd k)) (hs k))
  have e1 : ∀ k, s k * (1 + d k) = s k + s k * d k := fun _ => by grind
  have e2 : ∀ k, s k * (1 + d k + d k * d k) = (s k + s k * d k) + s k * (d k * d k) := fun _ => by grind
  rw [finSum_congr e1, finSum_add, h1, h0] at lo
  rw [finSum_congr e2, finSum_add, finSum_add, h1, h0] at hi
  constructor <;> grind

/-- **The remainder of the token loss is second order** (k3-spec §2.11): with `s = softmax z`,
`ū = Σ_k s_k h_k` and `|h_k − ū| ≤ 1` for every `k`,
`0 ≤ tokenRemainder z h ≤ Σ_k s_k (h_k − ū)²`. -/
theorem tokenRemainder_mem {V : Nat} (z h : Tensor α [V + 1])
    (hsmall : ∀ k, Scalar.abs (h k - finSum (V + 1) (fun j => softmaxVec z j * h j)) ≤ 1) :
    0 ≤ tokenRemainder z h ∧ tokenRemainder z h ≤ finSum (V + 1) (fun k => softmaxVec z k *
      ((h k - finSum (V + 1) (fun j => softmaxVec z j * h j)) *
        (h k - finSum (V + 1) (fun j => softmaxVec z j * h j)))) := by
  unfold tokenRemainder
  generalize hu : finSum (V + 1) (fun j => softmaxVec z j * h j) = u at hsmall ⊢
  have hs : ∀ k, 0 ≤ softmaxVec z k := fun k => Std.le_of_lt (softmaxVec_pos z k)
  have h1 : finSum (V + 1) (softmaxVec z) = 1 := finSum_softmaxVec z
  have h0 : finSum (V + 1) (fun k => softmaxVec z k * (h k - u)) = 0 := by
    have e : ∀ k, softmaxVec z k * (h k - u) = softmaxVec z k * h k - u * softmaxVec z k :=
      fun _ => by grind
    rw [finSum_congr e, finSum_sub, finSum_mul_left, h1, hu]; grind
  have hA : 0 < finSum (V + 1) (fun k => softmaxVec z k * Scalar.exp (h k)) :=
    Std.lt_of_lt_of_le (mul_pos' (softmaxVec_pos z 0) (ScalarLaws.exp_pos (h 0)))
      (le_finSum (f := fun k => softmaxVec z k * Scalar.exp (h k))
        (fun k => Std.le_of_lt (mul_pos' (softmaxVec_pos z k) (ScalarLaws.exp_pos (h k)))) 0)
  have hX : finSum (V + 1) (fun k => softmaxVec z k * Scalar.exp (h k - u)) =
      finSum (V + 1) (fun k => softmaxVec z k * Scalar.exp (h k)) * Scalar.exp (-u) := by
    have e : ∀ k, softmaxVec z k * Scalar.exp (h k - u) =
        softmaxVec z k * Scalar.exp (h k) * Scalar.exp (-u) := fun k => by
      rw [show h k - u = h k + -u by grind, ScalarLaws.exp_add]; grind
    rw [finSum_congr e, finSum_mul_right]
  have hR : Scalar.log (finSum (V + 1) (fun k => softmaxVec z k * Scalar.exp (h k))) - u =
      Scalar.log (finSum (V + 1) (fun k => softmaxVec z k * Scalar.exp (h k - u))) := by
    rw [hX, log_mul_of_pos hA (ScalarLaws.exp_pos _), ScalarLaws.log_exp]; grind
  have hX0 : 0 < finSum (V + 1) (fun k => softmaxVec z k * Scalar.exp (h k - u)) := by
    rw [hX]; exact mul_pos' hA (ScalarLaws.exp_pos _)
  obtain ⟨lo, hi⟩ := one_le_finSum_mul_exp (d := fun k => h k - u) hs h1 h0 hsmall
  rw [hR]
  have := log_le_sub_one hX0
  exact ⟨log_nonneg_of_one_le lo, by grind⟩

/-- **The declared gradient is the derivative** (k3-spec §2.11): along `t h`, with
`ū = Σ_k softmax(z)_k h_k` and `|t (h_k − ū)| ≤ 1`, the remainder of the first-order expansion
(`tokenLoss_add_eq`) lies in `[0, t² Σ_k softmax(z)_k (h_k − ū)²]`: it vanishes to second order
as `t → 0`. -/
theorem tokenRemainder_smul_le {V : Nat} (z h : Tensor α [V + 1]) (t : α)
    (hsmall : ∀ k, Scalar.abs (t * (h k - finSum (V + 1) (fun j => softmaxVec z j * h j))) ≤ 1) :
    0 ≤ tokenRemainder z (fun k => t * h k) ∧
      tokenRemainder z (fun k => t * h k) ≤ t * t * finSum (V + 1) (fun k => softmaxVec z k *
        ((h k - finSum (V + 1) (fun j => softmaxVec z j * h j)) *
          (h k - finSum (V + 1) (fun j => softmaxVec z j * h j)))) := by
  have hm : finSum (V + 1) (fun j => softmaxVec z j * (t * h j)) =
      t * finSum (V + 1) (fun j => softmaxVec z j * h j) := by
    rw [← finSum_mul_left]; apply finSum_congr; intro j; grind
  have hs : ∀ k, Scalar.abs (t * h k - finSum (V + 1) (fun j => softmaxVec z j * (t * h j))) ≤ 1 :=
    fun k => by
      rw [hm, show t * h k - t * finSum (V + 1) (fun j => softmaxVec z j * h j) =
        t * (h k - finSum (V + 1) (fun j => softmaxVec z j * h j)) by grind]
      exact hsmall k
  obtain ⟨lo, hi⟩ := tokenRemainder_mem z (fun k => t * h k) hs
  refine ⟨lo, ?_⟩
  rw [hm] at hi
  generalize finSum (V + 1) (fun j => softmaxVec z j * h j) = u at hi ⊢
  rw [← finSum_mul_left]
  have e : ∀ k, softmaxVec z k * ((t * h k - t * u) * (t * h k - t * u)) =
      t * t * (softmaxVec z k * ((h k - u) * (h k - u))) := fun _ => by grind
  rw [finSum_congr e] at hi
  exact hi

end Tangent

end KimiK3.Training.Pretraining
