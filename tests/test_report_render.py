"""Markdown, JUnit XML and CTRF (validated against the published schemas in ../shared/schemas: the Jenkins xUnit
plugin's junit-10.xsd, jenkins-junit.xsd, the official CTRF JSON Schema) and the heat-map model, from evidence.json."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from junitparser import JUnitXml

sys.path.insert(0, str(Path(__file__).parent))
from bundle_samples import EVIL, PREFIX, make_bundle, sample_evidence
from test_bundle_verify import hetero

from pytest_hetero.bundle.signing import generate_keypair
from pytest_hetero.bundle.signoff import signoff_context
from pytest_hetero.bundle.signoff_check import SignOff
from pytest_hetero.evidence.document import as_document
from pytest_hetero.reporting.ctrf import CtrfReport, render_ctrf
from pytest_hetero.reporting.junit import render_junit
from pytest_hetero.reporting.markdown import render_markdown
from pytest_hetero.reporting.view import HeatCell, SubCell, heatgrid, heatmap
from pytest_hetero.vocab import STATUSES

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

SCHEMAS = Path(__file__).resolve().parents[2] / "shared" / "schemas"
JUNIT_XSDS = ("xunit-junit-10.xsd", "jenkins-junit.xsd")


def published(name: str) -> Path:
    """A schema of ../shared/schemas (kept as published; see its README)."""
    path = SCHEMAS / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: the published schemas ship in the shared folder beside the repository")
    return path


def junit_valid(data: str) -> None:
    """``data`` is valid against both published JUnit schemas (every error listed otherwise)."""
    for name in JUNIT_XSDS:
        errors = [f"{e.path}: {e.reason}" for e in xmlschema.XMLSchema(str(published(name))).iter_errors(data)]
        assert errors == [], (name, errors[:5])


def ctrf_errors(doc: CtrfReport) -> list[str]:
    import jsonschema

    schema = json.loads(published("ctrf.schema.json").read_text())
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]
OWNERS = {"example-cpu": {"discovery": "infrastructure", "scheduling": "platform", "startup": "platform",
                          "model": "algorithm", "business": "business"}}


def test_markdown_summary() -> None:
    evidence = sample_evidence()
    claims = [SignOff(2, "ab" * 32, "business", ["business"], "accept-with-known-failures", "GPU host in repair",
                      "2026-11-29T11:00:00Z", ["Ana Ruiz"], verified=True),
              SignOff(3, "ef" * 32, "platform", ["startup"], "accept", None, "2026-11-29T11:00:00Z",
                      why_unverified="signed by a key the policy p does not give 'platform'")]
    text = render_markdown(as_document(evidence), signoff_context(OWNERS, "cd" * 32, None, claims, source="attestations",
                                                     run_verified=True))
    assert text.splitlines()[:12] == [
        "## pytest-hetero: FAIL",
        "",
        "Run `run-1` · matrices: example-cpu · bundle **verified**, signed by `cdcdcdcdcdcdcdcd`",
        "",
        "| layer | passed | failed | blocked | excluded |",
        "|---|---:|---:|---:|---:|",
        "| discovery | 1 | 1 | 0 | 0 |",
        "| scheduling | 1 | 0 | 1 | 0 |",
        "| startup | 1 | 0 | 1 | 1 |",
        "| model | 1 | 0 | 1 | 0 |",
        "| business | 1 | 0 | 1 | 0 |",
        "",
    ]
    assert "- **infrastructure** (1)\n  - `matrices/example-cpu.matrix.yaml::gpu-nvidia::discovery`: " \
           "driver\\_missing: nvidia-smi not found: no NVIDIA driver on vm" in text
    assert ("- business (business): **accepted with known failures**\n  - verified accept-with-known-failures by Ana "
            "Ruiz (key `abababababababab`) at 2026-11-29T11:00:00Z: GPU host in repair") in text
    assert ("- platform (scheduling, startup): **pending**\n  - not verified (key `efefefefefefefef`): signed by a key "
            "the policy p does not give 'platform'") in text
    at_run_end = render_markdown(as_document(evidence), signoff_context(OWNERS, "cd" * 32, None))
    assert "- platform (scheduling, startup)\n" in at_run_end and "pending" not in at_run_end
    assert "4 blocked, 1 excluded" in text
    assert "- excluded: `matrices/example-cpu.matrix.yaml::cpu-host::py-old::startup` — excluded by matrix rule " \
           "(line 40): py-old is retired" in text
    assert "- resources with no passing item in example-cpu: gpu-nvidia" in text


def test_markdown_escapes_html_and_limits_lines() -> None:
    evidence = sample_evidence(models=30)
    evidence["items"][0]["status"] = "failed"
    evidence["items"][0]["failure"] = {"layer": "discovery", "category": "x", "owner": "infrastructure",
                                       "message": EVIL + "\n| table | break"}
    text = render_markdown(as_document(evidence), signoff_context(OWNERS, None, "no key"))
    assert "<script" not in text and "&lt;script&gt;" in text
    assert "\\| table \\| break" in text
    assert "bundle **UNSIGNED**" in text
    assert f"- … {len(evidence['untested']['items']) - 20} more in report.html / evidence.json" in text


def test_junit_validates_against_the_published_schemas_and_maps_statuses() -> None:
    """Before: junit-10.xsd refused testcase@status (x10) and jenkins-junit.xsd skipped@message (x5)."""
    evidence = sample_evidence()
    data = render_junit(as_document(evidence))
    junit_valid(data.decode())
    doc: Any = xmlschema.XMLSchema(str(published("xunit-junit-10.xsd"))).to_dict(data.decode())  # the decoded XML
    assert doc["@tests"] == "11" and doc["@failures"] == "1" and doc["@errors"] == "0"
    suites = {s["@name"]: s for s in doc["testsuite"]}
    assert list(suites) == ["hetero.discovery", "hetero.scheduling", "hetero.startup", "hetero.model",
                            "hetero.business"]
    startup = {(c["@classname"], c["@name"]): c for c in suites["hetero.startup"]["testcase"]}
    excluded = startup[("matrices.example-cpu.matrix.yaml.cpu-host.py-old", "startup")]
    assert "@status" not in excluded
    assert excluded["skipped"] == ["excluded: excluded by matrix rule (line 40): py-old is retired"]
    blocked = startup[("matrices.example-cpu.matrix.yaml.gpu-nvidia.py-current", "startup")]
    assert blocked["skipped"][0].startswith("blocked: blocked by matrices/example-cpu.matrix.yaml::gpu-nvidia")
    assert blocked["system-out"] == ["\n".join([
        "[[PROPERTY|layer=startup]]", "[[PROPERTY|image=py-current]]", "[[PROPERTY|resource=gpu-nvidia]]",
        "[[PROPERTY|owner=platform]]", "[[PROPERTY|layer_owner=platform]]", "[[PROPERTY|status=blocked]]",
        f"[[PROPERTY|evidence=evidence.json#{PREFIX}::gpu-nvidia::py-current::startup]]",
        f"[[PROPERTY|blocked_by={PREFIX}::gpu-nvidia::discovery]]"])]
    failed = {c["@classname"]: c for c in suites["hetero.discovery"]["testcase"]}[
        "matrices.example-cpu.matrix.yaml.gpu-nvidia"]
    assert (failed["@name"], failed["@time"]) == ("discovery", "1.500")
    assert failed["failure"] == [{"@message": "nvidia-smi not found: no NVIDIA driver on vm",
                                  "@type": "driver_missing"}]
    assert suites["hetero.discovery"]["properties"][0]["property"] == [
        {"@name": "run_id", "@value": "run-1"}, {"@name": "verdict", "@value": "fail"},
        {"@name": "matrices", "@value": "example-cpu"}]
    assert suites["hetero.startup"]["@tests"] == "3" and suites["hetero.startup"]["@skipped"] == "2"
    parsed = JUnitXml.fromstring(data)
    assert [s.name for s in parsed] == list(suites)
    assert sum(1 for suite in parsed for _ in suite) == 11


def test_the_home_made_xsd_is_gone() -> None:
    assert not (Path(__file__).parent / "data" / "junit-10.xsd").exists()


def test_junit_identities_match_pytests_own_junitxml(pytester: pytest.Pytester) -> None:
    """CI history tools key on (classname, name): for the same items, ours are pytest's own --junitxml ones."""
    from support import matrix_text

    pytester.makefile(".matrix.yaml", t=matrix_text())
    pytester.runpytest_subprocess("t.matrix.yaml", "--junitxml=pytest.xml", "--hetero-run-id", "r1",
                                  "--hetero-report-dir", "reports")
    theirs = JUnitXml.fromfile(str(pytester.path / "pytest.xml"))
    pytest_ids = {(case.classname, case.name) for suite in theirs for case in suite}
    ours_text = (pytester.path / "reports" / "r1" / "junit.xml").read_text()
    junit_valid(ours_text)
    evidence = json.loads((pytester.path / "reports" / "r1" / "evidence.json").read_text())
    ours = {(case.classname, case.name) for suite in JUnitXml.fromstring(ours_text.encode()) for case in suite}
    assert len(pytest_ids) == len(evidence["items"]) >= 5  # pytest's report has the items that ran
    assert pytest_ids <= ours
    assert ("t.matrix.yaml.cpu-host", "discovery") in pytest_ids


