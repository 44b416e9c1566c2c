"""The Kubernetes apiserver's own JSON shapes that :mod:`pytest_hetero.status.audit` reads, declared once and
converted with ``msgspec.convert`` (a field of another type is a ``msgspec.ValidationError`` naming its path, e.g.
``$.objectRef.name``; a field not declared here is ignored): an ``audit.k8s.io/v1`` Event of the audit log
(https://kubernetes.io/docs/reference/config-api/apiserver-audit.v1/) and a ``metadata.managedFields`` entry
(https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/object-meta/). Imported when a log or
managedFields are read, not with :mod:`pytest_hetero.status.audit`: a process that only imports the audit module
(the plugin, a reader as another user) needs no third-party package for it.
"""

from __future__ import annotations

import msgspec

from pytest_hetero.declared import resolve


class UserInfo(msgspec.Struct, frozen=True, kw_only=True):
    """An Event's ``user`` or ``impersonatedUser`` (``authentication.k8s.io/v1`` UserInfo): the user name and
    groups (None when absent or null)."""

    username: str | None = None
    groups: list[str] | None = None


class ObjectReference(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """An Event's ``objectRef``: the object the request was for (each None when absent or null; a
    ``deletecollection`` names no object, a cluster-scoped one no namespace)."""

    resource: str | None = None
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    api_group: str | None = None


class ResponseStatus(msgspec.Struct, frozen=True, kw_only=True):
    """An Event's ``responseStatus`` (a ``meta/v1`` Status): the HTTP ``code`` (None when absent or null)."""

    code: int | None = None


class AuditEvent(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """An ``audit.k8s.io/v1`` Event line (https://kubernetes.io/docs/reference/config-api/apiserver-audit.v1/)
    as :func:`read_audit_log` reads it: ``kind``, ``apiVersion``, ``verb``, ``user``, ``stage`` and
    ``stageTimestamp`` required; ``objectRef``, ``responseStatus``, ``impersonatedUser`` and ``auditID`` None
    when absent or null; every other field of the Event ignored. Converted once by :func:`_event`."""

    kind: str
    api_version: str
    verb: str
    user: UserInfo
    stage: str
    stage_timestamp: str
    object_ref: ObjectReference | None = None
    response_status: ResponseStatus | None = None
    impersonated_user: UserInfo | None = None
    audit_id: str | None = msgspec.field(default=None, name="auditID")


class ManagedFieldsEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One ``metadata.managedFields`` entry (``meta/v1`` ManagedFieldsEntry) as :func:`managed_changes` reads it:
    the field ``manager``, the ``operation`` (``Update``, ``Apply``), the ``time`` of its last write (RFC 3339) and
    the ``subresource`` it wrote (each None when absent or null; ``fieldsV1`` and the rest ignored)."""

    manager: str | None = None
    operation: str | None = None
    time: str | None = None
    subresource: str | None = None


resolve(__name__)
