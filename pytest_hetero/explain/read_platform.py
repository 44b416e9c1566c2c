"""Readers of platform component logs and queue objects no older reader knew.

* Huawei MindX DL ``hwlog`` (Ascend device plugin, NPU exporter, noded): ``[LEVEL] date time pid file:line msg``.
  Startup facts (version, scene, DCMI version, chip name, device type) are read from the device plugin's own
  messages; ``ERROR`` lines go through the line classifier (``unrecognised`` when not understood).
* Kueue ``kubectl describe workload`` (``Admission Checks:`` and ``Conditions:`` sections) and ``kubectl get
  workloads`` (both column layouts).
* Kubernetes component (klog) lines with a device meaning: kubelet's ``ListAndWatch ended unexpectedly for
  device plugin``, ``Error syncing pod`` behind an OCI runtime hook (Ascend Docker Runtime), the kubelet's log
  writer noise, and the HAMi scheduler's filter/score lines (device usage and the request it scores).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.explain.blocks import Piece
from pytest_hetero.explain.claim_nvidia import HWLOG, KUEUE_TABLE
from pytest_hetero.explain.context import Ctx, make
from pytest_hetero.explain.model import Finding, Value

_PLUGIN_FACTS = (
    ("version", re.compile(r"device plugin starting and the version is (\S+)")),
    ("scene", re.compile(r"device plugin starting scene is (\S+)")),
    ("dcmi_version", re.compile(r"the dcmi version is (\S+)")),
    ("chip_name", re.compile(r"chipInfoName: ([^,\s]+)")),
    ("dev_type", re.compile(r"devType:\s*(\S+)")),
)


def read_hwlog(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``hwlog`` lines: ``component_log`` (INFO/WARN/DEBUG, with the device plugin's startup facts and the
    level counts), each ``ERROR``/``CRITICAL`` line classified (``unrecognised`` when no reader knows it)."""
    from pytest_hetero.explain.read_text import classify_lines

    lines = ctx.lines(piece)
    levels: Counter[str] = Counter()
    facts: dict[str, Value] = {}
    infos: list[int] = []
    stamps: list[str] = []
    out: list[Finding] = []
    warnings: list[str] = []
    for i, line in enumerate(lines):
        m = HWLOG.match(line)
        if not m:
            continue
        level = m.group("level")
        levels[level] += 1
        for key, pattern in _PLUGIN_FACTS:
            f = pattern.search(m.group("msg"))
            if f and key not in facts:
                facts[key] = f.group(1)
        if level in ("ERROR", "CRITICAL"):
            found = classify_lines(ctx, piece, [i], kind="hwlog")
            known = [x for x in found if x.severity != "unrecognised"]
            out.extend(known or [make("hwlog", "unrecognised", category="unrecognised",
                                      severity="unrecognised",
                                      meaning="an error-level hwlog line no reader understands",
                                      lines=ctx.src([i], piece.start), timestamps=[m.group("date")])])
            continue
        if level == "WARN":
            warnings.append(m.group("msg").strip())
        infos.append(i)
        stamps.append(m.group("date"))
    if infos:
        q: dict[str, Value] = {**facts, **{f"{k.lower()}_lines": v for k, v in levels.items()}}
        q.setdefault("error_lines", 0)
        if warnings:
            q["warnings"] = " | ".join(warnings)
        what = "Ascend device plugin startup" if "version" in facts else "hwlog component log"
        out.append(make("hwlog", "component_log", category="log", severity="ok",
                        meaning=f"{what}: {len(infos)} informational line(s)"
                                + (f" ({len(warnings)} warning(s))" if warnings else ""),
                        lines=ctx.src(infos, piece.start), timestamps=stamps, count=len(infos), quantities=q))
    out.sort(key=lambda f: f.lines[0].number if f.lines else 0)
    return out


