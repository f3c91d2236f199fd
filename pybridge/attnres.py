"""Block Attention Residuals (report §2.2, spec §2.4-2.5). There is no ordinary residual.

Per token, the depth state holds the sources a layer may read:
    blocks  = [embedding, completed block sums...]   (the embedding is always source 0)
    partial = sum of seqOut + chanOut of the layers of the unfinished block (None when empty)
Retrieval with a learned query w (independent of the input):
    score_i = w . RMSNorm(v_i)  (unit scale);   h = sum_i softmax(score)_i v_i  (UN-normalised v_i)
Decisions where the spec is silent (they follow the hub's `_forward_attn_residual`):
    * an empty partial block is NOT a source;
    * the channel-mixer retrieval sees the partial sum with seqOut already added (P + seqOut),
      not seqOut as an extra source;
    * each layer commits P <- (P + seqOut) + chanOut once; after `block_size` layers P is
      appended to `blocks` and the partial becomes empty;
    * hub checkpoints store w as two tensors: w = (*_res_norm.weight) * (*_res_proj.weight[0]);
      the score RMSNorm's epsilon is `attn_res_norm_eps` (default `rms_norm_eps`).
"""

from dataclasses import dataclass, field

import torch

from pybridge.layers import compute_dtype, rms_norm


def retrieve(sources: list[torch.Tensor], query_d: torch.Tensor, eps: float) -> torch.Tensor:
    """sources: S tensors [..., D]; returns softmax-over-sources mix [..., D] (computed in
    `compute_dtype`, stored in the sources' dtype)."""
    stored = sources[0].dtype
    v_snd = torch.stack(sources, dim=0).to(compute_dtype(stored))
    scores_sn = (rms_norm(v_snd, eps) * query_d.to(v_snd.dtype)).sum(-1)
    weights_sn = torch.softmax(scores_sn, dim=0)  # max-subtraction inside softmax is exact over R
    return (weights_sn[..., None] * v_snd).sum(0).to(stored)


@dataclass
class DepthState:
    blocks: list[torch.Tensor]
    partial: torch.Tensor | None = None
    count: int = 0
    block_size: int = 12
    after_seq: torch.Tensor | None = field(default=None, repr=False)

    def sources(self) -> list[torch.Tensor]:
        return self.blocks + ([] if self.partial is None else [self.partial])

    def add_sequence_output(self, seq_out: torch.Tensor) -> list[torch.Tensor]:
        """Sources for the channel-mixer retrieval: partial sum P + seqOut."""
        self.after_seq = seq_out if self.partial is None else self.partial + seq_out
        return self.blocks + [self.after_seq]

    def finish_layer(self, chan_out: torch.Tensor) -> None:
        """Commit (P + seqOut) + chanOut; fold the block once it has `block_size` layers."""
        self.partial, self.after_seq = self.after_seq + chan_out, None
        self.count += 1
        if self.count == self.block_size:
            self.blocks.append(self.partial)
            self.partial, self.count = None, 0
