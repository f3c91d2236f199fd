"""`k3spec report`: the proof-status site and the axiom audit behind it.

Most tests render the site from fixture data (`fixtures/report/`: a small audit, a small
equation index, a difftest summary) and check the computed statuses and the pages' content. The
`lean` tests run the audit metaprogram: on the real library, and on a fixture module with an
`axiom` and a `sorry`, which must make the audit fail naming the theorem and the axiom. The
screenshot test renders the index page with headless Chromium (Debian `chromium`) and checks that
the PNG is not blank; it is skipped, with the reason, when Chromium is absent.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from codegen import audit, report
from k3spec.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "report"


def small_audit() -> audit.Audit:
    return audit.Audit.from_json(json.loads((FIXTURES / "audit_small.json").read_text(encoding="utf-8")))


def fixture_repo(tmp: Path) -> Path:
    """A repository root holding what the small index names: the schema, one export, one test."""
    (tmp / "fixtures" / "graphs").mkdir(parents=True)
    shutil.copyfile(REPO / "fixtures" / "graph.schema.json", tmp / "fixtures" / "graph.schema.json")
    shutil.copyfile(REPO / "fixtures" / "graphs" / "rms_mlp.json", tmp / "fixtures" / "graphs" / "demo.json")
    (tmp / "tests").mkdir()
    (tmp / "tests" / "test_demo.py").write_text("def test_doubling():\n    assert 2 * 2 == 4\n")
    return tmp


def render_small(tmp: Path, difftest: bool = True) -> tuple[Path, dict]:
    repo = fixture_repo(tmp / "repo")
    index = report.load_index(FIXTURES / "equations_small.json")
    results = report.read_difftest(FIXTURES / "difftest") if difftest else None
    page = report.render_site(tmp / "site", index, small_audit(), repo, results)
    status = json.loads((tmp / "site" / "status.json").read_text(encoding="utf-8"))
    return page, status


def text_of(path: Path) -> str:
    """A page's visible text: tags dropped, entities decoded, whitespace collapsed."""
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8"))))
    return re.sub(r" ([;,.)])", r"\1", text)


def test_statuses_are_computed_from_the_evidence(tmp_path: Path) -> None:
    _, status = render_small(tmp_path)
    rows = {r["id"]: r for r in status["rows"]}
    demo = {c: v["status"] for c, v in rows["demo"]["cells"].items()}
    # every Lean name is in the audit with standard axioms; the export validates; difftest passed
    assert demo == {"reference": "proved", "graph": "proved", "denotation": "proved",
                    "export": "tested", "difftest": "tested"}
    assert rows["demo"]["status"] == "tested"  # the weakest link of the chain
    later = rows["later"]["cells"]
    assert later["reference"]["status"] == "open"
    assert later["reference"]["notes"] == ["missing: KimiK3.Demo.g"]
    assert later["graph"]["status"] == "n/a"
    assert later["export"]["notes"] == ["missing: fixtures/graphs/missing.json"]
    assert later["difftest"] == {"status": "failed", "items": ["later"], "notes": ["later: 1 of 3 cases failed"]}
    counts = status["summary"]["counts"]
    assert counts["reference"] == {"proved": 1, "tested": 0, "open": 1, "failed": 0, "n/a": 0}


def test_index_page_names_every_open_item(tmp_path: Path) -> None:
    page, _ = render_small(tmp_path)
    text = text_of(page)
    for item in ("Later component — reference: missing: KimiK3.Demo.g",
                 "Later component — denotation: missing: KimiK3.Demo.g_specFwd",
                 "Later component — difftest: later: 1 of 3 cases failed",
                 "Demo doubling — no finite-precision bound"):
        assert item in text
    assert "Open items (5)" in text
    assert "report equation reference definition graph denotation theorem JSON export difftest result" in text


def test_component_page_shows_statements_axioms_sources_and_difftest(tmp_path: Path) -> None:
    render_small(tmp_path)
    page = tmp_path / "site" / "components" / "demo.html"
    text = text_of(page)
    assert "KimiK3.Demo.graph_specFwd (x : Nat) : KimiK3.Demo.graph.specFwd x = KimiK3.Demo.f x" in text
    assert "The reference `f x = 2x` (report Eq. 1)." in text
    assert "lean/KimiK3/Demo/Graph.lean:20" in text
    assert "Axioms: propext; Lean core declarations trusted with the toolchain: 2" in text
    assert 'href="../../repo/lean/KimiK3/Demo/Graph.lean#L20"' in page.read_text(encoding="utf-8")  # relative to the page
    # difftest figures: 4 cases, none failed; worst |error| 6e-7 and relative 3e-7 over its comparisons
    assert "4 0 6.000e-07 3.000e-07 float32 0.25, float64 0.001" in text
    later = text_of(tmp_path / "site" / "components" / "later.html")
    assert "KimiK3.Demo.g open Not in the library yet." in later
    assert "3 1 2.000e-11 1.200e-11 float64 12" in later


