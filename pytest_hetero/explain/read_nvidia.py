"""NVIDIA blocks -> findings: nvidia-smi (table, ``-q``, ``-q -x``), DCGM, kernel logs, klog."""

from __future__ import annotations

import re
from collections.abc import Callable

from pytest_hetero.errors import ParseError
from pytest_hetero.explain.blocks import Piece
from pytest_hetero.explain.context import Ctx, first_line, make
from pytest_hetero.explain.model import Finding, SourceLine, Value
from pytest_hetero.probes import line_prefix
from pytest_hetero.probes.dcgm import DcgmDiag, classify_warning, parse_dcgm_discovery, parse_dcgm_table
from pytest_hetero.probes.kernel_log import KernelLog, KernelRecord, read_kernel_log
from pytest_hetero.probes.model import Device, Inventory
from pytest_hetero.probes.nvidia_query import parse_nvidia_smi_query
from pytest_hetero.probes.nvidia_table import parse_nvidia_smi_table
from pytest_hetero.probes.nvidia_xid import parse_xid_log
from pytest_hetero.probes.nvidia_xml import parse_nvidia_smi_xml
from pytest_hetero.probes.xid_codes import xid_info

SMI_EXIT: dict[int, str] = {
    2: "invalid argument", 3: "the operation is not available on the target device", 4: "no permission",
    6: "the query was not successful", 8: "external power cables are not attached",
    9: "the NVIDIA driver is not loaded",
    10: "the NVIDIA kernel detected an interrupt issue with a GPU", 12: "NVML shared library could not be found",
    13: "the local NVML does not implement this function", 14: "the infoROM is corrupted",
    15: "the GPU has fallen off the bus or has become inaccessible", 255: "other error or internal driver error",
}
"""``nvidia-smi`` exit codes (nvidia-smi(1) man page, RETURN VALUE)."""

_GLOBAL = (
    (re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
     "nvidia_driver_not_loaded", "nvidia-smi cannot reach the NVIDIA driver: the kernel module is not loaded"),
    (re.compile(r"NVIDIA-SMI couldn't find libnvidia-ml\.so"), "nvidia_driver_library_missing",
     "libnvidia-ml.so is not found: the driver's user-space libraries are not installed or not mounted"),
    (re.compile(r"Failed to initialize NVML: Driver/library version mismatch"), "nvml_version_mismatch",
     "the loaded kernel driver and the NVML library differ (driver upgraded without reboot or reload)"),
    (re.compile(r"Failed to initialize NVML"), "nvml_init_failed", "NVML could not be initialised"),
    (re.compile(r"No devices were found"), "no_gpu_found", "the driver sees no NVIDIA GPU"),
    (re.compile(r"nvidia-smi: (?:command )?not found"), "nvidia_smi_missing", "nvidia-smi is not installed here"),
)


def _index_of(lines: list[str], needle: str, start: int = 0) -> int | None:
    for i in range(start, len(lines)):
        if needle in lines[i]:
            return i
    return None


def _device_quantities(dev: Device) -> dict[str, Value]:
    q: dict[str, Value] = {
        "memory_total_mib": dev.memory_total_mib,
        "memory_used_mib": dev.memory_used_mib,
        "temperature_c": dev.temperature_c,
        "power_w": dev.power_w,
        "power_limit_w": dev.power_limit_w,
        "utilisation_pct": dev.utilisation_pct,
        "health_raw": dev.health_raw,
    }
    for key, value in dev.extra.items():
        if isinstance(value, (str, int, float, bool)) or value is None:
            q.setdefault(key, value)
        elif isinstance(value, list):
            q.setdefault(key, ", ".join(str(x) for x in value) or None)
        elif isinstance(value, dict):
            for sub, val in value.items():
                if isinstance(val, (str, int, float, bool)):
                    q.setdefault(f"{key}.{sub}", val)
    if dev.processes:
        q["processes"] = len(dev.processes)
    if dev.partitions:
        q["mig_devices"] = len(dev.partitions)
    return q


