"""The Docker Engine API documents this backend reads, each parsed once, here, into a frozen shape.

The ``docker`` SDK hands the engine's JSON over untyped; the backend's other modules read the attributes of
these shapes instead of guessing at keys. Sources (Docker Engine API reference, v1.41+):

* ``GET /containers/{id}/json`` (ContainerInspectResponse): ``Id``, ``Name``, ``Created`` (RFC 3339),
  ``RestartCount``, ``State`` (:class:`ContainerState`), ``HostConfig`` (:class:`HostConfig`);
* ``GET /version`` and ``GET /info`` (SystemVersion, SystemInfo): the engine's identity and capacity
  (:class:`EngineInfo`);
* ``GET /images/{name}/json`` (ImageInspect): ``Id``, ``RepoDigests``, ``Created``, ``Size``, ``Config.User``
  (:class:`ImageInspect`);
* ``GET /exec/{id}/json`` (ExecInspectResponse): ``Running``, ``ExitCode`` (:class:`ExecInspect`);
* ``POST /images/create`` (a pull's progress stream, one JSON message per line): each message's ``error``
  (:func:`pull_errors`);
* ``GET /containers/json``, ``/volumes``, ``/images/json``, ``/networks`` (ContainerSummary, VolumeListResponse,
  ImageSummary, Network), filtered by label: each object's name, id, ``Labels`` and ``Created`` (:class:`Listed`);
* ``GET /containers/{id}/stats`` (ContainerStatsResponse, one document per tick of the stream):
  ``memory_stats.usage``, ``memory_stats.stats.{total_inactive_file (cgroup v1), inactive_file (v2)}``,
  ``cpu_stats.cpu_usage.total_usage`` (ns), ``cpu_stats.online_cpus`` (:class:`StatsDocument`).

A field the engine left out, or sent with another JSON type, reads None (or False, 0, ""as each says): the
engine's document is never trusted to hold a key. What the evidence keeps as the engine served it (a container's
``State``, its ``HostConfig`` subset) is kept beside the parsed fields (``document``, ``allocated``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import docker


def _object(value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object (its keys are text: JSON's are), else an empty one (a field the engine left
    out or sent otherwise). Its values are ``object``: each field is narrowed by the parser that reads it."""
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _number(value: object) -> float | int | None:
    return value if isinstance(value, (int, float)) else None


@dataclass(frozen=True)
class ContainerState:
    """A container's ``State``: ``running``, ``status`` (``created``/``running``/``exited``…; ``removed``: the
    gate's word for a container the engine no longer knows), ``exit_code`` (None: not given), ``oom_killed``,
    ``error`` (the engine's error text, "" for none), ``started_at``/``finished_at`` (RFC 3339 with
    nanoseconds; ``0001-01-01T00:00:00Z`` when not yet), and the ``document`` as served (evidence keeps it)."""

    running: bool
    status: str | None
    exit_code: int | None
    oom_killed: bool
    error: str
    started_at: str | None
    finished_at: str | None
    document: dict[str, Any]

    @classmethod
    def parse(cls, raw: object) -> ContainerState:
        """The state of a ``State`` object (any other value: an empty state, not running)."""
        doc = _object(raw)
        return cls(running=bool(doc.get("Running")), status=_text(doc.get("Status")),
                   exit_code=_int(doc.get("ExitCode")), oom_killed=bool(doc.get("OOMKilled")),
                   error=_text(doc.get("Error")) or "", started_at=_text(doc.get("StartedAt")),
                   finished_at=_text(doc.get("FinishedAt")), document=dict(doc))


ALLOCATED_FIELDS = ("NanoCpus", "CpusetCpus", "Memory", "MemorySwap", "Devices", "DeviceRequests", "Runtime")
"""The ``HostConfig`` fields the evidence keeps as the engine stored them (:attr:`HostConfig.allocated`)."""


@dataclass(frozen=True)
class HostConfig:
    """The limits a container's ``HostConfig`` holds: ``nano_cpus`` (10⁻⁹ CPU) and ``memory`` (bytes), 0 when
    not limited, and ``allocated``: the limits and devices the engine stored, each of :data:`ALLOCATED_FIELDS` as
    served (None: the engine left it out), which the evidence keeps."""

    nano_cpus: int
    memory: float
    allocated: dict[str, Any]

    @classmethod
    def parse(cls, raw: object) -> HostConfig:
        """The limits of a ``HostConfig`` object (absent ones 0)."""
        doc = _object(raw)
        return cls(nano_cpus=int(_number(doc.get("NanoCpus")) or 0), memory=float(_number(doc.get("Memory")) or 0),
                   allocated={k: doc.get(k) for k in ALLOCATED_FIELDS})


