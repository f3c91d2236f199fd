module

public import KimiK3.Core.Elementwise
public import KimiK3.Core.Sum

/-!
# Products in the row-vector convention: coordinate lemmas

(Definitions in `Kernel`.)

Weights are stored `[in, out]` and applied as `y = x W`:
* `dot x y = Σ_i x_i y_i`;
* `vecMatMul x W`, `y_k = Σ_i x_i W[i, k]`;
* `matMul A B`, `C[r, k] = Σ_i A[r, i] B[i, k]`;
* `batchedMatMul A B`, `C[b, r, k] = Σ_i A[b, r, i] B[b, i, k]`;
* `outer x y`, `M[i, j] = x_i y_j`.
-/

@[expose] public section

namespace KimiK3

namespace Tensor

variable {α : Type} [Scalar α]

@[simp] theorem vecMatMul_apply {n m : Nat} (x : Tensor α [n]) (w : Tensor α [n, m]) (k : Fin m) :
    vecMatMul x w k = finSum n (fun i => x i * w i k) := rfl

@[simp] theorem matMul_apply {p n m : Nat} (a : Tensor α [p, n]) (b : Tensor α [n, m]) (r : Fin p)
    (k : Fin m) : matMul a b r k = finSum n (fun i => a r i * b i k) := rfl

@[simp] theorem batchedMatMul_apply {q p n m : Nat} (a : Tensor α [q, p, n])
    (b : Tensor α [q, n, m]) (j : Fin q) (r : Fin p) (k : Fin m) :
    batchedMatMul a b j r k = finSum n (fun i => a j r i * b j i k) := rfl

@[simp] theorem outer_apply {n m : Nat} (x : Tensor α [n]) (y : Tensor α [m]) (i : Fin n)
    (j : Fin m) : outer x y i j = x i * y j := rfl

theorem dot_eq {n : Nat} (x y : Tensor α [n]) : dot x y = finSum n (fun i => x i * y i) := rfl

/-- `vecMatMul`, unapplied: `y = fun k => Σ_i x_i W[i,k]`. -/
theorem vecMatMul_eta {n m : Nat} (x : Tensor α [n]) (w : Tensor α [n, m]) :
    Tensor.vecMatMul x w = fun k => finSum n (fun i => x i * w i k) := rfl

/-- Each output of `vecMatMul` is the dot product with a column of `W`. -/
theorem vecMatMul_apply_eq_dot {n m : Nat} (x : Tensor α [n]) (w : Tensor α [n, m]) (k : Fin m) :
    vecMatMul x w k = dot x (fun i => w i k) := rfl

section Field

variable {β : Type} [ScalarField β]

/-- `vecMatMul` is linear in the vector: `(x + y) W = x W + y W`. -/
theorem vecMatMul_add {n m : Nat} (x y : Tensor β [n]) (w : Tensor β [n, m]) :
    vecMatMul (add [n] x y) w = add [m] (vecMatMul x w) (vecMatMul y w) := by
  funext k
  simp only [vecMatMul_apply, add_cons_apply, add_nil]
  rw [← finSum_add]; apply finSum_congr; intro i; grind

/-- Matrix products associate: `(A B) C = A (B C)`. -/
theorem matMul_assoc {p n m l : Nat} (a : Tensor β [p, n]) (b : Tensor β [n, m])
    (c : Tensor β [m, l]) : matMul (matMul a b) c = matMul a (matMul b c) := by
  funext r k
  simp only [matMul_apply]
  have h1 : ∀ j : Fin m, finSum n (fun i => a r i * b i j) * c j k =
      finSum n (fun i => a r i * b i j * c j k) := fun j => (finSum_mul_right _ _ _).symm
  have h2 : ∀ i : Fin n, a r i * finSum m (fun j => b i j * c j k) =
      finSum m (fun j => a r i * b i j * c j k) := fun i => by
    rw [← finSum_mul_left]; apply finSum_congr; intro j; grind
  simp only [h1, h2]
  exact finSum_comm m n (fun j i => a r i * b i j * c j k)

/-- The identity matrix is a left unit of `matMul`. -/
theorem identity_matMul {n m : Nat} (b : Tensor β [n, m]) :
    matMul (fun i j => if i = j then 1 else 0) b = b := by
  funext r k
  simp only [matMul_apply]
  exact finSum_delta_mul' n r (fun i => b i k)

/-- The identity matrix is a right unit of `matMul`. -/
theorem matMul_identity {p n : Nat} (a : Tensor β [p, n]) :
    matMul a (fun i j => if i = j then 1 else 0) = a := by
  funext r k
  simp only [matMul_apply]
  exact finSum_mul_delta n k (fun i => a r i)

/-- `matMul` distributes over addition on the right factor. -/
theorem matMul_add_right {p n m : Nat} (a : Tensor β [p, n]) (b c : Tensor β [n, m]) :
    matMul a (add [n, m] b c) = add [p, m] (matMul a b) (matMul a c) := by
  funext r k
  simp only [matMul_apply, add_cons_apply, add_nil]
  rw [← finSum_add]; apply finSum_congr; intro i; grind

/-- A matrix times the zero matrix is zero. -/
theorem matMul_zero {p n m : Nat} (a : Tensor β [p, n]) :
    matMul a (fun (_ : Fin n) (_ : Fin m) => (0 : β)) = fun _ _ => 0 := by
  funext r k
  simp only [matMul_apply]
  have h : ∀ i : Fin n, a r i * (0 : β) = 0 := fun _ => by grind
  rw [finSum_congr h, finSum_const_zero]

end Field

end Tensor

end KimiK3
