"""The Docker Engine API documents this backend reads, each declared here as the shape the API gives it and
converted once (msgspec) into a frozen shape the backend's other modules read by attribute.

The ``docker`` SDK hands the engine's JSON over untyped. Sources (Docker Engine API reference, v1.41+):

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

A field the engine left out, or sent as ``null``, reads None (or False, 0, "" as each says). A document that is
no JSON object, or a field of another JSON type than the API declares, is refused: :class:`EngineAnswerUnreadable`
(a ``docker.errors.APIError``, which every caller already handles as the engine's refusal of the call), naming
the field (``$.State.ExitCode``). What the evidence keeps as the engine served it (a container's ``State``, its
``HostConfig`` subset) is kept beside the parsed fields (``document``, ``allocated``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

import docker.errors
import msgspec

from pytest_hetero.declared import resolve

_T = TypeVar("_T")


class EngineAnswerUnreadable(docker.errors.APIError):
    """An answer of the engine that does not have the shape the Docker Engine API declares for it (no JSON object,
    a required field left out, a field of another JSON type). Its message names the answer and the field."""


def _convert(raw: object, shape: type[_T], what: str) -> _T:
    """``raw`` converted to ``shape``; raises :class:`EngineAnswerUnreadable` naming ``what`` and the field."""
    try:
        return msgspec.convert(raw, shape)
    except msgspec.ValidationError as exc:
        raise EngineAnswerUnreadable(f"the Docker engine's {what} does not fit the Docker Engine API: {exc}"
                                     ) from None


_Number = int | float | None
"""A JSON number the engine may leave out (or send as null).

The ``_…Doc`` and ``_…Row`` Structs below declare the engine's documents as the API gives them (PascalCase keys,
``rename="pascal"``; unknown keys are ignored); each parse function converts one once."""


class _StateDoc(msgspec.Struct, frozen=True, kw_only=True, rename="pascal"):
    running: bool | None = None
    status: str | None = None
    exit_code: int | None = None
    oom_killed: bool | None = msgspec.field(default=None, name="OOMKilled")
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None


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
    def parse(cls, raw: Mapping[str, object] | None) -> ContainerState:
        """The state of a ``State`` object (None: an empty state, not running). Raises
        :class:`EngineAnswerUnreadable` for a field of another type than the API's."""
        doc = _convert(raw or {}, _StateDoc, "container State")
        return cls(running=bool(doc.running), status=doc.status, exit_code=doc.exit_code,
                   oom_killed=bool(doc.oom_killed), error=doc.error or "", started_at=doc.started_at,
                   finished_at=doc.finished_at, document=dict(raw or {}))


class _HostConfigDoc(msgspec.Struct, frozen=True, kw_only=True, rename="pascal"):
    """The ``HostConfig`` fields the evidence keeps as the engine stored them, in the order it keeps them."""

    nano_cpus: _Number = None
    cpuset_cpus: str | None = None
    memory: _Number = None
    memory_swap: _Number = None
    devices: list[dict[str, object]] | None = None
    device_requests: list[dict[str, object]] | None = None
    runtime: str | None = None


ALLOCATED_FIELDS = tuple(f.encode_name for f in msgspec.structs.fields(_HostConfigDoc))
"""The ``HostConfig`` fields the evidence keeps as the engine stored them (:attr:`HostConfig.allocated`):
``NanoCpus``, ``CpusetCpus``, ``Memory``, ``MemorySwap``, ``Devices``, ``DeviceRequests``, ``Runtime``."""


@dataclass(frozen=True)
class HostConfig:
    """The limits a container's ``HostConfig`` holds: ``nano_cpus`` (10⁻⁹ CPU) and ``memory`` (bytes), 0 when
    not limited, and ``allocated``: the limits and devices the engine stored, each of :data:`ALLOCATED_FIELDS` as
    served (None: the engine left it out), which the evidence keeps."""

    nano_cpus: int
    memory: float
    allocated: dict[str, Any]

    @classmethod
    def parse(cls, raw: Mapping[str, object] | None) -> HostConfig:
        """The limits of a ``HostConfig`` object (None, or absent limits: 0). Raises
        :class:`EngineAnswerUnreadable` for a field of another type than the API's."""
        return cls.of(_convert(raw or {}, _HostConfigDoc, "container HostConfig"))

    @classmethod
    def of(cls, doc: _HostConfigDoc | None) -> HostConfig:
        """The limits of a converted ``HostConfig`` (None: the engine left it out or sent null)."""
        doc = doc or _HostConfigDoc()
        return cls(nano_cpus=int(doc.nano_cpus or 0), memory=float(doc.memory or 0),
                   allocated=msgspec.to_builtins(doc))


