"""`k3spec build`: check every proof of the Lean library, like `lake build`.

With a native toolchain this runs `lake build`. With the offline one it does Lake's job itself:
modules are built in dependency order (`lean -o X.olean -i X.ilean X.lean`), `jobs` at a time,
and each module's outputs are kept in a content-addressed object store. A module's key hashes the
toolchain identity, the Lean options, its name and source, and its dependencies' keys, so a
module is rebuilt exactly when it or something it imports changed, in any checkout.

Any error, any warning (linters included, `warnings_fail`), any declaration that uses `sorry`,
and any `sorry`/`admit`/`axiom`/`native_decide` in the sources fails the build. Diagnostics are printed as `path:line:col: severity: message`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import queue
import re
import resource
import shutil
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from . import leanrun
from .sources import FORBIDDEN, Module, SourceError, declares_initializers, dependents, discover, forbidden_uses
from .toolchain import Toolchain, cache_root, check_visible
from .worker import LeanWorker, WorkerDied

LEAN_OPTIONS = ["-Dexperimental.module=true"]
#: Lean's warning for a declaration that uses `sorry` (also a theorem body `debug.proofAsSorry` skipped).
USES_SORRY = re.compile(r"declaration uses [`']sorry[`']")
OUTPUT_SUFFIXES = (".olean", ".ilean", ".olean.private", ".olean.server", ".ir")


@dataclass
class Diagnostic:
    """One message, positioned in a repository-relative file."""

    path: str
    line: int
    column: int
    severity: str
    message: str

    def render(self) -> str:
        """`path:line:col: severity: message`, continuation lines indented."""
        body = self.message.rstrip().replace("\n", "\n  ")
        return f"{self.path}:{self.line}:{self.column}: {self.severity}: {body}"


@dataclass
class BuildResult:
    """What a build did: modules built, taken from the cache, failed or skipped."""

    ok: bool
    built: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    wall_s: float = 0.0
    module_s: dict[str, float] = field(default_factory=dict)
    module_rss_mb: dict[str, float] = field(default_factory=dict)
    peak_rss_mb: float = 0.0
    worker_starts: int = 0

    def peak_module(self) -> str:
        """The built module whose Lean process used the most memory ("" when none was built)."""
        return max(self.module_rss_mb, key=self.module_rss_mb.__getitem__, default="")


def object_store() -> Path:
    """Where module outputs are kept, keyed by content hash (`K3SPEC_BUILD_CACHE` overrides)."""
    return Path(os.environ.get("K3SPEC_BUILD_CACHE", cache_root() / "build-cache")).absolute()


def work_folder(root: Path) -> Path:
    """The build folder of the checkout at `root`: staged sources, and `out/` with its `.olean`s."""
    return object_store().parent / "work" / hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]


def module_keys(modules: dict[str, Module], tc: Toolchain) -> dict[str, str]:
    """Content hash of each module, covering the toolchain, options, source and dependencies."""
    keys: dict[str, str] = {}

    def key(name: str) -> str:
        if name not in keys:
            mod = modules[name]
            h = hashlib.sha256()
            options = " ".join((*leanrun.process_options(tc), *LEAN_OPTIONS))
            for part in (tc.identity, options, name, mod.text, *sorted(key(d) for d in mod.imports)):
                h.update(part.encode())
                h.update(b"\0")
            keys[name] = h.hexdigest()[:32]
        return keys[name]

    for name in modules:
        key(name)
    return keys


def _forbidden_diagnostics(modules: dict[str, Module]) -> list[Diagnostic]:
    diags = []
    for mod in modules.values():
        for line, col, word in forbidden_uses(mod.text):
            diags.append(
                Diagnostic(str(mod.path), line, col, "error", f"`{word}` is not allowed in the library ({', '.join(FORBIDDEN)})")
            )
    return diags


def _parse_diagnostics(result: leanrun.LeanResult, mod: Module) -> list[Diagnostic]:
    diags = []
    for msg in leanrun.parse_messages(result.stdout):
        severity, text = msg.severity, msg.text
        if severity == "warning" and (msg.kind == "hasSorry" or USES_SORRY.search(text)):
            severity = "error"
            text = f"{text} (sorry is not allowed in the library)"
        diags.append(Diagnostic(str(mod.path), msg.line, msg.column, severity, text))
    if result.returncode != 0 and not any(d.severity == "error" for d in diags):
        detail = result.stderr.strip() or "no message"
        diags.append(Diagnostic(str(mod.path), 1, 0, "error", f"lean exited with code {result.returncode}: {detail}"))
    return diags


def warnings_fail(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """`diagnostics` with every warning made an error: the library builds with zero warnings.

    Applied to fresh and cached diagnostics alike, so a stored module with a warning (built before
    this rule) still fails the build until its source is fixed.
    """
    return [
        Diagnostic(d.path, d.line, d.column, "error", f"{d.message.rstrip()}\n(warnings fail the build)")
        if d.severity == "warning"
        else d
        for d in diagnostics
    ]


def _olean_rel(name: str) -> Path:
    return Path(*name.split("."))


def _link_outputs(obj: Path, out: Path, name: str) -> None:
    rel = _olean_rel(name)
    for suffix in OUTPUT_SUFFIXES:
        src = obj / rel.parent / (rel.name + suffix)
        dst = out / rel.parent / (rel.name + suffix)
        if dst.exists() or dst.is_symlink():
            dst.unlink()
        if src.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:
                shutil.copyfile(src, dst)


def _complete(obj: Path, name: str) -> bool:
    """Whether a stored module still has its `.olean` (a store edited by hand may lack it)."""
    rel = _olean_rel(name)
    return (obj / rel.parent / (rel.name + ".olean")).is_file()


def _unlink_outputs(out: Path, name: str) -> None:
    rel = _olean_rel(name)
    for suffix in OUTPUT_SUFFIXES:
        dst = out / rel.parent / (rel.name + suffix)
        if dst.exists() or dst.is_symlink():
            dst.unlink()


def _plain_check(tc: Toolchain, mod: Module, work: Path, olean: Path, ilean: Path) -> leanrun.LeanResult:
    """Check one module with its own `lean` process (`--root` gives it its module name)."""
    args = ["--json", *LEAN_OPTIONS, f"--root={work / 'src' / 'lean'}", "-o", str(olean), "-i", str(ilean), str(mod.path)]
    return leanrun.run(tc, args, cwd=work / "src", lean_path=[work / "out"])


class Checker:
    """How modules are checked: one plain `lean` process each, or (offline, by default) long-lived
    Lean workers (`k3spec/worker.py`), one per parallel job, each used by one thread at a time.
    A worker that dies during a module is replaced, and that module is checked by a plain
    process: the verdict is always a real check's."""

    def __init__(self, tc: Toolchain, work: Path, jobs: int, plain: bool, quiet: bool) -> None:
        self.tc = tc
        self.work = work
        self.quiet = quiet
        self.use_workers = tc.kind == "offline" and not plain
        # Last in, first out: a module goes to the worker that finished most recently, so a chain
        # of modules built one after the other (an incremental rebuild) starts one worker, not one
        # per module (each start costs a Lean start-up and the worker's own elaboration).
        self._idle: queue.LifoQueue[LeanWorker] = queue.LifoQueue()
        self._all: list[LeanWorker] = []
        if self.use_workers:
            for i in range(max(1, jobs)):
                worker = LeanWorker(tc, work / "workers" / str(i), work / "src", [work / "out"])
                self._all.append(worker)
                self._idle.put(worker)

    def check(self, mod: Module, olean: Path, ilean: Path, full_import: bool) -> leanrun.LeanResult:
        """Check `mod`, writing its outputs to `olean`, `ilean` and their siblings (`full_import`:
        a module it imports declares `initialize`, see `LeanWorker.check`)."""
        if not self.use_workers:
            return _plain_check(self.tc, mod, self.work, olean, ilean)
        worker = self._idle.get()
        try:
            return worker.check(mod.name, mod.path, olean, ilean, full_import)
        except WorkerDied as err:
            _say(f"[build] {err}; checking {mod.name} with a plain Lean process", self.quiet)
            return _plain_check(self.tc, mod, self.work, olean, ilean)
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        """End every worker."""
        for worker in self._all:
            worker.close()

    @property
    def worker_starts(self) -> int:
        """How many worker processes were started."""
        return sum(w.started for w in self._all)


