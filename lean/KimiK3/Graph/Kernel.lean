module

public import KimiK3.Graph.Program
public import KimiK3.Core.Json
public import KimiK3.Sequence.Graphs
public import KimiK3.Depth.Graph
public import KimiK3.Channel.ExpertGraph
public import KimiK3.Channel.LatentMoEModel
public import KimiK3.Model.Config
public import KimiK3.Model.Backbone
public import KimiK3.Vision.BlockGraph

/-!
# Executable kernel of the whole-step graphs (k3-spec §2.2–2.5)

**Every executable graph-building definition of `KimiK3/Graph` is in this one module**, for the
toolchain reason of `Core/Kernel.lean`: the offline compiler cannot compile a call from one
module to another module's type-generic function (`Unknown constant f._redArg`), and these
builders are generic over the scalar type, recursive and call one another. Helpers of other
folders they use are `@[macro_inline]` (inlined here); `MoEGraph.sumTerms`, recursive, has a
copy here (`Decoder.sumTerms`, equal: `DecoderEval.lean`). Theorems are in the other files of
the folder.

* **Fragments** (named bindings instead of hand-counted de Bruijn indices): `Sub`/`Var.up` (a
  variable of an enclosing context, lifted by instance search), `Renaming`, `Term.rename`,
  `VarList` (`split`, `splitSig`, `ofRep`, `ofFnRep`, `appendSig`, `unprefix`), `repSig`,
  `Signature.append`, `Signature.prefix`, `Lets.append`, `Lets.liftVar`, `Frag` with `pure`,
  `bind`, `seq`, `seq1`, `seqSplit`, `ofArgs`, `ofModel`, `Program.ofFrag`;
* **the KDA layer** for any convolution width (`KDA.layerFrag`, `KDA.layerProgram`, export
  `KDA.layerStepJsonTiny`);
* **the decoder token step** (`Decoder.program`: every layer of the schedule, then the head),
  exports `Decoder.jsonTiny` (tiny configuration, 3 past tokens) and `Decoder.jsonPaper`
  (paper configuration, 1 past token);
* **the MoonViT-V2 encoder** (`Vision.EncoderGraph.program`: the block graph
  `Vision.BlockGraph.model` once per block, then the final norm), export
  `Vision.EncoderGraph.jsonTiny` (tiny vision configuration, 2 blocks, one clip of 48 tokens).
-/

@[expose] public section

namespace KimiK3

/-! ## Variables of enclosing contexts -/

/-- Every variable of `Γ` is a variable of `Δ`: `Δ` is `Γ` with bindings pushed on top. Found
by instance search (`Sub.refl`, `Sub.cons`), so a variable bound several bindings ago is lifted
by `Var.up` without counting. -/
class Sub (Γ Δ : List Shape) where
  /-- The variable of `Δ` that is the variable `v` of `Γ`. -/
  lift : ∀ {s : Shape}, Var Γ s → Var Δ s

/-- A context is a sub-context of itself. -/
instance (priority := high) Sub.refl (Γ : List Shape) : Sub Γ Γ := ⟨fun v => v⟩

/-- A binding on top keeps the sub-context. -/
instance Sub.cons (Γ Δ : List Shape) (t : Shape) [h : Sub Γ Δ] : Sub Γ (t :: Δ) :=
  ⟨fun v => .there (h.lift v)⟩

/-- A variable of an enclosing context `Γ`, read in the current context `Δ`. -/
def Var.up {Γ Δ : List Shape} {s : Shape} [h : Sub Γ Δ] (v : Var Γ s) : Var Δ s := h.lift v

@[simp] theorem Var.up_refl {Γ : List Shape} {s : Shape} (v : Var Γ s) :
    @Var.up Γ Γ s (Sub.refl Γ) v = v := rfl

@[simp] theorem Var.up_cons {Γ Δ : List Shape} {s t : Shape} [h : Sub Γ Δ] (v : Var Γ s) :
    @Var.up Γ (t :: Δ) s (Sub.cons Γ Δ t) v = .there (Var.up v) := rfl

/-! ## Renamings -/

/-- A renaming: every variable of `Γ` as a variable of `Δ` (same shape). -/
abbrev Renaming (Γ Δ : List Shape) := ∀ {s : Shape}, Var Γ s → Var Δ s

/-- A renaming extended under one binding (the bound variable to itself). -/
def Renaming.lift {Γ Δ : List Shape} {t : Shape} (ρ : Renaming Γ Δ) : Renaming (t :: Γ) (t :: Δ) :=
  fun v => match v with
    | ⟨0, h⟩ => ⟨0, h⟩
    | ⟨i + 1, h⟩ => .there (ρ ⟨i, h⟩)

mutual

/-- A term with every variable renamed. -/
def Term.rename {α : Type} {Γ Δ : List Shape} (ρ : Renaming Γ Δ) : {s : Shape} → Term α Γ s → Term α Δ s
  | _, .var v => .var (ρ v)
  | _, .op p args => .op p (Args.rename ρ args)
  | _, .let1 t b => .let1 (Term.rename ρ t) (Term.rename ρ.lift b)

/-- An argument list with every variable renamed. -/
def Args.rename {α : Type} {Γ Δ : List Shape} (ρ : Renaming Γ Δ) : {ss : List Shape} → Args α Γ ss → Args α Δ ss
  | _, .nil => .nil
  | _, .cons t ts => .cons (Term.rename ρ t) (Args.rename ρ ts)

end

/-! ## Signatures one after the other -/

/-- Two signatures one after the other (own recursion: `List.append` does not compile offline,
and the shape lists of environments are data). -/
def Signature.append : Signature → Signature → Signature
  | [], b => b
  | x :: a, b => x :: Signature.append a b

/-! ## Lists of variables -/

/-- One variable of `Γ` for each shape of `ss`. -/
inductive VarList (Γ : List Shape) : List Shape → Type where
  /-- No variables. -/
  | nil : VarList Γ []
  /-- One more variable in front. -/
  | cons {s : Shape} {ss : List Shape} : Var Γ s → VarList Γ ss → VarList Γ (s :: ss)

namespace VarList

variable {Γ Δ : List Shape}

/-- The first variable. -/
def head {s : Shape} {ss : List Shape} : VarList Γ (s :: ss) → Var Γ s
  | .cons v _ => v

/-- All but the first variable. -/
def tail {s : Shape} {ss : List Shape} : VarList Γ (s :: ss) → VarList Γ ss
  | .cons _ vs => vs

/-- Every variable renamed. -/
def map (ρ : Renaming Γ Δ) : {ss : List Shape} → VarList Γ ss → VarList Δ ss
  | _, .nil => .nil
  | _, .cons v vs => .cons (ρ v) (map ρ vs)

/-- The variables as argument terms. -/
def toArgs {α : Type} : {ss : List Shape} → VarList Γ ss → Args α Γ ss
  | _, .nil => .nil
  | _, .cons v vs => .cons (.var v) (toArgs vs)

/-- The renaming that reads the `i`-th entry of `ss` as the `i`-th variable of the list. -/
def toRenaming : {ss : List Shape} → VarList Γ ss → Renaming ss Γ
  | _, .cons v _, _, ⟨0, h⟩ => Var.head_eq h ▸ v
  | _, .cons _ vs, _, ⟨i + 1, h⟩ => toRenaming vs ⟨i, h⟩
  | _, .nil, _, ⟨i, h⟩ => (Var.not_nil i h).elim

/-- Two lists one after the other. -/
def append : {ss tt : List Shape} → VarList Γ ss → VarList Γ tt → VarList Γ (Shape.appendList ss tt)
  | _, _, .nil, ws => ws
  | _, _, .cons v vs, ws => .cons v (append vs ws)

/-- The variables `k, k + 1, …` of `Δ`, whose entries from position `k` on are those of `Γ`. -/
def selfFrom (Δ : List Shape) : (Γ : List Shape) → (k : Nat) →
    (∀ i, Shape.entryAt Γ i = Shape.entryAt Δ (k + i)) → VarList Δ Γ
  | [], _, _ => .nil
  | _ :: Γ, k, h => .cons ⟨k, (h 0).symm⟩
      (selfFrom Δ Γ (k + 1) fun i => (h (i + 1)).trans (by rw [Nat.add_right_comm, Nat.add_assoc]))

/-- The variables of a context, in order (`self Γ` reads `Γ` itself). Built index by index
(`selfFrom`), in time linear in the context's length; `self_cons` is the recursion on the
context (the paper-dimension decoder's 9 644 inputs took 70 s when every level renamed the
list below it, docs/benchmarks-lean.md). -/
def self (Γ : List Shape) : VarList Γ Γ :=
  selfFrom Γ Γ 0 fun i => by rw [Nat.zero_add]

