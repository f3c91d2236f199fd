module

public import KimiK3.Graph.Program
public import KimiK3.Graph.Kernel
public import KimiK3.Graph.Frag
public import KimiK3.Graph.KDALayerGraphEval
public import KimiK3.Graph.PackedModel
public import KimiK3.Graph.Routes
public import KimiK3.Graph.DecoderEnvs
public import KimiK3.Graph.DecoderEval
public import KimiK3.Graph.DecoderPublic

/-!
# Whole-step graphs (k3-spec §2.2–2.5)

Aggregator of `KimiK3/Graph/`: graph programs with shared bindings, the graph of one token of a
whole KDA layer, and the decoder token step. See `Graph/README.md`.
-/
