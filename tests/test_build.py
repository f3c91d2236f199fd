"""The library build: full check, incremental rebuilds, and failures that must fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, copy_library
from k3spec import build, leanrun, sources

pytestmark = pytest.mark.lean

SMOKE = "lean/KimiK3/Smoke"


def _cli_build(root: Path, store: Path) -> subprocess.CompletedProcess:
    """`k3spec build --quiet` of the library at `root`, with `store` as its object store."""
    return subprocess.run(
        [sys.executable, "-m", "k3spec.cli", "build", "--root", str(root), "--quiet"],
        capture_output=True,
        text=True,
        env={**os.environ, "K3SPEC_BUILD_CACHE": str(store)},
    )


def test_full_build_checks_every_module(library_build: build.BuildResult) -> None:
    errors = [d.render() for d in library_build.diagnostics if d.severity == "error"]
    assert library_build.ok, "\n".join(errors)
    on_disk = {sources.module_name(p.relative_to(REPO)) for p in (REPO / "lean").rglob("*.lean")}
    assert set(library_build.built) == on_disk
    assert library_build.cached == []


def test_no_change_rebuild_builds_nothing_within_ten_seconds(library_build, tc) -> None:
    again = build.build(REPO, tc)
    assert again.ok
    assert again.built == []
    assert sorted(again.cached) == sorted(library_build.built)
    assert again.wall_s < 10


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        ("Double.lean", {"KimiK3.Smoke.Double", "KimiK3.Smoke.DoubleFacts", "KimiK3"}),
        ("DoubleFacts.lean", {"KimiK3.Smoke.DoubleFacts", "KimiK3"}),
    ],
)
def test_changing_one_module_rebuilds_exactly_it_and_its_dependents(library_build, tc, tmp_path, changed, expected) -> None:
    root = copy_library(tmp_path / "lib")
    path = root / SMOKE / changed
    path.write_text(path.read_text() + "\n/-- An added fact. -/\ntheorem added_fact : 2 + 2 = 4 := rfl\n")
    result = build.build(root, tc)
    assert result.ok
    assert set(result.built) == expected


def _bare_library(root: Path, *tops: str) -> Path:
    """An empty library at `root`: the repository's lakefile and toolchain pin, `lean/KimiK3/Smoke/`,
    and a `KimiK3.lean` that imports `KimiK3.Smoke.<top>` for each of `tops`."""
    (root / SMOKE).mkdir(parents=True)
    for name in ("lakefile.lean", "lean-toolchain"):
        shutil.copyfile(REPO / name, root / name)
    imports = "".join(f"public import KimiK3.Smoke.{top}\n" for top in tops)
    (root / "lean" / "KimiK3.lean").write_text(f"module\n\n{imports}")
    return root


def test_incomplete_store_object_is_rebuilt(library_build, tc) -> None:
    """A stored module whose outputs were removed is rebuilt, not linked as if it were complete."""
    modules = sources.discover(REPO)
    keys = build.module_keys(modules, tc)
    name = "KimiK3.Smoke.DoubleFacts"
    olean = build.object_store() / keys[name] / "KimiK3" / "Smoke" / "DoubleFacts.olean"
    olean.unlink()
    again = build.build(REPO, tc)
    assert again.ok
    assert again.built == [name]
    assert olean.is_file()


def test_transposed_index_in_the_array_matmul_breaks_its_equality_proof(library_build, tc, tmp_path) -> None:
    """A planted bug in an executable operation (issue 14): `Arr.matMul` reading `B[k, i]` for
    `B[i, k]` still type-checks, but its equality theorem with the function-backed `Tensor.matMul`
    (`toTensor_matMul`, `Exec/Ops.lean`) no longer holds, so the build fails there, and only there:
    the executable modules built on `Ops` are skipped, nothing else is rebuilt."""
    root = copy_library(tmp_path / "lib")
    kernel = root / "lean/KimiK3/Exec/Kernel.lean"
    right = "mat p m (fun r k => sumTo n (fun i => a.get (r * n + i) * b.get (i * m + k)))"
    text = kernel.read_text()
    assert text.count(right) == 1
    kernel.write_text(text.replace(right, right.replace("b.get (i * m + k)", "b.get (k * n + i)")))
    result = build.build(root, tc)
    assert not result.ok
    assert result.failed == ["KimiK3.Exec.Ops"]
    assert set(result.built) == {"KimiK3.Exec.Kernel", "KimiK3.Exec.Arr"}
    assert {"KimiK3.Exec.Channel", "KimiK3.Exec.Model", "KimiK3"} <= set(result.skipped)
    ops = (root / "lean/KimiK3/Exec/Ops.lean").read_text().splitlines()
    start = next(i for i, ln in enumerate(ops, 1) if ln.startswith("theorem toTensor_matMul "))
    end = next(i for i, ln in enumerate(ops, 1) if i > start and ln.startswith("theorem "))
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert errors and all(d.path == "lean/KimiK3/Exec/Ops.lean" and start <= d.line < end for d in errors), errors


HEAD = "module\n\n@[expose] public section\n\n"
IMPORT_BASE = "module\n\npublic import KimiK3.Smoke.Base\n\n@[expose] public section\n\n"


def _base(root: Path) -> None:
    """`Smoke/Base.lean`: it passes, with an `#eval` message (`42`) at 12:0."""
    (root / SMOKE / "Base.lean").write_text(
        HEAD + "/-- Twice `n`. -/\ndef twice (n : Nat) : Nat := n + n\n\n"
        "/-- `twice` doubles. -/\ntheorem twice_eq (n : Nat) : twice n = 2 * n := by\n  unfold twice; omega\n\n"
        "#eval twice 21\n"
    )


def _noisy(root: Path) -> None:
    """`Smoke/Noisy.lean` (imports `Base`): Lean accepts it with a linter warning at 9:8."""
    (root / SMOKE / "Noisy.lean").write_text(
        IMPORT_BASE + "/-- A fact proved with an unused simp argument. -/\n"
        "theorem noisy (n : Nat) : twice n + 0 = twice n := by\n  simp [Nat.mul_comm]\n"
    )


def _faulty_library(root: Path) -> Path:
    """One small library with every kind of failure the build must report, each on its own:
    `Base` passes (with an `#eval` message); `Noisy` (imports `Base`) has a linter warning;
    `Wrong` (imports `Base`) fails in a false proof; `Gap` has a `sorry`; the real
    `Smoke/Double.lean` with a proof broken, and the real `Smoke/DoubleFacts.lean` that imports it;
    `Counter` declares `initialize`, and `Counted` imports it; `KimiK3` imports `Noisy`, `Wrong`,
    `Gap`, `DoubleFacts` and `Counted`."""
    _bare_library(root, "Noisy", "Wrong", "Gap", "DoubleFacts", "Counted")
    _base(root)
    _noisy(root)
    (root / SMOKE / "Counter.lean").write_text(
        HEAD + "/-- A counter that importing this module creates. -/\ninitialize counter : IO.Ref Nat ← IO.mkRef 0\n"
    )
    (root / SMOKE / "Counted.lean").write_text(
        "module\n\npublic import KimiK3.Smoke.Counter\n\n@[expose] public section\n\n"
        "/-- Reads the counter. -/\ndef counted : IO Nat := counter.get\n"
    )
    (root / SMOKE / "Wrong.lean").write_text(
        IMPORT_BASE + "/-- A false claim. -/\ntheorem broken : twice 2 = 5 := by\n  decide\n"
    )
    (root / SMOKE / "Gap.lean").write_text(HEAD + "/-- An unproved claim. -/\ntheorem gap : 3 = 3 := by\n  sorry\n")
    double = (REPO / SMOKE / "Double.lean").read_text()
    assert double.count("unfold double; omega") == 1
    (root / SMOKE / "Double.lean").write_text(double.replace("unfold double; omega", "unfold double; rfl"))
    shutil.copyfile(REPO / SMOKE / "DoubleFacts.lean", root / SMOKE / "DoubleFacts.lean")
    return root


@pytest.fixture(scope="module")
def faulty(tc, tmp_path_factory) -> dict:
    """The faulty library built twice from empty stores: by the Lean workers (one at a time,
    each replaced after two jobs, so the recycling path runs and most modules are checked by a
    worker that checked another before), and with one plain `lean` process per module. `jobs`
    records, per module, whether a worker was told to import it with Lean's own import."""
    from k3spec import worker

    tmp = tmp_path_factory.mktemp("faulty")
    root = _faulty_library(tmp / "lib")
    runs: dict = {"root": root, "tmp": tmp, "jobs": {}}
    mp = pytest.MonkeyPatch()
    check = worker.LeanWorker.check

    def recorded(self, module, source, olean, ilean, full_import=False):
        runs["jobs"][module] = full_import
        return check(self, module, source, olean, ilean, full_import)

    mp.setattr(worker.LeanWorker, "check", recorded)
    try:
        for path in ("plain", "workers"):
            mp.setenv("K3SPEC_BUILD_CACHE", str(tmp / path / "objects"))
            mp.setenv("K3SPEC_WORKER_JOBS", "2")
            runs[path] = build.build(root, tc, jobs=1 if path == "workers" else 2, plain=path == "plain")
    finally:
        mp.undo()
    return runs


