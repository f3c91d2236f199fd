-- bundle: KimiK3.Depth.Graph
/-!
# Depth (AttnRes, block state) at `Float` (k3-spec §2.4, §2.5)

Every `#guard` must pass; the lines `{"check": …}` carry Float bits that `tests/test_depth.py`
compares with an independent Python computation. The same facts are proved in
`lean/KimiK3/Depth/BlockState.lean`, `AttnRes.lean`, `AttnResGraph.lean`. Run by
`tests/test_lean_checks.py`.
-/
namespace KimiK3.DepthChecks
open KimiK3

def floatClose (x y : Float) : Bool := x - y < 1e-12 && y - x < 1e-12

/-- A 2-vector. -/
def v2 (a b : Float) : Tensor Float [2] := fun i => if i.val = 0 then a else b

/-- Whether two 2-vectors are equal to within `1e-12`. -/
def close2 (x y : Tensor Float [2]) : Bool := Tensor.approxEqF 1e-12 [2] x y

/-- Whether two 2-vectors are bitwise equal. -/
def exact2 (x y : Tensor Float [2]) : Bool :=
  (x 0).toBits == (y 0).toBits && (x 1).toBits == (y 1).toBits

/-- The decimal bit patterns of `f 0, …, f (k-1)`, quoted. -/
def bitsList : (k : Nat) → (Fin k → Float) → List String
  | 0, _ => []
  | k + 1, f => ("\"" ++ toString (f ⟨0, by omega⟩).toBits.toNat ++ "\"") ::
      bitsList k (fun i => f ⟨i.val + 1, by omega⟩)

/-- One JSON line `{"check": name, "bits": [...]}`. -/
def report (name : String) {d : Nat} (t : Tensor Float [d]) : String :=
  "{\"check\": \"" ++ name ++ "\", \"bits\": [" ++ GraphJson.joinComma (bitsList d t) ++ "]}"

-- 1. Equal scores → the plain average: e₁ = [1, 0], e₂ = [0, 1] have equal RMS norms, and the
--    query [0.5, 0.5] scores them equally, so h = [0.5, 0.5] (exactly: the weights are 1/2).
#guard exact2 (AttnRes.attendList 1e-5 (v2 0.5 0.5) [v2 1 0, v2 0 1]) (v2 0.5 0.5)

-- 2. Different scores, by hand: v₁ = [1, 1], v₂ = [1, −1] have RMS 1 (ε = 0); with
--    w = [0, ln 3 / 2] the scores are ±ln 3 / 2, the weights 3/4 and 1/4, h = [1, 1/2].
#guard close2 (AttnRes.attendList 0 (v2 0 (Float.log 3 / 2)) [v2 1 1, v2 1 (-1)]) (v2 1 0.5)
#eval! IO.println (report "hand_three_to_one" (AttnRes.attendList 0 (v2 0 (Float.log 3 / 2)) [v2 1 1, v2 1 (-1)]))

-- 3. Block size 3. After two commits the partial block holds 2 layers; the third commit folds
--    it into the completed list (its sum [0, 1]) and the partial block is empty again; the
--    retrieval then averages the embedding [1, 0] and the block [0, 1] (equal scores).
def outs3 : List (Tensor Float [2] × Tensor Float [2]) :=
  [(v2 0 0.25, v2 0 0.25), (v2 0.5 0, v2 (-0.5) 0), (v2 0 0.5, v2 0 0)]
def afterTwo : BlockState Float 2 := (BlockState.initial (v2 1 0)).commitAll 3 [(v2 0 0.25, v2 0 0.25), (v2 0.5 0, v2 (-0.5) 0)]
def afterThree : BlockState Float 2 := (BlockState.initial (v2 1 0)).commitAll 3 outs3
def afterFour : BlockState Float 2 := afterThree.commitAll 3 [(v2 1 1, v2 1 1)]
#guard afterTwo.count == 2 && Seq.listLen afterTwo.blocks == 0 && Seq.listLen afterTwo.sources == 2
#guard exact2 afterTwo.partialSum (v2 0 0.5)
#guard afterThree.count == 0 && Seq.listLen afterThree.blocks == 1 && Seq.listLen afterThree.sources == 2
#guard exact2 (Seq.listGet (v2 9 9) afterThree.blocks 0) (v2 0 1)
#guard exact2 afterThree.partialSum (v2 0 0)
#guard exact2 (afterThree.retrieve 1e-5 (v2 0.5 0.5)) (v2 0.5 0.5)
#guard afterFour.count == 1 && Seq.listLen afterFour.blocks == 1 && Seq.listLen afterFour.sources == 3
#guard exact2 afterFour.partialSum (v2 2 2)
-- the channel mixer's retrieval after the sequence output [0, 1] on the empty partial block of
-- `afterThree`: sources [1, 0], [0, 1], [0, 1] → weights 1/3, 2/3 in coordinate 1
#guard close2 (afterThree.retrieveAfterSequence 1e-5 (v2 0.5 0.5) (v2 0 1)) (v2 (1/3) (2/3))

-- 4. The report's numbers: 93 layers at B = 12 → 7 completed blocks, partial 9, 9 sources;
--    17 layers → 1 completed block, partial 5.
def zeroOuts : Nat → List (Tensor Float [1] × Tensor Float [1])
  | 0 => []
  | k + 1 => (fun _ => 0, fun _ => 1) :: zeroOuts k
def after93 : BlockState Float 1 := (BlockState.initial (fun _ => 1)).commitAll 12 (zeroOuts 93)
def after17 : BlockState Float 1 := (BlockState.initial (fun _ => 1)).commitAll 12 (zeroOuts 17)
#guard Seq.listLen after93.blocks == 7 && after93.count == 9 && Seq.listLen after93.sources == 9
#guard Seq.listLen after17.blocks == 1 && after17.count == 5 && Seq.listLen after17.sources == 3
#guard (after93.partialSum 0) == 9 && (Seq.listGet (fun _ => 0) after93.blocks 6 0) == 12

-- 5. The graph computes the kernel: a small case (3 sources, d = 6, ε = 1e-5) with
--    v[i][k] = (((6 i + k) · 7) mod 11 − 5) / 4 and w[k] = ((5 k) mod 7 − 3) / 8. (The
--    function-backed graph semantics recomputes shared terms per coordinate: at the tiny
--    config's d = 24 each of these three evaluations took about 150 s.)
def smallValues : Tensor Float [3, 6] := fun i k =>
  (Float.ofNat ((i.val * 6 + k.val) * 7 % 11) - 5) / 4
def smallQuery : Tensor Float [6] := fun k => (Float.ofNat (k.val * 5 % 7) - 3) / 8
def smallGain : Tensor Float [6] := fun k => 1 + Float.ofNat (k.val % 3) / 4
def graphOut (gain : Tensor Float [6]) : Tensor Float [6] :=
  Env.head ((AttnRes.model 3 6 (1e-5 : Float)).specFwd (.cons smallQuery (.cons gain .nil)) (.cons smallValues .nil))
def kernelOut : Tensor Float [6] := AttnRes.attendPacked 1e-5 smallQuery smallValues
-- bitwise equal: the graph performs the kernel's operations in the kernel's order
#guard Tensor.approxEqF 0 [6] (graphOut (fun _ => 1)) kernelOut
-- a learned gain folds into the query (equal up to rounding)
#guard Tensor.approxEqF 1e-12 [6] (graphOut smallGain)
  (AttnRes.attendPacked 1e-5 (fun k => smallQuery k * smallGain k) smallValues)
#eval! IO.println (report "small_graph" (graphOut (fun _ => 1)))

end KimiK3.DepthChecks
