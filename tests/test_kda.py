"""KDA: spec worked examples, chunked == recurrent (float64, any chunk size; float32 and
bfloat16 storage at the decay extremes; planted unmasked and old mid-reference exponents caught), recurrent == dense-matrix formula, agreement with
fla's naive kernels, and the layer's prefill == decode."""

import dataclasses
import importlib
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from difftest.compare import tolerance
from difftest.components.sequence import KDARecurrenceComponent
from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge import kda
from pybridge.kda import kda_chunked, kda_recurrent

F64 = torch.float64
torch.set_num_threads(1)  # tiny tensors gain nothing from threads; on a shared box they only add contention
TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "config.json"


def scalar_run(s0: float, alphas: list[float], betas: list[float], values: list[float]) -> float:
    """d_k = d_v = 1, k = q = 1: returns the final state through the recurrent kernel."""
    T = len(values)
    one = torch.ones(1, T, 1, 1, dtype=F64)
    g = torch.tensor(alphas, dtype=F64).log().view(1, T, 1, 1)
    beta = torch.tensor(betas, dtype=F64).view(1, T, 1)
    v = torch.tensor(values, dtype=F64).view(1, T, 1, 1)
    _, S = kda_recurrent(one, one, v, g, beta, 1.0, torch.full((1, 1, 1, 1), s0, dtype=F64))
    return float(S)


def test_scalar_examples_from_spec():
    assert scalar_run(6.0, [0.8], [0.5], [10.0]) == pytest.approx(7.4, abs=1e-12)
    assert scalar_run(6.0, [0.8], [1.0], [10.0]) == pytest.approx(10.0, abs=1e-12)
    assert scalar_run(6.0, [0.8], [0.0], [10.0]) == pytest.approx(4.8, abs=1e-12)
    # order matters: regroupable, not permutable
    assert scalar_run(0.0, [0.5, 0.5], [0.5, 0.5], [2.0, 10.0]) == pytest.approx(5.25, abs=1e-12)
    assert scalar_run(0.0, [0.5, 0.5], [0.5, 0.5], [10.0, 2.0]) == pytest.approx(2.25, abs=1e-12)


def test_lean_toy_run_reads_three():
    q = k = torch.tensor([1.0, 0.0], dtype=F64).view(1, 1, 1, 2)
    v = torch.tensor([3.0], dtype=F64).view(1, 1, 1, 1)
    g = torch.zeros(1, 1, 1, 2, dtype=F64)  # retention [1, 1]
    o, _ = kda_recurrent(q, k, v, g, torch.ones(1, 1, 1, dtype=F64), 1.0)
    assert float(o) == 3.0


def random_inputs(B: int, T: int, H: int, K: int, V: int, seed: int, dtype=F64):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=dtype)  # noqa: E731
    q = r(B, T, H, K)
    k = torch.nn.functional.normalize(r(B, T, H, K), dim=-1)
    g = -5.0 * torch.rand(B, T, H, K, generator=gen, dtype=dtype)  # log alpha in (-5, 0)
    beta = torch.rand(B, T, H, generator=gen, dtype=dtype)
    return q, k, r(B, T, H, V), g, beta, r(B, H, K, V)


def dense_matrix_kda(q, k, v, g, beta, S0):
    """Independent form: S_t = (I - b k k^T) Diag(alpha) S_{t-1} + b k v^T, o_t = S_t^T q_t."""
    B, T, H, K = q.shape
    out = torch.zeros(B, T, H, v.shape[-1], dtype=q.dtype)
    for b in range(B):
        for h in range(H):
            S = S0[b, h].clone()
            for t in range(T):
                kt = k[b, t, h][:, None]
                A = (torch.eye(K, dtype=q.dtype) - beta[b, t, h] * kt @ kt.T) @ torch.diag(g[b, t, h].exp())
                S = A @ S + beta[b, t, h] * kt @ v[b, t, h][None, :]
                out[b, t, h] = S.T @ q[b, t, h]
    return out