/-- A list for `P ++ Q` split into its `P` and `Q` parts. -/
def split : (P : List Shape) → {Q : List Shape} → VarList Γ (Shape.appendList P Q) →
    VarList Γ P × VarList Γ Q
  | [], _, vs => (.nil, vs)
  | _ :: P, _, .cons v vs => (.cons v (split P vs).1, (split P vs).2)

/-- A list for the shapes of the signature `A ++ B` split into its `A` and `B` parts. -/
def splitSig : (A : Signature) → {B : Signature} → VarList Γ (Signature.shapes (Signature.append A B)) →
    VarList Γ (Signature.shapes A) × VarList Γ (Signature.shapes B)
  | [], _, vs => (.nil, vs)
  | _ :: A, _, .cons v vs => (.cons v (splitSig A vs).1, (splitSig A vs).2)

end VarList

/-! ## Blocks of equally shaped entries -/

/-- The signature `name.t, name.(t+1), …` (`n` entries of shape `s`). -/
def repSig (name : String) (s : Shape) (t : Nat) : Nat → Signature
  | 0 => []
  | n + 1 => (name ++ "." ++ toString t, s) :: repSig name s (t + 1) n

/-- `repSig` unfolded once. -/
theorem repSig_succ (name : String) (s : Shape) (t n : Nat) :
    repSig name s t (n + 1) = (name ++ "." ++ toString t, s) :: repSig name s (t + 1) n := rfl

/-- The variables of a block of `repSig` as a function of the entry index. -/
def VarList.ofRep {Γ : List Shape} {name : String} {s : Shape} : {t n : Nat} →
    VarList Γ (Signature.shapes (repSig name s t n)) → Fin n → Var Γ s
  | _, 0, _, i => i.elim0
  | _, _ + 1, .cons v vs, i => if h : i.val = 0 then v else VarList.ofRep vs ⟨i.val - 1, by omega⟩

/-- A variable list of the shapes of a `repSig` block from a function of the entry index. -/
def VarList.ofFnRep {Γ : List Shape} {name : String} {s : Shape} : {t : Nat} → (n : Nat) →
    (Fin n → Var Γ s) → VarList Γ (Signature.shapes (repSig name s t n))
  | _, 0, _ => .nil
  | _, n + 1, f => .cons (f ⟨0, by omega⟩) (VarList.ofFnRep n (fun i => f ⟨i.val + 1, by omega⟩))

/-- Two variable lists for the shapes of the signatures `A` and `B` as one for `A ++ B`. -/
def VarList.appendSig {Γ : List Shape} : (A : Signature) → {B : Signature} →
    VarList Γ (Signature.shapes A) → VarList Γ (Signature.shapes B) →
    VarList Γ (Signature.shapes (Signature.append A B))
  | [], _, .nil, vs => vs
  | _ :: A, _, .cons v va, vb => .cons v (VarList.appendSig A va vb)

/-! ## Signatures with a name prefix -/

/-- Every name of a signature with the prefix `pre` (the block of a component inside a bigger
program, e.g. `layers.3.kda.`). -/
def Signature.prefix (pre : String) : Signature → Signature
  | [] => []
  | (n, s) :: rest => (pre ++ n, s) :: Signature.prefix pre rest

/-- The variables of a prefixed block as the variables of the component's own signature. -/
def VarList.unprefix {Γ : List Shape} (pre : String) : (sig : Signature) →
    VarList Γ (Signature.shapes (Signature.prefix pre sig)) → VarList Γ (Signature.shapes sig)
  | [], .nil => .nil
  | _ :: sig, .cons v vs => .cons v (VarList.unprefix pre sig vs)

/-! ## Chains of bindings -/

namespace Lets

variable {α : Type}

/-- One chain of bindings after the other. -/
def append : {Γ Δ Θ : List Shape} → Lets α Γ Δ → Lets α Δ Θ → Lets α Γ Θ
  | _, _, _, .nil, m => m
  | _, _, _, .bind t rest, m => .bind t (append rest m)

/-- A variable before the bindings as a variable after them. -/
def liftVar : {Γ Δ : List Shape} → Lets α Γ Δ → Renaming Γ Δ
  | _, _, .nil, _, v => v
  | _, _, .bind _ rest, _, v => liftVar rest (.there v)

end Lets

/-! ## Fragments -/

/-- **A graph fragment** over context `Γ` with results of shapes `ss`: a chain of bindings from
`Γ` to a final context, and one variable of the final context per result. -/
structure Frag (α : Type) (Γ ss : List Shape) where
  /-- The final context. -/
  ctx : List Shape
  /-- The bindings. -/
  lets : Lets α Γ ctx
  /-- The results. -/
  out : VarList ctx ss

namespace Frag

variable {α : Type} {Γ ss tt : List Shape}

/-- No bindings: the results are variables of `Γ`. -/
def pure (vs : VarList Γ ss) : Frag α Γ ss := ⟨Γ, .nil, vs⟩

/-- **Bind one term**; the continuation receives its variable (earlier variables are read with
`Var.up`). -/
def bind {s : Shape} (t : Term α Γ s) (k : Var (s :: Γ) s → Frag α (s :: Γ) ss) : Frag α Γ ss :=
  let f := k .here
  ⟨f.ctx, .bind t f.lets, f.out⟩

/-- **A sub-fragment, then the rest**: the continuation receives the final context of `f`, the
renaming of `Γ` into it and the results of `f`. -/
def seq (f : Frag α Γ ss) (k : (Δ : List Shape) → Renaming Γ Δ → VarList Δ ss → Frag α Δ tt) :
    Frag α Γ tt :=
  let g := k f.ctx f.lets.liftVar f.out
  ⟨g.ctx, f.lets.append g.lets, g.out⟩

/-- A sub-fragment with one result, then the rest (the continuation receives the result's
variable). -/
def seq1 {s : Shape} (f : Frag α Γ [s]) (k : (Δ : List Shape) → Renaming Γ Δ → Var Δ s → Frag α Δ tt) :
    Frag α Γ tt :=
  f.seq fun Δ ρ outs => k Δ ρ outs.head

/-- A sub-fragment whose results are `P` then `Q`, then the rest (the continuation receives the
two parts). -/
def seqSplit {P Q : List Shape} (f : Frag α Γ (Shape.appendList P Q))
    (k : (Δ : List Shape) → Renaming Γ Δ → VarList Δ P → VarList Δ Q → Frag α Δ tt) : Frag α Γ tt :=
  f.seq fun Δ ρ outs => k Δ ρ (outs.split P).1 (outs.split P).2

end Frag

/-! ## A model inside a fragment -/

namespace Frag

variable {α : Type}

/-- **Terms of another context, bound one after the other**: each term of `args` renamed by
`ρ` (later terms see the earlier bindings as new entries they do not use); the results are the
bound values. -/
def ofArgs {Θ Γ : List Shape} : {ss : List Shape} → Args α Θ ss → Renaming Θ Γ → Frag α Γ ss
  | [], .nil, _ => pure .nil
  | _ :: _, .cons t ts, ρ => bind (t.rename ρ) fun v =>
      (ofArgs ts (fun w => .there (ρ w))).seq fun _ ρ' outs => pure (.cons (ρ' v) outs)

/-- **A model as a fragment**: its output terms renamed to read the parameters and inputs from
the variables `vs`, each bound once. -/
def ofModel {Γ : List Shape} (m : Model α)
    (vs : VarList Γ (Shape.appendList m.params.shapes m.inputs.shapes)) : Frag α Γ m.outputs.shapes :=
  ofArgs m.body vs.toRenaming

end Frag

/-- **A fragment over a signature's context as a program**: parameters and inputs named by the
signatures, the fragment's bindings and results. -/
def Program.ofFrag {α : Type} (params inputs outputs : Signature)
    (f : Frag α (Shape.appendList params.shapes inputs.shapes) outputs.shapes) : Program α :=
  ⟨params, inputs, outputs, f.ctx, f.lets, f.out.toArgs⟩

/-! ## The KDA layer (k3-spec §2.2 steps 1–7, report Eq. 1–6) -/

namespace KDA

variable {α : Type}

/-- `Σ_m row[m] W[m, h, i]` as an `[H, n]` term (projection of a row to every head). -/
@[macro_inline] def projTerm {Γ : List Shape} (D H n : Nat) (row : Var Γ [D]) (w : Var Γ [D, H, n]) :
    Term α Γ [H, n] :=
  batchedReadTerm H D n (.op (.broadcast H [D]) (.cons (.var row) .nil))
    (.op (.swapAxes01 D H [n]) (.cons (.var w) .nil))

/-- Entrywise product of two `[H, n]` terms. -/
@[macro_inline] def mul2 {Γ : List Shape} (H n : Nat) (a b : Term α Γ [H, n]) : Term α Γ [H, n] :=
  .op (.binary .mul [H, n]) (.cons a (.cons b .nil))

