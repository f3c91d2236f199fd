"""The Lean Per-Head Muon layout (`lean/KimiK3/Training/Muon.lean`: `split`, `merge`,
`orthogonalize`, `gramResidual`, `maxAbsEntry`) evaluated at `Float`, against `pybridge.muon`.

One Lean run: the library's `Training.Muon` bundled (`codegen.bundle`) with
* the tiny model's per-head hub tensors (`pybridge.muon.head_blocks` on the names of
  `random_model(...).state_dict()`): for every (rows, heads, columns) layout they use, Lean splits
  an index matrix `m[r, k] = r·K + k`, and for one tensor of each kind it splits the real random
  weight's spec layout `weight.T`, passed bit for bit (`Float.ofBits`);
* seeded random integer matrices orthogonalized per head by one cubic Newton–Schulz step
  `O(M) = 3/2 M − 1/2 M (MᵀM)` written in the check (integer entries keep every product and sum
  exact in binary64, so both legs must agree bit for bit), with each head's max-entry Gram residual
  `max |O(M)ᵀO(M) − I|` (the norm of `HasApproxColumnGram`).

The Python leg is `pybridge.muon.split`/`merge`/`orthogonalize_heads` with the same cubic step in
torch, and the residual from torch. Everything is compared bit for bit. A planted bug (a head-minor
split, `reshape(rows, columns, heads)`) must disagree on the hub layouts.
"""

from __future__ import annotations

import json
import struct
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

from codegen.bundle import EvaluationError, bundle, dependency_order, run_lean
from pybridge import muon
from pybridge.checkpoint import random_model
from pybridge.config import load_config

REPO = Path(__file__).resolve().parents[1]
CFG = load_config(REPO / "fixtures" / "tiny" / "config.json")
#: index matrices m[r, k] = r·K + k
K = 1000
#: (rows, heads, columns, seed) of the random integer cases
RANDOM = ((4, 2, 3, 0), (6, 3, 2, 1), (5, 1, 4, 2), (3, 4, 1, 3), (6, 2, 4, 4))


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from_bits(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b))[0]


@cache
def hub_heads() -> dict[str, tuple[torch.Tensor, int, int]]:
    """Every per-head hub tensor of the tiny model: name → (weight [out, in], heads, columns)."""
    hub = random_model(CFG, seed=5, dtype=torch.float64).state_dict()
    out = {}
    for name, w in hub.items():
        if (blocks := muon.head_blocks(CFG, name)) is not None:
            out[name] = (w, *blocks)
    return out


def layouts() -> list[tuple[int, int, int]]:
    """The distinct (rows, heads, columns) of the hub tensors, spec layout `weight.T`."""
    return sorted({(w.shape[1], h, c) for w, h, c in hub_heads().values()})


def real_tensors() -> list[str]:
    """One hub tensor of each kind (first layer that has it)."""
    seen, out = set(), []
    for name in sorted(hub_heads()):
        kind = name.rsplit(".", 2)[-2]
        if kind not in seen:
            seen.add(kind)
            out.append(name)
    return out


@cache
def random_case(index: int) -> np.ndarray:
    rows, heads, columns, seed = RANDOM[index]
    return np.random.default_rng(seed).integers(-3, 4, (rows, heads * columns)).astype(np.float64)


def lean_matrix(m: np.ndarray) -> str:
    rows = ", ".join("[" + ", ".join(f"Float.ofBits {bits(float(x))}" for x in row) + "]" for row in m)
    return f"fun r k => listGetD 0 (listGetD [] [{rows}] r.val) k.val"


def lean_source() -> str:
    lines = ["open KimiK3 KimiK3.Training.Muon",
             "/-- One cubic Newton–Schulz step `3/2 M − 1/2 M (MᵀM)`. -/",
             "def cubic {r c : Nat} (M : Tensor Float [r, c]) : Tensor Float [r, c] :=",
             "  fun i j => 1.5 * M i j - 0.5 * finSum c (fun l => M i l * columnGram M l j)",
             "def splitBits {r h c : Nat} (m : Tensor Float [r, h * c]) : List (List (List UInt64)) :=",
             "  finList h fun a => finList r fun i => finList c fun j => (split m a i j).toBits",
             "def matBits {r k : Nat} (m : Tensor Float [r, k]) : List (List UInt64) :=",
             "  finList r fun i => finList k fun j => (m i j).toBits"]

    def emit(key: str, body: str) -> None:
        lines.append(f'#eval! IO.println ("{{\\"key\\": \\"{key}\\", \\"value\\": " ++ toString ({body}) ++ "}}")')

    for rows, heads, columns in layouts():
        lines.append(f"def idx_{rows}_{heads}_{columns} : Tensor Float [{rows}, {heads} * {columns}] := "
                     f"fun r k => Float.ofNat ({K} * r.val + k.val)")
        emit(f"layout {rows} {heads} {columns}", f"splitBits (h := {heads}) (c := {columns}) idx_{rows}_{heads}_{columns}")
    for n, name in enumerate(real_tensors()):
        w, heads, columns = hub_heads()[name]
        m = w.T.numpy()
        lines.append(f"def hub{n} : Tensor Float [{m.shape[0]}, {heads} * {columns}] := {lean_matrix(m)}")
        emit(f"hub {name}", f"splitBits (h := {heads}) (c := {columns}) hub{n}")
    for i, (rows, heads, columns, _) in enumerate(RANDOM):
        lines.append(f"def rnd{i} : Tensor Float [{rows}, {heads} * {columns}] := {lean_matrix(random_case(i))}")
        emit(f"merge_split {i}", f"matBits (merge (split (heads := {heads}) (columns := {columns}) rnd{i}))")
        emit(f"orth {i}", f"matBits (orthogonalize (heads := {heads}) (columns := {columns}) cubic rnd{i})")
        emit(f"residual {i}", f"finList {heads} fun a => (maxAbsEntry (gramResidual (cubic (split (heads := {heads}) "
                              f"(columns := {columns}) rnd{i} a)))).toBits")
    return bundle(REPO, dependency_order(REPO, ("KimiK3.Training.Muon",))) + "\n" + "\n".join(lines) + "\n"


