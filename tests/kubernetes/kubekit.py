"""Helpers of the Kubernetes-backend tests: the fake node pools, a simulated kubelet for one node, matrices.

Pools (label ``hetero-test.pool``, plus ``hetero-test.session: <suffix>`` so tests never touch
another module's or engineer's nodes on the shared plane):

====================  ========================================================================
pool                  node(s)
====================  ========================================================================
``gpu``               KWOK, 8 × ``nvidia.com/gpu``, GFD labels (H100 80GB HBM3)
``mig``               KWOK, 7 × ``nvidia.com/mig-1g.10gb`` (mixed strategy), GFD labels
``ascend``            KWOK, 8 × ``huawei.com/Ascend910``, ``accelerator: huawei-Ascend910``
``hami``              KWOK, 4 × ``nvidia.com/gpu`` + ``nvidia.com/gpumem`` (HAMi-style vGPU), GFD
``cpu``               KWOK, 2 nodes, CPU only
``tainted``           KWOK, 8 × ``nvidia.com/gpu`` tainted ``dedicated=training:NoSchedule``
``degraded``          KWOK, 8 × ``nvidia.com/gpu`` capacity but 7 allocatable (one device withheld)
``notready``          KWOK with the ``node-not-ready`` stage label: Ready=False
``outcome``           not KWOK: :class:`FakeKubelet` (this process) drives its pods' container
                      states from the image tag (``:pull-error``, ``:crash``, ``:oom``)
====================  ========================================================================
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from support import matrix_text

IN_CI = os.environ.get("CI", "").lower() == "true"
POOL = "hetero-test.pool"
SESSION = "hetero-test.session"
GFD = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/gpu.family": "hopper",
    "nvidia.com/cuda.driver.major": "550",
}
BASE = {"cpu": "32", "memory": "128Gi", "pods": "110"}


def now() -> str:
    """UTC now, RFC 3339 seconds."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_specs(suffix: str) -> list[dict[str, Any]]:
    """Node bodies of every pool (see the module docstring)."""

    def node(
        name: str,
        pool: str,
        extra: dict[str, str],
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        kwok: bool = True,
        allocatable: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        cap = {**BASE, **extra}
        full = f"{name}-{suffix}"
        return {
            "metadata": {
                "name": full,
                "annotations": {"kwok.x-k8s.io/node": "fake"} if kwok else {},
                "labels": {POOL: pool, SESSION: suffix, "kubernetes.io/hostname": full, **(labels or {})},
            },
            "spec": {"taints": taints or []},
            "status": {
                "capacity": cap,
                "allocatable": {**cap, **(allocatable or {})},
                "conditions": [] if kwok else [ready_condition()],
            },
        }

    return [
        node("gpu", "gpu", {"nvidia.com/gpu": "8"}, GFD),
        node(
            "mig",
            "mig",
            {"nvidia.com/mig-1g.10gb": "7"},
            {**GFD, "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "all-1g.10gb"},
        ),
        node("ascend", "ascend", {"huawei.com/Ascend910": "8"}, {"accelerator": "huawei-Ascend910"}),
        node("hami", "hami", {"nvidia.com/gpu": "4", "nvidia.com/gpumem": "81920"}, {**GFD, "gpu": "on"}),
        node("degraded", "degraded", {"nvidia.com/gpu": "8"}, GFD, allocatable={"nvidia.com/gpu": "7"}),
        node("cpu-a", "cpu", {}),
        node("cpu-b", "cpu", {}),
        node(
            "tainted",
            "tainted",
            {"nvidia.com/gpu": "8"},
            GFD,
            taints=[{"key": "dedicated", "value": "training", "effect": "NoSchedule"}],
        ),
        node(
            "notready",
            "notready",
            {"nvidia.com/gpu": "8"},
            {**GFD, "node-not-ready.stage.kwok.x-k8s.io": "true"},
        ),
        node("outcome", "outcome", {}, kwok=False),
    ]


def ready_condition() -> dict[str, str]:
    """A Ready=True node condition stamped now."""
    return {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "fake kubelet (tests)",
        "lastHeartbeatTime": now(),
        "lastTransitionTime": now(),
    }


OUTCOMES: dict[str, dict[str, Any]] = {
    "pull-error": {
        "phase": "Pending",
        "state": {
            "waiting": {
                "reason": "ErrImagePull",
                "message": (
                    'failed to pull and unpack image "registry.invalid/hetero/missing:pull-error": failed to resolve '
                    'reference "registry.invalid/hetero/missing:pull-error": registry.invalid/hetero/missing:'
                    "pull-error: not found"
                ),
            }
        },
        "last": {},
        "restarts": 0,
        "event": (
            "Failed",
            (
                'Failed to pull image "registry.invalid/hetero/missing:pull-error": rpc error: code = '
                "NotFound desc = failed to pull and unpack image: not found"
            ),
        ),
    },
    "crash": {
        "phase": "Running",
        "state": {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": "back-off 40s restarting failed container=workload",
            }
        },
        "last": {"terminated": {"reason": "Error", "exitCode": 1, "startedAt": None, "finishedAt": None}},
        "restarts": 3,
        "event": ("BackOff", "Back-off restarting failed container workload"),
    },
    "oom": {
        "phase": "Running",
        "state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
        "last": {},
        "restarts": 0,
        "event": None,
    },
}
"""Image tag → the container status the simulated kubelet reports (as a real kubelet words it)."""


class FakeKubelet:
    """Acts as the kubelet of one non-KWOK node: heartbeats its Ready condition every 5 s and sets the
    status of pods bound to it from :data:`OUTCOMES` by image tag (other tags: Running)."""

    def __init__(self, api: client.ApiClient, node: str) -> None:
        self.core, self.node = client.CoreV1Api(api), node
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._beat, daemon=True),
            threading.Thread(target=self._pods, daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _beat(self) -> None:
        while not self.stop.wait(5):
            try:
                self.core.patch_node_status(self.node, {"status": {"conditions": [ready_condition()]}})
            except ApiException:
                pass

    def _pods(self) -> None:
        done: set[str] = set()
        while not self.stop.is_set():
            try:
                for ev in watch.Watch().stream(  # type: ignore[no-untyped-call]  # (the client's watch is untyped)
                    self.core.list_pod_for_all_namespaces,
                    timeout_seconds=30,
                    field_selector=f"spec.nodeName={self.node}",
                ):
                    pod = ev["object"]
                    if ev["type"] == "DELETED" or pod.metadata.uid in done or pod.metadata.deletion_timestamp:
                        continue
                    done.add(pod.metadata.uid)
                    self._report(pod)
                    if self.stop.is_set():
                        return
            except Exception:  # noqa: BLE001 - resume the watch
                time.sleep(0.2)

    def _report(self, pod: Any) -> None:
        c = pod.spec.containers[0]
        outcome = OUTCOMES.get(
            c.image.rsplit(":", 1)[-1],
            {
                "phase": "Running",
                "state": {"running": {"startedAt": now()}},
                "last": {},
                "restarts": 0,
                "event": None,
            },
        )
        state = json.loads(json.dumps(outcome["state"]).replace("null", json.dumps(now())))
        status = {
            "phase": outcome["phase"],
            "hostIP": "127.0.0.1",
            "podIP": "10.250.0.9",
            "startTime": now(),
            "containerStatuses": [
                {
                    "name": c.name,
                    "image": c.image,
                    "imageID": "",
                    "ready": "running" in state,
                    "restartCount": outcome["restarts"],
                    "state": state,
                    "lastState": json.loads(json.dumps(outcome["last"]).replace("null", json.dumps(now()))),
                }
            ],
        }
        ns, name = pod.metadata.namespace, pod.metadata.name
        if outcome["event"]:
            reason, message = outcome["event"]
            self.core.create_namespaced_event(
                ns,
                {  # type: ignore[arg-type]  # a manifest dict, sent as it is
                    "metadata": {"generateName": f"{name}."},
                    "type": "Warning",
                    "reason": reason,
                    "message": message,
                    "involvedObject": {"kind": "Pod", "name": name, "namespace": ns, "uid": pod.metadata.uid},
                    "source": {"component": "kubelet", "host": self.node},
                    "firstTimestamp": now(),
                    "lastTimestamp": now(),
                    "count": 1,
                },
            )
        # the event first: the backend reads events when it sees the status (a real kubelet races here)
        self.core.patch_namespaced_pod_status(name, ns, {"status": status})

    def close(self) -> None:
        """Stop heartbeats and the pod watch (threads are daemons; they end within 30 s)."""
        self.stop.set()


def kube_matrix(
    suffix: str,
    namespace: str,
    resources: list[dict[str, Any]],
    *,
    layers: dict[str, Any] | None = None,
    images: list[dict[str, Any]] | None = None,
    target: dict[str, Any] | None = None,
    name: str = "k",
) -> str:
    """A kubernetes-backend matrix on the digits case; resources' ``pool`` key becomes a node selector
    on this session's pool (``{"pool": "gpu"}`` → ``nodeSelector: {hetero-test.pool: gpu, hetero-test.session: …}``)."""
    out = []
    for r in resources:
        r = dict(r)
        pool = r.pop("pool", None)
        if pool:
            r["node_selector"] = {POOL: pool, SESSION: suffix, **r.get("node_selector", {})}
        out.append(r)
    doc = json.loads(
        matrix_text(
            resources=out,
            backend="kubernetes",
            name=name,
            images=images or [{"name": "py", "reference": "python:3.11", "for": ["cpu", "gpu", "npu"]}],
            layers=layers
            or {
                "discovery": {"timeout": "20s"},
                "scheduling": {"timeout": "20s"},
                "startup": {"timeout": "30s"},
                "model": {"timeout": "2m"},
            },
        )
    )
    doc["spec"]["target"] = {"backend": "kubernetes", "namespace": namespace, **(target or {})}
    return json.dumps(doc, indent=1)


def keep_status(core: client.CoreV1Api, name: str, capacity: dict[str, str], allocatable: dict[str, str],
                deadline: float) -> None:
    """Patch node ``name``'s capacity and allocatable again until the node says ours (until ``deadline``,
    monotonic): KWOK's node-initialize stage may write its default status (1k CPUs) over a patch made when it
    read the node before it (seen in CI: the test's 32 CPUs came back as 1000)."""
    want = {"capacity": capacity, "allocatable": allocatable}
    while True:
        status = core.read_node(name).status
        got = {"capacity": {k: (status.capacity or {}).get(k) for k in capacity},  # type: ignore[union-attr]
               "allocatable": {k: (status.allocatable or {}).get(k) for k in allocatable}}  # type: ignore[union-attr]
        if got == want:
            return
        assert time.monotonic() < deadline, f"node {name} status {got}, not {want}"
        core.patch_node_status(name, {"status": want})
        time.sleep(0.3)


def schedulable(node: Any) -> bool:
    """A node (kubernetes client V1Node) is Ready=True and carries no ``node.kubernetes.io/*`` taint:
    the node lifecycle controller taints every new node not-ready until it has seen it Ready, and a
    pod scheduled in between fails with an untolerated taint."""
    ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
    return ready and not any(t.key.startswith("node.kubernetes.io/") for t in node.spec.taints or [])
