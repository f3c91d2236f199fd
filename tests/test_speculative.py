"""EAGLE-3 draft and speculative decoding (pybridge.eagle, pybridge.speculative; spec §2.14).

Expected values come from computations that do not go through the code under test: serial
greedy decoding (`generate`, and a target fed one token at a time), a target fed exactly the
kept tokens (never the rejected ones), difftest's NumPy decoder, exact rational enumeration of
the sampling rule's branches, and the worked example of the report.
"""

import json
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from scipy.stats import chisquare

from difftest import runner
from difftest.components.speculative import PlannedProposer
from pybridge import speculative
from pybridge.__main__ import main
from pybridge.checkpoint import random_model, save_checkpoint
from pybridge.config import config_from_dict, load_config
from pybridge.eagle import (
    draft_config_from_dict,
    load_draft,
    load_draft_config,
    random_draft,
    save_draft,
    target_pass,
)
from pybridge.errors import CheckpointError, ConfigError, InputError
from pybridge.kda import KDAState
from pybridge.model import K3Cache
from pybridge.speculative import (
    EagleProposer,
    SpeculativeDecoder,
    speculative_generate,
    verify,
)

F64 = torch.float64
TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "config.json"
torch.set_num_threads(1)
PROMPT = [7, 3, 41, 12]
ALPHA = 1e-3  # significance of the chi-square tests (probability that a correct sampler fails: 0.1 %)


@pytest.fixture(scope="module")
def model():
    return random_model(load_config(TINY), seed=0, dtype=F64)


@pytest.fixture(scope="module")
def draft():
    return random_draft(load_draft_config(TINY), seed=1, dtype=F64)


def tensors(cache: K3Cache) -> list[torch.Tensor]:
    return [t for st in cache.layers for t in vars(st).values()]


def bitwise_equal(a: K3Cache, b: K3Cache) -> bool:
    return a.length == b.length and all(torch.equal(x, y) for x, y in zip(tensors(a), tensors(b), strict=True))


def max_diff(a: K3Cache, b: K3Cache) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(tensors(a), tensors(b), strict=True))


# ---- the draft model --------------------------------------------------------------------------


def test_draft_config_reads_the_tiny_fixture():
    dcfg = load_draft_config(TINY)
    assert (dcfg.layer_index, dcfg.feature_layers) == (5, (1, 3, 5))
    assert dcfg.target == load_config(TINY)  # the target's reader accepts the draft's fields


@pytest.mark.parametrize("change, field", [
    (lambda d: d.pop("num_nextn_predict_layers"), "num_nextn_predict_layers"),
    (lambda d: d.update(num_nextn_predict_layers=0), "num_nextn_predict_layers"),
    (lambda d: d.pop("eagle_config"), "eagle_config"),
    (lambda d: d["eagle_config"].update(eagle_aux_hidden_state_layer_ids=[1, 1, 5]), "eagle_aux_hidden_state_layer_ids"),
    (lambda d: d["eagle_config"].update(eagle_aux_hidden_state_layer_ids=[1, 3, 6]), "eagle_aux_hidden_state_layer_ids"),
    (lambda d: d["eagle_config"].update(eagle_aux_hidden_state_layer_ids=[1, 3]), "eagle_aux_hidden_state_layer_ids"),
])
def test_bad_draft_fields_name_the_field(change, field, tmp_path):
    raw = json.loads(TINY.read_text())
    change(raw)
    config_from_dict(raw)  # the target still reads
    with pytest.raises(ConfigError, match=field):
        draft_config_from_dict(raw)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=str(tmp_path)):
        load_draft_config(tmp_path)


