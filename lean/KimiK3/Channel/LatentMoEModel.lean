module

public import KimiK3.Channel.LatentMoEGraph

/-!
# Stable LatentMoE as a `Model` for a fixed route (report §2.3; `modelGivenRoute`)

Packs `MoEGraph.term` into a `Model` with named parameters and inputs:

* parameters: for each shared expert `gate, up, down`; `downProject`; for each route slot the
  router column of its expert and the expert's `gate, up, down`; `routedNormScale`,
  `upProject` (`paramSig`);
* inputs: `input`, `gateCap`, `upCap`.

`modelGivenRoute_specFwd_eq_forward`: `specFwd` of the model on `parameters moe route` is
`moe.forward route`, for all widths, expert counts and routes;
`modelAtInput_specFwd_eq_forwardAuto`: with the route the layer itself picks for this token
(top-k of the bias-adjusted scores) it is `moe.forwardAuto`. Top-k is not a graph node: the
graph is rebuilt when the route changes.
-/

@[expose] public section

namespace KimiK3

namespace MoEModel

open MoEGraph

variable {α : Type}

/-- `n` shared-expert weight triples `gate [d, hs]`, `up [d, hs]`, `down [hs, d]` before `rest`. -/
def sharedSig (d hs : Nat) : Nat → Signature → Signature
  | 0, rest => rest
  | n + 1, rest => ("shared.gate", [d, hs]) :: ("shared.up", [d, hs]) :: ("shared.down", [hs, d]) ::
      sharedSig d hs n rest

/-- `n` route slots: router column `[d]` and expert weights `gate, up [l, hr]`, `down [hr, l]`. -/
def slotSig (d l hr : Nat) : Nat → Signature → Signature
  | 0, rest => rest
  | n + 1, rest => ("slot.router", [d]) :: ("slot.gate", [l, hr]) :: ("slot.up", [l, hr]) ::
      ("slot.down", [hr, l]) :: slotSig d l hr n rest

/-- The parameter signature of the layer for `S` shared experts and `k` route slots. -/
def paramSig (d l hs hr S k : Nat) : Signature :=
  sharedSig d hs S (("downProject", [d, l]) :: slotSig d l hr k
    [("routedNormScale", [l]), ("upProject", [l, d])])

/-- The input signature: the token and the two SiTU caps. -/
def inputSig (d : Nat) : Signature := [("input", [d]), ("gateCap", []), ("upCap", [])]

section Vars

variable {I : List Shape}

/-- Lift a variable of `rest` past `n` shared triples. -/
def sharedLift (d hs : Nat) (rest : Signature) {s : Shape} :
    (n : Nat) → Var (Shape.appendList (Signature.shapes rest) I) s →
      Var (Shape.appendList (Signature.shapes (sharedSig d hs n rest)) I) s
  | 0, v => v
  | n + 1, v => .there (.there (.there (sharedLift d hs rest n v)))

/-- The gate-weight variable of shared expert `i`. -/
def sharedGate (d hs : Nat) (rest : Signature) :
    (n : Nat) → Fin n → Var (Shape.appendList (Signature.shapes (sharedSig d hs n rest)) I) [d, hs]
  | 0, i => i.elim0
  | _ + 1, ⟨0, _⟩ => .here
  | n + 1, ⟨i + 1, h⟩ => .there (.there (.there (sharedGate d hs rest n ⟨i, by omega⟩)))

/-- The up-weight variable of shared expert `i`. -/
def sharedUp (d hs : Nat) (rest : Signature) :
    (n : Nat) → Fin n → Var (Shape.appendList (Signature.shapes (sharedSig d hs n rest)) I) [d, hs]
  | 0, i => i.elim0
  | _ + 1, ⟨0, _⟩ => .there .here
  | n + 1, ⟨i + 1, h⟩ => .there (.there (.there (sharedUp d hs rest n ⟨i, by omega⟩)))

/-- The down-weight variable of shared expert `i`. -/
def sharedDown (d hs : Nat) (rest : Signature) :
    (n : Nat) → Fin n → Var (Shape.appendList (Signature.shapes (sharedSig d hs n rest)) I) [hs, d]
  | 0, i => i.elim0
  | _ + 1, ⟨0, _⟩ => .there (.there .here)
  | n + 1, ⟨i + 1, h⟩ => .there (.there (.there (sharedDown d hs rest n ⟨i, by omega⟩)))

