"""Connection and error translation of the Kubernetes backend.

Target keys: ``kubeconfig`` (path; else ``KUBECONFIG``/``~/.kube/config``), ``context`` (overridden
by ``--hetero-kube-context``), ``namespace`` (overridden by ``--hetero-kube-namespace``; else the
context's namespace, else ``default``). Inside a pod without a kubeconfig the in-cluster service
account is used. Every object the backend creates carries :func:`labels`.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import msgspec
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.util.retry import Retry

from pytest_hetero.backends.kubernetes.objects import parse_status
from pytest_hetero.backends.labels import CREATED_AT, LABEL, OWNER, ROLE, RUN_ID, utc_stamp
from pytest_hetero.backends.protocol import ActionFailed, EngineFault, EngineUnavailable
from pytest_hetero.declared import resolve
from pytest_hetero.pending import explain

PROBE = LABEL + "probe"
API_TIMEOUT_S = 30.0
"""Bound (seconds) of every API request except watches and model execs."""


def label_value(text: str) -> str:
    """``text`` made a valid label value: ``[A-Za-z0-9._-]``, at most 63 characters, alphanumeric ends."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:63].strip("-._") or "x"


def dns_name(*parts: str, limit: int = 63) -> str:
    """A DNS-1123 label from ``parts`` (lower case, ``[a-z0-9-]``, at most ``limit`` characters)."""
    name = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    return name[:limit].rstrip("-") or "hetero"


def labels(run_id: str, owner: str, role: str, **keys: str) -> dict[str, str]:
    """Labels of a created object: run id, owner token, role, plus ``keys`` (values sanitised).

    Keys are the Docker backend's (``pytest-hetero.run-id``…), so ``hetero cleanup`` selects alike.
    """
    out = {RUN_ID: label_value(run_id), OWNER: owner, ROLE: role}
    out.update({LABEL + k: label_value(v) for k, v in keys.items()})
    return out


def created_annotations() -> dict[str, str]:
    """Annotations of a created object: ``pytest-hetero.created-at`` (UTC, ``YYYY-mm-ddTHH:MM:SSZ``)."""
    return {CREATED_AT: utc_stamp()}


class ContextSettings(msgspec.Struct, frozen=True, kw_only=True):
    """A kubeconfig context's settings (``contexts[].context``) as far as the gate reads them: its ``namespace``
    (None where absent: ``default``)."""

    namespace: str | None = None


class NamedContext(msgspec.Struct, frozen=True, kw_only=True):
    """A ``contexts[]`` entry of a kubeconfig: its ``name`` and ``context`` (both required: the official client
    refuses a kubeconfig whose context it loads without them)."""

    name: str
    context: ContextSettings


def connect(target: dict[str, Any], context: str | None) -> tuple[client.ApiClient, str, str]:
    """``(ApiClient, namespace, context name)`` for the target.

    Raises ActionFailed (``bad_target``, platform) when no kubeconfig or in-cluster config exists,
    the kubeconfig is not YAML or not shaped like one, or the named context is missing.
    """
    path = target.get("kubeconfig") or os.environ.get("KUBECONFIG")
    try:
        if path or os.path.exists(os.path.expanduser("~/.kube/config")) or context:
            cfg = client.Configuration()
            config.load_kube_config(config_file=path, context=context, client_configuration=cfg)  # type: ignore[no-untyped-call]
            contexts, active = config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
            found: Any = next((c for c in contexts if c["name"] == context), active) if context else active
            chosen = None if found is None else msgspec.convert(found, NamedContext)
            namespace = (chosen.context.namespace if chosen else None) or "default"
            name = chosen.name if chosen else ""
        else:
            cfg = client.Configuration()
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace", encoding="utf-8") as fh:
                namespace, name = fh.read().strip(), "in-cluster"
    except (ConfigException, OSError, yaml.YAMLError, TypeError, AttributeError, KeyError, ValueError) as exc:
        # a kubeconfig that is not YAML, or YAML of the wrong shape, is a bad target, not a harness bug
        why = str(exc)
        if not isinstance(exc, (ConfigException, OSError)):
            why = f"not a kubeconfig ({type(exc).__name__}: {why.splitlines()[0] if why else ''})"
        raise ActionFailed(
            f"no usable Kubernetes configuration (kubeconfig {path or '~/.kube/config'}, "
            f"context {context or '(current)'}): {why}",
            "bad_target") from None
    cfg.connection_pool_maxsize = 64
    cfg.retries = api_retries()
    return client.ApiClient(cfg), namespace, name


