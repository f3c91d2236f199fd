module

/-!
# The model configuration (k3-spec §1, report Table 1, Fig. 2)

`Config` holds every width and count the language model needs, with the hub `config.json`
field names in the docstrings; `paperConfig` is the report's configuration (numbers the report
does not give are the guesses of `fixtures/paper/config.json`, see its `_notes`), `tinyConfig`
is `fixtures/tiny/config.json`. `Config.toJson` writes the hub fields, so a test can compare
both with the fixtures field by field (`tests/test_model_lean.py`).

Proved here, by `decide`: the well-formedness of both configurations (`paperConfig_wf`: positive
widths, MX alignment to 32-value blocks, `16 ≤ 896` active experts, vision output width = text
width, vision width divisible by its heads), the layer schedule counts (69 KDA and 24 MLA
layers; tiny: 3 and 2), the MLA cache identity `30720 · 3 = 576 · 160` stated from the
configuration's fields, and the number of AttnRes sources at the final retrieval (9).
-/

@[expose] public section

namespace KimiK3

/-- The kind of a layer's sequence mixer (k3-spec §1 layer schedule). -/
inductive AttentionKind where
  /-- Kimi Delta Attention (linear, recurrent state). -/
  | kda
  /-- Gated MLA (full attention over a latent cache). -/
  | mla
  deriving DecidableEq, Repr

/-- **The configuration of the language model** (k3-spec §1). Hub `config.json` names in the
field docstrings; `linear_attn_config.` fields are written `lac.`. -/
structure Config where
  /-- `vocab_size`. -/
  vocabSize : Nat
  /-- `hidden_size`: the model width `d`. -/
  hiddenDim : Nat
  /-- `num_hidden_layers`. -/
  numLayers : Nat
  /-- `attn_res_block_size`: layers per AttnRes block. -/
  attnResBlockSize : Nat
  /-- `num_attention_heads` (= `num_key_value_heads`): MLA heads. -/
  mlaHeads : Nat
  /-- `q_lora_rank`: MLA query latent width. -/
  queryLatentDim : Nat
  /-- `kv_lora_rank`: MLA KV latent width (cached). -/
  kvLatentDim : Nat
  /-- `qk_rope_head_dim`: MLA shared key width (cached, unrotated: K3 MLA is NoPE). -/
  sharedKeyDim : Nat
  /-- `qk_nope_head_dim`: MLA per-head content key width. -/
  contentKeyDim : Nat
  /-- `v_head_dim`: MLA per-head value width. -/
  valueDim : Nat
  /-- `lac.num_heads`: KDA heads. -/
  kdaHeads : Nat
  /-- `lac.head_k_dim` (default `lac.head_dim`): KDA key width per head. -/
  kdaKeyDim : Nat
  /-- `lac.head_v_dim` (default `lac.head_dim`): KDA value width per head. -/
  kdaValueDim : Nat
  /-- `lac.short_conv_kernel_size`: KDA short convolution length. -/
  kdaConvWidth : Nat
  /-- `lac.decay_rank` (default `lac.head_dim`): rank of the KDA decay projection. -/
  kdaDecayRank : Nat
  /-- `lac.gate_lower_bound`: the KDA log-decay floor `g_min` (report Eq. 5: −5). -/
  kdaLogFloor : Int
  /-- `num_experts`: routed experts. -/
  numRoutedExperts : Nat
  /-- `num_experts_per_token`: active routed experts (top-k). -/
  activeExperts : Nat
  /-- `num_shared_experts`: shared experts, at model width, every token. -/
  numSharedExperts : Nat
  /-- `moe_intermediate_size`: hidden width of every routed and every shared expert (the hub
  stores the shared experts as one MLP `moe_intermediate_size · num_shared_experts` wide, which
  is the sum of `num_shared_experts` experts of this width). -/
  expertHiddenDim : Nat
  /-- `routed_expert_hidden_size`: the latent width of the routed experts. -/
  latentDim : Nat
  /-- `intermediate_size`: hidden width of the dense channel mixer. -/
  denseHiddenDim : Nat
  /-- `first_k_dense_replace`: the first this-many layers use the dense channel mixer. -/
  firstKDense : Nat
  /-- `moe_layer_freq`: after them, a (0-based) layer `i` is MoE iff `i % moe_layer_freq = 0`. -/
  moeLayerFreq : Nat
  /-- `activation_situ_beta`: the SiTU gate cap `c_g` (report: 4). -/
  gateCap : Nat
  /-- `activation_situ_linear_beta`: the SiTU up cap `c_u` (report: 25). -/
  upCap : Nat
  /-- MoonViT hidden width (not in the hub text config; not in the report). -/
  visionHiddenDim : Nat
  /-- MoonViT attention heads (report: 12). -/
  visionHeads : Nat
  /-- MoonViT output width after the projector (report: the text width, 7168). -/
  visionOutputDim : Nat
  deriving DecidableEq, Repr

