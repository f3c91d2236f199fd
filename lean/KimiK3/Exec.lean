module

public import KimiK3.Exec.Kernel
public import KimiK3.Exec.Arr
public import KimiK3.Exec.Ops
public import KimiK3.Exec.Channel
public import KimiK3.Exec.KDA
public import KimiK3.Exec.MLA
public import KimiK3.Exec.Depth
public import KimiK3.Exec.Model
public import KimiK3.Exec.Vision
public import KimiK3.Exec.Multimodal
public import KimiK3.Exec.RatScalar
public import KimiK3.Exec.RatExamples
public import KimiK3.Exec.KimiLinear

/-!
# `KimiK3.Exec`: the executable specification

Array-backed tensors and executable versions of every reference function of K3, each proved
equal to the reference definition for every scalar type (see `Exec/README.md`); exact rational
scalars and the report's worked examples evaluated at `Rat`.
-/