def _device_code(dev: Device) -> tuple[str, str, str | None, str]:
    """(code, severity, failure, meaning) for one GPU (``failure``: the failure-table category)."""
    errors = " ".join(dev.errors).lower()
    if dev.health == "critical":
        for needle, code, meaning in (
            ("device handle", "gpu_lost", "nvidia-smi cannot open this GPU (fallen off the bus or hung)"),
            ("fields unreadable", "gpu_lost", "most fields are unreadable: the GPU is probably lost or hung"),
            ("row remapping pending", "gpu_row_remap_pending",
             "rows are waiting to be remapped: the GPU needs a reset before new work"),
            ("row remapping failure", "gpu_row_remap_failed", "row remapping failed: the GPU needs service"),
            ("retired pages pending", "gpu_retired_pages_pending", "memory pages wait for retirement: reset needed"),
            ("uncorrectable ecc errors", "gpu_ecc_uncorrectable", "volatile uncorrectable ECC errors on this GPU"),
            ("reset required", "gpu_reset_required", "the driver asks for a GPU reset"),
            ("unreadable", "gpu_lost", "most fields are unreadable: the GPU is probably lost or hung"),
        ):
            if needle in errors:
                return code, "error", "gpu_reset_needed" if code == "gpu_reset_required" else "gpu_hardware_fault", \
                    meaning
        return "gpu_unhealthy", "error", "gpu_hardware_fault", "; ".join(dev.errors) or "GPU reported unhealthy"
    if dev.health == "warning":
        unread = "; ".join(dev.errors)
        return "gpu_field_unreadable", "warning", "gpu_hardware_fault", "nvidia-smi could not read: " + unread
    return "gpu_ok", "ok", None, "GPU healthy"


_REPORT_HEADER = re.compile(
    r"NVIDIA-SMI \S|Driver Version|CUDA Version|KMD Version|Timestamp|Attached GPUs|<driver_version>|"
    r"<cuda_version>|<timestamp>|<attached_gpus>|^\s*\w{3} \w{3} +\d"
)
"""Lines of an nvidia-smi report's header (table banner, ``-q`` and XML summary fields, the date line)."""
_DEVICE_PROBLEM = re.compile(
    r"Pending\s*:\s*Yes|Uncorrectable Error\s*:\s*[1-9]|Remapping Failure Occurred\s*:\s*Yes|"
    r"Reset Required\s*:\s*Yes|ERR!|Unknown Error|<pending>Yes|<remapping_failure_occurred>Yes"
)
"""``-q``/XML lines that show why a GPU is unhealthy."""


def _report_finding(ctx: Ctx, piece: Piece, inv: Inventory, kind: str, lines: list[str]) -> list[Finding]:
    """The ``gpu_report`` header finding: driver, CUDA, tool version, GPUs listed/attached, DTD."""
    if not (inv.tool_version or inv.driver_version or inv.devices or inv.timestamp):
        return []
    header = [i for i, ln in enumerate(lines[:12]) if _REPORT_HEADER.search(ln)]
    header += [i for i, ln in enumerate(lines) if "Attached GPUs" in ln or "<attached_gpus>" in ln or "DOCTYPE" in ln]
    dtd = re.search(r"(nvsmi_device_v\d+\.dtd)", "\n".join(lines[:5]))
    cuda_printed = inv.extra.get("cuda_version_printed") if isinstance(inv.extra, dict) else None
    vgpu = inv.extra.get("vgpu_driver_capability")
    attached = f" of {inv.attached_count} attached" if inv.attached_count not in (None, len(inv.devices)) else ""
    return [make(
        kind, "gpu_report", category="inventory", severity="ok",
        meaning=f"NVIDIA driver {inv.driver_version or '?'}, CUDA {inv.cuda_version or cuda_printed or '?'}, "
                f"{len(inv.devices)} GPU(s) listed{attached}",
        lines=ctx.src(header or [0], piece.start), timestamps=[inv.timestamp],
        quantities={"driver_version": inv.driver_version, "cuda_version": inv.cuda_version or (
            str(cuda_printed) if cuda_printed else None), "tool_version": inv.tool_version,
            "attached_gpus": inv.attached_count, "gpus_listed": len(inv.devices),
            "dtd": dtd.group(1) if dtd else None,
            "vgpu_driver_capability": ", ".join(f"{k}: {v}" for k, v in vgpu.items())
            if isinstance(vgpu, dict) else None,
            "processes_section": inv.extra.get("processes_reported") if kind == "nvidia-smi-table" else None},
    )]