/-- Entrywise sum of two `[H, n]` terms. -/
@[macro_inline] def add2 {Γ : List Shape} (H n : Nat) (a b : Term α Γ [H, n]) : Term α Γ [H, n] :=
  .op (.binary .add [H, n]) (.cons a (.cons b .nil))

/-- The sum `f 0 + f 1 + … + f n` of `n + 1` `[H, m]` terms, added left to right like `finSum`. -/
def sumTerms1 {Γ : List Shape} (H m : Nat) : (n : Nat) → (Fin (n + 1) → Term α Γ [H, m]) → Term α Γ [H, m]
  | 0, f => f ⟨0, by omega⟩
  | n + 1, f => add2 H m (sumTerms1 H m n (fun i => f ⟨i.val, by omega⟩)) (f ⟨n + 1, by omega⟩)

/-- **The projected depthwise convolution** over the `W` rows of the shifted window (`rows 0`
the oldest, `rows (W − 1)` the current token) with taps `k₀ … k_{W−1}` (report Eq. 2;
`projectConv`): `Σ_t k_t ⊙ (rows t) W`, added left to right. Width `0` is the zero term. -/
def convTerm [Scalar α] {Γ : List Shape} (D H n : Nat) (x : Var Γ [D]) (w : Var Γ [D, H, n]) :
    (W : Nat) → (Fin W → Var Γ [D]) → (Fin W → Var Γ [H, n]) → Term α Γ [H, n]
  | 0, _, _ => .op (.scale 0 [H, n]) (.cons (projTerm D H n x w) .nil)
  | W + 1, rows, taps => sumTerms1 H n W (fun t => mul2 H n (.var (taps t)) (projTerm D H n (rows t) w))

/-- SiLU of a bound `[H, n]` value: `z ⊙ σ(z)`. -/
@[macro_inline] def siluTerm {Γ : List Shape} (H n : Nat) (z : Var Γ [H, n]) : Term α Γ [H, n] :=
  mul2 H n (.var z) (.op (.unary .sigmoid [H, n]) (.cons (.var z) .nil))

/-- **The variables a KDA layer graph reads** (`LayerParams` order, then the token, the shifted
window and the head states), in some context `Γ`. -/
structure LayerVars (Γ : List Shape) (D H K V R W : Nat) where
  /-- `W_q : [D, H, K]`. -/
  queryProj : Var Γ [D, H, K]
  /-- `W_k : [D, H, K]`. -/
  keyProj : Var Γ [D, H, K]
  /-- `W_v : [D, H, V]`. -/
  valueProj : Var Γ [D, H, V]
  /-- The query taps, `t = 0` the oldest. -/
  queryConv : Fin W → Var Γ [H, K]
  /-- The key taps. -/
  keyConv : Fin W → Var Γ [H, K]
  /-- The value taps. -/
  valueConv : Fin W → Var Γ [H, V]
  /-- `W_down : [D, R]`. -/
  decayDown : Var Γ [D, R]
  /-- `W_up : [R, H, K]`. -/
  decayUp : Var Γ [R, H, K]
  /-- The decay-logit bias `[H, K]` (hub `dt_bias`). -/
  decayBias : Var Γ [H, K]
  /-- The log-scales `[H]` (hub `A_log`). -/
  decayLogScale : Var Γ [H]
  /-- `W_β : [D, H]`. -/
  betaProj : Var Γ [D, H]
  /-- The gate weight `[D, H, V]`. -/
  gateWeight : Var Γ [D, H, V]
  /-- The output-norm gain `[V]`. -/
  outNormScale : Var Γ [V]
  /-- `W_o : [H, V, D]`. -/
  outputProj : Var Γ [H, V, D]
  /-- The layer input `x`. -/
  x : Var Γ [D]
  /-- The window after the token (`shiftWindow`), oldest first; the last row is `x`. -/
  rows : Fin W → Var Γ [D]
  /-- The head states `[H, K, V]`. -/
  heads : Var Γ [H, K, V]

/-- The variables read in a context with more bindings. -/
def LayerVars.up {Γ Δ : List Shape} [Sub Γ Δ] {D H K V R W : Nat} (v : LayerVars Γ D H K V R W) :
    LayerVars Δ D H K V R W :=
  ⟨v.queryProj.up, v.keyProj.up, v.valueProj.up, fun t => (v.queryConv t).up,
   fun t => (v.keyConv t).up, fun t => (v.valueConv t).up, v.decayDown.up, v.decayUp.up,
   v.decayBias.up, v.decayLogScale.up, v.betaProj.up, v.gateWeight.up, v.outNormScale.up,
   v.outputProj.up, v.x.up, fun t => (v.rows t).up, v.heads.up⟩

/-- **One token of a KDA layer as a graph fragment** (k3-spec §2.2, the article's `scanStep`,
any convolution width). Bindings: the pre-activations `qPre, kPre, vPre` (projected
convolution), the query `queryScale · L2(SiLU qPre)`, `β = σ(x W_β)`, the retention
`exp(g_min σ(e^{s} ⊙ (x W_down W_up + b)))`, the value `SiLU vPre`, the key `L2(SiLU kPre)`,
the updated head states (`packedUpdateTerm`), their readouts by the queries, and the output
`Σ_h (σ(x G) ⊙ RMSNorm(o)) W_o`. Results: the new head states and the output. -/
@[macro_inline] def layerFrag [Scalar α] (logFloor l2Eps normEps queryScale : α) {Γ : List Shape}
    {D H K V R W : Nat} (v : LayerVars Γ D H K V R W) : Frag α Γ [[H, K, V], [D]] :=
  .bind (convTerm D H K v.x v.queryProj W v.rows v.queryConv) fun qPre =>
  .bind (convTerm D H K v.up.x v.up.keyProj W v.up.rows v.up.keyConv) fun kPre =>
  .bind (convTerm D H V v.up.x v.up.valueProj W v.up.rows v.up.valueConv) fun vPre =>
  .bind (.op (.scale queryScale [H, K]) (.cons (.op (.l2NormLast l2Eps [H] K)
    (.cons (siluTerm H K qPre.up) .nil)) .nil)) fun query =>
  .bind (.op (.unary .sigmoid [H]) (.cons (.op (.vecMatMul D H)
    (.cons (.var v.up.x) (.cons (.var v.up.betaProj) .nil))) .nil)) fun beta =>
  .bind (.op (.unary .exp [H, K]) (.cons (.op (.scale logFloor [H, K]) (.cons
    (.op (.unary .sigmoid [H, K]) (.cons (mul2 H K
      (expandHeadTerm H K (.op (.unary .exp [H]) (.cons (.var v.up.decayLogScale) .nil)))
      (add2 H K
        (batchedReadTerm H R K
          (.op (.broadcast H [R]) (.cons (.op (.vecMatMul D R) (.cons (.var v.up.x)
            (.cons (.var v.up.decayDown) .nil))) .nil))
          (.op (.swapAxes01 R H [K]) (.cons (.var v.up.decayUp) .nil)))
        (.var v.up.decayBias))) .nil)) .nil)) .nil)) fun ret =>
  .bind (siluTerm H V vPre.up) fun value =>
  .bind (.op (.l2NormLast l2Eps [H] K) (.cons (siluTerm H K kPre.up) .nil)) fun key =>
  .bind ((packedUpdateTerm H K V).rename (VarList.toRenaming
    (.cons v.up.heads (.cons key.up (.cons value.up (.cons ret.up (.cons beta.up
      (.cons query.up .nil)))))))) fun newHeads =>
  .bind (batchedReadTerm H K V (.var query.up) (.var newHeads.up)) fun readout =>
  .bind (.op (.sumLast [D] H) (.cons (.op (.swapAxes01 H D []) (.cons
    (batchedReadTerm H V D
      (mul2 H V
        (.op (.unary .sigmoid [H, V]) (.cons (batchedReadTerm H D V
          (.op (.broadcast H [D]) (.cons (.var v.up.x) .nil))
          (.op (.swapAxes01 D H [V]) (.cons (.var v.up.gateWeight) .nil))) .nil))
        (.op (.rmsNormLast normEps [H] V) (.cons (.var readout.up) (.cons (.var v.up.outNormScale) .nil))))
      (.var v.up.outputProj)) .nil)) .nil)) fun out =>
  .pure (.cons newHeads.up (.cons out .nil))

/-! ## The layer as a program over its own signature -/

/-- The parameter signature of the layer program (`LayerParams` order, convolution taps split,
`t = 0` the oldest). -/
def layerParamSig (D H K V R W : Nat) : Signature :=
  Signature.append [("query_proj", [D, H, K]), ("key_proj", [D, H, K]), ("value_proj", [D, H, V])] <|
  Signature.append (repSig "query_conv" [H, K] 0 W) <| Signature.append (repSig "key_conv" [H, K] 0 W) <|
  Signature.append (repSig "value_conv" [H, V] 0 W)
  [("decay_down", [D, R]), ("decay_up", [R, H, K]), ("decay_bias", [H, K]), ("decay_log_scale", [H]),
   ("beta_proj", [D, H]), ("gate_weight", [D, H, V]), ("out_norm_scale", [V]), ("output_proj", [H, V, D])]

