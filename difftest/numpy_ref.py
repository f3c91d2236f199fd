"""difftest's own float64 NumPy transcription of the spec equations (k3-spec §2.2–2.7).

It shares no code with pybridge: it reads spec parameters (`[in, out]` layout, the names of
`pybridge.adapter`, which are the graphs' names) and configuration values from difftest's own
reader (`difftest.config.own_reading`). It is plain and slow by design: one token, one head, one
expert at a time, in the spec's own order. It serves as the reference of every low-precision
check (evaluated on the run's rounded inputs) and as a float64 leg beside Lean and the graphs.

States: a KDA layer keeps the q, k, v projections of the last `convWidth − 1` layer inputs
(oldest first; the Lean window of raw inputs, projected) and one `[K, V]` state per head; an
MLA layer keeps the (normalized KV latent, shared key) of every past token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

Params = dict[str, np.ndarray]


def sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def silu(x: np.ndarray) -> np.ndarray:
    return x * sigmoid(x)


def rms_norm(x: np.ndarray, eps: float, gain: np.ndarray | None = None) -> np.ndarray:
    """x / √(mean(x²) + ε) ⊙ gain over the last axis."""
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if gain is None else y * gain


def l2_normalize(x: np.ndarray, eps: float) -> np.ndarray:
    """x / √(Σx² + ε) over the last axis."""
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def soft_cap(cap: float, x: np.ndarray) -> np.ndarray:
    return cap * np.tanh(x / cap)


def situ(gate: np.ndarray, up: np.ndarray, gate_cap: float, up_cap: float) -> np.ndarray:
    """SiTU (report Eq. 18): softCap(c_g, g) · σ(g) · softCap(c_u, u); σ reads the uncapped gate."""
    return soft_cap(gate_cap, gate) * sigmoid(gate) * soft_cap(up_cap, up)


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- channel mixers ----------------------------------------------------------------------------

def expert(x: np.ndarray, gate_w: np.ndarray, up_w: np.ndarray, down_w: np.ndarray, cfg: dict) -> np.ndarray:
    """A SiTU expert `SiTU(x G, x U) D` (report Eq. 19) on rows `x [..., in]`."""
    return situ(x @ gate_w, x @ up_w, cfg["gate_cap"], cfg["up_cap"]) @ down_w


def router_scores(x_d: np.ndarray, router_de: np.ndarray) -> np.ndarray:
    """σ(x R), one column at a time (equal columns give bitwise equal scores)."""
    return sigmoid(np.array([np.dot(x_d, np.ascontiguousarray(router_de[:, e])) for e in range(router_de.shape[1])]))


def top_k(adjusted_e: np.ndarray, k: int) -> list[int]:
    """The k largest entries; equal entries go to the lower expert index (report §2.7)."""
    return sorted(range(len(adjusted_e)), key=lambda e: (-adjusted_e[e], e))[:k]


def latent_moe(x_d: np.ndarray, p: Params, cfg: dict, shared: int, experts: int,
               route: list[int] | None = None) -> tuple[np.ndarray, list[int], np.ndarray]:
    """Stable LatentMoE on one token (report Eq. 11–13): (output, route, adjusted scores). The
    route is the top-k of σ(xR) + b unless `route` is given; mixture weights use raw scores."""
    out = sum(expert(x_d, p[f"moe.shared.gate[{j}]"], p[f"moe.shared.up[{j}]"], p[f"moe.shared.down[{j}]"], cfg)
              for j in range(shared))
    raw = router_scores(x_d, p["router.weight"])
    adjusted = raw + p["router.bias"]
    chosen = top_k(adjusted, cfg["top_k"]) if route is None else [int(e) for e in route]
    weights = cfg["routed_scaling"] * raw[chosen] / raw[chosen].sum()
    z = x_d @ p["moe.downProject"]
    routed = sum(w * expert(z, p[f"moe.expert.gate[{e}]"], p[f"moe.expert.up[{e}]"], p[f"moe.expert.down[{e}]"], cfg)
                 for w, e in zip(weights, chosen))
    return out + rms_norm(routed, cfg["moe_eps"], p["moe.routedNormScale"]) @ p["moe.upProject"], chosen, adjusted


# --- depth ---------------------------------------------------------------------------------------

def retrieve(sources_sd: np.ndarray, query_d: np.ndarray, gain_d: np.ndarray, eps: float) -> np.ndarray:
    """AttnRes retrieval (report Eq. 9–10): softmax over sources of q · (gain ⊙ RMSNorm(v_i)),
    mixing the un-normalized v_i."""
    w = softmax(rms_norm(sources_sd, eps, gain_d) @ query_d)
    return w @ sources_sd


@dataclass
class Depth:
    """The per-token depth state (k3-spec §2.5): completed blocks (embedding first) and the
    partial block (None when empty) after `count` layers of the block."""

    blocks: list[np.ndarray]
    partial: np.ndarray | None = None
    count: int = 0
    after_seq: np.ndarray | None = field(default=None, repr=False)

    def sources(self) -> list[np.ndarray]:
        return self.blocks + ([] if self.partial is None else [self.partial])

    def with_sequence_output(self, seq_out: np.ndarray) -> list[np.ndarray]:
        self.after_seq = seq_out if self.partial is None else self.partial + seq_out
        return self.blocks + [self.after_seq]

    def finish(self, chan_out: np.ndarray, block_size: int) -> None:
        self.partial, self.count = self.after_seq + chan_out, self.count + 1
        if self.count == block_size:
            self.blocks, self.partial, self.count = self.blocks + [self.partial], None, 0


# --- KDA -----------------------------------------------------------------------------------------

def kda_head_step(state_kv: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, alpha: np.ndarray,
                  beta: float) -> tuple[np.ndarray, np.ndarray]:
    """One KDA head (report Eq. 1): S' = (I − β k kᵀ) Diag(α) S + β k vᵀ, read o = S'ᵀ q."""
    decayed = alpha[:, None] * state_kv
    new = decayed - beta * np.outer(k, k @ decayed) + beta * np.outer(k, v)
    return new.T @ q, new


def kda_project(x: np.ndarray, p: Params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The q, k, v projections of one raw layer input `x [D]`: `[H, K]`, `[H, K]`, `[H, V]`."""
    return tuple(np.einsum("d,dhn->hn", x, p[f"{n}_proj"]) for n in ("query", "key", "value"))


