"""Frozen, typed view of a validated ValidationMatrix (apiVersion ``pytest-hetero/v1``).

Built only by :func:`pytest_hetero.matrix.load.load_matrix`, after schema and reference
checks, so every field here is known to be well-formed. Paths are absolute; durations are
seconds (float).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

from pytest_hetero.matrix.document import (
    BurstDoc,
    ExpectDoc,
    MatrixDoc,
    ResourceType,
    TargetDoc,
    TaskType,
    TolerationDoc,
)
from pytest_hetero.matrix.taskqueues import TaskQueue
from pytest_hetero.matrix.training import Training
from pytest_hetero.vocab import DEFAULT_OWNERS, OWNER_CATEGORIES, Layer

DEFAULT_TIMEOUTS_S: dict[Layer, float] = {
    "discovery": 60.0, "scheduling": 120.0, "startup": 300.0, "model": 900.0, "business": 60.0,
}
"""Per-layer timeout in seconds when ``spec.layers.<layer>.timeout`` is absent."""

Dimension = Literal["resource", "image", "model", "dataset"]
"""The dimensions a matrix combines (``spec.resources``, ``images``, ``models``, ``datasets``), by entry name."""

BASIC_RESOURCES: tuple[str, ...] = ("cpu", "memory", "ephemeral-storage", "pods")
"""Resource names every node has; the rest of a request names accelerators (extended resources)."""

TASK_TYPES: tuple[TaskType, ...] = ("training", "fine-tune", "batch-inference", "online-inference", "evaluation",
                              "data-processing")
"""``spec.models[].task_type`` values (schema enum); absent: ``online-inference`` when served, else
``batch-inference``."""
DEFAULT_VALID_FOR_S = 7 * 24 * 3600.0
"""How long a validation status holds when ``spec.validation.valid_for`` is absent (seconds: 7 days)."""
DEFAULT_DOMAIN = "pytest-hetero.dev"
"""DNS domain of published status keys when ``spec.validation.domain`` is absent."""

PROBE_OF_TYPE: dict[ResourceType, str] = {"gpu": "nvidia", "npu": "ascend", "cpu": "cpu"}
"""Resource type → the device probe that reads a resource whose vendor has no probe of its own
(:attr:`Resource.probe_vendor`)."""

DEFAULT_OUTPUT_LIMIT = 64 * 1024
"""Bytes of stdout/stderr kept inline in evidence per stream (the full text goes to an artifact)."""


@dataclass(frozen=True)
class Coverage:
    """Which schedulable nodes of a pool the startup check runs on (``spec.resources[].coverage``):
    ``mode`` ``one`` (the node the scheduler picks for the workload), ``every``, ``sample`` (``count``
    nodes) or ``share`` (``share`` of them, 0 < share <= 1, rounded up)."""

    mode: str = "one"
    count: int | None = None
    share: float | None = None

    @classmethod
    def parse(cls, value: Any) -> Coverage:
        """From the schema-valid matrix value: ``"one"``, ``"every"``, ``{"sample": N}``, ``{"share": F}``."""
        if isinstance(value, dict):
            if "sample" in value:
                return cls("sample", count=int(value["sample"]))
            return cls("share", share=float(value["share"]))
        return cls(str(value or "one"))

    def how_many(self, schedulable: int) -> int:
        """How many of ``schedulable`` nodes to exercise (0 when there are none)."""
        if self.mode == "every":
            return schedulable
        if self.mode == "sample":
            return min(schedulable, self.count or 1)
        if self.mode == "share":
            return min(schedulable, max(1, math.ceil((self.share or 0.0) * schedulable - 1e-9)))
        return min(schedulable, 1)

    def describe(self) -> str:
        """The setting as the matrix says it: ``every``, ``sample 8``, ``share 0.25``, ``one``."""
        if self.mode == "sample":
            return f"sample {self.count}"
        if self.mode == "share":
            return f"share {self.share:g}"
        return self.mode


@dataclass(frozen=True)
class Resource:
    """One resource type to validate: requests such as ``{"nvidia.com/gpu": "1"}`` (quantities as strings)."""

    name: str
    type: ResourceType
    vendor: str
    requests: dict[str, str]
    limits: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[TolerationDoc, ...] = ()
    queue: str | None = None
    priority_class: str | None = None
    expect: ExpectDoc = field(default_factory=ExpectDoc)
    line: int = 0
    coverage: Coverage = field(default_factory=Coverage)
    """Which schedulable nodes of the pool the startup check runs on (default ``one``)."""
    model_runs: str | None = None
    """``shared`` (every model run an exec in the resource × image workload), ``per-run`` (a workload per model
    run: a Pod, :mod:`pytest_hetero.backends.kubernetes.spread`; a container pinned to a device slot,
    :mod:`pytest_hetero.backends.docker.spread`; a sandbox pinned to a device slot,
    :mod:`pytest_hetero.backends.local.spread`); None: the run's default (ini ``hetero_model_runs``)."""
    concurrency: int | Literal["free"] | None = None
    """Model runs of one resource × image at once (``per-run``; Docker, local: at most one per device slot);
    ``free``: as many as the pool holds now (the engine counts them: :func:`pytest_hetero.backends.spread.mode`);
    None: the run's default."""

    @property
    def device_resources(self) -> list[str]:
        """Requested extended resources (e.g. ``["nvidia.com/gpu"]``), in request order: every request
        but cpu, memory, ephemeral-storage, pods and hugepages-*."""
        return [k for k in self.requests if k not in BASIC_RESOURCES and not k.startswith("hugepages-")]

    @property
    def probe_vendor(self) -> str:
        """Which device probe reads this resource: its declared vendor when a probe exists for it
        (``nvidia``; ``ascend`` for ascend/huawei), else by type (gpu → nvidia, npu → ascend, cpu → cpu)."""
        vendor = self.vendor.lower()
        if vendor in ("nvidia", "ascend", "huawei"):
            return "ascend" if vendor == "huawei" else vendor
        return PROBE_OF_TYPE[self.type]