RETRY_STATUSES: tuple[int, ...] = (429, 502, 503, 504)
"""Answers that mean "try again later" (apiserver overloaded, restarting, or behind a failing proxy);
500 is not one: the apiserver uses it for lasting failures too (e.g. a kubelet it cannot reach for logs)."""


def api_retries(total: int = 4, backoff_s: float = 0.5) -> Retry:
    """urllib3 retry policy for every API call: connection errors and RETRY_STATUSES are retried up
    to ``total`` times with exponential backoff (``backoff_s`` × 2^n seconds: 0.5, 1, 2, 4 by default,
    honouring ``Retry-After``); non-idempotent requests (POST creates) are not re-sent after a
    response. The last answer then reaches the caller as usual (ApiException → layer outcome)."""
    return Retry(total=total, connect=total, read=1, status=total, backoff_factor=backoff_s,
                 status_forcelist=RETRY_STATUSES, respect_retry_after_header=True, raise_on_status=False)


def raw_request(api: client.ApiClient, method: str, path: str, body: object = None,
                query: list[tuple[str, str]] | None = None, timeout_s: float = API_TIMEOUT_S) -> Any:
    """One API request as the generated methods send it (``api``'s host, credentials, token refresh, retries), but
    without their argument validation and without building models of the answer: the answer's JSON as
    ``json.loads`` decodes it (None for an empty body). ``path`` is the request path (its names already valid
    DNS names), ``body`` a manifest dict sent as JSON. What the caller asked per model run (create a Pod, delete
    it, read its Node) cost more in the client's validation of a Pod than in the request itself. Raises
    ApiException (the status's subclass, as the client raises it) for an answer outside 2xx, urllib3 errors
    when there is no answer."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    resp: Any = api.call_api(*api.param_serialize(method, path, query_params=query or [], header_params=headers,
                                                  body=body, auth_settings=["BearerToken"]),
                             _request_timeout=timeout_s)
    data: bytes = resp.read()
    if not 200 <= resp.status <= 299:
        raise ApiException.from_response(http_resp=resp, body=data.decode("utf-8", "replace"), data=None)
    return json.loads(data) if data else None


def open_stream(api: client.ApiClient, path: str, query: list[tuple[str, str]],
                timeout_s: tuple[float, float]) -> Any:
    """A GET of ``path`` whose answer is read as it streams (a watch): sent as :func:`raw_request` sends, the open
    urllib3 response returned unread once its status is 2xx (the caller releases it: ``release_conn``);
    ``timeout_s`` is (connect, read) seconds. Raises ApiException (the status's subclass) for an answer outside
    2xx, urllib3 errors when there is no answer."""
    resp: Any = api.call_api(*api.param_serialize("GET", path, query_params=query,
                                                  header_params={"Accept": "application/json"},
                                                  auth_settings=["BearerToken"]),
                             _request_timeout=timeout_s)
    if not 200 <= resp.status <= 299:
        data: bytes = resp.read()
        raise ApiException.from_response(http_resp=resp, body=data.decode("utf-8", "replace"), data=None)
    return resp.response


def api_outcome(exc: BaseException, action: str) -> EngineFault:
    """Translate an API failure during ``action`` (e.g. ``create pods in ns``) to an engine fault.

    403 and 422 bodies are explained with :func:`pytest_hetero.pending.explain`: the outcome is
    ActionFailed with the first reason's code as category (its owner is the failure table's), and ``reasons`` (list of
    Reason dicts) attached; a permission error names the missing verb and resource (a refused exec
    websocket too). 404 → ActionFailed ``api_not_served`` (platform: e.g. the Volcano Job CRD is not
    installed), except a missing namespace (``namespace_not_found``, platform) and a pod that no longer
    exists (``pod_deleted``, infrastructure). 401 → ActionFailed ``unauthorized`` (platform); anything
    else (5xx, 429) → EngineUnavailable ``apiserver_error``; no HTTP answer at all → EngineUnavailable
    ``apiserver_unreachable``.
    """
    if isinstance(exc, ApiException):
        message = status_message(exc)
        handshake = re.search(r"Handshake status (\d{3})", str(exc.reason)) if exc.status == 0 else None
        if handshake:  # a refused exec websocket: the Status body is inside the handshake error
            exc.status = int(handshake.group(1))
            message = str(exc.reason).replace("\\", "")
            body = re.search(r'"message":"((?:[^"\\]|\\.)*)"', str(exc.reason))
            if exc.status == 404 and body:
                message = body.group(1).replace("\\", "")
        kind = not_found_kind(exc)
        if exc.status == 404 and kind == "namespaces":
            return ActionFailed(
                f"{action}: namespace {namespace_of(message)} does not exist: create it (deploy/rbac.yaml "
                f"creates hetero-validation) or name another with target.namespace / --hetero-kube-namespace",
                "namespace_not_found")
        if exc.status == 404 and kind == "pods":
            return ActionFailed(
                f"{action}: the pod no longer exists (deleted or evicted while the run used it): {message}",
                "pod_deleted")
        if exc.status == 404:
            return ActionFailed(
                f"{action}: the apiserver does not serve it (HTTP 404; CRD or API not installed?): {message}",
                "api_not_served")
        if exc.status in (403, 422, 400):
            reasons = explain(message)
            if reasons and reasons[0].code != "unknown":
                first = reasons[0]
                text = message
                if first.code == "forbidden_rbac":
                    d = first.detail
                    group = d.get("group") or "core"
                    text = (
                        f"permission denied: {d.get('subject')} may not '{d.get('verb')}' "
                        f"{first.resource} (API group {group}) in {d.get('namespace') or 'the cluster'}; "
                        f"grant it (see deploy/rbac.yaml) — {message}"
                    )
                out = ActionFailed(f"{action}: {text}", first.code)
                out.reasons = [r.to_dict() for r in reasons]  # type: ignore[attr-defined]
                return out
            return ActionFailed(f"{action}: HTTP {exc.status}: {message}", "api_rejected")
        if exc.status == 401:
            return ActionFailed(f"{action}: credentials rejected (401): {message}", "unauthorized")
        return EngineUnavailable(f"{action}: HTTP {exc.status}: {message}", "apiserver_error")
    return EngineUnavailable(f"{action}: {type(exc).__name__}: {exc}", "apiserver_unreachable")


def not_found_kind(exc: ApiException) -> str:
    """``details.kind`` of a 404 Status (``namespaces``, ``pods``…) from the body or, for a refused
    exec websocket, from the handshake text; "" when it names none."""
    status = parse_status(exc.body)
    if status is not None and status.kind:
        return str(status.kind)
    found = re.search(r'"details":\{[^}]*"kind":"([a-z.]+)"', str(exc.reason).replace("\\", ""))
    return found.group(1) if found else ""


def namespace_of(message: str) -> str:
    """The missing namespace's name from a 404 Status message (``namespaces "x" not found``), else "?"."""
    found = re.search(r'namespaces "([^"]+)" not found', message)
    return found.group(1) if found else "?"


def status_message(exc: ApiException) -> str:
    """The ``message`` of an API Status body, else the raw body or reason."""
    status = parse_status(exc.body)
    return str(status.message or exc.reason) if status is not None else str(exc.body or exc.reason)


resolve(__name__)