/-- The input signature: the layer input, the `W − 1` most recent window rows (oldest first),
the packed head states. -/
def layerInputSig (D H K V W : Nat) : Signature :=
  Signature.append [("x", [D])] (Signature.append (repSig "window" [D] 0 (W - 1)) [("heads", [H, K, V])])

/-- The output signature: the new window rows, the new head states, the layer output. -/
def layerOutputSig (D H K V W : Nat) : Signature :=
  Signature.append (repSig "window_next" [D] 0 (W - 1)) [("heads_next", [H, K, V]), ("output", [D])]

/-- The shifted window rows from the `W − 1` window inputs and the token: row `t` is window
input `t` for `t < W − 1`, and the token for `t = W − 1` (`shiftWindow`). -/
def shiftRows {Γ : List Shape} {D W : Nat} (window : Fin (W - 1) → Var Γ [D]) (x : Var Γ [D]) :
    Fin W → Var Γ [D] :=
  fun t => if h : t.val + 1 < W then window ⟨t.val, by omega⟩ else x

/-- The layer's variables from the blocks of a context: the three projections, the three tap
blocks, the eight remaining weights, the token, the `W − 1` window inputs, the head states. -/
def LayerVars.ofBlocks {Γ : List Shape} {D H K V R W : Nat}
    (fixed : VarList Γ [[D, H, K], [D, H, K], [D, H, V]])
    (queryConv keyConv : Fin W → Var Γ [H, K]) (valueConv : Fin W → Var Γ [H, V])
    (tail : VarList Γ [[D, R], [R, H, K], [H, K], [H], [D, H], [D, H, V], [V], [H, V, D]])
    (x : Var Γ [D]) (window : Fin (W - 1) → Var Γ [D]) (heads : Var Γ [H, K, V]) :
    LayerVars Γ D H K V R W :=
  match fixed, tail with
  | .cons qp (.cons kp (.cons vp .nil)),
    .cons dd (.cons du (.cons db (.cons ls (.cons bp (.cons gw (.cons ong (.cons op .nil))))))) =>
    { queryProj := qp, keyProj := kp, valueProj := vp, queryConv, keyConv, valueConv,
      decayDown := dd, decayUp := du, decayBias := db, decayLogScale := ls, betaProj := bp,
      gateWeight := gw, outNormScale := ong, outputProj := op, x, rows := shiftRows window x, heads }

/-- **The layer's variables from its parameter block** (the variables of `layerParamSig`, e.g.
a block of a bigger program), the token, the `W − 1` window inputs and the head states. -/
def LayerVars.ofParams {Γ : List Shape} {D H K V R W : Nat}
    (ps : VarList Γ (Signature.shapes (layerParamSig D H K V R W))) (x : Var Γ [D])
    (window : Fin (W - 1) → Var Γ [D]) (heads : Var Γ [H, K, V]) : LayerVars Γ D H K V R W :=
  let fixed := ps.splitSig [("query_proj", [D, H, K]), ("key_proj", [D, H, K]), ("value_proj", [D, H, V])]
  let qc := fixed.2.splitSig (repSig "query_conv" [H, K] 0 W)
  let kc := qc.2.splitSig (repSig "key_conv" [H, K] 0 W)
  let vc := kc.2.splitSig (repSig "value_conv" [H, V] 0 W)
  LayerVars.ofBlocks fixed.1 qc.1.ofRep kc.1.ofRep vc.1.ofRep vc.2 x window heads

/-- The layer's variables in the context of its own signature (its blocks split off the
context's variables). -/
def layerSigVars (D H K V R W : Nat) :
    LayerVars (Shape.appendList (layerParamSig D H K V R W).shapes (layerInputSig D H K V W).shapes)
      D H K V R W :=
  let all := VarList.self _
  let is := (all.split (Signature.shapes (layerParamSig D H K V R W))).2
  let xs := is.splitSig [("x", [D])]
  let win := xs.2.splitSig (repSig "window" [D] 0 (W - 1))
  LayerVars.ofParams (all.split (Signature.shapes (layerParamSig D H K V R W))).1 xs.1.head win.1.ofRep
    win.2.head

/-- **One token of a KDA layer as a graph program** (k3-spec §2.2, any convolution width `W`):
`layerFrag` over the layer's signature; the outputs are the new window rows (the inputs
`window.1 …` and `x`: no node), the new head states and the output. -/
@[macro_inline] def layerProgram [Scalar α] (logFloor l2Eps normEps queryScale : α) (D H K V R W : Nat) : Program α :=
  Program.ofFrag (layerParamSig D H K V R W) (layerInputSig D H K V W) (layerOutputSig D H K V W)
    ((layerFrag logFloor l2Eps normEps queryScale (layerSigVars D H K V R W)).seq fun _ ρ res =>
      .pure (VarList.appendSig (repSig "window_next" [D] 0 (W - 1))
        (VarList.ofFnRep (W - 1) (fun j => ρ ((layerSigVars D H K V R W).rows ⟨j.val + 1, by omega⟩))) res))

/-- The KDA layer step on the tiny configuration (`fixtures/tiny/config.json`: hidden 24, 2
heads, key 5, value 7, decay rank 15, convolution 4) with its `g_min`, L2 ε, output-norm ε and
query scale, as `k3spec.graph.v1` JSON (`fixtures/graphs/kda_layer_step_tiny.json`). -/
def layerStepJsonTiny : String :=
  Program.toJson "kda_layer_step_tiny" (layerProgram (α := Float) tinyConfig.logFloor
    tinyConfig.kdaL2Eps.toScalar tinyConfig.kdaOutputNormEps.toScalar tinyConfig.queryScale 24 2 5 7 15 4)

end KDA

/-! ## The decoder token step (k3-spec §2.5) -/

namespace Decoder

variable {α : Type}

/-! ## Signatures -/

/-- The name prefix of (1-based) layer `n`: `layers.n.`. -/
def layerPre (n : Nat) : String := "layers." ++ toString n ++ "."

section Sig

variable (c : Config) (T : Nat)

/-- The AttnRes query, its unit RMSNorm gain and the pre-norm gain of one retrieval (`part` is
`seq`, `chan` or `final`). -/
def resSig (pre part : String) : Signature :=
  [(pre ++ part ++ "_res.query", [c.hiddenDim]), (pre ++ part ++ "_res.norm_gain", [c.hiddenDim]),
   (pre ++ part ++ "_norm.scale", [c.hiddenDim])]

/-- The KDA layer's parameters (`KDA.layerParamSig` at the configuration's widths). -/
def kdaSig : Signature :=
  KDA.layerParamSig c.hiddenDim c.kdaHeads c.kdaKeyDim c.kdaValueDim c.kdaDecayRank c.kdaConvWidth

/-- The Gated MLA layer's parameters (those of `GatedMLA.stepModel`). -/
def mlaSig : Signature := (GatedMLA.stepModel (α := Unit) () 0 c.mlaDims).params

/-- The dense channel mixer's parameters: those of `ExpertGraph.model` (`denseSig_eq`), written
out because the offline compiler cannot call that generic definition of another module. -/
def denseSig : Signature :=
  [("gateWeight", [c.hiddenDim, c.denseHiddenDim]), ("upWeight", [c.hiddenDim, c.denseHiddenDim]),
   ("downWeight", [c.denseHiddenDim, c.hiddenDim])]

theorem denseSig_eq : denseSig c = (ExpertGraph.model (α := Unit) c.hiddenDim c.denseHiddenDim c.hiddenDim).params :=
  rfl

/-- The LatentMoE layer's parameters for `activeExperts` route slots (`MoEModel.paramSig`). -/
def moeSig : Signature :=
  MoEModel.paramSig c.hiddenDim c.latentDim c.expertHiddenDim c.expertHiddenDim c.numSharedExperts
    c.activeExperts

/-- The sequence mixer's parameters at a layer of kind `k`. -/
def mixerParamSig (pre : String) : AttentionKind → Signature
  | .kda => Signature.prefix (pre ++ "kda.") (kdaSig c)
  | .mla => Signature.prefix (pre ++ "mla.") (mlaSig c)

/-- The channel mixer's parameters: the dense expert, or the LatentMoE layer plus the full
router (`router.weight [d, E]`, `router.bias [E]`) for the scores output. -/
def channelParamSig (pre : String) : Bool → Signature
  | false => Signature.prefix (pre ++ "mlp.") (denseSig c)
  | true => Signature.append (Signature.prefix (pre ++ "moe.") (moeSig c))
      [(pre ++ "router.weight", [c.hiddenDim, c.numRoutedExperts]), (pre ++ "router.bias", [c.numRoutedExperts])]

