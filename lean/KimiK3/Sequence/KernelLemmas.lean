module

public import KimiK3.Sequence.Kernel
public import KimiK3.Core.Tensor
public import KimiK3.Core.Sum
public import KimiK3.Core.MatMul
public import KimiK3.Core.Softmax
public import KimiK3.Core.Norm

/-!
# The Sequence kernel's helpers equal their `Core` counterparts

The executable kernel (`Kernel.lean`) carries its own copies of `Core` helpers (see
`Core/README.md`, "Toolchain constraints"). Proved here: `Seq.sum = finSum`, `Seq.memoFn = id`,
`Seq.memo2 = id`, list facts for `Seq.listAppend`, `Seq.listLen`, `Seq.listGet`; the kernel's
softmax, RMSNorm, L2 normalization, `vecMatMul` and row append equal `Core`'s
(`Seq.softmax_eq_core`, `Seq.rmsNorm_eq_core`, `Seq.l2Normalize_eq_core`,
`Seq.vecMatMul_eq_core`, `GatedMLA.appendRow_eq_concat0`); and the kernel softmaxes without
their stabilizing shift (`Seq.softmax_eq_exp`, `Seq.maskedSoftmax_eq_exp`,
`Seq.maskedSoftmax_future`). Every folder whose executable code is built on this kernel
(Sequence, Depth, Model, Graph) imports these facts from here.
-/

@[expose] public section

namespace KimiK3

namespace Seq

variable {α β : Type}

@[simp] theorem listAppend_eq (xs ys : List β) : listAppend xs ys = xs ++ ys := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp [listAppend, ih]

@[simp] theorem listLen_eq (xs : List β) : listLen xs = xs.length := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp [listLen, ih]

theorem listGet_eq_getElem (d : β) (xs : List β) (i : Nat) (h : i < xs.length) :
    listGet d xs i = xs[i] := by
  induction xs generalizing i with
  | nil => simp at h
  | cons x xs ih =>
    cases i with
    | zero => rfl
    | succ i => simp only [listGet, List.getElem_cons_succ]; exact ih i (by simp at h; omega)

theorem size_buildArray {n : Nat} (f : Fin n → β) (k : Nat) (h : k ≤ n) :
    (buildArray f k h).size = k := by
  induction k with
  | zero => rfl
  | succ k ih => simp [buildArray, ih]

theorem getElem_buildArray {n : Nat} (f : Fin n → β) (k : Nat) (h : k ≤ n) (j : Nat)
    (hj : j < k) :
    (buildArray f k h)[j]'(by rw [size_buildArray]; exact hj) = f ⟨j, by omega⟩ := by
  induction k with
  | zero => omega
  | succ k ih =>
    simp only [buildArray, Array.getElem_push]
    split
    · rename_i hlt
      exact ih _ (by rw [size_buildArray] at hlt; exact hlt)
    · rename_i hge
      have : j = k := by rw [size_buildArray] at hge; omega
      subst this; rfl

@[simp] theorem memoFn_eq {n : Nat} (f : Fin n → β) : memoFn f = f := by
  funext i
  simp only [memoFn, readArray]
  split
  · rename_i h
    exact getElem_buildArray f n _ i.val (by rw [size_buildArray] at h; exact h)
  · rfl

@[simp] theorem memo2_eq {m n : Nat} (t : Fin m → Fin n → β) : memo2 t = t := by
  simp [memo2]

@[simp] theorem sum_eq [Scalar α] (n : Nat) (f : Fin n → α) : sum n f = finSum n f := by
  induction n with
  | zero => rfl
  | succ n ih => simp only [sum, finSum, ih]

@[simp] theorem dot_eq [Scalar α] {n : Nat} (x y : Tensor α [n]) :
    dot x y = finSum n (fun i => x i * y i) := by simp [dot]

@[simp] theorem vecMatMul_apply [Scalar α] {n m : Nat} (x : Tensor α [n]) (w : Tensor α [n, m])
    (k : Fin m) : vecMatMul x w k = finSum n (fun i => x i * w i k) := by simp [vecMatMul]

section Core

variable [Scalar α]

/-- The kernel's running maximum is `Core`'s. -/
theorem maxFrom_eq (acc : α) (n : Nat) (f : Fin n → α) : Seq.maxFrom acc n f = finMaxFrom acc n f := by
  induction n generalizing acc with
  | zero => rfl
  | succ n ih => simp only [Seq.maxFrom, finMaxFrom, ih]

