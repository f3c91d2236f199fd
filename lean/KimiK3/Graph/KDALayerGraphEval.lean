module

public import KimiK3.Graph.Frag
public import KimiK3.Sequence.KDAPacked
public import KimiK3.Sequence.MLAGraph

/-!
# The KDA layer graph denotes `KDA.layerStep` (k3-spec §2.2, report Eq. 1–6)

`layerFrag_denote`: for every scalar model of `ScalarField`, every convolution width, all
weights, states and inputs of a KDA layer, and every context whose variables hold them
(`LayerVars.Holds`), the fragment `KDA.layerFrag` computes the new head states and the output of
the reference `KDA.layerStep`. `layerProgram_eval` / `layerModel_specFwd`: the program over its
own signature computes the new window rows (`window_next.j` is row `j + 1` of the new window),
the new head states and the output. Helpers: the eval lemmas of the builders (`eval_projTerm`,
`eval_sumTerms1`, `eval_convTerm`, `eval_siluTerm`), the signature environments
`layerParamsEnv`, `layerInputsEnv`.
-/

@[expose] public section

namespace KimiK3

namespace KDA

variable {α : Type}

/-- The KDA layer dimensions `⟨D, H, K, V, W, R⟩` (model width, heads, key and value width,
convolution width, decay rank). -/
abbrev dims (D H K V R W : Nat) : LayerDims := ⟨D, H, K, V, W, R⟩

/-- **The variables hold the layer**: in `env`, the variables of `v` are the weights of `p`, the
token `x`, the window after the token (`shiftWindow s.window x`) and the head states of `s`. -/
structure LayerVars.Holds [Scalar α] {Γ : List Shape} {D H K V R W : Nat} (v : LayerVars Γ D H K V R W)
    (env : Env α Γ) (p : LayerParams α (dims D H K V R W)) (s : LayerState α (dims D H K V R W))
    (x : Tensor α [D]) : Prop where
  queryProj : env.get v.queryProj = p.queryProj
  keyProj : env.get v.keyProj = p.keyProj
  valueProj : env.get v.valueProj = p.valueProj
  queryConv : ∀ t, env.get (v.queryConv t) = p.queryConv t
  keyConv : ∀ t, env.get (v.keyConv t) = p.keyConv t
  valueConv : ∀ t, env.get (v.valueConv t) = p.valueConv t
  decayDown : env.get v.decayDown = p.decayDown
  decayUp : env.get v.decayUp = p.decayUp
  decayBias : env.get v.decayBias = p.decayBias
  decayLogScale : env.get v.decayLogScale = p.decayLogScale
  betaProj : env.get v.betaProj = p.betaProj
  gateWeight : env.get v.gateWeight = p.gateWeight
  outNormScale : env.get v.outNormScale = p.outNormScale
  outputProj : env.get v.outputProj = p.outputProj
  token : env.get v.x = x
  rows : ∀ t, env.get (v.rows t) = shiftWindow s.window x t
  heads : env.get v.heads = s.heads

section Lemmas

variable [ScalarField α]

/-- The projection builder: `(row W)[h, i] = Σ_m row[m] W[m, h, i]`. -/
theorem eval_projTerm {Γ : List Shape} (D H n : Nat) (row : Var Γ [D]) (w : Var Γ [D, H, n])
    (env : Env α Γ) :
    (projTerm D H n row w).eval env = fun h i => finSum D (fun m => env.get row m * env.get w m h i) := by
  funext h i; simp [projTerm]

/-- The sum builder: `n + 1` terms summed like `finSum`. -/
theorem eval_sumTerms1 {Γ : List Shape} (H m : Nat) (env : Env α Γ) : (n : Nat) →
    (f : Fin (n + 1) → Term α Γ [H, m]) →
    (sumTerms1 H m n f).eval env = fun h i => finSum (n + 1) (fun t => (f t).eval env h i)
  | 0, f => by funext h i; simp [sumTerms1]
  | n + 1, f => by
    funext h i
    rw [finSum_succ]
    simp only [sumTerms1, add2, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_binary,
      eval_sumTerms1 H m env n]
    rfl