@dataclass(frozen=True)
class ContainerInspect:
    """``GET /containers/{id}/json``: ``id``, ``name`` (as served: with its leading ``/``), ``created``
    (RFC 3339; None: not given), ``restart_count``, the :class:`ContainerState` and :class:`HostConfig`."""

    id: str
    name: str
    created: str | None
    restart_count: int
    state: ContainerState
    host_config: HostConfig

    @classmethod
    def parse(cls, raw: object) -> ContainerInspect:
        """The inspect document ``raw`` (the SDK's ``inspect_container`` answer)."""
        doc = _object(raw)
        return cls(id=str(doc.get("Id")), name=str(doc.get("Name") or ""), created=_text(doc.get("Created")),
                   restart_count=int(_number(doc.get("RestartCount")) or 0),
                   state=ContainerState.parse(doc.get("State")), host_config=HostConfig.parse(doc.get("HostConfig")))


@dataclass(frozen=True)
class StatsDocument:
    """One document of a container's stats stream: ``memory_usage`` (bytes), ``inactive_file`` (bytes:
    ``total_inactive_file`` on cgroup v1, else ``inactive_file``), ``cpu_total_ns`` (cumulative CPU time),
    ``online_cpus``; None where the document has no number for it (a stopped container's are empty)."""

    memory_usage: float | int | None
    inactive_file: float | int | None
    cpu_total_ns: float | int | None
    online_cpus: int | None

    @classmethod
    def parse(cls, raw: object) -> StatsDocument:
        """The fields of stats document ``raw`` (a JSON object; any other value has none)."""
        doc = _object(raw)
        mem = _object(doc.get("memory_stats"))
        inner = _object(mem.get("stats"))
        cpu = _object(doc.get("cpu_stats"))
        return cls(memory_usage=_number(mem.get("usage")),
                   inactive_file=_number(inner.get("total_inactive_file", inner.get("inactive_file"))),
                   cpu_total_ns=_number(_object(cpu.get("cpu_usage")).get("total_usage")),
                   online_cpus=_int(cpu.get("online_cpus")))


@dataclass(frozen=True)
class EngineInfo:
    """The engine's ``/version`` (``Version``, ``ApiVersion``, ``KernelVersion``, ``Arch``) and ``/info`` (``ID``,
    ``Name``, ``OperatingSystem``, the names of its ``Runtimes``, ``DefaultRuntime``, ``NCPU``, ``MemTotal``
    bytes, ``CgroupVersion``, ``CgroupDriver``, storage ``Driver``); None where the engine did not say (every
    field None before the session has connected)."""

    version: str | None = None
    api_version: str | None = None
    kernel: str | None = None
    arch: str | None = None
    id: str | None = None
    name: str | None = None
    os: str | None = None
    runtimes: tuple[str, ...] = ()
    default_runtime: str | None = None
    ncpu: int | None = None
    mem_total: int | None = None
    cgroup_version: str | None = None
    cgroup_driver: str | None = None
    storage_driver: str | None = None

    @classmethod
    def parse(cls, version: object, info: object) -> EngineInfo:
        """The facts of the ``/version`` document ``version`` and the ``/info`` document ``info``."""
        ver, inf = _object(version), _object(info)
        return cls(version=_text(ver.get("Version")), api_version=_text(ver.get("ApiVersion")),
                   kernel=_text(ver.get("KernelVersion")), arch=_text(ver.get("Arch")), id=_text(inf.get("ID")),
                   name=_text(inf.get("Name")), os=_text(inf.get("OperatingSystem")),
                   runtimes=tuple(str(r) for r in _object(inf.get("Runtimes"))),
                   default_runtime=_text(inf.get("DefaultRuntime")), ncpu=_int(inf.get("NCPU")),
                   mem_total=_int(inf.get("MemTotal")), cgroup_version=_text(inf.get("CgroupVersion")),
                   cgroup_driver=_text(inf.get("CgroupDriver")), storage_driver=_text(inf.get("Driver")))


