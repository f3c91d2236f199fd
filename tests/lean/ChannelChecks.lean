-- bundle: KimiK3.Channel.Expert KimiK3.Channel.Router
/-!
# Channel mixers: the worked examples of k3-spec §2.6–2.7 at `Float`

Hand-computed values: `softCap 4 2 = 4 tanh(1/2) ≈ 1.848469`; SiTU with caps 4, 25:
`SiTU(2, 6) = softCap₄(2) σ(2) softCap₂₅(6) ≈ 9.585417`, `SiTU(1, 2) ≈ 1.429351`; the toy expert
(`G = I`, `U = diag(2, 3)`, `D = [[1], [-1]]`, `x = [1, 2]`) outputs
`SiTU(1, 2) − SiTU(2, 6) ≈ −8.156066`; the router with scores `[0.8, 0.7, 0.6, 0.2]` and bias
`+0.3` on expert 2 routes slots `(2, 0)` with weights `0.6 / 1.4 = 3/7` and `0.8 / 1.4 = 4/7`.
The exact versions are theorems (`ExpertExample.lean`, `RouterExample.lean`). Run by
`tests/test_lean_checks.py`.
-/
namespace KimiK3.ChannelChecks
open KimiK3

/-- Whether `x` is within `tol` of `y`. -/
def near (tol x y : Float) : Bool := x - y < tol && y - x < tol

/-- Toy expert of k3-spec §2.6: G = I, U = diag(2, 3), D = [[1], [-1]]. -/
def toyExpert : Expert Float 2 2 1 where
  gateWeight := fun i j => if i.val = j.val then 1 else 0
  upWeight := fun i j => if i.val = j.val then (if i.val = 0 then 2 else 3) else 0
  downWeight := fun j _ => if j.val = 0 then 1 else -1
def toyInput : Tensor Float [2] := fun i => if i.val = 0 then 1 else 2
def routerScores : Tensor Float [4] := fun e =>
  if e.val = 0 then 0.8 else if e.val = 1 then 0.7 else if e.val = 2 then 0.6 else 0.2
def routerBias : Tensor Float [4] := fun e => if e.val = 2 then 0.3 else 0
def route : Fin 2 → Fin 4 := Router.route routerScores routerBias (k := 2) (by decide)

#guard near 2e-6 (softCap (4 : Float) 2) 1.848469
#guard near 2e-6 (SiTU.scalar (4 : Float) 25 2 6) 9.585417
#guard near 2e-6 (SiTU.scalar (4 : Float) 25 1 2) 1.429351
#guard near 2e-6 (toyExpert.forward 4 25 toyInput 0) (-8.156066)
#guard (route 0).val == 2 && (route 1).val == 0
#guard near 1e-12 (Router.mixtureWeights routerScores route 0) (3 / 7)
#guard near 1e-12 (Router.mixtureWeights routerScores route 1) (4 / 7)
end KimiK3.ChannelChecks
