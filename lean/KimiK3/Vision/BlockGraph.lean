module

public import KimiK3.Vision.MergeGraph

/-!
# One MoonViT-V2 block as a typed graph (k3-spec §7)

`BlockGraph.model L D A R V M eps scale cubic root` has parameters `norm0 [D]`, `query0`,
`query1`, `key0`, `key1 [A, D, 2R]` (component 0 and 1 of every rotary pair of `Block.query`,
`Block.key`), `value [A, D, V]`, `output [A, V, D]`, `norm1 [D]`, `fc0 [D, M]`, `fc1 [M, D]`, inputs
`x [L, D]` (one clip's tokens) and the RoPE tables `cos`, `sin [L, 2R]`; output `y [L, D]`:
* `h = RMSNorm(x) ⊙ norm0` (shared by `let1`);
* per head (`batchedMatMul` over the broadcast `h`), the rotated pair components
  `q₀ cos − q₁ sin`, `q₀ sin + q₁ cos` (and the same for the key), scores
  `scale · (Q₀ K₀ᵀ + Q₁ K₁ᵀ)` (`swapLastTerm` for `Kᵀ`), `softmaxLast` over the clip's `L` tokens,
  times the values, through `output`, summed over heads (`swapAxes01`, `swapLastTerm`, `sumLast`);
* `x₁ = x + attention` (shared), `u = (RMSNorm(x₁) ⊙ norm1) · fc0` (shared),
  `y = x₁ + GELU_tanh(u) · fc1`, the GELU as `½ (u + u · tanh(root · (u + cubic · u³)))`.

Proved (`BlockGraphEval.lean`): **`BlockGraph.specFwd_eq_forward`** (`TrigLaws`): with
`cubic = geluCubic`, `root = √(2/π)`, the graph computes `Block.forward` for every block, ε, score
scale, RoPE tables and clip. `modelTiny` is the tiny configuration's block (48 tokens of width 20,
3 heads of `4·3 = 12`, MLP 28), exported as `fixtures/graphs/vision_block_tiny.json`.
-/

@[expose] public section

namespace KimiK3

namespace Vision

variable {α : Type}

/-- Entrywise binary function of two terms. -/
@[macro_inline] def binTerm {Γ : List Shape} (f : BinaryFn) (s : Shape) (a b : Term α Γ s) : Term α Γ s :=
  .op (.binary f s) (.cons a (.cons b .nil))

/-- A `[L, P]` table repeated over the `A` heads. -/
@[macro_inline] def headsTerm {Γ : List Shape} (A L P : Nat) (c : Var Γ [L, P]) : Term α Γ [A, L, P] :=
  .op (.broadcast A [L, P]) (.cons (.var c) .nil)

/-- Per-head projection of rows `h [L, D]` by `w [A, D, P]`: `[A, L, P]`. -/
@[macro_inline] def headProjTerm {Γ : List Shape} (A L D P : Nat) (h : Var Γ [L, D]) (w : Var Γ [A, D, P]) :
    Term α Γ [A, L, P] :=
  .op (.batchedMatMul A L D P) (.cons (headsTerm A L D h) (.cons (.var w) .nil))

/-- Component 0 of the rotated pairs, `x₀ cos − x₁ sin` (k3-spec §7). -/
@[macro_inline] def rotTerm0 {Γ : List Shape} (A L P : Nat) (x0 x1 : Term α Γ [A, L, P]) (cos sin : Var Γ [L, P]) :
    Term α Γ [A, L, P] :=
  binTerm .sub _ (binTerm .mul _ x0 (headsTerm A L P cos)) (binTerm .mul _ x1 (headsTerm A L P sin))

/-- Component 1 of the rotated pairs, `x₀ sin + x₁ cos`. -/
@[macro_inline] def rotTerm1 {Γ : List Shape} (A L P : Nat) (x0 x1 : Term α Γ [A, L, P]) (cos sin : Var Γ [L, P]) :
    Term α Γ [A, L, P] :=
  binTerm .add _ (binTerm .mul _ x0 (headsTerm A L P sin)) (binTerm .mul _ x1 (headsTerm A L P cos))

/-- **The RoPE scores of every head** `[A, L, L]` (k3-spec §7):
`scale · (Q₀ K₀ᵀ + Q₁ K₁ᵀ)` with the rotated pair components. -/
@[macro_inline] def scoresTerm {Γ : List Shape} (A L D P : Nat) (scale : α) (h : Var Γ [L, D])
    (q0 q1 k0 k1 : Var Γ [A, D, P]) (cos sin : Var Γ [L, P]) : Term α Γ [A, L, L] :=
  let qa := headProjTerm A L D P h q0
  let qb := headProjTerm A L D P h q1
  let ka := headProjTerm A L D P h k0
  let kb := headProjTerm A L D P h k1
  .op (.scale scale [A, L, L]) (.cons (binTerm .add _
    (.op (.batchedMatMul A L P L) (.cons (rotTerm0 A L P qa qb cos sin)
      (.cons (swapLastTerm A L P (rotTerm0 A L P ka kb cos sin)) .nil)))
    (.op (.batchedMatMul A L P L) (.cons (rotTerm1 A L P qa qb cos sin)
      (.cons (swapLastTerm A L P (rotTerm1 A L P ka kb cos sin)) .nil)))) .nil)

