"""pybridge.muon, Per-Head Muon (spec §2.10): split/merge round trips exactly and agree with the
entry-by-entry reference; the SVD orthogonalizer meets the exact Gram contract to float64
rounding; Newton–Schulz meets the approximate contract with a stated ε and its singular values
are the scalar quintic applied to the input's (computed from the SVD, not by the iteration);
on the tiny model every head block of a Q/K/V update is approximately orthogonal, the blocks are
the adapter's heads, a head-minor split is caught, and a whole-matrix step matches
torch.optim.Muon."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pybridge import adapter, muon
from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge.errors import InputError

REPO = Path(__file__).resolve().parents[1]
CFG = load_config(REPO / "fixtures" / "tiny" / "config.json")
# Measured on 200 Gaussian matrices per shape (float64): max ‖XᵀX − I‖₂ of the 5-step quintic is
# 0.5351 for every non-square shape tried ((24,5), (5,24), (10,23), (11,17), (24,26), (64,16));
# it is 1 − 0.6818², the floor the quintic's singular values settle at. Square Gaussian matrices
# have σ_min/‖G‖_F too small for 5 steps (residual up to 0.9995), so ε holds for non-square
# blocks only.
NS_EPSILON = 0.54


def gaussian(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("rows,heads,columns", [(24, 2, 5), (10, 3, 23), (1, 1, 1), (4, 5, 1)])
def test_merge_split_and_split_merge_are_exact(rows: int, heads: int, columns: int) -> None:
    m = gaussian(rows, heads * columns, seed=1)
    b = gaussian(heads, rows, columns, seed=2)
    assert torch.equal(muon.merge(muon.split(m, heads)), m)  # merge_split
    assert torch.equal(muon.split(muon.merge(b), heads), b)  # split_merge
    assert torch.equal(muon.split(m, heads), muon.split_reference(m, heads))


def test_split_is_head_major_by_hand() -> None:
    # m[r, k] = 10 r + k, 2 heads of 3 columns: head 1 holds columns 3, 4, 5
    m = torch.tensor([[10.0 * r + k for k in range(6)] for r in range(2)])
    assert muon.split(m, 2)[1].tolist() == [[3.0, 4.0, 5.0], [13.0, 14.0, 15.0]]
    with pytest.raises(InputError, match="4 heads"):
        muon.split(m, 4)  # 4 heads do not divide 6 columns
    with pytest.raises(InputError, match="3 heads"):
        muon.split(torch.zeros(2, 7), 3)


@pytest.mark.parametrize("shape", [(24, 5), (10, 23), (11, 17), (24, 24)])
def test_svd_orthogonalizer_meets_the_exact_gram_contract(shape: tuple[int, int]) -> None:
    for seed in range(20):
        assert muon.gram_residual(muon.orthogonalize_svd(gaussian(*shape, seed=seed))) < 1e-13


def test_gram_residual_by_hand() -> None:
    # columns (1, 0, 0) and (0, 2, 0): MᵀM = diag(1, 4), residual 3; the wide transpose gives the same
    m = torch.tensor([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]], dtype=torch.float64)
    assert muon.gram_residual(m) == pytest.approx(3.0, abs=1e-14)
    assert muon.gram_residual(m.T) == pytest.approx(3.0, abs=1e-14)


@pytest.mark.parametrize("shape", [(24, 5), (5, 24), (10, 23), (11, 17), (24, 26), (64, 16)])
def test_newton_schulz_meets_the_approximate_gram_contract(shape: tuple[int, int]) -> None:
    residuals = [muon.gram_residual(muon.newton_schulz(gaussian(*shape, seed=s))) for s in range(100)]
    assert max(residuals) <= NS_EPSILON
    assert max(residuals) > 0.3  # the quintic does not converge to 1: ε is not vacuous slack


def test_newton_schulz_singular_values_are_the_scalar_quintic_of_the_inputs() -> None:
    a, b, c = 3.4445, -4.7750, 2.0315  # Keller Jordan's coefficients, typed here independently
    for shape in [(24, 5), (10, 23), (12, 12)]:
        g = gaussian(*shape, seed=7)
        s = torch.linalg.svdvals(g) / torch.linalg.matrix_norm(g)
        for _ in range(5):
            s = a * s + b * s**3 + c * s**5
        got = torch.linalg.svdvals(muon.newton_schulz(g))
        assert torch.allclose(got, torch.sort(s, descending=True).values, rtol=0, atol=1e-12)
        expected_residual = (s**2 - 1).abs().max().item()
        assert muon.gram_residual(muon.newton_schulz(g)) == pytest.approx(expected_residual, abs=1e-12)


def test_orthogonalize_heads_orthogonalizes_each_block_and_only_within_it() -> None:
    m = gaussian(24, 3 * 5, seed=3)
    out = muon.orthogonalize_heads(m, 3, muon.orthogonalize_svd)
    for h in range(3):
        block = out[:, 5 * h:5 * h + 5]
        assert muon.gram_residual(block) < 1e-13
        assert torch.allclose(block, muon.orthogonalize_svd(m[:, 5 * h:5 * h + 5]), atol=1e-13)
    assert muon.gram_residual(out) > 0.5  # heads are not orthogonal to each other


def _per_head_from_adapter(spec: dict[str, torch.Tensor], name: str, h: int) -> torch.Tensor:
    """Head h's `[in, columns]` block of a hub Q/K/V weight, read from the adapter's spec tensors."""
    layer = name.split(".")[2]
    prefix = f"layers.{int(layer) + 1}."
    if name.endswith("self_attn.q_b_proj.weight"):
        return torch.cat([spec[prefix + "mla.query_content_up"][h], spec[prefix + "mla.query_shared_up"][h]], 1)
    if name.endswith("self_attn.kv_b_proj.weight"):
        return torch.cat([spec[prefix + "mla.key_up"][h], spec[prefix + "mla.value_up"][h]], 1)
    part = {"q_proj": "query_proj", "k_proj": "key_proj", "v_proj": "value_proj"}[name.split(".")[-2]]
    return spec[prefix + "kda." + part][:, h, :]


def test_head_blocks_are_the_adapters_heads_on_the_tiny_model() -> None:
    hub = random_model(CFG, seed=5, dtype=torch.float64).state_dict()
    spec = adapter.hub_to_spec(CFG, hub)
    per_head = [n for n in hub if muon.head_blocks(CFG, n) is not None]
    assert len(per_head) == 3 * 3 + 2 * 2  # 3 KDA layers × q, k, v; 2 MLA layers × q_b, kv_b
    for name in per_head:
        heads, _ = muon.head_blocks(CFG, name)
        blocks = muon.split(hub[name].T, heads)
        for h in range(heads):
            assert torch.equal(blocks[h], _per_head_from_adapter(spec, name, h)), (name, h)


def test_a_head_minor_split_is_caught() -> None:
    hub = random_model(CFG, seed=5, dtype=torch.float64).state_dict()
    spec = adapter.hub_to_spec(CFG, hub)
    name = "model.layers.3.self_attn.q_b_proj.weight"
    heads, columns = muon.head_blocks(CFG, name)
    m = hub[name].T
    head_minor = m.reshape(m.shape[0], columns, heads).permute(2, 0, 1)  # the planted bug
    assert not torch.equal(head_minor[1], _per_head_from_adapter(spec, name, 1))
    assert torch.equal(muon.split(m, heads)[1], _per_head_from_adapter(spec, name, 1))


def test_optimizer_step_on_the_tiny_model_orthogonalizes_each_head() -> None:
    # random gradients: the model's fast KDA prefill is inference-only (no autograd), and the
    # layout under test does not depend on where the gradient came from
    model = random_model(CFG, seed=6, dtype=torch.float64)
    named = [(n, p) for n, p in model.named_parameters() if p.ndim == 2]
    before = {n: p.detach().clone() for n, p in named}
    lr = 1e-2
    opt = muon.PerHeadMuon(named, CFG, lr=lr, momentum=0.9, weight_decay=0.0)
    for i, (_, p) in enumerate(named):
        p.grad = gaussian(*p.shape, seed=100 + i)
    opt.step()
    checked = 0
    for name, p in named:
        update_ik = ((before[name] - p.detach()) / lr).T  # spec layout [in, out]
        blocks = muon.head_blocks(CFG, name)
        if blocks is None:
            continue
        heads, columns = blocks
        scale = 0.2 * max(update_ik.shape[0], columns) ** 0.5
        grad_ik = p.grad.T  # one step from zero momentum: the Nesterov momentum is (1 − μ²)·g
        for h in range(heads):
            cols = slice(columns * h, columns * (h + 1))  # head h's output rows, sliced by hand
            assert muon.gram_residual(update_ik[:, cols] / scale) <= NS_EPSILON, (name, h)
            assert torch.allclose(update_ik[:, cols], scale * muon.newton_schulz(grad_ik[:, cols]), atol=1e-12)
        whole = 0.2 * max(update_ik.shape) ** 0.5 * muon.newton_schulz(grad_ik)
        assert (update_ik - whole).abs().max() > 0.1, name  # not the whole-matrix update
        checked += 1
    assert checked == 13


def test_whole_matrix_step_matches_torch_muon() -> None:
    w0 = gaussian(26, 24, seed=8).float()
    grads = [gaussian(26, 24, seed=9 + t).float() for t in range(3)]
    ours, theirs = torch.nn.Parameter(w0.clone()), torch.nn.Parameter(w0.clone())
    opt_ours = muon.PerHeadMuon([("model.layers.0.mlp.up_proj.weight", ours)], CFG, lr=0.1, momentum=0.9,
                                weight_decay=0.1)
    opt_theirs = torch.optim.Muon([theirs], lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=True,
                                  adjust_lr_fn="match_rms_adamw")
    for g in grads:
        ours.grad, theirs.grad = g.clone(), g.clone()
        opt_ours.step()
        opt_theirs.step()
    moved = (theirs - w0).norm()
    # torch runs Newton–Schulz in bfloat16 (8-bit mantissa): measured 0.9 % of the step; torch
    # without Nesterov momentum differs by 26 %, so 3 % separates the algorithms
    assert (ours - theirs).norm() < 0.03 * moved
    assert (ours - w0).norm() > 0.5 * moved


def test_bad_input_is_named() -> None:
    with pytest.raises(InputError, match="model.norm.weight"):
        muon.PerHeadMuon([("model.norm.weight", torch.nn.Parameter(torch.ones(3)))], CFG)
    with pytest.raises(InputError, match="do not tile"):
        muon.muon_update(torch.zeros(7, 4), (2, 3))
