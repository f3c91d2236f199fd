"""Benchmark of `difftest checkpoint` on a synthetic real-width checkpoint (difftest.checkpoint_synth):
seconds per layer, peak resident memory per rank and bytes read, under torchrun.

    python benchmarks/checkpoint_scale.py --out /tmp/k3-bench --experts 64 --top-k 16 --nproc 2 \\
        --write docs/benchmarks.md

writes (or replaces) the section between `<!-- checkpoint-scale:begin -->` and
`<!-- checkpoint-scale:end -->` of the file; the other sections are left alone. `--quantize mxfp4`
writes the routed experts in the released MXFP4 layout (the generator's `--quantize`) and records
its own section (`checkpoint-scale-mxfp4`), with the routed-expert bytes read against what the same
experts weigh in bf16 and what their codes decode to.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from difftest.checkpoint_synth import synthetic_config, write_synthetic

BEGIN, END = "<!-- checkpoint-scale:begin -->", "<!-- checkpoint-scale:end -->"
MX_BEGIN, MX_END = "<!-- checkpoint-scale-mxfp4:begin -->", "<!-- checkpoint-scale-mxfp4:end -->"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mxfp4_lines(doc: dict) -> list[str]:
    """The MXFP4 figures: routed-expert bytes read (codes and scales) against bf16, per MoE unit,
    and each expert layer's decode summary."""
    c = doc["config"]
    per_expert = 3 * c["moe_intermediate_size"] * c["routed_expert_hidden_size"]
    lines = ["", ("| layer | experts read | their MXFP4 bytes (MB) | the same in bf16 (MB) | E8M0 codes | non-finite weights | "
                  "quantization budget / max abs y |"), "|---|---|---|---|---|---|---|"]
    for i, m in doc.get("mxfp4", {}).items():
        n = m["experts"]
        bad = ", ".join(f"{v} in {k.removeprefix('nonfinite_')}" for k, v in m.items() if k.startswith("nonfinite_"))
        lines.append(f"| {i} | {n} | {n * per_expert * (0.5 + 1 / 32) / 1e6:.1f} | {n * per_expert * 2 / 1e6:.1f} | "
                     f"{m['scale_codes'][0]}..{m['scale_codes'][1]} | {bad} | {float(m['budget_rel_max']):.3g} |")
    lines += ["", ("MXFP4 bytes: half a byte per weight plus one scale byte per 32 (4.25 bits), 17/64 of bf16. The "
                   "quantization budget is `MXFP4Expert.abs_forward_dequantize_sub_le`'s bound from the file alone "
                   "(docs/scale.md).")]
    return lines