def test_draft_parameters_have_hub_names(model, draft):
    """`fc` (EAGLE-3), the MTP names (DeepSeek-V3) and the names of a K3 MLA + MoE layer at hub index 5."""
    layer4 = {n.replace("model.layers.4.", "model.layers.5.") for n in model.state_dict() if n.startswith("model.layers.4.")}
    mtp = {f"model.layers.5.{n}.weight" for n in
           ("enorm", "hnorm", "eh_proj", "output_attn_res_norm", "output_attn_res_proj", "shared_head.norm", "shared_head.head")}
    shapes = {n: list(t.shape) for n, t in draft.state_dict().items()}
    assert set(shapes) == {"fc.weight"} | layer4 | mtp
    assert (shapes["fc.weight"], shapes["model.layers.5.eh_proj.weight"], shapes["model.layers.5.shared_head.head.weight"]) == \
        ([24, 72], [24, 48], [101, 24])


def test_initial_fusion_equals_high_feature(draft):
    """fc = [0 0 I] returns the high feature bit for bit (Lean `initial_fusion_eq_high`); any
    other fc is f_low F_0 + f_mid F_1 + f_high F_2 with F_i = fc.weight[:, iD:(i+1)D]^T."""
    g = torch.Generator().manual_seed(3)
    low, mid, high = (1e3 * torch.randn(2, 5, 24, generator=g, dtype=F64) for _ in range(3))
    assert torch.equal(draft.fc(low, mid, high), high)
    fc = type(draft.fc)(24).to(F64)
    with torch.no_grad():
        fc.weight.copy_(torch.randn(24, 72, generator=g, dtype=F64))
    F = [fc.weight[:, 24 * i : 24 * (i + 1)].T for i in range(3)]
    torch.testing.assert_close(fc(low, mid, high), low @ F[0] + mid @ F[1] + high @ F[2], rtol=1e-13, atol=1e-9)


def test_target_features_are_the_reads_of_numpy_decoder(model):
    """Feature id i is the AttnRes read entering layer i; id 5 the final read (difftest's decoder records both)."""
    from difftest.components.decoder import DecoderStepComponent

    with torch.no_grad():
        _, _, feats = target_pass(model, torch.tensor([PROMPT]), None, (1, 3, 5))
    dec = DecoderStepComponent().decoder(model)
    for t, tok in enumerate(PROMPT):
        dec.step(tok)
        want = (dec.record[2]["seq_read"], dec.record[4]["seq_read"], dec.record["final_read"])
        for f, w in zip(feats, want):
            np.testing.assert_allclose(f[0, t].numpy(), w, rtol=0, atol=1e-12)


def test_forward_leaves_its_input_cache_untouched(model):
    """The snapshot contract rollback relies on: a pass never writes into the cache it is given."""
    with torch.no_grad():
        _, cache = model(torch.tensor([PROMPT]))
        before = [t.clone() for t in tensors(cache)]
        for impl in ("auto", "recurrent"):
            model.set_kda_impl(impl)
            model(torch.tensor([[5, 9, 60]]), cache)
            model(torch.tensor([[5]]), cache)
        model.set_kda_impl("auto")
    assert all(torch.equal(a, b) for a, b in zip(before, tensors(cache)))


def test_draft_checkpoint_round_trip_is_strict(draft, tmp_path):
    save_draft(draft, TINY, tmp_path / "d")
    back = load_draft(tmp_path / "d", F64)
    assert all(torch.equal(v, back.state_dict()[k]) for k, v in draft.state_dict().items())
    assert back.draft_config == draft.draft_config
    other = random_draft(load_draft_config(TINY), seed=2, dtype=F64)
    state = {k: v for k, v in other.state_dict().items() if k != "fc.weight"}
    save_file(state, str(tmp_path / "d" / "draft.safetensors"))
    with pytest.raises(CheckpointError, match="missing tensor 'fc.weight'"):
        load_draft(tmp_path / "d")


def cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """`python -m pybridge ARGS` in-process (the same entry point): (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["pybridge", *args])
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_generate_speculative_equals_serial(tmp_path, capsys, monkeypatch):
    """`generate --speculative K --draft DIR` prints generate's tokens; bad use is one error line."""
    save_checkpoint(random_model(load_config(TINY), seed=3), TINY, tmp_path / "k3")
    assert cli(monkeypatch, capsys, "make-random-draft", "--config", str(TINY), "--out", str(tmp_path / "draft"))[0] == 0
    gen = ("generate", "--checkpoint", str(tmp_path / "k3"), "--prompt-ids", "1,2,3", "--max-new-tokens", "9")
    serial = cli(monkeypatch, capsys, *gen)
    spec = cli(monkeypatch, capsys, *gen, "--speculative", "3", "--draft", str(tmp_path / "draft"))
    assert serial[0] == spec[0] == 0 and spec[1] == serial[1] and len(spec[1].split(",")) == 9
    for extra, fragment in ((("--speculative", "2"), "needs --draft"),
                            (("--speculative", "2", "--draft", str(tmp_path / "k3")), "missing tensor 'fc.weight'")):
        code, _, err = cli(monkeypatch, capsys, *gen, *extra)
        assert code == 2 and err.startswith("error: ") and fragment in err and "Traceback" not in err


# ---- (a) greedy: the serial tokens and the serial state -------------------------------------------

PATTERNS = {
    "all": [(3, 3), (2, 2), (4, 4)],
    "none": [(3, 0), (1, 0), (4, 0)],
    "partial": [(4, 2), (3, 1), (2, 1)],
    "zero": [(0, 0), (0, 0), (0, 0)],
    "mixed": [(3, 3), (0, 0), (4, 0), (2, 1), (1, 1)],
}


def run_pattern(model, plan: list[tuple[int, int]]) -> dict:
    """Decode by `plan` and compare after every step with (1) a target fed exactly the kept
    tokens chunk by chunk from the prompt's prefill (bitwise) and (2) the serial target, fed the
    prompt then one token at a time. Returns the figures."""
    n = 1 + sum(a + 1 for _, a in plan) + max(k for k, _ in plan) + 1
    oracle = model.generate(torch.tensor([PROMPT]), n)[0].tolist()
    dec = SpeculativeDecoder(model, PlannedProposer(oracle, plan, model.config.vocab_size))
    with torch.no_grad():
        dec.start(PROMPT)
        _, replay = model(torch.tensor([PROMPT]))
        _, serial = model(torch.tensor([PROMPT]))
        fed, worst, serial_bitwise = 0, 0.0, []
        for k, a in plan:
            pending = dec.pending
            rec = dec.step(k)
            assert rec.accepted == a and rec.emitted == oracle[fed + 1 : fed + a + 2]
            _, replay = model(torch.tensor([[pending, *rec.drafted[:a]]]), replay)
            assert bitwise_equal(dec.cache, replay), "the rolled-back state holds a trace of a rejected token"
            while fed < len(dec.tokens) - 1:
                _, serial = model(torch.tensor([[oracle[fed]]]), serial)
                fed += 1
            assert dec.cache.length == serial.length == len(PROMPT) + fed
            worst = max(worst, max_diff(dec.cache, serial))
            serial_bitwise.append(bitwise_equal(dec.cache, serial))
    assert dec.tokens == oracle[: len(dec.tokens)]
    return {"worst": worst, "serial_bitwise": serial_bitwise}


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_greedy_state_after_every_pattern(model, pattern):
    """Tokens = generate's; state = a target fed only the kept tokens, bit for bit; = the serial
    state bit for bit while every step was a one-token pass (no drafts, or all rejected), else to
    1e-12 (the verify pass is the prefill path, which rounds differently from the decode path:
    measured at most 2.7e-14 absolute)."""
    figures = run_pattern(model, PATTERNS[pattern])
    if pattern in ("none", "zero"):
        assert all(figures["serial_bitwise"])
    assert figures["worst"] <= 1e-12


@pytest.mark.parametrize("k", [1, 3])
def test_greedy_with_the_eagle_draft_emits_generate(model, draft, k):
    want = model.generate(torch.tensor([PROMPT]), 10)
    got = speculative_generate(model, EagleProposer(model, draft), torch.tensor([PROMPT]), 10, k)
    assert torch.equal(got, want)


