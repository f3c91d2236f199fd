module

public import KimiK3.Core.GraphEval
public import KimiK3.Core.Program

/-!
# Graph programs: shared bindings, then several outputs

A `Model`'s outputs are independent terms, so a value that two outputs need is computed (and
exported) twice. A `Program` binds its intermediate values once (`Lets`, a chain of `let1`s)
and reads all outputs from the final context; the JSON exporter emits each binding once.

* `Lets Γ Δ` (bindings taking context `Γ` to `Δ`, each pushing one entry) and `Program` are
  defined in `Core/Program.lean` (so that the JSON exporter of `Core/Json.lean` can serialize
  programs); here: `Lets.eval`, `Lets.wrap` (the same bindings as nested `Term.let1`),
  `eval_wrap`, `Program.eval`; `Program.toModel` (each output wrapped in the bindings) and
  `toModel_specFwd` (the model computes the program's outputs);
* `Term.weakenEnd Δ t`: a term of context `Γ` used in `Γ ++ Δ` (`eval_weakenEnd`), to reuse a
  graph of a small context inside a bigger one.

Executable definitions here only build terms (constructors); see `Core/Kernel.lean` for why
generic callers in other modules must be `@[macro_inline]`.
-/

@[expose] public section

namespace KimiK3

/-- Appending entries at the far end keeps every entry's position. -/
theorem Shape.entryAt_appendList : (Γ Δ : List Shape) → (i : Nat) → {s : Shape} →
    Shape.entryAt Γ i = some s → Shape.entryAt (Shape.appendList Γ Δ) i = some s
  | [], _, i, _, h => (Var.not_nil i h).elim
  | _ :: _, _, 0, _, h => h
  | _ :: Γ, Δ, i + 1, _, h => Shape.entryAt_appendList Γ Δ i h

/-- A variable of `Γ` as a variable of `Γ ++ Δ` (entries appended at the far end): the same index. -/
def Var.weakenEnd (Δ : List Shape) {Γ : List Shape} {s : Shape} (v : Var Γ s) : Var (Shape.appendList Γ Δ) s :=
  ⟨v.idx, Shape.entryAt_appendList Γ Δ v.idx v.valid⟩

mutual

/-- A term of context `Γ` as a term of `Γ ++ Δ`. -/
def Term.weakenEnd {α : Type} (Δ : List Shape) : {Γ : List Shape} → {s : Shape} → Term α Γ s →
    Term α (Shape.appendList Γ Δ) s
  | _, _, .var v => .var (v.weakenEnd Δ)
  | _, _, .op p args => .op p (Args.weakenEnd Δ args)
  | _, _, .let1 t b => .let1 (Term.weakenEnd Δ t) (Term.weakenEnd Δ b)

/-- Argument lists of context `Γ` as argument lists of `Γ ++ Δ`. -/
def Args.weakenEnd {α : Type} (Δ : List Shape) : {Γ ss : List Shape} → Args α Γ ss →
    Args α (Shape.appendList Γ Δ) ss
  | _, _, .nil => .nil
  | _, _, .cons t ts => .cons (Term.weakenEnd Δ t) (Args.weakenEnd Δ ts)

end

/-- The bindings as nested `Term.let1` around a term of the final context. -/
def Lets.wrap {α : Type} : {Γ Δ : List Shape} → {s : Shape} → Lets α Γ Δ → Term α Δ s → Term α Γ s
  | _, _, _, .nil, t => t
  | _, _, _, .bind b rest, t => .let1 b (Lets.wrap rest t)

/-- Wrap every term of an argument list in the bindings. -/
def Lets.wrapArgs {α : Type} {Γ Δ : List Shape} (l : Lets α Γ Δ) : {ss : List Shape} →
    Args α Δ ss → Args α Γ ss
  | _, .nil => .nil
  | _, .cons t ts => .cons (l.wrap t) (Lets.wrapArgs l ts)

/-- The program as a `Model`: each output term wrapped in all the bindings (same meaning,
`toModel_specFwd`; the exporter of programs emits the bindings once instead). -/
def Program.toModel {α : Type} (p : Program α) : Model α where
  params := p.params
  inputs := p.inputs
  outputs := p.outputs
  body := p.lets.wrapArgs p.body

section Eval

variable {α : Type} [Scalar α]

/-- The environment after the bindings. -/
noncomputable def Lets.eval : {Γ Δ : List Shape} → Lets α Γ Δ → Env α Γ → Env α Δ
  | _, _, .nil, env => env
  | _, _, .bind t rest, env => Lets.eval rest (.cons (t.eval env) env)

/-- The outputs of a program on parameters and inputs. -/
noncomputable def Program.eval (p : Program α) (params : Env α p.params.shapes)
    (inputs : Env α p.inputs.shapes) : Env α p.outputs.shapes :=
  p.body.eval (p.lets.eval (params.append inputs))

@[simp] theorem Lets.eval_nil {Γ : List Shape} (env : Env α Γ) : (Lets.nil : Lets α Γ Γ).eval env = env := rfl

@[simp] theorem Lets.eval_bind {Γ Δ : List Shape} {s : Shape} (t : Term α Γ s) (rest : Lets α (s :: Γ) Δ)
    (env : Env α Γ) : (Lets.bind t rest).eval env = rest.eval (.cons (t.eval env) env) := rfl

/-- The wrapped term means the term in the environment after the bindings. -/
theorem Lets.eval_wrap {Γ Δ : List Shape} {s : Shape} (l : Lets α Γ Δ) (t : Term α Δ s) (env : Env α Γ) :
    (l.wrap t).eval env = t.eval (l.eval env) := by
  induction l with
  | nil => rfl
  | bind b rest ih => simp [Lets.wrap, ih]

theorem Lets.eval_wrapArgs {Γ Δ : List Shape} (l : Lets α Γ Δ) (env : Env α Γ) :
    {ss : List Shape} → (a : Args α Δ ss) → (l.wrapArgs a).eval env = a.eval (l.eval env)
  | _, .nil => rfl
  | _, .cons t ts => by simp [Lets.wrapArgs, Lets.eval_wrap, Lets.eval_wrapArgs l env ts]

/-- **The model of a program computes the program's outputs.** -/
theorem Program.toModel_specFwd (p : Program α) (params : Env α p.params.shapes)
    (inputs : Env α p.inputs.shapes) : p.toModel.specFwd params inputs = p.eval params inputs := by
  simp [Model.specFwd, Program.toModel, Program.eval, Lets.eval_wrapArgs]

omit [Scalar α] in
theorem Env.get_weakenEnd {Γ Δ : List Shape} {s : Shape} (e : Env α Γ) (e' : Env α Δ) (v : Var Γ s) :
    (e.append e').get (v.weakenEnd Δ) = e.get v :=
  match Γ, e, v with
  | _ :: _, .cons _ _, ⟨0, h⟩ => by obtain rfl := Var.head_eq h; rfl
  | _ :: _, .cons _ e, ⟨i + 1, h⟩ => Env.get_weakenEnd e e' ⟨i, h⟩
  | [], _, ⟨i, h⟩ => (Var.not_nil i h).elim

mutual

/-- A weakened term means the term on the front part of the environment. -/
theorem Term.eval_weakenEnd {Δ : List Shape} (e' : Env α Δ) : {Γ : List Shape} → {s : Shape} →
    (t : Term α Γ s) → (e : Env α Γ) → (t.weakenEnd Δ).eval (e.append e') = t.eval e
  | _, _, .var v, e => by simp [Term.weakenEnd, Env.get_weakenEnd]
  | _, _, .op p args, e => by simp [Term.weakenEnd, Args.eval_weakenEnd e' args e]
  | _, _, .let1 t b, e => by
    simp only [Term.weakenEnd, Term.eval_let1]
    rw [Term.eval_weakenEnd e' t e]
    exact Term.eval_weakenEnd e' b (.cons (t.eval e) e)

theorem Args.eval_weakenEnd {Δ : List Shape} (e' : Env α Δ) : {Γ ss : List Shape} →
    (a : Args α Γ ss) → (e : Env α Γ) → (a.weakenEnd Δ).eval (e.append e') = a.eval e
  | _, _, .nil, _ => by simp [Args.weakenEnd]
  | _, _, .cons t ts, e => by
    simp only [Args.weakenEnd, Args.eval_cons]
    rw [Term.eval_weakenEnd e' t e, Args.eval_weakenEnd e' ts e]

end

end Eval

end KimiK3
