module

public import KimiK3.Core.Kernel

/-!
# Elementwise operations and broadcasting: coordinate lemmas

(Definitions in `Kernel`.) `map` and `zipWith` apply a scalar function entry by entry at any shape; `broadcast` repeats a
tensor along a new leading axis; `mapSuffix` lifts an operation on the trailing axes over any
leading (batch) axes. 
-/

@[expose] public section

namespace KimiK3

namespace Tensor

variable {α β γ : Type}

@[simp] theorem map_nil (f : α → β) (x : Tensor α []) : map f [] x = f x := rfl

@[simp] theorem map_cons_apply (f : α → β) (n : Nat) (s : Shape) (t : Tensor α (n :: s))
    (i : Fin n) : map f (n :: s) t i = map f s (t i) := rfl

@[simp] theorem zipWith_nil (f : α → β → γ) (x : Tensor α []) (y : Tensor β []) :
    zipWith f [] x y = f x y := rfl

@[simp] theorem zipWith_cons_apply (f : α → β → γ) (n : Nat) (s : Shape) (t : Tensor α (n :: s))
    (u : Tensor β (n :: s)) (i : Fin n) : zipWith f (n :: s) t u i = zipWith f s (t i) (u i) := rfl

@[simp] theorem broadcast_apply (n : Nat) {s : Shape} (t : Tensor α s) (i : Fin n) :
    broadcast n t i = t := rfl

@[simp] theorem mapSuffix_nil {t u : Shape} (f : Tensor α t → Tensor β u) (x : Tensor α t) :
    mapSuffix f [] x = f x := rfl

@[simp] theorem mapSuffix_cons_apply {t u : Shape} (f : Tensor α t → Tensor β u) (n : Nat)
    (s : Shape) (x : Tensor α (Shape.append (n :: s) t)) (i : Fin n) :
    mapSuffix f (n :: s) x i = mapSuffix f s (x i) := rfl

@[simp] theorem zipSuffix_nil {t u v : Shape} (f : Tensor α t → Tensor β u → Tensor γ v)
    (x : Tensor α t) (y : Tensor β u) : zipSuffix f [] x y = f x y := rfl

@[simp] theorem zipSuffix_cons_apply {t u v : Shape} (f : Tensor α t → Tensor β u → Tensor γ v)
    (n : Nat) (s : Shape) (x : Tensor α (Shape.append (n :: s) t)) (y : Tensor β (Shape.append (n :: s) u)) (i : Fin n) :
    zipSuffix f (n :: s) x y i = zipSuffix f s (x i) (y i) := rfl

/-- `zipWith` on a leading axis, unapplied. -/
theorem zipWith_eta (f : α → β → γ) (n : Nat) (s : Shape) (t : Tensor α (n :: s))
    (u : Tensor β (n :: s)) : zipWith f (n :: s) t u = fun i => zipWith f s (t i) (u i) := rfl

/-- `map` on a leading axis, unapplied. -/
theorem map_eta (f : α → β) (n : Nat) (s : Shape) (t : Tensor α (n :: s)) :
    map f (n :: s) t = fun i => map f s (t i) := rfl

/-- `broadcast`, unapplied. -/
theorem broadcast_eta (n : Nat) {s : Shape} (t : Tensor α s) :
    broadcast n t = fun _ => t := rfl

/-- `map` of the identity is the identity. -/
theorem map_id (s : Shape) (t : Tensor α s) : map id s t = t := by
  induction s with
  | nil => rfl
  | cons n s ih => funext i; exact ih (t i)

/-- `map` composes. -/
theorem map_map (f : α → β) (g : β → γ) (s : Shape) (t : Tensor α s) :
    map g s (map f s t) = map (g ∘ f) s t := by
  induction s with
  | nil => rfl
  | cons n s ih => funext i; exact ih (t i)

section Arith

variable [Scalar α]

@[simp] theorem add_nil (x y : Tensor α []) : add [] x y = x + y := rfl
@[simp] theorem add_cons_apply (n : Nat) (s : Shape) (t u : Tensor α (n :: s)) (i : Fin n) :
    add (n :: s) t u i = add s (t i) (u i) := rfl
@[simp] theorem sub_nil (x y : Tensor α []) : sub [] x y = x - y := rfl
@[simp] theorem sub_cons_apply (n : Nat) (s : Shape) (t u : Tensor α (n :: s)) (i : Fin n) :
    sub (n :: s) t u i = sub s (t i) (u i) := rfl
@[simp] theorem mul_nil (x y : Tensor α []) : mul [] x y = x * y := rfl
@[simp] theorem mul_cons_apply (n : Nat) (s : Shape) (t u : Tensor α (n :: s)) (i : Fin n) :
    mul (n :: s) t u i = mul s (t i) (u i) := rfl
@[simp] theorem div_nil (x y : Tensor α []) : div [] x y = x / y := rfl
@[simp] theorem div_cons_apply (n : Nat) (s : Shape) (t u : Tensor α (n :: s)) (i : Fin n) :
    div (n :: s) t u i = div s (t i) (u i) := rfl
@[simp] theorem neg_nil (x : Tensor α []) : neg [] x = -x := rfl
@[simp] theorem neg_cons_apply (n : Nat) (s : Shape) (t : Tensor α (n :: s)) (i : Fin n) :
    neg (n :: s) t i = neg s (t i) := rfl
@[simp] theorem scale_nil (c : α) (x : Tensor α []) : scale c [] x = c * x := rfl
@[simp] theorem scale_cons_apply (c : α) (n : Nat) (s : Shape) (t : Tensor α (n :: s))
    (i : Fin n) : scale c (n :: s) t i = scale c s (t i) := rfl

/-- `scale` on a leading axis, unapplied. -/
theorem scale_eta (c : α) (n : Nat) (s : Shape) (t : Tensor α (n :: s)) :
    scale c (n :: s) t = fun i => scale c s (t i) := rfl

end Arith

section Field

variable [ScalarField α]

/-- Addition of matrices is associative. -/
theorem add_assoc2 {m n : Nat} (a b c : Tensor α [m, n]) :
    add [m, n] (add [m, n] a b) c = add [m, n] a (add [m, n] b c) := by
  funext r k; simp only [add_cons_apply, add_nil]; grind

/-- Zero is a right unit of matrix addition. -/
theorem add_zero2 {m n : Nat} (a : Tensor α [m, n]) : add [m, n] a (fun _ _ => 0) = a := by
  funext r k; simp only [add_cons_apply, add_nil]; grind

end Field

end Tensor

end KimiK3
