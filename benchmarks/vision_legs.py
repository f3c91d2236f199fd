"""Per-case time of the Lean, graph and torch legs of difftest's MoonViT-V2 components.

    python benchmarks/vision_legs.py [--write docs/benchmarks.md] [--lean-cases 2] [--repeats 3] [--no-lean]

Components: `vision_block` (one block on one clip), `merge_project` (temporal mean, 2 × 2 merge,
projector, clip after clip), `vision_encoder` (embedding, both tiny blocks, final norm and
merge-and-project over several clips in one batch). Cases: difftest's default cases at seed 0
(`runner.build_cases`: one per kind).

* **Lean** (`--lean-all` in difftest: these components are not in its default Lean run): the first
  `--lean-cases` cases of each component rendered with difftest's templates and evaluated in ONE
  offline Lean file after one bundle, through `benchmarks/lean_exec.py`'s `render` and `run_file`
  (marks read inside Lean with `IO.monoNanosNow`, so waiting for a Lean slot does not count). Per
  case: its `def A` (hex literal of the inputs), definitions and `#eval!`, as difftest pays it.
* **graph** (float64, `pybridge.graph` compiled once per file and cached, as difftest does): the
  component's `graph_outputs`, on the cases its exports fit (`graph_fits`: the exports' clip of
  2 frames of 6 × 4); `vision_encoder`'s is three graphs in a row (embedding, the whole encoder
  `vision_encoder_tiny`, merge-and-project). The one-time load and compile of each graph file is
  reported apart.
* **torch** (`torch_outputs`, CPU): at float64 as difftest's float64 leg calls it (for
  `vision_encoder` that includes `torch_reference`, `moonvit_reference.features` one clip at a
  time), and at float32 (pybridge's model alone); both include building pybridge's module from the
  case's spec tensors (`adapter.vision_to_hub`, `load_state_dict`), as difftest does per case.

graph and torch: best of `--repeats` calls after one warm-up call per case (the machine is shared;
the minimum is the least noisy). Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import torch  # noqa: E402
from record import write_section  # benchmarks/record.py (this script's folder is on sys.path)
from lean_exec import render, run_file  # noqa: E402

from difftest import lean as dlean  # noqa: E402
from difftest import runner  # noqa: E402
from difftest.components import base  # noqa: E402
from difftest.components.vision import grids_of  # noqa: E402

COMPONENT_NAMES = ("vision_block", "merge_project", "vision_encoder")
SECTION_BEGIN, SECTION_END = "<!-- vision-legs:begin -->", "<!-- vision-legs:end -->"


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """Seconds of the fastest of `repeats` calls after one warm-up call."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def graph_compile_times(files: list[str]) -> dict[str, float]:
    """Seconds to load, check and compile each graph file once (difftest caches the result)."""
    out = {}
    for f in files:
        base.compiled.cache_clear()
        t0 = time.perf_counter()
        base.compiled(f, torch.float64, "cpu")
        out[f] = time.perf_counter() - t0
    base.compiled.cache_clear()
    return out


def lean_times(items, lean_cases: int) -> tuple[dict[tuple[str, int], float], float, float, tuple[str, ...]]:
    """Per (component, case index): seconds in Lean; the bundle's seconds, the file's wall time
    and the bundled targets."""
    chosen = runner.lean_chosen(items, lean_cases, True)
    picked = [(comp, view) for _, comp, view in chosen]
    targets = tuple(dict.fromkeys(t for comp, _ in picked for t in comp.lean_targets))
    marks, _, wall = run_file(render(picked, dlean.library_bundle(targets)), "VisionLegsBench")
    out = {}
    for i, (comp, view) in enumerate(picked):
        at = [marks["bundle.end" if i == 0 else f"case{i - 1}.end"], *(marks[f"case{i}.{m}"] for m in ("start", "decoded", "defs", "end"))]
        phases = [(b - a) / 1e9 for a, b in itertools.pairwise(at)]
        # as difftest pays it: without the mark's own decoding of the inputs (lean_exec.py)
        out[(comp.name, view.index)] = sum(phases) - phases[1]
    return out, (marks["bundle.end"] - marks["bundle.start"]) / 1e9, wall, targets


def fmt(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.2f} s"


def describe(case) -> str:
    grids = grids_of(case.sizes)
    return f"`{case.kind}` ({', '.join('×'.join(map(str, g)) for g in grids)}; {sum(t * h * w for t, h, w in grids)} tokens)"


