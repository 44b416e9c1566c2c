"""The ``data`` of the record kinds the renderings read, as types (:class:`~pytest_hetero.evidence.document.RecordDict`
keeps ``data`` an open JSON object; a reader that knows a record's ``kind`` reads its data through one of these).

Each is a :class:`~typing.TypedDict` over the plain dict that ``json`` reads back (nothing on disk changes). A
field that every writer of the kind writes is required (read with a subscript); one that only some writers,
or only some runs, write is ``NotRequired`` and read with ``.get``. The writer of each kind is named in its
docstring. A :class:`Kind` (``PLACED = Kind[PlacedData]("scheduling.placed")``) names a kind with its data's
type; :class:`pytest_hetero.reporting.dossier_facts.Facts` reads records through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, NotRequired, TypedDict, TypeVar, cast, final, get_args

from pytest_hetero.evidence.document import RuleResult
from pytest_hetero.evidence.shapes import ShapeError, check_json
from pytest_hetero.probes.usage import UsageDevice, UsageRecord, UsageSeries

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import RecordDict

__all__ = [
    "ATTRIBUTION", "AttributionData", "CHECKPOINT", "COMMUNICATION", "COVERAGE", "CapacityView", "CheckpointData",
    "ClassRef", "CommunicationData", "ContainerState", "ContainerStatus", "CoverageData", "DEVICES", "DEVICE_INIT",
    "DIGEST", "DeviceInitData", "DevicesData", "DigestData", "ENGINE_CAN_SATISFY", "ENVIRONMENT",
    "EngineCanSatisfyData", "EngineGap", "GovernanceProbeData", "HOST_PROBE", "HostProbeData", "HostSnapshotData",
    "IDENTITY", "IMAGE", "INPUT_USED", "IdentityData", "ImageDigestData", "KINDS", "Kind", "MeasuredSize",
    "NODE_OUTCOME", "NODE_SCOPE", "NOT_PROVEN", "NodeOutcomeData", "NodeScopeData", "NotExercised", "NotProvenData",
    "OUTPUTS", "OUTPUTS_UNUSABLE", "ObservedInventory", "OutputsData", "OutputsUnusableData", "PENDING", "PLACED",
    "POD", "PROBE", "PendingData", "PlacedData", "PodStartData", "PoolSnapshotData", "QUEUE_ADMISSION",
    "QueueAdmissionData", "REFUSED", "REPEAT", "REQUEST", "RESERVE_BURST", "RESERVE_SERVING", "RESERVE_TIMELINE",
    "RESERVE_WINDOW", "ROLLBACK", "RULES", "RUN", "RefusedData", "RepeatData", "RequestData", "ReserveBurstData",
    "ReserveServingData", "ReserveTimelineData", "ReserveWindowData", "RollbackData", "RulesData", "RunData",
    "RunningState", "SERVING_AUTH", "SERVING_USAGE", "SHARED_POOL", "SIMULATION", "SNAPSHOT", "SUBMITTED",
    "ServingAuthData", "SharedPoolData", "SimulationData", "SmokeRun", "SnapshotNode", "SubmittedData",
    "TimelineEntry", "USAGE", "UsageData", "UsageDevice", "UsageSeries", "UsedData", "check_records", "data_of",
]


D = TypeVar("D")


class Kind(Generic[D]):
    """A record kind's name, typed with the shape of its ``data`` (``Kind[PlacedData]("scheduling.placed")``):
    a reader indexed by kind (:class:`pytest_hetero.reporting.dossier_facts.Facts`) returns that shape, and
    :attr:`shape` gives the same shape at run time (the subscript, which :mod:`typing` keeps on the instance as
    ``__orig_class__``), for :func:`check_records`."""

    __slots__ = ("__orig_class__", "name")
    __orig_class__: Any

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Kind({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Kind) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def shape(self) -> object:
        """The typing form of this kind's ``data`` (a TypedDict, or a union of them). Raises
        :class:`AttributeError` for a Kind made without a subscript (``Kind("x")``)."""
        return get_args(self.__orig_class__)[0]


def data_of(record: RecordDict, kind: Kind[D]) -> D | None:
    """``record``'s ``data`` as ``kind``'s shape when the record is of that kind, else None: the one place the
    open JSON object of a record becomes its kind's type (its shape checked when the document was loaded or the
    item checked: :func:`check_records`)."""
    return cast(D, record["data"]) if record["kind"] == kind.name else None


class RequestData(TypedDict):
    """``scheduling.request`` (:mod:`pytest_hetero.layers.scheduling`, :mod:`pytest_hetero.layers.taskqueue`):
    the resource's name, requests and limits (:attr:`pytest_hetero.matrix.model.Resource.requests`: quantity
    strings by resource name) and node selector, and the queue (None without one)."""

    resource: str
    requests: dict[str, str]
    node_selector: dict[str, str]
    queue: str | None
    limits: NotRequired[dict[str, str]]
    priority_class: NotRequired[str | None]


class PlacedData(TypedDict):
    """``scheduling.placed`` as its one writer writes it (:mod:`pytest_hetero.backends.kubernetes.placement`, every
    field since it recorded times): the pod, its node, the seconds waited, the PodScheduled condition's time
    ``decided_at`` (ISO, None when absent) and ``observed_epoch_s`` when the bind was watched (None when not). A
    Kueue admission is a record of its own (``scheduling.queue``, :class:`QueueAdmissionData`)."""

    pod: str
    node: str
    waited_s: float
    decided_at: str | None
    observed_epoch_s: float | None


class SubmittedData(TypedDict):
    """``scheduling.submitted`` as its two writers write it (:mod:`pytest_hetero.backends.kubernetes.submit`, ``.gang``:
    both write the workload's ``name`` and ``submitted_at_epoch_s``, the epoch seconds of the create call)."""

    name: str
    submitted_at_epoch_s: float | None


class PendingData(TypedDict, total=False):
    """``scheduling.pending`` (:mod:`pytest_hetero.backends.kubernetes.placement`, ``.submit``): the queue
    objects a Pending decision went through (placement only)."""

    queue_objects: list[dict[str, Any]]


class SnapshotNode(TypedDict):
    """One node of a pool's ``discovery.snapshot`` (:mod:`pytest_hetero.backends.kubernetes.inventory`):
    capacity and allocatable by resource name (Kubernetes quantities), and what the pods bound to it
    requested (None when the pods could not be listed); its ``uid`` (``metadata.uid``; None where not served, absent
    from records written before it was)."""

    name: str
    uid: NotRequired[str | None]
    capacity: NotRequired[dict[str, str | None]]
    allocatable: NotRequired[dict[str, str | None]]
    requested_by_pods: NotRequired[dict[str, float] | None]


class CapacityView(TypedDict, total=False):
    """Whether the pods of a pool's nodes could be counted (``unavailable``: why not)."""

    unavailable: str | None


class SmokeRun(TypedDict):
    """The smoke model run of a node (:mod:`pytest_hetero.layers.nodes`): its model × dataset, outcome and the
    failure's category (None when it passed; absent from records written before it was)."""

    model: str
    dataset: str
    outcome: str
    category: NotRequired[str | None]


class NodeOutcomeData(TypedDict):
    """``startup.node`` (:mod:`pytest_hetero.layers.nodes`): one node of a coverage item, how its startup
    ended, the layers proven on it, and its smoke run (None when none ran; absent before smoke runs were
    recorded)."""

    node: str
    outcome: str
    proven: list[str]
    smoke: NotRequired[SmokeRun | None]


class NotExercised(TypedDict):
    """A node of the pool a coverage item did not exercise, and why."""

    node: str
    reason: str


class CoverageData(TypedDict):
    """``startup.coverage`` (:mod:`pytest_hetero.layers.nodes`): the nodes not exercised, each with why."""

    not_exercised: list[NotExercised]


class NodeScopeData(TypedDict):
    """``discovery.nodes`` (:mod:`pytest_hetero.layers.discovery`): a pool with node-level coverage whose discovery
    failed on some nodes only: the ``failed`` nodes (each with the categories of its differences) and the ``passed``
    ones, on which the pool's higher layers go on (:func:`pytest_hetero.judge.verdict.gating`)."""

    coverage: str
    failed: dict[str, list[str]]
    passed: list[str]


class DeviceInitData(TypedDict, total=False):
    """``startup.device_init`` (:mod:`pytest_hetero.layers.startup`): the framework initialised (None or
    absent when none was) and the execution provider wanted."""

    framework: str | None
    wanted_provider: str


class RunningState(TypedDict, total=False):
    """A Kubernetes ContainerStateRunning: when the container started (RFC 3339)."""

    startedAt: str


class ContainerState(TypedDict, total=False):
    """A Kubernetes ContainerState, as far as the gate reads it (the running state)."""

    running: RunningState | None


class ContainerStatus(TypedDict, total=False):
    """A Kubernetes ContainerStatus as the apiserver wrote it (``core/v1``), as far as the gate reads it: its
    name, restart count and state. Foreign: every field optional to a reader."""

    name: str
    restartCount: int
    state: ContainerState


class SimulationData(TypedDict):
    """``startup.simulation`` (:mod:`pytest_hetero.backends.kubernetes.startup`): the simulated node."""

    node: str | None


class DigestData(TypedDict):
    """``artifact.digest`` (:func:`pytest_hetero.layers.startup.verify_digest`, its one writer, which writes both
    on every path): the digest the matrix declares and the one the file has (None when the file is missing)."""

    expected: str
    observed: str | None


class IdentityData(TypedDict):
    """``model.identity`` (:mod:`pytest_hetero.layers.execution`, :mod:`pytest_hetero.layers.serving`; both
    write the model, its version, the dataset, its version and digest): the model's digest (a model run's
    only), ``serving`` the protocol of a served model."""

    model: str
    version: str | None
    dataset: str
    dataset_version: str | None
    dataset_sha256: str | None
    sha256: NotRequired[str | None]
    serving: NotRequired[str]


class RunData(TypedDict):
    """``model.run`` (:mod:`pytest_hetero.layers.execution`, its one writer, which has written these three on every
    record since the first version, beside the argv, timeout, streams and the engine's details): the exit code
    (None: the engine got none), the run's wall time (s), its memory high-water mark (MiB; None when not read)."""

    exit_code: int | None
    duration_s: float
    peak_rss_mib: float | None


UsageData = UsageRecord
"""``model.usage`` / ``serving.usage``: one shape with its writer's, :class:`pytest_hetero.probes.usage.UsageRecord`
(``UsageDevice`` and ``UsageSeries`` here are that module's too). Every sampler's record is
:meth:`pytest_hetero.probes.usage.Sampler.result` (the local, Docker, Kubernetes in-pod and serving samplers) or
:func:`pytest_hetero.probes.usage.unavailable` (an engine that does not sample), which write every field;
``serving.usage`` adds the ``endpoint`` it sampled."""


class CommunicationData(TypedDict):
    """``training.communication`` (:mod:`pytest_hetero.layers.training`, its only writer: every field of its
    :class:`~pytest_hetero.layers.training.CommunicationFacts`, these three since the check was added)."""

    world_size: int
    backend: str
    sizes: list[MeasuredSize]


class CheckpointData(TypedDict):
    """``training.checkpoint`` (:mod:`pytest_hetero.layers.training`, its only writer, which writes both: the
    step the restarted job resumed at, None when it found no checkpoint, and the volume)."""

    resumed_step: int | None
    volume: str


class RulesData(TypedDict):
    """``business.rules`` (:mod:`pytest_hetero.layers.business`, its one writer): each rule's result and ``run``,
    the number of a repeated sample (None for a single run), which it writes on every record."""

    results: list[RuleResult]
    run: int | None


class NotProvenData(TypedDict):
    """``scope.not_proven`` (:mod:`pytest_hetero.layers.discovery`, ``.startup``, ``.boundaries``,
    ``.governance``): the layer, the part of it not proven, and why."""

    layer: str
    part: str
    reason: str


class UsedData(TypedDict):
    """``inputs.used`` (:mod:`pytest_hetero.layers.execution` for a model's code folder,
    :mod:`pytest_hetero.layers.business` for an acceptance file; both write ``input``, ``path`` and ``sha256``): the
    digest of the bytes the item used (None when the folder could not be read, then ``error`` says why)."""

    input: str
    path: str
    sha256: str | None
    error: NotRequired[str | None]


class GovernanceProbeData(TypedDict):
    """``governance.probe`` (:mod:`pytest_hetero.layers.governance`)."""

    probe: str
    probe_kind: str


class ServingAuthData(TypedDict):
    """``serving.auth`` (:mod:`pytest_hetero.layers.serving`): whether the endpoint refused a request
    without its token."""

    protected: bool


class RollbackData(TypedDict):
    """``serving.rollback`` (:mod:`pytest_hetero.layers.serving`): ``verified`` or ``not_applicable``."""

    status: str


class ClassRef(TypedDict):
    """A PriorityClass: its name and value (:class:`pytest_hetero.backends.protocol.PriorityFacts`, which the
    Kubernetes engine writes with both since the probe was added)."""

    name: str
    value: int


class ReserveServingData(TypedDict):
    """``reserve.serving`` (:mod:`pytest_hetero.layers.reserved`: the engine's
    :class:`~pytest_hetero.backends.protocol.ReserveServing`, every field of it; these three it always held)."""

    priority_class: ClassRef | None
    replicas: int
    min_ready: int


class ReserveBurstData(TypedDict):
    """``reserve.burst`` (:mod:`pytest_hetero.layers.reserved`: the engine's
    :class:`~pytest_hetero.backends.protocol.ReserveBurst`; these two it always held)."""

    priority_class: ClassRef | None
    requested: int


class ReserveWindowData(TypedDict):
    """``reserve.window``: one load window (:mod:`pytest_hetero.layers.reserved`: the engine's
    :class:`~pytest_hetero.backends.protocol.ReserveWindow`, its window and statistics, which it always held;
    ``ready_min`` None when no listing fell in the window)."""

    phase: str
    from_s: float
    to_s: float
    ready_min: int | None
    ok: int
    requests: int
    p95_ms: float | None


class TimelineEntry(TypedDict):
    """One thing that happened to a pod (:class:`pytest_hetero.backends.protocol.ReserveEvent`): ``at_s`` seconds
    since the burst started (None: an event without a time; the engine sets it on every entry before it reports
    the timeline), the pod, its role, what happened and the message; a cluster event's time ``resolution_s`` and,
    for ``Preempted``, the burst pod it was preempted ``by``."""

    at_s: float | None
    resolution_s: NotRequired[float]
    pod: str
    role: str
    what: str
    by: NotRequired[str | None]
    message: str


class ReserveTimelineData(TypedDict):
    """``reserve.timeline`` (:mod:`pytest_hetero.layers.reserved`: its entries, and how many were ``cut``)."""

    entries: list[TimelineEntry]






class ImageDigestData(TypedDict):
    """``startup.environment`` (:mod:`pytest_hetero.backends.local`: the environment's distributions digest) and
    ``startup.image`` (:mod:`pytest_hetero.backends.docker.engine`: the image's repo digest or id): ``digest``, which
    both always write."""

    digest: str | None


class PodStartData(TypedDict):
    """``startup.pod`` (:mod:`pytest_hetero.backends.kubernetes.startup`, its one writer): the pod, its node (None
    when neither listed nor unreadable), the image ``digest`` the node reports (None when it reports no image id),
    and the pod's ``container_statuses`` as the apiserver wrote them (None when it listed none)."""

    pod: str
    node: str | None
    digest: str | None
    container_statuses: list[ContainerStatus] | None


class MeasuredSize(TypedDict):
    """One message size of a collective-communication test as :class:`pytest_hetero.layers.training.SizeFacts`
    writes it (every field, always)."""

    bytes: int
    busbw_gbps: float


class ObservedInventory(TypedDict):
    """A host probe's inventory as ``discovery.snapshot`` keeps it
    (:meth:`pytest_hetero.probes.model.Inventory.to_dict`, which writes every field): as far as the renderers read
    it, its devices and when they were collected (None when the probe did not say)."""

    devices: list[object]
    collected_at: str | None


@final
class HostSnapshotData(TypedDict):
    """``discovery.snapshot`` of a host probe (:mod:`pytest_hetero.layers.discovery`, which writes ``observed`` on
    every such record; it never writes ``nodes``)."""

    observed: ObservedInventory


@final
class PoolSnapshotData(TypedDict):
    """``discovery.snapshot`` of a node pool (:mod:`pytest_hetero.layers.discovery`: ``nodes`` on every such record,
    with the engine's :class:`~pytest_hetero.backends.protocol.PoolSnapshot`, whose ``taken_at``, ``requested`` and
    ``capacity_view`` a third party's engine may leave out)."""

    nodes: list[SnapshotNode]
    taken_at: NotRequired[str]
    requested: NotRequired[list[str]]
    capacity_view: NotRequired[CapacityView]



class HostProbeData(TypedDict):
    """``discovery.host_probe`` (:mod:`pytest_hetero.layers.discovery`, its only writer): the engine's host was not
    probed (``skipped`` always True) and why (:attr:`pytest_hetero.backends.protocol.Inventory.host_not_probed`)."""

    skipped: bool
    reason: str


class SharedPoolData(TypedDict):
    """``discovery.shared_pool`` (:mod:`pytest_hetero.layers.discovery`, its only writer): the resources of one type
    that resolve to the same host or nodes (this one first), and ``where`` in words (``host …`` / ``nodes …``)."""

    resources: list[str]
    where: str


class EngineGap(TypedDict):
    """Why a container engine cannot satisfy a resource: the failure ``category`` and its ``message``."""

    category: str
    message: str


class EngineCanSatisfyData(TypedDict):
    """``discovery.engine_can_satisfy`` (:mod:`pytest_hetero.layers.discovery`, its only writer): the resource, whether
    the engine can satisfy it (``ok``: no gaps) and each gap (:func:`pytest_hetero.layers.discovery.engine_gaps`)."""

    resource: str
    ok: bool
    gaps: list[EngineGap]


class RepeatData(TypedDict):
    """``model.repeat`` (:mod:`pytest_hetero.layers.execution`, its only writer): the repeated sample ``run`` (from 1)
    of ``of``."""

    run: int
    of: int


class OutputsData(TypedDict):
    """``model.outputs`` (:func:`pytest_hetero.layers.base.keep_outputs`, its only writer): the outputs artifact's
    path in the bundle (None: withheld, a sensitive dataset's, then ``withheld`` says so), their sha256 and size
    (bytes); ``run`` numbers a repeated sample (None for a single run; absent when withheld)."""

    artifact: str | None
    sha256: str
    bytes: int
    withheld: NotRequired[str]
    run: NotRequired[int | None]


class OutputsUnusableData(TypedDict):
    """``model.outputs_unusable`` (:mod:`pytest_hetero.layers.execution`, its only writer): outputs that could not be
    read as the run's outputs, kept as an artifact (None: withheld, a sensitive dataset's, then ``withheld`` says
    so), their size (bytes) and sha256; when kept, how many bytes were kept and whether they were cut."""

    artifact: str | None
    bytes: int
    sha256: str
    withheld: NotRequired[str]
    kept_bytes: NotRequired[int]
    truncated: NotRequired[bool]


class RefusedData(TypedDict):
    """``governance.refused`` (:mod:`pytest_hetero.layers.governance`, :mod:`pytest_hetero.layers.boundaries`): the
    attempt's role, its reasons' codes and the cluster's message; a network attempt's ``address``, the
    NetworkPolicies that isolate it (``policies``) and what refused it (``by``, in words)."""

    role: str
    codes: list[str]
    message: str
    address: NotRequired[str | None]
    policies: NotRequired[list[str]]
    by: NotRequired[str]


class DevicesData(TypedDict):
    """``governance.devices`` (:mod:`pytest_hetero.layers.governance`, its only writer): what the device-isolation pod
    (no accelerator request) saw on its ``node``: the device nodes, the visible-devices variables (name → value;
    each None where the engine did not say) and the ``breaches`` judged from them."""

    node: str | None
    device_nodes: list[str] | None
    visible_env: dict[str, str] | None
    breaches: list[str]


class AttributionData(TypedDict):
    """``governance.attribution`` (:mod:`pytest_hetero.layers.governance`, its only writer): the rise each account
    must show (account → counter → quantity as text), the counters that rose otherwise (``wrong``) and those not
    back to their value after cleanup (``not_released``), each in words."""

    expected: dict[str, dict[str, str]]
    wrong: list[str]
    not_released: list[str]




class QueueAdmissionData(TypedDict):
    """``scheduling.queue`` (:func:`pytest_hetero.backends.kubernetes.placement.record_admission`): the queue
    ``controller``, whether the Workload was ``admitted`` (None when it could not be read), and for an admitted one
    the Kueue admission's fields (:func:`pytest_hetero.backends.kubernetes.queues.kueue_admission`), among them
    ``admitted_at`` (RFC 3339, the Admitted condition's time; None when not set)."""

    controller: str
    admitted: bool | None
    admitted_at: NotRequired[str | None]


# Every record kind with the shape of its data: one Kind per kind name (KINDS refuses a second).
REQUEST = Kind[RequestData]("scheduling.request")
PLACED = Kind[PlacedData]("scheduling.placed")
SUBMITTED = Kind[SubmittedData]("scheduling.submitted")
PENDING = Kind[PendingData]("scheduling.pending")
SNAPSHOT = Kind[HostSnapshotData | PoolSnapshotData]("discovery.snapshot")
DEVICE_INIT = Kind[DeviceInitData]("startup.device_init")
ENVIRONMENT = Kind[ImageDigestData]("startup.environment")
IMAGE = Kind[ImageDigestData]("startup.image")
POD = Kind[PodStartData]("startup.pod")
SIMULATION = Kind[SimulationData]("startup.simulation")
NODE_OUTCOME = Kind[NodeOutcomeData]("startup.node")
COVERAGE = Kind[CoverageData]("startup.coverage")
NODE_SCOPE = Kind[NodeScopeData]("discovery.nodes")
DIGEST = Kind[DigestData]("artifact.digest")
IDENTITY = Kind[IdentityData]("model.identity")
RUN = Kind[RunData]("model.run")
USAGE = Kind[UsageData]("model.usage")
SERVING_USAGE = Kind[UsageData]("serving.usage")
COMMUNICATION = Kind[CommunicationData]("training.communication")
CHECKPOINT = Kind[CheckpointData]("training.checkpoint")
RULES = Kind[RulesData]("business.rules")
NOT_PROVEN = Kind[NotProvenData]("scope.not_proven")
INPUT_USED = Kind[UsedData]("inputs.used")
PROBE = Kind[GovernanceProbeData]("governance.probe")
SERVING_AUTH = Kind[ServingAuthData]("serving.auth")
ROLLBACK = Kind[RollbackData]("serving.rollback")
RESERVE_SERVING = Kind[ReserveServingData]("reserve.serving")
RESERVE_BURST = Kind[ReserveBurstData]("reserve.burst")
RESERVE_WINDOW = Kind[ReserveWindowData]("reserve.window")
RESERVE_TIMELINE = Kind[ReserveTimelineData]("reserve.timeline")
HOST_PROBE = Kind[HostProbeData]("discovery.host_probe")
SHARED_POOL = Kind[SharedPoolData]("discovery.shared_pool")
ENGINE_CAN_SATISFY = Kind[EngineCanSatisfyData]("discovery.engine_can_satisfy")
REPEAT = Kind[RepeatData]("model.repeat")
OUTPUTS = Kind[OutputsData]("model.outputs")
OUTPUTS_UNUSABLE = Kind[OutputsUnusableData]("model.outputs_unusable")
REFUSED = Kind[RefusedData]("governance.refused")
DEVICES = Kind[DevicesData]("governance.devices")
ATTRIBUTION = Kind[AttributionData]("governance.attribution")
QUEUE_ADMISSION = Kind[QueueAdmissionData]("scheduling.queue")


def _kinds() -> dict[str, Kind[Any]]:
    """Every :class:`Kind` of this module by its name; a second Kind of one name is a bug (ValueError)."""
    out: dict[str, Kind[Any]] = {}
    for value in list(globals().values()):
        if isinstance(value, Kind):
            if value.name in out:
                raise ValueError(f"record kind {value.name!r} is declared twice")
            out[value.name] = value
    return out


KINDS: dict[str, Kind[Any]] = _kinds()
"""The record kinds whose ``data`` the gate declares, by name: :func:`check_records` holds every record of one of
these kinds to its shape. A kind not here (a plugin's own) keeps an open ``data`` object."""


def check_records(records: list[Any], where: str) -> None:
    """Check the ``data`` of each record in ``records`` (each already ``{kind: str, at: str, data: object}``) whose
    kind is in :data:`KINDS` against that kind's shape (:func:`pytest_hetero.evidence.shapes.check_json`). ``where``
    prefixes the path (``items[3]``). Raises :class:`pytest_hetero.evidence.document.DocumentError` naming the record
    and field (``items[3].records[1].data.waited_s: is a string, not a number (scheduling.placed)``)."""
    from pytest_hetero.evidence.document import DocumentError  # noqa: PLC0415 - document imports this module

    for n, record in enumerate(records):
        kind = KINDS.get(record["kind"])
        if kind is None:
            continue
        try:
            check_json(record["data"], kind.shape)
        except ShapeError as error:
            raise DocumentError(f"{where}.records[{n}].data{error.path}",
                                f"{error.message} (record kind {kind.name})") from None
