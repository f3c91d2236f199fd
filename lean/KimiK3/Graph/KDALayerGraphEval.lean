module

public import KimiK3.Graph.KDALayerGraph
public import KimiK3.Sequence.KDAPacked

/-!
# The KDA layer program denotes `KDA.layerStep` (k3-spec §2.2, report Eq. 1–6)

`layerProgram_eval`: for every scalar model of `ScalarField`, all weights, states and inputs of
a KDA layer with convolution width 4, the program `KDA.layerProgram` computes the three new
window rows, the new head states and the output of the reference `KDA.layerStep`. Its `Model`
form (`Program.toModel`) computes the same (`layerModel_specFwd`). Helpers: the eval lemmas of
the builders (`eval_projTerm`, `eval_convTerm`, `eval_siluTerm`), the updated states through
`Term.weakenEnd` (`eval_packedUpdate_weakenEnd`), the shifted window rows.
-/

@[expose] public section

namespace KimiK3

namespace KDA

variable {α : Type}

/-- The KDA layer dimensions with convolution width 4. -/
abbrev dims4 (D H K V R : Nat) : LayerDims := ⟨D, H, K, V, 4, R⟩

/-- The parameters of a KDA layer as the program's parameter environment (taps split). -/
def layerParamsEnv {D H K V R : Nat} (p : LayerParams α (dims4 D H K V R)) :
    Env α (Signature.shapes (layerParamSig D H K V R)) :=
  .cons p.queryProj (.cons p.keyProj (.cons p.valueProj
    (.cons (p.queryConv 0) (.cons (p.queryConv 1) (.cons (p.queryConv 2) (.cons (p.queryConv 3)
    (.cons (p.keyConv 0) (.cons (p.keyConv 1) (.cons (p.keyConv 2) (.cons (p.keyConv 3)
    (.cons (p.valueConv 0) (.cons (p.valueConv 1) (.cons (p.valueConv 2) (.cons (p.valueConv 3)
    (.cons p.decayDown (.cons p.decayUp (.cons p.decayLogScale (.cons p.betaProj
    (.cons p.gateWeight (.cons p.outNormScale (.cons p.outputProj .nil)))))))))))))))))))))

/-- The layer input and state as the program's input environment: `x`, the window rows
`1, 2, 3` (row `0` is dropped by `shiftWindow` before use) and the head states. -/
def layerInputsEnv {D H K V R : Nat} (s : LayerState α (dims4 D H K V R)) (x : Tensor α [D]) :
    Env α (Signature.shapes (layerInputSig D H K V)) :=
  .cons x (.cons (s.window 1) (.cons (s.window 2) (.cons (s.window 3) (.cons s.heads .nil))))

section Lemmas

variable [Scalar α]

/-- The projection builder: `(row W)[h, i] = Σ_m row[m] W[m, h, i]`. -/
theorem eval_projTerm {Γ : List Shape} (D H n : Nat) (row : Var Γ [D]) (w : Var Γ [D, H, n])
    (env : Env α Γ) :
    (projTerm D H n row w).eval env = fun h i => finSum D (fun m => env.get row m * env.get w m h i) := by
  funext h i; simp [projTerm]

/-- The convolution builder: four taps times four projected rows, summed left to right. -/
theorem eval_convTerm {Γ : List Shape} (D H n : Nat) (r₀ r₁ r₂ r₃ : Var Γ [D])
    (w : Var Γ [D, H, n]) (k₀ k₁ k₂ k₃ : Var Γ [H, n]) (env : Env α Γ) :
    (convTerm D H n r₀ r₁ r₂ r₃ w k₀ k₁ k₂ k₃).eval env = fun h i =>
      ((env.get k₀ h i * finSum D (fun m => env.get r₀ m * env.get w m h i) +
        env.get k₁ h i * finSum D (fun m => env.get r₁ m * env.get w m h i)) +
        env.get k₂ h i * finSum D (fun m => env.get r₂ m * env.get w m h i)) +
        env.get k₃ h i * finSum D (fun m => env.get r₃ m * env.get w m h i) := by
  funext h i; simp [convTerm, add2, mul2, eval_projTerm, BinaryFn.apply]

/-- The SiLU builder. -/
theorem eval_siluTerm {Γ : List Shape} (H n : Nat) (z : Var Γ [H, n]) (env : Env α Γ) :
    (siluTerm H n z).eval env = fun h i => Seq.silu (env.get z h i) := by
  funext h i; simp [siluTerm, mul2, BinaryFn.apply, UnaryFn.apply, Seq.silu]

/-- `eval_expandHeadTerm`, unapplied. -/
theorem eval_expandHeadTerm' {Γ : List Shape} (H V : Nat) (t : Term α Γ [H]) (env : Env α Γ) :
    (expandHeadTerm H V t).eval env = fun h _ => t.eval env h := by
  funext h c; exact eval_expandHeadTerm H V t env h c

end Lemmas

section Window

variable {D H K V R : Nat} (w : Tensor α [4, D]) (x : Tensor α [D])

theorem shiftWindow_zero [Scalar α] : shiftWindow (d := dims4 D H K V R) w x 0 = w 1 := rfl
theorem shiftWindow_one [Scalar α] : shiftWindow (d := dims4 D H K V R) w x 1 = w 2 := rfl
theorem shiftWindow_two [Scalar α] : shiftWindow (d := dims4 D H K V R) w x 2 = w 3 := rfl
theorem shiftWindow_three [Scalar α] : shiftWindow (d := dims4 D H K V R) w x 3 = x := rfl

