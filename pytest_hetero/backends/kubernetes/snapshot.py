"""A snapshot of what a validation matrix depends on in a Kubernetes cluster (``--hetero-snapshot``).

One list call per kind, raw JSON (no typed deserialisation), reduced to the fields a run's outcome can
depend on — never times, resource versions or heartbeats, so two snapshots of an unchanged cluster
are equal:

* ``nodes``: name → ``{"labels", "taints": ["key=value:Effect"], "conditions": {type: status},
  "allocatable", "unschedulable"}`` (labels include GPU Feature Discovery, Ascend, driver/CUDA/CANN labels);
* ``daemonsets``: ``namespace/name`` → ``{"images": [...], "digests": [imageID of its pods]}`` for the
  device plugins and operators (name or image naming nvidia, gpu, ascend, npu, device-plugin, dcgm, hami);
* ``runtimeclasses`` (handler, scheduling), ``priorityclasses`` (value, preemptionPolicy, globalDefault);
* ``kueue``: ``resourceflavors``/``clusterqueues`` (name) and ``localqueues`` (``namespace/name``) → spec,
  through kueue.x-k8s.io v1beta2 then v1beta1 (whichever is served); ``volcano``: ``queues`` → spec;
* ``resourcequotas`` / ``limitranges`` of the target ``namespaces`` → spec.

A kind the cluster does not serve (404) is recorded as ``{"served": false}``; one the caller may not
list (403) as ``{"forbidden": "<message>"}`` — so an absent section is never taken for "unchanged".
Decides nothing; :mod:`pytest_hetero.status.drift` compares snapshots.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes.client import connect

DEVICE_WORDS = re.compile(r"nvidia|gpu|ascend|npu|device-plugin|dcgm|hami|mlu|dcu", re.IGNORECASE)
"""DaemonSets whose name or image matches are recorded (device plugins, GPU/NPU operators, exporters)."""
SNAPSHOT_SCHEMA = "pytest-hetero/cluster-snapshot/v1"


class Lister:
    """Raw list calls of one cluster (``api``: an ApiClient): each returns the decoded JSON ``items``."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    def get(self, path: str, query: list[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
        """GET ``path`` (an API list path) and return its ``items``. Raises ApiException."""
        response: Any = self.api.call_api(*self.api.param_serialize("GET", path, query_params=query or [],
                                                                    auth_settings=["BearerToken"]))
        data: bytes = response.read()
        if response.status >= 400:
            raise ApiException(status=response.status, reason=data.decode("utf-8", "replace")[:500])
        return list(json.loads(data).get("items") or [])

    def section(self, paths: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """Items of the first served path of ``paths``; ``(items, None)`` or ``([], {"served": False} |
        {"forbidden": message})``."""
        missing: dict[str, Any] = {"served": False}
        for path in paths:
            try:
                return self.get(path), None
            except ApiException as exc:
                if exc.status == 403:
                    return [], {"forbidden": str(exc.reason)}
                if exc.status != 404:
                    raise
        return [], missing


def _node(item: dict[str, Any]) -> dict[str, Any]:
    meta, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
    return {"labels": dict(meta.get("labels") or {}),
            "taints": sorted(f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}"
                             for t in spec.get("taints") or []),
            "conditions": {str(c.get("type")): str(c.get("status")) for c in status.get("conditions") or []},
            "allocatable": dict(status.get("allocatable") or {}), "unschedulable": bool(spec.get("unschedulable"))}


def _named(items: list[dict[str, Any]], keep: Any, namespaced: bool = False) -> dict[str, Any]:
    out = {}
    for item in items:
        meta = item.get("metadata") or {}
        name = f"{meta.get('namespace')}/{meta.get('name')}" if namespaced else str(meta.get("name"))
        out[name] = keep(item)
    return out


def _daemonsets(lister: Lister) -> dict[str, Any]:
    items, problem = lister.section(["/apis/apps/v1/daemonsets"])
    if problem:
        return problem
    out: dict[str, Any] = {}
    for ds in items:
        meta = ds.get("metadata") or {}
        containers = ((ds.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        images = sorted(str(c.get("image")) for c in containers)
        if DEVICE_WORDS.search(str(meta.get("name"))) or any(DEVICE_WORDS.search(i) for i in images):
            out[f"{meta.get('namespace')}/{meta.get('name')}"] = {"images": images, "digests": []}
    if out:
        pods, _ = lister.section(["/api/v1/pods"])
        for pod in pods:
            meta = pod.get("metadata") or {}
            owner = next((o.get("name") for o in meta.get("ownerReferences") or []
                          if o.get("kind") == "DaemonSet"), None)
            key = f"{meta.get('namespace')}/{owner}"
            if owner and key in out:
                ids = {str(s.get("imageID")) for s in (pod.get("status") or {}).get("containerStatuses") or []
                       if s.get("imageID")}
                out[key]["digests"] = sorted(set(out[key]["digests"]) | ids)
    return out


def _kueue(lister: Lister) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for plural, namespaced in (("resourceflavors", False), ("clusterqueues", False), ("localqueues", True)):
        items, problem = lister.section([f"/apis/kueue.x-k8s.io/{v}/{plural}" for v in ("v1beta2", "v1beta1")])
        out[plural] = problem or _named(items, lambda i: i.get("spec") or {}, namespaced)
    return out


def take_snapshot(api: client.ApiClient, namespaces: list[str]) -> dict[str, Any]:
    """The snapshot (module docstring) of the cluster ``api`` talks to, quotas/limits of ``namespaces``.
    Raises ApiException for anything but 403/404 on a list call."""
    lister = Lister(api)
    nodes, problem = lister.section(["/api/v1/nodes"])
    volcano, vproblem = lister.section(["/apis/scheduling.volcano.sh/v1beta1/queues"])
    sections: dict[str, Any] = {
        "schema": SNAPSHOT_SCHEMA,
        "nodes": problem or {str((n.get("metadata") or {}).get("name")): _node(n) for n in nodes},
        "daemonsets": _daemonsets(lister),
        "runtimeclasses": _section(lister, "/apis/node.k8s.io/v1/runtimeclasses",
                                   lambda i: {"handler": i.get("handler"), "scheduling": i.get("scheduling")}),
        "priorityclasses": _section(lister, "/apis/scheduling.k8s.io/v1/priorityclasses",
                                    lambda i: {k: i.get(k) for k in ("value", "preemptionPolicy", "globalDefault")}),
        "kueue": _kueue(lister),
        "volcano": {"queues": vproblem or _named(volcano, lambda i: i.get("spec") or {})},
        "resourcequotas": {}, "limitranges": {},
    }
    for ns in sorted(set(namespaces)):
        for kind in ("resourcequotas", "limitranges"):
            items, problem = lister.section([f"/api/v1/namespaces/{ns}/{kind}"])
            sections[kind].update({f"{ns}/*": problem} if problem else
                                  _named(items, lambda i: i.get("spec") or {}, namespaced=True))
    return sections


def _section(lister: Lister, path: str, keep: Any) -> dict[str, Any]:
    items, problem = lister.section([path])
    return problem or _named(items, keep)


def snapshot_of_target(target: dict[str, Any], context: str | None, namespaces: list[str]) -> dict[str, Any]:
    """:func:`take_snapshot` of a matrix target (``kubeconfig``/``context`` as the backend reads them).
    Raises ActionFailed for a bad target, ApiException for a failed list call."""
    api, namespace, _ = connect(target, context)
    return take_snapshot(api, [*namespaces, namespace])