def _fields(lines: list[str], start: int, end: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines[start:end]:
        m = re.match(r"^\s*([A-Z][\w ]*?):\s*(.*?)\s*$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


class KueueEntry(msgspec.Struct, frozen=True, kw_only=True, rename={
        "name": "Name", "state": "State", "type": "Type", "status": "Status", "message": "Message",
        "last_transition_time": "Last Transition Time"}):
    """One ``Admission Checks:`` or ``Conditions:`` entry of ``kubectl describe workload``: its Name, State
    (admission checks), Type, Status (conditions), Message and Last Transition Time, as printed (``Field:
    value``); None for a field the entry does not print."""

    name: str | None = None
    state: str | None = None
    type: str | None = None
    status: str | None = None
    message: str | None = None
    last_transition_time: str | None = None

    @classmethod
    def of(cls, fields: dict[str, str]) -> KueueEntry:
        """The entry of an excerpt's ``Field: value`` pairs (other fields are not read)."""
        return msgspec.convert(fields, cls)


class _WorkloadRow(msgspec.Struct, frozen=True, kw_only=True, rename="upper"):
    """The cells of a ``kubectl get workloads`` row the reader names (by their column, ``NAME``, ``QUEUE``,
    ``AGE``; None: no such column)."""

    name: str | None = None
    queue: str | None = None
    age: str | None = None


def _kueue_entries(lines: list[str]) -> tuple[list[KueueEntry], list[KueueEntry]]:
    """``(admission checks, conditions)`` of a describe-workload excerpt: each entry's ``Field: value`` pairs
    (a new entry starts at each ``Last Transition Time:``, the first field kubectl prints for both)."""
    sections: list[tuple[str, int, int]] = []
    head: tuple[str, int] | None = None
    for i, line in enumerate(lines):
        m = re.match(r"^\s*(Admission Checks|Conditions):\s*$", line)
        if m:
            if head:
                sections.append((head[0], head[1], i))
            head = (m.group(1), i)
    if head:
        sections.append((head[0], head[1], len(lines)))
    checks: list[KueueEntry] = []
    conditions: list[KueueEntry] = []
    for name, start, end in sections:
        cuts = [i for i in range(start + 1, end) if re.match(r"^\s*Last Transition Time\s*:", lines[i])]
        if not cuts or cuts[0] != start + 1:
            cuts.insert(0, start + 1)
        for a, b in zip(cuts, cuts[1:] + [end], strict=False):
            (checks if name == "Admission Checks" else conditions).append(KueueEntry.of(_fields(lines, a, b)))
    return checks, conditions


def read_kueue_describe(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``Admission Checks:`` entries (name, state, message) and ``Conditions:`` of a Kueue Workload. A workload
    with ``QuotaReserved`` True and no ``Admitted`` True is reserved, not admitted: ``workload_not_admitted``
    names the admission checks still ``Pending``/``Retry``/``Rejected``."""
    checks, conditions = _kueue_entries(ctx.lines(piece))
    true = {c.type for c in conditions if c.status == "True"}
    out: list[Finding] = []
    for c in checks:
        out.append(make("kueue-describe", "admission_check", category="inventory", severity="ok",
                        meaning=f"admission check {c.name}: {c.state}", lines=ctx.span(piece),
                        entity={"admission_check": c.name},
                        quantities={"state": c.state, "message": c.message or None,
                                    "last_transition_time": c.last_transition_time}))
    q: dict[str, Value] = {"conditions": ",".join(f"{c.type}={c.status}" for c in conditions) or None}
    if "QuotaReserved" in true and "Admitted" not in true:
        waiting = [c for c in checks if c.state not in ("Ready",)]
        q.update(quota_reserved=True, admitted=False,
                 pending_checks=",".join(f"{c.name}={c.state}" for c in waiting) or None,
                 quota_message=next((c.message for c in conditions if c.type == "QuotaReserved"), None))
        out.append(make("kueue-describe", "workload_not_admitted", category="queue", failure="workload_not_admitted",
                        severity="warning",
                        meaning="quota reserved but not admitted: "
                                + (f"admission check(s) {q['pending_checks']} have not passed" if waiting
                                   else "no Admitted condition yet"),
                        lines=ctx.span(piece), quantities=q))
    else:
        out.append(make("kueue-describe", "workload_conditions", category="queue",
                        severity="ok" if "Admitted" in true or not conditions else "warning",
                        meaning=f"workload conditions: {q['conditions'] or 'none'}", lines=ctx.span(piece),
                        quantities=q))
    return out


def read_kueue_workloads(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``kubectl get workloads``: one ``kueue_workload`` per row (name, queue, the ClusterQueue in ``RESERVED IN``
    or ``ADMITTED BY``, ``ADMITTED``/``FINISHED`` when printed, age). The old ``ADMITTED BY`` column names the
    ClusterQueue that reserved quota; it is not proof that admission checks passed."""
    lines = ctx.lines(piece)
    header = lines[0]
    cols = [(m.group(0), m.start()) for m in re.finditer(r"[A-Z]+(?: [A-Z]+)?(?= {2,}|$)", header.rstrip())]
    out: list[Finding] = []
    if not KUEUE_TABLE.match(header):
        return out
    for i, line in enumerate(lines[1:], 1):
        if not line.strip():
            continue
        cells: dict[str, str] = {}
        for n, (name, at) in enumerate(cols):
            end = cols[n + 1][1] if n + 1 < len(cols) else len(line)
            cells[name] = line[at:end].strip() if at < len(line) else ""
        q: dict[str, Value] = {k.lower().replace(" ", "_"): v for k, v in cells.items() if v and k != "NAME"}
        row = msgspec.convert(cells, _WorkloadRow)
        meaning = f"workload {row.name} in queue {row.queue}"
        if "ADMITTED BY" in cells:
            meaning += f"; ADMITTED BY {cells['ADMITTED BY']} names the ClusterQueue that reserved quota " \
                       "(admission checks are not shown: describe the workload)"
        out.append(make("kueue-workloads", "kueue_workload", category="inventory", severity="ok",
                        meaning=meaning, lines=ctx.src([i], piece.start),
                        entity={"workload": row.name, "queue": row.queue}, age=row.age,
                        quantities=q))
    return out


_LIST_WATCH = re.compile(r'ListAndWatch ended unexpectedly for device plugin"?\s+err="(?P<err>[^"]*)"'
                         r'(?:\s+resource="(?P<res>[^"]+)")?')
_LOG_WRITE = re.compile(r'Failed when writing line to log file"?\s+err="(?P<err>[^"]*)"(?:\s+path="(?P<path>[^"]+)")?')
_SYNC = re.compile(r'Error syncing pod, skipping"?\s+err="(?P<err>.*)"\s+pod="(?P<pod>[^"]+)"')
_HOOK = re.compile(r"(?P<hook>/\S*ascend-docker-runtime|/\S*nvidia-container-runtime(?:-hook)?|nvidia-container-cli)"
                   r"[^\"]*?(?:did not terminate successfully: exit status (?P<status>\d+)|: (?P<why>[^\"\\]+))")
_CONTAINER = re.compile(r'for \\*"(?P<c>[\w.-]+)\\*" with (?P<state>\w+):')
_HAMI_USAGE = re.compile(r"usage: pod (?P<pod>\S+) assigned (?P<node>\S+) \[\[\{(?P<idx>\d+) (?P<uuid>\S+) "
                         r"(?P<type>\S+) "
                         r"(?P<mem>\d+) (?P<cores>\d+)\}\]\]")
_HAMI_JSON = {k: re.compile(rf'"{k}":(?P<v>"[^"]*"|[\w.]+)') for k in (
    "Index", "Used", "Count", "Usedmem", "Totalmem", "Totalcore", "Usedcores", "Numa", "Type", "Health")}
_HAMI_REQ = re.compile(r'"scoring pod" Memreq=(?P<mem>\d+) MemPercentagereq=(?P<pct>\d+) Coresreq=(?P<cores>\d+) '
                       r'Nums=(?P<nums>\d+)(?: device index=(?P<idx>\d+))?(?: device="(?P<dev>[^"]+)")?')
_HAMI_FILTER = re.compile(r'"begin schedule filter" pod="(?P<pod>[^"]+)"(?: uuid="[^"]*")?'
                          r'(?: namespaces?="(?P<ns>[^"]+)")?')


def _value(raw: str) -> Value:
    raw = raw.strip('"')
    if raw in ("true", "false"):
        return raw == "true"
    return int(raw) if raw.isdigit() else raw


def _list_watch(ctx: Ctx, piece: Piece, i: int, line: str, stamp: str | None) -> Finding | None:
    lw = _LIST_WATCH.search(line)
    if not lw:
        return None
    return make("klog", "device_plugin_disconnected", category="device-plugin", failure="device_plugin_disconnected",
                severity="error",
                meaning=f"kubelet lost the device plugin's ListAndWatch stream ({lw.group('err')}) for "
                        f"{lw.group('res') or 'its resource'}: the plugin restarted or crashed, its devices are "
                        "unadvertised until it re-registers", lines=ctx.src([i], piece.start), timestamps=[stamp],
                quantities={"resource": lw.group("res"), "error": lw.group("err")})


def _log_write(ctx: Ctx, piece: Piece, i: int, line: str, stamp: str | None) -> Finding | None:
    lg = _LOG_WRITE.search(line)
    if not lg:
        return None
    pod = re.search(r"/var/log/pods/(?P<ns>[\w.-]+?)_(?P<pod>[\w.-]+)_", lg.group("path") or "")
    return make("klog", "kubelet_log_write_failed", category="log", severity="ok",
                meaning=f"kubelet could not write a container log line ({lg.group('err')}): log loss, not a device "
                        "fault", lines=ctx.src([i], piece.start), timestamps=[stamp],
                entity={"namespace": pod.group("ns") if pod else None, "pod": pod.group("pod") if pod else None},
                quantities={"error": lg.group("err"), "path": lg.group("path")})


def _runtime_hook(ctx: Ctx, piece: Piece, i: int, line: str, stamp: str | None) -> Finding | None:
    sync = _SYNC.search(line)
    hook = _HOOK.search(line) if sync else None
    if not (sync and hook):
        return None
    ns, _, pod = sync.group("pod").partition("/")
    c = _CONTAINER.search(sync.group("err"))
    name = hook.group("hook").rsplit("/", 1)[-1]
    return make("klog", "runtime_hook_failed", category="runtime-hook", failure="runtime_hook_failed",
                severity="error",
                meaning=f"the OCI runtime hook {name} failed while creating the container"
                        + (f" (exit status {hook.group('status')})" if hook.group("status") else "")
                        + ": the node's accelerator container runtime could not set the device up",
                lines=ctx.src([i], piece.start), timestamps=[stamp],
                entity={"namespace": ns, "pod": pod, "container": c.group("c") if c else None},
                quantities={"hook": hook.group("hook"),
                            "exit_status": int(hook.group("status")) if hook.group("status") else None,
                            "state_reason": c.group("state") if c else None})


def _hami_line(line: str, usage: dict[str, Value]) -> bool:
    """Fold one HAMi scheduler filter/score line into ``usage``; False when the line is none of them."""
    f = _HAMI_FILTER.search(line)
    if f:
        usage.update(pod=f.group("pod"), namespace=f.group("ns"))
        return True
    u = _HAMI_USAGE.search(line)
    if u:
        usage.update(node=u.group("node"), holder_pod=u.group("pod"), device_uuid=u.group("uuid"),
                     holder_mem_mib=int(u.group("mem")), holder_cores=int(u.group("cores")))
        for key, pattern in _HAMI_JSON.items():
            m = pattern.search(line)
            if m:
                usage[f"device_{key.lower()}"] = _value(m.group("v"))
        return True
    if '"fitInDevices"' in line or "Allocating device for container request" in line:
        req = re.search(r"request \{(?P<nums>\d+) (?P<type>\S+) (?P<mem>\d+) (?P<pct>\d+) (?P<cores>\d+)\}", line)
        if req:
            usage.update(request_type=req.group("type"))
        return True
    r = _HAMI_REQ.search(line)
    if r:
        usage.update(request_mem_mib=int(r.group("mem")), request_cores=int(r.group("cores")),
                     request_devices=int(r.group("nums")))
        return True
    return False


_KLOG_LINE_READERS = (_list_watch, _log_write, _runtime_hook)


def klog_device_lines(ctx: Ctx, piece: Piece, lines: list[str], stamp_of: Callable[[int], str | None]) -> tuple[
        list[Finding], set[int]]:
    """Findings of the klog lines this module understands (see the module docstring) and the indexes read."""
    out: list[Finding] = []
    used: set[int] = set()
    usage: dict[str, Value] = {}
    usage_at: list[int] = []
    for i, line in enumerate(lines):
        found = next((f for read in _KLOG_LINE_READERS for f in (read(ctx, piece, i, line, stamp_of(i)),) if f), None)
        if found is not None:
            out.append(found)
            used.add(i)
        elif _hami_line(line, usage):
            used.add(i)
            usage_at.append(i)
    if usage_at:
        out.append(_hami_verdict(ctx, piece, usage, usage_at, stamp_of))
    return out, used


def _hami_verdict(ctx: Ctx, piece: Piece, q: dict[str, Value], at: list[int],
                  stamp_of: Callable[[int], str | None]) -> Finding:
    """The HAMi scheduler's view of one card for one pod: cores/memory/shares left vs the request."""
    def num(key: str) -> int | None:
        v = q.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    total_c, used_c, req_c = num("device_totalcore"), num("device_usedcores"), num("request_cores")
    total_m, used_m, req_m = num("device_totalmem"), num("device_usedmem"), num("request_mem_mib")
    count, used_n = num("device_count"), num("device_used")
    short: list[str] = []
    if total_c is not None and used_c is not None and req_c is not None and used_c + req_c > total_c:
        short.append(f"cores {used_c}/{total_c} used, {req_c} asked")
    if total_m is not None and used_m is not None and req_m is not None and used_m + req_m > total_m:
        short.append(f"memory {used_m}/{total_m} MiB used, {req_m} asked")
    if count is not None and used_n is not None and used_n >= count:
        short.append(f"shares {used_n}/{count} used")
    entity = {"node": q.get("node"), "pod": q.get("pod"), "namespace": q.get("namespace"),
              "uuid": q.get("device_uuid")}
    lines = ctx.src(at, piece.start)
    stamps = [stamp_of(at[0]), stamp_of(at[-1])]
    if short:
        return make("klog", "vgpu_capacity_committed", category="gpu-sharing", failure="vgpu_capacity_committed",
                    severity="error",
                    meaning="HAMi: the node's card cannot take the pod: " + "; ".join(short)
                            + f" (held by {q.get('holder_pod')})", lines=lines, entity=entity, timestamps=stamps,
                    quantities={**q, "short_of": ", ".join(s.split()[0] for s in short)})
    return make("klog", "hami_device_usage", category="inventory", severity="ok",
                meaning="HAMi scheduler device usage and request", lines=lines, entity=entity, timestamps=stamps,
                quantities=q)


READERS: dict[str, Callable[[Ctx, Piece], list[Finding]]] = {
    "hwlog": read_hwlog,
    "kueue-describe": read_kueue_describe,
    "kueue-workloads": read_kueue_workloads,
}
"""Block kind -> reader for this module's kinds."""


resolve(__name__)
