"""Huawei Ascend blocks -> findings: ``npu-smi info`` tables, ``-t <type>`` key/values, ``-t topo``."""

from __future__ import annotations

import re
from collections.abc import Callable

from pytest_hetero.errors import ParseError
from pytest_hetero.explain.blocks import Piece
from pytest_hetero.explain.context import Ctx, first_line, make
from pytest_hetero.explain.model import Finding, Value
from pytest_hetero.probes import _values as v
from pytest_hetero.probes.ascend_kv import parse_npu_kv, parse_npu_topo
from pytest_hetero.probes.ascend_table import parse_npu_smi_info


def read_npu_table(ctx: Ctx, piece: Piece) -> list[Finding]:
    """One finding per chip (``npu_ok`` / ``npu_health_warning`` / ``npu_unhealthy``), a report header,
    host-level errors and each process (``npu_process``)."""
    lines = ctx.lines(piece)
    try:
        inv = parse_npu_smi_info("\n".join(lines))
    except ParseError:
        return []
    kind = "npu-smi"
    version_idx = [i for i, ln in enumerate(lines) if "npu-smi" in ln and "Version" in ln]
    width = {len(ln) for ln in lines if ln.strip().startswith(("|", "+"))}
    npus, chips = inv.extra.get("npu_count"), inv.extra.get("chip_count")  # the table probe's counts
    out = [make(kind, "npu_report", category="inventory", severity="ok",
                meaning=f"npu-smi {inv.tool_version}: {npus} NPU(s), {chips} chip(s)",
                lines=ctx.src(version_idx, piece.start),
                quantities={"tool_version": inv.tool_version, "driver_version": inv.driver_version,
                            "npus": npus, "chips": chips,
                            "table_width": max(width) if width else None,
                            "warnings": "; ".join(inv.warnings) or None})]
    for problem in inv.global_errors:
        out.append(make(kind, "npu_tool_error", category="npu-driver", failure="npu_hardware_fault",
                        severity="error",
                        meaning=problem, lines=ctx.span(piece, 1)))
    for dev in inv.devices:
        npu = dev.extra.get("npu_id")
        chip = dev.extra.get("chip_id")
        idx = []
        if dev.bus_id:
            at = next((i for i, ln in enumerate(lines) if dev.bus_id in ln), None)
            if at is not None:
                idx = [at - 1, at] if at > 0 else [at]
        if dev.health == "ok":
            code, severity, failure, meaning = "npu_ok", "ok", None, f"NPU {npu} chip {chip} healthy"
        elif dev.health == "warning":
            code, severity, failure = "npu_health_warning", "warning", "npu_hardware_fault"
            meaning = (f"NPU {npu} chip {chip}: npu-smi health {dev.health_raw} "
                       "(minor alarm; check npu-smi info -t health)")
        elif dev.health == "critical":
            code, severity, failure = "npu_unhealthy", "error", "npu_hardware_fault"
            meaning = f"NPU {npu} chip {chip}: npu-smi health {dev.health_raw}"
        else:
            code, severity, failure = "npu_health_unknown", "warning", "npu_hardware_fault"
            meaning = f"NPU {npu} chip {chip}: health reads {dev.health_raw!r}"
        q: dict[str, Value] = {
            "power_w": dev.power_w, "temperature_c": dev.temperature_c, "aicore_pct": dev.utilisation_pct,
            "memory_total_mib": dev.memory_total_mib, "memory_used_mib": dev.memory_used_mib,
            "health_raw": dev.health_raw, "processes": len(dev.processes) or None,
        }
        q.update({k: val for k, val in dev.extra.items()
                  if isinstance(val, (int, float, str)) and k not in ("npu_id", "chip_id")})
        out.append(make(kind, code, category="npu" if severity == "ok" else "npu-hardware", failure=failure,
                        severity=severity, meaning=meaning, lines=ctx.src(idx, piece.start),
                        entity={"npu_id": npu, "chip": chip, "bus_id": dev.bus_id, "npu_name": dev.name},
                        quantities=q))
        for proc in dev.processes:
            pidx = first_line(lines, proc.pid, r"\|\s*{}\s*\|")
            out.append(make(kind, "npu_process", category="npu", severity="ok",
                            meaning=f"process {proc.pid} {proc.name} holds {proc.used_memory_mib} MB on NPU {npu}",
                            lines=ctx.src(pidx[:1], piece.start),
                            entity={"npu_id": npu, "chip": proc.chip, "pid": proc.pid, "process": proc.name},
                            quantities={"used_memory_mb": proc.used_memory_mib}))
    return out