def _rendered(result: build.BuildResult) -> list[str]:
    return sorted(d.render() for d in result.diagnostics)


@pytest.mark.builds
@pytest.mark.parametrize("path", ["workers", "plain"])
def test_false_proof_fails_with_path_and_line(faulty, path) -> None:
    result = faulty[path]
    assert not result.ok and "KimiK3.Smoke.Wrong" in result.failed
    lines = [line for line in _rendered(result) if line.startswith(f"{SMOKE}/Wrong.lean:")]
    assert any(":9:2: error: Tactic `decide` proved that the proposition" in line for line in lines), lines


@pytest.mark.builds
@pytest.mark.parametrize("path", ["workers", "plain"])
def test_sorry_fails_in_lean_and_in_the_source_scan(faulty, path) -> None:
    result = faulty[path]
    assert "KimiK3.Smoke.Gap" in result.failed
    lines = [line for line in _rendered(result) if line.startswith(f"{SMOKE}/Gap.lean:")]
    assert any(":7:2: error: `sorry` is not allowed" in line for line in lines), lines  # the source scan
    assert any(":6:8: error: declaration uses `sorry`" in line for line in lines), lines  # Lean


@pytest.mark.builds
@pytest.mark.parametrize("path", ["workers", "plain"])
def test_broken_module_skips_its_dependents(faulty, path) -> None:
    result = faulty[path]
    assert result.failed == ["KimiK3.Smoke.Double", "KimiK3.Smoke.Gap", "KimiK3.Smoke.Wrong"]
    assert sorted(result.skipped) == ["KimiK3", "KimiK3.Smoke.DoubleFacts"]
    assert sorted(result.built) == ["KimiK3.Smoke.Base", "KimiK3.Smoke.Counted", "KimiK3.Smoke.Counter", "KimiK3.Smoke.Noisy"]


