"""Governance probes, judged in the scheduling layer: a probe passes when the cluster refuses what it must.

A probe item (``<resource>::governance::<probe>::scheduling``) hands its probe to the engine
(:meth:`~pytest_hetero.backends.protocol.Backend.govern`), which makes the attempts as the tenant and
reports them; the verdict is written here, once for every engine:

* an attempt that must be refused (``submit-into-target``, ``list-target-pods``,
  ``list-target-workloads``, ``submit-to-target-queue``, ``above``, maintenance's ``node``) and was
  carried out (placed, listed) →
  ``governance_not_enforced`` (platform) with the sentence of what the tenant could do;
  refused or left pending, but for none of the expected normalised reasons (``expect.reasons``, else
  :data:`~pytest_hetero.matrix.governance.DEFAULT_REASONS`) → ``refusal_unexpected`` (platform);
* an attempt that must be admitted (``within``, attribution's ``workload``) and was not → its decisive
  reason's code and owner (``scheduling_timeout``, platform, when nothing explains it);
* attribution: each account that counts a requested resource (ResourceQuota ``used``, Kueue
  ClusterQueue/LocalQueue usage) must rise by exactly the request while the workload holds it
  (``attribution_mismatch``, platform) and return to its value before once it is gone
  (``usage_not_released``, platform); no account counting any of them → ``attribution_untracked``;
* device isolation: the pod without an accelerator request must run to its end (else error: not
  proven) and see no accelerator device node and no ``*VISIBLE_DEVICES`` variable granting devices
  (``device_isolation_breach``, platform);
* preemption: ``low`` and ``high`` must be placed, the low pod evicted for the high one with the
  eviction recorded (DisruptionTarget condition or ``Preempted`` event; else ``eviction_unrecorded``),
  and the ``waiter`` (low again) refused with the kind's reasons; a pool with room for both is not a
  test of preemption (error ``preemption_not_exercised``: not proven);
* a probe with nothing to attempt (maintenance: no node of the pool in maintenance) → not applicable,
  with the engine's reason (untested scope, never a pass);
* network and data boundaries: :mod:`pytest_hetero.layers.boundaries`;
* anything the probe created and could not remove → ``cleanup_incomplete`` (platform);
* reserved-inference: judged by :mod:`pytest_hetero.layers.reserved` (serving replicas and latency kept during
  a training burst).

Why the scheduling layer and not a sixth one: a probe proves a claim about the path a workload takes
to a node (who may submit, what is admitted, what is counted), which is the scheduling layer's claim;
a new layer would change :data:`pytest_hetero.vocab.LAYERS`, the reports, the predicate and the dossier
for every user, while a probe item differs from a placement item only in its keys.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pytest_hetero.evidence.records import (
    ATTRIBUTION,
    DEVICES,
    NOT_PROVEN,
    REFUSED,
    AttributionData,
    DevicesData,
    NotProvenData,
    RefusedData,
)
from pytest_hetero.layers import boundaries, usage
from pytest_hetero.layers.attempts import AttemptRead, facts_of
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed, NotApplicable
from pytest_hetero.matrix.governance import DEFAULT_REASONS
from pytest_hetero.matrix.model import GovernanceProbe

if TYPE_CHECKING:
    from pytest_hetero.backends.protocol import Account, AttemptDict, AttributionUsage

MUST_REFUSE = ("submit-into-target", "list-target-pods", "list-target-workloads", "submit-to-target-queue",
               "submit-via-target-cluster-queue", "above", "node", "waiter")
MUST_ADMIT = ("within", "workload", "low", "high")


def check(ctx: LayerContext) -> None:
    """Have the engine carry out the item's probe; judge what it reports (see the module docstring)."""
    probe = ctx.matrix.probe(ctx.planned.keys["probe"])
    ctx.record("governance.probe", probe=probe.name, probe_kind=probe.kind, resource=probe.resource,
               acting_as=probe.acting_as, target=probe.target, expect_reasons=list(_accepted(probe)))
    if probe.kind == "reserved-inference":  # a served model under a training burst: its own module
        from pytest_hetero.layers import reserved  # httpx and the serving clients, only when asked for

        reserved.check(ctx, probe)
        return
    report = ctx.backend.govern(ctx, probe)
    ctx.record("governance.identity", **report.identity, observer=report.observer)
    for attempt in report.attempts:
        ctx.record("governance.attempt", **attempt.to_dict())
    if report.usage:
        ctx.record("governance.usage", **report.usage)
    ctx.record("governance.cleanup", objects=report.cleanup, leftovers=[x.to_dict() for x in report.leftovers])
    if report.ledger:
        ctx.record("governance.ledger", tenant=probe.acting_as, **report.ledger)
        for held in report.ledger["workloads"]:  # the run-wide ledger counts each probe workload too
            own = held.copy()
            role = own.pop("role", None)
            own.pop("held_s", None)
            own["tenant"], own["role"] = probe.acting_as, f"governance:{probe.name}:{role}"
            usage.record(ctx, own)
    if report.skipped:
        raise NotApplicable(report.skipped)
    tenant = probe.acting_as or "the gate"
    for attempt in report.attempts:
        _judge(ctx, probe, tenant, attempt.to_dict())
    boundaries.proven(probe, [a.to_dict() for a in report.attempts])
    if probe.kind == "attribution":
        attribution(ctx, tenant, report.usage)
    if report.leftovers:
        raise LayerFailed("the probe could not remove what it created: " + "; ".join(
            f"{x.kind} {x.namespace}/{x.name}: {x.reason}" for x in report.leftovers), "cleanup_incomplete")