@dataclass(frozen=True)
class ImageInspect:
    """``GET /images/{name}/json``: ``id`` (``sha256:…``), ``repo_digests`` (``name@sha256:…``), ``created``
    (RFC 3339), ``size`` (bytes) and ``user`` (``Config.User``: the image's user; None or "" for root)."""

    id: str
    repo_digests: list[str]
    created: str | None
    size: int | None
    user: str | None

    @classmethod
    def parse(cls, raw: object) -> ImageInspect:
        """The image inspect document ``raw`` (the SDK's ``inspect_image`` answer)."""
        doc = _object(raw)
        digests = doc.get("RepoDigests")
        return cls(id=str(doc["Id"]), repo_digests=[str(d) for d in digests] if isinstance(digests, list) else [],
                   created=_text(doc.get("Created")), size=_int(doc.get("Size")),
                   user=_text(_object(doc.get("Config")).get("User")))


def inspect_image(api: docker.APIClient, ref: str) -> ImageInspect:
    """``GET /images/{ref}/json`` through ``api``, parsed. Raises the SDK's errors (``docker.errors.ImageNotFound``,
    ``APIError``) and KeyError for a document without ``Id``."""
    return ImageInspect.parse(api.inspect_image(ref))  # type: ignore[no-untyped-call]  # (untyped in types-docker)


@dataclass(frozen=True)
class ExecInspect:
    """``GET /exec/{id}/json``: whether the exec is still ``running`` and its ``exit_code`` (None: not given)."""

    running: bool
    exit_code: int | None

    @classmethod
    def parse(cls, raw: object) -> ExecInspect:
        """The exec inspect document ``raw`` (the SDK's ``exec_inspect`` answer)."""
        doc = _object(raw)
        return cls(running=bool(doc.get("Running")), exit_code=_int(doc.get("ExitCode")))


def exec_inspect(api: docker.APIClient, exec_id: str) -> ExecInspect:
    """``GET /exec/{exec_id}/json`` through ``api``, parsed. Raises the SDK's errors (``docker.errors.NotFound`` for
    an exec the engine has forgotten, ``APIError``) and the connection errors of a lost engine."""
    return ExecInspect.parse(api.exec_inspect(exec_id))


def inspect_container(api: docker.APIClient, cid: str) -> ContainerInspect:
    """``GET /containers/{cid}/json`` through ``api``, parsed. Raises the SDK's errors (``docker.errors.NotFound``
    for a container the engine does not know, ``APIError``)."""
    return ContainerInspect.parse(api.inspect_container(cid))


def container_state(api: docker.APIClient, cid: str) -> ContainerState:
    """The ``State`` of container ``cid`` (:func:`inspect_container`); raises as it does."""
    return ContainerState.parse(api.inspect_container(cid)["State"])


def pull_errors(api: docker.APIClient, ref: str) -> list[str]:
    """Pull ``ref`` through ``api``, reading its progress stream to the end: the ``error`` of each message that has
    one (empty: pulled). Raises the SDK's errors (``docker.errors.APIError``)."""
    return [str(error) for message in api.pull(ref, stream=True, decode=True)
            if (error := _object(message).get("error"))]


@dataclass(frozen=True)
class Listed:
    """One object a list call names (what ``hetero cleanup`` selects and removes): its ``name`` (a container's first
    name without the ``/``; an image's id), the ``id`` its remove call takes (a volume's name), its ``labels`` ({}
    when it has none) and when the engine ``created`` it (epoch seconds; None where the list does not say: volumes
    and networks give none as a number)."""

    name: str
    id: str
    labels: dict[str, str]
    created: float | None

    @classmethod
    def parse(cls, raw: object, name_field: str, id_field: str) -> Listed:
        """One object ``raw`` of a list call (as the SDK returns it): its name from ``name_field`` (a container's
        ``Names``: the first, without the ``/``), its id from ``id_field``. Raises KeyError when either is absent."""
        doc = _object(raw)
        name, labels = doc[name_field], doc.get("Labels")
        if isinstance(name, list):
            name = str(name[0]).lstrip("/")
        return cls(name=str(name), id=str(doc[id_field]),
                   labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
                   created=_number(doc.get("Created")))


def list_labelled(api: docker.APIClient, label: str) -> list[tuple[str, Listed]]:
    """``[(kind, object)]`` of every container (running or not), volume, image and network carrying ``label``, in that
    order (a training job's network after its containers). Raises the SDK's errors."""
    found = [("container", Listed.parse(c, "Names", "Id")) for c in api.containers(all=True, filters={"label": label})]
    volumes = _object(api.volumes(filters={"label": label})).get("Volumes")
    found += [("volume", Listed.parse(v, "Name", "Name")) for v in volumes] if isinstance(volumes, list) else []
    found += [("image", Listed.parse(i, "Id", "Id")) for i in api.images(all=True, filters={"label": label})]
    found += [("network", Listed.parse(n, "Name", "Id")) for n in api.networks(filters={"label": label})]
    return found
