module

public import KimiK3.Core.Norm
public import KimiK3.Channel.Expert
public import KimiK3.Channel.Router

/-!
# Stable LatentMoE (report §2.3, Eq. 11–13)

For a token `x` of model width:
```
shared = Σ_i SharedExpert_i(x)                    -- model width, every token
z      = x W↓                                     -- one projection down to the latent width
s_e    = σ((x R)_e),  a_e = s_e + b_e              -- raw and bias-adjusted scores
T      = top-k of a (tie: lowest index)           -- selection only
w_i    = ρ · s_{T_i} / Σ_j s_{T_j}                 -- raw scores, renormalized, times ρ
routed = Σ_i w_i · Expert_{T_i}(z)                -- latent-width SiTU experts
y      = shared + (RMSNorm(routed) ⊙ g) W↑        -- back to model width
```
`forward` takes the route (slots) as an argument; `forwardAuto` derives it from the adjusted
scores (`route_isTopK`). The RMSNorm ε and the routed scaling factor `ρ` (hub
`routed_scaling_factor`, pybridge `moe.py`; the article does not mention it) are fields of the
layer. Since the routed path is RMS-normalized, `ρ` changes the output only through ε.
-/

@[expose] public section

namespace KimiK3

/-- A Stable LatentMoE layer (report §2.3). Widths: model `d`, latent `l`, shared-expert hidden
`hs`, routed-expert hidden `hr`; `S` shared experts, `E` routed experts. The router reads the
model-width token (`routerWeight : [d, E]`, an assumption: the article does not fix it). -/
structure StableLatentMoE (α : Type) (d l hs hr S E : Nat) where
  /-- Shared experts, model width to model width. -/
  shared : Fin S → Expert α d hs d
  /-- The single down projection `W↓ : [d, l]`. -/
  downProject : Tensor α [d, l]
  /-- Router weight `R : [d, E]`. -/
  routerWeight : Tensor α [d, E]
  /-- Balancing bias `b` (selection only, report Eq. 13). -/
  routerBias : Tensor α [E]
  /-- Routed experts, latent width to latent width. -/
  routed : Fin E → Expert α l hr l
  /-- RMSNorm scale `g` of the routed path. -/
  routedNormScale : Tensor α [l]
  /-- RMSNorm ε of the routed path (not in the article; config `latent_moe_norm_eps`). -/
  normEps : α
  /-- The routed scaling factor `ρ` multiplying the renormalized mixture weights (hub
  `routed_scaling_factor`). -/
  routedScale : α
  /-- The up projection `W↑ : [l, d]`. -/
  upProject : Tensor α [l, d]

namespace StableLatentMoE

variable {α : Type} {d l hs hr S E : Nat}

section Defs

variable [Scalar α]

/-- The shared path `Σ_i SharedExpert_i(x)` (report Eq. 11). -/
@[macro_inline] def sharedOutput (moe : StableLatentMoE α d l hs hr S E) (gateCap upCap : α)
    (x : Tensor α [d]) : Tensor α [d] :=
  fun c => finSum S (fun i => (moe.shared i).forward gateCap upCap x c)

/-- Raw router scores `σ(x R)`. -/
@[macro_inline] def rawScores (moe : StableLatentMoE α d l hs hr S E) (x : Tensor α [d]) :
    Tensor α [E] :=
  Router.scores moe.routerWeight x

/-- Bias-adjusted router scores `σ(x R) + b` (report Eq. 13). -/
@[macro_inline] def adjustedRouterScores (moe : StableLatentMoE α d l hs hr S E)
    (x : Tensor α [d]) : Tensor α [E] :=
  Router.adjusted (moe.rawScores x) moe.routerBias

/-- The routed aggregate for a given route: `Σ_i ρ w_i · Expert_{T_i}(x W↓)` with raw-score
mixture weights `w` and the routed scaling factor `ρ` (report Eq. 11–12). -/
@[macro_inline] def routedAggregate {k : Nat} (moe : StableLatentMoE α d l hs hr S E)
    (route : Fin k → Fin E) (gateCap upCap : α) (x : Tensor α [d]) : Tensor α [l] :=
  let z := Tensor.vecMatMul x moe.downProject
  let w := Router.mixtureWeights (moe.rawScores x) route
  fun c => finSum k (fun i => moe.routedScale * w i * (moe.routed (route i)).forward gateCap upCap z c)

