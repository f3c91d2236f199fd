module

public import KimiK3.Channel.Expert
public import KimiK3.Channel.Router

/-!
# Kimi Linear's MoE: SwiGLU experts with a routed scaling factor (k3-spec §7)

transformers 5.23's `KimiLinearMoE` (`models/kimi_linear/modeling_kimi_linear.py`) is a
DeepSeek-style MoE at model width, with no latent projection, no routed-path norm and no SiTU:

```
E(x)   = (SiLU(x G) ⊙ (x U)) D                     -- KimiLinearExperts / KimiLinearMLP
s_e    = σ((x R)_e),  a_e = s_e + b_e               -- KimiLinearTopkRouter, e_score_correction_bias
T      = top-k of a                                  -- n_group = topk_group = 1 (the defaults)
w_i    = ρ · s_{T_i} / Σ_j s_{T_j}                   -- norm_topk_prob, routed_scaling_factor ρ
y      = Σ_i w_i · E_{T_i}(x) + Shared(x)            -- one fused shared SwiGLU MLP
```

The expert weights reuse K3's `Expert` record (`gate_up_proj` split into `G`, `U`; `down_proj`
as `D`, all stored `[in, out]`); only the activation differs (`swigluForward` against K3's
SiTU `Expert.forward`). The route is an argument (`forward`) or K3's top-k with ties to the
lowest index (`forwardAuto`; torch's `topk` leaves ties unspecified). transformers adds `1e-20`
to the renormalizing sum; this reference does not (it matters only when every chosen raw
score is below about `1e-4` of machine precision).

Proved: `routedOutput_eq_scale_mul` (the scaled mixture is `ρ` times the unscaled one),
`forward_eq` (output = `ρ ·` unscaled routed mixture `+` shared), `finSum_routedWeights`
(the weights sum to `ρ`), `routedWeights_nonneg`, `forward_bias_irrelevant`, `route_isTopK`.
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

variable {α : Type}

/-- SwiGLU on one coordinate, `SiLU(g) · u = g σ(g) u` (k3-spec §7; transformers
`KimiLinearMLP.forward`, `act_fn(gate_proj(x)) * up_proj(x)` with `hidden_act = "silu"`). -/
@[macro_inline] def swiglu [Scalar α] (gate up : α) : α := gate * Scalar.sigmoid gate * up

/-- The SwiGLU expert `y = (SiLU(x G) ⊙ (x U)) D` (k3-spec §7; transformers `KimiLinearMLP`
and each expert of `KimiLinearExperts`). -/
@[macro_inline] def swigluForward [Scalar α] {d h o : Nat} (expert : Expert α d h o)
    (x : Tensor α [d]) : Tensor α [o] :=
  Tensor.vecMatMul
    (fun j => swiglu (Tensor.vecMatMul x expert.gateWeight j) (Tensor.vecMatMul x expert.upWeight j))
    expert.downWeight

/-- A Kimi Linear MoE block (k3-spec §7; transformers `KimiLinearMoE`): model width `d`,
routed hidden `h` (`moe_intermediate_size`), shared hidden `hs`
(`moe_intermediate_size · n_shared_experts`), `E` routed experts. -/
structure MoE (α : Type) (d h hs E : Nat) where
  /-- The shared SwiGLU MLP (`shared_experts`). -/
  shared : Expert α d hs d
  /-- Router weight `R : [d, E]` (`gate.weight`, transposed). -/
  routerWeight : Tensor α [d, E]
  /-- Selection bias `b` (`gate.e_score_correction_bias`). -/
  routerBias : Tensor α [E]
  /-- Routed SwiGLU experts (`experts.gate_up_proj`, `experts.down_proj`). -/
  routed : Fin E → Expert α d h d
  /-- The routed scaling factor `ρ` (`routed_scaling_factor`, 2.446 by default). -/
  routedScale : α

namespace MoE

variable {d h hs E : Nat}

section Defs

variable [Scalar α]

/-- Raw router scores `σ(x R)` (transformers `KimiLinearTopkRouter`: `router_logits.sigmoid()`). -/
@[macro_inline] def rawScores (moe : MoE α d h hs E) (x : Tensor α [d]) : Tensor α [E] :=
  Router.scores moe.routerWeight x

/-- The routed weights `w_i = ρ · s_{T_i} / Σ_j s_{T_j}` (k3-spec §7; transformers
`KimiLinearTopkRouter.forward`: renormalized, then `* routed_scaling_factor`). -/
@[macro_inline] def routedWeights {k : Nat} (moe : MoE α d h hs E) (route : Fin k → Fin E)
    (x : Tensor α [d]) : Tensor α [k] :=
  fun i => moe.routedScale * Router.mixtureWeights (moe.rawScores x) route i

/-- The routed mixture `Σ_i w_i · E_{T_i}(x)` (transformers `KimiLinearExperts.forward`). -/
@[macro_inline] def routedOutput {k : Nat} (moe : MoE α d h hs E) (route : Fin k → Fin E)
    (x : Tensor α [d]) : Tensor α [d] :=
  fun c => finSum k (fun i => moe.routedWeights route x i * swigluForward (moe.routed (route i)) x c)

/-- **The MoE block for a given route** (k3-spec §7; transformers `KimiLinearMoE.forward`):
routed mixture plus the shared MLP. -/
@[macro_inline] def forward {k : Nat} (moe : MoE α d h hs E) (route : Fin k → Fin E)
    (x : Tensor α [d]) : Tensor α [d] :=
  fun c => moe.routedOutput route x c + swigluForward moe.shared x c

/-- The route: top-`k` of the bias-adjusted scores `σ(x R) + b`, ties to the lowest index
(transformers with `n_group = topk_group = 1`). -/
@[macro_inline] def route {k : Nat} (moe : MoE α d h hs E) (hk : k ≤ E) (x : Tensor α [d]) :
    Fin k → Fin E :=
  Router.route (moe.rawScores x) moe.routerBias hk

/-- The block with its own routing. -/
@[macro_inline] def forwardAuto {k : Nat} (moe : MoE α d h hs E) (hk : k ≤ E)
    (x : Tensor α [d]) : Tensor α [d] :=
  moe.forward (moe.route hk x) x

/-- The bias enters only through the route. -/
theorem forward_bias_irrelevant {k : Nat} (moe : MoE α d h hs E) (bias : Tensor α [E])
    (route : Fin k → Fin E) (x : Tensor α [d]) :
    ({ moe with routerBias := bias } : MoE α d h hs E).forward route x = moe.forward route x := rfl

end Defs

/-- **Routed scaling factors out**: the scaled mixture is `ρ` times the mixture with the
unscaled renormalized weights. -/
theorem routedOutput_eq_scale_mul [ScalarField α] {k : Nat} (moe : MoE α d h hs E)
    (route : Fin k → Fin E) (x : Tensor α [d]) (c : Fin d) :
    moe.routedOutput route x c = moe.routedScale *
      finSum k (fun i => Router.mixtureWeights (moe.rawScores x) route i *
        swigluForward (moe.routed (route i)) x c) := by
  simp only [routedOutput, routedWeights]
  rw [← finSum_mul_left]
  exact finSum_congr (fun i => by grind)

/-- The block's output is `ρ ·` (unscaled routed mixture) `+` shared MLP. -/
theorem forward_eq [ScalarField α] {k : Nat} (moe : MoE α d h hs E) (route : Fin k → Fin E)
    (x : Tensor α [d]) (c : Fin d) :
    moe.forward route x c = moe.routedScale *
      finSum k (fun i => Router.mixtureWeights (moe.rawScores x) route i *
        swigluForward (moe.routed (route i)) x c) + swigluForward moe.shared x c := by
  simp only [forward]
  rw [routedOutput_eq_scale_mul]

/-- The routed weights sum to the scaling factor `ρ` (for `k > 0`). -/
theorem finSum_routedWeights [ScalarLaws α] {k : Nat} (moe : MoE α d h hs E)
    (route : Fin (k + 1) → Fin E) (x : Tensor α [d]) :
    finSum (k + 1) (moe.routedWeights route x) = moe.routedScale := by
  show finSum (k + 1) (fun i => moe.routedScale * Router.mixtureWeights (moe.rawScores x) route i) = _
  have hpos : ∀ e, 0 < moe.rawScores x e := fun e => Router.scores_pos _ _ e
  rw [finSum_mul_left, Router.finSum_mixtureWeights hpos]
  grind

/-- The routed weights are nonnegative for a nonnegative `ρ`. -/
theorem routedWeights_nonneg [ScalarLaws α] {k : Nat} (moe : MoE α d h hs E)
    (hρ : 0 ≤ moe.routedScale) (route : Fin k → Fin E) (x : Tensor α [d]) (i : Fin k) :
    0 ≤ moe.routedWeights route x i :=
  mul_nonneg' hρ (Router.mixtureWeights_nonneg (fun e => Router.scores_pos _ _ e) route i)

/-- The computed route is a top-`k` of the adjusted scores. -/
theorem route_isTopK [OrderedScalarField α] {k : Nat} (moe : MoE α d h hs E) (hk : k ≤ E)
    (x : Tensor α [d]) :
    Routing.IsTopK (Router.adjusted (moe.rawScores x) moe.routerBias) (moe.route hk x) :=
  Router.route_isTopK _ _ hk

end MoE

end KimiLinear

end KimiK3
