module

public import KimiK3.Channel.ExpertGraph
public import KimiK3.Channel.LatentMoE

/-!
# Stable LatentMoE as a typed graph for a fixed route (report §2.3, Eq. 11–13)

Top-k is **not** a graph node: the graph is built for a fixed route `Fin k → Fin E`
(`term`), and its weights are read from context variables — for slot `i`, the router column
and the three weights of expert `route i`. Nodes: the shared experts (`ExpertGraph.term`,
summed), one down projection bound once (`let1`), per-slot sigmoid scores
`σ(Σ_c x_c R_{c,e})` (`mul`, `sumLast`, `sigmoid`), raw-score renormalization (`div` by the
summed scores) times the routed scaling factor (`scale`), routed expert graphs on the latent
vector, weighted sum (`broadcast`, `mul`, `add`), RMSNorm with scale (`rmsNormLast`), up projection, and the sum with the shared path.

`eval_term` (**denotation theorem**): for every context holding the layer's weights at the
given variables, the graph evaluates to `StableLatentMoE.forward route`, for all widths, all
counts of shared and active experts, and every route. `eval_term_route` specializes it to the
layer's own route (`forwardAuto`, top-k of the bias-adjusted scores).
-/

@[expose] public section

namespace KimiK3

namespace MoEGraph

open ExpertGraph

variable {α : Type}

/-- The sum of `n` terms, added left to right like `finSum`; the empty sum is `0 · zero`. -/
def sumTerms [Scalar α] {Γ : List Shape} {s : Shape} (zero : Term α Γ s) :
    (n : Nat) → (Fin n → Term α Γ s) → Term α Γ s
  | 0, _ => .op (.scale 0 s) (.cons zero .nil)
  | n + 1, f => .op (.binary .add s)
      (.cons (sumTerms zero n (fun i => f ⟨i.val, by omega⟩)) (.cons (f ⟨n, by omega⟩) .nil))

/-- The raw router score of one expert, `σ(Σ_c x_c r_c)`, from its router column `r`. -/
@[macro_inline] def scoreTerm {Γ : List Shape} (d : Nat) (input : Var Γ [d]) (routerCol : Var Γ [d]) :
    Term α Γ [] :=
  .op (.unary .sigmoid []) (.cons (.op (.sumLast [] d) (.cons (mulTerm d (.var input) (.var routerCol)) .nil)) .nil)

/-- The renormalized mixture weight of slot `i`: its raw score over the sum of the slots'
raw scores. -/
@[macro_inline] def weightTerm [Scalar α] {Γ : List Shape} (d k : Nat) (input : Var Γ [d]) (zero : Var Γ [])
    (routerCol : Fin k → Var Γ [d]) (i : Fin k) : Term α Γ [] :=
  .op (.binary .div []) (.cons (scoreTerm d input (routerCol i))
    (.cons (sumTerms (.var zero) k (fun j => scoreTerm d input (routerCol j))) .nil))

/-- The Stable LatentMoE graph for a fixed route (report Eq. 11): the slot-indexed variables
hold the router column and weights of the expert in that slot. -/
@[macro_inline] def term [Scalar α] {Γ : List Shape} (d l hs hr S k : Nat) (eps routedScale : α)
    (input : Var Γ [d])
    (gateCap upCap : Var Γ [])
    (sharedGate sharedUp : Fin S → Var Γ [d, hs]) (sharedDown : Fin S → Var Γ [hs, d])
    (downProject : Var Γ [d, l]) (routerCol : Fin k → Var Γ [d])
    (routedGate routedUp : Fin k → Var Γ [l, hr]) (routedDown : Fin k → Var Γ [hr, l])
    (normScale : Var Γ [l]) (upProject : Var Γ [l, d]) : Term α Γ [d] :=
  let shared : Term α Γ [d] := sumTerms (.var input) S (fun i =>
    ExpertGraph.term d hs d input (sharedGate i) (sharedUp i) (sharedDown i) gateCap upCap)
  let routed : Term α Γ [l] := .let1 (vecMatTerm d l (.var input) (.var downProject))
    (sumTerms (.var .here) k (fun i =>
      mulTerm l (.op (.broadcast l []) (.cons (.op (.scale routedScale []) (.cons
          (weightTerm d k (.there input) (.there gateCap) (fun j => .there (routerCol j)) i) .nil)) .nil))
        (ExpertGraph.term l hr l .here (.there (routedGate i)) (.there (routedUp i))
          (.there (routedDown i)) (.there gateCap) (.there upCap))))
  let normed : Term α Γ [l] := .op (.rmsNormLast eps [] l) (.cons routed (.cons (.var normScale) .nil))
  .op (.binary .add [d]) (.cons shared (.cons (vecMatTerm l d normed (.var upProject)) .nil))

