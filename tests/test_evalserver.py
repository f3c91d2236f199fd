"""The evaluation server (`k3spec/evalserver.py`, `k3spec/lean/EvalServer.lean`) against plain
`lean` processes on real bundles of the library: the same JSON messages, whether the bundled
prefix is elaborated for the file (a miss) or resumed from a saved state (a hit); a file's own
definitions are not seen by the next file with the same prefix; a file with another prefix or
none, which reuses only the imports, prints the same too; a server that dies leaves the file to a
plain process."""

from __future__ import annotations

import json
import os
import signal
import tempfile
from pathlib import Path

import pytest

from codegen.bundle import BUNDLE_OPTIONS, EvaluationError, bundle, dependency_order, run_lean
from k3spec import evalserver, leanrun, toolchain
from k3spec.build import LEAN_OPTIONS
from tests.helpers import REPO

pytestmark = [pytest.mark.lean, pytest.mark.slow]

PREFIX = bundle(REPO, dependency_order(REPO, ("KimiK3.Core.ScalarFacts",)))  # 2 modules, 35 theorems
#: Bodies after the same prefix: evaluation of bundled code, an `open` and an error, a definition.
BODIES = {
    "Passing": "open KimiK3\n#eval! Scalar.abs (-1.5 : Float)\n#eval (3 : Nat) * 2\n",
    "Failing": "#eval! KimiK3.Scalar.abs (2 : Float)\n#eval undefinedHere\ntheorem bad : 1 = 2 := rfl\n",
    "Defines": "def localValue : Nat := 41\n#eval localValue + 1\n",
    "Uses": "#eval localValue\n",
}


def plain(name: str, source: str) -> tuple[list[dict], int]:
    """The messages of `lean --json` on the file, as JSON objects."""
    with tempfile.TemporaryDirectory(prefix="k3spec-eval-", dir="/tmp") as tmp:
        (Path(tmp) / f"{name}.lean").write_text(source, encoding="utf-8")
        run = leanrun.run(toolchain.find(), ["--json", *LEAN_OPTIONS, *BUNDLE_OPTIONS, f"{name}.lean"], cwd=Path(tmp))
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")], run.returncode


def served(server: evalserver.EvalServer, name: str, source: str) -> tuple[list[dict], int]:
    tc = toolchain.find()
    options = evalserver.bool_options([*leanrun.process_options(tc), *LEAN_OPTIONS, *BUNDLE_OPTIONS])
    run = server.evaluate(f"{name}.lean", source, options)
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")], run.returncode


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if toolchain.find().kind != "offline":
        pytest.skip("the evaluation server is for the offline toolchain")
    srv = evalserver.EvalServer(toolchain.find(), tmp_path_factory.mktemp("evalserver") / "server")
    yield srv
    srv.close()


def test_server_prints_what_a_plain_process_prints_on_a_miss_and_on_a_hit(server) -> None:
    for name in ("Passing", "Failing"):
        source = PREFIX + BODIES[name]
        expected, code = plain(name, source)
        misses = server.misses
        assert served(server, name, source) == (expected, code)
        assert served(server, name, source) == (expected, code)
        assert server.misses - misses <= 1  # the second file of each pair resumed the saved prefix
    texts = [m["data"] for m in expected]
    assert code == 1 and any("undefinedHere" in t for t in texts) and "2.000000" in texts
    assert server.hits >= 3
    passing, _ = served(server, "Passing", PREFIX + BODIES["Passing"])
    assert [m["data"] for m in passing if m["severity"] == "information"] == ["1.500000", "6"]


def test_a_file_does_not_see_the_previous_files_definitions(server) -> None:
    defines, code = served(server, "Defines", PREFIX + BODIES["Defines"])
    assert code == 0 and "42" in [m["data"] for m in defines]
    uses, code = served(server, "Uses", PREFIX + BODIES["Uses"])
    assert (uses, code) == plain("Uses", PREFIX + BODIES["Uses"])
    assert code == 1 and any("localValue" in m["data"] for m in uses if m["severity"] == "error")


def test_files_with_another_prefix_or_none_reuse_only_the_imports(server) -> None:
    """A new prefix, and a file without one, start from the imports of the previous header."""
    other = bundle(REPO, dependency_order(REPO, ("KimiK3.Core.Scalar",))) + "#eval! KimiK3.Scalar.abs (-2.5 : Float)\n"
    for name, source in (("Other", other), ("Bare", "#eval 1 + 1\n#eval nope\n")):
        assert served(server, name, source) == plain(name, source)


def test_a_server_that_dies_leaves_the_file_to_a_plain_process(server, monkeypatch, capsys) -> None:
    """`codegen.bundle.run_lean` through this module's server (its prefix saved): killed during a
    file, the file goes to a plain process, and the next file starts a fresh server; ended between
    two files (a server ends itself after 10 idle minutes), it is replaced before the next file
    without a word, and nothing goes to a plain process."""
    monkeypatch.setenv("K3SPEC_EVAL_SERVER", "1")
    monkeypatch.setitem(evalserver._servers, toolchain.find().identity, server)
    source = PREFIX + BODIES["Passing"]
    first = [m.text for m in run_lean(source, "First")]
    real_write = server._write

    def kill_then_write(name: str, text: str) -> None:
        if name.startswith("job-"):
            os.kill(server._proc.pid, signal.SIGKILL)
            server._proc.wait()
        real_write(name, text)

    monkeypatch.setattr(server, "_write", kill_then_write)
    assert [m.text for m in run_lean(source, "Second")] == first
    assert "running it in a plain Lean process" in capsys.readouterr().err
    monkeypatch.setattr(server, "_write", real_write)
    started = server.started
    with pytest.raises(EvaluationError, match="undefinedHere"):
        run_lean(PREFIX + BODIES["Failing"], "Third")
    assert server.started == started + 1
    os.kill(server._proc.pid, signal.SIGKILL)
    server._proc.wait()
    assert [m.text for m in run_lean("#eval (3 : Nat) * 2\n", "Fourth")] == ["6"]
    assert server.started == started + 2
    assert "plain Lean process" not in capsys.readouterr().err