def test_a_draft_equal_to_the_target_is_accepted_in_full(model):
    """The draft the verify pass agrees with: all drafts accepted, k + 1 tokens per step."""
    oracle = model.generate(torch.tensor([PROMPT]), 20)[0].tolist()
    plan = [(3, 3)] * 4
    dec = SpeculativeDecoder(model, PlannedProposer(oracle, plan, model.config.vocab_size))
    dec.start(PROMPT)
    assert [dec.step(3).accepted for _ in plan] == [3] * 4
    assert dec.tokens == oracle[:17]


def test_sampled_decoding_runs_and_is_reproducible(model, draft):
    runs = [speculative_generate(model, EagleProposer(model, draft), torch.tensor([PROMPT]), 9, 2,
                                 torch.Generator().manual_seed(5)) for _ in range(2)]
    assert torch.equal(runs[0], runs[1]) and runs[0].shape == (1, 9)
    assert int(runs[0].min()) >= 0 and int(runs[0].max()) < model.config.vocab_size


def test_bad_arguments_raise_input_error(model, draft):
    prop = EagleProposer(model, draft)
    with pytest.raises(InputError, match="one sequence"):
        speculative_generate(model, prop, torch.tensor([PROMPT, PROMPT]), 4, 2)
    with pytest.raises(InputError, match="max_new_tokens"):
        speculative_generate(model, prop, torch.tensor([PROMPT]), -1, 2)
    dec = SpeculativeDecoder(model, prop)
    with pytest.raises(InputError, match="before start"):
        dec.step(1)
    dec.start(PROMPT)
    with pytest.raises(InputError, match="draft length"):
        dec.step(-1)
    greedy_only = SpeculativeDecoder(model, PlannedProposer(list(range(20)), [(2, 0)], 101), torch.Generator())
    greedy_only.start(PROMPT)
    with pytest.raises(InputError, match="draft distributions"):
        greedy_only.step(2)


# ---- (b) sampled: the one-token output distribution is the target's ------------------------------


def output_distribution(p: list[Fraction], q: list[Fraction]) -> list[Fraction]:
    """P(emitted token = y) of one speculative position, by enumerating the draws with their
    exact weights: the draft token x (weight q(x)), accept (a(x)) or reject (1 - a(x)), then the
    correction y (r(y)). Every branch weight must be a probability."""
    n = len(p)
    a = [speculative.acceptance_probability(p[x], q[x]) for x in range(n)]
    assert all(0 <= w <= 1 for w in a), f"acceptance weights outside [0, 1]: {a}"
    reject = sum(q[x] * (1 - a[x]) for x in range(n))
    r = speculative.residual_distribution(np.array(p, dtype=object), np.array(q, dtype=object)) if reject else [0] * n
    assert all(0 <= w <= 1 for w in r) and (not reject or sum(r) == 1)
    return [q[y] * a[y] + reject * r[y] for y in range(n)]


WORKED_P = [Fraction(55, 100), Fraction(30, 100), Fraction(15, 100)]
WORKED_Q = [Fraction(25, 100), Fraction(45, 100), Fraction(30, 100)]


def test_worked_example_exactly():
    """p = (0.55, 0.30, 0.15), q = (0.25, 0.45, 0.30): overlap 0.70, TV 0.30, the correction
    always picks token 0, and the emitted token has distribution p exactly."""
    p, q = WORKED_P, WORKED_Q
    overlap = sum(min(a, b) for a, b in zip(p, q))
    tv = sum(abs(a - b) for a, b in zip(p, q)) / 2
    assert (overlap, tv) == (Fraction(7, 10), Fraction(3, 10)) and overlap == 1 - tv
    accepted = sum(q[x] * speculative.acceptance_probability(p[x], q[x]) for x in range(3))
    assert accepted == overlap
    assert list(speculative.residual_distribution(np.array(p, dtype=object), np.array(q, dtype=object))) == [1, 0, 0]
    assert output_distribution(p, q) == p


