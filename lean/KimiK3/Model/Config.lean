module

public import KimiK3.Core.Scalar

/-!
# The model configuration (k3-spec §1, report Table 1, Fig. 2)

`Config` holds every width and count the language model needs, with the hub `config.json`
field names in the docstrings; `paperConfig` is the report's configuration (numbers the report
does not give are the guesses of `fixtures/paper/config.json`, see its `_notes`), `tinyConfig`
is `fixtures/tiny/config.json`. `Config.toJson` writes the hub fields, so a test can compare
both with the fixtures field by field (`tests/test_model_lean.py`).

Proved here, by `decide`: the well-formedness of both configurations (`paperConfig_wf`: positive
widths, MX alignment to 32-value blocks, `16 ≤ 896` active experts, vision output width = text
width, vision attention width divisible by its heads), the layer schedule counts (69 KDA and 24 MLA
layers; tiny: 3 and 2), the MLA cache identity `30720 · 3 = 576 · 160` stated from the
configuration's fields, and the number of AttnRes sources at the final retrieval (9).

Real-valued hyperparameters (every RMSNorm ε, the routed scaling factor, the KDA query scale
and the MLA score scale when the file gives them) are stored exactly as `Decimal`s
`m · 10^{-e}` and read at any scalar type with `Decimal.toScalar`; `Config.check` lists, by hub
field name, every condition of `Config.WF` a configuration breaks (`check_eq_nil_iff`).
-/

@[expose] public section

namespace KimiK3

/-- A nonnegative decimal `mantissa · 10^{-exponent}`: how a configuration stores a real
hyperparameter exactly (`1e-5 = ⟨1, 5⟩`, `2.5 = ⟨25, 1⟩`). -/
structure Decimal where
  /-- The digits `m`. -/
  mantissa : Nat
  /-- The number of decimal places `e`. -/
  exponent : Nat
  deriving DecidableEq, Repr

/-- The decimal at a scalar type: `(m : α) / (10^e : α)`, one division. At `Float`, with `m` and
`10^e` exact (below `2^53`, `e ≤ 22`), this is the correctly rounded value, the same binary64
number as the JSON literal `me-e`. -/
def Decimal.toScalar {α : Type} [Scalar α] (x : Decimal) : α :=
  (x.mantissa : α) / ((10 ^ x.exponent : Nat) : α)

/-- The JSON number `me-e` of a decimal (e.g. `25e-1`). -/
def Decimal.toJson (x : Decimal) : String := toString x.mantissa ++ "e-" ++ toString x.exponent

/-- A scale the configuration may give or leave to its default (`1/√n` for a width `n`). -/
inductive ScaleSpec where
  /-- Absent from the file: the default. -/
  | default
  /-- Given by the file. -/
  | given (value : Decimal)
  deriving DecidableEq, Repr

