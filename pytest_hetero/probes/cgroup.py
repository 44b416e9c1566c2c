"""cgroup v1 and v2 limits of the current process (what a container is really allowed).

Source format: ``/proc/self/cgroup`` (``ID:controllers:path`` lines; v2 is ``0::path``) and the
kernel's cgroup files (Documentation/admin-guide/cgroup-v2.rst, cgroup-v1/). A limit set on an
ancestor applies too, so each value is the minimum found from the process's cgroup up to the
mount root. When the path from ``/proc/self/cgroup`` is absent under the mount (a container
with its own cgroup mounted at the root), the mount root itself is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

UNLIMITED_BYTES = 1 << 60
"""v1 reports "no limit" as PAGE_COUNTER_MAX (≈ 2^63, page-aligned); anything above this is unlimited."""


@dataclass(frozen=True)
class CgroupLimits:
    """CPU and memory limits: cores as a float (quota/period), memory in MiB, None = unlimited."""

    version: int | None = None
    path: str | None = None
    cpu_quota_cores: float | None = None
    cpuset_cpus: int | None = None
    memory_limit_mib: int | None = None
    warnings: tuple[str, ...] = ()


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _chain(mount: Path, rel: str) -> list[Path]:
    inside = rel.strip("/") and ".." not in rel.split("/")
    leaf = mount / rel.strip("/") if inside else mount
    if not leaf.is_dir():
        leaf = mount
    chain = [leaf]
    while chain[-1] != mount and mount in chain[-1].parents:
        chain.append(chain[-1].parent)
    return chain


def _min(values: list[float]) -> float | None:
    return min(values) if values else None


def cpulist_count(text: str | None) -> int | None:
    """Count CPUs in a kernel cpulist (``"0-3,8-11"`` → 8); None for empty/unreadable text."""
    if not text or not text.strip():
        return None
    total = 0
    for item in text.strip().split(","):
        lo, sep, hi = item.strip().partition("-")
        if not lo.isdecimal() or (sep and not hi.isdecimal()):
            return None
        total += int(hi) - int(lo) + 1 if sep else 1
    return total


_count = cpulist_count


def _v2(base: Path, rel: str) -> tuple[float | None, int | None, int | None]:
    cpus: list[float] = []
    mems: list[float] = []
    chain = _chain(base, rel)
    for d in chain:
        quota, _, period = (_read(d / "cpu.max") or "max").partition(" ")
        if quota.isdecimal() and period.strip().isdecimal() and int(period) > 0:
            cpus.append(int(quota) / int(period))
        mem = _read(d / "memory.max")
        if mem and mem.isdecimal():
            mems.append(int(mem))
    cpuset = _count(_read(chain[0] / "cpuset.cpus.effective"))
    mem_min = _min(mems)
    return _min(cpus), cpuset, None if mem_min is None else int(mem_min) // (1024 * 1024)


def _v1_mount(base: Path, controller: str, names: list[str]) -> Path | None:
    aliases = ["cpu,cpuacct", "cpuacct,cpu"] if controller == "cpu" else []
    for candidate in [",".join(names), controller, *aliases]:
        if candidate and (base / candidate).is_dir():
            return base / candidate
    return None


def _v1(base: Path, paths: dict[str, tuple[list[str], str]]) -> tuple[float | None, int | None, int | None]:
    cpus: list[float] = []
    mems: list[float] = []
    names, rel = paths.get("cpu", ([], "/"))
    mount = _v1_mount(base, "cpu", names)
    for d in _chain(mount, rel) if mount else []:
        quota, period = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
        if (
            quota
            and period
            and quota.lstrip("-").isdecimal()
            and period.isdecimal()
            and int(quota) > 0 < int(period)
        ):
            cpus.append(int(quota) / int(period))
    names, rel = paths.get("memory", ([], "/"))
    mount = _v1_mount(base, "memory", names)
    for d in _chain(mount, rel) if mount else []:
        mem = _read(d / "memory.limit_in_bytes")
        if mem and mem.isdecimal() and int(mem) < UNLIMITED_BYTES:
            mems.append(int(mem))
    names, rel = paths.get("cpuset", ([], "/"))
    mount = _v1_mount(base, "cpuset", names)
    cpuset = _count(_read(_chain(mount, rel)[0] / "cpuset.cpus")) if mount else None
    mem_min = _min(mems)
    return _min(cpus), cpuset, None if mem_min is None else int(mem_min) // (1024 * 1024)


def read_cgroup_limits(root: str = "/") -> CgroupLimits:
    """Read the limits for the process described by ``<root>/proc/self/cgroup``; never raises.

    Version 1 is used when any v1 controller (cpu, memory) is listed, else version 2 when
    ``<root>/sys/fs/cgroup/cgroup.controllers`` exists or a ``0::`` line is present.
    """
    base = Path(root)
    text = _read(base / "proc/self/cgroup")
    if text is None:
        return CgroupLimits(warnings=("/proc/self/cgroup unreadable; no cgroup limits read",))
    v1: dict[str, tuple[list[str], str]] = {}
    v2_path: str | None = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _hid, controllers, path = parts
        if controllers == "" and _hid == "0":
            v2_path = path
        for name in controllers.split(","):
            if name:
                v1[name] = (controllers.split(","), path)
    mount = base / "sys/fs/cgroup"
    if "cpu" in v1 or "memory" in v1:
        cpu, cpuset, mem = _v1(mount, v1)
        return CgroupLimits(1, v1.get("cpu", v1.get("memory", ([], "/")))[1], cpu, cpuset, mem)
    if v2_path is not None or (mount / "cgroup.controllers").exists():
        cpu, cpuset, mem = _v2(mount, v2_path or "/")
        return CgroupLimits(2, v2_path or "/", cpu, cpuset, mem)
    return CgroupLimits(warnings=("no cpu/memory cgroup controller found in /proc/self/cgroup",))
