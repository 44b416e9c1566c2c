"""Acting as a tenant on Kubernetes, and the probe workloads a governance probe submits, observes and removes.

**Identity.** A tenant is a ServiceAccount in its namespace. The gate asks the TokenRequest API
(``POST serviceaccounts/<sa>/token``, ``expirationSeconds`` :data:`TOKEN_S`) for a short-lived token and
makes the tenant's calls with that token alone, so authentication, RBAC, admission (ResourceQuota,
LimitRange, webhooks) and Kueue see exactly the tenant they would see in production; the apiserver's
own ``SelfSubjectReview`` then names the user it authenticated. Impersonation headers would reach the
same authorizer, but need the ``impersonate`` verb on users and groups, which lets the gate become
anyone: TokenRequest needs only ``create serviceaccounts/token`` in the tenants' namespaces.

**Observation.** What happened to a submitted workload (bound, unschedulable, admitted, evicted, its
logs) is read with the gate's own identity (the *observer*): a tenant may lack ``get events`` or
``get pods/log`` without that saying anything about isolation.

**Cleanup.** Everything a probe creates is recorded in a :class:`Created` list, deleted by the
observer (grace period 0, Jobs with foreground propagation) and waited for until gone.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import queues
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.kubernetes.manifests import PodList, ServedPod, ServedWorkload, Workload
from pytest_hetero.backends.kubernetes.objects import find, parse_pod
from pytest_hetero.backends.protocol import ActionFailed, Attempt, CleanupRecord, IdentityFacts, Leftover
from pytest_hetero.matrix.model import Tenant
from pytest_hetero.pending.model import ReasonRef

TOKEN_S = 600
"""Lifetime (seconds) of the token requested for a tenant's ServiceAccount (the API's minimum is 600)."""
POLL_S = 0.4


@dataclass
class Identity:
    """Who the probe acts as: ``api`` (an ApiClient with only the tenant's token, or the gate's own),
    ``subject`` and ``groups`` as the apiserver's SelfSubjectReview answered, ``tenant`` (None: the
    gate itself), ``namespace`` it acts in by default, ``method`` (how the credentials were obtained)."""

    api: client.ApiClient
    subject: str
    groups: list[str]
    tenant: str | None
    namespace: str
    method: str

    def to_dict(self) -> IdentityFacts:
        """The identity as evidence keeps it (no credential)."""
        return {"tenant": self.tenant, "subject": self.subject, "groups": self.groups, "namespace": self.namespace,
                "method": self.method}


def who_am_i(api: client.ApiClient) -> tuple[str, list[str]]:
    """``(username, groups)`` the apiserver authenticated ``api``'s credentials as (SelfSubjectReview,
    authentication.k8s.io/v1, GA in Kubernetes 1.28). Raises the :func:`~.client.api_outcome` of a refusal."""
    try:
        review: Any = client.AuthenticationV1Api(api).create_self_subject_review(
            client.V1SelfSubjectReview(api_version="authentication.k8s.io/v1", kind="SelfSubjectReview"),
            _request_timeout=kc.API_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - translated
        raise kc.api_outcome(exc, "ask the apiserver who these credentials are (SelfSubjectReview)") from None
    info = review.status.user_info
    return str(info.username), list(info.groups or [])


def act_as(admin: client.ApiClient, tenant: Tenant | None, default_namespace: str) -> Identity:
    """The identity of ``tenant`` (a token of its ServiceAccount, requested with ``admin``), or the gate's
    own when None. Raises ActionFailed ``tenant_unusable`` (platform) when the ServiceAccount's token
    cannot be had (absent ServiceAccount or namespace, TokenRequest refused)."""
    if tenant is None:
        subject, groups = who_am_i(admin)
        return Identity(admin, subject, groups, None, default_namespace, "the gate's own credentials")
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": TOKEN_S}}
    try:
        answer: Any = client.CoreV1Api(admin).create_namespaced_service_account_token(
            tenant.service_account, tenant.namespace, body, _request_timeout=kc.API_TIMEOUT_S)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - translated
        fault = kc.api_outcome(exc, f"request a token for ServiceAccount {tenant.namespace}/{tenant.service_account} "
                                    f"(tenant {tenant.name})")
        raise ActionFailed(fault.message, "tenant_unusable") from None
    cfg = copy.copy(admin.configuration)
    cfg.cert_file = cfg.key_file = None
    cfg.username = cfg.password = None
    cfg.api_key = {"authorization": "Bearer " + str(answer.status.token)}
    cfg.api_key_prefix = {}
    cfg.refresh_api_key_hook = None
    api = client.ApiClient(cfg)
    subject, groups = who_am_i(api)
    return Identity(api, subject, groups, tenant.name, tenant.namespace,
                    f"TokenRequest for ServiceAccount {tenant.namespace}/{tenant.service_account} "
                    f"({TOKEN_S} s token; the gate's own credentials never used for its calls)")


@dataclass
class Created:
    """Objects a probe created: ``(kind, namespace, name)`` with kind ``pod``, ``job`` or ``pvc``."""

    objects: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, kind: str, namespace: str, name: str) -> None:
        """Remember one created object."""
        self.objects.append((kind, namespace, name))


def create(identity: Identity, body: Workload, created: Created) -> ApiException | Exception | None:
    """Create ``body`` (a Pod or batch/v1 Job) as ``identity``; None when the apiserver accepted it (then
    remembered in ``created``), else the exception it answered with."""
    try:
        ks.create(identity.api, body)
    except Exception as exc:  # noqa: BLE001 - the refusal is the probe's answer
        return exc
    meta = body["metadata"]
    created.add("pod" if body["kind"] == "Pod" else "job", meta["namespace"], meta["name"])
    return None


def refused(role: str, action: str, identity: Identity, exc: BaseException) -> Attempt:
    """The Attempt of a request the apiserver answered with ``exc``: ``refused`` with the normalised
    reasons of its Status message (403 RBAC or quota, 422…); a failure to reach it is raised instead
    (EngineUnavailable: nothing was learnt)."""
    fault = kc.api_outcome(exc, action)
    if not isinstance(fault, ActionFailed):
        raise fault
    status = exc.status if isinstance(exc, ApiException) else None
    message = kc.status_message(exc) if isinstance(exc, ApiException) else str(exc)
    return Attempt(role, action, identity.subject, "refused", reasons=list(getattr(fault, "reasons", [])),
                   message=message, facts={"http_status": status, "category": fault.category})


def pods_of(api: client.ApiClient, namespace: str, selector: str) -> list[ServedPod]:
    """The pods matching ``selector`` in ``namespace`` (JSON dicts); [] when none."""
    resp: Any = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector, _preload_content=False,
                                                         _request_timeout=kc.API_TIMEOUT_S)
    listed: PodList = json.loads(resp.data)
    return list(listed["items"])


def job_uid(api: client.ApiClient, namespace: str, name: str) -> str:
    """The uid of Job ``name`` ("" when it cannot be read)."""
    try:
        job: Any = client.BatchV1Api(api).read_namespaced_job(name, namespace, _request_timeout=kc.API_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - an unreadable Job has no Workload to find
        return ""
    return str(job.metadata.uid)


def workloads_of(api: client.ApiClient, served: queues.Served, namespace: str, uid: str) -> list[ServedWorkload]:
    """Kueue Workloads of the Job with ``uid`` (the ``kueue.x-k8s.io/job-uid`` label); [] when Kueue is
    not served or none exists yet."""
    found, _ = queues.read_objects(api, served, queues.KUEUE, "workloads", namespace, f"{queues.JOB_UID}={uid}")
    return found


def admitted(workload: ServedWorkload) -> bool:
    """True when the Workload's ``Admitted`` condition is True."""
    return queues.parse_workload(workload).holds("Admitted")