class _ContainerDoc(msgspec.Struct, frozen=True, kw_only=True, rename="pascal"):
    id: str
    name: str | None = None
    created: str | None = None
    restart_count: _Number = None
    state: dict[str, object] | None = None
    host_config: _HostConfigDoc | None = None


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
        """The inspect document ``raw`` (the SDK's ``inspect_container`` answer). Raises
        :class:`EngineAnswerUnreadable` for a document without ``Id`` or with a field of another type."""
        doc = _convert(raw, _ContainerDoc, "container inspect document")
        return cls(id=doc.id, name=doc.name or "", created=doc.created, restart_count=int(doc.restart_count or 0),
                   state=ContainerState.parse(doc.state), host_config=HostConfig.of(doc.host_config))


class _MemoryInner(msgspec.Struct, frozen=True, kw_only=True):
    total_inactive_file: _Number = None
    inactive_file: _Number = None


class _MemoryStats(msgspec.Struct, frozen=True, kw_only=True):
    usage: _Number = None
    stats: _MemoryInner | None = None


class _CpuUsage(msgspec.Struct, frozen=True, kw_only=True):
    total_usage: _Number = None


class _CpuStats(msgspec.Struct, frozen=True, kw_only=True):
    cpu_usage: _CpuUsage | None = None
    online_cpus: int | None = None