namespace Config

/-- **The layer schedule** (k3-spec §1, report Fig. 2): 1-based layer `n` is MLA iff
`n % 4 = 0` or `n` is the last layer, otherwise KDA. -/
def attentionKindAt (c : Config) (n : Nat) : AttentionKind :=
  if n % 4 = 0 ∨ n = c.numLayers then .mla else .kda

/-- Whether 1-based layer `n` uses the Stable LatentMoE channel mixer (the hub rule on the
0-based index `n − 1`: at least `first_k_dense_replace` and divisible by `moe_layer_freq`);
otherwise it uses the dense one. -/
def isMoE (c : Config) (n : Nat) : Bool :=
  decide (c.firstKDense < n) && decide ((n - 1) % c.moeLayerFreq = 0)

/-- How many of the 1-based layers `1, …, n` satisfy `p`. -/
def countLayers (p : Nat → Bool) : Nat → Nat
  | 0 => 0
  | n + 1 => countLayers p n + if p (n + 1) then 1 else 0

/-- The 1-based layers `1, …, n` satisfying `p`, in order, in front of `acc`. -/
def layersWhere (p : Nat → Bool) : Nat → List Nat → List Nat
  | 0, acc => acc
  | n + 1, acc => layersWhere p n (if p (n + 1) then (n + 1) :: acc else acc)

/-- The number of layers of kind `k`. -/
def layerCount (c : Config) (k : AttentionKind) : Nat :=
  countLayers (fun n => decide (c.attentionKindAt n = k)) c.numLayers