def _global_error_finding(ctx: Ctx, piece: Piece, inv: Inventory, kind: str, lines: list[str]) -> list[Finding]:
    """The first global nvidia-smi error (:data:`_GLOBAL`) with the ``kubectl exec`` exit code when one
    was printed; in a pod a missing driver is the GPU Operator's (platform), on a host the node's."""
    text = "\n".join(lines)
    found = next(((p, c, m) for p, c, m in _GLOBAL if p.search(text)), None)
    if found is None:
        return []
    pattern, code, meaning = found
    err_idx = [i for i, ln in enumerate(lines) if pattern.search(ln)]
    exit_line = next((i for i, ln in enumerate(lines) if "command terminated with exit code" in ln), None)
    exit_code = None
    if exit_line is not None:
        printed = re.search(r"exit code (\d+)", lines[exit_line])
        exit_code = int(printed.group(1)) if printed else None
        err_idx.append(exit_line)
    in_pod = exit_line is not None or bool(piece.command and "kubectl" in piece.command)
    failure = "gpu_driver_container_fault" if in_pod and code in (
        "nvidia_driver_not_loaded", "nvidia_driver_library_missing") else (
        "gpu_tool_missing" if code == "nvidia_smi_missing" else "gpu_host_driver_fault")
    extra = f"; exit code {exit_code}: {SMI_EXIT[exit_code]}" if exit_code in SMI_EXIT else ""
    scope = " (in a pod: the GPU Operator's driver container did not load the driver)" if (
        failure == "gpu_driver_container_fault" and code == "nvidia_driver_not_loaded") else ""
    return [make(kind, code, category="gpu-driver", failure=failure, severity="error",
                 meaning=meaning + scope + extra, lines=ctx.src(err_idx, piece.start),
                 quantities={"exit_code": exit_code, "gpus_readable": len(inv.devices)})]


def _device_lines(lines: list[str], dev: Device, kind: str, severity: str) -> list[int]:
    """Source lines of one GPU: where its bus id is printed (plus the table's two rows), and for an
    unhealthy GPU the lines that show why (``-q``/XML fields up to the next GPU; the table's
    ``Unable to determine the device handle`` line)."""
    idx: list[int] = []
    if dev.bus_id:
        short = dev.bus_id[-7:] if kind != "nvidia-smi-table" else dev.bus_id
        at = _index_of(lines, short) if kind != "nvidia-smi-xml" else _index_of(lines, f'id="{dev.bus_id}"')
        if at is None:
            at = _index_of(lines, dev.bus_id)
        if at is not None:
            idx.append(at)
            if kind == "nvidia-smi-table":
                idx += [at + 1, at + 2] if at + 2 < len(lines) and lines[at + 1].lstrip().startswith("|") else []
    if severity == "ok":
        return idx
    if kind == "nvidia-smi-table":
        return idx + [i for i, ln in enumerate(lines)
                      if "Unable to determine the device handle" in ln and (dev.bus_id or "") in ln]
    start = idx[0] if idx else 0
    for i in range(start, len(lines)):
        if i > start and ("GPU 0000" in lines[i] or "<gpu id=" in lines[i]):
            break
        if _DEVICE_PROBLEM.search(lines[i]):
            idx.append(i)
    return idx


def _device_findings(ctx: Ctx, piece: Piece, dev: Device, kind: str, lines: list[str]) -> list[Finding]:
    """One GPU: its health finding, then each MIG device and each process on it (``gpu_process``)."""
    code, severity, dev_failure, meaning = _device_code(dev)
    entity = {"gpu_index": dev.index, "bus_id": dev.bus_id, "uuid": dev.uuid, "gpu_name": dev.name}
    out = [make(kind, code, category="gpu" if severity == "ok" else "gpu-hardware", failure=dev_failure,
                severity=severity, meaning=meaning + (f" ({dev.name})" if dev.name and severity == "ok" else ""),
                lines=ctx.src(_device_lines(lines, dev, kind, severity), piece.start), entity=entity,
                quantities=_device_quantities(dev))]
    for part in dev.partitions:
        out.append(make(kind, "mig_device", category="gpu", severity="ok",
                        meaning=f"MIG device {part.index} on GPU {dev.index if dev.index is not None else dev.bus_id}",
                        entity={"gpu_index": dev.index, "bus_id": dev.bus_id, "mig_device": part.index},
                        quantities={"gpu_instance_id": part.gpu_instance_id,
                                    "compute_instance_id": part.compute_instance_id,
                                    "memory_total_mib": part.memory_total_mib, "memory_used_mib": part.memory_used_mib,
                                    "multiprocessors": part.multiprocessors, "profile": part.profile}))
    for proc in dev.processes:
        pidx = first_line(lines, proc.pid, r"\b{}\b")
        out.append(make(kind, "gpu_process", category="gpu", severity="ok",
                        meaning=f"process {proc.pid} {proc.name or ''} holds {proc.used_memory_mib} MiB "
                                f"on GPU {dev.index}",
                        lines=ctx.src(pidx[:1], piece.start),
                        entity={"gpu_index": dev.index, "bus_id": dev.bus_id, "pid": proc.pid, "process": proc.name},
                        quantities={"used_memory_mib": proc.used_memory_mib, "type": proc.type}))
    return out


