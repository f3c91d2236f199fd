module

public import KimiK3.Sequence.KDAPacked
public import KimiK3.Sequence.MLA

/-!
# The packed Gated MLA step graph denotes the packed step (k3-spec §2.3, Eq. 7)

`GatedMLA.stepModel` (defined in `Graphs.lean`) is the typed graph of one packed MLA step.
Proved: `stepModel_specFwd` — for every scalar model it computes `GatedMLA.stepPacked` (both new
caches and the output); combined with the list↔packed bridge `stepPacked_pack`, the graph run
on the packed list cache computes the list step `GatedMLA.step` (`stepModel_specFwd_pack`).
Also: the kernel's softmax/RMSNorm/`vecMatMul`/`appendRow` equal `Core`'s
(`Seq.softmax_eq_core`, `Seq.rmsNorm_eq_core`, `Seq.vecMatMul_eq_core`, `appendRow_eq_concat0`).
-/

@[expose] public section

namespace KimiK3

namespace GatedMLA

variable {α : Type}

section Eq

variable [Scalar α]

theorem Seq.maxFrom_eq (acc : α) (n : Nat) (f : Fin n → α) : Seq.maxFrom acc n f = finMaxFrom acc n f := by
  induction n generalizing acc with
  | zero => rfl
  | succ n ih => simp only [Seq.maxFrom, finMaxFrom, ih]

theorem Seq.softmax_eq_core {n : Nat} (x : Tensor α [n]) : Seq.softmax x = Tensor.softmaxVec x := by
  cases n with
  | zero => funext j; exact j.elim0
  | succ n =>
    funext j
    simp [Seq.softmax, Tensor.softmaxVec_apply, Tensor.vecMax, Seq.maxFrom_eq]

theorem Seq.rmsNorm_eq_core {n : Nat} (eps : α) (z g : Tensor α [n]) :
    Seq.rmsNorm eps z g = Tensor.rmsNormVec eps z g := by
  funext j; simp [Seq.rmsNorm, Seq.sumSq, Tensor.rmsNormVec_apply]

omit [Scalar α] in
theorem appendRow_eq_concat0 {T k : Nat} (rows : Tensor α [T, k]) (row : Tensor α [k]) :
    appendRow rows row = Tensor.concat0 (n := 1) rows (fun _ => row) := by
  funext i; simp only [appendRow, Tensor.concat0]

end Eq

section Graph

variable [Scalar α]

@[simp] theorem Tensor.zipWith_eta {β γ δ : Type} (f : β → γ → δ) (n : Nat) (s : Shape)
    (t : Tensor β (n :: s)) (u : Tensor γ (n :: s)) :
    Tensor.zipWith f (n :: s) t u = fun i => Tensor.zipWith f s (t i) (u i) := rfl

@[simp] theorem Tensor.map_eta {β γ : Type} (f : β → γ) (n : Nat) (s : Shape) (t : Tensor β (n :: s)) :
    Tensor.map f (n :: s) t = fun i => Tensor.map f s (t i) := rfl

/-- `eval_batchedReadTerm`, unapplied. -/
theorem eval_batchedReadTerm' {Γ : List Shape} (H K V : Nat) (q : Term α Γ [H, K])
    (m : Term α Γ [H, K, V]) (env : Env α Γ) :
    (KDA.batchedReadTerm H K V q m).eval env =
      fun h c => finSum K (fun r => q.eval env h r * m.eval env h r c) := by
  funext h c; exact KDA.eval_batchedReadTerm H K V q m env h c

/-- `eval_expandMidTerm`, unapplied. -/
theorem eval_expandMidTerm' {Γ : List Shape} (H K V : Nat) (t : Term α Γ [H, V]) (env : Env α Γ) :
    (KDA.expandMidTerm H K V t).eval env = fun h _ c => t.eval env h c := by
  funext h k c; exact KDA.eval_expandMidTerm H K V t env h k c

@[simp] theorem eval_binary3 (g : BinaryFn) (a b c : Nat) (x y : Tensor α [a, b, c]) (i : Fin a) (j : Fin b) :
    (PrimOp.binary g [a, b, c]).eval (.cons x (.cons y .nil)) i j = fun k => g.apply (x i j k) (y i j k) := rfl

@[simp] theorem eval_binary2 (g : BinaryFn) (a b : Nat) (x y : Tensor α [a, b]) (i : Fin a) :
    (PrimOp.binary g [a, b]).eval (.cons x (.cons y .nil)) i = fun k => g.apply (x i k) (y i k) := rfl

