"""`difftest`: differential testing of the Lean reference, exported graphs and the torch model.

    difftest run                         # every component, one case per input kind (the README's main job, CI)
    difftest run --component mla --cases 10 --seed 3 --dtype float64 --report build/difftest
    difftest run --thorough              # three cases per kind, wider batches and prefixes
    difftest list                        # components, their input kinds, references and graph exports
    difftest replay build/difftest/summary.json   # rerun the exact inputs of each reported failure
    difftest list --impl fla-naive-recurrent      # what an implementation covers, and what not (why)
    difftest run --no-lean --impl my_pkg.k3:adapter   # an implementation as one more leg (difftest.adapters)
    difftest checkpoint --checkpoint DIR --report build/ckpt   # a hub checkpoint, layer by layer (torchrun: sharded)
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


def _load_impls(specs: tuple[str, ...]) -> tuple:
    from difftest.adapters import AdapterError, load

    try:
        return tuple(load(s) for s in specs)
    except AdapterError as exc:
        raise click.BadParameter(str(exc), param_hint="--impl") from exc


IMPL_HELP = ("An implementation to check (repeatable): package.module:object, an entry point of group "
             "difftest.impls, or a built-in (`difftest list --impl NAME`; difftest.adapters).")


@main.command("list")
@click.option("--impl", "impls", multiple=True, metavar="SPEC", help=IMPL_HELP)
def list_components(impls) -> None:
    """The registered components: input kinds, float64 references, graph export, Lean leg; with
    --impl, what each implementation covers and what not (and why)."""
    if impls:
        _list_impls(_load_impls(impls))
        return
    from difftest.adapters import available

    for name, comp in _components().items():
        graph = comp.graph_file or "none yet"
        lean_note = "default run" if comp.lean_default else ("with --lean-all" if comp.template else "none")
        refs = comp.references()
        refs_note = ", ".join(refs) if refs else "none: torch paths only (no independent reference)"
        click.echo(f"{name:15} {comp.summary}")
        click.echo(f"{'':15} references: {refs_note}; graph: {graph}; Lean: {lean_note}")
        for kind, what in comp.kinds.items():
            click.echo(f"{'':15}   kind {kind:9} {what}")
    click.echo(f"implementations (--impl): {', '.join(available())}, or package.module:object")


def _list_impls(impls: tuple) -> None:
    from difftest.adapters import CONTRACTS
    from difftest.adapters.legs import FLOAT64_ONLY

    for impl in impls:
        click.echo(f"{impl.name} ({impl.spec}): {impl.description}")
        click.echo(f"  dtypes: {', '.join(impl.dtypes)}")
        covered, missing = impl.covered(), impl.not_covered()
        for comp, contract in CONTRACTS.items():
            if comp in covered:
                extra = f" (float64 only: {FLOAT64_ONLY[comp]})" if comp in FLOAT64_ONLY else ""
                click.echo(f"  {comp:15} implemented{extra}: returns {', '.join(contract.outputs)}")
                click.echo(f"  {'':15}   receives {contract.inputs}; returns "
                           + ", ".join(f"{k} {v}" + (" (required)" if k in contract.primary else "")
                                       for k, v in contract.outputs.items()))
            elif comp in missing:
                click.echo(f"  {comp:15} not covered: {missing[comp]}")
            else:
                click.echo(f"  {comp:15} not provided")


@main.command("run")
@click.option("--component", "components", multiple=True, metavar="NAME",
              help="Component to test (repeatable; default: all). See `difftest list`.")
@click.option("--cases", default=None, type=click.IntRange(1, 1000),
              help="Cases per component (default: one of each input kind; kinds cycle).")
@click.option("--thorough", is_flag=True, help="Wider profile: three cases per kind, larger batches and prefixes.")
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
@click.option("--impl", "impls", multiple=True, metavar="SPEC",
              help=IMPL_HELP + " Default components: those it implements.")
@click.option("--no-pybridge", is_flag=True, help="Leave out the torch model's legs (an --impl check: NumPy, graph, Lean).")
def run_command(components, cases, thorough, seed, dtypes, device, report_dir, lean_cases, lean_all, no_lean, no_cache,
                no_shrink, impls, no_pybridge) -> None:
    """Run the differential test; exit status 1 when any comparison fails."""
    registry = _components()
    adapters = _load_impls(impls)
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
    covered = [c for c in registry if any(c in a.covered() for a in adapters)]
    if adapters and not covered:
        raise click.BadParameter(f"{', '.join(a.name for a in adapters)} cover(s) no component on {device} "
                                 "(`difftest list --impl`)", param_hint="--impl")
    chosen = list(components) or covered or list(registry)
    dts = list(DTYPES) if not dtypes or "all" in dtypes else list(dict.fromkeys(dtypes))
    for a in adapters:
        if not set(a.dtypes) & set(dts):
            raise click.BadParameter(f"{a.name} runs at {', '.join(a.dtypes)} only; none of them requested", param_hint="--dtype")

    from difftest import lean, report
    from difftest.runner import run

    start = time.monotonic()
    try:
        result = run(chosen, cases, seed, dts, device, use_lean=not no_lean and lean_cases > 0,
                     use_cache=not no_cache, shrink=not no_shrink, lean_cases=lean_cases, lean_all=lean_all,
                     thorough=thorough, progress=_say, adapters=adapters, pybridge=not no_pybridge)
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
               f"{time.monotonic() - start:.1f} s ({_lean_line(result.lean_record)})")
    sys.exit(0 if result.passed else 1)


def _lean_line(record: dict) -> str:
    """The final line's Lean part: seconds, cases evaluated, cached and skipped (with the reasons,
    as summary.json counts them) and the route checks."""
    skipped: dict[str, int] = {}
    checked = rejected = unchecked = 0
    for c in record.get("components", {}).values():
        for why, n in c["skipped"].items():
            skipped[why] = skipped.get(why, 0) + n
        routes = c.get("route_checks")
        if routes:
            checked, rejected = checked + routes["checked"], rejected + routes["rejected"]
            unchecked += sum(routes["unchecked"].values())
    why = ", ".join(f"{n} {reason}" for reason, n in skipped.items())
    text = (f"Lean {record['seconds']} s, {record['ran']} evaluated, {record['cached']} cached, "
            f"{sum(skipped.values())} skipped" + (f": {why}" if why else ""))
    if checked or unchecked:
        text += f"; routes checked by Lean {checked}, rejected {rejected}, not checked {unchecked}"
    return text


@main.command("replay")
@click.argument("summary", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--device", default="cpu", show_default=True, help="torch device.")
@click.option("--impl", "impls", multiple=True, metavar="SPEC",
              help="Replay with these implementations instead of those the summary names.")
def replay_command(summary: Path, device: str, impls) -> None:
    """Rerun the exact inputs of every failure in a `summary.json` (no Lean), with the
    implementations it names; exit status 1 when any still fails."""
    import json

    from difftest import report
    from difftest.adapters import AdapterError
    from difftest.runner import replay

    doc = json.loads(summary.read_text(encoding="utf-8"))
    adapters = _load_impls(impls) if impls else None
    still = 0
    for failure in doc.get("failures", []):
        try:
            r = replay(failure["reproducer"], device=device, adapters=adapters)
        except AdapterError as exc:
            raise click.ClickException(f"{summary}: {exc} (give the implementation with --impl)") from exc
        still += not r.passed
        click.echo(report.diff_text(r) if not r.passed else f"now passes: {r.case.label}")
    click.echo(f"replayed {len(doc.get('failures', []))} failure(s): {still} still fail")
    sys.exit(1 if still else 0)


@main.command("checkpoint")
@click.option("--checkpoint", "folder", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A hub-format checkpoint folder (config.json, safetensors shards, model.safetensors.index.json).")
@click.option("--layers", default="all", show_default=True, help="0-based hub layers: all, or ids and ranges (0-3,92).")
@click.option("--experts", default="routed", show_default=True,
              help="Routed experts checked on their own: routed (those the sampled tokens route to), all, or ids (0-7,12).")
@click.option("--expert-shards", default=1, show_default=True, type=click.IntRange(1, 4096),
              help="Split each MoE layer's checked experts into this many units (ranks).")
@click.option("--impl", "impls", multiple=True, metavar="SPEC", help=IMPL_HELP + " Used for kda_layer, mla, expert.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write summary.json and index.html (heat map of error / tolerance per layer) into DIR.")
@click.option("--tokens", default=4, show_default=True, type=click.IntRange(1, 4096), help="Tokens per row.")
@click.option("--rows", default=1, show_default=True, type=click.IntRange(1, 64), help="Rows (sequences).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the input generators.")
@click.option("--kind", default="random", show_default=True, type=click.Choice(["random", "small", "large"]),
              help="Input kind (difftest.inputs: unit scale, ×1e-3, ×1e3).")
@click.option("--dtype", default="auto", show_default=True, type=click.Choice(["auto", *DTYPES]),
              help="dtype of the torch layer (auto: the checkpoint's).")
@click.option("--device", default="cpu", show_default=True, help="cpu or cuda (torchrun: each rank its LOCAL_RANK GPU).")
@click.option("--timeout", "timeout_s", default=600.0, show_default=True, type=click.FloatRange(1),
              help="Seconds before a silent rank counts as lost (collectives and heartbeats).")
@click.option("--master", default=None, type=click.Path(exists=True, file_okay=False),
              help="An MXFP4 checkpoint's full-precision master (same config.json, float experts): check each "
                   "checked expert against it under the proved quantization bound.")
def checkpoint_command(folder, layers, experts, expert_shards, impls, report_dir, tokens, rows, seed, kind, dtype, device,
                       timeout_s, master) -> None:
    """Verify a hub checkpoint layer by layer at its own dimensions (difftest/checkpoint.py); exit
    status 1 when a layer fails or a rank is lost, 2 on bad input."""
    from difftest.checkpoint import Options
    from difftest.checkpoint_dist import verify
    from pybridge.errors import K3Error

    try:
        from pybridge.config import load_config

        if load_config(Path(folder) / "config.json").variant == "kimi_linear":  # difftest/checkpoint_kimi_linear.py
            from difftest import checkpoint_kimi_linear

            sys.exit(checkpoint_kimi_linear.verify(folder, layers, tokens, rows, seed, _load_impls(impls), report_dir, _say))
        code = verify(str(folder), layers, Options(tokens, rows, seed, kind, dtype, device, experts, expert_shards, master or ""),
                      _load_impls(impls), report_dir, timeout_s, _say)
    except (K3Error, ValueError) as exc:  # bad input: one `Error:` line naming the file / tensor / option, status 2
        err = click.ClickException(str(exc))
        err.exit_code = 2
        raise err from exc
    sys.exit(code)


if __name__ == "__main__":
    main()
