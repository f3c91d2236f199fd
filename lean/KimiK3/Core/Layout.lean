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

/-- `swapAxes01` at a fixed second index, unapplied. -/
theorem swapAxes01_eta {m n : Nat} {s : Shape} (t : Tensor α (m :: n :: s)) (j : Fin n) :
    Tensor.swapAxes01 t j = fun i => t i j := rfl

/-- Reading a `[H, K]` tensor flattened to `[H * K]`. -/
theorem reshape_flat2 {H K : Nat} (x : Tensor α [H, K]) (m : Fin (H * K)) :
    reshape [H * K] (by simp [Shape.numel]) x m =
      x ⟨m.val / K, Nat.div_lt_of_lt_mul (Nat.lt_of_lt_of_eq m.isLt (Nat.mul_comm H K))⟩
        ⟨m.val % K, Nat.mod_lt _ (Nat.pos_of_ne_zero (fun h => by
          have hm : m.val < H * K := m.isLt
          have : H * K = 0 := by rw [h, Nat.mul_zero]
          omega))⟩ := by
  simp [reshape, ofFlat, toFlat, Shape.numel]

/-- Unflattening `[H * K, V]` to `[H, K, V]`. -/
theorem reshape_unflat3 {H K V : Nat} (y : Tensor α [H * K, V]) (h : Fin H) (k : Fin K) (c : Fin V) :
    reshape [H, K, V] (by simp [Shape.numel, Nat.mul_assoc]) y h k c =
      y ⟨h.val * K + k.val, by
          have := Nat.mul_le_mul_right K (show h.val + 1 ≤ H by omega)
          rw [Nat.succ_mul] at this; omega⟩ c := by
  simp [reshape, ofFlat, toFlat, Shape.numel]
  have hV : 0 < V := by have := c.isLt; omega
  have e : h.val * (K * V) + (k.val * V + c.val) = c.val + (h.val * K + k.val) * V := by
    rw [Nat.add_mul, Nat.mul_assoc]; omega
  congr 1
  · apply Fin.ext
    show (h.val * (K * V) + (k.val * V + c.val)) / V = h.val * K + k.val
    rw [e, Nat.add_mul_div_right _ _ hV, Nat.div_eq_of_lt c.isLt]; omega
  · apply Fin.ext
    show (h.val * (K * V) + (k.val * V + c.val)) % V = c.val
    rw [e, Nat.add_mul_mod_self_right, Nat.mod_eq_of_lt c.isLt]

/-- Reading `[H, K]` as `[H, 1, K]` rows. -/
theorem reshape_rows {H K : Nat} (x : Tensor α [H, K]) (h : Fin H) (z : Fin 1) (k : Fin K) :
    reshape [H, 1, K] (by simp [Shape.numel]) x h z k = x h k := by
  have hK : 0 < K := by have := k.isLt; omega
  have hd : (h.val * K + k.val) / K = h.val := by
    rw [show h.val * K + k.val = k.val + h.val * K by omega, Nat.add_mul_div_right _ _ hK,
      Nat.div_eq_of_lt k.isLt]; omega
  simp [reshape, ofFlat, toFlat, Shape.numel]
  congr 1 <;> (try apply Fin.ext) <;> simp [hd, Nat.mod_eq_of_lt k.isLt]

/-- Reading `[H, 1, V]` as `[H, V]`. -/
theorem reshape_unrows {H V : Nat} (y : Tensor α [H, 1, V]) (h : Fin H) (c : Fin V) :
    reshape [H, V] (by simp [Shape.numel]) y h c = y h 0 c := by
  have hV : 0 < V := by have := c.isLt; omega
  have hd : (h.val * V + c.val) / V = h.val := by
    rw [show h.val * V + c.val = c.val + h.val * V by omega, Nat.add_mul_div_right _ _ hV,
      Nat.div_eq_of_lt c.isLt]; omega
  have hm : (h.val * V + c.val) % V = c.val := by
    rw [show h.val * V + c.val = c.val + h.val * V by omega, Nat.add_mul_mod_self_right,
      Nat.mod_eq_of_lt c.isLt]
  -- `congr` closes the index goals with `hd` and `hm` (by assumption)
  simp [reshape, ofFlat, toFlat, Shape.numel]
  congr 1 <;> (try congr 1) <;> (try apply Fin.ext) <;> simp [Nat.mod_eq_of_lt c.isLt]

end Tensor

end KimiK3
