module

public import KimiK3.Core.Kernel

/-!
# Shape-typed tensors: basic facts

`Tensor α s` (defined in `Kernel`) is `α` for `s = []` and `Fin n → Tensor α s'` for
`s = n :: s'`: indexing is function application, equality is extensional, and memoization
(`Tensor.memo`) is the identity.
-/

@[expose] public section

namespace KimiK3

namespace Tensor

variable {α : Type}

/-- Two tensors of shape `n :: s` are equal when all their slices are. -/
theorem ext {n : Nat} {s : Shape} {t u : Tensor α (n :: s)} (h : ∀ i, t i = u i) : t = u :=
  funext h

/-- Every slice of `fill x` is `fill x`. -/
@[simp] theorem fill_apply (x : α) (n : Nat) (s : Shape) (i : Fin n) :
    fill x (n :: s) i = fill x s := rfl

/-- A scalar `fill` is its value. -/
@[simp] theorem fill_nil (x : α) : fill x [] = x := rfl

/-- Slice `i` of a literal is the literal of the `i`-th nested list. -/
@[simp] theorem ofListRep_cons_apply (d : α) (n : Nat) (s : Shape) (l : ListRep α (n :: s))
    (i : Fin n) :
    ofListRep d (n :: s) l i = ofListRep d s (listGetD (ListRep.default d s) l i.val) := rfl

end Tensor

section Memo

variable {β : Type}

/-- `buildArray f k` has `k` entries. -/
theorem size_buildArray {n : Nat} (f : Fin n → β) (k : Nat) (h : k ≤ n) :
    (buildArray f k h).size = k := by
  induction k with
  | zero => rfl
  | succ k ih => simp [buildArray, ih]

/-- Entry `j` of `buildArray f k` is `f j`. -/
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

/-- Memoizing a function does not change it. -/
@[simp] theorem memoFn_eq {n : Nat} (f : Fin n → β) : memoFn f = f := by
  funext i
  simp only [memoFn, readArray]
  split
  · rename_i h
    exact getElem_buildArray f n _ i.val (by rw [size_buildArray] at h; exact h)
  · rfl

/-- Memoizing a tensor does not change it. -/
@[simp] theorem Tensor.memo_eq {α : Type} (s : Shape) (t : Tensor α s) : Tensor.memo s t = t := by
  induction s with
  | nil => rfl
  | cons n s ih =>
    simp only [Tensor.memo, memoFn_eq]
    funext i; exact ih (t i)

end Memo

end KimiK3