def inventory_findings(ctx: Ctx, piece: Piece, inv: Inventory, kind: str) -> list[Finding]:
    """Findings for one nvidia-smi inventory (``kind`` is the piece's layout: ``nvidia-smi-table``,
    ``-query`` or ``-xml``): a report header, the first global error, each GPU, each MIG device and
    each process (``gpu_process``), in that order."""
    lines = ctx.lines(piece)
    out = _report_finding(ctx, piece, inv, kind, lines) + _global_error_finding(ctx, piece, inv, kind, lines)
    for dev in inv.devices:
        out += _device_findings(ctx, piece, dev, kind, lines)
    return out


def read_smi(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read an nvidia-smi piece of any of the three layouts."""
    text = "\n".join(ctx.lines(piece))
    inv: Inventory
    if piece.kind == "nvidia-smi-xml":
        try:
            inv = parse_nvidia_smi_xml(text)
        except ParseError:
            return []
    elif piece.kind == "nvidia-smi-query":
        inv = parse_nvidia_smi_query(text)
    else:
        try:
            inv = parse_nvidia_smi_table(text)
        except ParseError:
            return []
    return inventory_findings(ctx, piece, inv, piece.kind)


def _dcgm_findings(ctx: Ctx, piece: Piece, diag: DcgmDiag, base: int) -> list[Finding]:
    kind = "dcgmi-diag"
    out: list[Finding] = []
    meta_idx = [i for i, ln in enumerate(ctx.lines(piece)) if re.search(r"DCGM Version|Driver Version Detected", ln)]
    if not meta_idx:  # DCGM 3.0 tables have no Metadata rows: the report's own header line stands for it
        meta_idx = [i for i, ln in enumerate(ctx.lines(piece)) if re.search(r"Successfully ran diagnostic|"
                                                                             r"\|\s*Diagnostic\s*\|", ln)][:1]
    meta = diag.versions
    out.append(make(kind, "dcgm_diag_report", category="diagnostic", severity="ok",
                    meaning=f"dcgmi diag: {len(diag.tests)} test(s), {len(diag.failed)} failed"
                            + (" (table cut off as posted)" if diag.truncated else ""),
                    lines=ctx.src(meta_idx, base),
                    quantities={"dcgm_version": meta.dcgm_version, "driver_version": meta.driver_version,
                                "gpu_device_ids": meta.gpu_device_ids,
                                "tests": len(diag.tests), "failed": len(diag.failed), "layout": diag.layout,
                                "truncated": diag.truncated or None}))
    for test in diag.tests:
        status = test.status.title()
        failing_gpus = sorted(g for g, s in test.gpus.items() if s.lower() in ("fail", "warn"))
        warnings: dict[tuple[int | None, str], list[tuple[str, list[int], str | None, str]]] = {}
        for msg in test.messages:
            parts = [p for p in re.split(r"(?<=\.),\s*(?=GPU\s*\d|[A-Z])", msg.text) if p.strip()] or [msg.text]
            for part in parts:
                code, failure, meaning = classify_warning(part)
                warnings.setdefault((msg.gpu if msg.gpu is not None else None, code), []).append(
                    (part.strip().rstrip(","), msg.lines, failure, meaning))
        # the test's failure is its first warning's; a failed test that says nothing more is a GPU incident
        test_failure = next((w[0][2] for w in warnings.values() if w), "gpu_health_incident")
        if status in ("Fail", "Warn"):
            out.append(make(
                kind, "dcgm_test_failed" if status == "Fail" else "dcgm_test_warned", category="diagnostic",
                failure=test_failure, severity="error" if status == "Fail" else "warning",
                meaning=f"DCGM {test.category} test '{test.name}' {test.result}",
                lines=ctx.src(test.lines[:1], base),
                entity={"gpu_index": ",".join(map(str, failing_gpus)) if failing_gpus
                        else ("all" if test.all_gpus else None)},
                quantities={"test": test.name, "category": test.category, "result": test.result,
                            "error_ids": ",".join(map(str, test.error_ids)) or None}))
        for (gpu, code), items in warnings.items():
            level_info = all(code == "persistence_mode_disabled" for _ in items)
            links = sorted({int(x) for text, _, _, _ in items for x in re.findall(r"link (\d+)", text)})
            first = items[0]
            out.append(make(
                kind, code, category="diagnostic", failure=first[2],
                severity="warning" if level_info or status not in ("Fail", "Warn") else "error",
                meaning=first[3] + (f" (links {', '.join(map(str, links))})" if links else ""),
                lines=ctx.src(sorted({i for _, idx, _, _ in items for i in idx}), base),
                entity={"gpu_index": gpu}, count=len(items),
                quantities={"test": test.name, "links_down": ", ".join(map(str, links)) if links else None,
                            "message": first[0]}))
    return out


def read_dcgm(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read a ``dcgmi diag`` table or ``dcgmi discovery`` piece (JSON diag documents go through read_json)."""
    lines = ctx.lines(piece)
    if piece.kind == "dcgmi-discovery":
        disc = parse_dcgm_discovery(lines)
        out = [make("dcgmi-discovery", "dcgm_discovery", category="inventory", severity="ok",
                    meaning=f"DCGM sees {disc.gpus_declared} GPU(s), {disc.nvswitches} NvSwitch(es)",
                    lines=ctx.src([i for i, ln in enumerate(lines) if "found" in ln], piece.start),
                    quantities={"gpus": disc.gpus_declared, "gpus_listed": len(disc.gpus),
                                "nvswitches": disc.nvswitches, "cpus": disc.cpus})]
        for gpu in disc.gpus:
            out.append(make("dcgmi-discovery", "gpu_ok", category="gpu", severity="ok",
                            meaning=f"GPU {gpu.gpu_id}: {gpu.name}", lines=ctx.src(gpu.lines, piece.start),
                            entity={"gpu_index": gpu.gpu_id, "bus_id": gpu.bus_id, "uuid": gpu.uuid,
                                    "gpu_name": gpu.name}))
        return out
    brace = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("{")), None)
    if brace is not None:
        import json

        from pytest_hetero.probes.dcgm import parse_dcgm_json

        try:
            doc = json.loads("\n".join(lines[brace:]))
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            return dcgm_json_findings(ctx, piece, parse_dcgm_json(doc))
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith(("+", "|"))), 0)
    diag = parse_dcgm_table(lines[start:])
    for test in diag.tests:
        test.lines = [i + start for i in test.lines]
        for msg in test.messages:
            msg.lines = [i + start for i in msg.lines]
    return _dcgm_findings(ctx, piece, diag, piece.start)