class _StatsDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A stats document (its keys are snake_case, unlike the engine's other documents)."""

    memory_stats: _MemoryStats | None = None
    cpu_stats: _CpuStats | None = None


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
        """The fields of stats document ``raw``. Raises :class:`EngineAnswerUnreadable` for a document that is no
        JSON object or has a field of another type."""
        doc = _convert(raw, _StatsDoc, "stats document")
        mem, cpu = doc.memory_stats or _MemoryStats(), doc.cpu_stats or _CpuStats()
        inner = mem.stats or _MemoryInner()
        v1 = inner.total_inactive_file  # cgroup v1's total; v2 has only inactive_file
        return cls(memory_usage=mem.usage, inactive_file=inner.inactive_file if v1 is None else v1,
                   cpu_total_ns=(cpu.cpu_usage or _CpuUsage()).total_usage, online_cpus=cpu.online_cpus)


class _VersionDoc(msgspec.Struct, frozen=True, kw_only=True, rename="pascal"):
    version: str | None = None
    api_version: str | None = None
    kernel_version: str | None = None
    arch: str | None = None


class _InfoDoc(msgspec.Struct, frozen=True, kw_only=True, rename="pascal"):
    id: str | None = msgspec.field(default=None, name="ID")
    name: str | None = None
    operating_system: str | None = None
    runtimes: dict[str, object] | None = None
    default_runtime: str | None = None
    ncpu: int | None = msgspec.field(default=None, name="NCPU")
    mem_total: int | None = None
    cgroup_version: str | None = None
    cgroup_driver: str | None = None
    driver: str | None = None


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
        """The facts of the ``/version`` document ``version`` and the ``/info`` document ``info``. Raises
        :class:`EngineAnswerUnreadable` for either that is no JSON object or has a field of another type."""
        ver, inf = _convert(version, _VersionDoc, "/version answer"), _convert(info, _InfoDoc, "/info answer")
        return cls(version=ver.version, api_version=ver.api_version, kernel=ver.kernel_version, arch=ver.arch,
                   id=inf.id, name=inf.name, os=inf.operating_system, runtimes=tuple(inf.runtimes or ()),
                   default_runtime=inf.default_runtime, ncpu=inf.ncpu, mem_total=inf.mem_total,
                   cgroup_version=inf.cgroup_version, cgroup_driver=inf.cgroup_driver, storage_driver=inf.driver)


class _ImageConfigDoc(msgspec.Struct, frozen=True, kw_only=True, rename="pascal"):
    user: str | None = None


class _ImageDoc(msgspec.Struct, frozen=True, kw_only=True, rename="pascal"):
    id: str
    repo_digests: list[str] | None = None
    created: str | None = None
    size: int | None = None
    config: _ImageConfigDoc | None = None


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
        """The image inspect document ``raw`` (the SDK's ``inspect_image`` answer). Raises
        :class:`EngineAnswerUnreadable` for a document without ``Id`` or with a field of another type."""
        doc = _convert(raw, _ImageDoc, "image inspect document")
        return cls(id=doc.id, repo_digests=list(doc.repo_digests or ()), created=doc.created, size=doc.size,
                   user=doc.config.user if doc.config else None)


def inspect_image(api: docker.APIClient, ref: str) -> ImageInspect:
    """``GET /images/{ref}/json`` through ``api``, parsed. Raises the SDK's errors (``docker.errors.ImageNotFound``,
    ``APIError``) and :class:`EngineAnswerUnreadable` (an ``APIError``) for a document without ``Id``."""
    return ImageInspect.parse(api.inspect_image(ref))  # type: ignore[no-untyped-call]  # (untyped in types-docker)


class ExecInspect(msgspec.Struct, frozen=True, kw_only=True, rename="pascal"):
    """``GET /exec/{id}/json``: whether the exec is still ``running`` (None: not said, read as not running) and its
    ``exit_code`` (None: not given; the engine sends null while the exec runs)."""

    running: bool | None = None
    exit_code: int | None = None

    @classmethod
    def parse(cls, raw: object) -> ExecInspect:
        """The exec inspect document ``raw`` (the SDK's ``exec_inspect`` answer). Raises
        :class:`EngineAnswerUnreadable` for a document that is no JSON object or has a field of another type."""
        return _convert(raw, cls, "exec inspect document")


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
    return inspect_container(api, cid).state


class _PullMessage(msgspec.Struct, frozen=True, kw_only=True):
    error: str | None = None


def pull_errors(api: docker.APIClient, ref: str) -> list[str]:
    """Pull ``ref`` through ``api``, reading its progress stream to the end: the ``error`` of each message that has
    one (empty: pulled). Raises the SDK's errors (``docker.errors.APIError``; :class:`EngineAnswerUnreadable` for a
    message that is no JSON object or whose ``error`` is no text)."""
    return [message.error for raw in api.pull(ref, stream=True, decode=True)
            if (message := _convert(raw, _PullMessage, "pull progress message")).error]


ListedKind = Literal["container", "volume", "image", "network"]
"""The kinds of object :func:`list_labelled` finds."""


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
    def parse(cls, raw: object, kind: ListedKind) -> Listed:
        """One object ``raw`` of a list call of ``kind`` (as the SDK returns it): a container's name is its first of
        ``Names`` without the ``/``, an image's its ``Id``; a volume's id its ``Name``. Raises
        :class:`EngineAnswerUnreadable` when the name or id is absent or a field has another type."""
        return _convert(raw, _ROWS[kind], f"{kind} list entry").listed()


class _Row(msgspec.Struct, frozen=True, kw_only=True, rename="pascal"):
    labels: dict[str, str] | None = None

    def listed(self) -> Listed:
        raise NotImplementedError


class _ContainerRow(_Row, frozen=True, kw_only=True, rename="pascal"):
    names: Annotated[list[str], msgspec.Meta(min_length=1)]
    id: str
    created: _Number = None

    def listed(self) -> Listed:
        return Listed(name=self.names[0].lstrip("/"), id=self.id, labels=self.labels or {}, created=self.created)


class _VolumeRow(_Row, frozen=True, kw_only=True, rename="pascal"):
    name: str

    def listed(self) -> Listed:
        return Listed(name=self.name, id=self.name, labels=self.labels or {}, created=None)


class _ImageRow(_Row, frozen=True, kw_only=True, rename="pascal"):
    id: str
    created: _Number = None

    def listed(self) -> Listed:
        return Listed(name=self.id, id=self.id, labels=self.labels or {}, created=self.created)


class _NetworkRow(_Row, frozen=True, kw_only=True, rename="pascal"):
    name: str
    id: str

    def listed(self) -> Listed:
        return Listed(name=self.name, id=self.id, labels=self.labels or {}, created=None)


_ROWS: dict[ListedKind, type[_Row]] = {"container": _ContainerRow, "volume": _VolumeRow, "image": _ImageRow,
                                       "network": _NetworkRow}


class _VolumeList(msgspec.Struct, frozen=True, kw_only=True, rename="pascal"):
    volumes: list[_VolumeRow] | None = None


def list_labelled(api: docker.APIClient, label: str) -> list[tuple[ListedKind, Listed]]:
    """``[(kind, object)]`` of every container (running or not), volume, image and network carrying ``label``, in that
    order (a training job's network after its containers). Raises the SDK's errors (and
    :class:`EngineAnswerUnreadable`, an ``APIError``, for an answer of another shape)."""
    found: list[tuple[ListedKind, Listed]] = [
        ("container", Listed.parse(c, "container")) for c in api.containers(all=True, filters={"label": label})]
    volumes = _convert(api.volumes(filters={"label": label}), _VolumeList, "volume list").volumes
    found += [("volume", v.listed()) for v in volumes or ()]
    found += [("image", Listed.parse(i, "image")) for i in api.images(all=True, filters={"label": label})]
    found += [("network", Listed.parse(n, "network")) for n in api.networks(filters={"label": label})]
    return found


resolve(__name__)
