"""Axiom audit: every declaration of the library, its statement, position and axioms, as JSON.

The Lean side is `templates/report/audit.lean.j2`: a generated file that imports the library,
loads it a second time at the private level (`importModules`, which reads `.olean.private`, so
every proof of the library is visible), collects the axioms of every constant of every audited
module, and prints one JSON object per line. The collection follows Lean's own collector
(`Lean.CollectAxioms.collect`, what `#print axioms` uses) step by step, memoized over the
library's constants (Lean's collector re-walks each constant's whole dependency cone, ~50 s for
the library); it calls Lean's collector for everything outside the library, and compares the two
on a sample of constants (`CHECK_EVERY`), failing the audit on any difference. `#print axioms`
itself refuses to run on the offline toolchain (it treats every file as a `module`), and a plain
`import` hides proof bodies.

Lean core's theorems are opaque to the collector when the toolchain ships no `.olean.private` for
them (the offline toolchain ships none): they are reported as `core` dependencies, trusted with the
toolchain. Source positions come from each module's `.ilean` (the `decls` table Lean writes beside
the `.olean`), so they point at the real files `lean/KimiK3/...:line`.

The audit fails (`AuditError`) when a constant depends on `sorryAx` or on any axiom other than
Lean's standard three, or when a library proof could not be read.

`audit_library` keeps each audit beside the build's object store (`audits/<key>.json`), keyed by
the content hashes of every module (the build's keys: toolchain, options, sources, imports), the
audit template and this file. The audit is a function of exactly those, so a second audit of
the same library (the tests' and then the report's, in CI) reads the first one back instead of
re-running a Lean process of about 25 s.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from k3spec import sources
from k3spec.build import build, module_keys, object_store, work_folder
from k3spec.toolchain import Toolchain

from .bundle import EvaluationError, run_source

STANDARD_AXIOMS = ("propext", "Classical.choice", "Quot.sound")
# The memoized collection is cross-checked against Lean's collector alone on every CHECK_EVERY-th
# constant of each module (about 300 of the library's ~10,000; the test of a small library checks all).
CHECK_EVERY = 32
TEMPLATES = Path(__file__).parent / "templates" / "report"


class AuditError(RuntimeError):
    """The audit found a forbidden axiom, or could not run; the message names what and where."""


@dataclass
class Declaration:
    """One declaration written in the library's sources (it has a position in its `.ilean`)."""

    name: str
    module: str
    path: str  # repository-relative source file
    line: int  # 1-based line of the declaration (its docstring included)
    kind: str = "unknown"
    statement: str = ""
    doc: str | None = None
    axioms: list[str] = field(default_factory=list)
    core: list[str] = field(default_factory=list)

    @property
    def nonstandard(self) -> list[str]:
        """Axioms it uses beyond Lean's standard three (`sorryAx` included)."""
        return [a for a in self.axioms if a not in STANDARD_AXIOMS]


@dataclass
class Audit:
    """The audit of one library build."""

    declarations: dict[str, Declaration]
    constants: list[dict]  # every constant of the audited modules, auxiliary ones included
    toolchain: str
    seconds: float
    core_opaque: bool  # whether some core declarations' proofs were not visible
    eval_seconds: float = 0.0  # the metaprogram's own time (seconds includes Lean start-up, slot waits)

    def violations(self) -> list[str]:
        """`module: constant uses axiom(s) ...` for every forbidden use, and unreadable proofs."""
        found = []
        for c in self.constants:
            bad = [a for a in c["axioms"] if a not in STANDARD_AXIOMS]
            if bad:
                found.append(f"{c['module']}: {c['constant']} depends on {', '.join(bad)}")
            if c["hidden"]:
                found.append(f"{c['module']}: {c['constant']}: proofs not visible to the audit: {', '.join(c['hidden'])}")
        return found

    def to_json(self) -> dict:
        """The audit as one JSON document (`k3spec.audit.v1`)."""
        return {
            "format": "k3spec.audit.v1",
            "toolchain": self.toolchain,
            "seconds": round(self.seconds, 1),
            "eval_seconds": round(self.eval_seconds, 1),
            "standard_axioms": list(STANDARD_AXIOMS),
            "core_opaque": self.core_opaque,
            "declarations": [d.__dict__ for d in self.declarations.values()],
            "constants": self.constants,
        }

    @classmethod
    def from_json(cls, doc: dict) -> "Audit":
        """Read back `to_json` (the report's fixtures use this)."""
        if doc.get("format") != "k3spec.audit.v1":
            raise AuditError(f"not a k3spec.audit.v1 document (format {doc.get('format')!r})")
        decls = {d["name"]: Declaration(**d) for d in doc["declarations"]}
        return cls(decls, doc["constants"], doc["toolchain"], doc["seconds"], doc["core_opaque"],
                   doc.get("eval_seconds", 0.0))


def ilean_declarations(olean_root: Path, module: str, source: Path) -> dict[str, tuple[int, str]]:
    """`name -> (1-based line, source path)` from the module's `.ilean` `decls` table."""
    ilean = olean_root / Path(*module.split(".")).with_suffix(".ilean")
    if not ilean.is_file():
        raise AuditError(f"{ilean} is missing: build the library first (k3spec build)")
    try:
        decls = json.loads(ilean.read_text(encoding="utf-8"))["decls"]
    except (json.JSONDecodeError, KeyError) as err:
        raise AuditError(f"{ilean}: not an .ilean file with a `decls` table ({err})") from err
    return {name: (pos[0] + 1, str(source)) for name, pos in decls.items()}