@pytest.mark.builds
def test_warning_fails_the_build_fresh_and_cached(faulty, tmp_path) -> None:
    """A linter warning is a build failure when the module is built (the faulty library) and when
    it comes from the cache: `k3spec build` on a second library of `Base` and `Noisy` with a copy
    of the workers' store takes both from it, builds only its `KimiK3`, and still fails on the warning."""
    warning = f"{SMOKE}/Noisy.lean:9:8: error: This simp argument is unused"
    fresh = faulty["workers"]
    assert "KimiK3.Smoke.Noisy" in fresh.built and "KimiK3.Smoke.Noisy" not in fresh.failed
    assert any(line.startswith(warning) and "(warnings fail the build)" in line for line in _rendered(fresh))
    root = _bare_library(tmp_path / "lib", "Noisy")
    _base(root)
    _noisy(root)
    store = shutil.copytree(faulty["tmp"] / "workers" / "objects", tmp_path / "objects")
    proc = _cli_build(root, store)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert warning in proc.stderr and "(warnings fail the build)" in proc.stderr, proc.stderr
    assert "build FAILED: 1 built, 2 up to date, 0 failed, 0 skipped" in proc.stdout, proc.stdout


@pytest.mark.builds
def test_a_module_importing_initialize_goes_through_leans_own_import(faulty, tc) -> None:
    """A worker imports a module's imports starting from the `Init` it keeps, without the flag
    that lets an imported `initialize` register anything; so a module that imports one declaring
    `initialize` (`Counted`) is sent to `Lean.Elab.runFrontend` (`full`), and only that one.
    (Its verdict and outputs equal the plain process's: the test below.)"""
    if tc.kind != "offline":
        pytest.skip("workers are the offline toolchain's")
    assert sources.declares_initializers((faulty["root"] / SMOKE / "Counter.lean").read_text())
    assert faulty["jobs"] == {name: name == "KimiK3.Smoke.Counted" for name in faulty["jobs"]}
    assert len(faulty["jobs"]) == 7


