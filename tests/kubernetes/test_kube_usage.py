"""The usage ledger on the KWOK plane: the workload pod's facts come from the pod as the apiserver stores it
(PodScheduled lastTransitionTime, the container's startedAt), its resource-seconds land under the run's
namespace and the gate's project, a model run is counted for its model, and a pod that never starts is
waste. KWOK's times are the simulator's (the section and each record say so)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from kubekit import kube_matrix
from support import evidence_of

from pytest_hetero.evidence.usage import RECORD, epoch
from pytest_hetero.matrix.quantity import quantity

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

COMBO = "digits-logreg@digits-test"


def _items(ev: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["nodeid"].split("::", 1)[1]: i for i in ev["items"]}


def _data(item: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r["data"] for r in item["records"] if r["kind"] == kind]


def test_a_kwok_run_ledgers_the_pod_under_its_namespace_with_the_pods_own_times(
        pytester: pytest.Pytester, cluster: Cluster, run_id: str) -> None:
    resource = {"name": "cpu", "type": "cpu", "requests": {"cpu": "1", "memory": "256Mi"}, "pool": "cpu"}
    pytester.makefile(".matrix.yaml", k=kube_matrix(cluster.suffix, cluster.namespace, [resource]))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-kube-context", "hetero")
    ev = evidence_of(pytester)
    got = _items(ev)
    [placed] = _data(got["cpu::py::scheduling"], RECORD)
    [started] = _data(got["cpu::py::startup"], RECORD)
    [ran] = _data(got[f"cpu::py::{COMBO}::model"], RECORD)
    assert placed["workload"] == started["workload"] == ran["within"]
    assert (started["namespace"], started["tenant"], started["simulated"]) == (cluster.namespace, None, True)
    assert started["requests"] == {"cpu": "1", "memory": "256Mi"}
    # placement: the scheduler's PodScheduled condition, as the scheduling item recorded it
    assert started["placed"] == epoch(_data(got["cpu::py::scheduling"], "scheduling.placed")[0]["decided_at"])
    # start: the workload container's startedAt, as the startup item recorded the pod's status
    [status] = [c for c in _data(got["cpu::py::startup"], "startup.pod")[0]["container_statuses"]
                if c["name"] == "workload"]
    assert started["started"] == epoch(status["state"]["running"]["startedAt"])
    assert started["idle_s"] == round(started["started"] - started["placed"], 3) >= 0
    assert (ran["object"], ran["model"], ran["task_type"]) == ("exec", "digits-logreg@1.0.0", "batch-inference")
    usage = ev["usage"]
    assert usage["simulated"] >= 1 and any("KWOK" in s for s in usage["does_not_cover"])
    end = epoch(ev["run"]["finished_at"])
    assert end is not None
    held = end - started["placed"]  # released by the engine's cleanup, before the run's end line
    per = usage["resource_seconds"]["by_namespace"][cluster.namespace]
    assert per["cpu"] == pytest.approx(held, abs=0.01)
    assert per["memory"] == pytest.approx(quantity("256Mi") * held, rel=1e-4)
    assert usage["resource_seconds"]["by_project"]["(gate)"] == per
    assert usage["resource_seconds"]["by_model"]["digits-logreg@1.0.0"]["cpu"] == pytest.approx(
        ran["ended"] - ran["started"], abs=0.002)
    assert usage["waste"]["idle"]["worst"][0]["idle_s"] == started["idle_s"]
    assert usage["waste"]["failed"]["workloads"] == 0 and usage["incomplete"]["count"] == 0


def test_a_pod_that_cannot_pull_or_crash_loops_is_waste(pytester: pytest.Pytester, cluster: Cluster,
                                                        run_id: str) -> None:
    """The ``outcome`` node's kubelet is simulated in the test process (kubekit.FakeKubelet), worded as a
    real kubelet words it: ``:pull-error`` never starts, ``:crash`` restarted 3 times."""
    images = [{"name": tag, "reference": f"registry.invalid/hetero/missing:{tag}", "for": ["cpu"]}
              for tag in ("pull-error", "crash")]
    resource = {"name": "node", "type": "cpu", "requests": {"cpu": "1"}, "limits": {"memory": "64Mi"},
                "pool": "outcome"}
    huge = {"name": "huge", "type": "cpu", "requests": {"cpu": "5000"}, "pool": "cpu"}  # no node has room
    pytester.makefile(".matrix.yaml", k=kube_matrix(cluster.suffix, cluster.namespace, [resource, huge],
                                                    images=images))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "scheduling or startup")
    ev = evidence_of(pytester)
    got = _items(ev)
    pull, crash = got["node::pull-error::startup"], got["node::crash::startup"]
    assert (pull["failure"]["category"], crash["failure"]["category"]) == ("image_not_found", "crash_loop")
    [never] = _data(pull, RECORD)
    assert (never["outcome"], never["started"], never["idle_s"]) == ("failed", None, None)  # placed, never ran
    [looping] = _data(crash, RECORD)
    assert (looping["outcome"], looping["attempts"]) == ("failed", 4)  # 1 + restartCount 3
    refused = [_data(got[f"huge::{tag}::scheduling"], RECORD)[0] for tag in ("pull-error", "crash")]
    assert [(r["outcome"], r["placed"], r["held_s"]) for r in refused] == [("refused", None, 0.0)] * 2
    waste = ev["usage"]["waste"]
    assert waste["failed"]["workloads"] == 4  # the refused ones held nothing: no resource-seconds below
    assert sorted(waste["failed"]["items"]) == sorted([pull["nodeid"], crash["nodeid"], *(
        got[f"huge::{tag}::scheduling"]["nodeid"] for tag in ("pull-error", "crash"))])
    assert waste["retries"]["restarts"] == 3
    end = epoch(ev["run"]["finished_at"])
    assert end is not None
    assert waste["failed"]["resource_seconds"]["cpu"] == pytest.approx(
        (end - never["placed"]) + (end - looping["placed"]), abs=0.02)


def test_a_pod_the_model_item_had_to_start_is_ledgered(pytester: pytest.Pytester, cluster: Cluster,
                                                       run_id: str) -> None:
    resource = {"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"}
    pytester.makefile(".matrix.yaml", k=kube_matrix(cluster.suffix, cluster.namespace, [resource]))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-kube-context", "hetero",
                       "-k", "model")
    ev = evidence_of(pytester)
    model = _items(ev)[f"cpu::py::{COMBO}::model"]
    assert model["status"] == "passed", model.get("failure")
    pod, ran = _data(model, RECORD)  # placed and started here (no scheduling or startup item), then the run
    assert (pod["object"], pod["namespace"], ran["within"]) == ("pod", cluster.namespace, pod["workload"])
    assert pod["placed"] is not None and pod["started"] is not None
    assert ev["usage"]["resource_seconds"]["by_namespace"][cluster.namespace]["cpu"] > 0