def random_rational(rng: np.random.Generator, n: int) -> list[Fraction]:
    w = rng.integers(0, 7, n)
    w[rng.integers(0, n)] += 1  # not all zero
    return [Fraction(int(x), int(w.sum())) for x in w]


def test_output_distribution_is_the_target_exactly_on_random_rationals():
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(2, 6))
        p, q = random_rational(rng, n), random_rational(rng, n)
        assert output_distribution(p, q) == p, (p, q)


def sampled_first_tokens(p_v: torch.Tensor, q_v: torch.Tensor, trials: int, seed: int) -> np.ndarray:
    """Counts of the first token `verify` emits for one draft drawn from q (the whole rule:
    draw, accept test, correction), over `trials` runs."""
    g = torch.Generator().manual_seed(seed)
    counts = np.zeros(len(p_v), np.int64)
    p_tv, q_kv = torch.stack([p_v, p_v]), q_v[None]
    for _ in range(trials):
        x = int(torch.multinomial(q_v, 1, generator=g))
        j, nxt = verify(p_tv, [x], q_kv, g)
        counts[x if j == 1 else nxt] += 1
    return counts


def chi_square_p_value(p_v: torch.Tensor, q_v: torch.Tensor, trials: int = 10000, seed: int = 0) -> float:
    counts = sampled_first_tokens(p_v, q_v, trials, seed)
    return float(chisquare(counts, trials * p_v.numpy()).pvalue)


