module

public import KimiK3.Model.Config
public import KimiK3.Model.Combinators
public import KimiK3.Model.Backbone
public import KimiK3.Model.LanguageModel
public import KimiK3.Model.Streaming
public import KimiK3.Model.ScanFusion
public import KimiK3.Model.Embedding
public import KimiK3.Model.DepthCount

/-!
# The language model (k3-spec §1, §2.1, §2.5)

Aggregator of `KimiK3/Model/`: the configuration (schedule, paper and tiny configurations,
well-formedness, counts), the backbone layer, the language model with its causal run and
layer-major logits, their equality (`run_eq_logits`) and chunking (`run_append`), scan fusion
for any stack of stateful layers (`ModelList.run_stackStep`), and the multimodal embedding. See `Model/README.md`.
-/
