module

public import KimiK3.KimiLinear.Config
public import KimiK3.KimiLinear.Decoder

/-!
# A Kimi Linear model from its configuration (k3-spec §7; transformers `KimiLinearModel.__init__`)

transformers 5.23 builds `KimiLinearModel.layers` as `KimiLinearDecoderLayer(config, i)` for
`i = 0, …, num_hidden_layers − 1` (`models/kimi_linear/modeling_kimi_linear.py`): layer `i` gets
`KimiLinearAttention` (MLA) when `config.layer_types[i] == "full_attention"`, otherwise
`KimiLinearDeltaAttention` (KDA), and `KimiLinearMoE` when `config.mlp_layer_types[i] == "sparse"`,
otherwise `KimiLinearMLP`. This file does the same from a `KimiLinear.Config`
(`KimiLinear/Config.lean`):

* `Config.dims` — the widths of `Decoder.lean`'s `Dims` (KDA key = value = decay rank = gate rank
  = `lac.head_dim`; the MLA query latent `q_lora_rank`, or `hidden_size` with the direct query;
  the shared MLP `moe_intermediate_size · num_shared_experts`);
* `LayerWeights` — every layer's tensors by layer index (what a checkpoint holds);
* `Config.mixerAt`, `Config.channelAt`, `Config.decoderLayer`, `Config.decoderLayers`,
  `Config.model` — the layers in order, each with the mixer and MLP of the schedule and the
  constants transformers hard-codes (L2 ε `1e-6`, score scale `(qk_nope + qk_rope)^{-1/2}`,
  `rms_norm_eps` for both pre-norms and the final norm); MLA takes the low-rank query iff
  `q_lora_rank` is given.

Proved: `decoderLayers_length`, **`decoderLayers_mixer_kinds`** and
**`decoderLayers_channel_kinds`** (the built layers follow `Config.attentionKinds` and
`Config.channelKinds`, so the `decide` facts of `Config.lean` — 20 KDA, 7 MLA, one dense layer
for Kimi-Linear-48B-A3B — are facts about the model), `mixerAt_direct` (no `q_lora_rank`: every
MLA layer reads the direct query), `kimiLinear48B_dims`. Every theorem about `KimiLinear.Model`
(`Model.run_eq_prefill`, `Prefill.lean`) applies to `Config.model`.
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

/-- The kind of a mixer (`.mla` for both query paths). -/
def Mixer.kind {α : Type} {m : Dims} : Mixer α m → AttentionKind
  | .kda .. => .kda
  | .mla .. => .mla
  | .mlaDirect .. => .mla

/-- The kind of an MLP. -/
def Channel.kind {α : Type} {m : Dims} : Channel α m → ChannelKind
  | .dense .. => .dense
  | .moe .. => .moe

/-- Whether a mixer is MLA with the direct query (`q_lora_rank = None`). -/
def Mixer.isDirectQuery {α : Type} {m : Dims} : Mixer α m → Bool
  | .mlaDirect .. => true
  | _ => false

namespace Config

/-- **The model widths of a configuration** (k3-spec §7; transformers `KimiLinearConfig` as read by
the modules): KDA key, value, decay rank and output-gate rank all `lac.head_dim`
(`KimiLinearDeltaAttention`, `KimiLinearForgetGate`: `f_a_proj`/`g_a_proj` of width `head_dim`);
MLA query latent `q_lora_rank`, or `hidden_size` when it is absent (`MLA.stepDirect`); shared MLP
`moe_intermediate_size · num_shared_experts` (`KimiLinearMoE.shared_experts`). -/
def dims (c : Config) : Dims where
  vocab := c.vocabSize
  hidden := c.hiddenSize
  kdaHeads := c.kdaNumHeads
  kdaKey := c.kdaHeadDim
  kdaValue := c.kdaHeadDim
  kdaConv := c.kdaConvSize
  kdaRank := c.kdaHeadDim
  gateRank := c.kdaHeadDim
  mlaHeads := c.numAttentionHeads
  queryLatent := c.qLoraRank.getD c.hiddenSize
  kvLatent := c.kvLoraRank
  contentKey := c.qkNopeHeadDim
  sharedKey := c.qkRopeHeadDim
  mlaValue := c.vHeadDim
  denseHidden := c.intermediateSize
  expertHidden := c.moeIntermediateSize
  sharedHidden := c.moeIntermediateSize * c.numSharedExperts
  numRouted := c.numExperts
  active := c.numExpertsPerToken