/-- Lift a variable of `rest` past `n` route slots. -/
def slotLift (d l hr : Nat) (rest : Signature) {s : Shape} :
    (n : Nat) → Var (Shape.appendList (Signature.shapes rest) I) s →
      Var (Shape.appendList (Signature.shapes (slotSig d l hr n rest)) I) s
  | 0, v => v
  | n + 1, v => .there (.there (.there (.there (slotLift d l hr rest n v))))

/-- The router-column variable of slot `i`. -/
def slotRouter (d l hr : Nat) (rest : Signature) :
    (n : Nat) → Fin n → Var (Shape.appendList (Signature.shapes (slotSig d l hr n rest)) I) [d]
  | 0, i => i.elim0
  | _ + 1, ⟨0, _⟩ => .here
  | n + 1, ⟨i + 1, h⟩ => .there (.there (.there (.there (slotRouter d l hr rest n ⟨i, by omega⟩))))

/-- The gate-weight variable of slot `i`. -/
def slotGate (d l hr : Nat) (rest : Signature) :
    (n : Nat) → Fin n → Var (Shape.appendList (Signature.shapes (slotSig d l hr n rest)) I) [l, hr]
  | 0, i => i.elim0
  | _ + 1, ⟨0, _⟩ => .there .here
  | n + 1, ⟨i + 1, h⟩ => .there (.there (.there (.there (slotGate d l hr rest n ⟨i, by omega⟩))))

/-- The up-weight variable of slot `i`. -/
def slotUp (d l hr : Nat) (rest : Signature) :
    (n : Nat) → Fin n → Var (Shape.appendList (Signature.shapes (slotSig d l hr n rest)) I) [l, hr]
  | 0, i => i.elim0
  | _ + 1, ⟨0, _⟩ => .there (.there .here)
  | n + 1, ⟨i + 1, h⟩ => .there (.there (.there (.there (slotUp d l hr rest n ⟨i, by omega⟩))))

/-- The down-weight variable of slot `i`. -/
def slotDown (d l hr : Nat) (rest : Signature) :
    (n : Nat) → Fin n → Var (Shape.appendList (Signature.shapes (slotSig d l hr n rest)) I) [hr, l]
  | 0, i => i.elim0
  | _ + 1, ⟨0, _⟩ => .there (.there (.there .here))
  | n + 1, ⟨i + 1, h⟩ => .there (.there (.there (.there (slotDown d l hr rest n ⟨i, by omega⟩))))

end Vars

section Envs

/-- The parameters of `n` shared experts in front of `rest`. -/
def sharedEnv {d hs : Nat} {rest : Signature} :
    (n : Nat) → (Fin n → Expert α d hs d) → Env α (Signature.shapes rest) →
      Env α (Signature.shapes (sharedSig d hs n rest))
  | 0, _, e => e
  | n + 1, f, e => .cons (f ⟨0, by omega⟩).gateWeight (.cons (f ⟨0, by omega⟩).upWeight
      (.cons (f ⟨0, by omega⟩).downWeight (sharedEnv n (fun i => f ⟨i.val + 1, by omega⟩) e)))

/-- The parameters of `n` route slots (router column and expert weights) in front of `rest`. -/
def slotEnv {d l hr : Nat} {rest : Signature} :
    (n : Nat) → (Fin n → Tensor α [d]) → (Fin n → Expert α l hr l) → Env α (Signature.shapes rest) →
      Env α (Signature.shapes (slotSig d l hr n rest))
  | 0, _, _, e => e
  | n + 1, r, f, e => .cons (r ⟨0, by omega⟩) (.cons (f ⟨0, by omega⟩).gateWeight
      (.cons (f ⟨0, by omega⟩).upWeight (.cons (f ⟨0, by omega⟩).downWeight
        (slotEnv n (fun i => r ⟨i.val + 1, by omega⟩) (fun i => f ⟨i.val + 1, by omega⟩) e))))

end Envs

section GetLemmas

variable {I : List Shape} {d l hs hr : Nat} {rest : Signature} (inp : Env α I)

theorem get_sharedLift {s : Shape} (n : Nat) (f : Fin n → Expert α d hs d)
    (e : Env α (Signature.shapes rest)) (v : Var (Shape.appendList (Signature.shapes rest) I) s) :
    ((sharedEnv n f e).append inp).get (sharedLift d hs rest n v) = (e.append inp).get v := by
  revert f
  induction n with
  | zero => intro f; rfl
  | succ n ih => intro f; exact ih _

