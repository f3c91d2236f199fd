"""The Lean masked next-token loss and its gradient (`lean/KimiK3/Training/Pretraining.lean`:
`nextTokenLoss`, and `nextTokenGradient`, proved to be the derivative by `nextTokenLoss_add_eq` and
`tokenRemainder_smul_le`) evaluated at `Float`, against `pybridge.loss` in float64: its loss, torch
autograd of that loss, and its closed-form gradient `next_token_gradient`.

One Lean run: the library's `Training.Pretraining` bundled (`codegen.bundle`) with seeded random
logits (passed bit for bit, `Float.ofBits`), targets and masks, printing the loss and every
gradient entry as bits. The pybridge leg reads the same inputs, not the Lean formula
(`tests/test_loss.py` ties it to `torch.nn.functional.cross_entropy` independently). Agreement is
to `1e-12` absolute, and masked positions must be exactly `0` in every leg. One more case has
every position masked: Lean's loss is `0 / 0`, NaN at `Float` (its gradient formula gives `0`
without dividing), and pybridge refuses with an `InputError` naming `mask_bt`. A planted bug (the
mask forgotten in the gradient, `test_loss.forgotten_mask_gradient`) must be caught.
"""

from __future__ import annotations

import json
import struct
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

import test_loss as loss_tests  # the planted masked-gradient bug
from codegen.bundle import bundle, dependency_order, run_lean
from pybridge import loss
from pybridge.errors import InputError

REPO = Path(__file__).resolve().parents[1]
TOL = 1e-12
#: (positions T, vocabulary V, seed); each mask keeps at least one position and drops at least one
CASES = ((6, 7, 0), (5, 3, 1), (4, 11, 2))
#: the all-masked case (index len(CASES) in the Lean run)
ALL_MASKED = (3, 4, 3)


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from_bits(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b))[0]


@cache
def inputs(index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    T, V, seed = (CASES + (ALL_MASKED,))[index]
    rng = np.random.default_rng(seed)
    logits_tv = rng.normal(0, 3, (T, V))
    targets_t = rng.integers(0, V, T)
    mask_t = rng.random(T) < 0.6
    mask_t[0], mask_t[-1] = True, False
    if index == len(CASES):
        mask_t[:] = False
    return logits_tv, targets_t, mask_t


def lean_case(index: int) -> str:
    logits_tv, targets_t, mask_t = inputs(index)
    T, V, _ = (CASES + (ALL_MASKED,))[index]
    rows = ", ".join("[" + ", ".join(f"Float.ofBits {bits(float(x))}" for x in row) + "]" for row in logits_tv)
    return f"""
namespace Case{index}
def logits : Tensor Float [{T}, {V}] := fun p v => listGetD 0 (listGetD [] [{rows}] p.val) v.val
def targets : Fin {T} → Fin {V} := fun p => ⟨listGetD 0 {list(map(int, targets_t))} p.val % {V}, Nat.mod_lt _ (by decide)⟩
def mask : Fin {T} → Bool := fun p => listGetD false {[bool(m) for m in mask_t]} p.val
#eval! IO.println ("{{\\"case\\": {index}, \\"loss\\": " ++ toString (nextTokenLoss logits targets mask).toBits ++
  ", \\"grad\\": " ++ toString (finList {T} (fun p => finList {V} (fun v => (nextTokenGradient logits targets mask p v).toBits))) ++ "}}")
end Case{index}
""".replace("True", "true").replace("False", "false")


@cache
def lean_results() -> dict[int, dict]:
    source = bundle(REPO, dependency_order(REPO, ("KimiK3.Training.Pretraining",)))
    source += "\nopen KimiK3 KimiK3.Training.Pretraining\n" + "".join(lean_case(i) for i in range(len(CASES) + 1))
    out = {}
    for message in run_lean(source, "PretrainingGrad"):
        if message.severity == "information" and message.text.lstrip().startswith("{"):
            doc = json.loads(message.text)
            out[doc["case"]] = {"loss": from_bits(doc["loss"]),
                                "grad": np.array([[from_bits(b) for b in row] for row in doc["grad"]])}
    assert sorted(out) == list(range(len(CASES) + 1)), sorted(out)
    return out


def as_batch(index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The case as pybridge's `[1, T, V]` batch (Lean's `[T, V]` positions)."""
    logits_tv, targets_t, mask_t = inputs(index)
    return (torch.tensor(logits_tv, dtype=torch.float64)[None], torch.tensor(targets_t)[None],
            torch.tensor(mask_t)[None])


def pybridge_results(index: int) -> tuple[float, np.ndarray, np.ndarray]:
    """(loss, autograd of `loss.next_token_loss`, `loss.next_token_gradient`), positions × vocab."""
    logits_btv, targets_bt, mask_bt = as_batch(index)
    z = logits_btv.clone().requires_grad_(True)
    value = loss.next_token_loss(z, targets_bt, mask_bt)
    value.backward()
    closed = loss.next_token_gradient(logits_btv, targets_bt, mask_bt)
    return float(value.detach()), z.grad[0].numpy(), closed[0].numpy()


@pytest.mark.lean
@pytest.mark.parametrize("index", range(len(CASES)))
def test_lean_loss_and_gradient_equal_pybridge(index: int) -> None:
    lean, (value, auto, closed) = lean_results()[index], pybridge_results(index)
    _, _, mask_t = inputs(index)
    err_auto, err_closed = float(np.abs(lean["grad"] - auto).max()), float(np.abs(lean["grad"] - closed).max())
    print(f"case {index} {CASES[index][:2]}: max |Lean − autograd| = {err_auto:.3e}, "
          f"max |Lean − closed form| = {err_closed:.3e}, |loss diff| = {abs(lean['loss'] - value):.3e}")
    assert err_auto <= TOL and err_closed <= TOL and abs(lean["loss"] - value) <= TOL * max(1.0, abs(value))
    assert (lean["grad"][~mask_t] == 0).all() and (auto[~mask_t] == 0).all() and (closed[~mask_t] == 0).all()
    assert np.abs(lean["grad"][mask_t]).max() > 1e-3  # not a vacuous all-zero agreement


@pytest.mark.lean
def test_all_masked_lean_divides_by_zero_and_pybridge_refuses() -> None:
    lean = lean_results()[len(CASES)]
    assert np.isnan(lean["loss"]) and (lean["grad"] == 0).all()
    for fn in (loss.next_token_loss, loss.next_token_gradient):
        with pytest.raises(InputError, match="mask_bt"):
            fn(*as_batch(len(CASES)))


@pytest.mark.lean
def test_planted_gradient_at_masked_positions_is_caught() -> None:
    logits_btv, targets_bt, mask_bt = as_batch(0)
    grad = loss_tests.forgotten_mask_gradient(logits_btv, targets_bt, mask_bt)[0].numpy()
    _, _, mask_t = inputs(0)
    assert np.abs(grad[~mask_t]).max() > 1e-3
    assert float(np.abs(lean_results()[0]["grad"] - grad).max()) > 1e3 * TOL


def test_inputs_mask_both_kinds_of_position() -> None:
    for index in range(len(CASES)):
        _, _, mask_t = inputs(index)
        assert mask_t.any() and not mask_t.all()
