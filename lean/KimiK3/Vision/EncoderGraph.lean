module

public import KimiK3.Graph.Frag
public import KimiK3.Vision.BlockGraphEval

/-!
# The MoonViT-V2 encoder as one graph program (k3-spec §7, report §2.4)

`Vision.encode` is the blocks in order, then the final RMSNorm. The graph program
`EncoderGraph.program` (built in `Graph/Kernel.lean` with the fragment calculus, for the toolchain
reason of `Core/README.md`, "Toolchain constraints") binds the block graph `BlockGraph.model` once
per block, each instance reading its own prefixed parameters (`blocks.k.norm0`, …) and the
previous block's output, then the final norm: one graph for the whole encoder, exported at the
tiny dimensions as `fixtures/graphs/vision_encoder_tiny.json` (`EncoderGraph.jsonTiny`, 2 blocks).

Here its meaning: the parameter environment of a block list (`blocksEnv`, `paramsEnv`;
proof-only), **`EncoderGraph.blocksFrag_denote_eq_fold`** (the block fragments compute the fold of
`Block.forward`) and **`EncoderGraph.program_eval_eq_encode`** (`TrigLaws`): for every block list,
final gain, ε, score scale, RoPE tables and clip, the program computes `encode`.
-/

@[expose] public section

namespace KimiK3

namespace Vision

variable {α : Type}

namespace EncoderGraph

/-- **The parameters of a block list from block `k` on** (k3-spec §7), in `blocksSig`'s order: each
block's `BlockGraph.parameters` under its `blocks.k.` names. Proof-only. -/
noncomputable def blocksEnv {D A R V M : Nat} : (k : Nat) → (blocks : List (Block α D A R V M)) →
    Env α (Signature.shapes (blocksSig D A R V M k blocks.length))
  | _, [] => .nil
  | k, b :: bs => Env.appendSig _ (Env.toPrefix _ _ (BlockGraph.parameters b)) (blocksEnv (k + 1) bs)

/-- **The encoder's parameters** (k3-spec §7): every block's (`blocksEnv`), then the final norm's
gain. Proof-only. -/
noncomputable def paramsEnv {D A R V M : Nat} (blocks : List (Block α D A R V M)) (finalNorm : Tensor α [D]) :
    Env α (Signature.shapes (paramSig D A R V M blocks.length)) :=
  Env.appendSig _ (blocksEnv 0 blocks) (.cons finalNorm .nil)

/-- **The block fragments compute the fold of the blocks** (k3-spec §7): blocks `k, …` of the
list, their parameters at `ps`, on the tokens at `x` with the tables at `cos`, `sin`, give
`ModelList.foldl Block.forward` of the list on those values. -/
theorem blocksFrag_denote_eq_fold [TrigLaws α] {L D A R V M : Nat} (eps scale : α) : (k : Nat) →
    (blocks : List (Block α D A R V M)) → {Γ : List Shape} →
    (ps : VarList Γ (Signature.shapes (blocksSig D A R V M k blocks.length))) → (x : Var Γ [L, D]) →
    (cos sin : Var Γ [L, 2 * R]) → (env : Env α Γ) → (x₀ : Tensor α [L, D]) → (cos₀ sin₀ : Tensor α [L, 2 * R]) →
    ps.eval env = blocksEnv k blocks → env.get x = x₀ → env.get cos = cos₀ → env.get sin = sin₀ →
    (blocksFrag L D A R V M eps scale geluCubic (Scalar.sqrt (2 / TrigScalar.pi)) k blocks.length ps x cos sin).denote
        env = .cons (ModelList.foldl (fun b y => b.forward eps scale cos₀ sin₀ y) blocks x₀) .nil
  | _, [], _, _, _, _, _, _, _, _, _, _, hx, _, _ => by rw [← hx]; rfl
  | k, b :: bs, _, ps, x, cos, sin, env, x₀, cos₀, sin₀, hps, hx, hc, hs => by
    have hp1 := VarList.eval_splitSig_fst env ps hps
    have hp2 := VarList.eval_splitSig_snd env ps hps
    refine Frag.denote_seq1_of ((Frag.denote_ofModel (BlockGraph.model L D A R V M eps scale geluCubic
      (Scalar.sqrt (2 / TrigScalar.pi))) _ env (BlockGraph.parameters b) (BlockGraph.inputs x₀ cos₀ sin₀) ?_).trans
      (BlockGraph.specFwd_eq_forward b eps scale _ _ _)) (fun Δ ρ y env' hρ hy => ?_)
    · rw [VarList.eval_append, VarList.eval_unprefix env _ _ _ _ hp1, ← hx, ← hc, ← hs]
      rfl
    · exact blocksFrag_denote_eq_fold eps scale (k + 1) bs _ y (ρ cos) (ρ sin) env' _ cos₀ sin₀
        ((VarList.eval_map hρ _).trans hp2) hy ((hρ cos).trans hc) ((hρ sin).trans hs)

/-- **The encoder program computes `encode`** (k3-spec §7, report §2.4): for every block list,
final gain, ε, score scale, RoPE tables `cos`, `sin` and clip `x` of `L` tokens, the program with
one block graph per block and the tanh GELU's constants `geluCubic`, `√(2/π)` outputs
`encode blocks finalNorm eps scale cos sin x`. -/
theorem program_eval_eq_encode [TrigLaws α] {L D A R V M : Nat} (blocks : List (Block α D A R V M))
    (finalNorm : Tensor α [D]) (eps scale : α) (cos sin : Tensor α [L, 2 * R]) (x : Tensor α [L, D]) :
    (program L D A R V M blocks.length eps scale geluCubic (Scalar.sqrt (2 / TrigScalar.pi))).eval
        (paramsEnv blocks finalNorm) (.cons x (.cons cos (.cons sin .nil))) =
      .cons (encode blocks finalNorm eps scale cos sin x) .nil := by
  simp only [program]
  rw [Program.eval_ofFrag]
  have hall := VarList.eval_self (Γ := Shape.appendList (paramSig D A R V M blocks.length).shapes
    (inputSig L D R).shapes) ((paramsEnv blocks finalNorm).append (Env.cons x (.cons cos (.cons sin .nil))))
  have hps := VarList.eval_split_fst _ _ hall
  have his := VarList.eval_split_snd _ _ hall
  have hb := VarList.eval_splitSig_fst _ _ hps
  have hf := VarList.eval_splitSig_snd _ _ hps
  refine Frag.denote_seq1_of (blocksFrag_denote_eq_fold eps scale 0 blocks _ _ _ _ _ x cos sin hb
    (by rw [VarList.head_eval, his]; rfl) (by rw [VarList.head_eval, VarList.tail_eval, his]; rfl)
    (by rw [VarList.head_eval, VarList.tail_eval, VarList.tail_eval, his]; rfl)) (fun Δ ρ y env' hρ hy => ?_)
  simp only [Frag.denote_bind, Frag.denote_pure, VarList.eval_cons, VarList.eval_nil, Env.get_here,
    Term.eval_op, Args.eval_cons, Args.eval_nil, Term.eval_var, PrimOp.eval_rmsNormLast]
  rw [hy, hρ, VarList.head_eval, hf]
  rfl

end EncoderGraph

end Vision

end KimiK3
