"""What an engine (backend) answers and does — in engine terms, never a verdict.

An engine is one way to reach compute: this host (``local``), a Docker Engine (``docker``), a
Kubernetes cluster (``kubernetes``), or a third party's (``pytest_hetero_backend`` hook). Like a
pytest-testinfra backend it answers questions and performs actions; the layers
(:mod:`pytest_hetero.layers`) take those answers and write each verdict once for every engine:

========================  ==========================================================  ===========
verb                      answers / does                                              layer
========================  ==========================================================  ===========
:meth:`Backend.inventory` what it sees of the resource: host devices, engine facts,   discovery
                          or the node pool (:class:`Inventory`)
:meth:`Backend.place`     place a workload with the resource's requests; what was     scheduling
                          allocated or why it is pending (:class:`Placement`)
:meth:`Backend.identify`  the image as the engine resolves it, before it starts       startup
:meth:`Backend.start`     start the image there (:class:`Started`)                    startup
:meth:`Backend.start_on`  start it once on each named node of the pool (coverage)      startup
:meth:`Backend.run`       run a command inside the started workload (:class:`ExecResult`) startup
:meth:`Backend.execute`   run the model entrypoint on its inputs, outputs copied out  model
:meth:`Backend.place_job` a task type's job (several pods: one gang) through a queue   scheduling
                          controller: admission, pods, rendezvous (:class:`JobPlacement`)
:meth:`Backend.govern`    a governance probe's attempts, as the tenant it acts as      scheduling
                          (:class:`GovernanceReport`)
:meth:`Backend.close`     remove what it created; what it could not (:class:`Leftover`) evidence
========================  ==========================================================  ===========

Optional serving verbs (a matrix's ``serving.deploy``; default: Unsupported / None, so the layer says
the claim is not applicable there): :meth:`Backend.serving_endpoint` (deploy if the engine does, wait
until ready, the base URL), :meth:`Backend.serving_pods` (the workloads behind it, recorded),
:meth:`Backend.serving_switch` (roll to another version and wait; the rollback check), each given a
:class:`ServingRequest`. :meth:`Backend.reserve_inference` (a reserved-inference governance probe: a
serving Deployment loaded while a training burst fills its pool; :class:`ReserveReport`) is optional too.

An action the engine could not carry out raises an :class:`EngineFault` naming what happened
in engine terms (image absent, container OOM-killed, apiserver unreachable) with the category
and owner category of that fact; the layer decides what it means for its claim. Engines record
the facts they observe on the :class:`Step` (``step.record``) and keep raw output as artifacts.

What a workload the gate created held (the run-wide usage ledger) travels as a plain ``usage`` dict
of facts (:data:`USAGE_FACTS`): on :attr:`Placement.usage`, :attr:`Started.usage`,
``ExecResult.details["workload"]`` and :attr:`EngineFault.usage` (a workload that failed or was refused
still held, or was denied, what it asked for); :mod:`pytest_hetero.layers.usage` writes one
``usage.workload`` record of it, the same for every engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypedDict, final

if TYPE_CHECKING:  # annotations only (postponed): no run-time dependency on typing_extensions on 3.10
    from typing import NotRequired, Required

    from pytest_hetero.backends.jobs import Job, JobSpec, RankExit
    from pytest_hetero.backends.kubernetes.gang import PeerAddress
    from pytest_hetero.backends.kubernetes.manifests import ConditionJSON, FlavorUsage
    from pytest_hetero.evidence.model import Artifact
    from pytest_hetero.matrix.expand import PlannedItem
    from pytest_hetero.matrix.model import Dataset, GovernanceProbe, Image, Matrix, Model, Resource
    from pytest_hetero.pending.model import ReasonDict, ReasonRef
    from pytest_hetero.probes.model import Inventory as DeviceInventory
    from pytest_hetero.settings import Settings

EXECUTION_PROVIDERS: dict[str, str] = {
    "cpu": "CPUExecutionProvider",
    "gpu": "CUDAExecutionProvider",
    "npu": "CANNExecutionProvider",
}
"""ONNX Runtime execution provider a resource type must run with (substituted for ``{provider}``)."""


USAGE_FACTS: dict[str, str] = {
    "workload": "engine-unique id of the workload (``pod/<namespace>/<name>``, ``container/<id>``, "
                "``process/<pid>@<start>``): the ledger counts each once, whichever items report it",
    "object": "``pod``, ``container``, ``process`` (holds resources itself) or ``exec`` (a run inside the "
            "workload named by ``within``: counted for its model, not again for its namespace)",
    "within": "for ``exec``: the id of the workload it ran in",
    "name": "the engine's name for it",
    "namespace": "Kubernetes namespace; ``docker`` for a Docker engine; ``local`` for this host",
    "tenant": "the tenant (matrix ``tenants[].name``) it was submitted as; None: the gate's own identity",
    "requests": "``{resource: quantity}`` as the engine stored them (Kubernetes quantity strings, Docker "
                "``NanoCpus``/``Memory`` converted to ``cpu`` cores and ``memory`` bytes)",
    "submitted": "epoch seconds the engine accepted it (creationTimestamp, container Created, spawn)",
    "placed": "epoch seconds it got a place (PodScheduled condition lastTransitionTime, container created)",
    "started": "epoch seconds it began running (container startedAt, process start)",
    "ended": "epoch seconds it stopped (container finishedAt, process reaped); None while running",
    "released": "epoch seconds its objects were confirmed gone; None: until the engine's cleanup",
    "attempts": "times the engine started it (1 + container restarts; sandbox starts)",
    "outcome": "``running``, ``completed``, ``failed`` (it ran and failed, or never started), "
               "``refused`` (the engine or cluster would not place it)",
    "simulated": "True on a KWOK node: the times are the simulator's, not a kubelet's",
    "cpu_s": "CPU-seconds the process tree used (rusage; local engine), beside the request-seconds",
}
"""The facts an engine may report of one workload it created (every key optional, JSON values; times
are epoch seconds as floats). Engines report facts only; the ledger's arithmetic is the layers' and
assembly's (:mod:`pytest_hetero.evidence.usage`)."""


class UsageFacts(TypedDict, total=False):
    """The facts an engine reports of one workload it created (:data:`USAGE_FACTS` says what each means;
    every key optional: an engine reports what it can tell). Times are epoch seconds; None: not known (yet)."""

    workload: str
    object: str
    within: str
    name: str | None
    namespace: str
    tenant: str | None
    requests: dict[str, str | float] | None
    """None: the engine could not tell (a governance probe's attempt that named none)."""
    submitted: float | None
    placed: float | None
    started: float | None
    ended: float | None
    released: float | None
    attempts: int
    outcome: str
    simulated: bool
    cpu_s: float | None
    node: str | None
    """The node a pod was bound to (Kubernetes; None: not bound)."""
    role: str
    """What a reserved-inference probe made the workload for (``serving``/``burst``)."""