def _outputs(store: Path) -> dict[str, Path]:
    """Every output file of a build's object store, by its path below the module's object."""
    return {"/".join(p.relative_to(store).parts[1:]): p
            for p in store.rglob("*") if p.is_file() and p.name != "diagnostics.json"}


def _same_module_data(tc, pairs: list[tuple[Path, Path]], folder: Path) -> list[str]:
    """`k3spec/lean/SameModuleData.lean` on `pairs` of `.olean` paths: one `same PATH` line per
    pair whose three parts hold equal constants and extension entry counts."""
    folder.mkdir(parents=True)
    shutil.copyfile(REPO / "k3spec" / "lean" / "SameModuleData.lean", folder / "SameModuleData.lean")
    (folder / "pairs.txt").write_text("\n".join(f"{a} {b}" for a, b in pairs) + "\n")
    result = leanrun.run(tc, ["SameModuleData.lean"], cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    return [line for line in result.stdout.splitlines() if line.strip()]


@pytest.mark.builds
def test_workers_and_plain_processes_give_the_same_verdicts_diagnostics_and_outputs(faulty, tc, tmp_path) -> None:
    """The long-lived workers (`k3spec/worker.py`) check modules exactly as one `lean` process
    per module does: the same verdicts, the same diagnostics (an `#eval` message, a warning,
    errors), the same `.ilean` bytes, and `.olean` parts with equal constants (names, types,
    values) and extension entry counts (`k3spec/lean/SameModuleData.lean`; their bytes may differ
    in sharing and padding, as that file explains)."""
    if tc.kind != "offline":
        pytest.skip("workers are the offline toolchain's")
    plain, workers = faulty["plain"], faulty["workers"]
    assert plain.worker_starts == 0
    # seven modules checked, one worker at a time, each replaced after two jobs
    assert workers.worker_starts == 4
    assert (workers.ok, sorted(workers.built), workers.failed, sorted(workers.skipped)) == (
        False, sorted(plain.built), plain.failed, sorted(plain.skipped))
    rendered = _rendered(plain)
    assert any("Base.lean:12:0: information: 42" in line for line in rendered), rendered
    assert _rendered(workers) == rendered
    expected = _outputs(faulty["tmp"] / "plain" / "objects")
    suffixes = (".olean", ".olean.server", ".olean.private", ".ilean", ".ir")
    assert sorted(expected) == sorted(f"{SMOKE[5:]}/{m}{s}" for m in ("Base", "Noisy", "Counter", "Counted") for s in suffixes)
    got = _outputs(faulty["tmp"] / "workers" / "objects")
    assert got.keys() == expected.keys()
    pairs = []
    for name in expected:
        if name.endswith(".ilean"):
            assert got[name].read_bytes() == expected[name].read_bytes(), name
        elif name.endswith(".olean"):
            pairs.append((expected[name], got[name]))
    lines = _same_module_data(tc, pairs, tmp_path / "compare")
    assert lines == [f"same {a}" for a, _ in pairs]


@pytest.mark.builds
def test_a_worker_that_dies_leaves_the_module_to_a_plain_process(tc, tmp_path, monkeypatch) -> None:
    """Killing a worker during its job raises `WorkerDied` with its exit status; the build then
    checks the module with a plain process and reports it, with the verdict unchanged."""
    if tc.kind != "offline":
        pytest.skip("workers are the offline toolchain's")
    from k3spec import worker

    root = _bare_library(tmp_path / "lib", "Base")
    _base(root)
    monkeypatch.setenv("K3SPEC_BUILD_CACHE", str(tmp_path / "objects"))
    real_write = worker.LeanWorker._write
    killed: list[str] = []

    def kill_before_the_job(self, name: str, text: str) -> None:
        if text.startswith("KimiK3\n") and not killed:
            self._proc.kill()
            self._proc.wait()
            killed.append(name)
        real_write(self, name, text)

    monkeypatch.setattr(worker.LeanWorker, "_write", kill_before_the_job)
    messages: list[str] = []
    monkeypatch.setattr(build, "_say", lambda msg, quiet: messages.append(msg))
    result = build.build(root, tc, jobs=1)
    assert killed == ["job-1"]
    assert result.ok, [d.render() for d in result.diagnostics]
    assert sorted(result.built) == ["KimiK3", "KimiK3.Smoke.Base"]
    died = [m for m in messages if "checking KimiK3 with a plain Lean process" in m]
    assert died and "the Lean worker ended (exit -9) during its check of KimiK3" in died[0], messages
