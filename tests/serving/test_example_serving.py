"""matrices/example-serving.matrix.yaml end to end against real MLServer processes (digits 2.0.0
behind the bearer-token gate, 1.0.0 for rollback), through pytester."""

from __future__ import annotations

import shutil

import pytest
from support import evidence_of, statuses

from serving.conftest import DigitsServers
from serving.helpers import COMBO, REPO, digits_wall_clock_met, items_of, records

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def test_example_serving_matrix(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                digits_servers: DigitsServers) -> None:
    monkeypatch.setenv("HETERO_DIGITS_URL", digits_servers.gated)
    monkeypatch.setenv("HETERO_DIGITS_PREVIOUS_URL", digits_servers.previous)
    monkeypatch.setenv("HETERO_DIGITS_TOKEN", digits_servers.token)
    (pytester.path / "matrices").mkdir()
    (pytester.path / "cases").symlink_to(REPO / "cases", target_is_directory=True)
    shutil.copy(REPO / "matrices" / "example-serving.matrix.yaml", pytester.path / "matrices")
    result = pytester.runpytest("matrices/example-serving.matrix.yaml", "-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    model = items_of(ev)[f"cpu-host::py-current::{COMBO}::model"]
    levels = records(model, "serving.load")
    host_fast = digits_wall_clock_met(levels)  # the gate's verdict on the wall-clock rules is the measured one
    if host_fast:
        result.assert_outcomes(passed=4, skipped=1)
    else:
        result.assert_outcomes(passed=3, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*[[]serving[]] digits@2.0.0 concurrency 1: done, 360 requests in * s, * req/s, 0 errors",
                                 "*[[]serving[]] digits@2.0.0 concurrency 8: done, 360 requests in * s, * req/s, 0 errors"])
    assert statuses(ev) == {
        "cpu-host::discovery": "passed", "cpu-host::scheduling": "not_applicable",
        "cpu-host::py-current::startup": "passed", f"cpu-host::py-current::{COMBO}::model": "passed",
        f"cpu-host::py-current::{COMBO}::business": "passed" if host_fast else "failed",
    }
    items = items_of(ev)
    startup = items["cpu-host::py-current::startup"]
    (ready,) = records(startup, "serving.ready")
    assert (ready["endpoint"], ready["status"], ready["authenticated"]) == (digits_servers.gated, 200, True)
    (ident,) = records(startup, "serving.identity")
    assert (ident["found"], ident["reported_name"], ident["version_served"], ident["probe_status"],
            ident["probe_version"]) == (True, "digits", True, 200, "2.0.0")
    assert records(startup, "serving.auth") == [{
        "protected": True, "token_env": "HETERO_DIGITS_TOKEN", "path": "/v2/models/digits",
        "unauthenticated_status": 401, "refused": True}]
    assert [(lv["concurrency"], lv["requests"], lv["ok"], lv["errors"], lv["status_counts"]) for lv in levels] == [
        (1, 360, 360, 0, {"200": 360}), (8, 360, 360, 0, {"200": 360})]
    assert all(lv["requests_per_s"] > 0 and lv["latency_ms"]["p95"] > 0 and lv["ttfb_ms"] is None for lv in levels)
    assert [a["name"] for a in model["artifacts"]] == ["responses-c1.jsonl", "responses-c8.jsonl", "outputs.json"]
    (rollback,) = records(model, "serving.rollback")
    assert rollback["status"] == "verified" and rollback["switch"] == "endpoint"
    # the service runs on this host: its cgroup was sampled while the load ran (never a made-up 0)
    (usage,) = records(model, "serving.usage")
    assert (usage["source"], usage["available"]) == ("cgroup", True)
    assert usage["endpoint"].startswith("http://127.0.0.1:")
    assert usage["samples"] >= 2 and usage["devices"][0]["memory_high_water_mib"] > 10
    assert (rollback["previous"]["endpoint"], rollback["previous"]["version"], rollback["previous"]["reported_version"],
            rollback["previous"]["answered"]) == (digits_servers.previous, "1.0.0", "1.0.0", 360)
    assert [(g["name"], g["observed"], g["verdict"]) for g in rollback["previous"]["golden"]] == [
        ("golden-samples", "10/10 match", "pass")]
    assert (rollback["current"]["version"], rollback["current"]["golden"][0]["observed"]) == ("2.0.0", "10/10 match")
    business = items[f"cpu-host::py-current::{COMBO}::business"]
    (rules,) = records(business, "business.rules")
    observed = {r["name"]: (r["observed"], r["verdict"]) for r in rules["results"]}
    assert observed["accuracy-floor"] == (0.963889, "pass")
    assert observed["golden-samples"] == ("10/10 match", "pass")
    assert observed["no-errors"] == ("c=1: 0.0000 (0/360); c=8: 0.0000 (0/360)", "pass")
    p95_ok = all(lv["latency_ms"]["p95"] <= 500 for lv in levels)
    rps_ok = all(lv["requests_per_s"] >= 20 for lv in levels if lv["concurrency"] == 8)
    assert (observed["latency-p95"][1], observed["throughput-floor"][1]) == (
        "pass" if p95_ok else "fail", "pass" if rps_ok else "fail")
    assert [v for _, v in observed.values()] == ["pass"] * 3 + [observed["latency-p95"][1],
                                                                 observed["throughput-floor"][1]]
    if not host_fast:
        assert (business["failure"]["category"], business["failure"]["owner_category"]) == ("acceptance_failed", "business")
