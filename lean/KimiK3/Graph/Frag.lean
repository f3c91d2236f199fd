module

public import KimiK3.Graph.Kernel

/-!
# Graph fragments: what they mean (theorems)

The fragment builders are in `Kernel.lean`; here their meaning: `Renaming.Respects` and
`Term.eval_rename` (a renamed term means the term), `VarList.self_cons` (`self` by recursion on
the context), `VarList.eval` with its lemmas (`eval_self`,
`eval_split`, `eval_splitSig`, `get_ofRep`, `eval_ofFnRep`, `eval_appendSig`, `eval_unprefix`),
the environments of signature blocks (`Env.split`, `Env.appendSig`, `Env.splitSig`,
`Env.ofRep`, `Env.toPrefix`; proof-only), `Lets.get_liftVar` (a lifted variable keeps its
value), `Frag.denote` with `denote_bind`, `denote_seq` and the composition lemmas
`denote_seq_of`, `denote_seq1_of`, `denote_seqSplit_of`, `Frag.denote_ofModel`,
`Program.eval_ofFrag`.
-/

@[expose] public section

namespace KimiK3

/-- A renaming that reads, in `env'`, the values `env` gives. -/
abbrev Renaming.Respects {α : Type} {Γ Δ : List Shape} (ρ : Renaming Γ Δ) (env : Env α Γ) (env' : Env α Δ) :
    Prop :=
  ∀ {s : Shape} (v : Var Γ s), env'.get (ρ v) = env.get v

theorem Renaming.Respects.lift {α : Type} {Γ Δ : List Shape} {t : Shape} {ρ : Renaming Γ Δ} {env : Env α Γ}
    {env' : Env α Δ} (h : Renaming.Respects ρ env env') (x : Tensor α t) :
    Renaming.Respects (Renaming.lift (t := t) ρ) (.cons x env) (.cons x env') := by
  intro s v
  match v with
  | ⟨0, _⟩ => rfl
  | ⟨i + 1, hv⟩ => exact h ⟨i, hv⟩

section RenameEval

variable {α : Type} [Scalar α]

mutual

/-- **A renamed term means the term** in an environment the renaming respects. -/
theorem Term.eval_rename {Γ Δ : List Shape} {ρ : Renaming Γ Δ} {env : Env α Γ} {env' : Env α Δ}
    (h : Renaming.Respects ρ env env') : {s : Shape} → (t : Term α Γ s) → (t.rename ρ).eval env' = t.eval env
  | _, .var v => by
    show env'.get (ρ v) = env.get v
    exact h v
  | _, .op p args => by
    show p.eval ((args.rename ρ).eval env') = p.eval (args.eval env)
    rw [Args.eval_rename h args]
  | _, .let1 t b => by
    show (b.rename ρ.lift).eval (.cons ((t.rename ρ).eval env') env') = b.eval (.cons (t.eval env) env)
    rw [Term.eval_rename h t]
    exact Term.eval_rename (h.lift _) b

theorem Args.eval_rename {Γ Δ : List Shape} {ρ : Renaming Γ Δ} {env : Env α Γ} {env' : Env α Δ}
    (h : Renaming.Respects ρ env env') : {ss : List Shape} → (a : Args α Γ ss) → (a.rename ρ).eval env' = a.eval env
  | _, .nil => rfl
  | _, .cons t ts => by
    show Env.cons ((t.rename ρ).eval env') ((ts.rename ρ).eval env') = Env.cons (t.eval env) (ts.eval env)
    rw [Term.eval_rename h t, Args.eval_rename h ts]

end

end RenameEval

theorem Signature.append_eq (a b : Signature) : Signature.append a b = a ++ b := by
  induction a with
  | nil => rfl
  | cons x a ih =>
    show x :: Signature.append a b = x :: (a ++ b)
    rw [ih]

namespace VarList

variable {Γ Δ : List Shape}

section Eval

variable {α : Type}

/-- The values of the variables (proof-only). -/
noncomputable def eval (env : Env α Γ) : {ss : List Shape} → VarList Γ ss → Env α ss
  | _, .nil => .nil
  | _, .cons v vs => .cons (env.get v) (eval env vs)

@[simp] theorem eval_nil (env : Env α Γ) : (VarList.nil : VarList Γ []).eval env = .nil := rfl

@[simp] theorem eval_cons (env : Env α Γ) {s : Shape} {ss : List Shape} (v : Var Γ s)
    (vs : VarList Γ ss) : (VarList.cons v vs).eval env = .cons (env.get v) (vs.eval env) := rfl

theorem eval_map {ρ : Renaming Γ Δ} {env : Env α Γ} {env' : Env α Δ}
    (h : ∀ {s : Shape} (v : Var Γ s), env'.get (ρ v) = env.get v) :
    {ss : List Shape} → (vs : VarList Γ ss) → (vs.map ρ).eval env' = vs.eval env
  | _, .nil => rfl
  | _, .cons v vs => by
    show Env.cons (env'.get (ρ v)) ((vs.map ρ).eval env') = Env.cons (env.get v) (vs.eval env)
    rw [h v, eval_map h vs]

theorem get_toRenaming (env : Env α Γ) : {ss : List Shape} → (vs : VarList Γ ss) → {s : Shape} →
    (w : Var ss s) → env.get (vs.toRenaming w) = (vs.eval env).get w
  | _, .cons _ _, _, ⟨0, h⟩ => by obtain rfl := Var.head_eq h; rfl
  | _, .cons _ vs, _, ⟨i + 1, h⟩ => get_toRenaming env vs ⟨i, h⟩
  | _, .nil, _, ⟨i, h⟩ => (Var.not_nil i h).elim

/-- Renaming by a variable list respects the list's values. -/
theorem respects_toRenaming [Scalar α] (env : Env α Γ) {ss : List Shape} (vs : VarList Γ ss) :
    Renaming.Respects vs.toRenaming (vs.eval env) env :=
  fun w => get_toRenaming env vs w

/-- `selfFrom` one position further into a context with one more entry in front is the list
one position in, every variable lifted over that entry. -/
theorem selfFrom_succ (t : Shape) (Δ : List Shape) : (Γ : List Shape) → (k : Nat) →
    (h : ∀ i, Shape.entryAt Γ i = Shape.entryAt (t :: Δ) (k + 1 + i)) →
    (h' : ∀ i, Shape.entryAt Γ i = Shape.entryAt Δ (k + i)) →
    selfFrom (t :: Δ) Γ (k + 1) h = (selfFrom Δ Γ k h').map (fun v => .there v)
  | [], _, _, _ => rfl
  | _ :: Γ, k, _, _ => by
    simp only [selfFrom, map]
    congr 1
    exact selfFrom_succ t Δ Γ (k + 1) _ _

/-- `self` by recursion on the context: the front entry, then the rest's variables lifted. -/
theorem self_cons (s : Shape) (Γ : List Shape) :
    self (s :: Γ) = .cons .here ((self Γ).map (fun v => .there v)) := by
  simp only [self, selfFrom]
  congr 1
  exact selfFrom_succ s Γ Γ 0 _ _

theorem eval_self : {Γ : List Shape} → (env : Env α Γ) → (self Γ).eval env = env
  | _, .nil => rfl
  | _, .cons x env => by
    rw [self_cons]
    simp only [eval_cons]
    rw [eval_map (ρ := fun v => .there v) (env := env) (env' := .cons x env) (fun _ => rfl), eval_self env]
    rfl

theorem toArgs_eval [Scalar α] (env : Env α Γ) : {ss : List Shape} → (vs : VarList Γ ss) →
    (vs.toArgs (α := α)).eval env = vs.eval env
  | _, .nil => rfl
  | _, .cons v vs => by
    show Env.cons (env.get v) ((toArgs (α := α) vs).eval env) = Env.cons (env.get v) (vs.eval env)
    rw [toArgs_eval env vs]

theorem eval_append (env : Env α Γ) : {ss tt : List Shape} → (vs : VarList Γ ss) → (ws : VarList Γ tt) →
    (vs.append ws).eval env = (vs.eval env).append (ws.eval env)
  | _, _, .nil, _ => rfl
  | _, _, .cons v vs, ws => by
    show Env.cons (env.get v) ((vs.append ws).eval env) = Env.cons (env.get v) ((vs.eval env).append (ws.eval env))
    rw [eval_append env vs ws]

theorem head_eval (env : Env α Γ) {s : Shape} {ss : List Shape} (vs : VarList Γ (s :: ss)) :
    env.get vs.head = (vs.eval env).head := by
  cases vs; rfl

theorem tail_eval (env : Env α Γ) {s : Shape} {ss : List Shape} (vs : VarList Γ (s :: ss)) :
    vs.tail.eval env = (vs.eval env).tail := by
  cases vs; rfl

end Eval

end VarList

/-! ## Splitting environments like variable lists (proof-only) -/

namespace Env

variable {α : Type}

/-- Two environments with one more entry are equal iff the entries and the rests are. -/
theorem cons_inj {s : Shape} {Γ : List Shape} {x y : Tensor α s} {e e' : Env α Γ} :
    Env.cons x e = Env.cons y e' ↔ x = y ∧ e = e' := by
  constructor
  · intro h
    exact ⟨congrArg Env.head h, congrArg Env.tail h⟩
  · rintro ⟨rfl, rfl⟩
    rfl

/-- An environment for `P ++ Q` split into its parts. -/
noncomputable def split : (P : List Shape) → {Q : List Shape} → Env α (Shape.appendList P Q) → Env α P × Env α Q
  | [], _, e => (.nil, e)
  | _ :: P, _, .cons x e => (.cons x (split P e).1, (split P e).2)

/-- Two environments for the shapes of the signatures `A` and `B` as one for `A ++ B`. -/
noncomputable def appendSig : (A : Signature) → {B : Signature} → Env α (Signature.shapes A) →
    Env α (Signature.shapes B) → Env α (Signature.shapes (Signature.append A B))
  | [], _, .nil, e => e
  | _ :: A, _, .cons x ea, eb => .cons x (appendSig A ea eb)

/-- An environment for the shapes of `A ++ B` split into its `A` and `B` parts. -/
noncomputable def splitSig : (A : Signature) → {B : Signature} → Env α (Signature.shapes (Signature.append A B)) →
    Env α (Signature.shapes A) × Env α (Signature.shapes B)
  | [], _, e => (.nil, e)
  | _ :: A, _, .cons x e => (.cons x (splitSig A e).1, (splitSig A e).2)

@[simp] theorem split_append : (P : List Shape) → {Q : List Shape} → (a : Env α P) → (b : Env α Q) →
    split P (a.append b) = (a, b)
  | [], _, .nil, _ => rfl
  | _ :: P, _, .cons x a, b => by
    show (Env.cons x (split P (a.append b)).1, (split P (a.append b)).2) = (Env.cons x a, b)
    rw [split_append P a b]

@[simp] theorem splitSig_appendSig : (A : Signature) → {B : Signature} → (a : Env α (Signature.shapes A)) →
    (b : Env α (Signature.shapes B)) → splitSig A (appendSig A a b) = (a, b)
  | [], _, .nil, _ => rfl
  | _ :: A, _, .cons x a, b => by
    show (Env.cons x (splitSig A (appendSig A a b)).1, (splitSig A (appendSig A a b)).2) = (Env.cons x a, b)
    rw [splitSig_appendSig A a b]

end Env

theorem VarList.eval_split {α : Type} {Γ : List Shape} (env : Env α Γ) : (P : List Shape) → {Q : List Shape} →
    (vs : VarList Γ (Shape.appendList P Q)) →
    ((split P vs).1.eval env, (split P vs).2.eval env) = Env.split P (vs.eval env)
  | [], _, _ => rfl
  | _ :: P, _, .cons v vs => by
    have h := eval_split env P vs
    simp only [split, eval_cons, Env.split]
    rw [← h]

theorem VarList.eval_splitSig {α : Type} {Γ : List Shape} (env : Env α Γ) : (A : Signature) → {B : Signature} →
    (vs : VarList Γ (Signature.shapes (Signature.append A B))) →
    ((splitSig A vs).1.eval env, (splitSig A vs).2.eval env) = Env.splitSig A (vs.eval env)
  | [], _, _ => rfl
  | _ :: A, _, .cons v vs => by
    have h := eval_splitSig env A vs
    simp only [splitSig, eval_cons, Env.splitSig]
    rw [← h]

theorem VarList.eval_split_fst {α : Type} {Γ : List Shape} {P Q : List Shape} (env : Env α Γ)
    (vs : VarList Γ (Shape.appendList P Q)) {a : Env α P} {b : Env α Q}
    (h : vs.eval env = a.append b) : (vs.split P).1.eval env = a := by
  have := VarList.eval_split env P vs
  rw [h, Env.split_append] at this
  exact (Prod.mk.inj this).1

theorem VarList.eval_split_snd {α : Type} {Γ : List Shape} {P Q : List Shape} (env : Env α Γ)
    (vs : VarList Γ (Shape.appendList P Q)) {a : Env α P} {b : Env α Q}
    (h : vs.eval env = a.append b) : (vs.split P).2.eval env = b := by
  have := VarList.eval_split env P vs
  rw [h, Env.split_append] at this
  exact (Prod.mk.inj this).2

theorem VarList.eval_splitSig_fst {α : Type} {Γ : List Shape} {A B : Signature} (env : Env α Γ)
    (vs : VarList Γ (Signature.shapes (Signature.append A B))) {a : Env α (Signature.shapes A)}
    {b : Env α (Signature.shapes B)} (h : vs.eval env = Env.appendSig A a b) :
    (vs.splitSig A).1.eval env = a := by
  have := VarList.eval_splitSig env A vs
  rw [h, Env.splitSig_appendSig] at this
  exact (Prod.mk.inj this).1

theorem VarList.eval_splitSig_snd {α : Type} {Γ : List Shape} {A B : Signature} (env : Env α Γ)
    (vs : VarList Γ (Signature.shapes (Signature.append A B))) {a : Env α (Signature.shapes A)}
    {b : Env α (Signature.shapes B)} (h : vs.eval env = Env.appendSig A a b) :
    (vs.splitSig A).2.eval env = b := by
  have := VarList.eval_splitSig env A vs
  rw [h, Env.splitSig_appendSig] at this
  exact (Prod.mk.inj this).2

/-- The environment of a block of `repSig` from a function of the entry index. -/
noncomputable def Env.ofRep {α : Type} {name : String} {s : Shape} : {t : Nat} → (n : Nat) → (Fin n → Tensor α s) →
    Env α (Signature.shapes (repSig name s t n))
  | _, 0, _ => .nil
  | _, n + 1, f => .cons (f ⟨0, by omega⟩) (Env.ofRep n (fun i => f ⟨i.val + 1, by omega⟩))

theorem VarList.get_ofRep {α : Type} {Γ : List Shape} {name : String} {s : Shape} (env : Env α Γ) :
    {t n : Nat} → (vs : VarList Γ (Signature.shapes (repSig name s t n))) → (f : Fin n → Tensor α s) →
    vs.eval env = Env.ofRep n f → ∀ i, env.get (vs.ofRep i) = f i
  | _, 0, _, _, _, i => i.elim0
  | _, n + 1, .cons v vs, f, h, i => by
    simp only [eval_cons, Env.ofRep] at h
    obtain ⟨h₁, h₂⟩ := Env.cons_inj.mp h
    by_cases hi : i.val = 0
    · simp only [ofRep, hi, dite_true, h₁]
      rw [show i = ⟨0, by omega⟩ from Fin.ext hi]
    · simp only [ofRep, hi, dite_false]
      rw [get_ofRep env vs _ h₂ ⟨i.val - 1, by omega⟩]
      exact congrArg f (Fin.ext (show i.val - 1 + 1 = i.val by omega))

theorem VarList.eval_ofFnRep {α : Type} {Γ : List Shape} {name : String} {s : Shape} (env : Env α Γ) :
    {t : Nat} → (n : Nat) → (f : Fin n → Var Γ s) →
    (VarList.ofFnRep (name := name) (t := t) n f).eval env = Env.ofRep n (fun i => env.get (f i))
  | _, 0, _ => rfl
  | _, n + 1, f => by
    simp only [ofFnRep, eval_cons, Env.ofRep]
    rw [eval_ofFnRep env n]

theorem VarList.eval_appendSig {α : Type} {Γ : List Shape} (env : Env α Γ) : (A : Signature) →
    {B : Signature} → (va : VarList Γ (Signature.shapes A)) → (vb : VarList Γ (Signature.shapes B)) →
    (VarList.appendSig A va vb).eval env = Env.appendSig A (va.eval env) (vb.eval env)
  | [], _, .nil, _ => rfl
  | _ :: A, _, .cons v va, vb => by
    simp only [appendSig, eval_cons, Env.appendSig]
    rw [eval_appendSig env A va vb]

namespace Lets

variable {α : Type} [Scalar α]

theorem eval_append {Γ Δ Θ : List Shape} (l : Lets α Γ Δ) (m : Lets α Δ Θ) (env : Env α Γ) :
    (l.append m).eval env = m.eval (l.eval env) := by
  induction l with
  | nil => rfl
  | bind t rest ih => exact ih m _

/-- **A variable keeps its value through bindings.** -/
theorem get_liftVar {Γ Δ : List Shape} (l : Lets α Γ Δ) (env : Env α Γ) {s : Shape} (v : Var Γ s) :
    (l.eval env).get (l.liftVar v) = env.get v := by
  induction l with
  | nil => rfl
  | bind t rest ih => exact ih _ (.there v)

theorem liftVar_respects {Γ Δ : List Shape} (l : Lets α Γ Δ) (env : Env α Γ) :
    Renaming.Respects l.liftVar env (l.eval env) :=
  fun v => get_liftVar l env v

end Lets

namespace Frag

variable {α : Type} {Γ ss tt : List Shape}

section Denote

variable [Scalar α]

/-- The values of the results in environment `env`. -/
noncomputable def denote (f : Frag α Γ ss) (env : Env α Γ) : Env α ss := f.out.eval (f.lets.eval env)

@[simp] theorem denote_pure (vs : VarList Γ ss) (env : Env α Γ) :
    (pure (α := α) vs).denote env = vs.eval env := rfl

@[simp] theorem denote_bind {s : Shape} (t : Term α Γ s) (k : Var (s :: Γ) s → Frag α (s :: Γ) ss)
    (env : Env α Γ) : (bind t k).denote env = (k .here).denote (.cons (t.eval env) env) := rfl

theorem denote_seq (f : Frag α Γ ss) (k : (Δ : List Shape) → Renaming Γ Δ → VarList Δ ss → Frag α Δ tt)
    (env : Env α Γ) : (f.seq k).denote env = (k f.ctx f.lets.liftVar f.out).denote (f.lets.eval env) := by
  simp only [seq, denote, Lets.eval_append]

/-- The results of a fragment read in the environment after its bindings. -/
theorem out_eval (f : Frag α Γ ss) (env : Env α Γ) : f.out.eval (f.lets.eval env) = f.denote env := rfl

/-- **Composition**: if `f` means `vals`, and the continuation means `res` in every context
that extends `Γ` with the old values kept and results meaning `vals`, the sequence means
`res`. -/
theorem denote_seq_of {f : Frag α Γ ss} {k : (Δ : List Shape) → Renaming Γ Δ → VarList Δ ss → Frag α Δ tt}
    {env : Env α Γ} {vals : Env α ss} {res : Env α tt} (hf : f.denote env = vals)
    (hk : ∀ (Δ : List Shape) (ρ : Renaming Γ Δ) (outs : VarList Δ ss) (env' : Env α Δ),
      Renaming.Respects ρ env env' → outs.eval env' = vals → (k Δ ρ outs).denote env' = res) :
    (f.seq k).denote env = res := by
  rw [denote_seq]
  exact hk _ _ _ _ (Lets.liftVar_respects f.lets env) hf

theorem denote_seq1_of {s : Shape} {f : Frag α Γ [s]} {k : (Δ : List Shape) → Renaming Γ Δ → Var Δ s → Frag α Δ tt}
    {env : Env α Γ} {a : Tensor α s} {res : Env α tt} (hf : f.denote env = .cons a .nil)
    (hk : ∀ (Δ : List Shape) (ρ : Renaming Γ Δ) (v : Var Δ s) (env' : Env α Δ),
      Renaming.Respects ρ env env' → env'.get v = a → (k Δ ρ v).denote env' = res) :
    (f.seq1 k).denote env = res :=
  denote_seq_of hf fun Δ ρ outs env' hρ hout => hk Δ ρ outs.head env' hρ (by
    rw [VarList.head_eval, hout]; rfl)

theorem denote_seqSplit_of {P Q : List Shape} {f : Frag α Γ (Shape.appendList P Q)}
    {k : (Δ : List Shape) → Renaming Γ Δ → VarList Δ P → VarList Δ Q → Frag α Δ tt}
    {env : Env α Γ} {a : Env α P} {b : Env α Q} {res : Env α tt} (hf : f.denote env = a.append b)
    (hk : ∀ (Δ : List Shape) (ρ : Renaming Γ Δ) (o₁ : VarList Δ P) (o₂ : VarList Δ Q) (env' : Env α Δ),
      Renaming.Respects ρ env env' → o₁.eval env' = a → o₂.eval env' = b → (k Δ ρ o₁ o₂).denote env' = res) :
    (f.seqSplit k).denote env = res :=
  denote_seq_of hf fun Δ ρ outs env' hρ hout => hk Δ ρ _ _ env' hρ (VarList.eval_split_fst env' outs hout)
    (VarList.eval_split_snd env' outs hout)

end Denote

end Frag

/-- A component's environment as the environment of its prefixed block. -/
noncomputable def Env.toPrefix {α : Type} (pre : String) : (sig : Signature) → Env α (Signature.shapes sig) →
    Env α (Signature.shapes (Signature.prefix pre sig))
  | [], .nil => .nil
  | _ :: sig, .cons x e => .cons x (Env.toPrefix pre sig e)

theorem VarList.eval_unprefix {α : Type} {Γ : List Shape} (env : Env α Γ) (pre : String) :
    (sig : Signature) → (vs : VarList Γ (Signature.shapes (Signature.prefix pre sig))) →
    (e : Env α (Signature.shapes sig)) → vs.eval env = Env.toPrefix pre sig e →
    (VarList.unprefix pre sig vs).eval env = e
  | [], .nil, .nil, _ => rfl
  | _ :: sig, .cons v vs, .cons x e, h => by
    simp only [eval_cons, Env.toPrefix] at h
    simp only [unprefix, eval_cons, (Env.cons_inj.mp h).1, eval_unprefix env pre sig vs e (Env.cons_inj.mp h).2]

namespace Frag

variable {α : Type} [Scalar α]

theorem denote_ofArgs {Θ Γ : List Shape} : {ss : List Shape} → (args : Args α Θ ss) →
    (ρ : Renaming Θ Γ) → (env' : Env α Θ) → (env : Env α Γ) → Renaming.Respects ρ env' env →
    (ofArgs args ρ).denote env = args.eval env'
  | [], .nil, _, _, _, _ => rfl
  | _ :: _, .cons t ts, ρ, env', env, h => by
    simp only [ofArgs, denote_bind, denote_seq, denote_pure, VarList.eval_cons, Lets.get_liftVar,
      Env.get_here, Args.eval_cons]
    rw [Term.eval_rename h t]
    exact congrArg (Env.cons _) (denote_ofArgs ts _ env' _ (fun w => h w))

/-- **A model inside a fragment computes the model**, on the values of the variables. -/
theorem denote_ofModel {Γ : List Shape} (m : Model α)
    (vs : VarList Γ (Shape.appendList m.params.shapes m.inputs.shapes)) (env : Env α Γ)
    (ps : Env α m.params.shapes) (is : Env α m.inputs.shapes) (h : vs.eval env = ps.append is) :
    (ofModel m vs).denote env = m.specFwd ps is := by
  rw [ofModel, denote_ofArgs m.body _ (vs.eval env) env (VarList.respects_toRenaming env vs), h]
  rfl

end Frag

theorem Program.eval_ofFrag {α : Type} [Scalar α] (params inputs outputs : Signature)
    (f : Frag α (Shape.appendList params.shapes inputs.shapes) outputs.shapes)
    (ps : Env α params.shapes) (is : Env α inputs.shapes) :
    (Program.ofFrag params inputs outputs f).eval ps is = f.denote (ps.append is) := by
  simp only [Program.eval, Program.ofFrag, VarList.toArgs_eval, Frag.denote]

end KimiK3