section Eval

variable [ScalarField α]

/-- A sum of vector terms evaluates to the coordinatewise `finSum`. -/
theorem eval_sumTerms_vec {Γ : List Shape} {m : Nat} (zero : Term α Γ [m]) (n : Nat)
    (f : Fin n → Term α Γ [m]) (env : Env α Γ) :
    (sumTerms zero n f).eval env = fun c => finSum n (fun i => (f i).eval env c) := by
  induction n with
  | zero =>
    funext c; simp [sumTerms]
    show (0 : α) * _ = 0; grind
  | succ n ih =>
    funext c
    simp only [sumTerms, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_binary, ih]
    rfl

/-- A sum of scalar terms evaluates to the `finSum`. -/
theorem eval_sumTerms_scalar {Γ : List Shape} (zero : Term α Γ []) (n : Nat)
    (f : Fin n → Term α Γ []) (env : Env α Γ) :
    (sumTerms zero n f).eval env = finSum n (fun i => (f i).eval env) := by
  induction n with
  | zero => simp [sumTerms]; show (0 : α) * _ = 0; grind
  | succ n ih =>
    simp only [sumTerms, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_binary, ih]
    rfl

/-- The score graph means `σ(Σ_c x_c r_c)`. -/
theorem eval_scoreTerm {Γ : List Shape} (d : Nat) (input routerCol : Var Γ [d]) (env : Env α Γ) :
    (scoreTerm d input routerCol).eval env =
      Scalar.sigmoid (finSum d (fun c => env.get input c * env.get routerCol c)) := by
  simp [scoreTerm, mulTerm]; rfl

/-- The weight graph means the raw score renormalized over the slots. -/
theorem eval_weightTerm {Γ : List Shape} (d k : Nat) (input : Var Γ [d]) (zero : Var Γ [])
    (routerCol : Fin k → Var Γ [d]) (i : Fin k) (env : Env α Γ) :
    (weightTerm d k input zero routerCol i).eval env =
      Scalar.sigmoid (finSum d (fun c => env.get input c * env.get (routerCol i) c)) /
        finSum k (fun j => Scalar.sigmoid (finSum d (fun c => env.get input c * env.get (routerCol j) c))) := by
  simp only [weightTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_binary,
    eval_sumTerms_scalar, eval_scoreTerm]
  rfl

