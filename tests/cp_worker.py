"""One rank of tests/test_context_parallel.py's distributed runs (`run_rank`, started in a fresh
process from a forkserver that has imported torch once; gloo over loopback on `port`). Reads
FOLDER/cases.json and each case's
inputs (safetensors, the whole sequence), takes its own segment, runs
`kda_context_parallel` honestly and under each planted composition bug the case names, and
writes FOLDER/out_{case}_{variant}_{rank}.safetensors (outputs, state after the segment), or
FOLDER/error_{case}_{variant}_{rank}.txt with the `InputError` a bad case raises; anything else
that goes wrong is written to FOLDER/crash_{rank}.txt and the process exits non-zero."""

from __future__ import annotations

import json
import traceback
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file

from pybridge import context_parallel as cp
from pybridge.errors import InputError

TIMEOUT = timedelta(seconds=20)  # rendezvous and every collective


def compose_reversed(summaries: list[cp.AffineSummary], like_bhkv: torch.Tensor) -> cp.AffineSummary:
    """Planted bug: the earlier ranks' summaries composed in the wrong order."""
    return HONEST_COMPOSE(summaries[::-1], like_bhkv)


def compose_skipping(summaries: list[cp.AffineSummary], like_bhkv: torch.Tensor) -> cp.AffineSummary:
    """Planted bug: the summary of the rank just before is left out."""
    return HONEST_COMPOSE(summaries[:-1], like_bhkv)


HONEST_COMPOSE = cp.compose
VARIANTS = {"honest": HONEST_COMPOSE, "reversed": compose_reversed, "skipping": compose_skipping}


def run_rank(rank: int, world: int, port: int, folder: Path) -> None:
    torch.set_num_threads(1)  # a forked process must not use the parent's OpenMP pool
    try:
        _run(rank, world, port, folder)
    except BaseException:
        (folder / f"crash_{rank}.txt").write_text(traceback.format_exc())
        raise


def _run(rank: int, world: int, port: int, folder: Path) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=TIMEOUT)
    for case in json.loads((folder / "cases.json").read_text()):
        x = load_file(folder / f"in_{case['name']}.safetensors")
        lo = sum(case["lengths"][:rank])
        seg = [x[n][:, lo : lo + case["lengths"][rank]] for n in ("q", "k", "v", "g", "beta")]
        if case["drop_head_on_last"] and rank == world - 1:  # bad input: one head short
            seg = [t[:, :, 1:] for t in seg]
            x["state"] = x["state"][:, 1:]
        for variant in case["variants"]:
            cp.compose = VARIANTS[variant]
            try:
                o_bthv, state_bhkv = cp.kda_context_parallel(*seg, case["scale"], x["state"])
            except InputError as e:
                (folder / f"error_{case['name']}_{variant}_{rank}.txt").write_text(str(e))
                continue
            save_file({"o": o_bthv.contiguous(), "state": state_bhkv.contiguous()},
                      folder / f"out_{case['name']}_{variant}_{rank}.safetensors")
    cp.compose = HONEST_COMPOSE
    dist.destroy_process_group()