/-- The parameters of (1-based) layer `n`. -/
def layerParamSig (n : Nat) : Signature :=
  Signature.append (resSig c (layerPre n) "seq") <|
  Signature.append (mixerParamSig c (layerPre n) (c.attentionKindAt n)) <|
  Signature.append (resSig c (layerPre n) "chan") (channelParamSig c (layerPre n) (c.isMoE n))

/-- The final retrieval's query and gain, the final norm's gain and the vocabulary head. -/
def finalSig : Signature :=
  Signature.append (resSig c "" "final") [("lm_head.weight", [c.hiddenDim, c.vocabSize])]

/-- The parameters of layers `n, …, n + k − 1`, then the final ones. -/
def layersParamSig : Nat → Nat → Signature
  | _, 0 => finalSig c
  | n, k + 1 => Signature.append (layerParamSig c n) (layersParamSig (n + 1) k)

/-- **The parameters of the decoder step**: every layer's, then the final ones. -/
def paramSig : Signature := layersParamSig c 1 c.numLayers

/-- The packed state of a layer of kind `k`: the `W − 1` window rows and the head states, or
the two MLA caches of `T` rows. -/
def stateSig (pre : String) : AttentionKind → Signature
  | .kda => Signature.append (repSig (pre ++ "window") [c.hiddenDim] 0 (c.kdaConvWidth - 1))
      [(pre ++ "heads", [c.kdaHeads, c.kdaKeyDim, c.kdaValueDim])]
  | .mla => [(pre ++ "latent_cache", [T, c.kvLatentDim]), (pre ++ "shared_key_cache", [T, c.sharedKeyDim])]

/-- The packed states of layers `n, …, n + k − 1`. -/
def layersStateSig : Nat → Nat → Signature
  | _, 0 => []
  | n, k + 1 => Signature.append (stateSig c T (layerPre n) (c.attentionKindAt n)) (layersStateSig (n + 1) k)

/-- The token's embedding row and the three scalars. -/
def scalarSig : Signature :=
  [("embedding", [c.hiddenDim]), ("gate_cap", []), ("up_cap", []), ("score_scale", [])]

/-- **The inputs of the decoder step**: the embedding row, the SiTU caps, the MLA score scale,
every layer's packed state. -/
def inputSig : Signature := Signature.append (scalarSig c) (layersStateSig c T 1 c.numLayers)

/-- The new packed state of a layer of kind `k` (MLA caches of `T + 1` rows). -/
def mixerOutSig (pre : String) : AttentionKind → Signature
  | .kda => Signature.append (repSig (pre ++ "window_next") [c.hiddenDim] 0 (c.kdaConvWidth - 1))
      [(pre ++ "heads_next", [c.kdaHeads, c.kdaKeyDim, c.kdaValueDim])]
  | .mla => [(pre ++ "latent_cache_next", [T + 1, c.kvLatentDim]),
      (pre ++ "shared_key_cache_next", [T + 1, c.sharedKeyDim])]

/-- The router scores of a MoE layer (nothing for a dense one). -/
def channelOutSig (pre : String) : Bool → Signature
  | false => []
  | true => [(pre ++ "router_scores", [c.numRoutedExperts])]

/-- The outputs of (1-based) layer `n`. -/
def layerOutSig (n : Nat) : Signature :=
  Signature.append (mixerOutSig c T (layerPre n) (c.attentionKindAt n)) (channelOutSig c (layerPre n) (c.isMoE n))

/-- The outputs of layers `n, …, n + k − 1`. -/
def layersOutSig : Nat → Nat → Signature
  | _, 0 => []
  | n, k + 1 => Signature.append (layerOutSig c T n) (layersOutSig (n + 1) k)

/-- **The outputs of the decoder step**: the logits, then every layer's new packed state and
router scores. -/
def outputSig : Signature := ("logits", [c.vocabSize]) :: layersOutSig c T 1 c.numLayers

/-- The context of the decoder graph: parameters, then inputs. -/
abbrev BaseCtx : List Shape := Shape.appendList (paramSig c).shapes (inputSig c T).shapes

end Sig

/-! ## Small builders -/

/-- Own list functions on variables (`List.map`/`List.append` do not compile offline). -/
def varsMap {Γ Δ : List Shape} {s : Shape} (ρ : Renaming Γ Δ) : List (Var Γ s) → List (Var Δ s)
  | [] => []
  | v :: vs => ρ v :: varsMap ρ vs

/-- Own append of variable lists. -/
def varsAppend {Γ : List Shape} {s : Shape} : List (Var Γ s) → List (Var Γ s) → List (Var Γ s)
  | [], ws => ws
  | v :: vs, ws => v :: varsAppend vs ws

/-- The number of rows of the stack of `first :: rest` (one more than `rest` has entries). -/
def stackLen {β : Type} : List β → Nat
  | [] => 1
  | _ :: rest => 1 + stackLen rest

/-- **The sources as rows**: `first` and the `rest` stacked into an `[n, d]` value
(`broadcast 1`, `concat0`). -/
def stackTerm {Γ : List Shape} (d : Nat) : (first : Var Γ [d]) → (rest : List (Var Γ [d])) →
    Term α Γ [stackLen rest, d]
  | f, [] => .op (.broadcast 1 [d]) (.cons (.var f) .nil)
  | f, g :: rest => .op (.concat0 1 (stackLen rest) [d])
      (.cons (.op (.broadcast 1 [d]) (.cons (.var f) .nil)) (.cons (stackTerm d g rest) .nil))

/-- `RMSNorm_ε(x) ⊙ γ` of a variable. -/
def normTerm {Γ : List Shape} (eps : α) (d : Nat) (x g : Var Γ [d]) : Term α Γ [d] :=
  .op (.rmsNormLast eps [] d) (.cons (.var x) (.cons (.var g) .nil))

/-- Entrywise sum of two `[d]` variables. -/
def addTerm {Γ : List Shape} (d : Nat) (x y : Var Γ [d]) : Term α Γ [d] :=
  .op (.binary .add [d]) (.cons (.var x) (.cons (.var y) .nil))

/-- **An AttnRes retrieval and its pre-norm**: the sources stacked, `AttnRes.term` with the
query `q` and unit gain `g`, then `RMSNorm_ε(h) ⊙ γ`. -/
def retrieveNormFrag (retrievalEps normEps : α) {Γ : List Shape} {d : Nat} (q g γ : Var Γ [d])
    (first : Var Γ [d]) (rest : List (Var Γ [d])) : Frag α Γ [[d]] :=
  .bind (stackTerm d first rest) fun vals =>
  .bind (AttnRes.term retrievalEps (stackLen rest) d q.up g.up vals) fun h =>
  .bind (normTerm normEps d h γ.up) fun y =>
  .pure (.cons y .nil)

/-! ## The depth state as variables -/

/-- **The depth state of the token as variables**: the embedding, the completed block sums, the
partial sum (meaningful when `count ≠ 0`) and the number of layers in the partial block. -/
structure DepthVars (Γ : List Shape) (d : Nat) where
  /-- The embedding (source 0). -/
  emb : Var Γ [d]
  /-- The completed block sums, oldest first. -/
  blocks : List (Var Γ [d])
  /-- The partial sum. -/
  part : Var Γ [d]
  /-- Layers in the partial block. -/
  count : Nat

namespace DepthVars

variable {Γ Δ : List Shape} {d : Nat}

/-- The depth variables read in another context. -/
def map (ρ : Renaming Γ Δ) (v : DepthVars Γ d) : DepthVars Δ d :=
  ⟨ρ v.emb, varsMap ρ v.blocks, ρ v.part, v.count⟩

/-- The sources after the embedding: the blocks and the partial block when not empty. -/
def rest (v : DepthVars Γ d) : List (Var Γ [d]) :=
  varsAppend v.blocks (if v.count = 0 then [] else [v.part])

/-- The depth after committing `p` (the new partial sum) at block size `B`. -/
def commit (B : Nat) (v : DepthVars Γ d) (p : Var Γ [d]) : DepthVars Γ d :=
  if v.count + 1 = B then ⟨v.emb, varsAppend v.blocks [p], p, 0⟩ else ⟨v.emb, v.blocks, p, v.count + 1⟩

end DepthVars

/-- The partial block with the sequence output added: `P + seqOut`, or `seqOut` when the block
is empty (`BlockState.afterSequence`). -/
def afterFrag {Γ : List Shape} {d : Nat} (depth : DepthVars Γ d) (seqOut : Var Γ [d]) : Frag α Γ [[d]] :=
  if depth.count = 0 then .pure (.cons seqOut .nil)
  else .bind (addTerm d depth.part seqOut) fun a => .pure (.cons a .nil)

/-! ## Stable LatentMoE on route slots (`MoEGraph.term`, here for the compiled builder) -/