/-- The kernel's softmax is `Core`'s `softmaxVec`. -/
theorem softmax_eq_core {n : Nat} (x : Tensor α [n]) : Seq.softmax x = Tensor.softmaxVec x := by
  cases n with
  | zero => funext j; exact j.elim0
  | succ n =>
    funext j
    simp [Seq.softmax, Tensor.softmaxVec_apply, Tensor.vecMax, Seq.maxFrom_eq]

/-- The kernel's RMSNorm is `Core`'s `rmsNormVec`. -/
theorem rmsNorm_eq_core {n : Nat} (eps : α) (z g : Tensor α [n]) :
    Seq.rmsNorm eps z g = Tensor.rmsNormVec eps z g := by
  funext j; simp [Seq.rmsNorm, Seq.sumSq, Tensor.rmsNormVec_apply]

/-- The kernel's `vecMatMul` is `Core`'s. -/
theorem vecMatMul_eq_core {n m : Nat} (x : Tensor α [n]) (w : Tensor α [n, m]) :
    Seq.vecMatMul x w = Tensor.vecMatMul x w := by
  funext k; simp

/-- The kernel's L2 normalization is `Core`'s. -/
theorem l2Normalize_eq_core {n : Nat} (eps : α) (z : Tensor α [n]) :
    Seq.l2Normalize eps z = Tensor.l2NormVec eps z := by
  funext j; simp [Seq.l2Normalize, Seq.sumSq, Tensor.l2NormVec_apply]

end Core

section Masked

variable [ScalarField α]

/-- Future positions get weight exactly zero under the causal mask. -/
theorem maskedSoftmax_future (t : Nat) {n : Nat} (x : Tensor α [n + 1]) (i : Fin (n + 1))
    (hi : t < i.val) : Seq.maskedSoftmax t x i = 0 := by
  simp only [Seq.maskedSoftmax, Seq.memoFn_eq]
  have : ¬ i.val ≤ t := by omega
  rw [if_neg this]; grind

end Masked

section Shift

variable [ScalarLaws α]

/-- The stabilizing shift does not change the softmax: `softmax(x)_i = e^{x_i} / Σ_j e^{x_j}`. -/
theorem softmax_eq_exp {n : Nat} (x : Tensor α [n + 1]) (i : Fin (n + 1)) :
    Seq.softmax x i = Scalar.exp (x i) / finSum (n + 1) (fun j => Scalar.exp (x j)) := by
  simp only [Seq.softmax, Seq.memoFn_eq, Seq.sum_eq]
  generalize Seq.maxFrom (x 0) (n + 1) x = m
  have he : ∀ j, Scalar.exp (x j - m) = Scalar.exp (x j) * Scalar.exp (-m) := fun j => by
    rw [← ScalarLaws.exp_add]; congr 1; grind
  simp only [he]
  rw [finSum_mul_right]
  exact mul_div_mul_right_of_pos (ScalarLaws.exp_pos _)

/-- The masked softmax without its shift:
`w_j = [j ≤ t] e^{x_j} / Σ_k [k ≤ t] e^{x_k}`. -/
theorem maskedSoftmax_eq_exp (t : Nat) {n : Nat} (x : Tensor α [n + 1]) (i : Fin (n + 1)) :
    Seq.maskedSoftmax t x i =
      (if i.val ≤ t then Scalar.exp (x i) else 0) /
        finSum (n + 1) (fun j => if j.val ≤ t then Scalar.exp (x j) else 0) := by
  simp only [Seq.maskedSoftmax, Seq.memoFn_eq, Seq.sum_eq]
  generalize Seq.maxFrom (x 0) (n + 1) x = m
  have he : ∀ j : Fin (n + 1), (if j.val ≤ t then Scalar.exp (x j - m) else 0) =
      (if j.val ≤ t then Scalar.exp (x j) else 0) * Scalar.exp (-m) := fun j => by
    split
    · rw [← ScalarLaws.exp_add]; congr 1; grind
    · grind
  simp only [he]
  rw [finSum_mul_right]
  exact mul_div_mul_right_of_pos (ScalarLaws.exp_pos _)

end Shift

end Seq

namespace GatedMLA

variable {α : Type}

/-- The kernel's row append is `Core`'s `concat0` with one row. -/
theorem appendRow_eq_concat0 {T k : Nat} (rows : Tensor α [T, k]) (row : Tensor α [k]) :
    appendRow rows row = Tensor.concat0 (n := 1) rows (fun _ => row) := by
  funext i; simp only [appendRow, Tensor.concat0]

end GatedMLA

end KimiK3
