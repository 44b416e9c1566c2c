"""Who changed what, when: the apiserver's audit log (or, without it, ``managedFields``) read for the
window between two bundles, each change mapped to the matrix pools whose objects it touched, and the
changes to a pool the declared change record (``--hetero-change``) does not name.

Pure logic and one bounded file reader; decides no status (the judge does,
:func:`pytest_hetero.judge.verdict.change_findings`).

**The audit log** is the Kubernetes apiserver's log backend output (``--audit-log-path``, default
``--audit-log-format json``): one JSON object per line, each an ``audit.k8s.io/v1`` ``Event``
(https://kubernetes.io/docs/reference/config-api/apiserver-audit.v1/). Read from it: ``verb``,
``user.username``/``user.groups`` (the authenticated identity), ``impersonatedUser`` (when set, the
change was made *as* that user *by* ``user``), ``objectRef`` (``resource``, ``subresource``,
``namespace``, ``name``, ``apiGroup``), ``responseStatus.code``, ``stage`` and ``stageTimestamp``. A
change is a write verb (:data:`WRITE_VERBS`) at stage ``ResponseComplete`` with a code below 400; a
refused write (403, 409…) is counted, never listed as a change.

**A change entry** (both sources): ``{"who": {"user", "groups", "via", "manager"}, "what": {"verb",
"resource", "subresource", "namespace", "name", "apiGroup"}, "when", "code", "audit_id"}``; from the
audit log ``manager`` is None; from managedFields ``user``/``groups``/``via`` are None and ``manager``
is the field manager (a client's name, e.g. ``kubectl-edit``), ``verb`` the operation (``Update``,
``Apply``), ``when`` the manager's last write (one per manager and operation: earlier writes by the same
manager are not seen, and a deleted object is not seen at all).

**Pool objects** (:func:`pools_of`) are what a pool's validation depends on: the pool's nodes (as
:mod:`pytest_hetero.status.drift` decides pool membership, in the earlier or the current snapshot), a
ResourceQuota of the target namespace (every pool), the pool's Kueue LocalQueue (``spec.queue`` in the
target namespace), the ClusterQueue it points to (from the snapshot; any ClusterQueue, ResourceFlavor
or Cohort when the snapshot does not say), the pool's Volcano Queue, and device-plugin ConfigMaps
(:data:`DEVICE_CONFIG`: every pool that requests a device). A change to a pool object is *undeclared*
for each of its pools the record's ``intended`` does not name; the control plane's own writes
(:func:`control_plane`: kube-controller-manager's controllers, the scheduler, a kubelet) are kept and
marked, never flagged.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from pytest_hetero.errors import HeteroError, Location

if TYPE_CHECKING:
    from pytest_hetero.matrix.model import Matrix
    from pytest_hetero.status.apiserver import AuditEvent
    from pytest_hetero.status.snapshots import ClusterSnapshot

AUDIT_API_VERSION = "audit.k8s.io/v1"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
MAX_AUDIT_BYTES = 2 << 30
"""The largest audit log file read (2 GiB; a rotated log is ``--audit-log-maxsize`` MB, 100 on the test plane)."""
MAX_LINE_BYTES = 1 << 20
"""The longest line read (1 MiB): a Metadata-level event is about 1-2 KiB; a longer line is refused."""
MAX_KEPT = 2000
"""Changes listed in the record; more are counted (``truncated``), and every undeclared one is still flagged."""
DEVICE_CONFIG = re.compile(r"device-plugin|time-slicing|mig-parted|hami|ascend|nvidia|gpu|npu", re.IGNORECASE)
"""ConfigMap names taken for device-plugin configuration (GPU operator, HAMi, Ascend, time slicing, MIG)."""
_CONTROL_PLANE_USERS = ("system:kube-controller-manager", "system:kube-scheduler", "system:apiserver")
_CONTROL_PLANE_MANAGERS = ("kube-controller-manager", "kube-scheduler", "kubelet", "kube-apiserver")
_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")
_CHUNK = 1 << 20


def _no_constant(token: str) -> Any:
    raise ValueError(f"non-standard token {token} (RFC 8259 has no NaN or Infinity)")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
"""One decoder for every line (``json.loads`` with a hook builds a new one per call): RFC 8259 only, as
:func:`pytest_hetero.safeio.loads_bounded` reads; an integer over Python's digit limit is a ValueError."""


