"""`pybridge.loss` (the masked next-token loss, Lean's `nextTokenLoss`, and its closed-form
gradient `nextTokenGradient`) against independent computations: `torch.nn.functional.cross_entropy`
over the supervised positions only, torch autograd of that, and a Python `math` sum for one hand
case; in float64 to `1e-12`, masked positions exactly `0`; once through the tiny K3 model's logits.
Planted bug: the gradient with the mask forgotten (`forgotten_mask_gradient`) must be caught.
The Lean leg is `test_pretraining_lean.py`.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from pybridge import loss
from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge.errors import InputError

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "config.json"
F64 = torch.float64
TOL = 1e-12
#: (batch, positions, vocabulary, seed)
CASES = ((1, 6, 7, 0), (3, 5, 4, 1), (2, 9, 101, 2), (4, 1, 2, 3))


def random_case(b: int, t: int, v: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logits of spread 3, random targets, a random mask with one supervised position and (when
    there are two or more positions) one masked."""
    gen = torch.Generator().manual_seed(seed)
    logits_btv = 3.0 * torch.randn(b, t, v, generator=gen, dtype=F64)
    targets_bt = torch.randint(0, v, (b, t), generator=gen)
    mask_bt = torch.rand(b, t, generator=gen, dtype=F64) < 0.6
    mask_bt[0, 0] = True
    if b * t > 1:
        mask_bt[-1, -1] = False
    return logits_btv, targets_bt, mask_bt


def reference_loss(logits_btv, targets_bt, mask_bt) -> torch.Tensor:
    """torch's cross-entropy (mean) over the supervised rows only."""
    v = logits_btv.shape[-1]
    return F.cross_entropy(logits_btv.reshape(-1, v)[mask_bt.reshape(-1)], targets_bt.reshape(-1)[mask_bt.reshape(-1)])


def autograd(fn, logits_btv, targets_bt, mask_bt) -> tuple[float, torch.Tensor]:
    z = logits_btv.clone().requires_grad_(True)
    value = fn(z, targets_bt, mask_bt)
    value.backward()
    return float(value.detach()), z.grad


def forgotten_mask_gradient(logits_btv, targets_bt, mask_bt) -> torch.Tensor:
    """Planted bug: `(softmax − onehot) / |S|` at every position, masked ones included."""
    count = int(mask_bt.sum())
    onehot = F.one_hot(targets_bt, logits_btv.shape[-1]).to(logits_btv.dtype)
    return (torch.softmax(logits_btv, -1) - onehot) / count


def gradient_errors(grad_fn, case) -> tuple[float, float]:
    """(max |grad_fn − autograd of torch CE|, max |grad_fn| at masked positions)."""
    logits_btv, targets_bt, mask_bt = random_case(*case)
    _, want = autograd(reference_loss, logits_btv, targets_bt, mask_bt)
    got = grad_fn(logits_btv, targets_bt, mask_bt)
    masked = got[~mask_bt]
    return float((got - want).abs().max()), float(masked.abs().max()) if masked.numel() else 0.0


@pytest.mark.parametrize("case", CASES)
def test_loss_and_gradient_equal_torch_cross_entropy_and_autograd(case) -> None:
    logits_btv, targets_bt, mask_bt = random_case(*case)
    want_loss, want_grad = autograd(reference_loss, logits_btv, targets_bt, mask_bt)
    got_loss, auto_grad = autograd(loss.next_token_loss, logits_btv, targets_bt, mask_bt)
    closed = loss.next_token_gradient(logits_btv, targets_bt, mask_bt)
    errs = (abs(got_loss - want_loss), float((auto_grad - want_grad).abs().max()), float((closed - want_grad).abs().max()))
    print(f"case {case}: |loss − CE| {errs[0]:.2e}, autograd vs CE autograd {errs[1]:.2e}, closed form vs CE autograd {errs[2]:.2e}")
    assert errs[0] <= TOL * max(1.0, abs(want_loss)) and errs[1] <= TOL and errs[2] <= TOL
    assert (closed[~mask_bt] == 0).all() and (auto_grad[~mask_bt] == 0).all() and (want_grad[~mask_bt] == 0).all()
    assert closed.abs().max() > 1e-3  # not a vacuous all-zero agreement
    assert closed.dtype == F64 and closed.shape == logits_btv.shape


