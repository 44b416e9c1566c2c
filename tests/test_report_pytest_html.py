"""pytest-html integration: Layer/Resource/Owner columns and per-item evidence extras in its report."""

from __future__ import annotations

import base64
import html
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from support import matrix_text

pytest.importorskip("pytest_html")


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