class Who(TypedDict):
    """Who made a change: the user and groups (the impersonated identity when there is one), ``via`` the user
    who impersonated, ``manager`` the field manager (managedFields only; the rest then None)."""

    user: str | None
    groups: list[str] | None
    via: str | None
    manager: str | None


class What(TypedDict):
    """What a change wrote: the verb (managedFields: the operation) and the object."""

    verb: str | None
    resource: str | None
    subresource: str | None
    namespace: str | None
    name: str | None
    apiGroup: str


class ChangeEntry(TypedDict):
    """A change entry (module docstring): who, what, when (RFC 3339), the response code (None from
    managedFields) and the audit ID."""

    who: Who
    what: What
    when: str | None
    code: int | None
    audit_id: str | None


class ListedChange(ChangeEntry):
    """A change as a matrix's audited record lists it: the pools it touched, those the change record does not
    name, and whether the control plane made it."""

    pools: list[str]
    undeclared_pools: list[str]
    control_plane: bool


class Finding(TypedDict):
    """A change to pools the change record does not name (``undeclared_change``)."""

    category: str
    pools: list[str]
    change: ListedChange
    message: str


class ManagedObject(TypedDict):
    """A pool object as :func:`pytest_hetero.backends.kubernetes.managed.managed_objects` lists it (every key
    written): its ``resource`` (plural), ``apiGroup`` ("" for the core group), ``namespace`` and ``name`` (None
    where the object has none) and its ``metadata.managedFields`` entries as the apiserver served them."""

    resource: str
    apiGroup: str
    namespace: str | None
    name: str | None
    managedFields: list[dict[str, object]]


class FileRead(TypedDict):
    """The audit log file as read: its path, size in bytes and sha256."""

    path: str
    bytes: int
    sha256: str


class AuditLogError(HeteroError):
    """An audit log that cannot be read: names the file, the line and the fix."""


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 timestamp (``2026-12-02T13:47:02.950088Z``, any fraction up to nanoseconds, or an
    offset) as an aware UTC datetime; None for anything else."""
    if isinstance(text, str) and len(text) in (20, 27) and text[-1] == "Z" and text[10] == "T":
        try:  # the apiserver's own forms (RFC 3339 with 6 or no fraction digits): the C parser
            return datetime.fromisoformat(text[:-1]).replace(tzinfo=UTC)
        except ValueError:
            pass
    m = _TIME.match(text) if isinstance(text, str) else None
    if m is None:
        return None
    fraction = (m.group(7) or "0")[:6].ljust(6, "0")
    zone = m.group(8)
    try:
        y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
        stamp = datetime(y, mo, d, h, mi, sec, int(fraction))
    except ValueError:
        return None
    if zone != "Z":
        offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
        stamp = stamp - offset if zone[0] == "+" else stamp + offset
    return stamp.replace(tzinfo=UTC)


def control_plane(who: Who) -> bool:
    """True for a write by the cluster's own components: kube-controller-manager (its controllers' service
    accounts ``system:serviceaccount:kube-system:*``), the scheduler, a kubelet (``system:node:*``) or, from
    managedFields, those components' manager names."""
    user = who["via"] or who["user"] or ""
    if user:
        return (user in _CONTROL_PLANE_USERS or user.startswith("system:node:")
                or user.startswith("system:serviceaccount:kube-system:"))
    manager = str(who["manager"] or "")
    return manager in _CONTROL_PLANE_MANAGERS


@dataclass
class Window:
    """The changes read for ``[since, until)``: ``changes`` (at most :data:`MAX_KEPT` listed), ``writes``
    (all writes in the window), ``refused`` (writes the apiserver refused), ``outside`` (events outside
    the window), ``lines``, ``torn_last_line`` (an unterminated last line: the apiserver was writing it),
    ``first``/``last`` (the earliest and latest ``stageTimestamp`` of any event in the file)."""

    changes: list[ChangeEntry] = field(default_factory=list)
    writes: int = 0
    refused: int = 0
    outside: int = 0
    lines: int = 0
    torn_last_line: bool = False
    first: datetime | None = None
    last: datetime | None = None

    def covers(self, since: datetime) -> bool | None:
        """Whether the file reaches back to ``since`` (its first event is no later): False when it begins
        after (rotated, or the apiserver logged only later: earlier changes are unseen), None when it holds
        no event (nothing written under the policy since the log began, or the log was just rotated)."""
        return None if self.first is None else self.first <= since


