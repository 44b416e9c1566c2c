"""Rollback of a served model: switch to the previous version, which must report itself and answer
the data set's golden samples again; both sides are recorded as evidence.

The switch is a second endpoint (``serving.rollback.endpoint``), or the backend patches the
Kubernetes object (``serving_switch``, see :class:`pytest_hetero.serving.checks.ServingBackend`)
and is patched back to the current version afterwards.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_hetero.matrix.acceptance import evaluate, load_rules
from pytest_hetero.errors import CaseError
from pytest_hetero.layers.base import LayerContext, LayerFailed
from pytest_hetero.serving.checks import (
    REQUEST_TIMEOUT_S,
    auth_headers,
    endpoint_of,
    parse_level,
    protocol_for,
    verify_identity,
    wait_ready,
)
from pytest_hetero.serving.load import run_levels
from pytest_hetero.serving.protocol import Answer, ServingProtocol


def rollback(ctx: LayerContext, proto: ServingProtocol, base: str, samples: list[Any],
             current_outputs: dict[str, Any]) -> None:
    """Switch to ``serving.rollback`` (second endpoint, or the backend patches ``deploy``); the service
    must then report the previous version and answer the dataset's golden samples again.

    Records ``serving.rollback`` with both sides. LayerFailed ``rollback_unreachable``
    (infrastructure), ``rollback_wrong_version`` or ``rollback_answers_wrong`` (algorithm).
    """
    serving = proto.serving
    assert serving.rollback is not None
    spec = serving.rollback
    old = dataclasses.replace(serving, version=str(spec["version"]), endpoint=spec.get("endpoint"),
                              deploy=spec.get("deploy") or serving.deploy, rollback=None)
    golden = _golden_rules(ctx)
    side_now = {"endpoint": base, "version": serving.version, "golden": evaluate(golden, current_outputs)}
    switch = getattr(ctx.backend, "serving_switch", None)
    if spec.get("endpoint") is None and switch is None:
        ctx.record("serving.rollback", status="not_applicable", current=side_now,
                   reason=f"the {ctx.backend.name} backend does not implement serving_switch")
        return
    if spec.get("endpoint") is None:
        assert switch is not None and old.deploy is not None
        switch(ctx, old.deploy, old.version)
    old_proto = protocol_for(ctx, old)
    old_base = endpoint_of(ctx, old.endpoint, old.deploy)
    headers = {"Content-Type": "application/json", **auth_headers(old)}
    try:
        wait_ready(ctx, old_proto, old_base, headers, min(ctx.timeout_s, 60.0), what="serving.rollback.ready")
    except LayerFailed as exc:
        raise LayerFailed(f"rollback to {old.version}: {exc.message}", "rollback_unreachable",
                          exc.owner or "infrastructure") from None
    try:
        reported = verify_identity(ctx, old_proto, old_base, headers, old.version,
                                   what="serving.rollback.identity")
    except LayerFailed as exc:
        raise LayerFailed(f"after rollback: {exc.message}", "rollback_wrong_version", "algorithm") from None
    requests = old_proto.prepare(samples, 1)
    level = run_levels(old_base, requests, [1], len(requests), ctx.timeout_s, headers, REQUEST_TIMEOUT_S)[0]
    answers: dict[int, Answer] = {}
    parse_level(old_proto, level, requests, answers, {}, [])
    predictions = [answers[k].predictions[0] if k in answers else None for k in range(len(requests))]
    old_outputs = {"indices": [s.index for s in samples], "labels": [s.label for s in samples],
                   "predictions": predictions}
    golden_old = evaluate(golden, old_outputs)
    side_old = {"endpoint": old_base, "version": old.version, "reported_version": reported,
                "golden": golden_old, "answered": len(answers), "requests": len(requests)}
    if spec.get("endpoint") is None and switch is not None and serving.deploy is not None:
        switch(ctx, serving.deploy, serving.version)
    ctx.record("serving.rollback", status="verified", previous=side_old, current=side_now,
               switch="endpoint" if spec.get("endpoint") else "deploy")
    failed = [r for r in golden_old if r["verdict"] != "pass"]
    if failed:
        raise LayerFailed(f"after rollback to {old.version}: " + "; ".join(
            f"{r['name']}: {r['observed']} ({r['detail']})" for r in failed),
            "rollback_answers_wrong", "algorithm")


def _golden_rules(ctx: LayerContext) -> list[dict[str, Any]]:
    if ctx.dataset.acceptance is None:
        return []
    try:
        return [r for r in load_rules(ctx.dataset.acceptance) if r["kind"] == "golden"]
    except CaseError:
        return []