/-- The convolution builder: `Σ_t k_t[h, i] · (rows t W)[h, i]`. -/
theorem eval_convTerm {Γ : List Shape} (D H n : Nat) (x : Var Γ [D]) (w : Var Γ [D, H, n]) (env : Env α Γ) :
    (W : Nat) → (rows : Fin W → Var Γ [D]) → (taps : Fin W → Var Γ [H, n]) →
    (convTerm D H n x w W rows taps).eval env = fun h i =>
      finSum W (fun t => env.get (taps t) h i * finSum D (fun m => env.get (rows t) m * env.get w m h i))
  | 0, _, _ => by
    funext h i
    simp [convTerm, Tensor.scale, Tensor.map]
    show (0 : α) * _ = 0
    grind
  | W + 1, rows, taps => by
    funext h i
    simp only [convTerm, eval_sumTerms1, mul2, Term.eval_op, Args.eval_cons, Args.eval_nil,
      PrimOp.eval_binary, Term.eval_var, eval_projTerm]
    rfl

/-- The SiLU builder. -/
theorem eval_siluTerm {Γ : List Shape} (H n : Nat) (z : Var Γ [H, n]) (env : Env α Γ) :
    (siluTerm H n z).eval env = fun h i => Seq.silu (env.get z h i) := by
  funext h i; simp [siluTerm, mul2, BinaryFn.apply, UnaryFn.apply, Seq.silu]

/-- `eval_expandHeadTerm`, unapplied. -/
theorem eval_expandHeadTerm' {Γ : List Shape} (H V : Nat) (t : Term α Γ [H]) (env : Env α Γ) :
    (expandHeadTerm H V t).eval env = fun h _ => t.eval env h := by
  funext h c; exact eval_expandHeadTerm H V t env h c

/-- The updated states of a renamed `packedUpdateTerm`. -/
theorem eval_packedUpdate_rename {Γ : List Shape} {H K V : Nat} (env : Env α Γ)
    (vs : VarList Γ (packedCtx H K V)) (S : Tensor α [H, K, V]) (key : Tensor α [H, K])
    (value : Tensor α [H, V]) (ret : Tensor α [H, K]) (beta : Tensor α [H]) (query : Tensor α [H, K])
    (h : vs.eval env = .cons S (.cons key (.cons value (.cons ret (.cons beta (.cons query .nil)))))) :
    ((packedUpdateTerm H K V).rename vs.toRenaming).eval env =
      fun hd => update (S hd) (headInput key value ret beta query hd) := by
  rw [Term.eval_rename (VarList.respects_toRenaming env vs), h]
  exact eval_packedUpdateTerm S key value ret beta query

end Lemmas

section Field

variable [ScalarField α]

