module

public import KimiK3.Graph.DecoderEnvs
public import KimiK3.Depth.AttnResGraph
public import KimiK3.Depth.AttnResBridge

/-!
# The decoder graph computes the packed token step (k3-spec §3 rung 03)

**`Decoder.program_eval`**: for every configuration, every number `T` of past tokens, every
scalar model of `ScalarField`, every language model that follows its configuration
(`LanguageModel.Conforms`: the schedule of `Config.attentionKindAt` and `Config.isMoE`, the
configuration's ε, scales, `g_min` and routed scaling factor), all staged routes, all packed
states and every embedding row, the graph `Decoder.program` on the model's parameters for the
routes (`paramsEnv`) and the packed states (`inputsEnv`) computes the model's packed token step
`LanguageModel.packedStep`: the logits, every layer's new packed state and every MoE layer's
router scores (`outputsEnv`).

The proof follows the graph: one lemma per fragment (`retrieveNormFrag_denote`,
`mixerFrag_denote_kda`, `mixerFrag_denote_mla`, `channelFrag_denote_dense`,
`channelFrag_denote_moe`, `layerFrag_denote`, `finalFrag_denote`), then induction over the
layers (`layersFrag_denote`), each layer's variables holding the layer's tensors
(`DepthVars.Holds` for the depth state).
-/

@[expose] public section

namespace KimiK3

namespace Decoder

variable {α : Type}

/-! ## The fragments' meanings -/

section Lists

/-- The values of a list of variables. -/
noncomputable def valsOf {Γ : List Shape} {s : Shape} (env : Env α Γ) : List (Var Γ s) → List (Tensor α s)
  | [] => []
  | v :: vs => env.get v :: valsOf env vs

theorem valsOf_varsAppend {Γ : List Shape} {s : Shape} (env : Env α Γ) : (a b : List (Var Γ s)) →
    valsOf env (varsAppend a b) = Seq.listAppend (valsOf env a) (valsOf env b)
  | [], _ => rfl
  | v :: a, b => by simp only [varsAppend, valsOf, Seq.listAppend, valsOf_varsAppend env a b]

theorem valsOf_varsMap {Γ Δ : List Shape} {s : Shape} {ρ : Renaming Γ Δ} {env : Env α Γ} {env' : Env α Δ}
    (h : Renaming.Respects ρ env env') : (vs : List (Var Γ s)) → valsOf env' (varsMap ρ vs) = valsOf env vs
  | [] => rfl
  | v :: vs => by simp only [varsMap, valsOf, h v, valsOf_varsMap h vs]

theorem valsOf_length {Γ : List Shape} {s : Shape} (env : Env α Γ) : (vs : List (Var Γ s)) →
    (valsOf env vs).length = vs.length
  | [] => rfl
  | _ :: vs => by simp [valsOf, valsOf_length env vs]

theorem stackLen_eq {β : Type} : (l : List β) → stackLen l = l.length + 1
  | [] => rfl
  | _ :: l => by simp only [stackLen, stackLen_eq l, List.length_cons]; omega

end Lists

section Lemmas

variable [ScalarField α]

@[simp] theorem eval_normTerm {Γ : List Shape} (eps : α) (d : Nat) (x g : Var Γ [d]) (env : Env α Γ) :
    (normTerm eps d x g).eval env = Tensor.rmsNormVec eps (env.get x) (env.get g) := rfl

@[simp] theorem eval_addTerm {Γ : List Shape} (d : Nat) (x y : Var Γ [d]) (env : Env α Γ) :
    (addTerm d x y).eval env = fun k => env.get x k + env.get y k := rfl

/-- The stacked sources: row `i` is the `i`-th source. -/
theorem eval_stackTerm {Γ : List Shape} (d : Nat) (env : Env α Γ) : (f : Var Γ [d]) →
    (rest : List (Var Γ [d])) → (i : Fin (stackLen rest)) →
    (stackTerm d f rest).eval env i = Seq.listGet (fun _ => 0) (env.get f :: valsOf env rest) i.val
  | f, [], i => by
    have hi : i.val = 0 := by have := i.isLt; simp only [stackLen] at this; omega
    simp only [stackTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_broadcast, Term.eval_var,
      Tensor.broadcast, hi, Seq.listGet]
  | f, g :: rest, ⟨i, hi⟩ => by
    simp only [stackTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_concat0,
      PrimOp.eval_broadcast, Term.eval_var, Tensor.concat0, Tensor.broadcast]
    cases i with
    | zero => simp [Seq.listGet]
    | succ i =>
      simp only [show ¬(i + 1 < 1) by omega, dite_false]
      rw [eval_stackTerm d env g rest]
      simp [Seq.listGet, valsOf]

/-- Depth attention is the same over two packings with the same rows. -/
theorem attendPacked_congr {n m d : Nat} (eps : α) (q : Tensor α [d]) (v : Tensor α [n, d])
    (w : Tensor α [m, d]) (h : n = m) (hrow : ∀ i : Fin n, v i = w ⟨i.val, h ▸ i.isLt⟩) :
    AttnRes.attendPacked eps q v = AttnRes.attendPacked eps q w := by
  subst h
  have : v = w := funext hrow
  rw [this]

/-- Depth attention over the stacked sources is depth attention over their list. -/
theorem attendPacked_stackTerm {Γ : List Shape} {d : Nat} (eps : α) (q : Tensor α [d]) (f : Var Γ [d])
    (rest : List (Var Γ [d])) (env : Env α Γ) :
    AttnRes.attendPacked eps q ((stackTerm d f rest).eval env) =
      AttnRes.attendList eps q (env.get f :: valsOf env rest) := by
  unfold AttnRes.attendList
  refine attendPacked_congr eps q _ _ (by rw [stackLen_eq, Seq.listLen_eq, List.length_cons, valsOf_length]) (fun i => ?_)
  rw [eval_stackTerm]
  rfl

/-- **The retrieval fragment**: `RMSNorm_ε(attendList_ε' w sources) ⊙ γ` with unit score gain. -/
theorem retrieveNormFrag_denote {Γ : List Shape} {d : Nat} (retrievalEps normEps : α) (q g γ first : Var Γ [d])
    (rest : List (Var Γ [d])) (env : Env α Γ) (w gain : Tensor α [d]) (sources : List (Tensor α [d]))
    (hq : env.get q = w) (hg : env.get g = fun _ => 1) (hγ : env.get γ = gain)
    (hs : env.get first :: valsOf env rest = sources) :
    (retrieveNormFrag retrievalEps normEps q g γ first rest).denote env =
      .cons (Seq.rmsNorm normEps (AttnRes.attendList retrievalEps w sources) gain) .nil := by
  simp only [retrieveNormFrag, Frag.denote_bind, Frag.denote_pure, VarList.eval_cons, VarList.eval_nil,
    Env.get_here, Var.up_cons, Var.up_refl, Env.get_there, eval_normTerm]
  rw [AttnRes.eval_term _ _ _ _ _ _ _ (by simpa using hg)]
  simp only [Env.get_here, Env.get_there]
  rw [attendPacked_stackTerm, hs, hq, hγ, Seq.rmsNorm_eq_core]

omit [ScalarField α] in
/-- Variables renamed into a context with one more binding on top keep their values. -/
theorem eval_map_up {Γ Δ : List Shape} {t : Shape} {ss : List Shape} {ρ : Renaming Γ Δ} {envΓ : Env α Γ}
    {env : Env α Δ} (h : Renaming.Respects ρ envΓ env) (x : Tensor α t) (vs : VarList Γ ss) :
    (vs.map (fun v => Var.up (Δ := t :: Δ) (ρ v))).eval (Env.cons x env) = vs.eval envΓ :=
  VarList.eval_map (ρ := fun v => Var.up (Δ := t :: Δ) (ρ v)) (env' := Env.cons x env) (fun v => h v) vs

/-! ### The depth state -/

/-- **The depth variables hold the depth state** `s` in `env`: the embedding, the completed
blocks, the count, and the partial sum when the partial block is not empty. -/
structure DepthVars.Holds {Γ : List Shape} {d : Nat} (v : DepthVars Γ d) (env : Env α Γ)
    (s : BlockState α d) : Prop where
  emb : env.get v.emb = s.embedding
  blocks : valsOf env v.blocks = s.blocks
  count : v.count = s.count
  part : v.count ≠ 0 → env.get v.part = s.partialSum

omit [ScalarField α] in
theorem DepthVars.Holds.map {Γ Δ : List Shape} {d : Nat} {v : DepthVars Γ d} {env : Env α Γ}
    {s : BlockState α d} (h : v.Holds env s) {ρ : Renaming Γ Δ} {env' : Env α Δ}
    (hρ : Renaming.Respects ρ env env') : (v.map ρ).Holds env' s :=
  ⟨(hρ v.emb).trans h.emb, (valsOf_varsMap hρ v.blocks).trans h.blocks, h.count,
    fun hc => (hρ v.part).trans (h.part hc)⟩

omit [ScalarField α] in
/-- The sources the variables read are the state's sources. -/
theorem DepthVars.Holds.sources {Γ : List Shape} {d : Nat} {v : DepthVars Γ d} {env : Env α Γ}
    {s : BlockState α d} (h : v.Holds env s) : env.get v.emb :: valsOf env v.rest = s.sources := by
  simp only [DepthVars.rest, valsOf_varsAppend, BlockState.sources, h.emb, h.blocks, ← h.count]
  by_cases hc : v.count = 0
  · simp [hc, valsOf]
  · simp [hc, valsOf, h.part hc]

/-- The commit of the new partial sum `p` is the state's `finishLayer`. -/
theorem DepthVars.Holds.commit {Γ : List Shape} {d : Nat} {v : DepthVars Γ d} {env : Env α Γ}
    {s : BlockState α d} (h : v.Holds env s) (B : Nat) (p : Var Γ [d]) (seqOut chanOut : Tensor α [d])
    (hp : env.get p = fun k => s.afterSequence seqOut k + chanOut k) :
    (v.commit B p).Holds env (s.finishLayer B seqOut chanOut) := by
  unfold DepthVars.commit BlockState.finishLayer
  rw [← h.count]
  by_cases hB : v.count + 1 = B
  · simp only [hB, if_true]
    exact ⟨h.emb, by simp only [valsOf_varsAppend, h.blocks, valsOf, hp], rfl, fun h0 => absurd rfl h0⟩
  · simp only [hB, if_false]
    exact ⟨h.emb, h.blocks, rfl, fun _ => hp⟩

/-- The partial block with the sequence output. -/
theorem afterFrag_denote {Γ : List Shape} {d : Nat} (depth : DepthVars Γ d) (seqOut : Var Γ [d])
    (env : Env α Γ) (s : BlockState α d) (h : depth.Holds env s) :
    (afterFrag depth seqOut).denote env = .cons (s.afterSequence (env.get seqOut)) .nil := by
  unfold afterFrag BlockState.afterSequence
  rw [← h.count]
  by_cases hc : depth.count = 0
  · simp [hc]
  · simp [hc, h.part hc]

/-! ### The mixers -/

variable (c : Config) (T : Nat)

/-- **The KDA mixer fragment** computes `KDA.layerStep` (new window rows, head states, output). -/
theorem mixerFrag_denote_kda {Γ : List Shape} (pre : String) (p : KDA.LayerParams α c.kdaDims)
    (hn : p.normEps = c.kdaOutputNormEps.toScalar) (hq : p.queryScale = c.queryScale)
    (ps : VarList Γ (Signature.shapes (mixerParamSig c pre .kda)))
    (st : VarList Γ (Signature.shapes (stateSig c T pre .kda))) (x : Var Γ [c.hiddenDim]) (ss : Var Γ [])
    (env : Env α Γ) (s : KDA.LayerState α c.kdaDims) (xval : Tensor α [c.hiddenDim])
    (hps : ps.eval env = Env.toPrefix (pre ++ "kda.") (kdaSig c) (KDA.layerParamsEnv p))
    (hst : st.eval env = kdaStateEnv c T pre s) (hx : env.get x = xval) :
    (mixerFrag c T (Scalars.of c) pre .kda ps st x ss).denote env =
      Env.append (mixerOutEnv c T pre .kda (.kda (KDA.layerStep p c.logFloor c.kdaL2Eps.toScalar s xval).1))
        (.cons (KDA.layerStep p c.logFloor c.kdaL2Eps.toScalar s xval).2 .nil) := by
  have hwin := VarList.eval_splitSig_fst env st hst
  have hheads := VarList.eval_splitSig_snd env st hst
  have hv : (KDA.LayerVars.ofParams (ps.unprefix (pre ++ "kda.") (kdaSig c)) x
      (st.splitSig (repSig (pre ++ "window") [c.hiddenDim] 0 (c.kdaConvWidth - 1))).1.ofRep
      (st.splitSig (repSig (pre ++ "window") [c.hiddenDim] 0 (c.kdaConvWidth - 1))).2.head).Holds env p s xval :=
    KDA.LayerVars.ofParams_holds env p s xval _ x _ _ (VarList.eval_unprefix env _ _ _ _ hps) hx
    (VarList.get_ofRep env _ _ hwin) (by rw [VarList.head_eval, hheads]; rfl)
  have hf := KDA.layerFrag_denote c.logFloor c.kdaL2Eps.toScalar p s xval _ env hv
  rw [hn, hq] at hf
  refine Frag.denote_seq_of hf (fun Δ ρ outs env' hρ hout => ?_)
  simp only [Frag.denote_pure, VarList.eval_append, VarList.eval_appendSig, VarList.eval_ofFnRep,
    VarList.eval_cons, VarList.eval_nil, hρ, hv.rows, VarList.head_eval, VarList.tail_eval, hout]
  simp only [mixerOutEnv, KDA.layerStep, Seq.memo2_eq, Env.head, Env.tail]
  rfl

/-- **The MLA mixer fragment** computes the packed step graph `GatedMLA.stepModel`. -/
theorem mixerFrag_denote_mla {Γ : List Shape} (pre : String) (p : GatedMLA.Params α c.mlaDims)
    (hn : p.normEps = c.mlaLatentNormEps.toScalar)
    (ps : VarList Γ (Signature.shapes (mixerParamSig c pre .mla)))
    (st : VarList Γ (Signature.shapes (stateSig c T pre .mla))) (x : Var Γ [c.hiddenDim]) (ss : Var Γ [])
    (env : Env α Γ) (lat : Tensor α [T, c.kvLatentDim]) (sh : Tensor α [T, c.sharedKeyDim])
    (hps : ps.eval env = Env.toPrefix (pre ++ "mla.") (mlaSig c) (GatedMLA.paramsEnv p))
    (hst : st.eval env = .cons lat (.cons sh .nil)) :
    (mixerFrag c T (Scalars.of c) pre .mla ps st x ss).denote env =
      (GatedMLA.stepModel p.normEps T c.mlaDims).specFwd (GatedMLA.paramsEnv p)
        (.cons lat (.cons sh (.cons (env.get x) (.cons (env.get ss) .nil)))) := by
  have hw := VarList.eval_unprefix env _ _ _ _ hps
  have h1 : env.get st.head = lat := by rw [VarList.head_eval, hst]; rfl
  have h2 : env.get st.tail.head = sh := by rw [VarList.head_eval, VarList.tail_eval, hst]; rfl
  simp only [mixerFrag, Scalars.of]
  rw [← hn]
  refine Frag.denote_ofModel _ _ env _ _ ?_
  simp only [VarList.eval_append, hw, VarList.eval_cons, VarList.eval_nil, h1, h2]

/-- **The sequence mixer fragment of a conforming mixer** computes its packed step. -/
theorem mixerFrag_denote {Γ : List Shape} (pre : String) (k : AttentionKind) (m : SequenceMixer α c)
    (hm : m.Conforms c k) (ps : VarList Γ (Signature.shapes (mixerParamSig c pre k)))
    (st : VarList Γ (Signature.shapes (stateSig c T pre k))) (x : Var Γ [c.hiddenDim]) (ss : Var Γ [])
    (env : Env α Γ) (s : PackedState α c T) (xval : Tensor α [c.hiddenDim])
    (hps : ps.eval env = mixerParamsEnv c pre k m) (hst : st.eval env = stateEnv c T pre k s)
    (hx : env.get x = xval) (hss : env.get ss = c.scoreScale) :
    (mixerFrag c T (Scalars.of c) pre k ps st x ss).denote env =
      Env.append (mixerOutEnv c T pre k (m.packedStep s xval).1) (.cons (m.packedStep s xval).2 .nil) := by
  cases k <;> cases m <;> simp only [SequenceMixer.Conforms] at hm
  · obtain ⟨hlf, hl2, hn, hq⟩ := hm
    subst hlf hl2
    cases s with
    | kda st' => exact mixerFrag_denote_kda c T pre _ hn hq ps st x ss env st' xval hps hst hx
    | mla lat sh => exact mixerFrag_denote_kda c T pre _ hn hq ps st x ss env _ xval hps hst hx
  · obtain ⟨hss', hn⟩ := hm
    subst hss'
    cases s with
    | kda st' =>
      rw [mixerFrag_denote_mla c T pre _ hn ps st x ss env _ _ hps hst, GatedMLA.stepModel_specFwd, hx, hss]
      rfl
    | mla lat sh =>
      rw [mixerFrag_denote_mla c T pre _ hn ps st x ss env _ _ hps hst, GatedMLA.stepModel_specFwd, hx, hss]
      rfl

/-! ### The channel mixers -/

/-- **The dense channel fragment** computes the expert. -/
theorem channelFrag_denote_dense {Γ : List Shape} (pre : String)
    (e : Expert α c.hiddenDim c.denseHiddenDim c.hiddenDim)
    (ps : VarList Γ (Signature.shapes (channelParamSig c pre false))) (x gc uc : Var Γ _) (env : Env α Γ)
    (hps : ps.eval env = Env.toPrefix (pre ++ "mlp.") (denseSig c) (ExpertGraph.parameters e)) :
    (channelFrag c (Scalars.of c) pre false ps x gc uc).denote env =
      .cons (e.forward (env.get gc) (env.get uc) (env.get x)) .nil := by
  have hw := VarList.eval_unprefix env _ _ _ _ hps
  have h1 := VarList.head_eval env (ps.unprefix (pre ++ "mlp.") (denseSig c))
  have h2 := VarList.head_eval env (ps.unprefix (pre ++ "mlp.") (denseSig c)).tail
  have h3 := VarList.head_eval env (ps.unprefix (pre ++ "mlp.") (denseSig c)).tail.tail
  rw [VarList.tail_eval, hw] at h2
  rw [VarList.tail_eval, VarList.tail_eval, hw] at h3
  rw [hw] at h1
  simp only [channelFrag, Frag.denote_bind, Frag.denote_pure, VarList.eval_cons, VarList.eval_nil,
    Env.get_here, ExpertGraph.eval_term, h1, h2, h3]
  rfl

/-- This module's `sumTerms` is `MoEGraph.sumTerms`. -/
theorem sumTerms_eq {Γ : List Shape} {s : Shape} (zero : Term α Γ s) :
    (n : Nat) → (f : Fin n → Term α Γ s) → sumTerms zero n f = MoEGraph.sumTerms zero n f
  | 0, _ => rfl
  | n + 1, f => by simp only [sumTerms, MoEGraph.sumTerms, sumTerms_eq zero n]

/-- This module's `moeTerm` is `MoEGraph.term`. -/
theorem moeTerm_eq {Γ : List Shape} (d l hs hr S k : Nat) (eps routedScale : α) (input : Var Γ [d])
    (gateCap upCap : Var Γ []) (sharedGate sharedUp : Fin S → Var Γ [d, hs])
    (sharedDown : Fin S → Var Γ [hs, d]) (downProject : Var Γ [d, l]) (routerCol : Fin k → Var Γ [d])
    (routedGate routedUp : Fin k → Var Γ [l, hr]) (routedDown : Fin k → Var Γ [hr, l])
    (normScale : Var Γ [l]) (upProject : Var Γ [l, d]) :
    moeTerm d l hs hr S k eps routedScale input gateCap upCap sharedGate sharedUp sharedDown downProject
        routerCol routedGate routedUp routedDown normScale upProject =
      MoEGraph.term d l hs hr S k eps routedScale input gateCap upCap sharedGate sharedUp sharedDown
        downProject routerCol routedGate routedUp routedDown normScale upProject := by
  simp only [moeTerm, MoEGraph.term, weightTerm, MoEGraph.weightTerm, sumTerms_eq]

omit [ScalarField α] in
/-- The shared-expert variables of a block hold the shared experts. -/
theorem sharedOf_holds {Γ : List Shape} (env : Env α Γ) (d hs : Nat) (rest : Signature) : (n : Nat) →
    (vs : VarList Γ (Signature.shapes (MoEModel.sharedSig d hs n rest))) → (f : Fin n → Expert α d hs d) →
    (e : Env α (Signature.shapes rest)) → vs.eval env = MoEModel.sharedEnv n f e →
    (∀ i, env.get ((sharedOf d hs rest n vs).1 i) = (f i).gateWeight) ∧
    (∀ i, env.get ((sharedOf d hs rest n vs).2.1 i) = (f i).upWeight) ∧
    (∀ i, env.get ((sharedOf d hs rest n vs).2.2.1 i) = (f i).downWeight) ∧
    (sharedOf d hs rest n vs).2.2.2.eval env = e
  | 0, vs, _, _, h => ⟨fun i => i.elim0, fun i => i.elim0, fun i => i.elim0, h⟩
  | n + 1, .cons g (.cons u (.cons dn vs)), f, e, h => by
    simp only [VarList.eval_cons, MoEModel.sharedEnv] at h
    obtain ⟨hg, h⟩ := Env.cons_inj.mp h
    obtain ⟨hu, h⟩ := Env.cons_inj.mp h
    obtain ⟨hd, hr⟩ := Env.cons_inj.mp h
    obtain ⟨ig, iu, id, ir⟩ := sharedOf_holds env d hs rest n vs _ e hr
    refine ⟨fun i => ?_, fun i => ?_, fun i => ?_, ir⟩ <;> by_cases hi : i.val = 0 <;>
      simp only [sharedOf, hi, dite_true, dite_false, hg, hu, hd, ig, iu, id] <;>
      first
      | (rw [show i = ⟨0, by omega⟩ from Fin.ext hi])
      | (rw [show (⟨i.val - 1 + 1, by omega⟩ : Fin (n + 1)) = i from
          Fin.ext (by show i.val - 1 + 1 = i.val; omega)])

omit [ScalarField α] in
/-- The slot variables of a block hold the slots' router columns and experts. -/
theorem slotsOf_holds {Γ : List Shape} (env : Env α Γ) (d l hr : Nat) (rest : Signature) : (n : Nat) →
    (vs : VarList Γ (Signature.shapes (MoEModel.slotSig d l hr n rest))) → (r : Fin n → Tensor α [d]) →
    (f : Fin n → Expert α l hr l) → (e : Env α (Signature.shapes rest)) →
    vs.eval env = MoEModel.slotEnv n r f e →
    (∀ i, env.get ((slotsOf d l hr rest n vs).1 i) = r i) ∧
    (∀ i, env.get ((slotsOf d l hr rest n vs).2.1 i) = (f i).gateWeight) ∧
    (∀ i, env.get ((slotsOf d l hr rest n vs).2.2.1 i) = (f i).upWeight) ∧
    (∀ i, env.get ((slotsOf d l hr rest n vs).2.2.2.1 i) = (f i).downWeight) ∧
    (slotsOf d l hr rest n vs).2.2.2.2.eval env = e
  | 0, vs, _, _, _, h => ⟨fun i => i.elim0, fun i => i.elim0, fun i => i.elim0, fun i => i.elim0, h⟩
  | n + 1, .cons rv (.cons g (.cons u (.cons dn vs))), r, f, e, h => by
    simp only [VarList.eval_cons, MoEModel.slotEnv] at h
    obtain ⟨hrv, h⟩ := Env.cons_inj.mp h
    obtain ⟨hg, h⟩ := Env.cons_inj.mp h
    obtain ⟨hu, h⟩ := Env.cons_inj.mp h
    obtain ⟨hd, hrest⟩ := Env.cons_inj.mp h
    obtain ⟨ir, ig, iu, id, irest⟩ := slotsOf_holds env d l hr rest n vs _ _ e hrest
    refine ⟨fun i => ?_, fun i => ?_, fun i => ?_, fun i => ?_, irest⟩ <;> by_cases hi : i.val = 0 <;>
      simp only [slotsOf, hi, dite_true, dite_false, hrv, hg, hu, hd, ir, ig, iu, id] <;>
      first
      | (rw [show i = ⟨0, by omega⟩ from Fin.ext hi])
      | (rw [show (⟨i.val - 1 + 1, by omega⟩ : Fin (n + 1)) = i from
          Fin.ext (by show i.val - 1 + 1 = i.val; omega)])

omit [ScalarField α] in
/-- **The variables of a `MoEModel.paramSig` block hold the layer's parameters for a route**
(`MoEModel.parameters`): shared experts, `W↓`, each slot's router column and expert, gain,
`W↑`. -/
theorem MoEVars.ofList_holds {Γ : List Shape} (env : Env α Γ) {d l hs hr S E k : Nat}
    (moe : StableLatentMoE α d l hs hr S E) (route : Fin k → Fin E)
    (vs : VarList Γ (Signature.shapes (MoEModel.paramSig d l hs hr S k)))
    (h : vs.eval env = MoEModel.parameters moe route) :
    (∀ i, env.get ((MoEVars.ofList vs).sharedGate i) = (moe.shared i).gateWeight) ∧
    (∀ i, env.get ((MoEVars.ofList vs).sharedUp i) = (moe.shared i).upWeight) ∧
    (∀ i, env.get ((MoEVars.ofList vs).sharedDown i) = (moe.shared i).downWeight) ∧
    env.get (MoEVars.ofList vs).downProject = moe.downProject ∧
    (∀ i, env.get ((MoEVars.ofList vs).routerCol i) = fun c => moe.routerWeight c (route i)) ∧
    (∀ i, env.get ((MoEVars.ofList vs).routedGate i) = (moe.routed (route i)).gateWeight) ∧
    (∀ i, env.get ((MoEVars.ofList vs).routedUp i) = (moe.routed (route i)).upWeight) ∧
    (∀ i, env.get ((MoEVars.ofList vs).routedDown i) = (moe.routed (route i)).downWeight) ∧
    env.get (MoEVars.ofList vs).normScale = moe.routedNormScale ∧
    env.get (MoEVars.ofList vs).upProject = moe.upProject := by
  obtain ⟨hSG, hSU, hSD, hrest⟩ := sharedOf_holds env d hs _ S vs moe.shared _ h
  simp only [MoEVars.ofList]
  split
  rename_i dp rest heq
  rw [heq] at hrest
  simp only [VarList.eval_cons, MoEModel.restEnv] at hrest
  obtain ⟨hdp, hrest2⟩ := Env.cons_inj.mp hrest
  obtain ⟨ir, ig, iu, id, itail⟩ := slotsOf_holds env d l hr _ k rest _ _ _ hrest2
  split
  rename_i ns up heq2
  rw [heq2] at itail
  simp only [VarList.eval_cons, VarList.eval_nil, MoEModel.tailEnv] at itail
  obtain ⟨hns, itail⟩ := Env.cons_inj.mp itail
  exact ⟨hSG, hSU, hSD, hdp, ir, ig, iu, id, hns, (Env.cons_inj.mp itail).1⟩

/-- **The LatentMoE channel fragment** computes the router scores and the layer on the route. -/
theorem channelFrag_denote_moe {Γ : List Shape} (pre : String)
    (l : StableLatentMoE α c.hiddenDim c.latentDim c.expertHiddenDim c.expertHiddenDim c.numSharedExperts
      c.numRoutedExperts)
    (hn : l.normEps = c.moeNormEps.toScalar) (hr : l.routedScale = c.routedScale.toScalar)
    (route : Fin c.activeExperts → Fin c.numRoutedExperts)
    (ps : VarList Γ (Signature.shapes (channelParamSig c pre true))) (x gc uc : Var Γ _) (env : Env α Γ)
    (hps : ps.eval env = Env.appendSig
      (B := [(pre ++ "router.weight", [c.hiddenDim, c.numRoutedExperts]), (pre ++ "router.bias", [c.numRoutedExperts])])
      _ (Env.toPrefix (pre ++ "moe.") (moeSig c) (MoEModel.parameters l route))
      (.cons l.routerWeight (.cons l.routerBias .nil))) :
    (channelFrag c (Scalars.of c) pre true ps x gc uc).denote env =
      .cons (l.adjustedRouterScores (env.get x)) (.cons (l.forward route (env.get gc) (env.get uc) (env.get x)) .nil) := by
  have h1 := VarList.eval_splitSig_fst env ps hps
  have h2 := VarList.eval_splitSig_snd env ps hps
  have hw := VarList.eval_unprefix env _ _ _ _ h1
  have hR : env.get (ps.splitSig (Signature.prefix (pre ++ "moe.") (moeSig c))).2.head = l.routerWeight := by
    rw [VarList.head_eval, h2]; rfl
  have hb : env.get (ps.splitSig (Signature.prefix (pre ++ "moe.") (moeSig c))).2.tail.head = l.routerBias := by
    rw [VarList.head_eval, VarList.tail_eval, h2]; rfl
  obtain ⟨hSG, hSU, hSD, hDown, hCol, hRG, hRU, hRD, hNorm, hUp⟩ := MoEVars.ofList_holds env l route _ hw
  simp only [channelFrag, Frag.denote_bind, Frag.denote_pure, VarList.eval_cons, VarList.eval_nil,
    Env.get_here, Var.up_cons, Var.up_refl, Env.get_there, Scalars.of]
  rw [← hn, ← hr, moeTerm_eq, MoEGraph.eval_term l route env x gc uc _ _ _ _ _ _ _ _ _ _ hSG hSU hSD hDown
    hCol hRG hRU hRD hNorm hUp]
  simp only [Term.eval_op, Term.eval_var, Args.eval_cons, Args.eval_nil, PrimOp.eval_binary, PrimOp.eval_unary,
    PrimOp.eval_vecMatMul, Env.get_there, hR, hb]
  rfl

/-- **The channel fragment of a conforming channel mixer** computes its router scores and its
output on the staged route. -/
theorem channelFrag_denote {Γ : List Shape} (pre : String) (moe : Bool) (ch : ChannelMixer α c)
    (hc : ch.Conforms c moe) (route : Fin c.activeExperts → Fin c.numRoutedExperts)
    (ps : VarList Γ (Signature.shapes (channelParamSig c pre moe))) (x gc uc : Var Γ _) (env : Env α Γ)
    (xval : Tensor α [c.hiddenDim]) (hps : ps.eval env = channelParamsEnv c pre route moe ch)
    (hx : env.get x = xval) (hgc : env.get gc = (c.gateCap : α)) (huc : env.get uc = (c.upCap : α)) :
    (channelFrag c (Scalars.of c) pre moe ps x gc uc).denote env =
      Env.append (channelOutEnv c pre moe (ch.routerScores xval)) (.cons (ch.forwardRouted route xval) .nil) := by
  cases moe <;> cases ch <;> simp only [ChannelMixer.Conforms] at hc
  · rw [channelFrag_denote_dense c pre _ ps x gc uc env hps, hx, hgc, huc]
    rfl
  · obtain ⟨hn, hr⟩ := hc
    rw [channelFrag_denote_moe c pre _ hn hr route ps x gc uc env hps, hx, hgc, huc]
    rfl

/-! ### Layers -/

/-- The scalar input variables hold the configuration's caps and score scale. -/
structure ScalarVars.Holds {Γ : List Shape} (v : ScalarVars Γ) (env : Env α Γ) : Prop where
  gateCap : env.get v.gateCap = (c.gateCap : α)
  upCap : env.get v.upCap = (c.upCap : α)
  scoreScale : env.get v.scoreScale = c.scoreScale

theorem ScalarVars.Holds.map {Γ Δ : List Shape} {v : ScalarVars Γ} {env : Env α Γ} (h : v.Holds c env)
    {ρ : Renaming Γ Δ} {env' : Env α Δ} (hρ : Renaming.Respects ρ env env') : (v.map ρ).Holds c env' :=
  ⟨(hρ _).trans h.gateCap, (hρ _).trans h.upCap, (hρ _).trans h.scoreScale⟩

/-- The variables of a retrieval block hold its query, its unit gain and its pre-norm gain. -/
theorem resVars_holds {Γ : List Shape} (env : Env α Γ) (pre part : String)
    (vs : VarList Γ (Signature.shapes (resSig c pre part))) (q γ : Tensor α [c.hiddenDim])
    (h : vs.eval env = resEnv c pre part q γ) :
    env.get vs.head = q ∧ env.get vs.tail.head = (fun _ => 1) ∧ env.get vs.tail.tail.head = γ := by
  match vs with
  | .cons a (.cons b (.cons g .nil)) =>
    simp only [VarList.eval_cons, VarList.eval_nil, resEnv] at h
    obtain ⟨h₁, h⟩ := Env.cons_inj.mp h
    obtain ⟨h₂, h⟩ := Env.cons_inj.mp h
    exact ⟨h₁, h₂, (Env.cons_inj.mp h).1⟩

/-- **One layer's fragment computes the layer's packed step** (k3-spec §2.5): for a layer that
follows the configuration, its parameters for the route, its packed state and the depth state,
the results are the layer's outputs (new packed state, router scores) and the new partial sum
`(P + seqOut) + chanOut` that `finishLayer` commits. -/
theorem layerFrag_denote (n : Nat) {Γ : List Shape} (ps : VarList Γ (Signature.shapes (layerParamSig c n)))
    (st : VarList Γ (Signature.shapes (stateSig c T (layerPre n) (c.attentionKindAt n))))
    (sv : ScalarVars Γ) (depth : DepthVars Γ c.hiddenDim) (env : Env α Γ) (layer : BackboneLayer α c)
    (hl : layer.Conforms n) (route : Fin c.activeExperts → Fin c.numRoutedExperts) (s : PackedState α c T)
    (d : BlockState α c.hiddenDim) (hps : ps.eval env = layerParamsEnv c n layer route)
    (hst : st.eval env = stateEnv c T (layerPre n) (c.attentionKindAt n) s) (hsv : sv.Holds c env)
    (hd : depth.Holds env d) :
    (layerFrag c T (Scalars.of c) n ps st sv depth).denote env =
      Env.append (layerOutEnv c T n ((layer.sequence.packedStep s (layer.seqInput d)).1,
          layer.channel.routerScores (layer.chanInput d (layer.sequence.packedStep s (layer.seqInput d)).2)))
        (.cons (fun k => d.afterSequence (layer.sequence.packedStep s (layer.seqInput d)).2 k +
          layer.channel.forwardRouted route
            (layer.chanInput d (layer.sequence.packedStep s (layer.seqInput d)).2) k) .nil) := by
  obtain ⟨hseq, hch, hre, hne⟩ := hl
  -- the parameter blocks: sequence retrieval, mixer, channel retrieval, channel mixer
  have hb1 := VarList.eval_splitSig_fst env ps hps
  have hb1' := VarList.eval_splitSig_snd env ps hps
  have hb2 := VarList.eval_splitSig_fst env _ hb1'
  have hb2' := VarList.eval_splitSig_snd env _ hb1'
  have hb3 := VarList.eval_splitSig_fst env _ hb2'
  have hb3' := VarList.eval_splitSig_snd env _ hb2'
  obtain ⟨hsq, hsg, hsγ⟩ := resVars_holds c env _ _ _ _ _ hb1
  obtain ⟨hcq, hcg, hcγ⟩ := resVars_holds c env _ _ _ _ _ hb3
  have hseqIn : layer.seqInput d = Seq.rmsNorm (Scalars.of c (α := α)).preNormEps
      (AttnRes.attendList (Scalars.of c (α := α)).retrievalEps layer.sequenceQuery d.sources)
      layer.sequenceNormScale := by
    simp only [BackboneLayer.seqInput, BlockState.retrieve, Scalars.of, hre, hne]
  simp only [layerFrag]
  refine Frag.denote_seq1_of (retrieveNormFrag_denote _ _ _ _ _ _ _ env layer.sequenceQuery
    layer.sequenceNormScale d.sources hsq hsg hsγ hd.sources) (fun Δ₁ ρ₁ seqIn env₁ hρ₁ hseqIn₁ => ?_)
  rw [← hseqIn] at hseqIn₁
  refine Frag.denote_seqSplit_of (mixerFrag_denote c T _ _ layer.sequence hseq _ _ _ _ env₁ s _
    ((VarList.eval_map hρ₁ _).trans hb2) ((VarList.eval_map hρ₁ st).trans hst) hseqIn₁
    ((hρ₁ _).trans hsv.scoreScale)) (fun Δ₂ ρ₂ mouts mseq env₂ hρ₂ hmouts hmseq => ?_)
  have hd₂ : (depth.map (fun v => ρ₂ (ρ₁ v))).Holds env₂ d :=
    hd.map (fun v => (hρ₂ _).trans (hρ₁ v))
  have hmseq' : env₂.get mseq.head = (layer.sequence.packedStep s (layer.seqInput d)).2 := by
    rw [VarList.head_eval, hmseq]; rfl
  refine Frag.denote_seq1_of (afterFrag_denote _ _ env₂ d hd₂) (fun Δ₃ ρ₃ after env₃ hρ₃ hafter => ?_)
  rw [hmseq'] at hafter
  refine Frag.denote_seq1_of (retrieveNormFrag_denote _ _ _ _ _ _ _ env₃ layer.channelQuery
    layer.channelNormScale (d.sourcesAfterSequence (layer.sequence.packedStep s (layer.seqInput d)).2)
    ((hρ₃ _).trans ((hρ₂ _).trans ((hρ₁ _).trans hcq)))
    ((hρ₃ _).trans ((hρ₂ _).trans ((hρ₁ _).trans hcg)))
    ((hρ₃ _).trans ((hρ₂ _).trans ((hρ₁ _).trans hcγ))) ?_) (fun Δ₄ ρ₄ chanIn env₄ hρ₄ hchanIn => ?_)
  · rw [valsOf_varsAppend, valsOf_varsMap hρ₃, hρ₃, hd₂.emb, hd₂.blocks]
    simp only [valsOf, hafter, BlockState.sourcesAfterSequence]
  have hchanIn' : env₄.get chanIn = layer.chanInput d (layer.sequence.packedStep s (layer.seqInput d)).2 := by
    rw [hchanIn]
    simp only [BackboneLayer.chanInput, BlockState.retrieveAfterSequence, BlockState.sourcesAfterSequence,
      Scalars.of, hre, hne]
  refine Frag.denote_seqSplit_of (channelFrag_denote c _ _ layer.channel hch route _ _ _ _ env₄ _
    ((VarList.eval_map (fun v => (hρ₄ _).trans ((hρ₃ _).trans ((hρ₂ _).trans (hρ₁ v)))) _).trans hb3')
    hchanIn' ((hρ₄ _).trans ((hρ₃ _).trans ((hρ₂ _).trans ((hρ₁ _).trans hsv.gateCap))))
    ((hρ₄ _).trans ((hρ₃ _).trans ((hρ₂ _).trans ((hρ₁ _).trans hsv.upCap))))) (fun Δ₅ ρ₅ couts cy env₅ hρ₅ hcouts hcy => ?_)
  have hcy' : env₅.get cy.head = layer.channel.forwardRouted route
      (layer.chanInput d (layer.sequence.packedStep s (layer.seqInput d)).2) := by
    rw [VarList.head_eval, hcy]; rfl
  simp only [Frag.denote_bind, Frag.denote_pure, VarList.eval_append, VarList.eval_appendSig,
    VarList.eval_cons, VarList.eval_nil, Env.get_here, eval_addTerm,
    eval_map_up (fun v => (hρ₅ _).trans ((hρ₄ _).trans (hρ₃ v))), eval_map_up (ρ := fun v => v) (envΓ := env₅)
      (fun _ => rfl), hmouts, hcouts, hρ₅, hρ₄, hafter, hcy']
  rfl

/-- **The final fragment computes the head** `readout`. -/
theorem finalFrag_denote (model : LanguageModel α c) (hre : model.retrievalEps = c.attnResEps.toScalar)
    (hne : model.normEps = c.finalNormEps.toScalar) {Γ : List Shape}
    (ps : VarList Γ (Signature.shapes (finalSig c))) (depth : DepthVars Γ c.hiddenDim) (env : Env α Γ)
    (d : BlockState α c.hiddenDim) (hps : ps.eval env = finalEnv c model) (hd : depth.Holds env d) :
    (finalFrag c (Scalars.of c) ps depth).denote env = .cons (model.readout d) .nil := by
  have hb1 := VarList.eval_splitSig_fst env ps hps
  have hb2 := VarList.eval_splitSig_snd env ps hps
  obtain ⟨hq, hg, hγ⟩ := resVars_holds c env _ _ _ _ _ hb1
  have hh : env.get (ps.splitSig (resSig c "" "final")).2.head = model.head := by
    rw [VarList.head_eval, hb2]; rfl
  simp only [finalFrag]
  refine Frag.denote_seq1_of (retrieveNormFrag_denote _ _ _ _ _ _ _ env model.finalQuery model.finalNormScale
    d.sources hq hg hγ hd.sources) (fun Δ ρ h env' hρ hh' => ?_)
  simp only [Frag.denote_bind, Frag.denote_pure, VarList.eval_cons, VarList.eval_nil, Env.get_here,
    Term.eval_op, Term.eval_var, Args.eval_cons, Args.eval_nil, PrimOp.eval_vecMatMul, hρ, hh, hh']
  simp only [LanguageModel.readout, Seq.memoFn_eq, Seq.vecMatMul_eq_core, hre, hne, Scalars.of,
    BlockState.retrieve]

/-- **Layers `n, …` then the head compute the packed layers and the readout**, by induction on
the number of layers. -/
theorem layersFrag_denote (model : LanguageModel α c) (hre : model.retrievalEps = c.attnResEps.toScalar)
    (hne : model.normEps = c.finalNormEps.toScalar)
    (routes : Nat → Fin c.activeExperts → Fin c.numRoutedExperts) {Γ₀ : List Shape} (sv₀ : ScalarVars Γ₀)
    (env₀ : Env α Γ₀) (hsv : sv₀.Holds c env₀) : (k n : Nat) → {Γ : List Shape} → (ρ₀ : Renaming Γ₀ Γ) →
    (ps : VarList Γ₀ (Signature.shapes (layersParamSig c n k))) →
    (st : VarList Γ₀ (Signature.shapes (layersStateSig c T n k))) → (depth : DepthVars Γ c.hiddenDim) →
    (env : Env α Γ) → (layers : List (BackboneLayer α c)) → (states : List (PackedState α c T)) →
    (d : BlockState α c.hiddenDim) → Renaming.Respects ρ₀ env₀ env →
    ps.eval env₀ = layersParamsEnv c model routes n k layers → st.eval env₀ = layersStateEnv c T n k states →
    layers.length = k → states.length = k → LanguageModel.LayersConform n layers → depth.Holds env d →
    (layersFrag c T (Scalars.of c) sv₀ n k ρ₀ ps st depth).denote env =
      .cons (model.readout (LanguageModel.packedLayers routes n layers states d).2)
        (layersOutEnv c T n k (LanguageModel.packedLayers routes n layers states d).1)
  | 0, n, _, ρ₀, ps, st, depth, env, layers, states, d, hρ₀, hps, _, hl, _, _, hd => by
    match layers, states, hl with
    | [], states, _ =>
      simp only [layersFrag]
      rw [finalFrag_denote c model hre hne _ depth env d ((VarList.eval_map hρ₀ ps).trans hps) hd]
      cases states <;> rfl
  | k + 1, n, _, ρ₀, ps, st, depth, env, layers, states, d, hρ₀, hps, hst, hl, hs, hc, hd => by
    match layers, states, hl, hs, hc with
    | layer :: layers, s :: states, hl, hs, hc =>
      simp only [List.length_cons, Nat.add_right_cancel_iff] at hl hs
      obtain ⟨hc₁, hc₂⟩ := hc
      simp only [layersParamsEnv] at hps
      simp only [layersStateEnv] at hst
      have hp1 := VarList.eval_splitSig_fst env₀ ps hps
      have hp2 := VarList.eval_splitSig_snd env₀ ps hps
      have hs1 := VarList.eval_splitSig_fst env₀ st hst
      have hs2 := VarList.eval_splitSig_snd env₀ st hst
      simp only [layersFrag]
      refine Frag.denote_seqSplit_of (layerFrag_denote c T n _ _ _ depth env layer hc₁ (routes n) s d
        ((VarList.eval_map hρ₀ _).trans hp1) ((VarList.eval_map hρ₀ _).trans hs1) (hsv.map c hρ₀) hd)
        (fun Δ ρ outs np env' hρ houts hnp => ?_)
      have hnp' := VarList.head_eval env' np
      rw [hnp] at hnp'
      have hd' := (hd.map hρ).commit c.attnResBlockSize np.head _ _ hnp'
      refine Frag.denote_seq_of (layersFrag_denote model hre hne routes sv₀ env₀ hsv k (n + 1) _ _ _ _ env' layers
        states _ (fun v => (hρ _).trans (hρ₀ v)) hp2 hs2 hl hs hc₂ hd') (fun Δ' ρ' rest env'' hρ' hrest => ?_)
      simp only [Frag.denote_pure, VarList.eval_cons, VarList.head_eval, hrest, VarList.eval_appendSig,
        VarList.tail_eval, VarList.eval_map hρ' outs, houts]
      rfl

/-- **The decoder graph computes the packed token step** (k3-spec §3 rung 03,
`graph_specFwd_eq_runSpec`): for every configuration and number `T` of past tokens, every
language model following the configuration, all staged routes, all `num_hidden_layers` packed
states and every embedding row, the program on the model's parameters for the routes and on the
packed states computes `LanguageModel.packedStep`: the logits, every layer's new packed state,
every MoE layer's router scores. -/
theorem program_eval (model : LanguageModel α c) (hm : model.Conforms)
    (routes : Nat → Fin c.activeExperts → Fin c.numRoutedExperts) (states : List (PackedState α c T))
    (hs : states.length = c.numLayers) (x : Tensor α [c.hiddenDim]) :
    (program c T (Scalars.of c)).eval (paramsEnv c model routes) (inputsEnv c T states x) =
      outputsEnv c T (model.packedStep routes states x) := by
  let env₀ := (paramsEnv c model routes).append (inputsEnv c T states x)
  have hall : (VarList.self (BaseCtx c T)).eval env₀ = env₀ := VarList.eval_self env₀
  have hps : (baseParams c T).eval env₀ = paramsEnv c model routes := VarList.eval_split_fst env₀ _ hall
  have his : (baseInputs c T).eval env₀ = inputsEnv c T states x := VarList.eval_split_snd env₀ _ hall
  have hsc := VarList.eval_splitSig_fst env₀ _ his
  have hst := VarList.eval_splitSig_snd env₀ _ his
  have h0 : env₀.get ((baseInputs c T).splitSig (scalarSig c)).1.head = x := by rw [VarList.head_eval, hsc]; rfl
  have h1 : env₀.get ((baseInputs c T).splitSig (scalarSig c)).1.tail.head = (c.gateCap : α) := by
    rw [VarList.head_eval, VarList.tail_eval, hsc]; rfl
  have h2 : env₀.get ((baseInputs c T).splitSig (scalarSig c)).1.tail.tail.head = (c.upCap : α) := by
    rw [VarList.head_eval, VarList.tail_eval, VarList.tail_eval, hsc]; rfl
  have h3 : env₀.get ((baseInputs c T).splitSig (scalarSig c)).1.tail.tail.tail.head = c.scoreScale := by
    rw [VarList.head_eval, VarList.tail_eval, VarList.tail_eval, VarList.tail_eval, hsc]; rfl
  simp only [program, Program.eval_ofFrag]
  refine (layersFrag_denote c T model hm.retrievalEps hm.normEps routes _ env₀ ⟨h1, h2, h3⟩ c.numLayers 1
    (fun v => v) _ _ _ env₀ model.layers states (BlockState.initial x) (fun _ => rfl) hps hst hm.length hs
    hm.layers ⟨h0, rfl, rfl, fun h => absurd rfl h⟩).trans ?_
  rfl

end Lemmas

end Decoder

end KimiK3
