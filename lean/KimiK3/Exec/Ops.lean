module

public import KimiK3.Exec.Arr
public import KimiK3.Core.Elementwise
public import KimiK3.Sequence.KernelLemmas

/-!
# Every executable tensor operation equals its function-backed counterpart

For every `[Scalar α]` (no laws: the two sides are the same expressions, so the theorems hold at
`Float` too), `toTensor (op a b) = Tensor.op (toTensor a) (toTensor b)`, and likewise for the
copies in `Seq` that the sequence mixers use:

| executable | function-backed | theorem |
|---|---|---|
| `Arr.map`, `zipWith`, `add`, `sub`, `mul`, `div`, `neg`, `scale` | `Tensor.map` … `Tensor.scale` | `toTensor_map` … `toTensor_scale` |
| `Arr.vecSum`, `dot` | `Tensor.vecSum`, `Tensor.dot`, `Seq.dot` | `vecSum_eq`, `dot_eq`, `dot_eq_seq` |
| `Arr.vecMatMul`, `matMul`, `outer`, `transpose` | `Tensor.vecMatMul`, `Seq.vecMatMul`, `Tensor.matMul`, `Tensor.outer`, `Tensor.transpose` | `toTensor_vecMatMul`, `toTensor_vecMatMul_seq`, `toTensor_matMul`, `toTensor_outer`, `toTensor_transpose` |
| `Arr.vecMax` | `Tensor.vecMax` | `vecMax_eq` |
| `Arr.softmax` | `Tensor.softmaxVec`, `Seq.softmax` | `toTensor_softmax`, `toTensor_softmax_seq` |
| `Arr.maskedSoftmax` | `Seq.maskedSoftmax` | `toTensor_maskedSoftmax` |
| `Arr.rmsNorm` | `Tensor.rmsNormVec`, `Seq.rmsNorm` | `toTensor_rmsNorm`, `toTensor_rmsNorm_seq` |
| `Arr.l2Normalize` | `Tensor.l2NormVec`, `Seq.l2Normalize` | `toTensor_l2Normalize`, `toTensor_l2Normalize_seq` |
| `sumTo` | `finSum`, `Seq.sum` | `sumTo_eq` (`Arr.lean`), `sumTo_eq_seq` |
-/

@[expose] public section

namespace KimiK3

namespace Exec

variable {α β : Type} [Scalar α]

theorem sumTo_eq_seq (n : Nat) (f : Nat → α) : sumTo n f = Seq.sum n (fun i => f i.val) := by
  rw [sumTo_eq]
  induction n with
  | zero => rfl
  | succ n ih => simp only [finSum, Seq.sum, ih]

theorem seqMaxFrom_eq (f : Nat → α) (k : Nat) (acc : α) :
    maxDown f k acc = Seq.maxFrom acc k (fun i => f i.val) := by
  induction k generalizing acc with
  | zero => rfl
  | succ k ih => simp only [maxDown, Seq.maxFrom, ih]

/-- The executable scan is `CausalScan.run`. -/
theorem scan_eq_run {σ ι ο : Type} (f : σ → ι → σ × ο) (s : σ) (xs : List ι) :
    scan f s xs = CausalScan.run f s xs := by
  induction xs generalizing s with
  | nil => rfl
  | cons x xs ih => simp only [scan, CausalScan.run, ih]

theorem listAppend_eq_seq {β : Type} (xs ys : List β) : listAppend xs ys = Seq.listAppend xs ys := by
  rw [listAppend_eq, Seq.listAppend_eq]

theorem listLen_eq_seq {β : Type} (xs : List β) : listLen xs = Seq.listLen xs := by
  rw [listLen_eq, Seq.listLen_eq]

theorem listGet_eq_seq {β : Type} (d : β) (xs : List β) (i : Nat) : listGet d xs i = Seq.listGet d xs i := by
  induction xs generalizing i with
  | nil => rfl
  | cons x xs ih => cases i with
    | zero => rfl
    | succ i => exact ih i