def dcgm_json_findings(ctx: Ctx, piece: Piece, diag: DcgmDiag) -> list[Finding]:
    """Findings of a parsed ``dcgmi diag -j`` document (source lines: the whole piece); a test entry it could not
    read (:attr:`DcgmDiag.problems`) is an ``unrecognised`` finding naming the field."""
    found = _dcgm_findings(ctx, piece, diag, piece.start)
    whole = ctx.span(piece)
    return [f if f.lines else make(f.kind, f.code, category=f.category, failure=f.failure, severity=f.severity,
                                   meaning=f.meaning, lines=whole[:1], entity=f.entity, count=f.count,
                                   quantities=f.quantities) for f in found] + [
        make("dcgmi-diag", "unrecognised", category="unrecognised", severity="unrecognised", meaning=problem,
             lines=whole[:1]) for problem in diag.problems]


def _xid_group(ctx: Ctx, piece: Piece, recs: list[KernelRecord], uuids: dict[str, str], reset: set[str],
               reset_lines: dict[str, list[int]], kind: str = "kernel-log") -> Finding:
    first = recs[0]
    number = int(first.fields.xid or "")
    info = xid_info(number)
    cause = first.fields.cause
    failure, category, meaning = info.failure, info.category, info.meaning
    if cause:
        cause_info = xid_info(int(cause))
        failure, category = cause_info.failure, cause_info.category
        meaning = f"{info.meaning}; caused by Xid {cause} ({cause_info.meaning})"
    pids = list(dict.fromkeys(r.fields.pid for r in recs if r.fields.pid is not None))
    procs = list(dict.fromkeys(r.fields.process for r in recs if r.fields.process is not None))
    functions = list(dict.fromkeys(r.fields.function for r in recs if r.fields.function is not None))
    channels = list(dict.fromkeys(r.fields.channel for r in recs if r.fields.channel is not None))
    locations = {m.group(0) for r in recs
                 for m in [re.search(r"\(GPC \d+, TPC \d+, SM \d+\)", r.fields.message or "")] if m}
    label = first.fields.gpu_label
    bus = first.bus or ""
    needs_reset = bus in reset or info.action in ("reset_gpu", "reboot")
    severity = "error"
    return make(
        kind, f"xid_{number}", category=category, failure=failure, severity=severity,
        meaning=f"Xid {number}: {meaning}" + (f" (GPU {label})" if label else ""),
        lines=ctx.src([r.index for r in recs] + reset_lines.get(bus, []), piece.start),
        entity={"bus_id": bus, "uuid": uuids.get(bus), "pid": ",".join(pids) or None,
                "process": ",".join(procs) or None},
        timestamps=[recs[0].timestamp, recs[-1].timestamp], count=len(recs),
        quantities={"xid": number, "caused_by_xid": int(cause) if cause else None, "action": info.action,
                    "gsp_functions": ", ".join(functions) or None, "channels": ", ".join(channels) or None,
                    "sm_locations": len(locations) or None, "gpu_label": label,
                    "reset_recommended": True if bus in reset else None,
                    "needs_reset": needs_reset, "message": first.fields.message},
    )