/-- An integer at a scalar type (the KDA floor `g_min` is an `Int`). -/
def intToScalar {α : Type} [Scalar α] : Int → α
  | .ofNat n => (n : α)
  | .negSucc n => -((n + 1 : Nat) : α)

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
  /-- `routed_scaling_factor` (default 1): multiplies the renormalized routed mixture weights
  (`StableLatentMoE.routedScale`). -/
  routedScale : Decimal
  /-- `lac.query_scale` (extension key; `.default` when absent: `1/√head_k_dim`, the hub's and fla's default):
  the KDA query is multiplied by it before the readout (`KDA.LayerParams.queryScale`). -/
  kdaQueryScale : ScaleSpec
  /-- `mla_score_scale` (extension key; absent: `1/√(qk_nope_head_dim + qk_rope_head_dim)`):
  the MLA score scale. -/
  mlaScoreScale : ScaleSpec
  /-- `rms_norm_eps` (report: not given; hub 1e-5): ε of the two pre-norms of every layer
  (`input_layernorm`, `post_attention_layernorm`). -/
  preNormEps : Decimal
  /-- `attn_res_norm_eps` (extension key; default `rms_norm_eps`): ε of the unit-gain RMSNorm of
  the AttnRes scores (every retrieval, the final one included). -/
  attnResEps : Decimal
  /-- `final_norm_eps` (extension key; default `rms_norm_eps`): ε of the final norm `model.norm`. -/
  finalNormEps : Decimal
  /-- `mla_latent_norm_eps` (extension key; default 1e-6, hard-coded by transformers and NeMo):
  ε of MLA's `q_a_layernorm` and `kv_a_layernorm`. -/
  mlaLatentNormEps : Decimal
  /-- `lac.output_norm_eps` (extension key; default `rms_norm_eps`): ε of the KDA per-head output
  norm `o_norm`. -/
  kdaOutputNormEps : Decimal
  /-- `lac.l2_norm_eps` (extension key; default 1e-6, fla's `l2norm`): ε of the KDA query/key L2
  normalization `z / √(‖z‖² + ε)`. -/
  kdaL2Eps : Decimal
  /-- `latent_moe_norm_eps` (extension key; default `rms_norm_eps`): ε of the LatentMoE routed
  norm `routed_expert_norm`. -/
  moeNormEps : Decimal
  /-- `vision_config.vt_hidden_size`: MoonViT-V2's width (not in the report; the released
  checkpoint's 1024, k3-spec §7). -/
  visionHiddenDim : Nat
  /-- `vision_config.qkv_hidden_size`: the width of MoonViT-V2's fused attention, heads × head
  dimension (released: 1536 = 12 × 128; not the model width, k3-spec §7). -/
  visionQkvDim : Nat
  /-- `vision_config.vt_num_attention_heads`: MoonViT attention heads (report Table 1: 12). -/
  visionHeads : Nat
  /-- `vision_config.text_hidden_size`: MoonViT's output width after the projector (report §2.4:
  the text width, 7168). -/
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

/-- The widths that must be positive, with their hub field names. -/
def widths (c : Config) : List (String × Nat) :=
  [("vocab_size", c.vocabSize), ("hidden_size", c.hiddenDim), ("num_hidden_layers", c.numLayers),
   ("attn_res_block_size", c.attnResBlockSize), ("num_attention_heads", c.mlaHeads),
   ("q_lora_rank", c.queryLatentDim), ("kv_lora_rank", c.kvLatentDim),
   ("qk_rope_head_dim", c.sharedKeyDim), ("qk_nope_head_dim", c.contentKeyDim),
   ("v_head_dim", c.valueDim), ("linear_attn_config.num_heads", c.kdaHeads),
   ("linear_attn_config.head_k_dim", c.kdaKeyDim), ("linear_attn_config.head_v_dim", c.kdaValueDim),
   ("linear_attn_config.short_conv_kernel_size", c.kdaConvWidth),
   ("linear_attn_config.decay_rank", c.kdaDecayRank), ("num_experts", c.numRoutedExperts),
   ("num_experts_per_token", c.activeExperts), ("moe_intermediate_size", c.expertHiddenDim),
   ("routed_expert_hidden_size", c.latentDim), ("intermediate_size", c.denseHiddenDim),
   ("moe_layer_freq", c.moeLayerFreq), ("vision_config.vt_hidden_size", c.visionHiddenDim),
   ("vision_config.qkv_hidden_size", c.visionQkvDim), ("vision_config.vt_num_attention_heads", c.visionHeads),
   ("vision_config.text_hidden_size", c.visionOutputDim)]

/-- The widths quantized in MX blocks (k3-spec §1, §2.13: expert weights MXFP4, expert
activations MXFP8): model width, latent width, expert hidden width, dense hidden width. -/
def mxWidths (c : Config) : List (String × Nat) :=
  [("hidden_size", c.hiddenDim), ("routed_expert_hidden_size", c.latentDim),
   ("moe_intermediate_size", c.expertHiddenDim), ("intermediate_size", c.denseHiddenDim)]

/-- List concatenation by own recursion (`List.append` does not compile offline); equal to `++`. -/
def cat {β : Type} : List β → List β → List β
  | [], l => l
  | x :: xs, l => x :: cat xs l

@[simp] theorem cat_eq {β : Type} (a b : List β) : cat a b = a ++ b := by
  induction a with
  | nil => rfl
  | cons x xs ih => simp [cat, ih]

