"""`difftest`: differential testing of the Lean reference, exported graphs and the torch model.

    difftest run                         # every component, defaults (the README's main job, CI)
    difftest run --component mla --cases 10 --seed 3 --dtype float64 --report build/difftest
    difftest list                        # components, their input kinds and graph exports
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from difftest.compare import DTYPES


def _components() -> dict:
    from difftest.components import COMPONENTS

    return COMPONENTS


def _say(msg: str) -> None:
    click.echo(msg, err=True)


@click.group()
def main() -> None:
    """Lean reference vs exported graph vs PyTorch model, on random and adversarial inputs."""


@main.command("list")
def list_components() -> None:
    """The registered components."""
    for name, comp in _components().items():
        graph = comp.graph_file or "none yet"
        lean_note = "default run" if comp.lean_default else ("with --lean-all" if comp.template else "none")
        click.echo(f"{name:15} {comp.summary}\n{'':15} kinds: {', '.join(comp.kinds)}; graph: {graph}; Lean: {lean_note}")


@main.command("run")
@click.option("--component", "components", multiple=True, metavar="NAME",
              help="Component to test (repeatable; default: all). See `difftest list`.")
@click.option("--cases", default=4, show_default=True, type=click.IntRange(1, 1000), help="Cases per component.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the input generators.")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice([*DTYPES, "all"]),
              help="Precision(s) of the torch runs (repeatable; default: all). float64 runs the three-way check.")
@click.option("--device", default="cpu", show_default=True, help="torch device of the model and graph runs (cpu, cuda).")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write summary.json and index.html (per-component error plots) into DIR.")
@click.option("--lean-cases", default=2, show_default=True, type=click.IntRange(0, 1000),
              help="Cases per component the Lean reference evaluates (the first ones: a random case, then "
                   "an adversarial kind; the rest are checked against the graph and NumPy references).")
@click.option("--lean-all", is_flag=True,
              help="Evaluate every component in Lean (default: those fast in the offline interpreter; "
                   "`difftest list` shows which).")
@click.option("--no-lean", is_flag=True, help="Skip the Lean reference (graph vs torch only).")
@click.option("--no-cache", is_flag=True, help="Run Lean even for cases in the cache.")
@click.option("--no-shrink", is_flag=True, help="Do not shrink failing cases.")
def run_command(components, cases, seed, dtypes, device, report_dir, lean_cases, lean_all, no_lean, no_cache,
                no_shrink) -> None:
    """Run the differential test; exit status 1 when any comparison fails."""
    registry = _components()
    unknown = [c for c in components if c not in registry]
    if unknown:
        raise click.BadParameter(f"unknown component {', '.join(map(repr, unknown))}; known: {', '.join(registry)}",
                                 param_hint="--component")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise click.BadParameter(f"{device!r}: torch sees no CUDA device here", param_hint="--device")
    elif device != "cpu":
        raise click.BadParameter(f"{device!r}: use cpu or cuda[:N]", param_hint="--device")
    chosen = list(components) or list(registry)
    dts = list(DTYPES) if not dtypes or "all" in dtypes else list(dict.fromkeys(dtypes))

    from difftest import lean, report
    from difftest.runner import run

    start = time.monotonic()
    try:
        result = run(chosen, cases, seed, dts, device, use_lean=not no_lean and lean_cases > 0,
                     use_cache=not no_cache, shrink=not no_shrink, lean_cases=lean_cases, lean_all=lean_all,
                     progress=_say)
    except lean.LeanEvaluationError as exc:
        raise click.ClickException(str(exc)) from exc
    for r in result.results:
        if not r.passed:
            click.echo(report.diff_text(r, result.shrunk.get((r.component, r.case.index))))
    if report_dir is not None:
        json_path, html_path = report.write(result, report_dir)
        _say(f"report: {json_path}, {html_path}")
    n_cmp = sum(len(r.comparisons) for r in result.results)
    n_fail = sum(not r.passed for r in result.results)
    status = "PASSED" if result.passed else f"FAILED ({n_fail} case(s))"
    click.echo(f"difftest {status}: {len(result.results)} case(s), {n_cmp} comparisons, "
               f"{time.monotonic() - start:.1f} s (Lean {result.lean_record['seconds']} s, "
               f"{result.lean_record['ran']} evaluated, {result.lean_record['cached']} cached)")
    sys.exit(0 if result.passed else 1)


if __name__ == "__main__":
    main()
