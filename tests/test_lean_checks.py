"""Every Lean check file of `tests/lean/` runs: its `#guard`s pass and Lean reports no error.

The expected values in the check files are computed by hand (comments beside each check); the
runner is `tests/lean_checks.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codegen.bundle import EvaluationError, run_lean
from lean_checks import CheckFileError, bundle_modules, check_files, run_check_file, run_check_files


@pytest.mark.lean
@pytest.mark.checks
@pytest.mark.parametrize("path", check_files(), ids=lambda p: p.stem)
def test_check_file_passes(path: Path) -> None:
    try:
        run_check_file(path)
    except CheckFileError as err:
        pytest.fail(str(err), pytrace=False)


def test_every_check_file_names_its_bundle() -> None:
    assert check_files(), "tests/lean/ holds no check file"
    for path in check_files():
        assert bundle_modules(path)


def test_file_without_header_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "NoHeader.lean"
    path.write_text("#guard 1 + 1 == 2\n", encoding="utf-8")
    with pytest.raises(CheckFileError, match=r"NoHeader\.lean:1: the first line must be `-- bundle:"):
        run_check_file(path)


def test_unknown_bundle_module_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "Unknown.lean"
    path.write_text("-- bundle: KimiK3.Core.NoSuchModule\n#guard true\n", encoding="utf-8")
    with pytest.raises(CheckFileError, match=r"Unknown\.lean:1: .*KimiK3\.Core\.NoSuchModule"):
        run_check_file(path)


def test_theorem_in_a_check_file_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "Proves.lean"
    path.write_text("-- bundle: KimiK3.Core.Tensor\n#guard true\ntheorem t : 1 = 1 := rfl\n", encoding="utf-8")
    with pytest.raises(CheckFileError, match=r"Proves\.lean:3: `theorem` in a check file"):
        run_check_file(path)


def test_forbidden_word_in_a_check_file_is_an_error_but_comments_are_not(tmp_path: Path) -> None:
    path = tmp_path / "Words.lean"
    path.write_text("-- bundle: KimiK3.Core.Tensor\n/- a theorem in a comment,\ntheorem x -/\n-- sorry\n"
                    "def d : Nat := sorry\n", encoding="utf-8")
    with pytest.raises(CheckFileError, match=r"Words\.lean:5: `sorry` in a check file"):
        run_check_file(path)


@pytest.mark.lean
def test_bundle_skips_theorem_bodies_but_evaluates_definitions() -> None:
    """Bundles skip theorem bodies (`debug.proofAsSorry`, checked by the build instead): a false
    theorem does not stop the bundle, its `by` block inside a definition is still elaborated,
    plain `#eval` refuses a term that mentions a skipped theorem, and `#eval!` evaluates it."""
    skipped = "theorem wrong : 1 = 2 := by decide\ntheorem zero_lt_one' : 0 < 1 := by decide\ndef zeroFin : Fin 1 := ⟨0, zero_lt_one'⟩\n"
    values = [m.text.strip() for m in run_lean(skipped + "#eval! zeroFin.val + 7\n", "SkippedProof") if m.severity == "information"]
    assert values == ["7"]
    with pytest.raises(EvaluationError, match="sorry"):
        run_lean(skipped + "#eval zeroFin.val\n", "PlainEval")
    with pytest.raises(EvaluationError, match="omega"):
        run_lean("def bad : Fin 1 := ⟨1, by omega⟩\n", "DefinitionProof")


@pytest.mark.lean
@pytest.mark.checks
def test_files_run_together_each_gets_its_own_verdict_and_scope(tmp_path: Path) -> None:
    """In the one run of several check files, a failing `#guard` fails its own file, at its own
    line, and no other; an `open` in one file does not reach the next."""
    good = tmp_path / "Good.lean"
    good.write_text("-- bundle: KimiK3.Core.Tensor\nopen Nat\n#guard succ 1 == 2\n#eval 40 + 2\n", encoding="utf-8")
    bad = tmp_path / "Bad.lean"
    bad.write_text("-- bundle: KimiK3.Core.Tensor\n#guard 1 + 1 == 2\n#guard 1 == 2\n", encoding="utf-8")
    scoped = tmp_path / "Scoped.lean"
    scoped.write_text("-- bundle: KimiK3.Core.Tensor\n#eval succ 1\n", encoding="utf-8")
    results = run_check_files((good, bad, scoped))
    assert [(m.line, m.text.strip()) for m in results[good] if m.severity == "information"] == [(4, "42")]
    assert isinstance(results[bad], CheckFileError)
    assert f"{bad}:3:" in str(results[bad]) and "Good" not in str(results[bad])
    assert isinstance(results[scoped], CheckFileError)  # `succ` is unknown without `open Nat`
    assert f"{scoped}:2:" in str(results[scoped])
