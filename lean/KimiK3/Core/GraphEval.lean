module

public import KimiK3.Core.Tensor
public import KimiK3.Core.Reduce
public import KimiK3.Core.MatMul
public import KimiK3.Core.Layout
public import KimiK3.Core.Softmax
public import KimiK3.Core.Norm

/-!
# Meaning of typed graphs

`PrimOp`, `Term`, `Args`, `Model` and their evaluation are defined in `Kernel`. This file
proves one `eval` lemma per primitive (its meaning is the corresponding tensor operation),
the evaluation equations of terms (variables, operations, `let1` sharing, argument lists),
and `Model.specFwd` unfolding.
-/

@[expose] public section

namespace KimiK3

variable {α : Type}

/-! ## Environments -/

@[simp] theorem Env.get_here {Γ : List Shape} {s : Shape} (x : Tensor α s) (e : Env α Γ) :
    (Env.cons x e).get .here = x := rfl

@[simp] theorem Env.get_there {Γ : List Shape} {s t : Shape} (x : Tensor α t) (e : Env α Γ)
    (v : Var Γ s) : (Env.cons x e).get (.there v) = e.get v := rfl

@[simp] theorem Env.append_nil {Δ : List Shape} (e : Env α Δ) : Env.append .nil e = e := rfl

@[simp] theorem Env.append_cons {Γ Δ : List Shape} {s : Shape} (x : Tensor α s) (e : Env α Γ)
    (e' : Env α Δ) : Env.append (.cons x e) e' = .cons x (e.append e') := rfl

/-- `Shape.appendList` is list append. -/
theorem Shape.appendList_eq (Γ Δ : List Shape) : Shape.appendList Γ Δ = Γ ++ Δ := by
  induction Γ with
  | nil => rfl
  | cons s Γ ih => simp [Shape.appendList, ih]

/-- `Shape.append` is list append. -/
theorem Shape.append_eq (s t : Shape) : Shape.append s t = s ++ t := by
  induction s with
  | nil => rfl
  | cons n s ih => simp [Shape.append, ih]

/-- An environment of three tensors is determined by its entries. -/
theorem env_eq3 {a b c : Shape} (e : Env α [a, b, c]) :
    e = .cons e.head (.cons e.tail.head (.cons e.tail.tail.head .nil)) := by
  cases e with
  | cons x e => cases e with
    | cons y e => cases e with
      | cons z e => cases e; rfl

/-- Equal heads and equal tails give equal environments. -/
theorem Env.cons_congr {s : Shape} {Γ : List Shape} {x y : Tensor α s} {e e' : Env α Γ}
    (h₁ : x = y) (h₂ : e = e') : Env.cons x e = Env.cons y e' := by
  rw [h₁, h₂]

variable [Scalar α]

/-! ## One evaluation lemma per primitive -/

namespace PrimOp

@[simp] theorem eval_unary (f : UnaryFn) (s : Shape) (x : Tensor α s) :
    (PrimOp.unary (α := α) f s).eval (.cons x .nil) = Tensor.map f.apply s x := rfl

/-- The erf node applies the `erf` of the `TrigScalar` structure it carries, entrywise. -/
@[simp] theorem eval_erf [TrigScalar α] (s : Shape) (x : Tensor α s) :
    (PrimOp.erf (α := α) s).eval (.cons x .nil) = Tensor.map TrigScalar.erf s x := rfl

@[simp] theorem eval_binary (f : BinaryFn) (s : Shape) (x y : Tensor α s) :
    (PrimOp.binary (α := α) f s).eval (.cons x (.cons y .nil)) = Tensor.zipWith f.apply s x y :=
  rfl

@[simp] theorem eval_scale (c : α) (s : Shape) (x : Tensor α s) :
    (PrimOp.scale c s).eval (.cons x .nil) = Tensor.scale c s x := rfl

@[simp] theorem eval_broadcast (n : Nat) (s : Shape) (x : Tensor α s) :
    (PrimOp.broadcast (α := α) n s).eval (.cons x .nil) = Tensor.broadcast n x := rfl

@[simp] theorem eval_sumLast (s : Shape) (n : Nat) (x : Tensor α (Shape.append s [n])) :
    (PrimOp.sumLast (α := α) s n).eval (.cons x .nil) = Tensor.sumLast s x := rfl

@[simp] theorem eval_meanLast (s : Shape) (n : Nat) (x : Tensor α (Shape.append s [n])) :
    (PrimOp.meanLast (α := α) s n).eval (.cons x .nil) = Tensor.meanLast s x := rfl

@[simp] theorem eval_vecMatMul (n m : Nat) (x : Tensor α [n]) (w : Tensor α [n, m]) :
    (PrimOp.vecMatMul (α := α) n m).eval (.cons x (.cons w .nil)) = Tensor.vecMatMul x w := rfl

@[simp] theorem eval_matMul (p n m : Nat) (a : Tensor α [p, n]) (b : Tensor α [n, m]) :
    (PrimOp.matMul (α := α) p n m).eval (.cons a (.cons b .nil)) = Tensor.matMul a b := rfl

@[simp] theorem eval_batchedMatMul (q p n m : Nat) (a : Tensor α [q, p, n])
    (b : Tensor α [q, n, m]) :
    (PrimOp.batchedMatMul (α := α) q p n m).eval (.cons a (.cons b .nil)) =
      Tensor.batchedMatMul a b := rfl

@[simp] theorem eval_outer (n m : Nat) (x : Tensor α [n]) (y : Tensor α [m]) :
    (PrimOp.outer (α := α) n m).eval (.cons x (.cons y .nil)) = Tensor.outer x y := rfl

@[simp] theorem eval_swapAxes01 (m n : Nat) (s : Shape) (x : Tensor α (m :: n :: s)) :
    (PrimOp.swapAxes01 (α := α) m n s).eval (.cons x .nil) = Tensor.swapAxes01 x := rfl

@[simp] theorem eval_reshape (s t : Shape) (h : Shape.numel s = Shape.numel t) (x : Tensor α s) :
    (PrimOp.reshape (α := α) s t h).eval (.cons x .nil) = Tensor.reshape t h x := rfl

@[simp] theorem eval_concat0 (m n : Nat) (s : Shape) (x : Tensor α (m :: s))
    (y : Tensor α (n :: s)) :
    (PrimOp.concat0 (α := α) m n s).eval (.cons x (.cons y .nil)) = Tensor.concat0 x y := rfl

@[simp] theorem eval_concatLast (s : Shape) (m n : Nat) (x : Tensor α (Shape.append s [m]))
    (y : Tensor α (Shape.append s [n])) :
    (PrimOp.concatLast (α := α) s m n).eval (.cons x (.cons y .nil)) =
      Tensor.concatLast s x y := rfl

@[simp] theorem eval_softmaxLast (s : Shape) (n : Nat) (x : Tensor α (Shape.append s [n])) :
    (PrimOp.softmaxLast (α := α) s n).eval (.cons x .nil) = Tensor.softmaxLast s x := rfl

@[simp] theorem eval_rmsNormLast (eps : α) (s : Shape) (n : Nat) (x : Tensor α (Shape.append s [n]))
    (g : Tensor α [n]) :
    (PrimOp.rmsNormLast eps s n).eval (.cons x (.cons g .nil)) = Tensor.rmsNormLast eps s x g :=
  rfl

@[simp] theorem eval_l2NormLast (eps : α) (s : Shape) (n : Nat) (x : Tensor α (Shape.append s [n])) :
    (PrimOp.l2NormLast eps s n).eval (.cons x .nil) = Tensor.l2NormLast eps s x := rfl

/-- `binary` on a rank-3 tensor, at two leading indices. -/
theorem eval_binary3 (g : BinaryFn) (a b c : Nat) (x y : Tensor α [a, b, c]) (i : Fin a) (j : Fin b) :
    (PrimOp.binary g [a, b, c]).eval (.cons x (.cons y .nil)) i j = fun k => g.apply (x i j k) (y i j k) := rfl

/-- `binary` on a rank-2 tensor, at a leading index. -/
theorem eval_binary2 (g : BinaryFn) (a b : Nat) (x y : Tensor α [a, b]) (i : Fin a) :
    (PrimOp.binary g [a, b]).eval (.cons x (.cons y .nil)) i = fun k => g.apply (x i k) (y i k) := rfl

end PrimOp

/-! ## Terms -/

@[simp] theorem Term.eval_var {Γ : List Shape} {s : Shape} (v : Var Γ s) (env : Env α Γ) :
    (Term.var v).eval env = env.get v := by
  simp only [Term.eval]

@[simp] theorem Term.eval_op {Γ ins : List Shape} {out : Shape} (p : PrimOp α ins out)
    (args : Args α Γ ins) (env : Env α Γ) :
    (Term.op p args).eval env = p.eval (args.eval env) := by
  simp only [Term.eval]

/-- `let1` evaluates its bound term once and passes the value to the body. -/
@[simp] theorem Term.eval_let1 {Γ : List Shape} {s t : Shape} (e : Term α Γ s)
    (b : Term α (s :: Γ) t) (env : Env α Γ) :
    (Term.let1 e b).eval env = b.eval (.cons (e.eval env) env) := by
  simp only [Term.eval]

@[simp] theorem Args.eval_nil {Γ : List Shape} (env : Env α Γ) :
    (Args.nil : Args α Γ []).eval env = .nil := by
  simp only [Args.eval]

@[simp] theorem Args.eval_cons {Γ : List Shape} {s : Shape} {ss : List Shape} (t : Term α Γ s)
    (ts : Args α Γ ss) (env : Env α Γ) :
    (Args.cons t ts).eval env = .cons (t.eval env) (ts.eval env) := by
  simp only [Args.eval]

/-- Composition: a unary operation applied to a term means the operation of its meaning. -/
theorem Term.eval_op1 {Γ : List Shape} {s out : Shape} (p : PrimOp α [s] out) (t : Term α Γ s)
    (env : Env α Γ) :
    (Term.op p (.cons t .nil)).eval env = p.eval (.cons (t.eval env) .nil) := by
  simp

/-- Composition: a binary operation applied to two terms. -/
theorem Term.eval_op2 {Γ : List Shape} {s₁ s₂ out : Shape} (p : PrimOp α [s₁, s₂] out)
    (t₁ : Term α Γ s₁) (t₂ : Term α Γ s₂) (env : Env α Γ) :
    (Term.op p (.cons t₁ (.cons t₂ .nil))).eval env =
      p.eval (.cons (t₁.eval env) (.cons (t₂.eval env) .nil)) := by
  simp

/-- Sharing does not change meaning: binding `e` and using it through the new variable means
the same as using `e` directly (here for a body that uses the bound value once, via `f`). -/
theorem Term.eval_let1_var {Γ : List Shape} {s t : Shape} (e : Term α Γ s) (p : PrimOp α [s] t)
    (env : Env α Γ) :
    (Term.let1 e (.op p (.cons (.var .here) .nil))).eval env =
      (Term.op p (.cons e .nil)).eval env := by
  simp

/-- The forward pass of a model evaluates its graph on parameters followed by inputs. -/
theorem Model.specFwd_eq (m : Model α) (params : Env α m.params.shapes)
    (inputs : Env α m.inputs.shapes) :
    m.specFwd params inputs = m.body.eval (params.append inputs) := rfl

end KimiK3