_OTHER: dict[str, tuple[str, str, str | None, str, str]] = {
    "fallen_off_bus": ("gpu_fallen_off_bus", "gpu-bus", "gpu_hardware_fault", "error",
                       "the GPU has fallen off the PCIe bus: reboot the node and check the GPU/riser"),
    "init_failed": ("gpu_init_failed", "gpu-driver", "gpu_host_driver_fault", "error",
                    "the driver could not initialise the GPU (RmInitAdapter failed)"),
    "reset_required": ("gpu_reset_required", "gpu-recovery", "gpu_reset_needed", "error",
                       "the driver says the GPU needs a reset"),
    "api_mismatch": ("nvml_version_mismatch", "gpu-driver", "gpu_host_driver_fault", "error",
                     "user-space driver and kernel module versions differ (upgrade without reboot)"),
    "probe_failed": ("gpu_probe_failed", "gpu-driver", "gpu_host_driver_fault", "error",
                     "the NVIDIA driver's probe failed for this GPU: the device is not usable (see the lines above "
                     "it: a GPU off the bus, missing firmware)"),
    "firmware_load_failed": ("gpu_firmware_load_failed", "gpu-driver", "gpu_host_driver_fault", "warning",
                             "the kernel could not load an NVIDIA firmware file (error -2: the file is not installed)"),
    "sxid": ("nvswitch_sxid", "nvlink", "nvlink_fault", "error", "NVSwitch error (SXid)"),
    "peermem": ("peermem_invalid_context", "noise", None, "ok",
                "nvidia-peermem skipped an invalid context (RDMA teardown noise, not a GPU fault)"),
    "oom_kill": ("host_oom_kill", "workload", "oom_killed", "error", "the kernel OOM killer killed a process"),
}


def _record_groups(log: KernelLog) -> dict[tuple[str, str, str, str], list[KernelRecord]]:
    """Kernel records grouped in order of first appearance: Xids by (number, GPU, cause), assertions by
    (NV_ERR, GPU), the others by (kind, SXid number, GPU)."""
    groups: dict[tuple[str, str, str, str], list[KernelRecord]] = {}
    for rec in log.records:
        if rec.what == "xid":
            key = ("xid", rec.fields.xid or "", rec.bus or "", rec.fields.cause or "")
        elif rec.what == "assertion":
            key = ("assertion", rec.fields.error or "", rec.bus or "", "")
        else:
            key = (rec.what, rec.fields.sxid or "", rec.bus or "", "")
        groups.setdefault(key, []).append(rec)
    return groups


def _assertion_finding(ctx: Ctx, piece: Piece, log: KernelLog, bus: str, recs: list[KernelRecord]) -> Finding:
    """An NVRM assertion group; ``NV_ERR_RESET_REQUIRED`` reads as a reset request."""
    first = recs[0]
    err = first.fields.error or ""
    reset_needed = "RESET_REQUIRED" in err
    return make("kernel-log", "gpu_reset_required" if reset_needed else "nvrm_assertion",
                category="gpu-recovery" if reset_needed else "gpu-driver",
                failure="gpu_reset_needed" if reset_needed else "gpu_host_driver_fault",
                severity="error",
                meaning=("the driver reports the GPU needs a reset" if reset_needed else
                         f"NVIDIA driver assertion {first.fields.assertion}") + f" ({err})",
                lines=ctx.src([r.index for r in recs], piece.start),
                entity={"bus_id": bus or None, "uuid": log.uuids.get(bus)},
                timestamps=[recs[0].timestamp, recs[-1].timestamp], count=len(recs),
                quantities={"nv_error": err, "status": first.fields.status,
                            "assertion": first.fields.assertion})


