"""CPU benchmark: our KDA kernels vs fla's naive ones, and tiny-model tokens/s.

    python benchmarks/run_benchmarks.py [--write docs/benchmarks.md] [--repeats 3]

All timings come from one run of this script (best of `--repeats` after one warm-up: the
machine is shared, so the minimum is the least noisy estimate),
float32 on CPU; ratios are against fla's `naive_recurrent_kda` measured in the same run.
Not a test: nothing here asserts a speed.
"""

import argparse
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch

from pybridge.checkpoint import random_model
from pybridge.config import load_config
from pybridge.kda import kda_chunked, kda_recurrent

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny" / "config.json"
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


def bench_kda(repeats: int) -> list[str]:
    from fla.ops.kda.naive import naive_chunk_kda, naive_recurrent_kda

    rows = [
        "| T | implementation | seconds | tokens/s | speed vs fla naive_recurrent | max abs diff vs it |",
        "|---|---|---|---|---|---|",
    ]
    for T in (256, 2048):
        q, k, v, g, beta = kda_inputs(T)
        impls = {
            "fla naive_recurrent_kda": lambda: naive_recurrent_kda(
                q, k, v, g, beta, scale=1.0, output_final_state=True
            ),
            "fla naive_chunk_kda (chunk 64)": lambda: naive_chunk_kda(
                q, k, v, g, beta, scale=1.0, output_final_state=True
            ),
            "ours kda_recurrent": lambda: kda_recurrent(q, k, v, g, beta, 1.0),
            "ours kda_chunked (chunk 16)": lambda: kda_chunked(q, k, v, g, beta, 1.0),
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
    return rows


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", type=Path, help="write the markdown report here")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1 is least noisy on a shared box)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    env = (
        f"torch {torch.__version__}, threads={torch.get_num_threads()}, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}; float32, CPU; best of {args.repeats} runs after one warm-up; "
        f"1-min load average at start {os.getloadavg()[0]:.1f} (machine shared with Lean builds)"
    )
    kda_rows, model_rows = bench_kda(args.repeats), bench_model(args.repeats)
    text = "\n".join(
        [
            "# Benchmarks",
            "",
            "Produced by `python benchmarks/run_benchmarks.py --write docs/benchmarks.md` (one run; all ratios",
            "are between numbers measured in that same run). Not a timed test: the figures depend on the machine.",
            "",
            f"Environment: {env}.",
            "",
            f"## KDA kernels (B={B}, H={H}, K={K}, V={V}, scale 1.0)",
            "",
            "Speed is fla-naive-recurrent seconds divided by the row's seconds (higher is faster).",
            "The last column is the largest output difference from fla's naive recurrent kernel.",
            "",
            *kda_rows,
            "",
            "## Tiny model (fixtures/tiny/config.json, random weights)",
            "",
            "Prefill runs one forward over the prompt (chunked KDA, masked MLA); decode runs cached",
            "single-token steps (recurrent KDA, latent-cache MLA) with greedy token choice.",
            "",
            *model_rows,
            "",
        ]
    )
    print(text)
    if args.write:
        args.write.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