theorem get_sharedGate (n : Nat) (f : Fin n → Expert α d hs d) (e : Env α (Signature.shapes rest))
    (i : Fin n) : ((sharedEnv n f e).append inp).get (sharedGate d hs rest n i) = (f i).gateWeight := by
  revert f i
  induction n with
  | zero => intro f i; exact i.elim0
  | succ n ih =>
    intro f i
    match i with
    | ⟨0, _⟩ => rfl
    | ⟨i + 1, h⟩ => exact ih _ ⟨i, by omega⟩

theorem get_sharedUp (n : Nat) (f : Fin n → Expert α d hs d) (e : Env α (Signature.shapes rest))
    (i : Fin n) : ((sharedEnv n f e).append inp).get (sharedUp d hs rest n i) = (f i).upWeight := by
  revert f i
  induction n with
  | zero => intro f i; exact i.elim0
  | succ n ih =>
    intro f i
    match i with
    | ⟨0, _⟩ => rfl
    | ⟨i + 1, h⟩ => exact ih _ ⟨i, by omega⟩

theorem get_sharedDown (n : Nat) (f : Fin n → Expert α d hs d) (e : Env α (Signature.shapes rest))
    (i : Fin n) : ((sharedEnv n f e).append inp).get (sharedDown d hs rest n i) = (f i).downWeight := by
  revert f i
  induction n with
  | zero => intro f i; exact i.elim0
  | succ n ih =>
    intro f i
    match i with
    | ⟨0, _⟩ => rfl
    | ⟨i + 1, h⟩ => exact ih _ ⟨i, by omega⟩

theorem get_slotLift {s : Shape} (n : Nat) (r : Fin n → Tensor α [d]) (f : Fin n → Expert α l hr l)
    (e : Env α (Signature.shapes rest)) (v : Var (Shape.appendList (Signature.shapes rest) I) s) :
    ((slotEnv (d := d) n r f e).append inp).get (slotLift d l hr rest n v) = (e.append inp).get v := by
  revert r f
  induction n with
  | zero => intro r f; rfl
  | succ n ih => intro r f; exact ih _ _

theorem get_slotRouter (n : Nat) (r : Fin n → Tensor α [d]) (f : Fin n → Expert α l hr l)
    (e : Env α (Signature.shapes rest)) (i : Fin n) :
    ((slotEnv n r f e).append inp).get (slotRouter d l hr rest n i) = r i := by
  revert r f i
  induction n with
  | zero => intro r f i; exact i.elim0
  | succ n ih =>
    intro r f i
    match i with
    | ⟨0, _⟩ => rfl
    | ⟨i + 1, h⟩ => exact ih _ _ ⟨i, by omega⟩

theorem get_slotGate (n : Nat) (r : Fin n → Tensor α [d]) (f : Fin n → Expert α l hr l)
    (e : Env α (Signature.shapes rest)) (i : Fin n) :
    ((slotEnv n r f e).append inp).get (slotGate d l hr rest n i) = (f i).gateWeight := by
  revert r f i
  induction n with
  | zero => intro r f i; exact i.elim0
  | succ n ih =>
    intro r f i
    match i with
    | ⟨0, _⟩ => rfl
    | ⟨i + 1, h⟩ => exact ih _ _ ⟨i, by omega⟩

theorem get_slotUp (n : Nat) (r : Fin n → Tensor α [d]) (f : Fin n → Expert α l hr l)
    (e : Env α (Signature.shapes rest)) (i : Fin n) :
    ((slotEnv n r f e).append inp).get (slotUp d l hr rest n i) = (f i).upWeight := by
  revert r f i
  induction n with
  | zero => intro r f i; exact i.elim0
  | succ n ih =>
    intro r f i
    match i with
    | ⟨0, _⟩ => rfl
    | ⟨i + 1, h⟩ => exact ih _ _ ⟨i, by omega⟩

theorem get_slotDown (n : Nat) (r : Fin n → Tensor α [d]) (f : Fin n → Expert α l hr l)
    (e : Env α (Signature.shapes rest)) (i : Fin n) :
    ((slotEnv n r f e).append inp).get (slotDown d l hr rest n i) = (f i).downWeight := by
  revert r f i
  induction n with
  | zero => intro r f i; exact i.elim0
  | succ n ih =>
    intro r f i
    match i with
    | ⟨0, _⟩ => rfl
    | ⟨i + 1, h⟩ => exact ih _ _ ⟨i, by omega⟩

