"""Extension points, with real MLServer behind them: a protocol added through
``pytest_hetero_make_protocol``, an unknown protocol, and the Kubernetes hook point (a backend
plugin answering the engine verbs ``serving_endpoint`` / ``serving_pods`` / ``serving_switch`` for a ``deploy``,
here switching between the two real servers by version, as a patched InferenceService would)."""

from __future__ import annotations

import json

import pytest
from support import evidence_of, statuses

from serving.conftest import DigitsServers
from serving.helpers import COMBO, items_of, oip, records, serving_matrix

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

START = "cpu-host::py::startup"
MODEL, BUSINESS = f"cpu-host::py::{COMBO}::model", f"cpu-host::py::{COMBO}::business"

PROTOCOL_PLUGIN = '''
from pytest_hetero.serving.oip import OpenInferenceProtocol

class KServeV2(OpenInferenceProtocol):
    name = "kserve-v2"

def pytest_hetero_make_protocol(name, serving):
    return KServeV2(serving) if name == "kserve-v2" else None
'''

BACKEND_PLUGIN = '''
import os
from pytest_hetero.backends.local import LocalBackend

class SwitchingBackend(LocalBackend):
    name = "switching"
    urls = {"2.0.0": os.environ["T_CURRENT"], "1.0.0": os.environ["T_PREVIOUS"]}
    serving_version = "2.0.0"

    def serving_endpoint(self, ctx, request):
        return self.urls[self.serving_version]

    def serving_pods(self, ctx, request):
        return [{"name": request.deploy["name"] + "-predictor-0", "node": "node-a", "phase": "Running",
                 "requests": {"cpu": "1"}, "limits": {"cpu": "2"}}]

    def serving_switch(self, ctx, request, version):
        ctx.record("test.switch", deploy=request.deploy, version=version)
        type(self).serving_version = version
        return {"how": "test"}

def pytest_hetero_backend(name):
    return SwitchingBackend if name == "switching" else None
'''


def _statuses(pytester: pytest.Pytester) -> tuple[dict[str, str], dict[str, dict[str, object]]]:
    ev = evidence_of(pytester)
    found = statuses(ev)
    return {k: v for k, v in found.items() if k in (START, MODEL, BUSINESS)}, items_of(ev)


def test_protocol_from_a_plugin_and_an_unknown_one(pytester: pytest.Pytester,
                                                   digits_servers: DigitsServers) -> None:
    pytester.makeconftest(PROTOCOL_PLUGIN)
    served = {**oip(digits_servers.current, load={"concurrency": [1, 8], "requests": 360}),
              "protocol": "kserve-v2"}
    pytester.makefile(".matrix.yaml", s=serving_matrix(served))
    pytester.runpytest("-p", "no:cacheprovider")
    found, items = _statuses(pytester)
    assert found == {START: "passed", MODEL: "passed", BUSINESS: "passed"}
    assert records(items[START], "serving.identity")[0]["protocol"] == "kserve-v2"
    unknown = {**oip(digits_servers.current), "protocol": "grpc-v2"}
    pytester.makefile(".matrix.yaml", s=serving_matrix(unknown))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-report-dir", "r2")
    ev = evidence_of_dir(pytester, "r2")
    start = items_of(ev)[START]
    assert (start["status"], start["failure"]["category"], start["failure"]["message"]) == (
        "error", "protocol_unknown", "no plugin provides serving protocol 'grpc-v2' (built-ins: oip, openai)")


def test_an_option_of_another_type_is_a_configuration_error_naming_it(pytester: pytest.Pytester) -> None:
    """(until msgspec: ``max_tokens: "lots"`` was a ValueError of int() out of the load, a traceback)."""
    served = {"protocol": "openai", "endpoint": "http://127.0.0.1:9", "model_name": "tiny", "task": "chat",
              "options": {"max_tokens": "lots"}, "load": {"concurrency": [1], "requests": 1}}
    pytester.makefile(".matrix.yaml", s=serving_matrix(served))
    pytester.runpytest("-p", "no:cacheprovider")
    start = items_of(evidence_of(pytester))[START]
    assert (start["status"], start["failure"]["category"]) == ("error", "configuration"), start["failure"]
    assert start["failure"]["message"] == ("serving.options of protocol 'openai' (model tiny): Expected `int`, got "
                                           "`str` - at `$.max_tokens`")


def evidence_of_dir(pytester: pytest.Pytester, folder: str) -> dict[str, object]:
    """evidence.json of the one bundle under ``folder``."""
    (bundle,) = (pytester.path / folder).iterdir()
    return dict(json.loads((bundle / "evidence.json").read_text()))


def test_deploy_through_the_backend_hook_point(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                              digits_servers: DigitsServers) -> None:
    monkeypatch.setenv("T_CURRENT", digits_servers.current)
    monkeypatch.setenv("T_PREVIOUS", digits_servers.previous)
    pytester.makeconftest(BACKEND_PLUGIN)
    deploy = {"kind": "InferenceService", "name": "digits", "namespace": "models"}
    serving = {"protocol": "oip", "model_name": "digits", "deploy": deploy,
               "load": {"concurrency": [1, 8], "requests": 360}, "rollback": {"version": "1.0.0"}}
    text = serving_matrix(serving).replace('"backend": "local"', '"backend": "switching"')
    pytester.makefile(".matrix.yaml", s=text)
    pytester.runpytest("-p", "no:cacheprovider")
    found, items = _statuses(pytester)
    assert found == {START: "passed", MODEL: "passed", BUSINESS: "passed"}
    assert records(items[START], "serving.deploy") == [{
        "deploy": deploy, "recorded": True, "pods": [{"name": "digits-predictor-0", "node": "node-a",
                                                      "phase": "Running", "requests": {"cpu": "1"},
                                                      "limits": {"cpu": "2"}}]}]
    model = items[MODEL]
    assert [r["version"] for r in records(model, "test.switch")] == ["1.0.0", "2.0.0"]  # switched back after
    assert [(r["version"], r["how"]) for r in records(model, "serving.rollback.switch")
            + records(model, "serving.rollback.restore")] == [("1.0.0", "test"), ("2.0.0", "test")]
    (rollback,) = records(model, "serving.rollback")
    assert (rollback["switch"], rollback["previous"]["endpoint"], rollback["previous"]["reported_version"],
            rollback["current"]["endpoint"]) == ("deploy", digits_servers.previous, "1.0.0",
                                                 digits_servers.current)