class ProbeWorkload(UsageFacts, total=False):
    """A workload a governance probe placed, in its :class:`ProbeLedger`: its :class:`UsageFacts` (``role``,
    ``namespace``, ``requests``, ``workload``, ``object``, ``name``, ``placed``, ``released``, ``outcome``) and
    ``held_s`` (seconds from placement until the probe's objects were confirmed gone: an upper bound)."""

    held_s: float


class ProbeWaste(TypedDict):
    """A governance probe's work the cluster turned away: ``attempts``, ``refused`` (refused or left pending),
    ``waited_s`` (seconds spent waiting for placement or a verdict)."""

    attempts: int
    refused: int
    waited_s: float


class ProbeLedger(TypedDict):
    """What a governance probe cost the cluster (:attr:`GovernanceReport.ledger`): ``resource_seconds``
    ``{namespace: {resource: request × seconds held}}``, its ``workloads`` and its ``waste``."""

    resource_seconds: dict[str, dict[str, float]]
    workloads: list[ProbeWorkload]
    waste: ProbeWaste


class ServingPod(TypedDict, total=False):
    """One workload behind a serving deployment (:meth:`Backend.serving_pods`); keys the engine cannot know
    are absent. ``usage``: :data:`USAGE_FACTS` of a pod the engine deployed for this run (the ledger counts it)."""

    name: str
    node: str | None
    phase: str | None
    ready: bool
    ip: str | None
    image: str | None
    image_digest: str | None
    requests: dict[str, str]
    limits: dict[str, str]
    version: str | None
    revision: str | None
    usage: UsageFacts


class Step(Protocol):
    """What an engine is handed for one item: the matrix entries, the layer's timeout, and where to
    put what it observes. :class:`pytest_hetero.layers.base.LayerContext` is one."""

    matrix: Matrix
    planned: PlannedItem
    settings: Settings
    timeout_s: float
    pinned_node: str | None
    """The node a node-coverage workload is pinned to (:meth:`Backend.start_on`): :meth:`Backend.execute`
    then runs the smoke model run in that node's workload; None: the resource × image workload."""

    @property
    def layer(self) -> str:
        """The item's layer."""

    @property
    def resource(self) -> Resource:
        """The resource the item is keyed by."""

    @property
    def image(self) -> Image:
        """The image (startup, model and business items)."""

    @property
    def model(self) -> Model:
        """The model (model and business items)."""

    @property
    def dataset(self) -> Dataset:
        """The dataset (model and business items)."""

    def record(self, kind: str, **data: Any) -> None:
        """Add a timestamped record ``kind`` with ``data`` (JSON values) to the item's evidence."""

    def artifact(self, name: str, content: str | bytes, media_type: str = "text/plain") -> Artifact:
        """Keep ``content`` (secrets redacted) as artifact ``name`` of the item; return it."""


class EngineFault(Exception):
    """An engine action did not do what was asked. ``category`` names the fact (``image_not_found``,
    ``oom_killed``, ``engine_unreachable``…); who owns it is the failure table's decision
    (:mod:`pytest_hetero.judge.failures`), never the engine's."""

    status: ClassVar[str] = "failed"

    def __init__(self, message: str, category: str = "", usage: UsageFacts | None = None) -> None:
        self.message = message
        self.category = category or "unspecified"
        self.usage: UsageFacts = usage or {}
        """The failed workload's :data:`USAGE_FACTS` (empty: the engine created none or cannot tell)."""
        super().__init__(message)


class ActionFailed(EngineFault):
    """The engine answered, and the action failed or was refused (image absent, container exited,
    request refused by the apiserver, pod unschedulable)."""

    status = "failed"


class EngineUnavailable(EngineFault):
    """The engine or a call to it broke (unreachable, restarted, 5xx): nothing was learnt about the
    claim itself."""

    status = "error"


class Unsupported(EngineFault):
    """The engine has no such verb (a single host cannot place workloads); ``message`` says why."""

    status = "not_applicable"


@dataclass
class HostView:
    """Devices of one host as its vendor tool reports them (local backend; a local Docker engine's host).

    ``vendor`` is the probe that ran (``nvidia``, ``ascend``, ``cpu``); ``devices`` the probe's
    Inventory (:mod:`pytest_hetero.probes.model`; for ``cpu`` its ``extra`` holds logical CPUs,
    CPU limit and memory in MiB).
    """

    vendor: str
    devices: DeviceInventory


class EngineFacts(TypedDict, total=False):
    """What evidence keeps of a container engine (``discovery.engine``; the Docker engine writes every key, another
    engine what it knows): server and API version, OS, kernel, arch, the registered ``runtimes`` and the
    ``default_runtime``, whether an NVIDIA/Ascend runtime is registered, ``ncpu``, ``mem_total_mib``, the cgroup
    version and driver, the storage driver, whether the engine runs on this host, and its host's accelerator
    ``device_nodes`` (None: a remote host)."""

    server_version: str | None
    api_version: str | None
    os: str | None
    kernel: str | None
    arch: str | None
    runtimes: list[str]
    default_runtime: str | None
    nvidia_runtime: bool
    ascend_runtime: bool
    ncpu: int | None
    mem_total_mib: int
    cgroup_version: str | None
    cgroup_driver: str | None
    storage_driver: str | None
    engine_host_local: bool
    device_nodes: list[str] | None


@dataclass
class EngineView:
    """A container engine's own facts (Docker ``/version`` + ``/info``), and the resource's request in
    the engine's terms.

    ``facts``: what evidence keeps (``discovery.engine``); ``runtimes``: registered OCI runtimes;
    ``gpu_runtime``: an NVIDIA runtime or hook is usable; ``device_nodes``: accelerator device nodes
    on the engine's host (None when the host is remote); ``cpus``/``memory_bytes``: engine capacity;
    ``requested_cpus``/``requested_memory_bytes``: the resource's limits as the engine would
    apply them; ``request_error``: why the request cannot be expressed to the engine (None: it can).
    """

    facts: EngineFacts
    runtimes: list[str]
    gpu_runtime: bool
    device_nodes: list[str] | None
    cpus: float | None
    memory_bytes: int | None
    requested_cpus: float | None = None
    requested_memory_bytes: int | None = None
    request_error: str | None = None
    local: bool = True


class Taint(TypedDict, total=False):
    """A Kubernetes node ``Taint`` as the API serves it (``value`` and ``timeAdded`` may be absent; core/v1
    requires ``key`` and ``effect``, and every writer here — the API, the tests' nodes — writes them)."""

    key: Required[str]
    value: str
    effect: Required[str]
    timeAdded: str


class NodeCondition(TypedDict):
    """One condition of a node as :class:`NodeFacts` keeps it: the Kubernetes ``NodeCondition`` fields ``type``,
    ``status``, ``reason``, ``message`` and ``lastTransitionTime``, each written (None where the API left one out)."""

    type: str | None
    status: str | None
    reason: str | None
    message: str | None
    lastTransitionTime: str | None


