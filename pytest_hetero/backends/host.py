"""Discovery on one host (local backend, and the Docker backend's host): probe, compare, snapshot.

Vendor per resource type: gpu → ``nvidia`` (unless the resource names another vendor),
npu → ``ascend``, cpu → ``cpu``. The probe's raw output is kept as an artifact; the snapshot
record holds what was seen, what was expected, and every named difference.
"""

from __future__ import annotations

from typing import Any

from pytest_hetero.layers.base import LayerContext, LayerFailed
from pytest_hetero.matrix.model import Resource

VENDOR_BY_TYPE: dict[str, str] = {"gpu": "nvidia", "npu": "ascend", "cpu": "cpu"}


def vendor_of(resource_type: str, vendor: str) -> str:
    """Probe vendor for a resource: its declared vendor when a probe exists for it, else by type."""
    vendor = vendor.lower()
    if vendor in ("nvidia", "ascend", "huawei"):
        return "ascend" if vendor == "huawei" else vendor
    return VENDOR_BY_TYPE[resource_type]


def probe_host(vendor: str) -> Any:
    """Run the live probe for ``vendor`` (``nvidia``, ``ascend``, ``cpu``) on this host; return its Inventory."""
    if vendor == "nvidia":
        from pytest_hetero.probes.nvidia import probe_nvidia
        return probe_nvidia()
    if vendor == "ascend":
        from pytest_hetero.probes.ascend import probe_ascend
        return probe_ascend()
    from pytest_hetero.probes.cpu import probe_cpu
    return probe_cpu()


def expectation(resource: Resource, advertised: dict[str, int] | None = None) -> dict[str, Any]:
    """Translate a matrix resource's ``expect`` (+ advertised capacity/allocatable) to the probe
    comparator's Expectation mapping (``pytest_hetero.probes.compare``)."""
    exp = resource.expect
    names = [k for k in resource.requests if k not in ("cpu", "memory", "ephemeral-storage")]
    out: dict[str, Any] = {"resource": names[0] if names else resource.type}
    for ours, theirs in (("devices", "count"), ("product", "product"), ("min_memory_mib", "min_memory_mib"),
                         ("driver", "driver_version"), ("cuda", "cuda_version"), ("cann", "cann_version")):
        if ours in exp:
            out[theirs] = exp[ours]
    if "mig_profile" in exp:
        out["mig_profiles"] = (exp["mig_profile"],)
    out.update(advertised or {})
    return out


def _cpu_differences(inventory: Any, expect: dict[str, Any]) -> list[dict[str, Any]]:
    extra = inventory.extra or {}
    out = []
    cpus = extra.get("cpu_limit_cores") or extra.get("logical_cpus")
    if "min_cpus" in expect and (cpus is None or float(cpus) < float(expect["min_cpus"])):
        out.append({"field": "cpus", "expected": f">= {expect['min_cpus']}", "observed": cpus,
                    "message": f"{cpus} usable CPUs, matrix expects at least {expect['min_cpus']}"})
    mem = extra.get("memory_effective_mib") or extra.get("memory_total_mib")
    if "min_memory_total_mib" in expect and (mem is None or int(mem) < int(expect["min_memory_total_mib"])):
        out.append({"field": "memory", "expected": f">= {expect['min_memory_total_mib']} MiB", "observed": mem,
                    "message": f"{mem} MiB usable memory, matrix expects {expect['min_memory_total_mib']} MiB"})
    return out


def discover_host(ctx: LayerContext, advertised: dict[str, int] | None = None) -> Any:
    """Probe this host for ``ctx.resource``; record the snapshot; return the Inventory.

    ``advertised``: what the platform claims, e.g. ``{"capacity": 8, "allocatable": 7}``.
    Raises LayerFailed (owner infrastructure) with category ``driver_missing`` (no driver /
    no devices), ``device_unhealthy`` or ``expectation_mismatch``.
    """
    from pytest_hetero.probes.compare import compare

    resource = ctx.resource
    vendor = vendor_of(resource.type, resource.vendor)
    inventory = probe_host(vendor)
    raw_path = ctx.artifact(f"probe-{vendor}.txt", inventory.raw).path if inventory.raw else None
    if vendor == "cpu":
        differences = _cpu_differences(inventory, resource.expect)
    else:
        found = compare(inventory, expectation(resource, advertised))
        differences = [d.to_dict() for d in found]
    ctx.record("discovery.snapshot", vendor=vendor, source=inventory.source,
               observed=inventory.to_dict(include_raw=False), expected=dict(resource.expect),
               advertised=advertised, differences=differences, raw_artifact=raw_path)
    if inventory.global_errors and not inventory.devices:
        raise LayerFailed(f"{vendor} discovery on this host: {'; '.join(inventory.global_errors)}",
                          "driver_missing", "infrastructure")
    sick = [d for d in inventory.devices if d.health == "critical"]
    if sick:
        raise LayerFailed("unhealthy devices: " + "; ".join(
            f"{d.label}: {', '.join(d.errors) or d.health_raw}" for d in sick), "device_unhealthy",
            "infrastructure")
    if differences:
        raise LayerFailed("; ".join(str(d.get("message", d)) for d in differences), "expectation_mismatch",
                          "infrastructure")
    return inventory
