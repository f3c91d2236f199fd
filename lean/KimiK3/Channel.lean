module

public import KimiK3.Channel.Count
public import KimiK3.Channel.SiTU
public import KimiK3.Channel.Expert
public import KimiK3.Channel.ExpertExample
public import KimiK3.Channel.ExpertGraph
public import KimiK3.Channel.Route
public import KimiK3.Channel.RouteCheck
public import KimiK3.Channel.TopKUnique
public import KimiK3.Channel.Router
public import KimiK3.Channel.RouterExample
public import KimiK3.Channel.LatentMoE
public import KimiK3.Channel.LatentMoEGraph
public import KimiK3.Channel.LatentMoEModel
public import KimiK3.Channel.Quantile
public import KimiK3.Channel.AppendixC
public import KimiK3.Channel.QuantileHistogram
public import KimiK3.Channel.QuantileThreshold
public import KimiK3.Channel.QuantileTies
public import KimiK3.Channel.QuantileHistogramExample
public import KimiK3.Channel.MoonEP
public import KimiK3.Channel.MoonEPExample

/-!
# Channel mixers (report §2.3, App. B–C; k3-spec §2.6–2.8)

SiTU and the expert FFN, the expert graph, top-k routing with a tie rule and a route checker,
the router, Stable LatentMoE and Quantile Balancing (the coordinate objective, the pooled
histogram, bin selection and interpolation with their guarantees, tie resolution by index) and
MoonEP's expert-parallel counting. See `Channel/README.md`.
-/