class NodeFacts(TypedDict):
    """What evidence keeps of one node of a pool (:attr:`NodePool.nodes`; every key written by the engine):
    ``ready`` the Ready condition's status (``Unknown`` without one) with its ``ready_reason`` and
    ``ready_message``, every other condition, ``unschedulable`` (cordoned), ``taints``, ``labels``,
    ``capacity``/``allocatable`` of the requested resource names (quantity strings; None: not advertised),
    ``simulated`` (a KWOK node); ``uid``, its ``metadata.uid`` (the machine, where a name can be reused: ``hetero
    publish`` writes nothing on a node of that name whose uid is another, :func:`pytest_hetero.status.publish.
    not_replaced`; absent from evidence written before it, and a third party's engine may leave it out)."""

    name: str
    uid: NotRequired[str | None]
    resource_version: NotRequired[str | None]
    ready: str
    ready_reason: str | None
    ready_message: str | None
    conditions: NotRequired[list[NodeCondition]]
    """Every condition but Ready: its ``type``, ``status``, ``reason``, ``message``, ``lastTransitionTime``
    (Kubernetes ``NodeCondition`` fields, each key written; None where the API left one out). A third
    party's engine may leave ``conditions`` and ``resource_version`` out (``tests/test_extension.py``'s does)."""
    unschedulable: bool
    taints: list[Taint]
    labels: dict[str, str]
    capacity: dict[str, str | None]
    allocatable: dict[str, str | None]
    simulated: bool
    requested_by_pods: NotRequired[dict[str, float] | None]
    """What the pods bound to the node request (base units), added by a pool listing; None: pods could not
    be listed."""


class CapacityView(TypedDict):
    """How a pool listing counted what the nodes' pods request (:attr:`NodeFacts.requested_by_pods`): the
    ``pods_counted``, why they could not be (``unavailable``; None: they were) and the counting ``rule``."""

    pods_counted: int
    unavailable: str | None
    rule: str


class PoolSnapshot(TypedDict):
    """How a node pool was read (:attr:`NodePool.snapshot`, recorded as ``discovery.snapshot``): the ``source``
    (``kubernetes``; a third party's engine names its own) and, from an apiserver, the list's ``resource_version``,
    when it was ``taken_at`` (UTC), the ``label_selector``, the resource names ``requested`` and the
    ``capacity_view``."""

    source: str
    resource_version: NotRequired[str | None]
    taken_at: NotRequired[str]
    label_selector: NotRequired[str]
    requested: NotRequired[list[str]]
    capacity_view: NotRequired[CapacityView]


@dataclass
class NodePool:
    """The nodes of the resource's pool as an apiserver lists them.

    ``nodes``: per-node facts (``name``, ``ready``/``ready_reason``/``ready_message``, ``conditions``
    (every other node condition: ``type``, ``status``, ``reason``, ``message``), ``unschedulable``,
    ``taints``, ``labels``, ``capacity``/``allocatable`` of the requested resource names (quantity
    strings), ``simulated``); ``snapshot``: how it was read (``source``,
    ``resource_version``, ``taken_at``, ``label_selector``, ``requested``); ``selector``: the label
    selector used (empty: all nodes, narrowed to those advertising ``wanted``).
    """

    nodes: list[NodeFacts]
    snapshot: PoolSnapshot
    selector: str
    wanted: list[str]


@dataclass
class Inventory:
    """Everything an engine sees of a resource; each part present where the engine can see it."""

    host: HostView | None = None
    engine: EngineView | None = None
    pool: NodePool | None = None
    host_not_probed: str | None = None
    """Why no host probe ran (a remote engine's host is out of this process's reach)."""


@dataclass
class Placement:
    """Where a placement workload landed (``placed``) or why it did not.

    ``requested``/``allocated``: the limits asked and those the engine stored (engine terms);
    ``reasons``: normalised Pending reasons (:class:`pytest_hetero.pending.Reason` dicts) with the
    decisive one first in ``decisive`` (None: nothing explains the wait); ``message``: the engine's
    own summary of a refusal; ``untranslatable``/``short_devices``: the request could not be
    expressed, or the host has fewer devices than asked (message each); ``usage``: the workload's
    :data:`USAGE_FACTS` (empty where the engine created none).
    """

    placed: bool
    requested: dict[str, Any] = field(default_factory=dict)
    allocated: dict[str, Any] = field(default_factory=dict)
    decisive: ReasonDict | None = None
    message: str = ""
    untranslatable: str = ""
    short_devices: str = ""
    usage: UsageFacts = field(default_factory=UsageFacts)


@dataclass(frozen=True)
class JobRequest:
    """A task type's job to submit (``spec.task_queues``, :mod:`pytest_hetero.matrix.taskqueues`):
    ``workers`` pods (each with the resource's requests), submitted to LocalQueue ``queue`` with
    PriorityClass ``priority_class`` (None: the resource's), ``wait_s``: how long to wait for admission
    and placement (seconds)."""

    task_type: str
    workers: int
    queue: str | None
    priority_class: str | None
    wait_s: float


class PodSetFields(TypedDict):
    """One ``status.admission.podSetAssignments[]`` entry of an admitted Workload as :class:`JobAdmission`
    ``pod_sets`` keeps it (API names, None where the Workload lacks the field)."""

    name: str | None
    count: int | None
    flavors: dict[str, str] | None
    resourceUsage: dict[str, str] | None


class ClusterQueueSeen(TypedDict, total=False):
    """:class:`JobAdmission` ``cluster_queue_status``: the ClusterQueue's ``status`` counters as read (each None
    when the API left it out), or only ``error`` (why it could not be read)."""

    flavorsReservation: list[FlavorUsage] | None
    flavorsUsage: list[FlavorUsage] | None
    admittedWorkloads: int | None
    pendingWorkloads: int | None
    reservingWorkloads: int | None
    error: str


class KueueAdmission(TypedDict):
    """What :func:`pytest_hetero.backends.kubernetes.queues.kueue_admission` records of an admitted Workload
    (every field always written; see there)."""

    api_version: str
    workload: str | None
    local_queue: str | None
    cluster_queue: str | None
    flavors: dict[str, str]
    resource_usage: dict[str, str]
    pod_sets: list[PodSetFields]
    created_at: str | None
    quota_reserved_at: str | None
    quota_reserved_message: str | None
    admitted_at: str | None
    wait_s: float | None
    wait_since_submit_s: float | None
    cluster_queue_status: ClusterQueueSeen


@final
class JobAdmission(KueueAdmission):
    """An admitted job's Workload (:attr:`JobPlacement.admission`, a Kubernetes training job's ``admission``
    fact): its :class:`KueueAdmission` and its priority
    (:func:`~pytest_hetero.backends.kubernetes.gang.priority_of`)."""

    priority_class: str | None
    priority_class_kind: str | None
    priority: int | None


