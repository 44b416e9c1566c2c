"""The usage ledger on a real Docker engine: the placement probe, the resource × image container and each
model run inside it are ``usage.workload`` records with the engine's own times (inspect ``Created``,
``State.StartedAt``); the evidence's ``usage`` section sums them under namespace ``docker``."""

from __future__ import annotations

from typing import Any

import pytest
from dockerkit import COMBO, docker_matrix, evidence, items

from pytest_hetero.evidence.usage import RECORD
from pytest_hetero.matrix.quantity import quantity


def _usage(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [r["data"] for r in item["records"] if r["kind"] == RECORD]


def test_docker_workloads_land_in_the_ledger_with_the_engines_times(pytester: pytest.Pytester, run_id: str,
                                                                    engine: Any) -> None:
    cpu = {"name": "cpu", "type": "cpu", "requests": {"cpu": "500m"}, "limits": {"cpu": "500m", "memory": "512Mi"}}
    pytester.makefile(".matrix.yaml", d=docker_matrix(resources=[cpu]))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    it = items(ev)
    [probe] = _usage(it["cpu::scheduling"])
    [container] = _usage(it["cpu::img::startup"])
    [run] = _usage(it[f"cpu::img::{COMBO}::model"])
    assert (probe["object"], probe["namespace"], probe["outcome"]) == ("container", "docker", "completed")
    assert probe["released"] >= probe["placed"]  # removed by the engine right after the probe, confirmed
    assert (container["object"], container["outcome"], container["attempts"]) == ("container", "running", 1)
    assert container["requests"] == {"cpu": 0.5, "memory": 512 * 2**20}
    # idle between placement (Created) and start (State.StartedAt), both the engine's own
    assert container["idle_s"] == pytest.approx(container["started"] - container["placed"], abs=0.001)
    assert 0 <= container["idle_s"] < 30
    assert (run["object"], run["within"], run["model"], run["task_type"]) == (
        "exec", container["workload"], "digits-logreg@1.0.0", "batch-inference")
    usage = ev["usage"]
    # the container is held until the run's end (released by the engine's cleanup before the end line)
    end = usage_end(ev)
    held = {probe["workload"]: min(probe["released"], probe["ended"] or probe["released"]) - probe["placed"],
            container["workload"]: end - container["placed"]}
    cpu_s = sum(0.5 * s for s in held.values())
    assert usage["resource_seconds"]["by_namespace"]["docker"]["cpu"] == pytest.approx(cpu_s, abs=0.01)
    assert usage["resource_seconds"]["by_model"]["digits-logreg@1.0.0"]["cpu"] == pytest.approx(
        0.5 * (run["ended"] - run["started"]), abs=0.002)
    assert usage["resource_seconds"]["by_model"]["digits-logreg@1.0.0"]["memory"] == pytest.approx(
        quantity("512Mi") * (run["ended"] - run["started"]), rel=1e-6)
    assert usage["waste"]["idle"]["seconds"] >= container["idle_s"]
    assert usage["incomplete"]["count"] == 0


def usage_end(ev: dict[str, Any]) -> float:
    from pytest_hetero.evidence.usage import epoch

    end = epoch(ev["run"]["finished_at"])
    assert end is not None
    return end


def test_a_failed_model_run_in_the_container_is_waste(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    pytester.makefile(".matrix.yaml", d=docker_matrix(entrypoint=["{python}", "-c", "raise SystemExit(5)"]))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    [run] = _usage(items(ev)[f"cpu::img::{COMBO}::model"])
    assert run["outcome"] == "failed"
    waste = ev["usage"]["waste"]["failed"]
    assert waste["workloads"] == 1 and waste["items"] == [f"d.matrix.yaml::cpu::img::{COMBO}::model"]
    assert waste["resource_seconds"]["cpu"] == pytest.approx(
        quantity(str(run["requests"]["cpu"])) * (run["ended"] - run["started"]), abs=0.002)


def test_a_container_the_model_item_had_to_start_is_ledgered_once(pytester: pytest.Pytester, run_id: str,
                                                                  engine: Any) -> None:
    pytester.makefile(".matrix.yaml", d=docker_matrix())
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "model")
    ev = evidence(pytester)
    model = items(ev)[f"cpu::img::{COMBO}::model"]
    assert model["status"] == "passed", model.get("failure")
    container, run = _usage(model)  # started here (no startup item selected), then the run inside it
    assert (container["object"], run["object"], run["within"]) == ("container", "exec", container["workload"])
    assert ev["usage"]["workloads"] == 2
    end = usage_end(ev)
    assert ev["usage"]["resource_seconds"]["by_namespace"]["docker"]["cpu"] == pytest.approx(
        1 * (end - container["placed"]), abs=0.01)
