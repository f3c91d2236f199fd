"""The Kimi K3 text model: KDA/MLA hybrid, Block AttnRes, Stable LatentMoE, greedy decoding.

State-dict names equal the hub's text-only checkpoint names (`model.layers.N...`,
`lm_head.weight`), so a hub checkpoint loads without renaming. `forward_embeds` takes input
rows instead of ids: `pybridge.multimodal` splices MoonViT's visual tokens in there.

One layer at one token (spec §2.5):
    seq_in  = input_layernorm(retrieve(depth, w_seq))
    seq_out = KDA or MLA (with its causal state)
    chan_in = post_attention_layernorm(retrieve(depth + seq_out, w_chan))
    chan_out= dense SiTU FFN or LatentMoE
    depth.commit(seq_out + chan_out)
logits = lm_head(norm(retrieve(depth, w_final))).
"""

from dataclasses import dataclass

import torch
from torch import nn

from pybridge.attnres import DepthState, retrieve
from pybridge.config import K3Config
from pybridge.errors import InputError
from pybridge.kda import KDAState, KimiDeltaAttention
from pybridge.layers import RMSNorm, SituMLP, compute_dtype, lin
from pybridge.mla import GatedMLA, MLACache
from pybridge.moe import LatentMoE


@dataclass
class K3Cache:
    """Per-layer causal state (KDAState or MLACache) and the number of tokens seen."""

    layers: list[KDAState | MLACache]
    length: int = 0


class DecoderLayer(nn.Module):
    def __init__(self, cfg: K3Config, layer_idx: int) -> None:
        super().__init__()
        D, eps = cfg.hidden_size, cfg.rms_norm_eps  # the pre-norms
        self.is_mla = cfg.is_mla(layer_idx)
        self.self_attn = GatedMLA(cfg) if self.is_mla else KimiDeltaAttention(cfg)
        if cfg.is_moe(layer_idx):
            self.block_sparse_moe = LatentMoE(cfg)
        else:
            self.mlp = SituMLP(D, cfg.intermediate_size, cfg.situ_gate_cap, cfg.situ_up_cap)
        self.input_layernorm = RMSNorm(D, eps)
        self.post_attention_layernorm = RMSNorm(D, eps)
        self.self_attention_res_norm = RMSNorm(D, eps)
        self.self_attention_res_proj = nn.Linear(D, 1, bias=False)
        self.mlp_res_norm = RMSNorm(D, eps)
        self.mlp_res_proj = nn.Linear(D, 1, bias=False)
        self.retrieval_eps = cfg.attn_res_norm_eps  # the *_res_norm modules only carry weights

    def channel(self, x_btd: torch.Tensor) -> torch.Tensor:
        return self.block_sparse_moe(x_btd) if hasattr(self, "block_sparse_moe") else self.mlp(x_btd)

    def forward(self, depth: DepthState, state: KDAState | MLACache) -> KDAState | MLACache:
        cd = compute_dtype(self.input_layernorm.weight.dtype)
        w_seq = self.self_attention_res_norm.weight.to(cd) * self.self_attention_res_proj.weight[0].to(cd)
        seq_in = self.input_layernorm(retrieve(depth.sources(), w_seq, self.retrieval_eps))
        seq_out, state = self.self_attn(seq_in, state)
        w_chan = self.mlp_res_norm.weight.to(cd) * self.mlp_res_proj.weight[0].to(cd)
        chan_in = self.post_attention_layernorm(retrieve(depth.add_sequence_output(seq_out), w_chan, self.retrieval_eps))
        depth.finish_layer(self.channel(chan_in))
        return state


class K3TextModel(nn.Module):
    def __init__(self, cfg: K3Config) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.final_norm_eps)
        self.output_attn_res_norm = RMSNorm(cfg.hidden_size, cfg.attn_res_norm_eps)
        self.output_attn_res_proj = nn.Linear(cfg.hidden_size, 1, bias=False)


class KimiK3ForCausalLM(nn.Module):
    def __init__(self, cfg: K3Config) -> None:
        super().__init__()
        self.config = cfg
        self.model = K3TextModel(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def set_kda_impl(self, impl: str) -> None:
        """ "auto" | "chunk" | "recurrent" | "fla" for every KDA layer."""
        for layer in self.model.layers:
            if not layer.is_mla:
                layer.self_attn.impl = impl

    def new_cache(self, batch: int) -> K3Cache:
        like = self.lm_head.weight
        return K3Cache([layer.self_attn.initial_state(batch, like) for layer in self.model.layers])

    def forward(self, input_ids_bt: torch.Tensor, cache: K3Cache | None = None) -> tuple[torch.Tensor, K3Cache]:
        """Logits [B, T, vocab] for the new tokens, and the cache advanced by T tokens."""
        if input_ids_bt.dim() != 2 or input_ids_bt.shape[1] == 0:
            raise InputError(
                f"input ids must have shape [batch, tokens] with tokens >= 1, got {tuple(input_ids_bt.shape)}"
            )
        vocab = self.config.vocab_size
        if input_ids_bt.min() < 0 or input_ids_bt.max() >= vocab:
            raise InputError(
                f"token ids must lie in [0, {vocab}), got min {int(input_ids_bt.min())} max {int(input_ids_bt.max())}"
            )
        return self.forward_embeds(self.model.embed_tokens(input_ids_bt), cache)

    def forward_embeds(self, embeds_btd: torch.Tensor, cache: K3Cache | None = None) -> tuple[torch.Tensor, K3Cache]:
        """`forward` from the input rows `[B, T, D]` (token embeddings, or visual tokens spliced in)."""
        cache = cache if cache is not None else self.new_cache(embeds_btd.shape[0])
        m = self.model
        depth = DepthState([embeds_btd], block_size=self.config.attn_res_block_size)
        states = [layer(depth, state) for layer, state in zip(m.layers, cache.layers)]
        cd = compute_dtype(m.norm.weight.dtype)
        w_final = m.output_attn_res_norm.weight.to(cd) * m.output_attn_res_proj.weight[0].to(cd)
        h = m.norm(retrieve(depth.sources(), w_final, self.config.attn_res_norm_eps))
        return lin(self.lm_head, h.to(cd)).to(h.dtype), K3Cache(states, cache.length + embeds_btd.shape[1])

    @torch.no_grad()
    def generate(self, prompt_ids_bt: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        """Greedy decoding: one prefill over the prompt, then one cached step per token.
        Returns the new token ids [B, max_new_tokens] (argmax ties -> lowest id)."""
        if max_new_tokens < 0:
            raise InputError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        out = []
        logits, cache = self(prompt_ids_bt)
        for _ in range(max_new_tokens):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            out.append(nxt)
            if len(out) < max_new_tokens:
                logits, cache = self(nxt, cache)
        return torch.cat(out, dim=1) if out else prompt_ids_bt.new_zeros(prompt_ids_bt.shape[0], 0)