@dataclass(frozen=True)
class Image:
    """A container image (or, on the local backend, a Python environment) and the resource types it is built for."""

    name: str
    reference: str
    digest: str | None
    for_types: tuple[str, ...]
    line: int = 0


DEFAULT_REQUEST_TIMEOUT_S = 10.0
"""Seconds one request to a served model may take when ``serving.load.request_timeout`` is absent."""


@dataclass(frozen=True)
class Auth:
    """A served model's ``auth`` (:class:`~pytest_hetero.matrix.document.AuthDoc`) with its defaults: the
    environment variable holding the bearer token (``token_env``; None: the matrix names none) and whether the
    endpoint must refuse a request without it (``protected``; False when absent)."""

    token_env: str | None = None
    protected: bool = False


@dataclass(frozen=True)
class LoadSettings:
    """A served model's ``load`` (:class:`~pytest_hetero.matrix.document.LoadDoc`) with its durations parsed and
    its defaults filled: the ``concurrency`` levels (``(1,)`` when absent), ``requests`` per level (None: as many as
    the samples, or as many as fit in ``duration_s`` when that is given), samples per request (``batch``, 1),
    ``duration_s`` per level (seconds; None: the layer timeout) and ``request_timeout_s`` (seconds,
    :data:`DEFAULT_REQUEST_TIMEOUT_S` when absent)."""

    concurrency: tuple[int, ...] = (1,)
    requests: int | None = None
    batch: int = 1
    duration_s: float | None = None
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S


@dataclass(frozen=True)
class Rollback:
    """A served model's ``rollback`` (:class:`~pytest_hetero.matrix.document.RollbackDoc`): the previous ``version``,
    the ``endpoint`` serving it (None: the engine switches ``deploy`` to it instead) and the object to switch
    (``deploy``, values as text; None: the serving's own ``deploy``)."""

    version: str
    endpoint: str | None = None
    deploy: dict[str, str] | None = None