def test_recurrent_matches_dense_matrix_form():
    q, k, v, g, beta, S0 = random_inputs(2, 9, 2, 5, 7, seed=1)
    o, _ = kda_recurrent(q, k, v, g, beta, 1.0, S0)
    torch.testing.assert_close(o, dense_matrix_kda(q, k, v, g, beta, S0), rtol=0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    T=st.integers(1, 140),
    chunk=st.sampled_from([1, 5, 16, 24, 36, 64]),
    H=st.integers(1, 3),
    K=st.integers(1, 6),
    V=st.integers(1, 6),
    with_state=st.booleans(),
    seed=st.integers(0, 10_000),
)
def test_chunked_equals_recurrent(T, chunk, H, K, V, with_state, seed):
    q, k, v, g, beta, S0 = random_inputs(2, T, H, K, V, seed)
    S0 = S0 if with_state else None
    o_r, S_r = kda_recurrent(q, k, v, g, beta, 0.7, S0)
    o_c, S_c = kda_chunked(q, k, v, g, beta, 0.7, S0, chunk_size=chunk)
    torch.testing.assert_close(o_c, o_r, rtol=0, atol=1e-11)
    torch.testing.assert_close(S_c, S_r, rtol=0, atol=1e-11)


@pytest.mark.parametrize("group_tokens", [32, kda.GROUP_TOKENS])
@pytest.mark.parametrize("chunk", [5, 16, 36, 64])
def test_chunked_over_many_groups_equals_recurrent(monkeypatch, chunk, group_tokens):
    """More tokens than one group of chunks holds, the last group and chunk partial."""
    monkeypatch.setattr(kda, "GROUP_TOKENS", group_tokens)
    q, k, v, g, beta, S0 = random_inputs(1, 2 * kda.GROUP_TOKENS + 37, 2, 4, 3, seed=31)
    o_r, S_r = kda_recurrent(q, k, v, g, beta, 0.7, S0)
    o_c, S_c = kda_chunked(q, k, v, g, beta, 0.7, S0, chunk_size=chunk)
    torch.testing.assert_close(o_c, o_r, rtol=0, atol=1e-11)
    torch.testing.assert_close(S_c, S_r, rtol=0, atol=1e-11)


def test_chunked_split_at_any_point_equals_whole():
    q, k, v, g, beta, S0 = random_inputs(1, 50, 2, 5, 7, seed=3)
    o_all, S_all = kda_chunked(q, k, v, g, beta, 1.0, S0)
    o1, S1 = kda_chunked(q[:, :21], k[:, :21], v[:, :21], g[:, :21], beta[:, :21], 1.0, S0)
    o2, S2 = kda_chunked(q[:, 21:], k[:, 21:], v[:, 21:], g[:, 21:], beta[:, 21:], 1.0, S1)
    torch.testing.assert_close(torch.cat([o1, o2], 1), o_all, rtol=0, atol=1e-12)
    torch.testing.assert_close(S2, S_all, rtol=0, atol=1e-12)


DECAYS = {  # g = log alpha per key channel: the gate's floor, near 1, and both in one head
    "floor": lambda u: torch.full_like(u, -5.0),
    "near_one": lambda u: -1e-3 * u,
    "mixed": lambda u: torch.where(torch.arange(u.shape[-1]) % 2 == 0, -5.0 + 1e-3 * u, -1e-3 * u),
}
LOWP_T, LOWP_K = 150, 32  # 150 tokens: not a multiple of any chunk size below


def lowp_case(decay: str, dtype: torch.dtype):
    """q, k, v, g, beta, S0 (nonempty) rounded to `dtype` (the state to float32, the compute
    dtype), and the float64 recurrence on exactly those values."""
    q, k, v, _, beta, S0 = random_inputs(2, LOWP_T, 2, LOWP_K, 16, seed=21)
    u = torch.rand(q.shape, generator=torch.Generator().manual_seed(22), dtype=F64)
    low = [x.to(dtype) for x in (q, k, v, DECAYS[decay](u), beta)]
    S0 = S0.float()
    return low, S0, kda_recurrent(*(x.double() for x in low), 1.0, S0.double())


