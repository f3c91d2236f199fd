"""`k3spec report`: a static HTML site of the proof status, from each equation to its tests.

Inputs: the equation index (`fixtures/report/equations.json`: per component, the report
equation, the Lean reference definitions, graph, denotation theorems, JSON exports and difftest
components), the axiom audit (`k3spec.audit`), the export files, and the difftest summary.

Every status is computed here, never read from the index:

* a Lean cell is **proved** when every named declaration is in the audited library and depends
  on no axiom beyond Lean's standard three; **open** when one is missing;
* an export cell is **tested** when every file exists and validates against
  `fixtures/graph.schema.json`; **open** when one is missing, **failed** when one is invalid;
* a difftest cell is **tested** when every named component passed in the summary, **failed**
  when one failed, **open** when a component is absent or no difftest ran;
* a cell the index leaves empty (`null`) does not apply (**n/a**).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import jsonschema

from .audit import STANDARD_AXIOMS, Audit, Declaration

TEMPLATES = Path(__file__).parent / "templates" / "report"
#: The one page stating what the whole chain proves and trusts; the site links to a copy of it.
TRUST_PAGE = Path("docs") / "TRUST.md"
COLUMNS = ("reference", "graph", "denotation", "export", "difftest")
LEAN_COLUMNS = ("reference", "graph", "denotation")
STATUSES = ("proved", "tested", "open", "failed", "n/a")


class ReportError(RuntimeError):
    """Bad report input (index, difftest summary); the message names the file and field."""


@dataclass
class Cell:
    """One cell of the index table: what it names, its computed status, and why."""

    column: str
    items: list[str]
    status: str
    notes: list[str] = field(default_factory=list)  # e.g. "missing: KimiK3.X"


@dataclass
class DifftestComponent:
    """What the site shows of one difftest component (see `read_difftest`)."""

    name: str
    passed: bool
    cases: int
    failed_cases: int
    worst_abs: float | None = None
    worst_rel: float | None = None
    worst_ratio: dict[str, float] = field(default_factory=dict)
    summary: str = ""


@dataclass
class Row:
    """One component of the index with its computed cells and evidence."""

    id: str
    component: str
    section: str
    equation: str
    cells: dict[str, Cell]
    theorems: list[str]
    tests: list[tuple[str, bool]]  # (test reference, exists)
    open_items: list[str]

    @property
    def status(self) -> str:
        """The weakest applicable cell: failed < open < tested < proved."""
        order = ["failed", "open", "tested", "proved"]
        present = [c.status for c in self.cells.values() if c.status != "n/a"]
        return min(present, key=order.index) if present else "n/a"


def load_index(path: Path) -> list[dict]:
    """The rows of an equation index file, checked for the fields the report reads."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ReportError(f"{path}: cannot read the equation index ({err})") from err
    if doc.get("format") != "k3spec.equations.v1":
        raise ReportError(f"{path}: format must be k3spec.equations.v1, got {doc.get('format')!r}")
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise ReportError(f"{path}: `rows` must be a list")
    for i, row in enumerate(rows):
        for key in ("id", "component", "section", "equation", *COLUMNS):
            if key not in row:
                raise ReportError(f"{path}: rows[{i}] ({row.get('id', '?')}) lacks `{key}`")
        for key in COLUMNS:
            if row[key] is not None and not (isinstance(row[key], list) and all(isinstance(x, str) for x in row[key])):
                raise ReportError(f"{path}: rows[{i}].{key} must be null or a list of strings")
    return rows