def kueue_refusal(workload: ServedWorkload) -> bool:
    """True when Kueue has said why it does not admit the Workload yet (QuotaReserved False with a
    message, or an Evicted/Preempted condition)."""
    seen = queues.parse_workload(workload)
    reserved = find(seen.conditions, "QuotaReserved")
    return bool(reserved is not None and reserved.status == "False" and reserved.message) or any(
        seen.holds(c) for c in ("Evicted", "Preempted"))


def observe(observer: client.ApiClient, served: queues.Served, body: Workload, timeout_s: float,
            want: str = "placed", patient: bool = False
            ) -> tuple[str, list[ServedPod], list[ServedWorkload], float]:
    """Watch (poll every 0.4 s, as the observer) what becomes of the created ``body`` for up to
    ``timeout_s`` seconds: ``(outcome, pods, workloads, waited_s)`` with outcome ``placed`` (a pod bound
    to a node, for a Kueue Job also its Workload admitted), ``completed`` (with ``want="completed"``: a
    pod Succeeded or Failed), ``pending`` (the scheduler found no node, or Kueue said why not, or the
    time ran out). ``patient``: a first Unschedulable verdict does not end the watch (a preemptor is
    Unschedulable until its victims are gone)."""
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    selector = f"{kc.PROBE}={meta['labels'][kc.PROBE]}"
    kueue = body["kind"] == "Job" and ks.KUEUE_QUEUE in meta["labels"]
    uid = job_uid(observer, ns, name) if kueue else ""
    start = time.monotonic()
    pods: list[ServedPod] = []
    loads: list[ServedWorkload] = []
    while True:
        pods = pods_of(observer, ns, selector)
        loads = workloads_of(observer, served, ns, uid) if uid else []
        phases = {parse_pod(p).phase for p in pods}
        waited = time.monotonic() - start
        if want == "completed" and phases & {"Succeeded", "Failed"}:
            return "completed", pods, loads, waited
        if want == "placed" and ks.scheduled(pods) and (not kueue or any(admitted(w) for w in loads)):
            return "placed", pods, loads, waited
        refused = ks.unschedulable(pods) or (kueue and any(kueue_refusal(w) and not admitted(w) for w in loads))
        if refused and not patient:
            return "pending", pods, loads, waited
        if waited >= timeout_s:
            return "pending", pods, loads, waited
        time.sleep(POLL_S)


