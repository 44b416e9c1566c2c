"""Network and data boundaries on the real node (kubelet, containerd, the bridge CNI, the plane's
scheduler, PV controller and RBAC): a tenant's pod must not reach another tenant's model service or an
address outside its allowed egress, nor mount the other's claim, read its Secret or pull with its pull
Secret. Each probe passes only on the cluster's own refusal, whose words are kept.

The bridge CNI enforces no NetworkPolicy; the :func:`enforcer` fixture starts a real enforcer for the
network tests only and stops it afterwards: kube-network-policies (tests/infra/netpol.sh) where the kernel
has the nftables queue statement, else kube-router's firewall alone (tests/infra/kuberouter.sh: iptables
and ipsets; v2.1.0, test plane only, see its header's security note), whose chains and ipsets the stop
removes. Where neither can run (the fixture keeps their own errors), a namespace with policies must fail
as "declared but not enforced", never pass.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from realkit import PYTHON, data, failure, real_matrix, run
from support import REPO

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster

pytestmark = pytest.mark.usefixtures("outside_inputs")

NETPOL_SH = REPO / "tests" / "infra" / "netpol.sh"
KUBEROUTER_SH = REPO / "tests" / "infra" / "kuberouter.sh"
ROLE = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["create", "get", "delete"]}]
LEAK = [*ROLE, {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
"""What tenant leaky is also granted in b's namespace: the misconfiguration the data probe must catch."""


@dataclass
class Enforcer:
    """The NetworkPolicy enforcer as the fixture found it: ``running`` (``name``: kube-network-policies or
    kube-router), else ``said`` (each one's own error)."""

    running: bool
    said: str
    name: str = ""


def _start(script: Path, env: dict[str, str]) -> tuple[bool, str]:
    got = subprocess.run(["bash", str(script), "start"], capture_output=True, text=True, timeout=1800, env=env,
                         check=False)
    said = [x for x in got.stderr.splitlines() if "ERROR" in x]
    return got.returncode == 0, said[-1] if said else got.stderr[-2000:]


@pytest.fixture(scope="module")
def enforcer(realnode: RealNodeCluster) -> Iterator[Enforcer]:
    """A NetworkPolicy enforcer on the real node for this module's tests only (built on first use, cached
    under ~/.cache/pytest-hetero): kube-network-policies, or where it cannot program its nftables rules (no
    nft_queue in the kernel) kube-router's firewall; stopped afterwards, kube-router's chains and ipsets
    removed (its stop fails naming any left), so no other test runs under it."""
    env = {**os.environ, "HETERO_CACHE": realnode.cache}
    started: list[Path] = []
    try:
        running, said = _start(NETPOL_SH, env)
        found = Enforcer(running, said, "kube-network-policies" if running else "")
        if running:
            started.append(NETPOL_SH)
        elif "nftables" in said:  # the kernel refuses its rules: the iptables/ipset enforcer instead
            started.append(KUBEROUTER_SH)
            running, also = _start(KUBEROUTER_SH, env)
            found = Enforcer(running, said if running else f"{said}; {also}", "kube-router" if running else "")
        yield found
    finally:
        for script in started:
            subprocess.run(["bash", str(script), "stop"], capture_output=True, text=True, timeout=120, env=env,
                           check=True)
        left = subprocess.run(["bash", str(KUBEROUTER_SH), "leftovers"], capture_output=True, text=True,
                              timeout=60, env=env, check=True).stdout
        assert left == "", f"kube-router's rules left on the host: {left}"


def _on_node(realnode: RealNodeCluster, spec: dict[str, Any]) -> dict[str, Any]:
    return {**spec, "nodeSelector": realnode.info.node_selector, "tolerations": [realnode.info.toleration]}