omit [Scalar α] in
@[simp] theorem swapAxes01_eta {m n : Nat} {s : Shape} (t : Tensor α (m :: n :: s)) (j : Fin n) :
    Tensor.swapAxes01 t j = fun i => t i j := rfl

omit [Scalar α] in
@[simp] theorem broadcast_eta (n : Nat) {s : Shape} (t : Tensor α s) :
    Tensor.broadcast n t = fun _ => t := rfl

theorem Seq.vecMatMul_eq_core {n m : Nat} (x : Tensor α [n]) (w : Tensor α [n, m]) :
    Seq.vecMatMul x w = Tensor.vecMatMul x w := by
  funext k; simp

/-- The output of the packed MLA graph is the output of `stepPacked`. -/
theorem stepModel_specFwd_output (p : Params α d) (scoreScale : α) {T : Nat}
    (latC : Tensor α [T, d.kvLatentDim]) (shC : Tensor α [T, d.sharedKeyDim]) (x : Tensor α [d.modelDim]) :
    Env.head (Env.tail (Env.tail ((stepModel p.normEps T d).specFwd (paramsEnv p)
      (.cons latC (.cons shC (.cons x (.cons scoreScale .nil))))))) =
      (stepPacked p scoreScale latC shC x).2.2 := by
  funext f
  simp [Model.specFwd, stepModel, paramsEnv, Env.head, Env.tail, stepPacked, attend, attendWith,
    headOutputsWith, scores, gate, queryLatent, entry, Seq.softmax_eq_core, Seq.rmsNorm_eq_core,
    appendRow_eq_concat0, Tensor.sumLast, BinaryFn.apply, UnaryFn.apply, eval_batchedReadTerm',
    eval_expandMidTerm', eval_binary3, eval_binary2, swapAxes01_eta, broadcast_eta, Seq.vecMatMul_eq_core]

omit [Scalar α] in
/-- An environment of three tensors is determined by its entries. -/
theorem env_eq3 {a b c : Shape} (e : Env α [a, b, c]) :
    e = .cons e.head (.cons e.tail.head (.cons e.tail.tail.head .nil)) := by
  cases e with
  | cons x e => cases e with
    | cons y e => cases e with
      | cons z e => cases e; rfl

/-- **Denotation of the packed Gated MLA step graph**: for every scalar model, the graph computes
the reference packed step `stepPacked` (both new caches and the output); with the list↔packed
bridge `stepPacked_pack` it computes the list step `GatedMLA.step`. -/
theorem stepModel_specFwd (p : Params α d) (scoreScale : α) {T : Nat}
    (latC : Tensor α [T, d.kvLatentDim]) (shC : Tensor α [T, d.sharedKeyDim]) (x : Tensor α [d.modelDim]) :
    (stepModel p.normEps T d).specFwd (paramsEnv p) (.cons latC (.cons shC (.cons x (.cons scoreScale .nil)))) =
      .cons (stepPacked p scoreScale latC shC x).1
        (.cons (stepPacked p scoreScale latC shC x).2.1 (.cons (stepPacked p scoreScale latC shC x).2.2 .nil)) := by
  refine (env_eq3 _).trans ?_
  rw [stepModel_specFwd_output]
  congr 1
  · funext i k
    simp [Model.specFwd, stepModel, paramsEnv, Env.head, stepPacked, entry, Seq.rmsNorm_eq_core,
      appendRow_eq_concat0, Seq.vecMatMul_eq_core]
  · congr 1
    funext i k
    simp [Model.specFwd, stepModel, paramsEnv, Env.head, Env.tail, stepPacked, entry,
      appendRow_eq_concat0, Seq.vecMatMul_eq_core]

/-- **The MLA graph on the packed list cache computes the list step**: for a list cache of
length `T`, running `stepModel` on `packLatent T cache`, `packShared T cache` gives the packing
of the list step's new cache and its output. -/
theorem stepModel_specFwd_pack (p : Params α d) (scoreScale : α) (cache : Cache α d) (T : Nat)
    (h : cache.length = T) (x : Tensor α [d.modelDim]) :
    (stepModel p.normEps T d).specFwd (paramsEnv p)
        (.cons (packLatent T cache) (.cons (packShared T cache) (.cons x (.cons scoreScale .nil)))) =
      .cons (packLatent (T + 1) (step p scoreScale cache x).1)
        (.cons (packShared (T + 1) (step p scoreScale cache x).1)
          (.cons (step p scoreScale cache x).2 .nil)) := by
  rw [stepModel_specFwd, stepPacked_pack p scoreScale cache T h x]

end Graph

end GatedMLA

end KimiK3
