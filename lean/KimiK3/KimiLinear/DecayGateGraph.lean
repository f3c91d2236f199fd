module

public import KimiK3.Core.GraphEval
public import KimiK3.Channel.ExpertGraph
public import KimiK3.KimiLinear.LayerFacts

/-!
# The Kimi Linear decay gate of one head as a typed graph (k3-spec §7)

`g = −exp(A_log) · softplus((x W_down) W_up + dt_bias)` for one head (transformers
`KimiLinearForgetGate`), from primitive nodes only. The graph format has no constant node, so
softplus is written `softplus z = −log σ(−z)` (`softplus_eq_neg_log_sigmoid_neg`, from the
scalar laws: `σ(−z) = 1/(1 + e^z)`).

* `softplusTerm`, `term`, `model M R K`, `parameters`, `inputs`;
* `specFwd_eq_logDecay`: the graph computes `KimiLinear.logDecay` of the low-rank logit, for all
  weights and widths (assuming `ScalarLaws`);
* `retention_eq_exp_specFwd`: for a Kimi Linear layer and head `h`, `exp` of the graph's output
  on that head's slices is the layer's prepared retention (`KimiLinear.prepare`).
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

variable {α : Type}

/-- `softplus z = −log σ(−z)` (the logistic sigmoid `σ(−z) = 1/(1 + e^z)`). -/
theorem softplus_eq_neg_log_sigmoid_neg [ScalarLaws α] (z : α) :
    softplus z = -Scalar.log (Scalar.sigmoid (-z)) := by
  have hs : Scalar.sigmoid (-z) = 1 / (1 + Scalar.exp z) := by
    rw [ScalarLaws.sigmoid_eq]
    have : -(-z) = z := by grind
    rw [this]
  have hpos : (0 : α) < 1 + Scalar.exp z := by have := ScalarLaws.exp_pos z; grind
  rw [hs, log_div_of_pos (zero_lt_one' (α := α)) hpos, log_one_eq_zero]
  unfold softplus
  grind

namespace DecayGateGraph

open ExpertGraph

/-- Softplus on a vector term, `−log σ(−z)`, from primitive nodes. -/
@[macro_inline] def softplusTerm {Γ : List Shape} (n : Nat) (z : Term α Γ [n]) : Term α Γ [n] :=
  .op (.unary .neg [n]) (.cons (.op (.unary .log [n]) (.cons (.op (.unary .sigmoid [n])
    (.cons (.op (.unary .neg [n]) (.cons z .nil)) .nil)) .nil)) .nil)

/-- The decay gate of one head: `−(exp(broadcast A) · softplus((x D) U + b))`. Inputs are
context variables. -/
@[macro_inline] def term {Γ : List Shape} (M R K : Nat) (input : Var Γ [M]) (down : Var Γ [M, R])
    (up : Var Γ [R, K]) (bias : Var Γ [K]) (logRate : Var Γ []) : Term α Γ [K] :=
  .op (.unary .neg [K]) (.cons (mulTerm K (.op (.unary .exp [K]) (.cons (bcastVar K logRate) .nil))
    (softplusTerm K (.op (.binary .add [K])
      (.cons (vecMatTerm R K (vecMatTerm M R (.var input) (.var down)) (.var up))
        (.cons (.var bias) .nil))))) .nil)

/-- The decay gate of one head as a model: parameters `decayDown [M, R]` (`f_a_proj`),
`decayUp [R, K]` (the head's columns of `f_b_proj`), `decayBias [K]` (`dt_bias`),
`decayLogRate []` (`A_log[h]`); input `input [M]`; output `logDecay [K]`. -/
def model (M R K : Nat) : Model α where
  params := [("decayDown", [M, R]), ("decayUp", [R, K]), ("decayBias", [K]), ("decayLogRate", [])]
  inputs := [("input", [M])]
  outputs := [("logDecay", [K])]
  body := .cons (term M R K (.there (.there (.there (.there .here)))) .here (.there .here)
    (.there (.there .here)) (.there (.there (.there .here)))) .nil

/-- The parameter environment. -/
def parameters {M R K : Nat} (down : Tensor α [M, R]) (up : Tensor α [R, K]) (bias : Tensor α [K])
    (logRate : α) : Env α (model (α := α) M R K).params.shapes :=
  .cons down (.cons up (.cons bias (.cons (show Tensor α [] from logRate) .nil)))

/-- The input environment: the token vector. -/
def inputs {M R K : Nat} (input : Tensor α [M]) : Env α (model (α := α) M R K).inputs.shapes :=
  .cons input .nil

variable [ScalarLaws α]

/-- The softplus graph means `softplus` coordinatewise. -/
@[simp] theorem eval_softplusTerm {Γ : List Shape} (n : Nat) (z : Term α Γ [n]) (env : Env α Γ) :
    (softplusTerm n z).eval env = fun j => softplus (z.eval env j) := by
  funext j
  simp [softplusTerm]
  exact (softplus_eq_neg_log_sigmoid_neg _).symm

/-- The gate graph means `logDecay` of the low-rank logit. -/
theorem eval_term {Γ : List Shape} (M R K : Nat) (input : Var Γ [M]) (down : Var Γ [M, R])
    (up : Var Γ [R, K]) (bias : Var Γ [K]) (logRate : Var Γ []) (env : Env α Γ) :
    (term M R K input down up bias logRate).eval env = fun i =>
      logDecay (env.get logRate)
        (Tensor.vecMatMul (Tensor.vecMatMul (env.get input) (env.get down)) (env.get up) i +
          env.get bias i) := by
  funext i
  simp [term, vecMatTerm, mulTerm, bcastVar, logDecay]
  rfl

/-- **The decay-gate graph computes the Kimi Linear log-decay**, for all weights and widths. -/
theorem specFwd_eq_logDecay {M R K : Nat} (down : Tensor α [M, R]) (up : Tensor α [R, K])
    (bias : Tensor α [K]) (logRate : α) (input : Tensor α [M]) :
    (model M R K).specFwd (parameters down up bias logRate) (inputs input) =
      .cons (fun i => logDecay logRate
        (Tensor.vecMatMul (Tensor.vecMatMul input down) up i + bias i)) .nil := by
  simp only [Model.specFwd_eq, model, parameters, inputs, Env.append_cons, Env.append_nil,
    Args.eval_cons, Args.eval_nil, eval_term]
  rfl

/-- **The graph is the layer's gate**: on head `h`'s slices of a Kimi Linear layer, `exp` of the
graph's output is the retention `KimiLinear.prepare` feeds to `KDA.step`. -/
theorem retention_eq_exp_specFwd {d : LayerDims} (p : LayerParams α d) (l2Eps : α)
    (window : Tensor α [d.convWidth, d.modelDim]) (x : Tensor α [d.modelDim]) (h : Fin d.heads)
    (i : Fin d.keyDim) :
    (prepare p l2Eps window x h).retention i =
      Scalar.exp (((model d.modelDim d.decayRank d.keyDim).specFwd
        (parameters p.decayDown (fun r i => p.decayUp r h i) (p.decayBias h) (p.decayLogRate h))
        (inputs x)).head i) := by
  rw [specFwd_eq_logDecay]
  simp only [prepare, Seq.memoFn_eq, Seq.sum_eq, Seq.vecMatMul_eq_core, Env.head, retention]
  rfl

end DecayGateGraph

end KimiLinear

end KimiK3