/-- The optional decimals that are present (`query_scale`, `mla_score_scale` when given). -/
def presentScales (c : Config) : List (String × Decimal) :=
  cat (match c.kdaQueryScale with | .given q => [("linear_attn_config.query_scale", q)] | .default => [])
    (match c.mlaScoreScale with | .given q => [("mla_score_scale", q)] | .default => [])

/-- The real hyperparameters that must be positive, with their field names: every RMSNorm ε,
the routed scaling factor and the scales the file gives. -/
def decimals (c : Config) : List (String × Decimal) :=
  cat [("rms_norm_eps", c.preNormEps), ("attn_res_norm_eps", c.attnResEps),
   ("final_norm_eps", c.finalNormEps), ("mla_latent_norm_eps", c.mlaLatentNormEps),
   ("linear_attn_config.output_norm_eps", c.kdaOutputNormEps),
   ("linear_attn_config.l2_norm_eps", c.kdaL2Eps), ("latent_moe_norm_eps", c.moeNormEps),
   ("routed_scaling_factor", c.routedScale)] c.presentScales

/-- **Well-formedness** for MX block size `mxBlock` (k3-spec §1 `Config.WF`). -/
structure WF (c : Config) (mxBlock : Nat) : Prop where
  /-- Every width is positive. -/
  widths_pos : ∀ w ∈ c.widths, 0 < w.2
  /-- The quantized widths split into whole MX blocks. -/
  mx_aligned : ∀ w ∈ c.mxWidths, w.2 % mxBlock = 0
  /-- Every RMSNorm ε, the routed scaling factor and the given scales are positive. -/
  decimals_pos : ∀ x ∈ c.decimals, 0 < x.2.mantissa
  /-- At most as many active experts as routed experts. -/
  activeExperts_le : c.activeExperts ≤ c.numRoutedExperts
  /-- MoonViT's output width is the text width. -/
  vision_output : c.visionOutputDim = c.hiddenDim
  /-- MoonViT's attention width splits evenly over its heads. -/
  vision_heads : c.visionQkvDim % c.visionHeads = 0
  /-- The KDA log-decay floor is negative (report Eq. 5). -/
  logFloor_neg : c.kdaLogFloor < 0

theorem WF.hiddenDim_pos {c : Config} {b : Nat} (h : c.WF b) : 0 < c.hiddenDim :=
  h.widths_pos ("hidden_size", _) (by simp [widths])

theorem WF.attnResBlockSize_pos {c : Config} {b : Nat} (h : c.WF b) : 0 < c.attnResBlockSize :=
  h.widths_pos ("attn_res_block_size", _) (by simp [widths])

theorem WF.numLayers_pos {c : Config} {b : Nat} (h : c.WF b) : 0 < c.numLayers :=
  h.widths_pos ("num_hidden_layers", _) (by simp [widths])

theorem WF.convWidth_pos {c : Config} {b : Nat} (h : c.WF b) : 0 < c.kdaConvWidth :=
  h.widths_pos ("linear_attn_config.short_conv_kernel_size", _) (by simp [widths])

/-! ### The checker: every broken condition of `WF`, by field -/

/-- One message per entry of `l` that fails `ok`. -/
def failing {β : Type} (ok : β → Bool) (msg : String × β → String) : List (String × β) → List String
  | [] => []
  | x :: xs => if ok x.2 then failing ok msg xs else msg x :: failing ok msg xs

theorem failing_eq_nil_iff {β : Type} (ok : β → Bool) (msg : String × β → String)
    (l : List (String × β)) : failing ok msg l = [] ↔ ∀ x ∈ l, ok x.2 = true := by
  induction l with
  | nil => simp [failing]
  | cons x xs ih => by_cases h : ok x.2 <;> simp [failing, h, ih]

/-- The condition as a message list: empty when `p` holds. -/
def require (p : Prop) [Decidable p] (msg : String) : List String := if p then [] else [msg]

theorem require_eq_nil_iff (p : Prop) [Decidable p] (msg : String) : require p msg = [] ↔ p := by
  by_cases h : p <;> simp [require, h]