def kda_layer_step(windows: tuple[np.ndarray, np.ndarray, np.ndarray], heads_hkv: np.ndarray, x: np.ndarray,
                   p: Params, cfg: dict) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """One KDA layer token (k3-spec §2.2): (output, new windows, new head states). `windows` are
    the q, k, v projections of the last W − 1 raw inputs (`[W−1, H, n]`, oldest first): the
    projection is linear and per token, so this is the Lean window of raw inputs projected."""
    new_windows = tuple(np.concatenate([w, c[None]]) for w, c in zip(windows, kda_project(x, p)))
    W, H = new_windows[0].shape[0], heads_hkv.shape[0]

    def conv(name: str, rows: np.ndarray) -> np.ndarray:
        return silu(sum(p[f"{name}_conv.{t}"] * rows[t] for t in range(W)))

    q = l2_normalize(conv("query", new_windows[0]), cfg["l2_eps"])
    k = l2_normalize(conv("key", new_windows[1]), cfg["l2_eps"])
    v = conv("value", new_windows[2])
    z = np.einsum("r,rhk->hk", x @ p["decay_down"], p["decay_up"]) + p["decay_bias"]
    alpha = np.exp(cfg["log_floor"] * sigmoid(np.exp(p["decay_log_scale"])[:, None] * z))
    beta = sigmoid(x @ p["beta_proj"])
    gate = sigmoid(np.einsum("d,dhv->hv", x, p["gate_weight"]))
    new = np.empty_like(heads_hkv)
    y = np.zeros(p["output_proj"].shape[-1])
    for h in range(H):
        o, new[h] = kda_head_step(heads_hkv[h], q[h], k[h], v[h], alpha[h], beta[h])
        y += (rms_norm(cfg["query_scale"] * o, cfg["kda_out_eps"], p["out_norm_scale"]) * gate[h]) @ p["output_proj"][h]
    return y, tuple(w[1:] for w in new_windows), new


# --- MLA -----------------------------------------------------------------------------------------

