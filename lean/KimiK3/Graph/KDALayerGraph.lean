module

public import KimiK3.Graph.Program
public import KimiK3.Sequence.Graphs

/-!
# One token of a whole KDA layer as a graph program (k3-spec §2.2 steps 1–7, report Eq. 1–6)

`KDA.layerProgram logFloor l2Eps normEps D H K V R` computes `KDA.layerStep` for convolution
width 4 (the tiny and the paper configuration): input preparation (projection and depthwise
convolution, SiLU, L2 normalization of queries and keys, retention from the low-rank logit,
`β`), the packed recurrence and readout (`KDA.packedUpdateTerm`, reused through
`Term.weakenEnd`), the sigmoid output gate, the per-head RMSNorm with shared gain and the output
projection.

**Layout choices** (the primitive set has no slicing):
* the convolution window is passed as its three most recent rows `window.0` (oldest) …
  `window.2` (previous token), separate `[D]` inputs; the new rows are outputs
  `window_next.0 … window_next.2` (`window.1`, `window.2`, `x`). `LayerState.window` also
  holds a fourth, oldest row that `shiftWindow` drops before use, so it is not an input;
* the convolution taps are separate parameters `query_conv.t : [H, K]` (`queryConv t`), `t = 0`
  the oldest tap, `t = 3` the current token;
* every projection `(row W)[h, i] = Σ_m row[m] W[m, h, i]` is a batched read of the row
  broadcast over heads against `W` with its first two axes swapped (no reshape of weights).

The denotation theorem is in `KDALayerGraphEval.lean`.
-/

@[expose] public section

namespace KimiK3

namespace KDA

variable {α : Type}

/-- `Σ_m row[m] W[m, h, i]` as an `[H, n]` term (projection of a row to every head). -/
@[macro_inline] def projTerm {Γ : List Shape} (D H n : Nat) (row : Var Γ [D]) (w : Var Γ [D, H, n]) :
    Term α Γ [H, n] :=
  batchedReadTerm H D n (.op (.broadcast H [D]) (.cons (.var row) .nil))
    (.op (.swapAxes01 D H [n]) (.cons (.var w) .nil))

/-- Entrywise product of two `[H, n]` terms. -/
@[macro_inline] def mul2 {Γ : List Shape} (H n : Nat) (a b : Term α Γ [H, n]) : Term α Γ [H, n] :=
  .op (.binary .mul [H, n]) (.cons a (.cons b .nil))

/-- Entrywise sum of two `[H, n]` terms. -/
@[macro_inline] def add2 {Γ : List Shape} (H n : Nat) (a b : Term α Γ [H, n]) : Term α Γ [H, n] :=
  .op (.binary .add [H, n]) (.cons a (.cons b .nil))

/-- The projected depthwise convolution over the four window rows `r₀` (oldest) … `r₃`
(current token) with taps `k₀ … k₃` (report Eq. 2; `projectConv`):
`((k₀ ⊙ r₀W + k₁ ⊙ r₁W) + k₂ ⊙ r₂W) + k₃ ⊙ r₃W`. -/
@[macro_inline] def convTerm {Γ : List Shape} (D H n : Nat) (r₀ r₁ r₂ r₃ : Var Γ [D]) (w : Var Γ [D, H, n])
    (k₀ k₁ k₂ k₃ : Var Γ [H, n]) : Term α Γ [H, n] :=
  add2 H n (add2 H n (add2 H n (mul2 H n (.var k₀) (projTerm D H n r₀ w))
    (mul2 H n (.var k₁) (projTerm D H n r₁ w))) (mul2 H n (.var k₂) (projTerm D H n r₂ w)))
    (mul2 H n (.var k₃) (projTerm D H n r₃ w))

/-- SiLU of a bound `[H, n]` value: `z ⊙ σ(z)`. -/
@[macro_inline] def siluTerm {Γ : List Shape} (H n : Nat) (z : Var Γ [H, n]) : Term α Γ [H, n] :=
  mul2 H n (.var z) (.op (.unary .sigmoid [H, n]) (.cons (.var z) .nil))

/-- The parameter signature of the layer program (`LayerParams` order, convolution taps split). -/
abbrev layerParamSig (D H K V R : Nat) : Signature :=
  [("query_proj", [D, H, K]), ("key_proj", [D, H, K]), ("value_proj", [D, H, V]),
   ("query_conv.0", [H, K]), ("query_conv.1", [H, K]), ("query_conv.2", [H, K]), ("query_conv.3", [H, K]),
   ("key_conv.0", [H, K]), ("key_conv.1", [H, K]), ("key_conv.2", [H, K]), ("key_conv.3", [H, K]),
   ("value_conv.0", [H, V]), ("value_conv.1", [H, V]), ("value_conv.2", [H, V]), ("value_conv.3", [H, V]),
   ("decay_down", [D, R]), ("decay_up", [R, H, K]), ("decay_log_scale", [H]), ("beta_proj", [D, H]),
   ("gate_weight", [D, H, V]), ("out_norm_scale", [V]), ("output_proj", [H, V, D])]

/-- The input signature: the layer input, the three most recent window rows (oldest first),
the packed head states. -/
abbrev layerInputSig (D H K V : Nat) : Signature :=
  [("x", [D]), ("window.0", [D]), ("window.1", [D]), ("window.2", [D]), ("heads", [H, K, V])]

