module

public import KimiK3.Core.Elementwise

/-!
# Layout: axis swaps, reshape, concatenation — coordinate lemmas

(Definitions in `Kernel`.)

* `swapAxes01 t`, `u[j, i, …] = t[i, j, …]`; `transpose` is its matrix case;
* `reshape` reads the entries in row-major order (`toFlat`) and refills them (`ofFlat`) into a
  shape with the same number of entries;
* `concat0` joins along the first axis, `concatLast` along the last axis.
-/

@[expose] public section

namespace KimiK3

namespace Tensor

variable {α : Type}

@[simp] theorem swapAxes01_apply {m n : Nat} {s : Shape} (t : Tensor α (m :: n :: s)) (j : Fin n)
    (i : Fin m) : swapAxes01 t j i = t i j := rfl

@[simp] theorem transpose_apply {m n : Nat} (t : Tensor α [m, n]) (j : Fin n) (i : Fin m) :
    transpose t j i = t i j := rfl

/-- Swapping twice gives back the tensor. -/
@[simp] theorem swapAxes01_swapAxes01 {m n : Nat} {s : Shape} (t : Tensor α (m :: n :: s)) :
    swapAxes01 (swapAxes01 t) = t := rfl

/-- Reading back the entries of `ofFlat s f` gives `f`. -/
theorem toFlat_ofFlat (s : Shape) (f : Fin (Shape.numel s) → α) : toFlat s (ofFlat s f) = f := by
  induction s with
  | nil =>
    funext k
    show f ⟨0, _⟩ = f k
    congr 1; apply Fin.ext; have := k.isLt; simp only [Shape.numel] at this; simp only; omega
  | cons n s ih =>
    funext k
    simp only [toFlat, ofFlat, ih]
    congr 1; apply Fin.ext; simp only
    rw [Nat.mul_comm]; exact Nat.div_add_mod _ _

/-- `reshape` keeps the row-major entries. -/
@[simp] theorem toFlat_reshape {s : Shape} (t : Shape) (h : Shape.numel s = Shape.numel t)
    (x : Tensor α s) (k : Fin (Shape.numel t)) :
    toFlat t (reshape t h x) k = toFlat s x ⟨k.val, by rw [h]; exact k.isLt⟩ := by
  simp only [reshape, toFlat_ofFlat]

@[simp] theorem concat0_castAdd {m n : Nat} {s : Shape} (x : Tensor α (m :: s))
    (y : Tensor α (n :: s)) (i : Fin m) : concat0 x y (Fin.castAdd n i) = x i := by
  simp [concat0]

@[simp] theorem concat0_natAdd {m n : Nat} {s : Shape} (x : Tensor α (m :: s))
    (y : Tensor α (n :: s)) (j : Fin n) : concat0 x y (Fin.natAdd m j) = y j := by
  have h : ¬ (Fin.natAdd m j).val < m := by simp
  simp only [concat0, dif_neg h]
  congr 1; apply Fin.ext; simp

@[simp] theorem concatLast_nil {m n : Nat} (x : Tensor α [m]) (y : Tensor α [n]) :
    concatLast [] x y = concat0 (s := []) x y := rfl

@[simp] theorem concatLast_cons_apply {m n : Nat} (k : Nat) (s : Shape)
    (x : Tensor α (Shape.append (k :: s) [m])) (y : Tensor α (Shape.append (k :: s) [n])) (i : Fin k) :
    concatLast (k :: s) x y i = concatLast s (x i) (y i) := rfl

end Tensor

end KimiK3
