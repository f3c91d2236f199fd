module

public import KimiK3.Exec.KDA
public import KimiK3.Exec.MLA
public import KimiK3.Exec.Channel
public import KimiK3.KimiLinear.Layer
public import KimiK3.KimiLinear.MLA
public import KimiK3.KimiLinear.MoE
public import KimiK3.KimiLinear.Decoder
public import KimiK3.Exec.Model

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
  and top-`k` are K3's (`Exec.Channel`);
* the decoder layer and the model (`KimiLinear/Decoder.lean`), at `m.execDims` for a reference
  `m : KimiLinear.Dims`: `Mixer.initialState_eq`, **`Mixer.step_eq`**, **`Channel.forward_eq`**,
  `DecoderLayer.mix_eq`, `mlp_eq`, **`DecoderLayer.step_eq`**, **`DecoderLayer.forward_eq`**,
  `Model.initialState_eq`, `readout_eq`, `layersToken_eq`, **`Model.step_eq`**, **`Model.run_eq`**,
  **`Model.logits_eq`** (`KimiLinear.Model.logits`); the loop over layers is K3's (`scanLayers_map`).
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

/-! ## The decoder layer and the model -/

section Decoder

/-- The widths and counts of a Kimi Linear model that the executable model reads (the same
fields, in the same order; reducible, so that widths such as `m.execDims.hidden` are `m.hidden` to
`simp` and `rw`). -/
abbrev _root_.KimiK3.KimiLinear.Dims.execDims (m : KimiK3.KimiLinear.Dims) : ModelDims :=
  ⟨m.vocab, m.hidden, m.kdaHeads, m.kdaKey, m.kdaValue, m.kdaConv, m.kdaRank, m.gateRank, m.mlaHeads,
   m.queryLatent, m.kvLatent, m.contentKey, m.sharedKey, m.mlaValue, m.denseHidden, m.expertHidden,
   m.sharedHidden, m.numRouted, m.active⟩

variable {m : KimiK3.KimiLinear.Dims}

/-- The reference mixer of an array-backed one. -/
noncomputable def Mixer.toSpec : Mixer α m.execDims → KimiK3.KimiLinear.Mixer α m
  | .kda p l2Eps => .kda p.toSpec l2Eps
  | .mla p scoreScale => .mla p.toSpec scoreScale
  | .mlaDirect p hq scoreScale => .mlaDirect p.toSpec hq scoreScale

/-- The reference mixer state of an array-backed one. -/
noncomputable def MixerState.toSpec : MixerState α m.execDims → KimiK3.KimiLinear.MixerState α m
  | .kda s => .kda s.toSpec
  | .mla cache => .mla (GatedMLA.cacheToSpec cache)

/-- The reference MLP of an array-backed one. -/
noncomputable def Channel.toSpec : Channel α m.execDims → KimiK3.KimiLinear.Channel α m
  | .dense e => .dense e.toSpec
  | .moe block hActive => .moe block.toSpec hActive

theorem Mixer.initialState_eq (mixer : Mixer α m.execDims) :
    mixer.initialState.toSpec = mixer.toSpec.initialState := by
  cases mixer with
  | kda p l2Eps =>
    simp only [Mixer.initialState, Mixer.toSpec, KimiK3.KimiLinear.Mixer.initialState, MixerState.toSpec,
      KDA.LayerState.zero_toSpec]
    rfl
  | mla p scoreScale => rfl
  | mlaDirect p hq scoreScale => rfl