def _build_one(checker: Checker, mod: Module, key: str, work: Path, store: Path, full_import: bool) -> tuple[list[Diagnostic], bool, float, float]:
    staged_src = work / "src" / mod.path
    staged_src.parent.mkdir(parents=True, exist_ok=True)
    staged_src.write_text(mod.text, encoding="utf-8")
    tmp = work / "tmp" / key
    shutil.rmtree(tmp, ignore_errors=True)
    rel = _olean_rel(mod.name)
    (tmp / rel.parent).mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    result = checker.check(mod, tmp / rel.parent / (rel.name + ".olean"), tmp / rel.parent / (rel.name + ".ilean"), full_import)
    seconds = time.monotonic() - start
    diags = _parse_diagnostics(result, mod)
    ok = result.returncode == 0 and not any(d.severity == "error" for d in diags)
    if ok:
        (tmp / "diagnostics.json").write_text(json.dumps([d.__dict__ for d in diags]))
        try:
            tmp.rename(store / key)
        except OSError:  # another checkout stored the same module first: same key, same content
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return diags, ok, seconds, result.peak_rss_mb


def _say(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def build_offline(root: Path, tc: Toolchain, jobs: int = 4, quiet: bool = False, plain: bool = False) -> BuildResult:
    """Build the library at `root` with the offline toolchain; see the module docstring. With
    `plain`, every module gets its own `lean` process instead of a long-lived worker's job."""
    t0 = time.monotonic()
    result = BuildResult(ok=False)
    try:
        modules = discover(root)
    except SourceError as err:
        result.diagnostics.append(Diagnostic("lean", 0, 0, "error", str(err)))
        return result
    result.diagnostics.extend(_forbidden_diagnostics(modules))
    keys = module_keys(modules, tc)
    store = object_store()
    work = work_folder(root)
    for folder in (store, work / "out", work / "src", work / "tmp"):
        folder.mkdir(parents=True, exist_ok=True)
    check_visible(work, "the build folder")
    with _exclusive(work / "lock", quiet):
        checker = Checker(tc, work, jobs, plain, quiet)
        try:
            return _build_locked(modules, keys, checker, store, work, result, jobs, quiet, t0)
        finally:
            checker.close()
            result.worker_starts = checker.worker_starts


@contextmanager
def _exclusive(lock_path: Path, quiet: bool) -> Iterator[None]:
    """Hold an exclusive lock on a checkout's build folder (a second build of it waits)."""
    with open(lock_path, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say("[build] another build of this checkout is running; waiting for it", quiet)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build_locked(
    modules: dict[str, Module],
    keys: dict[str, str],
    checker: Checker,
    store: Path,
    work: Path,
    result: BuildResult,
    jobs: int,
    quiet: bool,
    t0: float,
) -> BuildResult:
    users = dependents(modules)
    # the modules that import one with `initialize` commands: Lean's own import for them
    full_import = {user for mod in modules.values() if declares_initializers(mod.text) for user in users[mod.name]}
    todo: set[str] = set()
    for name in modules:
        obj = store / keys[name]
        if (obj / "diagnostics.json").exists() and not _complete(obj, name):
            _say(f"[build] the stored outputs of {name} are incomplete; rebuilding it", quiet)
            shutil.rmtree(obj, ignore_errors=True)
        if (obj / "diagnostics.json").exists():
            _link_outputs(store / keys[name], work / "out", name)
            result.cached.append(name)
            for d in json.loads((store / keys[name] / "diagnostics.json").read_text()):
                if d["severity"] in ("warning", "error"):
                    result.diagnostics.append(Diagnostic(**d))
        else:
            _unlink_outputs(work / "out", name)
            todo.add(name)
    _say(f"[build] {len(modules)} modules: {len(result.cached)} up to date, {len(todo)} to build", quiet)
    done: set[str] = set(result.cached)
    failed: set[str] = set()
    running: dict[Future, str] = {}
    total = len(todo)
    parallel = max(1, jobs)
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        while todo or running:
            # to a fixpoint: a module whose import was skipped just now is skipped too (else the
            # loop could end with it neither built nor reported)
            while blocked := sorted(n for n in todo if any(d in failed or d in result.skipped for d in modules[n].imports)):
                for name in blocked:
                    todo.discard(name)
                    result.skipped.append(name)
                    _say(f"[build] skipped {name}: a module it imports failed", quiet)
            ready = sorted(
                (n for n in todo if all(d in done for d in modules[n].imports)),
                key=lambda n: (-len(users[n]), n),
            )
            for name in ready[: max(0, parallel - len(running))]:
                todo.discard(name)
                running[pool.submit(_build_one, checker, modules[name], keys[name], work, store, name in full_import)] = name
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                name = running.pop(fut)
                diags, ok, seconds, rss_mb = fut.result()
                result.module_s[name] = seconds
                result.module_rss_mb[name] = rss_mb
                result.diagnostics.extend(diags)
                count = len(result.built) + len(failed) + 1
                if ok:
                    _link_outputs(store / keys[name], work / "out", name)
                    done.add(name)
                    result.built.append(name)
                    _say(f"[build] [{count}/{total}] {name} ({seconds:.1f} s, {rss_mb / 1024:.1f} GB)", quiet)
                else:
                    failed.add(name)
                    _say(f"[build] [{count}/{total}] {name} FAILED ({seconds:.1f} s)", quiet)
    result.failed = sorted(failed)
    result.wall_s = time.monotonic() - t0
    result.peak_rss_mb = max(result.module_rss_mb.values(), default=0.0)
    result.diagnostics = warnings_fail(result.diagnostics)
    result.ok = not failed and not result.skipped and not any(d.severity == "error" for d in result.diagnostics)
    return result


def build_native(root: Path, tc: Toolchain, quiet: bool = False) -> BuildResult:
    """Run `lake build` at `root`, after the same forbidden-word scan as the offline build."""
    t0 = time.monotonic()
    result = BuildResult(ok=False)
    try:
        modules = discover(root)
    except SourceError as err:
        result.diagnostics.append(Diagnostic("lean", 0, 0, "error", str(err)))
        return result
    result.diagnostics.extend(_forbidden_diagnostics(modules))
    lake = shutil.which("lake") or str(Path(tc.lean).with_name("lake"))
    proc = subprocess.run([lake, "build", "--wfail"], cwd=root, text=True, capture_output=True)
    if not quiet:
        print(proc.stdout, end="", flush=True)
        print(proc.stderr, end="", file=sys.stderr, flush=True)
    for line in proc.stdout.splitlines():
        if USES_SORRY.search(line):
            result.diagnostics.append(Diagnostic("lake", 0, 0, "error", f"{line.strip()} (sorry is not allowed)"))
    if proc.returncode != 0:
        result.diagnostics.append(Diagnostic("lakefile.lean", 1, 0, "error", f"lake build exited with code {proc.returncode}"))
        result.failed = ["lake build"]
    else:
        result.built = sorted(modules)
    result.wall_s = time.monotonic() - t0
    result.peak_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result.ok = proc.returncode == 0 and not any(d.severity == "error" for d in result.diagnostics)
    return result


def build(root: Path, tc: Toolchain, jobs: int = 4, quiet: bool = False, plain: bool = False) -> BuildResult:
    """Check the library at `root` with toolchain `tc` (`plain`: offline, one process per module)."""
    if tc.kind == "native":
        return build_native(root, tc, quiet)
    return build_offline(root, tc, jobs, quiet, plain)
