module

public import KimiK3.Sequence.Kernel
public import KimiK3.Sequence.KernelLemmas
public import KimiK3.Sequence.CausalScan
public import KimiK3.Sequence.KDA
public import KimiK3.Sequence.Retention
public import KimiK3.Sequence.KDAChunkDecay
public import KimiK3.Sequence.KDAExamples
public import KimiK3.Sequence.AffineSummary
public import KimiK3.Sequence.KDAChunk
public import KimiK3.Sequence.KDAWY
public import KimiK3.Sequence.KDAWYChunk
public import KimiK3.Sequence.KDAWYDecay
public import KimiK3.Sequence.KDAWYExamples
public import KimiK3.Sequence.ContextParallel
public import KimiK3.Sequence.KDALayer
public import KimiK3.Sequence.Graphs
public import KimiK3.Sequence.KDAGraph
public import KimiK3.Sequence.KDAPacked
public import KimiK3.Sequence.MLA
public import KimiK3.Sequence.MLAMasked
public import KimiK3.Sequence.MLAGraph

/-!
# Sequence mixers (k3-spec §2.1–2.3)

Aggregator of `KimiK3/Sequence/`: the causal scan, KDA (one head, retention, chunked
evaluation: affine-summary and WY/UT forms), the affine-summary algebra and context-parallel composition, and Gated MLA (list and packed steps and their
bridge). See `Sequence/README.md`.
-/
