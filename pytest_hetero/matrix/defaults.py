"""A schema-valid matrix document with its documented defaults filled in, once.

:func:`pytest_hetero.matrix.load.load_matrix` validates the YAML against the schema, reads it as a
:class:`~pytest_hetero.matrix.document.MatrixDoc`, and passes its ``spec`` through :func:`complete` before any
other check or the build reads it: a key with a default is then a required key of the shapes below (read with a
subscript), and the default is written here alone. A key whose absence means something (``uri``, ``entrypoint``,
``sha256``, ``serving``, ``endpoint``, ``deploy``, a probe's keys, a truth's ``id`` …: presence is checked after
the schema) is left as the document wrote it, ``NotRequired``. ``Matrix.source`` keeps the document as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from pytest_hetero import LAYERS
from pytest_hetero.matrix.document import (
    AuthDoc,
    CheckpointDoc,
    CommunicationDoc,
    ExcludeDoc,
    ExpectDoc,
    LayerSettingsDoc,
    LoadDoc,
    ModelDoc,
    ProbeDoc,
    ProbeExpectDoc,
    RedactDoc,
    ReserveDoc,
    ResourceDoc,
    RollbackDoc,
    Scalar,
    ServingDoc,
    ServingTargetDoc,
    SpecDoc,
    TargetDoc,
    TenantDoc,
    TolerationDoc,
    TrainingDoc,
    TruthDoc,
)
from pytest_hetero.matrix.model import DEFAULT_DOMAIN, DEFAULT_OUTPUT_LIMIT, DEFAULT_TIMEOUTS_S, DEFAULT_VALID_FOR_S
from pytest_hetero.vocab import DEFAULT_OWNERS

if TYPE_CHECKING:  # annotations only (postponed): no run-time dependency on typing_extensions on 3.10
    from typing_extensions import NotRequired

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
    ``node_selector``, ``tolerations``, ``expect`` (empty) and ``coverage`` (``one``) filled."""

    name: str
    type: str
    requests: dict[str, Scalar]
    vendor: str
    limits: dict[str, Scalar]
    node_selector: dict[str, str]
    tolerations: list[TolerationDoc]
    coverage: str | dict[str, float]
    expect: ExpectDoc
    queue: NotRequired[str]
    priority_class: NotRequired[str]
    model_runs: NotRequired[str]
    concurrency: NotRequired[int | Literal["free"]]
    description: NotRequired[str]


_ImageForSpec = TypedDict("_ImageForSpec", {"for": list[str]})  # ``for`` is a Python keyword


class ImageSpec(_ImageForSpec):
    """:class:`~pytest_hetero.matrix.document.ImageDoc` with ``for`` filled (every resource type)."""

    name: str
    reference: str
    digest: NotRequired[str]
    description: NotRequired[str]


class ServingSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.ServingDoc` with ``version`` (the model's), ``task`` (empty),
    ``auth``, ``load`` and ``options`` (empty) filled."""

    protocol: str
    model_name: str
    version: str
    task: str
    auth: AuthDoc
    load: LoadDoc
    options: dict[str, object]
    endpoint: NotRequired[str]
    deploy: NotRequired[ServingTargetDoc]
    ready_timeout: NotRequired[Scalar]
    rollback: NotRequired[RollbackDoc]


class TrainingSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.TrainingDoc` with ``communication`` and ``checkpoint`` (empty: the
    :class:`~pytest_hetero.matrix.training.Training` defaults) filled."""

    communication: CommunicationDoc
    checkpoint: CheckpointDoc
    world_size: NotRequired[int]


class ModelSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.ModelDoc` with ``runtime`` (empty), ``network`` (false),
    and ``task_type`` (``online-inference`` when served, else ``batch-inference``) filled; ``uri``, ``sha256``,
    ``entrypoint`` and ``serving`` stay as written (which of them a model has says whether it is run or served:
    :func:`serving_spec` fills a serving's defaults, :func:`training_spec` a training's, for the build)."""

    name: str
    version: str
    runtime: str
    network: bool
    task_type: str
    uri: NotRequired[str]
    sha256: NotRequired[str]
    entrypoint: NotRequired[list[str]]
    description: NotRequired[str]
    code: NotRequired[str]
    serving: NotRequired[ServingDoc]
    training: NotRequired[TrainingDoc]


class DatasetSpec(TypedDict):
    """:class:`~pytest_hetero.matrix.document.DatasetDoc` with ``sensitive`` (false) filled."""

    name: str
    version: str
    uri: str
    sha256: str
    sensitive: bool
    acceptance: NotRequired[str]
    description: NotRequired[str]
    truth: NotRequired[TruthDoc]
    format: NotRequired[str]


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


