"""Readers of the NVIDIA tool outputs claimed by :mod:`pytest_hetero.explain.claim_nvidia`.

``nvidia-smi -L``, ``nvidia-smi mig -lgi/-lci/-lgip/-lcip/-lgipp/-lcipp``, ``nvidia-smi topo -m``,
``nvidia-smi --query-gpu … --format=csv``, ``dcgmi nvlink -s``, ``dcgmi health -c`` (box and ``-j`` JSON),
``dcgmi dmon``. Formats are those of the tools' documentation (nvidia-smi(1), the MIG user guide, the DCGM
user guide) across driver R450 … R580 and DCGM 2.x … 4.x; each function says which variants it reads.

Every reader reports facts (codes, quantities, entities); inventory is ``ok`` with no owner. Faults: a
link ``D``own, a health verdict other than Healthy, a non-zero last Xid, a recovery action other than
None carry a ``failure`` category; the failure table (:mod:`pytest_hetero.judge.failures`) gives its owner.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator

from pytest_hetero.explain.blocks import Piece
from pytest_hetero.explain.claim_nvidia import CSV_COMMAND, GPU_LINE, MIG_LINE, MIG_TITLE, PLACEMENTS
from pytest_hetero.explain.context import Ctx, make
from pytest_hetero.explain.model import Finding, Value
from pytest_hetero.probes.xid_codes import xid_info

MIG_GPU_UUID = re.compile(r"^MIG-(?P<gpu>GPU-[0-9a-fA-F-]+)/(?P<gi>\d+)/(?P<ci>\d+)$")
"""R450/R460 MIG device name: ``MIG-GPU-<GPU uuid>/<GPU instance id>/<compute instance id>``."""


def mig_name(uuid: str) -> dict[str, Value]:
    """Quantities of a MIG device name: ``{"parent_uuid", "gpu_instance_id", "compute_instance_id"}`` for the
    ``MIG-GPU-<uuid>/<gi>/<ci>`` form, ``{}`` for the R470+ ``MIG-<uuid>`` form (its ids are not in the name)."""
    m = MIG_GPU_UUID.match(uuid)
    if not m:
        return {}
    return {"parent_uuid": m.group("gpu"), "gpu_instance_id": int(m.group("gi")),
            "compute_instance_id": int(m.group("ci"))}


def read_list(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``nvidia-smi -L``: one ``gpu_listed`` per GPU, one ``mig_device`` per MIG line, a ``gpu_list`` summary."""
    lines = ctx.lines(piece)
    out: list[Finding] = []
    gpu: dict[str, str] | None = None
    gpu_index: str | None = None  # the index of ``gpu``, the GPU the MIG lines below belong to
    gpu_at = 0
    migs: Counter[str] = Counter()
    profiles: list[str] = []
    gpus = 0
    for i, line in enumerate(lines):
        g = GPU_LINE.match(line)
        if g:
            gpus += 1
            gpu_index = g.group("index")
            gpu = {"gpu_index": gpu_index, "gpu_name": g.group("name"), "uuid": g.group("uuid")}
            gpu_at = len(out)
            out.append(make("nvidia-smi-list", "gpu_listed", category="inventory", severity="ok",
                            meaning=f"GPU {g.group('index')}: {g.group('name')}", lines=ctx.src([i], piece.start),
                            entity=gpu, quantities={"mig_devices": 0}))
            continue
        m = MIG_LINE.match(line)
        if m is None:
            continue
        key = gpu_index if gpu_index is not None else "?"
        migs[key] += 1
        profiles.append(m.group("profile"))
        out.append(make("nvidia-smi-list", "mig_device", category="inventory", severity="ok",
                        meaning=f"MIG device {m.group('device')} ({m.group('profile')}) on GPU {key}",
                        lines=ctx.src([i], piece.start),
                        entity={"gpu_index": gpu_index, "mig_device": m.group("device"),
                                "uuid": m.group("uuid")},
                        quantities={"profile": m.group("profile"), **mig_name(m.group("uuid"))}))
        if gpu is not None:
            f = out[gpu_at]
            out[gpu_at] = make(f.kind, f.code, category=f.category, severity="ok", meaning=f.meaning,
                               lines=f.lines, entity=f.entity, quantities={"mig_devices": migs[key]})
    distinct = sorted(set(profiles))
    out.append(make("nvidia-smi-list", "gpu_list", category="inventory", severity="ok",
                    meaning=f"nvidia-smi -L: {gpus} GPU(s), {len(profiles)} MIG device(s)",
                    lines=ctx.span(piece, 1),
                    quantities={"gpus": gpus, "mig_devices": len(profiles),
                                "mig_profiles": ",".join(distinct) or None}))
    return out