end GetLemmas

section Model

/-- The rest of the parameter signature after the shared experts. -/
abbrev restSig (d l hr k : Nat) : Signature :=
  ("downProject", [d, l]) :: slotSig d l hr k [("routedNormScale", [l]), ("upProject", [l, d])]

/-- The context of the model body. -/
abbrev Ctx (d l hs hr S k : Nat) : List Shape :=
  Shape.appendList (Signature.shapes (paramSig d l hs hr S k)) (Signature.shapes (inputSig d))

/-- Lift a variable of the tail (after the route slots) to the body context. -/
abbrev tailVar {d l hs hr S k : Nat} {s : Shape}
    (v : Var (Shape.appendList (Signature.shapes [("routedNormScale", [l]), ("upProject", [l, d])])
      (Signature.shapes (inputSig d))) s) : Var (Ctx d l hs hr S k) s :=
  sharedLift d hs (restSig d l hr k) S (.there (slotLift d l hr _ k v))

/-- The Stable LatentMoE model for `k` route slots (report `modelGivenRoute`): parameters
`paramSig`, inputs `input, gateCap, upCap`, one output. The route decides which experts'
weights fill the slots (`parameters`), not the graph. -/
@[macro_inline] def model [Scalar α] (d l hs hr S k : Nat) (eps routedScale : α) : Model α where
  params := paramSig d l hs hr S k
  inputs := inputSig d
  outputs := [("output", [d])]
  body := .cons (MoEGraph.term d l hs hr S k eps routedScale
    (tailVar (S := S) (k := k) (hs := hs) (.there (.there .here)))
    (tailVar (S := S) (k := k) (hs := hs) (.there (.there (.there .here))))
    (tailVar (S := S) (k := k) (hs := hs) (.there (.there (.there (.there .here)))))
    (sharedGate d hs (restSig d l hr k) S) (sharedUp d hs (restSig d l hr k) S)
    (sharedDown d hs (restSig d l hr k) S)
    (sharedLift d hs (restSig d l hr k) S .here)
    (fun i => sharedLift d hs (restSig d l hr k) S (.there (slotRouter d l hr _ k i)))
    (fun i => sharedLift d hs (restSig d l hr k) S (.there (slotGate d l hr _ k i)))
    (fun i => sharedLift d hs (restSig d l hr k) S (.there (slotUp d l hr _ k i)))
    (fun i => sharedLift d hs (restSig d l hr k) S (.there (slotDown d l hr _ k i)))
    (tailVar (S := S) (k := k) (hs := hs) .here)
    (tailVar (S := S) (k := k) (hs := hs) (.there .here))) .nil

/-- The parameters after the route slots: RMSNorm scale and `W↑`. -/
def tailEnv {d l hs hr S E : Nat} (moe : StableLatentMoE α d l hs hr S E) :
    Env α (Signature.shapes [("routedNormScale", [l]), ("upProject", [l, d])]) :=
  .cons moe.routedNormScale (.cons moe.upProject .nil)

/-- The parameters after the shared experts: `W↓`, the route slots, the tail. -/
def restEnv {d l hs hr S E k : Nat} (moe : StableLatentMoE α d l hs hr S E)
    (route : Fin k → Fin E) : Env α (Signature.shapes (restSig d l hr k)) :=
  .cons moe.downProject
    (slotEnv k (fun i => fun c => moe.routerWeight c (route i)) (fun i => moe.routed (route i))
      (tailEnv moe))

/-- The parameters of a layer for a route: shared experts, `W↓`, for each slot the router column
and weights of its expert, RMSNorm scale, `W↑`. -/
def parameters {d l hs hr S E k : Nat} (moe : StableLatentMoE α d l hs hr S E)
    (route : Fin k → Fin E) : Env α (Signature.shapes (paramSig d l hs hr S k)) :=
  sharedEnv S moe.shared (restEnv moe route)

/-- The inputs: the token and the two caps. -/
def inputs {d : Nat} (input : Tensor α [d]) (gateCap upCap : α) :
    Env α (Signature.shapes (inputSig d)) :=
  .cons input (.cons (show Tensor α [] from gateCap) (.cons (show Tensor α [] from upCap) .nil))