@final
class WorkloadSeen(TypedDict, total=False):
    """:attr:`JobPlacement.admission` of a job not admitted: its Workload's ``workload`` name, ``local_queue`` and
    ``conditions`` as served (None: none) when one was seen; empty when none was."""

    workload: str | None
    local_queue: str | None
    conditions: list[ConditionJSON] | None


class GangPod(TypedDict):
    """One pod of a gang job as last listed (:func:`pytest_hetero.backends.kubernetes.gang.pod_facts`): its
    completion ``index`` (None without the annotation), ``name``, ``node`` (None: unbound), ``ip``, ``phase``,
    ``hostname`` and ``subdomain`` (None when absent); ``endpoint``: where its peers reach it (the headless
    Service's EndpointSlices; None: not listed), set once the job has several pods and all run."""

    index: int | None
    name: str
    node: str | None
    ip: str | None
    phase: str | None
    hostname: str | None
    subdomain: str | None
    endpoint: NotRequired[PeerAddress | None]


class RendezvousAnswer(TypedDict):
    """What one pod's peer check said (:func:`pytest_hetero.backends.kubernetes.gang.rendezvous`): its
    ``index`` (the check's own ``JOB_COMPLETION_INDEX`` once it answered), ``pod``, ``ok``, ``error`` (None:
    none); once exec'd, its ``exit_code`` (and ``answer_from``: the file the answer was read from when the exec
    stream lost it); once it answered, the check's ``host``, ``reached_ms`` (peer index → ms), ``heard`` (peer
    indexes) and ``errors`` (peer index → why)."""

    index: int | None
    pod: str
    ok: bool
    error: str | None
    exit_code: NotRequired[int | None]
    answer_from: NotRequired[str]
    host: NotRequired[str]
    reached_ms: NotRequired[dict[str, float]]
    heard: NotRequired[list[int]]
    errors: NotRequired[dict[str, str]]


@dataclass
class JobPlacement:
    """What became of a :class:`JobRequest` (facts, never a verdict).

    ``admitted``: the queue controller admitted it (None: no queue controller answered); ``admission``:
    the Workload's facts (:class:`JobAdmission`: ``workload``, ``local_queue``, ``cluster_queue``,
    ``priority_class``, ``wait_s`` created → Admitted from the Workload's conditions, ...; :class:`WorkloadSeen`
    when not admitted); ``waited_s``: seconds from submission to admission or to giving up; ``pods``: the job's
    pods as last seen (:class:`GangPod` s; none before admission); ``service``: the headless Service's name;
    ``rendezvous``: per pod, what the peers' check said (:class:`RendezvousAnswer` s; empty when it did not
    run); ``decisive``/``reasons``:
    normalised Pending reasons (:class:`pytest_hetero.pending.Reason` dicts) when not admitted or not all
    placed; ``message``: the engine's summary.
    """

    admitted: bool | None
    placed: int = 0
    workers: int = 1
    admission: JobAdmission | WorkloadSeen = field(default_factory=WorkloadSeen)
    waited_s: float = 0.0
    pods: list[GangPod] = field(default_factory=list)
    service: str | None = None
    rendezvous: list[RendezvousAnswer] = field(default_factory=list)
    decisive: ReasonDict | None = None
    reasons: list[ReasonDict] = field(default_factory=list)
    message: str = ""
    usage: list[UsageFacts] = field(default_factory=list)
    """:data:`USAGE_FACTS` of each pod of the job (none before admission)."""


class InterpreterView(TypedDict):
    """An interpreter's framework view (:attr:`ImageIdentity.environment`, engines without containers): the
    ``python`` executable, ONNX Runtime's execution ``providers`` (None: ONNX Runtime is not importable) and
    ``onnxruntime_error`` (why not; None when it is)."""

    python: str
    providers: list[str] | None
    onnxruntime_error: str | None


@dataclass
class ImageIdentity:
    """An image as the engine knows it: ``digest`` (the one evidence names) and every digest the
    engine answers to (``known``: image id, repo digests); ``what`` names it in messages (who
    owns image problems is the judge's: ``spec.target.image_owner`` through the failure table). An
    engine that runs no container (local)
    reports the interpreter's framework view in ``environment`` (``{"python", "providers",
    "onnxruntime_error"}``) instead of running a device payload. ``handle`` is engine-private."""

    digest: str | None
    known: tuple[str, ...]
    what: str
    environment: InterpreterView | None = None
    handle: Any = None


@dataclass(frozen=True)
class StartedOn:
    """The node a workload started on, as the engine knows it (:attr:`Started.node`): its ``name`` and the
    ``facts`` it listed of it (None: its listing failed)."""

    name: str
    facts: NodeFacts | None


@dataclass
class Started:
    """A started workload: ``name`` (container/pod, for messages), ``handle`` (engine-private),
    ``where`` (where commands run: ``pod x`` / the KWOK host), ``simulated`` (a KWOK node: commands
    run on its host, not in the image), ``node`` (the node it started on, when the engine has nodes and knows it),
    ``identity`` (the image as it runs, when only known once started), ``usage`` (the workload's :data:`USAGE_FACTS`;
    empty where nothing was started: the local engine starts a process per model run)."""

    name: str
    handle: Any = None
    where: str = ""
    simulated: bool = False
    node: StartedOn | None = None
    identity: ImageIdentity | None = None
    usage: UsageFacts = field(default_factory=UsageFacts)


class _RunFailureBase(TypedDict):
    category: str
    message: str


class RunFailure(_RunFailureBase, total=False):
    """An engine's account of a run that ended for a reason the exit code alone does not tell: the failure
    ``category`` (owned per the failure table), a ``message``, and ``status`` ``error`` when the
    infrastructure broke (nothing was learnt about the model)."""

    status: Literal["error"]


@dataclass
class ExecResult:
    """One command run: ``argv`` as run, ``exit_code`` (None when killed on timeout), wall
    ``duration_s``, full ``stdout``/``stderr`` text, ``outputs`` (the bytes of the outputs file the
    entrypoint wrote, or None), ``peak_rss_mib`` where measurable, and engine ``details``.
    ``details["workload"]``: the run's :data:`USAGE_FACTS`, ``details["workload_started"]`` those of the
    workload the engine had to start for it (no startup item did); the layer takes both out and records them.
    ``failure`` (``{"category", "message"}``, optionally ``"status": "error"``) is the engine's account
    of a run that ended
    for a reason the exit code alone does not tell (OOM kill, container killed); the model layer
    records the run first, then fails with it (status ``error`` instead of ``failed`` when
    ``failure["status"] == "error"``: the infrastructure broke, e.g. the node turned NotReady)."""

    argv: list[str]
    exit_code: int | None
    duration_s: float
    stdout: str
    stderr: str
    outputs: bytes | None
    timed_out: bool = False
    peak_rss_mib: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    failure: RunFailure | None = None