/-- **The KDA layer fragment computes `KDA.layerStep`** (k3-spec §2.2, report Eq. 1–6): for
every convolution width, all weights, window, head states and input of a layer, in every
context holding them, the results are the new head states and the output of the reference
layer step. -/
theorem layerFrag_denote {Γ : List Shape} {D H K V R W : Nat} (logFloor l2Eps : α)
    (p : LayerParams α (dims D H K V R W)) (s : LayerState α (dims D H K V R W)) (x : Tensor α [D])
    (v : LayerVars Γ D H K V R W) (env : Env α Γ) (hv : v.Holds env p s x) :
    (layerFrag logFloor l2Eps p.normEps p.queryScale v).denote env =
      .cons (layerStep p logFloor l2Eps s x).1.heads (.cons (layerStep p logFloor l2Eps s x).2 .nil) := by
  obtain ⟨hqp, hkp, hvp, hqc, hkc, hvc, hdd, hdu, hdb, hls, hbp, hgw, hon, hop, hx, hrows, hh⟩ := hv
  simp only [layerFrag, Frag.denote_bind, Frag.denote_pure, VarList.eval_cons, VarList.eval_nil,
    LayerVars.up, Var.up_cons, Var.up_refl, Env.get_here, Env.get_there]
  rw [eval_packedUpdate_rename _ _ _ _ _ _ _ _
    (by simp only [VarList.eval_cons, VarList.eval_nil, Env.get_here, Env.get_there]; rfl)]
  refine Env.cons_congr ?_ (Env.cons_congr ?_ rfl)
  · funext hd
    simp only [layerStep, Seq.memoFn_eq]
    congr 1
    simp only [prepare, projectConv, headInput, retention, logDecay, Seq.memo2_eq, Seq.memoFn_eq]
    simp [Seq.silu, mul2, add2, Seq.l2Normalize_eq_core,
      eval_convTerm, eval_siluTerm, eval_expandHeadTerm', eval_batchedReadTerm',
      Tensor.l2NormLast_eta, Tensor.vecMatMul_eta, Tensor.scale_eta, Tensor.map_eta, UnaryFn.apply, BinaryFn.apply,
      Seq.sum_eq, hqp, hkp, hvp, hqc, hkc, hvc, hdd, hdu, hdb, hls, hbp, hx, hrows, hh]
  · simp only [layerStep, output, Seq.memoFn_eq, Seq.memo2_eq]
    simp [prepare, projectConv, headInput, retention, logDecay, read, Seq.silu, mul2, add2,
      Seq.l2Normalize_eq_core, Seq.vecMatMul_eq_core, Seq.rmsNorm_eq_core,
      eval_convTerm, eval_siluTerm, eval_expandHeadTerm', eval_batchedReadTerm',
      Tensor.l2NormLast_eta, Tensor.rmsNormLast_eta, Tensor.sumLast_eta, Tensor.vecMatMul_eta, Tensor.scale_eta,
      Tensor.map_eta, UnaryFn.apply, BinaryFn.apply, Tensor.swapAxes01_eta, Seq.sum_eq, Seq.memo2_eq, Seq.memoFn_eq,
      hqp, hkp, hvp, hqc, hkc, hvc, hdd, hdu, hdb, hls, hbp, hgw, hon, hop, hx, hrows, hh]

end Field

/-! ## The program over its own signature -/

/-- The parameters of a KDA layer as the program's parameter environment (taps split). -/
noncomputable def layerParamsEnv {D H K V R W : Nat} (p : LayerParams α (dims D H K V R W)) :
    Env α (layerParamSig D H K V R W).shapes :=
  Env.appendSig [("query_proj", [D, H, K]), ("key_proj", [D, H, K]), ("value_proj", [D, H, V])]
    (.cons p.queryProj (.cons p.keyProj (.cons p.valueProj .nil)))
    (Env.appendSig (repSig "query_conv" [H, K] 0 W) (Env.ofRep W p.queryConv)
    (Env.appendSig (repSig "key_conv" [H, K] 0 W) (Env.ofRep W p.keyConv)
    (Env.appendSig (repSig "value_conv" [H, V] 0 W) (Env.ofRep W p.valueConv)
    (.cons p.decayDown (.cons p.decayUp (.cons p.decayBias (.cons p.decayLogScale (.cons p.betaProj
      (.cons p.gateWeight (.cons p.outNormScale (.cons p.outputProj .nil)))))))))))

/-- The layer input and state as the program's input environment: `x`, the window rows
`1, …, W − 1` (row `0` is dropped by `shiftWindow` before use) and the head states. -/
noncomputable def layerInputsEnv {D H K V R W : Nat} (s : LayerState α (dims D H K V R W)) (x : Tensor α [D]) :
    Env α (layerInputSig D H K V W).shapes :=
  Env.appendSig [("x", [D])] (.cons x .nil)
    (Env.appendSig (repSig "window" [D] 0 (W - 1)) (Env.ofRep (W - 1) (fun j => s.window ⟨j.val + 1, by show j.val + 1 < W; omega⟩))
      (.cons s.heads .nil))