def _refuse(path: str, line: int, message: str, hint: str = "") -> AuditLogError:
    return AuditLogError(message, Location(path, line),
                         hint or "give the apiserver's audit log (--audit-log-path, --audit-log-format json): "
                                 "JSON lines of audit.k8s.io/v1 Event")


def _lines(fd: int, path: str, digest: Any) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes, terminated) of each line of ``fd``, never holding more than one line of at most
    :data:`MAX_LINE_BYTES` (a longer one is refused as soon as it is seen, not read whole); every byte read
    goes into ``digest`` (a hashlib object)."""
    pending = b""
    number = 0
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            break
        digest.update(chunk)
        pending += chunk
        start = 0
        while True:
            cut = pending.find(b"\n", start)
            if cut < 0:
                break
            number += 1
            if cut - start > MAX_LINE_BYTES:
                raise _refuse(path, number, f"line of {cut - start} bytes, more than the {MAX_LINE_BYTES} an audit "
                                            "event may hold")
            yield number, pending[start:cut], True
            start = cut + 1
        pending = pending[start:]
        if len(pending) > MAX_LINE_BYTES:
            raise _refuse(path, number + 1, f"a line longer than the {MAX_LINE_BYTES} bytes an audit event may hold")
    if pending:
        yield number + 1, pending, False


def _event(raw: bytes, path: str, number: int) -> AuditEvent:
    """One line as an audit Event; raises AuditLogError naming the line and what is wrong (a field of the wrong
    type or missing by its path, e.g. ``$.objectRef.name``)."""
    if b"\x00" in raw:
        raise _refuse(path, number, "binary data (a NUL byte), not a JSON line")
    try:
        event = _DECODER.decode(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise _refuse(path, number, "not a JSON audit event: the line is not UTF-8") from None
    except RecursionError:
        raise _refuse(path, number, "not a JSON audit event: nested too deeply") from None
    except ValueError as exc:
        raise _refuse(path, number, f"not a JSON audit event: {str(exc)[:200]}") from None
    if not isinstance(event, dict):
        raise _refuse(path, number, f"a JSON {type(event).__name__}, not an audit Event object")
    fields: dict[str, object] = event  # a JSON object's keys are text; each value is checked before it is trusted
    object_kind, version = fields.get("kind"), fields.get("apiVersion")  # first: another kind has other fields
    if object_kind != "Event" or version != AUDIT_API_VERSION:
        raise _refuse(path, number, f"kind {str(object_kind)[:40]!r} apiVersion "
                                    f"{str(version)[:40]!r}, not an {AUDIT_API_VERSION} Event",
                      "give an audit log written with --audit-log-version audit.k8s.io/v1 (the default)")
    import msgspec

    from pytest_hetero.status.apiserver import AuditEvent

    try:
        return msgspec.convert(fields, AuditEvent)
    except msgspec.ValidationError as exc:
        raise _refuse(path, number, f"not an {AUDIT_API_VERSION} Event: {str(exc)[:200]}") from None


def _text(value: str | None, most: int = 253) -> str | None:
    """A name from the log as a bounded str (None when absent)."""
    return None if value is None else value[:most]


def change_of(event: AuditEvent) -> ChangeEntry:
    """The change entry (module docstring) of an audit Event (one :func:`read_audit_log` accepted)."""
    from pytest_hetero.status.apiserver import ObjectReference

    ref = event.object_ref or ObjectReference()
    who = event.impersonated_user or event.user  # a change made as the impersonated user, by event.user
    code = event.response_status.code if event.response_status is not None else None
    return {"who": {"user": _text(who.username), "groups": [g[:253] for g in (who.groups or [])[:50]],
                    "via": _text(event.user.username) if event.impersonated_user is not None else None,
                    "manager": None},
            "what": {"verb": _text(event.verb), "resource": _text(ref.resource),
                     "subresource": _text(ref.subresource), "namespace": _text(ref.namespace),
                     "name": _text(ref.name), "apiGroup": _text(ref.api_group) or ""},
            "when": _text(event.stage_timestamp, 40), "code": code, "audit_id": _text(event.audit_id, 64)}


def read_audit_log(path: str, since: datetime, until: datetime) -> tuple[Window, FileRead]:
    """The writes in ``[since, until)`` (by ``stageTimestamp``) of the audit log at ``path`` (module
    docstring), and ``{"path", "bytes", "sha256"}`` of the file as read.

    Bounded: the file is refused by its size above :data:`MAX_AUDIT_BYTES` before a byte is read, a line
    above :data:`MAX_LINE_BYTES` as soon as it is seen; FIFOs, devices and folders are refused
    (:func:`pytest_hetero.safeio.open_local`). Raises :class:`AuditLogError` naming the file and line for
    a missing or unsafe file, binary data, a line that is not JSON, not an ``audit.k8s.io/v1`` Event, lacks
    ``verb``/``user``/``stage``/``stageTimestamp`` or has a field of another type than the Event's
    (:class:`AuditEvent`, named by its path: ``$.objectRef.name``), or an unreadable timestamp; PermissionError when
    the file may not be read (the caller falls back to managedFields). An unterminated last line (the
    apiserver was writing it) is skipped and reported (``torn_last_line``)."""
    import hashlib

    from pytest_hetero.safeio import Unreadable, open_local, refusal

    try:
        fd = open_local(path)
    except Unreadable as exc:
        if "Permission denied" in exc.detail:
            raise PermissionError(exc.detail) from None
        raise refusal(path, "the audit log", exc, AuditLogError) from None
    window = Window()
    digest = hashlib.sha256()
    try:
        size = os.fstat(fd).st_size
        if size > MAX_AUDIT_BYTES:
            raise _refuse(path, 0, f"{size} bytes, more than the {MAX_AUDIT_BYTES} an audit log read here may hold",
                          "give one rotated file (--audit-log-maxsize) or cut the window out first")
        for number, raw, terminated in _lines(fd, path, digest):
            window.lines = number
            if not raw.strip():
                continue
            try:
                event = _event(raw, path, number)
            except AuditLogError:
                if not terminated:
                    window.torn_last_line = True
                    continue
                raise
            _take(window, event, path, number, since, until)
    finally:
        os.close(fd)
    return window, {"path": path, "bytes": size, "sha256": digest.hexdigest()}


def _take(window: Window, event: AuditEvent, path: str, number: int, since: datetime, until: datetime) -> None:
    when = parse_time(event.stage_timestamp)
    if when is None:
        raise _refuse(path, number, f"stageTimestamp {event.stage_timestamp[:40]!r} is not an RFC 3339 time")
    window.first = when if window.first is None else min(window.first, when)
    window.last = when if window.last is None else max(window.last, when)
    if event.verb not in WRITE_VERBS or event.stage not in ("ResponseComplete", "Panic"):
        return
    if not since <= when < until:
        window.outside += 1
        return
    change = change_of(event)
    if change["code"] is None or change["code"] >= 400 or event.stage == "Panic":
        window.refused += 1
        return
    window.writes += 1
    window.changes.append(change)


def managed_changes(objects: list[ManagedObject], since: datetime, until: datetime) -> Window:
    """The changes ``managedFields`` show in ``[since, until)`` of ``objects`` (as listed); status subresource
    entries are left out (as the audit policy leaves status writes out), and so is an entry that is not a
    ManagedFieldsEntry (not an object, or a field of another type: no apiserver serves one)."""
    import msgspec

    from pytest_hetero.status.apiserver import ManagedFieldsEntry

    window = Window()
    for obj in objects:
        for raw in obj["managedFields"]:
            try:
                entry = msgspec.convert(raw, ManagedFieldsEntry)
            except msgspec.ValidationError:
                continue
            if entry.subresource:
                continue
            when = parse_time(entry.time)
            if when is None or not since <= when < until:
                window.outside += 1
                continue
            window.writes += 1
            window.changes.append({
                "who": {"user": None, "groups": None, "via": None, "manager": _text(entry.manager)},
                "what": {"verb": _text(entry.operation), "resource": obj["resource"], "subresource": None,
                         "namespace": obj["namespace"], "name": obj["name"], "apiGroup": obj["apiGroup"]},
                "when": _text(entry.time, 40), "code": None, "audit_id": None})
    window.changes.sort(key=lambda c: str(c["when"]))
    return window


def pool_members(matrix: Matrix, snapshots: list[ClusterSnapshot]) -> dict[str, set[str]]:
    """{resource: its pool's node names in any of ``snapshots``} (drift's pool membership), computed once."""
    from pytest_hetero.status.drift import _pool_nodes

    return {res.name: _pool_nodes(res, snapshots) for res in matrix.resources}


def pools_of(what: What, matrix: Matrix, snapshots: list[ClusterSnapshot], namespace: str | None,
             members: dict[str, set[str]] | None = None) -> list[str]:
    """The resources (pools) of ``matrix`` whose objects the change ``what`` touched (module docstring);
    ``snapshots``: the earlier and the current snapshot, parsed (pool membership, LocalQueue → ClusterQueue),
    ``namespace``: the target namespace, ``members``: :func:`pool_members` when already computed. A
    ``deletecollection`` (no name) touches every pool that has objects of that kind. Empty: not a pool object."""
    members = members if members is not None else pool_members(matrix, snapshots)
    resource, group, name = what["resource"], what["apiGroup"] or "", what["name"]
    ns, every = what["namespace"], name is None and what["verb"] == "deletecollection"
    pools: list[str] = []
    for res in matrix.resources:
        hit = False
        if group == "" and resource == "nodes":
            hit = bool(members[res.name]) if every else name in members[res.name]
        elif group == "" and resource == "resourcequotas":
            hit = ns == namespace
        elif group == "" and resource == "configmaps":
            hit = bool(res.device_resources) and (every or bool(DEVICE_CONFIG.search(str(name or ""))))
        elif group == "kueue.x-k8s.io" and res.queue:
            if resource == "localqueues":
                hit = ns == namespace and (every or name == res.queue)
            elif resource == "clusterqueues":
                feeds = f"{namespace}/{res.queue}"
                named = {s.cluster_queues.get(feeds) for s in snapshots} - {None} if namespace else set()
                hit = every or not named or name in named
            else:
                hit = resource in ("resourceflavors", "cohorts", "topologies")
        elif group == "scheduling.volcano.sh" and resource == "queues":
            hit = bool(res.queue) and (every or name == res.queue)
        if hit:
            pools.append(res.name)
    return pools


def classify(window: Window, matrix: Matrix, snapshots: list[dict[str, Any]], namespace: str | None,
             intended: list[str]) -> dict[str, Any]:
    """The audited part of one matrix's change record: ``{"matrix", "writes", "refused", "changes":
    [change + "pools", "undeclared_pools", "control_plane"] (at most :data:`MAX_KEPT`), "truncated",
    "findings": [{"category": "undeclared_change", "message", "pools", "change"}], "actors": [user, or
    "manager <name>", of each change to a pool but the control plane's]}``. A finding is a
    change to a pool object by anyone but the control plane whose pools ``intended`` does not all name."""
    listed: list[ListedChange] = []
    findings: list[Finding] = []
    from pytest_hetero.status.snapshots import ClusterSnapshot

    seen = [ClusterSnapshot.parse(s) for s in snapshots]
    members = pool_members(matrix, seen)
    actors: set[str] = set()
    for change in window.changes:
        pools = pools_of(change["what"], matrix, seen, namespace, members)
        undeclared = [p for p in pools if p not in intended]
        own = control_plane(change["who"])
        entry: ListedChange = {**change, "pools": pools, "undeclared_pools": undeclared, "control_plane": own}
        if pools and not own:
            who = change["who"]
            actors.add(str(who["user"]) if who["user"] else f"manager {who['manager']}")
        if len(listed) < MAX_KEPT:
            listed.append(entry)
        if undeclared and not own:
            findings.append({"category": "undeclared_change", "pools": undeclared, "change": entry,
                             "message": f"{describe_change(entry)} changed pool(s) {', '.join(undeclared)} "
                                        "that the change record does not name"})
    return {"matrix": matrix.name, "writes": window.writes, "refused": window.refused, "changes": listed,
            "truncated": max(0, len(window.changes) - len(listed)), "findings": findings,
            "actors": sorted(actors)}


def describe_change(change: ChangeEntry) -> str:
    """One line: ``alice (platform-ops) patch resourcequotas team-a/gpu-quota at 2026-12-02T13:47:02.950088Z``;
    a managedFields entry reads ``manager kubectl-edit Update nodes gpu-1 at …``."""
    who, what = change["who"], change["what"]
    if who["manager"]:
        actor = f"manager {who['manager']}"
    else:
        groups = [g for g in who["groups"] or [] if not str(g).startswith("system:authenticated")]
        actor = str(who["user"]) + (f" ({', '.join(groups)})" if groups else "")
        actor += f" as impersonated by {who['via']}" if who["via"] else ""
    kind = str(what["resource"]) + (f"/{what['subresource']}" if what["subresource"] else "")
    kind = f"{kind}.{what['apiGroup']}" if what["apiGroup"] else kind
    obj = f"{what['namespace']}/{what['name']}" if what["namespace"] else str(what["name"])
    return f"{actor} {what['verb']} {kind} {obj} at {change['when']}"