def test_junit_keeps_control_characters_out() -> None:
    evidence = sample_evidence()
    evidence["items"][0]["status"] = "error"
    evidence["items"][0]["failure"] = {"layer": "discovery", "category": "harness", "owner": "platform",
                                       "message": "bad\x00byte\x1b[31m \"quoted\"\nnext line " + EVIL}
    data = render_junit(as_document(evidence)).decode()
    junit_valid(data)
    case = next(c for s in JUnitXml.fromstring(data) for c in s if c.classname == "matrices.example-cpu.matrix.yaml."
                "cpu-host" and c.name == "discovery")
    assert case.result[0].message == "badbyte[31m \"quoted\"\nnext line " + EVIL


def test_ctrf_document() -> None:
    """Before: the official CTRF schema refused ``suite`` (must be an array) and specVersion was 1.0.0."""
    doc = render_ctrf(as_document(sample_evidence()))
    assert ctrf_errors(doc) == []
    assert doc["reportFormat"] == "CTRF" and doc["specVersion"] == "0.1.0"
    assert (doc["runId"], doc["timestamp"], doc["generatedBy"]) == ("run-1", "2026-11-29T10:05:00.000000Z",
                                                                   "pytest-hetero 0.1.0")
    results = doc["results"]
    assert results["tool"] == {"name": "pytest-hetero", "version": "0.1.0"}
    start = int(datetime(2026, 11, 29, 10, 0, tzinfo=UTC).timestamp() * 1000)
    assert results["summary"] == {"tests": 11, "passed": 5, "failed": 1, "pending": 0, "skipped": 5, "other": 0,
                                  "start": start, "stop": start + 300_000, "duration": 300_000, "suites": 7}
    tests = {t["name"]: t for t in results["tests"]}
    model = tests[f"{PREFIX}::cpu-host::py-current::model-0@data-0::model"]
    assert model["status"] == "passed" and model["duration"] == 1500
    assert model["suite"] == [PREFIX, "cpu-host", "py-current", "model-0@data-0"] and model["filePath"] == PREFIX
    assert model["testId"] == model["name"]
    assert model["tags"] == ["model"]
    assert model["labels"] == {"layer": "model", "owner": "algorithm", "dataset": "data-0", "image": "py-current",
                               "model": "model-0", "resource": "cpu-host"}
    assert (model["start"], model["stop"]) == (start, start + 1500)
    assert model["attachments"] == [{"name": "stdout.txt", "contentType": "text/plain",
                                     "path": "artifacts/cpu-host/py-current/stdout.txt"}]
    blocked = tests[f"{PREFIX}::gpu-nvidia::scheduling"]
    assert blocked["status"] == "skipped" and blocked["rawStatus"] == "blocked"
    assert blocked["extra"]["blocked_by"] == f"{PREFIX}::gpu-nvidia::discovery"
    assert results["extra"]["verdict"] == "fail"


