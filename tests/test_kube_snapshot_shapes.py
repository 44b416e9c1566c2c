"""The cluster snapshot's sections from listed JSON, without a cluster: each listed item read once into the declared
shape of what the snapshot keeps (:mod:`pytest_hetero.backends.kubernetes.snapshot`); the real cluster's are in
tests/kubernetes/test_kube_drift.py."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hetero.backends.kubernetes.snapshot import Lister, _daemonsets, _kueue, _section, parse_object

LISTED: dict[str, list[Any]] = {
    "/apis/node.k8s.io/v1/runtimeclasses": [{"metadata": {"name": "nvidia"}, "handler": "nvidia"}],
    "/apis/scheduling.k8s.io/v1/priorityclasses": [
        {"metadata": {"name": "batch"}, "value": 100, "globalDefault": False},
        {"metadata": {"name": "serve"}, "value": 1000, "preemptionPolicy": "Never", "description": "x"}],
    "/apis/kueue.x-k8s.io/v1beta2/resourceflavors": [{"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"a": "b"}}}],
    "/apis/kueue.x-k8s.io/v1beta2/clusterqueues": [{"metadata": {"name": "cq"}}],
    "/apis/kueue.x-k8s.io/v1beta2/localqueues": [{"metadata": {"name": "lq", "namespace": "gate"},
                                                  "spec": {"clusterQueue": "cq"}}],
    "/apis/apps/v1/daemonsets": [
        {"metadata": {"name": "nvidia-device-plugin", "namespace": "kube-system"},
         "spec": {"template": {"spec": {"containers": [{"name": "p", "image": "nvcr.io/plugin:1"}, {"name": "late"}]}}}},
        {"metadata": {"name": "kube-proxy", "namespace": "kube-system"},
         "spec": {"template": {"spec": {"containers": [{"name": "p", "image": "registry.k8s.io/kube-proxy:1"}]}}}}],
    "/api/v1/pods": [],
}


class _Listed(Lister):
    """A lister answering from :data:`LISTED` (404 for a path it does not hold, as an unserved API)."""

    def __init__(self) -> None:
        from kubernetes import client

        super().__init__(client.ApiClient())  # never called: get() answers

    def get(self, path: str, query: list[tuple[str, str]] | None = None) -> list[Any]:
        from kubernetes.client.exceptions import ApiException

        if path not in LISTED:
            raise ApiException(status=404)
        return LISTED[path]


def test_sections_keep_the_declared_fields_as_served() -> None:
    lister = _Listed()
    assert _section(lister, "/apis/node.k8s.io/v1/runtimeclasses",
                    lambda i: {"handler": i.handler, "scheduling": i.scheduling}) == {
        "nvidia": {"handler": "nvidia", "scheduling": None}}
    assert _section(lister, "/apis/scheduling.k8s.io/v1/priorityclasses",
                    lambda i: (i.value, i.preemption_policy, i.global_default)) == {
        "batch": (100, None, False), "serve": (1000, "Never", None)}
    assert _kueue(lister) == {"resourceflavors": {"h100": {"nodeLabels": {"a": "b"}}}, "clusterqueues": {"cq": {}},
                              "localqueues": {"gate/lq": {"clusterQueue": "cq"}}}
    assert _daemonsets(lister) == {"kube-system/nvidia-device-plugin": {"images": ["None", "nvcr.io/plugin:1"],
                                                                        "digests": []}}
    assert _section(lister, "/apis/none", lambda i: i.spec) == {"served": False}


def test_a_listed_item_without_a_name_or_with_a_spec_that_is_no_object_is_refused_by_path() -> None:
    """The apiserver always serves ``metadata.name`` and a ``spec`` object: a body that has neither is refused at
    the parse, a ValueError naming the field (before: a KeyError, or dict() of a list raising TypeError); a null
    ``spec`` reads as absent."""
    assert parse_object({"metadata": {"name": "q"}, "spec": None}).spec is None
    with pytest.raises(ValueError, match=r"`name` - at `\$\.metadata`"):
        parse_object({"metadata": {"namespace": "gate"}})
    with pytest.raises(ValueError, match=r"\$\.spec"):
        parse_object({"metadata": {"name": "q"}, "spec": ["x"]})


def test_a_listed_object_s_field_managers_are_kept_as_served() -> None:
    """``metadata.managedFields`` entries kept as served (absent or null: none); a cluster-scoped object has no
    namespace; a listed item without a name is refused naming the field."""
    from pytest_hetero.backends.kubernetes.managed import _entry

    field = {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1", "time": "2026-12-04T02:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:unschedulable": {}}}}
    node: Any = {"metadata": {"name": "n0", "managedFields": [field]}}
    quota: Any = {"metadata": {"name": "q", "namespace": "gate", "managedFields": None}}
    assert _entry(node, "nodes", "") == {"resource": "nodes", "apiGroup": "", "namespace": None, "name": "n0",
                                         "managedFields": [field]}
    assert _entry(quota, "resourcequotas", "")["managedFields"] == []
    nameless: Any = {"metadata": {"namespace": "gate"}}
    with pytest.raises(ValueError, match=r"`name` - at `\$\.metadata`"):
        _entry(nameless, "configmaps", "")
