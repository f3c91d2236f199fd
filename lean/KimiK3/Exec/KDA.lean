module

public import KimiK3.Exec.Ops

/-!
# The executable KDA equals the reference (k3-spec §2.2, report Eq. 1–6)

For every `[Scalar α]`:
* one head: `Exec.KDA.update_eq`, `read_eq`, `step_eq` (state and readout), `run_eq` (the scan);
* the layer: `shiftWindow_eq`, `projectConv_eq`, `prepareHead_eq` (head `h`'s inputs are
  `KDA.prepare … h`), `output_eq`, **`layerStep_eq`** (new state and output of
  `KDA.layerStep`), `LayerState.zero_toSpec`, **`layerForward_eq`**.
-/

@[expose] public section

namespace KimiK3

namespace Exec

namespace KDA

variable {α : Type} [Scalar α]

/-! ## One head -/

section Head

variable {K V : Nat}

/-- The reference input of an array-backed one. -/
noncomputable def Input.toSpec (x : Input α K V) : KimiK3.KDA.Input α K V :=
  ⟨x.query.toTensor, x.key.toTensor, x.value.toTensor, x.retention.toTensor, x.writeStrength⟩

theorem update_eq (S : Arr α [K, V]) (x : Input α K V) :
    (update S x).toTensor = KimiK3.KDA.update S.toTensor x.toSpec := by
  funext r c
  simp [update, KimiK3.KDA.update, KimiK3.KDA.decay, KimiK3.KDA.correction, Input.toSpec, sumTo_eq]

theorem read_eq (S : Arr α [K, V]) (q : Arr α [K]) :
    (read S q).toTensor = KimiK3.KDA.read S.toTensor q.toTensor :=
  Arr.toTensor_vecMatMul_seq q S

theorem step_fst_eq (S : Arr α [K, V]) (x : Input α K V) :
    (step S x).1.toTensor = (KimiK3.KDA.step S.toTensor x.toSpec).1 := by
  simp only [step, KimiK3.KDA.step, Seq.memo2_eq, update_eq]

theorem step_snd_eq (S : Arr α [K, V]) (x : Input α K V) :
    (step S x).2.toTensor = (KimiK3.KDA.step S.toTensor x.toSpec).2 := by
  simp only [step, KimiK3.KDA.step, Seq.memo2_eq, read_eq, update_eq]
  rfl

/-- **One executable KDA head step is `KDA.step`** (report Eq. 1). -/
theorem step_eq (S : Arr α [K, V]) (x : Input α K V) :
    ((step S x).1.toTensor, (step S x).2.toTensor) = KimiK3.KDA.step S.toTensor x.toSpec := by
  rw [step_fst_eq, step_snd_eq]

/-- **The executable scan is the KDA recurrence** `CausalScan.run KDA.step`. -/
theorem run_eq (S : Arr α [K, V]) (xs : List (Input α K V)) :
    ((run S xs).1.toTensor, listMap Arr.toTensor (run S xs).2) =
      CausalScan.run KimiK3.KDA.step S.toTensor (listMap Input.toSpec xs) := by
  unfold run
  rw [scan_map step KimiK3.KDA.step Arr.toTensor Input.toSpec Arr.toTensor (fun S x => step_eq S x),
    scan_eq_run]

end Head

/-! ## The layer -/

section Layer

variable {d : KimiK3.KDA.LayerDims}

/-- The reference parameters of array-backed ones. -/
noncomputable def LayerParams.toSpec (p : LayerParams α d) : KimiK3.KDA.LayerParams α d :=
  ⟨p.queryProj.toTensor, p.keyProj.toTensor, p.valueProj.toTensor, p.queryConv.toTensor,
   p.keyConv.toTensor, p.valueConv.toTensor, p.decayDown.toTensor, p.decayUp.toTensor,
   p.decayBias.toTensor, p.decayLogScale.toTensor, p.betaProj.toTensor, p.gateWeight.toTensor,
   p.outNormScale.toTensor, p.outputProj.toTensor, p.normEps, p.queryScale⟩

/-- The reference state of an array-backed one. -/
noncomputable def LayerState.toSpec (s : LayerState α d) : KimiK3.KDA.LayerState α d :=
  ⟨s.window.toTensor, s.heads.toTensor⟩

theorem logDecay_eq (logFloor logScale logit : α) :
    logDecay logFloor logScale logit = KimiK3.KDA.logDecay logFloor logScale logit := rfl

theorem retention_eq (logFloor logScale logit : α) :
    retention logFloor logScale logit = KimiK3.KDA.retention logFloor logScale logit := rfl

theorem silu_eq (x : α) : silu x = Seq.silu x := rfl

theorem LayerState.zero_toSpec (d : KimiK3.KDA.LayerDims) :
    (LayerState.zero (α := α) d).toSpec = KimiK3.KDA.LayerState.zero d := by
  simp only [LayerState.zero, LayerState.toSpec, KimiK3.KDA.LayerState.zero, Arr.toTensor_fill]
  rfl

theorem shiftWindow_eq (window : Arr α [d.convWidth, d.modelDim]) (x : Arr α [d.modelDim]) :
    (shiftWindow window x).toTensor = KimiK3.KDA.shiftWindow window.toTensor x.toTensor := by
  funext t m
  simp only [shiftWindow, KimiK3.KDA.shiftWindow, Arr.toTensor_apply2, Arr.get_mat _ t.isLt m.isLt]
  by_cases h : t.val + 1 < d.convWidth
  · simp [h]
  · simp [h]

