"""deploy/rbac.yaml is enough for all five layers, and a missing verb is named (real RBAC, real 403).

The harness runs as the manifest's ServiceAccount through a kubeconfig holding its token
(TokenRequest API); the manifest's namespace and cluster-scoped names are made unique per test.
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubekit import SESSION, kube_matrix
from kubernetes import utils
from support import REPO, evidence_of

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def install_rbac(cluster: Cluster, namespace: str, drop: tuple[str, str] | None = None,
                 extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Apply deploy/rbac.yaml (and the optional ``extra`` files of deploy/) into ``namespace`` (minus verb
    ``drop[1]`` on resource ``drop[0]``); return the ServiceAccount's kubeconfig as a dict."""
    docs = [d for name in ("rbac.yaml", *extra) for d in yaml.safe_load_all((REPO / "deploy" / name).read_text())
            if d]
    tag = uuid.uuid4().hex[:5]
    for doc in docs:
        doc = copy.deepcopy(doc)
        meta = doc["metadata"]
        if "namespace" in meta:
            meta["namespace"] = namespace
        else:  # cluster-scoped: unique name, labelled for the session's cleanup (conftest)
            meta["name"] = f"{meta['name']}-{tag}"
            meta.setdefault("labels", {})[SESSION] = cluster.suffix
        for subject in doc.get("subjects", []):
            subject["namespace"] = namespace
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{tag}"
        for rule in doc.get("rules", []):
            if drop and drop[0] in rule["resources"]:
                rule["verbs"] = [v for v in rule["verbs"] if v != drop[1]]
        utils.create_from_dict(cluster.api, doc)  # type: ignore[no-untyped-call]
    answer: Any = cluster.core.create_namespaced_service_account_token(
        "pytest-hetero", namespace, {"spec": {"expirationSeconds": 3600}}  # type: ignore[arg-type]  # a manifest dict, sent as it is
    )
    token = answer.status.token  # (the client's models make every field optional)
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [
            {
                "name": "sa",
                "context": {"cluster": admin["clusters"][0]["name"], "user": "sa", "namespace": namespace},
            }
        ],
        "current-context": "sa",
    }


def run_as(
    pytester: pytest.Pytester,
    cluster: Cluster,
    run_id: str,
    kubeconfig: dict[str, Any],
    namespace: str,
    select: str | None = None,
) -> dict[str, dict[str, Any]]:
    path = pytester.path / "sa.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    pytester.makefile(
        ".matrix.yaml",
        k=kube_matrix(
            cluster.suffix,
            namespace,
            [{"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"}],
            target={"kubeconfig": str(path)},
        ),
    )
    pytester.runpytest(
        "-p", "no:cacheprovider", "--hetero-run-id", run_id, *(["-k", select] if select else [])
    )
    return {i["nodeid"].split("::", 1)[1]: i for i in evidence_of(pytester)["items"]}


def test_least_privilege_is_enough_for_five_layers(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    ns = cluster.new_namespace("hetero-rbac")
    got = run_as(pytester, cluster, run_id, install_rbac(cluster, ns), ns)
    assert {k: v["status"] for k, v in got.items()} == {
        "cpu::discovery": "passed",
        "cpu::py::scheduling": "passed",
        "cpu::py::startup": "passed",
        "cpu::py::digits-logreg@digits-test::model": "passed",
        "cpu::py::digits-logreg@digits-test::business": "passed",
    }
    # no cluster-wide pod list in the least privilege: the capacity view says so, never 0
    view, requested = capacity_view(got["cpu::discovery"])
    assert view["unavailable"] == "list pods in all namespaces: HTTP 403 Forbidden" and set(requested) == {None}


def capacity_view(item: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """A discovery item's ``capacity_view`` and each node's ``requested_by_pods``."""
    [snap] = [r["data"] for r in item["records"] if r["kind"] == "discovery.snapshot" and "nodes" in r["data"]]
    return snap["capacity_view"], [n["requested_by_pods"] for n in snap["nodes"]]


def test_the_optional_capacity_role_lets_discovery_read_what_the_pods_request(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    ns = cluster.new_namespace("hetero-rbac")
    got = run_as(pytester, cluster, run_id, install_rbac(cluster, ns, extra=("rbac-capacity.yaml",)), ns,
                 select="discovery")
    view, requested = capacity_view(got["cpu::discovery"])
    assert view["unavailable"] is None and all(isinstance(r, dict) for r in requested) and requested


def test_missing_verb_is_named(pytester: pytest.Pytester, cluster: Cluster, run_id: str) -> None:
    ns = cluster.new_namespace("hetero-rbac")
    got = run_as(
        pytester, cluster, run_id, install_rbac(cluster, ns, drop=("pods", "create")), ns, select="scheduling"
    )
    item = got["cpu::py::scheduling"]
    assert (item["status"], item["failure"]["category"], item["failure"]["owner"]) == (
        "failed",
        "forbidden_rbac",
        "platform",
    )
    assert (
        f"system:serviceaccount:{ns}:pytest-hetero may not 'create' pods (API group core) in {ns}"
        in item["failure"]["message"]
    )
    [reason] = next(r["data"] for r in item["records"] if r["kind"] == "scheduling.pending")["reasons"]
    assert (
        reason["source"],
        reason["code"],
        reason["resource"],
        reason["detail"]["verb"],
        reason["detail"]["serviceaccount"],
    ) == ("apiserver", "forbidden_rbac", "pods", "create", f"{ns}/pytest-hetero")
