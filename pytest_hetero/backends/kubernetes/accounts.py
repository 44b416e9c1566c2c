"""What the platform's own accounting says a namespace uses: ResourceQuota ``status.used`` and Kueue queue usage.

Read with the observer's identity (the gate's), as plain quantity strings:

* ``resourcequota/<name>``: ``{"hard": {res: q}, "used": {res: q}}`` of every ResourceQuota of the
  namespace (keys as the quota names them: ``requests.nvidia.com/gpu``, ``count/pods``…);
* ``clusterqueue/<name>`` and ``localqueue/<ns>/<name>``: ``{"usage": {"<flavor>/<res>": q},
  "reservation": {"<flavor>/<res>": q}}`` from ``status.flavorsUsage`` / ``flavorsReservation``
  (LocalQueues of Kueue v1beta1 name it ``flavorUsage``; both are read), plus
  ``admittedWorkloads``/``reservingWorkloads``.

Kueue updates queue status asynchronously; ResourceQuota ``used`` is raised at admission and lowered
by the quota controller after a pod is gone, so callers poll (:func:`settle`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import queues
from pytest_hetero.backends.kubernetes.manifests import FlavorUsage, ServedClusterQueue, ServedLocalQueue
from pytest_hetero.backends.protocol import Account, QueueAccount, QuotaAccount, Unreadable
from pytest_hetero.matrix.model import Tenant


def quota_accounts(api: client.ApiClient, namespace: str) -> dict[str, QuotaAccount]:
    """``{"resourcequota/<name>": {"hard", "used"}}`` of ``namespace``. Raises the api_outcome of a refused list."""
    try:
        found: Any = client.CoreV1Api(api).list_namespaced_resource_quota(namespace, _request_timeout=kc.API_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - translated
        raise kc.api_outcome(exc, f"list resourcequotas in {namespace}") from None
    return {f"resourcequota/{q.metadata.name}": {"hard": dict((q.status and q.status.hard) or {}),
                                                 "used": dict((q.status and q.status.used) or {})}
            for q in found.items}


def _flavors(entries: list[FlavorUsage] | None) -> dict[str, str]:
    """``<flavor>/<resource>`` → ``total`` of a queue status's ``flavorsUsage``/``flavorsReservation`` (JSON)."""
    return {f"{f['name']}/{r['name']}": str(r["total"]) for f in entries or [] for r in f["resources"] or []}


def _queue_account(raw: ServedClusterQueue | ServedLocalQueue) -> QueueAccount:
    """The account of a ClusterQueue or LocalQueue from its JSON (``status``)."""
    queue = queues.parse_queue(raw)
    return {"usage": _flavors(queue.flavors_usage or queue.flavor_usage),
            "reservation": _flavors(queue.flavors_reservation),
            "admitted_workloads": queue.admitted_workloads,
            "reserving_workloads": queue.reserving_workloads}


def queue_accounts(api: client.ApiClient, served: queues.Served, tenant: Tenant | None
                   ) -> dict[str, QueueAccount | Unreadable]:
    """Usage of the tenant's LocalQueue and ClusterQueue (those it names), when Kueue is served; ``{}``
    otherwise. A queue that cannot be read is kept as ``{"error": text}``."""
    version = served.version(queues.KUEUE)
    if tenant is None or version is None:
        return {}
    custom = client.CustomObjectsApi(api)
    out: dict[str, QueueAccount | Unreadable] = {}
    reads: list[tuple[str, Callable[[], Any]]] = []
    if tenant.cluster_queue:
        reads.append((f"clusterqueue/{tenant.cluster_queue}", lambda: custom.get_cluster_custom_object(
            queues.KUEUE[0], version, "clusterqueues", str(tenant.cluster_queue), _request_timeout=kc.API_TIMEOUT_S)))
    if tenant.queue:
        reads.append((f"localqueue/{tenant.namespace}/{tenant.queue}", lambda: custom.get_namespaced_custom_object(
            queues.KUEUE[0], version, tenant.namespace, "localqueues", str(tenant.queue),
            _request_timeout=kc.API_TIMEOUT_S)))
    for key, read in reads:
        try:
            raw = read()
        except Exception as exc:  # noqa: BLE001 - kept in the account
            out[key] = {"error": kc.api_outcome(exc, f"read {key}").message}
            continue
        out[key] = _queue_account(raw)
    return out


def tracks(account: Account, requested: dict[str, str]) -> bool:
    """True when ``account`` (one entry of :func:`read`) counts one of the ``requested`` resources: a
    ResourceQuota whose ``hard`` names ``<res>``, ``requests.<res>`` or ``limits.<res>`` (or pods), a
    queue whose usage or reservation names ``<flavor>/<res>``."""
    if "hard" in account:
        names = set(account["hard"])
        return bool(names & {"pods", "count/pods"}) or any(
            n in names for r in requested for n in (r, f"requests.{r}", f"limits.{r}"))
    if "error" in account:
        return False
    keys = [*account["usage"], *account["reservation"]]
    return any(k.split("/", 1)[-1] == r for k in keys for r in requested)


def read(api: client.ApiClient, served: queues.Served, tenant: Tenant | None, namespace: str) -> dict[str, Account]:
    """Every account of ``namespace`` and of the tenant's queues (see the module docstring)."""
    return {**quota_accounts(api, namespace), **queue_accounts(api, served, tenant)}


def settle(reader: Callable[[], dict[str, Account]], done: Callable[[dict[str, Account]], bool], wait_s: float
           ) -> tuple[dict[str, Account], float]:
    """Poll ``reader`` (every 0.5 s, up to ``wait_s`` seconds) until ``done`` holds for what it read;
    ``(last read, seconds waited)``."""
    start = time.monotonic()
    while True:
        got = reader()
        if done(got) or time.monotonic() - start >= wait_s:
            return got, time.monotonic() - start
        time.sleep(0.5)