end Window

section Field

variable [ScalarField α]

/-- The updated states of the program: `packedUpdateTerm` read in a bigger context. -/
theorem eval_packedUpdate_weakenEnd {H K V : Nat} {Δ : List Shape}
    (S : Tensor α [H, K, V]) (key : Tensor α [H, K]) (value : Tensor α [H, V]) (ret : Tensor α [H, K])
    (beta : Tensor α [H]) (query : Tensor α [H, K]) (rest : Env α Δ) :
    (Term.weakenEnd Δ (packedUpdateTerm H K V)).eval
        (.cons S (.cons key (.cons value (.cons ret (.cons beta (.cons query rest)))))) =
      fun h => update (S h) (headInput key value ret beta query h) :=
  (Term.eval_weakenEnd rest (packedUpdateTerm H K V)
    (.cons S (.cons key (.cons value (.cons ret (.cons beta (.cons query .nil))))))).trans
    (eval_packedUpdateTerm S key value ret beta query)

/-- **The KDA layer program computes `KDA.layerStep`** (k3-spec §2.2, report Eq. 1–6): for all
weights, window, head states and input of a layer with convolution width 4, the outputs are the
new window rows `1, 2, 3`, the new head states and the output of the reference layer step. -/
theorem layerProgram_eval {D H K V R : Nat} (logFloor l2Eps : α)
    (p : LayerParams α (dims4 D H K V R)) (s : LayerState α (dims4 D H K V R)) (x : Tensor α [D]) :
    (layerProgram logFloor l2Eps p.normEps D H K V R).eval (layerParamsEnv p) (layerInputsEnv s x) =
      .cons ((layerStep p logFloor l2Eps s x).1.window 1)
        (.cons ((layerStep p logFloor l2Eps s x).1.window 2)
        (.cons ((layerStep p logFloor l2Eps s x).1.window 3)
        (.cons (layerStep p logFloor l2Eps s x).1.heads
        (.cons (layerStep p logFloor l2Eps s x).2 .nil)))) := by
  simp only [Program.eval, layerProgram, Lets.eval_bind, Lets.eval_nil, layerParamsEnv,
    layerInputsEnv, Env.append_cons, Env.append_nil, Args.eval_cons, Args.eval_nil, Term.eval_var,
    eval_packedUpdate_weakenEnd]
  dsimp only [layerBaseCtx, layerParamSig, layerInputSig, Signature.shapes, Shape.appendList, Var.at,
    Env.get_there, Env.get_here]
  refine Env.cons_congr ?_ (Env.cons_congr ?_ (Env.cons_congr ?_
    (Env.cons_congr ?_ (Env.cons_congr ?_ rfl))))
  · simp only [layerStep, Seq.memo2_eq]; rfl
  · simp only [layerStep, Seq.memo2_eq]; rfl
  · simp only [layerStep, Seq.memo2_eq]; rfl
  · simp [layerStep, prepare, projectConv, headInput, retention, logDecay, Seq.silu, mul2,
      Seq.l2Normalize_eq_core, Seq.vecMatMul_eq_core, eval_convTerm, eval_siluTerm,
      eval_expandHeadTerm', eval_batchedReadTerm', Tensor.l2NormLast_eta, Tensor.vecMatMul_eta,
      Tensor.scale_eta, finSum_four, shiftWindow_zero, shiftWindow_one, shiftWindow_two,
      shiftWindow_three, UnaryFn.apply, BinaryFn.apply, Tensor.zipWith_eta, Tensor.map_eta]
  · simp [layerStep, prepare, projectConv, headInput, retention, logDecay, Seq.silu, output, read, mul2,
      Seq.l2Normalize_eq_core, Seq.vecMatMul_eq_core, Seq.rmsNorm_eq_core,
      eval_convTerm, eval_siluTerm,
      eval_expandHeadTerm', eval_batchedReadTerm', Tensor.l2NormLast_eta, Tensor.rmsNormLast_eta,
      Tensor.sumLast_eta, Tensor.vecMatMul_eta, Tensor.scale_eta, finSum_four, shiftWindow_zero, shiftWindow_one,
      shiftWindow_two, shiftWindow_three, UnaryFn.apply, BinaryFn.apply, Tensor.swapAxes01_eta,
      Tensor.zipWith_eta, Tensor.map_eta, PrimOp.eval_binary2]

/-- The `Model` form of the program computes the same. -/
theorem layerModel_specFwd {D H K V R : Nat} (logFloor l2Eps : α)
    (p : LayerParams α (dims4 D H K V R)) (s : LayerState α (dims4 D H K V R)) (x : Tensor α [D]) :
    (layerProgram logFloor l2Eps p.normEps D H K V R).toModel.specFwd (layerParamsEnv p)
        (layerInputsEnv s x) =
      .cons ((layerStep p logFloor l2Eps s x).1.window 1)
        (.cons ((layerStep p logFloor l2Eps s x).1.window 2)
        (.cons ((layerStep p logFloor l2Eps s x).1.window 3)
        (.cons (layerStep p logFloor l2Eps s x).1.heads
        (.cons (layerStep p logFloor l2Eps s x).2 .nil)))) :=
  (Program.toModel_specFwd _ _ _).trans (layerProgram_eval logFloor l2Eps p s x)

end Field

end KDA

end KimiK3
