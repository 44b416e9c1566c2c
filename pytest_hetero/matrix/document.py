"""The ValidationMatrix v1 document as the JSON Schema (``schema.json``) admits it, as TypedDicts.

:func:`pytest_hetero.matrix.load.load_matrix` checks the parsed YAML against the schema and only then reads it
as a :class:`MatrixDoc` (one ``cast``, proven by the validation): a key the schema requires is a plain key here
(read it with a subscript), one it leaves out is ``NotRequired`` (read it with ``.get`` and the default the
schema documents). Quantities and durations may be written as numbers or strings (``16Gi``, ``90s``, ``30``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:  # annotations only (postponed): no run-time dependency on typing_extensions on 3.10
    from typing import NotRequired

Scalar = str | int | float
"""A Kubernetes quantity (``16Gi``, ``500m``, ``1``) or a duration (``90s``, ``1m30s``, ``30``) as written."""
ResourceType = Literal["gpu", "npu", "cpu"]
"""``spec.resources[].type`` (schema enum)."""
TaskType = Literal["training", "fine-tune", "batch-inference", "online-inference", "evaluation", "data-processing"]
"""``spec.models[].task_type`` (schema enum)."""


class LayerSettingsDoc(TypedDict, total=False):
    """``spec.layers.<layer>``: ``timeout`` (a duration), ``output_limit_bytes``, ``repeat``."""

    timeout: Scalar
    output_limit_bytes: int
    repeat: int


class TolerationDoc(TypedDict, total=False):
    """A Kubernetes toleration as written under ``spec.resources[].tolerations``."""

    key: str
    operator: str
    value: str
    effect: str
    tolerationSeconds: int


class ExpectDoc(TypedDict, total=False):
    """``spec.resources[].expect``: what discovery must find on the resource's nodes."""

    devices: int
    product: str
    min_memory_mib: int
    driver: str
    cuda: str
    cann: str
    mig_profile: str
    min_cpus: float
    min_memory_total_mib: int
    labels: dict[str, str]


class ResourceDoc(TypedDict):
    """``spec.resources[]``: ``name``, ``type`` and ``requests`` are required."""

    name: str
    type: ResourceType
    requests: dict[str, Scalar]
    vendor: NotRequired[str]
    limits: NotRequired[dict[str, Scalar]]
    node_selector: NotRequired[dict[str, str]]
    tolerations: NotRequired[list[TolerationDoc]]
    queue: NotRequired[str]
    priority_class: NotRequired[str]
    coverage: NotRequired[str | dict[str, float]]
    model_runs: NotRequired[str]
    concurrency: NotRequired[int | Literal["free"]]
    expect: NotRequired[ExpectDoc]
    description: NotRequired[str]


_ImageFor = TypedDict("_ImageFor", {"for": list[str]}, total=False)  # ``for`` is a Python keyword


class ImageDoc(_ImageFor):
    """``spec.images[]``: ``name`` and ``reference`` are required; ``for`` the resource types (default all)."""

    name: str
    reference: str
    digest: NotRequired[str]
    description: NotRequired[str]


class ServingTargetDoc(TypedDict):
    """``serving.deploy`` / ``serving.rollback.deploy``: the object the gate deploys or patches."""

    kind: str
    name: str
    namespace: NotRequired[str]


class RollbackDoc(TypedDict):
    """``serving.rollback``: the previous version, and how to switch to it."""

    version: str
    endpoint: NotRequired[str]
    deploy: NotRequired[ServingTargetDoc]


class LoadDoc(TypedDict, total=False):
    """``serving.load``: the load levels (``concurrency``), requests per level, ``duration`` and
    ``request_timeout`` (durations), requests per ``batch``."""

    concurrency: list[int]
    requests: int
    duration: Scalar
    batch: int
    request_timeout: Scalar


class AuthDoc(TypedDict, total=False):
    """``serving.auth``: the environment variable holding the bearer token, and whether the endpoint must refuse
    a request without it."""

    token_env: str
    protected: bool


