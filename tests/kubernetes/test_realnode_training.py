"""The checks a training task type brings, on the real node (kubelet + containerd + the bridge CNI) through the real
Kueue: the communication check (a two-rank all-reduce through jax's gloo across two pods of one Indexed Job, the CNI
carrying the traffic) and checkpoint/resume on a PersistentVolumeClaim bound to a real PersistentVolume (hostPath:
the node has no dynamic provisioner), with the same evidence as on Docker (tests/docker/test_docker_training.py);
a killed peer and an unreachable rendezvous port with the category and owner Docker gives for the same fact.

Each test makes its own namespace, Kueue queues, PV/PVC and image import (the jax image is built in the Docker engine
by tests/docker/trainkit.py and imported into the node's containerd: never relies on another test), and removes
them. Pods ask for ``cpu`` only (the ClusterQueue covers only cpu), so other tests' device use does not interfere.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import realimages
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from realkit import COMBO, data, failure, kueue_queues, real_matrix, run
from support import REPO, TRAINING_FACTS, evidence_of

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster

pytestmark = pytest.mark.usefixtures("outside_inputs", "real_kueue", "pod_to_pod")

NETPOL_SH = REPO / "tests" / "infra" / "netpol.sh"
BRIDGE = "hetero-rn0"
"""realnode.sh's CNI bridge (netpol.sh's ``BRIDGE``)."""
COMM = f"trainer::jax::{COMBO}::communication::model"
CKPT = f"trainer::jax::{COMBO}::checkpoint::model"
FAST: dict[str, Any] = {"world_size": 2,
        "communication": {"sizes": ["4Ki", "256Ki"], "iterations": 3, "rendezvous_timeout": "60s",
                          "min_busbw_gbps": 0.0001},
        "checkpoint": {"steps": 4, "kill_after": 2, "size": "64Ki", "step_pause": "0.3s"}}


@pytest.fixture(scope="module")
def pod_to_pod(realnode: RealNodeCluster) -> None:
    """Pod-to-pod forwarding on the real node's bridge (``netpol.sh forward``, idempotent; see test_realnode_gang)."""
    subprocess.run(["bash", str(NETPOL_SH), "forward"], capture_output=True, text=True, timeout=60, check=True)


@pytest.fixture(scope="module")
def jax_image(realnode: RealNodeCluster) -> str:
    """tests/docker/trainkit.py's jax image, built in the Docker engine when missing and imported into the real
    node's containerd when it does not hold it with trainkit's key."""
    sys.path.insert(0, str(REPO / "tests" / "docker"))
    try:
        import trainkit
    finally:
        sys.path.remove(str(REPO / "tests" / "docker"))
    trainkit.ensure_jax_image(docker_api())
    return realimages.import_from_docker(realnode.info.containerd_socket, trainkit.JAX_IMAGE, trainkit.KEY)


@pytest.fixture
def queues(realnode: RealNodeCluster) -> Iterator[dict[str, str]]:
    """A namespace with a LocalQueue ``lq`` of 2 CPUs (kueue_queues)."""
    with kueue_queues(realnode, "ktrain", "cpu", "2") as made:
        yield made