@cache
def lean_run() -> tuple[dict[str, object], str | None]:
    """One Lean run per session: its values, or the error (kept, so a failure is not rerun)."""
    out = {}
    try:
        messages = run_lean(lean_source(), "MuonLayout")
    except EvaluationError as err:
        return out, str(err)
    for message in messages:
        if message.severity == "information" and message.text.lstrip().startswith("{"):
            doc = json.loads(message.text)
            out[doc["key"]] = doc["value"]
    return out, None


def lean_values() -> dict[str, object]:
    values, error = lean_run()
    assert error is None, error
    return values


def to_float(nested: object) -> np.ndarray:
    return np.vectorize(from_bits, otypes=[np.float64])(np.array(nested, dtype=np.uint64))


def cubic_torch(m_rc: torch.Tensor) -> torch.Tensor:
    return 1.5 * m_rc - 0.5 * m_rc @ (m_rc.T @ m_rc)


def head_minor_split(m_rk: torch.Tensor, heads: int) -> torch.Tensor:
    """The planted bug: head h owns columns h, h + heads, h + 2·heads, … (head-minor)."""
    return m_rk.reshape(m_rk.shape[0], m_rk.shape[1] // heads, heads).permute(2, 0, 1)


def index_matrix(rows: int, heads: int, columns: int) -> torch.Tensor:
    return torch.tensor([[float(K * r + k) for k in range(heads * columns)] for r in range(rows)], dtype=torch.float64)


def test_hub_tensors_cover_the_tiny_models_heads() -> None:
    # tiny config: 3 KDA layers × (q, k, v) + 2 MLA layers × (q_b, kv_b)
    assert len(hub_heads()) == 13 and len(layouts()) == 4 and len(real_tensors()) == 5


@pytest.mark.lean
def test_lean_split_equals_pybridge_split_on_the_hub_layouts() -> None:
    lean = lean_values()
    for rows, heads, columns in layouts():
        m = index_matrix(rows, heads, columns)
        got = to_float(lean[f"layout {rows} {heads} {columns}"])
        assert np.array_equal(got, muon.split(m, heads).numpy()), (rows, heads, columns)
    for name in real_tensors():
        w, heads, _ = hub_heads()[name]
        got = to_float(lean[f"hub {name}"])
        assert np.array_equal(got, muon.split(w.T, heads).numpy()), name
        assert np.array_equal(got.view(np.uint64), np.ascontiguousarray(muon.split(w.T, heads).numpy()).view(np.uint64)), name


@pytest.mark.lean
@pytest.mark.parametrize("index", range(len(RANDOM)))
def test_lean_orthogonalize_equals_pybridge_orthogonalize_heads(index: int) -> None:
    rows, heads, columns, _ = RANDOM[index]
    lean, m = lean_values(), torch.tensor(random_case(index))
    assert np.array_equal(to_float(lean[f"merge_split {index}"]), muon.merge(muon.split(m, heads)).numpy())
    update = muon.orthogonalize_heads(m, heads, cubic_torch)
    got = to_float(lean[f"orth {index}"])
    assert np.array_equal(got, update.numpy()) and np.abs(got).max() > 0
    residual = [float((cubic_torch(b).T @ cubic_torch(b) - torch.eye(columns, dtype=torch.float64)).abs().max())
                for b in muon.split(m, heads)]
    assert to_float(lean[f"residual {index}"]).tolist() == residual


@pytest.mark.lean
def test_planted_head_minor_split_is_caught() -> None:
    lean = lean_values()
    caught = 0
    for rows, heads, columns in layouts():
        got = to_float(lean[f"layout {rows} {heads} {columns}"])
        caught += not np.array_equal(got, head_minor_split(index_matrix(rows, heads, columns), heads).numpy())
    assert caught == len(layouts())  # every multi-head layout tells the two apart
