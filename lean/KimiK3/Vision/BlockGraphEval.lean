module

public import KimiK3.Vision.BlockGraph

/-!
# What the block graph computes (k3-spec §7)

One lemma per part of `BlockGraph.model`: `eval_headProjTerm` (per-head projection),
`eval_scoresTerm` (the RoPE scores are `Block.scores`), `eval_attnTerm` (the attention is
`Block.attention`), `eval_geluTanhTerm` (the GELU node chain is `geluTanh`, `TrigLaws`), and
**`BlockGraph.specFwd_eq_forward`**: for every block, ε, score scale, RoPE tables and clip of `L`
tokens, the graph with `cubic = geluCubic`, `root = √(2/π)` computes `Block.forward`.
-/

@[expose] public section

namespace KimiK3

namespace Vision

variable {α : Type}

theorem eval_headProjTerm [Scalar α] {Γ : List Shape} {A L D P : Nat} (h : Var Γ [L, D]) (w : Var Γ [A, D, P])
    (env : Env α Γ) (a : Fin A) (l : Fin L) (p : Fin P) :
    (headProjTerm A L D P h w).eval env a l p = finSum D (fun d => env.get h l d * env.get w a d p) := by
  simp only [headProjTerm, headsTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, Term.eval_var,
    PrimOp.eval_batchedMatMul, PrimOp.eval_broadcast]
  rfl

section Block

variable [TrigScalar α]

/-- **The score node is `Block.scores`**: for a block whose pair components sit at `q0`, `q1`,
`k0`, `k1`. -/
theorem eval_scoresTerm {Γ : List Shape} {A L D R V M : Nat} (b : Block α D A R V M) (scale : α)
    (h : Var Γ [L, D]) (q0 q1 k0 k1 : Var Γ [A, D, 2 * R]) (cos sin : Var Γ [L, 2 * R]) (env : Env α Γ)
    (hq0 : env.get q0 = fun a d p => b.query a d p 0) (hq1 : env.get q1 = fun a d p => b.query a d p 1)
    (hk0 : env.get k0 = fun a d p => b.key a d p 0) (hk1 : env.get k1 = fun a d p => b.key a d p 1)
    (a : Fin A) (l : Fin L) :
    (scoresTerm A L D (2 * R) scale h q0 q1 k0 k1 cos sin).eval env a l =
      b.scores scale (env.get cos) (env.get sin) (env.get h) a l := by
  funext m
  simp only [scoresTerm, rotTerm0, rotTerm1, binTerm, headsTerm, Term.eval_op, Args.eval_cons, Args.eval_nil,
    Term.eval_var, PrimOp.eval_scale, PrimOp.eval_binary, PrimOp.eval_batchedMatMul, PrimOp.eval_broadcast,
    Tensor.scale, Tensor.map, Tensor.zipWith, Tensor.broadcast, Tensor.batchedMatMul, Tensor.matMul,
    Tensor.vecMatMul, BinaryFn.apply, eval_swapLastTerm, eval_headProjTerm, hq0, hq1, hk0, hk1]
  rfl

/-- **The attention node is `Block.attention`** on the rows at `h`. -/
theorem eval_attnTerm {Γ : List Shape} {A L D R V M : Nat} (b : Block α D A R V M) (scale : α)
    (h : Var Γ [L, D]) (q0 q1 k0 k1 : Var Γ [A, D, 2 * R]) (value : Var Γ [A, D, V]) (out : Var Γ [A, V, D])
    (cos sin : Var Γ [L, 2 * R]) (env : Env α Γ)
    (hq0 : env.get q0 = fun a d p => b.query a d p 0) (hq1 : env.get q1 = fun a d p => b.query a d p 1)
    (hk0 : env.get k0 = fun a d p => b.key a d p 0) (hk1 : env.get k1 = fun a d p => b.key a d p 1)
    (hv : env.get value = b.value) (ho : env.get out = b.output) :
    (attnTerm A L D (2 * R) V scale h q0 q1 k0 k1 value out cos sin).eval env =
      b.attention scale (env.get cos) (env.get sin) (env.get h) := by
  funext l e
  simp only [attnTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_sumLast,
    Tensor.sumLast_cons_apply, Tensor.sumLast_nil]
  rw [eval_swapLastTerm]
  simp only [Term.eval_op, Args.eval_cons, Args.eval_nil, Term.eval_var, PrimOp.eval_swapAxes01,
    PrimOp.eval_batchedMatMul, PrimOp.eval_softmaxLast, Tensor.swapAxes01, Tensor.batchedMatMul,
    Tensor.matMul, Tensor.vecMatMul, Tensor.softmaxLast_cons_apply, Tensor.softmaxLast_nil,
    eval_scoresTerm b scale h q0 q1 k0 k1 cos sin env hq0 hq1 hk0 hk1, eval_headProjTerm, hv, ho]
  rfl

end Block

/-- The GELU node chain as one formula: `geluTanh u = ½ (u + u · tanh(√(2/π) · (u + c · u³)))`. -/
theorem eval_geluTanhTerm [TrigLaws α] {Γ : List Shape} {L M : Nat} (u : Var Γ [L, M]) (env : Env α Γ) :
    (geluTanhTerm L M geluCubic (Scalar.sqrt (2 / TrigScalar.pi)) u).eval env =
      fun l k => geluTanh (env.get u l k) := by
  funext l k
  simp only [geluTanhTerm, binTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, Term.eval_var,
    PrimOp.eval_scale, PrimOp.eval_binary, PrimOp.eval_unary, Tensor.scale, Tensor.map, Tensor.zipWith,
    BinaryFn.apply, UnaryFn.apply, geluTanh]
  grind

namespace BlockGraph

/-- **The block graph computes `Block.forward`** (k3-spec §7): for every block, ε, score scale,
RoPE tables `cos`, `sin` and clip `x` of `L` tokens, with the GELU constants `geluCubic` and
`√(2/π)`. -/
theorem specFwd_eq_forward [TrigLaws α] {L D A R V M : Nat} (b : Block α D A R V M) (eps scale : α)
    (cos sin : Tensor α [L, 2 * R]) (x : Tensor α [L, D]) :
    (model L D A R V M eps scale geluCubic (Scalar.sqrt (2 / TrigScalar.pi))).specFwd (parameters b)
        (inputs x cos sin) = .cons (b.forward eps scale cos sin x) .nil := by
  simp only [Model.specFwd_eq, model, parameters, inputs, Env.append_cons, Env.append_nil, Args.eval_cons,
    Args.eval_nil, Term.eval_let1, binTerm, Term.eval_op, Term.eval_var, PrimOp.eval_binary]
  rw [eval_attnTerm b, eval_geluTanhTerm]
  · rfl
  all_goals rfl

end BlockGraph

end Vision

end KimiK3
