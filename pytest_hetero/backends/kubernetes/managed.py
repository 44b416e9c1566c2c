"""The ``managedFields`` of the objects a pool's validation depends on: the fallback of
``--hetero-audit-log`` when the apiserver's audit log cannot be read.

Each object's ``metadata.managedFields`` (server-side apply's field ownership, kept by every apiserver
since 1.18: https://kubernetes.io/docs/reference/using-api/server-side-apply/#field-management) lists,
per field manager and operation, the last time that manager wrote the object. It names a *client*
(``kubectl-edit``, ``kubectl-patch``, ``helm``, a controller), never the authenticated user; two users
with the same client are one entry, an earlier write by the same manager is overwritten, and a deleted
object is gone. :mod:`pytest_hetero.status.audit` reads the entries; this module only lists them.

Listed (raw JSON, one call per kind): nodes, the ResourceQuotas of the target namespaces, every
ConfigMap whose name the caller keeps (device-plugin configuration), Kueue ResourceFlavors/ClusterQueues/LocalQueues
(v1beta2 then v1beta1) and Volcano Queues. A kind not served (404) or not listable (403) is named in
``problems``, so an empty list is never taken for "no change".
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import msgspec
from kubernetes import client

from pytest_hetero.backends.kubernetes.manifests import Listed
from pytest_hetero.backends.kubernetes.snapshot import Lister
from pytest_hetero.declared import resolve

if TYPE_CHECKING:
    from pytest_hetero.status.audit import ManagedObject

_KINDS: tuple[tuple[str, str, list[str]], ...] = (
    ("nodes", "", ["/api/v1/nodes"]),
    ("configmaps", "", ["/api/v1/configmaps"]),
    *((plural, "kueue.x-k8s.io", [f"/apis/kueue.x-k8s.io/{v}/{plural}" for v in ("v1beta2", "v1beta1")])
      for plural in ("resourceflavors", "clusterqueues", "localqueues")),
    ("queues", "scheduling.volcano.sh", ["/apis/scheduling.volcano.sh/v1beta1/queues"]),
)


class _Meta(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A listed object's ``metadata`` as far as its field ownership goes: ``name`` (always served), ``namespace``
    (None for a cluster-scoped object) and the ``managedFields`` entries, kept as served (None where absent)."""

    name: str
    namespace: str | None = None
    managed_fields: list[dict[str, object]] | None = None


class _Listed(msgspec.Struct, frozen=True, kw_only=True):
    """Any listed object, as far as its ``metadata`` (always served)."""

    metadata: _Meta


def _entry(item: Listed, resource: str, group: str) -> ManagedObject:
    """The :class:`~pytest_hetero.status.audit.ManagedObject` of a listed item, read once into its declared shape.
    ValueError (``msgspec.ValidationError``, naming the field's ``$.path``) without ``metadata.name``, or with
    ``managedFields`` that are no list of objects."""
    meta = msgspec.convert(item, _Listed).metadata
    return {"resource": resource, "apiGroup": group, "namespace": meta.namespace, "name": meta.name,
            "managedFields": list(meta.managed_fields or [])}


def managed_objects(api: client.ApiClient, namespaces: list[str],
                    keep_configmap: Callable[[str], bool]) -> tuple[list[ManagedObject], list[str]]:
    """``(objects, problems)``: each pool-relevant object as ``{"resource", "apiGroup", "namespace", "name",
    "managedFields"}`` (module docstring), and ``"<kind>: not served"`` / ``"<kind>: forbidden: …"`` for
    a kind that could not be listed; a ConfigMap only when ``keep_configmap(name)``. Raises ApiException
    for anything but 403/404."""
    lister = Lister(api)
    objects: list[ManagedObject] = []
    problems: list[str] = []
    paths = [*_KINDS, *(("resourcequotas", "", [f"/api/v1/namespaces/{ns}/resourcequotas"])
                        for ns in sorted(set(namespaces)))]
    for resource, group, urls in paths:
        items, problem = lister.section(urls, partial(_entry, resource=resource, group=group))
        if problem:
            problems.append(f"{resource}{'.' + group if group else ''}: "
                            + ("not served" if "served" in problem else f"forbidden: {problem['forbidden'][:200]}"))
            continue
        objects += [entry for entry in items if resource != "configmaps" or keep_configmap(str(entry["name"]))]
    return objects, problems


resolve(__name__)