def read_difftest(folder: Path | None) -> dict[str, DifftestComponent] | None:
    """The per-component results of `<folder>/summary.json`, or None when there is none.

    Fields read (format `difftest.report.v1`): `components` — a mapping `name -> {cases,
    failed_cases, worst_ratio: {dtype: error/tolerance}, summary}` or a list of
    `{name, status: pass|fail, cases, worst_abs, worst_rel}`; and `comparisons` — rows with
    `component`, `abs_err`, `err` (relative error), from which the worst absolute and relative
    errors are taken. Unknown fields are ignored.
    """
    if folder is None:
        return None
    path = folder / "summary.json"
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ReportError(f"{path}: not JSON ({err})") from err
    comps = doc.get("components")
    out: dict[str, DifftestComponent] = {}
    if isinstance(comps, dict):
        for name, c in comps.items():
            failed = int(c.get("failed_cases", 0))
            out[name] = DifftestComponent(
                name, failed == 0, int(c.get("cases", 0)), failed,
                worst_ratio={k: float(v) for k, v in (c.get("worst_ratio") or {}).items()},
                summary=str(c.get("summary", "")),
            )
    elif isinstance(comps, list):
        for c in comps:
            if "name" not in c:
                raise ReportError(f"{path}: a component entry lacks `name`")
            passed = str(c.get("status", "")).lower() in ("pass", "passed", "ok")
            out[c["name"]] = DifftestComponent(
                c["name"], passed, int(c.get("cases", 0)), int(c.get("failed_cases", 0 if passed else 1)),
                worst_abs=_float(c.get("worst_abs")), worst_rel=_float(c.get("worst_rel")),
            )
    else:
        raise ReportError(f"{path}: `components` must be a mapping or a list")
    for row in doc.get("comparisons") or []:
        comp = out.get(row.get("component"))
        if comp is None:
            continue
        for attr, key in (("worst_abs", "abs_err"), ("worst_rel", "err")):
            value = _float(row.get(key))
            if value is not None and (getattr(comp, attr) is None or value > getattr(comp, attr)):
                setattr(comp, attr, value)
    return out


