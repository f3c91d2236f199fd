module

public import KimiK3.KimiLinear.Layer
public import KimiK3.KimiLinear.MLA
public import KimiK3.KimiLinear.MoE
public import KimiK3.Model.Combinators

/-!
# The Kimi Linear decoder layer and whole model (k3-spec §7; transformers `KimiLinearForCausalLM`)

transformers 5.23's `KimiLinearDecoderLayer` (`models/kimi_linear/modeling_kimi_linear.py`) has
plain pre-norm residuals, no Attention Residuals (K3's AttnRes, k3-spec §2.4, is absent):
```
h = x + Mixer(RMSNorm_ε(x) ⊙ γ_in)                -- input_layernorm, self_attn (KDA or MLA)
y = h + MLP(RMSNorm_ε(h) ⊙ γ_post)                -- post_attention_layernorm, mlp or block_sparse_moe
```
with the mixer KDA (`KimiLinear.layerStep`) on the layers of `linear_attn_config.kda_layers` and
MLA (`KimiLinear.MLA.step`, or `stepDirect` when `q_lora_rank = None`) on the
`full_attn_layers`, and the MLP dense SwiGLU (`KimiLinearMLP`, `intermediate_size`) on the first
`first_k_dense_replace` layers and the MoE (`KimiLinear.MoE.forwardAuto`) after. The model
(`KimiLinearModel`, `KimiLinearForCausalLM`): `x₀ = embed_tokens[t]`, the layers in order,
`logits = (RMSNorm_ε'(x_L) ⊙ γ_final) · lm_head` (`model.norm`, ε' = `final_norm_eps`; the head
stored `[in, out]`).

As K3's model (`Model/Backbone.lean`, `Model/LanguageModel.lean`): the layer schedule is the
list of layers itself (each with its mixer and MLP), causal per layer (one state per layer),
evaluated token by token (`Model.run`); `Model.logits` is the run from the initial state.
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

/-- The widths and counts of a Kimi Linear model (k3-spec §7; transformers `KimiLinearConfig`). -/
structure Dims where
  /-- `vocab_size`. -/
  vocab : Nat
  /-- `hidden_size`. -/
  hidden : Nat
  /-- KDA heads (`linear_attn_config.num_heads`). -/
  kdaHeads : Nat
  /-- KDA key width (`linear_attn_config.head_dim`). -/
  kdaKey : Nat
  /-- KDA value width (`linear_attn_config.head_dim`). -/
  kdaValue : Nat
  /-- KDA convolution length (`short_conv_kernel_size`). -/
  kdaConv : Nat
  /-- KDA decay rank (`f_a_proj` width, `head_dim`). -/
  kdaRank : Nat
  /-- KDA output-gate rank (`g_a_proj` width, `head_dim`). -/
  gateRank : Nat
  /-- MLA heads (`num_attention_heads`). -/
  mlaHeads : Nat
  /-- MLA query latent width (`q_lora_rank`; `hidden_size` when it is `None`). -/
  queryLatent : Nat
  /-- MLA KV latent width (`kv_lora_rank`). -/
  kvLatent : Nat
  /-- MLA content key width (`qk_nope_head_dim`). -/
  contentKey : Nat
  /-- MLA shared key width (`qk_rope_head_dim`). -/
  sharedKey : Nat
  /-- MLA value width (`v_head_dim`). -/
  mlaValue : Nat
  /-- Dense MLP hidden width (`intermediate_size`). -/
  denseHidden : Nat
  /-- Routed-expert hidden width (`moe_intermediate_size`). -/
  expertHidden : Nat
  /-- Shared-MLP hidden width (`moe_intermediate_size · num_shared_experts`). -/
  sharedHidden : Nat
  /-- Routed experts (`num_experts`). -/
  numRouted : Nat
  /-- Active routed experts (`num_experts_per_token`). -/
  active : Nat

namespace Dims

/-- The KDA layer dimensions (k3-spec §7, `KimiLinear.LayerDims`). -/
@[macro_inline] def kda (m : Dims) : LayerDims :=
  ⟨⟨m.hidden, m.kdaHeads, m.kdaKey, m.kdaValue, m.kdaConv, m.kdaRank⟩, m.gateRank⟩

/-- The MLA dimensions (k3-spec §7, K3's `GatedMLA.Dims`). -/
@[macro_inline] def mla (m : Dims) : GatedMLA.Dims :=
  ⟨m.hidden, m.mlaHeads, m.queryLatent, m.kvLatent, m.contentKey, m.sharedKey, m.mlaValue⟩

end Dims

/-- The sequence mixer of a decoder layer (k3-spec §7; transformers `KimiLinearDecoderLayer.self_attn`). -/
inductive Mixer (α : Type) (m : Dims) where
  /-- A KDA layer (`KimiLinearDeltaAttention`) with the L2-norm ε of its queries and keys. -/
  | kda (params : LayerParams α m.kda) (l2Eps : α)
  /-- An MLA layer with the low-rank query (`q_lora_rank` set) and its score scale. -/
  | mla (params : GatedMLA.Params α m.mla) (scoreScale : α)
  /-- An MLA layer with the direct query (`q_lora_rank = None`, `q_proj`) and its score scale. -/
  | mlaDirect (params : GatedMLA.Params α m.mla) (hq : m.mla.queryLatentDim = m.mla.modelDim)
      (scoreScale : α)

/-- The causal state of a mixer: the KDA window and head states, or the MLA cache. -/
inductive MixerState (α : Type) (m : Dims) where
  /-- The state of a KDA layer. -/
  | kda (state : KDA.LayerState α m.kda.toLayerDims)
  /-- The cache of an MLA layer. -/
  | mla (cache : GatedMLA.Cache α m.mla)

/-- The MLP of a decoder layer (k3-spec §7): dense SwiGLU (`KimiLinearMLP`) or the MoE
(`KimiLinearMoE`) with `active ≤ numRouted`. -/
inductive Channel (α : Type) (m : Dims) where
  /-- The dense SwiGLU MLP `[hidden → denseHidden → hidden]`. -/
  | dense (expert : Expert α m.hidden m.denseHidden m.hidden)
  /-- The MoE block with its own routing. -/
  | moe (block : MoE α m.hidden m.expertHidden m.sharedHidden m.numRouted) (hActive : m.active ≤ m.numRouted)

variable {α : Type} [Scalar α] {m : Dims}

namespace Mixer

/-- The state before the first token: zero KDA state, empty MLA cache (k3-spec §2.1). -/
@[macro_inline] def initialState : Mixer α m → MixerState α m
  | .kda .. => .kda (KDA.LayerState.zero m.kda.toLayerDims)
  | .mla .. => .mla []
  | .mlaDirect .. => .mla []

/-- **One token of a mixer** (k3-spec §7): KDA → `KimiLinear.layerStep`, MLA →
`KimiLinear.MLA.step` or `stepDirect`. A state of the other kind (never produced from
`initialState`) is read as the initial state. -/
@[macro_inline] def step (mixer : Mixer α m) (s : MixerState α m) (x : Tensor α [m.hidden]) :
    MixerState α m × Tensor α [m.hidden] :=
  match mixer with
  | .kda p l2Eps =>
    let st := match s with
      | .kda st => st
      | .mla _ => KDA.LayerState.zero m.kda.toLayerDims
    let r := layerStep p l2Eps st x
    (.kda r.1, r.2)
  | .mla p scoreScale =>
    let cache := match s with
      | .kda _ => []
      | .mla cache => cache
    let r := MLA.step p scoreScale cache x
    (.mla r.1, r.2)
  | .mlaDirect p hq scoreScale =>
    let cache := match s with
      | .kda _ => []
      | .mla cache => cache
    let r := MLA.stepDirect p hq scoreScale cache x
    (.mla r.1, r.2)

end Mixer

/-- The MLP's output (k3-spec §7): `KimiLinear.swigluForward` (dense) or
`KimiLinear.MoE.forwardAuto` (MoE, top-`active` routing). -/
@[macro_inline] def Channel.forward (channel : Channel α m) (x : Tensor α [m.hidden]) : Tensor α [m.hidden] :=
  match channel with
  | .dense expert => swigluForward expert x
  | .moe block hActive => MoE.forwardAuto (k := m.active) block hActive x

/-- **A Kimi Linear decoder layer** (k3-spec §7; transformers `KimiLinearDecoderLayer`): mixer,
MLP, the gains of the two pre-norms (`input_layernorm`, `post_attention_layernorm`) and their
ε (`rms_norm_eps`). -/
structure DecoderLayer (α : Type) (m : Dims) where
  /-- The sequence mixer (`self_attn`). -/
  mixer : Mixer α m
  /-- The MLP (`mlp` or `block_sparse_moe`). -/
  channel : Channel α m
  /-- Gain of the mixer's pre-norm (`input_layernorm.weight`). -/
  inputNormScale : Tensor α [m.hidden]
  /-- Gain of the MLP's pre-norm (`post_attention_layernorm.weight`). -/
  postNormScale : Tensor α [m.hidden]
  /-- The ε of both pre-norms (`rms_norm_eps`). -/
  normEps : α

namespace DecoderLayer

/-- The residual stream after the mixer, `h = x + Mixer(RMSNorm_ε(x) ⊙ γ_in)` (k3-spec §7), with
the mixer's new state. -/
@[macro_inline] def mix (layer : DecoderLayer α m) (s : MixerState α m) (x : Tensor α [m.hidden]) :
    MixerState α m × Tensor α [m.hidden] :=
  let r := layer.mixer.step s (Seq.memoFn (Seq.rmsNorm layer.normEps x layer.inputNormScale))
  (r.1, Seq.memoFn (fun i => x i + r.2 i))

/-- The residual stream after the MLP, `y = h + MLP(RMSNorm_ε(h) ⊙ γ_post)` (k3-spec §7). -/
@[macro_inline] def mlp (layer : DecoderLayer α m) (h : Tensor α [m.hidden]) : Tensor α [m.hidden] :=
  let c := Seq.memoFn (layer.channel.forward (Seq.memoFn (Seq.rmsNorm layer.normEps h layer.postNormScale)))
  fun i => h i + c i

/-- **One token of the decoder layer** (k3-spec §7; transformers
`KimiLinearDecoderLayer.forward`): `mix`, then `mlp`. -/
@[macro_inline] def step (layer : DecoderLayer α m) (s : MixerState α m) (x : Tensor α [m.hidden]) :
    MixerState α m × Tensor α [m.hidden] :=
  let r := layer.mix s x
  (r.1, layer.mlp r.2)

/-- **The decoder layer over a sequence** from its mixer's initial state (k3-spec §2.1). -/
@[macro_inline] def forward (layer : DecoderLayer α m) (xs : List (Tensor α [m.hidden])) :
    List (Tensor α [m.hidden]) :=
  (CausalScan.run layer.step layer.mixer.initialState xs).2

/-- The step's output is the input plus the mixer's and the MLP's residuals. -/
theorem step_snd (layer : DecoderLayer α m) (s : MixerState α m) (x : Tensor α [m.hidden]) (i : Fin m.hidden) :
    (layer.step s x).2 i = x i + (layer.mixer.step s (Seq.rmsNorm layer.normEps x layer.inputNormScale)).2 i +
      layer.channel.forward (Seq.rmsNorm layer.normEps (layer.mix s x).2 layer.postNormScale) i := by
  simp only [step, mlp, mix, Seq.memoFn_eq]

/-- One output per token. -/
theorem forward_length (layer : DecoderLayer α m) (xs : List (Tensor α [m.hidden])) :
    (layer.forward xs).length = xs.length :=
  CausalScan.outputs_length _ _ _

end DecoderLayer

/-- **The Kimi Linear language model** (k3-spec §7; transformers `KimiLinearForCausalLM`):
embedding table `[vocab, d]` (`embed_tokens`), the decoder layers in order, the final RMSNorm
gain (`model.norm.weight`) and its ε (`final_norm_eps`), the head `[d, vocab]` (`lm_head`,
`[in, out]`). -/
structure Model (α : Type) (m : Dims) where
  /-- Token embedding table `[vocab, d]`. -/
  embedding : Tensor α [m.vocab, m.hidden]
  /-- The decoder layers, first layer first. -/
  layers : List (DecoderLayer α m)
  /-- Gain of the final RMSNorm. -/
  finalNormScale : Tensor α [m.hidden]
  /-- The vocabulary head `[d, vocab]`. -/
  head : Tensor α [m.hidden, m.vocab]
  /-- The ε of the final RMSNorm (`final_norm_eps`). -/
  normEps : α

namespace Model

/-- The model state: one mixer state per layer, in layer order. -/
abbrev State (α : Type) (m : Dims) := List (MixerState α m)

/-- The state before the first token: every layer's initial mixer state. -/
@[macro_inline] def initialState (model : Model α m) : State α m :=
  ModelList.map (fun layer => layer.mixer.initialState) model.layers

/-- The final head `logits = (RMSNorm_ε'(x) ⊙ γ_final) · head` (k3-spec §7; `model.norm`,
`lm_head`). -/
@[macro_inline] def readout (model : Model α m) (x : Tensor α [m.hidden]) : Tensor α [m.vocab] :=
  let h := Seq.memoFn (Seq.rmsNorm model.normEps x model.finalNormScale)
  Seq.memoFn (Seq.vecMatMul h model.head)

/-- One token's residual stream through every layer (each with its own mixer state); the final
stream and the new states. -/
@[macro_inline] def layersToken (model : Model α m) (states : State α m) (x : Tensor α [m.hidden]) :
    Tensor α [m.hidden] × State α m :=
  ModelList.scanLayers (fun layer s x => layer.step s x) model.layers states x

/-- **One causal step on a token id** (k3-spec §7; transformers `KimiLinearForCausalLM.forward`
at one token with its cache): embed, every layer, the head. -/
@[macro_inline] def step (model : Model α m) (states : State α m) (token : Fin m.vocab) :
    State α m × Tensor α [m.vocab] :=
  let r := model.layersToken states (model.embedding token)
  (r.2, model.readout r.1)

/-- **Token-by-token evaluation** of token ids from state `s` (k3-spec §3 `LanguageModel.run`). -/
@[macro_inline] def run (model : Model α m) (s : State α m) (tokens : List (Fin m.vocab)) :
    State α m × List (Tensor α [m.vocab]) :=
  CausalScan.run model.step s tokens

/-- **The logits of a prompt** (k3-spec §3 `LanguageModel.logits`; transformers' prefill
logits): the run from the initial state. -/
@[macro_inline] def logits (model : Model α m) (tokens : List (Fin m.vocab)) : List (Tensor α [m.vocab]) :=
  (model.run model.initialState tokens).2

/-- One logit vector per token. -/
theorem logits_length (model : Model α m) (tokens : List (Fin m.vocab)) :
    (model.logits tokens).length = tokens.length :=
  CausalScan.outputs_length _ _ _

end Model

end KimiLinear

end KimiK3