/-- **The configuration checker** for MX block size `mxBlock`: one message per broken condition
of `WF`, naming the hub field (`field 'hidden_size' must be positive, got 0`). Empty exactly
for well-formed configurations (`check_eq_nil_iff`). -/
def check (c : Config) (mxBlock : Nat) : List String :=
  cat (failing (fun w => decide (0 < w)) (fun w => "field '" ++ w.1 ++ "' must be positive, got 0") c.widths) <|
  cat (failing (fun w => decide (w % mxBlock = 0))
    (fun w => "field '" ++ w.1 ++ "' must be a multiple of the MX block " ++ toString mxBlock ++
      ", got " ++ toString w.2) c.mxWidths) <|
  cat (failing (fun x => decide (0 < x.mantissa)) (fun x => "field '" ++ x.1 ++ "' must be positive, got 0")
    c.decimals) <|
  cat (require (c.activeExperts ≤ c.numRoutedExperts)
    ("field 'num_experts_per_token' (" ++ toString c.activeExperts ++ ") exceeds 'num_experts' (" ++
      toString c.numRoutedExperts ++ ")")) <|
  cat (require (c.visionOutputDim = c.hiddenDim)
    ("field 'vision_config.text_hidden_size' (" ++ toString c.visionOutputDim ++ ") must equal 'hidden_size' (" ++
      toString c.hiddenDim ++ ")")) <|
  cat (require (c.visionQkvDim % c.visionHeads = 0)
    ("field 'vision_config.qkv_hidden_size' (" ++ toString c.visionQkvDim ++
      ") must be divisible by 'vision_config.vt_num_attention_heads' (" ++ toString c.visionHeads ++ ")")) <|
  require (c.kdaLogFloor < 0)
    ("field 'linear_attn_config.gate_lower_bound' must be negative, got " ++ toString c.kdaLogFloor)

/-- **The checker is exact**: it reports nothing iff the configuration is well formed. -/
theorem check_eq_nil_iff (c : Config) (mxBlock : Nat) : c.check mxBlock = [] ↔ c.WF mxBlock := by
  simp only [check, cat_eq, List.append_eq_nil_iff, failing_eq_nil_iff, require_eq_nil_iff,
    decide_eq_true_eq]
  constructor
  · rintro ⟨h1, h2, h3, h4, h5, h6, h7⟩
    exact ⟨h1, h2, h3, h4, h5, h6, h7⟩
  · rintro ⟨h1, h2, h3, h4, h5, h6, h7⟩
    exact ⟨h1, h2, h3, h4, h5, h6, h7⟩

/-! ### The real hyperparameters at a scalar type -/

/-- The KDA log-decay floor `g_min` (report Eq. 5). -/
def logFloor {α : Type} [Scalar α] (c : Config) : α := intToScalar c.kdaLogFloor

/-- The KDA query scale: `lac.query_scale`, or `1/√head_k_dim` when absent. -/
def queryScale {α : Type} [Scalar α] (c : Config) : α :=
  match c.kdaQueryScale with
  | .given q => q.toScalar
  | .default => 1 / Scalar.sqrt (c.kdaKeyDim : α)

/-- The MLA score scale: `mla_score_scale`, or `1/√(qk_nope_head_dim + qk_rope_head_dim)`. -/
def scoreScale {α : Type} [Scalar α] (c : Config) : α :=
  match c.mlaScoreScale with
  | .given q => q.toScalar
  | .default => 1 / Scalar.sqrt ((c.contentKeyDim + c.sharedKeyDim : Nat) : α)

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
convolution 4, routed scaling factor 1, `rms_norm_eps = 1e-5`. The ε of the other norm sites and
the two scales are the hub defaults (MLA latents and KDA L2 `1e-6`, the rest `rms_norm_eps`;
`1/√128`, `1/√192`). MoonViT hidden width 1152 is this file's guess (MoonViT of Kimi-VL). -/
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
  routedScale := ⟨1, 0⟩
  kdaQueryScale := .default
  mlaScoreScale := .default
  preNormEps := ⟨1, 5⟩
  attnResEps := ⟨1, 5⟩
  finalNormEps := ⟨1, 5⟩
  mlaLatentNormEps := ⟨1, 6⟩
  kdaOutputNormEps := ⟨1, 5⟩
  kdaL2Eps := ⟨1, 6⟩
  moeNormEps := ⟨1, 5⟩
  visionHiddenDim := 1024
  visionQkvDim := 1536
  visionHeads := 12
  visionOutputDim := 7168