@dataclass(frozen=True)
class Serving:
    """An online inference service the model version is served by (``spec.models[].serving``).

    ``protocol``: ``oip`` (Open Inference Protocol, KServe V2 REST) or ``openai`` (OpenAI-compatible
    API), or one a plugin answers in ``pytest_hetero_make_protocol``. ``endpoint`` is a base URL that
    may hold ``${VAR}`` / ``${VAR:-default}`` (expanded at run time); ``deploy`` names the Kubernetes
    object behind it (``{"kind": "Deployment"|"Service"|"InferenceService", "name", "namespace"?}``).
    ``version`` is the version the service must report (the model's version unless given). ``auth``:
    :class:`Auth`; ``load``: :class:`LoadSettings` (durations already in seconds, defaults filled);
    ``rollback``: :class:`Rollback` or None; ``options``: protocol options;
    ``ready_timeout_s``: seconds the endpoint may take to become ready (None: the startup timeout).
    """

    protocol: str
    model_name: str
    version: str
    endpoint: str | None = None
    deploy: dict[str, str] | None = None
    task: str = ""
    auth: Auth = field(default_factory=Auth)
    load: LoadSettings = field(default_factory=LoadSettings)
    rollback: Rollback | None = None
    options: dict[str, Any] = field(default_factory=dict)
    ready_timeout_s: float | None = None


@dataclass(frozen=True)
class Model:
    """A model version: file at ``path`` with ``sha256`` (hex), run by ``entrypoint`` (argv with placeholders),
    or served by ``serving`` (then ``entrypoint`` is empty, and ``sha256`` is empty when no file is declared)."""

    name: str
    version: str
    uri: str
    path: Path
    sha256: str
    entrypoint: tuple[str, ...]
    runtime: str
    code: Path | None
    line: int = 0
    serving: Serving | None = None
    task_type: TaskType = "batch-inference"
    """What the model is validated for (:data:`TASK_TYPES`); the validation status is per pool × task type."""
    network: bool = False
    """The matrix grants the model's runs the host's network (local engine; default: loopback only)."""
    training: Training = field(default_factory=Training)
    """``spec.models[].training``: the settings of the checks its task type brings (:mod:`.training`)."""


TASKS: tuple[str, ...] = ("classification", "regression", "ranking", "generation")
"""Task kinds whose metrics the gate computes from a dataset's truth (``spec.datasets[].truth.task``)."""


@dataclass(frozen=True)
class Truth:
    """Where a dataset's ground truth is: the ``target`` column or field (class label or regression target) of
    the file at ``path`` (the dataset file itself, or a separate labels file at ``uri``), whose content must
    have ``sha256``; ``id`` the column joined with the outputs' ``ids`` (None: joined by row order, as the matrix
    states with ``join: order``); ``format`` csv, jsonl or parquet (None: from the file's suffix)."""

    task: str
    target: str
    id: str | None
    path: Path
    sha256: str
    uri: str
    format: str | None = None
    separate: bool = False
    """The truth is a labels file of its own (not the dataset file the model reads)."""
    slices: tuple[str, ...] = ()
    """Columns (fields) read beside the target so that a rule may judge a metric over the rows with one value of
    one of them (``slice: {region: eu}``)."""
    json_schema: dict[str, object] | None = field(default=None, hash=False, compare=False)
    """Generation: the JSON Schema each prediction (JSON text) must satisfy for ``json_valid``."""


@dataclass(frozen=True)
class Dataset:
    """A dataset version: file at ``path`` with ``sha256``; ``acceptance`` is its business-rules file;
    ``truth`` where its ground truth is (None: the gate can compute no metric against truth)."""

    name: str
    version: str
    uri: str
    path: Path
    sha256: str
    acceptance: Path | None
    sensitive: bool = False
    line: int = 0
    truth: Truth | None = None


@dataclass(frozen=True)
class ExcludeRule:
    """Partial combination (only the named dimensions must match) left out on purpose, with its reason."""

    match: dict[str, str]
    reason: str
    line: int = 0

    def matches(self, keys: dict[str, str]) -> bool:
        """True when every dimension the rule names equals the same dimension in ``keys``."""
        return all(keys.get(dim) == value for dim, value in self.match.items())


PROBE_KINDS: tuple[str, ...] = ("tenant-isolation", "quota", "attribution", "maintenance", "device-isolation",
                                "preemption", "reserved-inference", "network-isolation",
                               "data-isolation")
"""Governance probe kinds (``spec.governance.probes[].kind``)."""


