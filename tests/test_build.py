"""The library build: full check, incremental rebuilds, and failures that must fail."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, copy_library
from k3spec import build, leanrun, sources

pytestmark = pytest.mark.lean

SMOKE = "lean/KimiK3/Smoke"


def _cli_build(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "k3spec.cli", "build", "--root", str(root), "--quiet"],
        capture_output=True,
        text=True,
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


def _smoke_library(root: Path, top: str) -> Path:
    """A library of the real `Smoke/Double.lean` and `Smoke/DoubleFacts.lean` (the second imports
    the first), whose `KimiK3.lean` imports `KimiK3.Smoke.<top>`: small enough to build from an
    empty store in a few seconds, off the session's full build."""
    _bare_library(root, top)
    for name in (f"{SMOKE}/Double.lean", f"{SMOKE}/DoubleFacts.lean"):
        shutil.copyfile(REPO / name, root / name)
    return root


@pytest.mark.builds
def test_false_proof_fails_with_path_and_line(tmp_path) -> None:
    root = _smoke_library(tmp_path / "lib", "Wrong")
    (root / SMOKE / "Wrong.lean").write_text(
        "module\n\n@[expose] public section\n\n/-- A false claim. -/\ntheorem wrong : 2 + 2 = 5 := by\n  decide\n"
    )
    proc = _cli_build(root)
    assert proc.returncode == 1
    assert f"{SMOKE}/Wrong.lean:7:2: error:" in proc.stderr
    assert "build FAILED" in proc.stdout


@pytest.mark.builds
def test_sorry_fails_in_lean_and_in_the_source_scan(tmp_path) -> None:
    root = _smoke_library(tmp_path / "lib", "Gap")
    (root / SMOKE / "Gap.lean").write_text(
        "module\n\n@[expose] public section\n\n/-- An unproved claim. -/\ntheorem gap : 3 = 3 := by\n  sorry\n"
    )
    proc = _cli_build(root)
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.startswith(f"{SMOKE}/Gap.lean:")]
    assert any(":7:2: error: `sorry` is not allowed" in line for line in lines), proc.stderr
    assert any(":6:8: error: declaration uses `sorry`" in line for line in lines), proc.stderr


@pytest.mark.builds
def test_warning_fails_the_build_fresh_and_cached(tc, tmp_path) -> None:
    """A linter warning is a build failure, when the module is built and when it comes from the cache."""
    root = _bare_library(tmp_path / "lib", "Noisy")
    (root / SMOKE / "Noisy.lean").write_text(
        "module\n\n@[expose] public section\n\n/-- A fact proved with an unused simp argument. -/\n"
        "theorem noisy (n : Nat) : n + 0 = n := by\n  simp [Nat.mul_comm]\n"
    )
    for attempt in ("fresh", "cached"):
        proc = _cli_build(root)
        assert proc.returncode == 1, (attempt, proc.stdout, proc.stderr)
        assert f"{SMOKE}/Noisy.lean:7:8: error: This simp argument is unused" in proc.stderr, (attempt, proc.stderr)
        assert "(warnings fail the build)" in proc.stderr
        assert "build FAILED" in proc.stdout
    assert "0 built, 2 up to date" in proc.stdout  # the second run took both modules from the cache


@pytest.mark.builds
def test_broken_module_skips_its_dependents(tc, tmp_path) -> None:
    root = _smoke_library(tmp_path / "lib", "DoubleFacts")
    path = root / SMOKE / "Double.lean"
    path.write_text(path.read_text().replace("unfold double; omega", "unfold double; rfl"))
    result = build.build(root, tc)
    assert not result.ok
    assert result.failed == ["KimiK3.Smoke.Double"]
    assert set(result.skipped) == {"KimiK3.Smoke.DoubleFacts", "KimiK3"}


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


