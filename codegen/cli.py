"""`python -m codegen`: export the example graphs, or run the Lean evaluation checks."""

from __future__ import annotations

from pathlib import Path

import click

from .checks import run_checks
from .export import export, write


@click.group()
def main() -> None:
    """Code generation around the Lean core."""


@main.command("export")
@click.option("--root", type=click.Path(path_type=Path), default=Path("."), help="Repository root.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("fixtures/graphs"), help="Output folder.")
def export_cmd(root: Path, out: Path) -> None:
    """Export the example models to validated JSON files."""
    for path in write(export(root), out):
        click.echo(path)


@main.command("check")
@click.option("--root", type=click.Path(path_type=Path), default=Path("."), help="Repository root.")
def check_cmd(root: Path) -> None:
    """Run the `#guard` evaluation checks."""
    for line in run_checks(root):
        click.echo(line)