def _float(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def lean_cell(column: str, names: list[str] | None, audit: Audit) -> Cell:
    """Proved when every declaration is in the audit with standard axioms only."""
    if names is None:
        return Cell(column, [], "n/a")
    missing = [n for n in names if n not in audit.declarations]
    bad = [f"{n} uses {', '.join(audit.declarations[n].nonstandard)}" for n in names
           if n in audit.declarations and audit.declarations[n].nonstandard]
    if bad:
        return Cell(column, names, "failed", bad + [f"missing: {n}" for n in missing])
    if missing or not names:
        return Cell(column, names, "open", [f"missing: {n}" for n in missing] or ["nothing named"])
    return Cell(column, names, "proved")


def export_cell(files: list[str] | None, repo: Path, schema: dict | None) -> Cell:
    """Tested when every export file exists and validates against the graph schema."""
    if files is None:
        return Cell("export", [], "n/a")
    notes, status = [], "tested"
    for rel in files:
        path = repo / rel
        if not path.is_file():
            notes.append(f"missing: {rel}")
            status = "failed" if status == "failed" else "open"
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if schema is not None:
                jsonschema.validate(doc, schema)
        except (json.JSONDecodeError, jsonschema.ValidationError) as err:
            notes.append(f"invalid: {rel}: {str(err).splitlines()[0]}")
            status = "failed"
    return Cell("export", files, status, notes)


def difftest_cell(names: list[str] | None, results: dict[str, DifftestComponent] | None) -> Cell:
    """Tested when every named difftest component passed in the latest summary."""
    if names is None:
        return Cell("difftest", [], "n/a")
    if results is None:
        return Cell("difftest", names, "open", ["no difftest run"])
    notes, status = [], "tested"
    for name in names:
        comp = results.get(name)
        if comp is None:
            notes.append(f"not in the difftest summary: {name}")
            status = "failed" if status == "failed" else "open"
        elif not comp.passed:
            notes.append(f"{name}: {comp.failed_cases} of {comp.cases} cases failed")
            status = "failed"
    return Cell("difftest", names, status, notes)


def test_exists(ref: str, repo: Path) -> bool:
    """Whether `tests/x.py` or `tests/x.py::test_name` exists in the repository."""
    file, _, name = ref.partition("::")
    path = repo / file
    if not path.is_file():
        return False
    return not name or f"def {name}(" in path.read_text(encoding="utf-8")


def build_rows(index: list[dict], audit: Audit, repo: Path, difftest: dict[str, DifftestComponent] | None) -> list[Row]:
    """Compute every cell of the index."""
    schema_path = repo / "fixtures" / "graph.schema.json"
    schema = json.loads(schema_path.read_text(encoding="utf-8")) if schema_path.is_file() else None
    rows = []
    for r in index:
        cells = {c: lean_cell(c, r[c], audit) for c in LEAN_COLUMNS}
        cells["export"] = export_cell(r["export"], repo, schema)
        cells["difftest"] = difftest_cell(r["difftest"], difftest)
        rows.append(Row(
            r["id"], r["component"], r["section"], r["equation"], cells, list(r.get("theorems") or []),
            [(t, test_exists(t, repo)) for t in r.get("tests") or []], list(r.get("open") or []),
        ))
    return rows


def summarize(rows: list[Row], audit: Audit) -> dict:
    """Counts per column and status, the extra theorems' status, and the named open items."""
    counts = {c: {s: 0 for s in STATUSES} for c in COLUMNS}
    open_items: list[str] = []
    for row in rows:
        for col, cell in row.cells.items():
            counts[col][cell.status] += 1
            if cell.status in ("open", "failed"):
                open_items.append(f"{row.component} — {col}: {'; '.join(cell.notes)}")
        for name in row.theorems:
            if name not in audit.declarations:
                open_items.append(f"{row.component} — theorem missing: {name}")
        open_items.extend(f"{row.component} — {item}" for item in row.open_items)
    decls = list(audit.declarations.values())
    theorems = [d for d in decls if d.kind == "theorem"]
    return {
        "counts": counts,
        "open_items": open_items,
        "declarations": len(decls),
        "theorems": len(theorems),
        "clean_theorems": sum(1 for d in theorems if not d.nonstandard),
        "axioms_used": sorted({a for d in decls for a in d.axioms}),
        "core_dependencies": len({c for d in decls for c in d.core}),
    }


def source_link(decl: Declaration, site: Path, repo: Path, source_url: str | None) -> str:
    """Link from the site's pages to `decl`'s source line (`source_url` + path, or a relative file path)."""
    if source_url:
        return f"{source_url.rstrip('/')}/{decl.path}#L{decl.line}"
    return f"{os.path.relpath(repo / decl.path, site)}#L{decl.line}"


def render_site(
    out: Path,
    index: list[dict],
    audit: Audit,
    repo: Path,
    difftest: dict[str, DifftestComponent] | None,
    source_url: str | None = None,
) -> Path:
    """Write the site (index.html, one page per component, declarations.html, trust.html, audit.json) into `out`."""
    start = time.monotonic()
    out = out.absolute()
    (out / "components").mkdir(parents=True, exist_ok=True)
    rows = build_rows(index, audit, repo, difftest)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined)
    common = {
        "audit": audit,
        "standard_axioms": STANDARD_AXIOMS,
        "columns": COLUMNS,
        "difftest_ran": difftest is not None,
    }

    def link(decl: Declaration, depth: int) -> str:
        return source_link(decl, out / "components" if depth else out, repo, source_url)

    summary = summarize(rows, audit)
    (out / "style.css").write_text((TEMPLATES / "style.css").read_text(encoding="utf-8"), encoding="utf-8")
    (out / "index.html").write_text(
        env.get_template("index.html.j2").render(rows=rows, summary=summary, **common), encoding="utf-8")
    for row in rows:
        names = [n for c in LEAN_COLUMNS for n in row.cells[c].items] + row.theorems
        decls = [(n, audit.declarations.get(n)) for n in dict.fromkeys(names)]
        page = env.get_template("component.html.j2").render(
            row=row, decls=decls, link=lambda d: link(d, 1),
            difftest={n: difftest.get(n) for n in row.cells["difftest"].items} if difftest else {}, **common)
        (out / "components" / f"{row.id}.html").write_text(page, encoding="utf-8")
    modules: dict[str, list[Declaration]] = {}
    for d in sorted(audit.declarations.values(), key=lambda d: (d.module, d.line)):
        modules.setdefault(d.module, []).append(d)
    (out / "declarations.html").write_text(
        env.get_template("declarations.html.j2").render(modules=modules, link=lambda d: link(d, 0), **common),
        encoding="utf-8")
    trust = repo / TRUST_PAGE
    (out / "trust.html").write_text(env.get_template("trust.html.j2").render(
        source=str(TRUST_PAGE), text=trust.read_text(encoding="utf-8") if trust.is_file() else f"{TRUST_PAGE} is missing",
        **common), encoding="utf-8")
    (out / "audit.json").write_text(json.dumps(audit.to_json(), indent=1) + "\n", encoding="utf-8")
    (out / "status.json").write_text(json.dumps({
        "summary": summary,
        "rows": [{"id": r.id, "status": r.status, "cells": {c: {"status": x.status, "items": x.items, "notes": x.notes}
                                                             for c, x in r.cells.items()}} for r in rows],
        "render_seconds": round(time.monotonic() - start, 2),
    }, indent=1) + "\n", encoding="utf-8")
    return out / "index.html"
