"""Kubernetes blocks -> findings: events (any form), describe node/pod/volcano/condition text,
``kubectl get`` tables, YAML/JSON objects (Node, Pod, Event lists, Kueue Workload, Volcano PodGroup/
Queue/Job, label maps, HAMi registrations, DCGM JSON, device-plugin settings), label and resource lines."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import NamedTuple

import yaml

from pytest_hetero.explain import fast_yaml
from pytest_hetero.explain.blocks import Piece
from pytest_hetero.explain.context import Ctx, make
from pytest_hetero.explain.kube_objects import (
    KubeEvent,
    KubeObject,
    NodeObject,
    PodGroupObject,
    QueueObject,
    VcJobObject,
    WorkloadObject,
)
from pytest_hetero.explain.model import Finding, SourceLine, Value
from pytest_hetero.explain.read_text import _reason_hit, reason_failure
from pytest_hetero.pending.describe import parse_describe
from pytest_hetero.pending.events import EventRow, classify_row, parse_event_rows
from pytest_hetero.pending.model import Reason
from pytest_hetero.pending.node_text import (
    HamiDevice,
    NodeText,
    handshake,
    is_hami_register,
    parse_describe_node,
    parse_hami_register,
)
from pytest_hetero.pending.normalise import explain as pending_explain
from pytest_hetero.pending.volcano import parse_podgroup_text
from pytest_hetero.probes.dcgm import is_dcgm_json


def reason_finding(kind: str, reason: Reason, lines: tuple[SourceLine, ...], *, age: str | None = None,
                   count: int | None = None, timestamps: tuple[str, ...] = (),
                   entity: Mapping[str, str] | None = None) -> Finding:
    """A finding for one pending/startup :class:`Reason` (its failure category: :func:`reason_failure`)."""
    hit = _reason_hit(reason)
    ent = {**hit.entity, **(entity or {})}
    gang = re.search(r"(?P<running>\d+) Running, (?P<min>\d+) minAvailable", reason.message)
    if hit.code == "gang_unschedulable" and not reason.resource and gang:
        # The gang message names no resource and counts running members: a member that exited and a cluster
        # short of capacity read the same; the text cannot decide whose it is.
        hit.failure = "gang_members_missing"
        hit.quantities.update(running=int(gang.group("running")), min_available=int(gang.group("min")))
    return make(kind, hit.code, category=hit.category, failure=hit.failure, severity=hit.severity,
                meaning=hit.meaning if hit.code != "unrecognised" else "message no reader understands",
                lines=lines, entity=ent, age=age, count=count, timestamps=timestamps,
                quantities={**hit.quantities, "source": reason.source})


def event_findings(ctx: Ctx, piece: Piece, rows: list[EventRow], base_index: int) -> list[Finding]:
    """Findings of event rows: reasons with age/count; Normal progress events -> one summary."""
    out: list[Finding] = []
    normal: list[EventRow] = []
    for row in rows:
        reasons = classify_row(row)
        if not reasons:
            normal.append(row)
            continue
        src = ctx.src(row.lines)
        entity = {"object": row.object, "namespace": row.namespace, "reporter": row.source}
        for reason in reasons:
            f = reason_finding("events", reason, src, age=row.age, count=row.count or 1,
                               entity={k: v for k, v in entity.items() if v})
            if "hami" in row.source.lower() and reason.code == "insufficient_resource" and re.search(
                    r"-memory$|gpumem|memory-percentage", reason.resource or ""):
                f = make(f.kind, f.code, category="device", failure="device_memory_accounting", severity=f.severity,
                         meaning=f"{f.meaning}: HAMi's device-memory accounting finds no card/NPU with enough free "
                                 "memory on the node (check the HAMi device plugin's registered memory)",
                         lines=f.lines, entity=f.entity, age=f.age, count=f.count, quantities=f.quantities)
            q = dict(f.quantities)
            q.update({"event_type": row.type, "event_reason": row.reason, "repeated_over": row.over})
            meaning = f.meaning if f.code != "unrecognised" else f"{row.type} {row.reason}: {row.message}"
            out.append(make(f.kind, f.code, category=f.category, failure=f.failure, severity=f.severity,
                            meaning=meaning, lines=f.lines, entity=f.entity, age=f.age, count=f.count, quantities=q))
    if normal:
        out.append(make("events", "events_normal", category="events", severity="ok",
                        meaning=f"{len(normal)} Normal event(s) reporting progress",
                        lines=ctx.src([i for r in normal for i in r.lines]),
                        count=len(normal), quantities={"reasons": ", ".join(dict.fromkeys(r.reason for r in normal))}))
    return out


def read_events(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read an events piece (describe ``Events:`` table, ``kubectl get events``, header-less rows)."""
    lines = ctx.lines(piece)
    if len(lines) == 1 and re.match(r"^\s*Events:\s*<none>\s*$", lines[0]):
        return [make("events", "events_none", category="events", severity="ok",
                     meaning="no events", lines=ctx.span(piece))]
    rows = parse_event_rows(lines)
    for row in rows:
        row.lines = [piece.start + i for i in row.lines]
    return event_findings(ctx, piece, rows, piece.start)


# --- nodes -------------------------------------------------------------------------------------------

_GPU_RESOURCE = re.compile(
    r"(?:^|/)(?:gpu|Ascend|mig-|vgpu|gpumem|gpucores|npu)|nvidia\.com/|huawei\.com/|amd\.com/gpu"
)


def _hami_findings(ctx: Ctx, piece: Piece, devices: list[HamiDevice], idx: list[int], kind: str,
                   node: str | None) -> list[Finding]:
    out = []
    slots = sum(d.count or 0 for d in devices)
    out.append(make(kind, "hami_devices", category="gpu-sharing", severity="ok",
                    meaning=f"HAMi registered {len(devices)} device(s), {slots} vGPU slot(s)",
                    lines=ctx.src(idx, piece.start), entity={"node": node},
                    quantities={"devices": len(devices), "vgpu_slots": slots,
                                **{f"device{i}.{k}": val for i, d in enumerate(devices) for k, val in (
                                    ("id", d.id), ("count", d.count), ("devmem_mib", d.devmem), ("devcore", d.devcore),
                                    ("type", d.type), ("mode", d.mode), ("numa", d.numa), ("health", d.health))}}))
    for i, d in enumerate(devices):
        if d.health is False:
            out.append(make(kind, "hami_device_unhealthy", category="gpu-hardware", failure="gpu_hardware_fault",
                            severity="error", meaning=f"HAMi marks device {d.id} unhealthy",
                            lines=ctx.src(idx, piece.start), entity={"node": node, "uuid": d.id},
                            quantities={"device": i}))
    return out