_LGI = re.compile(r"^\s*\|\s*(?P<gpu>\d+)\s+(?P<name>MIG\s+[\w.+]+)\s+(?P<pid>\d+)\s+(?P<id>\d+)"
                  r"(?:\s+(?P<start>\d+):(?P<size>\d+))?\s*\|")
_LCI = re.compile(r"^\s*\|\s*(?P<gpu>\d+)\s+(?P<gi>\d+)\s+(?P<name>MIG\s+[\w.+]+)\s+(?P<pid>\d+)\*?\s+(?P<id>\d+)"
                  r"(?:\s+(?P<start>\d+):(?P<size>\d+))?\s*\|")
_LGIP = re.compile(r"^\s*\|\s*(?P<gpu>\d+)\s+(?P<name>MIG\s+[\w.+]+)\s+(?P<pid>\d+)\s+(?P<free>\d+)/(?P<total>\d+)\s+"
                   r"(?P<mem>[\d.]+|N/A)\s+(?:(?P<p2p>Yes|No|N/A)\s+)?(?P<sm>\d+)\s+(?P<dec>\d+)\s+(?P<enc>\d+)\s*\|")
_LCIP = re.compile(r"^\s*\|\s*(?P<gpu>\d+)\s+(?P<gi>\d+)\s+(?P<name>MIG\s+[\w.+]+)\s+(?P<pid>\d+)(?P<default>\*)?\s+"
                   r"(?P<free>\d+)/(?P<total>\d+)\s+(?P<sm>\d+)\s+(?P<dec>\d+)\s+(?P<enc>\d+)(?:\s+(?P<ofa>\d+))?\s*\|")
_SECOND = re.compile(r"^\s*\|\s+(?P<a>\d+)\s+(?P<b>\d+)(?:\s+(?P<c>\d+))?\s*\|\s*$")


def _slices(spans: list[tuple[int, int]]) -> str:
    covered = sorted({s for start, size in spans for s in range(start, start + size)})
    if not covered:
        return ""
    runs: list[str] = []
    first = prev = covered[0]
    for s in covered[1:] + [-2]:
        if s != prev + 1:
            runs.append(str(first) if first == prev else f"{first}-{prev}")
            first = s
        prev = s
    return ",".join(runs)


def _lgi_row(line: str, per_gpu: dict[str, list[tuple[int, int]]], overlaps: Counter[str], instances: Counter[str]
             ) -> tuple[str, str, dict[str, str], dict[str, Value]] | None:
    """A ``-lgi`` GPU instance row: counted in ``instances`` and its placement (when printed) added to ``per_gpu``
    (``overlaps`` counts one that overlaps an earlier placement), per GPU index."""
    m = _LGI.match(line)
    if not m:
        return None
    gpu = m.group("gpu")
    instances[gpu] += 1
    q: dict[str, Value] = {"profile": m.group("name").split()[1], "profile_id": int(m.group("pid"))}
    spans = per_gpu.setdefault(gpu, [])
    if m.group("start") is not None:
        start, size = int(m.group("start")), int(m.group("size"))
        q.update(placement_start=start, placement_size=size)
        if any(start < s + z and s < start + size for s, z in spans):
            overlaps[gpu] += 1
        spans.append((start, size))
    return ("gpu_instance", f"GPU {gpu} GPU instance {m.group('id')}: {m.group('name')}",
            {"gpu_index": gpu, "gpu_instance_id": m.group("id")}, q)


def _lci_row(line: str) -> tuple[str, str, dict[str, str], dict[str, Value]] | None:
    m = _LCI.match(line)
    if not m:
        return None
    q: dict[str, Value] = {"profile": m.group("name").split()[1], "profile_id": int(m.group("pid"))}
    if m.group("start") is not None:
        q.update(placement_start=int(m.group("start")), placement_size=int(m.group("size")))
    return ("compute_instance", f"GPU {m.group('gpu')} GI {m.group('gi')} compute instance {m.group('id')}: "
            f"{m.group('name')}", {"gpu_index": m.group("gpu"), "gpu_instance_id": m.group("gi"),
                                   "compute_instance_id": m.group("id")}, q)


