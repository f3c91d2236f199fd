module

public import KimiK3.Exec.KDA
public import KimiK3.Exec.MLA
public import KimiK3.Exec.Channel
public import KimiK3.KimiLinear.Layer
public import KimiK3.KimiLinear.MLA
public import KimiK3.KimiLinear.MoE

/-!
# The executable Kimi Linear variant equals the reference (k3-spec §7)

For every `[Scalar α]`:
* the KDA layer: `retention_eq`, `prepareHead_eq` (head `h`'s inputs are `KimiLinear.prepare … h`),
  `output_eq` (the low-rank gated output), **`layerStep_eq`**, **`layerForward_eq`**
  (`KimiLinear.layerForward`); the head step, window and convolution are K3's (`Exec.KDA`);
* MLA: `headOutputsOf_eq`, `attendOf_eq`, **`step_eq`** (`KimiLinear.MLA.step`), **`forward_eq`**
  (`KimiLinear.MLA.forward`), `directQuery_eq`, **`stepDirect_eq`** (`KimiLinear.MLA.stepDirect`,
  `q_lora_rank = None`), **`forwardDirect_eq`** (its scan); entry, scores and caches are K3's
  (`Exec.GatedMLA`);
* MoE: `swiglu_eq`, `swigluForward_eq`, `routedOutput_eq`, `forward_eq` (any route whose entries
  are expert indices), `route_eq`, **`forwardAuto_eq`** (`KimiLinear.MoE.forwardAuto`); router
  and top-`k` are K3's (`Exec.Channel`).
-/

@[expose] public section

namespace KimiK3

namespace Exec

namespace KimiLinear

variable {α : Type} [Scalar α]

/-! ## The KDA layer -/

section Layer

variable {d : KimiK3.KDA.LayerDims} {r : Nat}

/-- The reference parameters of array-backed ones (dimensions `d` with gate rank `r`). -/
noncomputable def LayerParams.toSpec (p : LayerParams α d r) : KimiK3.KimiLinear.LayerParams α ⟨d, r⟩ :=
  ⟨p.queryProj.toTensor, p.keyProj.toTensor, p.valueProj.toTensor, p.queryConv.toTensor,
   p.keyConv.toTensor, p.valueConv.toTensor, p.decayDown.toTensor, p.decayUp.toTensor,
   p.decayBias.toTensor, p.decayLogRate.toTensor, p.betaProj.toTensor, p.gateDown.toTensor,
   p.gateUp.toTensor, p.outNormScale.toTensor, p.outputProj.toTensor, p.normEps, p.queryScale⟩

theorem softplus_eq (z : α) : softplus z = KimiK3.KimiLinear.softplus z := rfl

theorem retention_eq (logRate logit : α) :
    retention logRate logit = KimiK3.KimiLinear.retention logRate logit := rfl

/-- **Head `h`'s executable inputs are `KimiLinear.prepare … h`.** -/
theorem prepareHead_eq (p : LayerParams α d r) (l2Eps : α) (window : Arr α [d.convWidth, d.modelDim])
    (x : Arr α [d.modelDim]) (h : Fin d.heads) :
    (prepareHead p l2Eps (prepareAll p window x) x h.val).toSpec =
      KimiK3.KimiLinear.prepare p.toSpec l2Eps window.toTensor x.toTensor h := by
  simp only [prepareHead, prepareAll, KDA.Input.toSpec, KimiK3.KimiLinear.prepare, Seq.memoFn_eq,
    Seq.memo2_eq]
  congr 1
  · funext i
    simp only [Arr.toTensor_vec, LayerParams.toSpec]
    rw [← Arr.toTensor_apply1, Arr.toTensor_l2Normalize_seq]
    congr 2; funext j
    simp [KDA.silu_eq, ← KDA.projectConv_eq]
  · rw [Arr.toTensor_l2Normalize_seq]; congr 1; funext i
    simp [KDA.silu_eq, ← KDA.projectConv_eq, LayerParams.toSpec]
  · funext c
    simp [KDA.silu_eq, ← KDA.projectConv_eq, LayerParams.toSpec]
  · funext i
    simp [retention_eq, LayerParams.toSpec, Arr.vecMatMul, sumTo_eq]
  · simp [LayerParams.toSpec, sumTo_eq]

/-- **The executable low-rank gated output is `KimiLinear.output`.** -/
theorem output_eq (p : LayerParams α d r) (x : Arr α [d.modelDim]) (o : Arr α [d.heads, d.valueDim]) :
    (output p x o).toTensor = KimiK3.KimiLinear.output p.toSpec x.toTensor o.toTensor := by
  funext f
  simp only [output, KimiK3.KimiLinear.output, Seq.memoFn_eq, Seq.memo2_eq, Arr.toTensor_apply1,
    Arr.get_vec _ f.isLt, sumTo_eq, Seq.sum_eq]
  congr 1; funext h; congr 1; funext c
  rw [arrayGetD_arrayOfFn, if_pos h.isLt, ← Arr.toTensor_apply1, Arr.toTensor_rmsNorm_seq,
    Arr.toTensor_row]
  simp [LayerParams.toSpec, Arr.vecMatMul, sumTo_eq]

/-- **One executable Kimi Linear KDA layer token is `KimiLinear.layerStep`** (new state and
output). -/
theorem layerStep_eq (p : LayerParams α d r) (l2Eps : α) (s : KDA.LayerState α d) (x : Arr α [d.modelDim]) :
    ((layerStep p l2Eps s x).1.toSpec, (layerStep p l2Eps s x).2.toTensor) =
      KimiK3.KimiLinear.layerStep p.toSpec l2Eps s.toSpec x.toTensor := by
  have hres : ∀ h : Fin d.heads,
      arrayGetD (arrayOfFn d.heads (fun h => KDA.step (Arr.slice3 s.heads h)
        (prepareHead p l2Eps (prepareAll p (KDA.shiftWindow s.window x) x) x h)))
        h.val (Arr.fill _ 0, zeros _) =
      KDA.step (Arr.slice3 s.heads h.val)
        (prepareHead p l2Eps (prepareAll p (KDA.shiftWindow s.window x) x) x h.val) := by
    intro h; rw [arrayGetD_arrayOfFn, if_pos h.isLt]
  simp only [layerStep, KimiK3.KimiLinear.layerStep, KDA.LayerState.toSpec, Seq.memo2_eq, Seq.memoFn_eq]
  congr 1
  · congr 1
    · exact KDA.shiftWindow_eq _ _
    · funext h i c
      rw [Arr.toTensor_apply3, Arr.get_ten3 _ h.isLt i.isLt c.isLt, hres, ← Arr.toTensor_apply2,
        KDA.step_fst_eq, Arr.toTensor_slice3, prepareHead_eq, KDA.shiftWindow_eq]
  · rw [output_eq]
    congr 1
    funext h c
    rw [Arr.toTensor_apply2, Arr.get_mat _ h.isLt c.isLt, hres, ← Arr.toTensor_apply1,
      KDA.step_snd_eq, Arr.toTensor_slice3, prepareHead_eq, KDA.shiftWindow_eq]

/-- **The executable Kimi Linear KDA layer over a sequence is `KimiLinear.layerForward`.** -/
theorem layerForward_eq (p : LayerParams α d r) (l2Eps : α) (xs : List (Arr α [d.modelDim])) :
    listMap Arr.toTensor (layerForward p l2Eps xs) =
      KimiK3.KimiLinear.layerForward p.toSpec l2Eps (listMap Arr.toTensor xs) := by
  unfold layerForward KimiK3.KimiLinear.layerForward
  have h := scan_map (layerStep p l2Eps) (KimiK3.KimiLinear.layerStep p.toSpec l2Eps)
    KDA.LayerState.toSpec Arr.toTensor Arr.toTensor (fun s x => layerStep_eq p l2Eps s x)
    (KDA.LayerState.zero d) xs
  rw [KDA.LayerState.zero_toSpec, scan_eq_run (KimiK3.KimiLinear.layerStep p.toSpec l2Eps)] at h
  exact congrArg Prod.snd h

end Layer

/-! ## MLA -/

namespace MLA

variable {d : KimiK3.GatedMLA.Dims}

theorem headOutputsOf_eq (wf : (n : Nat) → Arr α [n] → Arr α [n])
    (wf' : (n : Nat) → Tensor α [n] → Tensor α [n]) (hwf : ∀ n v, (wf n v).toTensor = wf' n v.toTensor)
    (p : GatedMLA.Params α d) (cq : Arr α [d.queryLatentDim]) (scoreScale : α) (n : Nat)
    (latent : Arr α [n, d.kvLatentDim]) (shared : Arr α [n, d.sharedKeyDim]) :
    (headOutputsOf wf p cq scoreScale n latent shared).toTensor =
      KimiK3.KimiLinear.MLA.headOutputsOf wf' p.toSpec cq.toTensor scoreScale n latent.toTensor
        shared.toTensor := by
  funext h c
  simp only [headOutputsOf, KimiK3.KimiLinear.MLA.headOutputsOf, Seq.memoFn_eq, Arr.toTensor_apply2,
    Arr.get_mat _ h.isLt c.isLt, sumTo_eq, Seq.sum_eq]
  congr 1
  funext j
  rw [arrayGetD_arrayOfFn, if_pos h.isLt, arrayGetD_arrayOfFn, if_pos h.isLt,
    ← Arr.toTensor_apply1, hwf, GatedMLA.scores_eq, ← Arr.toTensor_apply2,
    Arr.toTensor_matMul, Arr.toTensor_slice3]
  simp [Tensor.matMul, Tensor.vecMatMul, GatedMLA.Params.toSpec]

theorem attendOf_eq (wf : (n : Nat) → Arr α [n] → Arr α [n])
    (wf' : (n : Nat) → Tensor α [n] → Tensor α [n]) (hwf : ∀ n v, (wf n v).toTensor = wf' n v.toTensor)
    (p : GatedMLA.Params α d) (cq : Arr α [d.queryLatentDim]) (scoreScale : α) (n : Nat)
    (latent : Arr α [n, d.kvLatentDim]) (shared : Arr α [n, d.sharedKeyDim]) :
    (attendOf wf p cq scoreScale n latent shared).toTensor =
      KimiK3.KimiLinear.MLA.attendOf wf' p.toSpec cq.toTensor scoreScale n latent.toTensor
        shared.toTensor := by
  funext f
  simp only [attendOf, KimiK3.KimiLinear.MLA.attendOf, Seq.memo2_eq, Arr.toTensor_apply1,
    Arr.get_vec _ f.isLt, sumTo_eq, Seq.sum_eq]
  congr 1; funext h; congr 1; funext c
  rw [← Arr.toTensor_apply2 (headOutputsOf wf p cq scoreScale n latent shared) h c,
    headOutputsOf_eq wf wf' hwf]
  simp [GatedMLA.Params.toSpec]

theorem appendEntry_eq (p : GatedMLA.Params α d) (cache : GatedMLA.Cache α d) (x : Arr α [d.modelDim]) :
    Seq.listAppend (GatedMLA.cacheToSpec cache) [KimiK3.GatedMLA.entry p.toSpec x.toTensor] =
      GatedMLA.cacheToSpec (listAppend cache [GatedMLA.entry p x]) := by
  unfold GatedMLA.cacheToSpec
  rw [listMap_append, ← listAppend_eq_seq]
  simp only [listMap, GatedMLA.entry_eq]

theorem listLen_cacheToSpec (cache : GatedMLA.Cache α d) :
    Seq.listLen (GatedMLA.cacheToSpec cache) = listLen cache := by
  rw [← listLen_eq_seq, GatedMLA.cacheToSpec, listLen_map]

/-- **One executable Kimi Linear MLA step is `KimiLinear.MLA.step`** (new cache and output). -/
theorem step_eq (p : GatedMLA.Params α d) (scoreScale : α) (cache : GatedMLA.Cache α d)
    (x : Arr α [d.modelDim]) :
    (GatedMLA.cacheToSpec (step p scoreScale cache x).1, (step p scoreScale cache x).2.toTensor) =
      KimiK3.KimiLinear.MLA.step p.toSpec scoreScale (GatedMLA.cacheToSpec cache) x.toTensor := by
  simp only [step, KimiK3.KimiLinear.MLA.step, KimiK3.KimiLinear.MLA.attend]
  rw [appendEntry_eq, listLen_cacheToSpec, KimiK3.KimiLinear.MLA.attendWith_eq_attendOf,
    attendOf_eq _ _ (fun _ v => Arr.toTensor_softmax_seq v), GatedMLA.queryLatent_eq,
    GatedMLA.packLatent_eq, GatedMLA.packShared_eq]

/-- **The executable Kimi Linear MLA layer over a sequence is `KimiLinear.MLA.forward`.** -/
theorem forward_eq (p : GatedMLA.Params α d) (scoreScale : α) (xs : List (Arr α [d.modelDim])) :
    listMap Arr.toTensor (forward p scoreScale xs) =
      KimiK3.KimiLinear.MLA.forward p.toSpec scoreScale (listMap Arr.toTensor xs) := by
  unfold forward KimiK3.KimiLinear.MLA.forward
  have h := scan_map (step p scoreScale) (KimiK3.KimiLinear.MLA.step p.toSpec scoreScale)
    GatedMLA.cacheToSpec Arr.toTensor Arr.toTensor (fun s x => step_eq p scoreScale s x) [] xs
  rw [scan_eq_run (KimiK3.KimiLinear.MLA.step p.toSpec scoreScale)] at h
  exact congrArg Prod.snd h

theorem directQuery_eq (hq : d.queryLatentDim = d.modelDim) (x : Arr α [d.modelDim]) :
    (directQuery x).toTensor = KimiK3.KimiLinear.MLA.directQuery hq x.toTensor := by
  funext i
  simp [directQuery, KimiK3.KimiLinear.MLA.directQuery, Arr.toTensor_apply1, Arr.get_vec _ i.isLt]

/-- **One executable direct-query MLA step is `KimiLinear.MLA.stepDirect`** (`q_lora_rank =
None`; new cache and output). -/
theorem stepDirect_eq (p : GatedMLA.Params α d) (hq : d.queryLatentDim = d.modelDim) (scoreScale : α)
    (cache : GatedMLA.Cache α d) (x : Arr α [d.modelDim]) :
    (GatedMLA.cacheToSpec (stepDirect p scoreScale cache x).1, (stepDirect p scoreScale cache x).2.toTensor) =
      KimiK3.KimiLinear.MLA.stepDirect p.toSpec hq scoreScale (GatedMLA.cacheToSpec cache) x.toTensor := by
  simp only [stepDirect, KimiK3.KimiLinear.MLA.stepDirect]
  rw [appendEntry_eq, listLen_cacheToSpec, attendOf_eq _ _ (fun _ v => Arr.toTensor_softmax_seq v),
    directQuery_eq hq, GatedMLA.packLatent_eq, GatedMLA.packShared_eq]

/-- **The executable direct-query MLA layer over a sequence is the scan of
`KimiLinear.MLA.stepDirect`** from the empty cache. -/
theorem forwardDirect_eq (p : GatedMLA.Params α d) (hq : d.queryLatentDim = d.modelDim) (scoreScale : α)
    (xs : List (Arr α [d.modelDim])) :
    listMap Arr.toTensor (forwardDirect p scoreScale xs) =
      (CausalScan.run (KimiK3.KimiLinear.MLA.stepDirect p.toSpec hq scoreScale) []
        (listMap Arr.toTensor xs)).2 := by
  unfold forwardDirect
  have h := scan_map (stepDirect p scoreScale) (KimiK3.KimiLinear.MLA.stepDirect p.toSpec hq scoreScale)
    GatedMLA.cacheToSpec Arr.toTensor Arr.toTensor (fun s x => stepDirect_eq p hq scoreScale s x) [] xs
  rw [scan_eq_run (KimiK3.KimiLinear.MLA.stepDirect p.toSpec hq scoreScale)] at h
  exact congrArg Prod.snd h

end MLA

/-! ## The MoE block -/

section MoE

theorem swiglu_eq (gate up : α) : swiglu gate up = KimiK3.KimiLinear.swiglu gate up := rfl

/-- **The executable SwiGLU expert is `KimiLinear.swigluForward`.** -/
theorem swigluForward_eq {d h o : Nat} (e : Expert α d h o) (x : Arr α [d]) :
    (swigluForward e x).toTensor = KimiK3.KimiLinear.swigluForward e.toSpec x.toTensor := by
  unfold swigluForward KimiK3.KimiLinear.swigluForward
  rw [Arr.toTensor_vecMatMul]
  congr 1
  funext j
  simp [Arr.vecMatMul, Tensor.vecMatMul, sumTo_eq, swiglu_eq, Expert.toSpec]

variable {d h hs E : Nat}

/-- The reference block of an array-backed one. -/
noncomputable def MoE.toSpec (moe : MoE α d h hs E) : KimiK3.KimiLinear.MoE α d h hs E :=
  ⟨moe.shared.toSpec, moe.routerWeight.toTensor, moe.routerBias.toTensor, moe.routed.toSpec,
   moe.routedScale⟩

theorem MoE.routedOutput_eq (moe : MoE α d h hs E) (k : Nat) (route : Array Nat)
    (hr : ∀ i : Fin k, arrayGetD route i.val 0 < E) (x : Arr α [d]) :
    (moe.routedOutput k route x).toTensor = moe.toSpec.routedOutput (routeSlot route hr) x.toTensor := by
  funext c
  simp only [MoE.routedOutput, KimiK3.KimiLinear.MoE.routedOutput, KimiK3.KimiLinear.MoE.routedWeights,
    KimiK3.KimiLinear.MoE.rawScores, Arr.toTensor_apply1, Arr.get_vec _ c.isLt, sumTo_eq]
  congr 1
  funext i
  rw [arrayGetD_arrayOfFn, if_pos i.isLt,
    ← Arr.toTensor_apply1 (mixtureWeights k (routerScores moe.routerWeight x) route) i,
    mixtureWeights_eq _ _ hr, routerScores_eq,
    ← Arr.toTensor_apply1 (swigluForward (moe.routed.get (arrayGetD route i.val 0)) x) c,
    swigluForward_eq]
  rfl

/-- **The block for a given route** is `KimiLinear.MoE.forward` at that route. -/
theorem MoE.forward_eq (moe : MoE α d h hs E) (k : Nat) (route : Array Nat)
    (hr : ∀ i : Fin k, arrayGetD route i.val 0 < E) (x : Arr α [d]) :
    (moe.forward k route x).toTensor = moe.toSpec.forward (routeSlot route hr) x.toTensor := by
  funext c
  simp only [MoE.forward, KimiK3.KimiLinear.MoE.forward, Arr.toTensor_apply1, Arr.get_vec _ c.isLt]
  rw [← Arr.toTensor_apply1, MoE.routedOutput_eq _ _ _ hr, ← Arr.toTensor_apply1, swigluForward_eq]
  rfl

theorem MoE.route_lt (moe : MoE α d h hs E) {k : Nat} (hk : k ≤ E) (x : Arr α [d]) (i : Fin k) :
    arrayGetD (moe.route k x) i.val 0 < E :=
  topK_lt _ hk i

/-- **The executable route is the block's route** `KimiLinear.MoE.route`. -/
theorem MoE.route_eq (moe : MoE α d h hs E) {k : Nat} (hk : k ≤ E) (x : Arr α [d]) :
    routeSlot (moe.route k x) (moe.route_lt hk x) = moe.toSpec.route hk x.toTensor := by
  unfold MoE.route KimiK3.KimiLinear.MoE.route KimiK3.KimiLinear.MoE.rawScores Router.route
  rw [routeSlot_topK, adjustedScores_eq, routerScores_eq]
  rfl

/-- **The executable block with its own routing is `KimiLinear.MoE.forwardAuto`.** -/
theorem MoE.forwardAuto_eq (moe : MoE α d h hs E) {k : Nat} (hk : k ≤ E) (x : Arr α [d]) :
    (moe.forwardAuto k x).toTensor = moe.toSpec.forwardAuto hk x.toTensor := by
  unfold MoE.forwardAuto KimiK3.KimiLinear.MoE.forwardAuto
  rw [MoE.forward_eq moe k _ (moe.route_lt hk x), MoE.route_eq]

end MoE

end KimiLinear

end Exec

end KimiK3
