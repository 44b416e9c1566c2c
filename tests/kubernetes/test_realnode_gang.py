"""A task type's job through the real Kueue (v0.19.2) on the real node: several pods admitted as ONE Workload,
their rendezvous over the real CNI, quota for fewer pods (waits, explained in Kueue's words, no pod started),
and the queue rules of spec.task_queues (wrong ClusterQueue, wait over the bound).

Each test makes its own namespace, ResourceFlavor, ClusterQueue (``cpu`` quota) and LocalQueue, and deletes
them. The pods ask for ``cpu`` only, so other tests' GPU use on the shared node does not interfere.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from kubekit import kube_matrix
from kubernetes import client
from realkit import KUEUE_API, STANDIN, data, failure, kueue_queues, real_matrix, run
from support import REPO, evidence_of

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster, RealNodeCluster

pytestmark = pytest.mark.usefixtures("outside_inputs")
real = pytest.mark.usefixtures("real_kueue", "realnode_images")

NETPOL_SH = REPO / "tests" / "infra" / "netpol.sh"
CPU_PER_POD = "100m"


def gang_run(pytester: pytest.Pytester, realnode: RealNodeCluster, made: dict[str, str], rule: dict[str, Any],
             timeout: str = "60s", task_type: str = "training", cpu: str = CPU_PER_POD) -> dict[str, Any]:
    """Run the ``<resource>::<image>::<task type>::scheduling`` item of a matrix whose model has ``task_type``
    bound by ``rule`` (each pod asking for ``cpu``); its evidence item."""
    resource = {"name": "trainer", "type": "cpu", "requests": {"cpu": cpu}, "queue": made["lq"]}
    doc = json.loads(real_matrix(realnode.info, made["ns"], [resource],
                                 images=[{"name": "acc", "reference": STANDIN, "for": ["cpu"]}],
                                 layers={"scheduling": {"timeout": timeout}}, framework=False))
    doc["spec"]["models"][0]["task_type"] = task_type
    doc["spec"]["task_queues"] = {task_type: rule}
    got = run(pytester, json.dumps(doc), "g" + uuid.uuid4().hex[:9], "-k", f"{task_type} and scheduling")
    return got[f"trainer::acc::{task_type}::scheduling"]


@pytest.fixture(scope="module")
def pod_to_pod(realnode: RealNodeCluster) -> None:
    """Pod-to-pod forwarding on the real node's bridge (``netpol.sh forward``, idempotent): Docker sets the host's
    FORWARD policy to DROP, which drops bridged pod traffic too; without it the rendezvous fails, as it should."""
    subprocess.run(["bash", str(NETPOL_SH), "forward"], capture_output=True, text=True, timeout=60, check=True)


@real
@pytest.mark.usefixtures("pod_to_pod")
def test_a_two_pod_job_is_admitted_as_one_workload_and_its_pods_meet(
    pytester: pytest.Pytester, realnode: RealNodeCluster
) -> None:
    with kueue_queues(realnode, "gang", "cpu", "200m") as made:
        item = gang_run(pytester, realnode, made, {"cluster_queue": made["cq"], "workers": 2, "max_wait": "30s"})
        # the run removed what it made: Job, pods and headless Service (the namespace is still there)
        cleanup = evidence_of(pytester)["cleanup"]
        assert cleanup["leftovers"] == [], cleanup
        core, batch = client.CoreV1Api(realnode.api), client.BatchV1Api(realnode.api)
        assert (batch.list_namespaced_job(made["ns"]).items, core.list_namespaced_service(made["ns"]).items) == ([], [])
    assert item["status"] == "passed", item.get("failure")
    sent = data(item, "scheduling.submitted")
    spec = sent["manifest"]["spec"]
    assert (spec["completionMode"], spec["parallelism"], spec["completions"], spec["suspend"]) == (
        "Indexed", 2, 2, True)
    assert sent["service_manifest"]["spec"]["clusterIP"] == "None"
    job = data(item, "scheduling.job")
    adm = job["admission"]
    # ONE Workload for both pods: one pod set of count 2, 2 x 100m of quota used
    assert [(s["name"], s["count"]) for s in adm["pod_sets"]] == [("main", 2)]
    assert adm["resource_usage"] == {"cpu": "200m"}
    assert (adm["cluster_queue"], adm["local_queue"], adm["workload"].startswith("job-")) == (made["cq"], "lq", True)
    assert 0 <= adm["wait_s"] <= 30 and adm["admitted_at"]
    assert job["service"] == sent["service"]
    pods = job["pods"]
    assert sorted(p["index"] for p in pods) == [0, 1]
    assert {p["node"] for p in pods} == {realnode.info.node}
    assert all(p["ip"] and p["hostname"] == f"{sent['name']}-{p['index']}" and p["subdomain"] == job["service"]
               for p in pods)
    assert {p["index"]: p["endpoint"]["ip"] for p in pods} == {p["index"]: p["ip"] for p in pods}
    # the rendezvous: each pod reached the other over the CNI and was reached by it
    by_index = {r["index"]: r for r in job["rendezvous"]}
    assert by_index[0]["ok"] and by_index[1]["ok"]
    assert list(by_index[0]["reached_ms"]) == ["1"] and by_index[0]["heard"] == [1]
    assert list(by_index[1]["reached_ms"]) == ["0"] and by_index[1]["heard"] == [0]
    assert by_index[0]["host"] == f"{sent['name']}-0"
    # each pod is in the run's usage ledger, with what it asked for and where it ran
    ledger = [r["data"] for r in item["records"] if r["kind"] == "usage.workload"]
    assert sorted((u["name"], u["requests"], u["node"]) for u in ledger) == sorted(
        (p["name"], {"cpu": CPU_PER_POD}, realnode.info.node) for p in pods)


@real
def test_quota_for_one_pod_keeps_the_job_waiting_whole_and_says_why_in_kueues_words(
    pytester: pytest.Pytester, realnode: RealNodeCluster
) -> None:
    with kueue_queues(realnode, "gang", "cpu", CPU_PER_POD) as made:
        item = gang_run(pytester, realnode, made, {"workers": 2}, timeout="8s")
    status, category, owner = failure(item)
    assert (status, owner) == ("failed", "platform")
    job = data(item, "scheduling.job")
    assert job["admitted"] is False and job["pods"] == [] and job["placed"] == 0  # never a partial start
    first = job["reasons"][0]
    # Kueue's words: the one Workload asks for both pods at once (200m), more than the queue can ever give
    assert (first["source"], first["code"], category) == ("kueue", "queue_request_exceeds_max", first["code"])
    assert (first["detail"]["condition_reason"], first["detail"]["pod_set"]) == ("ExceedsMaxQuota", "main")
    assert first["message"] == (f"insufficient quota for cpu in flavor {made['rf']}, previously considered podsets "
                                "requests (0) + current podset request (200m) > maximum capacity (100m)")
    assert item["failure"]["message"].startswith(f"indexed Job {data(item, 'scheduling.submitted')['name']} "
                                                 "(2 pods) not admitted by Kueue within 8 s: ")


@real
def test_admitted_pods_that_no_node_fits_are_explained_by_the_schedulers_words(
    pytester: pytest.Pytester, realnode: RealNodeCluster
) -> None:
    """Kueue's quota is not the nodes' capacity: it admits the job, the kube-scheduler cannot place its pods."""
    with kueue_queues(realnode, "gang", "cpu", "200") as made:
        item = gang_run(pytester, realnode, made, {"workers": 2}, timeout="10s", cpu="64")
    assert failure(item) == ("failed", "insufficient_resource", "infrastructure")
    job = data(item, "scheduling.job")
    assert (job["admitted"], job["placed"], len(job["pods"])) == (True, 0, 2)
    assert {p["phase"] for p in job["pods"]} == {"Pending"}
    first = job["reasons"][0]
    assert (first["source"], first["code"], first["resource"]) == ("scheduler", "insufficient_resource", "cpu")
    assert "Insufficient cpu" in first["message"]
    assert "admitted, but 0 of 2 pods running within 10 s" in item["failure"]["message"]


@real
def test_a_task_type_admitted_in_another_cluster_queue_fails_its_scheduling_item(
    pytester: pytest.Pytester, realnode: RealNodeCluster
) -> None:
    priority = client.SchedulingV1Api(realnode.api)
    pc = f"gang-{uuid.uuid4().hex[:6]}"
    priority.create_priority_class({"metadata": {"name": pc}, "value": 100})  # type: ignore[arg-type]
    try:
        with kueue_queues(realnode, "gang", "cpu", "200m") as made:
            item = gang_run(pytester, realnode, made, {"cluster_queue": "cq-training-only", "priority_class": pc,
                                                       "workers": 1}, task_type="fine-tune")
    finally:
        priority.delete_priority_class(pc)
    assert failure(item) == ("failed", "queue_rule_mismatch", "platform")
    message = item["failure"]["message"]
    assert message.endswith(f": ClusterQueue '{made['cq']}', the rule says 'cq-training-only'")  # priority kept
    admission = data(item, "scheduling.job")["admission"]
    assert (admission["cluster_queue"], admission["local_queue"]) == (made["cq"], "lq")
    assert (admission["priority_class"], admission["priority_class_kind"], admission["priority"]) == (
        pc, "PriorityClass", 100)
    assert data(item, "scheduling.submitted")["manifest"]["spec"]["template"]["spec"]["priorityClassName"] == pc


@real
def test_a_wait_over_the_bound_fails_with_the_wait_in_evidence(
    pytester: pytest.Pytester, realnode: RealNodeCluster
) -> None:
    with kueue_queues(realnode, "gang", "cpu", CPU_PER_POD) as made:
        blocker = hold_quota(realnode, made)
        stop = threading.Event()
        release = threading.Thread(target=release_later, args=(realnode, made, blocker, stop), daemon=True)
        release.start()
        try:
            item = gang_run(pytester, realnode, made, {"max_wait": "2s", "workers": 1}, timeout="60s")
        finally:
            stop.set()
            release.join()
    assert failure(item) == ("failed", "queue_wait_exceeded", "platform")
    adm = data(item, "scheduling.job")["admission"]
    assert adm["wait_s"] >= 3  # Workload created -> Admitted, from its conditions (1 s resolution)
    assert f"waited {adm['wait_s']:g} s from submission to admission" in item["failure"]["message"]


def hold_quota(realnode: RealNodeCluster, made: dict[str, str]) -> str:
    """A Job of one pod through ``lq`` holding the whole quota; its name, once Kueue admitted it."""
    name = "blocker"
    pod = realnode.pod_spec([{"name": "c", "image": STANDIN, "imagePullPolicy": "Never",
                              "command": ["/bin/sh", "-c", "sleep 600"],
                              "resources": {"requests": {"cpu": CPU_PER_POD}}}], restartPolicy="Never",
                            terminationGracePeriodSeconds=0)
    client.BatchV1Api(realnode.api).create_namespaced_job(made["ns"], {  # type: ignore[arg-type]
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": made["lq"]}},
        "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": pod}}})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job: Any = client.BatchV1Api(realnode.api).read_namespaced_job(name, made["ns"])
        if job.spec.suspend is False:
            return name
        time.sleep(0.3)
    raise AssertionError("the blocker Job was not admitted by Kueue in 30 s")


def release_later(realnode: RealNodeCluster, made: dict[str, str], blocker: str, stop: threading.Event) -> None:
    """Once a second Workload (the run's job) waits in the namespace, hold the quota 5 s more, then delete the
    blocker Job so that Kueue admits the run's job late."""
    custom, (group, version) = client.CustomObjectsApi(realnode.api), KUEUE_API
    while not stop.is_set():
        found: Any = custom.list_namespaced_custom_object(group, version, made["ns"], "workloads")
        if len(found["items"]) > 1:
            break
        time.sleep(0.2)
    if stop.wait(5.0):
        return
    client.BatchV1Api(realnode.api).delete_namespaced_job(blocker, made["ns"], propagation_policy="Background",
                                                          grace_period_seconds=0)


def test_without_kueue_the_job_is_not_submitted_and_the_item_says_so(pytester: pytest.Pytester, cluster: Cluster,
                                                                    run_id: str) -> None:
    """The KWOK plane serves no Kueue API: nothing is created, the item is an error (nothing proven either way)
    naming API discovery's answer."""
    resource = {"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu", "queue": "lq"}
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace, [resource], layers={"scheduling": {"timeout": "5s"}}))
    doc["spec"]["models"][0]["task_type"] = "training"
    doc["spec"]["task_queues"] = {"training": {"workers": 2}}
    pytester.makefile(".matrix.yaml", k=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "training")
    [item] = evidence_of(pytester)["items"]
    assert failure(item) == ("error", "api_not_served", "platform")
    assert item["failure"]["message"] == ("a training job goes through Kueue: the apiserver serves no kueue.x-k8s.io "
                                          "API (API discovery): the controller is not installed")
    assert [r["kind"] for r in item["records"] if r["kind"].startswith("scheduling.")] == ["scheduling.request"]