def _profile_row(lines: list[str], i: int, gip: bool) -> tuple[str, str, dict[str, str], dict[str, Value], bool] | None:
    """A ``-lgip``/``-lcip`` profile: its first row and (when present) the second row with CE, JPEG[, OFA]."""
    m = _LGIP.match(lines[i]) if gip else _LCIP.match(lines[i])
    if not m:
        return None
    q: dict[str, Value] = {"profile": m.group("name").split()[1], "profile_id": int(m.group("pid")),
                           "free": int(m.group("free")), "total": int(m.group("total")), "sm": int(m.group("sm")),
                           "dec": int(m.group("dec")), "enc": int(m.group("enc"))}
    second = _SECOND.match(lines[i + 1]) if i + 1 < len(lines) else None
    entity = {"gpu_index": m.group("gpu")}
    if gip:
        q["memory_gib"] = None if m.group("mem") == "N/A" else float(m.group("mem"))
        q["p2p"] = m.group("p2p")
        if second:
            q.update(ce=int(second.group("a")), jpeg=int(second.group("b")),
                     ofa=int(second.group("c")) if second.group("c") else None)
    else:
        entity["gpu_instance_id"] = m.group("gi")
        q["ofa"] = int(m.group("ofa")) if m.group("ofa") else None
        q["default"] = m.group("default") is not None
        if second:
            q.update(ce=int(second.group("a")), jpeg=int(second.group("b")))
    return ("gpu_instance_profile" if gip else "compute_instance_profile",
            f"GPU {m.group('gpu')} profile {m.group('name')} (ID {m.group('pid')}): {m.group('free')}/"
            f"{m.group('total')} free", entity, q, second is not None)


def _mig_table(ctx: Ctx, piece: Piece, lines: list[str], title: str) -> list[Finding]:
    out: list[Finding] = []
    per_gpu: dict[str, list[tuple[int, int]]] = {}
    overlaps: Counter[str] = Counter()
    instances: Counter[str] = Counter()
    for i, line in enumerate(lines):
        idx = [i]
        if title == "GPU instances":
            row = _lgi_row(line, per_gpu, overlaps, instances)
        elif title == "Compute instances":
            row = _lci_row(line)
        else:
            prof = _profile_row(lines, i, title == "GPU instance profiles")
            row = prof[:4] if prof else None
            if prof and prof[4]:
                idx.append(i + 1)
        if row is None:
            continue
        code, meaning, entity, q = row
        out.append(make("nvidia-smi-mig", code, category="inventory", severity="ok", meaning=meaning,
                        lines=ctx.src(idx, piece.start), entity=entity, quantities=q))
    for gpu, spans in per_gpu.items():
        count = instances[gpu]
        out.append(make("nvidia-smi-mig", "gpu_instances", category="inventory", severity="ok",
                        meaning=f"GPU {gpu}: {count} GPU instance(s) on slices {_slices(spans) or '?'}",
                        lines=ctx.span(piece, 2), entity={"gpu_index": gpu},
                        quantities={"instances": count, "slices_used": _slices(spans) or None,
                                    "overlapping_placements": overlaps[gpu]}))
    return out