theorem projectConv_eq {n : Nat} (window : Arr α [d.convWidth, d.modelDim])
    (w : Arr α [d.modelDim, d.heads, n]) (k : Arr α [d.convWidth, d.heads, n]) :
    (projectConv window w k).toTensor = KimiK3.KDA.projectConv window.toTensor w.toTensor k.toTensor := by
  funext h i
  simp [projectConv, KimiK3.KDA.projectConv, sumTo_eq]

/-- **Head `h`'s executable inputs are `KDA.prepare … h`.** -/
theorem prepareHead_eq (p : LayerParams α d) (logFloor l2Eps : α)
    (window : Arr α [d.convWidth, d.modelDim]) (x : Arr α [d.modelDim]) (h : Fin d.heads) :
    (prepareHead p logFloor l2Eps (prepareAll p window x) x h.val).toSpec =
      KimiK3.KDA.prepare p.toSpec logFloor l2Eps window.toTensor x.toTensor h := by
  simp only [prepareHead, prepareAll, Input.toSpec, KimiK3.KDA.prepare, Seq.memoFn_eq, Seq.memo2_eq]
  congr 1
  · funext i
    simp only [Arr.toTensor_vec, LayerParams.toSpec]
    rw [← Arr.toTensor_apply1, Arr.toTensor_l2Normalize_seq]
    congr 2; funext j
    simp [silu_eq, ← projectConv_eq]
  · rw [Arr.toTensor_l2Normalize_seq]; congr 1; funext i
    simp [silu_eq, ← projectConv_eq, LayerParams.toSpec]
  · funext c
    simp [silu_eq, ← projectConv_eq, LayerParams.toSpec]
  · funext i
    simp [retention_eq, LayerParams.toSpec, Arr.vecMatMul, sumTo_eq]
  · simp [LayerParams.toSpec, sumTo_eq]

theorem output_eq (p : LayerParams α d) (x : Arr α [d.modelDim]) (o : Arr α [d.heads, d.valueDim]) :
    (output p x o).toTensor = KimiK3.KDA.output p.toSpec x.toTensor o.toTensor := by
  funext f
  simp only [output, KimiK3.KDA.output, Seq.memo2_eq, Arr.toTensor_apply1, Arr.get_vec _ f.isLt,
    sumTo_eq, Seq.sum_eq]
  congr 1; funext h; congr 1; funext c
  rw [arrayGetD_arrayOfFn, if_pos h.isLt, ← Arr.toTensor_apply1, Arr.toTensor_rmsNorm_seq,
    Arr.toTensor_row]
  simp [LayerParams.toSpec]

/-- **One executable KDA layer token is `KDA.layerStep`** (new state and output). -/
theorem layerStep_eq (p : LayerParams α d) (logFloor l2Eps : α) (s : LayerState α d) (x : Arr α [d.modelDim]) :
    ((layerStep p logFloor l2Eps s x).1.toSpec, (layerStep p logFloor l2Eps s x).2.toTensor) =
      KimiK3.KDA.layerStep p.toSpec logFloor l2Eps s.toSpec x.toTensor := by
  have hres : ∀ h : Fin d.heads,
      arrayGetD (arrayOfFn d.heads (fun h => step (Arr.slice3 s.heads h)
        (prepareHead p logFloor l2Eps (prepareAll p (shiftWindow s.window x) x) x h)))
        h.val (Arr.fill _ 0, zeros _) =
      step (Arr.slice3 s.heads h.val)
        (prepareHead p logFloor l2Eps (prepareAll p (shiftWindow s.window x) x) x h.val) := by
    intro h; rw [arrayGetD_arrayOfFn, if_pos h.isLt]
  simp only [layerStep, KimiK3.KDA.layerStep, LayerState.toSpec, Seq.memo2_eq, Seq.memoFn_eq]
  congr 1
  · congr 1
    · exact shiftWindow_eq _ _
    · funext h r c
      rw [Arr.toTensor_apply3, Arr.get_ten3 _ h.isLt r.isLt c.isLt, hres, ← Arr.toTensor_apply2,
        step_fst_eq, Arr.toTensor_slice3, prepareHead_eq, shiftWindow_eq]
  · rw [output_eq]
    congr 1
    funext h c
    rw [Arr.toTensor_apply2, Arr.get_mat _ h.isLt c.isLt, hres, ← Arr.toTensor_apply1,
      step_snd_eq, Arr.toTensor_slice3, prepareHead_eq, shiftWindow_eq]

/-- **The executable KDA layer over a sequence is `KDA.layerForward`.** -/
theorem layerForward_eq (p : LayerParams α d) (logFloor l2Eps : α) (xs : List (Arr α [d.modelDim])) :
    listMap Arr.toTensor (layerForward p logFloor l2Eps xs) =
      KimiK3.KDA.layerForward p.toSpec logFloor l2Eps (listMap Arr.toTensor xs) := by
  unfold layerForward KimiK3.KDA.layerForward
  have h := scan_map (layerStep p logFloor l2Eps) (KimiK3.KDA.layerStep p.toSpec logFloor l2Eps)
    LayerState.toSpec Arr.toTensor Arr.toTensor (fun s x => layerStep_eq p logFloor l2Eps s x)
    (LayerState.zero d) xs
  rw [LayerState.zero_toSpec, scan_eq_run (KimiK3.KDA.layerStep p.toSpec logFloor l2Eps)] at h
  exact congrArg Prod.snd h

end Layer

end KDA

end Exec

end KimiK3