def section(doc: dict, gen: dict, args: dict, wall_s: float, status: int) -> list[str]:
    c = doc["config"]
    mx = bool(doc.get("mxfp4"))
    begin, end = (MX_BEGIN, MX_END) if mx else (BEGIN, END)
    title = ("## `difftest checkpoint` at the paper's widths, MXFP4 experts (issues 19, 21)" if mx
             else "## `difftest checkpoint` at the paper's widths (issue 21)")
    weights = "random bf16 weights, routed experts quantized to MXFP4 by pybridge's quantizer" if mx else "random bf16 weights"
    lines = [begin, title, "",
             "Produced by `python benchmarks/checkpoint_scale.py " + " ".join(args["argv"]) + "` (one run). A synthetic "
             f"checkpoint (`difftest.checkpoint_synth`, {weights}) with the paper's widths and head counts "
             f"(hidden {c['hidden_size']:,}; {c['num_attention_heads']} MLA and {c['kda_num_heads']} KDA heads; MLA latents "
             f"{c['kv_lora_rank']} / {c['q_lora_rank']:,}; KDA {c['kda_head_k_dim']} / {c['kda_head_v_dim']}; "
             f"{c['num_shared_experts']} shared experts of {c['moe_intermediate_size']:,}, routed latent "
             f"{c['routed_expert_hidden_size']:,}), {c['num_hidden_layers']} layers, {c['num_experts']} experts top-"
             f"{c['num_experts_per_token']}, verified by `torchrun --nproc-per-node {doc['world_size']} -m difftest "
             f"checkpoint` ({doc['backend']}, {doc['options']['device']}, torch leg at {doc['dtype']}, "
             f"{doc['options']['rows']} row × {doc['options']['tokens']} tokens per stage).", "",
             (f"Machine: {platform.machine()}, {os.cpu_count()} cores, shared with other processes; 1-min load average "
              f"at the end {os.getloadavg()[0]:.1f}."), "",
             f"* Checkpoint on disk: {gen['bytes'] / 1e9:.2f} GB in {gen['shards']} shards, written in {gen['seconds']:.0f} s.",
             (f"* Verification: {wall_s:.0f} s wall (torchrun start-up included), exit {status}, "
              f"{'PASSED' if doc['passed'] else 'FAILED'}; {doc['bytes_read'] / 1e9:.2f} GB read from the shards."), "",
             "| layer | unit | rank | s | peak RSS MB | MB read | experts checked | worst error / tolerance | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for u in doc["units"]:
        ratios = [float(x["ratio"]) for x in u["comparisons"] if x["tol"] > 0]
        unit = u["unit"]["kind"] + ("" if u["unit"]["shards"] == 1 else f" {u['unit']['shard'] + 1}/{u['unit']['shards']}")
        lines.append(f"| {u['unit']['layer']} ({u['mixer']}) | {unit} | {u['rank']} | {u['seconds']:.1f} | "
                     f"{u['peak_rss_mb']:.0f} | {u['bytes_read'] / 1e6:.0f} | {len(u['experts'])} | "
                     f"{max(ratios, default=0):.2f} | {'pass' if u['passed'] else 'FAIL ' + u['error']} |")
    lines += ["", "| rank | units | s | peak RSS MB | peak GPU MB | GB read |", "|---|---|---|---|---|---|"]
    for r, v in doc["ranks"].items():
        lines.append(f"| {r} | {v['units']} | {v['seconds']:.1f} | {v['peak_rss_mb']:.0f} | {v['peak_gpu_mb']:.0f} | "
                     f"{v['bytes_read'] / 1e9:.2f} |")
    per_layer = {i: e["seconds"] for i, e in doc["layers"].items()}
    lines += ["", "Seconds per layer (its units added): " + ", ".join(f"layer {i}: {s:.1f}" for i, s in per_layer.items())
              + ". Peak RSS is the kernel's VmHWM of the rank, reset before each unit."]
    return lines + (mxfp4_lines(doc) if mx else []) + [end]


def write_section(path: Path, lines: list[str]) -> None:
    text = path.read_text(encoding="utf-8") if path.is_file() else "# Benchmarks\n"
    begin, end = lines[0], lines[-1]
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + "\n".join(lines) + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
    path.write_text(text, encoding="utf-8")


@click.command()
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Checkpoint folder (written).")
@click.option("--layers", default=2, show_default=True, type=int)
@click.option("--experts", default=64, show_default=True, type=int)
@click.option("--top-k", default=16, show_default=True, type=int)
@click.option("--nproc", default=2, show_default=True, type=int)
@click.option("--tokens", default=4, show_default=True, type=int)
@click.option("--device", default="cpu", show_default=True)
@click.option("--quantize", default=None, type=click.Choice(["mxfp4"]), help="Passed to the generator.")
@click.option("--reuse", is_flag=True, help="Verify the checkpoint already in --out.")
@click.option("--keep", is_flag=True, help="Keep the checkpoint after the run.")
@click.option("--write", "write_to", type=click.Path(dir_okay=False, path_type=Path), default=None)
def main(out, layers, experts, top_k, nproc, tokens, device, quantize, reuse, keep, write_to) -> None:
    """Generate, verify under torchrun, and record."""
    gen = {"bytes": 0, "shards": 0, "seconds": 0.0}
    if not reuse:
        t0 = time.monotonic()
        gen = write_synthetic(out, synthetic_config(layers, experts, top_k), seed=0, quantize=quantize)
        gen["seconds"] = time.monotonic() - t0
        print(f"wrote {out}: {gen['bytes'] / 1e9:.2f} GB in {gen['seconds']:.0f} s", flush=True)
    else:
        gen["bytes"] = sum(p.stat().st_size for p in out.glob("*.safetensors"))
        gen["shards"] = len(list(out.glob("*.safetensors")))
    report = out.with_name(out.name + "-report")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), "-m", "difftest", "checkpoint", "--checkpoint", str(out), "--report",
           str(report), "--tokens", str(tokens), "--device", device, "--timeout", "1800"]
    t0 = time.monotonic()
    status = subprocess.run(cmd, check=False, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}).returncode
    wall = time.monotonic() - t0
    doc = json.loads((report / "summary.json").read_text(encoding="utf-8"))
    lines = section(doc, gen, {"argv": sys.argv[1:]}, wall, status)
    print("\n".join(lines))
    if write_to is not None:
        write_section(write_to, lines)
    if not keep and not reuse:
        shutil.rmtree(out)


if __name__ == "__main__":
    main()
