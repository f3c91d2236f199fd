module

public import KimiK3.Model.Config

/-!
# The Kimi Linear configuration and its layer schedule (k3-spec §7; transformers `KimiLinearConfig`)

transformers 5.23's `KimiLinearConfig` (`models/kimi_linear/configuration_kimi_linear.py`) holds
the widths and counts of a Kimi Linear model and decides, per 0-based layer `i`, which sequence
mixer and which MLP it has (`KimiLinearConfig.__post_init__`, read by `KimiLinearDecoderLayer`):

* **mixer** (`layer_types[i]`): `"full_attention"` → MLA (`KimiLinearAttention`), otherwise KDA
  (`KimiLinearDeltaAttention`). Precedence: an explicit `layer_types`; else, when
  `linear_attn_config` lists both `full_attn_layers` and `kda_layers` (1-based), the layers of
  `full_attn_layers`, then those of `kda_layers` over them; else the default, MLA iff `i > 0` and
  `i % 4 = 0`;
* **MLP** (`mlp_layer_types[i]`): `"sparse"` → the MoE (`KimiLinearMoE`), otherwise the dense
  SwiGLU MLP (`KimiLinearMLP`). Precedence: an explicit `mlp_layer_types`; else dense iff
  `i < first_k_dense_replace` (default 1).

`Config` holds these fields by their hub names (the docstrings), `attentionKindAt` and
`channelKindAt` are the two rules, `attentionKinds`/`channelKinds` the per-layer lists and
`layersOfKind`/`denseLayers` the 1-based lists the hub writes. `Config.WF` is what
`pybridge/config_kimi_linear.py` also requires (positive widths, top-k within the experts, the two
layer lists partitioning `1..num_hidden_layers`, explicit per-layer lists of the right length).
The decoder layers built from a configuration are in `KimiLinear/Build.lean`.

`kimiLinear48B` is the released Kimi-Linear-48B-A3B configuration (`moonshotai/Kimi-Linear-48B-A3B-Instruct`'s
`config.json`, whose values are also transformers' `KimiLinearConfig` defaults;
`fixtures/kimi-linear-48b/config.json`), `tinyConfig` the tiny one of difftest's Kimi Linear
components (`difftest/components/kimi_linear.py`, `TINY`). Proved by `decide`: both well formed;
the 48B schedule has 20 KDA and 7 MLA layers (4, 8, …, 24 and 27: K3's rule "every fourth and the
last", at 27 layers), one dense first layer and 26 MoE layers; without its two lists
transformers' default schedule would differ (MLA at 5, 9, …, 25); its MLA cache is 4032 scalars
per token against 15552 with MLA in every layer (the Kimi Linear report's "up to 75%" KV-cache
reduction). `Config.toJson` writes the fields and the derived schedule, which
`tests/test_kimi_linear_config_lean.py` compares with the fixture, with pybridge's
`kimi_linear_config_from_dict` and with transformers' `KimiLinearConfig`.

Evaluated code (the JSON export) uses this file's own recursions (`natMem`, `nth?`, `perLayer`,
`allTrue`, `allLayers`)
and K3's `Config.layersWhere`/`countLayers`, not `List` library functions (the offline interpreter
does not compile them; `Core/README.md`, "Toolchain constraints").
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

/-- The MLP kind of a layer (transformers `mlp_layer_types`: `"dense"`, `"sparse"`). -/
inductive ChannelKind where
  /-- The dense SwiGLU MLP (`KimiLinearMLP`, `intermediate_size`). -/
  | dense
  /-- The MoE (`KimiLinearMoE`). -/
  | moe
  deriving DecidableEq, Repr

