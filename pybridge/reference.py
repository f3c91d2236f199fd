"""Plain reference K3 forward: one token at a time, one head / expert / source at a time,
written from the spec equations in the row-vector convention (`y = x W`, `W = weight.T`).

It reads a hub-named state dict directly and shares no code with the fast model except
the config record, so the tests can tie the batched/chunked model to it. Slow by design.
"""

import math

import torch

from pybridge.config import K3Config


def _lin(sd: dict, name: str) -> torch.Tensor:
    """Spec matrix [in, out] from a hub nn.Linear weight [out, in]."""
    return sd[name + ".weight"].T


def _rms(x_d: torch.Tensor, eps: float, scale_d: torch.Tensor | None = None) -> torch.Tensor:
    y = x_d / math.sqrt(float((x_d * x_d).sum()) / x_d.numel() + eps)
    return y if scale_d is None else y * scale_d


def _sigmoid(x: torch.Tensor) -> torch.Tensor:
    return 1.0 / (1.0 + torch.exp(-x))


def _situ(g: torch.Tensor, u: torch.Tensor, cg: float, cu: float) -> torch.Tensor:
    return (cg * torch.tanh(g / cg)) * _sigmoid(g) * (cu * torch.tanh(u / cu))


def _softmax(scores: list[float]) -> list[float]:
    ex = [math.exp(s) for s in scores]
    return [e / sum(ex) for e in ex]


def _attend(sources: list[torch.Tensor], query_d: torch.Tensor, eps: float) -> torch.Tensor:
    weights = _softmax([float(query_d @ _rms(v, eps)) for v in sources])
    return sum(w * v for w, v in zip(weights, sources))


def _kda_step(cfg: K3Config, sd: dict, p: str, state: dict, x_d: torch.Tensor) -> torch.Tensor:
    H, K, V, W = cfg.kda_num_heads, cfg.kda_head_k_dim, cfg.kda_head_v_dim, cfg.kda_conv_size
    proj = {n: x_d @ _lin(sd, f"{p}{n}_proj") for n in "qkv"}
    conv = {}
    for n in "qkv":
        window = (state[n] + [proj[n]])[-W:]  # oldest first; zeros before the first token
        state[n] = window[1:]
        w_dw = sd[f"{p}{n}_conv1d.weight"][:, 0, :]
        c = sum(w_dw[:, i] * window[i] for i in range(W))
        conv[n] = c * _sigmoid(c)  # SiLU
    z = x_d @ _lin(sd, f"{p}f_a_proj") @ _lin(sd, f"{p}f_b_proj") + sd[f"{p}dt_bias"]
    beta = _sigmoid(x_d @ _lin(sd, f"{p}b_proj"))
    gate = _sigmoid(x_d @ _lin(sd, f"{p}g_proj"))
    heads = []
    for h in range(H):
        q = conv["q"][h * K : (h + 1) * K]
        k = conv["k"][h * K : (h + 1) * K]
        q = q / torch.sqrt((q * q).sum() + cfg.kda_l2_norm_eps)
        k = k / torch.sqrt((k * k).sum() + cfg.kda_l2_norm_eps)
        v = conv["v"][h * V : (h + 1) * V]
        zh = z[h * K : (h + 1) * K]
        alpha = torch.exp(cfg.kda_gate_lower_bound * _sigmoid(math.exp(float(sd[f"{p}A_log"][h])) * zh))
        S = state["S"][h]
        decayed = alpha[:, None] * S
        correction = k @ decayed
        S = decayed - beta[h] * torch.outer(k, correction) + beta[h] * torch.outer(k, v)
        state["S"][h] = S
        o = cfg.kda_query_scale * (q @ S)
        heads.append(_rms(o, cfg.kda_output_norm_eps, sd[f"{p}o_norm.weight"]) * gate[h * V : (h + 1) * V])
    return torch.cat(heads) @ _lin(sd, f"{p}o_proj")


def _mla_step(cfg: K3Config, sd: dict, p: str, cache: list, x_d: torch.Tensor) -> torch.Tensor:
    H, C, R, Vd, L = (
        cfg.num_attention_heads,
        cfg.qk_nope_head_dim,
        cfg.qk_rope_head_dim,
        cfg.v_head_dim,
        cfg.kv_lora_rank,
    )
    eps = cfg.mla_latent_norm_eps
    c_q = _rms(x_d @ _lin(sd, f"{p}q_a_proj"), eps, sd[f"{p}q_a_layernorm.weight"])
    kv_a = x_d @ _lin(sd, f"{p}kv_a_proj_with_mqa")
    cache.append((_rms(kv_a[:L], eps, sd[f"{p}kv_a_layernorm.weight"]), kv_a[L:]))  # append, then attend
    q_all = c_q @ _lin(sd, f"{p}q_b_proj")
    kv_up = _lin(sd, f"{p}kv_b_proj")  # [L, H*(C+Vd)]
    gate = _sigmoid(x_d @ _lin(sd, f"{p}g_proj"))
    heads = []
    for h in range(H):
        qc, qs = q_all[h * (C + R) : h * (C + R) + C], q_all[h * (C + R) + C : (h + 1) * (C + R)]
        w_k = kv_up[:, h * (C + Vd) : h * (C + Vd) + C]
        w_v = kv_up[:, h * (C + Vd) + C : (h + 1) * (C + Vd)]
        scores = [cfg.mla_score_scale * float(qc @ (lat @ w_k) + qs @ ks) for lat, ks in cache]
        weights = _softmax(scores)
        heads.append(sum(w * (lat @ w_v) for w, (lat, _) in zip(weights, cache)))
    return (gate * torch.cat(heads)) @ _lin(sd, f"{p}o_proj")