/-- The 1-based layers of kind `k` (the hub's `kda_layers` / `full_attn_layers`). -/
def layersOfKind (c : Config) (k : AttentionKind) : List Nat :=
  layersWhere (fun n => decide (c.attentionKindAt n = k)) c.numLayers []

/-- The widths that must be positive. -/
def widths (c : Config) : List Nat :=
  [c.vocabSize, c.hiddenDim, c.numLayers, c.attnResBlockSize, c.mlaHeads, c.queryLatentDim,
   c.kvLatentDim, c.sharedKeyDim, c.contentKeyDim, c.valueDim, c.kdaHeads, c.kdaKeyDim,
   c.kdaValueDim, c.kdaConvWidth, c.kdaDecayRank, c.numRoutedExperts, c.activeExperts,
   c.expertHiddenDim, c.latentDim, c.denseHiddenDim, c.moeLayerFreq, c.visionHiddenDim,
   c.visionHeads, c.visionOutputDim]

/-- The widths quantized in MX blocks (k3-spec §1, §2.13: expert weights MXFP4, expert
activations MXFP8): model width, latent width, expert hidden width, dense hidden width. -/
def mxWidths (c : Config) : List Nat :=
  [c.hiddenDim, c.latentDim, c.expertHiddenDim, c.denseHiddenDim]

/-- **Well-formedness** for MX block size `mxBlock` (k3-spec §1 `Config.WF`). -/
structure WF (c : Config) (mxBlock : Nat) : Prop where
  /-- Every width is positive. -/
  widths_pos : ∀ w ∈ c.widths, 0 < w
  /-- The quantized widths split into whole MX blocks. -/
  mx_aligned : ∀ w ∈ c.mxWidths, w % mxBlock = 0
  /-- At most as many active experts as routed experts. -/
  activeExperts_le : c.activeExperts ≤ c.numRoutedExperts
  /-- MoonViT's output width is the text width. -/
  vision_output : c.visionOutputDim = c.hiddenDim
  /-- MoonViT's width splits evenly over its heads. -/
  vision_heads : c.visionHiddenDim % c.visionHeads = 0
  /-- The KDA log-decay floor is negative (report Eq. 5). -/
  logFloor_neg : c.kdaLogFloor < 0

theorem WF.hiddenDim_pos {c : Config} {b : Nat} (h : c.WF b) : 0 < c.hiddenDim :=
  h.widths_pos _ (by simp [widths])

theorem WF.attnResBlockSize_pos {c : Config} {b : Nat} (h : c.WF b) : 0 < c.attnResBlockSize :=
  h.widths_pos _ (by simp [widths])

theorem WF.numLayers_pos {c : Config} {b : Nat} (h : c.WF b) : 0 < c.numLayers :=
  h.widths_pos _ (by simp [widths])

/-- MLA cached scalars per token and layer: KV latent + shared key (k3-spec §1: 576). -/
def mlaCompressedScalarsPerToken (c : Config) : Nat := c.kvLatentDim + c.sharedKeyDim

/-- The fully expanded per-head baseline: heads × (content key + shared key + value)
(k3-spec §1: 30,720). -/
def mlaUncompressedScalarsPerToken (c : Config) : Nat :=
  c.mlaHeads * (c.contentKeyDim + c.sharedKeyDim + c.valueDim)

/-- The number of AttnRes sources of the final retrieval after all layers (k3-spec §2.4):
the embedding, one per completed block, and the partial block when it is not empty. -/
def finalSourceCount (c : Config) : Nat :=
  1 + c.numLayers / c.attnResBlockSize + (if c.numLayers % c.attnResBlockSize = 0 then 0 else 1)

end Config

/-- **The report's configuration** (k3-spec §1). From the report: hidden 7168, 93 layers, 96 MLA
heads, KV latent 512, shared key 64, content key 128, value 128, 896 routed experts with top-16,
2 shared experts, latent width 3584, expert hidden 3072, AttnRes block 12, `g_min = −5`, SiTU
caps 4/25, MoonViT 12 heads with output width 7168. Guesses of `fixtures/paper/config.json`
(not in the report): vocabulary 163840, query latent 1536, dense hidden 33792, one dense first
layer, KDA 96 heads of key/value width 128, decay rank 128 (the hub default `head_dim`),
convolution 4. MoonViT hidden width 1152 is this file's guess (MoonViT of Kimi-VL). -/
def paperConfig : Config where
  vocabSize := 163840
  hiddenDim := 7168
  numLayers := 93
  attnResBlockSize := 12
  mlaHeads := 96
  queryLatentDim := 1536
  kvLatentDim := 512
  sharedKeyDim := 64
  contentKeyDim := 128
  valueDim := 128
  kdaHeads := 96
  kdaKeyDim := 128
  kdaValueDim := 128
  kdaConvWidth := 4
  kdaDecayRank := 128
  kdaLogFloor := -5
  numRoutedExperts := 896
  activeExperts := 16
  numSharedExperts := 2
  expertHiddenDim := 3072
  latentDim := 3584
  denseHiddenDim := 33792
  firstKDense := 1
  moeLayerFreq := 1
  gateCap := 4
  upCap := 25
  visionHiddenDim := 1152
  visionHeads := 12
  visionOutputDim := 7168

/-- **The tiny test configuration**, `fixtures/tiny/config.json`: every width small and
distinct, 5 layers (KDA 1–3, MLA 4–5; layer 1 dense, 2–5 MoE), AttnRes block 3 (one block
completes). The MoonViT fields are this file's choice (not in the hub text config). -/
def tinyConfig : Config where
  vocabSize := 101
  hiddenDim := 24
  numLayers := 5
  attnResBlockSize := 3
  mlaHeads := 3
  queryLatentDim := 10
  kvLatentDim := 11
  sharedKeyDim := 14
  contentKeyDim := 9
  valueDim := 8
  kdaHeads := 2
  kdaKeyDim := 5
  kdaValueDim := 7
  kdaConvWidth := 4
  kdaDecayRank := 15
  kdaLogFloor := -5
  numRoutedExperts := 6
  activeExperts := 2
  numSharedExperts := 2
  expertHiddenDim := 13
  latentDim := 12
  denseHiddenDim := 26
  firstKDense := 1
  moeLayerFreq := 1
  gateCap := 4
  upCap := 25
  visionHiddenDim := 20
  visionHeads := 4
  visionOutputDim := 24

/-- The paper configuration is well formed for MX blocks of 32 (k3-spec §1). -/
theorem paperConfig_wf : paperConfig.WF 32 := by constructor <;> decide

/-- The tiny configuration is well formed (block 1: its widths are not multiples of 32). -/
theorem tinyConfig_wf : tinyConfig.WF 1 := by constructor <;> decide

/-- 69 KDA layers (k3-spec §1). -/
theorem paperConfig_kda_layer_count : paperConfig.layerCount .kda = 69 := by decide

/-- 24 MLA layers: 4, 8, …, 92 and 93 (k3-spec §1). -/
theorem paperConfig_mla_layer_count : paperConfig.layerCount .mla = 24 := by decide

/-- The MLA layers of the paper configuration, 1-based. -/
theorem paperConfig_mla_layers : paperConfig.layersOfKind .mla =
    [4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 93] := by
  decide

/-- The tiny configuration: 3 KDA layers. -/
theorem tinyConfig_kda_layer_count : tinyConfig.layerCount .kda = 3 := by decide

/-- The tiny configuration: 2 MLA layers (4 and 5). -/
theorem tinyConfig_mla_layer_count : tinyConfig.layerCount .mla = 2 := by decide

/-- **The MLA cache compression** (k3-spec §1): the expanded per-head cache over the latent
cache is `160/3`, as the integer identity `30720 · 3 = 576 · 160`. -/
theorem paperConfig_mla_cache_compression :
    paperConfig.mlaUncompressedScalarsPerToken * 3 = paperConfig.mlaCompressedScalarsPerToken * 160 ∧
      paperConfig.mlaUncompressedScalarsPerToken = 30720 ∧
      paperConfig.mlaCompressedScalarsPerToken = 576 := by decide

/-- After 93 layers with blocks of 12 the final retrieval reads 9 sources: the embedding,
7 completed blocks and the partial block of 9 layers (k3-spec §1, §2.4). -/
theorem paperConfig_final_sources : paperConfig.finalSourceCount = 9 := by decide

namespace Config

/-! ## JSON export (hub field names; plain `String` building, the subset the offline compiler
handles) -/

