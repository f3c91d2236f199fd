module

public import KimiK3.Model.Config

/-!
# MoonViT-V2's configuration and parameter counts (k3-spec §1 Table 1, §2.9, §7)

The four vision widths the language model's configuration already holds stay there, one source
of truth (`Config.visionHiddenDim` `D`, `Config.visionQkvDim` `Q`, `Config.visionHeads` `A`,
`Config.visionOutputDim` `T`); `VisionConfig` holds the rest of the hub's `vision_config` (patch,
MLP width, blocks, position table, frames, merge, ε's, RoPE base). `paperVision` and `tinyVision`
are `fixtures/paper/config.json` and `fixtures/tiny/config.json`'s `vision_config`, read with
`paperConfig` and `tinyConfig`.

The parameter lists are the checkpoint's tensor shapes: `encoderShapes` (patch embedding,
position table, per block one fused attention and one MLP, final norm) and the seed
formalization's divided-attention variant `dividedEncoderShapes` (a spatial and a temporal
attention, each with its norm, `wqkv` and `wo`, in every block). Proved by `decide` from the
configuration fields: **`paper_encoder_params`** (401,214,464: the report's 401 M),
**`paper_divided_encoder_params`** (571,111,424: the seed's structure does not fit the report),
`paper_divided_excess` (27 second attentions of 6,292,480), `paper_projector_params`
(46,144,512, outside the 401 M), and `countAll_encoderShapes`, the closed formula
`D·C·p² + H₀·W₀·D + L·(2D + 3QD + QD + 2MD) + D` that `docs/vision.md` states by hand.
-/

@[expose] public section

namespace KimiK3

namespace Vision

/-- **The rest of MoonViT-V2's configuration** (k3-spec §7; hub `vision_config` names in the
field docstrings): everything `Config` does not already hold. -/
structure VisionConfig where
  /-- `patch_size`: the side `p` of a square patch in pixels (14). -/
  patchSize : Nat
  /-- `in_channels`: colour channels `C` of a pixel (3). -/
  inChannels : Nat
  /-- `vt_intermediate_size`: the MLP width `M` (4096). -/
  mlpDim : Nat
  /-- `vt_num_hidden_layers`: encoder blocks `L` (27). -/
  numLayers : Nat
  /-- `init_pos_emb_height`: rows `H₀` of the learned position table (64). -/
  posHeight : Nat
  /-- `init_pos_emb_width`: columns `W₀` of the learned position table (64). -/
  posWidth : Nat
  /-- `init_pos_emb_time`: frames of the fixed sincos time table, the most a clip may have (4). -/
  maxFrames : Nat
  /-- `merge_kernel_size[0]`: rows merged into one token `mH` (2). -/
  mergeHeight : Nat
  /-- `merge_kernel_size[1]`: columns merged into one token `mW` (2). -/
  mergeWidth : Nat
  /-- `rms_norm_eps`: ε of the encoder's RMSNorms (`norm0`, `norm1`, the final norm). -/
  normEps : Decimal
  /-- `projector_ln_eps`: ε of the projector's post-norm. -/
  projectorEps : Decimal
  /-- `rope_theta`: the base θ of the 2-D RoPE and of the time table's frequencies (10⁴). -/
  ropeTheta : Nat

/-- The head width `K = Q / A` (`qkv_hidden_size / vt_num_attention_heads`; 128). -/
def headDim (c : Config) : Nat := c.visionQkvDim / c.visionHeads

/-- Rotary frequencies per grid axis, `K / 4` (a head is `K/2` rotary pairs: half rows, half
columns; 32). -/
def ropeFreqs (c : Config) : Nat := headDim c / 4

/-- The length of a flattened patch, `C · p · p` (channel-major, the checkpoint's Conv2d; 588). -/
def patchDim (v : VisionConfig) : Nat := v.inChannels * (v.patchSize * v.patchSize)

/-- The width of a merged token, `mH · mW · D` (the projector's input and hidden width; 4096). -/
def mergedDim (c : Config) (v : VisionConfig) : Nat := v.mergeHeight * (v.mergeWidth * c.visionHiddenDim)

/-- The entry count of one shape (the product of its lengths). -/
def countShape : List Nat → Nat
  | [] => 1
  | n :: s => n * countShape s

/-- The sum of the entry counts of a list of tensor shapes. -/
def countAll : List (List Nat) → Nat
  | [] => 0
  | s :: rest => countShape s + countAll rest

/-- Two lists of shapes, one after the other. -/
def appendShapes : List (List Nat) → List (List Nat) → List (List Nat)
  | [], l => l
  | s :: rest, l => s :: appendShapes rest l

/-- `n` copies of a list of shapes. -/
def repeatShapes : Nat → List (List Nat) → List (List Nat)
  | 0, _ => []
  | n + 1, l => appendShapes l (repeatShapes n l)

/-- One attention's tensors (`norm0.weight [D]`, `wqkv.weight [3Q, D]`, `wo.weight [D, Q]`). -/
def attentionShapes (c : Config) : List (List Nat) :=
  [[c.visionHiddenDim], [3 * c.visionQkvDim, c.visionHiddenDim], [c.visionHiddenDim, c.visionQkvDim]]

/-- One MLP's tensors (`norm1.weight [D]`, `mlp.fc0.weight [M, D]`, `mlp.fc1.weight [D, M]`). -/
def mlpShapes (c : Config) (v : VisionConfig) : List (List Nat) :=
  [[c.visionHiddenDim], [v.mlpDim, c.visionHiddenDim], [c.visionHiddenDim, v.mlpDim]]

/-- **One block as the checkpoint has it** (`vision_tower.encoder.blocks.{i}.`, k3-spec §7): one
fused attention, then the MLP. -/
def blockShapes (c : Config) (v : VisionConfig) : List (List Nat) :=
  appendShapes (attentionShapes c) (mlpShapes c v)

/-- One block of the seed's divided attention (k3-spec §2.9): a spatial and a temporal attention
with separate weights, then the MLP. -/
def dividedBlockShapes (c : Config) (v : VisionConfig) : List (List Nat) :=
  appendShapes (attentionShapes c) (appendShapes (attentionShapes c) (mlpShapes c v))

/-- The patch embedding and the position table (`vision_tower.patch_embed.proj.weight [D, C, p, p]`,
bias-free; `vision_tower.patch_embed.pos_emb.weight [H₀, W₀, D]`). The time table is fixed
sincos: no tensor. -/
def embedShapes (c : Config) (v : VisionConfig) : List (List Nat) :=
  [[c.visionHiddenDim, v.inChannels, v.patchSize, v.patchSize], [v.posHeight, v.posWidth, c.visionHiddenDim]]

/-- **The encoder's tensors in the checkpoint** (k3-spec §7): embedding, `L` blocks, the final norm
(`vision_tower.encoder.final_layernorm.weight [D]`). -/
def encoderShapes (c : Config) (v : VisionConfig) : List (List Nat) :=
  appendShapes (embedShapes c v) (appendShapes (repeatShapes v.numLayers (blockShapes c v)) [[c.visionHiddenDim]])

/-- The encoder with the seed's divided attention in every block. -/
def dividedEncoderShapes (c : Config) (v : VisionConfig) : List (List Nat) :=
  appendShapes (embedShapes c v)
    (appendShapes (repeatShapes v.numLayers (dividedBlockShapes c v)) [[c.visionHiddenDim]])

/-- The projector's tensors (`mm_projector.proj.0.weight [4D, 4D]`, `mm_projector.proj.2.weight
[T, 4D]`, `mm_projector.post_norm.weight [T]`; bias-free, no pre-norm). -/
def projectorShapes (c : Config) (v : VisionConfig) : List (List Nat) :=
  [[mergedDim c v, mergedDim c v], [c.visionOutputDim, mergedDim c v], [c.visionOutputDim]]

theorem countAll_appendShapes (a b : List (List Nat)) :
    countAll (appendShapes a b) = countAll a + countAll b := by
  induction a with
  | nil => simp only [appendShapes, countAll, Nat.zero_add]
  | cons s a ih => simp only [appendShapes, countAll, ih, Nat.add_assoc]

theorem countAll_repeatShapes (n : Nat) (l : List (List Nat)) :
    countAll (repeatShapes n l) = n * countAll l := by
  induction n with
  | zero => simp only [repeatShapes, countAll, Nat.zero_mul]
  | succ n ih => rw [repeatShapes, countAll_appendShapes, ih, Nat.succ_mul, Nat.add_comm]

/-- **The encoder's count in closed form**, the hand formula of `docs/vision.md`:
`D·C·p² + H₀·W₀·D + L·(D + 3QD + DQ + D + MD + DM) + D`. -/
theorem countAll_encoderShapes (c : Config) (v : VisionConfig) :
    countAll (encoderShapes c v) =
      c.visionHiddenDim * (v.inChannels * (v.patchSize * v.patchSize)) +
        v.posHeight * (v.posWidth * c.visionHiddenDim) +
        v.numLayers * (c.visionHiddenDim + 3 * c.visionQkvDim * c.visionHiddenDim +
          c.visionHiddenDim * c.visionQkvDim + c.visionHiddenDim + v.mlpDim * c.visionHiddenDim +
          c.visionHiddenDim * v.mlpDim) + c.visionHiddenDim := by
  simp only [encoderShapes, blockShapes, countAll_appendShapes, countAll_repeatShapes, embedShapes,
    attentionShapes, mlpShapes, countAll, countShape, Nat.mul_one, Nat.add_zero, Nat.mul_add]
  omega

/-- The encoder's count: embedding, `L` blocks, final norm. -/
theorem countAll_encoderShapes_split (c : Config) (v : VisionConfig) :
    countAll (encoderShapes c v) =
      countAll (embedShapes c v) + v.numLayers * countAll (blockShapes c v) + c.visionHiddenDim := by
  simp only [encoderShapes, countAll_appendShapes, countAll_repeatShapes, countAll, countShape,
    Nat.mul_one, Nat.add_zero, Nat.add_assoc]

/-- The divided-attention encoder's count: embedding, `L` divided blocks, final norm. -/
theorem countAll_dividedEncoderShapes_split (c : Config) (v : VisionConfig) :
    countAll (dividedEncoderShapes c v) =
      countAll (embedShapes c v) + v.numLayers * countAll (dividedBlockShapes c v) + c.visionHiddenDim := by
  simp only [dividedEncoderShapes, countAll_appendShapes, countAll_repeatShapes, countAll, countShape,
    Nat.mul_one, Nat.add_zero, Nat.add_assoc]

/-- **The released MoonViT-V2's remaining fields** (`fixtures/paper/config.json`, k3-spec §7):
patch 14, 3 channels, MLP 4096, 27 blocks, a 64 × 64 position table, 4 frames, 2 × 2 merge,
ε 1e-5 (both), θ = 10⁴. With `paperConfig`: width 1024, 12 heads of 128 (`Q` = 1536), text 7168. -/
def paperVision : VisionConfig where
  patchSize := 14
  inChannels := 3
  mlpDim := 4096
  numLayers := 27
  posHeight := 64
  posWidth := 64
  maxFrames := 4
  mergeHeight := 2
  mergeWidth := 2
  normEps := ⟨1, 5⟩
  projectorEps := ⟨1, 5⟩
  ropeTheta := 10000

/-- **The tiny vision configuration** (`fixtures/tiny/config.json`'s `vision_config`): patch 3
(27 values a patch), MLP 28, 2 blocks, a 4 × 6 table (rows ≠ columns), 4 frames, 2 × 2 merge,
ε 6e-5 and 7e-5. With `tinyConfig`: width 20, 3 heads of 12 (`Q` = 36), text 24. -/
def tinyVision : VisionConfig where
  patchSize := 3
  inChannels := 3
  mlpDim := 28
  numLayers := 2
  posHeight := 4
  posWidth := 6
  maxFrames := 4
  mergeHeight := 2
  mergeWidth := 2
  normEps := ⟨6, 5⟩
  projectorEps := ⟨7, 5⟩
  ropeTheta := 10000

/-- **The hub `vision_config` fields of a vision configuration** as one JSON object (with the
four widths `Config` holds), and the encoder and projector parameter counts under the extension
keys `k3spec_encoder_parameters`, `k3spec_divided_encoder_parameters`,
`k3spec_projector_parameters`, so a test compares them with the fixtures and with pybridge. -/
def VisionConfig.toJson (c : Config) (v : VisionConfig) : String :=
  "{" ++ Config.joinComma [
    Config.jsonField "patch_size" (toString v.patchSize),
    Config.jsonField "in_channels" (toString v.inChannels),
    Config.jsonField "vt_hidden_size" (toString c.visionHiddenDim),
    Config.jsonField "qkv_hidden_size" (toString c.visionQkvDim),
    Config.jsonField "vt_intermediate_size" (toString v.mlpDim),
    Config.jsonField "vt_num_hidden_layers" (toString v.numLayers),
    Config.jsonField "vt_num_attention_heads" (toString c.visionHeads),
    Config.jsonField "init_pos_emb_height" (toString v.posHeight),
    Config.jsonField "init_pos_emb_width" (toString v.posWidth),
    Config.jsonField "init_pos_emb_time" (toString v.maxFrames),
    Config.jsonField "merge_kernel_size" (Config.natArray [v.mergeHeight, v.mergeWidth]),
    Config.jsonField "text_hidden_size" (toString c.visionOutputDim),
    Config.jsonField "rms_norm_eps" v.normEps.toJson,
    Config.jsonField "projector_ln_eps" v.projectorEps.toJson,
    Config.jsonField "rope_theta" (toString v.ropeTheta),
    Config.jsonField "k3spec_encoder_parameters" (toString (countAll (encoderShapes c v))),
    Config.jsonField "k3spec_divided_encoder_parameters" (toString (countAll (dividedEncoderShapes c v))),
    Config.jsonField "k3spec_projector_parameters" (toString (countAll (projectorShapes c v)))] ++ "}"

/-- **The checkpoint's encoder has 401,214,464 parameters** (report Table 1: 401 M), from the
configuration's fields. -/
theorem paper_encoder_params : countAll (encoderShapes paperConfig paperVision) = 401214464 := by
  rw [countAll_encoderShapes_split]; decide

/-- **The seed's divided-attention encoder would have 571,111,424 parameters** (k3-spec §2.9 vs
§7): it does not match the report's 401 M; the checkpoint's one attention per block does. -/
theorem paper_divided_encoder_params :
    countAll (dividedEncoderShapes paperConfig paperVision) = 571111424 := by
  rw [countAll_dividedEncoderShapes_split]; decide

/-- The difference is 27 second attentions (norm, `wqkv`, `wo`) of 6,292,480 parameters each. -/
theorem paper_divided_excess :
    countAll (dividedEncoderShapes paperConfig paperVision) =
        countAll (encoderShapes paperConfig paperVision) +
          paperVision.numLayers * countAll (attentionShapes paperConfig) ∧
      countAll (attentionShapes paperConfig) = 6292480 := by
  rw [countAll_dividedEncoderShapes_split, countAll_encoderShapes_split]; decide

/-- The projector (`Linear(4096, 4096) → GELU → Linear(4096, 7168) → RMSNorm(7168)`) has
46,144,512 parameters, counted apart from the encoder's 401 M. -/
theorem paper_projector_params : countAll (projectorShapes paperConfig paperVision) = 46144512 := by
  decide

/-- The released widths: head 128, 32 rotary frequencies per axis, patch 588, merged 4096. -/
theorem paper_widths :
    headDim paperConfig = 128 ∧ ropeFreqs paperConfig = 32 ∧ patchDim paperVision = 588 ∧
      mergedDim paperConfig paperVision = 4096 := by
  decide

/-- The tiny widths, every one distinct: head 12, 3 rotary frequencies per axis, patch 27,
merged 80. -/
theorem tiny_widths :
    headDim tinyConfig = 12 ∧ ropeFreqs tinyConfig = 3 ∧ patchDim tinyVision = 27 ∧
      mergedDim tinyConfig tinyVision = 80 := by
  decide

end Vision

end KimiK3
