"""The matrix's owner names are the owners everywhere: failures, terminal, summary.md, report data and
the signed predicate; an owner category keeps its default team only when the matrix names none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import matrix_text

from pytest_hetero.matrix.load import load_matrix

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

CPU = {"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}
HUGE = {"name": "cpu-huge", "type": "cpu", "requests": {"cpu": 1}, "expect": {"min_cpus": 100000}}
COMBO = "digits-logreg@digits-test"


def test_failures_are_owned_by_the_teams_the_matrix_names(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """With spec.owners {business: risk-business, discovery: infra-team} failures printed
    `owner: business` and summary.md listed them under `infrastructure`."""
    strict = tmp_path / "strict.yaml"
    strict.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                      "  - {name: accuracy-floor, metric: accuracy, op: '>=', value: 0.99}\n")
    owners = {"business": "risk-business", "discovery": "infra-team"}
    pytester.makefile(".matrix.yaml", m=matrix_text(resources=[CPU, HUGE], acceptance=strict, truth=True,
                                                    extra_spec={"owners": owners}))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=2, skipped=5)
    [bundle] = (pytester.path / "reports").iterdir()
    ev = json.loads((bundle / "evidence.json").read_text())
    failed = {i["nodeid"].split("::", 1)[1]: i["failure"]["owner"] for i in ev["items"] if i["failure"]}
    assert failed == {"cpu-huge::discovery": "infra-team", f"cpu-host::py::{COMBO}::business": "risk-business"}
    owners_of = {i["layer"]: i["owner"] for i in ev["items"]}
    assert owners_of == {"discovery": "infra-team", "scheduling": "platform", "startup": "platform",
                         "model": "algorithm", "business": "risk-business"}
    result.stdout.fnmatch_lines(["*[[]failed] discovery/expectation_mismatch (owner: infra-team)*"])
    result.stdout.fnmatch_lines(["*[[]failed] business/acceptance_failed (owner: risk-business)*"])
    text = result.stdout.str()
    assert "\n  infra-team: 1\n" in text and "\n  risk-business: 1\n" in text
    assert "owner: business)" not in text and "infrastructure: 1" not in text
    summary = (bundle / "summary.md").read_text()
    assert "- **infra-team** (1)" in summary and "- **risk-business** (1)" in summary
    assert "infrastructure" not in summary.split("### Failures by owner")[1].split("###")[0]
    predicate = json.loads((bundle / "statement.intoto.json").read_text())["predicate"]
    assert predicate["owners"] == {"t": {"discovery": "infra-team", "scheduling": "platform",
                                         "startup": "platform", "model": "algorithm", "business": "risk-business"}}


def test_owner_category_maps_to_the_named_team_of_its_layer(tmp_path: Path) -> None:
    """A category named by a check (a quota problem is business's, a digest the algorithm's) goes to
    the team the matrix names for a layer of that category; unnamed categories keep their name."""
    path = tmp_path / "m.matrix.yaml"
    path.write_text(matrix_text(extra_spec={"owners": {"startup": "runtime-team", "business": "risk-business"}}))
    matrix = load_matrix(path)
    assert matrix.team("business", "scheduling") == "risk-business"
    assert matrix.team("platform", "startup") == "runtime-team"
    assert matrix.team("platform", "scheduling") == "runtime-team"  # scheduling names none: startup's team
    assert matrix.team("infrastructure", "startup") == "infrastructure"
    assert matrix.team("algorithm", "startup") == "algorithm"
    assert matrix.team("security", "startup") == "security"  # a team a hook chose stays