@dataclass(frozen=True)
class Tenant:
    """A tenant the gate acts as: its ``namespace``, the ``service_account`` whose token it requests,
    its Kueue ``queue`` (LocalQueue in its namespace) and ``cluster_queue``, when it has them."""

    name: str
    namespace: str
    service_account: str
    queue: str | None = None
    cluster_queue: str | None = None
    line: int = 0

    @property
    def subject(self) -> str:
        """The user name the apiserver sees for its ServiceAccount (``system:serviceaccount:NS:NAME``)."""
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


@dataclass(frozen=True)
class Reserve:
    """A reserved-inference probe's ``reserve`` (:class:`~pytest_hetero.matrix.document.ReserveDoc`), read once at
    load with its defaults filled and its durations in seconds: the served ``model`` and the ``dataset`` its load
    sends (None: the matrix's first), the serving Deployment's ``replicas`` and ``priority_class`` (None: none), the
    floor of Ready replicas ``min_ready`` (every replica unless given), the ``burst`` (its pods' PriorityClass and
    how many pods), the latency bound ``p95_ms`` and the ``max_error_rate`` allowed in a burst window (0 unless
    given), each load window's length ``window_s`` and the burst's ``duration_s``."""

    model: str
    replicas: int
    min_ready: int
    burst: BurstDoc
    p95_ms: float
    window_s: float
    duration_s: float
    dataset: str | None = None
    priority_class: str | None = None
    max_error_rate: float = 0.0


@dataclass(frozen=True)
class GovernanceProbe:
    """An expected refusal on ``resource``'s pool (``kind`` one of :data:`PROBE_KINDS`), made as tenant
    ``acting_as`` (None: the gate's own identity). ``target``: the tenant probed (tenant-isolation);
    ``image``: what probe pods run; ``within``/``above``: quota requests (quantity strings); ``high``/``low``:
    PriorityClass names of preemption; ``reasons``:
    normalised reason codes accepted as the refusal (empty: the kind's defaults); ``timeout_s``:
    seconds each attempt may take (None: the scheduling layer's timeout)."""

    name: str
    kind: str
    resource: str
    acting_as: str | None = None
    target: str | None = None
    image: str | None = None
    within: dict[str, str] = field(default_factory=dict)
    above: dict[str, str] = field(default_factory=dict)
    high: str | None = None
    low: str | None = None
    reasons: tuple[str, ...] = ()
    timeout_s: float | None = None
    line: int = 0
    reserve: Reserve | None = None
    """reserved-inference: its ``reserve``, defaults filled (None for the other kinds, which take none)."""
    # network-isolation: the target's Services probed (empty: all), addresses outside the allowed egress
    services: tuple[str, ...] = ()
    egress: tuple[str, ...] = ()
    # data-isolation: the target tenant's PersistentVolumeClaims, Secrets and image pull Secrets probed
    claims: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    pull_secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Profile:
    """A graded depth: which layers run, and whether one representative combination per resource."""

    name: str
    layers: tuple[str, ...]
    representative: bool = False
    repeat: int = 1


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_E = TypeVar("_E", bound=_Named)


def _first_by_name(entries: tuple[_E, ...]) -> dict[str, _E]:
    """``entries`` by name, the first of a name winning."""
    found: dict[str, _E] = {}
    for entry in entries:
        found.setdefault(entry.name, entry)
    return found


class _Index(NamedTuple):
    """A matrix's entries of each dimension by name (:meth:`Matrix._by_name`)."""

    resource: dict[str, Resource]
    image: dict[str, Image]
    model: dict[str, Model]
    dataset: dict[str, Dataset]
    tenant: dict[str, Tenant]


