"""Network and data boundaries of a tenant, judged (the attempts of ``network-isolation`` and
``data-isolation`` probes; :mod:`pytest_hetero.layers.governance` hands each attempt here).

Network (``reach-target-service``, ``reach-target-pod``, ``reach-egress``): an address the tenant's pod
connected to fails the probe: ``network_policy_not_enforced`` (platform) when a NetworkPolicy isolates it
(declared, yet the traffic got through: the cluster's network plugin does not enforce it, or its agent is
not running on that node), ``governance_not_enforced`` when none does (nothing was declared to stop it).
A refusal (timeout, connection refused, unreachable) passes when its code is accepted (``expect.reasons``,
else ``network_timeout``, ``network_refused``, ``network_unreachable``: a policy's semantics do not say
whether a plugin drops or rejects); the policies that isolate the address are named in the
``governance.refused`` record. An address whose control could not reach it either is scope not proven.

Data (``mount-target-claim``, ``bind-target-volume``, ``mount-target-claim-by-name``,
``read-target-secret``, ``pull-with-target-secret``, ``pull-with-target-secret-by-name``): each must be
refused (RBAC 403, ``forbidden_rbac``), left Unschedulable or Pending for its claim or volume
(``volume_binding``) or reported by the kubelet as a pull Secret it cannot retrieve
(``pull_secret_unavailable``); carried out → ``governance_not_enforced`` with the sentence of what the
tenant could do; refused for another reason → ``refusal_unexpected``.

A probe whose every attempt was not made proves nothing: error ``probe_not_run``, never a pass; a Service or
claim the probe names that the target does not have is error ``configuration`` naming the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_hetero.evidence.records import NOT_PROVEN, REFUSED, NotProvenData, RefusedData
from pytest_hetero.layers.attempts import AttemptRead, facts_of
from pytest_hetero.layers.base import LayerBroken, LayerContext, LayerFailed
from pytest_hetero.matrix.model import GovernanceProbe

if TYPE_CHECKING:
    from pytest_hetero.backends.protocol import AttemptDict, PolicyFacts

NETWORK_ROLES = ("reach-target-service", "reach-target-pod", "reach-egress")
DATA_ROLES = ("mount-target-claim", "bind-target-volume", "mount-target-claim-by-name", "read-target-secret",
              "pull-with-target-secret", "pull-with-target-secret-by-name")
ROLES = NETWORK_ROLES + DATA_ROLES
"""Attempt roles judged here."""


def judge(ctx: LayerContext, probe: GovernanceProbe, tenant: str, attempt: AttemptDict,
          accepted: tuple[str, ...]) -> None:
    """Judge one attempt of a network or data probe (module docstring); ``accepted``: reason codes that
    count as the refusal. Raises LayerFailed (LayerBroken when the attempt's facts cannot be read:
    :func:`~pytest_hetero.layers.attempts.facts_of`); records ``governance.refused`` or ``scope.not_proven``."""
    if attempt["outcome"] == "not-attempted":
        ctx.write(NOT_PROVEN, NotProvenData(layer="scheduling", part=attempt["action"], reason=attempt["message"]))
        return
    facts = facts_of(attempt)
    found = facts.policies  # None: an attempt that never reached the network (a Service that does not exist)
    policies = _policies(attempt["role"], found)
    if attempt["outcome"] not in ("refused", "pending"):
        if attempt["role"] in NETWORK_ROLES:
            _reached(tenant, attempt, facts, policies)
        raise LayerFailed(could(probe, tenant, attempt, facts), "governance_not_enforced")
    codes = [r["code"] for r in attempt["reasons"]]
    if not set(codes) & set(accepted):
        raise LayerFailed(f"{tenant}: {attempt['action']} was {attempt['outcome']}, but not for an expected reason "
                          f"({', '.join(accepted)}): reasons {codes or 'none'}; the cluster said: "
                          f"{attempt['message'] or 'nothing'}", "refusal_unexpected")
    refused = RefusedData(role=attempt["role"], codes=codes, message=attempt["message"])
    if attempt["role"] in NETWORK_ROLES:
        refused["address"] = facts.address  # None: an attempt that never reached the network
        refused["policies"] = policies
        refused["by"] = ("NetworkPolicy " + ", ".join(policies) if policies else
                         "no NetworkPolicy of either namespace isolates it: refused by something the gate cannot "
                         "read (an AdminNetworkPolicy, the network plugin's own policy, a firewall)")
    ctx.write(REFUSED, refused)


def _policies(role: str, found: PolicyFacts | None) -> list[str]:
    """The NetworkPolicies that isolate a network attempt's address (``found``: the attempt's ``policies`` facts,
    None when it never reached the network): egress ones of the tenant's namespace, and ingress ones of the target
    pod's namespace (not for ``reach-egress``)."""
    if found is None:
        return []
    return [*found["egress"], *(found["ingress"] if role != "reach-egress" else [])]