@dataclass(frozen=True)
class Leftover:
    """Something the engine created that is still there after :meth:`Backend.close`: ``kind`` (``pod``,
    ``job``, ``container``…), ``name``, ``namespace`` (None where the engine has none), ``reason`` (the
    engine's account: the API's refusal, a finalizer that never cleared, with its facts in
    ``detail``), ``remove`` (the command that removes it by hand). Evidence keeps every leftover and
    the run's verdict reads ``not_clean`` (see :mod:`pytest_hetero.evidence.untested`)."""

    kind: str
    name: str
    reason: str
    namespace: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    remove: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The leftover as a JSON-ready dict (every field)."""
        return {"kind": self.kind, "name": self.name, "namespace": self.namespace, "reason": self.reason,
                "detail": dict(self.detail), "remove": self.remove}


class VictimFacts(TypedDict):
    """What became of a preemption probe's low-priority pod once the high one was placed (:class:`AttemptFacts`
    ``victim``): its ``pod``, whether it was ``evicted`` (deletion requested, or gone), its ``DisruptionTarget``
    conditions (``disruption``: reason and message) and the messages of its ``Preempted`` ``events``."""

    pod: str
    evicted: bool
    disruption: list[dict[str, str | None]]
    events: list[str]


class PolicyFacts(TypedDict):
    """The NetworkPolicies bearing on a network attempt's address: those that isolate it on the tenant's side
    (``egress``) and the target's (``ingress``), and those that admit it (``allowing``)."""

    egress: list[str]
    ingress: list[str]
    allowing: list[str]


class AttemptFacts(TypedDict, total=False):
    """:attr:`Attempt.facts`: what the engine learnt beside the outcome; each role writes its own keys.

    A submission (:meth:`pytest_hetero.backends.kubernetes.governance._Probe.submit`): the ``node`` it landed on,
    its ``pods`` and Kueue ``workloads``, the ``requests`` it made, when it was placed (``placed_at``, epoch s;
    taken out for the ledger); a read: what it ``returned``; a refusal: the ``http_status`` and the fault's
    ``category``; ``maintenance``'s ``node``: the ``target_node`` and why it is in maintenance; ``no-request``'s:
    the ``device_nodes`` and ``visible_env`` its pod saw, whether its ``log`` was complete (``log_complete``);
    ``high``'s: the ``victim``. Network attempts: the ``address``, the ``target`` in words, the probe pod's
    ``node``, the ``policies``, the ``control`` connection, and the ``result`` and ``seconds`` of the connection;
    data attempts: the ``claim``, ``volume``, ``pull_secret``, the kubelet's ``event`` and ``events``; a
    Service or claim the probe names that does not exist: which list it is ``absent`` from (``services``,
    ``claims``), the ``service`` and the names ``present``."""

    node: str | None
    pods: list[str]
    workloads: list[str]
    requests: dict[str, str]
    placed_at: float
    returned: list[str]
    http_status: int | None
    category: str
    target_node: str
    maintenance: list[str]
    device_nodes: list[str]
    visible_env: dict[str, str]
    log_complete: bool
    log: str
    victim: VictimFacts
    address: str
    target: str
    policies: PolicyFacts
    control: dict[str, object]
    result: str
    seconds: float
    claim: str
    volume: str | None
    pull_secret: str
    event: str
    events: list[str]
    absent: str
    service: str
    present: list[str]


class AttemptDict(TypedDict):
    """:meth:`Attempt.to_dict`: an attempt as evidence records it and the layers judge it (every field)."""

    role: str
    action: str
    identity: str
    outcome: str
    reasons: list[ReasonRef]
    message: str
    waited_s: float
    facts: AttemptFacts


@dataclass
class Attempt:
    """One action of a governance probe as the engine carried it out, in engine terms; the layer judges it.

    ``role``: what the probe made the attempt for (the layer's name: ``submit-into-target``,
    ``list-target-pods``, ``list-target-workloads``, ``submit-to-target-queue``,
    ``submit-via-target-cluster-queue``, ``above``,
    ``within``, ``workload``, ``no-request``, ``node``, ``low``, ``high``, ``waiter``); ``action``: the
    request in the engine's words (``create Pod x in namespace a``); ``identity``: the user the
    cluster saw make it; ``outcome``: ``refused`` (the API said no), ``pending`` (accepted, never
    placed or admitted within ``waited_s`` seconds), ``placed`` (bound to a node or admitted),
    ``completed`` (ran to its end), ``allowed`` (a read the API answered), ``not-attempted``
    (``message`` says why); ``reasons``: normalised reasons (:class:`pytest_hetero.pending.Reason`
    dicts, decisive first); ``message``: the cluster's own words; ``facts``: the rest (node, devices
    seen, events, quantities).
    """

    role: str
    action: str
    identity: str
    outcome: str
    reasons: list[ReasonRef] = field(default_factory=list)
    message: str = ""
    waited_s: float = 0.0
    facts: AttemptFacts = field(default_factory=AttemptFacts)

    def to_dict(self) -> AttemptDict:
        """The attempt as a JSON-ready dict (every field)."""
        return {"role": self.role, "action": self.action, "identity": self.identity, "outcome": self.outcome,
                "reasons": list(self.reasons), "message": self.message, "waited_s": round(self.waited_s, 3),
                "facts": self.facts.copy()}


@final
class QuotaAccount(TypedDict):
    """A ResourceQuota's account: its ``hard`` limits and what it counts as ``used`` (quantity strings)."""

    hard: dict[str, str]
    used: dict[str, str]


@final
class QueueAccount(TypedDict):
    """A Kueue queue's account: ``usage`` and ``reservation`` (``<flavor>/<res>`` → quantity string), and its
    ``admitted_workloads``/``reserving_workloads`` counts (None where its status has none)."""

    usage: dict[str, str]
    reservation: dict[str, str]
    admitted_workloads: int | None
    reserving_workloads: int | None


@final
class Unreadable(TypedDict):
    """A queue whose status could not be read, and why."""

    error: str


Account = QuotaAccount | QueueAccount | Unreadable
"""One account an attribution probe reads (:func:`pytest_hetero.backends.kubernetes.accounts.read`), keyed
``resourcequota/<name>``, ``clusterqueue/<name>`` or ``localqueue/<ns>/<name>``."""


class AttributionUsage(TypedDict):
    """:attr:`GovernanceReport.usage` of an attribution probe: the tenant's ``namespace``, the resources its
    workload ``requested`` (quantity strings), the accounts read ``before`` it, whether it was ``placed``, the
    accounts read ``during`` it ({} when it was not placed) and ``after`` its cleanup (once it was placed, or {}
    when it was not), with the seconds each read waited to settle (``during_waited_s``, ``after_waited_s``)."""

    namespace: str
    requested: dict[str, str]
    before: dict[str, Account]
    placed: bool
    during: dict[str, Account]
    during_waited_s: NotRequired[float]
    after: NotRequired[dict[str, Account]]
    after_waited_s: NotRequired[float]


