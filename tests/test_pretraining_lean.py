"""The Lean gradient of the masked next-token loss (`lean/KimiK3/Training/Pretraining.lean`,
`nextTokenGradient`, proved to be the derivative by `nextTokenLoss_add_eq` and
`tokenRemainder_smul_le`) evaluated at `Float`, against torch autograd of the masked
cross-entropy in float64.

One Lean run: the library's `Training.Pretraining` bundled (`codegen.bundle`) with seeded random
logits (passed bit for bit, `Float.ofBits`), targets and masks, printing the loss and every
gradient entry as bits. The torch leg computes `F.cross_entropy` over the supervised positions
only (the logits of masked positions still exist, their loss term is dropped) and differentiates
it with autograd; it reads the same inputs, not the Lean formula. Agreement is to `1e-12`
absolute, and masked positions must be exactly `0` in both legs. A planted bug (the mean taken over
all positions, mask forgotten) must be caught.
"""

from __future__ import annotations

import json
import struct
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from codegen.bundle import bundle, dependency_order, run_lean

REPO = Path(__file__).resolve().parents[1]
TOL = 1e-12
#: (positions T, vocabulary V, seed); each mask keeps at least one position and drops at least one
CASES = ((6, 7, 0), (5, 3, 1), (4, 11, 2))


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from_bits(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b))[0]


@cache
def inputs(index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    T, V, seed = CASES[index]
    rng = np.random.default_rng(seed)
    logits_tv = rng.normal(0, 3, (T, V))
    targets_t = rng.integers(0, V, T)
    mask_t = rng.random(T) < 0.6
    mask_t[0], mask_t[-1] = True, False
    return logits_tv, targets_t, mask_t


def lean_case(index: int) -> str:
    logits_tv, targets_t, mask_t = inputs(index)
    T, V, _ = CASES[index]
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
    source += "\nopen KimiK3 KimiK3.Training.Pretraining\n" + "".join(lean_case(i) for i in range(len(CASES)))
    out = {}
    for message in run_lean(source, "PretrainingGrad"):
        if message.severity == "information" and message.text.lstrip().startswith("{"):
            doc = json.loads(message.text)
            out[doc["case"]] = {"loss": from_bits(doc["loss"]),
                                "grad": np.array([[from_bits(b) for b in row] for row in doc["grad"]])}
    assert sorted(out) == list(range(len(CASES))), sorted(out)
    return out


def masked_loss(logits_tv: torch.Tensor, targets_t: torch.Tensor, mask_t: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the supervised positions (masked rows dropped from the loss only)."""
    return F.cross_entropy(logits_tv[mask_t], targets_t[mask_t])


def torch_results(index: int, loss_fn=masked_loss) -> tuple[float, np.ndarray]:
    logits_tv, targets_t, mask_t = inputs(index)
    z = torch.tensor(logits_tv, dtype=torch.float64, requires_grad=True)
    loss = loss_fn(z, torch.tensor(targets_t), torch.tensor(mask_t))
    loss.backward()
    return float(loss.detach()), z.grad.numpy()


@pytest.mark.lean
@pytest.mark.parametrize("index", range(len(CASES)))
def test_lean_gradient_equals_torch_autograd(index: int) -> None:
    lean, (loss, grad) = lean_results()[index], torch_results(index)
    _, _, mask_t = inputs(index)
    err = float(np.abs(lean["grad"] - grad).max())
    print(f"case {index} {CASES[index][:2]}: max |Lean − autograd| = {err:.3e}, "
          f"|loss diff| = {abs(lean['loss'] - loss):.3e}")
    assert err <= TOL and abs(lean["loss"] - loss) <= TOL * max(1.0, abs(loss))
    assert (lean["grad"][~mask_t] == 0).all() and (grad[~mask_t] == 0).all()
    assert np.abs(lean["grad"][mask_t]).max() > 1e-3  # not a vacuous all-zero agreement


@pytest.mark.lean
def test_planted_mask_forgotten_is_caught() -> None:
    def unmasked(z, targets_t, _mask_t):
        return F.cross_entropy(z, targets_t)

    _, grad = torch_results(0, unmasked)
    _, _, mask_t = inputs(0)
    assert np.abs(grad[~mask_t]).max() > 1e-3
    assert float(np.abs(lean_results()[0]["grad"] - grad).max()) > TOL


def test_inputs_mask_both_kinds_of_position() -> None:
    for index in range(len(CASES)):
        _, _, mask_t = inputs(index)
        assert mask_t.any() and not mask_t.all()
