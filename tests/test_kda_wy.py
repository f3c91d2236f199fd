"""The WY/UT chunk form of KDA (`lean/KimiK3/Sequence/KDAWY.lean`, proved equal to the recurrence
in `KDAWYChunk.lean`: `KimiK3.KDA.wyChunk_eq_run`, `wyChunkedRun_eq_run`), evaluated exactly.

A plain `Fraction` transcription of the Lean definitions (forward substitution, decay products
between positions, no inverse) is checked against an exact token recurrence on random chunks,
and on the Lean example (`KDAWYExamples.lean`: outputs 7/4, 9/32, 69/32, state [5/32; 2], hand
values) together with pybridge's `kda_chunked`. Planted bugs: an off-by-one decay in the
triangular matrix, and decays shifted by one token in pybridge's input."""

import math
import random
from fractions import Fraction as Fr

import pytest
import torch

from pybridge.kda import kda_chunked, kda_recurrent

Vec = list[Fr]
Token = tuple[Vec, Vec, Vec, Vec, Fr]  # q, k, v, alpha (retention), beta

F64 = torch.float64


def recurrence(S: list[Vec], tokens: list[Token]) -> tuple[list[Vec], list[Vec]]:
    """S' = (I - b k k^T) Diag(a) S + b k v^T, o = S'^T q (the spec's factored order), exact."""
    outs = []
    for q, k, v, a, b in tokens:
        d = [[a[i] * x for x in row] for i, row in enumerate(S)]
        corr = [sum(k[i] * d[i][j] for i in range(len(k))) for j in range(len(v))]
        S = [[d[i][j] + b * k[i] * (v[j] - corr[j]) for j in range(len(v))] for i in range(len(k))]
        outs.append([sum(q[i] * S[i][j] for i in range(len(q))) for j in range(len(v))])
    return S, outs


def wy_chunk(S0: list[Vec], c: list[Token], shift: int = 0) -> tuple[list[Vec], list[Vec]]:
    """The Lean `wyChunk`: D[a,b) = prod_{a<=r<b} alpha_r; A[t,s] = beta_t <k_t, D[s+1,t+1) k_s>;
    u, w by forward substitution; e_t = u_t - S0^T w_t; o_t and S_n. `shift` plants a bug
    (D[s+1-shift, t+1) in A)."""
    K, V = len(S0), len(S0[0])

    def D(a: int, b: int) -> Vec:
        return [math.prod((c[r][3][i] for r in range(a, b)), start=Fr(1)) for i in range(K)]

    def gram(x: Vec, t: int, s: int, lo: int) -> Fr:
        d = D(lo, t + 1)
        return sum(x[i] * d[i] * c[s][1][i] for i in range(K))

    n = len(c)
    A = [[c[t][4] * gram(c[t][1], t, s, s + 1 - shift) for s in range(t)] for t in range(n)]
    u: list[Vec] = []
    w: list[Vec] = []
    for t in range(n):
        q, k, v, _, b = c[t]
        d0 = D(0, t + 1)
        u.append([b * v[j] - sum(A[t][s] * u[s][j] for s in range(t)) for j in range(V)])
        w.append([b * d0[i] * k[i] - sum(A[t][s] * w[s][i] for s in range(t)) for i in range(K)])
    e = [[u[t][j] - sum(w[t][i] * S0[i][j] for i in range(K)) for j in range(V)] for t in range(n)]
    outs = []
    for t in range(n):
        q, d0 = c[t][0], D(0, t + 1)
        M = [gram(q, t, s, s + 1) for s in range(t + 1)]
        outs.append([sum(d0[i] * q[i] * S0[i][j] for i in range(K)) + sum(M[s] * e[s][j] for s in range(t + 1))
                     for j in range(V)])
    dn = D(0, n)
    S = [[dn[i] * S0[i][j] + sum(D(s + 1, n)[i] * c[s][1][i] * e[s][j] for s in range(n)) for j in range(V)]
         for i in range(K)]
    return S, outs


def wy_chunked(S: list[Vec], tokens: list[Token], size: int, shift: int = 0) -> tuple[list[Vec], list[Vec]]:
    """The Lean `wyChunkedRun` over chunks of `size` tokens (the last one shorter)."""
    outs: list[Vec] = []
    for t0 in range(0, len(tokens), size):
        S, o = wy_chunk(S, tokens[t0 : t0 + size], shift)
        outs += o
    return S, outs


