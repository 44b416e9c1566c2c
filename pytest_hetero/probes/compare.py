"""Compare what a probe saw with what was expected and what Kubernetes advertises.

Inputs: an :class:`~pytest_hetero.probes.model.Inventory` and an :class:`Expectation` (or a
mapping with the same keys) per resource, where ``capacity``/``allocatable`` are the node's
advertised integers for that resource (``status.capacity``/``status.allocatable``). Output: a
list of named :class:`Difference` records, each owned by ``infrastructure``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, TypedDict

from pytest_hetero.probes.model import Device, Inventory, Partition

SOURCE_NAMES = {
    "nvml": "NVML",
    "nvidia-smi-xml": "nvidia-smi",
    "nvidia-smi-table": "nvidia-smi",
    "npu-smi": "npu-smi",
    "proc": "/proc",
}


class ExpectationFields(TypedDict, total=False):
    """:class:`Expectation`'s fields as a mapping (what :func:`compare` accepts and evidence records as
    ``expected``); a field left out takes the dataclass's default."""

    resource: str
    count: int
    product: str
    min_memory_mib: int
    driver_version: str
    cuda_version: str
    cann_version: str
    mig_profiles: tuple[str, ...]


class DifferenceDict(TypedDict):
    """:meth:`Difference.to_dict`: a :class:`Difference` as JSON (every field written)."""

    category: str
    message: str
    expected: str | None
    actual: str | None
    device: str | None