def _taint_finding(ctx: Ctx, piece: Piece, taints: list[str], idx: list[int], node: str | None,
                   kind: str) -> list[Finding]:
    out: list[Finding] = []
    keys = [t.split("=")[0].split(":")[0] for t in taints]
    provisioning = any(k in ("karpenter.sh/not-ready", "node.cloudprovider.kubernetes.io/uninitialized") for k in keys)
    health = [t for t in taints if t.startswith("node.kubernetes.io/")]
    other = [t for t in taints if t not in health and not t.startswith(("karpenter.sh/not-ready",
                                                                         "node.cloudprovider.kubernetes.io/uninitialized"))]
    unreachable = [t for t in health if "unreachable" in t]
    not_ready = [t for t in health if "not-ready" in t]
    if unreachable:
        out.append(make(kind, "node_unreachable", category="node-health", failure="node_unreachable", severity="error",
                        meaning="the node controller lost contact with the kubelet (unreachable): pods are evicted "
                                "(NoExecute) and nothing new is scheduled",
                        lines=ctx.src(idx, piece.start), entity={"node": node},
                        quantities={"taints": ", ".join(unreachable)}))
    if not_ready:
        out.append(make(kind, "node_not_ready", category="node-health",
                        failure="node_provisioning" if provisioning else "node_not_ready", severity="error",
                        meaning=("the node is still being provisioned (not-ready and provisioner startup taints)"
                                 if provisioning else "the node is NotReady"),
                        lines=ctx.src(idx, piece.start), entity={"node": node},
                        quantities={"taints": ", ".join(not_ready + [t for t in taints if t.startswith("karpenter")])}))
    for t in health:
        if t in unreachable or t in not_ready:
            continue
        code = "node_unschedulable" if "unschedulable" in t else "node_pressure" if "pressure" in t else "node_taint"
        failure = "lifecycle_taint" if code == "node_taint" else code  # node_unschedulable, node_pressure
        out.append(make(kind, code, category="node-health", failure=failure, severity="error",
                        meaning=f"node taint {t}", lines=ctx.src(idx, piece.start), entity={"node": node},
                        quantities={"taint": t}))
    if other:
        out.append(make(kind, "node_taints", category="placement", severity="ok",
                        meaning=f"pods need tolerations for: {', '.join(other)}", lines=ctx.src(idx, piece.start),
                        entity={"node": node}, quantities={"taints": ", ".join(other), "count": len(other)}))
    return out


_GFD = re.compile(r"^(?:nvidia\.com|feature\.node\.kubernetes\.io)/")
_INTERESTING_LABEL = re.compile(r"accelerator|ascend|npu|gpu|servertype|instance-type|capacity-type|provisioner|"
                                r"zone|region|kernel|os_release|hostname", re.IGNORECASE)
"""Label keys kept as quantities besides GPU Feature Discovery's: accelerator, instance and topology."""


def label_findings(ctx: Ctx, piece: Piece, labels: Mapping[str, str], idx: list[int], kind: str,
                   node: str | None) -> list[Finding]:
    """A ``node_labels`` finding: accelerator-related labels as quantities, GPU Feature Discovery summary."""
    node = node or labels.get("kubernetes.io/hostname")
    interesting = {k: v for k, v in labels.items()
                   if (_GFD.match(k) and not k.startswith("feature.node.kubernetes.io/cpu"))
                   or _INTERESTING_LABEL.search(k)}
    product = labels.get("nvidia.com/gpu.product")
    mig = {m.group(1): v for k, v in labels.items() for m in [re.match(r"nvidia\.com/mig-([\w.]+)\.count$", k)] if m}
    gfd = sum(1 for k in labels if k.startswith("nvidia.com/"))
    summary = [f"{len(labels)} labels"]
    if product:
        summary.append(f"{product} x{labels.get('nvidia.com/gpu.count', '?')}")
    if mig:
        summary.append("MIG " + ", ".join(f"{n}x{p}" for p, n in mig.items()))
    if not gfd and any("instance-type" in k for k in labels):
        summary.append("no GPU Feature Discovery labels")
    q: dict[str, Value] = {"labels": len(labels), "gfd_labels": gfd}
    q.update(dict(interesting))
    return [make(kind, "node_labels", category="node", severity="ok", meaning="; ".join(summary),
                 lines=ctx.src(idx, piece.start), entity={"node": node}, quantities=q)]


def _resources_finding(ctx: Ctx, piece: Piece, capacity: Mapping[str, str], allocatable: Mapping[str, str],
                       idx: list[int], kind: str, node: str | None,
                       allocated: Mapping[str, tuple[str, str]] | None = None) -> list[Finding]:
    q: dict[str, Value] = {}
    for prefix, data in (("capacity", capacity), ("allocatable", allocatable)):
        q.update({f"{prefix}.{k}": str(v) for k, v in data.items()})
    for k, (req, lim) in (allocated or {}).items():
        q[f"allocated.{k}.requests"] = req
        q[f"allocated.{k}.limits"] = lim
    accel = sorted({k for k in list(capacity) + list(allocatable) + list(allocated or {}) if _GPU_RESOURCE.search(k)})
    parts = [f"{k} {capacity.get(k, '?')}/{allocatable.get(k, '?')}" for k in accel]
    meaning = "accelerators (capacity/allocatable): " + (", ".join(parts) if parts else "none advertised")
    zero = [k for k in accel if str(allocatable.get(k, capacity.get(k, ""))).strip() in ("0", "0Ki")]
    shared = [k for k in accel if k not in zero and k.split("/")[0] in {z.split("/")[0] for z in zero}]
    if zero and shared:
        meaning += f"; {', '.join(zero)} is 0 but {', '.join(shared)} is offered (renamed/shared resource)"
    return [make(kind, "node_resources", category="node", severity="ok", meaning=meaning,
                 lines=ctx.src(idx, piece.start), entity={"node": node}, quantities=q)]


_DESCRIBE_NODE = "describe-node"


