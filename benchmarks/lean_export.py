"""Time each `k3spec export` group alone: wall seconds and the Lean process's peak RSS.

Usage, from the repository root: `python3 benchmarks/lean_export.py [ENTRY ...]` (the groups that
hold the named manifest entries; all groups without names). Results: docs/benchmarks-lean.md.
"""

import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
from codegen.bundle import EvaluationError, run_lean
from codegen.export import load_manifest, render

root = Path(".")
groups: dict = {}
for e in load_manifest(root).entries:
    groups.setdefault(e.modules, []).append(e)
only = sys.argv[1:]


def sampler(stop: threading.Event, peak: list[float]) -> None:
    """Largest RSS (GB) of a Lean process elaborating `Export.lean`, sampled every 0.5 s."""
    while not stop.is_set():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"Export" not in cmd or b"lean.js" not in cmd:
                    continue
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS"):
                        peak[0] = max(peak[0], int(line.split()[1]) / 1e6)
            except OSError:
                pass
        time.sleep(0.5)


for group in groups.values():
    names = [e.name for e in group]
    if only and not any(n in only for n in names):
        continue
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        source = render(root, group, Path(tmp))
        stop, peak = threading.Event(), [0.0]
        watch = threading.Thread(target=sampler, args=(stop, peak))
        watch.start()
        t0 = time.time()
        try:
            run_lean(source, "Export")
            verdict = "ok"
        except EvaluationError as err:
            verdict = f"FAILED {str(err)[:200]}"
        stop.set()
        watch.join()
        print(f"{time.time() - t0:7.1f} s  peak {peak[0]:5.1f} GB  {len(source) // 1000} KB  {names} {verdict}", flush=True)
