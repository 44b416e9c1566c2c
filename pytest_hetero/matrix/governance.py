"""Governance expectations of a matrix (``spec.governance``): tenants and the probes whose pass is a refusal.

A probe names a ``kind`` (:data:`~pytest_hetero.matrix.model.PROBE_KINDS`), the ``resource`` whose pool it
probes, the tenant it acts ``as`` and the keys its kind needs. Each kind takes only its own keys: a key
another kind uses is an error here, never silently ignored. :data:`DEFAULT_REASONS` are the normalised
reason codes (:mod:`pytest_hetero.pending`) that count as the expected refusal when ``expect.reasons`` is
absent.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pytest_hetero.durations import parse_duration
from pytest_hetero.errors import MatrixError
from pytest_hetero.matrix.document import BurstDoc, ProbeDoc, ReserveDoc, Scalar

if TYPE_CHECKING:
    from pytest_hetero.matrix.defaults import Spec

KIND_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "tenant-isolation": (("as", "target"), ("image", "expect")),
    "quota": (("above",), ("as", "within", "image", "expect")),
    "attribution": ((), ("as", "image")),
    "maintenance": ((), ("as", "image", "expect")),
    "device-isolation": ((), ("as", "image")),
    "preemption": (("high", "low"), ("as", "image", "expect")),
    "reserved-inference": (("reserve",), ("as", "image")),
    "network-isolation": (("as",), ("target", "services", "egress", "image", "expect")),
    "data-isolation": (("as", "target"), ("claims", "secrets", "pull_secrets", "image", "expect")),
}
"""Kind → (keys it requires, keys it may take) beyond name, kind, resource, timeout and description."""
COMMON_KEYS = frozenset({"name", "kind", "resource", "timeout", "description"})

DEFAULT_REASONS: dict[str, tuple[str, ...]] = {
    "tenant-isolation": ("forbidden_rbac", "queue_namespace_mismatch", "queue_not_found"),
    "quota": ("quota_exceeded", "queue_quota_insufficient", "queue_request_exceeds_max"),
    "maintenance": ("node_unschedulable", "untolerated_taint", "node_not_ready"),
    "preemption": ("insufficient_resource", "preemption_not_helpful", "preemption_no_victims"),
    "network-isolation": ("network_timeout", "network_refused", "network_unreachable"),
    "data-isolation": ("forbidden_rbac", "volume_binding", "pull_secret_unavailable"),
}
"""Kind → reason codes accepted as its refusal by default (attribution and device-isolation refuse
nothing: their pass is an account that adds up, and devices that are absent)."""
MIN_WINDOW_S = 0.5
"""Shortest ``reserve.window``: the reserved-inference watcher lists the serving pods every 0.5 s."""
RESERVED_GROUP = "governance"
"""The collector level of the probes (``<resource>::governance::<probe>::scheduling``): no image may
be called so."""

ErrorAt = Callable[[tuple[Any, ...], str, str], MatrixError]


class Names(TypedDict):
    """The names of each dimension of a matrix, in file order (:func:`pytest_hetero.matrix.load.load_matrix`'s
    reference check builds it)."""

    resource: list[str]
    image: list[str]
    model: list[str]
    dataset: list[str]


class ProbeNames(Names):
    """:class:`Names` with the tenants and the served models (what a governance probe may name)."""

    tenant: list[str]
    served: list[str]


DEFAULT_WINDOW = "2s"
"""``reserve.window`` when absent (schema default)."""
DEFAULT_DURATION = "20s"
"""``reserve.duration`` when absent (schema default)."""


class ReserveSpec(TypedDict):
    """A reserved-inference probe's ``reserve`` (:class:`~pytest_hetero.matrix.document.ReserveDoc`) with
    ``window`` (:data:`DEFAULT_WINDOW`), ``duration`` (:data:`DEFAULT_DURATION`) and ``min_ready`` (the replicas)
    filled, ``max_error_rate`` (0: no failed request) filled, ``dataset`` and ``priority_class`` None when absent
    (the matrix's first dataset; no PriorityClass for the serving Deployment), as
    :mod:`pytest_hetero.layers.reserved` reads them."""

    model: str
    replicas: int
    burst: BurstDoc
    p95_ms: float
    window: Scalar
    duration: Scalar
    min_ready: int
    dataset: str | None
    priority_class: str | None
    max_error_rate: float


def reserve_spec(reserve: ReserveDoc) -> ReserveSpec:
    """``reserve`` with its defaults filled (a new mapping)."""
    return {"window": DEFAULT_WINDOW, "duration": DEFAULT_DURATION, "min_ready": reserve["replicas"],
            "dataset": None, "priority_class": None, "max_error_rate": 0.0, **reserve}


def governance_problems(spec: Spec, names: Names, error: ErrorAt) -> list[MatrixError]:
    """Problems of ``spec.governance`` the schema cannot see: duplicate tenant or probe names, names of
    resources, images and tenants that do not exist, keys the probe's kind does not take, a tenant
    probed by itself, and an image named ``governance`` (the probes' collector level).

    ``names`` maps each dimension (resource, image…) to its names; ``error(path, message, hint)``
    builds a MatrixError at a YAML path. Returns every problem found (empty when none).
    """
    problems: list[MatrixError] = []
    if RESERVED_GROUP in names["image"]:
        at = names["image"].index(RESERVED_GROUP)
        problems.append(error(("spec", "images", at, "name"), f"image name '{RESERVED_GROUP}' is reserved",
                              "governance probes are collected under <resource>::governance::; rename the image"))
    gov = spec["governance"]
    tenants: list[str] = []
    for i, tenant in enumerate(gov["tenants"]):
        if tenant["name"] in tenants:
            problems.append(error(("spec", "governance", "tenants", i, "name"),
                                  f"duplicate tenant name '{tenant['name']}'", "give each tenant a unique name"))
        tenants.append(tenant["name"])
    seen: list[str] = []
    for j, probe in enumerate(gov["probes"]):
        where: tuple[Any, ...] = ("spec", "governance", "probes", j)
        if probe["name"] in seen:
            problems.append(error((*where, "name"), f"duplicate probe name '{probe['name']}'",
                                  "give each probe a unique name"))
        seen.append(probe["name"])
        served = [m["name"] for m in spec["models"] if m["serving"] is not None]
        problems += _probe_problems(probe, where, {**names, "tenant": tenants, "served": served}, error)
    return problems


def _unknown(kind: str, value: str, known: list[str]) -> str:
    close = difflib.get_close_matches(value, known, n=1)
    return f"did you mean '{close[0]}'?" if close else f"known {kind}s: {', '.join(known) or 'none declared'}"


def _probe_problems(probe: ProbeDoc, at: tuple[Any, ...], names: ProbeNames,
                    error: ErrorAt) -> list[MatrixError]:
    kind = probe["kind"]
    required, optional = KIND_KEYS[kind]
    problems = [error((*at, key), f"a {kind} probe does not take '{key}'",
                      f"{kind} takes {', '.join(sorted((*required, *optional))) or 'no key'} besides name, kind "
                      "and resource")
                for key in probe if key not in COMMON_KEYS and key not in required and key not in optional]
    problems += [error(at, f"a {kind} probe needs '{key}'", _need(kind, key)) for key in required
                 if key not in probe]
    named: tuple[tuple[Literal["resource", "image", "as", "target"], Literal["resource", "image", "tenant"]], ...] = (
        ("resource", "resource"), ("image", "image"), ("as", "tenant"), ("target", "tenant"))
    for key, dim in named:
        if key in probe and probe[key] not in names[dim]:
            problems.append(error((*at, key), f"probe '{probe['name']}' names unknown {dim} '{probe[key]}'",
                                  _unknown(dim, probe[key], names[dim])))
    if "reserve" in probe and kind == "reserved-inference":
        problems += _reserve_problems(probe["reserve"], (*at, "reserve"), names, error)
    problems += _boundary_problems(probe, at, error)
    if "as" in probe and probe.get("target") == probe["as"]:
        problems.append(error((*at, "target"), f"probe '{probe['name']}' probes tenant '{probe['as']}' as itself",
                              "tenant isolation is one tenant refused what belongs to another: name two tenants"))
    return problems


def _reserve_problems(given: ReserveDoc, at: tuple[Any, ...], names: ProbeNames,
                      error: ErrorAt) -> list[MatrixError]:
    """A reserved-inference probe's ``reserve``: its model must exist and be served, its dataset exist, its
    floor (``min_ready``) be at most its replicas, its ``window`` be longer than no time and its ``duration`` at
    least one window (else every window of the burst is empty, judged as failed requests, or none runs)."""
    problems = []
    reserve = reserve_spec(given)
    served = names["served"]
    if reserve["model"] not in names["model"]:
        problems.append(error((*at, "model"), f"reserve.model names unknown model '{reserve['model']}'",
                              _unknown("model", reserve["model"], names["model"])))
    elif reserve["model"] not in served:
        problems.append(error((*at, "model"), f"model '{reserve['model']}' has no serving block",
                              "the probe deploys a served model: name a model with serving (protocol, model_name)"))
    if reserve["dataset"] is not None and reserve["dataset"] not in names["dataset"]:
        problems.append(error((*at, "dataset"), f"reserve.dataset names unknown dataset '{reserve['dataset']}'",
                              _unknown("dataset", reserve["dataset"], names["dataset"])))
    if reserve["min_ready"] > reserve["replicas"]:
        problems.append(error((*at, "min_ready"), f"min_ready {reserve['min_ready']} is above replicas "
                              f"{reserve['replicas']}", "the floor is at most the Deployment's replicas"))
    def seconds(key: Literal["window", "duration"], example: str) -> float | None:
        try:
            return parse_duration(reserve[key])
        except ValueError as exc:
            problems.append(error((*at, key), f"reserve.{key}: {exc}", f"e.g. {key}: {example}"))
            return None

    window_s, duration_s = seconds("window", DEFAULT_WINDOW), seconds("duration", DEFAULT_DURATION)
    if window_s is not None and window_s < MIN_WINDOW_S:
        problems.append(error((*at, "window"), f"reserve.window {reserve['window']} is shorter than "
                              f"{MIN_WINDOW_S:g} s: a window sends almost no request and falls between two listings of "
                              "the serving pods (its floor would not be observed)", "e.g. window: 2s"))
    if window_s is not None and duration_s is not None and duration_s < window_s:
        problems.append(error((*at, "duration"), f"reserve.duration {reserve['duration']} is shorter than "
                              f"one window ({reserve['window']}): no load window would run during the burst",
                              "watch the burst for several windows, e.g. duration: 20s with window: 2s"))
    return problems
def _boundary_problems(probe: ProbeDoc, at: tuple[Any, ...], error: ErrorAt) -> list[MatrixError]:
    """A network probe with nothing to reach (no target, no egress) or Services without a target; a data
    probe naming no claim, Secret or pull Secret."""
    kind = probe["kind"]
    if kind == "network-isolation" and "target" not in probe and "egress" not in probe:
        return [error(at, f"network-isolation probe '{probe['name']}' has nothing to reach",
                      "add target: (a tenant whose Services must be unreachable) or egress: [host:port, ...]")]
    if kind == "network-isolation" and "services" in probe and "target" not in probe:
        return [error((*at, "services"), f"probe '{probe['name']}' names services without a target",
                      "add target: the tenant whose namespace holds them")]
    if kind == "data-isolation" and not any(k in probe for k in ("claims", "secrets", "pull_secrets")):
        return [error(at, f"data-isolation probe '{probe['name']}' names no claim, Secret or pull Secret",
                      "add claims:, secrets: or pull_secrets: with names of the target tenant's objects")]
    return []


def _need(kind: str, key: str) -> str:
    return {
        "as": "as: the tenant whose ServiceAccount makes the attempt (spec.governance.tenants[].name)",
        "target": "target: the tenant whose namespace and queue the attempt must not reach",
        "above": "above: a request beyond the tenant's quota, e.g. {nvidia.com/gpu: 3}",
        "high": "high: the PriorityClass of the workload that must preempt",
        "low": "low: the PriorityClass of the workload that must be preempted (and of the one that waits)",
        "reserve": "reserve: {model, replicas, burst: {priority_class, pods}, p95_ms} (docs/governance.md)",
    }.get(key, f"add {key}")