def _node_head(ctx: Ctx, piece: Piece, node: NodeText, name: str | None) -> list[Finding]:
    """The ``node`` finding of a describe: name, roles, creation, cordon flag, lease renewal, internal IP
    and, when the lease was renewed within the minute of creation, the seconds between the two."""
    head = node.lines_of("Name", "Roles", "CreationTimestamp", "Unschedulable")
    if not (head or name):
        return []
    q: dict[str, Value] = {"roles": node.roles, "created": node.created, "unschedulable": node.unschedulable,
                           "lease_renew": node.lease_renew, "internal_ip": node.internal_ip}
    created, renewed = node.created or "", node.lease_renew or ""
    tc, tr = re.search(r"(\d\d):(\d\d):(\d\d)", created), re.search(r"(\d\d):(\d\d):(\d\d)", renewed)
    if tc and tr and created[:16] == renewed[:16]:
        q["lease_renewed_s_after_creation"] = (int(tr.group(3)) - int(tc.group(3))) + 60 * (
            int(tr.group(2)) - int(tc.group(2)))
    roles = f", roles {node.roles}" if node.roles else ""
    return [make(_DESCRIBE_NODE, "node", category="node", severity="ok",
                 meaning=f"node {name or '?'}{roles}",
                 lines=ctx.src(head + node.lines_of("Lease.RenewTime"), piece.start), entity={"node": name},
                 timestamps=[created or None], quantities=q)]


def _node_health(ctx: Ctx, piece: Piece, node: NodeText, name: str | None) -> list[Finding]:
    """A cordoned node (``Unschedulable: true``) and each bad condition (Ready not True, any other
    condition True)."""
    out: list[Finding] = []
    if (node.unschedulable or "").lower() == "true":
        out.append(make(_DESCRIBE_NODE, "node_unschedulable", category="node-health", failure="node_unschedulable",
                        severity="error", meaning="the node is cordoned (Unschedulable: true)",
                        lines=ctx.src(node.lines_of("Unschedulable"), piece.start), entity={"node": name}))
    for row in node.conditions:
        ctype, status = row.type, row.status
        if (ctype == "Ready" and status != "True") or (ctype != "Ready" and status == "True"):
            why = f"{row.reason or ''} {row.message or ''}"
            code = "node_not_ready" if ctype == "Ready" else "node_pressure"
            out.append(make(_DESCRIBE_NODE, code, category="node-health", failure=code, severity="error",
                            meaning=f"condition {ctype}={status}: {why}".strip(),
                            lines=ctx.src([row.line], piece.start), entity={"node": name},
                            quantities={"condition": ctype, "status": status, "reason": row.reason}))
    return out


def _node_hami(ctx: Ctx, piece: Piece, node: NodeText, lines: list[str], name: str | None) -> list[Finding]:
    """HAMi annotations of a described node: each ``hami.io/node-*-register`` device list, then a
    handshake left at ``Requesting`` or devices marked ``Deleted_<time>`` (node unregistered)."""
    ann = node.annotations
    ann_idx = node.lines_of("Annotations")
    out: list[Finding] = []
    for key, value in ann.items():
        if key.startswith("hami.io/node-") and key.endswith("-register"):
            idx = [i for i in ann_idx if key in lines[i]]
            out += _hami_findings(ctx, piece, parse_hami_register(value), idx, _DESCRIBE_NODE, name)
    hs = ann.get("hami.io/node-handshake")
    deleted = [k for k, v in ann.items() if v.startswith("Deleted_")]
    if not (hs or deleted):
        return out
    state, when = handshake(hs or "")
    if not (deleted or state == "Requesting"):
        return out
    idx = [i for i in ann_idx if "handshake" in lines[i] or "Deleted_" in lines[i]]
    gone = [f"{k} {handshake(ann[k])[1]}" for k in deleted]
    out.append(make(_DESCRIBE_NODE, "hami_devices_deleted" if deleted else "hami_handshake_pending",
                    category="gpu-sharing", failure="device_registration_lost", severity="error",
                    meaning="HAMi's device plugin did not answer the scheduler's handshake "
                            f"(Requesting since {when or '?'})"
                            + (f"; devices marked Deleted ({', '.join(gone)}): the node is unregistered for "
                               "HAMi scheduling" if deleted else ""),
                    lines=ctx.src(idx, piece.start), entity={"node": name},
                    timestamps=[when or None] + [handshake(ann[k])[1] for k in deleted],
                    quantities={"handshake": state or None, "requested_at": when or None,
                                "deleted": ", ".join(gone) or None}))
    return out