/-- Without `q_lora_rank` the MLA query latent is the model width (the direct query's condition). -/
theorem dims_queryLatent_eq (c : Config) (h : c.qLoraRank = none) :
    c.dims.mla.queryLatentDim = c.dims.mla.modelDim := by
  simp [dims, Dims.mla, h]

end Config

/-- **Every layer's tensors, by 0-based layer index** (k3-spec §7; the checkpoint's
`model.layers.{i}.*`): the KDA layer (`self_attn` of a KDA layer, with its `rms_norm_eps` output
ε and query scale), the MLA layer (`self_attn` of an MLA layer; with the direct query,
`queryContentUp`/`querySharedUp` hold `q_proj`), the dense MLP (`mlp`), the MoE (`mlp` of a sparse
layer, with `ρ`), and the two pre-norm gains. Only the entries the schedule selects are read. -/
structure LayerWeights (α : Type) (c : Config) where
  /-- The KDA layer of layer `i`. -/
  kda : Nat → LayerParams α c.dims.kda
  /-- The MLA layer of layer `i`. -/
  mla : Nat → GatedMLA.Params α c.dims.mla
  /-- The dense SwiGLU MLP of layer `i` (`gate_proj`, `up_proj`, `down_proj`). -/
  dense : Nat → Expert α c.dims.hidden c.dims.denseHidden c.dims.hidden
  /-- The MoE of layer `i`. -/
  moe : Nat → MoE α c.dims.hidden c.dims.expertHidden c.dims.sharedHidden c.dims.numRouted
  /-- `input_layernorm.weight` of layer `i`. -/
  inputNormScale : Nat → Tensor α [c.dims.hidden]
  /-- `post_attention_layernorm.weight` of layer `i`. -/
  postNormScale : Nat → Tensor α [c.dims.hidden]

namespace Config

variable {α : Type} [Scalar α]

/-- The L2-normalization ε of KDA's queries and keys, `1e-6` (transformers `l2norm`, hard-coded). -/
def kdaL2Eps : Decimal := ⟨1, 6⟩

/-- **The mixer of layer `i`** (transformers `KimiLinearDecoderLayer.self_attn`): KDA with the L2
ε `1e-6`, or MLA with the score scale `(qk_nope_head_dim + qk_rope_head_dim)^{-1/2}`
(`KimiLinearAttention.scaling`), low-rank query iff `q_lora_rank` is given. -/
noncomputable def mixerAt (c : Config) (w : LayerWeights α c) (i : Nat) : Mixer α c.dims :=
  match c.attentionKindAt i with
  | .kda => .kda (w.kda i) kdaL2Eps.toScalar
  | .mla =>
    match h : c.qLoraRank with
    | some _ => .mla (w.mla i) (MLA.defaultScoreScale c.dims.mla)
    | none => .mlaDirect (w.mla i) (c.dims_queryLatent_eq h) (MLA.defaultScoreScale c.dims.mla)

/-- **The MLP of layer `i`** (transformers `KimiLinearDecoderLayer.mlp`): dense SwiGLU or the MoE
with top-`num_experts_per_token` routing. -/
noncomputable def channelAt (c : Config) (hwf : c.WF) (w : LayerWeights α c) (i : Nat) : Channel α c.dims :=
  match c.channelKindAt i with
  | .dense => .dense (w.dense i)
  | .moe => .moe (w.moe i) hwf.active_le

/-- **Decoder layer `i`** (transformers `KimiLinearDecoderLayer(config, i)`): its mixer and MLP, its
two pre-norm gains, ε `rms_norm_eps`. -/
noncomputable def decoderLayer (c : Config) (hwf : c.WF) (w : LayerWeights α c) (i : Nat) :
    DecoderLayer α c.dims where
  mixer := c.mixerAt w i
  channel := c.channelAt hwf w i
  inputNormScale := w.inputNormScale i
  postNormScale := w.postNormScale i
  normEps := c.rmsNormEps.toScalar

/-- **The decoder layers `0, …, L−1`, in order** (transformers `KimiLinearModel.layers`). -/
noncomputable def decoderLayers (c : Config) (hwf : c.WF) (w : LayerWeights α c) : List (DecoderLayer α c.dims) :=
  perLayer (c.decoderLayer hwf w) c.numLayers 0