/-- **One executable mixer step is `KimiLinear.Mixer.step`** (KDA `layerStep`, MLA `step` or
`stepDirect`). -/
theorem Mixer.step_eq (mixer : Mixer α m.execDims) (s : MixerState α m.execDims) (x : Arr α [m.hidden]) :
    ((mixer.step s x).1.toSpec, (mixer.step s x).2.toTensor) = mixer.toSpec.step s.toSpec x.toTensor := by
  cases mixer with
  | kda p l2Eps =>
    cases s with
    | kda st =>
      exact congrArg (fun r => (KimiK3.KimiLinear.MixerState.kda (m := m) r.1, r.2)) (layerStep_eq p l2Eps st x)
    | mla cache =>
      have h := layerStep_eq p l2Eps (KDA.LayerState.zero m.execDims.kda) x
      rw [KDA.LayerState.zero_toSpec] at h
      exact congrArg (fun r => (KimiK3.KimiLinear.MixerState.kda (m := m) r.1, r.2)) h
  | mla p scoreScale =>
    cases s with
    | kda st =>
      exact congrArg (fun r => (KimiK3.KimiLinear.MixerState.mla (m := m) r.1, r.2)) (MLA.step_eq p scoreScale [] x)
    | mla cache =>
      exact congrArg (fun r => (KimiK3.KimiLinear.MixerState.mla (m := m) r.1, r.2)) (MLA.step_eq p scoreScale cache x)
  | mlaDirect p hq scoreScale =>
    cases s with
    | kda st =>
      exact congrArg (fun r => (KimiK3.KimiLinear.MixerState.mla (m := m) r.1, r.2))
        (MLA.stepDirect_eq p hq scoreScale [] x)
    | mla cache =>
      exact congrArg (fun r => (KimiK3.KimiLinear.MixerState.mla (m := m) r.1, r.2))
        (MLA.stepDirect_eq p hq scoreScale cache x)

/-- **The executable MLP is `KimiLinear.Channel.forward`** (dense SwiGLU or the MoE block). -/
theorem Channel.forward_eq (channel : Channel α m.execDims) (x : Arr α [m.hidden]) :
    (channel.forward x).toTensor = channel.toSpec.forward x.toTensor := by
  cases channel with
  | dense e => exact swigluForward_eq e x
  | moe block hActive => exact MoE.forwardAuto_eq block hActive x

/-- The reference decoder layer of an array-backed one. -/
noncomputable def DecoderLayer.toSpec (layer : DecoderLayer α m.execDims) : KimiK3.KimiLinear.DecoderLayer α m :=
  ⟨layer.mixer.toSpec, layer.channel.toSpec, layer.inputNormScale.toTensor, layer.postNormScale.toTensor,
   layer.normEps⟩

namespace DecoderLayer

theorem mix_eq (layer : DecoderLayer α m.execDims) (s : MixerState α m.execDims) (x : Arr α [m.hidden]) :
    ((layer.mix s x).1.toSpec, (layer.mix s x).2.toTensor) = layer.toSpec.mix s.toSpec x.toTensor := by
  have h := Mixer.step_eq layer.mixer s (Arr.rmsNorm layer.normEps x layer.inputNormScale)
  rw [Arr.toTensor_rmsNorm_seq] at h
  simp only [mix, KimiK3.KimiLinear.DecoderLayer.mix, Seq.memoFn_eq]
  refine Prod.ext (congrArg Prod.fst h :) ?_
  funext i
  have h2 := congrFun (congrArg Prod.snd h) i
  simp only [Arr.toTensor_apply1, Arr.get_vec _ i.isLt] at h2 ⊢
  exact congrArg (x.get i.val + ·) h2

theorem mlp_eq (layer : DecoderLayer α m.execDims) (h : Arr α [m.hidden]) :
    (layer.mlp h).toTensor = layer.toSpec.mlp h.toTensor := by
  funext i
  have hc := congrFun (Channel.forward_eq layer.channel (Arr.rmsNorm layer.normEps h layer.postNormScale)) i
  rw [Arr.toTensor_rmsNorm_seq] at hc
  simp only [mlp, KimiK3.KimiLinear.DecoderLayer.mlp, Seq.memoFn_eq, Arr.toTensor_apply1,
    Arr.get_vec _ i.isLt] at hc ⊢
  exact congrArg (h.get i.val + ·) hc

/-- **One executable decoder-layer token is `KimiLinear.DecoderLayer.step`** (mixer state and
output). -/
theorem step_eq (layer : DecoderLayer α m.execDims) (s : MixerState α m.execDims) (x : Arr α [m.hidden]) :
    ((layer.step s x).1.toSpec, (layer.step s x).2.toTensor) = layer.toSpec.step s.toSpec x.toTensor := by
  have h := mix_eq layer s x
  refine Prod.ext (congrArg Prod.fst h :) ?_
  show (layer.mlp (layer.mix s x).2).toTensor = layer.toSpec.mlp (layer.toSpec.mix s.toSpec x.toTensor).2
  rw [mlp_eq, ← congrArg Prod.snd h]

