"""Translate a matrix resource request into Docker Engine terms (``HostConfig`` of the create call).

What maps (Docker Engine API v1.41 ``HostConfig`` field names):

- ``cpu`` → ``NanoCpus`` (cores × 10⁹; the limit when given, else the request: Docker has one
  number), ``target.cpuset[<resource>]`` → ``CpusetCpus``;
- ``memory`` → ``Memory`` and ``MemorySwap`` (bytes, equal, so the limit is hard: no swap);
- ``nvidia.com/gpu: N`` → a ``DeviceRequests`` entry ``{Count: N, Capabilities: [["gpu"]]}``, or
  ``DeviceIDs`` from ``target.device_ids[<resource>]``;
- ``huawei.com/Ascend*`` / ``huawei.com/npu: N`` → ``Devices`` ``/dev/davinci<i>`` plus
  ``/dev/davinci_manager``, ``/dev/devmm_svm``, ``/dev/hisi_hdc``, the driver folders bind-mounted
  read-only, and ``ASCEND_VISIBLE_DEVICES=<i,…>``.

Everything else (other extended resources, ``ephemeral-storage``) is kept in
:attr:`EngineRequest.untranslated` with the reason, never silently dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import msgspec

from pytest_hetero.backends.docker.client import BindMount
from pytest_hetero.declared import resolve
from pytest_hetero.matrix.model import Resource

if TYPE_CHECKING:
    import docker.types

_SUFFIX: dict[str, float] = {
    "": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|Ki|Mi|Gi|Ti|M|G|T)?$")

NVIDIA_GPU = "nvidia.com/gpu"
ASCEND_PREFIXES: tuple[str, ...] = ("huawei.com/Ascend", "huawei.com/npu")
ASCEND_CONTROL_DEVICES: tuple[str, ...] = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
"""Control nodes every Ascend container needs besides its ``/dev/davinci<N>``."""
ASCEND_DRIVER_MOUNTS: tuple[str, ...] = (
    "/usr/local/Ascend/driver", "/usr/local/dcmi", "/usr/local/bin/npu-smi", "/etc/ascend_install.info",
)
"""Host paths of the Ascend driver that containers bind read-only (as the Ascend Docker Runtime does)."""


def quantity(value: str) -> float:
    """Parse a Kubernetes-style quantity (``"500m"`` → 0.5, ``"2Gi"`` → 2147483648.0).

    Raises ValueError naming the value when it is not a quantity.
    """
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise ValueError(f"{value!r} is not a quantity (e.g. 2, 500m, 512Mi, 1G)")
    return float(match.group(1)) * _SUFFIX[match.group(2) or ""]


class DeviceRequestJson(TypedDict):
    """A ``HostConfig.DeviceRequests`` entry as the engine stores it (Docker Engine API ``DeviceRequest``):
    ``Driver`` ("" : the runtime's), ``Count`` (0 with ``DeviceIDs``; -1: all), ``DeviceIDs``, ``Capabilities``."""

    Driver: str
    Count: int
    DeviceIDs: list[str]
    Capabilities: list[list[str]]


class HostConfigOptions(TypedDict, total=False):
    """The device and limit keyword arguments of ``docker.APIClient.create_host_config`` an engine request sets
    (:meth:`EngineRequest.host_config`; each only when the request has it)."""

    nano_cpus: int
    cpuset_cpus: str
    mem_limit: int
    memswap_limit: int | None
    device_requests: list[docker.types.DeviceRequest]
    devices: list[str]


class EngineRequestDict(TypedDict):
    """:meth:`EngineRequest.to_dict`: every field of the request, as evidence records it."""

    nano_cpus: int | None
    cpuset_cpus: str | None
    mem_limit: int | None
    memswap_limit: int | None
    device_requests: list[DeviceRequestJson]
    devices: list[str]
    mounts: list[BindMount]
    environment: dict[str, str]
    device_ids: list[str]
    device_count: int
    untranslated: dict[str, str]


@dataclass
class EngineRequest:
    """A resource request in engine terms. Units: ``nano_cpus`` 10⁻⁹ CPU, ``mem_limit`` bytes.

    ``devices`` are ``host:container:rwm`` strings, ``mounts`` ``{"source", "target", "read_only"}``,
    ``device_requests`` ``{"Driver", "Count", "DeviceIDs", "Capabilities"}`` (engine JSON),
    ``device_ids``/``device_count`` are the accelerators asked for (ids when pinned or known),
    ``untranslated`` maps a requested key to why the engine cannot honour it.
    """

    nano_cpus: int | None = None
    cpuset_cpus: str | None = None
    mem_limit: int | None = None
    memswap_limit: int | None = None
    device_requests: list[DeviceRequestJson] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    mounts: list[BindMount] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    device_ids: list[str] = field(default_factory=list)
    device_count: int = 0
    untranslated: dict[str, str] = field(default_factory=dict)

    def host_config(self) -> HostConfigOptions:
        """Keyword arguments for ``docker.APIClient.create_host_config`` (devices and limits only)."""
        import docker.types

        out: HostConfigOptions = {}
        if self.nano_cpus is not None:
            out["nano_cpus"] = self.nano_cpus
        if self.cpuset_cpus is not None:
            out["cpuset_cpus"] = self.cpuset_cpus
        if self.mem_limit is not None:
            out["mem_limit"], out["memswap_limit"] = self.mem_limit, self.memswap_limit
        if self.device_requests:
            out["device_requests"] = [docker.types.DeviceRequest(
                driver=r["Driver"], count=r["Count"], device_ids=r["DeviceIDs"],
                capabilities=r["Capabilities"]) for r in self.device_requests]
        if self.devices:
            out["devices"] = list(self.devices)
        return out

    def to_dict(self) -> EngineRequestDict:
        """JSON-ready dict (evidence): every field, in order, its lists and mappings copied."""
        return {"nano_cpus": self.nano_cpus, "cpuset_cpus": self.cpuset_cpus, "mem_limit": self.mem_limit,
                "memswap_limit": self.memswap_limit,
                "device_requests": [{"Driver": r["Driver"], "Count": r["Count"], "DeviceIDs": list(r["DeviceIDs"]),
                                     "Capabilities": [list(c) for c in r["Capabilities"]]}
                                    for r in self.device_requests],
                "devices": list(self.devices), "mounts": [m.copy() for m in self.mounts],
                "environment": dict(self.environment), "device_ids": list(self.device_ids),
                "device_count": self.device_count, "untranslated": dict(self.untranslated)}


def _davinci_index(path: str) -> int:
    return int(path.rsplit("davinci", 1)[1])


def host_davinci_ids(dev: Path = Path("/dev")) -> list[str]:
    """Indices of ``/dev/davinci<N>`` nodes on this host, numerically sorted (``[]`` when none)."""
    nodes = [p.name for p in dev.glob("davinci[0-9]*") if p.name[len("davinci"):].isdecimal()]
    return [str(i) for i in sorted(_davinci_index(n) for n in nodes)]


class DockerTarget(msgspec.Struct, frozen=True, kw_only=True):
    """What this engine reads of the matrix's ``spec.target`` (:class:`pytest_hetero.matrix.document.TargetDoc`, the
    schema checked its types), resolved once (:meth:`parse`): the engine's address ``docker_host`` (None: the
    environment's; its ``tls`` is :func:`.client.connection`'s), the ``pull_policy`` of startup, the containers'
    ``network`` mode (``none`` when absent), the ``python`` the workload image runs (``python3``), the seconds to
    wait for a lost engine (``engine_wait_s``; None: :data:`~pytest_hetero.backends.docker.outage.ENGINE_WAIT_S`),
    and per resource name the ``device_ids`` its containers get (as written) and its ``cpuset``."""

    docker_host: str | None = None
    pull_policy: str = "if-not-present"
    network: str = "none"
    python: str = "python3"
    engine_wait_s: float | None = None
    device_ids: dict[str, list[int | str]] = msgspec.field(default_factory=dict)
    cpuset: dict[str, str] = msgspec.field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Mapping[str, object]) -> DockerTarget:
        """The settings of a matrix target ``raw`` (as the backend receives it; its other keys are other engines').
        Raises ValueError naming the field for one of another type than the schema's (a target that bypassed
        it)."""
        try:
            return msgspec.convert(raw, cls)
        except msgspec.ValidationError as exc:
            raise ValueError(f"target: {exc}") from None


