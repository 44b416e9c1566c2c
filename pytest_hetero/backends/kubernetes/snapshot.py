"""A snapshot of what a validation matrix depends on in a Kubernetes cluster (``--hetero-snapshot``).

One list call per kind, raw JSON (not the official client's models) read into the declared shape of what is
kept, reduced to the fields a run's outcome can depend on — never times, resource versions or heartbeats, so
two snapshots of an unchanged cluster are equal:

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes.client import connect
from pytest_hetero.backends.kubernetes.manifests import (
    ObjectList,
    ServedDaemonSet,
)
from pytest_hetero.backends.kubernetes.objects import Node, parse_node, parse_pod
from pytest_hetero.declared import resolve

T = TypeVar("T")

DEVICE_WORDS = re.compile(r"nvidia|gpu|ascend|npu|device-plugin|dcgm|hami|mlu|dcu", re.IGNORECASE)
"""DaemonSets whose name or image matches are recorded (device plugins, GPU/NPU operators, exporters)."""
SNAPSHOT_SCHEMA = "pytest-hetero/cluster-snapshot/v1"


class Problem(TypedDict, total=False):
    """Why a section is empty: ``{"served": False}`` (404) or ``{"forbidden": "<message>"}`` (403)."""

    served: bool
    forbidden: str


class Lister:
    """Raw list calls of one cluster (``api``: an ApiClient): :meth:`get` returns the decoded JSON ``items``,
    :meth:`section` parses each with the parser of the kind listed."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    def get(self, path: str, query: list[tuple[str, str]] | None = None) -> list[Any]:
        """GET ``path`` (an API list path) and return its ``items`` as ``json.loads`` decoded them (objects of
        the kind ``path`` lists, read through that kind's parser). Raises ApiException."""
        response: Any = self.api.call_api(*self.api.param_serialize("GET", path, query_params=query or [],
                                                                    auth_settings=["BearerToken"]))
        data: bytes = response.read()
        if response.status >= 400:
            raise ApiException(status=response.status, reason=data.decode("utf-8", "replace")[:500])
        listed: ObjectList[Any] = json.loads(data)
        return list(listed["items"])

    def section(self, paths: list[str], parse: Callable[[Any], T]) -> tuple[list[T], Problem | None]:
        """Items of the first served path of ``paths``, each as ``parse`` (the parser of the kind the paths
        list: :func:`.objects.parse_pod`, :func:`parse_object`…) makes it; ``(items, None)`` or ``([],
        {"served": False} | {"forbidden": message})``."""
        missing: Problem = {"served": False}
        for path in paths:
            try:
                return [parse(item) for item in self.get(path)], None
            except ApiException as exc:
                if exc.status == 403:
                    return [], {"forbidden": str(exc.reason)}
                if exc.status != 404:
                    raise
        return [], missing


class NodeEntry(TypedDict):
    """A node's entry of the ``nodes`` section (module docstring)."""

    labels: dict[str, str]
    taints: list[str]
    conditions: dict[str, str]
    allocatable: dict[str, str]
    unschedulable: bool


def _node(node: Node) -> NodeEntry:
    return {"labels": dict(node.labels),
            "taints": sorted(f"{t['key']}={t.get('value') or ''}:{t['effect']}" for t in node.taints),
            "conditions": {str(c.type): str(c.status) for c in node.conditions},
            "allocatable": dict(node.allocatable), "unschedulable": node.unschedulable}


class _Meta(msgspec.Struct, frozen=True, kw_only=True):
    """A listed object's ``metadata`` as the snapshot names it: ``name`` (always served) and ``namespace`` (None
    for a cluster-scoped object)."""

    name: str
    namespace: str | None = None