/-- A JSON key–value line. -/
def jsonField (key value : String) : String := "\"" ++ key ++ "\": " ++ value

/-- Comma-separated items. -/
def joinComma : List String → String
  | [] => ""
  | [x] => x
  | x :: xs => x ++ ", " ++ joinComma xs

/-- Decimal strings of natural numbers. -/
def natStrings : List Nat → List String
  | [] => []
  | n :: ns => toString n :: natStrings ns

/-- A JSON array of natural numbers. -/
def natArray (l : List Nat) : String := "[" ++ joinComma (natStrings l) ++ "]"

/-- **The hub fields of a configuration** as one JSON object (`config.json` names; the layer
lists `lac.kda_layers`/`lac.full_attn_layers` from the schedule). The MoonViT fields are written
under `k3spec_vision`, which the hub text config does not have. -/
def toJson (c : Config) : String :=
  let lac := joinComma [
    jsonField "num_heads" (toString c.kdaHeads),
    jsonField "head_dim" (toString c.kdaKeyDim),
    jsonField "head_k_dim" (toString c.kdaKeyDim),
    jsonField "head_v_dim" (toString c.kdaValueDim),
    jsonField "decay_rank" (toString c.kdaDecayRank),
    jsonField "short_conv_kernel_size" (toString c.kdaConvWidth),
    jsonField "gate_lower_bound" (toString c.kdaLogFloor),
    jsonField "kda_layers" (natArray (c.layersOfKind .kda)),
    jsonField "full_attn_layers" (natArray (c.layersOfKind .mla))]
  let vision := joinComma [
    jsonField "hidden_size" (toString c.visionHiddenDim),
    jsonField "num_heads" (toString c.visionHeads),
    jsonField "output_size" (toString c.visionOutputDim)]
  "{" ++ joinComma [
    jsonField "vocab_size" (toString c.vocabSize),
    jsonField "hidden_size" (toString c.hiddenDim),
    jsonField "num_hidden_layers" (toString c.numLayers),
    jsonField "attn_res_block_size" (toString c.attnResBlockSize),
    jsonField "num_attention_heads" (toString c.mlaHeads),
    jsonField "num_key_value_heads" (toString c.mlaHeads),
    jsonField "q_lora_rank" (toString c.queryLatentDim),
    jsonField "kv_lora_rank" (toString c.kvLatentDim),
    jsonField "qk_rope_head_dim" (toString c.sharedKeyDim),
    jsonField "qk_nope_head_dim" (toString c.contentKeyDim),
    jsonField "v_head_dim" (toString c.valueDim),
    jsonField "num_experts" (toString c.numRoutedExperts),
    jsonField "num_experts_per_token" (toString c.activeExperts),
    jsonField "num_shared_experts" (toString c.numSharedExperts),
    jsonField "moe_intermediate_size" (toString c.expertHiddenDim),
    jsonField "routed_expert_hidden_size" (toString c.latentDim),
    jsonField "intermediate_size" (toString c.denseHiddenDim),
    jsonField "first_k_dense_replace" (toString c.firstKDense),
    jsonField "moe_layer_freq" (toString c.moeLayerFreq),
    jsonField "activation_situ_beta" (toString c.gateCap),
    jsonField "activation_situ_linear_beta" (toString c.upCap),
    jsonField "linear_attn_config" ("{" ++ lac ++ "}"),
    jsonField "k3spec_vision" ("{" ++ vision ++ "}")] ++ "}"

end Config

end KimiK3