def translate(resource: Resource, target: DockerTarget, *, host_visible: bool,
              dev: Path = Path("/dev")) -> EngineRequest:
    """Translate ``resource``'s requests/limits into an :class:`EngineRequest`.

    ``host_visible``: the engine runs on this host, so Ascend device nodes and driver folders
    are read from ``dev`` and ``/``; otherwise indices ``0..N-1`` and every standard driver path
    are assumed. Raises ValueError for a malformed quantity or a non-integer device count.
    """
    req = EngineRequest()
    merged = {**resource.requests, **resource.limits}
    pinned = [str(i) for i in target.device_ids.get(resource.name, [])]
    cpuset = target.cpuset.get(resource.name)
    for key, value in merged.items():
        if key == "cpu":
            req.nano_cpus = round(quantity(value) * 1e9)
        elif key == "memory":
            req.mem_limit = req.memswap_limit = int(quantity(value))
        elif key == NVIDIA_GPU:
            count = _count(key, value)
            req.device_ids, req.device_count = pinned, count
            req.device_requests.append({"Driver": "", "Count": 0 if pinned else count,
                                        "DeviceIDs": pinned, "Capabilities": [["gpu"]]})
        elif key.startswith(ASCEND_PREFIXES):
            _ascend(req, _count(key, value), pinned, host_visible, dev)
        else:
            req.untranslated[key] = f"the Docker engine has no equivalent of the extended resource {key}"
    if cpuset is not None:
        req.cpuset_cpus = str(cpuset)
    return req


def _count(key: str, value: str) -> int:
    number = quantity(value)
    if number != int(number):
        raise ValueError(f"{key}: {value!r} is not a whole number of devices")
    return int(number)


def _ascend(req: EngineRequest, count: int, pinned: list[str], host_visible: bool, dev: Path) -> None:
    available = host_davinci_ids(dev) if host_visible else [str(i) for i in range(count)]
    ids = pinned or available[:count]
    req.device_ids = ids
    req.device_count = count
    names = [f"davinci{i}" for i in ids] + [Path(p).name for p in ASCEND_CONTROL_DEVICES]
    req.devices = [f"{dev / name}:/dev/{name}:rwm" for name in names]
    for path in ASCEND_DRIVER_MOUNTS:
        if not host_visible or Path(path).exists():
            req.mounts.append({"source": path, "target": path, "read_only": True})
    req.environment["ASCEND_VISIBLE_DEVICES"] = ",".join(ids)


resolve(__name__)