def lowp_tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """(o, S) tolerances on the relative 2-norm error: difftest's error model of the KDA
    recurrence (difftest/components/sequence.py, docs/tolerances.md), 6 T + 2 roundings and
    T K + K accumulated products on the chain, each at the float32 compute precision (their
    errors add in quadrature, the state map being non-expansive), plus one rounding of o to the
    storage dtype; S stays float32 (no storage rounding)."""
    model = KDARecurrenceComponent().error_model({"P": 0, "T": LOWP_T, "K": LOWP_K})
    name = str(dtype).removeprefix("torch.")
    return tolerance(model, name), tolerance(dataclasses.replace(model, out_stores=0), name)


def rel_l2(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double() - want).norm() / want.norm())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("decay", list(DECAYS))
@pytest.mark.parametrize("chunk", [16, 32, 36, 48, 64, 128])
def test_chunked_low_precision_matches_float64_recurrent(chunk, decay, dtype):
    """Any chunk size in float32 compute (the old e^{±(G - G_mid)} form overflowed to NaN from
    chunk 36 at g = -5), from a nonempty state, T not a multiple of the chunk."""
    low, S0, (o64, S64) = lowp_case(decay, dtype)
    o, S = kda_chunked(*low, 1.0, S0, chunk_size=chunk)
    assert o.dtype == dtype and S.dtype == torch.float32
    assert bool(torch.isfinite(o).all()) and bool(torch.isfinite(S).all())
    tol_o, tol_S = lowp_tolerances(dtype)
    assert rel_l2(o, o64) <= tol_o
    assert rel_l2(S, S64) <= tol_S


def lowp_failures(chunk: int, decay: str, dtype: torch.dtype) -> list[str]:
    """What `test_chunked_low_precision_matches_float64_recurrent` checks, as a list of failures."""
    low, S0, (o64, S64) = lowp_case(decay, dtype)
    o, S = kda_chunked(*low, 1.0, S0, chunk_size=chunk)
    tol_o, tol_S = lowp_tolerances(dtype)
    fails = [f"{n} not finite" for n, x in (("o", o), ("S", S)) if not bool(torch.isfinite(x).all())]
    fails += [f"o off by {rel_l2(o, o64):.1e} > {tol_o:.1e}"] * (not rel_l2(o, o64) <= tol_o)
    return fails + [f"S off by {rel_l2(S, S64):.1e} > {tol_S:.1e}"] * (not rel_l2(S, S64) <= tol_S)


