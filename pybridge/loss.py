"""The masked next-token loss and its gradient (report §§3.3–3.4; k3-spec §2.11), as the Lean
definitions state them (`lean/KimiK3/Training/Pretraining.lean`):

* `next_token_loss`: `nextTokenLoss` — `(Σ_{p supervised} −log softmax(z_p)_{y_p}) / |S|`, the
  mean token loss over the supervised positions (`mask = True`); masked positions feed the
  context but drop their term.
* `next_token_gradient`: `nextTokenGradient` — `(softmax(z_p)_v − [v = y_p]) / |S|` at supervised
  positions, exactly `0` at masked ones; the closed form beside torch autograd of
  `next_token_loss` (Lean proves it is the derivative: `nextTokenLoss_add_eq`,
  `tokenRemainder_smul_le`).

Conventions. No shift here, as in Lean: `logits_btv[b, p]` is scored against `targets_bt[b, p]`
(the caller has already shifted; `model_next_token_loss` does it for the model: the logits at
position t predict token t + 1). A batch is one set of `B·T` positions: the mean is over every
supervised position of the batch (Lean's `T` is `B·T`), not a mean of per-row means.

All masked (`|S| = 0`): Lean's loss is `0 / 0` (NaN at `Float`, `0` by the field convention at
`Rat`), so there is no loss to match; both functions refuse with an `InputError` naming
`mask_bt`. (Lean's gradient formula gives `0` there without dividing; a zero gradient of an
undefined loss is not returned silently.)
"""

from __future__ import annotations

import torch

from pybridge.errors import InputError
from pybridge.layers import compute_dtype


def check_inputs(logits_btv: torch.Tensor, targets_bt: torch.Tensor, mask_bt: torch.Tensor) -> int:
    """Shapes, dtypes and ranges; returns `|S|`, the number of supervised positions."""
    for name, t in (("logits_btv", logits_btv), ("targets_bt", targets_bt), ("mask_bt", mask_bt)):
        if not isinstance(t, torch.Tensor):
            raise InputError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if logits_btv.dim() != 3 or logits_btv.shape[-1] == 0:
        raise InputError(f"logits_btv must have shape [batch, positions, vocab >= 1], got {tuple(logits_btv.shape)}")
    if not logits_btv.is_floating_point():
        raise InputError(f"logits_btv must be floating point, got {logits_btv.dtype}")
    bt = tuple(logits_btv.shape[:2])
    if tuple(targets_bt.shape) != bt:
        raise InputError(f"targets_bt must have shape {bt} (logits_btv's [batch, positions]), got {tuple(targets_bt.shape)}")
    if tuple(mask_bt.shape) != bt:
        raise InputError(f"mask_bt must have shape {bt} (logits_btv's [batch, positions]), got {tuple(mask_bt.shape)}")
    if targets_bt.is_floating_point() or targets_bt.is_complex() or targets_bt.dtype == torch.bool:
        raise InputError(f"targets_bt must be an integer tensor, got {targets_bt.dtype}")
    if mask_bt.dtype != torch.bool:
        raise InputError(f"mask_bt must be a bool tensor (True: supervised), got {mask_bt.dtype}")
    vocab = logits_btv.shape[-1]
    if targets_bt.numel() and (int(targets_bt.min()) < 0 or int(targets_bt.max()) >= vocab):
        raise InputError(f"targets_bt must lie in [0, {vocab}) (logits_btv's vocab), "
                         f"got min {int(targets_bt.min())} max {int(targets_bt.max())}")
    count = int(mask_bt.sum())
    if count == 0:
        raise InputError("mask_bt supervises no position: the mean over |S| = 0 positions is undefined "
                         "(Lean's nextTokenLoss is 0 / 0 there)")
    return count


def next_token_loss(logits_btv: torch.Tensor, targets_bt: torch.Tensor, mask_bt: torch.Tensor) -> torch.Tensor:
    """Lean's `nextTokenLoss`: the mean of `log Σ_k exp z_k − z_y` (`tokenLoss_eq`) over the
    supervised positions; a 0-d tensor, differentiable in `logits_btv`. Computed in the logits'
    dtype (float32 for bfloat16 logits: `layers.compute_dtype`)."""
    count = check_inputs(logits_btv, targets_bt, mask_bt)
    z_btv = logits_btv.to(compute_dtype(logits_btv.dtype))
    token_bt = torch.logsumexp(z_btv, dim=-1) - z_btv.gather(-1, targets_bt.long().unsqueeze(-1)).squeeze(-1)
    return torch.where(mask_bt, token_bt, torch.zeros_like(token_bt)).sum() / count


def next_token_gradient(logits_btv: torch.Tensor, targets_bt: torch.Tensor, mask_bt: torch.Tensor) -> torch.Tensor:
    """Lean's `nextTokenGradient`, the plain closed form: `(softmax(z_p) − onehot(y_p)) / |S|` at
    supervised positions, exactly `0` at masked ones; shape and dtype of `logits_btv`."""
    count = check_inputs(logits_btv, targets_bt, mask_bt)
    z_btv = logits_btv.detach().to(compute_dtype(logits_btv.dtype))
    onehot_btv = torch.nn.functional.one_hot(targets_bt.long(), z_btv.shape[-1]).to(z_btv.dtype)
    g_btv = (torch.softmax(z_btv, dim=-1) - onehot_btv) / count
    return torch.where(mask_bt.unsqueeze(-1), g_btv, torch.zeros_like(g_btv)).to(logits_btv.dtype)


def model_next_token_loss(model: torch.nn.Module, input_ids_bt: torch.Tensor,
                          mask_bt: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The pretraining loss through a K3 model (`KimiK3ForCausalLM`): one uncached forward on
    `input_ids_bt` `[B, T]` (T ≥ 2), the logits at positions `0 … T−2` scored against the tokens
    `1 … T−1`. `mask_bt` `[B, T − 1]` (default: all True) supervises predicting token t + 1 from
    position t. Returns `(loss, logits_btv)` (the full `[B, T, V]` logits, for autograd)."""
    if input_ids_bt.dim() != 2 or input_ids_bt.shape[1] < 2:
        raise InputError(f"input_ids_bt must have shape [batch, tokens >= 2] (a next token to predict), "
                         f"got {tuple(input_ids_bt.shape)}")
    b, t = input_ids_bt.shape
    if mask_bt is None:
        mask_bt = torch.ones(b, t - 1, dtype=torch.bool, device=input_ids_bt.device)
    elif tuple(mask_bt.shape) != (b, t - 1):
        raise InputError(f"mask_bt must have shape {(b, t - 1)} (one entry per predicted token), got {tuple(mask_bt.shape)}")
    logits_btv, _ = model(input_ids_bt)
    return next_token_loss(logits_btv[:, :-1], input_ids_bt[:, 1:], mask_bt), logits_btv
