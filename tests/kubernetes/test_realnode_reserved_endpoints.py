"""The reserved-inference load follows the Service's endpoints as kube-proxy does: only EndpointSlices the
endpoint-slice controller manages. A hand-made EndpointSlice carrying the Service's name label (anyone who may
create EndpointSlices in the namespace: the tenant the probe acts as) would otherwise have the gate time a server
of its choosing instead of the serving replicas. Real parts: apiserver, the endpoint-slice controller, kubelet,
containerd, the bridge CNI's pod IPs."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kubernetes import client
from realkit import PYTHON

from pytest_hetero.backends.kubernetes.reserved import ready_endpoints

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster


def test_a_hand_made_endpointslice_with_the_services_name_is_not_sent_the_load(
        realnode: RealNodeCluster, realnode_images: dict[str, str]) -> None:
    ns = realnode.new_namespace("reserve-eps")
    core, disc = realnode.core, client.DiscoveryV1Api(realnode.api)
    try:
        core.create_namespaced_pod(ns, {"metadata": {"name": "serve", "labels": {"app": "serve"}}, "spec": {  # type: ignore[arg-type]  # a manifest dict
            "nodeSelector": realnode.info.node_selector, "tolerations": [realnode.info.toleration],
            "terminationGracePeriodSeconds": 0, "containers": [{
                "name": "serve", "image": PYTHON, "imagePullPolicy": "Never",
                "command": ["python3", "-m", "http.server", "8080"],
                "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                "resources": {"requests": {"cpu": "10m"}}}]}})
        core.create_namespaced_service(ns, {"metadata": {"name": "model"}, "spec": {  # type: ignore[arg-type]  # a manifest dict
            "selector": {"app": "serve"}, "ports": [{"name": "http", "port": 8080, "targetPort": 8080}]}})
        disc.create_namespaced_endpoint_slice(ns, {  # type: ignore[arg-type]  # a manifest dict
            "metadata": {"name": "model-forged", "labels": {"kubernetes.io/service-name": "model"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["192.0.2.10"], "conditions": {"ready": True},
                           "targetRef": {"kind": "Pod", "name": "fast-fake", "namespace": ns}}]})
        deadline, got = time.monotonic() + 90, []
        pod: Any = None
        while time.monotonic() < deadline:
            got = ready_endpoints(realnode.api, ns, "model")
            if any(name == "serve" for name, _ in got):
                break
            time.sleep(0.5)
        pod = core.read_namespaced_pod("serve", ns)
        assert got == [("serve", f"http://{pod.status.pod_ip}:8080")], got
    finally:
        core.delete_namespace(ns)