class GovernanceSpec(TypedDict):
    """``spec.governance`` with ``tenants`` and ``probes`` (empty) filled; each probe as written (which keys a
    probe has is checked against its kind: :func:`probe_spec` fills its defaults for the build)."""

    tenants: list[TenantDoc]
    probes: list[ProbeDoc]


_ProbeAsSpec = TypedDict("_ProbeAsSpec", {"as": str}, total=False)  # ``as`` is a Python keyword


class ProbeSpec(_ProbeAsSpec):
    """:class:`~pytest_hetero.matrix.document.ProbeDoc` with ``within``, ``above``, ``expect``, and the name
    lists ``services``, ``egress``, ``claims``, ``secrets``, ``pull_secrets`` (empty) filled."""

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
    target: NotRequired[str]
    image: NotRequired[str]
    high: NotRequired[str]
    low: NotRequired[str]
    reserve: NotRequired[ReserveDoc]
    timeout: NotRequired[Scalar]
    description: NotRequired[str]


class TaskQueueSpec(TypedDict):
    """``spec.task_queues.<task type>`` with ``workers`` (1) filled."""

    workers: int
    queue: NotRequired[str]
    cluster_queue: NotRequired[str]
    priority_class: NotRequired[str]
    max_wait: NotRequired[Scalar]


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
        "images": [{"for": list(DEFAULT_FOR), **m} for m in spec["images"]],
        "models": [_model(m) for m in spec["models"]],
        "datasets": [{"sensitive": False, **d} for d in spec["datasets"]],
        "target": spec.get("target", DEFAULT_TARGET),
        "owners": {**{str(k): str(v) for k, v in DEFAULT_OWNERS.items()}, **spec.get("owners", {})},
        "layers": {**{layer: _layer(layer, conf) for layer, conf in given_layers.items()},  # file order first
                   **{layer: _layer(layer, {}) for layer in LAYERS if layer not in given_layers}},
        "exclude": spec.get("exclude", []),
        "profiles": {name: {"layers": list(LAYERS), "representative": False, "repeat": 1, **p}
                     for name, p in spec.get("profiles", {}).items()},
        "redact": spec.get("redact", []),
        "validation": {"valid_for": DEFAULT_VALID_FOR_S, "domain": DEFAULT_DOMAIN, **spec.get("validation", {})},
        "governance": {"tenants": [], "probes": [], **spec.get("governance", {})},
        "task_queues": {t: {"workers": 1, **r} for t, r in spec.get("task_queues", {}).items()},
    }


def _resource(r: ResourceDoc) -> ResourceSpec:
    return {"vendor": DEFAULT_VENDOR, "limits": {}, "node_selector": {}, "tolerations": [], "expect": {},
            "coverage": DEFAULT_COVERAGE, **r}


_TIMEOUTS_S: dict[str, float] = {str(layer): seconds for layer, seconds in DEFAULT_TIMEOUTS_S.items()}
""":data:`~pytest_hetero.matrix.model.DEFAULT_TIMEOUTS_S` by the layer names the schema admits as keys."""


def _layer(layer: str, given: LayerSettingsDoc) -> LayerSpec:
    return {"timeout": _TIMEOUTS_S[layer], "output_limit_bytes": DEFAULT_OUTPUT_LIMIT, "repeat": 1, **given}


def _model(m: ModelDoc) -> ModelSpec:
    return {"runtime": "", "network": False, "task_type": "online-inference" if "serving" in m else "batch-inference",
            **m}


def serving_spec(s: ServingDoc, version: str) -> ServingSpec:
    """A model's ``serving`` with its defaults filled; ``version``: the model's version (the version the service
    must report when ``serving.version`` is absent)."""
    return {"version": version, "task": "", "auth": {}, "load": {}, "options": {}, **s}


def training_spec(t: TrainingDoc) -> TrainingSpec:
    """A model's ``training`` with ``communication`` and ``checkpoint`` filled (empty: every setting's default,
    :class:`~pytest_hetero.matrix.training.Training`)."""
    return {"communication": {}, "checkpoint": {}, **t}


def probe_spec(p: ProbeDoc) -> ProbeSpec:
    """A governance probe with its defaults filled (after its keys were checked against its kind)."""
    return {"within": {}, "above": {}, "expect": {}, "services": [], "egress": [], "claims": [], "secrets": [],
            "pull_secrets": [], **p}