/-- **The executable decoder layer over a sequence is `KimiLinear.DecoderLayer.forward`.** -/
theorem forward_eq (layer : DecoderLayer α m.execDims) (xs : List (Arr α [m.hidden])) :
    listMap Arr.toTensor (layer.forward xs) = layer.toSpec.forward (listMap Arr.toTensor xs) := by
  unfold forward KimiK3.KimiLinear.DecoderLayer.forward
  have h := scan_map layer.step layer.toSpec.step MixerState.toSpec Arr.toTensor Arr.toTensor
    (fun s x => step_eq layer s x) layer.mixer.initialState xs
  rw [Mixer.initialState_eq, scan_eq_run layer.toSpec.step] at h
  exact congrArg Prod.snd h

end DecoderLayer

/-- The reference model of an array-backed one. -/
noncomputable def Model.toSpec (model : Model α m.execDims) : KimiK3.KimiLinear.Model α m :=
  ⟨model.embedding.toTensor, listMap DecoderLayer.toSpec model.layers, model.finalNormScale.toTensor,
   model.head.toTensor, model.normEps⟩

/-- The reference model state of an array-backed one. -/
noncomputable def Model.stateToSpec (states : Model.State α m.execDims) : KimiK3.KimiLinear.Model.State α m :=
  listMap MixerState.toSpec states

namespace Model

theorem initialState_eq (model : Model α m.execDims) :
    stateToSpec model.initialState = model.toSpec.initialState := by
  simp only [initialState, KimiK3.KimiLinear.Model.initialState, stateToSpec, toSpec, listMap_eq,
    ModelList.map_eq, List.map_map]
  congr 1
  funext layer
  exact Mixer.initialState_eq layer.mixer

theorem readout_eq (model : Model α m.execDims) (x : Arr α [m.hidden]) :
    (model.readout x).toTensor = model.toSpec.readout x.toTensor := by
  simp only [readout, KimiK3.KimiLinear.Model.readout, Seq.memoFn_eq, Arr.toTensor_vecMatMul_seq,
    Arr.toTensor_rmsNorm_seq]
  rfl

theorem layersToken_eq (model : Model α m.execDims) (states : State α m.execDims) (x : Arr α [m.hidden]) :
    ((model.layersToken states x).1.toTensor, stateToSpec (model.layersToken states x).2) =
      model.toSpec.layersToken (stateToSpec states) x.toTensor :=
  scanLayers_map _ _ DecoderLayer.toSpec MixerState.toSpec Arr.toTensor
    (fun layer s x => DecoderLayer.step_eq layer s x) model.layers states x

/-- **One executable token step is `KimiLinear.Model.step`** (new state and logits). -/
theorem step_eq (model : Model α m.execDims) (states : State α m.execDims) (token : Fin m.vocab) :
    (stateToSpec (model.step states token.val).1, (model.step states token.val).2.toTensor) =
      model.toSpec.step (stateToSpec states) token := by
  have h := layersToken_eq model states (Arr.row model.embedding token.val)
  rw [Arr.toTensor_row] at h
  refine Prod.ext (congrArg Prod.snd h :) ?_
  show (model.readout (model.layersToken states (Arr.row model.embedding token.val)).1).toTensor =
    model.toSpec.readout (model.toSpec.layersToken (stateToSpec states) (model.embedding.toTensor token)).1
  rw [readout_eq, ← congrArg Prod.fst h]

/-- **Executable token-by-token evaluation is `KimiLinear.Model.run`**: the final state and the
logits of every token. -/
theorem run_eq (model : Model α m.execDims) (states : State α m.execDims) (tokens : List (Fin m.vocab)) :
    (stateToSpec (model.run states (listMap Fin.val tokens)).1,
      listMap Arr.toTensor (model.run states (listMap Fin.val tokens)).2) =
      model.toSpec.run (stateToSpec states) tokens := by
  unfold run KimiK3.KimiLinear.Model.run
  rw [scan_map_inputs model.step model.toSpec.step stateToSpec Fin.val Arr.toTensor
    (fun s t => step_eq model s t), scan_eq_run]

/-- **The executable prompt logits are `KimiLinear.Model.logits`.** -/
theorem logits_eq (model : Model α m.execDims) (tokens : List (Fin m.vocab)) :
    listMap Arr.toTensor (model.logits (listMap Fin.val tokens)) = model.toSpec.logits tokens := by
  unfold logits KimiK3.KimiLinear.Model.logits
  rw [← initialState_eq]
  exact congrArg Prod.snd (run_eq model model.initialState tokens)

end Model

end Decoder

end KimiLinear

end Exec

end KimiK3