def pending_reasons(observer: client.ApiClient, pods: list[ServedPod], loads: list[ServedWorkload],
                    namespace: str, name: str) -> tuple[list[ReasonRef], str]:
    """Normalised reasons (dicts, decisive first) and the cluster's own words for a workload left pending:
    its pods' PodScheduled condition, the events of the pods and of ``name``, its Kueue Workloads."""
    events = ks.events_for(observer, namespace, name)
    for pod in pods:
        events += ks.events_for(observer, namespace, pod["metadata"]["name"])
    reasons = ks.explain_pending(pods, events, loads, None)
    words = [r.message for r in reasons if r.message]
    return [r.to_dict() for r in reasons], "; ".join(dict.fromkeys(words))


def _call(observer: client.ApiClient, kind: str, ns: str, name: str, verb: str) -> Any:
    """``verb`` (``delete`` or ``read``) one created object as the observer."""
    if kind == "pvc":
        claims = client.CoreV1Api(observer)
        return (claims.delete_namespaced_persistent_volume_claim(name, ns, grace_period_seconds=0) if verb == "delete"
                else claims.read_namespaced_persistent_volume_claim(name, ns))
    if kind == "pod":
        core = client.CoreV1Api(observer)
        return (core.delete_namespaced_pod(name, ns, grace_period_seconds=0) if verb == "delete"
                else core.read_namespaced_pod(name, ns))
    batch = client.BatchV1Api(observer)
    return (batch.delete_namespaced_job(name, ns, propagation_policy="Foreground", grace_period_seconds=0)
            if verb == "delete" else batch.read_namespaced_job(name, ns))


def _gone(observer: client.ApiClient, kind: str, ns: str, name: str, deadline: float) -> bool:
    """Wait (until ``deadline``, monotonic) for the object to be gone; True when it is."""
    while True:
        try:
            _call(observer, kind, ns, name, "read")
        except ApiException as exc:
            if exc.status == 404:
                return True
        except Exception:  # noqa: BLE001, S110 - an unreachable apiserver: keep waiting until the deadline
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def delete_all(observer: client.ApiClient, created: Created, wait_s: float = 30.0
               ) -> tuple[list[CleanupRecord], list[Leftover]]:
    """Delete every created object (as the observer; grace period 0; a Job with foreground propagation,
    so it is gone only once its pods are: they count against quotas until then) and wait up
    to ``wait_s`` seconds until each is gone: ``(cleanup records, leftovers)``. Never raises."""
    left: list[Leftover] = []
    for kind, ns, name in created.objects:
        try:
            _call(observer, kind, ns, name, "delete")
        except ApiException as exc:
            if exc.status != 404:
                left.append(Leftover(kind, name, f"delete refused: HTTP {exc.status}: {kc.status_message(exc)}", ns))
        except Exception as exc:  # noqa: BLE001 - reported as a leftover
            left.append(Leftover(kind, name, f"delete failed: {type(exc).__name__}: {exc}", ns))
    deadline = time.monotonic() + wait_s
    records: list[CleanupRecord] = []
    for kind, ns, name in created.objects:
        gone = _gone(observer, kind, ns, name, deadline)
        records.append({"kind": kind, "namespace": ns, "name": name, "gone": gone})
        if not gone and not any(x.name == name and x.kind == kind for x in left):
            left.append(Leftover(kind, name, f"still present {wait_s:g} s after deletion", ns))
    return records, left