/-- `MoEGraph.sumTerms` (the sum of `n` terms, added left to right like `finSum`; the empty sum
is `0 · zero`), here because the offline compiler cannot compile a call to another module's
generic recursive function. Equal to it: `Decoder.sumTerms_eq`. -/
def sumTerms [Scalar α] {Γ : List Shape} {s : Shape} (zero : Term α Γ s) :
    (n : Nat) → (Fin n → Term α Γ s) → Term α Γ s
  | 0, _ => .op (.scale 0 s) (.cons zero .nil)
  | n + 1, f => .op (.binary .add s)
      (.cons (sumTerms zero n (fun i => f ⟨i.val, by omega⟩)) (.cons (f ⟨n, by omega⟩) .nil))

/-- `MoEGraph.weightTerm` with this module's `sumTerms`. -/
@[macro_inline] def weightTerm [Scalar α] {Γ : List Shape} (d k : Nat) (input : Var Γ [d]) (zero : Var Γ [])
    (routerCol : Fin k → Var Γ [d]) (i : Fin k) : Term α Γ [] :=
  .op (.binary .div []) (.cons (MoEGraph.scoreTerm d input (routerCol i))
    (.cons (sumTerms (.var zero) k (fun j => MoEGraph.scoreTerm d input (routerCol j))) .nil))

/-- **`MoEGraph.term`** (Stable LatentMoE for a fixed route, report Eq. 11) with this module's
`sumTerms`; equal to it (`Decoder.moeTerm_eq`). -/
@[macro_inline] def moeTerm [Scalar α] {Γ : List Shape} (d l hs hr S k : Nat) (eps routedScale : α)
    (input : Var Γ [d]) (gateCap upCap : Var Γ [])
    (sharedGate sharedUp : Fin S → Var Γ [d, hs]) (sharedDown : Fin S → Var Γ [hs, d])
    (downProject : Var Γ [d, l]) (routerCol : Fin k → Var Γ [d])
    (routedGate routedUp : Fin k → Var Γ [l, hr]) (routedDown : Fin k → Var Γ [hr, l])
    (normScale : Var Γ [l]) (upProject : Var Γ [l, d]) : Term α Γ [d] :=
  let shared : Term α Γ [d] := sumTerms (.var input) S (fun i =>
    ExpertGraph.term d hs d input (sharedGate i) (sharedUp i) (sharedDown i) gateCap upCap)
  let routed : Term α Γ [l] := .let1 (ExpertGraph.vecMatTerm d l (.var input) (.var downProject))
    (sumTerms (.var .here) k (fun i =>
      ExpertGraph.mulTerm l (.op (.broadcast l []) (.cons (.op (.scale routedScale []) (.cons
          (weightTerm d k (.there input) (.there gateCap) (fun j => .there (routerCol j)) i) .nil)) .nil))
        (ExpertGraph.term l hr l .here (.there (routedGate i)) (.there (routedUp i))
          (.there (routedDown i)) (.there gateCap) (.there upCap))))
  let normed : Term α Γ [l] := .op (.rmsNormLast eps [] l) (.cons routed (.cons (.var normScale) .nil))
  .op (.binary .add [d]) (.cons shared (.cons (ExpertGraph.vecMatTerm l d normed (.var upProject)) .nil))

/-- The variables `MoEGraph.term` reads, from a block of `MoEModel.paramSig`. -/
structure MoEVars (Γ : List Shape) (d l hs hr S k : Nat) where
  /-- Shared experts' gate weights. -/
  sharedGate : Fin S → Var Γ [d, hs]
  /-- Shared experts' up weights. -/
  sharedUp : Fin S → Var Γ [d, hs]
  /-- Shared experts' down weights. -/
  sharedDown : Fin S → Var Γ [hs, d]
  /-- `W↓`. -/
  downProject : Var Γ [d, l]
  /-- Each slot's router column. -/
  routerCol : Fin k → Var Γ [d]
  /-- Each slot's expert gate weight. -/
  routedGate : Fin k → Var Γ [l, hr]
  /-- Each slot's expert up weight. -/
  routedUp : Fin k → Var Γ [l, hr]
  /-- Each slot's expert down weight. -/
  routedDown : Fin k → Var Γ [hr, l]
  /-- The routed RMSNorm gain. -/
  normScale : Var Γ [l]
  /-- `W↑`. -/
  upProject : Var Γ [l, d]

/-- The shared-expert triples of a `MoEModel.sharedSig` block, and the rest. -/
def sharedOf {Γ : List Shape} (d hs : Nat) (rest : Signature) : (n : Nat) →
    VarList Γ (Signature.shapes (MoEModel.sharedSig d hs n rest)) →
    (Fin n → Var Γ [d, hs]) × (Fin n → Var Γ [d, hs]) × (Fin n → Var Γ [hs, d]) ×
      VarList Γ (Signature.shapes rest)
  | 0, vs => (fun i => i.elim0, fun i => i.elim0, fun i => i.elim0, vs)
  | n + 1, .cons g (.cons u (.cons dn vs)) =>
    let r := sharedOf d hs rest n vs
    (fun i => if h : i.val = 0 then g else r.1 ⟨i.val - 1, by omega⟩,
     fun i => if h : i.val = 0 then u else r.2.1 ⟨i.val - 1, by omega⟩,
     fun i => if h : i.val = 0 then dn else r.2.2.1 ⟨i.val - 1, by omega⟩, r.2.2.2)

/-- The route slots (router column and expert weights) of a `MoEModel.slotSig` block, and the
rest. -/
def slotsOf {Γ : List Shape} (d l hr : Nat) (rest : Signature) : (n : Nat) →
    VarList Γ (Signature.shapes (MoEModel.slotSig d l hr n rest)) →
    (Fin n → Var Γ [d]) × (Fin n → Var Γ [l, hr]) × (Fin n → Var Γ [l, hr]) × (Fin n → Var Γ [hr, l]) ×
      VarList Γ (Signature.shapes rest)
  | 0, vs => (fun i => i.elim0, fun i => i.elim0, fun i => i.elim0, fun i => i.elim0, vs)
  | n + 1, .cons r (.cons g (.cons u (.cons dn vs))) =>
    let t := slotsOf d l hr rest n vs
    (fun i => if h : i.val = 0 then r else t.1 ⟨i.val - 1, by omega⟩,
     fun i => if h : i.val = 0 then g else t.2.1 ⟨i.val - 1, by omega⟩,
     fun i => if h : i.val = 0 then u else t.2.2.1 ⟨i.val - 1, by omega⟩,
     fun i => if h : i.val = 0 then dn else t.2.2.2.1 ⟨i.val - 1, by omega⟩, t.2.2.2.2)

/-- The LatentMoE variables of a block of `MoEModel.paramSig`. -/
def MoEVars.ofList {Γ : List Shape} {d l hs hr S k : Nat}
    (vs : VarList Γ (Signature.shapes (MoEModel.paramSig d l hs hr S k))) : MoEVars Γ d l hs hr S k :=
  let sh := sharedOf d hs (MoEModel.restSig d l hr k) S vs
  match sh.2.2.2 with
  | .cons dp rest =>
    let sl := slotsOf d l hr [("routedNormScale", [l]), ("upProject", [l, d])] k rest
    match sl.2.2.2.2 with
    | .cons ns (.cons up .nil) =>
      ⟨sh.1, sh.2.1, sh.2.2.1, dp, sl.1, sl.2.1, sl.2.2.1, sl.2.2.2.1, ns, up⟩

/-! ## The mixers -/

section Mixers

variable (c : Config) (T : Nat)

/-- The configuration's real hyperparameters at a scalar type, as the graph's attributes. -/
structure Scalars (α : Type) where
  /-- KDA `g_min`. -/
  logFloor : α
  /-- KDA L2 ε. -/
  l2Eps : α
  /-- KDA output-norm ε. -/
  kdaNormEps : α
  /-- KDA query scale. -/
  queryScale : α
  /-- MLA latent-norm ε. -/
  mlaNormEps : α
  /-- LatentMoE routed-norm ε. -/
  moeNormEps : α
  /-- The routed scaling factor. -/
  routedScale : α
  /-- The AttnRes score-norm ε. -/
  retrievalEps : α
  /-- The pre-norm ε. -/
  preNormEps : α
  /-- The final-norm ε. -/
  finalNormEps : α

/-- The scalars of a configuration. -/
@[macro_inline] def Scalars.of [Scalar α] : Scalars α :=
  ⟨c.logFloor, c.kdaL2Eps.toScalar, c.kdaOutputNormEps.toScalar, c.queryScale, c.mlaLatentNormEps.toScalar,
   c.moeNormEps.toScalar, c.routedScale.toScalar, c.attnResEps.toScalar, c.preNormEps.toScalar,
   c.finalNormEps.toScalar⟩