def test_ctrf_attaches_an_artifact_without_a_media_type_as_plain_text() -> None:
    """The loader does not check an artifact's fields: one an edited evidence.json lists without ``media_type``
    is attached as text/plain, as the renderer did before the subscript (a KeyError there); JUnit, which never
    reads it, renders the item as before."""
    evidence = sample_evidence()
    model = next(i for i in evidence["items"] if i["artifacts"])
    del model["artifacts"][0]["media_type"]
    document = as_document(evidence)
    tests = {t["name"]: t for t in render_ctrf(document)["results"]["tests"]}
    assert tests[model["nodeid"]]["attachments"] == [{"name": "stdout.txt", "contentType": "text/plain",
                                                      "path": "artifacts/cpu-host/py-current/stdout.txt"}]
    assert render_junit(document).startswith(b"<?xml") and model["nodeid"].encode() in render_junit(document)


def test_ctrf_of_a_real_run_is_valid(pytester: pytest.Pytester) -> None:
    from support import matrix_text

    pytester.makefile(".matrix.yaml", t=matrix_text())
    pytester.runpytest_subprocess("t.matrix.yaml", "--hetero-run-id", "r1", "--hetero-report-dir", "reports")
    doc = json.loads((pytester.path / "reports" / "r1" / "ctrf.json").read_text())
    assert ctrf_errors(doc) == []
    assert {t["filePath"] for t in doc["results"]["tests"]} == {"t.matrix.yaml"}