namespace Arr

/-! ## Elementwise -/

omit [Scalar α] in
theorem ofGet_map (f : α → β) : (s : Shape) → (g : Nat → α) →
    ofGet s (fun k => f (g k)) = Tensor.map f s (ofGet s g)
  | [], _ => rfl
  | _ :: s, g => by funext i; exact ofGet_map f s _

omit [Scalar α] in
theorem ofGet_zipWith (f : α → α → α) : (s : Shape) → (g h : Nat → α) →
    ofGet s (fun k => f (g k) (h k)) = Tensor.zipWith f s (ofGet s g) (ofGet s h)
  | [], _, _ => rfl
  | _ :: s, g, h => by funext i; exact ofGet_zipWith f s _ _

theorem toTensor_map [Scalar β] {s : Shape} (f : α → β) (a : Arr α s) :
    (map f a).toTensor = Tensor.map f s a.toTensor := by
  unfold map; rw [toTensor_ofFn]; exact ofGet_map f s _

theorem toTensor_zipWith {s : Shape} (f : α → α → α) (a b : Arr α s) :
    (zipWith f a b).toTensor = Tensor.zipWith f s a.toTensor b.toTensor := by
  unfold zipWith; rw [toTensor_ofFn]; exact ofGet_zipWith f s _ _

theorem toTensor_add {s : Shape} (a b : Arr α s) : (add a b).toTensor = Tensor.add s a.toTensor b.toTensor :=
  toTensor_zipWith _ a b

theorem toTensor_sub {s : Shape} (a b : Arr α s) : (sub a b).toTensor = Tensor.sub s a.toTensor b.toTensor :=
  toTensor_zipWith _ a b

theorem toTensor_mul {s : Shape} (a b : Arr α s) : (mul a b).toTensor = Tensor.mul s a.toTensor b.toTensor :=
  toTensor_zipWith _ a b

theorem toTensor_div {s : Shape} (a b : Arr α s) : (div a b).toTensor = Tensor.div s a.toTensor b.toTensor :=
  toTensor_zipWith _ a b

theorem toTensor_neg {s : Shape} (a : Arr α s) : (neg a).toTensor = Tensor.neg s a.toTensor :=
  toTensor_map _ a

theorem toTensor_scale {s : Shape} (c : α) (a : Arr α s) :
    (scale c a).toTensor = Tensor.scale c s a.toTensor :=
  toTensor_map _ a

/-! ## Reductions and products -/

theorem vecSum_eq {n : Nat} (x : Arr α [n]) : x.vecSum = Tensor.vecSum x.toTensor := by
  simp only [vecSum, Tensor.vecSum, sumTo_eq]
  congr 1; funext i; simp

theorem dot_eq {n : Nat} (x y : Arr α [n]) : dot x y = Tensor.dot x.toTensor y.toTensor := by
  simp [dot, Tensor.dot, sumTo_eq]

theorem dot_eq_seq {n : Nat} (x y : Arr α [n]) : dot x y = Seq.dot x.toTensor y.toTensor := by
  simp [dot, Seq.dot, sumTo_eq_seq]

theorem toTensor_vecMatMul {n m : Nat} (x : Arr α [n]) (w : Arr α [n, m]) :
    (vecMatMul x w).toTensor = Tensor.vecMatMul x.toTensor w.toTensor := by
  funext k; simp [vecMatMul, Tensor.vecMatMul, sumTo_eq]

theorem toTensor_vecMatMul_seq {n m : Nat} (x : Arr α [n]) (w : Arr α [n, m]) :
    (vecMatMul x w).toTensor = Seq.vecMatMul x.toTensor w.toTensor := by
  funext k; simp [vecMatMul, Seq.vecMatMul, sumTo_eq_seq]

theorem toTensor_matMul {p n m : Nat} (a : Arr α [p, n]) (b : Arr α [n, m]) :
    (matMul a b).toTensor = Tensor.matMul a.toTensor b.toTensor := by
  funext r k; simp [matMul, Tensor.matMul, Tensor.vecMatMul, sumTo_eq]