/-- **The sequence mixer of a layer of kind `k`** on the sequence input `x`: KDA
(`KDA.layerFrag`; the new window rows are the shifted input rows, no node) or MLA
(`GatedMLA.stepModel` renamed onto the layer's variables). Results: the new packed state, then
the mixer output. -/
def mixerFrag [Scalar α] (sc : Scalars α) (pre : String) {Γ : List Shape} :
    (k : AttentionKind) → VarList Γ (Signature.shapes (mixerParamSig c pre k)) →
    VarList Γ (Signature.shapes (stateSig c T pre k)) → Var Γ [c.hiddenDim] → Var Γ [] →
    Frag α Γ (Shape.appendList (Signature.shapes (mixerOutSig c T pre k)) [[c.hiddenDim]])
  | .kda, ps, st, x, _ =>
    let win := st.splitSig (repSig (pre ++ "window") [c.hiddenDim] 0 (c.kdaConvWidth - 1))
    let v := KDA.LayerVars.ofParams (ps.unprefix (pre ++ "kda.") (kdaSig c)) x win.1.ofRep win.2.head
    (KDA.layerFrag sc.logFloor sc.l2Eps sc.kdaNormEps sc.queryScale v).seq fun _ ρ res =>
      .pure (VarList.append
        (VarList.appendSig (repSig (pre ++ "window_next") [c.hiddenDim] 0 (c.kdaConvWidth - 1))
          (VarList.ofFnRep (c.kdaConvWidth - 1) (fun j => ρ (v.rows ⟨j.val + 1, by omega⟩)))
          (.cons res.head .nil))
        (.cons res.tail.head .nil))
  | .mla, ps, st, x, scoreScale =>
    Frag.ofModel (GatedMLA.stepModel sc.mlaNormEps T c.mlaDims)
      (VarList.append (ps.unprefix (pre ++ "mla.") (mlaSig c))
        (.cons st.head (.cons st.tail.head (.cons x (.cons scoreScale .nil)))))

/-- **The channel mixer** on the channel input `x`: the dense expert (`ExpertGraph.term`), or
the LatentMoE layer on its route slots (`moeTerm`, i.e. `MoEGraph.term`, on the variables of
the layer's `MoEModel.paramSig` block) and
the router scores `σ(x R) + b`. Results: the router scores (MoE only), then the channel output. -/
def channelFrag [Scalar α] (sc : Scalars α) (pre : String) {Γ : List Shape} :
    (moe : Bool) → VarList Γ (Signature.shapes (channelParamSig c pre moe)) → Var Γ [c.hiddenDim] →
    Var Γ [] → Var Γ [] →
    Frag α Γ (Shape.appendList (Signature.shapes (channelOutSig c pre moe)) [[c.hiddenDim]])
  | false, ps, x, gateCap, upCap =>
    let w := ps.unprefix (pre ++ "mlp.") (denseSig c)
    .bind (ExpertGraph.term c.hiddenDim c.denseHiddenDim c.hiddenDim x w.head w.tail.head w.tail.tail.head
      gateCap upCap) fun y => .pure (.cons y .nil)
  | true, ps, x, gateCap, upCap =>
    let parts := ps.splitSig (Signature.prefix (pre ++ "moe.") (moeSig c))
    let mv := MoEVars.ofList (parts.1.unprefix (pre ++ "moe.") (moeSig c))
    let router := parts.2
    .bind (moeTerm c.hiddenDim c.latentDim c.expertHiddenDim c.expertHiddenDim c.numSharedExperts
      c.activeExperts sc.moeNormEps sc.routedScale x gateCap upCap mv.sharedGate mv.sharedUp mv.sharedDown
      mv.downProject mv.routerCol mv.routedGate mv.routedUp mv.routedDown mv.normScale mv.upProject) fun y =>
    .bind (.op (.binary .add [c.numRoutedExperts]) (.cons (.op (.unary .sigmoid [c.numRoutedExperts])
      (.cons (.op (.vecMatMul c.hiddenDim c.numRoutedExperts) (.cons (.var x.up)
        (.cons (.var router.head.up) .nil))) .nil)) (.cons (.var router.tail.head.up) .nil))) fun scores =>
    .pure (.cons scores (.cons y.up .nil))

end Mixers

/-! ## Layers -/

section Layers

variable (c : Config) (T : Nat)

/-- The variables of the graph's scalar inputs. -/
structure ScalarVars (Γ : List Shape) where
  /-- The SiTU gate cap. -/
  gateCap : Var Γ []
  /-- The SiTU up cap. -/
  upCap : Var Γ []
  /-- The MLA score scale. -/
  scoreScale : Var Γ []

/-- The scalar variables read in another context. -/
def ScalarVars.map {Γ Δ : List Shape} (ρ : Renaming Γ Δ) (v : ScalarVars Γ) : ScalarVars Δ :=
  ⟨ρ v.gateCap, ρ v.upCap, ρ v.scoreScale⟩

/-- **One layer as a fragment** (k3-spec §2.5): the sequence retrieval and pre-norm, the
sequence mixer, `P + seqOut`, the channel retrieval and pre-norm, the channel mixer, the new
partial sum `(P + seqOut) + chanOut`. Results: the layer's outputs (new packed state, router
scores), then the new partial sum. -/
def layerFrag [Scalar α] (sc : Scalars α) (n : Nat) {Γ : List Shape}
    (ps : VarList Γ (Signature.shapes (layerParamSig c n)))
    (st : VarList Γ (Signature.shapes (stateSig c T (layerPre n) (c.attentionKindAt n))))
    (sv : ScalarVars Γ) (depth : DepthVars Γ c.hiddenDim) :
    Frag α Γ (Shape.appendList (Signature.shapes (layerOutSig c T n)) [[c.hiddenDim]]) :=
  let seqRes := ps.splitSig (resSig c (layerPre n) "seq")
  let mix := seqRes.2.splitSig (mixerParamSig c (layerPre n) (c.attentionKindAt n))
  let chanRes := mix.2.splitSig (resSig c (layerPre n) "chan")
  let sr := seqRes.1
  let cr := chanRes.1
  (retrieveNormFrag sc.retrievalEps sc.preNormEps sr.head sr.tail.head sr.tail.tail.head depth.emb
    depth.rest).seq1 fun _ ρ₁ seqIn =>
  (mixerFrag c T sc (layerPre n) (c.attentionKindAt n) (mix.1.map ρ₁) (st.map ρ₁) seqIn
    (ρ₁ sv.scoreScale)).seqSplit fun _ ρ₂ mouts mseq =>
  let d₂ := depth.map (fun v => ρ₂ (ρ₁ v))
  (afterFrag d₂ mseq.head).seq1 fun _ ρ₃ after =>
  (retrieveNormFrag sc.retrievalEps sc.preNormEps (ρ₃ (ρ₂ (ρ₁ cr.head))) (ρ₃ (ρ₂ (ρ₁ cr.tail.head)))
    (ρ₃ (ρ₂ (ρ₁ cr.tail.tail.head))) (ρ₃ d₂.emb) (varsAppend (varsMap ρ₃ d₂.blocks) [after])).seq1
    fun _ ρ₄ chanIn =>
  (channelFrag c sc (layerPre n) (c.isMoE n) (chanRes.2.map (fun v => ρ₄ (ρ₃ (ρ₂ (ρ₁ v))))) chanIn
    (ρ₄ (ρ₃ (ρ₂ (ρ₁ sv.gateCap)))) (ρ₄ (ρ₃ (ρ₂ (ρ₁ sv.upCap))))).seqSplit fun _ ρ₅ couts cy =>
  .bind (addTerm c.hiddenDim (ρ₅ (ρ₄ after)) cy.head) fun newPart =>
  .pure (VarList.append
    (VarList.appendSig (mixerOutSig c T (layerPre n) (c.attentionKindAt n))
      (mouts.map (fun v => (ρ₅ (ρ₄ (ρ₃ v))).up)) (couts.map (fun v => v.up)))
    (.cons newPart .nil))

/-- **The final head** (k3-spec §2.5 `finishDecoder`): retrieval over the final depth state,
`RMSNorm ⊙ γ`, the vocabulary head. -/
def finalFrag (sc : Scalars α) {Γ : List Shape} (ps : VarList Γ (Signature.shapes (finalSig c)))
    (depth : DepthVars Γ c.hiddenDim) : Frag α Γ [[c.vocabSize]] :=
  let r := ps.splitSig (resSig c "" "final")
  (retrieveNormFrag sc.retrievalEps sc.finalNormEps r.1.head r.1.tail.head r.1.tail.tail.head depth.emb
    depth.rest).seq1 fun _ ρ h =>
  .bind (.op (.vecMatMul c.hiddenDim c.vocabSize) (.cons (.var h) (.cons (.var (ρ r.2.head)) .nil)))
    fun logits => .pure (.cons logits .nil)

/-- **Layers `n, …, n + k − 1`, then the head**, from the depth state `depth`: each layer's
fragment, its depth commit (the block fold at `attnResBlockSize`), the rest; the parameters
and states are variables of the graph's context `Γ₀`, read through `ρ₀`. Results: the logits,
then every layer's outputs in order. -/
def layersFrag [Scalar α] (sc : Scalars α) {Γ₀ : List Shape} (sv₀ : ScalarVars Γ₀) :
    (n k : Nat) → {Γ : List Shape} → Renaming Γ₀ Γ → VarList Γ₀ (Signature.shapes (layersParamSig c n k)) →
    VarList Γ₀ (Signature.shapes (layersStateSig c T n k)) → DepthVars Γ c.hiddenDim →
    Frag α Γ ([c.vocabSize] :: Signature.shapes (layersOutSig c T n k))
  | _, 0, _, ρ₀, ps, _, depth => finalFrag c sc (ps.map ρ₀) depth
  | n, k + 1, _, ρ₀, ps, st, depth =>
    let p := ps.splitSig (layerParamSig c n)
    let s := st.splitSig (stateSig c T (layerPre n) (c.attentionKindAt n))
    (layerFrag c T sc n (p.1.map ρ₀) (s.1.map ρ₀) (sv₀.map ρ₀) depth).seqSplit fun _ ρ outs np =>
    let depth' := (depth.map ρ).commit c.attnResBlockSize np.head
    (layersFrag sc sv₀ (n + 1) k (fun v => ρ (ρ₀ v)) p.2 s.2 depth').seq fun _ ρ' rest =>
    .pure (.cons rest.head (VarList.appendSig (layerOutSig c T n) (outs.map ρ') rest.tail))

/-- The decoder's variables in its own context: parameters, scalar inputs and states. -/
def baseParams : VarList (BaseCtx c T) (Signature.shapes (paramSig c)) :=
  ((VarList.self (BaseCtx c T)).split (Signature.shapes (paramSig c))).1

/-- The decoder's input variables. -/
def baseInputs : VarList (BaseCtx c T) (Signature.shapes (inputSig c T)) :=
  ((VarList.self (BaseCtx c T)).split (Signature.shapes (paramSig c))).2

/-- **The decoder token step as one graph program** (k3-spec §2.5, §3): for configuration `c`,
`T` past tokens in every MLA cache and the configuration's real hyperparameters `sc`, the
layers of the schedule from the embedding row alone (`BlockState.initial`), then the head. -/
def program [Scalar α] (sc : Scalars α) : Program α :=
  let is := (baseInputs c T).splitSig (scalarSig c)
  let scal := is.1
  Program.ofFrag (paramSig c) (inputSig c T) (outputSig c T)
    (layersFrag c T sc ⟨scal.tail.head, scal.tail.tail.head, scal.tail.tail.tail.head⟩ 1 c.numLayers
      (fun v => v) (baseParams c T) is.2 ⟨scal.head, [], scal.head, 0⟩)

end Layers

/-- **The decoder token step of the tiny configuration** (`fixtures/tiny/config.json`, 3 past
tokens) as `k3spec.graph.v1` JSON (`fixtures/graphs/decoder_step_tiny.json`). -/
def jsonTiny : String :=
  Program.toJson "decoder_step_tiny" (program (α := Float) tinyConfig 3 (Scalars.of tinyConfig))

/-- **The decoder token step at the report's dimensions** (`paperConfig`, 93 layers, 1 past
token) as `k3spec.graph.v1` JSON (`fixtures/graphs/decoder_step_paper.json`; checked for its
node count and shapes, not run). -/
def jsonPaper : String :=
  Program.toJson "decoder_step_paper" (program (α := Float) paperConfig 1 (Scalars.of paperConfig))

end Decoder

/-! ## The MoonViT-V2 encoder (k3-spec §7, report §2.4) -/

namespace Vision

namespace EncoderGraph

variable {α : Type}

/-- **The parameters of blocks `k, …, k + n − 1`** (k3-spec §7): each block's
`BlockGraph.paramSig` with its names prefixed `blocks.k.` (`blocks.0.norm0`, …, `blocks.0.fc1`,
`blocks.1.norm0`, …). -/
def blocksSig (D A R V M : Nat) (k : Nat) : Nat → Signature
  | 0 => []
  | n + 1 => Signature.append (Signature.prefix ("blocks." ++ toString k ++ ".") (BlockGraph.paramSig D A R V M))
      (blocksSig D A R V M (k + 1) n)

/-- **The encoder's parameters** (k3-spec §7): the `n` blocks' (`blocksSig`), then the final
norm's gain `final_norm [D]` (`vision_tower.encoder.final_layernorm.weight`). -/
def paramSig (D A R V M n : Nat) : Signature :=
  Signature.append (blocksSig D A R V M 0 n) [("final_norm", [D])]

/-- **The encoder's inputs** (k3-spec §7): one clip's embedded tokens `x [L, D]` and its 2-D RoPE
tables `cos`, `sin [L, 2R]` (`Vision.ropeCos`, `ropeSin`; shared by every block). -/
def inputSig (L D R : Nat) : Signature := [("x", [L, D]), ("cos", [L, 2 * R]), ("sin", [L, 2 * R])]

/-- **The encoder's output** (k3-spec §7): the clip's tokens after the final norm, `y [L, D]`. -/
def outputSig (L D : Nat) : Signature := [("y", [L, D])]

/-- **Blocks `k, …, k + n − 1` as one fragment** (k3-spec §7, `Vision.encode`'s fold): block `k`'s
graph (`BlockGraph.model`, its parameters the first block of `ps`, unprefixed) on the tokens `x`
and the tables, bound once, then the next blocks on its output. No block: `x` itself. -/
def blocksFrag [Scalar α] (L D A R V M : Nat) (eps scale cubic root : α) :
    {Γ : List Shape} → (k n : Nat) → VarList Γ (Signature.shapes (blocksSig D A R V M k n)) →
    Var Γ [L, D] → Var Γ [L, 2 * R] → Var Γ [L, 2 * R] → Frag α Γ [[L, D]]
  | _, _, 0, _, x, _, _ => .pure (.cons x .nil)
  | _, k, n + 1, ps, x, cos, sin =>
    let p := ps.splitSig (Signature.prefix ("blocks." ++ toString k ++ ".") (BlockGraph.paramSig D A R V M))
    (Frag.ofModel (BlockGraph.model L D A R V M eps scale cubic root)
      (VarList.append (VarList.unprefix _ (BlockGraph.paramSig D A R V M) p.1)
        (.cons x (.cons cos (.cons sin .nil))))).seq1 fun _ ρ y =>
    blocksFrag L D A R V M eps scale cubic root (k + 1) n (p.2.map ρ) y (ρ cos) (ρ sin)

/-- **The MoonViT-V2 encoder on one clip as one graph program** (k3-spec §7, report §2.4;
`Vision.encode`): `n` blocks in order (`blocksFrag`), then `RMSNorm_ε(·) ⊙ final_norm`; `L` tokens
of width `D`, `A` heads of `4R`, value width `V`, MLP `M`, the norms' `eps`, the score `scale`,
the tanh GELU's `cubic` and `root`. Meaning: `EncoderGraph.program_eval_eq_encode`. -/
def program [Scalar α] (L D A R V M n : Nat) (eps scale cubic root : α) : Program α :=
  let all := (VarList.self (Shape.appendList (paramSig D A R V M n).shapes (inputSig L D R).shapes)).split
    (paramSig D A R V M n).shapes
  let ps := all.1.splitSig (blocksSig D A R V M 0 n) (B := [("final_norm", [D])])
  let is : VarList _ [[L, D], [L, 2 * R], [L, 2 * R]] := all.2
  Program.ofFrag (paramSig D A R V M n) (inputSig L D R) (outputSig L D)
    ((blocksFrag L D A R V M eps scale cubic root 0 n ps.1 is.head is.tail.head is.tail.tail.head).seq1 fun _ ρ y =>
      .bind (.op (.rmsNormLast eps [L] D) (.cons (.var y) (.cons (.var (ρ ps.2.head)) .nil))) fun z =>
        .pure (.cons z .nil))

/-- **The tiny encoder** (k3-spec §7, report §2.4, at `fixtures/tiny/config.json`'s `vision_config`) as `k3spec.graph.v1` JSON
(`fixtures/graphs/vision_encoder_tiny.json`): both blocks (`vt_num_hidden_layers = 2`) on one clip
of 2 frames of 6 × 4 tokens (`L = 48`), width 20, 3 heads of `4·3 = 12`, MLP 28; ε = 6·10⁻⁵, score
scale `12^(−1/2)`, the GELU constants at `Float`. -/
def jsonTiny : String :=
  Program.toJson "vision_encoder_tiny" (program (α := Float) 48 20 3 3 12 28 2 0.00006
    (1 / Scalar.sqrt ((12 : Nat) : Float)) geluCubic (Scalar.sqrt (2 / TrigScalar.pi)))

end EncoderGraph

end Vision

end KimiK3