/-- **The configuration of a Kimi Linear model** (k3-spec §7; transformers `KimiLinearConfig`):
the widths and counts, and the fields deciding the layer schedule. Hub `config.json` names in the
field docstrings; `linear_attn_config.` fields (transformers' flat names in parentheses) are
written `lac.`. What transformers hard-codes for the variant is not here (`KimiLinear/Build.lean`
supplies it: L2 ε 1e-6, the score scale `(qk_nope + qk_rope)^{-1/2}`, decay and gate rank
`lac.head_dim`), nor what does not enter the equations (`tie_word_embeddings`, token ids,
`model_max_length`); routing is `n_group = topk_group = 1` with renormalized weights
(`moe_renormalize`), as pybridge requires. -/
structure Config where
  /-- `vocab_size`. -/
  vocabSize : Nat
  /-- `hidden_size`: the model width. -/
  hiddenSize : Nat
  /-- `num_hidden_layers`. -/
  numLayers : Nat
  /-- `intermediate_size`: hidden width of the dense SwiGLU MLP. -/
  intermediateSize : Nat
  /-- `moe_intermediate_size`: hidden width of every routed and every shared expert. -/
  moeIntermediateSize : Nat
  /-- `num_attention_heads` (= `num_key_value_heads`): MLA heads. -/
  numAttentionHeads : Nat
  /-- `q_lora_rank`: MLA query latent width; `none` (JSON `null`, the release): one `q_proj`. -/
  qLoraRank : Option Nat
  /-- `kv_lora_rank`: MLA KV latent width (cached). -/
  kvLoraRank : Nat
  /-- `qk_nope_head_dim`: MLA per-head content key width. -/
  qkNopeHeadDim : Nat
  /-- `qk_rope_head_dim`: MLA shared key width (cached, unrotated: NoPE). -/
  qkRopeHeadDim : Nat
  /-- `v_head_dim`: MLA per-head value width. -/
  vHeadDim : Nat
  /-- `lac.num_heads` (`linear_num_heads`): KDA heads. -/
  kdaNumHeads : Nat
  /-- `lac.head_dim` (`linear_head_dim`): KDA key and value width, decay and output-gate rank. -/
  kdaHeadDim : Nat
  /-- `lac.short_conv_kernel_size` (`linear_conv_kernel_dim`): KDA convolution length. -/
  kdaConvSize : Nat
  /-- `num_experts`: routed experts. -/
  numExperts : Nat
  /-- `num_experts_per_token`: active routed experts (top-k). -/
  numExpertsPerToken : Nat
  /-- `num_shared_experts`: the shared MLP is `moe_intermediate_size · num_shared_experts` wide. -/
  numSharedExperts : Nat
  /-- `routed_scaling_factor` `ρ` (released: 2.446). -/
  routedScalingFactor : Decimal
  /-- `rms_norm_eps`: ε of the pre-norms, the final norm and the KDA output norm. -/
  rmsNormEps : Decimal
  /-- `layer_types`, per 0-based layer (`.mla` for `"full_attention"`), when given. -/
  layerTypes : Option (List AttentionKind)
  /-- `lac.full_attn_layers`: the 1-based MLA layers, when given. -/
  fullAttnLayers : Option (List Nat)
  /-- `lac.kda_layers`: the 1-based KDA layers, when given. -/
  kdaLayers : Option (List Nat)
  /-- `mlp_layer_types`, per 0-based layer (`.moe` for `"sparse"`), when given. -/
  mlpLayerTypes : Option (List ChannelKind)
  /-- `first_k_dense_replace` (default 1): without `mlp_layer_types`, the first this-many layers
  are dense. -/
  firstKDenseReplace : Nat

namespace Config

/-- Whether `n` is in the list (own recursion, evaluable offline). -/
def natMem (n : Nat) : List Nat → Bool
  | [] => false
  | k :: ks => n == k || natMem n ks

/-- The `i`-th element (0-based) of a list, if any (own recursion). -/
def nth? {β : Type} : List β → Nat → Option β
  | [], _ => none
  | x :: _, 0 => some x
  | _ :: xs, i + 1 => nth? xs i

/-- `f i, f (i+1), …, f (i+n−1)` (own recursion). -/
def perLayer {β : Type} (f : Nat → β) : Nat → Nat → List β
  | 0, _ => []
  | n + 1, i => f i :: perLayer f n (i + 1)

/-- transformers' default mixer of 0-based layer `i` when the file gives no schedule
(`KimiLinearConfig.__post_init__`: `"full_attention" if i and i % 4 == 0`). -/
def defaultAttentionKind (i : Nat) : AttentionKind :=
  if i ≠ 0 ∧ i % 4 = 0 then .mla else .kda

/-- The mixer of 0-based layer `i` from the two 1-based lists (transformers writes
`full_attn_layers` first, then `kda_layers` over it; a layer in neither is not
`"full_attention"`, so KDA). -/
def listedAttentionKind (full kda : List Nat) (i : Nat) : AttentionKind :=
  if natMem (i + 1) kda then .kda else if natMem (i + 1) full then .mla else .kda

/-- **The mixer of 0-based layer `i`** (k3-spec §7; transformers `KimiLinearDecoderLayer.self_attn`
from `config.layer_types[i]`): `layer_types`, else the two lists, else the default. -/
def attentionKindAt (c : Config) (i : Nat) : AttentionKind :=
  match c.layerTypes with
  | some l =>
    match nth? l i with
    | some k => k
    | none => .kda
  | none =>
    match c.fullAttnLayers, c.kdaLayers with
    | some full, some kda => listedAttentionKind full kda i
    | _, _ => defaultAttentionKind i

/-- **The MLP of 0-based layer `i`** (k3-spec §7; transformers `KimiLinearDecoderLayer.mlp` from
`config.mlp_layer_types[i]`): `mlp_layer_types`, else dense iff `i < first_k_dense_replace`. -/
def channelKindAt (c : Config) (i : Nat) : ChannelKind :=
  match c.mlpLayerTypes with
  | some l =>
    match nth? l i with
    | some k => k
    | none => .dense
  | none => if i < c.firstKDenseReplace then .dense else .moe

/-- The mixer kinds of layers `0, …, L−1` (transformers' `layer_types`). -/
def attentionKinds (c : Config) : List AttentionKind := perLayer c.attentionKindAt c.numLayers 0

/-- The MLP kinds of layers `0, …, L−1` (transformers' `mlp_layer_types`). -/
def channelKinds (c : Config) : List ChannelKind := perLayer c.channelKindAt c.numLayers 0

/-- The 1-based layers with mixer `k` (the hub's `lac.kda_layers` / `lac.full_attn_layers`). -/
def layersOfKind (c : Config) (k : AttentionKind) : List Nat :=
  KimiK3.Config.layersWhere (fun n => decide (c.attentionKindAt (n - 1) = k)) c.numLayers []

/-- The number of layers with mixer `k`. -/
def layerCount (c : Config) (k : AttentionKind) : Nat :=
  KimiK3.Config.countLayers (fun n => decide (c.attentionKindAt (n - 1) = k)) c.numLayers

/-- The 1-based layers with MLP `k`. -/
def layersOfChannel (c : Config) (k : ChannelKind) : List Nat :=
  KimiK3.Config.layersWhere (fun n => decide (c.channelKindAt (n - 1) = k)) c.numLayers []

/-- The number of layers with MLP `k`. -/
def channelCount (c : Config) (k : ChannelKind) : Nat :=
  KimiK3.Config.countLayers (fun n => decide (c.channelKindAt (n - 1) = k)) c.numLayers

/-- The widths that must be positive, with their hub field names. -/
def widths (c : Config) : List (String × Nat) :=
  [("vocab_size", c.vocabSize), ("hidden_size", c.hiddenSize), ("num_hidden_layers", c.numLayers),
   ("intermediate_size", c.intermediateSize), ("moe_intermediate_size", c.moeIntermediateSize),
   ("num_attention_heads", c.numAttentionHeads), ("kv_lora_rank", c.kvLoraRank),
   ("qk_nope_head_dim", c.qkNopeHeadDim), ("qk_rope_head_dim", c.qkRopeHeadDim),
   ("v_head_dim", c.vHeadDim), ("linear_attn_config.num_heads", c.kdaNumHeads),
   ("linear_attn_config.head_dim", c.kdaHeadDim),
   ("linear_attn_config.short_conv_kernel_size", c.kdaConvSize), ("num_experts", c.numExperts),
   ("num_experts_per_token", c.numExpertsPerToken), ("num_shared_experts", c.numSharedExperts)]

/-- Whether every entry is `true` (own recursion). -/
def allTrue : List Bool → Bool
  | [] => true
  | b :: bs => b && allTrue bs

/-- Whether every entry is a 1-based layer of `1..L` (own recursion). -/
def allLayers (L : Nat) : List Nat → Bool
  | [] => true
  | n :: ns => decide (1 ≤ n) && decide (n ≤ L) && allLayers L ns

/-- Whether the two 1-based lists, when both are given, together list every layer `1..L` exactly
once and nothing else (pybridge's check; transformers does not check it). -/
def listsPartition (c : Config) : Bool :=
  match c.fullAttnLayers, c.kdaLayers with
  | some full, some kda =>
    allTrue (perLayer (fun i => natMem (i + 1) full != natMem (i + 1) kda) c.numLayers 0) &&
      allLayers c.numLayers full && allLayers c.numLayers kda
  | _, _ => true

/-- **Well-formedness** (k3-spec §7; what `pybridge.config_kimi_linear` requires of a hub file). -/
structure WF (c : Config) : Prop where
  /-- Every width is positive. -/
  widths_pos : ∀ w ∈ c.widths, 0 < w.2
  /-- `q_lora_rank`, when given, is positive. -/
  qLoraRank_pos : c.qLoraRank ≠ some 0
  /-- `rms_norm_eps` and `routed_scaling_factor` are positive. -/
  decimals_pos : 0 < c.rmsNormEps.mantissa ∧ 0 < c.routedScalingFactor.mantissa
  /-- At most as many active experts as routed experts. -/
  active_le : c.numExpertsPerToken ≤ c.numExperts
  /-- An explicit `layer_types` has one entry per layer. -/
  layerTypes_length : c.layerTypes.all (fun l => l.length == c.numLayers) = true
  /-- An explicit `mlp_layer_types` has one entry per layer. -/
  mlpLayerTypes_length : c.mlpLayerTypes.all (fun l => l.length == c.numLayers) = true
  /-- `lac.full_attn_layers` and `lac.kda_layers`, when both given, partition `1..L`. -/
  lists_partition : c.listsPartition = true

/-- The MLA cache per token and MLA layer: KV latent + shared key (`kv_lora_rank +
qk_rope_head_dim`). -/
def mlaCacheScalarsPerToken (c : Config) : Nat := c.kvLoraRank + c.qkRopeHeadDim

/-! ## JSON export (hub field names; plain `String` building) -/

/-- The hub name of a mixer kind (`layer_types` entries). -/
def attentionKindName : AttentionKind → String
  | .kda => "linear_attention"
  | .mla => "full_attention"

/-- The hub name of an MLP kind (`mlp_layer_types` entries). -/
def channelKindName : ChannelKind → String
  | .dense => "dense"
  | .moe => "sparse"

/-- JSON strings of mixer kinds. -/
def attentionKindStrings : List AttentionKind → List String
  | [] => []
  | k :: ks => ("\"" ++ attentionKindName k ++ "\"") :: attentionKindStrings ks

/-- JSON strings of MLP kinds. -/
def channelKindStrings : List ChannelKind → List String
  | [] => []
  | k :: ks => ("\"" ++ channelKindName k ++ "\"") :: channelKindStrings ks

/-- A JSON array of already-written items. -/
def jsonArray (items : List String) : String := "[" ++ KimiK3.Config.joinComma items ++ "]"

/-- A JSON key–value line, `""` (left out) when the value is absent. -/
def optJson {β : Type} (key : String) (write : β → String) : Option β → String
  | some v => KimiK3.Config.jsonField key (write v)
  | none => ""

/-- **The configuration as one JSON object**: the hub fields by their `config.json` names (the
optional ones only when given; `q_lora_rank` `null` when absent), then under `"schedule"` the
derived per-layer `layer_types` and `mlp_layer_types` and the 1-based `kda_layers`,
`full_attn_layers`, `dense_layers`, `moe_layers`. -/
def toJson (c : Config) : String :=
  let lac := KimiK3.Config.joinComma [
    KimiK3.Config.jsonField "num_heads" (toString c.kdaNumHeads),
    KimiK3.Config.jsonField "head_dim" (toString c.kdaHeadDim),
    KimiK3.Config.jsonField "short_conv_kernel_size" (toString c.kdaConvSize),
    optJson "kda_layers" KimiK3.Config.natArray c.kdaLayers,
    optJson "full_attn_layers" KimiK3.Config.natArray c.fullAttnLayers]
  let schedule := KimiK3.Config.joinComma [
    KimiK3.Config.jsonField "layer_types" (jsonArray (attentionKindStrings c.attentionKinds)),
    KimiK3.Config.jsonField "mlp_layer_types" (jsonArray (channelKindStrings c.channelKinds)),
    KimiK3.Config.jsonField "kda_layers" (KimiK3.Config.natArray (c.layersOfKind .kda)),
    KimiK3.Config.jsonField "full_attn_layers" (KimiK3.Config.natArray (c.layersOfKind .mla)),
    KimiK3.Config.jsonField "dense_layers" (KimiK3.Config.natArray (c.layersOfChannel .dense)),
    KimiK3.Config.jsonField "moe_layers" (KimiK3.Config.natArray (c.layersOfChannel .moe))]
  "{" ++ KimiK3.Config.joinComma [
    KimiK3.Config.jsonField "vocab_size" (toString c.vocabSize),
    KimiK3.Config.jsonField "hidden_size" (toString c.hiddenSize),
    KimiK3.Config.jsonField "num_hidden_layers" (toString c.numLayers),
    KimiK3.Config.jsonField "intermediate_size" (toString c.intermediateSize),
    KimiK3.Config.jsonField "moe_intermediate_size" (toString c.moeIntermediateSize),
    KimiK3.Config.jsonField "num_attention_heads" (toString c.numAttentionHeads),
    KimiK3.Config.jsonField "num_key_value_heads" (toString c.numAttentionHeads),
    KimiK3.Config.jsonField "q_lora_rank" (match c.qLoraRank with | some r => toString r | none => "null"),
    KimiK3.Config.jsonField "kv_lora_rank" (toString c.kvLoraRank),
    KimiK3.Config.jsonField "qk_nope_head_dim" (toString c.qkNopeHeadDim),
    KimiK3.Config.jsonField "qk_rope_head_dim" (toString c.qkRopeHeadDim),
    KimiK3.Config.jsonField "v_head_dim" (toString c.vHeadDim),
    KimiK3.Config.jsonField "num_experts" (toString c.numExperts),
    KimiK3.Config.jsonField "num_experts_per_token" (toString c.numExpertsPerToken),
    KimiK3.Config.jsonField "num_shared_experts" (toString c.numSharedExperts),
    KimiK3.Config.jsonField "routed_scaling_factor" c.routedScalingFactor.toJson,
    KimiK3.Config.jsonField "rms_norm_eps" c.rmsNormEps.toJson,
    KimiK3.Config.jsonField "first_k_dense_replace" (toString c.firstKDenseReplace),
    optJson "layer_types" (fun l => jsonArray (attentionKindStrings l)) c.layerTypes,
    optJson "mlp_layer_types" (fun l => jsonArray (channelKindStrings l)) c.mlpLayerTypes,
    KimiK3.Config.jsonField "linear_attn_config" ("{" ++ lac ++ "}"),
    KimiK3.Config.jsonField "schedule" ("{" ++ schedule ++ "}")] ++ "}"

end Config

/-- **The released Kimi-Linear-48B-A3B configuration** (`moonshotai/Kimi-Linear-48B-A3B-Instruct`,
`config.json`; `fixtures/kimi-linear-48b/config.json`; the same values are transformers 5.23's
`KimiLinearConfig` defaults): width 2304, 27 layers, vocabulary 163840; KDA 32 heads of width 128,
convolution 4; MLA 32 heads, no query latent (`q_lora_rank: null`), KV latent 512, content key
128, shared key 64, value 128; MLA at 1-based layers 4, 8, 12, 16, 20, 24, 27; 256 routed experts
with top-8, one shared, expert hidden 1024, dense hidden 9216, the first layer dense;
`ρ = 2.446`, `rms_norm_eps = 1e-5`. -/
def kimiLinear48B : Config where
  vocabSize := 163840
  hiddenSize := 2304
  numLayers := 27
  intermediateSize := 9216
  moeIntermediateSize := 1024
  numAttentionHeads := 32
  qLoraRank := none
  kvLoraRank := 512
  qkNopeHeadDim := 128
  qkRopeHeadDim := 64
  vHeadDim := 128
  kdaNumHeads := 32
  kdaHeadDim := 128
  kdaConvSize := 4
  numExperts := 256
  numExpertsPerToken := 8
  numSharedExperts := 1
  routedScalingFactor := ⟨2446, 3⟩
  rmsNormEps := ⟨1, 5⟩
  layerTypes := none
  fullAttnLayers := some [4, 8, 12, 16, 20, 24, 27]
  kdaLayers := some [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26]
  mlpLayerTypes := none
  firstKDenseReplace := 1

/-- **The tiny Kimi Linear configuration** of difftest's components (`difftest/components/kimi_linear.py`,
`TINY`): width 16, 4 layers (KDA 1, 2, 4; MLA 3), the first dense, KDA 2 heads of width 6,
convolution 4, MLA 2 heads with the direct query, KV latent 7, content key 4, shared key 3,
value 5, 4 routed experts with top-2, one shared, expert hidden 6, dense hidden 20, `ρ = 2.446`. -/
def tinyConfig : Config where
  vocabSize := 61
  hiddenSize := 16
  numLayers := 4
  intermediateSize := 20
  moeIntermediateSize := 6
  numAttentionHeads := 2
  qLoraRank := none
  kvLoraRank := 7
  qkNopeHeadDim := 4
  qkRopeHeadDim := 3
  vHeadDim := 5
  kdaNumHeads := 2
  kdaHeadDim := 6
  kdaConvSize := 4
  numExperts := 4
  numExpertsPerToken := 2
  numSharedExperts := 1
  routedScalingFactor := ⟨2446, 3⟩
  rmsNormEps := ⟨1, 5⟩
  layerTypes := none
  fullAttnLayers := some [3]
  kdaLayers := some [1, 2, 4]
  mlpLayerTypes := none
  firstKDenseReplace := 1

/-- The released configuration is well formed. -/
theorem kimiLinear48B_wf : kimiLinear48B.WF := by constructor <;> decide

/-- The tiny configuration is well formed. -/
theorem tinyConfig_wf : tinyConfig.WF := by constructor <;> decide

/-- **Kimi-Linear-48B-A3B has 20 KDA layers.** -/
theorem kimiLinear48B_kda_layer_count : kimiLinear48B.layerCount .kda = 20 := by decide

/-- **Kimi-Linear-48B-A3B has 7 MLA layers.** -/
theorem kimiLinear48B_mla_layer_count : kimiLinear48B.layerCount .mla = 7 := by decide

/-- The MLA layers of Kimi-Linear-48B-A3B, 1-based: every fourth, and the last. -/
theorem kimiLinear48B_mla_layers : kimiLinear48B.layersOfKind .mla = [4, 8, 12, 16, 20, 24, 27] := by
  decide

/-- **The released schedule is K3's rule at 27 layers** (k3-spec §1: 1-based layer `n` is MLA iff
`n % 4 = 0` or `n` is the last layer). -/
theorem kimiLinear48B_schedule_eq_k3_rule :
    ∀ i < 27, kimiLinear48B.attentionKindAt i =
      if (i + 1) % 4 = 0 ∨ i + 1 = 27 then .mla else .kda := by
  decide

/-- **Kimi-Linear-48B-A3B's only dense layer is the first.** -/
theorem kimiLinear48B_dense_layers : kimiLinear48B.layersOfChannel .dense = [1] := by decide

/-- Kimi-Linear-48B-A3B has 26 MoE layers. -/
theorem kimiLinear48B_moe_layer_count : kimiLinear48B.channelCount .moe = 26 := by decide

/-- **The two lists decide the released schedule**: without them, transformers' default would put
MLA at layers 5, 9, …, 25 (6 layers, the last layer KDA). -/
theorem kimiLinear48B_default_schedule_differs :
    { kimiLinear48B with fullAttnLayers := none, kdaLayers := none }.layersOfKind .mla =
      [5, 9, 13, 17, 21, 25] := by
  decide

/-- **The MLA cache of Kimi-Linear-48B-A3B**: 576 scalars per token and MLA layer, 4032 per token
over its 7 MLA layers, against 15552 with MLA in all 27 layers — the "up to 75%" KV-cache
reduction of the Kimi Linear report (`4032 · 4 ≤ 15552 + 576`: within one layer's cache of a
quarter). -/
theorem kimiLinear48B_mla_cache :
    kimiLinear48B.mlaCacheScalarsPerToken = 576 ∧
      kimiLinear48B.layerCount .mla * kimiLinear48B.mlaCacheScalarsPerToken = 4032 ∧
      kimiLinear48B.numLayers * kimiLinear48B.mlaCacheScalarsPerToken = 15552 := by
  decide

/-- The tiny configuration: MLA at layer 3 only, the first layer dense. -/
theorem tinyConfig_schedule :
    tinyConfig.layersOfKind .mla = [3] ∧ tinyConfig.layersOfChannel .dense = [1] := by
  decide

end KimiLinear

end KimiK3
