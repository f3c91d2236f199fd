module

public import KimiK3.Smoke.Double
public import KimiK3.Smoke.DoubleFacts

/-!
# KimiK3

Root of the Lean-verified specification of the Kimi K3 model. Importing this module imports
every checked part of the library.
-/