def _judge(ctx: LayerContext, probe: GovernanceProbe, tenant: str, attempt: AttemptDict) -> None:
    """Raise the outcome of one attempt that did not go as its role requires (module docstring)."""
    role = attempt["role"]
    if role in boundaries.ROLES:
        boundaries.judge(ctx, probe, tenant, attempt, _accepted(probe))
        return
    if role in MUST_REFUSE:
        _refused(ctx, probe, tenant, attempt)
    elif role in MUST_ADMIT and attempt["outcome"] != "placed":
        reasons = attempt["reasons"]
        if not reasons:
            raise LayerFailed(f"{tenant}: {attempt['action']} was not placed within {attempt['waited_s']:.0f} s "
                              "and nothing says why", "scheduling_timeout")
        raise LayerFailed(f"{tenant}: {attempt['action']} was not admitted: {attempt['message']}",
                          reasons[0]["code"])
    if role == "no-request":
        devices(ctx, tenant, attempt)
    if role == "high":
        preempted(ctx, tenant, attempt)


def _accepted(probe: GovernanceProbe) -> tuple[str, ...]:
    return probe.reasons or DEFAULT_REASONS.get(probe.kind, ())


def _could(probe: GovernanceProbe, tenant: str, attempt: AttemptDict) -> str:
    """The sentence of what ``tenant`` could do that it must not."""
    target = probe.target or "another tenant"
    facts = facts_of(attempt)
    returned = facts.returned
    return {
        "submit-into-target": f"tenant {tenant} could create a workload in tenant {target}'s namespace "
                              f"({attempt['action']})",
        "list-target-pods": f"tenant {tenant} could list tenant {target}'s pods ({len(returned or [])} returned)",
        "list-target-workloads": f"tenant {tenant} could list tenant {target}'s Kueue workloads "
                                 f"({len(returned or [])} returned)",
        "submit-to-target-queue": f"tenant {tenant} could submit to tenant {target}'s queue ({attempt['action']}: "
                                  f"{attempt['outcome']})",
        "submit-via-target-cluster-queue": f"tenant {tenant} could submit to tenant {target}'s ClusterQueue "
                                           f"({attempt['action']}: {attempt['outcome']})",
        "waiter": f"a second low-priority workload of {tenant} was placed although the pool was full with the "
                  f"high-priority one ({attempt['action']})",
        "node": f"node {facts.target_node} ({', '.join(facts.maintenance or [])}) "
                f"received a workload of {tenant} ({attempt['action']})",
        "above": f"tenant {tenant} was admitted a request above its quota ({attempt['action']}, requests "
                 f"{facts.requests})",
    }[attempt["role"]]