/-- The output signature: the new window rows, the new head states, the layer output. -/
abbrev layerOutputSig (D H K V : Nat) : Signature :=
  [("window_next.0", [D]), ("window_next.1", [D]), ("window_next.2", [D]),
   ("heads_next", [H, K, V]), ("output", [D])]

/-- The context of the program's inputs (parameters, then inputs). -/
abbrev layerBaseCtx (D H K V R : Nat) : List Shape :=
  Shape.appendList (Signature.shapes (layerParamSig D H K V R)) (Signature.shapes (layerInputSig D H K V))

/-- The final context: the twelve bound values (most recent first: output, readouts, new
states, state copy, key, value, retention, β, query, pre-activation v, k, q) over the base. -/
abbrev layerCtx (D H K V R : Nat) : List Shape :=
  [D] :: [H, V] :: [H, K, V] :: [H, K, V] :: [H, K] :: [H, V] :: [H, K] :: [H] :: [H, K] ::
    [H, V] :: [H, K] :: [H, K] :: layerBaseCtx D H K V R

/-- The variable at a checked position of the context. -/
local macro "v#" i:num : term => `(Var.at _ $i (by exact of_decide_eq_true rfl))

/-- **One token of a KDA layer as a graph program** (k3-spec §2.2, the article's `scanStep`,
convolution width 4). Bindings, in order: pre-activations `q, k, v` (projected convolution),
the L2-normalized SiLU query, `β = σ(x W_β)`, the retention `exp(g_min σ(e^{s} ⊙ z))` with
`z = (x W_down) W_up`, the SiLU value, the L2-normalized SiLU key, a copy of the states, the
updated states (`packedUpdateTerm`), the readouts of the updated states, and the output
`Σ_h (σ(x G) ⊙ RMSNorm(o)) W_o`. -/
@[macro_inline] def layerProgram (logFloor l2Eps normEps : α) (D H K V R : Nat) : Program α where
  params := layerParamSig D H K V R
  inputs := layerInputSig D H K V
  outputs := layerOutputSig D H K V
  ctx := layerCtx D H K V R
  lets :=
    -- 0: q pre-activation (rows window.0, window.1, window.2, x)
    .bind (convTerm D H K (v# 23) (v# 24) (v# 25) (v# 22) (v# 0) (v# 3) (v# 4) (v# 5) (v# 6)) <|
    -- 1: k pre-activation
    .bind (convTerm D H K (v# 24) (v# 25) (v# 26) (v# 23) (v# 2) (v# 8) (v# 9) (v# 10) (v# 11)) <|
    -- 2: v pre-activation
    .bind (convTerm D H V (v# 25) (v# 26) (v# 27) (v# 24) (v# 4) (v# 13) (v# 14) (v# 15) (v# 16)) <|
    -- 3: query
    .bind (.op (.l2NormLast l2Eps [H] K) (.cons (siluTerm H K (v# 2)) .nil)) <|
    -- 4: β
    .bind (.op (.unary .sigmoid [H]) (.cons (.op (.vecMatMul D H) (.cons (.var (v# 26))
      (.cons (.var (v# 22)) .nil))) .nil)) <|
    -- 5: retention
    .bind (.op (.unary .exp [H, K]) (.cons (.op (.scale logFloor [H, K]) (.cons
      (.op (.unary .sigmoid [H, K]) (.cons (mul2 H K
        (expandHeadTerm H K (.op (.unary .exp [H]) (.cons (.var (v# 22)) .nil)))
        (batchedReadTerm H R K
          (.op (.broadcast H [R]) (.cons (.op (.vecMatMul D R) (.cons (.var (v# 27))
            (.cons (.var (v# 20)) .nil))) .nil))
          (.op (.swapAxes01 R H [K]) (.cons (.var (v# 21)) .nil)))) .nil)) .nil)) .nil)) <|
    -- 6: value
    .bind (siluTerm H V (v# 3)) <|
    -- 7: key
    .bind (.op (.l2NormLast l2Eps [H] K) (.cons (siluTerm H K (v# 5)) .nil)) <|
    -- 8: the head states, on top of key, value, retention, β, query (`packedCtx` order)
    .bind (.var (v# 34)) <|
    -- 9: the updated head states
    .bind (Term.weakenEnd _ (packedUpdateTerm H K V)) <|
    -- 10: the readouts of the updated states by the queries
    .bind (batchedReadTerm H K V (.var (v# 6)) (.var (v# 0))) <|
    -- 11: the layer output
    .bind (.op (.sumLast [D] H) (.cons (.op (.swapAxes01 H D []) (.cons
      (batchedReadTerm H V D
        (mul2 H V
          (.op (.unary .sigmoid [H, V]) (.cons (batchedReadTerm H D V
            (.op (.broadcast H [D]) (.cons (.var (v# 33)) .nil))
            (.op (.swapAxes01 D H [V]) (.cons (.var (v# 30)) .nil))) .nil))
          (.op (.rmsNormLast normEps [H] V) (.cons (.var (v# 0)) (.cons (.var (v# 31)) .nil))))
        (.var (v# 32))) .nil)) .nil)) <|
    .nil
  body := .cons (.var (v# 36)) (.cons (.var (v# 37)) (.cons (.var (v# 34))
    (.cons (.var (v# 2)) (.cons (.var (v# 0)) .nil))))

end KDA

end KimiK3