def _reached(tenant: str, attempt: AttemptDict, facts: AttemptRead, policies: list[str]) -> None:
    found = facts.policies
    got = f"tenant {tenant}'s pod connected to {facts.address} ({facts.target}) on node {facts.node}"
    if policies:
        raise LayerFailed(f"{got} although NetworkPolicy {', '.join(policies)} isolates it: the policy is declared "
                          "but not enforced there (the network plugin does not enforce NetworkPolicy, or its "
                          "policy agent is not running on that node)", "network_policy_not_enforced")
    allowing = found["allowing"] if found else []
    if allowing:
        raise LayerFailed(f"{got}: no NetworkPolicy isolates it (NetworkPolicy {', '.join(allowing)} admits every "
                          "peer on that port, and policies add up)", "governance_not_enforced")
    raise LayerFailed(f"{got}: no NetworkPolicy isolates it (none of the tenant's namespace selects its pod for "
                      "Egress" + ("" if attempt["role"] == "reach-egress" else
                                  ", none of the target's selects the target pod for Ingress") + ")",
                      "governance_not_enforced")


def could(probe: GovernanceProbe, tenant: str, attempt: AttemptDict, facts: AttemptRead) -> str:
    """The sentence of what ``tenant`` could do with another tenant's data (a data attempt carried out, its
    ``facts`` read: :func:`~pytest_hetero.layers.attempts.facts_of`)."""
    target = probe.target or "another tenant"
    claim = facts.claim  # a data attempt's: None for the others
    return {
        "mount-target-claim": f"tenant {tenant} could mount tenant {target}'s claim {claim} "
                              f"({attempt['action']}: {attempt['outcome']})",
        "bind-target-volume": f"tenant {tenant} could bind the volume {facts.volume} of tenant {target}'s "
                              f"claim {claim} to a claim of its own ({attempt['action']})",
        "mount-target-claim-by-name": f"tenant {tenant} could mount a claim named {claim} in its own "
                                      f"namespace ({attempt['action']}: {attempt['outcome']})",
        "read-target-secret": f"tenant {tenant} could read tenant {target}'s Secret ({attempt['action']}; keys "
                              f"{facts.returned})",
        "pull-with-target-secret": f"tenant {tenant} could create a pod naming tenant {target}'s pull Secret "
                                   f"{facts.pull_secret} ({attempt['action']}: {attempt['outcome']})",
        "pull-with-target-secret-by-name": f"tenant {tenant}: {attempt['message'] or attempt['action']}: if it is "
                                           f"a copy of tenant {target}'s, tenant {tenant} pulls {target}'s images",
    }[attempt["role"]]


def proven(probe: GovernanceProbe, attempts: list[AttemptDict]) -> None:
    """Raise LayerBroken ``configuration`` when a Service (``services``) or claim (``claims``) the probe names
    does not exist in the target's namespace (a misspelt name left untested while the rest passed), naming the
    field; ``probe_not_run`` when a network or data probe made no attempt at all (every address unreachable by
    its control too): nothing was proven either way. Called after every attempt was judged: a breach wins."""
    if probe.kind not in ("network-isolation", "data-isolation"):
        return
    absent = [(a, facts) for a in attempts if a["outcome"] == "not-attempted" and (facts := facts_of(a)).absent]
    if absent:
        field, present = absent[0][1].absent, absent[0][1].present
        raise LayerBroken(f"probe {probe.name}: {'; '.join(dict.fromkeys(a['message'] for a, _ in absent))}: "
                          f"spec.governance.probes[{probe.name}].{field} names what tenant {probe.target} does not "
                          "have, so that part of the boundary was not tested; correct the name"
                          + (f" (its {field}: {', '.join(present) or 'none'})" if present is not None else ""),
                          "configuration")
    if all(a["outcome"] == "not-attempted" for a in attempts):
        why = "; ".join(dict.fromkeys(a["message"] for a in attempts)) or "nothing to attempt"
        raise LayerBroken(f"probe {probe.name} made no attempt, so the boundary is not proven: {why}",
                          "probe_not_run")