/-- **The tiny test configuration**, `fixtures/tiny/config.json`: every width small and
distinct, 5 layers (KDA 1–3, MLA 4–5; layer 1 dense, 2–5 MoE), AttnRes block 3 (one block
completes). Every real hyperparameter is non-neutral and every norm site has its own ε (pre-norms
`1e-5`, AttnRes `2e-5`, final `3e-5`, MLA latents `2e-6`, KDA output `4e-5`, KDA L2 `1e-6`,
LatentMoE `5e-5`), routed scaling factor `2.5`, query and score scales the defaults `1/√5`,
`1/√23`. The MoonViT fields are this file's choice (not in the hub text config). -/
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
  routedScale := ⟨25, 1⟩
  kdaQueryScale := .default
  mlaScoreScale := .default
  preNormEps := ⟨1, 5⟩
  attnResEps := ⟨2, 5⟩
  finalNormEps := ⟨3, 5⟩
  mlaLatentNormEps := ⟨2, 6⟩
  kdaOutputNormEps := ⟨4, 5⟩
  kdaL2Eps := ⟨1, 6⟩
  moeNormEps := ⟨5, 5⟩
  visionHiddenDim := 20
  visionQkvDim := 36
  visionHeads := 3
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

/-- Comma-separated items, empty items left out. -/
def joinComma : List String → String
  | [] => ""
  | x :: xs =>
    let rest := joinComma xs
    if x == "" then rest else if rest == "" then x else x ++ ", " ++ rest

/-- A JSON key–value line for an optional decimal (`""`, left out, when absent). -/
def optField (key : String) : ScaleSpec → String
  | .given q => jsonField key q.toJson
  | .default => ""

/-- Decimal strings of natural numbers. -/
def natStrings : List Nat → List String
  | [] => []
  | n :: ns => toString n :: natStrings ns

/-- A JSON array of natural numbers. -/
def natArray (l : List Nat) : String := "[" ++ joinComma (natStrings l) ++ "]"

/-- **The hub fields of a configuration** as one JSON object (`config.json` names; the layer
lists `lac.kda_layers`/`lac.full_attn_layers` from the schedule; MoonViT's widths under
`vision_config`, by the released checkpoint's names). -/
def toJson (c : Config) : String :=
  let lac := joinComma [
    jsonField "num_heads" (toString c.kdaHeads),
    jsonField "head_dim" (toString c.kdaKeyDim),
    jsonField "head_k_dim" (toString c.kdaKeyDim),
    jsonField "head_v_dim" (toString c.kdaValueDim),
    jsonField "decay_rank" (toString c.kdaDecayRank),
    jsonField "short_conv_kernel_size" (toString c.kdaConvWidth),
    jsonField "gate_lower_bound" (toString c.kdaLogFloor),
    jsonField "output_norm_eps" c.kdaOutputNormEps.toJson,
    jsonField "l2_norm_eps" c.kdaL2Eps.toJson,
    optField "query_scale" c.kdaQueryScale,
    jsonField "kda_layers" (natArray (c.layersOfKind .kda)),
    jsonField "full_attn_layers" (natArray (c.layersOfKind .mla))]
  let vision := joinComma [
    jsonField "vt_hidden_size" (toString c.visionHiddenDim),
    jsonField "qkv_hidden_size" (toString c.visionQkvDim),
    jsonField "vt_num_attention_heads" (toString c.visionHeads),
    jsonField "text_hidden_size" (toString c.visionOutputDim)]
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
    jsonField "routed_scaling_factor" c.routedScale.toJson,
    jsonField "rms_norm_eps" c.preNormEps.toJson,
    jsonField "attn_res_norm_eps" c.attnResEps.toJson,
    jsonField "final_norm_eps" c.finalNormEps.toJson,
    jsonField "mla_latent_norm_eps" c.mlaLatentNormEps.toJson,
    jsonField "latent_moe_norm_eps" c.moeNormEps.toJson,
    jsonField "linear_attn_config" ("{" ++ lac ++ "}"),
    optField "mla_score_scale" c.mlaScoreScale,
    jsonField "vision_config" ("{" ++ vision ++ "}")] ++ "}"

end Config

end KimiK3
