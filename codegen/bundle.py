"""Concatenate executable Lean modules into one standalone file and run it.

Module headers (`module`, imports, `@[expose] public section`) are dropped; everything else is
kept verbatim, in dependency order.
"""

from __future__ import annotations

from pathlib import Path

from k3spec import sources, toolchain
from k3spec.evaluate import Message, run_source

#: The modules whose definitions an export or check run needs, in dependency order.
EXECUTABLE_MODULES = ("KimiK3.Core.Scalar", "KimiK3.Core.Kernel", "KimiK3.Core.Examples", "KimiK3.Core.Json")

HEADER_PREFIXES = ("module", "public import ", "import ", "@[expose] public section")


def module_path(root: Path, module: str) -> Path:
    """The source file of a module of the library rooted at `root`."""
    return root / "lean" / Path(*module.split(".")).with_suffix(".lean")


def strip_header(source: str) -> str:
    """A module's source without its module-system header lines."""
    kept = [line for line in source.splitlines() if not line.strip().startswith(HEADER_PREFIXES)]
    return "\n".join(kept) + "\n"


def dependency_order(root: Path, targets: tuple[str, ...]) -> tuple[str, ...]:
    """`targets` and every library module they import, each after its imports."""
    modules = sources.discover(root)
    order: list[str] = []

    def visit(name: str) -> None:
        if name not in order:
            for dep in modules[name].imports:
                visit(dep)
            order.append(name)

    for target in targets:
        visit(target)
    return tuple(order)


def bundle(root: Path, modules: tuple[str, ...] = EXECUTABLE_MODULES) -> str:
    """The listed modules' sources as one standalone Lean file."""
    parts = [f"-- from {m}\n" + strip_header(module_path(root, m).read_text(encoding="utf-8")) for m in modules]
    return "\n".join(parts)


def run_lean(source: str, name: str = "Bundle") -> list[Message]:
    """Elaborate a standalone Lean file (no library imports) and return its messages.

    Raises `k3spec.evaluate.EvaluationError` on any error.
    """
    return run_source(toolchain.find(), source, name)