def test_hand_case_by_math() -> None:
    """One batch of 1, 3 positions, vocabulary 2, the middle one masked: by `math` alone."""
    z = [[0.5, -1.0], [9.0, 9.0], [2.0, 0.25]]
    y, mask = [1, 0, 0], [True, False, True]
    lse = [math.log(math.exp(a) + math.exp(b)) for a, b in z]
    want = ((lse[0] - z[0][1]) + (lse[2] - z[2][0])) / 2
    args = (torch.tensor([z], dtype=F64), torch.tensor([y]), torch.tensor([mask]))
    assert abs(float(loss.next_token_loss(*args)) - want) <= 1e-15
    g = loss.next_token_gradient(*args)[0]
    s0 = math.exp(z[0][0]) / (math.exp(z[0][0]) + math.exp(z[0][1]))
    assert abs(float(g[0, 0]) - s0 / 2) <= 1e-15 and abs(float(g[0, 1]) - (1 - s0 - 1) / 2) <= 1e-15
    assert g[1].tolist() == [0.0, 0.0]


def test_through_the_tiny_models_logits() -> None:
    """The loss of the tiny K3 model on token ids (shifted by one): equals torch CE of the same
    logits, and autograd's gradient with respect to the logits equals the closed form; it reaches
    the weights."""
    model = random_model(load_config(TINY), seed=0, dtype=F64)
    model.set_kda_impl("recurrent")  # the chunked prefill writes with `out=` (no autograd)
    gen = torch.Generator().manual_seed(5)
    ids_bt = torch.randint(0, model.config.vocab_size, (2, 7), generator=gen)
    mask_bt = torch.rand(2, 6, generator=gen) < 0.6
    mask_bt[0, 0], mask_bt[1, -1] = True, False
    value, logits_btv = loss.model_next_token_loss(model, ids_bt, mask_bt)
    logits_btv.retain_grad()
    value.backward()
    z_btv, y_bt = logits_btv.detach()[:, :-1], ids_bt[:, 1:]
    assert abs(float(value.detach()) - float(reference_loss(z_btv, y_bt, mask_bt))) <= TOL
    closed = loss.next_token_gradient(z_btv, y_bt, mask_bt)
    assert float((logits_btv.grad[:, :-1] - closed).abs().max()) <= TOL
    assert (logits_btv.grad[:, -1] == 0).all() and (logits_btv.grad[:, :-1][~mask_bt] == 0).all()
    assert any(p.grad is not None and p.grad.abs().max() > 0 for p in model.parameters())


def test_planted_gradient_at_masked_positions_is_caught() -> None:
    """The mask forgotten in the gradient: nonzero at masked positions and off autograd by far
    more than the tolerance, in every case with a masked position."""
    for case in CASES:
        logits_btv, _, mask_bt = random_case(*case)
        if mask_bt.all():
            continue
        err, masked = gradient_errors(forgotten_mask_gradient, case)
        assert err > 1e3 * TOL and masked > 1e-3, (case, err, masked)
        good_err, good_masked = gradient_errors(loss.next_token_gradient, case)
        assert good_err <= TOL and good_masked == 0.0


@pytest.mark.parametrize("change, name", [
    (lambda z, y, m: (z[0], y, m), "logits_btv"),
    (lambda z, y, m: (z.long(), y, m), "logits_btv"),
    (lambda z, y, m: (z, y[:, :-1], m), "targets_bt"),
    (lambda z, y, m: (z, y.double(), m), "targets_bt"),
    (lambda z, y, m: (z, y + z.shape[-1], m), "targets_bt"),
    (lambda z, y, m: (z, y - 100, m), "targets_bt"),
    (lambda z, y, m: (z, y, m[:, :-1]), "mask_bt"),
    (lambda z, y, m: (z, y, m.long()), "mask_bt"),
    (lambda z, y, m: (z, y, torch.zeros_like(m)), "mask_bt"),
])
def test_bad_input_names_the_tensor(change, name) -> None:
    args = change(*random_case(2, 4, 5, 7))
    for fn in (loss.next_token_loss, loss.next_token_gradient):
        with pytest.raises(InputError, match=name):
            fn(*args)


def test_model_hook_checks_its_inputs() -> None:
    model = random_model(load_config(TINY), seed=0, dtype=F64)
    with pytest.raises(InputError, match="input_ids_bt"):
        loss.model_next_token_loss(model, torch.tensor([[3]]))
    with pytest.raises(InputError, match="mask_bt"):
        loss.model_next_token_loss(model, torch.tensor([[3, 4, 5]]), torch.ones(1, 3, dtype=torch.bool))