def _refused(ctx: LayerContext, probe: GovernanceProbe, tenant: str, attempt: AttemptDict) -> None:
    """Pass silently when ``attempt`` was refused (or left pending) for an accepted reason; else raise.
    An attempt the engine did not make (``not-attempted``) is recorded as scope not proven."""
    if attempt["outcome"] == "not-attempted":
        ctx.write(NOT_PROVEN, NotProvenData(layer="scheduling", part=attempt["action"], reason=attempt["message"]))
        return
    if attempt["outcome"] not in ("refused", "pending"):
        raise LayerFailed(_could(probe, tenant, attempt), "governance_not_enforced")
    codes = [r["code"] for r in attempt["reasons"]]
    accepted = _accepted(probe)
    if not set(codes) & set(accepted):
        raise LayerFailed(f"{tenant}: {attempt['action']} was {attempt['outcome']}, but not for an expected reason "
                          f"({', '.join(accepted)}): reasons {codes or 'none'}; the cluster said: "
                          f"{attempt['message'] or 'nothing'}", "refusal_unexpected")
    ctx.write(REFUSED, RefusedData(role=attempt["role"], codes=codes, message=attempt["message"]))


def preempted(ctx: LayerContext, tenant: str, attempt: AttemptDict) -> None:
    """The high-priority workload was placed (checked before): the low one must have been evicted for it,
    with the eviction recorded by the cluster (DisruptionTarget condition or Preempted event)."""
    victim = facts_of(attempt).victim
    if victim is None:
        ctx.record("governance.preemption")
    else:
        ctx.record("governance.preemption", **victim)
    if victim is None or not victim["evicted"]:
        raise LayerBroken(f"{tenant}: the high-priority workload was placed without evicting the low-priority one "
                          f"({victim['pod'] if victim else None}): the pool had room for both, so preemption was not "
                          "exercised; point the probe at a pool that holds one such workload",
                          "preemption_not_exercised")
    if not victim["disruption"] and not victim["events"]:
        raise LayerFailed(f"{tenant}: the low-priority pod {victim['pod']} was removed without a recorded "
                          "preemption (no DisruptionTarget condition, no Preempted event)", "eviction_unrecorded")


NOT_GRANTING = frozenset({"", "void", "none", "-1", "NoDevFiles"})
"""Values of a ``*VISIBLE_DEVICES`` variable that grant no device (NVIDIA container toolkit: ``void``,
``none``, empty; CUDA: ``-1``/empty hides every device)."""


def breaches(facts: AttemptRead) -> list[str]:
    """What a pod without an accelerator request must not see, from the device-isolation attempt's
    ``facts`` (``device_nodes``: paths; ``visible_env``: name → value): each device node, and each
    visible-devices variable whose value grants devices (not in :data:`NOT_GRANTING`)."""
    env = facts.visible_env or {}
    return [*(facts.device_nodes or []),
            *(f"{k}={v}" for k, v in sorted(env.items()) if v.strip() not in NOT_GRANTING)]


def devices(ctx: LayerContext, tenant: str, attempt: AttemptDict) -> None:
    """Judge the device-isolation pod (no accelerator request): it must have run to its end and seen
    no accelerator device node and no variable granting devices."""
    facts = facts_of(attempt)
    if attempt["outcome"] != "completed" or not facts.log_complete:
        reasons = attempt["reasons"]
        raise LayerBroken(f"{tenant}: the device-isolation pod did not run to its end, so isolation is not proven "
                          f"({attempt['action']}: {attempt['outcome']}; {attempt['message'] or 'no reason given'})",
                          reasons[0]["code"] if reasons else "probe_not_run")
    seen = breaches(facts)
    node = facts.node  # None: the engine did not say where the pod ran
    ctx.write(DEVICES, DevicesData(node=node, device_nodes=facts.device_nodes, visible_env=facts.visible_env,
                                   breaches=seen))
    if seen:
        raise LayerFailed(f"a pod of {tenant} without an accelerator request on node {node} sees "
                          + ", ".join(seen) + " (a visible-devices variable grants devices wherever the container "
                          "runtime honours it, e.g. the NVIDIA container toolkit: set by the image or injected by "
                          "the platform, the pod gets accelerators nobody allocated)", "device_isolation_breach")