class IdentityFacts(TypedDict):
    """Who a governance probe acted as (:attr:`GovernanceReport.identity`; no credential): the ``tenant`` (None: the
    gate itself), the ``subject`` and ``groups`` the apiserver confirmed, the ``namespace`` it acted in by default
    and the ``method`` the credentials were obtained by."""

    tenant: str | None
    subject: str
    groups: list[str]
    namespace: str
    method: str


class CleanupRecord(TypedDict):
    """One object a probe created, once deleted (:attr:`GovernanceReport.cleanup`, :attr:`ReserveReport.cleanup`):
    its ``kind``, ``namespace`` (None: cluster-scoped), ``name`` and whether it was ``gone`` within the wait."""

    kind: str
    namespace: str | None
    name: str
    gone: bool


@dataclass
class GovernanceReport:
    """What a governance probe did (:meth:`Backend.govern`): ``identity`` it acted as (``tenant``,
    ``subject`` the cluster confirmed, ``groups``, ``method``: how the credentials were obtained),
    ``observer`` (the identity that read the cluster's state), its ``attempts`` in order, ``usage``
    (attribution: :class:`AttributionUsage`; None for the other kinds),
    ``cleanup`` (each object created and whether it is gone) and ``leftovers`` (what is still there).
    ``skipped``: why nothing could be attempted (e.g. no node of the pool is in maintenance).
    ``ledger``: what the probe cost the cluster (see :func:`pytest_hetero.backends.kubernetes.governance.ledger`)."""

    identity: IdentityFacts
    observer: str
    attempts: list[Attempt] = field(default_factory=list)
    usage: AttributionUsage | None = None
    cleanup: list[CleanupRecord] = field(default_factory=list)
    leftovers: list[Leftover] = field(default_factory=list)
    skipped: str = ""
    ledger: ProbeLedger | None = None


class WindowStats(TypedDict):
    """The statistics of one load window of a reserved-inference probe (:data:`Measure`): ``requests`` sent, ``ok``
    (2xx) and ``errors``, ``error_rate`` (0–1; 1.0 when nothing could be sent), ``status_counts`` (``{"200": n,
    "transport": n}``), ``p50_ms``/``p95_ms``/``max_ms`` latencies of the successful requests (None without any),
    the ``first_error`` (None: none) and ``unserved`` (no ready endpoint: the window only waited)."""

    requests: int
    ok: int
    errors: int
    error_rate: float
    status_counts: dict[str, int]
    p50_ms: float | None
    p95_ms: float | None
    max_ms: float | None
    first_error: str | None
    unserved: bool


class ReserveWindow(WindowStats):
    """One load window of a reserved-inference probe (:attr:`ReserveReport.windows`): its ``phase`` (``before`` /
    ``burst``), ``from_s``/``to_s`` (seconds since the burst started), the ready ``endpoints`` the load was sent to
    (pod names), ``ready_min`` (fewest serving pods Ready seen in it; None: no listing fell in it) and the
    :class:`WindowStats` ``measure`` returned."""

    phase: str
    from_s: float
    to_s: float
    endpoints: list[str]
    ready_min: int | None


class PriorityFacts(TypedDict):
    """A PriorityClass as a reserved-inference report keeps it: its ``name``, ``value``, ``preemption_policy``
    (None: the API left it out) and whether it is the ``global_default``."""

    name: str
    value: int
    preemption_policy: str | None
    global_default: bool


class RolloutFacts(TypedDict):
    """What a rollout wait saw once a Deployment served (Kubernetes, ``serving.k8s.ready``): the ``deployment``
    (``namespace/name``), its ``revision``, current ``replicaset``, where the endpoint came from
    (``endpoint_source``), the ready endpoint's ``pod_ip`` and ``port``, the ready ``pods`` and ``waited_s``."""

    deployment: str
    revision: str
    replicaset: str
    endpoint_source: str
    pod_ip: str
    port: int
    pods: list[str]
    waited_s: float


class SwitchFacts(TypedDict, total=False):
    """What :meth:`Backend.serving_switch` did: ``how`` it switched, the Deployment's ``revision_before`` and
    ``revision_after``, the ``replicaset`` serving then, its ``endpoint`` URL and ``waited_s`` for the rollout
    (each key optional: an engine says what it can tell; the Kubernetes engine says all)."""

    how: str
    revision_before: str
    revision_after: str
    replicaset: str
    endpoint: str
    waited_s: float


class ReserveServing(TypedDict):
    """:attr:`ReserveReport.serving`: the serving Deployment's ``deployment`` name, ``namespace``, ``replicas``,
    ``min_ready``, its ``priority_class`` (None without one), ``image`` reference and the ``identity`` that
    deployed it; once it rolled out, what the rollout wait saw (``ready``); the watcher's errors
    (``watch_errors``) once the burst ran, and when the cleanup began (``cleanup_began``, epoch s)."""

    deployment: str
    namespace: str
    replicas: int
    min_ready: int
    priority_class: PriorityFacts | None
    image: str
    identity: str
    ready: NotRequired[RolloutFacts]
    watch_errors: NotRequired[list[str]]
    cleanup_began: NotRequired[float]


class BurstPod(TypedDict):
    """One burst pod's end state (:attr:`ReserveBurst.pods`): its ``name``, ``node`` (None: never placed),
    whether it was ``placed``, the node it was ``nominated`` to, the scheduler's ``pending`` message and whether a
    Preempted event named it (``preempted_for``)."""

    name: str
    node: str | None
    placed: bool
    nominated: str | None
    pending: str | None
    preempted_for: NotRequired[bool]


class ReserveBurst(TypedDict):
    """:attr:`ReserveReport.burst`: the burst's ``priority_class`` (None without one), the pods ``requested`` and
    each pod's ``requests``; once it ran: when it ``started`` (epoch s), the pods the API ``refused``, each pod's
    end state (``pods``), how many were ``placed`` and whether any ``asked_to_preempt``."""

    priority_class: PriorityFacts | None
    requested: int
    requests: dict[str, str]
    started: NotRequired[float]
    refused: NotRequired[list[str]]
    pods: NotRequired[list[BurstPod]]
    placed: NotRequired[int]
    asked_to_preempt: NotRequired[bool]


class ReserveEvent(TypedDict):
    """One change a reserved-inference probe saw (:attr:`ReserveReport.timeline`): ``t`` (epoch s; None: an event
    without a time), the ``pod`` and its ``role`` (serving/burst), ``what`` happened, its ``source`` (``observed``
    by the watcher, or an ``event`` of the cluster) and ``message``; ``at_s`` (seconds since the burst started)
    once the burst's start is known. An observed change adds its facts (``priority`` and ``created_at`` of a
    created pod, the ``node`` it was scheduled or nominated to, the ``disruption`` conditions of a deleted one); a
    cluster event its time ``resolution_s``, ``count``, ``reporter`` and, for ``Preempted``, the burst pod it was
    preempted ``by``."""

    t: float | None
    pod: str
    role: str
    what: str
    source: str
    message: str
    at_s: NotRequired[float | None]
    priority: NotRequired[int | None]
    created_at: NotRequired[float | None]
    node: NotRequired[str | None]
    disruption: NotRequired[list[dict[str, str | None]]]
    resolution_s: NotRequired[float]
    count: NotRequired[int]
    reporter: NotRequired[str]
    by: NotRequired[str | None]