def _other_quantities(what: str, first: KernelRecord) -> dict[str, Value]:
    """Quantities of a non-Xid kernel event: versions of an API mismatch, the SXid, RmInitAdapter's code."""
    fields = first.fields
    if what == "api_mismatch":
        return {"client_version": fields.client, "module_version": fields.module}
    if what == "sxid":
        return {"sxid": int(fields.sxid or "0"), "message": fields.message}
    if what == "init_failed":
        return {"rm_code": fields.code, "minor": fields.minor}
    if what == "fallen_off_bus":
        return {"pci_id": fields.pci_id}
    if what == "probe_failed":
        return {"probe_error": int(fields.error) if fields.error is not None else None,
                "devices_failed": int(fields.devices_failed) if fields.devices_failed is not None else None}
    if what == "firmware_load_failed":
        return {"file": fields.file, "error": int(fields.error or "0")}
    return {}


def _other_finding(ctx: Ctx, piece: Piece, log: KernelLog, what: str, bus: str, recs: list[KernelRecord]) -> Finding:
    """A group of one other kernel event (:data:`_OTHER`)."""
    code, category, failure, severity, meaning = _OTHER[what]
    first = recs[0]
    idx = [r.index for r in recs] + [int(r.fields.summary_index) for r in recs if r.fields.summary_index is not None]
    if what == "fallen_off_bus":
        idx += [i for r in recs for i in range(max(0, r.index - 2), r.index)
                if re.search(r"NVRM: The NVIDIA GPU|\(PCI ID:", ctx.lines(piece)[i])]
    return make("kernel-log", code, category=category, failure=failure, severity=severity, meaning=meaning,
                lines=ctx.src(idx, piece.start),
                entity={"bus_id": bus or None, "uuid": log.uuids.get(bus), "pid": first.fields.pid,
                        "process": first.fields.process},
                timestamps=[recs[0].timestamp, recs[-1].timestamp], count=len(recs),
                quantities=_other_quantities(what, first))


def _kernel_context(ctx: Ctx, piece: Piece, log: KernelLog, lines: list[str]) -> list[Finding]:
    """``kernel_context``: hardware, kernel release, driver, PCI -> UUID and serial maps, when printed."""
    if not (log.uuids or log.hardware or log.kernel_release or log.driver_version):
        return []
    context_idx = [i for i, ln in enumerate(lines) if re.search(
        r"NVRM: GPU at|Board Serial|Hardware name:|Tainted:|loading NVIDIA UNIX", ln)]
    printed = ", ".join(f"{k} {v}" for k, v in (("hardware", log.hardware), ("kernel", log.kernel_release),
                                                ("driver", log.driver_version)) if v)
    return [make("kernel-log", "kernel_context", category="inventory", severity="ok",
                 meaning="kernel log context: " + (printed or "GPU identities (PCI -> UUID)"),
                 lines=ctx.src(context_idx, piece.start),
                 quantities={"hardware": log.hardware, "kernel_release": log.kernel_release,
                             "driver_version": log.driver_version,
                             "gpus_mapped": ", ".join(f"{b}={u}" for b, u in log.uuids.items()) or None,
                             "serials": ", ".join(f"{b}={s}" for b, s in log.serials.items()) or None,
                             "lines_read": log.lines})]