def read_mig(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``nvidia-smi mig -lgi`` (``gpu_instance`` rows, a ``gpu_instances`` summary per GPU with the slices
    covered), ``-lci`` (``compute_instance``), ``-lgip`` (``gpu_instance_profile``: free/total, memory, SM, DEC,
    ENC, CE, JPEG, OFA), ``-lcip`` (``compute_instance_profile``), ``-lgipp/-lcipp`` (``mig_placements``) and
    the tool's ``No … found`` answers (``mig_none``)."""
    lines = ctx.lines(piece)
    title = next((m.group("title") for m in map(MIG_TITLE.match, lines[:3]) if m), None)
    if title is not None:
        return _mig_table(ctx, piece, lines, title)
    out: list[Finding] = []
    for i, line in enumerate(lines):
        p = PLACEMENTS.match(line)
        if p:
            starts = [int(s) for s in p.group("starts").replace(" ", "").split(",") if s]
            out.append(make("nvidia-smi-mig", "mig_placements", category="inventory", severity="ok",
                            meaning=f"GPU {p.group('gpu')} profile {p.group('id')}: placements at "
                                    f"{','.join(map(str, starts))} of size {p.group('size')}",
                            lines=ctx.src([i], piece.start),
                            entity={"gpu_index": p.group("gpu"), "gpu_instance_id": p.group("gi")},
                            quantities={"profile_id": int(p.group("id")), "placements": ",".join(map(str, starts)),
                                        "placement_size": int(p.group("size"))}))
        elif line.strip():
            out.append(make("nvidia-smi-mig", "mig_none", category="inventory", severity="ok",
                            meaning=f"nvidia-smi mig: {line.strip()}", lines=ctx.src([i], piece.start)))
    return out


def read_topo(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``nvidia-smi topo -m``: one ``gpu_topology`` finding. Quantities: ``gpus``, ``nics``, ``nvlink`` (any
    ``NV#`` between GPUs), ``link.<A>-<B>`` for every GPU-GPU and GPU-NIC cell (and NIC-NIC), per GPU
    ``<GPUn>.cpu_affinity`` / ``.numa_affinity`` / ``.gpu_numa_id``, ``gpu_links`` (``NV12:28`` — link kind:
    GPU pairs), ``legend`` (entries) and ``nic.<NICn>`` (device name from the NIC Legend)."""
    lines = ctx.lines(piece)
    header = re.split(r"\t+|\s{2,}|\s(?=GPU\d|NIC\d|mlx)", lines[0].strip())
    header = [h.strip() for h in header if h.strip()]
    devices = [h for h in header if re.match(r"^(?:GPU\d+|NIC\d+|mlx\d\S*)$", h)]
    extras = header[len(devices):]
    q: dict[str, Value] = {}
    gpu_links: Counter[str] = Counter()
    legend = 0
    rows = 0
    for line in lines[1:]:
        s = line.strip()
        nic = re.match(r"^(NIC\d+):\s*(\S+)$", s)
        if nic:
            q[f"nic.{nic.group(1)}"] = nic.group(2)
            continue
        if re.match(r"^(?:X|[A-Z]+#?)\s+=", s):
            legend += 1
            continue
        cells = s.split()
        if not cells or cells[0] not in devices:
            continue
        rows += 1
        name, values = cells[0], cells[1:]
        for col, value in zip(devices, values, strict=False):
            if col == name:
                continue
            a, b = sorted((name, col), key=lambda d: (not d.startswith("GPU"), int(re.sub(r"\D", "", d) or 0)))
            q[f"link.{a}-{b}"] = value
            if name.startswith("GPU") and col.startswith("GPU") and devices.index(col) > devices.index(name):
                gpu_links[value] += 1
        rest = values[len(devices):]
        if name.startswith("GPU") and rest:
            keys = ["cpu_affinity", "numa_affinity", "gpu_numa_id"][: len(extras)]
            for key, value in zip(keys, rest, strict=False):
                q[f"{name}.{key}"] = value
    gpus = [d for d in devices if d.startswith("GPU")]
    nics = [d for d in devices if not d.startswith("GPU")]
    q.update(gpus=len(gpus), nics=len(nics), rows=rows, legend=legend or None,
             nvlink=any(k.startswith("NV") for k in gpu_links),
             gpu_links=",".join(f"{k}:{v}" for k, v in sorted(gpu_links.items())) or None)
    kinds = ", ".join(f"{v}× {k}" for k, v in sorted(gpu_links.items()))
    return [make("nvidia-smi-topo", "gpu_topology", category="inventory", severity="ok",
                 meaning=f"topology of {len(gpus)} GPU(s) and {len(nics)} NIC(s); GPU pairs: {kinds or 'none'}"
                         + ("" if q["nvlink"] or len(gpus) < 2 else " (no NVLink: peer traffic over PCIe)"),
                 lines=ctx.span(piece, 1), quantities=q)]


_STATES = {"U": "up", "D": "down", "X": "disabled", "_": "not_supported"}


def read_nvlink(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``dcgmi nvlink -s`` (DCGM 2.x-4.x): per GPU (and NVSwitch) ``nvlink_status`` with links up/down/
    disabled/not supported; a GPU with a link Down gives ``nvlink_down`` (an error, also when every link
    is down); ``nvlink_report`` summarises (``nvswitches`` 0 when ``No NvSwitches found``)."""
    lines = ctx.lines(piece)
    out: list[Finding] = []
    section = "gpu"
    current: tuple[str, int] | None = None
    totals = dict.fromkeys(_STATES.values(), 0)
    switches = 0
    entities = 0
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("NvSwitches:"):
            section = "switch"
            continue
        head = re.match(r"^(?:gpuId|physicalId)\s+(\d+):$", s)
        if head:
            current = (head.group(1), i)
            continue
        if current is None or not re.fullmatch(r"(?:[UDX_]\s*)+", s):
            continue
        states = s.split()
        counts = {name: states.count(letter) for letter, name in _STATES.items()}
        for k, v in counts.items():
            totals[k] += v
        entity = {"gpu_index": current[0]} if section == "gpu" else {"nvswitch": current[0]}
        entities += section == "gpu"
        switches += section == "switch"
        src = ctx.src([current[1], i], piece.start)
        q: dict[str, Value] = {"links": len(states), **counts,
                               "down_links": ",".join(str(n) for n, x in enumerate(states) if x == "D") or None}
        what = f"GPU {current[0]}" if section == "gpu" else f"NVSwitch {current[0]}"
        if counts["down"]:
            out.append(make("dcgmi-nvlink", "nvlink_down", category="nvlink", failure="nvlink_fault",
                            severity="error",
                            meaning=f"{what}: {counts['down']} of {len(states)} NVLink link(s) down"
                                    + (" (every link)" if counts["down"] == len(states) else ""),
                            lines=src, entity=entity, quantities=q))
        else:
            out.append(make("dcgmi-nvlink", "nvlink_status", category="inventory", severity="ok",
                            meaning=f"{what}: {counts['up']} NVLink link(s) up", lines=src, entity=entity,
                            quantities=q))
        current = None
    none_found = any("No NvSwitches found" in ln for ln in lines)
    out.append(make("dcgmi-nvlink", "nvlink_report", category="inventory", severity="ok",
                    meaning=f"dcgmi nvlink -s: {entities} GPU(s), {totals['up']} link(s) up, {totals['down']} down",
                    lines=ctx.span(piece, 3),
                    quantities={"gpus": entities, "nvswitches": 0 if none_found else switches,
                                "links_up": totals["up"], "links_down": totals["down"],
                                "links_disabled": totals["disabled"], "links_not_supported": totals["not_supported"]}))
    return out


_FABRIC_PART = re.compile(r"SXM|HBM|\bH[12]\d0\b|\bB[12]\d0\b|GB[23]00|HGX|DGX", re.IGNORECASE)
"""GPU names of baseboard (SXM/HGX) parts, whose NVLinks are all wired: an inactive link is a fault there; a PCIe
card's links are active only where a bridge connects them."""


def _nvsmi_link_gpu(ctx: Ctx, piece: Piece, gpu: dict[str, str], rows: list[tuple[int, str, float | None]],
                    none: bool) -> Finding:
    """One GPU of ``nvidia-smi nvlink -s``: ``rows`` are (line index, link, speed GB/s or None when inactive)."""
    active = [(link, speed) for _, link, speed in rows if speed is not None]
    inactive = [link for _, link, speed in rows if speed is None]
    fabric = bool(_FABRIC_PART.search(gpu["name"]))
    speeds = sorted({speed for _, speed in active})
    q: dict[str, Value] = {"links": len(rows), "active": len(active), "inactive": len(inactive),
                           "inactive_links": ",".join(inactive) or None,
                           "speed_gbps": speeds[0] if len(speeds) == 1 else None,
                           "min_speed_gbps": speeds[0] if len(speeds) > 1 else None,
                           "all_inactive": none or None}
    q = {k: v for k, v in q.items() if v is not None}
    entity = {"gpu_index": gpu["index"], "gpu_name": gpu["name"], "uuid": gpu["uuid"]}
    src = ctx.src([int(gpu["line"])] + [i for i, _, _ in rows], piece.start)
    what = f"GPU {gpu['index']} ({gpu['name']})"
    if (inactive and active) or ((inactive or none) and fabric):
        severity = "error" if fabric else "warning"
        count = "every" if not active else f"{len(inactive)} of {len(rows)}"
        why = ("a baseboard GPU's NVLinks are all wired: a link down is a fault of the GPU, its NVLink wiring or "
               "(on NVSwitch systems) the fabric and its manager" if fabric
               else "on a PCIe card only bridged links are active: check the bridge")
        return make("nvidia-smi-nvlink", "nvlink_inactive", category="nvlink", failure="nvlink_fault",
                    severity=severity, meaning=f"{what}: {count} NVLink link(s) inactive"
                    + (f" ({', '.join(inactive)})" if inactive and active else "") + f"; {why}",
                    lines=src, entity=entity, quantities=q)
    if not active:
        return make("nvidia-smi-nvlink", "nvlink_status", category="inventory", severity="ok",
                    meaning=f"{what}: no NVLink link active (a PCIe card without a bridge)", lines=src,
                    entity=entity, quantities=q)
    return make("nvidia-smi-nvlink", "nvlink_status", category="inventory", severity="ok",
                meaning=f"{what}: {len(active)} NVLink link(s) active"
                + (f" at {speeds[0]:g} GB/s" if len(speeds) == 1 else f", {speeds[0]:g}-{speeds[-1]:g} GB/s"),
                lines=src, entity=entity, quantities=q)


def read_nvsmi_nvlink(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``nvidia-smi nvlink -s`` / ``--status`` (format in :mod:`.claim_nvidia`): one finding per GPU
    (``nvlink_status`` ok, or ``nvlink_inactive`` with failure ``nvlink_fault``: an error on a baseboard
    SXM/HGX part, a warning on a PCIe card where some links are up and others not), then ``nvlink_report``
    (``gpus``, ``links_active``, ``links_inactive``). Speeds are the per-link GB/s as printed."""
    from pytest_hetero.explain.claim_nvidia import GPU_LINE, NVLINK_LINK, NVLINK_NONE

    lines = ctx.lines(piece)
    out: list[Finding] = []
    gpu: dict[str, str] | None = None
    rows: list[tuple[int, str, float | None]] = []
    none = False
    for i, line in enumerate(lines):
        head = GPU_LINE.match(line)
        if head:
            if gpu is not None:
                out.append(_nvsmi_link_gpu(ctx, piece, gpu, rows, none))
            gpu = {"index": head.group("index"), "name": head.group("name"), "uuid": head.group("uuid"),
                   "line": str(i)}
            rows, none = [], False
            continue
        link = NVLINK_LINK.match(line)
        if link and gpu is not None:
            rows.append((i, link.group("link"), float(link.group("speed")) if link.group("speed") else None))
        elif NVLINK_NONE.match(line) and gpu is not None:
            none = True
    if gpu is not None:
        out.append(_nvsmi_link_gpu(ctx, piece, gpu, rows, none))
    per = [f for f in out if "active" in f.quantities]
    up = sum(int(f.quantities["active"] or 0) for f in per)
    down = sum(int(f.quantities["inactive"] or 0) for f in per)
    out.append(make("nvidia-smi-nvlink", "nvlink_report", category="inventory", severity="ok",
                    meaning=f"nvidia-smi nvlink -s: {len(out)} GPU(s), {up} link(s) active, {down} inactive",
                    lines=ctx.span(piece, 3), quantities={"gpus": len(out), "links_active": up,
                                                          "links_inactive": down}))
    return out


_VERDICT: dict[str, tuple[str, str | None]] = {
    "healthy": ("ok", None), "warning": ("warning", "gpu_health_incident"), "failure": ("error", "gpu_health_incident"),
    "fail": ("error", "gpu_health_incident")}
"""DCGM health verdict -> (severity, failure category)."""


def _health(ctx: Ctx, piece: Piece, overall: str | None, incidents: list[tuple[str | None, str, str, list[int]]],
            kind: str) -> list[Finding]:
    out: list[Finding] = []
    for gpu, system, message, idx in incidents:
        sev, failure = _VERDICT.get(message.split(" ")[0].lower().strip(" -:"), ("warning", "gpu_health_incident"))
        out.append(make(kind, "dcgm_health_incident", category="gpu-health", failure=failure, severity=sev,
                        meaning=f"DCGM health{f' GPU {gpu}' if gpu else ''}: {system}: {message}",
                        lines=ctx.src(idx, piece.start) if idx else ctx.span(piece, 3),
                        entity={"gpu_index": gpu}, quantities={"system": system, "message": message}))
    sev, failure = _VERDICT.get((overall or "").lower(), ("unrecognised", None))
    code = "dcgm_health" if sev != "unrecognised" else "unrecognised"
    out.insert(0, make(kind, code, category="gpu-health" if sev != "ok" else "inventory",
                       failure=None if out else failure, severity=sev if not out else "ok",
                       meaning=f"dcgmi health: overall {overall or 'not printed'}"
                               + ("; only the watched systems are judged: a GPU that needs a reset after an Xid can "
                                  "still read Healthy" if sev == "ok" else ""),
                       lines=ctx.span(piece, 3), quantities={"overall_health": overall, "incidents": len(incidents)}))
    return out


def _walk(node: object, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, path + (str(k),))
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v, path)
    elif isinstance(node, str):
        yield path, node


def health_json(ctx: Ctx, piece: Piece, obj: object) -> list[Finding] | None:
    """``dcgmi health -c -j``: ``{"header": ["Health Monitor Report"], "body": {"Overall Health": {"value": …},
    "GPU": {"children": {"<id>": {"children": {"<system>": {"children": {"<verdict>": {"value": msg}}}}}}}}}``
    (the nesting of the incident part varies across DCGM versions; every string leaf under a GPU id is an
    incident). None when ``obj`` is not that document."""
    if not (isinstance(obj, dict) and "Health Monitor Report" in json.dumps(obj.get("header", ""))):
        return None
    body = obj.get("body", {})
    overall = None
    incidents: list[tuple[str | None, str, str, list[int]]] = []
    for path, value in _walk(body):
        if path and path[0] == "Overall Health":
            overall = value
            continue
        gpu = next((re.sub(r"\D", "", p) for p in path if re.fullmatch(r"(?:GPU ID: )?\d+", p)), None)
        parts = [p for p in path if p not in ("children", "value", "GPU") and not re.fullmatch(r"(?:GPU ID: )?\d+", p)]
        if not parts and path and path[-1] == "value":
            continue
        system = parts[0] if parts else "health"
        verdict = parts[1] if len(parts) > 1 else ""
        incidents.append((gpu, system, f"{verdict} - {value}" if verdict else value, []))
    return _health(ctx, piece, overall, incidents, "dcgmi-health")


def read_health(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``dcgmi health -c`` box: ``| Overall Health | Healthy |`` (2.x) or ``| Group 0 | Overall Health: Warning |``
    (3.x+), then ``| GPU ID: N | Warning |`` rows whose continuation lines (``| | PCIe system: Warning - …``)
    hold the incidents, wrapped over several rows."""
    lines = ctx.lines(piece)
    if len(lines) == 1 and "set successfully" in lines[0]:
        return [make("dcgmi-health", "dcgm_health_watches_set", category="inventory", severity="ok",
                     meaning="dcgmi health -s: the health watches were set", lines=ctx.span(piece))]
    overall = None
    incidents: list[tuple[str | None, str, str, list[int]]] = []
    gpu: str | None = None
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        left, right = cells[0], " ".join(cells[1:]).strip()
        o = re.search(r"Overall Health:?\s*(\w+)", f"{left} {right}")
        if left == "Overall Health" and right:
            overall = right.split()[0]
            continue
        if o:
            overall = o.group(1)
            continue
        g = re.match(r"^(?:GPU ID|GPU|Switch ID|CPU ID):?\s*(\d+)$", left)
        if g:
            gpu = g.group(1)
            continue
        if left or not right:
            continue
        inc = re.match(r"^(?P<system>[\w ./-]+?(?:system|System|Memory|PCIe|NVLink|Thermal|Power|Inforom|"
                       r"Driver|NVSwitch)[\w ]*?):\s*(?P<msg>.*)$", right)
        if inc:
            incidents.append((gpu, inc.group("system"), inc.group("msg"), [i]))
        elif incidents:
            g2, system, msg, idx = incidents[-1]
            incidents[-1] = (g2, system, f"{msg} {right}".strip(), idx + [i])
    return _health(ctx, piece, overall, incidents, "dcgmi-health")


_DMON_FIELDS = {"XIDER": "last_xid", "DEV_XID_ERRORS": "last_xid", "TMPTR": "temperature_c", "POWER": "power_w",
                "GPUTL": "utilisation_pct", "FBUSD": "memory_used_mib", "FBFRE": "memory_free_mib"}


def read_dmon(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``dcgmi dmon -e <ids>``: header ``#Entity  <short names>``, an ``ID`` line, ``GPU <n>  <values>`` rows.
    Field 230 (``XIDER``, the last Xid) non-zero gives an ``xid_<n>`` finding for that GPU (the catalog's
    failure category);
    every row gives ``dcgm_field_values`` with the values as printed (``N/A`` kept)."""
    lines = ctx.lines(piece)
    names = lines[0].split()[1:]
    out: list[Finding] = []
    for i, line in enumerate(lines[1:], 1):
        m = re.match(r"^\s*(GPU|GPU-I|GPU-CI|Switch|Link|CPU|Core)\s+(\d+)\s+(.*)$", line)
        if not m:
            continue
        values = m.group(3).split()
        q: dict[str, Value] = {}
        for name, value in zip(names, values, strict=False):
            key = _DMON_FIELDS.get(name, name.lower())
            q[key] = int(value) if value.isdigit() else value
        entity = {"gpu_index": m.group(2)} if m.group(1) == "GPU" else {m.group(1).lower(): m.group(2)}
        xid = q.get("last_xid")
        if isinstance(xid, int) and xid > 0:
            info = xid_info(xid)
            out.append(make("dcgmi-dmon", f"xid_{xid}", category=info.category, failure=info.failure, severity="error",
                            meaning=f"Xid {xid}: {info.meaning} (last Xid DCGM recorded for GPU {m.group(2)})",
                            lines=ctx.src([0, i], piece.start), entity=entity,
                            quantities={"xid": xid, "action": info.action, "source": "dcgmi dmon field 230 (XIDER)"}))
            continue
        out.append(make("dcgmi-dmon", "dcgm_field_values", category="inventory", severity="ok",
                        meaning=f"{m.group(1)} {m.group(2)}: " + ", ".join(f"{k}={v}" for k, v in q.items()),
                        lines=ctx.src([i], piece.start), entity=entity, quantities=q))
    return out


_RECOVERY = {"none": None, "reset": "reset the GPU", "reboot": "reboot the node", "drain_p2p": "drain peer-to-peer "
             "traffic, then reset", "drain_and_reset": "drain the GPU's work, then reset"}


def read_csv(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]``: fields from the printed header,
    else from the command; one ``gpu_query_row`` per row with each field as printed (annotations after the
    last value are kept in ``note``). ``gpu_recovery_action`` other than ``None`` (R550+: Reset, Reboot,
    Drain_P2P, Drain_and_Reset) is a ``gpu_recovery_required`` error."""
    lines = ctx.lines(piece)
    command = piece.command or ""
    m = CSV_COMMAND.search(command)
    fields = [f.strip() for f in m.group("fields").split(",")] if m else []
    start = 0
    if not m or "noheader" not in m.group("opts"):
        fields = [re.sub(r"\s*\[[^\]]*\]", "", f).strip() for f in lines[0].split(",")]
        start = 1
    out: list[Finding] = []
    for i in range(start, len(lines)):
        if not lines[i].strip():
            continue
        cells = [c.strip() for c in lines[i].split(",", max(len(fields) - 1, 0))]
        q: dict[str, Value] = {}
        for name, cell in zip(fields, cells, strict=False):
            value, _, note = cell.partition("  ")
            q[name] = value.strip()
            if note.strip():
                q["note"] = note.strip()
        entity = {"gpu_index": q.get("index"), "uuid": q.get("uuid"), "bus_id": q.get("pci.bus_id")}
        action = str(q.get("gpu_recovery_action", "None") or "None")
        if action.lower() not in ("none", "n/a", "[n/a]", ""):
            out.append(make("nvidia-smi-csv", "gpu_recovery_required", category="gpu-recovery",
                            failure="gpu_reset_needed", severity="error",
                            meaning=f"the driver asks for recovery action {action}: "
                                    f"{_RECOVERY.get(action.lower(), action)} (the GPU is unusable until then)",
                            lines=ctx.src([i], piece.start), entity=entity, quantities=q))
            continue
        out.append(make("nvidia-smi-csv", "gpu_query_row", category="inventory", severity="ok",
                        meaning=", ".join(f"{k}={v}" for k, v in q.items()), lines=ctx.src([i], piece.start),
                        entity=entity, quantities=q))
    return out


READERS: dict[str, Callable[[Ctx, Piece], list[Finding]]] = {
    "nvidia-smi-list": read_list,
    "nvidia-smi-mig": read_mig,
    "nvidia-smi-topo": read_topo,
    "nvidia-smi-csv": read_csv,
    "dcgmi-nvlink": read_nvlink,
    "nvidia-smi-nvlink": read_nvsmi_nvlink,
    "dcgmi-health": read_health,
    "dcgmi-dmon": read_dmon,
}
"""Block kind -> reader for the kinds of :mod:`pytest_hetero.explain.claim_nvidia`."""