def read_describe_node(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read ``kubectl describe node`` text (whole or excerpt): the node, its labels, taints, health
    (cordon, conditions), resources, HAMi annotations, then its events, in that order."""
    lines = ctx.lines(piece)
    node = parse_describe_node(lines)
    name = node.name or node.labels.get("kubernetes.io/hostname")
    kind = _DESCRIBE_NODE
    out = _node_head(ctx, piece, node, name)
    if node.labels:
        out += label_findings(ctx, piece, node.labels, node.lines_of("Labels"), kind, name)
    if node.taints:
        out += _taint_finding(ctx, piece, node.taints, node.lines_of("Taints"), name, kind)
    out += _node_health(ctx, piece, node, name)
    if node.capacity or node.allocatable or node.allocated:
        idx = [i for k, v in node.where.items() if k.startswith(("Capacity", "Allocatable", "Allocated")) for i in v]
        out += _resources_finding(ctx, piece, node.capacity, node.allocatable, idx, kind, name, node.allocated)
    out += _node_hami(ctx, piece, node, lines, name)
    if node.event_lines:
        event_rows = parse_event_rows([lines[i] for i in node.event_lines])
        for event in event_rows:
            event.lines = [piece.start + node.event_lines[i] for i in event.lines]
        out += event_findings(ctx, piece, event_rows, piece.start)
    return out


def read_describe_pod(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read ``kubectl describe pod``: pod-level Reason/Message (kubelet admission), container states
    (via the startup classifier), then events with ages and counts. Pod fields are never re-read as a
    Volcano condition."""
    lines = ctx.lines(piece)
    events_at = next((i for i, ln in enumerate(lines) if re.match(r"^\s*Events:", ln)), len(lines))
    out: list[Finding] = []
    name = next((m.group(1) for ln in lines[:5] for m in [re.match(r"^Name:\s+(\S+)", ln)] if m), None)
    status = {m.group(1): (m.group(2), i) for i, ln in enumerate(lines[:events_at])
              for m in [re.match(r"^(Status|Reason|Message):\s+(.*\S)", ln)] if m}
    body = "\n".join(lines[:events_at])
    for reason in parse_describe(body):
        if reason.detail.get("pod_reason") and "Reason" in status:
            idx = [status[k][1] for k in ("Status", "Reason", "Message") if k in status]
            out.append(reason_finding("describe-pod", reason, ctx.src(idx, piece.start), entity={"pod": name or ""}))
            continue
        idx = [i for i, ln in enumerate(lines[:events_at]) if re.search(
            r"^\s*(?:State|Last State|Reason|Message|Exit Code):", ln) or (
            reason.message[:40] and reason.message[:40] in re.sub(r"\s+", " ", ln))]
        out.append(reason_finding("describe-pod", reason, ctx.src(idx, piece.start), entity={"pod": name or ""}))
    if events_at < len(lines):
        rows = parse_event_rows(lines[events_at:])
        for row in rows:
            row.lines = [piece.start + events_at + i for i in row.lines]
        out += event_findings(ctx, piece, rows, piece.start)
    return out


def read_describe_volcano(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read ``kubectl describe queue`` (Spec Capability/Guarantee/Weight, Status counters) or a podgroup/vcjob."""
    lines = ctx.lines(piece)
    section = ""
    sub = ""
    q: dict[str, Value] = {}
    for line in lines:
        m = re.match(r"^(\s*)([\w ./-]+?):\s*(.*?)\s*$", line)
        if not m:
            continue
        depth, key, value = len(m.group(1)), m.group(2).strip(), m.group(3)
        if depth == 0:
            section, sub = key, ""
            if value:
                q[key.lower()] = value
            continue
        if not value:
            sub = key
            continue
        prefix = f"{section}.{sub}." if sub and depth > 2 else f"{section}."
        q[(prefix + key).lower().replace(" ", "_")] = value
    text = VolcanoText.of(q)
    job = _volcano_job(ctx, piece, text)
    if job is not None:
        return [job]
    queue, state = text.name, text.state
    cap = {k.split(".capability.", 1)[1]: v for k, v in q.items() if ".capability." in k}
    closed = isinstance(state, str) and state.lower() in ("closed", "closing")
    meaning = "Volcano queue" + (f" {queue}" if queue else "") + (
        ": capability " + ", ".join(f"{k} {v}" for k, v in cap.items()) if cap else "") + (
        f"; state {state}" if state else "") + (
        f"; inqueue {text.inqueue}" if text.inqueue is not None else "")
    return [_volcano_queue("describe-volcano", closed, bool(cap), text.inqueue, meaning, ctx.span(piece),
                           str(queue) if queue else None, q)]


class VolcanoText(NamedTuple):
    """``kubectl describe queue|vcjob|podgroup`` read once: ``fields`` (``section.sub.key``, lowercased, spaces as
    ``_`` -> value as printed) and those the readers use: the object's name, kind, phase, minimum members (Min
    Available / Min Member), queue state and Inqueue count (None, "" for kind, when not printed)."""

    fields: dict[str, Value]
    name: Value
    kind: str
    phase: Value
    minimum: Value
    state: Value
    inqueue: Value

    @classmethod
    def of(cls, q: dict[str, Value]) -> VolcanoText:
        """The facts of the flattened describe fields ``q``."""
        return cls(q, q.get("name") or q.get("metadata.name"), str(q.get("kind") or ""),
                   q.get("status.state.phase") or q.get("status.phase"),
                   q.get("status.min_available") or q.get("spec.min_available") or q.get("spec.min_member"),
                   q.get("status.state"), q.get("status.inqueue"))


_JOB_WAITING = ("pending", "inqueue", "aborting", "aborted", "restarting", "terminating", "terminated", "failed",
                "unknown")
"""Volcano Job / PodGroup phases in which the job's pods are not all running or done (batch.volcano.sh/v1alpha1
JobPhase, scheduling.volcano.sh PodGroupPhase)."""


def _volcano_job(ctx: Ctx, piece: Piece, text: VolcanoText) -> Finding | None:
    """A ``kubectl describe vcjob`` / ``describe podgroup`` status (``Min Available`` / ``Min Member`` and a
    ``Phase``), or None when the piece is a queue. A phase that is not Running/Completed is an error whose owner the
    status cannot decide (``volcano_job_waiting``: the PodGroup's conditions and events say why); else ok."""
    q, kind, phase, minimum, name = text.fields, text.kind, text.phase, text.minimum, text.name
    if kind == "Queue" or not (minimum is not None or kind in ("Job", "PodGroup")) or phase is None:
        return None
    counts = {k.split(".", 1)[1]: v for k, v in q.items()
              if k in ("status.pending", "status.running", "status.succeeded", "status.failed", "status.terminating")}
    facts = ", ".join(f"{v} {k}" for k, v in counts.items())
    what = ("Volcano PodGroup" if kind == "PodGroup" or "spec.min_member" in q else "Volcano Job") + (
        f" {name}" if name else "")
    meaning = f"{what}: phase {phase}" + (f", min available {minimum}" if minimum is not None else "") + (
        f"; {facts}" if facts else "")
    entity = {"job": str(name)} if name else {}
    if str(phase).lower() in _JOB_WAITING:
        return make("describe-volcano", "volcano_job_not_running", category="gang", failure="volcano_job_waiting",
                    severity="error", meaning=meaning, lines=ctx.span(piece), entity=entity, quantities=q)
    return make("describe-volcano", "volcano_job", category="gang", severity="ok", meaning=meaning,
                lines=ctx.span(piece), entity=entity, quantities=q)


def _volcano_queue(kind: str, closed: bool, capped: bool, inqueue: Value, meaning: str,
                   lines: tuple[SourceLine, ...], queue: str | None, q: dict[str, Value]) -> Finding:
    """A Volcano queue: closed is an error (``queue_inactive``); jobs waiting in a queue whose capability caps a
    resource (``Inqueue`` > 0) a warning of the queue's share (``team_share_exceeded``: the business sets the
    capability); otherwise a fact with no owner."""
    waiting = capped and str(inqueue or "0").isdecimal() and int(str(inqueue or "0")) > 0
    if closed:
        code, failure, severity = "queue_inactive", "queue_inactive", "error"
    elif waiting:
        code, failure, severity = "volcano_queue_jobs_waiting", "team_share_exceeded", "warning"
        meaning += ": job(s) wait in the queue under its capability (compare their requests with it)"
    else:
        code, failure, severity = "volcano_queue", None, "ok"
    return make(kind, code, category="queue", failure=failure, severity=severity, meaning=meaning, lines=lines,
                entity={"queue": queue}, quantities=q)


def read_describe_condition(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read a ``Message:/Reason:/Type:/Phase:`` condition excerpt (Volcano PodGroup describe)."""
    reasons = parse_podgroup_text("\n".join(ctx.lines(piece)))
    return [reason_finding("describe-condition", r, ctx.span(piece)) for r in reasons]


# --- tables ------------------------------------------------------------------------------------------

_POD_BAD = {
    "CrashLoopBackOff": "crash_loop", "ImagePullBackOff": "image_pull_failed", "ErrImagePull": "image_pull_failed",
    "OOMKilled": "oom_killed", "Error": "container_exit_nonzero",
    "CreateContainerConfigError": "container_config_error",
    "CreateContainerError": "container_start_error", "RunContainerError": "container_start_error",
    "UnexpectedAdmissionError": "device_allocation_failed", "Evicted": "node_pressure",
    "ErrImageNeverPull": "image_pull_failed", "InvalidImageName": "image_pull_failed",
    "ContainerStatusUnknown": "container_start_error", "StartError": "container_start_error",
}
"""``kubectl get pods`` STATUS (after the last ``:``, as in ``Init:CrashLoopBackOff``) -> reason code."""


class TableRow(NamedTuple):
    """A row of a ``kubectl get`` table, its cells cut at the header's column starts (``cells``: column -> text)
    and the cells the readers use: NAME, NAMESPACE (or NS), STATUS, READY, RESTARTS, AGE, NODE, USED and HARD
    (None where the table has no such column)."""

    cells: dict[str, str]
    name: str | None
    namespace: str | None
    status: str | None
    ready: str | None
    restarts: str | None
    age: str | None
    node: str | None
    used: str | None
    hard: str | None

    @classmethod
    def of(cls, cells: dict[str, str]) -> TableRow:
        """The row of ``cells``."""
        return cls(cells, cells.get("NAME"), cells.get("NS") or cells.get("NAMESPACE"), cells.get("STATUS"),
                   cells.get("READY"), cells.get("RESTARTS"), cells.get("AGE"), cells.get("NODE"), cells.get("USED"),
                   cells.get("HARD"))


def _quota_row(ctx: Ctx, piece: Piece, i: int, row: TableRow, used_text: str, hard_text: str) -> Finding:
    """A ``kubectl get resourcequota`` row: used/hard per resource, those at the limit named."""
    used: dict[str, str] = dict(re.findall(r"([\w./-]+):(\S+?)(?=[\s\]])", used_text))
    hard: dict[str, str] = dict(re.findall(r"([\w./-]+):(\S+?)(?=[\s\]])", hard_text))
    full = [k for k in hard if used.get(k) == hard[k]]
    ns = row.namespace
    usage = ", ".join(f"{k} {used.get(k, '?')}/{v}" for k, v in hard.items())
    return make("kubectl-table", "quota_usage", category="quota", severity="ok",
                meaning=f"ResourceQuota {row.name} in {ns}: {usage}"
                        + (f" (at the limit: {', '.join(full)})" if full else ""),
                lines=ctx.src([i], piece.start), entity={"namespace": ns},
                quantities={**{f"used.{k}": v for k, v in used.items()}, **{f"hard.{k}": v for k, v in hard.items()}})


def _node_row(ctx: Ctx, piece: Piece, i: int, row: TableRow) -> Finding:
    """A ``kubectl get nodes`` row: Ready, or NotReady / cordoned (``Ready,SchedulingDisabled``)."""
    status, name = row.status or "", row.name or ""
    ok = status.split(",")[0] == "Ready"
    extra = [s for s in status.split(",")[1:] if s]
    q: dict[str, Value] = {k.lower().replace("-", "_").replace(" ", "_"): v for k, v in row.cells.items()
                           if k not in ("NAME",) and v}
    if ok and not extra:
        return make("kubectl-table", "node", category="node", severity="ok",
                    meaning=f"node {name} Ready", lines=ctx.src([i], piece.start), entity={"node": name}, quantities=q)
    cordoned = "SchedulingDisabled" in extra and status.startswith("Ready")
    code = "node_unschedulable" if cordoned else "node_not_ready"
    return make("kubectl-table", code, category="node-health", failure=code, severity="error",
                meaning=f"node {name} is {status}",
                lines=ctx.src([i], piece.start), entity={"node": name}, quantities=q)


def _pod_row(ctx: Ctx, piece: Piece, i: int, row: TableRow) -> Finding:
    """A ``kubectl get pods`` row: running/completed, Pending (reason in the events), a known bad
    state (:data:`_POD_BAD`), or another state (ok while it is a normal transition)."""
    status, name, ready = row.status or "", row.name or "", row.ready or ""
    q: dict[str, Value] = {"ready": ready, "status": status, "restarts": row.restarts, "age": row.age,
                           "node": row.node}
    entity = {"pod": name, "namespace": row.namespace, "node": row.node}
    at = ctx.src([i], piece.start)
    base = status.split(":")[-1]
    if status in ("Running", "Completed", "Succeeded") and (status != "Running" or (
            ready.partition("/")[0] == ready.partition("/")[2])):
        return make("kubectl-table", "pod_running" if status == "Running" else "pod_completed", category="workload",
                    severity="ok", meaning=f"pod {name} {status} {ready}", lines=at, entity=entity,
                    quantities=q)
    if status == "Pending":
        return make("kubectl-table", "pod_pending", category="scheduling", severity="error",
                    meaning=f"pod {name} is Pending (the reason is in its events)", lines=at, entity=entity,
                    quantities=q)
    if base in _POD_BAD:
        from pytest_hetero.pending.model import make_reason

        reason = make_reason("kubelet", _POD_BAD[base], f"pod {name} {status}")
        return make("kubectl-table", reason.code, category=reason.category,
                    failure=reason_failure(reason.code, reason.cause),
                    severity="error", meaning=f"pod {name} is {status}", lines=at, entity=entity, quantities=q)
    transient = status in ("ContainerCreating", "PodInitializing", "Terminating")
    return make("kubectl-table", "pod_state", category="workload",
                severity="ok" if transient else "warning", meaning=f"pod {name} {status}", lines=at, entity=entity,
                quantities=q)


def read_table(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read ``kubectl get nodes|pods|resourcequota`` tables (several tables may follow each other):
    cells are cut at the header's column starts; the row kind is told by the columns."""
    lines = ctx.lines(piece)
    out: list[Finding] = []
    cols: list[tuple[str, int]] = []
    for i, line in enumerate(lines):
        if re.match(r"^\s*(?:NAMESPACE\s+|NS\s+)?NAME\s+", line):
            cols = [(m.group(0), m.start()) for m in re.finditer(r"[A-Z][A-Z-]*(?: [A-Z]+)?", line)]
            continue
        if not cols:
            continue
        cells: dict[str, str] = {}
        for j, (name, start) in enumerate(cols):
            end = cols[j + 1][1] if j + 1 < len(cols) else None
            cells[name] = line[start:end].strip()
        row = TableRow.of(cells)
        if row.used is not None and row.hard is not None:
            out.append(_quota_row(ctx, piece, i, row, row.used, row.hard))
        elif "ROLES" in cells or "VERSION" in cells:
            out.append(_node_row(ctx, piece, i, row))
        else:
            out.append(_pod_row(ctx, piece, i, row))
    return out


# --- objects -----------------------------------------------------------------------------------------


def _node_object(ctx: Ctx, piece: Piece, obj: KubeObject) -> list[Finding]:
    node = NodeObject.parse(obj)
    name = node.name
    out = _resources_finding(ctx, piece, node.capacity, node.allocatable, [0], "yaml", name)
    f = out[0]
    q = dict(f.quantities)
    q.update({f"address.{k}": v for k, v in node.addresses.items()})
    out[0] = make(f.kind, f.code, category=f.category, severity="ok", meaning=f.meaning,
                  lines=ctx.span(piece), entity=f.entity, quantities=q)
    if node.labels:
        out += label_findings(ctx, piece, node.labels, [0], "yaml", name)
    if node.taints:
        out += _taint_finding(ctx, piece, list(node.taints), [0], name, "yaml")
    for cond in node.conditions:
        ctype, cstat = str(cond.type), str(cond.status)
        if (ctype == "Ready" and cstat != "True") or (ctype != "Ready" and cstat == "True" and "Pressure" in ctype):
            code = "node_not_ready" if ctype == "Ready" else "node_pressure"
            out.append(make("yaml", code, category="node-health", failure=code, severity="error",
                            meaning=f"condition {ctype}={cstat}: {cond.message or ''}",
                            lines=ctx.span(piece, 1), entity={"node": name}))
    for register in node.hami_registers:
        out += _hami_findings(ctx, piece, parse_hami_register(register), [0], "yaml", name)
    return out


def _workload(ctx: Ctx, piece: Piece, obj: KubeObject) -> list[Finding]:
    reasons = pending_explain(dict(obj.whole))
    span = ctx.span(piece)
    name = obj.name or None
    out = [reason_finding("yaml", r, _lines_for(ctx, piece, r.message) or span[:1], entity={"workload": name or ""})
           for r in reasons]
    if out:
        return out
    workload = WorkloadObject.parse(obj)
    q: dict[str, Value] = {"cluster_queue": workload.cluster_queue}
    for ps in workload.assignments:
        q.update({f"flavor.{res}": flavor for res, flavor in ps.flavors.items()})
        q.update({f"usage.{res}": used for res, used in ps.usage.items()})
    conds = workload.conditions
    finished, admitted, quota = conds.get("Finished"), conds.get("Admitted"), conds.get("QuotaReserved")
    if finished is not None and finished.status == "True":
        code, meaning = "workload_finished", f"Workload finished: {finished.reason} {finished.message or ''}".strip()
    elif admitted is not None and admitted.status == "True":
        code, meaning = "workload_admitted", f"Workload admitted: {(quota.message or '') if quota is not None else ''}"
    else:
        code, meaning = "workload_pending", "Workload not admitted yet (no condition says why)"
    return [make("yaml", code, category="queue", severity="ok" if code != "workload_pending" else "warning",
                 meaning=meaning.strip(), lines=span[:1], entity={"workload": name}, quantities=q)]


def _lines_for(ctx: Ctx, piece: Piece, message: str) -> tuple[SourceLine, ...]:
    words = [w for w in re.findall(r"[\w./-]{4,}", message)][:6]
    if not words:
        return ()
    idx = [i for i, ln in enumerate(ctx.lines(piece)) if sum(w in ln for w in words) >= min(2, len(words))]
    return ctx.src(idx[:8], piece.start)


def _podgroup(ctx: Ctx, piece: Piece, obj: KubeObject) -> list[Finding]:
    reasons = pending_explain(dict(obj.whole))
    group = PodGroupObject.parse(obj)
    entity = {"podgroup": obj.name or "", "queue": group.queue}
    out = []
    for r in reasons:
        out.append(reason_finding("yaml", r, _lines_for(ctx, piece, r.message) or ctx.span(piece, 1), entity=entity))
    if out:
        return out
    phase = group.phase
    q: dict[str, Value] = {"phase": phase, "min_member": group.min_member,
                           **{f"min.{k}": v for k, v in group.min_resources.items()
                              if not k.startswith(("requests.", "limits."))}}
    if phase in ("Pending", "Inqueue"):
        return [make("yaml", "podgroup_pending", category="gang", severity="error",
                     meaning=f"PodGroup {phase} with no condition: the reason is only in its events "
                             "(kubectl describe podgroup / get events)", lines=_lines_for(ctx, piece, "phase: " + phase)
                     or ctx.span(piece, 1), entity=entity, quantities=q)]
    return [make("yaml", "podgroup", category="gang", severity="ok", meaning=f"PodGroup {phase}",
                 lines=ctx.span(piece, 1), entity=entity, quantities=q)]


def _vcjob(ctx: Ctx, piece: Piece, obj: KubeObject) -> list[Finding]:
    job = VcJobObject.parse(obj)
    phase = job.phase
    q: dict[str, Value] = {"phase": phase, "min_available": job.min_available, "pending": job.pending,
                           "running": job.running, "queue": job.queue}
    bad = phase in ("Pending", "Aborted", "Failed", "Terminated")
    return [make("yaml", "vcjob_pending" if phase == "Pending" else "vcjob", category="gang",
                 severity="error" if bad else "ok",
                 meaning=f"Volcano Job {obj.name} {phase}" + (" (the reason is in its PodGroup and events)"
                                                             if phase == "Pending" else ""),
                 lines=_lines_for(ctx, piece, "phase: " + phase) or ctx.span(piece, 1),
                 entity={"workload": obj.name or "", "queue": "" if job.queue is None else str(job.queue)},
                 quantities=q)]


def _queue(ctx: Ctx, piece: Piece, obj: KubeObject) -> list[Finding]:
    queue = QueueObject.parse(obj)
    q: dict[str, Value] = {"weight": queue.weight, "reclaimable": queue.reclaimable, "state": queue.state}
    for part, block in queue.blocks.items():
        q.update({f"{part}.{k}": v for k, v in block.items()})
        if part == "guarantee" and not block:
            q["guarantee"] = "{}"
    q.update(queue.counters)
    name = obj.name or None
    state = "" if queue.state is None else str(queue.state)
    closed = state.lower() in ("closed", "closing")
    capped = any(k.startswith("capability.") for k in q)
    return [_volcano_queue("yaml", closed, capped, q.get("inqueue"), f"Volcano queue {name} {state}",
                           ctx.span(piece, 1), name, q)]


_ITEM = re.compile(r"^(\s*)- ")
_ITEMS_KEY = re.compile(r"^\s*items:\s*$")
_EVENT_FIELD = re.compile(r"^\s*(?:message|reason|type|count):")
_KEY_LINE = re.compile(r"^\s*\w+:")
_MESSAGE_KEY = re.compile(r"^\s*message:")


def _item_ranges(lines: list[str]) -> list[tuple[int, int]]:
    """Line ranges of the top-level items of a YAML ``items:`` list (or a bare top-level list)."""
    starts: list[int] = []
    indent: int | None = None
    items_at = next((i for i, x in enumerate(lines) if "items:" in x and _ITEMS_KEY.match(x)), len(lines))
    for i, line in enumerate(lines):
        m = _ITEM.match(line)
        if m and (indent is None or len(m.group(1)) == indent):
            if indent is None and i > 0 and items_at >= i and lines[0][:1] != "-":
                continue
            indent = len(m.group(1))
            starts.append(i)
    return [(s, starts[n + 1] if n + 1 < len(starts) else len(lines)) for n, s in enumerate(starts)]


def _events_list(ctx: Ctx, piece: Piece, items: list[object]) -> list[Finding]:
    out: list[Finding] = []
    normal = 0
    lines = ctx.lines(piece)
    ranges = _item_ranges(lines)
    if len(ranges) != len(items):
        ranges = []
    for number, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        event = KubeEvent.parse(item)
        row = event.row
        reasons = classify_row(row)
        if not reasons:
            normal += 1
            continue
        if ranges:
            lo, hi = ranges[number]
            mine = [i for i in range(lo, hi) if _EVENT_FIELD.match(lines[i])]
            follow = [i + 1 for i in mine if _MESSAGE_KEY.match(lines[i])]
            more = [j for j in range(min(follow or [hi]), hi) if lines[j].startswith(" " * 4)
                    and not _KEY_LINE.match(lines[j])]
            idx = ctx.src(sorted(set(mine + more)), piece.start)
        else:
            idx = _lines_for(ctx, piece, row.message)
        for reason in reasons:
            f = reason_finding("yaml", reason, idx[:3], count=row.count, timestamps=event.timestamps,
                               entity={"object": row.object, "namespace": row.namespace})
            q = dict(f.quantities)
            q.update({"event_type": row.type, "event_reason": row.reason})
            meaning = f.meaning if f.code != "unrecognised" else f"{row.type} {row.reason}: {row.message}"
            out.append(make(f.kind, f.code, category=f.category, failure=f.failure, severity=f.severity,
                            meaning=meaning, lines=f.lines, entity=f.entity, count=f.count, timestamps=f.timestamps,
                            quantities=q))
    if normal:
        out.append(make("yaml", "events_normal", category="events", severity="ok",
                        meaning=f"{normal} Normal event(s) reporting progress", lines=ctx.span(piece, 1), count=normal))
    return out


def _settings(ctx: Ctx, piece: Piece, obj: KubeObject) -> list[Finding]:
    flat: dict[str, Value] = {}

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, Mapping):
            for k, val in node.items():
                walk(val, f"{prefix}.{k}" if prefix else str(k))
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{prefix}[{i}]")
        elif isinstance(node, (str, int, float, bool)):
            flat[prefix] = node

    walk(obj.whole, "")
    for key, value in list(flat.items()):
        if isinstance(value, str) and ("sharing:" in value or "migStrategy" in value):
            try:
                walk(yaml.safe_load(value), key)
            except yaml.YAMLError:
                pass
    short = {re.sub(r"^settings\.kubelet-device-plugins\.nvidia\.", "", k): v for k, v in flat.items()}
    replicas = next((v for k, v in short.items() if k.endswith("replicas")), None)
    meaning = "NVIDIA device-plugin settings" + (f": sharing replicas {replicas}" if replicas is not None else "")
    return [make("json", "device_plugin_settings", category="platform-config", severity="ok",
                 meaning=meaning, lines=ctx.span(piece), quantities=short)]


ObjectReader = Callable[[Ctx, Piece, KubeObject], list[Finding] | None]
"""Reads one shape of mapping: ``(ctx, piece, obj) -> findings``."""


def _read_list(ctx: Ctx, piece: Piece, obj: list[object]) -> list[Finding] | None:
    """A top-level list: HAMi device registrations, a bare list of events, or each item on its own
    (None when no item is understood)."""
    if is_hami_register(obj):
        return _hami_findings(ctx, piece, parse_hami_register(list(obj)), list(range(piece.end - piece.start)),
                              "json", None)
    if obj and all(isinstance(x, Mapping) and ("reason" in x and "message" in x) for x in obj):
        return _events_list(ctx, piece, obj)
    found: list[Finding] = []
    for item in obj:
        sub = read_object(ctx, piece, item)
        found += sub or []
    return found or None


def _dcgm_document(ctx: Ctx, piece: Piece, obj: KubeObject) -> list[Finding]:
    """A ``dcgmi diag -j`` document."""
    from pytest_hetero.explain.read_nvidia import dcgm_json_findings
    from pytest_hetero.probes.dcgm import parse_dcgm_json

    return dcgm_json_findings(ctx, piece, parse_dcgm_json(obj.whole))


def _item_list(ctx: Ctx, piece: Piece, obj: KubeObject) -> list[Finding]:
    """A ``kind: …List`` with ``items``: an event list as one, anything else item by item."""
    items = obj.items or []
    if obj.kind == "EventList" or all(isinstance(x, Mapping) and KubeObject.parse(x).kind == "Event" for x in items):
        return _events_list(ctx, piece, items)
    out: list[Finding] = []
    for item in items:
        out += read_object(ctx, piece, item) or []
    return out


def _status_has(obj: KubeObject, *keys: str) -> bool:
    """True when ``obj.status`` is a mapping holding one of ``keys``."""
    return obj.status is not None and any(key in obj.status for key in keys)


def _is_node(obj: KubeObject) -> bool:
    """A Node, or a kind-less object whose status reads like a node's."""
    return obj.kind == "Node" or (not obj.kind and _status_has(obj, "capacity", "allocatable", "nodeInfo"))


def _is_workload(obj: KubeObject) -> bool:
    """A Kueue Workload (by kind or API group), or a kind-less object whose status reads like one."""
    return obj.kind == "Workload" or "kueue" in obj.api or (
        not obj.kind and _status_has(obj, "resourceRequests", "admission"))


def _is_settings(obj: KubeObject) -> bool:
    """Device-plugin settings: a ``settings`` key or an embedded config with ``sharing:``/``migStrategy``."""
    return "settings" in obj.whole or any(isinstance(v, str) and ("sharing:" in v or "migStrategy" in v)
                                          for v in obj.whole.values())


def _is_label_map(obj: KubeObject) -> bool:
    """A flat map of ``prefix/name: value`` strings (node labels as JSON)."""
    return bool(obj.whole) and all(isinstance(k, str) and "/" in k and isinstance(v, str)
                                   for k, v in obj.whole.items())


def _label_map(ctx: Ctx, piece: Piece, obj: KubeObject) -> list[Finding]:
    return label_findings(ctx, piece, {str(k): str(v) for k, v in obj.whole.items()}, [0], "json", None)


def _single_event(ctx: Ctx, piece: Piece, obj: KubeObject) -> list[Finding]:
    return _events_list(ctx, piece, [obj.whole])


_OBJECT_SHAPES: tuple[tuple[Callable[[KubeObject], bool], ObjectReader], ...] = (
    (lambda obj: is_dcgm_json(obj.whole), _dcgm_document),
    (lambda obj: obj.items is not None, _item_list),
    (_is_node, _node_object),
    (_is_workload, _workload),
    (lambda obj: obj.kind == "PodGroup", _podgroup),
    (lambda obj: obj.kind == "Queue" and "volcano" in obj.api, _queue),
    (lambda obj: obj.kind == "Job" and "batch.volcano.sh" in obj.api, _vcjob),
    (lambda obj: obj.kind == "Event", _single_event),
    (_is_settings, _settings),
    (_is_label_map, _label_map),
)
"""(fits, reader) for the mapping shapes known by their keys, in priority order: ``fits(obj)`` picks the first
reader."""


def _other_object(ctx: Ctx, piece: Piece, obj: KubeObject) -> list[Finding] | None:
    """A mapping of no known shape: what the pending reasons explain says, else ``object`` (nothing
    blocking) when it looks like a Kubernetes object, else None."""
    reasons = pending_explain(dict(obj.whole))
    if reasons:
        return [reason_finding("yaml", r, _lines_for(ctx, piece, r.message) or ctx.span(piece, 1)) for r in reasons]
    if obj.kind or "status" in obj.whole or "conditions" in obj.whole:
        return [make("yaml", "object", category="kubernetes", severity="ok",
                     meaning=f"{obj.kind or 'object'} with nothing blocking", lines=ctx.span(piece, 1))]
    return None


def read_object(ctx: Ctx, piece: Piece, obj: object) -> list[Finding] | None:
    """Findings for a parsed YAML/JSON value (a list, or a mapping read by the first of
    :data:`_OBJECT_SHAPES` that fits), or None when its shape is not one this reader knows."""
    if isinstance(obj, list):
        return _read_list(ctx, piece, obj)
    if not isinstance(obj, Mapping):
        return None
    parsed = KubeObject.parse(obj)
    for fits, read in _OBJECT_SHAPES:
        if fits(parsed):
            return read(ctx, piece, parsed)
    return _other_object(ctx, piece, parsed)


def read_yaml(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Parse a YAML piece (dedented) and read each document."""
    lines = ctx.lines(piece)
    indent = min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
    text = "\n".join(ln[indent:] for ln in lines)
    try:
        docs = [d for d in fast_yaml.load_all(text) if d is not None]
    except (yaml.YAMLError, RecursionError, ValueError):
        from pytest_hetero.explain.read_text import read_text

        return read_text(ctx, piece)
    out: list[Finding] = []
    for doc in docs:
        out += read_object(ctx, piece, doc) or []
    return out


def read_json(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Parse a JSON piece and read it; text that does not parse is read as free text."""
    text = "\n".join(ctx.lines(piece))
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        from pytest_hetero.explain.read_text import read_text

        return read_text(ctx, piece)
    from pytest_hetero.explain.read_nvtools import health_json

    found = health_json(ctx, piece, obj)
    if found is None:
        found = read_object(ctx, piece, obj)
    if found is None:
        return [make("json", "unrecognised", category="unrecognised", severity="unrecognised",
                     meaning="a JSON value of a shape no reader knows", lines=ctx.span(piece, 3))]
    return found


def read_labels(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``key=value`` label lines or ``"key": "value",`` fragments -> ``node_labels``; ``node=`` context."""
    lines = ctx.lines(piece)
    labels: dict[str, str] = {}
    for line in lines:
        frag = re.match(r'^\s*"([^"]+)"\s*:\s*"?([^",]*)"?\s*,?\s*$', line)
        if frag:
            labels[frag.group(1)] = frag.group(2)
            continue
        for key, value in re.findall(r"([\w./-]+)=(\S*)", line):
            labels[key] = value
    node = labels.get("node")
    if set(labels) <= {"captured_at", "node", "namespace", "pod", "cluster"}:
        return [make("labels", "context", category="context", severity="ok",
                     meaning="capture context: " + ", ".join(f"{k}={v}" for k, v in labels.items()),
                     lines=ctx.span(piece), entity={"node": node}, timestamps=[labels.get("captured_at")])]
    return label_findings(ctx, piece, labels, list(range(len(lines))), "labels", node)


def read_resources(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Resource lines grep'd out of ``kubectl describe node``: ``name: N`` (capacity or allocatable, not
    told apart by the excerpt) and ``name  req  lim`` (Allocated resources)."""
    lines = ctx.lines(piece)
    listed: dict[str, str] = {}
    allocated: dict[str, tuple[str, str]] = {}
    for line in lines:
        m = re.match(r"^\s*([\w./-]+):\s+(\S+)\s*$", line)
        if m:
            listed[m.group(1)] = m.group(2)
            continue
        m = re.match(r"^\s*([\w./-]+)\s+(\S+(?:\s+\(\d+%\))?)\s+(\S+(?:\s+\(\d+%\))?)\s*$", line)
        if m:
            allocated[m.group(1)] = (m.group(2), m.group(3))
    q: dict[str, Value] = {f"listed.{k}": v for k, v in listed.items()}
    for k, (req, lim) in allocated.items():
        q[f"allocated.{k}.requests"] = req
        q[f"allocated.{k}.limits"] = lim
    meaning = "node resources: " + ", ".join(f"{k} {v}" for k, v in listed.items()) + (
        "; allocated " + ", ".join(f"{k} {r}/{lim}" for k, (r, lim) in allocated.items()) if allocated else "")
    return [make("resources", "node_resources", category="node", severity="ok", meaning=meaning,
                 lines=ctx.span(piece), quantities=q)]


READERS: dict[str, Callable[[Ctx, Piece], list[Finding]]] = {
    "events": read_events,
    "describe-node": read_describe_node,
    "describe-pod": read_describe_pod,
    "describe-volcano": read_describe_volcano,
    "describe-condition": read_describe_condition,
    "kubectl-table": read_table,
    "yaml": read_yaml,
    "json": read_json,
    "labels": read_labels,
    "resources": read_resources,
}
"""Block kind -> reader, for the Kubernetes kinds."""
