"""A schema-valid matrix document with its documented defaults filled in, once.

:func:`pytest_hetero.matrix.load.load_matrix` validates the YAML against the schema, reads it as a
:class:`~pytest_hetero.matrix.document.MatrixDoc`, and passes its ``spec`` through :func:`complete` before any
other check or the build reads it: a key with a default is then a required key of the shapes below (read with a
subscript), and the default is written here alone. A key whose absence means something (``uri``, ``entrypoint``,
``sha256``, ``serving``, ``endpoint``, ``deploy``, a resource's ``queue``, a truth's ``id`` …: presence is checked
after the schema) is filled with None: the schema admits no null, so None says the document did not write it, and
the shapes type it ``X | None``. A governance probe is filled only for the build (:func:`probe_spec`: which keys it
has is checked against its kind first). ``Matrix.source`` keeps the document as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from pytest_hetero import LAYERS
from pytest_hetero.matrix.document import (
    AuthDoc,
    DatasetDoc,
    ExcludeDoc,
    ExpectDoc,
    GovernanceDoc,
    LayerSettingsDoc,
    LoadDoc,
    ModelDoc,
    ProbeDoc,
    ProbeExpectDoc,
    RedactDoc,
    ReserveDoc,
    ResourceDoc,
    ResourceType,
    Scalar,
    ServingDoc,
    ServingTargetDoc,
    SpecDoc,
    TargetDoc,
    TaskType,
    TolerationDoc,
    TrainingDoc,
    TruthDoc,
)
from pytest_hetero.matrix.model import DEFAULT_DOMAIN, DEFAULT_OUTPUT_LIMIT, DEFAULT_TIMEOUTS_S, DEFAULT_VALID_FOR_S
from pytest_hetero.matrix.training import Training
from pytest_hetero.vocab import DEFAULT_OWNERS

if TYPE_CHECKING:  # annotations only (postponed): no run-time dependency on typing_extensions on 3.10
    from typing import NotRequired

DEFAULT_TARGET: TargetDoc = {"backend": "local"}
"""``spec.target`` when the matrix has none (schema default)."""
DEFAULT_VENDOR = "any"
"""``spec.resources[].vendor`` when absent."""
DEFAULT_FOR: tuple[str, ...] = ("gpu", "npu", "cpu")
"""``spec.images[].for`` when absent: every resource type (schema default)."""
DEFAULT_COVERAGE = "one"
"""``spec.resources[].coverage`` when absent: the node the scheduler picks."""


class ResourceSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.ResourceDoc` with ``vendor`` (``any``), ``limits``,
    ``node_selector``, ``tolerations``, ``expect`` (empty) and ``coverage`` (``one``) filled; ``queue``,
    ``priority_class``, ``model_runs`` and ``concurrency`` None when absent (the run's default)."""

    name: str
    type: ResourceType
    requests: dict[str, Scalar]
    vendor: str
    limits: dict[str, Scalar]
    node_selector: dict[str, str]
    tolerations: list[TolerationDoc]
    coverage: str | dict[str, float]
    expect: ExpectDoc
    queue: str | None
    priority_class: str | None
    model_runs: str | None
    concurrency: int | Literal["free"] | None
    description: NotRequired[str]


_ImageForSpec = TypedDict("_ImageForSpec", {"for": list[str]})  # ``for`` is a Python keyword


class ImageSpec(_ImageForSpec):
    """:class:`~pytest_hetero.matrix.document.ImageDoc` with ``for`` filled (every resource type); ``digest``
    None when absent."""

    name: str
    reference: str
    digest: str | None
    description: NotRequired[str]


class RollbackSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.RollbackDoc` with ``endpoint`` and ``deploy`` None when absent."""

    version: str
    endpoint: str | None
    deploy: ServingTargetDoc | None


class ServingSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.ServingDoc` with ``version`` (the model's), ``task`` (empty),
    ``auth``, ``load`` and ``options`` (empty) filled; ``endpoint``, ``deploy``, ``ready_timeout`` and
    ``rollback`` None when absent (the schema admits no null: None means the matrix did not write it), a
    rollback with its own (:class:`RollbackSpec`)."""

    protocol: str
    model_name: str
    version: str
    task: str
    auth: AuthDoc
    load: LoadDoc
    options: dict[str, object]
    endpoint: str | None
    deploy: ServingTargetDoc | None
    ready_timeout: Scalar | None
    rollback: RollbackSpec | None


class CommunicationSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.CommunicationDoc` with every setting's default filled (those of
    :class:`~pytest_hetero.matrix.training.Training`); ``min_busbw_gbps`` and ``at`` None when absent."""

    sizes: list[int | str]
    iterations: int
    warmup: int
    min_busbw_gbps: float | None
    at: int | str | None
    port: int
    rendezvous_timeout: float | str
    framework: str
    backend: str


class CheckpointSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.CheckpointDoc` with every setting's default filled (those of
    :class:`~pytest_hetero.matrix.training.Training`); ``volume`` None when absent (a scratch folder)."""

    volume: str | None
    steps: int
    kill_after: int
    size: int | str
    step_pause: float | str


class TrainingSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.TrainingDoc` with ``world_size``, ``communication`` and
    ``checkpoint`` filled (every setting's default: :class:`~pytest_hetero.matrix.training.Training`)."""

    world_size: int
    communication: CommunicationSpec
    checkpoint: CheckpointSpec


class ModelSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.ModelDoc` with ``runtime`` (empty), ``network`` (false),
    and ``task_type`` (``online-inference`` when served, else ``batch-inference``) filled, ``serving`` with its
    own defaults (:func:`serving_spec`); ``uri``, ``sha256``, ``entrypoint``, ``code``, ``serving`` and
    ``training`` None when absent (which of them a model has says whether it is run or served; the schema admits
    no null, so None is never written; :func:`training_spec` fills a training's defaults for the build)."""

    name: str
    version: str
    runtime: str
    network: bool
    task_type: TaskType
    uri: str | None
    sha256: str | None
    entrypoint: list[str] | None
    code: str | None
    serving: ServingSpec | None
    training: TrainingDoc | None
    description: NotRequired[str]


class LabelsSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.LabelsDoc` with ``format`` None when absent (read by suffix)."""

    uri: str
    sha256: str
    format: str | None


class TruthSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.TruthDoc` with ``slices`` (none) filled; ``id``, ``join``,
    ``labels`` and ``json_schema`` None when absent."""

    task: str
    target: str
    slices: list[str]
    id: str | None
    join: str | None
    labels: LabelsSpec | None
    json_schema: dict[str, object] | None


class DatasetSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.DatasetDoc` with ``sensitive`` (false) filled and ``truth`` with
    its own (:class:`TruthSpec`); ``acceptance``, ``truth`` and ``format`` None when absent."""

    name: str
    version: str
    uri: str
    sha256: str
    sensitive: bool
    acceptance: str | None
    truth: TruthSpec | None
    format: str | None
    description: NotRequired[str]


class ProfileSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.ProfileDoc` with ``layers`` (all), ``representative`` (false) and
    ``repeat`` (1) filled (schema defaults)."""

    layers: list[str]
    representative: bool
    repeat: int
    description: NotRequired[str]


class LayerSpec(TypedDict):
    """``spec.layers.<layer>`` with ``timeout`` (:data:`~pytest_hetero.matrix.model.DEFAULT_TIMEOUTS_S`),
    ``output_limit_bytes`` (:data:`~pytest_hetero.matrix.model.DEFAULT_OUTPUT_LIMIT`) and ``repeat`` (1)
    filled."""

    timeout: Scalar
    output_limit_bytes: int
    repeat: int


class ValidationSpec(TypedDict):
    """``spec.validation`` with ``valid_for`` (7 days) and ``domain`` (``pytest-hetero.dev``) filled."""

    valid_for: Scalar
    domain: str


class TenantSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.TenantDoc` with ``queue`` and ``cluster_queue`` None when absent."""

    name: str
    namespace: str
    service_account: str
    queue: str | None
    cluster_queue: str | None
    description: NotRequired[str]


class GovernanceSpec(TypedDict):
    """``spec.governance`` with ``tenants`` (:class:`TenantSpec`) and ``probes`` (empty) filled; each probe as
    written (which keys a probe has is checked against its kind: :func:`probe_spec` fills its defaults for the
    build)."""

    tenants: list[TenantSpec]
    probes: list[ProbeDoc]


_ProbeAsSpec = TypedDict("_ProbeAsSpec", {"as": str | None})  # ``as`` is a Python keyword


class ProbeSpec(_ProbeAsSpec):
    """:class:`~pytest_hetero.matrix.document.ProbeDoc` with ``within``, ``above``, ``expect``, and the name
    lists ``services``, ``egress``, ``claims``, ``secrets``, ``pull_secrets`` (empty) filled; ``as``,
    ``target``, ``image``, ``high``, ``low``, ``reserve`` and ``timeout`` None when absent."""

    name: str
    kind: str
    resource: str
    within: dict[str, Scalar]
    above: dict[str, Scalar]
    expect: ProbeExpectDoc
    services: list[str]
    egress: list[str]
    claims: list[str]
    secrets: list[str]
    pull_secrets: list[str]
    target: str | None
    image: str | None
    high: str | None
    low: str | None
    reserve: ReserveDoc | None
    timeout: Scalar | None
    description: NotRequired[str]


class TaskQueueSpec(TypedDict):
    """``spec.task_queues.<task type>`` with ``workers`` (1) filled; ``queue``, ``cluster_queue``,
    ``priority_class`` and ``max_wait`` None when absent."""

    workers: int
    queue: str | None
    cluster_queue: str | None
    priority_class: str | None
    max_wait: Scalar | None


class Spec(TypedDict):
    """A schema-valid ``spec`` with every documented default filled (:func:`complete`)."""

    resources: list[ResourceSpec]
    images: list[ImageSpec]
    models: list[ModelSpec]
    datasets: list[DatasetSpec]
    target: TargetDoc
    owners: dict[str, str]
    layers: dict[str, LayerSpec]
    exclude: list[ExcludeDoc]
    profiles: dict[str, ProfileSpec]
    redact: list[RedactDoc]
    validation: ValidationSpec
    governance: GovernanceSpec
    task_queues: dict[str, TaskQueueSpec]


def complete(spec: SpecDoc) -> Spec:
    """``spec`` (schema-valid) with the documented defaults filled, as new mappings (``spec`` is not changed).
    Every default of a matrix key is written here: the defaults named in this module and in
    :mod:`pytest_hetero.matrix.model`, and the owner categories of :data:`pytest_hetero.vocab.DEFAULT_OWNERS`."""
    given_layers = spec.get("layers", {})
    return {
        "resources": [_resource(r) for r in spec["resources"]],
        "images": [{"for": list(DEFAULT_FOR), "digest": None, **m} for m in spec["images"]],
        "models": [_model(m) for m in spec["models"]],
        "datasets": [_dataset(d) for d in spec["datasets"]],
        "target": spec.get("target", DEFAULT_TARGET),
        "owners": {**{str(k): str(v) for k, v in DEFAULT_OWNERS.items()}, **spec.get("owners", {})},
        "layers": {**{layer: _layer(layer, conf) for layer, conf in given_layers.items()},  # file order first
                   **{layer: _layer(layer, {}) for layer in LAYERS if layer not in given_layers}},
        "exclude": spec.get("exclude", []),
        "profiles": {name: {"layers": list(LAYERS), "representative": False, "repeat": 1, **p}
                     for name, p in spec.get("profiles", {}).items()},
        "redact": spec.get("redact", []),
        "validation": {"valid_for": DEFAULT_VALID_FOR_S, "domain": DEFAULT_DOMAIN, **spec.get("validation", {})},
        "governance": _governance(spec.get("governance", {})),
        "task_queues": {t: {"workers": 1, "queue": None, "cluster_queue": None, "priority_class": None,
                            "max_wait": None, **r} for t, r in spec.get("task_queues", {}).items()},
    }


def _resource(r: ResourceDoc) -> ResourceSpec:
    return {"vendor": DEFAULT_VENDOR, "limits": {}, "node_selector": {}, "tolerations": [], "expect": {},
            "coverage": DEFAULT_COVERAGE, "queue": None, "priority_class": None, "model_runs": None,
            "concurrency": None, **r}


_TIMEOUTS_S: dict[str, float] = {str(layer): seconds for layer, seconds in DEFAULT_TIMEOUTS_S.items()}
""":data:`~pytest_hetero.matrix.model.DEFAULT_TIMEOUTS_S` by the layer names the schema admits as keys."""


def _layer(layer: str, given: LayerSettingsDoc) -> LayerSpec:
    return {"timeout": _TIMEOUTS_S[layer], "output_limit_bytes": DEFAULT_OUTPUT_LIMIT, "repeat": 1, **given}


def _model(m: ModelDoc) -> ModelSpec:
    return {"runtime": "", "network": False, "task_type": "online-inference" if "serving" in m else "batch-inference",
            "uri": None, "sha256": None, "entrypoint": None, "code": None, "training": None, **m,
            "serving": serving_spec(m["serving"], str(m["version"])) if "serving" in m else None}


def _dataset(d: DatasetDoc) -> DatasetSpec:
    return {"sensitive": False, "acceptance": None, "format": None, **d,
            "truth": _truth(d["truth"]) if "truth" in d else None}


def _truth(t: TruthDoc) -> TruthSpec:
    labels: LabelsSpec | None = {"format": None, **t["labels"]} if "labels" in t else None
    return {"slices": [], "id": None, "join": None, "json_schema": None, **t, "labels": labels}


def _governance(g: GovernanceDoc) -> GovernanceSpec:
    return {"tenants": [{"queue": None, "cluster_queue": None, **x} for x in g.get("tenants", [])],
            "probes": g.get("probes", [])}


def serving_spec(s: ServingDoc, version: str) -> ServingSpec:
    """A model's ``serving`` with its defaults filled; ``version``: the model's version (the version the service
    must report when ``serving.version`` is absent)."""
    rollback: RollbackSpec | None = {"endpoint": None, "deploy": None, **s["rollback"]} if "rollback" in s else None
    return {"version": version, "task": "", "auth": {}, "load": {}, "options": {}, "endpoint": None, "deploy": None,
            "ready_timeout": None, **s, "rollback": rollback}


def training_spec(t: TrainingDoc) -> TrainingSpec:
    """A model's ``training`` with ``world_size``, ``communication`` and ``checkpoint`` filled: every setting's
    default is :class:`~pytest_hetero.matrix.training.Training`'s (quantities and durations as the matrix may write
    them: the build parses both)."""
    d = Training()
    return {
        "world_size": d.world_size, **t,
        "communication": {"sizes": list(d.sizes), "iterations": d.iterations, "warmup": d.warmup,
                          "min_busbw_gbps": None, "at": None, "port": d.port,
                          "rendezvous_timeout": d.rendezvous_timeout_s, "framework": d.framework,
                          "backend": d.backend, **t.get("communication", {})},
        "checkpoint": {"volume": None, "steps": d.steps, "kill_after": d.kill_after, "size": d.checkpoint_bytes,
                       "step_pause": d.step_pause_s, **t.get("checkpoint", {})},
    }


def probe_spec(p: ProbeDoc) -> ProbeSpec:
    """A governance probe with its defaults filled (after its keys were checked against its kind)."""
    return {"within": {}, "above": {}, "expect": {}, "services": [], "egress": [], "claims": [], "secrets": [],
            "pull_secrets": [], "as": None, "target": None, "image": None, "high": None, "low": None, "reserve": None,
            "timeout": None, **p}
