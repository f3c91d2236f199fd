"""KDA speed at one size (issue 17 item 5): B=1, H=4, K=V=128, T=2048, float32, one thread.

    python benchmarks/kda_speed.py [--before REV] [--repeats 15] [--write docs/benchmarks.md]

In one run: the fp32 matmul roofline measured here (batched [4, 16, 128] x [4, 128, 128] tiles
and a 1024^3 matmul), `kda_chunked` before (pybridge/kda.py at git revision REV, loaded from
`git show`) and after (the working tree), fla's naive kernels and transformers' Kimi Linear torch
fallbacks. Medians of `--repeats` interleaved rounds after one warm-up (the machine is shared
and loaded: the median is what a user sees; the minimum is printed beside it), in wall time and
in the calling thread's CPU time (which leaves out the time the thread waits for a core: a
20 ms call is descheduled on a loaded machine far more often than a 20 us tile). `--write`
replaces this script's section of the file. Not a test: nothing here asserts a speed.
"""

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's pybridge, not an installed one
from pybridge.kda import kda_chunked, kda_recurrent
from run_benchmarks import B, H, K, V, kda_flops, kda_inputs

T = 2048
ROOT = Path(__file__).resolve().parents[1]
HEADING = "## KDA speed at T = 2048 (benchmarks/kda_speed.py, medians)"


def times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, tuple[list[float], list[float]]]:
    """(wall seconds, thread CPU seconds) per round for each function; rounds interleave the
    functions so that load from other processes hits all of them alike."""
    for fn in fns.values():
        fn()
    out: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0, c0 = time.perf_counter(), time.thread_time()
            fn()
            out[name][0].append(time.perf_counter() - t0)
            out[name][1].append(time.thread_time() - c0)
    return out


def roofline(repeats: int) -> tuple[float, float, float]:
    """Median float32 GFLOPS of a batched [H, 16, K] x [H, K, V] product (wall, CPU) and of a
    1024^3 matmul (measured apart: the large one would evict the tiles from cache)."""
    a_hck, b_hkv = torch.randn(H, 16, K), torch.randn(H, K, V)
    big = torch.randn(1024, 1024)
    tile_wall, tile_cpu = times({"tile": lambda: torch.bmm(a_hck, b_hkv)}, 50 * repeats)["tile"]
    large = statistics.median(times({"large": lambda: big @ big}, repeats)["large"][0])
    return (2 * H * 16 * K * V / statistics.median(tile_wall) / 1e9, 2 * H * 16 * K * V / statistics.median(tile_cpu) / 1e9,
            2 * 1024**3 / large / 1e9)


def load_before(rev: str):
    """pybridge/kda.py at `rev` as a module (its imports resolve against the working tree)."""
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:pybridge/kda.py"],
                         check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "kda_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("kda_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def impls(before) -> dict[str, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    from fla.ops.kda.naive import naive_chunk_kda, naive_recurrent_kda

    from difftest.adapters import kimi_linear

    q, k, v, g, beta = kda_inputs(T)
    q_kimi = q * K**0.5  # Kimi Linear's kernels hard-code the K^-1/2 query scale; ours is 1.0
    kimi_chunk, kimi_recurrent = kimi_linear.chunk().kernel, kimi_linear.recurrent().kernel
    fns = {
        "fla naive_recurrent_kda": lambda: naive_recurrent_kda(q, k, v, g, beta, scale=1.0, output_final_state=True),
        "fla naive_chunk_kda (chunk 64)": lambda: naive_chunk_kda(q, k, v, g, beta, scale=1.0, output_final_state=True),
        "transformers recurrent_kimi_delta_attention (fallback)": lambda: kimi_recurrent(
            q_kimi, k, v, g, beta, initial_state=None, output_final_state=True),
        "transformers chunk_kimi_delta_attention (fallback, chunk 64)": lambda: kimi_chunk(
            q_kimi, k, v, g, beta, output_final_state=True),
        "ours kda_recurrent": lambda: kda_recurrent(q, k, v, g, beta, 1.0),
    }
    for C in (16, 64):
        fns[f"ours kda_chunked before (chunk {C})"] = lambda C=C: before.kda_chunked(q, k, v, g, beta, 1.0, chunk_size=C)
        fns[f"ours kda_chunked after (chunk {C})"] = lambda C=C: kda_chunked(q, k, v, g, beta, 1.0, chunk_size=C)
    return fns


def section(before_rev: str, repeats: int) -> list[str]:
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    tile, tile_cpu, big = roofline(repeats)
    fns = impls(load_before(before_rev))
    with torch.no_grad():
        ref = fns["ours kda_recurrent"]()[0]
        secs = times(fns, repeats)
        diffs = {name: (fn()[0] - ref).abs().max().item() for name, fn in fns.items()}
    lines = [
        HEADING, "",
        f"One run of `python benchmarks/kda_speed.py --before {before_rev} --repeats {repeats}`: torch {torch.__version__},"
        f" threads=1, {platform.machine()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}; float32."
        f" B={B}, H={H}, K={K}, V={V}, T={T}. The machine is shared and loaded (1-min load average {load:.1f} at start,"
        f" {os.getloadavg()[0]:.1f} at the end; Lean builds and other helpers running), so seconds are medians of"
        f" {repeats} interleaved rounds, min beside; wall time, and the calling thread's CPU time.",
        f"Roofline measured in the same run (medians): {tile:.0f} GFLOPS for [{H}, 16, {K}] x [{H}, {K}, {V}] tiles"
        f" ({tile_cpu:.0f} by CPU time), {big:.0f} GFLOPS for a 1024^3 matmul."
        f" \"x roofline\" = seconds / (`kda_flops` / tile rate), wall over wall and CPU over CPU.", "",
        "| implementation | median s | min s | median CPU s | x roofline (tile) | x roofline (tile, CPU) | max abs diff vs ours kda_recurrent |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, (wall, cpu) in secs.items():
        C = 64 if "chunk 64" in name else 16 if "chunk 16" in name else None
        ours = name.startswith("ours kda_chunked")
        roof = f"{statistics.median(wall) / (kda_flops(T, C) / (tile * 1e9)):.1f}x" if ours else ""
        roof_cpu = f"{statistics.median(cpu) / (kda_flops(T, C) / (tile_cpu * 1e9)):.1f}x" if ours else ""
        lines.append(f"| {name} | {statistics.median(wall):.4f} | {min(wall):.4f} | {statistics.median(cpu):.4f} | {roof} | {roof_cpu}"
                     f" | {diffs[name]:.1e} |")
    return lines + [""]


def write(path: Path, lines: list[str]) -> None:
    """Replaces this script's section of `path` (up to the next `## ` heading), or appends it."""
    old = path.read_text().splitlines()
    if HEADING in old:
        i = old.index(HEADING)
        j = next((n for n in range(i + 1, len(old)) if old[n].startswith("## ")), len(old))
        old[i:j] = lines
    else:
        old += [""] + lines
    path.write_text("\n".join(old).rstrip("\n") + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="HEAD", help="git revision of the 'before' kda_chunked")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--write", type=Path, help="markdown file whose section to replace")
    args = ap.parse_args()
    lines = section(args.before, args.repeats)
    print("\n".join(lines))
    if args.write:
        write(args.write, lines)


if __name__ == "__main__":
    sys.exit(main())