def mla_step(latent_sl: np.ndarray, shared_sr: np.ndarray, x: np.ndarray, p: Params,
             cfg: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One Gated MLA token (k3-spec §2.3, Eq. 7) over the cache plus the token itself:
    (output, latent cache, shared-key cache), the token appended before attending."""
    eps = cfg["mla_latent_eps"]
    c_q = rms_norm(x @ p["query_down"], eps, p["query_norm_scale"])
    latent = np.concatenate([latent_sl, rms_norm(x @ p["kv_down"], eps, p["kv_norm_scale"])[None]])
    shared = np.concatenate([shared_sr, (x @ p["shared_key_down"])[None]])
    gate = sigmoid(np.einsum("d,dhv->hv", x, p["gate_weight"]))
    y = np.zeros(p["output_weight"].shape[-1])
    for h in range(p["key_up"].shape[0]):
        scores = cfg["score_scale"] * ((latent @ p["key_up"][h]) @ (c_q @ p["query_content_up"][h])
                                       + shared @ (c_q @ p["query_shared_up"][h]))
        o = softmax(scores) @ (latent @ p["value_up"][h])
        y += (gate[h] * o) @ p["output_weight"][h]
    return y, latent, shared


# --- the decoder token step -------------------------------------------------------------------------

@dataclass
class LayerState:
    """One layer's causal state: KDA (`windows`, `heads`, and the raw inputs `rows` the graph's
    window takes) or MLA (`latent`, `shared`)."""

    windows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    heads: np.ndarray | None = None
    rows: list[np.ndarray] = field(default_factory=list)
    latent: np.ndarray | None = None
    shared: np.ndarray | None = None


@dataclass
class Decoder:
    """The K3 decoder on one sequence (k3-spec §2.5), token by token, from spec parameters
    (`pybridge.adapter.hub_to_spec` names) and configuration values; `record` holds, per 1-based
    layer, the values of the last token (`seq_sources`, `seq_in`, `seq_out`, `chan_sources`,
    `chan_in`, `chan_out`, `scores`, `route`, the state before the token `state_in`)."""

    p: Params
    cfg: dict
    mla: tuple[bool, ...]
    moe: tuple[bool, ...]
    shared: int
    experts: int
    conv_width: int
    states: list[LayerState] = field(default_factory=list)
    record: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i, (is_mla, is_moe) in enumerate(zip(self.mla, self.moe)):
            q = f"layers.{i + 1}."
            for name, what in ((q + ("mla.kv_down" if is_mla else "kda.query_proj"), "MLA" if is_mla else "KDA"),
                               (q + ("router.weight" if is_moe else "mlp.gateWeight"), "MoE" if is_moe else "dense")):
                if name not in self.p:
                    raise ValueError(f"the schedule makes layer {i + 1} {what}, but the parameters have no '{name}'")
            if is_mla:
                Lkv, R = self.p[q + "mla.kv_down"].shape[1], self.p[q + "mla.shared_key_down"].shape[1]
                self.states.append(LayerState(latent=np.zeros((0, Lkv)), shared=np.zeros((0, R))))
            else:
                H, K = self.p[q + "kda.query_proj"].shape[1:]
                V = self.p[q + "kda.value_proj"].shape[2]
                W1 = self.conv_width - 1
                self.states.append(LayerState(tuple(np.zeros((W1, H, n)) for n in (K, K, V)), np.zeros((H, K, V)),
                                              [np.zeros(self.p["token_embedding"].shape[1]) for _ in range(W1)]))

    def layer_params(self, prefix: str) -> Params:
        return {k[len(prefix):]: v for k, v in self.p.items() if k.startswith(prefix)}

    def mixer(self, i: int, x: np.ndarray, st: LayerState) -> tuple[np.ndarray, LayerState]:
        """Layer i's sequence mixer on `x` from `st` (not modified)."""
        if self.mla[i]:
            y, lat, sh = mla_step(st.latent, st.shared, x, self.layer_params(f"layers.{i + 1}.mla."), self.cfg)
            return y, LayerState(latent=lat, shared=sh)
        y, win, hd = kda_layer_step(st.windows, st.heads, x, self.layer_params(f"layers.{i + 1}.kda."), self.cfg)
        return y, LayerState(win, hd, (st.rows + [x])[1:])

    def channel(self, i: int, x: np.ndarray, route: list[int] | None = None) -> tuple[np.ndarray, list[int] | None, np.ndarray | None]:
        """Layer i's channel mixer: (output, route, adjusted scores) (dense: no route)."""
        q = f"layers.{i + 1}."
        if not self.moe[i]:
            return expert(x, self.p[q + "mlp.gateWeight"], self.p[q + "mlp.upWeight"], self.p[q + "mlp.downWeight"], self.cfg), None, None
        return latent_moe(x, self.layer_params(q), self.cfg, self.shared, self.experts, route)

    def read(self, name: str, sources: list[np.ndarray]) -> np.ndarray:
        return retrieve(np.stack(sources), self.p[f"{name}.query"], self.p[f"{name}.norm_gain"], self.cfg["attn_res_eps"])

    def step(self, token: int) -> np.ndarray:
        """The logits of `token` after the tokens stepped so far."""
        return self.step_embedding(self.p["token_embedding"][token])

    def step_embedding(self, x_d: np.ndarray) -> np.ndarray:
        """The logits of the input row `x_d` (a token's embedding, or a visual token spliced in
        its place) after the rows stepped so far."""
        eps, depth = self.cfg["rms_eps"], Depth([x_d])
        for i in range(len(self.mla)):
            q, rec = f"layers.{i + 1}.", {"seq_sources": depth.sources(), "state_in": self.states[i]}
            rec["seq_read"] = self.read(q + "seq_res", rec["seq_sources"])
            rec["seq_in"] = rms_norm(rec["seq_read"], eps, self.p[q + "seq_norm.scale"])
            rec["seq_out"], self.states[i] = self.mixer(i, rec["seq_in"], self.states[i])
            rec["chan_sources"] = depth.with_sequence_output(rec["seq_out"])
            rec["chan_read"] = self.read(q + "chan_res", rec["chan_sources"])
            rec["chan_in"] = rms_norm(rec["chan_read"], eps, self.p[q + "chan_norm.scale"])
            rec["chan_out"], rec["route"], rec["scores"] = self.channel(i, rec["chan_in"])
            depth.finish(rec["chan_out"], self.cfg["block_size"])
            self.record[i + 1] = rec
        self.record["final_sources"] = depth.sources()
        self.record["final_read"] = self.read("final_res", depth.sources())
        self.record["final_in"] = rms_norm(self.record["final_read"], self.cfg["final_eps"], self.p["final_norm.scale"])
        return self.record["final_in"] @ self.p["lm_head.weight"]
