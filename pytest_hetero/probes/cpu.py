"""CPU probe: model, sockets, cores, NUMA, memory, and the cgroup limits that actually apply.

Sources (all read under a ``root`` path so tests can point at a fake tree): ``/proc/cpuinfo``
(x86 ``model name``/``physical id``/``core id``; arm64 ``CPU implementer``/``CPU part``),
``/sys/devices/system/cpu/cpu*/topology``, ``/proc/meminfo``, ``/sys/devices/system/node``,
``/proc/self/cgroup`` and the cgroup files it points to: v2 ``cpu.max``, ``memory.max``,
``cpuset.cpus.effective``; v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``,
``memory.limit_in_bytes``, ``cpuset.cpus``. Inside a container the cgroup limit is what a
workload gets, so the effective values are the minimum over the cgroup and its ancestors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.probes.cgroup import CgroupLimits, cpulist_count, read_cgroup_limits
from pytest_hetero.probes.model import Device, Inventory

ARM_PARTS: dict[tuple[str, str], str] = {
    ("0x48", "0xd01"): "HiSilicon Kunpeng-920",
    ("0x48", "0xd02"): "HiSilicon Kunpeng-930",
    ("0x41", "0xd0c"): "ARM Neoverse-N1",
    ("0x41", "0xd40"): "ARM Neoverse-V1",
    ("0x41", "0xd49"): "ARM Neoverse-N2",
    ("0x41", "0xd4f"): "ARM Neoverse-V2",
    ("0x41", "0xd08"): "ARM Cortex-A72",
    ("0xc0", "0xac3"): "Ampere-1",
}
"""arm64 ``(CPU implementer, CPU part)`` → model name, for kernels that print no model name."""


class NumaNode(TypedDict):
    """One NUMA node (``/sys/devices/system/node/node<N>``): its ``node`` number, ``cpus`` (its cpulist's count;
    None: unreadable) and ``memory_total_mib`` (its meminfo's; None: unreadable)."""

    node: int
    cpus: int | None
    memory_total_mib: int | None


class CgroupDict(TypedDict):
    """:class:`~pytest_hetero.probes.cgroup.CgroupLimits` as :meth:`CpuFacts.to_dict` writes it."""

    version: int | None
    path: str | None
    cpu_quota_cores: float | None
    cpuset_cpus: int | None
    memory_limit_mib: int | None
    warnings: list[str]


class CpuFactsDict(TypedDict):
    """:meth:`CpuFacts.to_dict`: the facts' fields, ``cgroup`` nested."""

    model: str | None
    sockets: int | None
    physical_cores: int | None
    logical_cpus: int | None
    numa_nodes: int | None
    numa: list[NumaNode]
    memory_total_mib: int | None
    cgroup: CgroupDict
    cpu_limit_cores: float | None
    memory_limit_mib: int | None
    memory_effective_mib: int | None
    warnings: list[str]


@dataclass(frozen=True)
class CpuFacts:
    """What the CPU probe read: counts, memory in MiB, CPU limits in (fractional) cores.

    ``cpu_limit_cores`` is the effective CPU budget: the smallest of the cgroup quota
    (quota/period), the cpuset size and the logical CPU count. ``memory_limit_mib`` is the
    cgroup memory limit (None when unlimited); ``memory_effective_mib`` the smaller of that and
    ``memory_total_mib``. ``numa`` lists ``{"node", "cpus", "memory_total_mib"}`` per node.
    """

    model: str | None = None
    sockets: int | None = None
    physical_cores: int | None = None
    logical_cpus: int | None = None
    numa_nodes: int | None = None
    numa: tuple[NumaNode, ...] = ()
    memory_total_mib: int | None = None
    cgroup: CgroupLimits = field(default_factory=CgroupLimits)
    cpu_limit_cores: float | None = None
    memory_limit_mib: int | None = None
    memory_effective_mib: int | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> CpuFactsDict:
        """Return the facts as a JSON-ready dict (``cgroup`` nested)."""
        cg = self.cgroup
        return {"model": self.model, "sockets": self.sockets, "physical_cores": self.physical_cores,
                "logical_cpus": self.logical_cpus, "numa_nodes": self.numa_nodes,
                "numa": [node.copy() for node in self.numa], "memory_total_mib": self.memory_total_mib,
                "cgroup": {"version": cg.version, "path": cg.path, "cpu_quota_cores": cg.cpu_quota_cores,
                           "cpuset_cpus": cg.cpuset_cpus, "memory_limit_mib": cg.memory_limit_mib,
                           "warnings": list(cg.warnings)},
                "cpu_limit_cores": self.cpu_limit_cores, "memory_limit_mib": self.memory_limit_mib,
                "memory_effective_mib": self.memory_effective_mib, "warnings": list(self.warnings)}


def _read(root: Path, rel: str) -> str | None:
    try:
        return (root / rel.lstrip("/")).read_text(errors="replace")
    except OSError:
        return None


class _CpuBlock(msgspec.Struct, frozen=True, kw_only=True, rename={
        "model_name": "model name", "cpu_model": "cpu model", "cpu_implementer": "cpu implementer",
        "cpu_part": "cpu part", "physical_id": "physical id", "core_id": "core id"}):
    """One processor's block of ``/proc/cpuinfo`` (``key : value`` lines, keys lower-cased), the keys read: its
    ``processor`` number, its model (x86 ``model name``, ``cpu model`` or ``cpu`` elsewhere; ARM ``CPU
    implementer`` and ``CPU part``), as printed ("" when not printed), and its socket (``physical id``) and
    ``core id`` (None when not printed)."""

    processor: str = ""
    model_name: str = ""
    cpu_model: str = ""
    cpu: str = ""
    cpu_implementer: str = ""
    cpu_part: str = ""
    physical_id: str | None = None
    core_id: str | None = None


def _cpuinfo(text: str) -> list[_CpuBlock]:
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
            current = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            current[key.strip().lower()] = value.strip()
    if current:
        blocks.append(current)
    read = [msgspec.convert(block, _CpuBlock) for block in blocks]
    return [block for block in read if block.processor.isdecimal()]


def _model(blocks: list[_CpuBlock], text: str) -> str | None:
    for block in blocks:
        model = block.model_name or block.cpu_model or block.cpu
        if model:
            return model
        impl, part = block.cpu_implementer.lower(), block.cpu_part.lower()
        if impl:
            return ARM_PARTS.get((impl, part), f"ARM implementer {impl} part {part}")
    legacy = re.search(r"^Processor\s*:\s*(.+)$", text, re.MULTILINE)
    return legacy.group(1).strip() if legacy else None


def _topology(root: Path, blocks: list[_CpuBlock]) -> tuple[set[str], set[tuple[str, str]]]:
    sockets: set[str] = set()
    cores: set[tuple[str, str]] = set()
    base = root / "sys/devices/system/cpu"
    for cpu_dir in sorted(base.glob("cpu[0-9]*")) if base.is_dir() else []:
        package = _read(cpu_dir, "topology/physical_package_id")
        core = _read(cpu_dir, "topology/core_id")
        if package is not None and core is not None:
            sockets.add(package.strip())
            cores.add((package.strip(), core.strip()))
    if not sockets:
        for block in blocks:
            if block.physical_id is not None:
                sockets.add(block.physical_id)
                if block.core_id is not None:
                    cores.add((block.physical_id, block.core_id))
    return sockets, cores


def _numa(root: Path) -> list[NumaNode]:
    nodes: list[NumaNode] = []
    base = root / "sys/devices/system/node"
    for node_dir in sorted(base.glob("node[0-9]*"), key=lambda p: int(p.name[4:])) if base.is_dir() else []:
        mem = re.search(r"MemTotal:\s*(\d+)\s*kB", _read(node_dir, "meminfo") or "")
        nodes.append(
            {
                "node": int(node_dir.name[4:]),
                "cpus": cpulist_count(_read(node_dir, "cpulist")),
                "memory_total_mib": int(mem.group(1)) // 1024 if mem else None,
            }
        )
    return nodes


def read_cpu(root: str = "/") -> CpuFacts:
    """Read :class:`CpuFacts` from the tree under ``root``; never raises for missing files.

    Each source that cannot be read leaves its fields None and adds a warning.
    """
    base = Path(root)
    warnings: list[str] = []
    cpuinfo = _read(base, "proc/cpuinfo")
    if cpuinfo is None:
        warnings.append("/proc/cpuinfo unreadable")
    blocks = _cpuinfo(cpuinfo or "")
    sockets, cores = _topology(base, blocks)
    if blocks and not sockets:
        warnings.append("no socket/core topology in /proc/cpuinfo or sysfs; sockets and cores unknown")
    meminfo = re.search(r"^MemTotal:\s*(\d+)\s*kB", _read(base, "proc/meminfo") or "", re.MULTILINE)
    if meminfo is None:
        warnings.append("/proc/meminfo has no MemTotal")
    total = int(meminfo.group(1)) // 1024 if meminfo else None
    limits = read_cgroup_limits(root)
    warnings.extend(limits.warnings)
    logical = len(blocks) or None
    candidates = [x for x in (limits.cpu_quota_cores, limits.cpuset_cpus, logical) if x is not None]
    mem_limit = limits.memory_limit_mib
    numa = _numa(base)
    return CpuFacts(
        model=_model(blocks, cpuinfo or ""),
        sockets=len(sockets) or None,
        physical_cores=len(cores) or None,
        logical_cpus=logical,
        numa_nodes=len(numa) or None,
        numa=tuple(numa),
        memory_total_mib=total,
        cgroup=limits,
        cpu_limit_cores=float(min(candidates)) if candidates else None,
        memory_limit_mib=mem_limit,
        memory_effective_mib=min(x for x in (mem_limit, total) if x is not None)
        if (mem_limit or total)
        else None,
        warnings=tuple(warnings),
    )


def probe_cpu(root: str = "/") -> Inventory:
    """Return an :class:`Inventory` (vendor ``cpu``, source ``proc``) with one Device per socket.

    Every Device carries the model name and the host memory; the full :class:`CpuFacts`
    (limits included) sit in ``extra``. Never raises.
    """
    facts = read_cpu(root)
    count = facts.sockets or (1 if facts.logical_cpus else 0)
    devices = tuple(
        Device(
            vendor="cpu",
            index=i,
            name=facts.model,
            memory_total_mib=facts.memory_total_mib,
            health="ok",
            extra={"logical_cpus": facts.logical_cpus, "physical_cores": facts.physical_cores},
        )
        for i in range(count)
    )
    return Inventory(
        vendor="cpu",
        source="proc",
        devices=devices,
        warnings=facts.warnings,
        attached_count=facts.sockets,
        extra=dict(facts.to_dict()),  # the facts, as the open extra of every inventory
    )


resolve(__name__)
