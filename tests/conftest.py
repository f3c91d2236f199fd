"""Shared fixtures: the Lean toolchain and one real, uncached build of the library per session.

The session uses a fresh object store (under /tmp, where the offline Lean can see it), so the
first build checks every module for real, whatever earlier runs left in the user cache.
`K3SPEC_TEST_STORE` names it (it must not exist yet); it is then kept for later commands.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# CI (`.ci/run`) names a store that does not exist yet, so that its later `k3spec report` reuses
# the session's objects; otherwise the session makes its own and removes it at the end.
_GIVEN = os.environ.get("K3SPEC_TEST_STORE")
if _GIVEN and Path(_GIVEN).exists():
    raise SystemExit(f"K3SPEC_TEST_STORE={_GIVEN} exists: the session's first build must be uncached")
_STORE = Path(_GIVEN) if _GIVEN else Path(tempfile.mkdtemp(prefix="k3spec-test-store-", dir="/tmp"))
os.environ["K3SPEC_BUILD_CACHE"] = str(_STORE / "objects")

from k3spec import build, toolchain  # noqa: E402  (import after the cache is chosen)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _GIVEN:
        shutil.rmtree(_STORE, ignore_errors=True)


#: The session fixture that runs the full, uncached library build, and the one that runs the
#: whole graph export (`fresh_exports` bundles the sources it needs and evaluates them without
#: the build's `.olean`s, so its tests need no build): the markers `library` and `exports`.
MARKED_FIXTURES = {"library_build": pytest.mark.library, "fresh_exports": pytest.mark.exports}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses the session's library build gets the marker `library`, one that uses the
    session's export `exports` (so `scripts/test` can run the Lean tests in three processes side
    by side); `gpu` tests are skipped where torch sees no CUDA device."""
    for item in items:
        for name, marker in MARKED_FIXTURES.items():
            if name in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
    import torch

    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _lean_only_when_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that starts a Lean process (every one goes through `k3spec.leanrun.run`) must be
    marked `lean`, so that `pytest -m "not lean"` never waits for the toolchain."""
    if request.node.get_closest_marker("lean") is None:
        from k3spec import leanrun

        def refuse(*args: object, **kwargs: object) -> None:
            pytest.fail(f"{request.node.nodeid} starts a Lean process: mark it `@pytest.mark.lean`")

        monkeypatch.setattr(leanrun, "run", refuse)


@pytest.fixture(scope="session")
def tc() -> toolchain.Toolchain:
    """The installed toolchain; a missing one is a failure, not a skip."""
    try:
        return toolchain.find()
    except toolchain.ToolchainError as err:
        pytest.fail(f"{err} (the README's setup installs it)")


@pytest.fixture(scope="session")
def library_build(tc: toolchain.Toolchain) -> build.BuildResult:
    """The session's first, full build of the repository's library; records its wall time, and
    each module's seconds and peak memory (`build/lean-build-modules.json`)."""
    result = build.build(REPO, tc)
    out = REPO / "build"
    out.mkdir(exist_ok=True)
    peak = f", {result.peak_module()}" if result.peak_module() else ""
    (out / "lean-build-time.txt").write_text(
        f"{result.wall_s:.1f} s for {len(result.built)} modules "
        f"({tc.kind} toolchain, peak Lean process memory {result.peak_rss_mb / 1024:.1f} GB{peak})\n"
    )
    rows = {name: {"seconds": round(s, 1), "peak_gb": round(result.module_rss_mb.get(name, 0.0) / 1024, 2)}
            for name, s in sorted(result.module_s.items(), key=lambda kv: -kv[1])}
    (out / "lean-build-modules.json").write_text(json.dumps(rows, indent=1) + "\n")
    return result


@pytest.fixture(scope="session")
def fresh_exports() -> dict[str, str]:
    """The text of every graph of `codegen/exports.toml`, freshly exported from the library
    (`k3spec export`'s code, once per session: every test that reads an export shares its Lean
    runs), by name."""
    from codegen.export import export

    return export(REPO)


def copy_library(dest: Path) -> Path:
    """A copy of the Lean library (lakefile, toolchain pin, lean/) under `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "lean", dest / "lean")
    for name in ("lakefile.lean", "lean-toolchain"):
        shutil.copyfile(REPO / name, dest / name)
    return dest
