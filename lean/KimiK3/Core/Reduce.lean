module

public import KimiK3.Core.Elementwise
public import KimiK3.Core.Sum

/-!
# Reductions: coordinate lemmas

(Definitions in `Kernel`.) `sumLast`/`meanLast` reduce the last axis keeping the leading
ones, `sum0` reduces the first axis. Other axes are reached with `swapAxes01`.
-/

@[expose] public section

namespace KimiK3

namespace Tensor

variable {α : Type} [Scalar α]

@[simp] theorem sumLast_nil {n : Nat} (x : Tensor α [n]) : sumLast [] x = finSum n x := rfl

@[simp] theorem sumLast_cons_apply (m : Nat) (s : Shape) {n : Nat} (x : Tensor α (Shape.append (m :: s) [n]))
    (i : Fin m) : sumLast (m :: s) x i = sumLast s (x i) := rfl

@[simp] theorem meanLast_nil {n : Nat} (x : Tensor α [n]) :
    meanLast [] x = finSum n x / (n : α) := rfl

@[simp] theorem meanLast_cons_apply (m : Nat) (s : Shape) {n : Nat}
    (x : Tensor α (Shape.append (m :: s) [n])) (i : Fin m) : meanLast (m :: s) x i = meanLast s (x i) := rfl

@[simp] theorem sum0_nil {n : Nat} (x : Tensor α [n]) : sum0 [] x = finSum n x := rfl

@[simp] theorem sum0_cons_apply {n m : Nat} (s : Shape) (x : Tensor α (n :: m :: s)) (i : Fin m) :
    sum0 (m :: s) x i = sum0 s (fun k => x k i) := rfl

/-- `sumLast` over one leading axis, unapplied. -/
theorem sumLast_eta (D H : Nat) (x : Tensor α [D, H]) :
    sumLast [D] x = fun f => finSum H (x f) := rfl

/-- A vector's mean times its length is its sum (for nonempty vectors, in a field whose
natural numbers are nonzero). -/
theorem vecMean_eq {n : Nat} (x : Tensor α [n]) : vecMean x = finSum n x / (n : α) := rfl

end Tensor

end KimiK3