class ReserveVictim(TypedDict):
    """A serving pod removed during the burst (:attr:`ReserveReport.victims`): the ``pod``, the first sign's ``at_s``,
    the burst pod it was preempted ``by`` (None: not named) and the ``evidence`` seen."""

    pod: str
    at_s: float | None
    by: str | None
    evidence: list[str]


Measure = Callable[[list[str], float], WindowStats]
"""The reserved-inference probe's load (given by the layer): ``measure(base_urls, seconds)`` sends requests
to the ready endpoints ``base_urls`` (``http://HOST:PORT``) for ``seconds`` and returns the window's
statistics (:class:`WindowStats`); with no endpoint it only waits."""


@dataclass
class ReserveReport:
    """What a reserved-inference probe saw (:meth:`Backend.reserve_inference`), in engine terms.

    ``serving``: the Deployment (``deployment``, ``namespace``, ``replicas``, ``priority_class``: name,
    ``value``, ``preemption_policy``, ``found``; None without one; ``pods`` Ready before the burst);
    ``burst``: ``priority_class`` (as for serving), ``pods`` (name, node or None, ``placed``, ``pending``
    with the scheduler's message, ``preempted_for``), ``asked_to_preempt`` (a burst pod found no room
    without preemption: Pending Unschedulable, a nominated node, or a victim); ``windows``: per load window
    ``phase`` (``before``/``burst``), ``from_s``/``to_s`` (seconds since the burst started), ``endpoints``
    (ready endpoints the load was sent to), ``ready_min`` (fewest serving pods Ready seen in it) and the
    statistics ``measure`` returned; ``timeline``: changes seen (pod created, scheduled, Ready, not Ready,
    deleting, gone; the cluster's events ``Preempted``, ``Killing``, ``FailedScheduling``…), each
    ``{"at_s", "t" (epoch), "pod", "role" (serving/burst), "what", "source" (observed/event), "message"}``
    in time order; ``victims``: serving pods removed during the burst (``pod``, ``at_s``, ``by`` the burst pod
    named by the scheduler, ``evidence``: the Preempted event and DisruptionTarget condition seen);
    ``cleanup``/``leftovers`` as for a governance probe; ``usage``: :data:`USAGE_FACTS` of every pod the probe
    made (serving replicas and their replacements, burst pods) plus its ``role``, for the usage ledger."""

    serving: ReserveServing
    burst: ReserveBurst
    windows: list[ReserveWindow] = field(default_factory=list)
    timeline: list[ReserveEvent] = field(default_factory=list)
    victims: list[ReserveVictim] = field(default_factory=list)
    cleanup: list[CleanupRecord] = field(default_factory=list)
    leftovers: list[Leftover] = field(default_factory=list)
    usage: list[UsageFacts] = field(default_factory=list)


def render_entrypoint(entrypoint: tuple[str, ...], values: dict[str, str]) -> list[str]:
    """Substitute ``{python}``, ``{code}``, ``{model}``, ``{dataset}``, ``{outputs}``, ``{provider}``.

    Each placeholder is a plain name replaced by its value as it is: a format spec or conversion
    (``{python:>200000000}`` would pad to 200 MB) is refused like an unknown name. Raises ActionFailed
    (``bad_entrypoint``) naming the placeholder, or for an unbalanced brace.
    """
    from string import Formatter

    out = []
    try:
        for part in entrypoint:
            pieces = []
            for literal, name, spec, conversion in Formatter().parse(part):
                pieces.append(literal)
                if name is None:
                    continue
                if spec or conversion or name not in values:
                    written = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
                    raise ActionFailed(f"entrypoint has an unknown placeholder {written[:80]} (placeholders are plain "
                                       "names without format spec or conversion)", "bad_entrypoint")
                pieces.append(values[name])
            out.append("".join(pieces))
    except ValueError as exc:
        raise ActionFailed(f"entrypoint has an unbalanced brace ({exc})", "bad_entrypoint") from None
    return out