def _channel(cfg: K3Config, sd: dict, p: str, is_moe: bool, x_d: torch.Tensor) -> torch.Tensor:
    cg, cu = cfg.situ_gate_cap, cfg.situ_up_cap

    def mlp(q: str, names: tuple[str, str, str], v: torch.Tensor) -> torch.Tensor:
        return _situ(v @ _lin(sd, q + names[0]), v @ _lin(sd, q + names[1]), cg, cu) @ _lin(sd, q + names[2])

    if not is_moe:
        return mlp(f"{p}mlp.", ("gate_proj", "up_proj", "down_proj"), x_d)
    m = f"{p}block_sparse_moe."
    h_sh = cfg.moe_intermediate_size
    shared = torch.zeros_like(x_d)
    for i in range(cfg.num_shared_experts):  # the merged shared MLP, split into its experts
        blk = slice(i * h_sh, (i + 1) * h_sh)
        g = x_d @ _lin(sd, m + "shared_experts.gate_proj")[:, blk]
        u = x_d @ _lin(sd, m + "shared_experts.up_proj")[:, blk]
        shared = shared + _situ(g, u, cg, cu) @ _lin(sd, m + "shared_experts.down_proj")[blk, :]
    scores = [float(s) for s in _sigmoid(x_d @ _lin(sd, m + "gate"))]
    bias = [float(b) for b in sd[m + "gate.e_score_correction_bias"]]
    chosen = sorted(range(cfg.num_experts), key=lambda e: (-(scores[e] + bias[e]), e))[: cfg.num_experts_per_token]
    total = sum(scores[e] for e in chosen)
    z = x_d @ _lin(sd, m + "routed_expert_down_proj")
    routed = sum(
        cfg.routed_scaling_factor * scores[e] / total * mlp(f"{m}experts.{e}.", ("w1", "w3", "w2"), z) for e in chosen
    )
    routed = _rms(routed, cfg.latent_moe_norm_eps, sd[m + "routed_expert_norm.weight"])
    return shared + routed @ _lin(sd, m + "routed_expert_up_proj")


def reference_logits(cfg: K3Config, sd: dict[str, torch.Tensor], token_ids: list[int]) -> torch.Tensor:
    """Logits [T, vocab] for one sequence, computed token by token from an empty state."""
    eps, r_eps = cfg.rms_norm_eps, cfg.attn_res_norm_eps  # pre-norms, AttnRes score norms
    H, K, V = cfg.kda_num_heads, cfg.kda_head_k_dim, cfg.kda_head_v_dim
    zeros = sd["model.embed_tokens.weight"].new_zeros
    states: list = []
    for i in range(cfg.num_hidden_layers):
        if cfg.is_mla(i):
            states.append([])
        else:
            w = cfg.kda_conv_size - 1
            states.append(
                {
                    "q": [zeros(H * K)] * w,
                    "k": [zeros(H * K)] * w,
                    "v": [zeros(H * V)] * w,
                    "S": [zeros(K, V) for _ in range(H)],
                }
            )
    rows = []
    for tok in token_ids:
        blocks, partial, count = [sd["model.embed_tokens.weight"][tok]], None, 0
        for i in range(cfg.num_hidden_layers):
            p = f"model.layers.{i}."
            w_seq = sd[p + "self_attention_res_norm.weight"] * sd[p + "self_attention_res_proj.weight"][0]
            sources = blocks + ([] if partial is None else [partial])
            seq_in = _rms(_attend(sources, w_seq, r_eps), eps, sd[p + "input_layernorm.weight"])
            if cfg.is_mla(i):
                seq_out = _mla_step(cfg, sd, p + "self_attn.", states[i], seq_in)
            else:
                seq_out = _kda_step(cfg, sd, p + "self_attn.", states[i], seq_in)
            after_seq = seq_out if partial is None else partial + seq_out
            w_chan = sd[p + "mlp_res_norm.weight"] * sd[p + "mlp_res_proj.weight"][0]
            chan_in = _rms(_attend(blocks + [after_seq], w_chan, r_eps), eps, sd[p + "post_attention_layernorm.weight"])
            partial, count = after_seq + _channel(cfg, sd, p, cfg.is_moe(i), chan_in), count + 1
            if count == cfg.attn_res_block_size:
                blocks, partial, count = blocks + [partial], None, 0
        w_fin = sd["model.output_attn_res_norm.weight"] * sd["model.output_attn_res_proj.weight"][0]
        sources = blocks + ([] if partial is None else [partial])
        h = _rms(_attend(sources, w_fin, r_eps), cfg.final_norm_eps, sd["model.norm.weight"])
        head = sd["model.embed_tokens.weight"] if cfg.tie_word_embeddings else sd["lm_head.weight"]
        rows.append(h @ head.T)
    return torch.stack(rows)