def read_kernel(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read a kernel-log piece: Xid groups (by number, GPU and cause), assertions, other NVRM events
    (a reset request on a GPU with an Xid is reported on the Xid), context; ordered by first line."""
    lines = ctx.lines(piece)
    log = read_kernel_log(lines)
    reset = {r.bus for r in log.records if r.what == "reset_required" and r.bus}
    reset_lines: dict[str, list[int]] = {}
    for r in log.records:
        if r.what == "reset_required" and r.bus:
            reset_lines.setdefault(r.bus, []).append(r.index)
    xid_buses = {r.bus for r in log.records if r.what == "xid"}
    out: list[Finding] = []
    for (what, _, bus, _), recs in _record_groups(log).items():
        if what == "xid":
            out.append(_xid_group(ctx, piece, recs, log.uuids, reset, reset_lines))
        elif what == "assertion":
            out.append(_assertion_finding(ctx, piece, log, bus, recs))
        elif not (what == "reset_required" and bus in xid_buses):
            out.append(_other_finding(ctx, piece, log, what, bus, recs))
    out += _kernel_context(ctx, piece, log, lines)
    out.sort(key=lambda f: f.lines[0].number if f.lines else 0)
    return out


_KLOG = line_prefix.KLOG


def read_klog(ctx: Ctx, piece: Piece) -> list[Finding]:
    """Read Kubernetes component log lines: device-plugin Xid health events, Volcano queue status
    failures, other E/F lines (unrecognised when their text is not understood)."""
    lines = ctx.lines(piece)
    out: list[Finding] = []
    text = "\n".join(lines)
    events = parse_xid_log(text)
    unhealthy = [i for i, ln in enumerate(lines) if "marked unhealthy" in ln]
    nvml = [i for i, ln in enumerate(lines) if re.search(r"EventType:\d+ EventData:\d+", ln)]
    for event in events:
        info = xid_info(event.xid)
        idx = [event.line - 1] + nvml + [i for i in unhealthy if event.uuid and event.uuid in lines[i]]
        etype = re.search(r"EventType:(\d+) EventData:(\d+)", lines[nvml[0]]) if nvml else None
        out.append(make("klog", f"xid_{event.xid}", category=info.category, failure=info.failure, severity="error",
                        meaning=f"Xid {event.xid}: {info.meaning} (reported by the device plugin's health check)",
                        lines=ctx.src(idx, piece.start), entity={"uuid": event.uuid, "bus_id": event.pci_bus},
                        timestamps=[event.timestamp], count=1,
                        quantities={"xid": event.xid, "nvml_event_type": int(etype.group(1)) if etype else None,
                                    "nvml_event_data": int(etype.group(2)) if etype else None,
                                    "marked_unhealthy": event.marked_unhealthy}))
    for i in unhealthy:
        uuid = re.search(r"(GPU-[0-9a-fA-F-]+|MIG-[0-9a-fA-F/-]+)", lines[i])
        resource = re.search(r"'([\w./-]+)' device marked unhealthy", lines[i])
        m = _KLOG.match(lines[i])
        out.append(make("klog", "device_marked_unhealthy", category="gpu-hardware", failure="gpu_hardware_fault",
                        severity="error",
                        meaning=f"the device plugin took {uuid.group(1) if uuid else 'a device'} out of allocatable "
                                f"{resource.group(1) if resource else 'resources'} (allocatable drops by 1)",
                        lines=ctx.src([i], piece.start), entity={"uuid": uuid.group(1) if uuid else None},
                        timestamps=[f"{m.group('level')}{m.group('date')} {m.group('time')}" if m else None],
                        quantities={"resource": resource.group(1) if resource else None, "allocatable_change": -1}))
    from pytest_hetero.explain.read_platform import klog_device_lines

    def stamp_of(i: int) -> str | None:
        k = _KLOG.match(lines[i])
        return f"{k.group('level')}{k.group('date')} {k.group('time')}" if k else None

    device_found, _ = klog_device_lines(ctx, piece, lines, stamp_of)
    out += device_found
    handled = {line.number - piece.start - 1 for f in out for line in f.lines}
    infos: list[int] = []
    for i, line in enumerate(lines):
        m = _KLOG.match(line)
        if not m or i in handled:
            continue
        stamp = f"{m.group('level')}{m.group('date')} {m.group('time')}"
        msg = m.group("msg")
        queue = re.search(r"Failed to update status of Queue (?P<q>[\w.-]+):\s*(?P<why>.*)", msg)
        if queue:
            out.append(make("klog", "queue_status_update_failed", category="queue",
                            failure="queue_status_update_failed", severity="error",
                            meaning=f"the Volcano queue controller cannot write queue {queue.group('q')}'s status "
                                    "(CRD/controller version mismatch): queue accounting is stuck",
                            lines=ctx.src([i], piece.start), entity={"queue": queue.group("q")}, timestamps=[stamp],
                            quantities={"why": queue.group("why"), "source": m.group("src")}))
            continue
        if m.group("level") in "EF":
            from pytest_hetero.explain.read_text import classify_lines

            found = classify_lines(ctx, piece, [i])
            if found:
                out.extend(found)
                continue
            out.append(make("klog", "unrecognised", category="unrecognised", severity="unrecognised",
                            meaning="an error-level component log line no reader understands",
                            lines=ctx.src([i], piece.start), timestamps=[stamp]))
            continue
        infos.append(i)
    if infos:
        stamps = []
        for i in infos:
            m = _KLOG.match(lines[i])
            if m:
                stamps.append(f"{m.group('level')}{m.group('date')} {m.group('time')}")
        out.append(make("klog", "component_log", category="log", severity="ok",
                        meaning=f"{len(infos)} informational component log line(s)",
                        lines=ctx.src(infos, piece.start), timestamps=stamps, count=len(infos)))
    out.sort(key=lambda f: f.lines[0].number if f.lines else 0)
    return out


READERS: dict[str, Callable[[Ctx, Piece], list[Finding]]] = {
    "nvidia-smi-xml": read_smi,
    "nvidia-smi-table": read_smi,
    "nvidia-smi-query": read_smi,
    "dcgmi-diag": read_dcgm,
    "dcgmi-discovery": read_dcgm,
    "kernel-log": read_kernel,
    "klog": read_klog,
}
"""Block kind -> reader, for the NVIDIA and log kinds."""

_ = SourceLine
