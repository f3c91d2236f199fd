module

public import KimiK3.Channel.ExpertGraph
public import KimiK3.KimiLinear.MoE

/-!
# The SwiGLU expert as a typed graph (k3-spec §7, Kimi Linear)

The expert of Kimi Linear's MoE (and its shared and dense MLPs) built from primitive nodes only:
`let gate := x G; let up := x U; ((gate · σ(gate)) · up) D` — SiLU written as `gate · σ(gate)`,
as in K3's expert graph (`Channel/ExpertGraph.lean`) with SiTU's soft caps removed.
`SwiGLUGraph.specFwd_eq_swigluForward`: the graph computes `KimiLinear.swigluForward` for
all weights and widths.
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

namespace SwiGLUGraph

open ExpertGraph

variable {α : Type}

/-- SwiGLU on vector terms, `(gate · σ(gate)) · up` (the gate term is used twice: callers
pass a variable). -/
@[macro_inline] def swigluTerm {Γ : List Shape} (n : Nat) (gate up : Term α Γ [n]) : Term α Γ [n] :=
  mulTerm n (mulTerm n gate (.op (.unary .sigmoid [n]) (.cons gate .nil))) up

/-- The SwiGLU expert graph: gate and up projections bound once (`let1`), SwiGLU, down
projection. Inputs are context variables. -/
@[macro_inline] def term {Γ : List Shape} (d h o : Nat) (input : Var Γ [d])
    (gateWeight upWeight : Var Γ [d, h]) (downWeight : Var Γ [h, o]) : Term α Γ [o] :=
  .let1 (vecMatTerm d h (.var input) (.var gateWeight))
    (.let1 (vecMatTerm d h (.var (.there input)) (.var (.there upWeight)))
      (vecMatTerm h o (swigluTerm h (.var (.there .here)) (.var .here))
        (.var (.there (.there downWeight)))))

/-- The SwiGLU expert as a model: parameters `gateWeight, upWeight, downWeight`; input
`input`; output `output` (k3-spec §7; transformers `KimiLinearMLP`). -/
def model (d h o : Nat) : Model α where
  params := [("gateWeight", [d, h]), ("upWeight", [d, h]), ("downWeight", [h, o])]
  inputs := [("input", [d])]
  outputs := [("output", [o])]
  body := .cons (term d h o (.there (.there (.there .here))) .here (.there .here)
    (.there (.there .here))) .nil

/-- The parameter environment of an expert. -/
def parameters {d h o : Nat} (expert : Expert α d h o) : Env α (model (α := α) d h o).params.shapes :=
  .cons expert.gateWeight (.cons expert.upWeight (.cons expert.downWeight .nil))

/-- The input environment: the token vector. -/
def inputs {d h o : Nat} (input : Tensor α [d]) : Env α (model (α := α) d h o).inputs.shapes :=
  .cons input .nil

variable [Scalar α]

/-- The SwiGLU graph means `swiglu` coordinatewise. -/
@[simp] theorem eval_swigluTerm {Γ : List Shape} (n : Nat) (gate up : Term α Γ [n])
    (env : Env α Γ) :
    (swigluTerm n gate up).eval env = fun j => swiglu (gate.eval env j) (up.eval env j) := by
  simp [swigluTerm, mulTerm]; rfl

/-- The expert graph means `swigluForward`. -/
theorem eval_term {Γ : List Shape} (d h o : Nat) (input : Var Γ [d])
    (gateWeight upWeight : Var Γ [d, h]) (downWeight : Var Γ [h, o]) (env : Env α Γ) :
    (term d h o input gateWeight upWeight downWeight).eval env =
      swigluForward ⟨env.get gateWeight, env.get upWeight, env.get downWeight⟩ (env.get input) := by
  simp [term, vecMatTerm]; rfl

/-- **The SwiGLU graph computes the Kimi Linear expert**, for all weights and widths. -/
theorem specFwd_eq_swigluForward {d h o : Nat} (expert : Expert α d h o) (input : Tensor α [d]) :
    (model d h o).specFwd (parameters expert) (inputs input) =
      .cons (swigluForward expert input) .nil := by
  simp only [Model.specFwd_eq, model, parameters, inputs, Env.append_cons, Env.append_nil,
    Args.eval_cons, Args.eval_nil, eval_term]
  rfl

end SwiGLUGraph

end KimiLinear

end KimiK3
