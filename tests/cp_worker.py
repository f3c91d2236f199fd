"""One rank of tests/test_context_parallel.py's distributed runs: `python cp_worker.py FOLDER`
with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set. Reads FOLDER/cases.json and each case's
inputs (safetensors, the whole sequence), takes its own segment, runs
`kda_context_parallel` honestly and under each planted composition bug the case names, and
writes FOLDER/out_{case}_{variant}_{rank}.safetensors (outputs, state after the segment)."""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file

from pybridge import context_parallel as cp

TIMEOUT = timedelta(seconds=20)  # rendezvous and every collective


def compose_reversed(summaries: list[cp.AffineSummary], like_bhkv: torch.Tensor) -> cp.AffineSummary:
    """Planted bug: the earlier ranks' summaries composed in the wrong order."""
    return HONEST_COMPOSE(summaries[::-1], like_bhkv)


def compose_skipping(summaries: list[cp.AffineSummary], like_bhkv: torch.Tensor) -> cp.AffineSummary:
    """Planted bug: the summary of the rank just before is left out."""
    return HONEST_COMPOSE(summaries[:-1], like_bhkv)


HONEST_COMPOSE = cp.compose
VARIANTS = {"honest": HONEST_COMPOSE, "reversed": compose_reversed, "skipping": compose_skipping}


def main(folder: Path) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://", timeout=TIMEOUT)
    rank = dist.get_rank()
    for case in json.loads((folder / "cases.json").read_text()):
        x = load_file(folder / f"in_{case['name']}.safetensors")
        lo = sum(case["lengths"][:rank])
        seg = [x[n][:, lo : lo + case["lengths"][rank]] for n in ("q", "k", "v", "g", "beta")]
        for variant in case["variants"]:
            cp.compose = VARIANTS[variant]
            o_bthv, state_bhkv = cp.kda_context_parallel(*seg, case["scale"], x["state"])
            save_file({"o": o_bthv.contiguous(), "state": state_bhkv.contiguous()},
                      folder / f"out_{case['name']}_{variant}_{rank}.safetensors")
    cp.compose = HONEST_COMPOSE
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(Path(sys.argv[1]))