/-- **`modelGivenRoute` denotation theorem** (report `modelGivenRoute_specFwd_eq_forward`): for
every route, the model on the layer's parameters for that route computes `forward route`, for
all widths and numbers of shared and active experts. -/
theorem modelGivenRoute_specFwd_eq_forward [ScalarField α] {d l hs hr S E k : Nat}
    (moe : StableLatentMoE α d l hs hr S E) (route : Fin k → Fin E) (input : Tensor α [d])
    (gateCap upCap : α) :
    (model d l hs hr S k moe.normEps moe.routedScale).specFwd (parameters moe route) (inputs input gateCap upCap) =
      .cons (moe.forward route gateCap upCap input) .nil := by
  -- the parameter environment, piece by piece
  have hSG := fun i => get_sharedGate (inputs input gateCap upCap) S moe.shared
    (restEnv moe route) i
  have hSU := fun i => get_sharedUp (inputs input gateCap upCap) S moe.shared
    (restEnv moe route) i
  have hSD := fun i => get_sharedDown (inputs input gateCap upCap) S moe.shared
    (restEnv moe route) i
  have hDown := get_sharedLift (inputs input gateCap upCap) S moe.shared (restEnv moe route) .here
  have hR := fun i => (get_sharedLift (inputs input gateCap upCap) S moe.shared (restEnv moe route)
    (.there (slotRouter d l hr _ k i))).trans (get_slotRouter (inputs input gateCap upCap) k
      (fun i => fun c => moe.routerWeight c (route i)) (fun i => moe.routed (route i)) (tailEnv moe) i)
  have hRG := fun i => (get_sharedLift (inputs input gateCap upCap) S moe.shared (restEnv moe route)
    (.there (slotGate d l hr _ k i))).trans (get_slotGate (inputs input gateCap upCap) k
      (fun i => fun c => moe.routerWeight c (route i)) (fun i => moe.routed (route i)) (tailEnv moe) i)
  have hRU := fun i => (get_sharedLift (inputs input gateCap upCap) S moe.shared (restEnv moe route)
    (.there (slotUp d l hr _ k i))).trans (get_slotUp (inputs input gateCap upCap) k
      (fun i => fun c => moe.routerWeight c (route i)) (fun i => moe.routed (route i)) (tailEnv moe) i)
  have hRD := fun i => (get_sharedLift (inputs input gateCap upCap) S moe.shared (restEnv moe route)
    (.there (slotDown d l hr _ k i))).trans (get_slotDown (inputs input gateCap upCap) k
      (fun i => fun c => moe.routerWeight c (route i)) (fun i => moe.routed (route i)) (tailEnv moe) i)
  have hTail : ∀ {s : Shape} (v : Var (Shape.appendList
      (Signature.shapes [("routedNormScale", [l]), ("upProject", [l, d])])
      (Signature.shapes (inputSig d))) s),
      ((sharedEnv S moe.shared (restEnv moe route)).append (inputs input gateCap upCap)).get
        (tailVar (S := S) (k := k) (hs := hs) v) = ((tailEnv moe).append (inputs input gateCap upCap)).get v :=
    fun v => (get_sharedLift (inputs input gateCap upCap) S moe.shared (restEnv moe route) _).trans
      (get_slotLift (inputs input gateCap upCap) k
        (fun i => fun c => moe.routerWeight c (route i)) (fun i => moe.routed (route i)) (tailEnv moe) v)
  simp only [Model.specFwd_eq, model, parameters, Args.eval_cons, Args.eval_nil]
  rw [MoEGraph.eval_term moe route _ _ _ _ _ _ _ _ _ _ _ _ _ _ hSG hSU hSD hDown hR hRG hRU hRD
    (hTail .here) (hTail (.there .here))]
  rw [hTail, hTail, hTail]
  rfl

/-- **`modelAtInput` denotation theorem** (report `modelAtInput_specFwd_eq_forwardReal`): with the
route the layer picks for this token (top-k of the bias-adjusted scores, certified by
`StableLatentMoE.route_isTopK`), the model computes `forwardAuto`. -/
theorem modelAtInput_specFwd_eq_forwardAuto [ScalarField α] {d l hs hr S E k : Nat}
    (moe : StableLatentMoE α d l hs hr S E) (hk : k ≤ E) (input : Tensor α [d])
    (gateCap upCap : α) :
    (model d l hs hr S k moe.normEps moe.routedScale).specFwd (parameters moe (moe.route hk input))
        (inputs input gateCap upCap) =
      .cons (moe.forwardAuto hk gateCap upCap input) .nil :=
  modelGivenRoute_specFwd_eq_forward moe _ input gateCap upCap

end Model

end MoEModel

end KimiK3
