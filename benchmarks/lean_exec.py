"""Lean evaluation time per case of the executable spec (`KimiK3.Exec`), issue 14.

    python benchmarks/lean_exec.py [--write docs/benchmarks.md] [--cases 2] [--only decoder_step]

For each difftest component (expert, latent_moe, kda_recurrence, kda_layer, mla, attnres,
decoder_step, the whole tiny token step: a 3-token prefix and the step token from the initial
state, and the route checks, and the Kimi Linear variant's kimi_linear_kda, kimi_linear_mla,
kimi_linear_moe and the whole tiny kimi_linear_model), the cases the default `difftest run` evaluates in Lean (`--cases`
per component: first random, then an adversarial kind; `runner.lean_chosen`) are rendered with
difftest's templates and evaluated in ONE offline Lean file after one bundle (`codegen.bundle` of
the components' `lean_targets`), as `difftest run` does: through `codegen.bundle.run_lean`
(`k3spec.leanrun.run`: a Lean slot, stdout through a file rather than a pipe that cuts long
lines off, the bundle options).

The times are read inside Lean (`IO.monoNanosNow` marks around the bundle and every case), so
waiting for a Lean slot does not count. "bundle": elaborating and compiling the bundled library
text. "per case": from the previous mark to the case's end, split into `def A` (elaborating the
hex literal of its inputs), decoding `A` (forced by a mark that reads its size), its
definitions (elaborated and compiled) and its `#eval!` (the evaluation proper). The `#eval!`
decodes `A` once more (the interpreter keeps no constant from one command to the next), so the
per-case figure leaves the mark's decoding out: it is what difftest pays. The function-backed
("before") figures are the ones issue 14 measured with the templates difftest used before.
Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from record import write_section  # benchmarks/record.py (this script's folder is on sys.path)
from codegen.bundle import run_lean
from difftest import lean as dlean
from difftest import runner
from difftest.case import Case, hex_bits

COMPONENT_NAMES = ("expert", "latent_moe", "kda_recurrence", "kda_layer", "mla", "attnres", "decoder_step",
                   "kimi_linear_kda", "kimi_linear_mla", "kimi_linear_moe", "kimi_linear_model")
#: the per-case figures issue 14 measured with the function-backed templates (one case each)
ISSUE_BEFORE = {"expert": "about 43", "latent_moe": "did not finish in 2–3 min",
                "kda_recurrence": "did not finish in 2–3 min", "kda_layer": "did not finish in 2–3 min",
                "mla": "did not finish in 2–3 min", "attnres": "did not finish in 2–3 min",
                "decoder_step": "did not finish in 5 min",
                # the Kimi Linear variant (issue 17): its function-backed layer, one 3-token case at hidden 8
                # (lean/KimiK3/KimiLinear/README.md); no function-backed MLA or MoE template was tried
                "kimi_linear_kda": "did not finish in 400 s", "kimi_linear_mla": "not tried",
                "kimi_linear_moe": "not tried",
                # the whole Kimi Linear model had no Lean definition before (issue 17, decoder layer)
                "kimi_linear_model": "no Lean leg"}
MARK = re.compile(r"^MARK (\S+) (\d+)$")
SECTION_BEGIN, SECTION_END = "<!-- lean-exec:begin -->", "<!-- lean-exec:end -->"


def mark(name: str, force: str = "") -> str:
    """A command printing `MARK name <ns>`; `force`: an expression of type `Nat` evaluated first
    (e.g. `A.size`: the case's inputs decoded)."""
    pre = f"if {force} = 0 then IO.println \"(empty)\"\n  " if force else ""
    return f'\n#eval! show IO Unit from do\n  {pre}IO.println s!"MARK {name} {{← IO.monoNanosNow}}"\n'


def run_file(source: str, name: str) -> tuple[dict[str, int], list[str], float]:
    """Run a standalone Lean file as difftest does (`codegen.bundle.run_lean`: one machine-wide
    Lean slot, stdout through a file, not a pipe that cuts long lines off); the marks
    (name -> ns), the message lines and the wall time (slot wait included)."""
    start = time.monotonic()
    messages = run_lean(source, name)
    wall = time.monotonic() - start
    lines = [ln for m in messages if m.severity == "information" for ln in m.text.splitlines()]
    marks = {m.group(1): int(m.group(2)) for m in (MARK.match(ln.strip()) for ln in lines) if m}
    return marks, lines, wall


def render(items: list[tuple[object, Case]], bundle_text: str) -> str:
    """difftest's batch file for `items`, with marks around the bundle and every case."""
    cases = []
    for i, (comp, case) in enumerate(items):
        refs = dlean.TensorRefs(case)
        body = dlean.ENV.get_template(f"{comp.template}.lean.j2").render(
            T=refs, off=refs.offsets, key=f"C{i}", case=case, s=case.sizes, **comp.lean_context(case))
        head, evals = body.rsplit("#eval!", 1) if "#eval!" in body else (body, None)
        timed = (mark(f"case{i}.decoded", "A.size") + head + mark(f"case{i}.defs") + "#eval!" + evals
                 if evals is not None else body)
        cases.append({"ns": f"C{i}", "label": case.label, "hex": "".join(hex_bits(t) for t in case.tensors.values()),
                      "body": mark(f"case{i}.start") + timed + mark(f"case{i}.end")})
    return dlean.ENV.get_template("batch.lean.j2").render(
        bundle=mark("bundle.start") + bundle_text + mark("bundle.end"), cases=cases)


# --- measurement and report ------------------------------------------------------------------

def fmt(x: float | None) -> str:
    return "–" if x is None else (f"{x:.2f}" if x < 10 else f"{x:.0f}")


def report(rows: dict[str, list[tuple[float, ...]]], bundle_s: float, wall: float, cases: int, targets: tuple[str, ...]) -> str:
    lines = [SECTION_BEGIN, "## Lean evaluation per case: function-backed reference vs executable spec (issue 14)", "",
             "Produced by `python benchmarks/lean_exec.py --write docs/benchmarks.md` (one run). Times are read",
             "inside the offline Lean interpreter (wasm), so waiting for a Lean slot does not count. `after`:",
             "`KimiK3.Exec` (array-backed, proved equal to the reference), every case of every component in one",
             f"file after one bundle, {cases} cases per component (first random, then the next input kind); per case:",
             "elaborating, compiling and evaluating its text. `before`: the function-backed templates, as issue 14",
             "measured them (one case each).", "",
             (f"Machine: {platform.machine()}, {os.cpu_count()} cores, shared with other Lean processes; "
              f"1-min load average at the end {os.getloadavg()[0]:.1f}."), "",
             (f"* Fixed cost of the bundle (the modules of {', '.join(f'`{t}`' for t in targets)}, elaborated and "
              f"compiled with difftest's bundle options), once per file: {bundle_s:.1f} s."),
             f"* Wall time of the whole file, Lean start-up and slot wait included: {wall:.0f} s.", "",
             "| component | before: per case (s) | after: per case (s), each case | split: `def A` (hex literal) + [decoding it, forced by the mark] + definitions + `#eval!` (s) |",
             "|---|---|---|---|"]
    for name, secs in rows.items():
        split = "; ".join(f"{fmt(t[1])} + [{fmt(t[2])}] + {fmt(t[3])} + {fmt(t[4])}" for t in secs)
        lines.append(f"| {name} | {ISSUE_BEFORE[name]} | {', '.join(fmt(t[0]) for t in secs)} | {split} |")
    lines += ["", "`decoder_step`: `LanguageModel.run` over 4 tokens (3-token prefix, then the step) from the initial",
              "state, for each of its 2 rows (kinds `random`, `tie`), on the seeded tiny model (per case: every row,",
              "prefixes included, and the route checks `Routing.checkRouteF` of its staged routes); its `long` kind",
              "(41 tokens per row) is not in the default run. `kimi_linear_*`: the Kimi Linear variant's layers",
              "(`Exec.KimiLinear`) at the tiny hub config (hidden 16): the KDA layer over 9 tokens (kinds `random`,",
              "`large`), MLA over 9 tokens with the direct query (`q_proj`), the MoE block on 18 tokens, the whole",
              "model (`KimiLinear.Model.logits`: 3 KDA + 1 MLA decoder layers, dense + MoE MLPs, vocabulary 61) over",
              "7 tokens. Components with fewer kinds than `--cases` (after the skipped ones) have fewer cases.",
              SECTION_END]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", type=Path, help="write (or replace) the section in this markdown file")
    ap.add_argument("--cases", type=int, default=2)
    ap.add_argument("--only", nargs="*", choices=COMPONENT_NAMES, help="components to measure (default: all)")
    args = ap.parse_args()
    names = args.only or list(COMPONENT_NAMES)
    # the cases the default `difftest run` evaluates in Lean, as the Lean leg sees them
    chosen = runner.lean_chosen(runner.build_cases(names, None, 0), args.cases, False)
    items = [(comp, view) for _, comp, view in chosen]
    targets = tuple(dict.fromkeys(t for comp, _ in items for t in comp.lean_targets))
    marks, _, wall = run_file(render(items, dlean.library_bundle(targets)), "ExecBench")
    rows: dict[str, list[tuple[float, ...]]] = {}
    for i, (comp, _) in enumerate(items):
        # from the previous mark on: the case's `def A` (its inputs' hex literal; for the first case
        # also the batch's decoding helpers), then its body
        at = [marks["bundle.end" if i == 0 else f"case{i - 1}.end"], *(marks[f"case{i}.{m}"] for m in ("start", "decoded", "defs", "end"))]
        phases = [(b - a) / 1e9 for a, b in itertools.pairwise(at)]
        # per case as difftest pays it: without the mark's own decoding of `A` (the `#eval!`
        # decodes it again: the interpreter does not keep constants from one command to the next)
        rows.setdefault(comp.name, []).append((sum(phases) - phases[1], *phases))
    section = report(rows, (marks["bundle.end"] - marks["bundle.start"]) / 1e9, wall, args.cases, targets)
    print(section)
    if args.write:
        write_section(args.write, section, SECTION_BEGIN, SECTION_END)


if __name__ == "__main__":
    main()