/-- The expected outputs: the new window rows `1, …, W − 1`, the new head states, the output. -/
noncomputable def layerOutputsEnv {D H K V R W : Nat} (r : LayerState α (dims D H K V R W) × Tensor α [D]) :
    Env α (layerOutputSig D H K V W).shapes :=
  Env.appendSig (repSig "window_next" [D] 0 (W - 1)) (Env.ofRep (W - 1) (fun j => r.1.window ⟨j.val + 1, by show j.val + 1 < W; omega⟩))
    (.cons r.1.heads (.cons r.2 .nil))

section Program

variable [ScalarField α]

/-- The blocks' variables hold the layer when each block holds its part. -/
theorem LayerVars.ofBlocks_holds {Γ : List Shape} {D H K V R W : Nat} (env : Env α Γ)
    (p : LayerParams α (dims D H K V R W)) (s : LayerState α (dims D H K V R W)) (x : Tensor α [D])
    (fixed : VarList Γ [[D, H, K], [D, H, K], [D, H, V]])
    (queryConv keyConv : Fin W → Var Γ [H, K]) (valueConv : Fin W → Var Γ [H, V])
    (tail : VarList Γ [[D, R], [R, H, K], [H, K], [H], [D, H], [D, H, V], [V], [H, V, D]])
    (xv : Var Γ [D]) (window : Fin (W - 1) → Var Γ [D]) (heads : Var Γ [H, K, V])
    (hf : fixed.eval env = .cons p.queryProj (.cons p.keyProj (.cons p.valueProj .nil)))
    (hqc : ∀ t, env.get (queryConv t) = p.queryConv t) (hkc : ∀ t, env.get (keyConv t) = p.keyConv t)
    (hvc : ∀ t, env.get (valueConv t) = p.valueConv t)
    (ht : tail.eval env = .cons p.decayDown (.cons p.decayUp (.cons p.decayBias (.cons p.decayLogScale
      (.cons p.betaProj (.cons p.gateWeight (.cons p.outNormScale (.cons p.outputProj .nil))))))))
    (hx : env.get xv = x) (hw : ∀ j : Fin (W - 1), env.get (window j) = s.window ⟨j.val + 1, by show j.val + 1 < W; omega⟩)
    (hh : env.get heads = s.heads) :
    (LayerVars.ofBlocks fixed queryConv keyConv valueConv tail xv window heads).Holds env p s x := by
  match fixed, tail with
  | .cons qp (.cons kp (.cons vp .nil)),
    .cons dd (.cons du (.cons db (.cons ls (.cons bp (.cons gw (.cons ong (.cons op .nil))))))) =>
    simp only [VarList.eval_cons, VarList.eval_nil, Env.cons.injEq] at hf ht
    obtain ⟨h1, h2, h3, -⟩ := hf
    obtain ⟨h4, h5, h6, h7, h8, h9, h10, h11, -⟩ := ht
    refine ⟨h1, h2, h3, hqc, hkc, hvc, h4, h5, h6, h7, h8, h9, h10, h11, hx, ?_, hh⟩
    intro t
    simp only [LayerVars.ofBlocks, shiftRows, shiftWindow]
    split
    · exact hw _
    · exact hx