def _small_library(root: Path) -> Path:
    """A three-module library: `Base` passes (with an `#eval` message), `Noisy` has a linter
    warning, `Wrong` fails in a proof; `KimiK3` imports all three."""
    _bare_library(root, "Noisy", "Wrong")
    head = "module\n\n@[expose] public section\n\n"
    (root / SMOKE / "Base.lean").write_text(
        head + "/-- Twice `n`. -/\ndef twice (n : Nat) : Nat := n + n\n\n"
        "/-- `twice` doubles. -/\ntheorem twice_eq (n : Nat) : twice n = 2 * n := by\n  unfold twice; omega\n\n"
        "#eval twice 21\n"
    )
    (root / SMOKE / "Noisy.lean").write_text(
        "module\n\npublic import KimiK3.Smoke.Base\n\n@[expose] public section\n\n"
        "/-- A fact proved with an unused simp argument. -/\ntheorem noisy (n : Nat) : twice n + 0 = twice n := by\n"
        "  simp [Nat.mul_comm]\n"
    )
    (root / SMOKE / "Wrong.lean").write_text(
        "module\n\npublic import KimiK3.Smoke.Base\n\n@[expose] public section\n\n"
        "/-- A false claim. -/\ntheorem broken : twice 2 = 5 := by\n  decide\n"
    )
    return root


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
def test_workers_and_plain_processes_give_the_same_verdicts_diagnostics_and_outputs(tc, tmp_path, monkeypatch) -> None:
    """The long-lived workers (`k3spec/worker.py`) check modules exactly as one `lean` process
    per module does: the same verdicts, the same diagnostics (an `#eval` message, a warning, an
    error), the same `.ilean` bytes, and `.olean` parts with equal constants (names, types,
    values) and extension entry counts (`k3spec/lean/SameModuleData.lean`; their bytes may differ
    in sharing and padding, as that file explains). The worker is replaced after two jobs, so the
    recycling path runs too."""
    if tc.kind != "offline":
        pytest.skip("workers are the offline toolchain's")
    root = _small_library(tmp_path / "lib")
    runs = {}
    for path in ("plain", "workers"):
        monkeypatch.setenv("K3SPEC_BUILD_CACHE", str(tmp_path / path / "objects"))
        # one worker, replaced after two jobs: `Noisy` is checked by a worker that checked `Base`
        # before, `Wrong` by a fresh one
        monkeypatch.setenv("K3SPEC_WORKER_JOBS", "2")
        runs[path] = build.build(root, tc, jobs=1, plain=path == "plain")
    plain = runs["plain"]
    assert not plain.ok
    assert sorted(plain.built) == ["KimiK3.Smoke.Base", "KimiK3.Smoke.Noisy"]
    assert plain.failed == ["KimiK3.Smoke.Wrong"] and plain.skipped == ["KimiK3"]
    rendered = sorted(d.render() for d in plain.diagnostics)
    assert any("Base.lean:12:0: information: 42" in line for line in rendered), rendered
    assert any("Noisy.lean:9:8: error: This simp argument is unused" in line for line in rendered), rendered
    assert any("Wrong.lean:9:2: error: Tactic `decide` proved that the proposition" in line for line in rendered), rendered
    assert plain.worker_starts == 0
    expected = _outputs(tmp_path / "plain" / "objects")
    suffixes = (".olean", ".olean.server", ".olean.private", ".ilean", ".ir")
    assert sorted(expected) == sorted(f"{SMOKE[5:]}/{m}{s}" for m in ("Base", "Noisy") for s in suffixes)
    pairs = []
    for path, starts in (("workers", 2),):
        run = runs[path]
        assert (run.ok, sorted(run.built), run.failed, run.skipped) == (False, sorted(plain.built), plain.failed, plain.skipped)
        assert sorted(d.render() for d in run.diagnostics) == rendered, path
        assert run.worker_starts == starts, path
        got = _outputs(tmp_path / path / "objects")
        assert got.keys() == expected.keys()
        for name in expected:
            if name.endswith(".ilean"):
                assert got[name].read_bytes() == expected[name].read_bytes(), (path, name)
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

    root = _small_library(tmp_path / "lib")
    (root / SMOKE / "Wrong.lean").unlink()
    (root / SMOKE / "Noisy.lean").unlink()
    (root / "lean" / "KimiK3.lean").write_text("module\n\npublic import KimiK3.Smoke.Base\n")
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