/-- The layer for a given route (report Eq. 11):
`shared + (RMSNorm(routed) ⊙ g) W↑`. -/
@[macro_inline] def forward {k : Nat} (moe : StableLatentMoE α d l hs hr S E)
    (route : Fin k → Fin E) (gateCap upCap : α) (x : Tensor α [d]) : Tensor α [d] :=
  let shared := moe.sharedOutput gateCap upCap x
  let routed := moe.routedAggregate route gateCap upCap x
  let up := Tensor.vecMatMul (Tensor.rmsNormVec moe.normEps routed moe.routedNormScale)
    moe.upProject
  fun c => shared c + up c

/-- The route the layer picks for `x`: top-`k` of the bias-adjusted scores
(report `StableLatentMoE.route`). -/
@[macro_inline] def route {k : Nat} (moe : StableLatentMoE α d l hs hr S E) (hk : k ≤ E)
    (x : Tensor α [d]) : Fin k → Fin E :=
  Routing.topKSlots (moe.adjustedRouterScores x) hk

/-- The layer with its own routing (report `forwardReal`): route from the adjusted scores, mix
with raw scores. -/
@[macro_inline] def forwardAuto {k : Nat} (moe : StableLatentMoE α d l hs hr S E) (hk : k ≤ E)
    (gateCap upCap : α) (x : Tensor α [d]) : Tensor α [d] :=
  moe.forward (moe.route hk x) gateCap upCap x

/-- `forwardAuto` is `forward` at the computed route. -/
theorem forwardAuto_eq {k : Nat} (moe : StableLatentMoE α d l hs hr S E) (hk : k ≤ E)
    (gateCap upCap : α) (x : Tensor α [d]) :
    moe.forwardAuto hk gateCap upCap x = moe.forward (moe.route hk x) gateCap upCap x := rfl

/-- The bias enters only through the route: two layers that differ only in their bias and pick
the same route compute the same output. -/
theorem forward_bias_irrelevant {k : Nat} (moe : StableLatentMoE α d l hs hr S E)
    (bias : Tensor α [E]) (route : Fin k → Fin E) (gateCap upCap : α) (x : Tensor α [d]) :
    ({ moe with routerBias := bias } : StableLatentMoE α d l hs hr S E).forward route gateCap upCap x =
      moe.forward route gateCap upCap x := rfl

end Defs

/-- The route is a top-k of the adjusted scores (report `route_isTopK`). -/
theorem route_isTopK [OrderedScalarField α] {k : Nat} (moe : StableLatentMoE α d l hs hr S E)
    (hk : k ≤ E) (x : Tensor α [d]) :
    Routing.IsTopK (moe.adjustedRouterScores x) (moe.route hk x) :=
  Routing.topKSlots_isTopK _ hk

/-- The computed route passes the route checker. -/
theorem checkRoute_route [OrderedScalarField α] {k : Nat} (moe : StableLatentMoE α d l hs hr S E)
    (hk : k ≤ E) (x : Tensor α [d]) :
    Routing.checkRoute (moe.adjustedRouterScores x) (moe.route hk x) = true :=
  Routing.checkRoute_topKSlots _ hk

/-- A route from outside (e.g. a GPU kernel) that passes the checker is a top-k of the adjusted
scores, so running `forward` on it is the specified layer up to the choice among equal sets. -/
theorem isTopK_of_checkRoute [Scalar α] {k : Nat} (moe : StableLatentMoE α d l hs hr S E)
    (x : Tensor α [d]) (slot : Fin k → Fin E)
    (h : Routing.checkRoute (moe.adjustedRouterScores x) slot = true) :
    (∀ i j, slot i = slot j → i = j) ∧ Routing.IsTopK (moe.adjustedRouterScores x) slot :=
  (Routing.checkRoute_iff _ _).mp h

/-- The routed mixture weights are nonnegative and sum to one. -/
theorem mixtureWeights_sum_one [ScalarLaws α] {k : Nat} (moe : StableLatentMoE α d l hs hr S E)
    (route : Fin (k + 1) → Fin E) (x : Tensor α [d]) :
    finSum (k + 1) (Router.mixtureWeights (moe.rawScores x) route) = 1 :=
  Router.finSum_mixtureWeights (fun e => Router.scores_pos _ _ e) route

end StableLatentMoE

end KimiK3