def _listener(realnode: RealNodeCluster, ns: str, name: str, port: int) -> dict[str, Any]:
    """A pod serving HTTP on ``port`` (the plain Python image), ready once the port accepts."""
    return {"metadata": {"name": name, "labels": {"app": name}}, "spec": _on_node(realnode, {
        "terminationGracePeriodSeconds": 0, "containers": [{
            "name": "serve", "image": PYTHON, "imagePullPolicy": "Never",
            "command": ["python3", "-m", "http.server", str(port)],
            "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1},
            "resources": {"requests": {"cpu": "10m"}}}]})}


def _ready_ip(core: client.CoreV1Api, ns: str, name: str) -> str:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        pod: Any = core.read_namespaced_pod(name, ns)
        ready = [c for c in (pod.status.conditions or []) if c.type == "Ready" and c.status == "True"]
        if ready and pod.status.pod_ip:
            return str(pod.status.pod_ip)
        time.sleep(0.5)
    raise AssertionError(f"{ns}/{name} not ready in 90 s: {pod.status}")


@pytest.fixture(scope="module")
def estate(realnode: RealNodeCluster, realnode_images: dict[str, str]) -> Iterator[dict[str, Any]]:
    """Pod-to-pod forwarding on the node's bridge (``netpol.sh forward``: Docker's FORWARD policy drops it
    otherwise). Tenants a, b and leaky (ServiceAccount ``tenant``, a Role on pods in their own namespace; leaky's
    ServiceAccount also bound in b's namespace to pods and ``get secrets``: the misconfiguration; each may
    create claims in its namespace), the
    gate's namespace. Tenant b's model service (pod ``model`` on 8080 behind Service ``model``), its claim
    ``datasets`` bound to a hostPath PersistentVolume, its Secret ``hub-token`` and pull Secret
    ``registry-b``; a listener ``outside`` on 8081 in the gate's namespace stands for an address outside
    the tenants' allowed egress."""
    subprocess.run(["bash", str(NETPOL_SH), "forward"], capture_output=True, text=True, timeout=60, check=True)
    core, rbac = realnode.core, client.RbacAuthorizationV1Api(realnode.api)
    ns = {t: realnode.new_namespace(f"bnd-{t}") for t in ("a", "b", "leaky", "gate")}
    pv = f"bnd-datasets-{uuid.uuid4().hex[:6]}"
    try:
        for t in ("a", "b", "leaky"):
            core.create_namespaced_service_account(ns[t], {"metadata": {"name": "tenant"}})  # type: ignore[arg-type]  # a manifest dict, sent as it is
        for t, role, who in (("a", ROLE, "a"), ("b", ROLE, "b"), ("leaky", ROLE, "leaky"), ("b", LEAK, "leaky")):
            name = f"tenant-{who}"
            rbac.create_namespaced_role(ns[t], {"metadata": {"name": name}, "rules": role})  # type: ignore[arg-type]  # a manifest dict, sent as it is
            rbac.create_namespaced_role_binding(ns[t], {  # type: ignore[arg-type]  # a manifest dict, sent as it is
                "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                        "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": ns[who]}]})
        core.create_namespaced_pod(ns["b"], _listener(realnode, ns["b"], "model", 8080))  # type: ignore[arg-type]  # a manifest dict, sent as it is
        core.create_namespaced_service(ns["b"], {"metadata": {"name": "model"}, "spec": {  # type: ignore[arg-type]  # a manifest dict, sent as it is
            "selector": {"app": "model"}, "ports": [{"port": 8080, "targetPort": 8080}]}})
        core.create_namespaced_pod(ns["gate"], _listener(realnode, ns["gate"], "outside", 8081))  # type: ignore[arg-type]  # a manifest dict, sent as it is
        core.create_persistent_volume({"metadata": {"name": pv}, "spec": {  # type: ignore[arg-type]  # a manifest dict, sent as it is
            "capacity": {"storage": "1Mi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"/tmp/hetero-realnode/{pv}", "type": "DirectoryOrCreate"},
            "claimRef": {"namespace": ns["b"], "name": "datasets"}}})
        core.create_namespaced_persistent_volume_claim(ns["b"], {"metadata": {"name": "datasets"}, "spec": {  # type: ignore[arg-type]  # a manifest dict, sent as it is
            "accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
            "resources": {"requests": {"storage": "1Mi"}}}})
        core.create_namespaced_secret(ns["b"], {"metadata": {"name": "hub-token"},  # type: ignore[arg-type]  # a manifest dict, sent as it is
                                                "stringData": {"token": "b-only"}})
        core.create_namespaced_secret(ns["b"], {"metadata": {"name": "registry-b"}, "type": "kubernetes.io/dockerconfigjson",  # type: ignore[arg-type]  # a manifest dict, sent as it is
                                                "stringData": {".dockerconfigjson": json.dumps(
                                                    {"auths": {"registry.b.example": {"auth": "Yjpi"}}})}})
        made = {"ns": ns, "pv": pv, "model_ip": _ready_ip(core, ns["b"], "model"),
                "outside_ip": _ready_ip(core, ns["gate"], "outside")}
        deadline = time.monotonic() + 60
        while core.read_namespaced_persistent_volume_claim("datasets", ns["b"]).status.phase != "Bound":  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "claim b/datasets not bound in 60 s"
            time.sleep(0.5)
        yield made
    finally:
        for name in ns.values():
            core.delete_namespace(name)
        try:
            core.delete_persistent_volume(pv)
        except ApiException as exc:
            if exc.status != 404:
                raise
        subprocess.run(["rm", "-rf", f"/tmp/hetero-realnode/{pv}"], check=False)


def _matrix(realnode: RealNodeCluster, made: dict[str, Any], probes: list[dict[str, Any]]) -> str:
    resource = {"name": "node", "type": "cpu", "requests": {"cpu": "20m"}}
    doc = json.loads(real_matrix(realnode.info, made["ns"]["gate"], [resource],
                                 images=[{"name": "py", "reference": PYTHON, "for": ["cpu"]}],
                                 layers={"scheduling": {"timeout": "40s"}}, framework=False))
    doc["spec"]["governance"] = {"tenants": [{"name": t, "namespace": made["ns"][t], "service_account": "tenant"}
                                             for t in ("a", "b", "leaky")], "probes": probes}
    return json.dumps(doc, indent=1)


def _attempts(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [r["data"] for r in item["records"] if r["kind"] == "governance.attempt"]


def _by_role(item: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["role"]: a for a in _attempts(item)}


def _clean(item: dict[str, Any]) -> None:
    cleanup = data(item, "governance.cleanup")
    assert cleanup["leftovers"] == [] and all(o["gone"] for o in cleanup["objects"]), cleanup


def _network_probe(made: dict[str, Any]) -> dict[str, Any]:
    return {"name": "a-not-to-b", "kind": "network-isolation", "resource": "node", "as": "a", "target": "b",
            "services": ["model"], "egress": [f"{made['outside_ip']}:8081"]}


def test_without_a_networkpolicy_the_tenants_pod_reaches_the_other_tenants_model_and_the_probe_fails(
    pytester: pytest.Pytester, realnode: RealNodeCluster, estate: dict[str, Any], enforcer: Enforcer
) -> None:
    """No NetworkPolicy anywhere, the enforcer running where one can: tenant a's pod connects to b's model
    pod and to the outside listener, each also reached by its control; the probe fails, owner platform,
    saying no policy isolates them (the enforcer lets through what no policy isolates).
    The Service's ClusterIP is not proven: this plane has no kube-proxy, so its control times out too."""
    got = run(pytester, _matrix(realnode, estate, [_network_probe(estate)]), "n" + uuid.uuid4().hex[:9],
              "-k", "governance")
    item = got["node::governance::a-not-to-b::scheduling"]
    assert failure(item) == ("failed", "governance_not_enforced", "platform"), item.get("failure")
    ns, model = estate["ns"], f"{estate['model_ip']}:8080"
    assert item["failure"]["message"] == (
        f"tenant a's pod connected to {model} (pod {ns['b']}/model behind Service model) on node "
        f"{realnode.info.node}: no NetworkPolicy isolates it (none of the tenant's namespace selects its pod for "
        "Egress, none of the target's selects the target pod for Ingress)")
    tried = _by_role(item)
    assert set(tried) == {"reach-target-service", "reach-target-pod", "reach-egress"}
    pod, egress = tried["reach-target-pod"], tried["reach-egress"]
    assert (pod["outcome"], pod["message"], pod["facts"]["policies"]) == ("allowed", "connected",
                                                                          {"egress": [], "ingress": [], "allowing": []})
    assert pod["identity"] == f"system:serviceaccount:{ns['a']}:tenant"
    assert (pod["facts"]["control"]["from_namespace"], pod["facts"]["control"]["outcome"]) == (ns["b"], "connected")
    assert (egress["outcome"], egress["facts"]["address"]) == ("allowed", f"{estate['outside_ip']}:8081")
    assert (egress["facts"]["control"]["from_namespace"], egress["facts"]["control"]["outcome"]) == (
        ns["gate"], "connected")
    service = tried["reach-target-service"]
    if _upstream_accepts_anything():  # the ClusterIP "answers": the host's own network took the connection
        assert (service["outcome"], service["facts"]["control"]["outcome"]) == ("allowed", "connected"), service
    else:
        assert service["outcome"] == "not-attempted", service
        assert service["message"].endswith("(timeout: timed out after 3 s): a refusal proves nothing"), service
    _clean(item)


def _upstream_accepts_anything() -> bool:
    """Whether the network outside this host completes a TCP handshake with an address nobody serves
    (TEST-NET-3, RFC 5737), as a transparent egress proxy does: then a ClusterIP on this plane, which has no
    service proxy, connects as well (to that proxy, not to the Service) and its control too."""
    try:
        with socket.create_connection(("203.0.113.254", 8080), timeout=3):
            return True
    except OSError:
        return False


def _policies(realnode: RealNodeCluster, ns: dict[str, str]) -> None:
    """b accepts only its own namespace's pods; a may send only to its own namespace's pods."""
    net = client.NetworkingV1Api(realnode.api)
    net.create_namespaced_network_policy(ns["b"], {"metadata": {"name": "b-own-namespace-only"}, "spec": {  # type: ignore[arg-type]  # a manifest dict, sent as it is
        "podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]}})
    net.create_namespaced_network_policy(ns["a"], {"metadata": {"name": "a-egress-own-namespace"}, "spec": {  # type: ignore[arg-type]  # a manifest dict, sent as it is
        "podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{"podSelector": {}}]}]}})


def test_with_networkpolicies_the_probe_passes_where_enforced_and_fails_as_not_enforced_where_not(
    pytester: pytest.Pytester, realnode: RealNodeCluster, estate: dict[str, Any], enforcer: Enforcer
) -> None:
    """b admits only its own pods, a sends only to its own. With an enforcer running, a's connections are
    refused (kube-network-policies drops: timed out; kube-router rejects: connection refused), each refusal
    naming the policies that isolate the address. Where no enforcer can run, the same probe fails ``network_policy_not_enforced`` naming the policy that was
    declared and did not stop the traffic: never a pass."""
    ns = estate["ns"]
    _policies(realnode, ns)
    try:
        got = run(pytester, _matrix(realnode, estate, [_network_probe(estate)]), "n" + uuid.uuid4().hex[:9],
                  "-k", "governance")
    finally:
        net = client.NetworkingV1Api(realnode.api)
        net.delete_namespaced_network_policy("b-own-namespace-only", ns["b"])
        net.delete_namespaced_network_policy("a-egress-own-namespace", ns["a"])
    item = got["node::governance::a-not-to-b::scheduling"]
    tried = _by_role(item)
    pod, egress = tried["reach-target-pod"], tried["reach-egress"]
    assert pod["facts"]["policies"] == {"egress": [f"{ns['a']}/a-egress-own-namespace"],
                                        "ingress": [f"{ns['b']}/b-own-namespace-only"], "allowing": []}
    assert egress["facts"]["policies"]["egress"] == [f"{ns['a']}/a-egress-own-namespace"]
    assert pod["facts"]["control"]["outcome"] == egress["facts"]["control"]["outcome"] == "connected"
    if enforcer.running:
        assert item["status"] == "passed", item.get("failure")
        # kube-network-policies drops (the probe times out); kube-router REJECTs (icmp-port-unreachable)
        said, code = {"kube-network-policies": ("timed out after 3 s", "network_timeout"),
                      "kube-router": ("[Errno 111] Connection refused", "network_refused")}[enforcer.name]
        assert (pod["outcome"], pod["message"], pod["reasons"][0]["code"]) == ("refused", said, code), pod
        assert (egress["outcome"], egress["message"], egress["reasons"][0]["code"]) == ("refused", said, code), egress
        refused = {r["data"]["role"]: r["data"] for r in item["records"] if r["kind"] == "governance.refused"}
        assert refused["reach-target-pod"]["by"] == (f"NetworkPolicy {ns['a']}/a-egress-own-namespace, "
                                                     f"{ns['b']}/b-own-namespace-only")
        assert refused["reach-egress"]["by"] == f"NetworkPolicy {ns['a']}/a-egress-own-namespace"
    else:  # the finding, with the enforcer's own words: declared policies, traffic through
        assert "nftables" in enforcer.said, enforcer.said
        assert failure(item) == ("failed", "network_policy_not_enforced", "platform"), item.get("failure")
        assert item["failure"]["message"] == (
            f"tenant a's pod connected to {estate['model_ip']}:8080 (pod {ns['b']}/model behind Service model) on "
            f"node {realnode.info.node} although NetworkPolicy {ns['a']}/a-egress-own-namespace, "
            f"{ns['b']}/b-own-namespace-only isolates it: the policy is declared but not enforced there (the "
            "network plugin does not enforce NetworkPolicy, or its policy agent is not running on that node)")
        assert (pod["outcome"], egress["outcome"]) == ("allowed", "allowed")
    _clean(item)


def test_a_policy_that_selects_the_target_but_admits_every_peer_is_not_called_declared_but_not_enforced(
    pytester: pytest.Pytester, realnode: RealNodeCluster, estate: dict[str, Any]
) -> None:
    """Tenant b's NetworkPolicy ``b-deny-others`` selects its model pod for Ingress with a rule ``{}``: it admits
    every peer, so a's connection is allowed by it (any enforcer lets it through). The probe fails
    ``governance_not_enforced`` naming the policy that admits it, never ``network_policy_not_enforced``: that
    would blame the network plugin for a policy that asks for the traffic, and a refusal elsewhere would be
    credited to it."""
    ns = estate["ns"]
    net = client.NetworkingV1Api(realnode.api)
    net.create_namespaced_network_policy(ns["b"], {"metadata": {"name": "b-deny-others"}, "spec": {  # type: ignore[arg-type]  # a manifest dict, sent as it is
        "podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}})
    try:
        got = run(pytester, _matrix(realnode, estate, [_network_probe(estate)]), "n" + uuid.uuid4().hex[:9],
                  "-k", "governance")
    finally:
        net.delete_namespaced_network_policy("b-deny-others", ns["b"])
    item = got["node::governance::a-not-to-b::scheduling"]
    assert failure(item) == ("failed", "governance_not_enforced", "platform"), item.get("failure")
    assert item["failure"]["message"] == (
        f"tenant a's pod connected to {estate['model_ip']}:8080 (pod {ns['b']}/model behind Service model) on node "
        f"{realnode.info.node}: no NetworkPolicy isolates it (NetworkPolicy {ns['b']}/b-deny-others admits every "
        "peer on that port, and policies add up)")
    pod = _by_role(item)["reach-target-pod"]
    assert pod["facts"]["policies"] == {"egress": [], "ingress": [], "allowing": [f"{ns['b']}/b-deny-others"]}
    _clean(item)


def test_data_probes_are_refused_in_the_clusters_own_words_and_a_leaky_binding_fails(
    pytester: pytest.Pytester, realnode: RealNodeCluster, estate: dict[str, Any]
) -> None:
    """Tenant a cannot mount b's claim (RBAC in b's namespace; in its own the scheduler finds no such
    claim, and a claim of its own naming b's volume stays Pending), read b's Secret, or pull with b's pull Secret (RBAC; in its own namespace the kubelet cannot
    retrieve it). Tenant leaky, also bound in b's namespace, mounts the claim: the probe fails, owner
    platform, and its attempt to read the Secret got the keys."""
    probes: list[dict[str, Any]] = [
        {"name": name, "kind": "data-isolation", "resource": "node", "as": who, "target": "b",
         "claims": ["datasets"], "secrets": ["hub-token"], "pull_secrets": ["registry-b"]}
        for name, who in (("a-not-b-data", "a"), ("leaky-not-b-data", "leaky"))]
    got = run(pytester, _matrix(realnode, estate, probes), "d" + uuid.uuid4().hex[:9], "-k", "governance")
    ns = estate["ns"]
    item = got["node::governance::a-not-b-data::scheduling"]
    assert item["status"] == "passed", item.get("failure")
    tried = _by_role(item)
    user = f"system:serviceaccount:{ns['a']}:tenant"
    assert set(tried) == {"mount-target-claim", "bind-target-volume", "mount-target-claim-by-name",
                          "read-target-secret", "pull-with-target-secret", "pull-with-target-secret-by-name"}
    for role in ("mount-target-claim", "pull-with-target-secret"):
        assert (tried[role]["outcome"], tried[role]["facts"]["http_status"]) == ("refused", 403), tried[role]
        assert tried[role]["message"] == (f'pods is forbidden: User "{user}" cannot create resource "pods" in API '
                                          f'group "" in the namespace "{ns["b"]}"')
    secret = tried["read-target-secret"]
    assert (secret["outcome"], secret["reasons"][0]["code"]) == ("refused", "forbidden_rbac")
    assert secret["message"] == (f'secrets "hub-token" is forbidden: User "{user}" cannot get resource "secrets" in '
                                 f'API group "" in the namespace "{ns["b"]}"')
    bind = tried["bind-target-volume"]  # a's own claim naming b's volume: the PV controller keeps it Pending
    assert (bind["outcome"], bind["reasons"][0]["code"], bind["facts"]["volume"]) == (
        "pending", "volume_binding", estate["pv"]), bind
    assert bind["message"] == f'volume "{estate["pv"]}" already bound to a different claim.'
    by_name = tried["mount-target-claim-by-name"]
    assert (by_name["outcome"], by_name["reasons"][0]["code"]) == ("pending", "volume_binding"), by_name
    assert 'persistentvolumeclaim "datasets" not found' in by_name["message"], by_name
    pull = tried["pull-with-target-secret-by-name"]
    assert (pull["outcome"], pull["reasons"][0]["code"], pull["facts"]["node"]) == (
        "refused", "pull_secret_unavailable", realnode.info.node), pull
    assert pull["message"] == ("Unable to retrieve some image pull secrets (registry-b); attempting to pull the "
                               "image may not succeed.")
    refused = [r["data"]["role"] for r in item["records"] if r["kind"] == "governance.refused"]
    assert sorted(refused) == sorted(tried)
    _clean(item)

    leak = got["node::governance::leaky-not-b-data::scheduling"]
    assert failure(leak) == ("failed", "governance_not_enforced", "platform"), leak.get("failure")
    assert leak["failure"]["message"].startswith(
        "tenant leaky could mount tenant b's claim datasets (create Pod hetero-gov-leaky-not-b-data-claim-")
    read = _by_role(leak)["read-target-secret"]
    assert (read["outcome"], read["facts"]["returned"]) == ("allowed", ["token"])  # key names only, no value
    _clean(leak)


def test_a_misspelt_claim_is_a_configuration_error_naming_the_field_not_a_pass(
    pytester: pytest.Pytester, realnode: RealNodeCluster, estate: dict[str, Any]
) -> None:
    """``claims: [dataset]`` where b's claim is ``datasets``: RBAC still refuses a's pod in b's namespace and a's own
    pod finds no such claim, but b's volume was never tried (the claim does not exist), so the data boundary of
    b's real claim is untested. Error ``configuration`` naming ``claims``, never a pass."""
    probe = {"name": "a-not-b-data", "kind": "data-isolation", "resource": "node", "as": "a", "target": "b",
             "claims": ["dataset"], "secrets": ["hub-token"], "pull_secrets": ["registry-b"]}
    got = run(pytester, _matrix(realnode, estate, [probe]), "d" + uuid.uuid4().hex[:9], "-k", "governance")
    item = got["node::governance::a-not-b-data::scheduling"]
    ns = estate["ns"]
    assert failure(item) == ("error", "configuration", "platform"), item.get("failure")
    assert item["failure"]["message"] == (
        f"probe a-not-b-data: claim {ns['b']}/dataset cannot be read: HTTP 404 (it does not exist): "
        "spec.governance.probes[a-not-b-data].claims names what tenant b does not have, so that part of the boundary "
        "was not tested; correct the name")
    assert _by_role(item)["bind-target-volume"]["facts"] == {"claim": "dataset", "absent": "claims"}
    _clean(item)


def test_deploy_rbac_governance_is_enough_for_the_boundary_probes_as_the_harness_service_account(
    pytester: pytest.Pytester, realnode: RealNodeCluster, estate: dict[str, Any]
) -> None:
    """The harness as ServiceAccount pytest-hetero with deploy/rbac.yaml + deploy/rbac-governance.yaml only
    (bound in tenants a's and b's namespaces): it reads b's Services, EndpointSlices and NetworkPolicies and
    a's claims, runs the controls and cleans up; the probes judge as with the admin's credentials."""
    from test_realnode_governance import _least_privilege  # the same setup as the other probes' test

    kubeconfig, cluster_scoped = _least_privilege(realnode, estate)
    try:
        path = pytester.path / "sa.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig))
        probes = [_network_probe(estate),
                  {"name": "a-not-b-data", "kind": "data-isolation", "resource": "node", "as": "a", "target": "b",
                   "claims": ["datasets"], "secrets": ["hub-token"], "pull_secrets": ["registry-b"]}]
        doc = json.loads(_matrix(realnode, estate, probes))
        doc["spec"]["target"]["kubeconfig"] = str(path)
        got = run(pytester, json.dumps(doc), "r" + uuid.uuid4().hex[:9], "-k", "governance")
        harness = f"system:serviceaccount:{estate['ns']['gate']}:pytest-hetero"
        net = got["node::governance::a-not-to-b::scheduling"]  # no policy: traffic through, as before
        assert failure(net) == ("failed", "governance_not_enforced", "platform"), net.get("failure")
        assert _by_role(net)["reach-target-pod"]["facts"]["control"]["outcome"] == "connected"
        assert data(net, "governance.identity")["observer"] == harness
        _clean(net)
        item = got["node::governance::a-not-b-data::scheduling"]
        assert item["status"] == "passed", item.get("failure")
        assert data(item, "governance.identity")["observer"] == harness
        _clean(item)
    finally:
        rbac = client.RbacAuthorizationV1Api(realnode.api)
        for doc in cluster_scoped:
            delete = (rbac.delete_cluster_role if doc["kind"] == "ClusterRole" else rbac.delete_cluster_role_binding)
            delete(doc["metadata"]["name"])
