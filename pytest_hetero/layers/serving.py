"""Layer checks of a served model: startup (ready, identity, auth), execute (load, outputs), rollback.

The service is reached through a protocol client (:mod:`pytest_hetero.serving`: OIP, OpenAI-compatible,
or one a plugin answers in ``pytest_hetero_make_protocol``); what it answers is judged here, for the
startup and model layers.

Rollback: switch to the previous version, which must report itself and answer the data set's golden
samples again; both sides are recorded as evidence. The switch is a second endpoint
(``serving.rollback.endpoint``), or the engine rolls the deployed object to it
(:meth:`~pytest_hetero.backends.protocol.Backend.serving_switch`) and back to the current version
afterwards (also when the rollback check fails).

Failure categories and owners: ``endpoint_unreachable`` (no HTTP answer: infrastructure),
``endpoint_not_ready`` (answers, never ready: platform), ``wrong_model`` / ``wrong_model_version``
(algorithm), ``auth_token_missing`` / ``auth_refused`` / ``auth_not_enforced`` (platform),
``service_errors`` (no request succeeded: platform), ``bad_responses`` (algorithm),
``rollback_*`` (see :func:`rollback`). Latency, throughput and error-rate
bounds are business rules (:mod:`pytest_hetero.matrix.acceptance`), judged on the outputs written here.

``serving.deploy`` (a Deployment/Service/InferenceService): the engine is asked through the optional
serving verbs of :class:`~pytest_hetero.backends.protocol.Backend` (``serving_endpoint``,
``serving_pods``, ``serving_switch``) with a :class:`~pytest_hetero.backends.protocol.ServingRequest`,
the same way for every engine; an engine without them leaves the pods unrecorded (said in evidence),
and a ``deploy`` without an ``endpoint`` is not applicable there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import urlsplit

import httpx

from pytest_hetero.backends.protocol import EngineFault, ServingRequest, Unsupported
from pytest_hetero.errors import CaseError
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed, keep_outputs
from pytest_hetero.layers.usage import record as record_usage
from pytest_hetero.matrix.acceptance import AcceptanceRule, evaluate, load_rules
from pytest_hetero.matrix.model import DEFAULT_REQUEST_TIMEOUT_S, Model, Serving
from pytest_hetero.probes.usage import Sampler, sampling, unavailable
from pytest_hetero.serving.load import TRANSPORT_ERROR, LevelResult, LevelSummary, run_levels, summarise
from pytest_hetero.serving.protocol import (
    Answer,
    OptionsInvalid,
    PreparedRequest,
    ServingProtocol,
    expand_endpoint,
    read_samples,
)

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import RuleResult

REQUEST_TIMEOUT_S = DEFAULT_REQUEST_TIMEOUT_S
"""Seconds one request to the service may take (readiness, identity, auth, rollback checks; the load's own is
``serving.load.request_timeout``)."""
REFUSED = (401, 403)


def protocol_for(ctx: LayerContext, serving: Serving) -> ServingProtocol:
    """The protocol client from the run's ``pytest_hetero_make_protocol`` hook (``ctx.hook``; the
    built-ins without one); LayerBroken when none answers, or (``configuration``) when the protocol refuses an
    option of ``serving.options`` (:class:`~pytest_hetero.serving.protocol.OptionsInvalid`)."""
    proto: ServingProtocol | None
    try:
        if ctx.hook is not None:
            proto = ctx.hook.pytest_hetero_make_protocol(name=serving.protocol, serving=serving)
        else:
            from pytest_hetero.hooks.builtin import pytest_hetero_make_protocol

            proto = pytest_hetero_make_protocol(name=serving.protocol, serving=serving)
    except OptionsInvalid as exc:
        raise LayerBroken(str(exc), "configuration") from None
    if proto is None:
        raise LayerBroken(f"no plugin provides serving protocol '{serving.protocol}' "
                          "(built-ins: oip, openai)", "protocol_unknown")
    return proto


def serving_request(ctx: LayerContext, serving: Serving, proto: ServingProtocol) -> ServingRequest:
    """What the engine is asked to serve for ``serving`` (its ``deploy``; the bearer token from
    ``auth.token_env`` when set; ready within ``ready_timeout``, default the layer timeout)."""
    var = serving.auth.token_env
    return ServingRequest(deploy=dict(serving.deploy or {}), model_name=serving.model_name,
                          version=serving.version, ready_path=proto.ready_path,
                          token=os.environ.get(var) or None if var else None,
                          ready_timeout_s=serving.ready_timeout_s or ctx.timeout_s)


def endpoint_of(ctx: LayerContext, serving: Serving, proto: ServingProtocol) -> str:
    """Expanded ``serving.endpoint``, or the engine's answer for ``serving.deploy``
    (:meth:`~pytest_hetero.backends.protocol.Backend.serving_endpoint`: its Unsupported reads as not
    applicable, its ActionFailed as the layer's failure). LayerBroken for an unset variable."""
    if serving.endpoint is not None:
        try:
            return expand_endpoint(serving.endpoint)
        except KeyError as exc:
            raise LayerBroken(f"endpoint {serving.endpoint!r} uses ${{{exc.args[0]}}}, which is unset",
                              "configuration") from None
    return ctx.backend.serving_endpoint(ctx, serving_request(ctx, serving, proto))


def auth_headers(serving: Serving) -> dict[str, str]:
    """``Authorization: Bearer <$token_env>`` when the matrix names a token variable; LayerFailed if unset."""
    var = serving.auth.token_env
    if not var:
        return {}
    token = os.environ.get(var)
    if not token:
        raise LayerFailed(f"${var} is unset or empty; the bearer token for {serving.model_name} "
                          "comes from it", "auth_token_missing")
    return {"Authorization": f"Bearer {token}"}


def wait_ready(ctx: LayerContext, proto: ServingProtocol, base: str, headers: dict[str, str],
               timeout_s: float, what: str = "serving.ready") -> None:
    """Poll ``proto.ready_path`` every 0.2 s until 200 or ``timeout_s`` seconds; record the outcome."""
    start = time.perf_counter()
    attempts, status, error = 0, None, None
    with httpx.Client(headers=headers, timeout=min(REQUEST_TIMEOUT_S, max(timeout_s, 0.5))) as client:
        while True:
            attempts += 1
            try:
                status, error = client.get(base + proto.ready_path).status_code, None
            except httpx.HTTPError as exc:
                status, error = None, f"{type(exc).__name__}: {exc}"
            waited = time.perf_counter() - start
            if status == 200 or status in REFUSED or waited >= timeout_s:
                break
            time.sleep(0.2)
    ctx.record(what, endpoint=base, path=proto.ready_path, status=status, error=error, attempts=attempts,
               waited_s=round(waited, 3), timeout_s=timeout_s, authenticated=bool(headers))
    if status in REFUSED:
        raise LayerFailed(f"{base}{proto.ready_path} refused the request ({status})"
                          + (" with the bearer token" if headers else " (no token configured)"),
                          "auth_refused")
    if status is None:
        raise LayerFailed(f"{base} unreachable for {timeout_s:g} s: {error}", "endpoint_unreachable")
    if status != 200:
        raise LayerFailed(f"{base}{proto.ready_path} not ready within {timeout_s:g} s (last status {status})",
                          "endpoint_not_ready")


def verify_identity(ctx: LayerContext, proto: ServingProtocol, base: str, headers: dict[str, str],
                    version: str, what: str = "serving.identity") -> str | None:
    """Model metadata and one probe inference must report ``version``; return the reported version.

    LayerFailed ``wrong_model`` / ``wrong_model_version`` (algorithm) otherwise.
    """
    serving = proto.serving
    with httpx.Client(headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
        ident = proto.identity(lambda path: client.get(base + path))
        probe_status, probe_version, probe_error = None, None, None
        try:
            samples = read_samples(ctx.matrix.datasets[0].path)[:1]
            request = proto.prepare(samples, 1)[0]
            response = client.post(base + request.path, content=request.body,
                                   headers={"Content-Type": "application/json"})
            probe_status = response.status_code
            if 200 <= probe_status < 300:
                probe_version = proto.parse(request, response.content).version
        except (OSError, ValueError, IndexError, httpx.HTTPError) as exc:
            probe_error = f"{type(exc).__name__}: {exc}"
    ctx.record(what, endpoint=base, protocol=proto.name, model_name=serving.model_name,
               declared_version=version, found=ident.found, reported_name=ident.name,
               reported_versions=ident.versions, version_served=ident.version_served,
               probe_status=probe_status, probe_version=probe_version, probe_error=probe_error,
               metadata=ident.raw)
    if not ident.found:
        raise LayerFailed(f"{base} does not serve model '{serving.model_name}'", "wrong_model")
    wrong = (ident.versions and version not in ident.versions) or ident.version_served is False \
        or (probe_version is not None and probe_version != version)
    if wrong:
        seen = probe_version or ", ".join(ident.versions) or "another version"
        raise LayerFailed(f"{serving.model_name} at {base} serves {seen}, not the declared {version}",
                          "wrong_model_version")
    return probe_version


def verify_auth(ctx: LayerContext, proto: ServingProtocol, base: str) -> None:
    """When ``auth.protected``: an unauthenticated metadata request must be refused (401/403)."""
    serving = proto.serving
    token_env = serving.auth.token_env  # the matrix may name none
    if not serving.auth.protected:
        ctx.record("serving.auth", protected=False, token_env=token_env)
        return
    path = proto.metadata_path()
    try:
        status: int | None = httpx.get(base + path, timeout=REQUEST_TIMEOUT_S).status_code
    except httpx.HTTPError:
        status = None
    ctx.record("serving.auth", protected=True, token_env=token_env, path=path,
               unauthenticated_status=status, refused=status in REFUSED)
    if status not in REFUSED:
        raise LayerFailed(f"unauthenticated GET {path} answered {status}, but the matrix says "
                          f"{serving.model_name} is protected (expected 401 or 403)", "auth_not_enforced")


def record_deploy(ctx: LayerContext, serving: Serving, proto: ServingProtocol, model: Model | None = None) -> None:
    """Record the workloads behind ``serving.deploy`` (resources, node, image digest) when the engine
    can list them (:meth:`~pytest_hetero.backends.protocol.Backend.serving_pods`), else why not; a pod the
    engine deployed for this run is also a ``usage.workload`` record (:mod:`pytest_hetero.layers.usage`),
    attributed to the served ``model``."""
    if serving.deploy is None:
        return
    pods = ctx.backend.serving_pods(ctx, serving_request(ctx, serving, proto))
    if pods is None:
        ctx.record("serving.deploy", deploy=serving.deploy, recorded=False,
                   reason=f"the {ctx.backend.name} backend does not implement serving_pods")
        return
    held = [pod.pop("usage", None) for pod in pods]
    ctx.record("serving.deploy", deploy=serving.deploy, recorded=True, pods=pods)
    for facts in held:
        if isinstance(facts, dict) and facts:
            record_usage(ctx, facts, model=model)


def startup(ctx: LayerContext) -> None:
    """For every served model of the matrix: ready within ``ready_timeout`` (default: the layer timeout),
    auth, identity, deploy."""
    for model in ctx.matrix.models:
        serving = model.serving
        if serving is None:
            continue
        proto = protocol_for(ctx, serving)
        headers = auth_headers(serving)
        base = endpoint_of(ctx, serving, proto)
        wait_ready(ctx, proto, base, headers, serving.ready_timeout_s or ctx.timeout_s)
        verify_identity(ctx, proto, base, headers, serving.version)
        verify_auth(ctx, proto, base)
        record_deploy(ctx, serving, proto, model)


def parse_level(proto: ServingProtocol, level: LevelResult, requests: list[PreparedRequest],
                answers: dict[int, Answer], versions: dict[str, int], malformed: list[str]) -> None:
    """Parse a level's 2xx responses: first answer per request into ``answers``, reported version counts
    into ``versions`` ("None" when the protocol reports none), malformed-response texts into ``malformed``."""
    for r in level.responses:
        if not 200 <= r.status < 300:
            continue
        try:
            answer = proto.parse(requests[r.request], r.body)
        except ValueError as exc:
            malformed.append(str(exc))
            continue
        versions[str(answer.version)] = versions.get(str(answer.version), 0) + 1
        answers.setdefault(r.request, answer)


LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


@contextlib.contextmanager
def load_sampling(ctx: LayerContext, base: str) -> Iterator[Sampler | None]:
    """Sample this host's device of the resource type while a service on this host is loaded (None for a
    service elsewhere, whose device cannot be read from here); see :mod:`pytest_hetero.probes.usage`."""
    if (urlsplit(base).hostname or "") not in LOCAL_HOSTS:
        yield None
        return
    with sampling(ctx.resource.type) as sampler:
        yield sampler


def execute(ctx: LayerContext) -> None:
    """Send the dataset's inputs at each concurrency level; write outputs.json and raw responses.

    outputs.json: ``{"protocol", "endpoint", "model_name", "version", "n", "indices", "labels",
    "predictions" (None for a sample never answered), <extra fields>, "latency_ms" ([ms], all
    levels), "service": {"levels": [summary per level, see load.summarise]}}``.
    """
    model, dataset = ctx.model, ctx.dataset
    serving = model.serving
    assert serving is not None
    proto = protocol_for(ctx, serving)
    headers = {"Content-Type": "application/json", **auth_headers(serving)}
    base = endpoint_of(ctx, serving, proto)
    ctx.record("model.identity", model=model.name, version=serving.version, serving=serving.protocol,
               endpoint=base, model_name=serving.model_name, dataset=dataset.name,
               dataset_version=dataset.version, dataset_sha256=dataset.sha256)
    try:
        samples = read_samples(dataset.path)
    except (OSError, ValueError) as exc:
        raise LayerFailed(f"dataset {dataset.name}: {exc}", "bad_dataset") from None
    load = serving.load
    levels = list(load.concurrency)
    requests = proto.prepare(samples, load.batch)
    count = load.requests if load.requests is not None else None if load.duration_s is not None else len(requests)
    deadline = min(load.duration_s if load.duration_s is not None else ctx.timeout_s, ctx.timeout_s / len(levels))
    progress: Callable[[str], None] | None = None
    if ctx.progress is not None:
        show, label = ctx.progress, f"{serving.model_name}@{serving.version}"

        def prefixed(line: str) -> None:
            show(f"{label} {line}")

        progress = prefixed
    with load_sampling(ctx, base) as sampler:
        results = run_levels(base, requests, levels, count, deadline, headers,
                             load.request_timeout_s, progress)
    ctx.record("serving.usage", endpoint=base, **(sampler.result() if sampler else unavailable(
        f"the service at {base} does not run on this host: its device is not sampled from here")))
    answers: dict[int, Answer] = {}
    versions: dict[str, int] = {}
    malformed: list[str] = []
    summaries = []
    for level in results:
        parse_level(proto, level, requests, answers, versions, malformed)
        summary = summarise(level, requests)
        summaries.append(summary)
        lines = "".join(json.dumps({"request": r.request,
                                    "samples": [samples[i].index for i in requests[r.request].samples],
                                    "status": r.status, "latency_ms": round(r.latency_s * 1000, 3),
                                    "ttfb_ms": None if r.ttfb_s is None else round(r.ttfb_s * 1000, 3),
                                    "error": r.error, "body": r.body.decode("utf-8", "replace")}) + "\n"
                        for r in level.responses)
        art = ctx.artifact(f"responses-c{level.concurrency}.jsonl", lines, "application/x-ndjson")
        ctx.record("serving.load", **{k: v for k, v in summary.items() if k != "latencies_ms"},
                   responses_artifact=art.path)
    predictions: list[Any] = [None] * len(samples)
    extra: dict[str, list[Any]] = {}
    for k, answer in answers.items():
        for j, pos in enumerate(requests[k].samples):
            predictions[pos] = answer.predictions[j]
            for name, values in answer.extra.items():
                extra.setdefault(name, [None] * len(samples))[pos] = values[j]
    outputs = {"protocol": proto.name, "endpoint": base, "model_name": serving.model_name,
               "version": serving.version, "n": len(samples),
               "indices": [s.index for s in samples], "ids": [s.index for s in samples],
               "labels": [s.label for s in samples], "predictions": predictions, **extra,
               "latency_ms": [v for s in summaries for v in s["latencies_ms"]],
               "versions_reported": versions, "service": {"levels": summaries}}
    keep_outputs(ctx, json.dumps(outputs, allow_nan=False).encode("utf-8"))
    _judge(results, summaries, versions, malformed, serving, base)
    if serving.rollback is not None:
        rollback(ctx, proto, base, samples, outputs)


def _judge(results: list[Any], summaries: list[LevelSummary], versions: dict[str, int],
           malformed: list[str], serving: Serving, base: str) -> None:
    if not any(s["ok"] for s in summaries):
        every = [r for level in results for r in level.responses]
        if every and all(r.status == TRANSPORT_ERROR for r in every):
            raise LayerFailed(f"{base} unreachable during load: {every[-1].error}", "endpoint_unreachable")
        codes = {k: v for s in summaries for k, v in s["status_counts"].items()}
        raise LayerFailed(f"no request to {base} succeeded (status counts {codes})", "service_errors")
    wrong = {v: n for v, n in versions.items() if v not in (serving.version, "None")}
    if wrong:
        raise LayerFailed(f"responses report version(s) {wrong}, not the declared {serving.version}",
                          "wrong_model_version")
    if malformed:
        raise LayerFailed(f"{len(malformed)} responses malformed, first: {malformed[0]}", "bad_responses")


class CurrentSide(TypedDict):
    """The current version's side of a ``serving.rollback`` record: its endpoint, version and golden results."""

    endpoint: str
    version: str
    golden: list[RuleResult]


class PreviousSide(CurrentSide):
    """The previous version's side (:func:`_previous_side`): also the version it reported, and how many of its
    requests were answered."""

    reported_version: str | None
    answered: int
    requests: int


def rollback(ctx: LayerContext, proto: ServingProtocol, base: str, samples: list[Any],
             current_outputs: dict[str, Any]) -> None:
    """Switch to ``serving.rollback`` (second endpoint, or the engine rolls ``deploy`` to it and back
    afterwards, also when the check fails); the service must then report the previous version and
    answer the dataset's golden samples again.

    Records ``serving.rollback`` with both sides (and ``serving.rollback.switch`` /
    ``serving.rollback.restore``: the engine's rollout facts). LayerFailed ``rollback_unreachable``
    (infrastructure), ``rollback_wrong_version`` or ``rollback_answers_wrong`` (algorithm); the engine's
    ActionFailed when a rollout does not complete.
    """
    serving = proto.serving
    assert serving.rollback is not None
    spec = serving.rollback
    endpoint = spec.endpoint  # None: the engine rolls deploy back instead
    old = dataclasses.replace(serving, version=spec.version, endpoint=endpoint,
                              deploy=spec.deploy if spec.deploy is not None else serving.deploy, rollback=None)
    golden = _golden_rules(ctx)
    side_now: CurrentSide = {"endpoint": base, "version": serving.version,
                             "golden": evaluate(golden, current_outputs)}
    old_proto = protocol_for(ctx, old)
    if endpoint is not None:
        side_old = _previous_side(ctx, old_proto, samples, golden)
    else:
        try:
            side_old = _via_deploy(ctx, proto, old_proto, samples, golden)
        except Unsupported as exc:
            ctx.record("serving.rollback", status="not_applicable", current=side_now, reason=exc.message)
            return
    ctx.record("serving.rollback", status="verified", previous=side_old, current=side_now,
               switch="endpoint" if endpoint else "deploy")
    failed = [r for r in side_old["golden"] if r["verdict"] != "pass"]
    if failed:
        raise LayerFailed(f"after rollback to {old.version}: " + "; ".join(
            f"{r['name']}: {r['observed']} ({r['detail']})" for r in failed),
            "rollback_answers_wrong")


def _via_deploy(ctx: LayerContext, proto: ServingProtocol, old_proto: ServingProtocol, samples: list[Any],
                golden: list[AcceptanceRule]) -> PreviousSide:
    """Roll the engine's deployed object to the previous version (``serving.rollback.switch``), check it
    (:func:`_previous_side`), and roll it back to the current version (``serving.rollback.restore``)
    whatever happened after the switch was asked, a failed rollout included. Raises the engine's
    Unsupported (nothing switched, nothing restored) when it has no ``serving_switch``."""
    old = old_proto.serving
    try:
        switched = ctx.backend.serving_switch(ctx, serving_request(ctx, old, old_proto), old.version)
        ctx.record("serving.rollback.switch", deploy=old.deploy, version=old.version, **(switched or {}))
        side = _previous_side(ctx, old_proto, samples, golden)
    except Unsupported:
        raise
    except BaseException:
        _restore(ctx, proto, quiet=True)
        raise
    _restore(ctx, proto, quiet=False)
    return side


def _restore(ctx: LayerContext, proto: ServingProtocol, quiet: bool) -> None:
    """Switch the deployed object back to the current version; record ``serving.rollback.restore``. With
    ``quiet`` (another failure is on its way) an engine fault is recorded instead of raised."""
    serving = proto.serving
    try:
        restored = ctx.backend.serving_switch(ctx, serving_request(ctx, serving, proto), serving.version)
    except EngineFault as exc:
        ctx.record("serving.rollback.restore", deploy=serving.deploy, version=serving.version, restored=False,
                   category=exc.category, error=exc.message)
        if quiet:
            return
        raise
    ctx.record("serving.rollback.restore", deploy=serving.deploy, version=serving.version, restored=True,
               **(restored or {}))


def _previous_side(ctx: LayerContext, old_proto: ServingProtocol, samples: list[Any],
                   golden: list[AcceptanceRule]) -> PreviousSide:
    """Ready, identity and the golden samples of the previous version (``old_proto.serving``); the
    rollback side of ``serving.rollback``. LayerFailed ``rollback_unreachable`` /
    ``rollback_wrong_version``."""
    old = old_proto.serving
    old_base = endpoint_of(ctx, old, old_proto)
    headers = {"Content-Type": "application/json", **auth_headers(old)}
    try:
        wait_ready(ctx, old_proto, old_base, headers, min(ctx.timeout_s, 60.0), what="serving.rollback.ready")
    except LayerFailed as exc:
        raise LayerFailed(f"rollback to {old.version}: {exc.message}", "rollback_unreachable") from None
    try:
        reported = verify_identity(ctx, old_proto, old_base, headers, old.version,
                                   what="serving.rollback.identity")
    except LayerFailed as exc:
        raise LayerFailed(f"after rollback: {exc.message}", "rollback_wrong_version") from None
    requests = old_proto.prepare(samples, 1)
    level = run_levels(old_base, requests, [1], len(requests), ctx.timeout_s, headers, REQUEST_TIMEOUT_S)[0]
    answers: dict[int, Answer] = {}
    parse_level(old_proto, level, requests, answers, {}, [])
    predictions = [answers[k].predictions[0] if k in answers else None for k in range(len(requests))]
    old_outputs = {"indices": [s.index for s in samples], "ids": [s.index for s in samples],
                   "labels": [s.label for s in samples],
                   "predictions": predictions}
    return {"endpoint": old_base, "version": old.version, "reported_version": reported,
            "golden": evaluate(golden, old_outputs), "answered": len(answers), "requests": len(requests)}


def _golden_rules(ctx: LayerContext) -> list[AcceptanceRule]:
    if ctx.dataset.acceptance is None:
        return []
    try:
        return [r for r in load_rules(ctx.dataset.acceptance) if r["kind"] == "golden"]
    except CaseError:
        return []
