"""Run-time values of the accelerator devices a model run used, from the device series the engine sampled.

A model run's ``model.usage`` record (:meth:`pytest_hetero.probes.usage.Sampler.result`, the Kubernetes
wrapper's read-back) holds one series per device. Those of accelerators (:data:`DEVICE_SOURCES`: read by
NVML, ``nvidia-smi`` or ``npu-smi``, for the devices allocated to the run) give two values acceptance rules
judge, like ``memory_peak_mib`` (:data:`DEVICE_RUN_TIME_UNITS`):

- ``gpu_memory_peak_mib``: the highest device memory used that any sample read on any of those devices, MiB
  (GPU: ``memory.used``; NPU: HBM used = HBM usage rate × HBM capacity);
- ``device_utilisation_mean``: the mean over those devices of each one's mean utilisation over its samples
  (GPU: ``utilization.gpu``; NPU: AI Core usage rate), as a ratio 0-1.

A value no sample could read (no device series, the tool missing, every reading ``[N/A]``) is ``None`` with
why, never 0. The source names the tool and what it covered (its scope: a device as a whole counts every
process on it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_hetero.probes.usage import Measured, UsageDevice, UsageRecord

DEVICE_RUN_TIME_UNITS: dict[str, str] = {"gpu_memory_peak_mib": "MiB", "device_utilisation_mean": "ratio"}
"""The device values of one model run, by name, with their unit (``ratio``: 0-1)."""
DEVICE_SOURCES = frozenset({"nvml", "nvidia-smi", "npu-smi"})
"""The ``source`` of a usage series that read an accelerator device (not a cgroup or container)."""


def value(name: str, number: float | None, source: str, why: str | None = None) -> Measured:
    """One device value as evidence, in the shape of :func:`pytest_hetero.probes.usage.measured`:
    ``{"value", "unit", "source", "measured_by": "gate"}`` plus ``unavailable`` (why) when ``number`` is None.
    ``name``: a key of :data:`DEVICE_RUN_TIME_UNITS` (KeyError otherwise)."""
    out: Measured = {"value": None if number is None else round(float(number), 4),
                     "unit": DEVICE_RUN_TIME_UNITS[name], "source": source, "measured_by": "gate"}
    if number is None:
        out["unavailable"] = why or "not measured"
    return out


def _accelerators(usage: UsageRecord) -> list[UsageDevice]:
    """The device entries of ``usage`` read by an accelerator tool (a device's own ``source`` first, else the
    record's)."""
    default = usage["source"]
    return [d for d in usage["devices"] if d.get("source", default) in DEVICE_SOURCES]


def _why_none(usage: UsageRecord | None, resource_type: str, engine: str) -> str:
    """Why ``usage`` (None: no record) has no accelerator series, in words."""
    sampling = usage.get("device_sampling") if usage is not None else None
    if sampling is not None and sampling["unavailable"]:
        return f"{sampling['source']}: {sampling['unavailable']}"
    if usage is not None and usage["source"] in DEVICE_SOURCES and usage["unavailable"]:
        return f"{usage['source']}: {usage['unavailable']}"
    if resource_type not in ("gpu", "npu"):
        return f"a {resource_type} resource: no accelerator device was allocated to the run"
    if usage is not None and usage["available"] is False and usage["unavailable"]:
        return f"no device was sampled during the run: {usage['unavailable']}"
    return f"the {engine} engine sampled no device of this {resource_type} resource during the run"


def device_run_time(usage: UsageRecord | None, resource_type: str, engine: str) -> dict[str, Measured]:
    """``{"gpu_memory_peak_mib", "device_utilisation_mean"}`` (:func:`value`) of a model run from its
    ``model.usage`` record (None: the engine recorded none); ``resource_type`` (``gpu``, ``npu``, ``cpu``) and
    ``engine`` (its name) only word the reason of a value that could not be measured. Never raises."""
    devices = _accelerators(usage) if usage is not None else []
    from pytest_hetero.probes.usage import inside

    # Docker and Kubernetes sample the devices with the image's tool inside the model's container; locally the
    # gate's own process reads them (NVML / npu-smi on the host)
    marked = inside if engine in ("docker", "kubernetes") else (lambda values: values)
    if usage is None or not devices:
        why = _why_none(usage, resource_type, engine)
        return marked({name: value(name, None, f"the {engine} engine's device sampling", why)
                       for name in DEVICE_RUN_TIME_UNITS})
    tool = str(devices[0].get("source") or usage["source"])
    sampling = usage.get("device_sampling")
    scope = sampling["scope"] if sampling is not None else usage["scope"]
    ids = ", ".join(d["id"] for d in devices)
    peaks = [float(d["memory_high_water_mib"]) for d in devices if d["memory_high_water_mib"] is not None]
    means = [float(d["utilisation_mean_pct"]) for d in devices if d["utilisation_mean_pct"] is not None]
    return marked({
        "gpu_memory_peak_mib": value(
            "gpu_memory_peak_mib", max(peaks) if peaks else None,
            f"{tool}: highest device memory used in any sample of device(s) {ids} ({scope})",
            f"{tool} read no memory figure of device(s) {ids} in any sample (each was not available)"),
        "device_utilisation_mean": value(
            "device_utilisation_mean", sum(means) / len(means) / 100.0 if means else None,
            f"{tool}: mean over device(s) {ids} of each one's mean utilisation over its samples, 0-1 ({scope})",
            f"{tool} read no utilisation of device(s) {ids} in any sample (each was not available)"),
    })
