"""Sequence mixers: the KDA recurrence, the KDA layer and Gated MLA (k3-spec §2.2–2.3).

Every case is a batch of B rows with different sequences: P prefix tokens, then T more. The
torch legs run the P + T tokens in one prefill call (`torch`), as the prefix call followed by
calls split at several boundaries (`torch_split`: one shorter than the conv width, one crossing a
KDA chunk boundary without being a multiple of the chunk, `inputs.pieces`), and one token at a
time (`torch_decode` / `torch_recurrent`). The NumPy and graph legs run token by token.

Low precision (`lowp_checks`), on the case rounded to the run's dtype: (a) the prefill of all
tokens from the zero state, (b) the prefill of the T tokens from the NumPy state after the
prefix, (c) single decode steps from the NumPy state at sampled positions, each state rounded
to its storage dtype (KDA windows and MLA caches: the run's dtype; the KDA recurrent state: the
compute dtype), against the NumPy reference on the same rounded inputs and states.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from difftest import numpy_ref as ref
from difftest.case import Case
from difftest.components.base import (F64, ErrorModel, ExecComponent, LowpCheck, compiled, load_module, round_to,
                                      rounded, t64, to_np, torch_config)
from difftest.inputs import gaussian, magnitude, pieces, unit_rows
from pybridge import adapter, kda, mla
from pybridge.layers import compute_dtype

#: decode steps checked at low precision: every position up to this many, else this many spread out
DECODE_POSITIONS = 16


def decode_positions(n: int) -> list[int]:
    return list(range(n)) if n <= DECODE_POSITIONS else sorted({int(round(x)) for x in np.linspace(0, n - 1, DECODE_POSITIONS)})


def seq_sizes(default: dict[str, int], kind: str, long_T: int, thorough: bool) -> dict[str, int]:
    """Sizes per kind: `long` has T = long_T, `short` one token and no prefix; `--thorough`
    doubles B and lengthens the prefix."""
    s = dict(default)
    if kind == "long":
        s["T"] = long_T
    if kind == "short":
        s.update(P=0, T=1)
    if thorough:
        s.update(B=2 * s["B"], P=s["P"] + 19 if s["P"] else 0)
    return s


def seq_shrinks(sizes: dict[str, int]) -> list[dict[str, int]]:
    out = []
    for b, p, t in ((1, 0, 1), (1, 0, 2), (1, 1, 2), (sizes["B"], 0, 2), (1, sizes["P"], 1), (1, sizes["P"], sizes["T"])):
        cand = {**sizes, "B": min(b, sizes["B"]), "P": min(p, sizes["P"]), "T": min(t, sizes["T"])}
        if cand != sizes and cand not in out:
            out.append(cand)
    return out


def split_calls(sizes: dict[str, int], conv_width: int) -> list[tuple[int, int]]:
    """(start, stop) token ranges of the `torch_split` calls: the prefix, then `pieces`."""
    out, at = ([(0, sizes["P"])] if sizes["P"] else []), sizes["P"]
    for n in pieces(sizes["T"], conv_width):
        out.append((at, at + n))
        at += n
    return out


class SequenceMixer(ExecComponent):
    """A sequence mixer over B rows of P prefix tokens and T more (`seq_sizes`); its `long` kind
    (T = `long_T`) is left out of the default run's Lean leg."""

    lean_skip_kinds = ("long",)  # hundreds to thousands of tokens: minutes in the interpreter
    long_T: int = 256
    #: the case tensors with a leading batch axis (the rest are weights)
    batched: tuple[str, ...] = ("xs",)
    #: the layers' (`kda_layer`, `mla`) low-precision outputs of a stage: stored in the run's dtype,
    #: and kept at the compute precision (no storage rounding)
    lowp_stored: tuple[str, ...] = ()
    lowp_computed: tuple[str, ...] = ()

    def sizes_for_kind(self, kind, thorough=False):
        return seq_sizes(self.default_sizes, kind, self.long_T, thorough)

    def shrink_sizes(self, sizes):
        return seq_shrinks(sizes)

    def lean_case(self, case):
        """Row 0 of the batch, its P + T tokens in one sequence (the Lean leg runs one row)."""
        n = case.sizes["P"] + case.sizes["T"]
        return dataclasses.replace(case, sizes={k: v for k, v in case.sizes.items() if k not in ("B", "P")} | {"T": n},
                                   tensors={k: v[0] if k in self.batched else v for k, v in case.tensors.items()})

    @staticmethod
    def prefill_split_decode(m: torch.nn.Module, xs_btd: torch.Tensor, calls: list[tuple[int, int]],
                             outputs) -> dict[str, dict[str, np.ndarray]]:
        """A layer from its initial state over all tokens in one call (`torch`), in the token
        ranges `calls` (`torch_split`) and one token at a time (`torch_decode`); `outputs(y, state)`
        its outputs."""
        T, out = xs_btd.shape[1], {}
        with torch.no_grad():
            for impl, ranges in (("torch", [(0, T)]), ("torch_split", calls), ("torch_decode", [(i, i + 1) for i in range(T)])):
                st, ys = m.initial_state(xs_btd.shape[0], xs_btd), []
                for a, b in ranges:
                    y, st = m(xs_btd[:, a:b], st)
                    ys.append(y)
                out[impl] = outputs(torch.cat(ys, 1), st)
        return out

    def stage_checks(self, label: str, got: dict, want: dict, sizes: dict[str, int], tokens: int) -> list[LowpCheck]:
        """A layer's low-precision stage over `tokens` tokens against the NumPy reference: each
        output of `lowp_stored`, then of `lowp_computed` (no storage rounding)."""
        model = self.error_model({**sizes, "P": 0, "T": tokens})
        kept = dataclasses.replace(model, out_stores=0)
        return ([LowpCheck(label, "numpy", k, got[k], want[k], model) for k in self.lowp_stored]
                + [LowpCheck(label, "numpy", k, got[k], want[k], kept) for k in self.lowp_computed])