def report(rows: list[tuple[str, object, float | None, float | None, float, float]], compile_s: dict[str, float],
           lean: tuple | None, lean_cases: int, repeats: int) -> str:
    lines = [SECTION_BEGIN, "## MoonViT-V2 legs per case: Lean, graph, torch (issue 18)", "",
             "Produced by `python benchmarks/vision_legs.py --write docs/benchmarks.md` (one run); difftest's default",
             "cases at seed 0 (one per kind). Lean: the first",
             f"{lean_cases} cases of each component in ONE offline Lean file after one bundle, times read inside",
             "Lean (slot wait excluded), per case its inputs' literal, definitions and `#eval!` as difftest pays",
             "them. graph: float64, the component's exported graphs (`vision_encoder`: embedding, the whole",
             "encoder as one graph, merge-and-project), compiled once and cached as in difftest, on the cases",
             "whose clip is the exports' (2 frames of 6 × 4). torch: `torch_outputs` on CPU at float64 (for",
             "`vision_encoder` with `torch_reference`, `moonvit_reference.features`) and float32 (pybridge alone),",
             "building pybridge's module from the case's tensors included, as difftest does per case.",
             f"graph and torch: best of {repeats} after one warm-up.", "",
             (f"Machine: {platform.machine()}, {os.cpu_count()} cores, shared with other Lean processes; torch "
              f"{torch.__version__}, threads={torch.get_num_threads()}; 1-min load average at the end "
              f"{os.getloadavg()[0]:.1f}."), ""]
    if lean is not None:
        _, bundle_s, wall, targets = lean
        lines += [f"* Lean bundle (the modules of {', '.join(f'`{t}`' for t in targets)}), once per file: {bundle_s:.1f} s;"
                  f" wall time of the whole file, start-up and slot wait included: {wall:.0f} s."]
    lines += [f"* Loading, checking and compiling each graph file once: "
              + ", ".join(f"`{f}` {fmt(s)}" for f, s in compile_s.items()) + ".", "",
              "| component | case | Lean | graph | torch float64 | torch float32 |", "|---|---|---|---|---|---|"]
    for name, case, lean_s, graph_s, t64, t32 in rows:
        lines.append(f"| {name} | {describe(case)} | {fmt(lean_s)} | {fmt(graph_s)} | {fmt(t64)} | {fmt(t32)} |")
    lines += ["", "–: the leg does not run on that case (Lean: beyond `--lean-cases`; graph: not the exports' clip).",
              SECTION_END]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", type=Path, help="write (or replace) the section in this markdown file")
    ap.add_argument("--lean-cases", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-lean", action="store_true")
    ap.add_argument("--only", nargs="*", choices=COMPONENT_NAMES, help="components to measure (default: all)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = args.only or list(COMPONENT_NAMES)
    items = runner.build_cases(names, None, 0)
    compile_s = graph_compile_times(sorted({f for comp, case in items if comp.graph_available(case)
                                            for f in graph_files(comp)}))
    lean = None if args.no_lean else lean_times(items, args.lean_cases)
    rows = []
    for comp, case in items:
        graph_s = best_of(lambda: comp.graph_outputs(case, "cpu"), args.repeats) if comp.graph_available(case) else None
        t64 = best_of(lambda: comp.torch_outputs(case, torch.float64, "cpu"), args.repeats)
        t32 = best_of(lambda: comp.torch_outputs(case, torch.float32, "cpu"), args.repeats)
        lean_s = None if lean is None else lean[0].get((comp.name, case.index))
        rows.append((comp.name, case, lean_s, graph_s, t64, t32))
        print(comp.name, case.kind, fmt(lean_s), fmt(graph_s), fmt(t64), fmt(t32), flush=True)
    section = report(rows, compile_s, lean, args.lean_cases, args.repeats)
    print(section)
    if args.write:
        write_section(args.write, section, SECTION_BEGIN, SECTION_END)


def graph_files(comp) -> list[str]:
    """The graph files a component's graph leg runs (`vision_encoder`: three in a row)."""
    if comp.name == "vision_encoder":
        return ["vision_embed_tiny.json", comp.graph_file, "vision_merge_project_tiny.json"]
    return [comp.graph_file]


if __name__ == "__main__":
    main()
