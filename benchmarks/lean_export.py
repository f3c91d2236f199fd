"""Time `k3spec export`'s Lean run: wall seconds, CPU seconds and the Lean process's peak RSS.

Usage, from the repository root: `python3 benchmarks/lean_export.py [ENTRY ...] [--separately]`.
Without names, every manifest entry; `--separately` runs one Lean process per set of modules
instead of one for all (how the export ran before 2026-12-05), for comparison. Results:
docs/benchmarks-lean.md ("Graph export").
"""

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
from codegen.bundle import BUNDLE_OPTIONS
from codegen.export import load_manifest, render
from k3spec import leanrun, toolchain
from k3spec.build import LEAN_OPTIONS


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("entries", nargs="*", help="manifest entries (default: all)")
    ap.add_argument("--separately", action="store_true", help="one Lean run per set of modules")
    args = ap.parse_args()
    root, tc = Path("."), toolchain.find()
    entries = load_manifest(root).select(tuple(args.entries))
    runs: dict = {}
    for e in entries:
        runs.setdefault(e.modules if args.separately else (), []).append(e)
    total_wall, total_cpu = 0.0, 0.0
    for run in runs.values():
        with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
            source = render(root, run, Path(tmp))
            (Path(tmp) / "Export.lean").write_text(source, encoding="utf-8")
            cpu0, t0 = children_cpu(), time.monotonic()
            result = leanrun.run(tc, ["--json", *LEAN_OPTIONS, *BUNDLE_OPTIONS, "Export.lean"], cwd=Path(tmp))
            wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
            written = sum(1 for e in run if (Path(tmp) / f"{e.name}.json").is_file())
        total_wall, total_cpu = total_wall + wall, total_cpu + cpu
        verdict = "ok" if result.returncode == 0 and written == len(run) else f"FAILED (exit {result.returncode})"
        print(f"{wall:7.1f} s  CPU {cpu:7.1f} s  peak {result.peak_rss_mb / 1024:4.1f} GB  {len(source) // 1000} KB  "
              f"{[e.name for e in run]} {verdict}", flush=True)
    print(f"{len(runs)} Lean run(s): {total_wall:.1f} s wall, {total_cpu:.1f} s CPU")


if __name__ == "__main__":
    main()
