"""Read the Lean library's modules: their import graph and forbidden proof escapes.

The library is `lean/KimiK3.lean` (root module `KimiK3`) plus every `lean/KimiK3/**/*.lean`,
the same set as the `lakefile.lean` target `KimiK3` with its submodules.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

SOURCE_DIR = "lean"
LIBRARY = "KimiK3"
FORBIDDEN = ("sorry", "admit", "axiom", "native_decide")
_IMPORT = re.compile(r"^(?:public\s+|private\s+)?(?:meta\s+)?import\s+(?:all\s+)?([A-Za-z_][\w.]*)\s*$")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_'!?.]*")


class SourceError(RuntimeError):
    """A problem with the library's sources, with a `path:line` message."""


@dataclass
class Module:
    """One library module: its name, repository-relative path, text and project imports."""

    name: str
    path: Path
    text: str
    imports: list[str] = field(default_factory=list)


def module_name(rel: Path) -> str:
    """`lean/KimiK3/Core/Tensor.lean` -> `KimiK3.Core.Tensor`."""
    return ".".join(rel.relative_to(SOURCE_DIR).with_suffix("").parts)


@functools.lru_cache(maxsize=1024)
def blank_comments_and_strings(text: str) -> str:
    """`text` with comments (nested `/- -/` and `--`) and string literals replaced by spaces.

    Newlines are kept, so line and column numbers of what remains are unchanged. Cached: a build
    reads each module's code three times (its imports, the forbidden words, `initialize`), and this
    character loop takes about 0.26 s over the library.
    """
    out = list(text)
    i, n, depth = 0, len(text), 0
    while i < n:
        if depth:
            if text.startswith("/-", i):
                depth += 1
                out[i] = out[i + 1] = " "
                i += 2
            elif text.startswith("-/", i):
                depth -= 1
                out[i] = out[i + 1] = " "
                i += 2
            else:
                if out[i] != "\n":
                    out[i] = " "
                i += 1
        elif text.startswith("/-", i):
            depth = 1
            out[i] = out[i + 1] = " "
            i += 2
        elif text.startswith("--", i):
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
        elif text[i] == '"':
            out[i] = " "
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    out[i] = " "
                    i += 1
                if out[i] != "\n":
                    out[i] = " "
                i += 1
            if i < n:
                out[i] = " "
                i += 1
        elif text[i] == "'" and _char_literal_end(text, i) > i:
            end = _char_literal_end(text, i)
            for j in range(i, end + 1):
                out[j] = " "
            i = end + 1
        else:
            i += 1
    return "".join(out)


def _char_literal_end(text: str, i: int) -> int:
    """Index of the closing quote of a character literal ('a', '\\n') opening at `i`, else -1.

    A quote right after an identifier character is a name's prime (`h'`), not a literal.
    """
    if i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_'!?"):
        return -1
    if text.startswith("\\", i + 1):
        end = text.find("'", i + 2, i + 12)
    else:
        end = i + 2 if text[i + 2 : i + 3] == "'" else -1
    return end


def forbidden_uses(text: str) -> list[tuple[int, int, str]]:
    """(line, column, word) of each `sorry`, `admit`, `axiom` or `native_decide` in code.

    Lines are 1-based and columns 0-based, as in Lean's own messages.
    """
    found = []
    for lineno, line in enumerate(blank_comments_and_strings(text).splitlines(), start=1):
        for m in _WORD.finditer(line):
            if m.group(0) in FORBIDDEN:
                found.append((lineno, m.start(), m.group(0)))
    return found


_INITIALIZE = re.compile(r"\b(?:builtin_)?initialize\b")


def declares_initializers(text: str) -> bool:
    """Whether a module's code (outside comments and strings) has an `initialize` or
    `builtin_initialize` command. Importing such a module runs code that may register extensions,
    which needs Lean's own import (`importModules` sets the flag that allows it); the build's
    workers then check the modules that import it with `Lean.Elab.runFrontend`
    (`k3spec/lean/Worker.lean`, `k3Frontend`)."""
    return bool(_INITIALIZE.search(blank_comments_and_strings(text)))


def parse_imports(text: str, path: Path) -> list[str]:
    """The modules imported by the header of a module's text."""
    imports = []
    for raw, line in zip(text.splitlines(), blank_comments_and_strings(text).splitlines()):
        if raw.lstrip().startswith(("/-!", "/--")):
            break  # a doc comment is a command: the header has ended
        stripped = line.strip()
        if not stripped or stripped in ("module", "prelude"):
            continue
        m = _IMPORT.match(stripped)
        if not m:
            break
        imports.append(m.group(1))
    return imports


def discover(root: Path) -> dict[str, Module]:
    """All library modules under `root`, with import edges checked to exist and be acyclic."""
    src = root / SOURCE_DIR
    files = [src / f"{LIBRARY}.lean", *sorted((src / LIBRARY).rglob("*.lean"))]
    if not files[0].is_file():
        raise SourceError(f"{SOURCE_DIR}/{LIBRARY}.lean: the library's root module is missing")
    modules: dict[str, Module] = {}
    for f in files:
        rel = f.relative_to(root)
        text = f.read_text(encoding="utf-8")
        modules[module_name(rel)] = Module(module_name(rel), rel, text)
    for mod in modules.values():
        for imp in parse_imports(mod.text, mod.path):
            if imp == LIBRARY or imp.startswith(LIBRARY + "."):
                if imp not in modules:
                    raise SourceError(f"{mod.path}:1:0: error: imports {imp}, which has no file in {SOURCE_DIR}/")
                mod.imports.append(imp)
    _check_acyclic(modules)
    return modules


def _check_acyclic(modules: dict[str, Module]) -> None:
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = " -> ".join(trail[trail.index(name):] + [name])
            raise SourceError(f"{modules[name].path}:1:0: error: import cycle {cycle}")
        state[name] = 1
        for dep in modules[name].imports:
            visit(dep, trail + [name])
        state[name] = 2

    for name in modules:
        visit(name, [])


def dependents(modules: dict[str, Module]) -> dict[str, set[str]]:
    """For each module, the set of modules that import it, directly or not."""
    direct: dict[str, set[str]] = {name: set() for name in modules}
    for mod in modules.values():
        for dep in mod.imports:
            direct[dep].add(mod.name)
    closure: dict[str, set[str]] = {}

    def collect(name: str) -> set[str]:
        if name not in closure:
            acc: set[str] = set()
            for user in direct[name]:
                acc |= {user} | collect(user)
            closure[name] = acc
        return closure[name]

    for name in modules:
        collect(name)
    return closure