def test_without_a_difftest_run_the_cells_are_open(tmp_path: Path) -> None:
    page, status = render_small(tmp_path, difftest=False)
    cell = status["rows"][0]["cells"]["difftest"]
    assert cell == {"status": "open", "items": ["demo"], "notes": ["no difftest run"]}
    assert "No difftest run" in text_of(tmp_path / "site" / "components" / "demo.html")
    assert report.read_difftest(tmp_path / "nowhere") is None


def test_difftest_list_form_is_read(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps({"components": [
        {"name": "kda", "status": "pass", "cases": 5, "worst_abs": 1e-9, "worst_rel": 2e-9},
        {"name": "mla", "status": "fail", "cases": 2},
    ]}))
    got = report.read_difftest(tmp_path)
    assert (got["kda"].passed, got["kda"].cases, got["kda"].worst_abs) == (True, 5, 1e-9)
    assert (got["mla"].passed, got["mla"].failed_cases) == (False, 1)


def test_every_page_links_the_trust_chain_and_the_site_holds_it(tmp_path: Path) -> None:
    repo = fixture_repo(tmp_path / "repo")
    (repo / "docs").mkdir()
    (repo / "docs" / "TRUST.md").write_text("# What is proved, what is trusted\n\n| rung | link |\n")
    report.render_site(tmp_path / "site", report.load_index(FIXTURES / "equations_small.json"), small_audit(), repo, None)
    for page in ("index.html", "declarations.html", "components/demo.html"):
        assert 'href="' in (tmp_path / "site" / page).read_text() and "trust.html" in (tmp_path / "site" / page).read_text()
    assert "| rung | link |" in text_of(tmp_path / "site" / "trust.html")


def test_declarations_page_lists_every_declaration(tmp_path: Path) -> None:
    render_small(tmp_path)
    text = text_of(tmp_path / "site" / "declarations.html")
    assert "All declarations (4)" in text
    assert "KimiK3.Demo.f_pos theorem lean/KimiK3/Demo/Ref.lean:30 none 1" in text
    assert json.loads((tmp_path / "site" / "audit.json").read_text())["format"] == "k3spec.audit.v1"


def test_nonstandard_axioms_fail_loudly(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "audit_small.json").read_text(encoding="utf-8"))
    doc["constants"][2]["axioms"] = ["propext", "sorryAx"]
    doc["declarations"][2]["axioms"] = ["propext", "sorryAx"]
    doc["constants"][3]["axioms"] = ["Lean.ofReduceBool"]
    bad = audit.Audit.from_json(doc)
    with pytest.raises(audit.AuditError) as err:
        audit.check(bad)
    message = str(err.value)
    assert "KimiK3.Demo.Graph: KimiK3.Demo.graph_specFwd depends on sorryAx" in message
    assert "KimiK3.Demo.Ref: KimiK3.Demo.f_pos depends on Lean.ofReduceBool" in message
    cell = report.lean_cell("denotation", ["KimiK3.Demo.graph_specFwd"], bad)
    assert (cell.status, cell.notes) == ("failed", ["KimiK3.Demo.graph_specFwd uses sorryAx"])
    # the command writes the site, then exits non-zero naming the theorem and the axiom
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    repo = fixture_repo(tmp_path / "repo")
    result = CliRunner().invoke(cli_main, ["report", "--root", str(repo), "--out", str(tmp_path / "site"),
                                           "--index", str(FIXTURES / "equations_small.json"),
                                           "--audit-json", str(tmp_path / "bad.json")])
    assert result.exit_code == 2
    assert "depends on sorryAx" in result.output and "graph_specFwd" in result.output
    assert (tmp_path / "site" / "index.html").is_file()


def test_command_prints_the_index_path(tmp_path: Path) -> None:
    repo = fixture_repo(tmp_path / "repo")
    result = CliRunner().invoke(cli_main, ["report", "--root", str(repo), "--out", str(tmp_path / "site"),
                                           "--index", str(FIXTURES / "equations_small.json"),
                                           "--audit-json", str(FIXTURES / "audit_small.json"),
                                           "--difftest", str(FIXTURES / "difftest")])
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == str(tmp_path / "site" / "index.html")


