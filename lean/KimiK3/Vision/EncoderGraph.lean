module

public import KimiK3.Vision.BlockGraphEval

/-!
# The MoonViT-V2 encoder as a fold of block graphs (k3-spec §7)

`Vision.encode` is the blocks in order, then the final RMSNorm. Here the encoder is the block
graph (`BlockGraph.model`, one instance per block's weights) folded over the block list, then the
one-node graph `EncoderGraph.finalNormModel` (`rmsNormLast`).

Proved: `specFwd_finalNormModel`, **`EncoderGraph.encode_eq_graphs`** (`TrigLaws`): for every
block list, final gain, ε, score scale, RoPE tables and clip, `encode` equals the final-norm graph
applied to the fold of the block graph. `finalNormTiny` is the tiny instance (exported as
`fixtures/graphs/vision_final_norm_tiny.json`).
-/

@[expose] public section

namespace KimiK3

namespace Vision

variable {α : Type}

namespace EncoderGraph

/-- **The encoder's final norm** (`vision_tower.encoder.final_layernorm`, k3-spec §7) as a
model: parameter `norm [D]`, input `x [L, D]`, output `RMSNorm_ε(x) ⊙ norm`. -/
def finalNormModel (L D : Nat) (eps : α) : Model α where
  params := [("norm", [D])]
  inputs := [("x", [L, D])]
  outputs := [("y", [L, D])]
  body := .cons (.op (.rmsNormLast eps [L] D) (.cons (.var (.there .here)) (.cons (.var .here) .nil))) .nil

/-- The tiny final norm: 48 tokens of width 20, ε = 6·10⁻⁵ (`rms_norm_eps`). -/
def finalNormTiny : Model Float := finalNormModel 48 20 0.00006

/-- **The block graph folded over a block list**: block after block, each graph instance on its
block's weights (`BlockGraph.parameters`), the clip's RoPE tables shared. -/
noncomputable def foldBlocks [TrigScalar α] {L D A R V M : Nat} (eps scale : α) (cos sin : Tensor α [L, 2 * R])
    (blocks : List (Block α D A R V M)) (x : Tensor α [L, D]) : Tensor α [L, D] :=
  ModelList.foldl (fun b y => ((BlockGraph.model L D A R V M eps scale geluCubic
    (Scalar.sqrt (2 / TrigScalar.pi))).specFwd (BlockGraph.parameters b) (BlockGraph.inputs y cos sin)).head) blocks x

theorem specFwd_finalNormModel [Scalar α] {L D : Nat} (eps : α) (g : Tensor α [D]) (x : Tensor α [L, D]) :
    (finalNormModel L D eps).specFwd (.cons g .nil) (.cons x .nil) =
      .cons (fun l => Tensor.rmsNormVec eps (x l) g) .nil := by
  simp only [Model.specFwd_eq, finalNormModel, Env.append_cons, Env.append_nil, Args.eval_cons, Args.eval_nil,
    Term.eval_op, Term.eval_var, Env.get_here, Env.get_there, PrimOp.eval_rmsNormLast]
  rfl

/-- **The encoder is the fold of the block graph, then the final-norm graph** (k3-spec §7). -/
theorem encode_eq_graphs [TrigLaws α] {L D A R V M : Nat} (blocks : List (Block α D A R V M))
    (finalNorm : Tensor α [D]) (eps scale : α) (cos sin : Tensor α [L, 2 * R]) (x : Tensor α [L, D]) :
    Env.cons (encode blocks finalNorm eps scale cos sin x) .nil =
      (finalNormModel L D eps).specFwd (.cons finalNorm .nil) (.cons (foldBlocks eps scale cos sin blocks x) .nil) := by
  have hf : (fun (b : Block α D A R V M) y => ((BlockGraph.model L D A R V M eps scale geluCubic
      (Scalar.sqrt (2 / TrigScalar.pi))).specFwd (BlockGraph.parameters b) (BlockGraph.inputs y cos sin)).head) =
      fun b y => b.forward eps scale cos sin y := by
    funext b y
    rw [BlockGraph.specFwd_eq_forward]
    rfl
  rw [specFwd_finalNormModel, foldBlocks, hf]
  rfl

end EncoderGraph

end Vision

end KimiK3