@dataclass(frozen=True)
class Expectation:
    """What one resource should look like.

    ``count`` devices (for ``nvidia.com/mig-<profile>`` resources: MIG instances of that
    profile); ``product`` a regex searched in each device name; ``min_memory_mib`` per device;
    version constraints such as ``">=535"``, ``">=12.2,<13"``, ``"==24.1"``; ``mig_profiles``
    that must exist (MIG ``"1g.10gb"`` or Ascend vNPU template ``"vir04"``);
    ``capacity``/``allocatable`` as advertised by the node; ``replicas`` devices advertised per
    physical one (time-slicing, HAMi split count).
    """

    resource: str = "nvidia.com/gpu"
    count: int | None = None
    product: str | None = None
    min_memory_mib: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    cann_version: str | None = None
    mig_profiles: tuple[str, ...] = ()
    capacity: int | None = None
    allocatable: int | None = None
    replicas: int = 1

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Expectation:
        """Build from a mapping with the field names (``product_regex`` is accepted for ``product``)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "product_regex" in data and "product" not in values:
            values["product"] = data["product_regex"]
        if isinstance(values.get("mig_profiles"), (list, str)):
            raw = values["mig_profiles"]
            values["mig_profiles"] = (raw,) if isinstance(raw, str) else tuple(raw)
        return cls(**values)


@dataclass(frozen=True)
class Difference:
    """One named mismatch between what a probe saw and what was expected or advertised.

    ``category``: global-error, device-count, advertised-count, product, memory,
    driver-version, cuda-version, cann-version, mig-profile, device-health (no owner: the layer
    that reads it names the failure category, and the failure table its owner); a
    one-line ``message``; the expected/actual values as text; the device label if any.
    """

    category: str
    message: str
    expected: str | None = None
    actual: str | None = None
    device: str | None = None

    def to_dict(self) -> DifferenceDict:
        """Return the difference as a JSON-ready dict."""
        return {"category": self.category, "message": self.message, "expected": self.expected,
                "actual": self.actual, "device": self.device}


def _key(version: str) -> tuple[tuple[int, int | str], ...]:
    parts = [p for p in re.split(r"[.\-_+]", version.strip().lower()) if p]
    return tuple((1, int(p)) if p.isdecimal() else (0, p) for p in parts)


def satisfies(version: str | None, constraint: str) -> bool:
    """Return True when ``version`` meets every comma-separated clause of ``constraint``.

    Operators ``>= > <= < == != =``; a bare version or ``==`` matches by leading components
    (``"12.2"`` matches ``"12.2.1"``). Numeric parts compare as numbers, text parts
    (``rc1``) sort before numbers. None never satisfies.
    """
    if version is None:
        return False
    have = _key(version)
    for clause in constraint.split(","):
        m = re.fullmatch(r"\s*(>=|<=|==|!=|>|<|=)?\s*(\S+)\s*", clause)
        if not m:
            return False
        op, want = m.group(1) or "==", _key(m.group(2))
        prefix = have[: len(want)]
        ok = {
            ">=": have >= want,
            ">": have > want and prefix != want,
            "<=": have <= want or prefix == want,
            "<": have < want and prefix != want,
            "==": prefix == want,
            "=": prefix == want,
            "!=": prefix != want,
        }[op]
        if not ok:
            return False
    return True


def _mig_matches(part: Partition, profile: str) -> bool:
    if part.profile is not None:
        return part.profile == profile
    m = re.fullmatch(r"(\d+)g\.(\d+)gb", profile)
    if not m or part.memory_total_mib is None:
        return False
    return math.ceil(part.memory_total_mib / 1024) == int(m.group(2))


def _name_matches(name: str | None, pattern: str) -> bool:
    if name is None:
        return False
    if re.search(pattern, name, re.IGNORECASE):
        return True
    if name.endswith("..."):
        stem = name[:-3].strip().lower()
        literal = re.sub(r"\\(.)", r"\1", pattern).strip("^$").replace(".*", " ").lower()
        # nvidia-smi cut the name: accept when the pattern's text continues where the name stops
        tails = (stem[i:] for i in range(len(stem)) if i == 0 or stem[i - 1] == " ")
        return bool(stem) and (literal in stem or any(len(t) >= 4 and literal.startswith(t) for t in tails))
    return False


def _advertised(inv: Inventory, exp: Expectation, seen: int, src: str) -> list[Difference]:
    bad = [d for d in inv.devices if d.health == "critical"]
    healthy = (seen - len(bad)) * exp.replicas
    wrong_capacity = exp.capacity is not None and exp.capacity != seen * exp.replicas
    wrong_alloc = exp.allocatable is not None and exp.allocatable != healthy
    if not (wrong_capacity or wrong_alloc):
        return []
    parts = []
    if exp.capacity is not None:
        parts.append(f"capacity {exp.resource}={exp.capacity}")
    if exp.allocatable is not None:
        parts.append(f"allocatable={exp.allocatable}")
    parts.append(f"{src} sees {seen} device{'s' if seen != 1 else ''}")
    parts += [f"{d.label} has {'; '.join(d.errors) or 'critical health'}" for d in bad]
    return [
        Difference(
            "advertised-count",
            ", ".join(parts),
            expected=f"{seen * exp.replicas} advertised, {healthy} allocatable",
            actual=f"capacity={exp.capacity}, allocatable={exp.allocatable}",
        )
    ]


def _device_checks(dev: Device, exp: Expectation) -> list[Difference]:
    found: list[Difference] = []
    if exp.product and not _name_matches(dev.name, exp.product):
        found.append(
            Difference(
                "product",
                f"{dev.label} is '{dev.name}', expected /{exp.product}/",
                exp.product,
                dev.name,
                dev.label,
            )
        )
    if exp.min_memory_mib is not None and (dev.memory_total_mib or 0) < exp.min_memory_mib:
        have = "not reported" if dev.memory_total_mib is None else f"{dev.memory_total_mib} MiB"
        found.append(
            Difference(
                "memory",
                f"{dev.label} memory {have}, expected >= {exp.min_memory_mib} MiB",
                str(exp.min_memory_mib),
                None if dev.memory_total_mib is None else str(dev.memory_total_mib),
                dev.label,
            )
        )
    if dev.health == "critical":
        found.append(
            Difference(
                "device-health",
                f"{dev.label} is unhealthy: {'; '.join(dev.errors) or dev.health_raw}",
                "ok",
                dev.health,
                dev.label,
            )
        )
    return found


def compare(inventory: Inventory, expect: Expectation | Mapping[str, Any]) -> list[Difference]:
    """Return every difference between ``inventory`` and ``expect``, most fundamental first.

    Order: global errors, device count, advertised capacity/allocatable, versions, MIG
    profiles, then per-device product, memory and health. An empty list means it matches.
    """
    exp = expect if isinstance(expect, Expectation) else Expectation.from_mapping(expect)
    src = SOURCE_NAMES.get(inventory.source, inventory.source)
    found = [Difference("global-error", err) for err in inventory.global_errors]
    mig = re.fullmatch(r"nvidia\.com/mig-(.+)", exp.resource)
    if mig:
        seen = sum(_mig_matches(p, mig.group(1)) for d in inventory.devices for p in d.partitions)
    else:
        seen = len(inventory.devices)
    if exp.count is not None and seen != exp.count:
        found.append(
            Difference(
                "device-count",
                f"expected {exp.count} {exp.resource}, {src} sees {seen}",
                str(exp.count),
                str(seen),
            )
        )
    found += _advertised(inventory, exp, seen, src)
    for category, have, want in (
        ("driver-version", inventory.driver_version, exp.driver_version),
        ("cuda-version", inventory.cuda_version, exp.cuda_version),
        ("cann-version", inventory.cann_version, exp.cann_version),
    ):
        if want and not satisfies(have, want):
            what = category.replace("-", " ")
            found.append(
                Difference(category, f"{what} {have or 'not reported'}, expected {want}", want, have)
            )
    parts = [p for d in inventory.devices for p in d.partitions]
    for profile in exp.mig_profiles:
        if not any(_mig_matches(p, profile) for p in parts):
            found.append(
                Difference(
                    "mig-profile",
                    f"no {'vNPU' if profile.startswith('vir') else 'MIG'} instance of profile {profile} "
                    f"({len(parts)} partition(s) seen)",
                    profile,
                    str(len(parts)),
                )
            )
    for dev in inventory.devices:
        found += _device_checks(dev, exp)
    return found