def audit_source(modules: list[str], details: list[str], out_path: Path, check_every: int = CHECK_EVERY) -> str:
    """The generated Lean file that audits `modules`, details the declarations `details`, and
    writes its JSON lines to `out_path`; every `check_every`th constant of a module (its first
    included) is also collected by Lean's collector alone and compared with the memoized set."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=True)

    def parts(name: str) -> str:
        return "[" + ", ".join(json.dumps(p) for p in name.split(".")) + "]"

    return env.get_template("audit.lean.j2").render(
        modules=modules, module_parts={m: parts(m) for m in modules}, details=[parts(d) for d in details],
        out_path=str(out_path), check_every=check_every,
    )


def parse_output(lines: list[str]) -> tuple[dict[str, dict], list[dict], list[str], float]:
    """The metaprogram's JSON lines: details by name, constants, names it could not find, and
    the seconds its `#eval` took (private-level import and collection, without Lean's start-up)."""
    details: dict[str, dict] = {}
    constants: list[dict] = []
    missing: list[str] = []
    done, eval_s = False, 0.0
    for line in lines:
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        if "constant" in record:
            constants.append(record)
        elif "detail" in record:
            details[record["detail"]] = record
        elif "missing" in record:
            missing.append(record["missing"])
        elif "mismatch" in record:
            raise AuditError(f"the memoized axiom collection of {record['mismatch']} differs from Lean's "
                             "`CollectAxioms.collect` run from it alone")
        elif record.get("done"):
            done, eval_s = True, record.get("eval_ms", 0) / 1000
    if not done:
        raise AuditError("the audit metaprogram stopped before its end (no `done` line)")
    return details, constants, missing, eval_s


def run_audit(tc: Toolchain, olean_root: Path, modules: dict[str, Path], check_every: int = CHECK_EVERY) -> Audit:
    """Audit the built `modules` (`name -> repository-relative source path`) under `olean_root`;
    `check_every` as in `audit_source`."""
    start = time.monotonic()
    positions: dict[str, tuple[int, str, str]] = {}
    for module, path in modules.items():
        for name, (line, src) in ilean_declarations(olean_root, module, path).items():
            positions[name] = (line, src, module)
    with tempfile.TemporaryDirectory(prefix="k3spec-audit-", dir="/tmp") as tmp:
        out_path = Path(tmp) / "audit.jsonl"
        source = audit_source(sorted(modules), sorted(positions), out_path, check_every)
        try:
            run_source(tc, source, "K3Audit", [olean_root])
        except EvaluationError as err:
            raise AuditError(f"the audit metaprogram failed:\n{err}") from err
        if not out_path.is_file():
            raise AuditError("the audit metaprogram wrote no output")
        details, constants, missing, eval_s = parse_output(out_path.read_text(encoding="utf-8").splitlines())
    by_name = {c["constant"]: c for c in constants}
    decls: dict[str, Declaration] = {}
    for name, (line, src, module) in sorted(positions.items()):
        if name in missing:
            continue  # e.g. a private declaration: audited among `constants`, not listed
        const = by_name.get(name, {})
        detail = details.get(name, {})
        decls[name] = Declaration(
            name=name,
            module=module,
            path=src,
            line=line,
            kind=const.get("kind", "unknown"),
            statement=detail.get("statement", ""),
            doc=detail.get("doc"),
            axioms=sorted(const.get("axioms", [])),
            core=sorted(detail.get("core", [])),
        )
    core_opaque = any(c["core_count"] for c in constants)
    return Audit(decls, constants, tc.identity, time.monotonic() - start, core_opaque, eval_s)


def library_olean_root(root: Path, tc: Toolchain) -> Path:
    """Where the build of the checkout at `root` leaves its `.olean`/`.ilean` files."""
    if tc.kind == "native":
        return root / ".lake" / "build" / "lib" / "lean"
    return work_folder(root) / "out"


def audit_key(modules: dict[str, sources.Module], tc: Toolchain) -> str:
    """What an audit of `modules` depends on: every module's build key, the template, this code."""
    h = hashlib.sha256()
    keys = module_keys(modules, tc)
    for part in (*(f"{n}={keys[n]}" for n in sorted(keys)), (TEMPLATES / "audit.lean.j2").read_text(encoding="utf-8"),
                 Path(__file__).read_text(encoding="utf-8")):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def audit_library(root: Path, tc: Toolchain) -> Audit:
    """Build the library at `root` (incrementally) and audit every module of it; an audit of
    the same sources is read back from `audits/` beside the object store."""
    result = build(root, tc, quiet=True)
    if not result.ok:
        errors = [d.render() for d in result.diagnostics if d.severity == "error"]
        raise AuditError("the Lean library does not build:\n" + "\n".join(errors[:10]))
    discovered = sources.discover(root)
    stored = object_store().parent / "audits" / f"{audit_key(discovered, tc)}.json"
    if stored.is_file():
        return Audit.from_json(json.loads(stored.read_text(encoding="utf-8")))
    audit = run_audit(tc, library_olean_root(root, tc), {name: mod.path for name, mod in discovered.items()})
    stored.parent.mkdir(parents=True, exist_ok=True)
    tmp = stored.with_suffix(".tmp")
    tmp.write_text(json.dumps(audit.to_json()), encoding="utf-8")
    tmp.replace(stored)
    return audit


def check(audit: Audit) -> None:
    """Raise `AuditError` naming every constant that uses a forbidden axiom."""
    found = audit.violations()
    if found:
        allowed = ", ".join(STANDARD_AXIOMS)
        raise AuditError(
            f"{len(found)} declaration(s) depend on axioms beyond Lean's standard three ({allowed}):\n  "
            + "\n  ".join(found)
        )