def test_heatmap_rows_and_blocked_cells() -> None:
    heat = heatmap(as_document(sample_evidence()))
    assert heat["summarised"] is False and heat["total_rows"] == 3
    rows = {tuple(r["keys"]): r["cells"] for r in heat["rows"]}
    assert list(rows) == [("cpu-host", "py-current", "model-0", "data-0"), ("cpu-host", "py-old"),
                          ("gpu-nvidia", "py-current", "model-0", "data-0")]
    gpu = rows[("gpu-nvidia", "py-current", "model-0", "data-0")]
    assert _cell(gpu, "discovery")["status"] == "failed"
    assert _cell(gpu, "business")["status"] == "blocked"
    assert _cell(gpu, "business")["blocked_by"] == f"{PREFIX}::gpu-nvidia::discovery"
    old = rows[("cpu-host", "py-old")]
    assert _cell(old, "discovery")["status"] == "passed" and _cell(old, "startup")["status"] == "excluded"
    assert old["model"] is None


def _cell(cells: dict[str, HeatCell | None], layer: str) -> HeatCell:
    """The heat-map cell of ``layer`` (the test fails when the row has no item there)."""
    found = cells[layer]
    assert found is not None, f"no {layer} cell"
    return found


def _layers(found: list[SubCell] | None) -> list[SubCell]:
    """A grid cell's sub-cells (the test fails when the resource has no such image)."""
    assert found is not None, "no cell"
    return found


def test_heatmap_lists_no_rows_beyond_the_limit() -> None:
    heat = heatmap(as_document(sample_evidence(models=10, datasets=5)), limit=50)
    assert heat == {"summarised": True, "total_rows": 101, "rows": []}