theorem toTensor_outer {n m : Nat} (x : Arr α [n]) (y : Arr α [m]) :
    (outer x y).toTensor = Tensor.outer x.toTensor y.toTensor := by
  funext i j; simp [outer, Tensor.outer]

theorem toTensor_transpose {m n : Nat} (a : Arr α [m, n]) :
    (transpose a).toTensor = Tensor.transpose a.toTensor := by
  funext j i; simp [transpose, Tensor.transpose, Tensor.swapAxes01]

theorem vecMax_eq {n : Nat} (x : Arr α [n]) : vecMax x = Tensor.vecMax x.toTensor := by
  cases n with
  | zero => rfl
  | succ n =>
    simp only [vecMax, Tensor.vecMax, maxDown_eq]
    congr 1
    all_goals first | rfl | (funext i; simp)

theorem vecMax_eq_seq {n : Nat} (x : Arr α [n + 1]) :
    vecMax x = Seq.maxFrom (x.toTensor 0) (n + 1) x.toTensor := by
  simp only [vecMax, seqMaxFrom_eq]
  congr 1
  all_goals first | rfl | (funext i; simp)

/-! ## Softmax and normalizations -/

theorem toTensor_softmax {n : Nat} (x : Arr α [n]) :
    (softmax x).toTensor = Tensor.softmaxVec x.toTensor := by
  funext j
  simp [softmax, Tensor.softmaxVec, Tensor.softmaxVec.softmaxWith, sumTo_eq, vecMax_eq]

theorem toTensor_softmax_seq {n : Nat} (x : Arr α [n]) :
    (softmax x).toTensor = Seq.softmax x.toTensor := by
  cases n with
  | zero => funext j; exact j.elim0
  | succ n =>
    funext j
    simp only [softmax, Seq.softmax, Seq.memoFn_eq, Seq.sum_eq, vecMax_eq_seq]
    simp [sumTo_eq]

theorem toTensor_maskedSoftmax (t : Nat) {n : Nat} (x : Arr α [n]) :
    (maskedSoftmax t x).toTensor = Seq.maskedSoftmax t x.toTensor := by
  cases n with
  | zero => funext j; exact j.elim0
  | succ n =>
    funext j
    simp only [maskedSoftmax, Seq.maskedSoftmax, Seq.memoFn_eq, Seq.sum_eq, vecMax_eq_seq]
    simp [sumTo_eq]

theorem toTensor_rmsNorm {n : Nat} (eps : α) (x g : Arr α [n]) :
    (rmsNorm eps x g).toTensor = Tensor.rmsNormVec eps x.toTensor g.toTensor := by
  funext j
  simp [rmsNorm, sumSq, Tensor.rmsNormVec, Tensor.rmsNormVec.rmsWith, sumTo_eq]

theorem toTensor_rmsNorm_seq {n : Nat} (eps : α) (x g : Arr α [n]) :
    (rmsNorm eps x g).toTensor = Seq.rmsNorm eps x.toTensor g.toTensor := by
  funext j
  simp [rmsNorm, sumSq, Seq.rmsNorm, Seq.sumSq, sumTo_eq_seq]

theorem toTensor_l2Normalize {n : Nat} (eps : α) (x : Arr α [n]) :
    (l2Normalize eps x).toTensor = Tensor.l2NormVec eps x.toTensor := by
  funext j
  simp [l2Normalize, sumSq, Tensor.l2NormVec, Tensor.l2NormVec.l2With, sumTo_eq]

theorem toTensor_l2Normalize_seq {n : Nat} (eps : α) (x : Arr α [n]) :
    (l2Normalize eps x).toTensor = Seq.l2Normalize eps x.toTensor := by
  funext j
  simp [l2Normalize, sumSq, Seq.l2Normalize, Seq.sumSq, sumTo_eq_seq]

end Arr

end Exec

end KimiK3
