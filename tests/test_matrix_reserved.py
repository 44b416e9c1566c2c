"""``kind: reserved-inference`` governance probes in the matrix: ``reserve`` loads into the model and the probe
expands to a scheduling item; a missing or misnamed model, a model without serving, a floor above the replicas,
an unknown dataset and ``reserve`` on another kind are errors naming the field and the fix; an engine without
pool priorities answers not applicable. The probe itself runs on the real node
(tests/kubernetes/test_realnode_reserved.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import evidence_of, matrix_text, statuses

from pytest_hetero.backends.kubernetes.reserved import settings
from pytest_hetero.errors import MatrixInvalid
from pytest_hetero.matrix import load_matrix
from pytest_hetero.matrix.expand import expand
from pytest_hetero.matrix.model import Reserve

pytestmark = pytest.mark.usefixtures("outside_inputs")

SERVED = {"name": "digits-service", "version": "2.0.0",
          "serving": {"protocol": "oip", "endpoint": "http://127.0.0.1:9", "model_name": "digits"}}
RESERVE: dict[str, Any] = {"model": "digits-service", "priority_class": "inference-critical", "replicas": 2,
                           "burst": {"priority_class": "training", "pods": 4}, "p95_ms": 250}


def write(tmp_path: Path, probes: list[dict[str, Any]]) -> Path:
    doc = json.loads(matrix_text(extra_spec={"governance": {"probes": probes}}))
    doc["spec"]["models"].append(SERVED)
    path = tmp_path / "r.matrix.yaml"
    path.write_text(json.dumps(doc))
    return path


def problems(tmp_path: Path, probes: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(write(tmp_path, probes))
    return [(p.location.field or "", p.message, p.hint) for p in info.value.problems]


def probe(**reserve: Any) -> dict[str, Any]:
    return {"name": "floor", "kind": "reserved-inference", "resource": "cpu-host", "reserve": {**RESERVE, **reserve}}


def test_a_reserved_inference_probe_loads_with_its_defaults_and_expands_to_a_scheduling_item(tmp_path: Path) -> None:
    matrix = load_matrix(write(tmp_path, [probe(window="500ms")]))
    [p] = matrix.probes
    assert (p.kind, p.resource, p.acting_as, p.reserve) == ("reserved-inference", "cpu-host", None, Reserve(
        model="digits-service", replicas=2, min_ready=2, burst={"priority_class": "training", "pods": 4}, p95_ms=250.0,
        window_s=0.5, duration_s=20.0, priority_class="inference-critical"))
    assert settings(p) == {"model": "digits-service", "dataset": None, "priority_class": "inference-critical",
                           "replicas": 2, "min_ready": 2, "burst": {"priority_class": "training", "pods": 4},
                           "p95_ms": 250.0, "max_error_rate": 0.0, "window_s": 0.5, "duration_s": 20.0}
    items = [i for i in expand(matrix, scheduling_per_image=True).items if "probe" in i.keys]
    assert [(i.layer, i.parts) for i in items] == [("scheduling", ("cpu-host", "governance", "floor", "scheduling"))]


def test_names_floor_and_keys_of_reserve_are_checked(tmp_path: Path) -> None:
    got = problems(tmp_path, [
        probe(model="digits-servce"),
        {**probe(model="digits-logreg"), "name": "unserved"},
        {**probe(min_ready=3, dataset="nope"), "name": "floor-high"},
        {"name": "no-reserve", "kind": "reserved-inference", "resource": "cpu-host"},
        {"name": "pre", "kind": "preemption", "resource": "cpu-host", "high": "a", "low": "b", "reserve": RESERVE}])
    fields = {(f, m) for f, m, _ in got}
    assert ("spec.governance.probes[0:floor].reserve.model",
            "reserve.model names unknown model 'digits-servce'") in fields
    [hint] = [h for f, m, h in got if m == "reserve.model names unknown model 'digits-servce'"]
    assert hint == "did you mean 'digits-service'?"
    assert ("spec.governance.probes[1:unserved].reserve.model", "model 'digits-logreg' has no serving block") in fields
    assert ("spec.governance.probes[2:floor-high].reserve.min_ready", "min_ready 3 is above replicas 2") in fields
    assert ("spec.governance.probes[2:floor-high].reserve.dataset",
            "reserve.dataset names unknown dataset 'nope'") in fields
    [need] = [(m, h) for f, m, h in got if m == "a reserved-inference probe needs 'reserve'"]
    assert need[1].startswith("reserve: {model, replicas, burst: {priority_class, pods}, p95_ms}")
    assert ("spec.governance.probes[4:pre].reserve", "a preemption probe does not take 'reserve'") in fields


def test_the_schema_refuses_a_burst_without_pods_and_an_unknown_reserve_key(tmp_path: Path) -> None:
    got = problems(tmp_path, [probe(burst={"priority_class": "training"}, floor=1)])
    text = "\n".join(f"{f}: {m}" for f, m, _ in got)
    assert "pods" in text and "floor" in text, text


def test_the_local_engine_has_no_pool_priorities_so_the_probe_is_not_applicable(pytester: pytest.Pytester) -> None:
    path = write(pytester.path, [probe()])
    pytester.runpytest("-p", "no:cacheprovider", "-k", "governance", str(path))
    evidence = evidence_of(pytester)
    assert statuses(evidence)["cpu-host::governance::floor::scheduling"] == "not_applicable"
    [item] = [i for i in evidence["items"] if "governance" in i["nodeid"]]
    assert "the local backend has no pool priorities or preemption to probe" in json.dumps(item)


def test_a_window_of_no_time_or_a_burst_shorter_than_a_window_is_refused_naming_the_field(tmp_path: Path) -> None:
    """``window: 0s`` passes the schema's pattern but is no window (the run would stop on it), ``10ms`` sends almost
    no request and falls between two listings of the serving pods (the floor unobserved), a ``duration`` shorter
    than one window runs no burst window: each is an error naming the field and the fix, before anything is
    deployed."""
    got = problems(tmp_path, [probe(window="0s"), {**probe(window="10ms"), "name": "short"},
                              {**probe(window="5s", duration="3s"), "name": "brief"}])
    fields = {f: (m, h) for f, m, h in got}
    assert fields["spec.governance.probes[0:floor].reserve.window"] == (
        "reserve.window: bad duration '0s': must be more than zero (a number of seconds, or e.g. 250ms, 30s, 5m, 2h, "
        "2d, 1w, 1m30s)", "e.g. window: 2s")
    message, hint = fields["spec.governance.probes[1:short].reserve.window"]
    assert message.startswith("reserve.window 10ms is shorter than 0.5 s") and hint == "e.g. window: 2s"
    assert fields["spec.governance.probes[2:brief].reserve.duration"] == (
        "reserve.duration 3s is shorter than one window (5s): no load window would run during the burst",
        "watch the burst for several windows, e.g. duration: 20s with window: 2s")
    assert len(got) == 3, got