def test_heatgrid_is_resource_by_image_with_layer_subcells_and_numbered_reasons() -> None:
    evidence = sample_evidence(models=10, datasets=5)
    evidence["items"][0]["status"] = "error"  # cpu-host discovery: the harness broke
    evidence["items"][0]["failure"] = {"layer": "discovery", "category": "probe_crashed", "owner": "platform",
                                       "message": "lscpu: exit 139"}
    grid = heatgrid(as_document(evidence))
    (g,) = grid["grids"]
    assert g["matrix"] == PREFIX and g["images"] == ["py-current", "py-old"]
    cells = {(r["resource"], c["image"]): c["layers"] for r in g["rows"] for c in r["cells"]}
    assert cells[("gpu-nvidia", "py-old")] is None  # gpu-nvidia has no py-old item at all
    gpu = {sub["layer"]: sub for sub in _layers(cells[("gpu-nvidia", "py-current")])}
    assert [s["letter"] for s in _layers(cells[("gpu-nvidia", "py-current")])] == ["D", "S", "U", "M", "B"]
    assert (gpu["discovery"]["status"], gpu["discovery"]["notes"]) == ("failed", [2])
    assert gpu["model"]["counts"] == {"blocked": 50} and gpu["model"]["notes"] == [3]
    assert gpu["model"]["title"] == "model: 50 blocked\n[3] blocked by gpu-nvidia::discovery"
    cpu = {sub["layer"]: sub for sub in _layers(cells[("cpu-host", "py-current")])}
    assert (cpu["discovery"]["status"], cpu["business"]["passed"], cpu["business"]["total"]) == ("error", 50, 50)
    old = {sub["layer"]: sub for sub in _layers(cells[("cpu-host", "py-old")])}
    # a resource-level item (discovery) counts in every image column; py-old's startup was excluded
    assert (old["discovery"]["status"], old["startup"]["status"], old["model"]["status"]) == ("error", "excluded",
                                                                                              "none")
    assert grid["reasons"] == [
        {"n": 1, "text": "probe_crashed: lscpu: exit 139", "count": 1},
        {"n": 2, "text": "driver_missing: nvidia-smi not found: no NVIDIA driver on vm", "count": 1},
        {"n": 3, "text": "blocked by gpu-nvidia::discovery", "count": 102}]
    assert grid["reasons_more"] == 0


def test_failed_and_error_have_distinct_colours() -> None:
    css = (Path(__file__).parents[1] / "pytest_hetero" / "reporting" / "templates" / "heatgrid.css").read_text()
    colour = {s: re.search(rf"\.s-{s} \{{ background: (#[0-9a-f]{{6}}); \}}", css).group(1)  # type: ignore[union-attr]
              for s in ("passed", "failed", "error", "blocked")}
    assert len(set(colour.values())) == 4


@pytest.mark.parametrize("fmt", ["html", "md", "junit", "ctrf"])
def test_render_command_reproduces_the_bundle_files(tmp_path: Path, fmt: str) -> None:
    generate_keypair(tmp_path / "k", tmp_path / "k.pub")
    bundle = make_bundle(tmp_path / "b", sample_evidence(), tmp_path / "k")
    out = tmp_path / f"out.{fmt}"
    assert hetero("render", str(bundle), "--format", fmt, "--out", str(out), "--key", str(tmp_path / "k.pub")) == 0
    name = {"html": "report.html", "md": "summary.md", "junit": "junit.xml", "ctrf": "ctrf.json"}[fmt]
    if fmt in ("junit", "ctrf"):
        assert out.read_bytes() == (bundle / name).read_bytes()
        return
    # the sign-off section is read from the attestations at view time; everything else is the same
    start, end = ("<h2 id=\"signoff\">", "<h2 id=\"items\">") if fmt == "html" else ("### Sign-off", "### Untested scope")
    again, kept = out.read_text(), (bundle / name).read_text()
    assert again.index(start) == kept.index(start)
    assert again[:again.index(start)] == kept[:kept.index(start)]
    assert again[again.index(end):] == kept[kept.index(end):]
    assert "not part of this page" not in again and "Read from the attestations" in again