class Backend(ABC):
    """An engine. One instance per (name, target) per pytest process; see the module docstring."""

    name: ClassVar[str] = ""
    scheduling_per_image: ClassVar[bool] = False
    """True when placement depends on the image (scheduling items keyed resource × image)."""

    def __init__(self, target: dict[str, Any], settings: Settings) -> None:
        self.target = target
        self.settings = settings

    @abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """Identity of what is validated: ``{"backend", "identity", "nodes", "versions", "images"}``."""

    @abstractmethod
    def inventory(self, step: Step) -> Inventory:
        """What the engine sees of ``step.resource``. Raises EngineFault when it cannot look."""

    def place(self, step: Step) -> Placement:
        """Place a workload with ``step.resource``'s requests through the engine's real path.

        Raises Unsupported where the engine places nothing (a single host), EngineFault when the
        engine cannot be asked.
        """
        raise Unsupported(f"the {self.name} backend cannot prove scheduling")

    def place_job(self, step: Step, request: JobRequest) -> JobPlacement:
        """Submit a task type's job (``request.workers`` pods of ``step.resource`` × ``step.image``) through
        the engine's queue controller, admitted as one unit; wait for admission and placement, have the
        pods find each other when there are several; report what happened (:class:`JobPlacement`).

        Raises Unsupported where the engine has no queue controller, EngineFault when it cannot be asked.
        """
        raise Unsupported(f"the {self.name} backend has no queue controller to admit a job")

    def identify(self, step: Step) -> ImageIdentity | None:
        """The image of ``step`` as the engine resolves it before starting it (pulled per the target's
        policy); None when the engine only knows it once started. Raises EngineFault."""
        return None

    @abstractmethod
    def start(self, step: Step) -> Started:
        """Start ``step.image`` for ``step.resource`` (inputs available to it). Raises EngineFault
        when it does not come up (exited, OOM-killed, will not pull, not placed)."""

    def start_on(self, step: Step, nodes: list[str]) -> list[Started | EngineFault]:
        """Start ``step.image`` for ``step.resource`` once on each of ``nodes`` (node names of the pool's
        :meth:`inventory`), each workload pinned to its node but placed through the engine's real path (a
        DaemonSet-style validator); one answer per node, in order: the Started, or the EngineFault saying
        why it was not placed or did not start there (the other nodes go on).

        Raises Unsupported where the engine has no node pool (a single host), EngineFault when the engine
        cannot be asked at all.
        """
        raise Unsupported(f"the {self.name} backend has no node pool to place workloads on node by node")

    def run(self, started: Started, argv: list[str], timeout_s: float, env: dict[str, str] | None = None
            ) -> ExecResult:
        """Run ``argv`` inside the started workload (POSIX sh available for the device payload).
        Raises Unsupported where the engine runs nothing inside a workload, EngineFault otherwise."""
        raise Unsupported(f"the {self.name} backend runs no commands inside a workload")

    def logs(self, started: Started) -> str | None:
        """The started workload's own log (container/pod output so far), or None where there is none."""
        return None

    @abstractmethod
    def execute(self, step: Step) -> ExecResult:
        """Run the model entrypoint of ``step`` on its dataset (inputs copied or mounted in, the
        outputs file copied out, size-bounded); return the run. With ``step.pinned_node`` set (node
        coverage's smoke run, only on engines with :meth:`start_on`): in the workload started on that node.
        Raises EngineFault."""

    def govern(self, step: Step, probe: GovernanceProbe) -> GovernanceReport:
        """Carry out the attempts of governance ``probe`` on ``step.resource``'s pool, as the tenant it
        acts as, and remove what they created; report what the engine saw (never a verdict).

        Raises Unsupported where the engine has no tenants, queues or quotas (a single host, a Docker
        engine), EngineFault when the engine cannot be asked.
        """
        raise Unsupported(f"the {self.name} backend has no tenants, quotas or queues to probe")

    def reserve_inference(self, step: Step, probe: GovernanceProbe, request: ServingRequest,
                          measure: Measure) -> ReserveReport:
        """Deploy ``request`` (the probe's serving Deployment: ``probe.reserve`` replicas and PriorityClass),
        wait until ready, load it (``measure``) in windows before and during a burst of ``probe.reserve``
        burst pods on ``step.resource``'s pool, observe readiness, preemptions and evictions, and remove what
        it created; report what it saw (never a verdict). Raises Unsupported where the engine has no
        scheduler priorities (a single host, a Docker engine), EngineFault when it cannot be asked."""
        raise Unsupported(f"the {self.name} backend has no pool priorities or preemption to probe")

    # -- jobs of several ranks (optional verbs; the training checks, :mod:`pytest_hetero.backends.jobs`) -----
    def start_job(self, step: Step, spec: JobSpec) -> Job:
        """Start ``spec.world_size`` workloads of ``step.image`` for ``step.resource``, one per rank, each running
        ``spec.argv`` with :meth:`JobSpec.rank_env`, able to reach rank 0 at ``Job.rendezvous_host:spec.port``.
        Returns at once (ranks run on). Raises Unsupported where the engine runs no such job, EngineFault when a
        rank cannot be started (what was started is removed first)."""
        raise Unsupported(f"the {self.name} backend runs no jobs of several ranks")

    def job_logs(self, job: Job, rank: int) -> str:
        """What rank ``rank`` wrote to stdout so far (its log). Raises EngineFault when it cannot be read."""
        raise Unsupported(f"the {self.name} backend runs no jobs of several ranks")

    def job_running(self, job: Job) -> list[int]:
        """The ranks of ``job`` still running now. Raises EngineFault when the engine cannot be asked."""
        raise Unsupported(f"the {self.name} backend runs no jobs of several ranks")

    def kill_rank(self, job: Job, rank: int) -> None:
        """Kill rank ``rank``'s workload at once (SIGKILL: the gate's fault injection or checkpoint kill); it is
        recorded in ``job.killed``. Raises EngineFault when the engine cannot be asked."""
        raise Unsupported(f"the {self.name} backend runs no jobs of several ranks")

    def wait_job(self, job: Job, timeout_s: float, settle_s: float = 10.0) -> list[RankExit]:
        """Wait until every rank ended, at most ``timeout_s`` seconds; once one rank ended in failure the others
        get ``settle_s`` seconds to end too (a collective whose peer is gone may hang), then the rest are stopped
        (``stopped_after_peer``); ranks still running at ``timeout_s`` are stopped (``exit_code`` None).
        One :class:`RankExit` per rank, by rank. Raises EngineFault when the engine cannot be asked."""
        raise Unsupported(f"the {self.name} backend runs no jobs of several ranks")

    def remove_job(self, job: Job) -> None:
        """Remove the job's workloads and network objects (not the volume). Must not raise."""
        return None

    def close(self) -> list[Leftover] | None:
        """Release everything this engine created (unless settings.keep). Must not raise.

        Returns what it could not remove (each a :class:`Leftover`; ``[]`` or None: nothing is left),
        which the run records in evidence: a failed cleanup is never only a line on stderr."""
        return None

    # -- serving (optional verbs; the serving layer asks every engine the same way) ----------------
    def serving_endpoint(self, step: Step, request: ServingRequest) -> str:
        """Base URL (``http://HOST:PORT``, no trailing slash) of the service ``request.deploy`` names,
        deployed and ready at ``request.version`` where the engine deploys it itself. Idempotent: a
        second call for the same object returns its current endpoint and changes nothing.

        Raises Unsupported where the engine cannot resolve a ``deploy`` (the layer: not applicable,
        give ``serving.endpoint``); ActionFailed ``endpoint_not_ready`` (the kubelet's/engine's
        reason in the message) when it never became ready; EngineFault otherwise.
        """
        raise Unsupported(f"the {self.name} backend cannot resolve {request.deploy} to an endpoint "
                          "(serving_endpoint not implemented); give serving.endpoint")

    def serving_pods(self, step: Step, request: ServingRequest) -> list[ServingPod] | None:
        """The workloads backing ``request.deploy`` now: ``[{"name", "node", "phase", "ready", "ip",
        "image", "image_digest", "requests", "limits", "revision", "usage"}]`` (keys the engine cannot know
        are absent; ``usage``: :data:`USAGE_FACTS` of a pod the engine deployed for this run, which the
        usage ledger counts); None where the engine cannot list them (evidence says so). Raises EngineFault."""
        return None

    def serving_switch(self, step: Step, request: ServingRequest, version: str) -> SwitchFacts:
        """Make ``request.deploy`` serve ``version`` and wait until the rollout is complete; return its
        facts (``{"how", "revision_before", "revision_after", ...}``, recorded as evidence).

        Raises Unsupported where the engine cannot switch versions (the layer records the rollback as
        not applicable), ActionFailed when the rollout does not complete (``rollback_not_ready``).
        """
        raise Unsupported(f"the {self.name} backend cannot switch {request.deploy} to another version "
                          "(serving_switch not implemented); give serving.rollback.endpoint")


@dataclass(frozen=True)
class ServingRequest:
    """What the serving layer asks an engine to serve (``spec.models[].serving`` in engine terms).

    ``deploy``: the object (``{"kind", "name", "namespace"?}``, matrix ``serving.deploy``);
    ``model_name``/``version``: what it must serve; ``ready_path``: the protocol's readiness path
    (``/v2/health/ready`` for OIP), which the engine may probe; ``token``: the bearer token the
    service must require (from the matrix's ``auth.token_env``; never recorded), None for none.
    """

    deploy: dict[str, str]
    model_name: str
    version: str
    ready_path: str
    token: str | None = field(default=None, repr=False)
    ready_timeout_s: float = 60.0

