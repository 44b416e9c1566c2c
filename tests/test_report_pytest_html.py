"""pytest-html integration: Layer/Resource/Owner columns and per-item evidence extras in its report."""

from __future__ import annotations

import base64
import html
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from support import matrix_text

pytest.importorskip("pytest_html")

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def _blob(page: str) -> dict[str, object]:
    found = re.search(r'data-jsonblob="([^"]*)"', page)
    assert found, "pytest-html data blob not found"
    return dict(json.loads(html.unescape(found.group(1))))


def test_columns_and_extras(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", t=matrix_text(resources=[
        {"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}},
        {"name": "gpu-nvidia", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1},
         "expect": {"devices": 1}}]))
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest_subprocess("t.matrix.yaml", "test_plain.py", "--html=ph.html",
                                           "--self-contained-html", "--hetero-report-dir", "reports")
    page = (pytester.path / "ph.html").read_text()
    header = re.findall(r'<th class="sortable" data-column-type="([^"]+)">', page)
    assert header[:5] == ["result", "testId", "hetero-layer", "hetero-resource", "hetero-owner"]
    tests = _blob(page)["tests"]
    assert isinstance(tests, dict)
    row = tests["t.matrix.yaml::cpu-host::discovery"][0]["resultsTableRow"]
    assert row[2:5] == ['<td class="col-hetero-layer">discovery</td>', '<td class="col-hetero-resource">cpu-host</td>',
                        '<td class="col-hetero-owner">infrastructure</td>']
    extras = {e["name"]: e for e in tests["t.matrix.yaml::cpu-host::discovery"][0]["extras"]}
    evidence = json.loads(base64.b64decode(extras["hetero evidence"]["content"].split(",", 1)[1]))
    assert evidence["nodeid"] == "t.matrix.yaml::cpu-host::discovery" and evidence["layer"] == "discovery"
    assert base64.b64decode(extras["hetero status"]["content"].split(",", 1)[1]) == b"passed"
    gpu_row = tests["t.matrix.yaml::gpu-nvidia::scheduling"][0]["resultsTableRow"]
    assert gpu_row[2:5] == ['<td class="col-hetero-layer">scheduling</td>',
                            '<td class="col-hetero-resource">gpu-nvidia</td>', '<td class="col-hetero-owner">platform</td>']
    plain = tests["test_plain.py::test_plain"][0]["resultsTableRow"]
    assert plain[2:5] == ['<td class="col-hetero-layer"></td>', '<td class="col-hetero-resource"></td>',
                          '<td class="col-hetero-owner"></td>']
    assert (pytester.path / "reports").is_dir()
    assert result.ret in (0, 1)


def test_cells_are_escaped() -> None:
    from types import SimpleNamespace

    from pytest_hetero.pytest_plugin.pytest_html import pytest_html_results_table_row

    report = SimpleNamespace(user_properties=[("hetero_evidence", {
        "layer": "model", "keys": {"resource": "<img src=x>"}, "owner": "algorithm",
        "failure": {"owner": "<script>x</script>"}})])
    cells = ["<td>r</td>", "<td>id</td>", "<td>d</td>"]
    pytest_html_results_table_row(report, cells)
    assert cells[2:5] == ['<td class="col-hetero-layer">model</td>',
                          '<td class="col-hetero-resource">&lt;img src=x&gt;</td>',
                          '<td class="col-hetero-owner">&lt;script&gt;x&lt;/script&gt;</td>']


def _hetero_extras(reports: Sequence[Any]) -> list[dict[str, Any]]:
    return [e for r in reports for e in getattr(r, "extras", []) if str(e.get("name", "")).startswith("hetero ")]


def test_reports_hold_no_full_evidence_in_extras(pytester: pytest.Pytester) -> None:
    """pytest keeps every report until the session ends, and pytest-html its extras: the full evidence there
    (records, captured output) made a long run's memory grow with its items (issue 20.3). Without --html
    nothing is attached; with it, the slim evidence only (the full one is in the bundle)."""
    pytester.makefile(".matrix.yaml", t=matrix_text())
    plain = pytester.inline_run("t.matrix.yaml", "-p", "no:cacheprovider", "--hetero-report-dir", "reports")
    reports = plain.getreports("pytest_runtest_logreport")
    assert any(dict(r.user_properties).get("hetero_evidence") for r in reports)
    assert _hetero_extras(reports) == []
    bundle = json.loads(next((pytester.path / "reports").glob("*/evidence.json")).read_text())
    assert any(item["records"] for item in bundle["items"]), "the bundle keeps the full evidence"

    with_html = pytester.inline_run("t.matrix.yaml", "-p", "no:cacheprovider", "--hetero-report-dir", "reports2",
                                    "--html=ph.html", "--self-contained-html")
    extras = _hetero_extras(with_html.getreports("pytest_runtest_logreport"))
    evidences = [json.loads(base64.b64decode(e["content"].split(",", 1)[1])) for e in extras
                 if e["name"] == "hetero evidence"]
    assert evidences and all(set(ev) == {"nodeid", "matrix", "layer", "keys", "owner", "status", "blocked_by",
                                         "reason", "failure"} for ev in evidences)