@pytest.fixture
def claim(realnode: RealNodeCluster, queues: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """``(claim name, host folder)``: a hostPath PersistentVolume (a folder of this host, where the node's kubelet
    runs) pre-bound to a PersistentVolumeClaim in the test's namespace, both of a storage class of their own
    (no provisioner touches them); both deleted and the folder removed afterwards."""
    folder = Path(f"/tmp/hetero-ktrain-pv-{uuid.uuid4().hex[:6]}")
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    try:
        name, remove = hostpath_claim(realnode, queues["ns"], folder)
        try:
            yield name, folder
        finally:
            remove()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def training_run(pytester: pytest.Pytester, realnode: RealNodeCluster, made: dict[str, str], image: str,
                 training: dict[str, Any], *args: str, timeout: str = "150s") -> dict[str, dict[str, Any]]:
    """Run a training row (resource ``trainer``: 500m CPU, LocalQueue ``lq``; image ``jax``; the model layer's
    ``timeout``); items by id."""
    resource = {"name": "trainer", "type": "cpu", "requests": {"cpu": "500m"}, "queue": made["lq"]}
    doc = json.loads(real_matrix(realnode.info, made["ns"], [resource],
                                 images=[{"name": "jax", "reference": image, "for": ["cpu"]}],
                                 layers={"startup": {"timeout": "90s"}, "model": {"timeout": timeout}}))
    doc["spec"]["models"][0].update(task_type="training", training=training)
    return run(pytester, json.dumps(doc), "t" + uuid.uuid4().hex[:9], *args)


def leftovers(realnode: RealNodeCluster, ns: str) -> list[str]:
    """Jobs, Services, ConfigMaps the gate made and pods still in ``ns``."""
    core: Any = realnode.core
    batch: Any = client.BatchV1Api(realnode.api)
    made = "pytest-hetero.owner"
    return ([f"job/{j.metadata.name}" for j in batch.list_namespaced_job(ns).items]
            + [f"pod/{p.metadata.name}" for p in core.list_namespaced_pod(ns).items]
            + [f"service/{s.metadata.name}" for s in core.list_namespaced_service(ns).items]
            + [f"configmap/{c.metadata.name}" for c in core.list_namespaced_config_map(ns).items
               if made in (c.metadata.labels or {})])


def test_training_row_runs_communication_and_checkpoint_on_the_real_node(
    pytester: pytest.Pytester, realnode: RealNodeCluster, jax_image: str, queues: dict[str, str],
    claim: tuple[str, Path]
) -> None:
    name, folder = claim
    got = training_run(pytester, realnode, queues, jax_image,
                       {**FAST, "checkpoint": {**FAST["checkpoint"], "volume": name}},
                       "-k", "communication or checkpoint")
    assert got[COMM]["status"] == "passed", got[COMM].get("failure")
    assert got[CKPT]["status"] == "passed", got[CKPT].get("failure")
    assert evidence_of(pytester)["cleanup"]["leftovers"] == []
    assert leftovers(realnode, queues["ns"]) == []
    comm = data(got[COMM], "training.communication")
    assert comm["world_size"] == 2 and comm["devices"] == 2 and comm["backend"] == "gloo"
    assert comm["framework"].startswith("jax ") and comm["expected"] == 3.0 and comm["wrong"] == []
    assert [s["bytes"] for s in comm["sizes"]] == [4096, 262144]
    for s in comm["sizes"]:  # nccl-tests: busbw = algbw * 2(n-1)/n, n = 2 → busbw == algbw
        assert s["time_us"] > 0 and s["busbw_gbps"] == pytest.approx(s["algbw_gbps"], rel=1e-6)
        assert s["algbw_gbps"] == pytest.approx(s["bytes"] / (s["time_us"] * 1e-6) / 1e9, rel=1e-3)
    assert data(got[COMM], "training.rule")["met"] is True
    # two pods of ONE Workload admitted by Kueue from the matrix's queue, on the node, meeting over the CNI
    k8s = data(got[COMM], "training.k8s.job")
    adm = k8s["admission"]
    assert (adm["local_queue"], adm["cluster_queue"]) == ("lq", queues["cq"])
    assert [(s["name"], s["count"]) for s in adm["pod_sets"]] == [("main", 2)]
    assert k8s["manifest"]["spec"]["completionMode"] == "Indexed" and k8s["manifest"]["spec"]["suspend"] is True
    assert k8s["service_manifest"]["spec"]["clusterIP"] == "None"
    pods = {p["index"]: p for p in k8s["pods"]}
    assert sorted(pods) == [0, 1] and {p["node"] for p in pods.values()} == {realnode.info.node}
    assert pods[0]["ip"] != pods[1]["ip"] and k8s["rendezvous"]["address"] == f"{pods[0]['ip']}:29500"
    job = data(got[COMM], "training.job")
    assert job["rendezvous"] == f"{pods[0]['ip']}:29500" and job["ranks"] == [pods[0]["name"], pods[1]["name"]]
    # checkpoint on the PVC: killed by the gate after step 2, resumed at the step it wrote with its digest
    ckpt = data(got[CKPT], "training.checkpoint")
    assert ckpt["volume"] == name and ckpt["killed_after_step"] >= 2
    assert ckpt["resumed_step"] == ckpt["killed_after_step"] and ckpt["read_digest"] == ckpt["written_digest"]
    assert ckpt["final_step"] == 4 and ckpt["read_s"] >= 0 and ckpt["write_s"]["count"] >= 2
    # the claim's PersistentVolume holds the final state the job wrote (read here, on the node's host)
    on_volume = (folder / "ckpt.bin").read_bytes()
    assert on_volume.startswith(b"step=4\n") and len(on_volume) == len(b"step=4\n") + 64 * 1024
    ranks = [r["data"] for r in got[CKPT]["records"] if r["kind"] == "training.rank"]
    assert [(r["attempt"], r["killed_by_gate"], r["exit_code"]) for r in ranks] == [(1, True, 137), (2, False, 0)]
    # ONE Job: the gate killed its pod, the Job controller started a new pod of the same index over the same claim
    made = [r["data"] for r in got[CKPT]["records"] if r["kind"] == "training.k8s.job"]
    assert [m["volume_claim"] for m in made] == [name, name] and made[0]["name"] == made[1]["name"]
    assert made[1]["restarted_by"].startswith("the Job controller") and made[1]["replaces"] == [ranks[0]["name"]]
    assert ranks[1]["name"] != ranks[0]["name"] and ranks[1]["name"].startswith(f"{made[0]['name']}-0-")
    spec = made[0]["manifest"]["spec"]
    assert (spec["backoffLimitPerIndex"], spec["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"]) == (1, [137])


def test_a_job_the_queue_cannot_admit_whole_waits_and_is_explained_in_kueues_words(
    pytester: pytest.Pytester, realnode: RealNodeCluster, jax_image: str
) -> None:
    """Quota for one rank (500m) and a job of two: Kueue admits nothing (all or nothing), no pod starts, and the item
    fails with Kueue's own reason, owner platform."""
    with kueue_queues(realnode, "ktrain", "cpu", "500m") as made:
        got = training_run(pytester, realnode, made, jax_image, {"world_size": 2}, "-k", "communication",
                           timeout="8s")
        assert leftovers(realnode, made["ns"]) == []
    status, category, owner = failure(got[COMM])
    assert (status, category, owner) == ("failed", "queue_request_exceeds_max", "platform"), got[COMM]["failure"]
    k8s = data(got[COMM], "training.k8s.job")
    assert (k8s["decisive"]["source"], k8s["decisive"]["code"]) == ("kueue", "queue_request_exceeds_max")
    assert "pods" not in k8s and "current podset request (1) > maximum capacity (500m)" in k8s["decisive"]["message"]
    assert got[COMM]["failure"]["message"].startswith(f"indexed Job {k8s['name']} (2 pods) not admitted by Kueue "
                                                     "within 8 s: ")


def rank_pod(realnode: RealNodeCluster, ns: str, rank: int, needle: str, deadline_s: float = 120.0
             ) -> dict[str, Any]:
    """The communication job's pod of ``rank`` once its log holds ``needle`` (waits)."""
    core: Any = realnode.core
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for pod in core.list_namespaced_pod(ns, label_selector="pytest-hetero.job=communication").items:
            if (pod.metadata.annotations or {}).get("batch.kubernetes.io/job-completion-index") != str(rank):
                continue
            try:
                head = core.read_namespaced_pod_log(pod.metadata.name, ns, container="workload",
                                                    limit_bytes=64 * 1024)
                if needle in (head or ""):  # the client gives None for an empty log
                    return dict(client.ApiClient().sanitize_for_serialization(pod))  # type: ignore[no-untyped-call]
            except ApiException:
                pass
        time.sleep(0.2)
    raise AssertionError(f"rank {rank} in {ns} never logged {needle!r}")


def kill_from_the_node(realnode: RealNodeCluster, ns: str, rank: int) -> None:
    """SIGKILL rank ``rank``'s container through the node's containerd (as the kernel or a node agent would:
    neither the gate nor the pod's memory limit), once it joined the collective."""
    pod = rank_pod(realnode, ns, rank, '"event": "joined"')
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    time.sleep(1.0)
    subprocess.run(["ctr", "--address", str(realnode.info.containerd_socket), "-n", "k8s.io", "tasks", "kill",
                    "-s", "SIGKILL", cid], capture_output=True, timeout=30, check=True)


def killed_peer_on_kubernetes(pytester: pytest.Pytester, realnode: RealNodeCluster, made: dict[str, str],
                              image: str) -> tuple[tuple[str, str, str], str]:
    """A communication run whose rank 1 is killed from the node: (status, category, owner), message."""
    long = {"world_size": 2, "communication": {"sizes": ["64Ki"], "iterations": 100000, "rendezvous_timeout": "60s"}}
    killer = threading.Thread(target=kill_from_the_node, args=(realnode, made["ns"], 1), daemon=True)
    killer.start()
    got = training_run(pytester, realnode, made, image, long, "-k", "communication")
    killer.join(5)
    return failure(got[COMM]), got[COMM]["failure"]["message"]


@pytest.fixture
def dropped_port() -> Iterator[int]:
    """A rendezvous port whose TCP traffic between the node's pods is dropped by the host's FORWARD rules (as a
    network policy or a firewall between nodes would); the rule is removed afterwards."""
    port = 29641
    chain = "DOCKER-USER" if subprocess.run(["iptables", "-n", "-L", "DOCKER-USER"], capture_output=True
                                            ).returncode == 0 else "FORWARD"
    rule = ["-i", BRIDGE, "-o", BRIDGE, "-p", "tcp", "--dport", str(port), "-m", "comment", "--comment",
            "hetero ktrain test: rendezvous port dropped", "-j", "DROP"]
    subprocess.run(["iptables", "-I", chain, "1", *rule], check=True, capture_output=True, timeout=30)
    try:
        yield port
    finally:
        subprocess.run(["iptables", "-D", chain, *rule], check=True, capture_output=True, timeout=30)


def test_unreachable_rendezvous_is_platform_on_the_real_node(
    pytester: pytest.Pytester, realnode: RealNodeCluster, jax_image: str, queues: dict[str, str], dropped_port: int
) -> None:
    slow = {"world_size": 2, "communication": {"sizes": ["4Ki"], "iterations": 1, "rendezvous_timeout": "8s",
                                               "port": dropped_port}}
    got = training_run(pytester, realnode, queues, jax_image, slow, "-k", "communication")
    assert failure(got[COMM]) == TRAINING_FACTS["unreachable rendezvous"], got[COMM].get("failure")
    assert "RegisterTask" in got[COMM]["failure"]["message"]
    assert leftovers(realnode, queues["ns"]) == []


# -- the same fact, the same category and owner on Docker and on the real node ------------------------------------
@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 128 KiB tmpfs (mode 1777): a volume that fills at the first 1 MiB checkpoint."""
    where = tmp_path / "small"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k,mode=1777", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def hostpath_claim(realnode: RealNodeCluster, ns: str, folder: Path) -> tuple[str, Any]:
    """A hostPath PersistentVolume on ``folder`` pre-bound to claim ``ckpt`` in ``ns`` (Bound on return):
    ``(claim name, remove())``."""
    core: Any = realnode.core
    tag = uuid.uuid4().hex[:6]
    pv, pvc, klass = f"hetero-ktrain-{tag}", "ckpt", f"hetero-ktrain-{tag}"
    core.create_persistent_volume({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "64Mi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": klass,
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": str(folder), "type": "Directory"},
                 "claimRef": {"namespace": ns, "name": pvc}}})

    def remove() -> None:
        deletes: tuple[Callable[[], Any], ...] = (lambda: core.delete_namespaced_persistent_volume_claim(pvc, ns),
                                                  lambda: core.delete_persistent_volume(pv))
        for delete in deletes:
            try:
                delete()
            except ApiException as exc:
                if exc.status != 404:
                    raise

    try:
        core.create_namespaced_persistent_volume_claim(ns, {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": pvc},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": klass, "volumeName": pv,
                     "resources": {"requests": {"storage": "64Mi"}}}})
        end = time.monotonic() + 60
        while core.read_namespaced_persistent_volume_claim(pvc, ns).status.phase != "Bound":
            assert time.monotonic() < end, "the claim never bound to its PersistentVolume"
            time.sleep(0.2)
    except BaseException:
        remove()
        raise
    return pvc, remove


def docker_api() -> Any:
    """A ``docker.APIClient`` of the engine the environment names (the Docker tests' engine)."""
    import docker
    import docker.utils

    env: dict[str, Any] = dict(docker.utils.kwargs_from_env())
    return docker.APIClient(**env, timeout=300)


@pytest.mark.parametrize("fact", ["killed peer", "full volume"])
def test_the_same_fact_gets_the_docker_category_and_owner_on_the_real_node(
    pytester: pytest.Pytester, realnode: RealNodeCluster, jax_image: str, queues: dict[str, str],
    small_tmpfs: Path, fact: str
) -> None:
    """A peer SIGKILLed from outside (containerd's kill on the node), and a checkpoint volume that fills (a PVC bound
    to a hostPath PV on a 128 KiB tmpfs): the category, owner and message words tests/docker/test_docker_training.py
    asserts for the same fact on Docker (the engine's kill; the same tmpfs bind-mounted), from one table
    (``support.TRAINING_FACTS``)."""
    if fact == "killed peer":
        kube, kube_message = killed_peer_on_kubernetes(pytester, realnode, queues, jax_image)
        assert "rank 1" in kube_message and "rank 0 stopped by the gate after its peer failed" in kube_message, \
            kube_message
    else:
        name, remove = hostpath_claim(realnode, queues["ns"], small_tmpfs)
        ckpt = {"steps": 3, "kill_after": 1, "size": "1Mi"}
        try:
            got = training_run(pytester, realnode, queues, jax_image, {"checkpoint": {**ckpt, "volume": name}},
                               "-k", "checkpoint")
        finally:
            remove()
        kube, kube_message = failure(got[CKPT]), got[CKPT]["failure"]["message"]
        assert "No space left on device" in kube_message, kube_message
    assert kube == TRAINING_FACTS[fact], kube_message
    assert leftovers(realnode, queues["ns"]) == []