class KDARecurrenceComponent(SequenceMixer):
    name = "kda_recurrence"
    summary = "KDA heads over B sequences from given states (Lean KDA.runF; kda_chunked, kda_recurrent)"
    template = "kda_recurrence"
    kinds = {
        "random": "retention uniform in (e^-5, 1), unit keys, B rows from different states",
        "long": "2,048 tokens: 128 chunk boundaries, decay over a long horizon",
        "decay": "retention at both ends: half the key channels near e^-5, half within 1e-3 of 1",
        "small": "values and states ×1e-3",
        "large": "values and states ×1e3",
        "short": "one token, no prefix",
    }
    default_sizes = {"B": 2, "H": 2, "K": 5, "V": 7, "P": 5, "T": 20}
    long_T = 2048
    batched = ("state", "q", "k", "v", "retention", "beta")
    graph_file = "kda_packed_step_tiny.json"

    def graph_fits(self, case):
        return all(case.sizes[k] == self.default_sizes[k] for k in "HKV")

    def sample(self, rng, kind, sizes):
        B, H, K, V, n = sizes["B"], sizes["H"], sizes["K"], sizes["V"], sizes["P"] + sizes["T"]
        floor, s = np.exp(-5.0), magnitude(kind)
        if kind == "decay":
            near_one = 1.0 - 1e-3 * rng.random((B, n, H, K))
            near_floor = floor * (1.0 + 0.1 * rng.random((B, n, H, K)))
            retention = np.where(np.arange(K) % 2 == 0, near_one, near_floor)
        else:
            retention = floor + (1.0 - floor) * rng.random((B, n, H, K))
        return {"state": gaussian(rng, (B, H, K, V), s), "q": unit_rows(rng, (B, n, H, K)), "k": unit_rows(rng, (B, n, H, K)),
                "v": gaussian(rng, (B, n, H, V), s), "retention": retention, "beta": rng.random((B, n, H))}

    def _kernel_args(self, t: dict, lo: int, hi: int, dtype, device) -> tuple:
        x = {k: t64(t[k][:, lo:hi]).to(device=device, dtype=dtype) for k in ("q", "k", "v", "retention", "beta")}
        # g = log(retention) in the compute dtype, as the layer computes its decay
        return x["q"], x["k"], x["v"], x["retention"].to(compute_dtype(dtype)).log(), x["beta"]

    def torch_outputs(self, case, dtype, device, state: np.ndarray | None = None, lo: int = 0):
        """The kernels over tokens `lo`.. from `state` (default: the case's), in dtype."""
        t, n = case.tensors, case.sizes["P"] + case.sizes["T"]
        s0 = t64(t["state"] if state is None else state).to(device=device, dtype=compute_dtype(dtype))
        out = {}
        for impl, kernel in (("torch", kda.kda_chunked), ("torch_recurrent", kda.kda_recurrent)):
            o, s = kernel(*self._kernel_args(t, lo, n, dtype, device), 1.0, s0)
            out[impl] = {"o": to_np(o), "state": to_np(s)}
        if lo == 0:
            s, outs = s0, []
            for a, b in split_calls(case.sizes, torch_config().kda_conv_size):
                o, s = kda.kda_chunked(*self._kernel_args(t, a, b, dtype, device), 1.0, s)
                outs.append(o)
            out["torch_split"] = {"o": to_np(torch.cat(outs, 1)), "state": to_np(s)}
        return out

    def numpy_states(self, case: Case, state: np.ndarray | None = None, lo: int = 0,
                     hi: int | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
        """(outputs [B, hi − lo, H, V], the states before every token lo..hi and after the last)."""
        t = case.tensors
        S = np.array(t["state"] if state is None else state, dtype=np.float64)
        n, outs, states = case.sizes["P"] + case.sizes["T"] if hi is None else hi, [], [S.copy()]
        for i in range(lo, n):
            o = np.empty((S.shape[0], S.shape[1], S.shape[3]))
            for b in range(S.shape[0]):
                for h in range(S.shape[1]):
                    o[b, h], S[b, h] = ref.kda_head_step(S[b, h], t["q"][b, i, h], t["k"][b, i, h], t["v"][b, i, h],
                                                         t["retention"][b, i, h], t["beta"][b, i, h])
            outs.append(o)
            states.append(S.copy())
        return np.stack(outs, 1), states

    def numpy_outputs(self, case):
        o, states = self.numpy_states(case)
        return {"o": o, "state": states[-1]}

    def graph_outputs(self, case, device):
        cg, t = compiled(self.graph_file, F64, device), case.tensors
        n, outs, final = case.sizes["P"] + case.sizes["T"], [], []
        for b in range(case.sizes["B"]):
            state, rows = t64(t["state"][b]), []
            for i in range(n):
                r = cg({}, {"state": state, "key": t64(t["k"][b, i]), "value": t64(t["v"][b, i]),
                            "retention": t64(t["retention"][b, i]), "beta": t64(t["beta"][b, i]), "query": t64(t["q"][b, i])})
                state = r["next_state"]
                rows.append(to_np(r["output"]))
            outs.append(np.stack(rows))
            final.append(to_np(state))
        return {"o": np.stack(outs), "state": np.stack(final)}

    def lean_slice(self, case, out):
        return {k: v[0] for k, v in out.items()}

    def lean_output_shapes(self, case):
        H, K, V, T = (case.sizes[k] for k in "HKVT")
        return {**{f"o{h}": (T, V) for h in range(H)}, **{f"state{h}": (K, V) for h in range(H)}}

    def lean_postprocess(self, case, out):
        H = case.sizes["H"]
        return {"o": np.stack([out[f"o{h}"] for h in range(H)], axis=1),
                "state": np.stack([out[f"state{h}"] for h in range(H)])}

    def lowp_checks(self, case, dtype, device):
        rc, cd = rounded(case, dtype), compute_dtype(dtype)
        n, P, checks = rc.sizes["P"] + rc.sizes["T"], rc.sizes["P"], []

        def stage(label: str, lo: int, state: np.ndarray, impls: tuple[str, ...]) -> None:
            S = round_to(state, cd)
            want_o, states = self.numpy_states(rc, S, lo)
            got = self.torch_outputs(rc, dtype, device, S, lo)
            for impl in impls:
                model = self.error_model({**rc.sizes, "P": 0, "T": n - lo})
                checks.append(LowpCheck(f"{impl} {label}", "numpy", "o", got[impl]["o"], want_o, model))
                checks.append(LowpCheck(f"{impl} {label}", "numpy", "state", got[impl]["state"], states[-1],
                                        dataclasses.replace(model, out_stores=0)))

        stage("prefill", 0, rc.tensors["state"], ("torch", "torch_recurrent"))
        _, states = self.numpy_states(rc)
        if P:
            stage(f"from prefix {P}", P, states[P], ("torch",))
        steps = decode_positions(n)
        got_o, want_o, got_s, want_s = [], [], [], []
        for i in steps:
            S = round_to(states[i], cd)
            w_o, w_states = self.numpy_states(rc, S, i, i + 1)
            o, s = kda.kda_recurrent(*self._kernel_args(rc.tensors, i, i + 1, dtype, device), 1.0,
                                     t64(S).to(device=device, dtype=cd))
            got_o.append(to_np(o)[:, 0])
            want_o.append(w_o[:, 0])
            got_s.append(to_np(s))
            want_s.append(w_states[-1])
        one_step = self.error_model({**rc.sizes, "P": 0, "T": 1})
        checks.append(LowpCheck("torch_recurrent decode", "numpy", "o", np.stack(got_o, 1), np.stack(want_o, 1), one_step,
                                note=f"{len(steps)} steps, each from the reference state"))
        checks.append(LowpCheck("torch_recurrent decode", "numpy", "state", np.stack(got_s), np.stack(want_s),
                                dataclasses.replace(one_step, out_stores=0)))
        return checks

    def error_model(self, sizes):
        # per token: decay, correction (dot K), delta and write (4 ops) on the state; the state
        # map is non-expansive (retention <= 1, |k| = 1, beta in [0, 1]), so errors add over the
        # tokens; the read is a dot of length K
        T, K = sizes["P"] + sizes["T"], sizes["K"]
        return ErrorModel(stores=6 * T + 2, accum=T * K + K, amp=1.0)


class KDALayerComponent(SequenceMixer):
    name = "kda_layer"
    summary = "KDA layer over B sequences (Lean KDA.layerForward; KimiDeltaAttention prefill, split prefill and decode)"
    template = "kda_layer"
    kinds = {
        "random": "unit-scale inputs, B rows, a prefix then a split chunk",
        "long": "256 tokens after the prefix: many chunk boundaries",
        "decay": "decay logits ×30: retention at both ends of (e^-5, 1)",
        "small": "inputs and weights ×1e-3: q/k near the L2 ε, output norm near its ε",
        "large": "inputs and weights ×1e3: saturated β, gates and decay",
        "eps": "inputs ×1e-4: the conv outputs' L2 norms and the output RMSNorm in the ε regime",
        "short": "one token, no prefix",
    }
    default_sizes = {"D": 24, "H": 2, "K": 5, "V": 7, "W": 4, "R": 15, "B": 2, "P": 5, "T": 20}
    graph_file = "kda_layer_step_tiny.json"
    stacked = {"query_conv": "query_conv.{i}", "key_conv": "key_conv.{i}", "value_conv": "value_conv.{i}"}
    lowp_stored = ("y", "window_q", "window_k", "window_v")
    lowp_computed = ("heads",)  # the KDA state stays float32

    def config(self, sizes):
        return torch_config(hidden_size=sizes["D"], kda_num_heads=sizes["H"], kda_head_k_dim=sizes["K"],
                            kda_head_v_dim=sizes["V"], kda_conv_size=sizes["W"], kda_decay_rank=sizes["R"])

    def graph_fits(self, case):
        return all(case.sizes[k] == self.default_sizes[k] for k in "DHKVWR")

    def sample(self, rng, kind, sizes):
        D, H, K, V, W, R, B = (sizes[k] for k in "DHKVWRB")
        n = sizes["P"] + sizes["T"]
        s = magnitude(kind)
        decay_up = gaussian(rng, (R, H, K), s * R**-0.5) * (30.0 if kind == "decay" else 1.0)
        return {
            "query_proj": gaussian(rng, (D, H, K), s * D**-0.5), "key_proj": gaussian(rng, (D, H, K), s * D**-0.5),
            "value_proj": gaussian(rng, (D, H, V), s * D**-0.5),
            "query_conv": gaussian(rng, (W, H, K), W**-0.5), "key_conv": gaussian(rng, (W, H, K), W**-0.5),
            "value_conv": gaussian(rng, (W, H, V), W**-0.5),
            "decay_down": gaussian(rng, (D, R), s * D**-0.5), "decay_up": decay_up,
            "decay_bias": gaussian(rng, (H, K), 0.5),
            "decay_log_scale": gaussian(rng, (H,), 0.5), "beta_proj": gaussian(rng, (D, H), s * D**-0.5),
            "gate_weight": gaussian(rng, (D, H, V), s * D**-0.5), "out_norm_scale": rng.uniform(0.5, 1.5, V),
            "output_proj": gaussian(rng, (H, V, D), s * (H * V) ** -0.5),
            "xs": gaussian(rng, (B, n, D), s * (1e-4 if kind == "eps" else 1.0)),
        }

    def module(self, case: Case, dtype: torch.dtype, device: str) -> kda.KimiDeltaAttention:
        """pybridge's layer with the case's weights (hub layout through `pybridge.adapter`)."""
        cfg = self.config(case.sizes)
        spec = {k: t64(v) for k, v in self.spec_params(case).items() if k != "xs"}
        return load_module(kda.KimiDeltaAttention(cfg), adapter.to_hub(adapter.kda_rules(cfg), spec), dtype, device)

    def torch_state(self, case: Case, windows, heads, dtype, device) -> kda.KDAState:
        """A pybridge state from NumPy windows (`[B, W−1, H, n]` each) and heads, rounded to their
        storage dtypes."""
        B = case.sizes["B"]
        conv = [t64(round_to(w.reshape(B, w.shape[1], -1), dtype)).to(device=device, dtype=dtype) for w in windows]
        return kda.KDAState(*conv, t64(round_to(heads, compute_dtype(dtype))).to(device=device, dtype=compute_dtype(dtype)))

    @staticmethod
    def state_out(st: kda.KDAState, H: int) -> dict[str, np.ndarray]:
        B, W1 = st.conv_q.shape[:2]
        return {"heads": to_np(st.recurrent), "window_q": to_np(st.conv_q).reshape(B, W1, H, -1),
                "window_k": to_np(st.conv_k).reshape(B, W1, H, -1), "window_v": to_np(st.conv_v).reshape(B, W1, H, -1)}

    def torch_outputs(self, case, dtype, device):
        m = self.module(case, dtype, device)
        xs = t64(case.tensors["xs"]).to(device=device, dtype=dtype)
        return self.prefill_split_decode(m, xs, split_calls(case.sizes, case.sizes["W"]),
                                         lambda y, st: {"y": to_np(y), **self.state_out(st, case.sizes["H"])})

    def numpy_run(self, case: Case, windows=None, heads=None, lo: int = 0, hi: int | None = None) -> dict:
        """Tokens lo..hi of every row from the given (default: zero) state: `y`, the final state,
        and `states` (the state before every token and after the last)."""
        p, cfg, sz = self.spec_params(case), self.own_config(), case.sizes
        B, H, K, V, W = (sz[k] for k in "BHKVW")
        hi = sz["P"] + sz["T"] if hi is None else hi
        if windows is None:
            windows = tuple(np.zeros((B, W - 1, H, n)) for n in (K, K, V))
            heads = np.zeros((B, H, K, V))
        ys, states = [], []
        for b in range(B):
            win, hd, row, st = tuple(w[b] for w in windows), heads[b], [], [(tuple(w[b] for w in windows), heads[b])]
            for i in range(lo, hi):
                y, win, hd = ref.kda_layer_step(win, hd, case.tensors["xs"][b, i], p, cfg)
                row.append(y)
                st.append((win, hd))
            ys.append(np.stack(row))
            states.append(st)
        final = states_at(states, -1)
        return {"y": np.stack(ys), "heads": final[1], "window_q": final[0][0], "window_k": final[0][1],
                "window_v": final[0][2], "states": states}

    def numpy_outputs(self, case):
        return {k: v for k, v in self.numpy_run(case).items() if k != "states"}

    def graph_outputs(self, case, device):
        cg, t, sz = compiled(self.graph_file, F64, device), case.tensors, case.sizes
        spec = {k: t64(v) for k, v in self.spec_params(case).items() if k != "xs"}
        params = adapter.graph_params(cg.graph, spec)
        ys, heads = [], []
        for b in range(sz["B"]):
            window = [torch.zeros(sz["D"], dtype=F64) for _ in range(sz["W"] - 1)]
            hd, row = torch.zeros(sz["H"], sz["K"], sz["V"], dtype=F64), []
            for i in range(sz["P"] + sz["T"]):
                r = cg(params, {"x": t64(t["xs"][b, i]), **{f"window.{j}": w for j, w in enumerate(window)}, "heads": hd})
                window, hd = [r[f"window_next.{j}"] for j in range(sz["W"] - 1)], r["heads_next"]
                row.append(to_np(r["output"]))
            ys.append(np.stack(row))
            heads.append(to_np(hd))
        return {"y": np.stack(ys), "heads": np.stack(heads)}

    def lean_slice(self, case, out):
        return {"y": out["y"][0]}

    def lean_output_shapes(self, case):
        return {"y": (case.sizes["T"], case.sizes["D"])}

    def lowp_checks(self, case, dtype, device):
        rc, sz = rounded(case, dtype), case.sizes
        n, P, H = sz["P"] + sz["T"], sz["P"], sz["H"]
        m = self.module(rc, dtype, device)
        xs = t64(rc.tensors["xs"]).to(device=device, dtype=dtype)
        full = self.numpy_run(rc)

        def state_at(i: int) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
            """The NumPy state before token i, rounded to its storage dtypes."""
            win, hd = states_at(full["states"], i)
            return tuple(round_to(w, dtype) for w in win), round_to(hd, compute_dtype(dtype))

        with torch.no_grad():
            y, st = m(xs, m.initial_state(sz["B"], xs))
        checks = self.stage_checks("torch prefill", {"y": to_np(y), **self.state_out(st, H)}, full, sz, n)
        if P:
            win, hd = state_at(P)
            want = self.numpy_run(rc, win, hd, P)
            with torch.no_grad():
                y, st = m(xs[:, P:], self.torch_state(rc, win, hd, dtype, device))
            checks += self.stage_checks(f"torch from prefix {P}", {"y": to_np(y), **self.state_out(st, H)}, want, sz, sz["T"])
        got, want = [], []
        for i in decode_positions(n):
            win, hd = state_at(i)
            w = self.numpy_run(rc, win, hd, i, i + 1)
            with torch.no_grad():
                y, st = m(xs[:, i : i + 1], self.torch_state(rc, win, hd, dtype, device))
            got.append({"y": to_np(y), **self.state_out(st, H)})
            want.append(w)
        keys = self.lowp_stored + self.lowp_computed
        return checks + self.stage_checks("torch_decode steps", {k: np.stack([g[k] for g in got], 1) for k in keys},
                                          {k: np.stack([w[k] for w in want], 1) for k in keys}, sz, 1)

    def error_model(self, sizes):
        D, K, V, W, R, H = (sizes[k] for k in "DKVWRH")
        T = sizes["P"] + sizes["T"]
        # projection (D) and conv (W), SiLU, L2 norm (K), decay (R, sigmoid, exp), the
        # recurrence over T tokens (as kda_recurrence), per-head RMSNorm (V), gate, output (H V)
        return ErrorModel(stores=20 + 6 * T, accum=D + W + K + R + T * K + V + H * V, amp=4.0)


def states_at(states: list[list], i: int) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The batch's state at token index `i` (windows stacked over rows, heads stacked)."""
    rows = [st[i] for st in states]
    return tuple(np.stack([r[0][j] for r in rows]) for j in range(3)), np.stack([r[1] for r in rows])


class MLAComponent(SequenceMixer):
    name = "mla"
    summary = "Gated MLA over B sequences (Lean GatedMLA.forward; GatedMLA prefill, split prefill and decode)"
    template = "mla"
    kinds = {
        "random": "unit-scale inputs, B rows, a prefix then a split chunk",
        "long": "256 tokens after the prefix",
        "sharp": "query and key up-projections ×4: peaked attention",
        "small": "inputs and weights ×1e-3: the latent RMSNorms in the ε regime",
        "large": "inputs and weights ×1e3",
        "eps": "inputs ×1e-4: both latent RMSNorms near their ε",
        "short": "one token, no prefix",
    }
    default_sizes = {"D": 24, "H": 3, "Lq": 10, "Lkv": 11, "C": 9, "R": 14, "V": 8, "B": 2, "P": 5, "T": 11}
    graph_file = "mla_packed_step_tiny.json"  # one decode step with 2 cached tokens: compared at t = 2
    lowp_stored = ("y", "latent", "shared_key")

    def config(self, sizes):
        return torch_config(hidden_size=sizes["D"], num_attention_heads=sizes["H"], q_lora_rank=sizes["Lq"],
                            kv_lora_rank=sizes["Lkv"], qk_nope_head_dim=sizes["C"], qk_rope_head_dim=sizes["R"],
                            v_head_dim=sizes["V"])

    def graph_fits(self, case):
        return all(case.sizes[k] == self.default_sizes[k] for k in ("D", "H", "Lq", "Lkv", "C", "R", "V")) and \
            case.sizes["P"] + case.sizes["T"] >= 3

    def sample(self, rng, kind, sizes):
        D, H, Lq, Lkv, C, R, V, B = (sizes[k] for k in ("D", "H", "Lq", "Lkv", "C", "R", "V", "B"))
        n, s = sizes["P"] + sizes["T"], magnitude(kind)
        sharp = 4.0 if kind == "sharp" else 1.0
        return {
            "query_down": gaussian(rng, (D, Lq), s * D**-0.5), "query_norm_scale": rng.uniform(0.5, 1.5, Lq),
            "kv_down": gaussian(rng, (D, Lkv), s * D**-0.5), "kv_norm_scale": rng.uniform(0.5, 1.5, Lkv),
            "shared_key_down": gaussian(rng, (D, R), s * D**-0.5),
            "query_content_up": gaussian(rng, (H, Lq, C), sharp * Lq**-0.5),
            "query_shared_up": gaussian(rng, (H, Lq, R), sharp * Lq**-0.5),
            "key_up": gaussian(rng, (H, Lkv, C), sharp * Lkv**-0.5), "value_up": gaussian(rng, (H, Lkv, V), s * Lkv**-0.5),
            "gate_weight": gaussian(rng, (D, H, V), s * D**-0.5), "output_weight": gaussian(rng, (H, V, D), s * (H * V) ** -0.5),
            "xs": gaussian(rng, (B, n, D), s * (1e-4 if kind == "eps" else 1.0)),
        }

    def module(self, case: Case, dtype: torch.dtype, device: str) -> mla.GatedMLA:
        cfg = self.config(case.sizes)
        spec = {k: t64(v) for k, v in case.tensors.items() if k != "xs"}
        return load_module(mla.GatedMLA(cfg), adapter.to_hub(adapter.mla_rules(cfg), spec), dtype, device)

    @staticmethod
    def cache_out(c: mla.MLACache) -> dict[str, np.ndarray]:
        return {"latent": to_np(c.latent), "shared_key": to_np(c.shared_key)}

    def torch_outputs(self, case, dtype, device):
        m = self.module(case, dtype, device)
        xs = t64(case.tensors["xs"]).to(device=device, dtype=dtype)
        out = self.prefill_split_decode(m, xs, split_calls(case.sizes, torch_config().kda_conv_size),
                                        lambda y, c: {"y": to_np(y), **self.cache_out(c)})
        if case.sizes["P"] + case.sizes["T"] >= 3:
            for impl in out.values():
                impl["y_t2"] = impl["y"][:, 2]
        return out

    def numpy_run(self, case: Case, latent=None, shared=None, lo: int = 0, hi: int | None = None) -> dict:
        """Tokens lo..hi of every row after the given (default: empty) caches `[B, lo, ·]`."""
        p, cfg, sz = case.tensors, self.own_config(), case.sizes
        hi = sz["P"] + sz["T"] if hi is None else hi
        ys, lats, shs = [], [], []
        for b in range(sz["B"]):
            lat = np.zeros((0, sz["Lkv"])) if latent is None else latent[b]
            sh = np.zeros((0, sz["R"])) if shared is None else shared[b]
            row = []
            for i in range(lo, hi):
                y, lat, sh = ref.mla_step(lat, sh, case.tensors["xs"][b, i], p, cfg)
                row.append(y)
            ys.append(np.stack(row))
            lats.append(lat)
            shs.append(sh)
        out = {"y": np.stack(ys), "latent": np.stack(lats), "shared_key": np.stack(shs)}
        if lo == 0 and hi >= 3:
            out["y_t2"] = out["y"][:, 2]
        return out

    def numpy_outputs(self, case):
        return self.numpy_run(case)

    def graph_outputs(self, case, device):
        """The packed decode step at position 2 of every row; the cache of tokens 0 and 1 is the
        NumPy reference's (its own entries are checked through `y` of every leg)."""
        ref_out = self.numpy_run(case, hi=2)
        cg, cfg = compiled(self.graph_file, F64, device), self.own_config()
        params = {k: t64(v) for k, v in case.tensors.items() if k != "xs"}
        ys = []
        for b in range(case.sizes["B"]):
            r = cg(params, {"latent_cache": t64(ref_out["latent"][b]), "shared_key_cache": t64(ref_out["shared_key"][b]),
                            "x": t64(case.tensors["xs"][b, 2]), "score_scale": t64(np.array(cfg["score_scale"]))})
            ys.append(to_np(r["output"]))
        return {"y_t2": np.stack(ys)}

    def lean_slice(self, case, out):
        return {k: out[k][0] for k in ("y", "y_t2") if k in out}

    def lean_output_shapes(self, case):
        return {"y": (case.sizes["T"], case.sizes["D"])}

    def lean_postprocess(self, case, out):
        return {**out, "y_t2": out["y"][2]} if case.sizes["T"] >= 3 else out

    def lowp_checks(self, case, dtype, device):
        rc, sz = rounded(case, dtype), case.sizes
        n, P = sz["P"] + sz["T"], sz["P"]
        m = self.module(rc, dtype, device)
        xs = t64(rc.tensors["xs"]).to(device=device, dtype=dtype)
        full = self.numpy_run(rc)

        def cache(i: int) -> mla.MLACache:
            lat, sh = (round_to(full[k][:, :i], dtype) for k in ("latent", "shared_key"))
            return mla.MLACache(t64(lat).to(device=device, dtype=dtype), t64(sh).to(device=device, dtype=dtype))

        with torch.no_grad():
            y, c = m(xs, m.initial_state(sz["B"], xs))
        checks = self.stage_checks("torch prefill", {"y": to_np(y), **self.cache_out(c)}, full, sz, n)
        if P:
            c0 = cache(P)
            want = self.numpy_run(rc, to_np(c0.latent), to_np(c0.shared_key), P)
            with torch.no_grad():
                y, c = m(xs[:, P:], c0)
            checks += self.stage_checks(f"torch from prefix {P}", {"y": to_np(y), **self.cache_out(c)}, want, sz, sz["T"])
        got, want = [], []
        for i in decode_positions(n):
            c0 = cache(i)
            w = self.numpy_run(rc, to_np(c0.latent), to_np(c0.shared_key), i, i + 1)
            with torch.no_grad():
                y, c = m(xs[:, i : i + 1], c0)
            got.append({"y": to_np(y)[:, 0], "latent": to_np(c.latent)[:, -1], "shared_key": to_np(c.shared_key)[:, -1]})
            want.append({"y": w["y"][:, 0], "latent": w["latent"][:, -1], "shared_key": w["shared_key"][:, -1]})
        return checks + self.stage_checks("torch_decode steps", {k: np.stack([g[k] for g in got], 1) for k in got[0]},
                                          {k: np.stack([w[k] for w in want], 1) for k in want[0]}, sz, n)

    def error_model(self, sizes):
        D, Lq, Lkv, C, R, V, H = (sizes[k] for k in ("D", "Lq", "Lkv", "C", "R", "V", "H"))
        T = sizes["P"] + sizes["T"]
        # two down projections (D) with RMSNorm (Lq / Lkv), up projections (Lq, Lkv), scores
        # (C + R), softmax over T (amplifies absolute score errors by 2 max|score|), the value
        # mix (T, Lkv), gate and output (H V)
        return ErrorModel(stores=30, accum=D + 2 * Lkv + Lq + C + R + 2 * T + H * V, amp=4.0)