class ServingDoc(TypedDict):
    """``spec.models[].serving``: ``protocol`` and ``model_name`` are required."""

    protocol: str
    model_name: str
    endpoint: NotRequired[str]
    deploy: NotRequired[ServingTargetDoc]
    version: NotRequired[str]
    ready_timeout: NotRequired[Scalar]
    task: NotRequired[str]
    auth: NotRequired[AuthDoc]
    load: NotRequired[LoadDoc]
    rollback: NotRequired[RollbackDoc]
    options: NotRequired[dict[str, object]]


class CommunicationDoc(TypedDict, total=False):
    """``training.communication``: the collective bandwidth check."""

    sizes: list[int | str]
    iterations: int
    warmup: int
    min_busbw_gbps: float
    at: int | str
    port: int
    rendezvous_timeout: float | str
    framework: str
    backend: str


class CheckpointDoc(TypedDict, total=False):
    """``training.checkpoint``: the kill-and-resume check."""

    volume: str
    steps: int
    kill_after: int
    size: int | str
    step_pause: float | str


class TrainingDoc(TypedDict, total=False):
    """``spec.models[].training``."""

    world_size: int
    communication: CommunicationDoc
    checkpoint: CheckpointDoc


class ModelDoc(TypedDict):
    """``spec.models[]``: ``name`` and ``version`` are required; a run model has ``entrypoint``, ``uri`` and
    ``sha256`` (checked after the schema), a served one ``serving``."""

    name: str
    version: str
    uri: NotRequired[str]
    sha256: NotRequired[str]
    entrypoint: NotRequired[list[str]]
    runtime: NotRequired[str]
    description: NotRequired[str]
    code: NotRequired[str]
    serving: NotRequired[ServingDoc]
    network: NotRequired[bool]
    task_type: NotRequired[TaskType]
    training: NotRequired[TrainingDoc]


class LabelsDoc(TypedDict):
    """``truth.labels``: a separate labels file."""

    uri: str
    sha256: str
    format: NotRequired[str]


class TruthDoc(TypedDict):
    """``spec.datasets[].truth``: ``task`` and ``target`` are required."""

    task: str
    target: str
    id: NotRequired[str]
    join: NotRequired[str]
    labels: NotRequired[LabelsDoc]
    slices: NotRequired[list[str]]
    json_schema: NotRequired[dict[str, object]]


class DatasetDoc(TypedDict):
    """``spec.datasets[]``: ``name``, ``version``, ``uri`` and ``sha256`` are required."""

    name: str
    version: str
    uri: str
    sha256: str
    acceptance: NotRequired[str]
    sensitive: NotRequired[bool]
    description: NotRequired[str]
    truth: NotRequired[TruthDoc]
    format: NotRequired[str]


class ExcludeDoc(TypedDict):
    """``spec.exclude[]``: a ``reason`` and the dimensions it matches."""

    reason: str
    resource: NotRequired[str]
    image: NotRequired[str]
    model: NotRequired[str]
    dataset: NotRequired[str]


class ProfileDoc(TypedDict, total=False):
    """``spec.profiles.<name>``."""

    layers: list[str]
    representative: bool
    repeat: int
    description: str


class RedactDoc(TypedDict):
    """``spec.redact[]``: shown as ``[REDACTED:<kind>]``; ``pattern`` a regular expression."""

    kind: str
    pattern: str


class ValidationDoc(TypedDict, total=False):
    """``spec.validation``: how long the published status holds (a duration) and its label domain."""

    valid_for: Scalar
    domain: str


class TenantDoc(TypedDict):
    """``spec.governance.tenants[]``."""

    name: str
    namespace: str
    service_account: str
    queue: NotRequired[str]
    cluster_queue: NotRequired[str]
    description: NotRequired[str]


class BurstDoc(TypedDict):
    """``reserve.burst``: the competing pods."""

    priority_class: str
    pods: int