def mid_reference_intra(qk: torch.Tensor, alpha: torch.Tensor):
    """Planted bug, the form `kda_chunked` used before: `kda._intra_chunk` with e^{G_t-G_s} formed
    as e^{G_t-G_m} e^{G_m-G_s} about the chunk's middle token m (exact algebra, but the factors
    reach e^{5C/2} at the gate floor g = -5, past float32's e^{88.7} from C = 36)."""
    q, k, G = qk[..., 0, :], qk[..., 1, :], alpha.log().cumsum(dim=-2)
    m = G[..., G.shape[-2] // 2 : G.shape[-2] // 2 + 1, :]
    up, down = (G - m).exp(), (m - G).exp()
    M = ((q * up) @ (k * down).mT).tril()
    P = ((k * up) @ (k * down).mT).tril(-1)
    return torch.stack([M, P], dim=-2), qk * G.exp()[..., None, :], k * (G[..., -1:, :] - G).exp(), G[..., -1, :].exp()


@pytest.mark.parametrize("chunk", [16, 32, 36, 48, 64])
def test_float64_chunked_equals_recurrent_at_gate_floor_and_random_decay(chunk):
    """float64 at every chunk size (150 tokens, nonempty state): equal to ~1e-12."""
    for decay in ("floor", None):
        q, k, v, g, beta, S0 = random_inputs(2, LOWP_T, 2, 8, 5, seed=41)
        g = torch.full_like(g, -5.0) if decay == "floor" else g
        o_r, S_r = kda_recurrent(q, k, v, g, beta, 0.7, S0)
        o_c, S_c = kda_chunked(q, k, v, g, beta, 0.7, S0, chunk_size=chunk)
        torch.testing.assert_close(o_c, o_r, rtol=0, atol=1e-12)
        torch.testing.assert_close(S_c, S_r, rtol=0, atol=1e-12)


DIAGONAL_BLOCKS = kda._diagonal_blocks


def unmasked_pairwise_diagonal(qk: torch.Tensor, alpha: torch.Tensor):
    """Planted bug: `kda._diagonal_blocks` with M and P as the pairwise e^{G_t-G_s} with no mask
    (s > t kept in M: positive exponents, up to 5 * 15 at the gate floor, and wrong entries above
    the diagonal); its per-token factors are the real ones."""
    G = alpha.log().cumsum(dim=-2)
    kd = (G[..., :, None, :] - G[..., None, :, :]).exp() * qk[..., None, :, 1, :]
    mp = kd @ qk.mT  # [..., t, s, q|k]
    return torch.stack([mp[..., 0], mp[..., 1].tril(-1)], dim=-2), *DIAGONAL_BLOCKS(qk, alpha)[1:]


def test_planted_unmasked_exponent_is_caught(monkeypatch):
    """Still finite in float32 at the gate floor, but wrong, and the error-model tolerance catches it."""
    assert lowp_failures(16, "floor", torch.float32) == []
    monkeypatch.setattr(kda, "_diagonal_blocks", unmasked_pairwise_diagonal)
    fails = lowp_failures(16, "floor", torch.float32)
    assert fails and not any("finite" in f for f in fails)


def test_planted_mid_reference_factoring_gives_nan_from_chunk_36(monkeypatch):
    """The old e^{±(G - G_mid)} form over whole chunks: exact in float64, passes in float32 up to
    chunk 32, NaN from chunk 36 at the gate floor, and the check catches it."""
    monkeypatch.setattr(kda, "SUB_CHUNK", 1 << 30)  # one sub-chunk per chunk: the planted form sees the whole chunk
    monkeypatch.setattr(kda, "_intra_chunk", mid_reference_intra)
    q, k, v, g, beta, S0 = random_inputs(1, 40, 2, 4, 3, seed=43)
    for chunk in (8, 36):
        torch.testing.assert_close(kda_chunked(q, k, v, g, beta, 1.0, S0, chunk_size=chunk)[0],
                                   kda_recurrent(q, k, v, g, beta, 1.0, S0)[0], rtol=0, atol=1e-11)
    assert lowp_failures(32, "floor", torch.float32) == []
    for chunk in (36, 48, 64):
        assert any("not finite" in f for f in lowp_failures(chunk, "floor", torch.float32)), chunk


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_low_precision_tolerance_fails_zero_and_one_percent(dtype):
    _, _, (o64, S64) = lowp_case("mixed", dtype)
    for tol, want in zip(lowp_tolerances(dtype), (o64, S64)):
        assert rel_l2(torch.zeros_like(want), want) > tol
        assert rel_l2(1.01 * want, want) > tol


@pytest.mark.parametrize("name", ["naive_recurrent_kda", "naive_chunk_kda"])
def test_matches_fla_naive(name):
    """fla computes in float32 internally: agreement to ~1e-6, not machine precision."""
    naive = importlib.import_module("fla.ops.kda.naive")  # a test dependency (scripts/setup)
    fn = getattr(naive, name)
    q, k, v, g, beta, S0 = random_inputs(2, 64, 2, 5, 7, seed=4)
    o_ours, S_ours = kda_recurrent(q, k, v, g, beta, 1.0, S0)
    kwargs = {"chunk_size": 16} if name == "naive_chunk_kda" else {}
    o_fla, S_fla = fn(q, k, v, g, beta, scale=1.0, initial_state=S0, output_final_state=True, **kwargs)
    torch.testing.assert_close(o_fla.to(F64), o_ours, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(S_fla.to(F64), S_ours, rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def tiny_kda_layer():
    model = random_model(load_config(TINY), seed=5, dtype=F64)
    return model.model.layers[0].self_attn


def test_layer_prefill_equals_recurrent_steps(tiny_kda_layer):
    layer = tiny_kda_layer
    x = torch.randn(2, 23, layer.q_proj.in_features, dtype=F64, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        y_prefill, st_prefill = layer(x, layer.initial_state(2, x))
        st, ys = layer.initial_state(2, x), []
        for t in range(x.shape[1]):
            y, st = layer(x[:, t : t + 1], st)
            ys.append(y)
    torch.testing.assert_close(torch.cat(ys, 1), y_prefill, rtol=0, atol=1e-12)
    for a, b in zip(vars(st).values(), vars(st_prefill).values()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_retention_in_paper_bounds(tiny_kda_layer):
    """e^-5 < alpha < 1 over R; in floating point the sigmoid saturates for large inputs,
    so only the closed bounds hold there."""
    layer = tiny_kda_layer
    gen = torch.Generator().manual_seed(8)
    for amp, strict in ((0.3, True), (50.0, False)):
        x = amp * torch.randn(1, 40, layer.q_proj.in_features, dtype=F64, generator=gen)
        with torch.no_grad():
            g = layer.prepare(x, layer.initial_state(1, x))[3]
        if strict:
            assert bool((g > -5).all()) and bool((g < 0).all())
        else:
            assert bool((g >= -5).all()) and bool((g <= 0).all())


def test_short_conv_matches_torch_conv1d(tiny_kda_layer):
    conv = tiny_kda_layer.q_conv1d
    D, _, W = conv.weight.shape
    x = torch.randn(2, 9, D, dtype=F64, generator=torch.Generator().manual_seed(12))
    with torch.no_grad():
        ours, window = conv(x, x.new_zeros(2, W - 1, D))
        expected = torch.nn.functional.conv1d(x.transpose(1, 2), conv.weight, padding=W - 1, groups=D)[..., :9]
    torch.testing.assert_close(ours, torch.nn.functional.silu(expected.transpose(1, 2)), rtol=0, atol=1e-14)
    assert torch.equal(window, x[:, -(W - 1) :])


def test_decay_gate_matches_fla_lowerbound_gate(tiny_kda_layer):
    gate_mod = importlib.import_module("fla.ops.kda.gate")
    layer = tiny_kda_layer
    x = torch.randn(1, 12, layer.q_proj.in_features, dtype=F64, generator=torch.Generator().manual_seed(13))
    with torch.no_grad():
        g_ours = layer.prepare(x, layer.initial_state(1, x))[3]
        raw = layer.f_b_proj(layer.f_a_proj(x)).view(1, 12, layer.H, layer.K)
        g_fla = gate_mod.naive_kda_lowerbound_gate(raw, layer.A_log, layer.dt_bias, -5.0, torch.float64)
    torch.testing.assert_close(g_ours, g_fla, rtol=1e-6, atol=1e-6)  # fla computes in float32


@pytest.mark.gpu  # fla's Triton chunk_kda needs a CUDA device
def test_fla_chunk_kda_matches_ours_on_gpu():
    from pybridge.kda_fla import fla_chunk_kda

    q, k, v, g, beta, S0 = random_inputs(2, 100, 2, 64, 64, seed=7, dtype=torch.float32)
    o_ref, S_ref = kda_chunked(*(x.double() for x in (q, k, v, g, beta)), 1.0, S0.double())
    o, S = fla_chunk_kda(*(x.cuda() for x in (q, k, v, g, beta)), 1.0, S0.cuda())
    torch.testing.assert_close(o.cpu().double(), o_ref, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(S.cpu().double(), S_ref, rtol=2e-3, atol=2e-3)
