"""CPU benchmark: our KDA kernels vs fla's naive ones, tiny-model tokens/s, and compiled
Lean graphs (fixtures/graphs) vs the hand-written pybridge components.

    python benchmarks/run_benchmarks.py [--write docs/benchmarks.md] [--repeats 3] [--only kda]

All timings come from one run of this script (best of `--repeats` after one warm-up: the
machine is shared, so the minimum is the least noisy estimate),
float32 on CPU; ratios are against fla's `naive_recurrent_kda` measured in the same run.
Not a test: nothing here asserts a speed.
"""

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's pybridge, not an installed one
from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge.graph.compile import compile_graph
from pybridge.graph.load import load_graph
from pybridge.kda import kda_chunked, kda_recurrent
from pybridge.layers import SituExpert, SituMLP

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "config.json"
GRAPHS = Path(__file__).resolve().parents[1] / "fixtures" / "graphs"
B, H, K, V = 1, 4, 128, 128  # K3's KDA head width; 4 heads keeps the naive loops short


def best_times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Best-of-`repeats` seconds per function; rounds interleave the functions so that
    load from other processes hits all of them alike."""
    for fn in fns.values():
        fn()
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def kda_inputs(T: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    v = torch.randn(B, T, H, V, generator=gen)
    g = -5.0 * torch.sigmoid(torch.randn(B, T, H, K, generator=gen))
    beta = torch.sigmoid(torch.randn(B, T, H, generator=gen))
    return q, k, v, g, beta


def kda_flops(T: int, C: int) -> float:
    """The chunked form's matrix-product FLOPs per call: per chunk the state pass's three
    [C, K] x [K, V] products, the UT solve's (I + A)^-1 Diag(beta) applied to V and K_hat, M applied
    to E, and the C x C decay-weighted products of q and k with k (within and across sub-chunks)."""
    N = -(-T // C)
    per_chunk = 3 * 2 * C * K * V + 2 * C * C * (V + K) + 2 * C * C * V + 2 * 2 * C * C * K
    return float(B * H * N * per_chunk)


def roofline(repeats: int) -> tuple[float, float]:
    """Measured float32 GFLOPS: the state pass's batched [H, 16, K] x [H, K, V] product and one
    large 1024^3 matmul."""
    tile_a, tile_b = torch.randn(H, 16, K), torch.randn(H, K, V)
    big = torch.randn(1024, 1024)
    tile = best_times({"tile": lambda: torch.bmm(tile_a, tile_b)}, 50 * repeats)["tile"]  # apart: the large one
    large = best_times({"large": lambda: big @ big}, 2 * repeats)["large"]  # would evict the tiles from cache
    return 2 * H * 16 * K * V / tile / 1e9, 2 * 1024**3 / large / 1e9


def bench_kda(repeats: int) -> tuple[list[str], list[str]]:
    """(table rows, lines on the roofline at T = 2048)."""
    from fla.ops.kda.naive import naive_chunk_kda, naive_recurrent_kda

    from difftest.adapters import kimi_linear

    kimi_chunk, kimi_recurrent = kimi_linear.chunk().kernel, kimi_linear.recurrent().kernel
    rows = [
        "| T | implementation | seconds | tokens/s | speed vs fla naive_recurrent | max abs diff vs it |",
        "|---|---|---|---|---|---|",
    ]
    chunked = {}
    for T in (256, 2048):
        q, k, v, g, beta = kda_inputs(T)
        q_kimi = q * K**0.5  # Kimi Linear's kernels hard-code the K^-1/2 query scale; ours is 1.0
        impls = {
            "fla naive_recurrent_kda": lambda: naive_recurrent_kda(
                q, k, v, g, beta, scale=1.0, output_final_state=True
            ),
            "fla naive_chunk_kda (chunk 64)": lambda: naive_chunk_kda(
                q, k, v, g, beta, scale=1.0, output_final_state=True
            ),
            "transformers recurrent_kimi_delta_attention (torch fallback)": lambda: kimi_recurrent(
                q_kimi, k, v, g, beta, initial_state=None, output_final_state=True
            ),
            "transformers chunk_kimi_delta_attention (torch fallback, chunk 64)": lambda: kimi_chunk(
                q_kimi, k, v, g, beta, output_final_state=True
            ),
            "ours kda_recurrent": lambda: kda_recurrent(q, k, v, g, beta, 1.0),
            "ours kda_chunked (chunk 16)": lambda: kda_chunked(q, k, v, g, beta, 1.0, chunk_size=16),
            "ours kda_chunked (chunk 64)": lambda: kda_chunked(q, k, v, g, beta, 1.0, chunk_size=64),
        }
        with torch.no_grad():
            base_out = impls["fla naive_recurrent_kda"]()[0]
            secs = best_times(impls, repeats)
            for name, fn in impls.items():
                diff = (fn()[0] - base_out).abs().max().item()
                speed = secs["fla naive_recurrent_kda"] / secs[name]
                rows.append(
                    f"| {T} | {name} | {secs[name]:.4f} | {B * T / secs[name]:,.0f} | {speed:.2f}x | {diff:.1e} |"
                )
        chunked = {C: secs[f"ours kda_chunked (chunk {C})"] for C in (16, 64)}
    tile, big = roofline(repeats)
    notes = [f"Measured float32 matmul rates, one thread: {tile:.0f} GFLOPS for the state pass's [{H}, 16, {K}] x [{H}, {K}, {V}]"
             f" products, {big:.0f} GFLOPS for a 1024^3 matmul. At T = 2048 (`kda_flops`):", ""]
    for C, sec in chunked.items():
        flops = kda_flops(2048, C)
        notes.append(f"* chunk {C}: {flops / 1e9:.2f} GFLOP of matrix products, {flops / sec / 1e9:.1f} GFLOPS achieved; "
                     f"{sec / (flops / (tile * 1e9)):.1f}x the time at the tile rate, {sec / (flops / (big * 1e9)):.1f}x at the large-matmul rate.")
    return rows, notes


def kda_section(rows: list[str], notes: list[str], env: str | None = None) -> list[str]:
    """The KDA section; `env`: the environment line of a run of this section alone (`--only kda`)."""
    return [
        f"## KDA kernels (B={B}, H={H}, K={K}, V={V}, scale 1.0)",
        "",
        *([f"Measured in a run of this section alone (`--only kda`): {env}.", ""] if env else []),
        "Speed is fla-naive-recurrent seconds divided by the row's seconds (higher is faster).",
        "The last column is the largest output difference from fla's naive recurrent kernel.",
        "transformers' Kimi Linear kernels are their torch fallbacks (`__wrapped__`, as difftest's",
        "kimi-linear adapters call them), fed q * K^1/2 against their hard-coded K^-1/2 query scale.",
        "",
        *rows,
        "",
        *notes,
        "",
    ]


def replace_kda_section(path: Path, section: list[str]) -> None:
    """Replaces the `## KDA kernels` section of `path` (up to the next `## ` heading)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("## KDA kernels"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    path.write_text("\n".join(lines[:start] + section + lines[end:]), encoding="utf-8")


#: The sections this script writes; a full `--write` keeps every other section of the file (the
#: Lean sections of benchmarks/lean_exec.py and of the issue notes) after its own.
OWN_SECTIONS = ("## KDA kernels", "## Tiny model", "## Compiled Lean graphs vs pybridge")


def others_sections(path: Path) -> list[str]:
    """The lines of `path` from its first `## ` section that this script does not write."""
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    start = next((i for i, line in enumerate(lines)
                  if line.startswith(("## ", "<!--")) and not line.startswith(OWN_SECTIONS)), len(lines))
    return lines[start:]


def bench_model(repeats: int) -> list[str]:
    model = random_model(load_config(TINY), seed=0)
    rows = ["| phase | batch | tokens | seconds | tokens/s |", "|---|---|---|---|---|"]
    steps = 64
    with torch.no_grad():
        for batch in (1, 8):
            prompt = torch.randint(0, model.config.vocab_size, (batch, 256), generator=torch.Generator().manual_seed(1))
            _, cache = model(prompt)

            def decode() -> None:
                c, tok = cache, prompt[:, -1:]
                for _ in range(steps):
                    logits, c = model(tok, c)
                    tok = logits[:, -1:].argmax(-1)

            secs = best_times({"prefill": lambda: model(prompt), "decode": decode}, repeats)
            rows.append(
                f"| prefill (256-token prompt) | {batch} | {batch * 256} | {secs['prefill']:.4f} | "
                f"{batch * 256 / secs['prefill']:,.0f} |"
            )
            rows.append(
                f"| decode ({steps} cached steps) | {batch} | {batch * steps} | {secs['decode']:.4f} | "
                f"{batch * steps / secs['decode']:,.0f} |"
            )
    return rows


def graph_cases(n_tokens: int) -> list[tuple[str, Callable, Callable, Callable, torch.Tensor]]:
    """(name, pybridge batched call, graph vmap call, graph per-token loop, mask of the tokens
    where the two compute the same function) on the same weights.

    The graphs take one token (`input: [24]`), so a batch runs either as `torch.vmap` over the
    GraphModule or as a Python loop of single-token calls. The LatentMoE graph has a fixed
    route (2 slots), so it runs every token through the experts routed for token 0, while
    pybridge routes each token itself: the same work per token (2 routed + shared experts),
    not the same function. Its shared experts are widened to the graph's 2 x 26 units."""
    cfg = load_config(TINY)
    moe = random_model(cfg, seed=0).model.layers[1].block_sparse_moe
    moe.shared_experts = SituMLP(cfg.hidden_size, 52, cfg.situ_gate_cap, cfg.situ_up_cap)
    x_nd = torch.randn(n_tokens, cfg.hidden_size, generator=torch.Generator().manual_seed(2))
    caps = {"gateCap": torch.tensor(cfg.situ_gate_cap), "upCap": torch.tensor(cfg.situ_up_cap)}
    torch.manual_seed(3)
    ex = SituExpert(cfg.hidden_size, 13, cfg.situ_gate_cap, cfg.situ_up_cap)  # the expert graph's 24 -> 13 -> 24
    expert_params = {"gateWeight": ex.w1.weight.T, "upWeight": ex.w3.weight.T, "downWeight": ex.w2.weight.T}
    sh = moe.shared_experts
    moe_params = {"downProject": moe.routed_expert_down_proj.weight.T, "upProject": moe.routed_expert_up_proj.weight.T,
                  "routedNormScale": moe.routed_expert_norm.weight}
    for j in range(2):
        rows = slice(26 * j, 26 * (j + 1))
        moe_params |= {f"shared.gate[{j}]": sh.gate_proj.weight[rows].T, f"shared.up[{j}]": sh.up_proj.weight[rows].T,
                       f"shared.down[{j}]": sh.down_proj.weight[:, rows].T}
    route_nk = moe.gate(x_nd)[0]
    route = route_nk[0].tolist()
    for k, e in enumerate(route):
        moe_params |= {f"slot.router[{k}]": moe.gate.weight[e], f"slot.gate[{k}]": moe.experts[e].w1.weight.T,
                       f"slot.up[{k}]": moe.experts[e].w3.weight.T, f"slot.down[{k}]": moe.experts[e].w2.weight.T}
    cases = []
    same_route = (route_nk == route_nk[0]).all(-1)
    for name, file, params, hand, same in (
        ("SiTU expert (hidden 13)", "channel_expert_tiny.json", expert_params, lambda: ex(x_nd), torch.ones_like(same_route)),
        ("LatentMoE (top-2 of 6, 2 shared)", "channel_latent_moe_tiny.json", moe_params, lambda: moe(x_nd[None])[0], same_route),
    ):
        module = compile_graph(load_graph(GRAPHS / file), dtype=torch.float32).module
        one = lambda x_d, m=module, p=params: m(p, {"input": x_d, **caps})["output"]
        batched = torch.vmap(one)
        cases.append((name, hand, lambda b=batched: b(x_nd), lambda o=one: [o(x_d) for x_d in x_nd], same))
    return cases


def bench_graphs(repeats: int) -> list[str]:
    n_tokens = 256
    rows = [
        (
            f"| component ({n_tokens} tokens) | pybridge s | graph vmap s | graph loop s | vmap / pybridge "
            "| loop / pybridge | max abs diff (tokens compared) |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    with torch.no_grad():
        for name, hand, vmapped, loop, same in graph_cases(n_tokens):
            secs = best_times({"hand": hand, "vmap": vmapped, "loop": loop}, repeats)
            diff = float((vmapped() - hand())[same].abs().max())
            rows.append(
                f"| {name} | {secs['hand']:.5f} | {secs['vmap']:.5f} | {secs['loop']:.5f} | "
                f"{secs['vmap'] / secs['hand']:.2f}x | {secs['loop'] / secs['hand']:.2f}x | {diff:.1e} ({int(same.sum())}) |"
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", type=Path, help="write the markdown report here")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1 is least noisy on a shared box)")
    ap.add_argument("--only", choices=["kda"], help="measure only the KDA kernels; --write then replaces only their section")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    env = (
        f"torch {torch.__version__}, threads={torch.get_num_threads()}, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}; float32, CPU; best of {args.repeats} runs after one warm-up; "
        f"1-min load average at start {os.getloadavg()[0]:.1f} (machine shared with Lean builds)"
    )
    kda_rows, kda_notes = bench_kda(args.repeats)
    if args.only == "kda":
        section = kda_section(kda_rows, kda_notes, env)
        print("\n".join(section))
        if args.write:
            replace_kda_section(args.write, section)
        return
    model_rows, graph_rows = bench_model(args.repeats), bench_graphs(args.repeats)
    text = "\n".join(
        [
            "# Benchmarks",
            "",
            "Produced by `python benchmarks/run_benchmarks.py --write docs/benchmarks.md` (one run; all ratios",
            "are between numbers measured in that same run). Not a timed test: the figures depend on the machine.",
            "",
            f"Environment: {env}.",
            "",
            *kda_section(kda_rows, kda_notes),
            "## Tiny model (fixtures/tiny/config.json, random weights)",
            "",
            "Prefill runs one forward over the prompt (chunked KDA, masked MLA); decode runs cached",
            "single-token steps (recurrent KDA, latent-cache MLA) with greedy token choice.",
            "",
            *model_rows,
            "",
            "## Compiled Lean graphs vs pybridge components (fixtures/graphs, random weights)",
            "",
            "`pybridge.graph.compile_graph` turns an exported single-token graph into a torch.fx module",
            "(eager, not `torch.compile`d). A batch runs as `torch.vmap` over it or as a Python loop of",
            "one-token calls; pybridge runs the batch in one call. Ratios are seconds over pybridge's",
            "seconds (lower is faster). The LatentMoE graph has a fixed route: every token goes through",
            "token 0's two routed experts, the same work per token as pybridge's per-token routing; the",
            "difference column compares only tokens that pybridge routes like token 0.",
            "",
            *graph_rows,
            "",
        ]
    )
    print(text)
    if args.write:
        args.write.write_text("\n".join([text, *others_sections(args.write)]), encoding="utf-8")


if __name__ == "__main__":
    main()
