module

public import KimiK3.Sequence.Kernel
public import KimiK3.Core.Tensor
public import KimiK3.Core.Sum
public import KimiK3.Core.MatMul

/-!
# The kernel's helpers equal their `Core` counterparts; general lemmas

`Seq.sum = finSum`, `Seq.memoFn = id`, and list facts for `Seq.listAppend`, `Seq.listLen`,
`Seq.listGet`; plus the Kronecker-delta sums the affine-summary algebra needs. All general: they
can move to `Core`.
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
  simp only [memoFn]
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

end Seq

section Field

variable {α : Type} [ScalarField α]

/-- Summing against a Kronecker delta picks out one term (delta on the left). -/
theorem finSum_delta_mul : ∀ (n : Nat) (j : Fin n) (f : Fin n → α),
    finSum n (fun i => (if i = j then 1 else 0) * f i) = f j
  | 0, j, _ => j.elim0
  | n + 1, j, f => by
    rw [finSum_succ']
    cases j using Fin.cases with
    | zero =>
      have h : ∀ i : Fin n, ((if i.succ = (0 : Fin (n + 1)) then (1 : α) else 0) * f i.succ) = 0 :=
        fun i => by simp [Fin.succ_ne_zero]; grind
      rw [finSum_congr h, finSum_const_zero]; simp; grind
    | succ j =>
      have h : ∀ i : Fin n, ((if i.succ = j.succ then (1 : α) else 0) * f i.succ) =
          (if i = j then 1 else 0) * f i.succ := fun i => by simp [Fin.succ_inj]
      rw [finSum_congr h, finSum_delta_mul n j (fun i => f i.succ)]
      have : ((0 : Fin (n + 1)) = j.succ) = False := by simp [(Fin.succ_ne_zero j).symm]
      simp only [this, if_false]; grind

/-- Summing against a Kronecker delta picks out one term (delta on the left, other order). -/
theorem finSum_delta_mul' (n : Nat) (j : Fin n) (f : Fin n → α) :
    finSum n (fun i => (if j = i then 1 else 0) * f i) = f j := by
  rw [← finSum_delta_mul n j f]; apply finSum_congr; intro i
  by_cases h : i = j
  · subst h; rfl
  · have h' : ¬ j = i := fun e => h e.symm
    simp [h, h']

/-- Summing against a Kronecker delta picks out one term (delta on the right). -/
theorem finSum_mul_delta (n : Nat) (j : Fin n) (f : Fin n → α) :
    finSum n (fun i => f i * (if i = j then 1 else 0)) = f j := by
  rw [← finSum_delta_mul n j f]; apply finSum_congr; intro i; grind

end Field

namespace Tensor

variable {α : Type} [ScalarField α]

/-- The identity matrix is a left unit of `matMul`. -/
theorem identity_matMul {n m : Nat} (b : Tensor α [n, m]) :
    matMul (fun i j => if i = j then 1 else 0) b = b := by
  funext r k
  simp only [matMul_apply]
  exact finSum_delta_mul' n r (fun i => b i k)

/-- The identity matrix is a right unit of `matMul`. -/
theorem matMul_identity {p n : Nat} (a : Tensor α [p, n]) :
    matMul a (fun i j => if i = j then 1 else 0) = a := by
  funext r k
  simp only [matMul_apply]
  exact finSum_mul_delta n k (fun i => a r i)

/-- `matMul` distributes over addition on the right factor. -/
theorem matMul_add_right {p n m : Nat} (a : Tensor α [p, n]) (b c : Tensor α [n, m]) :
    matMul a (add [n, m] b c) = add [p, m] (matMul a b) (matMul a c) := by
  funext r k
  simp only [matMul_apply, add_cons_apply, add_nil]
  rw [← finSum_add]; apply finSum_congr; intro i; grind

/-- Addition of matrices is associative. -/
theorem add_assoc2 {m n : Nat} (a b c : Tensor α [m, n]) :
    add [m, n] (add [m, n] a b) c = add [m, n] a (add [m, n] b c) := by
  funext r k; simp only [add_cons_apply, add_nil]; grind

/-- Zero is a right unit of matrix addition. -/
theorem add_zero2 {m n : Nat} (a : Tensor α [m, n]) : add [m, n] a (fun _ _ => 0) = a := by
  funext r k; simp only [add_cons_apply, add_nil]; grind

/-- A matrix times the zero matrix is zero. -/
theorem matMul_zero {p n m : Nat} (a : Tensor α [p, n]) :
    matMul a (fun (_ : Fin n) (_ : Fin m) => (0 : α)) = fun _ _ => 0 := by
  funext r k
  simp only [matMul_apply]
  have h : ∀ i : Fin n, a r i * (0 : α) = 0 := fun _ => by grind
  rw [finSum_congr h, finSum_const_zero]

end Tensor

end KimiK3