@dataclass(frozen=True)
class Matrix:
    """A validated matrix. ``path`` is absolute, ``sha256`` is of the file bytes, ``source`` is the document as
    written (schema-valid)."""

    path: Path
    sha256: str
    name: str
    description: str
    target: TargetDoc
    owners: dict[str, str]
    """Layer → the team that owns its conclusion (the matrix's names; the owner category by default)."""
    timeouts_s: dict[Layer, float]
    output_limit: int
    resources: tuple[Resource, ...]
    images: tuple[Image, ...]
    models: tuple[Model, ...]
    datasets: tuple[Dataset, ...]
    exclude: tuple[ExcludeRule, ...]
    profiles: dict[str, Profile]
    source: MatrixDoc = field(repr=False)
    redact: tuple[tuple[str, str], ...] = ()
    valid_for_s: float = DEFAULT_VALID_FOR_S
    """``spec.validation.valid_for`` in seconds: how long each pool's validation status holds after the run."""
    validation_domain: str = DEFAULT_DOMAIN
    """``spec.validation.domain``: published label/condition keys are ``validation.<domain>/<task-type>``."""
    tenants: tuple[Tenant, ...] = ()
    probes: tuple[GovernanceProbe, ...] = ()
    task_queues: tuple[TaskQueue, ...] = ()
    """``spec.task_queues``: queue rules and job shape per task type (:mod:`.taskqueues`)."""
    read_from: Path | None = None
    """The folder its relative paths were read from when that is not the file's own (an earlier version of a
    matrix copied out of its project, read as if in the current matrix's folder); None otherwise."""

    @property
    def base(self) -> Path:
        """The folder the matrix's relative paths resolve from."""
        return self.read_from or self.path.parent
    raw: bytes = field(repr=False, compare=False, default=b"")
    """The file's bytes as read once at load (``sha256`` is theirs): the run's copy in the bundle is made
    from them, never from the file again, so an edit during the run cannot split evidence from inputs."""
    pinned: dict[Path, bytes] = field(repr=False, compare=False, default_factory=dict)
    """Each dataset's acceptance file as read once when the matrix was loaded (absent: it did not read then):
    the business items judge by these bytes and the bundle keeps a copy of them, whatever the file holds later."""

    @property
    def backend(self) -> str:
        """Backend named by ``spec.target.backend`` (default ``local``)."""
        return self.target["backend"]

    def team(self, owner: str, layer: Layer | None = None) -> str:
        """The matrix's team for ``owner``: an owner category (``infrastructure``, ``platform``,
        ``algorithm``, ``business``) becomes the team ``spec.owners`` names for a layer of that
        category (``layer`` first when it is one, e.g. a platform failure of startup goes to the startup
        team); a category no layer's team renames stays as it is, and any other name (a team a hook
        already chose) is returned unchanged."""
        if owner not in OWNER_CATEGORIES:
            return owner
        layers = [name for name, category in DEFAULT_OWNERS.items() if category == owner]
        if layer in layers:
            layers.insert(0, layers.pop(layers.index(layer)))
        # ``owners`` holds every layer (the build fills the categories of DEFAULT_OWNERS, whose keys ``layers`` are)
        return next((self.owners[name] for name in layers if self.owners[name] != owner), owner)

    @cached_property
    def _by_name(self) -> _Index:
        """Entries of each dimension by name (the first of a name wins), built on first lookup: items look
        their entries up many times, and a scan per lookup made a 10k-item run quadratic."""
        return _Index(_first_by_name(self.resources), _first_by_name(self.images), _first_by_name(self.models),
                      _first_by_name(self.datasets), _first_by_name(self.tenants))

    def _missing(self, dim: str, name: str) -> StopIteration:
        return StopIteration(f"no {dim} {name!r} in matrix {self.name}")

    def resource(self, name: str) -> Resource:
        """Return the resource called ``name``; StopIteration when absent."""
        try:
            return self._by_name.resource[name]
        except KeyError:
            raise self._missing("resource", name) from None

    def image(self, name: str) -> Image:
        """Return the image called ``name``; StopIteration when absent."""
        try:
            return self._by_name.image[name]
        except KeyError:
            raise self._missing("image", name) from None

    def model(self, name: str) -> Model:
        """Return the model called ``name``; StopIteration when absent."""
        try:
            return self._by_name.model[name]
        except KeyError:
            raise self._missing("model", name) from None

    def dataset(self, name: str) -> Dataset:
        """Return the dataset called ``name``; StopIteration when absent."""
        try:
            return self._by_name.dataset[name]
        except KeyError:
            raise self._missing("dataset", name) from None

    def tenant(self, name: str) -> Tenant:
        """Return the tenant called ``name``; StopIteration when absent."""
        try:
            return self._by_name.tenant[name]
        except KeyError:
            raise self._missing("tenant", name) from None

    def probe(self, name: str) -> GovernanceProbe:
        """Return the governance probe called ``name``; StopIteration when absent."""
        return next(p for p in self.probes if p.name == name)