def _quantity(text: Any) -> Decimal:
    from kubernetes.utils import parse_quantity  # the Kubernetes client's own quantity grammar

    return Decimal(parse_quantity(str(text)))  # type: ignore[no-untyped-call]


def expected_rises(key: str, account: Account, requested: dict[str, str]) -> dict[str, Decimal]:
    """``{counter: rise}`` that one workload requesting ``requested`` must cause in ``account`` (one
    entry of the engine's accounts read, ``key`` its name): a ResourceQuota counts ``<res>``,
    ``requests.<res>``, ``limits.<res>`` (limits equal requests in the probe's workload) and one pod in
    ``pods``/``count/pods``; a Kueue queue counts the request under ``<flavor>/<res>`` (summed over
    flavors: the counter is ``*/<res>``)."""
    if "hard" in account:  # a ResourceQuota's (``resourcequota/<name>``)
        hard = account["hard"]
        out = {n: _quantity(q) for r, q in requested.items() for n in (r, f"requests.{r}", f"limits.{r}")
               if n in hard}
        out.update({n: Decimal(1) for n in ("pods", "count/pods") if n in hard})
        return out
    if "error" in account:  # a queue that could not be read counts nothing
        return {}
    names = {k.split("/", 1)[-1] for k in [*account["usage"], *account["reservation"]]}
    return {f"*/{r}": _quantity(q) for r, q in requested.items() if r in names}


def _counter(account: Account | None, counter: str) -> Decimal:
    """The value of ``counter`` in ``account`` (None: the account was not read): a ResourceQuota's ``used``
    entry, or a queue's usage summed over its flavors (``*/<res>``); 0 where it is not counted."""
    if account is None or "error" in account:
        return Decimal(0)
    if "used" in account:
        return _quantity(account["used"].get(counter, "0"))
    res = counter.split("/", 1)[1]
    return sum((_quantity(v) for k, v in account["usage"].items() if k.split("/", 1)[-1] == res), Decimal(0))


def attribution(ctx: LayerContext, tenant: str, usage: AttributionUsage | None) -> None:
    """Judge the accounts read before, during and after the probe workload (see the module docstring); ``usage``
    None (the engine read no accounts) attributes nothing."""
    requested = usage["requested"] if usage else {}
    before, during = (usage["before"], usage["during"]) if usage else ({}, {})
    after = (usage.get("after") if usage else None) or {}
    rises = {k: expected_rises(k, v, requested) for k, v in before.items()}
    rises = {k: v for k, v in rises.items() if v}
    if not rises:
        namespace = usage["namespace"] if usage else None
        raise LayerFailed(f"no ResourceQuota or queue of namespace {namespace} counts any of "
                          f"{', '.join(requested)}: the tenant's usage is attributed nowhere", "attribution_untracked")
    wrong, kept = [], []
    for key, counters in rises.items():
        for counter, rise in counters.items():
            b = _counter(before[key], counter)
            d = _counter(during.get(key), counter)
            a = _counter(after.get(key), counter)
            if d - b != rise:
                wrong.append(f"{key} {counter} rose by {d - b} (from {b} to {d}), the workload requested {rise}")
            if a != b:
                kept.append(f"{key} {counter} is {a} after cleanup, was {b} before")
    ctx.write(ATTRIBUTION, AttributionData(
        expected={k: {c: str(r) for c, r in v.items()} for k, v in rises.items()}, wrong=wrong, not_released=kept))
    if wrong:
        raise LayerFailed(f"usage of tenant {tenant} is not attributed as requested: " + "; ".join(wrong),
                          "attribution_mismatch")
    if kept:
        raise LayerFailed(f"usage of tenant {tenant} was not released after cleanup: " + "; ".join(kept),
                          "usage_not_released")