def random_pq(seed: int, n: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    return tuple(torch.tensor(rng.dirichlet(np.ones(n)), dtype=F64) for _ in range(2))


@pytest.mark.parametrize("seed", [20, 21])
def test_sampled_first_token_distribution_chi_square(seed):
    """10 000 runs of the sampled rule on random p, q over 6 tokens: the emitted token's
    counts against p, chi-square with 5 degrees of freedom, at significance ALPHA."""
    p, q = random_pq(seed)
    assert chi_square_p_value(p, q) > ALPHA


def test_sampled_loop_passes_verify_the_target_rows_and_the_draws_distributions(model, draft, monkeypatch):
    """The rows the loop hands to `verify`: p = softmax of an independent target pass over the
    prompt, the pending token and the drafts (to 1e-12); q = distributions with every drafted
    token inside their support."""
    seen = []
    real = speculative.verify
    monkeypatch.setattr(speculative, "verify", lambda p, d, q, g: seen.append((p, list(d), q)) or real(p, d, q, g))
    dec = SpeculativeDecoder(model, EagleProposer(model, draft), torch.Generator().manual_seed(2))
    dec.start(PROMPT)
    for k in (3, 0, 2):
        before = list(dec.tokens)
        dec.step(k)
        p_tv, drafted, q_kv = seen[-1]
        with torch.no_grad():
            logits, _ = model(torch.tensor([PROMPT + before + drafted]))
        want = torch.softmax(logits[0, -(k + 1):], dim=-1)
        torch.testing.assert_close(p_tv, want, rtol=0, atol=1e-12)
        if k:
            torch.testing.assert_close(q_kv.sum(-1), torch.ones(k, dtype=F64), rtol=0, atol=1e-12)
            assert all(float(q_kv[i, d]) > 0 for i, d in enumerate(drafted))
        else:
            assert q_kv is None


@pytest.mark.slow
def test_sampled_loop_joint_distribution_chi_square():
    """The whole sampled loop (EAGLE draft, one verify pass per step, rollback) on the tiny model
    with a 5-token vocabulary: the two tokens after a fixed start, over 800 runs, against the
    target's joint p(t1) p(t2 | t1) from independent target passes; chi-square with the cells of
    expected count < 5 merged, at significance ALPHA."""
    import dataclasses

    from pybridge.eagle import DraftConfig

    cfg = dataclasses.replace(load_config(TINY), vocab_size=5)
    target = random_model(cfg, seed=0, dtype=F64)
    dec = SpeculativeDecoder(target, EagleProposer(target, random_draft(DraftConfig(cfg, 5, (1, 3, 5)), 1, F64)),
                             torch.Generator().manual_seed(0))
    t0 = dec.start([1, 2, 3])
    with torch.no_grad():
        p1 = torch.softmax(target(torch.tensor([[1, 2, 3, t0]]))[0][0, -1], -1)
        p2 = torch.stack([torch.softmax(target(torch.tensor([[1, 2, 3, t0, t]]))[0][0, -1], -1) for t in range(5)])
    expected = (800 * p1[:, None] * p2).numpy().ravel()
    counts = np.zeros(25)
    for _ in range(800):
        run = dataclasses.replace(dec, proposer=dataclasses.replace(dec.proposer), tokens=list(dec.tokens))
        while len(run.tokens) < 3:
            run.step(2)
        counts[run.tokens[1] * 5 + run.tokens[2]] += 1
    small = expected < 5
    merged_c, merged_e = np.append(counts[~small], counts[small].sum()), np.append(expected[~small], expected[small].sum())
    assert chisquare(merged_c, merged_e).pvalue > ALPHA


# ---- (c) planted bugs -----------------------------------------------------------------------------


def test_planted_acceptance_q_over_p_is_caught(monkeypatch):
    monkeypatch.setattr(speculative, "acceptance_probability", lambda p, q: 1 if q >= p else q / p)
    assert output_distribution(WORKED_P, WORKED_Q) != WORKED_P
    p, q = random_pq(20)
    assert chi_square_p_value(p, q) < ALPHA


def test_planted_acceptance_without_the_min_is_caught(monkeypatch):
    """p/q without the min: the branch weight exceeds 1. (A sampler that tests u < p/q behaves as
    with the min, since u < 1; the weight itself is what is wrong.)"""
    monkeypatch.setattr(speculative, "acceptance_probability", lambda p, q: p / q)
    with pytest.raises(AssertionError, match="outside"):
        output_distribution(WORKED_P, WORKED_Q)


def test_planted_resampling_from_the_target_is_caught(monkeypatch):
    """On rejection, drawing from p (or retrying) instead of the residual is not lossless."""
    monkeypatch.setattr(speculative, "residual_distribution", lambda p, q: p / p.sum())
    assert output_distribution(WORKED_P, WORKED_Q) != WORKED_P
    p, q = random_pq(20)
    assert chi_square_p_value(p, q) < ALPHA


def keep_conv_windows_of_the_verify_pass(monkeypatch):
    """Planted: roll back the KDA recurrent state and the MLA caches, not the conv windows (also
    run through difftest by the mutation suite, `test_difftest_mutations.py`)."""
    right = speculative.rolled_back

    def buggy(target, snapshot, verified, fed, keep):
        state = right(target, snapshot, verified, fed, keep)
        layers = [KDAState(v.conv_q, v.conv_k, v.conv_v, s.recurrent) if isinstance(s, KDAState) else s
                  for s, v in zip(state.layers, verified.layers)]
        return K3Cache(layers, state.length)

    monkeypatch.setattr(speculative, "rolled_back", buggy)


@pytest.mark.parametrize("pattern", ["none", "partial"])
def test_planted_conv_window_rollback_is_caught(model, monkeypatch, pattern):
    keep_conv_windows_of_the_verify_pass(monkeypatch)
    with pytest.raises(AssertionError):
        run_pattern(model, PATTERNS[pattern])


# ---- difftest -------------------------------------------------------------------------------------


def test_difftest_component_is_green():
    result = runner.run(["speculative_step"], seed=0, use_lean=False, shrink=False, dtypes=["float64"])
    assert result.passed and {r.case.kind for r in result.results} == {"all", "none", "partial", "zero", "mixed"}
    legs = {(c.impl, c.ref) for r in result.results for c in r.comparisons}
    assert legs == {("torch serial", "numpy"), ("torch speculative", "numpy"), ("torch speculative", "torch serial")}

