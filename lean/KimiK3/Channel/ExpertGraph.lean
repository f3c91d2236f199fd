module

public import KimiK3.Core.GraphEval
public import KimiK3.Channel.Expert

/-!
# The expert as a typed graph (report §2.3.2; spec §2.6 "Graph term")

SiTU is **not** an opaque primitive: the graph is built from primitive nodes only.
* `softCapTerm n cap x` = `broadcast(cap) · tanh(x / broadcast(cap))` (`eval_softCapTerm`);
* `Expert.term`: `let gate := x G; let up := x U;
  ((softCap(c_g, gate) · sigmoid(gate)) · softCap(c_u, up)) D`, the sigmoid reading the
  **raw** gate; the caps are graph **inputs** (scalars), not constants.
* `Expert.model d h o`, its `parameters`, `inputs`, and
  `specFwd_eq_forward`: the graph computes `Expert.forward` for all weights and widths.

The builders take their inputs as context variables (`Var`), so that `let1`-bound values can
be shared without re-indexing terms.
-/

@[expose] public section

namespace KimiK3

namespace ExpertGraph

variable {α : Type}

/-- Broadcast a scalar variable to a vector of length `n`. -/
@[macro_inline] def bcastVar {Γ : List Shape} (n : Nat) (c : Var Γ []) : Term α Γ [n] :=
  .op (.broadcast n []) (.cons (.var c) .nil)

/-- The soft-cap graph `cap · tanh(x / cap)` on a vector (report Eq. 19), from primitive nodes:
two broadcasts of the scalar input `cap`, a `div`, a `tanh` and a `mul`. -/
@[macro_inline] def softCapTerm {Γ : List Shape} (n : Nat) (cap : Var Γ []) (x : Term α Γ [n]) : Term α Γ [n] :=
  .op (.binary .mul [n]) (.cons (bcastVar n cap)
    (.cons (.op (.unary .tanh [n]) (.cons (.op (.binary .div [n]) (.cons x (.cons (bcastVar n cap) .nil))) .nil)) .nil))

/-- Entrywise product of two vector terms. -/
@[macro_inline] def mulTerm {Γ : List Shape} (n : Nat) (a b : Term α Γ [n]) : Term α Γ [n] :=
  .op (.binary .mul [n]) (.cons a (.cons b .nil))

/-- Row vector times matrix. -/
@[macro_inline] def vecMatTerm {Γ : List Shape} (n m : Nat) (x : Term α Γ [n]) (w : Term α Γ [n, m]) :
    Term α Γ [m] :=
  .op (.vecMatMul n m) (.cons x (.cons w .nil))

/-- The SiTU graph on vector terms (report Eq. 19): `(softCap(c_g, g) · σ(g)) · softCap(c_u, u)`
with the sigmoid on the raw gate. The gate term is used twice (callers pass a variable). -/
@[macro_inline] def situTerm {Γ : List Shape} (n : Nat) (gateCap upCap : Var Γ []) (gate up : Term α Γ [n]) :
    Term α Γ [n] :=
  mulTerm n (mulTerm n (softCapTerm n gateCap gate) (.op (.unary .sigmoid [n]) (.cons gate .nil)))
    (softCapTerm n upCap up)

/-- The expert graph (report §2.3.2): gate and up projections bound once (`let1`), SiTU from
primitive nodes, down projection. Inputs are context variables. -/
@[macro_inline] def term {Γ : List Shape} (d h o : Nat) (input : Var Γ [d]) (gateWeight upWeight : Var Γ [d, h])
    (downWeight : Var Γ [h, o]) (gateCap upCap : Var Γ []) : Term α Γ [o] :=
  .let1 (vecMatTerm d h (.var input) (.var gateWeight))
    (.let1 (vecMatTerm d h (.var (.there input)) (.var (.there upWeight)))
      (vecMatTerm h o
        (situTerm h (.there (.there gateCap)) (.there (.there upCap)) (.var (.there .here))
          (.var .here))
        (.var (.there (.there downWeight)))))

/-- The expert as a model: parameters `gateWeight, upWeight, downWeight`; inputs `input`,
`gateCap`, `upCap`; output `output`. -/
def model (d h o : Nat) : Model α where
  params := [("gateWeight", [d, h]), ("upWeight", [d, h]), ("downWeight", [h, o])]
  inputs := [("input", [d]), ("gateCap", []), ("upCap", [])]
  outputs := [("output", [o])]
  body := .cons (term d h o (.there (.there (.there .here))) .here (.there .here)
    (.there (.there .here)) (.there (.there (.there (.there .here))))
    (.there (.there (.there (.there (.there .here)))))) .nil

/-- The parameter environment of an expert. -/
def parameters {d h o : Nat} (expert : Expert α d h o) : Env α (model (α := α) d h o).params.shapes :=
  .cons expert.gateWeight (.cons expert.upWeight (.cons expert.downWeight .nil))

/-- The input environment: the token vector and the two caps. -/
def inputs {d h o : Nat} (input : Tensor α [d]) (gateCap upCap : α) :
    Env α (model (α := α) d h o).inputs.shapes :=
  .cons input (.cons (show Tensor α [] from gateCap) (.cons (show Tensor α [] from upCap) .nil))

variable [Scalar α]

/-- The soft-cap graph means `softCap` coordinatewise. -/
@[simp] theorem eval_softCapTerm {Γ : List Shape} (n : Nat) (cap : Var Γ []) (x : Term α Γ [n])
    (env : Env α Γ) :
    (softCapTerm n cap x).eval env = fun j => softCap (env.get cap) (x.eval env j) := by
  simp [softCapTerm, bcastVar]; rfl

/-- The SiTU graph means `SiTU.vector`. -/
@[simp] theorem eval_situTerm {Γ : List Shape} (n : Nat) (gateCap upCap : Var Γ [])
    (gate up : Term α Γ [n]) (env : Env α Γ) :
    (situTerm n gateCap upCap gate up).eval env =
      SiTU.vector (env.get gateCap) (env.get upCap) (gate.eval env) (up.eval env) := by
  simp [situTerm, mulTerm]; rfl

/-- The expert graph means `Expert.forward`. -/
theorem eval_term {Γ : List Shape} (d h o : Nat) (input : Var Γ [d])
    (gateWeight upWeight : Var Γ [d, h]) (downWeight : Var Γ [h, o]) (gateCap upCap : Var Γ [])
    (env : Env α Γ) :
    (term d h o input gateWeight upWeight downWeight gateCap upCap).eval env =
      Expert.forward ⟨env.get gateWeight, env.get upWeight, env.get downWeight⟩
        (env.get gateCap) (env.get upCap) (env.get input) := by
  simp [term, vecMatTerm]; rfl

/-- **The expert graph computes the expert** (report §2.3.2), for all weights, caps and widths. -/
theorem specFwd_eq_forward {d h o : Nat} (expert : Expert α d h o) (input : Tensor α [d])
    (gateCap upCap : α) :
    (model d h o).specFwd (parameters expert) (inputs input gateCap upCap) =
      .cons (expert.forward gateCap upCap input) .nil := by
  simp only [Model.specFwd_eq, model, parameters, inputs, Env.append_cons, Env.append_nil,
    Args.eval_cons, Args.eval_nil, eval_term]
  rfl

end ExpertGraph

end KimiK3
