"""`torchrun --nproc-per-node N -m difftest checkpoint …`: the units of a checkpoint check
sharded over the ranks with torch.distributed, the verdicts gathered on rank 0.

* Rendezvous as `torchrun` sets it up (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`,
  `MASTER_PORT`; the agent's TCPStore when `TORCHELASTIC_USE_AGENT_STORE`), then
  `init_process_group` (gloo on CPU, nccl on CUDA, each with `timeout`) and a
  `monitored_barrier` on a gloo group that names any rank that does not arrive.
* Every rank computes the same assignment (`checkpoint.assign`: largest units first to the
  least-loaded rank), runs its units and posts each result to the store as it completes, with
  a heartbeat every `HEARTBEAT_S` seconds naming the unit it is in.
* Rank 0 collects: a rank is done when it posts `done`; it is lost when its heartbeat has not
  moved for `timeout` seconds. A rank that raises inside a unit reports the error with its
  rank and layer and goes on with its other units. When a worker dies, torchrun stops the
  others with SIGTERM: rank 0 then writes the report from what reached the store, naming the
  ranks that did not finish and their layers. Either way the run exits non-zero. (If rank 0
  itself dies there is no report; torchrun names the rank and its exit code.)

The store, not a collective, carries the results: a collective cannot return a partial answer
when one rank is gone, and a store read has its own timeout.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from difftest import checkpoint_report
from difftest.adapters import Impl
from difftest.checkpoint import (
    Options,
    Unit,
    UnitResult,
    Verifier,
    assign,
    parse_spec,
    plan,
    run_local,
)

HEARTBEAT_S = 2.0


class Terminated(BaseException):
    """SIGTERM (torchrun stopping the workers after one of them died); a BaseException, so the
    per-unit `except Exception` of `Verifier.run_unit` does not swallow it."""


@dataclass
class Gathered:
    """What rank 0 collected: every result that arrived, and the ranks that did not finish
    (rank -> (why, the units it had not reported))."""

    results: list[dict]
    lost: dict[int, tuple[str, list[Unit]]] = field(default_factory=dict)
    stopped: bool = False  # torchrun is stopping the workers: write the report and leave at once


def is_distributed() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def _store(rank: int, world: int, timeout: timedelta) -> dist.Store:
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    return dist.TCPStore(host, port, world, is_master=not agent and rank == 0, timeout=timeout)


def run_distributed(verifier: Verifier, units: list[Unit], timeout_s: float,
                    progress: Callable[[str], None]) -> Gathered | None:
    """This rank's share of `units`; on rank 0 the gathered results, on the others None."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = timedelta(seconds=timeout_s)
    base = _store(rank, world, timeout)
    cuda = verifier.opts.device.startswith("cuda")
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        verifier.opts = dataclasses.replace(verifier.opts, device=f"cuda:{local}")
    dist.init_process_group("nccl" if cuda else "gloo", store=dist.PrefixStore("difftest/pg", base), rank=rank,
                            world_size=world, timeout=timeout)
    control = dist.new_group(backend="gloo", timeout=timeout) if cuda else None
    dist.monitored_barrier(group=control, timeout=timeout, wait_all_ranks=True)  # names a rank that never arrives
    kv = dist.PrefixStore("difftest/kv", base)
    assignment = assign(verifier.cfg, units, world, verifier.quantized)
    mine = assignment[rank]
    progress(f"[rank {rank}/{world}] {len(mine)} unit(s): {', '.join(u.label for u in mine) or 'none'}")
    current = ["starting"]
    stop = threading.Event()

    def beat() -> None:
        n = 0
        while not stop.wait(HEARTBEAT_S):
            n += 1
            kv.set(f"alive/{rank}", f"{n}|{current[0]}")

    threading.Thread(target=beat, daemon=True).start()
    results: list[UnitResult] = []

    def on_term(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        for n, u in enumerate(mine):
            current[0] = u.label
            kv.set(f"alive/{rank}", f"start{n}|{u.label}")
            r = run_local(verifier, [u], rank, progress)[0]
            results.append(r)
            kv.set(f"unit/{rank}/{len(results) - 1}", json.dumps(r.to_json()))
        kv.set(f"done/{rank}", str(len(results)))
        if rank != 0:
            _wait_final(kv, timeout_s)
            return None
        return _collect(kv, world, assignment, timeout_s)
    except Terminated:
        if rank == 0:
            time.sleep(1.0)  # the other survivors post their stop notices
            return _collect(kv, world, assignment, 0.0, stopped=True)
        kv.set(f"term/{rank}", current[0])
        raise SystemExit(1) from None
    finally:
        stop.set()
        signal.signal(signal.SIGTERM, previous)
        if rank == 0:
            kv.set("final", "1")


def _wait_final(kv: dist.Store, timeout_s: float) -> None:
    """A finished rank waits for rank 0's report while rank 0's heartbeat moves."""
    seen, since = "", time.monotonic()
    while not kv.check(["final"]):
        beat = kv.get("alive/0").decode() if kv.check(["alive/0"]) else ""
        if beat != seen:
            seen, since = beat, time.monotonic()
        elif time.monotonic() - since > timeout_s:
            raise SystemExit(f"rank 0 stopped reporting for {timeout_s:.0f} s; no report written")
        time.sleep(0.5)


def _collect(kv: dist.Store, world: int, assignment: list[list[Unit]], timeout_s: float,
             stopped: bool = False) -> Gathered:
    """Wait for every rank's `done` (or its heartbeat to stall for `timeout_s`), then read every
    posted result. `stopped`: torchrun is stopping the workers; the ranks not done are lost now
    (those that posted a stop notice were stopped, the others died)."""
    last: dict[int, tuple[str, float]] = {}
    pending = set(range(world))
    lost_why: dict[int, str] = {}
    while pending:
        now = time.monotonic()
        for r in sorted(pending):
            if kv.check([f"done/{r}"]):
                pending.discard(r)
                continue
            beat = kv.get(f"alive/{r}").decode() if kv.check([f"alive/{r}"]) else "0|before its first unit"
            where = beat.split("|", 1)[1]
            if stopped:
                term = kv.check([f"term/{r}"]) or r == 0
                lost_why[r] = f"{'stopped by torchrun' if term else 'died'} in {where}"
                pending.discard(r)
            elif r not in last or last[r][0] != beat:
                last[r] = (beat, now)
            elif now - last[r][1] > timeout_s:
                lost_why[r] = f"no heartbeat for {timeout_s:.0f} s (died or hung) in {where}"
                pending.discard(r)
        if pending:
            time.sleep(0.2)
    results, lost = [], {}
    for r in range(world):
        n = 0
        while kv.check([f"unit/{r}/{n}"]):
            results.append(json.loads(kv.get(f"unit/{r}/{n}")))
            n += 1
        if r in lost_why:
            lost[r] = (lost_why[r], assignment[r][n:])
    return Gathered(results, lost, stopped)


def finish() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def verify(folder: str, layers: str, opts: Options, impls: tuple[Impl, ...], report_dir: Path | None, timeout_s: float,
           progress: Callable[[str], None]) -> int:
    """`difftest checkpoint`: check the selected layers (this process, or this rank of a
    torchrun group), write the report on rank 0; the exit status (0: every layer passed)."""
    start = time.monotonic()
    verifier = Verifier(folder, opts, impls)
    cfg = verifier.cfg
    units = plan(cfg, parse_spec(layers, cfg.num_hidden_layers, "--layers"), opts)
    if opts.experts != "routed":
        parse_spec(opts.experts, cfg.num_experts, "--experts")
    world, stopped = int(os.environ.get("WORLD_SIZE", "1")), False
    if is_distributed():
        got = run_distributed(verifier, units, timeout_s, progress)
        if got is None:
            finish()
            return 0
        results, lost, stopped = got.results, got.lost, got.stopped
        backend = "nccl" if opts.device.startswith("cuda") else "gloo"
        if not stopped:  # a process group with a dead peer may block in its teardown
            finish()
    else:
        results, lost, backend = [r.to_json() for r in run_local(verifier, units, 0, progress)], {}, "none (one process)"
    dims = {k: getattr(cfg, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "kda_num_heads",
                                         "kda_head_k_dim", "kda_head_v_dim", "q_lora_rank", "kv_lora_rank", "num_experts",
                                         "num_experts_per_token", "num_shared_experts", "moe_intermediate_size",
                                         "routed_expert_hidden_size", "intermediate_size")}
    legs = ["torch (pybridge DecoderLayer)", "numpy (difftest float64 reference)", *(a.column for a in impls)]
    doc = checkpoint_report.summary(str(folder), dims, {**opts.__dict__, "layers": layers, "timeout_s": timeout_s},
                                    str(verifier.dtype).removeprefix("torch."), legs, verifier.graph_leg(), results,
                                    lost, world, backend, time.monotonic() - start)
    if report_dir is not None:
        json_path, html_path = checkpoint_report.write(doc, Path(report_dir))
        progress(f"report: {json_path}, {html_path}")
    for i, e in doc["layers"].items():
        if e["verdict"] != "pass":
            experts = f"; experts {', '.join(map(str, e['failed_experts']))}" if e["failed_experts"] else ""
            progress(f"layer {i} {e['verdict']} (ranks {', '.join(map(str, e['ranks']))}{experts}): "
                     + "; ".join(e["errors"] + e["failed"]))
    status = "PASSED" if doc["passed"] else f"FAILED (layers {', '.join(map(str, doc['failed_layers']))})"
    progress(f"difftest checkpoint {status}: {len(doc['layers'])} layer(s), {len(results)} unit(s) on {world} rank(s), "
             f"{doc['seconds']} s, {doc['bytes_read'] / 1e9:.2f} GB read, peak "
             f"{max((v['peak_rss_mb'] for v in doc['ranks'].values()), default=0):.0f} MB per rank")
    if stopped:  # torchrun sends SIGKILL after its grace period: leave now, without the group's teardown
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    return 0 if doc["passed"] else 1