/-- **The model of a configuration** (transformers `KimiLinearForCausalLM`): embedding, the
configured decoder layers, final norm gain and head; the final norm's ε is `rms_norm_eps`. -/
noncomputable def model (c : Config) (hwf : c.WF) (w : LayerWeights α c)
    (embedding : Tensor α [c.dims.vocab, c.dims.hidden]) (finalNormScale : Tensor α [c.dims.hidden])
    (head : Tensor α [c.dims.hidden, c.dims.vocab]) : Model α c.dims where
  embedding := embedding
  layers := c.decoderLayers hwf w
  finalNormScale := finalNormScale
  head := head
  normEps := c.rmsNormEps.toScalar

/-- `perLayer` mapped is `perLayer` of the composition. -/
theorem map_perLayer {β γ : Type} (g : β → γ) (f : Nat → β) (n i : Nat) :
    (perLayer f n i).map g = perLayer (fun j => g (f j)) n i := by
  induction n generalizing i with
  | zero => rfl
  | succ n ih => simp [perLayer, ih]

/-- `perLayer` has `n` entries. -/
theorem perLayer_length {β : Type} (f : Nat → β) (n i : Nat) : (perLayer f n i).length = n := by
  induction n generalizing i with
  | zero => rfl
  | succ n ih => simp [perLayer, ih]

/-- The mixer of layer `i` has the kind the schedule gives it. -/
theorem mixerAt_kind (c : Config) (w : LayerWeights α c) (i : Nat) :
    (c.mixerAt w i).kind = c.attentionKindAt i := by
  unfold mixerAt
  split
  · rename_i h; rw [h]; rfl
  · rename_i h
    split <;> (rw [h]; rfl)

omit [Scalar α] in
/-- The MLP of layer `i` has the kind the schedule gives it. -/
theorem channelAt_kind (c : Config) (hwf : c.WF) (w : LayerWeights α c) (i : Nat) :
    (c.channelAt hwf w i).kind = c.channelKindAt i := by
  unfold channelAt
  split <;> (rename_i h; rw [h]; rfl)

/-- One decoder layer per configured layer. -/
theorem decoderLayers_length (c : Config) (hwf : c.WF) (w : LayerWeights α c) :
    (c.decoderLayers hwf w).length = c.numLayers :=
  perLayer_length _ _ _

/-- **The built layers' mixers follow the schedule** (`layer_types`). -/
theorem decoderLayers_mixer_kinds (c : Config) (hwf : c.WF) (w : LayerWeights α c) :
    (c.decoderLayers hwf w).map (fun l => l.mixer.kind) = c.attentionKinds := by
  simp only [decoderLayers, attentionKinds, map_perLayer]
  congr 1
  funext i
  exact mixerAt_kind c w i

/-- **The built layers' MLPs follow the schedule** (`mlp_layer_types`). -/
theorem decoderLayers_channel_kinds (c : Config) (hwf : c.WF) (w : LayerWeights α c) :
    (c.decoderLayers hwf w).map (fun l => l.channel.kind) = c.channelKinds := by
  simp only [decoderLayers, channelKinds, map_perLayer]
  congr 1
  funext i
  exact channelAt_kind c hwf w i

/-- **Without `q_lora_rank` every MLA layer reads the direct query** (transformers' `q_proj`). -/
theorem mixerAt_direct (c : Config) (w : LayerWeights α c) (i : Nat) (h : c.qLoraRank = none)
    (hi : c.attentionKindAt i = .mla) : (c.mixerAt w i).isDirectQuery = true := by
  unfold mixerAt
  split
  · rename_i h'; rw [hi] at h'; cases h'
  · split
    · rename_i r hr; rw [h] at hr; cases hr
    · rfl

end Config

/-- The widths of Kimi-Linear-48B-A3B: MLA query latent = model width 2304 (direct query), shared
MLP 1024, KDA key = value = decay rank = gate rank = 128. -/
theorem kimiLinear48B_dims :
    kimiLinear48B.dims.queryLatent = 2304 ∧ kimiLinear48B.dims.sharedHidden = 1024 ∧
      kimiLinear48B.dims.kda.gateRank = 128 ∧ kimiLinear48B.dims.kda.decayRank = 128 := by
  decide

end KimiLinear

end KimiK3
