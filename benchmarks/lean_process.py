"""What one offline Lean process costs, with and without `leanrun.OFFLINE_OPTIONS` (issue 13).

Each thread of `lean.js` is a Node worker that loads and links the whole wasm again, so the
number of threads Lean starts decides much of a module's CPU time and memory. This checks
`KimiK3.Core.Kernel` (after `Core.Scalar`, its one import) in a scratch folder, alternating the
two command lines `--repeat` times, and prints the median wall time, CPU time (user + system, of
the Lean process alone, from `wait4`) and peak resident memory (`VmHWM`) of each.

    python benchmarks/lean_process.py [--repeat 2]

CPU time is the figure that matters for the build: with two Lean processes on two cores the
build is CPU-bound, so wall time under load follows CPU time, not a process's own wall time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from k3spec import leanrun, toolchain
from k3spec.build import LEAN_OPTIONS

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "lean" / "KimiK3" / "Core"


def _measure(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak GB of one Lean process (it must succeed)."""
    with leanrun.lean_slot():
        start = time.monotonic()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        watch = leanrun.PeakWatch(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        watch.stop()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"lean failed: {' '.join(argv)}")
    return wall, usage.ru_utime + usage.ru_stime, watch.peak_kb / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    tc = toolchain.find(prefer_offline=True)
    plain, env = leanrun.command(tc, [])
    base = [a for a in plain if a not in leanrun.OFFLINE_OPTIONS]
    env["LEAN_PATH"] = str(tc.stdlib)
    variants = {"default": base, "OFFLINE_OPTIONS": [*base, *leanrun.OFFLINE_OPTIONS]}
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        root = Path(tmp)
        (root / "lean" / "KimiK3" / "Core").mkdir(parents=True)
        out = root / "out"
        for name in ("Scalar", "Kernel"):
            (root / "lean" / "KimiK3" / "Core" / f"{name}.lean").write_text((CORE / f"{name}.lean").read_text())
        env["LEAN_PATH"] += os.pathsep + str(out)
        (out / "KimiK3" / "Core").mkdir(parents=True)

        def lean(prefix: list[str], name: str) -> list[str]:
            target = out / "KimiK3" / "Core" / name
            return [*prefix, *LEAN_OPTIONS, f"--root={root / 'lean'}", "-o", f"{target}.olean",
                    "-i", f"{target}.ilean", f"lean/KimiK3/Core/{name}.lean"]

        _measure(lean(variants["OFFLINE_OPTIONS"], "Scalar"), root, env)
        runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in variants}
        for i in range(args.repeat):
            for label, prefix in variants.items():
                runs[label].append(_measure(lean(prefix, "Kernel"), root, env))
                print(f"[{i + 1}/{args.repeat}] {label}: wall {runs[label][-1][0]:.1f} s, "
                      f"CPU {runs[label][-1][1]:.1f} s, peak {runs[label][-1][2]:.2f} GB", flush=True)
    load = os.getloadavg()[0]
    print(f"\nKimiK3.Core.Kernel, offline toolchain, median of {args.repeat} (1-min load at end {load:.1f}):")
    print("| command line | wall s | CPU s | peak GB |\n|---|---|---|---|")
    for label, rows in runs.items():
        wall, cpu, peak = (statistics.median(col) for col in zip(*rows))
        print(f"| {label} | {wall:.1f} | {cpu:.1f} | {peak:.2f} |")


if __name__ == "__main__":
    main()