def random_tokens(T: int, K: int, V: int, seed: int) -> tuple[list[Vec], list[Token]]:
    rng = random.Random(seed)
    f = lambda: Fr(rng.randint(-8, 8), rng.randint(1, 4))  # noqa: E731
    unit = lambda: Fr(rng.randint(1, 8), 8)  # noqa: E731  retention in (0, 1]
    S0 = [[f() for _ in range(V)] for _ in range(K)]
    toks = [([f() for _ in range(K)], [f() for _ in range(K)], [f() for _ in range(V)],
             [unit() for _ in range(K)], Fr(rng.randint(0, 4), 4)) for _ in range(T)]
    return S0, toks


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wy_form_equals_recurrence_exactly(size, seed):
    S0, toks = random_tokens(7, 3, 2, seed)
    assert wy_chunked(S0, toks, size) == recurrence(S0, toks)


@pytest.mark.parametrize("size", [2, 3, 7])
def test_planted_off_by_one_decay_is_caught(size):
    S0, toks = random_tokens(7, 3, 2, 0)
    assert wy_chunked(S0, toks, size, shift=1) != recurrence(S0, toks)


# The Lean example (KDAWYExamples.lean): K = 2, V = 1, S0 = [1; 2], three tokens.
EXAMPLE: list[Token] = [
    ([Fr(1), Fr(0)], [Fr(1), Fr(0)], [Fr(3)], [Fr(1, 2), Fr(1)], Fr(1, 2)),
    ([Fr(0), Fr(1)], [Fr(1), Fr(1)], [Fr(-1)], [Fr(1, 2), Fr(1, 2)], Fr(1, 4)),
    ([Fr(1), Fr(1)], [Fr(0), Fr(1)], [Fr(2)], [Fr(1), Fr(1, 2)], Fr(1)),
]
EXAMPLE_S0 = [[Fr(1)], [Fr(2)]]
EXAMPLE_OUT = [Fr(7, 4), Fr(9, 32), Fr(69, 32)]  # by hand, as in KDAWYExamples.lean
EXAMPLE_S = [Fr(5, 32), Fr(2)]


def test_lean_example_values():
    runs = (recurrence(EXAMPLE_S0, EXAMPLE), wy_chunked(EXAMPLE_S0, EXAMPLE, 3), wy_chunked(EXAMPLE_S0, EXAMPLE, 2))
    for S, o in runs:
        assert [x[0] for x in o] == EXAMPLE_OUT and [r[0] for r in S] == EXAMPLE_S


def example_tensors(shift: int = 0) -> tuple[torch.Tensor, ...]:
    """The example as pybridge inputs [1, 3, 1, *] (g = log alpha); `shift` rolls the decays by
    one token (a planted bug)."""

    def col(j: int) -> torch.Tensor:
        return torch.tensor([[float(x) for x in tok[j]] for tok in EXAMPLE], dtype=F64).view(1, 3, 1, -1)

    g = col(3).log().roll(shift, dims=1)
    beta = torch.tensor([float(tok[4]) for tok in EXAMPLE], dtype=F64).view(1, 3, 1)
    S0 = torch.tensor([[1.0], [2.0]], dtype=F64).view(1, 1, 2, 1)
    return col(0), col(1), col(2), g, beta, S0


@pytest.mark.parametrize("chunk", [1, 2, 3, 16])
def test_pybridge_kda_chunked_reads_the_lean_example(chunk):
    q, k, v, g, beta, S0 = example_tensors()
    o, S = kda_chunked(q, k, v, g, beta, 1.0, S0, chunk_size=chunk)
    want_o = torch.tensor([float(x) for x in EXAMPLE_OUT], dtype=F64)
    want_S = torch.tensor([float(x) for x in EXAMPLE_S], dtype=F64)
    assert torch.allclose(o.flatten(), want_o, rtol=0, atol=1e-14)
    assert torch.allclose(S.flatten(), want_S, rtol=0, atol=1e-14)


def test_planted_shifted_decay_in_pybridge_input_is_caught():
    q, k, v, g, beta, S0 = example_tensors(shift=1)
    want = torch.tensor([float(x) for x in EXAMPLE_OUT], dtype=F64)
    for o, _ in (kda_chunked(q, k, v, g, beta, 1.0, S0, chunk_size=3), kda_recurrent(q, k, v, g, beta, 1.0, S0)):
        assert (o.flatten() - want).abs().max() > 1e-2
