"""Each failure category of a served model, with its owner and the items it blocks, against real MLServer."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import evidence_of, statuses

from serving.conftest import DigitsServers
from serving.helpers import COMBO, items_of, oip, records, serving_matrix
from serving.servers import free_port

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

START, MODEL, BUSINESS = "cpu-host::py::startup", f"cpu-host::py::{COMBO}::model", f"cpu-host::py::{COMBO}::business"


def _run(pytester: pytest.Pytester, text: str) -> tuple[dict[str, str], dict[str, dict[str, object]]]:
    pytester.makefile(".matrix.yaml", s=text)
    pytester.runpytest("-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    found = statuses(ev)
    del found["cpu-host::discovery"], found["cpu-host::scheduling"]
    return found, items_of(ev)


def _failure(item: dict[str, object]) -> tuple[str, str, str]:
    failure = item["failure"]
    assert isinstance(failure, dict)
    return failure["category"], failure["owner"], failure["message"]


BLOCKED = {MODEL: "blocked", BUSINESS: "blocked"}


def test_wrong_version_fails_startup_owned_by_algorithm(pytester: pytest.Pytester,
                                                         digits_servers: DigitsServers) -> None:
    found, items = _run(pytester, serving_matrix(oip(digits_servers.current), version="3.0.0"))
    assert found == {START: "failed", **BLOCKED}
    assert _failure(items[START]) == (
        "wrong_model_version", "algorithm",
        f"digits at {digits_servers.current} serves 2.0.0, not the declared 3.0.0")
    (ident,) = records(items[START], "serving.identity")
    assert (ident["version_served"], ident["probe_version"], ident["declared_version"]) == (False, "2.0.0", "3.0.0")


def test_unknown_model_name(pytester: pytest.Pytester, digits_servers: DigitsServers) -> None:
    found, items = _run(pytester, serving_matrix({**oip(digits_servers.current), "model_name": "mnist"}))
    assert found == {START: "failed", **BLOCKED}
    assert _failure(items[START]) == ("wrong_model", "algorithm",
                                      f"{digits_servers.current} does not serve model 'mnist'")


def test_unreachable_endpoint_owned_by_infrastructure(pytester: pytest.Pytester) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    found, items = _run(pytester, serving_matrix(oip(url, ready_timeout="1s")))
    assert found == {START: "failed", **BLOCKED}
    category, owner, message = _failure(items[START])
    assert (category, owner) == ("endpoint_unreachable", "infrastructure")
    assert message.startswith(f"{url} unreachable for 1 s: ConnectError: ")
    (ready,) = records(items[START], "serving.ready")
    assert ready["status"] is None and ready["attempts"] >= 2 and ready["waited_s"] >= 1.0


def test_auth_token_missing_refused_and_not_enforced(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                     digits_servers: DigitsServers) -> None:
    gated = oip(digits_servers.gated, auth={"token_env": "HETERO_T", "protected": True})
    monkeypatch.delenv("HETERO_T", raising=False)
    found, items = _run(pytester, serving_matrix(gated))
    assert found == {START: "failed", **BLOCKED}
    assert _failure(items[START]) == ("auth_token_missing", "platform",
                                      "$HETERO_T is unset or empty; the bearer token for digits comes from it")


def test_auth_refused_with_a_wrong_token(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                         digits_servers: DigitsServers) -> None:
    monkeypatch.setenv("HETERO_T", "not-the-token")
    found, items = _run(pytester, serving_matrix(oip(digits_servers.gated, auth={"token_env": "HETERO_T"})))
    assert found == {START: "failed", **BLOCKED}
    assert _failure(items[START]) == (
        "auth_refused", "platform", f"{digits_servers.gated}/v2/health/ready refused the request (401) with the bearer token")


def test_protected_service_that_accepts_anyone(pytester: pytest.Pytester, digits_servers: DigitsServers) -> None:
    found, items = _run(pytester, serving_matrix(oip(digits_servers.current, auth={"protected": True})))
    assert found == {START: "failed", **BLOCKED}
    assert _failure(items[START]) == (
        "auth_not_enforced", "platform", ("unauthenticated GET /v2/models/digits answered 200, but the matrix "
                                          "says digits is protected (expected 401 or 403)"))


def test_service_bounds_missed_owned_by_business(pytester: pytest.Pytester, digits_servers: DigitsServers,
                                                 tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: accuracy, metric: accuracy, op: '>=', value: 0.9}\n"
                     "  - {name: instant, service_latency: {percentile: 50, max_ms: 0.001, concurrency: 4}}\n"
                     "  - {name: huge, throughput: {min_rps: 1000000}}\n")
    found, items = _run(pytester, serving_matrix(oip(digits_servers.current, load={"concurrency": [1, 4]}),
                                                 acceptance=rules))
    assert found == {START: "passed", MODEL: "passed", BUSINESS: "failed"}
    category, owner, message = _failure(items[BUSINESS])
    assert (category, owner) == ("acceptance_failed", "business")
    assert message.startswith("2 of 3 acceptance rules failed: instant: expected p50 ≤ 0.001 ms at concurrency 4, "
                              "observed c=4: p50 ")
    (result,) = records(items[BUSINESS], "business.rules")
    by_name = {r["name"]: r for r in result["results"]}
    assert (by_name["accuracy"]["observed"], by_name["accuracy"]["verdict"]) == (0.963889, "pass")
    levels = records(items[MODEL], "serving.load")
    assert [(lv["concurrency"], lv["requests"]) for lv in levels] == [(1, 360), (4, 360)]
    assert by_name["huge"]["observed"] == "; ".join(
        f"c={lv['concurrency']}: {lv['requests_per_s']:g} req/s, {lv['samples_per_s']:g} samples/s" for lv in levels)
    assert by_name["instant"]["observed"] == f"c=4: p50 {levels[1]['latency_ms']['p50']} ms"


def test_rollback_to_a_server_still_on_the_new_version(pytester: pytest.Pytester,
                                                       digits_servers: DigitsServers) -> None:
    serving = oip(digits_servers.current, rollback={"version": "1.0.0", "endpoint": digits_servers.current})
    found, items = _run(pytester, serving_matrix(serving))
    assert found == {START: "passed", MODEL: "failed", BUSINESS: "blocked"}
    assert _failure(items[MODEL]) == (
        "rollback_wrong_version", "algorithm",
        f"after rollback: digits at {digits_servers.current} serves 2.0.0, not the declared 1.0.0")
    (ident,) = records(items[MODEL], "serving.rollback.identity")
    assert (ident["declared_version"], ident["probe_version"]) == ("1.0.0", "2.0.0")


def test_deploy_without_endpoint_is_not_applicable_on_local(pytester: pytest.Pytester) -> None:
    serving = {"protocol": "oip", "model_name": "digits", "deploy": {"kind": "InferenceService", "name": "digits"}}
    found, items = _run(pytester, serving_matrix(serving))
    # business judges the model item's outputs: with no model run it is not applicable either
    assert found == {START: "not_applicable", MODEL: "not_applicable", BUSINESS: "not_applicable"}
    assert items[BUSINESS]["reason"] == (
        "not applicable: it judges the outputs of s.matrix.yaml::cpu-host::py::digits-service@digits-test::model, "
        "which is not applicable")
    assert items[START]["reason"] == (
        "not applicable: the local backend cannot resolve {'kind': 'InferenceService', 'name': 'digits'} to an "
        "endpoint (serving_endpoint not implemented); give serving.endpoint")


def test_an_engine_without_serving_verbs_says_so_for_pods_and_rollback(pytester: pytest.Pytester,
                                                                        digits_servers: DigitsServers) -> None:
    """The engine interface's defaults (local backend): ``serving_pods`` None → the pods are not recorded,
    ``serving_switch`` Unsupported → the rollback through ``deploy`` is recorded as not applicable."""
    deploy = {"kind": "Deployment", "name": "digits"}
    serving = oip(digits_servers.current, deploy=deploy, rollback={"version": "1.0.0"})
    found, items = _run(pytester, serving_matrix(serving))
    assert (found[START], found[MODEL]) == ("passed", "passed")  # business: 40 of 360 samples answered
    assert records(items[START], "serving.deploy") == [{
        "deploy": deploy, "recorded": False, "reason": "the local backend does not implement serving_pods"}]
    (rollback,) = records(items[MODEL], "serving.rollback")
    assert (rollback["status"], rollback["reason"]) == (
        "not_applicable", "the local backend cannot switch {'kind': 'Deployment', 'name': 'digits'} to another "
        "version (serving_switch not implemented); give serving.rollback.endpoint")
    assert records(items[MODEL], "serving.rollback.switch") == []