def test_bad_index_is_named(tmp_path: Path) -> None:
    path = tmp_path / "eq.json"
    path.write_text(json.dumps({"format": "k3spec.equations.v1", "rows": [{"id": "x", "component": "X"}]}))
    with pytest.raises(report.ReportError, match=r"eq.json: rows\[0\] \(x\) lacks `section`"):
        report.load_index(path)


def test_the_real_index_is_well_formed() -> None:
    rows = report.load_index(FIXTURES / "equations.json")
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    for row in rows:
        for name in (row["reference"] or []) + (row["graph"] or []) + (row["denotation"] or []) + row["theorems"]:
            assert name.startswith("KimiK3."), (row["id"], name)
        for rel in row["export"] or []:
            assert rel.startswith("fixtures/graphs/") and rel.endswith(".json"), (row["id"], rel)


# --- screenshot -------------------------------------------------------------------------------

def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and the unfiltered RGB(A) rows of an 8-bit truecolour PNG (zlib only)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, f"unsupported PNG layout {header}"
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def ink_fraction(path: Path) -> float:
    """Share of pixels (every 4th column) that are not the page's most common colour."""
    width, _, rows = png_pixels(path)
    bpp = len(rows[0]) // width
    counts: dict[bytes, int] = {}
    for row in rows:
        for x in range(0, width, 4):
            px = row[x * bpp:x * bpp + 3]
            counts[px] = counts.get(px, 0) + 1
    total = sum(counts.values())
    return 1 - max(counts.values()) / total


def screenshot(page: Path, png: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium
    with tempfile.TemporaryDirectory(prefix="k3-chromium-") as profile:
        proc = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1400,1000", page.as_uri()],
            capture_output=True, text=True, timeout=120)
    assert png.is_file(), f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}"


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")),
                    reason="Debian `chromium` is not installed (CI setup: apt-get install -y --no-install-recommends chromium)")
def test_index_screenshot_is_not_blank(tmp_path: Path) -> None:
    page, _ = render_small(tmp_path)
    screenshot(page, tmp_path / "index.png")
    width, height, _ = png_pixels(tmp_path / "index.png")
    assert (width, height) == (1400, 1000)
    assert ink_fraction(tmp_path / "index.png") > 0.05
    # control: the checker calls an empty page blank
    (tmp_path / "blank.html").write_text("<!doctype html><html><body></body></html>")
    screenshot(tmp_path / "blank.html", tmp_path / "blank.png")
    assert ink_fraction(tmp_path / "blank.png") == 0.0


# --- the Lean metaprogram -----------------------------------------------------------------------

@pytest.mark.lean
def test_audit_flags_an_axiom_and_sorry_by_name(tc, tmp_path: Path) -> None:
    from k3spec import leanrun
    from k3spec.build import LEAN_OPTIONS

    src = Path(tempfile.mkdtemp(prefix="k3-audit-fixture-", dir="/tmp"))
    try:
        shutil.copytree(FIXTURES / "lean", src / "src")
        out = src / "out"
        (out / "K3AuditFixture").mkdir(parents=True)
        built = leanrun.run(tc, ["--json", *LEAN_OPTIONS, "-o", str(out / "K3AuditFixture" / "Bad.olean"),
                                 "-i", str(out / "K3AuditFixture" / "Bad.ilean"), "K3AuditFixture/Bad.lean"],
                            cwd=src / "src")
        assert (out / "K3AuditFixture" / "Bad.olean").is_file(), built.stdout + built.stderr
        # every constant's memoized axiom set is also compared with Lean's collector run from it alone
        result = audit.run_audit(tc, out, {"K3AuditFixture.Bad": Path("fixtures/report/lean/K3AuditFixture/Bad.lean")},
                                 check_every=1)
    finally:
        shutil.rmtree(src, ignore_errors=True)
    decls = result.declarations
    assert decls["K3AuditFixture.uses_bad"].axioms == ["K3AuditFixture.bad"]
    assert decls["K3AuditFixture.uses_propext"].axioms == ["propext"]
    # Lean writes no position for a declaration with `sorry`; the audit of all constants has it
    assert "K3AuditFixture.uses_sorry" not in decls
    constants = {c["constant"]: c for c in result.constants}
    assert constants["K3AuditFixture.uses_sorry"]["axioms"] == ["sorryAx"]
    # through the constructor's type (Lean's collector enters an inductive's constructors)
    assert constants["K3AuditFixture.Tree.size"]["axioms"] == ["K3AuditFixture.bad"]
    assert constants["K3AuditFixture.Tree.node"]["axioms"] == ["K3AuditFixture.bad"]
    assert decls["K3AuditFixture.clean"].axioms == []
    assert decls["K3AuditFixture.clean"].kind == "theorem"
    assert decls["K3AuditFixture.bad"].kind == "axiom"
    # positions are the real file's lines (the docstring line opens the declaration)
    text = (FIXTURES / "lean" / "K3AuditFixture" / "Bad.lean").read_text(encoding="utf-8").splitlines()
    assert text[decls["K3AuditFixture.uses_bad"].line - 1] == "/-- Depends on `bad`. -/"
    assert decls["K3AuditFixture.uses_bad"].statement == "K3AuditFixture.uses_bad : 2 = 1"
    with pytest.raises(audit.AuditError) as err:
        audit.check(result)
    message = str(err.value)
    assert "K3AuditFixture.Bad: K3AuditFixture.uses_bad depends on K3AuditFixture.bad" in message
    assert "K3AuditFixture.Bad: K3AuditFixture.uses_sorry depends on sorryAx" in message
    assert "uses_propext" not in message and "K3AuditFixture.clean" not in message