class ReserveDoc(TypedDict):
    """A reserved-inference probe's ``reserve``; ``window`` and ``duration`` are durations."""

    model: str
    replicas: int
    burst: BurstDoc
    p95_ms: float
    dataset: NotRequired[str]
    priority_class: NotRequired[str]
    min_ready: NotRequired[int]
    max_error_rate: NotRequired[float]
    window: NotRequired[Scalar]
    duration: NotRequired[Scalar]


class ProbeExpectDoc(TypedDict, total=False):
    """A governance probe's ``expect``."""

    reasons: list[str]


_ProbeAs = TypedDict("_ProbeAs", {"as": str}, total=False)  # ``as`` is a Python keyword


class ProbeDoc(_ProbeAs):
    """``spec.governance.probes[]``: ``name``, ``kind`` and ``resource`` are required; which other keys a kind
    takes is checked after the schema (:data:`pytest_hetero.matrix.governance.KIND_KEYS`)."""

    name: str
    kind: str
    resource: str
    target: NotRequired[str]
    image: NotRequired[str]
    within: NotRequired[dict[str, Scalar]]
    above: NotRequired[dict[str, Scalar]]
    high: NotRequired[str]
    low: NotRequired[str]
    reserve: NotRequired[ReserveDoc]
    services: NotRequired[list[str]]
    egress: NotRequired[list[str]]
    claims: NotRequired[list[str]]
    secrets: NotRequired[list[str]]
    pull_secrets: NotRequired[list[str]]
    expect: NotRequired[ProbeExpectDoc]
    timeout: NotRequired[Scalar]
    description: NotRequired[str]


class GovernanceDoc(TypedDict, total=False):
    """``spec.governance``."""

    tenants: list[TenantDoc]
    probes: list[ProbeDoc]


class TaskQueueDoc(TypedDict, total=False):
    """``spec.task_queues.<task type>`` (:mod:`pytest_hetero.matrix.taskqueues`)."""

    queue: str
    cluster_queue: str
    priority_class: str
    max_wait: Scalar
    workers: int


class TargetDoc(TypedDict):
    """``spec.target``: the backend (``local``, ``docker``, ``kubernetes``) and that backend's settings."""

    backend: str
    namespace: NotRequired[str]
    context: NotRequired[str]
    kubeconfig: NotRequired[str]
    docker_host: NotRequired[str]
    tls: NotRequired[dict[str, object]]
    pull_policy: NotRequired[str]
    engine_wait_s: NotRequired[float]
    submit_as: NotRequired[str]
    node_problem_conditions: NotRequired[list[str]]
    cleanup_wait_s: NotRequired[float]
    image_owner: NotRequired[str]
    network: NotRequired[str]
    python: NotRequired[str]
    device_ids: NotRequired[dict[str, list[int | str]]]
    cpuset: NotRequired[dict[str, str]]
    unschedulable_grace_s: NotRequired[float]


class SpecDoc(TypedDict):
    """``spec``: ``resources``, ``images``, ``models`` and ``datasets`` are required. ``owners`` maps a layer to
    its team."""

    resources: list[ResourceDoc]
    images: list[ImageDoc]
    models: list[ModelDoc]
    datasets: list[DatasetDoc]
    target: NotRequired[TargetDoc]
    owners: NotRequired[dict[str, str]]
    layers: NotRequired[dict[str, LayerSettingsDoc]]
    exclude: NotRequired[list[ExcludeDoc]]
    profiles: NotRequired[dict[str, ProfileDoc]]
    redact: NotRequired[list[RedactDoc]]
    validation: NotRequired[ValidationDoc]
    governance: NotRequired[GovernanceDoc]
    task_queues: NotRequired[dict[str, TaskQueueDoc]]


class MetadataDoc(TypedDict):
    """``metadata``: the matrix's ``name``."""

    name: str
    description: NotRequired[str]
    labels: NotRequired[dict[str, str]]


class MatrixDoc(TypedDict):
    """A schema-valid ValidationMatrix v1 document."""

    apiVersion: str
    kind: str
    metadata: MetadataDoc
    spec: SpecDoc
