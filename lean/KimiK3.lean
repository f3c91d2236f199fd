module

public import KimiK3.Smoke.Double
public import KimiK3.Smoke.DoubleFacts
public import KimiK3.Core.Scalar
public import KimiK3.Core.ScalarFacts
public import KimiK3.Core.LogFacts
public import KimiK3.Core.Kernel
public import KimiK3.Core.Program
public import KimiK3.Core.Tensor
public import KimiK3.Core.Sum
public import KimiK3.Core.Elementwise
public import KimiK3.Core.Reduce
public import KimiK3.Core.MatMul
public import KimiK3.Core.Layout
public import KimiK3.Core.Softmax
public import KimiK3.Core.Norm
public import KimiK3.Core.GraphEval
public import KimiK3.Core.Examples
public import KimiK3.Core.GraphExamples
public import KimiK3.Core.Json
public import KimiK3.Core.NamedVars
public import KimiK3.Core.Trig
public import KimiK3.Channel
public import KimiK3.Sequence
public import KimiK3.Depth
public import KimiK3.Graph
public import KimiK3.Model
public import KimiK3.Exec
public import KimiK3.Microscaling
public import KimiK3.Training
public import KimiK3.Vision
public import KimiK3.KimiLinear

/-!
# KimiK3

Root of the Lean-verified specification of the Kimi K3 model. Importing this module imports
every checked part of the library.
-/