/-- **The block's attention** `[L, D]` before the residual (k3-spec §7): softmax of the scores
over the clip's tokens, times the values, through the output matrix, summed over heads. -/
@[macro_inline] def attnTerm {Γ : List Shape} (A L D P V : Nat) (scale : α) (h : Var Γ [L, D])
    (q0 q1 k0 k1 : Var Γ [A, D, P]) (value : Var Γ [A, D, V]) (out : Var Γ [A, V, D]) (cos sin : Var Γ [L, P]) :
    Term α Γ [L, D] :=
  let pr : Term α Γ [A, L, L] := .op (.softmaxLast [A, L] L) (.cons (scoresTerm A L D P scale h q0 q1 k0 k1 cos sin) .nil)
  let ctx : Term α Γ [A, L, V] := .op (.batchedMatMul A L L V) (.cons pr (.cons (headProjTerm A L D V h value) .nil))
  let o : Term α Γ [A, L, D] := .op (.batchedMatMul A L V D) (.cons ctx (.cons (.var out) .nil))
  .op (.sumLast [L, D] A) (.cons (swapLastTerm L A D (.op (.swapAxes01 A L [D]) (.cons o .nil))) .nil)

/-- **The tanh GELU** of `u [L, M]` (k3-spec §7): `½ (u + u · tanh(root · (u + cubic · u³)))`. -/
@[macro_inline] def geluTanhTerm [Scalar α] {Γ : List Shape} (L M : Nat) (cubic root : α) (u : Var Γ [L, M]) : Term α Γ [L, M] :=
  let x : Term α Γ [L, M] := .var u
  .op (.scale ((1 : α) / 2) [L, M]) (.cons (binTerm .add _ x (binTerm .mul _ x
    (.op (.unary .tanh [L, M]) (.cons (.op (.scale root [L, M]) (.cons (binTerm .add _ x
      (.op (.scale cubic [L, M]) (.cons (binTerm .mul _ (binTerm .mul _ x x) x) .nil))) .nil)) .nil)))) .nil)

namespace BlockGraph

/-- The block's parameter signature. -/
def paramSig (D A R V M : Nat) : Signature :=
  [("norm0", [D]), ("query0", [A, D, 2 * R]), ("query1", [A, D, 2 * R]), ("key0", [A, D, 2 * R]),
    ("key1", [A, D, 2 * R]), ("value", [A, D, V]), ("output", [A, V, D]), ("norm1", [D]),
    ("fc0", [D, M]), ("fc1", [M, D])]

/-- **One MoonViT-V2 block as a model** (k3-spec §7): RMSNorm, one attention with 2-D RoPE over
the clip's `L` tokens, residual, RMSNorm, tanh-GELU MLP, residual. `eps` the norms' ε, `scale`
the score scale, `cubic`, `root` the GELU's `0.044715` and `√(2/π)`. (`@[macro_inline]`: the
encoder program of `Graph/Kernel.lean` calls it from another module, `Core/README.md`, "Toolchain
constraints".) -/
@[macro_inline] def model [Scalar α] (L D A R V M : Nat) (eps scale cubic root : α) : Model α where
  params := paramSig D A R V M
  inputs := [("x", [L, D]), ("cos", [L, 2 * R]), ("sin", [L, 2 * R])]
  outputs := [("y", [L, D])]
  body :=
    .cons (.let1 (.op (.rmsNormLast eps [L] D) (.cons (.var (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there .here))))))))))) (.cons (.var .here) .nil)))
      (.let1 (binTerm .add [L, D] (.var (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there .here))))))))))))
          (attnTerm A L D (2 * R) V scale .here (.there (.there .here)) (.there (.there (.there .here))) (.there (.there (.there (.there .here)))) (.there (.there (.there (.there (.there .here))))) (.there (.there (.there (.there (.there (.there .here)))))) (.there (.there (.there (.there (.there (.there (.there .here))))))) (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there .here)))))))))))) (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there .here)))))))))))))))
        (.let1 (.op (.matMul L D M) (.cons (.op (.rmsNormLast eps [L] D) (.cons (.var .here) (.cons (.var (.there (.there (.there (.there (.there (.there (.there (.there (.there .here)))))))))) .nil)))
            (.cons (.var (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there .here))))))))))) .nil)))
          (binTerm .add [L, D] (.var (.there .here))
            (.op (.matMul L M D) (.cons (geluTanhTerm L M cubic root .here) (.cons (.var (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there (.there .here))))))))))))) .nil))))))) .nil

/-- A block's weights as the graph's parameters (the pair components of `query`, `key` split). -/
def parameters {D A R V M : Nat} (b : Block α D A R V M) : Env α (paramSig D A R V M).shapes :=
  .cons b.norm0 (.cons (fun a d p => b.query a d p 0) (.cons (fun a d p => b.query a d p 1)
    (.cons (fun a d p => b.key a d p 0) (.cons (fun a d p => b.key a d p 1) (.cons b.value
      (.cons b.output (.cons b.norm1 (.cons b.fc0 (.cons b.fc1 .nil)))))))))

/-- A clip's tokens and RoPE tables as the graph's inputs. -/
def inputs {L D R : Nat} (x : Tensor α [L, D]) (cos sin : Tensor α [L, 2 * R]) :
    Env α [[L, D], [L, 2 * R], [L, 2 * R]] :=
  .cons x (.cons cos (.cons sin .nil))

/-- **The tiny block** (`fixtures/tiny/config.json`): one clip of 2 frames of 6 × 4 tokens
(`L = 48`), width 20, 3 heads of `4·3 = 12`, MLP 28; ε = 6·10⁻⁵, score scale `12^(−1/2)`, the GELU
constants at `Float`. -/
def modelTiny : Model Float :=
  model 48 20 3 3 12 28 0.00006 (1 / Scalar.sqrt ((12 : Nat) : Float)) geluCubic
    (Scalar.sqrt (2 / TrigScalar.pi))

end BlockGraph

end Vision

end KimiK3
