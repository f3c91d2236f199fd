module

public import KimiK3.Core.ScalarFacts
public import KimiK3.Model.Combinators
public import KimiK3.Vision.Embed

/-!
# The MoonViT-V2 block and encoder: GELUs, 2-D RoPE, one attention per block (k3-spec §7)

**GELUs.** The encoder MLP uses the tanh form (`gelu_pytorch_tanh`), the projector the erf form
(`nn.GELU()`), as the checkpoint's port has them: `geluTanh x = x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2`,
`geluErf x = x·(1 + erf(x·√(1/2)))/2`.

**2-D RoPE.** A head of width `K = 4R` is `2R` rotary pairs (channels `2p`, `2p + 1`); pairs
`p < R` turn by the token's **row**, pairs `R + j` by its **column**, pair `p` at frequency
`ω_(p mod R) = θ^(−(p mod R)/R)` (`θ = 10⁴`). Every frame repeats its grid's angles: RoPE carries no
time. `ropeCos`, `ropeSin` are the per-token tables `[L, 2R]` (`L = t·h·w`); `rotatePairs` turns
`(x₀, x₁) ↦ (x₀ cos − x₁ sin, x₀ sin + x₁ cos)` pair by pair.

**Block.** Over a clip's `L` tokens `x : [L, D]`:
```
x₁ = x + Attention(RMSNorm(x) ⊙ norm0)         -- one attention over all L tokens, 2-D RoPE
x₂ = x₁ + fc1(GELU_tanh(fc0(RMSNorm(x₁) ⊙ norm1)))
```
bias-free. Attention, per head `a`: `q = h Wq[a]`, `k = h Wk[a]` in pair layout `[L, 2R, 2]`, both
rotated, scores `s[l, m] = c · ⟨q'[l], k'[m]⟩` (`c = K^(−1/2)`), softmax over the clip's tokens `m`,
values `h Wv[a]`, then `Σ_a (softmax · v) Wo[a]`. Clips never attend to each other (the batched
torch model's block-diagonal mask): a block is a function of one clip. The encoder is the blocks in
order (`ModelList.foldl`), then the final RMSNorm.

Parameter layout (`Block`, from the checkpoint's `wqkv.weight [3·A·K, D]`, rows `(s, a, channel)`,
`s ∈ {q, k, v}`): `query[a, d, p, j]` is `wqkv.weight[a·K + 2p + j, d]`, `key[a, d, p, j]` is row
`A·K + a·K + 2p + j`, `value[a, d, c]` is row `2·A·K + a·K + c`, `output[a, c, e] = wo.weight[e, a·K + c]`.

Proved: `geluTanh_zero`, `geluErf_zero`, `geluErf_nonneg_of_nonneg`, `geluErf_le_of_nonneg`
(`0 ≤ GELU_erf x ≤ x` for `x ≥ 0`); over `TrigLaws`, **`pairDot_rotatePairs`** (a rotated query
and key score through the angle difference only), **`pairDot_rotatePairs_shift`** (a common shift
of both angles, i.e. of the grid, leaves the score unchanged), `pairDot_rotatePairs_self` (rotation
keeps the squared norm); `ropeAngle_row`, `ropeAngle_col` (which axis turns which pair).
-/

@[expose] public section

namespace KimiK3

namespace Vision

variable {α : Type}

/-! ## The two GELUs -/

section Gelu

variable [TrigScalar α]

/-- The cubic coefficient `0.044715` of the tanh GELU. -/
@[macro_inline] def geluCubic : α := 44715 / 1000000

/-- **The tanh GELU** of the encoder MLP (k3-spec §7, `gelu_pytorch_tanh`):
`x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))) / 2`. -/
@[macro_inline] def geluTanh (x : α) : α :=
  x * (1 + Scalar.tanh (Scalar.sqrt (2 / TrigScalar.pi) * (x + geluCubic * (x * x * x)))) / 2

/-- **The erf GELU** of the projector (k3-spec §7, `nn.GELU()`): `x · (1 + erf(x · √(1/2))) / 2`. -/
@[macro_inline] def geluErf (x : α) : α :=
  x * (1 + TrigScalar.erf (x * Scalar.sqrt (1 / 2))) / 2

end Gelu

theorem geluErf_zero [TrigLaws α] : geluErf (0 : α) = 0 := by
  simp only [geluErf]; grind

theorem geluTanh_zero [TrigLaws α] : geluTanh (0 : α) = 0 := by
  simp only [geluTanh]; grind

/-- For `x ≥ 0` the erf GELU is nonnegative. -/
theorem geluErf_nonneg_of_nonneg [TrigLaws α] {x : α} (hx : 0 ≤ x) : 0 ≤ geluErf x := by
  have he := Trig.neg_one_le_erf (x * Scalar.sqrt (1 / 2))
  have hp := mul_nonneg' hx (show 0 ≤ 1 + TrigScalar.erf (x * Scalar.sqrt (1 / 2)) by grind)
  simp only [geluErf]; grind

/-- For `x ≥ 0` the erf GELU is at most `x`: it gates its input by a weight in `[0, 1]`. -/
theorem geluErf_le_of_nonneg [TrigLaws α] {x : α} (hx : 0 ≤ x) : geluErf x ≤ x := by
  have he := Trig.erf_le_one (x * Scalar.sqrt (1 / 2))
  have hp := mul_le_mul_of_nonneg_left' (show 1 + TrigScalar.erf (x * Scalar.sqrt (1 / 2)) ≤ 2 by grind) hx
  simp only [geluErf]; grind

/-! ## 2-D RoPE -/

section Tables

variable [TrigScalar α]

/-- The rotary frequency `ω_f = θ^(−f/R) = exp(−(f/R)·log θ)` (k3-spec §7). -/
@[macro_inline] def ropeFrequency (theta : α) (R f : Nat) : α :=
  Scalar.exp (-((f : α) / (R : α)) * Scalar.log theta)

/-- **The rotary angle of pair `p` of a token at grid position `(row, col)`** (k3-spec §7): the
row for the first `R` pairs, the column for the last `R`, times `ω_(p mod R)`. -/
@[macro_inline] def ropeAngle (theta : α) (R row col p : Nat) : α :=
  if p < R then (row : α) * ropeFrequency theta R p else (col : α) * ropeFrequency theta R (p - R)

/-- The cosines of the rotary angles of a clip's `t·h·w` tokens (k3-spec §7). -/
@[macro_inline] def ropeCos (theta : α) (R t h w : Nat) : Tensor α [t * (h * w), 2 * R] :=
  fun l p => TrigScalar.cos (ropeAngle theta R (tokenRow h w l.val) (tokenCol h w l.val) p.val)

/-- The sines of the rotary angles of a clip's `t·h·w` tokens (k3-spec §7). -/
@[macro_inline] def ropeSin (theta : α) (R t h w : Nat) : Tensor α [t * (h * w), 2 * R] :=
  fun l p => TrigScalar.sin (ropeAngle theta R (tokenRow h w l.val) (tokenCol h w l.val) p.val)

/-- Pairs `p < R` turn by the row. -/
theorem ropeAngle_row (theta : α) {R p : Nat} (row col : Nat) (hp : p < R) :
    ropeAngle theta R row col p = (row : α) * ropeFrequency theta R p := by
  simp only [ropeAngle, if_pos hp]

/-- Pairs `R + j` turn by the column, at the same frequencies `ω_j`. -/
theorem ropeAngle_col (theta : α) (R row col j : Nat) :
    ropeAngle theta R row col (R + j) = (col : α) * ropeFrequency theta R j := by
  have h : ¬ R + j < R := by omega
  simp only [ropeAngle, if_neg h, Nat.add_sub_cancel_left]

/-- **Rotate every pair** of a head `[P, 2]` by its angle: `(x₀ c − x₁ s, x₀ s + x₁ c)`. -/
@[macro_inline] def rotatePairs {P : Nat} (cos sin : Tensor α [P]) (x : Tensor α [P, 2]) : Tensor α [P, 2] :=
  fun p j => if j.val = 0 then x p 0 * cos p - x p 1 * sin p else x p 0 * sin p + x p 1 * cos p

theorem rotatePairs_zero {P : Nat} (cos sin : Tensor α [P]) (x : Tensor α [P, 2]) (p : Fin P) :
    rotatePairs cos sin x p 0 = x p 0 * cos p - x p 1 * sin p := rfl

theorem rotatePairs_one {P : Nat} (cos sin : Tensor α [P]) (x : Tensor α [P, 2]) (p : Fin P) :
    rotatePairs cos sin x p 1 = x p 0 * sin p + x p 1 * cos p := rfl

/-- The dot product of two heads in pair layout: component 0 of every pair, then component 1. -/
@[macro_inline] def pairDot {P : Nat} (x y : Tensor α [P, 2]) : α :=
  finSum P (fun p => x p 0 * y p 0) + finSum P (fun p => x p 1 * y p 1)

end Tables

section Laws

variable [TrigLaws α]

/-- **RoPE scores are relative**: the dot product of a query rotated by `θ_q` and a key rotated
by `θ_k` is `Σ_p (q₀k₀ + q₁k₁)·cos(θ_k − θ_q) + (q₁k₀ − q₀k₁)·sin(θ_k − θ_q)`. -/
theorem pairDot_rotatePairs {P : Nat} (cq sq ck sk θq θk : Tensor α [P])
    (hq : ∀ p, cq p = TrigScalar.cos (θq p) ∧ sq p = TrigScalar.sin (θq p))
    (hk : ∀ p, ck p = TrigScalar.cos (θk p) ∧ sk p = TrigScalar.sin (θk p)) (q k : Tensor α [P, 2]) :
    pairDot (rotatePairs cq sq q) (rotatePairs ck sk k) =
      finSum P (fun p => (q p 0 * k p 0 + q p 1 * k p 1) * TrigScalar.cos (θk p - θq p) +
        (q p 1 * k p 0 - q p 0 * k p 1) * TrigScalar.sin (θk p - θq p)) := by
  simp only [pairDot, rotatePairs_zero, rotatePairs_one]
  rw [← finSum_add]
  apply finSum_congr
  intro p
  obtain ⟨h1, h2⟩ := hq p
  obtain ⟨h3, h4⟩ := hk p
  rw [Trig.cos_sub, Trig.sin_sub, h1, h2, h3, h4]
  grind

/-- **A common shift leaves RoPE scores unchanged**: adding the same angles `δ` to the query's and
the key's (what moving both tokens by the same grid offset does) keeps their dot product. -/
theorem pairDot_rotatePairs_shift {P : Nat} (θq θk δ : Tensor α [P]) (q k : Tensor α [P, 2]) :
    pairDot (rotatePairs (fun p => TrigScalar.cos (θq p + δ p)) (fun p => TrigScalar.sin (θq p + δ p)) q)
        (rotatePairs (fun p => TrigScalar.cos (θk p + δ p)) (fun p => TrigScalar.sin (θk p + δ p)) k) =
      pairDot (rotatePairs (fun p => TrigScalar.cos (θq p)) (fun p => TrigScalar.sin (θq p)) q)
        (rotatePairs (fun p => TrigScalar.cos (θk p)) (fun p => TrigScalar.sin (θk p)) k) := by
  rw [pairDot_rotatePairs _ _ _ _ (fun p => θq p + δ p) (fun p => θk p + δ p)
      (fun _ => ⟨rfl, rfl⟩) (fun _ => ⟨rfl, rfl⟩),
    pairDot_rotatePairs _ _ _ _ θq θk (fun _ => ⟨rfl, rfl⟩) (fun _ => ⟨rfl, rfl⟩)]
  apply finSum_congr
  intro p
  have e : θk p + δ p - (θq p + δ p) = θk p - θq p := by grind
  rw [e]

/-- Rotation keeps the squared norm of a head (`sin² + cos² = 1`). -/
theorem pairDot_rotatePairs_self {P : Nat} (θ : Tensor α [P]) (x : Tensor α [P, 2]) :
    pairDot (rotatePairs (fun p => TrigScalar.cos (θ p)) (fun p => TrigScalar.sin (θ p)) x)
        (rotatePairs (fun p => TrigScalar.cos (θ p)) (fun p => TrigScalar.sin (θ p)) x) = pairDot x x := by
  simp only [pairDot, rotatePairs_zero, rotatePairs_one]
  rw [← finSum_add, ← finSum_add]
  apply finSum_congr
  intro p
  have h := Trig.sin_sq_add_cos_sq (θ p)
  grind

end Laws

/-! ## The block and the encoder -/

/-- **One encoder block's parameters** (k3-spec §7; checkpoint `vision_tower.encoder.blocks.{i}.`):
width `D`, `A` heads of `R` rotary frequencies per axis (query/key head `[2R, 2]`, width `4R`),
value width `V` (`4R` in the checkpoint), MLP width `M`. -/
structure Block (α : Type) (D A R V M : Nat) where
  /-- `norm0.weight`. -/
  norm0 : Tensor α [D]
  /-- The query rows of `wqkv.weight`, per head, `[in, pair, component]`. -/
  query : Tensor α [A, D, 2 * R, 2]
  /-- The key rows of `wqkv.weight`, per head. -/
  key : Tensor α [A, D, 2 * R, 2]
  /-- The value rows of `wqkv.weight`, per head, `[in, out]`. -/
  value : Tensor α [A, D, V]
  /-- `wo.weight`, per head, `[in, out]`. -/
  output : Tensor α [A, V, D]
  /-- `norm1.weight`. -/
  norm1 : Tensor α [D]
  /-- `mlp.fc0.weight`ᵀ `[D, M]`. -/
  fc0 : Tensor α [D, M]
  /-- `mlp.fc1.weight`ᵀ `[M, D]`. -/
  fc1 : Tensor α [M, D]

namespace Block

variable [TrigScalar α] {D A R V M : Nat}

/-- RMSNorm of every row with gain `g` (k3-spec §2.0). -/
@[macro_inline] def normRows {L : Nat} (eps : α) (x : Tensor α [L, D]) (g : Tensor α [D]) : Tensor α [L, D] :=
  fun l => Tensor.rmsNormVec eps (x l) g

/-- Project rows `h : [L, D]` to heads in pair layout `[L, 2R, 2]` with `w : [D, 2R, 2]`. -/
@[macro_inline] def projectPairs {L : Nat} (h : Tensor α [L, D]) (w : Tensor α [D, 2 * R, 2]) :
    Tensor α [L, 2 * R, 2] :=
  fun l p j => finSum D (fun d => h l d * w d p j)

/-- The attention scores of head `a` (`[L, L]`, k3-spec §7): `c · ⟨rot q[l], rot k[m]⟩`. -/
@[macro_inline] def scores {L : Nat} (b : Block α D A R V M) (scale : α)
    (cos sin : Tensor α [L, 2 * R]) (h : Tensor α [L, D]) (a : Fin A) : Tensor α [L, L] :=
  fun l m => scale * pairDot (rotatePairs (cos l) (sin l) (projectPairs h (b.query a) l))
    (rotatePairs (cos m) (sin m) (projectPairs h (b.key a) m))

/-- **The attention of a block** over one clip, before the residual (k3-spec §7): per head the
softmax of the RoPE scores over all `L` tokens of the clip, times the values, through the head's
output matrix, summed over heads. `h` is the normalized input. -/
@[macro_inline] def attention {L : Nat} (b : Block α D A R V M) (scale : α) (cos sin : Tensor α [L, 2 * R])
    (h : Tensor α [L, D]) : Tensor α [L, D] :=
  fun l e => finSum A (fun a =>
    finSum V (fun c =>
      finSum L (fun m => Tensor.softmaxVec (b.scores scale cos sin h a l) m *
        finSum D (fun d => h m d * b.value a d c)) * b.output a c e))

/-- The MLP `fc1(GELU_tanh(fc0 h))` of every row (k3-spec §7). -/
@[macro_inline] def mlp {L : Nat} (b : Block α D A R V M) (h : Tensor α [L, D]) : Tensor α [L, D] :=
  fun l e => finSum M (fun k => geluTanh (finSum D (fun d => h l d * b.fc0 d k)) * b.fc1 k e)

/-- **One MoonViT-V2 block** (k3-spec §7): pre-norm residual attention, then pre-norm residual
MLP (`eps` the norms' ε, `scale` the score scale `(4R)^(−1/2)`). -/
@[macro_inline] def forward {L : Nat} (b : Block α D A R V M) (eps scale : α) (cos sin : Tensor α [L, 2 * R])
    (x : Tensor α [L, D]) : Tensor α [L, D] :=
  let x₁ : Tensor α [L, D] := fun l d => x l d + b.attention scale cos sin (normRows eps x b.norm0) l d
  fun l d => x₁ l d + b.mlp (normRows eps x₁ b.norm1) l d

end Block

/-- **The encoder** (k3-spec §7): the blocks in order, then the final RMSNorm with gain
`finalNorm` (`vision_tower.encoder.final_layernorm.weight`). -/
@[macro_inline] def encode [TrigScalar α] {D A R V M L : Nat} (blocks : List (Block α D A R V M))
    (finalNorm : Tensor α [D]) (eps scale : α) (cos sin : Tensor α [L, 2 * R]) (x : Tensor α [L, D]) :
    Tensor α [L, D] :=
  Block.normRows eps (ModelList.foldl (fun b y => b.forward eps scale cos sin y) blocks x) finalNorm

end Vision

end KimiK3