def test_render_shows_signoffs_added_after_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    generate_keypair(tmp_path / "k", tmp_path / "k.pub")
    bundle = make_bundle(tmp_path / "b", sample_evidence(), tmp_path / "k")
    assert hetero("sign", str(bundle), "--key", str(tmp_path / "k"), "--role", "algorithm", "--decision", "reject",
                  "--text", "the GPU model did not run") == 0
    capsys.readouterr()
    assert hetero("render", str(bundle), "--format", "md") == 0
    out = capsys.readouterr().out
    assert "- algorithm (model): **pending**\n  - not verified (key `" in out  # nobody trusted the key for the role
    assert "- business (business): **pending**" in out
    assert json.loads((bundle / "ctrf.json").read_text())["results"]["summary"]["tests"] == 11


def test_render_refuses_to_write_into_the_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = make_bundle(tmp_path / "b", sample_evidence(), None)
    assert hetero("render", str(bundle), "--format", "md", "--out", str(bundle / "again.md")) == 2
    assert "refusing to write" in capsys.readouterr().err
    assert not (bundle / "again.md").exists()


def test_not_proven_parts_are_rendered() -> None:
    from pytest_hetero.reporting.html import render_html

    evidence = sample_evidence()
    evidence["untested"]["not_proven"] = [{"nodeid": f"{PREFIX}::cpu-host::scheduling", "layer": "scheduling",
                                           "part": "queue/quota", "reason": "docker has no <queue>"}]
    text = render_markdown(as_document(evidence), signoff_context(OWNERS, None, None))
    assert "- not proven: `matrices/example-cpu.matrix.yaml::cpu-host::scheduling` queue/quota — docker has no " \
           "&lt;queue&gt;" in text
    html = render_html(as_document(evidence), signoff_context(OWNERS, None, None))
    assert ("<tr><td><code>matrices/example-cpu.matrix.yaml::cpu-host::scheduling</code></td><td>scheduling</td>"
            "<td>queue/quota</td><td>docker has no &lt;queue&gt;</td></tr>") in html


def test_terminal_control_codes_from_a_model_reach_no_rendering() -> None:
    """A model's coloured stderr (ESC sequences), a NUL and a backspace in a failure message: Markdown,
    HTML and JUnit keep the text and drop the control characters (JUnit stays valid XML)."""
    from pytest_hetero.reporting.html import render_html

    evidence = sample_evidence()
    evidence["items"][0]["status"] = "failed"
    evidence["items"][0]["failure"] = {"layer": "discovery", "category": "x", "owner": "infrastructure",
                                       "message": "\x1b[31mCUDA error\x1b[0m: out of\x00 memory\x08!"}
    markdown = render_markdown(as_document(evidence), signoff_context(OWNERS, None, "no key"))
    assert "\\[31mCUDA error\\[0m: out of memory!" in markdown  # [ is escaped in Markdown
    html = render_html(as_document(evidence), signoff_context(OWNERS, None, "no key"))
    assert "[31mCUDA error[0m: out of memory!" in html
    junit = render_junit(as_document(evidence)).decode()
    assert 'message="[31mCUDA error[0m: out of memory!"' in junit
    for text in (markdown, html, junit):
        assert not any(c in text for c in "\x1b\x00\x08")
    junit_valid(junit)


def test_every_status_has_its_place_in_each_renderings_status_table() -> None:
    """The renderings subscript these tables with an item's status (a Status): each must name every status, so a
    status added to the vocabulary without a place in them fails here, not as a KeyError in a rendering."""
    from pytest_hetero.reporting import ctrf, dossier_sections, html

    for table in (dossier_sections.PRIORITY, html._PRIORITY, ctrf._CTRF_STATUS):
        assert sorted(table) == sorted(STATUSES)
    assert ctrf._CTRF_STATUS["error"] == "failed" and ctrf._CTRF_STATUS["not_run"] == "pending"
    assert dossier_sections.PRIORITY["failed"] < dossier_sections.PRIORITY["blocked"] < \
        dossier_sections.PRIORITY["passed"]