/-- **Denotation theorem for a fixed route.** If the context holds, at the given variables, the
weights of `moe` (for slot `i`: router column and expert weights of expert `route i`), the
graph computes `moe.forward route` for all widths, expert counts and routes. -/
theorem eval_term {Γ : List Shape} {d l hs hr S E k : Nat}
    (moe : StableLatentMoE α d l hs hr S E) (route : Fin k → Fin E) (env : Env α Γ)
    (input : Var Γ [d]) (gateCap upCap : Var Γ [])
    (sharedGate sharedUp : Fin S → Var Γ [d, hs]) (sharedDown : Fin S → Var Γ [hs, d])
    (downProject : Var Γ [d, l]) (routerCol : Fin k → Var Γ [d])
    (routedGate routedUp : Fin k → Var Γ [l, hr]) (routedDown : Fin k → Var Γ [hr, l])
    (normScale : Var Γ [l]) (upProject : Var Γ [l, d])
    (hSG : ∀ i, env.get (sharedGate i) = (moe.shared i).gateWeight)
    (hSU : ∀ i, env.get (sharedUp i) = (moe.shared i).upWeight)
    (hSD : ∀ i, env.get (sharedDown i) = (moe.shared i).downWeight)
    (hDown : env.get downProject = moe.downProject)
    (hR : ∀ i, env.get (routerCol i) = fun c => moe.routerWeight c (route i))
    (hRG : ∀ i, env.get (routedGate i) = (moe.routed (route i)).gateWeight)
    (hRU : ∀ i, env.get (routedUp i) = (moe.routed (route i)).upWeight)
    (hRD : ∀ i, env.get (routedDown i) = (moe.routed (route i)).downWeight)
    (hNorm : env.get normScale = moe.routedNormScale) (hUp : env.get upProject = moe.upProject) :
    (term d l hs hr S k moe.normEps moe.routedScale input gateCap upCap sharedGate sharedUp sharedDown downProject
      routerCol routedGate routedUp routedDown normScale upProject).eval env =
      moe.forward route (env.get gateCap) (env.get upCap) (env.get input) := by
  simp only [term, Term.eval_op, Term.eval_let1, Args.eval_cons, Args.eval_nil,
    PrimOp.eval_binary, PrimOp.eval_vecMatMul, PrimOp.eval_rmsNormLast, PrimOp.eval_broadcast,
    PrimOp.eval_scale, eval_sumTerms_vec, ExpertGraph.eval_term, eval_weightTerm, Term.eval_var, Env.get_here,
    Env.get_there, hSG, hSU, hSD, hDown, hR, hRG, hRU, hRD, hNorm, hUp, mulTerm, vecMatTerm]
  rfl

/-- **Route-from-scores model.** The graph built for the layer's own route at this token
(top-k of the bias-adjusted scores, `StableLatentMoE.route`) computes `forwardAuto`, the layer
with its own routing (report `modelAtInput_specFwd_eq_forwardReal`). The route is chosen when the
graph is built; `StableLatentMoE.route_isTopK` certifies it. -/
theorem eval_term_route {Γ : List Shape} {d l hs hr S E k : Nat}
    (moe : StableLatentMoE α d l hs hr S E) (hk : k ≤ E) (env : Env α Γ)
    (input : Var Γ [d]) (gateCap upCap : Var Γ [])
    (sharedGate sharedUp : Fin S → Var Γ [d, hs]) (sharedDown : Fin S → Var Γ [hs, d])
    (downProject : Var Γ [d, l]) (routerCol : Fin k → Var Γ [d])
    (routedGate routedUp : Fin k → Var Γ [l, hr]) (routedDown : Fin k → Var Γ [hr, l])
    (normScale : Var Γ [l]) (upProject : Var Γ [l, d])
    (hSG : ∀ i, env.get (sharedGate i) = (moe.shared i).gateWeight)
    (hSU : ∀ i, env.get (sharedUp i) = (moe.shared i).upWeight)
    (hSD : ∀ i, env.get (sharedDown i) = (moe.shared i).downWeight)
    (hDown : env.get downProject = moe.downProject)
    (hR : ∀ i, env.get (routerCol i) = fun c => moe.routerWeight c (moe.route hk (env.get input) i))
    (hRG : ∀ i, env.get (routedGate i) = (moe.routed (moe.route hk (env.get input) i)).gateWeight)
    (hRU : ∀ i, env.get (routedUp i) = (moe.routed (moe.route hk (env.get input) i)).upWeight)
    (hRD : ∀ i, env.get (routedDown i) = (moe.routed (moe.route hk (env.get input) i)).downWeight)
    (hNorm : env.get normScale = moe.routedNormScale) (hUp : env.get upProject = moe.upProject) :
    (term d l hs hr S k moe.normEps moe.routedScale input gateCap upCap sharedGate sharedUp sharedDown downProject
      routerCol routedGate routedUp routedDown normScale upProject).eval env =
      moe.forwardAuto hk (env.get gateCap) (env.get upCap) (env.get input) :=
  eval_term moe _ env input gateCap upCap sharedGate sharedUp sharedDown downProject routerCol
    routedGate routedUp routedDown normScale upProject hSG hSU hSD hDown hR hRG hRU hRD hNorm hUp

end Eval

end MoEGraph

end KimiK3
