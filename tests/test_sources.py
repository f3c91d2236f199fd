"""Reading the library's sources: imports, forbidden words, and the lakefile's fields."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO
from k3spec import sources


def test_forbidden_words_in_code_are_found_with_positions() -> None:
    text = "theorem a : True := by\n  sorry\ndef b := 1 -- admit\naxiom c : False\nexample : 1 = 1 := by native_decide\n"
    assert sources.forbidden_uses(text) == [(2, 2, "sorry"), (4, 0, "axiom"), (5, 22, "native_decide")]


def test_forbidden_words_in_comments_strings_and_names_are_ignored() -> None:
    text = (
        "/- sorry /- nested admit -/ axiom -/\n"
        'def s := "sorry \\" admit"\n'
        "def c := 'a'\n"
        "theorem no_axiom_needed (h' : True) : True := h'\n"
        "/-- Docstring saying native_decide. -/\ndef d := 1\n"
    )
    assert sources.forbidden_uses(text) == []


def test_initialize_commands_are_found_in_code_only() -> None:
    """A module declaring `initialize` makes the build's workers import its users with Lean's own
    import (`k3spec/lean/Worker.lean`); the word in comments, strings or longer names does not."""
    assert sources.declares_initializers("module\n\ninitialize counter : IO.Ref Nat ← IO.mkRef 0\n")
    assert sources.declares_initializers("@[init] builtin_initialize registerFoo\n")
    assert not sources.declares_initializers(
        "/- initialize -/\n-- initialize\ndef s := \"initialize\"\ndef initializeAll := 1\ndef x_initialize := 2\n"
    )


def test_imports_are_read_from_the_header_only() -> None:
    text = "module\n-- comment\npublic import KimiK3.A\nimport Init.Core\nmeta import KimiK3.B\n\n/-! doc -/\nimport KimiK3.C\n"
    assert sources.parse_imports(text, Path("x.lean")) == ["KimiK3.A", "Init.Core", "KimiK3.B"]


def test_import_cycles_and_missing_modules_are_reported(tmp_path: Path) -> None:
    lib = tmp_path / "lean"
    (lib / "KimiK3").mkdir(parents=True)
    (lib / "KimiK3.lean").write_text("module\npublic import KimiK3.A\n")
    (lib / "KimiK3" / "A.lean").write_text("module\npublic import KimiK3.B\n")
    (lib / "KimiK3" / "B.lean").write_text("module\npublic import KimiK3.A\n")
    with pytest.raises(sources.SourceError, match="import cycle KimiK3.A -> KimiK3.B -> KimiK3.A"):
        sources.discover(tmp_path)
    (lib / "KimiK3" / "B.lean").write_text("module\npublic import KimiK3.Missing\n")
    with pytest.raises(sources.SourceError, match=r"lean/KimiK3/B.lean:1:0: error: imports KimiK3.Missing"):
        sources.discover(tmp_path)


def test_lakefile_matches_the_tree() -> None:
    lakefile = (REPO / "lakefile.lean").read_text()
    lib = re.search(r"@\[default_target\]\s*\nlean_lib\s+(\w+)\s+where(.*)", lakefile, re.S)
    assert lib, "the lean_lib must be the default target"
    name, body = lib.group(1), lib.group(2)
    assert name == sources.LIBRARY
    src_dir = re.search(r'srcDir\s*:=\s*"([^"]+)"', body).group(1)
    assert src_dir == sources.SOURCE_DIR
    assert (REPO / src_dir / f"{name}.lean").is_file(), "library name must equal the root module"
    assert re.search(rf"roots\s*:=\s*#\[`{name}\]", body)
    assert re.search(rf"globs\s*:=\s*#\[\.andSubmodules `{name}\]", body)
    assert "experimental.module, true" in lakefile
    assert (REPO / "lean-toolchain").read_text().strip() == "leanprover/lean4:v4.28.0"


def test_every_library_file_uses_the_module_system() -> None:
    for path in (REPO / "lean").rglob("*.lean"):
        first = path.read_text().lstrip().splitlines()[0]
        assert first == "module", f"{path.relative_to(REPO)} must start with `module`"




def test_no_python_code_rewrites_lean_text() -> None:
    """What is evaluated is what the build checked: no Python code applies `str.replace` or
    `re.sub` to bundled or read Lean text (the bundle only leaves out module headers)."""
    import ast

    suspicious = ("bundle", ".lean", "lean_text", "source")
    # k3spec/toolchain.py patches lean.js, the JavaScript glue of the offline toolchain, not Lean;
    # tests/lean_checks.py rewrites the positions in Lean's error messages, not Lean text.
    not_lean = {"k3spec/toolchain.py", "tests/lean_checks.py"}
    found = []
    for path in sorted(REPO.glob("**/*.py")):
        if any(part in (".git", "build", ".lake") for part in path.parts) or str(path.relative_to(REPO)) in not_lean:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("replace", "sub"):
                receiver = ast.unparse(node.func.value)
                args = " ".join(ast.unparse(a) for a in node.args)
                text = receiver + " " + args
                if node.func.attr == "sub" and receiver != "re":
                    continue
                if any(s in text for s in suspicious) and "Path" not in receiver and "with_suffix" not in text:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert found == [], "Python code rewriting Lean text:\n" + "\n".join(found)