_NUMBER_KEYS = re.compile(r"\((?:MB|%|C|W|MHZ|MHz|page)\)$|Count$|ID$")


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def read_npu_kv(ctx: Ctx, piece: Piece) -> list[Finding]:
    """One finding per chip group (and the mcu group) of an ``npu-smi info -t`` output."""
    lines = ctx.lines(piece)
    kv = parse_npu_kv(lines)
    out: list[Finding] = []
    command_idx = [i for i, ln in enumerate(lines) if "npu-smi" in ln]
    npu_group = next((g for g in kv.groups if g.scope == "npu"), None)
    for group in kv.groups:
        if group.scope == "npu" and any(g.scope in ("chip", "mcu") for g in kv.groups):
            continue
        q: dict[str, Value] = {}
        for key, value in group.values.items():
            if value.lower().startswith("0x"):
                q[_key(key)] = value
                continue
            number = v.number(value) if _NUMBER_KEYS.search(key) or value.replace(".", "").isdecimal() else None
            q[_key(key)] = (int(number) if number is not None and float(number).is_integer() and "." not in value
                            else number) if number is not None else value
        keys = group.chip_keys()
        chip = keys.chip_id
        scope = "mcu" if group.scope == "mcu" else "chip"
        health = next((val for key, val in group.values.items() if re.search(r"Health(?: Status)?$", key)), None)
        bad = health is not None and health.strip().lower() not in ("ok", "healthy")
        hbm = v.number(keys.hbm_rate)
        core = v.number(keys.aicore_rate)
        chip_text = chip if chip is not None else ""
        meaning = f"npu-smi info -t {kv.query or '?'}: NPU {kv.npu_id} {scope} {chip_text}".rstrip()
        if hbm is not None and core is not None and hbm >= 80 and core <= 10:
            meaning += f" holds {hbm:g} % HBM at {core:g} % AI Core (memory held, compute nearly idle)"
        out.append(make("npu-smi-kv", "npu_health_warning" if bad else ("npu_mcu" if scope == "mcu" else "npu_chip"),
                        category="npu" if not bad else "npu-hardware", failure="npu_hardware_fault" if bad else None,
                        severity="warning" if bad else "ok", meaning=meaning,
                        lines=ctx.src(command_idx[:1] + group.lines + (npu_group.lines if npu_group else []),
                                      piece.start),
                        entity={"npu_id": kv.npu_id, "chip": chip if scope == "chip" else "mcu"},
                        quantities={"query": kv.query, **q}))
    return out


def read_npu_topo(ctx: Ctx, piece: Piece) -> list[Finding]:
    """One ``npu_topology`` finding: link type counts, CPU affinity per NPU, PCIe-only pairs."""
    lines = ctx.lines(piece)
    topo = parse_npu_topo(lines)
    if not topo.names:
        return []
    counts = topo.counts()
    pairs = len(topo.names) * (len(topo.names) - 1)
    full = counts.get("HCCS", 0) == pairs
    slow = {k: n for k, n in counts.items() if k not in ("HCCS", "X")}
    q: dict[str, Value] = {"npus": len(topo.names), "pairs": pairs,
                           **{f"links_{k.lower()}": n for k, n in counts.items()}}
    q.update({f"cpu_affinity.{name}": cpus for name, cpus in topo.affinity.items()})
    meaning = (f"{len(topo.names)} NPUs in a full HCCS mesh" if full else
               f"{len(topo.names)} NPUs; {sum(slow.values())} ordered pair(s) not on HCCS ({', '.join(slow)})")
    return [make("npu-smi-topo", "npu_topology", category="npu", severity="ok", meaning=meaning,
                 lines=ctx.src(topo.lines, piece.start), quantities=q)]


def read_npu_vnpu(ctx: Ctx, piece: Piece) -> list[Finding]:
    """``npu-smi info -t info-vnpu -i N -c M`` (:func:`pytest_hetero.probes.ascend.parse_npu_vnpu`): the chip's
    free/total resources (one ``npu_vnpu_resources`` fact) and each vNPU (``vnpu``, its template, vgroup,
    container and status); a declared count that differs from the rows listed is kept as ``warning``."""
    from pytest_hetero.probes.ascend import parse_npu_vnpu

    lines = ctx.lines(piece)
    try:
        info = parse_npu_vnpu("\n".join(lines))
    except ParseError:
        return []
    head = [i for i, ln in enumerate(lines) if re.search(r"AICORE|Total number of vnpu|^\s*\|\s*(?:\d+|NA)/", ln)]
    q: dict[str, Value] = {f"{name.lower()}_{part}": val for name, pair in info.resources.items()
                           for part, val in pair.items()}
    q.update(vnpus_declared=info.declared_count, vnpus_listed=len(info.partitions),
             warning="; ".join(info.warnings) or None)
    out = [make("npu-smi-vnpu", "npu_vnpu_resources", category="npu", severity="ok",
                meaning="vNPU resources of the chip (free/total): "
                        + ", ".join(f"{k} {p['free']}/{p['total']}" for k, p in info.resources.items())
                        + f"; {len(info.partitions)} vNPU(s)", lines=ctx.src(head, piece.start), quantities=q)]
    for part in info.partitions:
        at = [i for i, ln in enumerate(lines) if re.match(rf"^\s*\|\s*{part.index}\s*\|", ln)]
        out.append(make("npu-smi-vnpu", "vnpu", category="npu", severity="ok",
                        meaning=f"vNPU {part.index}: template {part.profile}", lines=ctx.src(at, piece.start),
                        entity={"vnpu_id": part.index, "container": part.extra.get("container_id")},
                        quantities={"template": part.profile, "vgroup_id": part.extra.get("vgroup_id"),
                                    "status": part.extra.get("status")}))
    return out


READERS: dict[str, Callable[[Ctx, Piece], list[Finding]]] = {
    "npu-smi-vnpu": read_npu_vnpu,
    "npu-smi": read_npu_table,
    "npu-smi-kv": read_npu_kv,
    "npu-smi-topo": read_npu_topo,
}
"""Block kind -> reader, for the Ascend kinds."""
