"""pytest-html integration: layer, resource and owner columns plus per-item status and slim evidence extras.

Active only when pytest-html is installed and ``--html`` is given; the hooks are optional
(``optionalhook``) so nothing fails without it. pytest-html's page is a convenience for
people used to it: the signed artifact remains the bundle's own report.html.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import pytest

from pytest_hetero.pytest_plugin.stash import evidence_of

if TYPE_CHECKING:
    pass

COLUMNS: tuple[tuple[str, str], ...] = (("layer", "Layer"), ("resource", "Resource"), ("owner", "Owner"))


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_table_header(cells: list[str]) -> None:
    """Insert the Layer, Resource and Owner columns after the test name."""
    for offset, (key, title) in enumerate(COLUMNS):
        cells.insert(2 + offset, f'<th class="sortable" data-column-type="hetero-{key}">{title}</th>')


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_table_row(report: Any, cells: list[str]) -> None:
    """Fill the three columns from the item's evidence (escaped; empty for non-matrix tests)."""
    evidence = evidence_of(report)
    values = {"layer": "", "resource": "", "owner": ""}
    if evidence is not None:
        failure = evidence["failure"]
        values = {"layer": evidence["layer"], "resource": evidence["keys"].get("resource", ""),
                  "owner": (failure["owner"] if failure else None) or evidence["owner"]}
    for offset, (key, _) in enumerate(COLUMNS):
        cells.insert(2 + offset, f'<td class="col-hetero-{key}">{html.escape(str(values[key]))}</td>')


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """With ``--html``, attach the item's status line and its slim evidence (nodeid, matrix, layer, keys,
    owner, status, blocked_by, reason, failure: :data:`~pytest_hetero.pytest_plugin.plugin.SLIM_FIELDS`) as
    pytest-html extras, after pytest-hetero put the evidence on the report (this wrapper is the outermost,
    so it runs last).

    Never the full evidence: pytest-html keeps every report's extras until the session ends, so a full
    evidence dict (tens of KB per model item: records, captured output) made a long run's memory grow with
    its items. The records and artifacts are in the bundle's evidence.json and report.html. Without
    ``--html`` nothing is attached (pytest-html installed but unused would otherwise hold them too)."""
    outcome = yield
    if not item.config.pluginmanager.hasplugin("html") or not item.config.getoption("htmlpath", None):
        return
    report = outcome.get_result()
    evidence = evidence_of(report)
    if evidence is None:
        return
    from pytest_html import extras

    from pytest_hetero.pytest_plugin.plugin import slim

    found = list(getattr(report, "extras", []))
    failure = evidence["failure"]
    why = evidence["reason"] or (failure["message"] if failure else None)
    line = f"{evidence['status']}: {why}" if why else evidence["status"]
    found.append(extras.text(line, name="hetero status"))
    found.append(extras.json(slim(evidence), name="hetero evidence"))
    report.extras = found