class Object(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Any listed object as the snapshot keeps it: its ``metadata`` name and namespace, its ``spec`` and the
    top-level ``handler``/``scheduling`` (RuntimeClass) and ``value``/``preemption_policy``/``global_default``
    (PriorityClass: ``preemptionPolicy``, ``globalDefault``) fields, each kept as served (never read field by
    field; None where absent)."""

    metadata: _Meta
    spec: dict[str, object] | None = None
    handler: object = None
    scheduling: object = None
    value: object = None
    preemption_policy: object = None
    global_default: object = None


def parse_object(raw: object) -> Object:
    """An :class:`Object` from a listed item's JSON, read once into its declared shape. ValueError
    (``msgspec.ValidationError``, naming the field's ``$.path``) without ``metadata.name``, or with a ``spec``
    that is no JSON object."""
    return msgspec.convert(raw, Object)


def _named(items: list[Object], keep: Callable[[Object], object], namespaced: bool = False
           ) -> dict[str, object]:
    out = {}
    for obj in items:
        name = f"{obj.metadata.namespace}/{obj.metadata.name}" if namespaced else obj.metadata.name
        out[name] = keep(obj)
    return out


@dataclass(frozen=True)
class DaemonSet:
    """A ``apps/v1`` DaemonSet: ``ref`` (``namespace/name``), ``name`` and the ``images`` of its pod
    template's containers (sorted; ``None`` text for a container without one: a template may leave the image
    to be set later)."""

    ref: str
    name: str
    images: list[str]


class _TemplateContainer(msgspec.Struct, frozen=True, kw_only=True):
    """A container of a pod template: its ``image`` (None where the template leaves it to be set later)."""

    image: str | None = None


class _TemplateSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A pod template's ``spec``: its ``containers`` (required by the API)."""

    containers: list[_TemplateContainer]


class _Template(msgspec.Struct, frozen=True, kw_only=True):
    """A controller's pod ``template``: its ``spec`` (always served)."""

    spec: _TemplateSpec


class _DaemonSetSpec(msgspec.Struct, frozen=True, kw_only=True):
    """An ``apps/v1`` DaemonSet's ``spec``: its pod ``template`` (required by the API)."""

    template: _Template


class _ServedDaemonSet(msgspec.Struct, frozen=True, kw_only=True):
    """An ``apps/v1`` DaemonSet as served (``metadata`` and ``spec`` always)."""

    metadata: _Meta
    spec: _DaemonSetSpec


def parse_daemonset(raw: ServedDaemonSet) -> DaemonSet:
    """A DaemonSet from its JSON, read once into its declared shape. ValueError (``msgspec.ValidationError``,
    naming the field's ``$.path``) without ``metadata.name`` or its template's ``containers``, or with a field not
    shaped as the API serves it."""
    served = msgspec.convert(raw, _ServedDaemonSet)
    meta = served.metadata
    return DaemonSet(ref=f"{meta.namespace}/{meta.name}", name=meta.name,
                     images=sorted(str(c.image) for c in served.spec.template.spec.containers))


class DaemonSetEntry(TypedDict):
    """A device DaemonSet's entry of the ``daemonsets`` section: its images and its pods' image digests."""

    images: list[str]
    digests: list[str]


def _daemonsets(lister: Lister) -> dict[str, DaemonSetEntry] | Problem:
    items, problem = lister.section(["/apis/apps/v1/daemonsets"], parse_daemonset)
    if problem:
        return problem
    out: dict[str, DaemonSetEntry] = {}
    for ds in items:
        if DEVICE_WORDS.search(ds.name) or any(DEVICE_WORDS.search(i) for i in ds.images):
            out[ds.ref] = {"images": ds.images, "digests": []}
    if out:
        pods, _ = lister.section(["/api/v1/pods"], parse_pod)
        for pod in pods:
            owner = next((name for kind, name in pod.owners if kind == "DaemonSet"), None)
            key = f"{pod.namespace}/{owner}"
            if owner and key in out:
                ids = {str(s.image_id) for s in pod.container_statuses if s.image_id}
                out[key]["digests"] = sorted(set(out[key]["digests"]) | ids)
    return out


def _kueue(lister: Lister) -> dict[str, dict[str, object] | Problem]:
    out: dict[str, dict[str, object] | Problem] = {}
    for plural, namespaced in (("resourceflavors", False), ("clusterqueues", False), ("localqueues", True)):
        items, problem = lister.section([f"/apis/kueue.x-k8s.io/{v}/{plural}" for v in ("v1beta2", "v1beta1")],
                                        parse_object)
        out[plural] = problem or _named(items, lambda i: i.spec or {}, namespaced)
    return out


def take_snapshot(api: client.ApiClient, namespaces: list[str]) -> dict[str, Any]:
    """The snapshot (module docstring) of the cluster ``api`` talks to, quotas/limits of ``namespaces``.
    Raises ApiException for anything but 403/404 on a list call."""
    lister = Lister(api)
    nodes, problem = lister.section(["/api/v1/nodes"], parse_node)
    volcano, vproblem = lister.section(["/apis/scheduling.volcano.sh/v1beta1/queues"], parse_object)
    sections: dict[str, Any] = {
        "schema": SNAPSHOT_SCHEMA,
        "nodes": problem or {node.name: _node(node) for node in nodes},
        "daemonsets": _daemonsets(lister),
        "runtimeclasses": _section(lister, "/apis/node.k8s.io/v1/runtimeclasses",
                                   lambda i: {"handler": i.handler, "scheduling": i.scheduling}),
        "priorityclasses": _section(lister, "/apis/scheduling.k8s.io/v1/priorityclasses",
                                    lambda i: {"value": i.value, "preemptionPolicy": i.preemption_policy,
                                               "globalDefault": i.global_default}),
        "kueue": _kueue(lister),
        "volcano": {"queues": vproblem or _named(volcano, lambda i: i.spec or {})},
        "resourcequotas": {}, "limitranges": {},
    }
    for ns in sorted(set(namespaces)):
        for kind in ("resourcequotas", "limitranges"):
            items, problem = lister.section([f"/api/v1/namespaces/{ns}/{kind}"], parse_object)
            sections[kind].update({f"{ns}/*": problem} if problem else
                                  _named(items, lambda i: i.spec or {}, namespaced=True))
    return sections


def _section(lister: Lister, path: str, keep: Callable[[Object], object]) -> dict[str, object] | Problem:
    items, problem = lister.section([path], parse_object)
    return problem or _named(items, keep)


def snapshot_of_target(target: dict[str, Any], context: str | None, namespaces: list[str]) -> dict[str, Any]:
    """:func:`take_snapshot` of a matrix target (``kubeconfig``/``context`` as the backend reads them).
    Raises ActionFailed for a bad target, ApiException for a failed list call."""
    api, namespace, _ = connect(target, context)
    return take_snapshot(api, [*namespaces, namespace])


resolve(__name__)
