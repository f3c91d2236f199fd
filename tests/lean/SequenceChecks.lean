-- bundle: KimiK3.Sequence.Kernel
/-!
# Sequence mixers: the worked KDA numbers at `Float` (k3-spec §2.2)

The same numbers are proved exactly in `lean/KimiK3/Sequence/KDAExamples.lean`. Run by
`tests/test_lean_checks.py`.
-/
namespace KimiK3.SeqChecks
open KimiK3
def floatClose (x y : Float) : Bool := x - y < 1e-9 && y - x < 1e-9
-- scalar delta rule: s = 6, α = 0.8, v = 10; β = 0.5 → 7.4, β = 1 → 10, β = 0 → 4.8
#guard floatClose (KDA.scalarStepF 6 0.8 10 0.5) 7.4
#guard floatClose (KDA.scalarStepF 6 0.8 10 1) 10
#guard floatClose (KDA.scalarStepF 6 0.8 10 0) 4.8
-- order sensitivity from s = 0, α = β = 0.5
#guard floatClose (KDA.scalarScan2F 0 0.5 0.5 2 10) 5.25
#guard floatClose (KDA.scalarScan2F 0 0.5 0.5 10 2) 2.25
-- the toy 2×1 run reads 3
#guard floatClose KDA.toyReadF 3
#guard !floatClose KDA.toyReadF 3.001
-- retention at the paper's floor, logit 0: e^{-2.5} ≈ 0.0821
#guard floatClose (KDA.retentionF (-5) 0 0) (Float.exp (-2.5))
end KimiK3.SeqChecks