/-- **The variables of a parameter block hold the layer** when the block holds its parameters
(`layerParamsEnv`) and the token, window and head variables hold theirs. -/
theorem LayerVars.ofParams_holds {Γ : List Shape} {D H K V R W : Nat} (env : Env α Γ)
    (p : LayerParams α (dims D H K V R W)) (s : LayerState α (dims D H K V R W)) (x : Tensor α [D])
    (ps : VarList Γ (Signature.shapes (layerParamSig D H K V R W))) (xv : Var Γ [D])
    (window : Fin (W - 1) → Var Γ [D]) (heads : Var Γ [H, K, V]) (hps : ps.eval env = layerParamsEnv p)
    (hx : env.get xv = x) (hw : ∀ j : Fin (W - 1), env.get (window j) = s.window ⟨j.val + 1, by show j.val + 1 < W; omega⟩)
    (hh : env.get heads = s.heads) : (LayerVars.ofParams ps xv window heads).Holds env p s x := by
  have hfix := VarList.eval_splitSig_fst env _ hps
  have hr1 := VarList.eval_splitSig_snd env _ hps
  have hq := VarList.eval_splitSig_fst env _ hr1
  have hr2 := VarList.eval_splitSig_snd env _ hr1
  have hk := VarList.eval_splitSig_fst env _ hr2
  have hr3 := VarList.eval_splitSig_snd env _ hr2
  have hv := VarList.eval_splitSig_fst env _ hr3
  have htail := VarList.eval_splitSig_snd env _ hr3
  exact LayerVars.ofBlocks_holds env p s x _ _ _ _ _ _ _ _ hfix
    (VarList.get_ofRep env _ _ hq) (VarList.get_ofRep env _ _ hk) (VarList.get_ofRep env _ _ hv)
    htail hx hw hh

/-- The signature's variables hold the layer in the program's environment. -/
theorem layerSigVars_holds {D H K V R W : Nat} (p : LayerParams α (dims D H K V R W))
    (s : LayerState α (dims D H K V R W)) (x : Tensor α [D]) :
    (layerSigVars D H K V R W).Holds ((layerParamsEnv p).append (layerInputsEnv s x)) p s x := by
  let env := (layerParamsEnv p).append (layerInputsEnv s x)
  have hall : (VarList.self _).eval env = env := VarList.eval_self env
  have hps := VarList.eval_split_fst env _ hall
  have his := VarList.eval_split_snd env _ hall
  have hx := VarList.eval_splitSig_fst env _ his
  have hr4 := VarList.eval_splitSig_snd env _ his
  have hwin := VarList.eval_splitSig_fst env _ hr4
  have hheads := VarList.eval_splitSig_snd env _ hr4
  refine LayerVars.ofParams_holds env p s x _ _ _ _ hps ?_ (VarList.get_ofRep env _ _ hwin) ?_
  · rw [VarList.head_eval]; exact congrArg Env.head hx
  · rw [VarList.head_eval]; exact congrArg Env.head hheads

/-- **The KDA layer program computes `KDA.layerStep`** (k3-spec §2.2, report Eq. 1–6): for all
weights, window, head states and input of a layer of any convolution width, the outputs are the
new window rows `1, …, W − 1`, the new head states and the output of the reference layer step. -/
theorem layerProgram_eval {D H K V R W : Nat} (logFloor l2Eps : α)
    (p : LayerParams α (dims D H K V R W)) (s : LayerState α (dims D H K V R W)) (x : Tensor α [D]) :
    (layerProgram logFloor l2Eps p.normEps p.queryScale D H K V R W).eval (layerParamsEnv p)
        (layerInputsEnv s x) = layerOutputsEnv (layerStep p logFloor l2Eps s x) := by
  have hv := layerSigVars_holds p s x
  simp only [layerProgram, Program.eval_ofFrag, Frag.denote_seq, Frag.denote_pure,
    VarList.eval_appendSig, VarList.eval_ofFnRep, Lets.get_liftVar, Frag.out_eval,
    layerFrag_denote logFloor l2Eps p s x _ _ hv, layerOutputsEnv, hv.rows]
  congr 2
  funext j
  simp only [layerStep, Seq.memo2_eq]

/-- The `Model` form of the program computes the same. -/
theorem layerModel_specFwd {D H K V R W : Nat} (logFloor l2Eps : α)
    (p : LayerParams α (dims D H K V R W)) (s : LayerState α (dims D H K V R W)) (x : Tensor α [D]) :
    (layerProgram logFloor l2Eps p.normEps p.queryScale D H K V R W).toModel.specFwd (layerParamsEnv p)
        (layerInputsEnv s x) = layerOutputsEnv (layerStep p logFloor l2Eps s x) :=
  (Program.toModel_specFwd _ _ _).trans (layerProgram_eval logFloor l2Eps p s x)

end Program

end KDA

end KimiK3
