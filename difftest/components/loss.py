"""The masked next-token loss and its gradient (`pybridge.loss`; issue 20 item 2; no Lean leg here:
`tests/test_pretraining_lean.py` ties `pybridge.loss` to the Lean `nextTokenLoss` and
`nextTokenGradient` at `Float`).

A case is logits `[B, T, V]`, targets and a mask (stored as floats: 1 = supervised). Legs:
* torch: `pybridge.loss.next_token_loss` (its value, `loss`) and torch autograd of it (`grad`);
* torch closed form: `pybridge.loss.next_token_gradient` (`grad`);
* numpy: difftest's own transcription of the Lean definitions: the max-shifted log-sum-exp minus
  the target logit, summed over the supervised positions and divided by their count; the gradient
  `(exp(z − lse) − onehot) / |S|` at supervised positions, `0` at masked ones.
Float64 only (`lowp_checks` is empty: the loss is evaluated on the model's float32 logits, not a
stage of the stored model). Error model: the logits and the output stored, a reduction over the
vocabulary and one over the positions, the softmax's amplification 2 (`softmaxVec_perturb_le`).
A gradient with the mask forgotten fails every kind against numpy and autograd.
"""

from __future__ import annotations

import numpy as np
import torch

from difftest.case import Case
from difftest.components.base import Component, ErrorModel, t64, to_np
from pybridge import loss as pyloss


def decoded(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(logits, targets clipped into [0, V), mask) of a case (the shrinker may move values)."""
    z = np.asarray(case.tensors["logits"], dtype=np.float64)
    v = z.shape[-1]
    y = np.clip(np.rint(np.abs(np.asarray(case.tensors["targets"]))), 0, v - 1).astype(np.int64)
    return z, y, np.asarray(case.tensors["mask"]) > 0.5


def numpy_loss(z: np.ndarray, y: np.ndarray, mask: np.ndarray) -> tuple[float, np.ndarray]:
    """difftest's own loss and gradient (module docstring)."""
    m = z.max(-1, keepdims=True)
    lse = m + np.log(np.exp(z - m).sum(-1, keepdims=True))
    target = np.take_along_axis(z, y[..., None], -1)
    count = int(mask.sum())
    value = float(np.where(mask, (lse - target)[..., 0], 0.0).sum() / count)
    onehot = np.arange(z.shape[-1]) == y[..., None]
    grad = np.where(mask[..., None], (np.exp(z - lse) - onehot) / count, 0.0)
    return value, grad


class NextTokenLossComponent(Component):
    name = "next_token_loss"
    summary = ("masked next-token loss (Lean nextTokenLoss) and its gradient: pybridge.loss, autograd of it "
               "and the closed form (nextTokenGradient, 0 at masked positions) against NumPy")
    kinds = {
        "random": "logits of spread 3, about 60 % of the positions supervised",
        "peaked": "logits of spread 30 (softmax nearly one-hot: the log-sum-exp must be shifted)",
        "one_supervised": "a single supervised position (|S| = 1)",
        "sparse_mask": "about 10 % of the positions supervised (at least one)",
    }
    default_sizes = {"B": 2, "T": 6, "V": 11}

    def sample(self, rng, kind, sizes):
        b, t, v = sizes["B"], sizes["T"], sizes["V"]
        logits = rng.normal(0.0, 30.0 if kind == "peaked" else 3.0, (b, t, v))
        targets = rng.integers(0, v, (b, t)).astype(np.float64)
        if kind == "one_supervised":
            mask = np.zeros((b, t), dtype=bool)
            mask[rng.integers(b), rng.integers(t)] = True
        else:
            mask = rng.random((b, t)) < (0.1 if kind == "sparse_mask" else 0.6)
            mask.flat[rng.integers(b * t)] = True
            if kind == "random":
                mask[-1, -1] = False
        return {"logits": logits, "targets": targets, "mask": mask.astype(np.float64)}

    def torch_outputs(self, case, dtype, device):
        z, y, mask = decoded(case)
        logits = t64(z).to(device=device, dtype=dtype).requires_grad_(True)
        targets, mask_t = torch.from_numpy(y).to(device), torch.from_numpy(mask).to(device)
        value = pyloss.next_token_loss(logits, targets, mask_t)
        value.backward()
        closed = pyloss.next_token_gradient(logits.detach(), targets, mask_t)
        return {"torch": {"loss": to_np(value), "grad": to_np(logits.grad)},
                "torch closed form": {"grad": to_np(closed)}}

    def numpy_outputs(self, case):
        value, grad = numpy_loss(*decoded(case))
        return {"loss": np.array(value), "grad": grad}

    def lowp_checks(self, case, dtype, device):
        return []

    def error_model(self, sizes):
        return ErrorModel(stores=2, accum=sizes["V"] + sizes["B"] * sizes["T"], amp=2.0)