@pytest.mark.lean
def test_audit_of_the_real_library(tc, library_build, tmp_path: Path) -> None:
    assert library_build.ok
    result = audit.audit_library(REPO, tc)
    audit.check(result)  # no sorryAx, no axiom beyond the standard three
    (REPO / "build").mkdir(exist_ok=True)
    (REPO / "build" / "audit-time.txt").write_text(f"{result.seconds:.1f} s for {len(result.constants)} constants\n")
    decl = result.declarations["KimiK3.KDA.headStepModel_specFwd"]
    assert decl.kind == "theorem" and not decl.nonstandard
    source = (REPO / decl.path).read_text(encoding="utf-8").splitlines()
    assert re.search(r"\btheorem headStepModel_specFwd\b", "\n".join(source[decl.line - 1:decl.line + 5]))
    assert decl.path == "lean/KimiK3/Sequence/KDAGraph.lean"
    assert "specFwd" in decl.statement
    assert result.declarations["KimiK3.Smoke.double"].kind == "def"
    page = report.render_site(tmp_path / "site", report.load_index(FIXTURES / "equations.json"), result, REPO, None)
    status = json.loads((tmp_path / "site" / "status.json").read_text())
    kda = next(r for r in status["rows"] if r["id"] == "kda-head")
    assert kda["cells"]["denotation"]["status"] == "proved"
    assert page.is_file()


def test_a_mismatch_with_leans_collector_fails_the_audit_by_name() -> None:
    lines = ['{"constant":"K3.a","module":"K3","kind":"theorem","axioms":[],"core_count":0,"hidden":[]}',
             '{"mismatch":"K3.a"}', '{"done":true,"eval_ms":5}']
    with pytest.raises(audit.AuditError, match=r"K3\.a differs from Lean's `CollectAxioms.collect`"):
        audit.parse_output(lines)
    assert audit.parse_output([lines[0], lines[2]])[1][0]["constant"] == "K3.a"


def test_audit_library_reads_back_an_audit_of_the_same_sources(monkeypatch, tmp_path: Path) -> None:
    """A second audit of unchanged sources comes from `audits/` beside the object store without
    a Lean run; a changed module or toolchain gives another key."""
    from types import SimpleNamespace

    from k3spec import build as build_mod
    from k3spec import sources

    monkeypatch.setenv("K3SPEC_BUILD_CACHE", str(tmp_path / "objects"))
    monkeypatch.setattr(audit, "build", lambda root, tc, quiet: build_mod.BuildResult(ok=True))
    runs: list[int] = []
    decl = audit.Declaration("KimiK3.x", "KimiK3.X", "lean/KimiK3/X.lean", 3, "theorem", "x : 1 = 1", None, ["propext"])

    def fake_run(tc, olean_root, modules):
        runs.append(len(modules))
        return audit.Audit({decl.name: decl}, [], tc.identity, 90.0, True, 80.0)

    monkeypatch.setattr(audit, "run_audit", fake_run)
    tc = SimpleNamespace(identity="lean-test", kind="offline")
    first = audit.audit_library(REPO, tc)
    second = audit.audit_library(REPO, tc)
    assert len(runs) == 1 and runs[0] == len(sources.discover(REPO))
    assert second.to_json() == first.to_json()
    assert second.declarations["KimiK3.x"].axioms == ["propext"]
    modules = sources.discover(REPO)
    key = audit.audit_key(modules, tc)
    name = next(iter(modules))
    edited = {**modules, name: sources.Module(name, modules[name].path, modules[name].text + "\n", modules[name].imports)}
    assert audit.audit_key(edited, tc) != key
    assert audit.audit_key(modules, SimpleNamespace(identity="lean-other", kind="offline")) != key
    audit.audit_library(REPO, SimpleNamespace(identity="lean-other", kind="offline"))
    assert len(runs) == 2
