module

public import KimiK3.Microscaling.Kernel
public import KimiK3.Microscaling.Lemmas
public import KimiK3.Microscaling.Search
public import KimiK3.Microscaling.Round
public import KimiK3.Microscaling.FloatFormat
public import KimiK3.Microscaling.Formats
public import KimiK3.Microscaling.E8M0
public import KimiK3.Microscaling.ScaleRule
public import KimiK3.Microscaling.Block
public import KimiK3.Microscaling.MXFP4
public import KimiK3.Microscaling.Examples
public import KimiK3.Microscaling.Matrix
public import KimiK3.Microscaling.Lipschitz
public import KimiK3.Microscaling.Expert
public import KimiK3.Microscaling.Tables
public import KimiK3.Microscaling.RoundingModel
public import KimiK3.Microscaling.RoundedSum
public import KimiK3.Microscaling.Condition
public import KimiK3.Microscaling.NormSensitivity
public import KimiK3.Microscaling.SoftmaxSensitivity

/-!
# Microscaling formats and the rounding model (report §4.1.4; k3-spec §2.13, §7)

E8M0, E2M1, FP8 E4M3/E5M2 with decoders and round-to-nearest-even saturating encoders, MX
blocks with a scale rule as a parameter, MXFP4 error bounds for blocks, matrices,
MXFP8 × MXFP4 products and an MXFP4 expert; and the standard rounding model with the one-stage
bounds `difftest`'s tolerances cite. See `Microscaling/README.md`.
-/
