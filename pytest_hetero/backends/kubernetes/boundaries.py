"""Network and data boundaries of a tenant on Kubernetes: the attempts of ``network-isolation`` and
``data-isolation`` probes (:mod:`.governance` runs them; :mod:`pytest_hetero.layers.boundaries` judges).

``network-isolation`` (as A; ``target`` B and/or ``egress`` addresses). The observer reads B's Services
(``services``, else every one of B's namespace): each ClusterIP:port [``reach-target-service``] and each ready
endpoint address:port of their EndpointSlices [``reach-target-pod``]; each ``egress`` host:port is
[``reach-egress``]. One pod of A, in A's namespace and on the resource's pool, tries a TCP connection to every
address (:data:`CONNECT`, :data:`CONNECT_S` seconds each, the first after :data:`SETTLE_S`; a refused or
unreachable one again for :data:`SETTLE_S`: the time an enforcer may take to learn a new pod's IP). A refusal
proves nothing when the address does not answer anyone, so each address is also tried by a **control** pod
from where it must be reachable: B's own namespace, as tenant B, for B's addresses; the gate's namespace, as
the gate, for egress addresses. An address its control could not reach is ``not-attempted`` (scope not
proven). Each attempt names the NetworkPolicies that isolate it (:func:`isolating`: the policies of A's
namespace selecting the probe pod for Egress, those of the target pod's namespace selecting it for Ingress),
read by the observer; the probe's own words (``timed out after 3 s``, ``[Errno 111] Connection refused``) are
its message.

``data-isolation`` (as A, ``target`` B). Per claim: a Pod in B's namespace mounting it
[``mount-target-claim``] (RBAC must refuse), a claim of A naming the PersistentVolume bound to it
(``volumeName``) [``bind-target-volume``] (the PV controller must leave it Pending: ``volume "x" already
bound to a different claim.``) and a Pod in A's namespace naming it
[``mount-target-claim-by-name``] (claims are namespace-local: the scheduler must leave it Unschedulable,
``persistentvolumeclaim "x" not found``; not attempted when A has a claim of that name). Per Secret: get
it in B's namespace [``read-target-secret``] (only its key names are kept when the read succeeds). Per
pull Secret: a Pod in B's namespace naming it [``pull-with-target-secret``] and one in A's namespace
naming it [``pull-with-target-secret-by-name``], whose kubelet must say it cannot retrieve it (event
``FailedToRetrieveImagePullSecret``, the kubelet's own words kept). Every pod is created with the tenant's
token, runs ``true`` and is deleted by the observer.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.kubernetes import tenancy
from pytest_hetero.backends.kubernetes.manifests import (
    ClaimList,
    ClaimManifest,
    EndpointSliceList,
    LabelSelectorJSON,
    NetworkPolicyList,
    PodList,
    PodManifest,
    PortJSON,
    ServedClaim,
    ServedNetworkPolicy,
    ServedService,
    ServiceList,
    Volume,
)
from pytest_hetero.backends.kubernetes.objects import SlicePort, parse_event, parse_pod, parse_ports, parse_slice
from pytest_hetero.backends.protocol import Attempt, AttemptFacts
from pytest_hetero.declared import resolve
from pytest_hetero.matrix.model import Resource, Tenant
from pytest_hetero.pending.model import ReasonRef

if TYPE_CHECKING:  # governance imports this module (lazily); the annotation only names its run object
    from pytest_hetero.backends.kubernetes.governance import _Probe

CONNECT_S = 3.0
"""Seconds each TCP connection attempt may take before it counts as ``timeout`` (a dropped SYN)."""
SETTLE_S = 2.0
"""Seconds a probe or control pod waits before its first packet, and a refused or unreachable connection is
tried again (every 0.2 s) before it counts: a policy agent that learns a new pod's IP from the apiserver
(kube-router: the IP is published once the pod's containers run) neither filters nor admits the pod's first
packets as its policies say for a moment (a probe's connection got through 2 times in 4 without the wait,
0 in 4 with it, on the real node), and would make a control look refused."""
CONNECT = """
import errno, socket, sys, time
wait, settle = float(sys.argv[1]), float(sys.argv[2])
time.sleep(settle)  # a policy agent learns this new pod's IP from the apiserver: no packet before it could
for address in sys.argv[3:]:
    host, _, port = address.rpartition(":")
    start = time.monotonic()
    while True:
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=wait).close()
            outcome, why = "connected", "connected"
        except socket.timeout:
            outcome, why = "timeout", "timed out after %g s" % wait
        except ConnectionRefusedError as exc:
            outcome, why = "refused", str(exc)
        except OSError as exc:
            outcome = "unreachable" if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH) else "error"
            why = str(exc)
        if outcome not in ("refused", "unreachable") or time.monotonic() - start >= settle:
            break
        time.sleep(0.2)
    print("NET", address, outcome, "%.3f" % (time.monotonic() - start), why, flush=True)
print("END", flush=True)
"""
"""Python program of the probe and control pods (argv: :data:`CONNECT_S`, :data:`SETTLE_S`, addresses):
``NET <address> <connected|timeout|refused|unreachable|error> <seconds> <the socket's words>`` per address
(the last try's), then ``END`` (a truncated log is recognised)."""
RUNNER = 'py="$(command -v python3 || command -v python)" || { echo "NOTOOL no python3 in the image"; exit 0; }; ' \
         'exec "$py" -c "$0" "$@"'
"""Shell line that runs :data:`CONNECT` with the image's Python (``NOTOOL`` when it has none)."""
PULL_EVENT = "FailedToRetrieveImagePullSecret"
"""The kubelet's event reason when a pod names an image pull Secret it cannot read in the pod's namespace."""


def _plain(res: Resource) -> Resource:
    """``res`` without its accelerator requests (a probe pod needs a place on the pool, not devices)."""
    basic = {k: v for k, v in res.requests.items() if k not in res.device_resources}
    return dataclasses.replace(res, requests=basic or {"cpu": "10m"},
                               limits={k: v for k, v in res.limits.items() if k not in res.device_resources})


def _pod(run: _Probe, role: str, namespace: str, command: list[str]) -> PodManifest:
    body = run.body(role, namespace, _plain(run.step.resource), "pod")
    body["spec"]["restartPolicy"] = "Never"
    body["spec"]["containers"][0]["command"] = command
    return body


def _json(call: Any, *args: Any, **kwargs: Any) -> Any:
    """The body ``call`` (an official-client read or list call) answers, as ``json.loads`` decodes it: an
    object (or a list's ``items``) the caller reads through the parser of its kind."""
    resp: Any = call(*args, _preload_content=False, _request_timeout=kc.API_TIMEOUT_S, **kwargs)
    return json.loads(resp.data)


# ------------------------------------------------------------------------------------------- network --

class Requirement(msgspec.Struct, frozen=True, kw_only=True):
    """One ``matchExpressions[]`` entry of a LabelSelector: ``key``, ``operator`` (In, NotIn, Exists,
    DoesNotExist; both required by the API), ``values`` (None when absent)."""

    key: str
    operator: str
    values: tuple[str, ...] | None = None


class Selector(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A LabelSelector (``matchLabels``, ``matchExpressions``; None where absent); both empty selects
    everything."""

    match_labels: dict[str, str] | None = None
    match_expressions: tuple[Requirement, ...] | None = None


def parse_selector(raw: LabelSelectorJSON | None) -> Selector:
    """A LabelSelector from its JSON (None or {}: the empty selector). ValueError
    (``msgspec.ValidationError``, naming the field's ``$.path``) when it is not shaped as the API serves it."""
    return msgspec.convert(raw or {}, Selector)


class PolicyPort(msgspec.Struct, frozen=True, kw_only=True, rename={"end_port": "endPort"}):
    """One ``ports[]`` entry of a NetworkPolicy rule: ``protocol`` (``TCP`` when absent), ``port`` (a number,
    a named port, or None: every port), ``end_port`` (``endPort``: the range's end, None or 0 when absent)."""

    protocol: str | None = "TCP"
    port: int | str | None = None
    end_port: int | None = None


class IngressRule(msgspec.Struct, frozen=True, kw_only=True, rename={"peers": "from"}):
    """One ``ingress[]`` rule: its ``peers`` (``from``; a rule with peers admits only them, never read field by
    field) and its ``ports`` (None or empty: every port)."""

    peers: tuple[dict[str, object], ...] | None = None
    ports: tuple[PolicyPort, ...] | None = None


class EgressRule(msgspec.Struct, frozen=True, kw_only=True, rename={"peers": "to"}):
    """One ``egress[]`` rule: its ``peers`` (``to``) and its ``ports``, as :class:`IngressRule`."""

    peers: tuple[dict[str, object], ...] | None = None
    ports: tuple[PolicyPort, ...] | None = None


PolicyRule = IngressRule | EgressRule
"""One ``ingress[]``/``egress[]`` rule of a NetworkPolicy."""


class _PolicySpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A NetworkPolicy's ``spec`` as served: ``podSelector`` (always served; null read as ``{}``),
    ``policyTypes``, ``ingress`` and ``egress`` rules (None where absent)."""

    pod_selector: Selector | None
    policy_types: tuple[str, ...] | None = None
    ingress: tuple[IngressRule, ...] | None = None
    egress: tuple[EgressRule, ...] | None = None


class _Named(msgspec.Struct, frozen=True, kw_only=True):
    """A namespaced object's ``metadata`` as far as its reference goes (both always set by the apiserver)."""

    name: str
    namespace: str


class _ServedPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """A ``networking.k8s.io/v1`` NetworkPolicy as served (``metadata`` and ``spec`` always)."""

    metadata: _Named
    spec: _PolicySpec


@dataclass(frozen=True)
class NetworkPolicy:
    """A ``networking.k8s.io/v1`` NetworkPolicy: ``ref`` (``namespace/name``), ``types`` (``policyTypes``;
    absent: Ingress, plus Egress when it has egress rules), ``selector`` (``podSelector``), ``ingress`` and
    ``egress`` rules."""

    ref: str
    types: tuple[str, ...]
    selector: Selector
    ingress: tuple[IngressRule, ...]
    egress: tuple[EgressRule, ...]


def parse_policy(raw: ServedNetworkPolicy) -> NetworkPolicy:
    """A NetworkPolicy from its JSON (see :class:`NetworkPolicy`). ValueError (``msgspec.ValidationError``,
    naming the field's ``$.path``) without ``metadata.namespace``, ``metadata.name`` or ``spec.podSelector``
    (the apiserver always serves them), or with a field not shaped as the API serves it."""
    served = msgspec.convert(raw, _ServedPolicy)
    spec = served.spec
    egress = spec.egress or ()
    return NetworkPolicy(ref=f"{served.metadata.namespace}/{served.metadata.name}",
                         types=spec.policy_types or ("Ingress", *(("Egress",) if egress else ())),
                         selector=spec.pod_selector or Selector(), ingress=spec.ingress or (), egress=egress)


def selects(selector: Selector, labels: dict[str, str]) -> bool:
    """True when the LabelSelector ``selector`` (``matchLabels``, ``matchExpressions`` with In, NotIn,
    Exists, DoesNotExist; the empty selector selects everything) matches ``labels``."""
    if any(labels.get(k) != v for k, v in (selector.match_labels or {}).items()):
        return False
    for expr in selector.match_expressions or ():
        present = expr.key in labels
        if expr.operator in ("In", "NotIn"):
            ok = present and labels[expr.key] in (expr.values or ())
            if not (ok if expr.operator == "In" else not ok):
                return False
        elif expr.operator not in ("Exists", "DoesNotExist") or present != (expr.operator == "Exists"):
            return False  # an operator the API does not know selects nothing
    return True


def _opens(rule: PolicyRule, port: int | None) -> bool:
    """True when one ``ingress``/``egress`` rule admits every peer (no ``from``/``to``) on every port (no
    ``ports``) or on TCP ``port`` (a numeric port, with ``endPort`` its range; a named port is not resolved)."""
    if rule.peers:
        return False
    if not rule.ports:
        return True
    for p in rule.ports:
        if p.protocol != "TCP":
            continue
        if p.port is None:
            return True
        if port is not None and isinstance(p.port, int) and p.port <= port <= int(p.end_port or p.port):
            return True
    return False


def opening(policies: list[NetworkPolicy], labels: dict[str, str], direction: str, port: int | None = None
            ) -> list[str]:
    """``namespace/name`` of each NetworkPolicy selecting a pod with ``labels`` for ``direction`` with a rule that
    admits every peer (on ``port``, when given; see :func:`_opens`): traffic the pod's policies allow."""
    out = []
    for pol in policies:
        rules = pol.ingress if direction == "Ingress" else pol.egress
        if direction in pol.types and selects(pol.selector, labels) and any(_opens(r, port) for r in rules):
            out.append(pol.ref)
    return out


def isolating(policies: list[NetworkPolicy], labels: dict[str, str], direction: str, port: int | None = None
              ) -> list[str]:
    """``namespace/name`` of each NetworkPolicy (of one namespace) that selects a pod with
    ``labels`` for ``direction`` (``Ingress`` or ``Egress``): such a pod accepts (sends) only what one of
    them allows. ``policyTypes`` absent means Ingress, plus Egress when the policy has egress rules
    (networking.k8s.io/v1 semantics). [] when one of them admits every peer (on ``port``: :func:`opening`):
    policies are additive, so that traffic is allowed, not isolated (an ``ingress: [{}]`` rule)."""
    if opening(policies, labels, direction, port):
        return []
    return [pol.ref for pol in policies if direction in pol.types and selects(pol.selector, labels)]


def _policies(api: client.ApiClient, namespace: str) -> list[NetworkPolicy]:
    net = client.NetworkingV1Api(api)
    listed: NetworkPolicyList = _json(net.list_namespaced_network_policy, namespace)
    return [parse_policy(p) for p in listed["items"]]


@dataclass(frozen=True)
class Target:
    """One address to try: ``role`` (``reach-target-pod``, ``reach-target-service``, ``reach-egress``),
    ``address`` (``host:port``), the ``service`` and ``pod`` behind it (None for egress), and the
    ``labels`` of the pods that receive what is sent to it."""

    role: str
    address: str
    service: str | None
    pod: str | None
    labels: list[dict[str, str]]


@dataclass(frozen=True)
class Service:
    """A ``core/v1`` Service: ``name``, ``cluster_ip`` (``spec.clusterIP``; ``None`` text for a headless one,
    None when absent) and its ``ports``."""

    name: str
    cluster_ip: str | None
    ports: list[SlicePort]


class _Name(msgspec.Struct, frozen=True, kw_only=True):
    """An object's ``metadata`` as far as its ``name`` goes (always set by the apiserver)."""

    name: str


class _ServiceSpec(msgspec.Struct, frozen=True, kw_only=True, rename={"cluster_ip": "clusterIP"}):
    """A served Service's ``spec``: ``clusterIP`` (``None`` text for a headless one) and ``ports`` (None where
    absent)."""

    cluster_ip: str | None = None
    ports: list[PortJSON] | None = None


class _ServedService(msgspec.Struct, frozen=True, kw_only=True):
    """A ``core/v1`` Service as served (``metadata`` with its name, and ``spec``, always served)."""

    metadata: _Name
    spec: _ServiceSpec


def parse_service(raw: ServedService) -> Service:
    """A Service from its JSON. ValueError (``msgspec.ValidationError``, naming the field's ``$.path``) without
    ``metadata.name`` or ``spec``, or with a field not shaped as the API serves it."""
    served = msgspec.convert(raw, _ServedService)
    return Service(name=served.metadata.name, cluster_ip=served.spec.cluster_ip, ports=parse_ports(served.spec.ports))


def _targets(run: _Probe, target: Tenant) -> tuple[list[Target], list[Attempt]]:
    """The addresses of ``target``'s Services (module docstring), and not-attempted attempts for Services
    that are absent or have no ClusterIP and no endpoint."""
    core = client.CoreV1Api(run.session.api)
    disc = client.DiscoveryV1Api(run.session.api)
    ns = target.namespace
    services: ServiceList = _json(core.list_namespaced_service, ns)
    found = {s.name: s for s in (parse_service(i) for i in services["items"])}
    wanted = list(run.probe.services) or sorted(found)
    out: list[Target] = []
    missing: list[Attempt] = []
    listed: PodList = _json(core.list_namespaced_pod, ns)
    pods = {p.name: p.labels for p in (parse_pod(i) for i in listed["items"])}
    for name in wanted:
        svc = found.get(name)
        if svc is None:
            missing.append(Attempt("reach-target-service", f"reach Service {ns}/{name}", run.identity.subject,
                                   "not-attempted", message=f"Service {ns}/{name} does not exist",
                                   facts={"service": name, "absent": "services", "present": sorted(found)[:20]}))
            continue
        sliced: EndpointSliceList = _json(disc.list_namespaced_endpoint_slice, ns,
                                          label_selector=f"kubernetes.io/service-name={name}")
        slices = [parse_slice(i) for i in sliced["items"]]
        backends = []
        for sl in slices:
            ports = [p for p in sl.ports if p.protocol == "TCP" and p.port]
            for ep in sl.endpoints:
                if ep.ready is False:
                    continue
                backends.append(ep.pod)
                out += [Target("reach-target-pod", _join(addr, p.port), name, ep.pod, [pods.get(ep.pod or "", {})])
                        for addr in ep.addresses for p in ports]
        if svc.cluster_ip and svc.cluster_ip != "None":
            out += [Target("reach-target-service", _join(svc.cluster_ip, p.port), name, None,
                           [pods.get(b or "", {}) for b in backends])
                    for p in svc.ports if p.protocol == "TCP"]
        elif not backends:
            missing.append(Attempt("reach-target-service", f"reach Service {ns}/{name}", run.identity.subject,
                                   "not-attempted", message=f"Service {ns}/{name} has no ClusterIP and no ready "
                                                            "endpoint"))
    return out, missing


def _join(host: str, port: int | None) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _connect(run: _Probe, identity: tenancy.Identity, role: str, namespace: str, addresses: list[str]
             ) -> tuple[PodManifest, str | None]:
    """Create (as ``identity``) the pod that tries ``addresses``: ``(its manifest, None)``, or ``(manifest,
    the refusal's words)`` when it could not be created."""
    body = _pod(run, role, namespace, ["/bin/sh", "-c", RUNNER, CONNECT, str(CONNECT_S), str(SETTLE_S),
                                         *addresses])
    error = tenancy.create(identity, body, run.created)
    return body, (None if error is None else tenancy.refused(role, "", identity, error).message)


class Connection(TypedDict):
    """What a connecting pod said of one address (its ``NET`` line): ``outcome`` (``connected``, ``timeout``,
    ``refused``, ``unreachable``, ``error``; ``not-run`` when the pod did not report it), ``seconds`` (the
    last try's; absent for ``not-run``), ``detail`` (the socket's words, or why it was not run)."""

    outcome: str
    seconds: NotRequired[float]
    detail: str


@dataclass
class Report:
    """What one connecting pod reported: the ``node`` it ran on, the pod's ``outcome`` (``completed``,
    ``refused``, ``pending``…), ``why`` it did not report (empty when it did), and one :class:`Connection`
    per address it reported."""

    node: str | None
    outcome: str
    why: str
    connections: dict[str, Connection]


def _results(run: _Probe, body: PodManifest, error: str | None, addresses: list[str]) -> Report:
    """What the connecting pod ``body`` reported (see :class:`Report`)."""
    if error is not None:
        return Report(node=None, outcome="refused", why=error, connections={})
    timeout = (run.probe.timeout_s or run.step.timeout_s) + (CONNECT_S + SETTLE_S) * len(addresses)
    outcome, pods, _, _ = tenancy.observe(run.session.api, run.session.served(), body, timeout, want="completed")
    node = next((p.node_name for p in map(parse_pod, pods) if p.node_name), None)
    got = Report(node=node, outcome=outcome, why="", connections={})
    if outcome != "completed":
        got.why = f"the pod {body['metadata']['name']} did not run to its end ({outcome})"
        return got
    from pytest_hetero.backends.kubernetes.startup import read_logs

    log = read_logs(client.CoreV1Api(run.session.api), body["metadata"]["namespace"], body["metadata"]["name"])
    for line in log.splitlines():
        parts = line.split(" ", 5)
        if parts[0] == "NET" and len(parts) >= 5:
            got.connections[parts[1]] = {"outcome": parts[2], "seconds": float(parts[3]),
                                         "detail": parts[4] if len(parts) == 5 else f"{parts[4]} {parts[5]}"}
        elif parts[0] == "NOTOOL":
            got.why = line[7:]
    if "END" not in log.splitlines() and not got.why:
        got.why = f"the log of {body['metadata']['name']} is truncated"
    return got


def network(run: _Probe, tenant: Tenant | None) -> None:
    """The ``network-isolation`` attempts (module docstring), appended to ``run.attempts``."""
    assert tenant is not None  # the matrix requires 'as'  # noqa: S101
    target = run.step.matrix.tenant(run.probe.target) if run.probe.target else None
    wanted: list[Target] = []
    if target is not None:
        found, missing = _targets(run, target)
        wanted += found
        run.attempts += missing
    wanted += [Target("reach-egress", a, None, None, []) for a in run.probe.egress]
    if not wanted:
        return
    mine = [w.address for w in wanted if w.role != "reach-egress"]
    egress = [w.address for w in wanted if w.role == "reach-egress"]
    probe, probe_error = _connect(run, run.identity, "connect", tenant.namespace, [w.address for w in wanted])
    controls: list[tuple[str, list[str], PodManifest | None, str | None]] = []
    if mine and target is not None:
        try:
            owner = tenancy.act_as(run.session.api, target, run.session.namespace)
        except Exception as exc:  # noqa: BLE001 - a control that cannot run leaves the addresses unproven
            controls.append((target.namespace, mine, None, f"no token for tenant {target.name}: {exc}"))
        else:
            controls.append((target.namespace, mine, *_connect(run, owner, "control", target.namespace, mine)))
    if egress:
        gate = tenancy.act_as(run.session.api, None, run.session.namespace)
        controls.append((run.session.namespace, egress, *_connect(run, gate, "control", run.session.namespace, egress)))
    seen = _results(run, probe, probe_error, [w.address for w in wanted])
    checked: dict[str, tuple[str, Connection]] = {}
    for ns, addresses, body, error in controls:
        got = _results(run, body, error, addresses) if body else Report(None, "refused", error or "", {})
        checked.update({a: (ns, got.connections.get(a) or {"outcome": "not-run", "detail": got.why})
                        for a in addresses})
    mine_policies = (_policies(run.session.api, tenant.namespace), probe["metadata"]["labels"])
    theirs = _policies(run.session.api, target.namespace) if target is not None else []
    for want in wanted:
        run.attempts.append(_reach(run, tenant, target, want, seen, checked[want.address], mine_policies, theirs))


def _reach(run: _Probe, tenant: Tenant, target: Tenant | None, want: Target, seen: Report,
           control: tuple[str, Connection], mine: tuple[list[NetworkPolicy], dict[str, str]],
           theirs: list[NetworkPolicy]) -> Attempt:
    """One address's attempt: ``allowed`` (connected), ``refused`` (timeout, refused, unreachable, error),
    ``not-attempted`` (the probe pod did not report it, or its control did not connect)."""
    address = want.address
    what = (f"Service {target.namespace}/{want.service}" if want.role == "reach-target-service" and target else
            f"pod {target.namespace}/{want.pod} behind Service {want.service}" if target and want.pod else
            "an address outside the allowed egress")
    action = f"connect to {address} ({what}) from a pod of tenant {tenant.name} in namespace {tenant.namespace}"
    port = int(address.rpartition(":")[2])
    ingress = sorted({p for labels in want.labels for p in isolating(theirs, labels, "Ingress", port)})
    opened = sorted({p for labels in want.labels for p in opening(theirs, labels, "Ingress", port)}
                    if want.role != "reach-egress" else set()) + opening(*mine, "Egress", port)
    egress_policies = isolating(*mine, "Egress", port)
    where, ctl = control
    facts: AttemptFacts = {"address": address, "target": what, "node": seen.node,
                           "policies": {"egress": egress_policies, "ingress": ingress, "allowing": opened},
                           "control": {"from_namespace": where, **ctl}}
    got = seen.connections.get(address)
    if got is None:
        return Attempt(want.role, action, run.identity.subject, "not-attempted",
                       message=f"the probe pod did not report it: {seen.why or seen.outcome}",
                       facts=facts)
    facts["result"], facts["seconds"] = got["outcome"], got["seconds"]
    if got["outcome"] == "connected":
        return Attempt(want.role, action, run.identity.subject, "allowed", message=got["detail"], facts=facts)
    if ctl["outcome"] != "connected":
        return Attempt(want.role, action, run.identity.subject, "not-attempted",
                       message=f"{address} did not answer the control from namespace {where} either "
                               f"({ctl['outcome']}: {ctl['detail']}): a refusal proves nothing", facts=facts)
    reason: ReasonRef = {"source": "probe pod", "code": f"network_{got['outcome']}", "message": got["detail"]}
    return Attempt(want.role, action, run.identity.subject, "refused", [reason], got["detail"], got["seconds"],
                   facts)


# ---------------------------------------------------------------------------------------------- data --

def data(run: _Probe, tenant: Tenant | None) -> None:
    """The ``data-isolation`` attempts (module docstring), appended to ``run.attempts``."""
    target = run.step.matrix.tenant(str(run.probe.target))
    assert tenant is not None  # the matrix requires 'as' and 'target'  # noqa: S101
    core = client.CoreV1Api(run.session.api)
    claims: ClaimList = _json(core.list_namespaced_persistent_volume_claim, tenant.namespace)
    own_claims = {c["metadata"]["name"] for c in claims["items"]}
    for claim in run.probe.claims:
        volume: Volume = {"name": "data", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
        into = _pod(run, "claim", target.namespace, ["/bin/sh", "-c", "true"])
        into["spec"]["volumes"] = [volume]
        into["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data", "readOnly": True}]
        run.attempts.append(_claim(run.submit("mount-target-claim", into), claim))
        run.attempts.append(_bind(run, tenant, target, claim))
        if claim in own_claims:
            run.attempts.append(Attempt("mount-target-claim-by-name", f"mount claim {claim} from namespace "
                                        f"{tenant.namespace}", run.identity.subject, "not-attempted",
                                        message=f"tenant {tenant.name} has a claim of the same name"))
            continue
        mine = _pod(run, "claim-by-name", tenant.namespace, ["/bin/sh", "-c", "true"])
        mine["spec"]["volumes"] = [volume]
        mine["spec"]["containers"][0]["volumeMounts"] = into["spec"]["containers"][0]["volumeMounts"]
        run.attempts.append(_claim(run.submit("mount-target-claim-by-name", mine), claim))
    theirs = client.CoreV1Api(run.identity.api)
    for secret in run.probe.secrets:
        run.attempts.append(run.read("read-target-secret", f"get Secret {secret} in namespace {target.namespace}",
                                     lambda s=secret: sorted(theirs.read_namespaced_secret(
                                         s, target.namespace, _request_timeout=kc.API_TIMEOUT_S).data or {})))
    for secret in run.probe.pull_secrets:
        into = _pod(run, "pull", target.namespace, ["/bin/sh", "-c", "true"])
        into["spec"]["imagePullSecrets"] = [{"name": secret}]
        run.attempts.append(_pull_secret(run.submit("pull-with-target-secret", into), secret))
        run.attempts.append(_pull_by_name(run, tenant, secret))


@dataclass(frozen=True)
class Claim:
    """A ``core/v1`` PersistentVolumeClaim: ``spec`` volumeName (``volume``), accessModes,
    storageClassName (``storage_class``), ``resources.requests``; ``status.phase`` (None where absent)."""

    volume: str | None
    access_modes: list[str]
    storage_class: str | None
    requests: dict[str, str]
    phase: str | None


class _ClaimResources(msgspec.Struct, frozen=True, kw_only=True):
    """A claim's ``spec.resources``: its ``requests`` (resource → quantity; None where absent)."""

    requests: dict[str, str] | None = None


class _ClaimSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A served claim's ``spec``: ``volumeName``, ``accessModes``, ``storageClassName`` (None where absent) and
    ``resources`` (always: the gate writes it, the apiserver serves it)."""

    volume_name: str | None = None
    access_modes: list[str] | None = None
    storage_class_name: str | None = None
    resources: _ClaimResources


class _ClaimStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A served claim's ``status``: its ``phase`` (None where absent)."""

    phase: str | None = None


class _ServedClaim(msgspec.Struct, frozen=True, kw_only=True):
    """A PersistentVolumeClaim as served (``spec`` and ``status`` always served)."""

    spec: _ClaimSpec
    status: _ClaimStatus


def parse_claim(raw: ServedClaim) -> Claim:
    """A PersistentVolumeClaim from its JSON. ValueError (``msgspec.ValidationError``, naming the field's
    ``$.path``) without ``spec``, ``spec.resources`` or ``status``, or with a field not shaped as the API serves
    it."""
    served = msgspec.convert(raw, _ServedClaim)
    spec = served.spec
    return Claim(volume=spec.volume_name, access_modes=list(spec.access_modes or []),
                 storage_class=spec.storage_class_name, requests=dict(spec.resources.requests or {}),
                 phase=served.status.phase)


def _bind(run: _Probe, tenant: Tenant, target: Tenant, claim: str) -> Attempt:
    """A claim of A in A's namespace naming, by ``volumeName``, the PersistentVolume bound to B's ``claim``
    (read by the observer): the PV controller must leave it Pending (``FailedBinding``: the volume is
    bound to a different claim); ``placed`` when A's claim bound it."""
    role = "bind-target-volume"
    core = client.CoreV1Api(run.session.api)
    try:
        theirs = _json(core.read_namespaced_persistent_volume_claim, claim, target.namespace)
    except ApiException as exc:
        return Attempt(role, f"bind the volume of claim {target.namespace}/{claim}", run.identity.subject,
                       "not-attempted", message=f"claim {target.namespace}/{claim} cannot be read: HTTP {exc.status}"
                       + (" (it does not exist)" if exc.status == 404 else ""),
                       facts={"claim": claim, **({"absent": "claims"} if exc.status == 404 else {})})
    spec = parse_claim(theirs)
    volume = spec.volume
    if not volume:
        return Attempt(role, f"bind the volume of claim {target.namespace}/{claim}", run.identity.subject,
                       "not-attempted", message=f"claim {target.namespace}/{claim} is bound to no volume")
    s = run.session
    name = kc.dns_name("hetero-gov", run.probe.name, "bind", uuid.uuid4().hex[:5])
    body: ClaimManifest = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
        "name": name, "namespace": tenant.namespace, "annotations": kc.created_annotations(),
        "labels": kc.labels(s.settings.run_id, s.owner, "governance", matrix=run.step.matrix.name,
                            resource=run.step.resource.name, probe=name)},
        "spec": {"accessModes": spec.access_modes or ["ReadWriteOnce"], "volumeName": volume,
                 "storageClassName": spec.storage_class or "",
                 "resources": {"requests": spec.requests or {"storage": "1Mi"}}}}
    action = f"create PersistentVolumeClaim {name} in namespace {tenant.namespace} for volume {volume}"
    facts: AttemptFacts = {"claim": claim, "volume": volume}
    try:
        client.CoreV1Api(run.identity.api).create_namespaced_persistent_volume_claim(
            tenant.namespace, body, _request_timeout=kc.API_TIMEOUT_S)  # type: ignore[arg-type]  # a manifest dict
    except Exception as exc:  # noqa: BLE001 - the refusal is the probe's answer
        return _claim(tenancy.refused(role, action, run.identity, exc), claim)
    run.created.add("pvc", tenant.namespace, name)
    start = time.monotonic()
    deadline = start + (run.probe.timeout_s or run.step.timeout_s)
    while True:
        mine = parse_claim(_json(core.read_namespaced_persistent_volume_claim, name, tenant.namespace))
        if mine.phase == "Bound":
            facts["placed_at"] = time.time()
            return Attempt(role, action, run.identity.subject, "placed", waited_s=time.monotonic() - start,
                           facts=facts)
        said = [e for e in map(parse_event, ks.events_for(run.session.api, tenant.namespace, name))
                if e.reason == "FailedBinding"]
        if said or time.monotonic() >= deadline:
            words = str(said[0].message or "") if said else ""
            reasons: list[ReasonRef] = [{"source": "persistentvolume-controller", "code": "volume_binding",
                                         "message": words}] if said else []
            return Attempt(role, action, run.identity.subject, "pending", reasons, words, time.monotonic() - start,
                           facts)
        time.sleep(tenancy.POLL_S)


def _claim(attempt: Attempt, claim: str) -> Attempt:
    attempt.facts["claim"] = claim
    return attempt


def _pull_secret(attempt: Attempt, secret: str) -> Attempt:
    attempt.facts["pull_secret"] = secret
    return attempt


def _pull_by_name(run: _Probe, tenant: Tenant, secret: str) -> Attempt:
    """A pod of A in A's namespace naming pull Secret ``secret``: ``refused`` with the kubelet's words when it
    reports :data:`PULL_EVENT`; ``allowed`` when the kubelet went on to the image without it (a Secret of that
    name exists in A's namespace); ``pending`` when the kubelet said nothing within the timeout."""
    body = _pod(run, "pull-by-name", tenant.namespace, ["/bin/sh", "-c", "true"])
    body["spec"]["imagePullSecrets"] = [{"name": secret}]
    meta = body["metadata"]
    action = f"create Pod {meta['name']} in namespace {meta['namespace']} naming image pull Secret {secret}"
    error = tenancy.create(run.identity, body, run.created)
    if error is not None:
        return _pull_secret(tenancy.refused("pull-with-target-secret-by-name", action, run.identity, error),
                            secret)
    core = client.CoreV1Api(run.session.api)
    start = time.monotonic()
    deadline = start + (run.probe.timeout_s or run.step.timeout_s)
    synced_at: float | None = None
    facts: AttemptFacts = {"pull_secret": secret, "requests": {}}
    while True:
        events = [parse_event(e) for e in ks.events_for(run.session.api, meta["namespace"], meta["name"])]
        said = [e for e in events if e.reason == PULL_EVENT]
        if said:
            words = str(said[0].message or "")
            facts["node"], facts["event"] = said[0].source_host, PULL_EVENT
            reason: ReasonRef = {"source": "kubelet", "code": "pull_secret_unavailable", "message": words}
            return Attempt("pull-with-target-secret-by-name", action, run.identity.subject, "refused", [reason], words,
                           time.monotonic() - start, facts)
        try:
            pod: Any = core.read_namespaced_pod(meta["name"], meta["namespace"], _request_timeout=kc.API_TIMEOUT_S)
        except ApiException:
            pod = None
        states = [s.state for s in ((pod.status.container_statuses if pod and pod.status else None) or [])]
        if synced_at is None and any(s.running or s.terminated or (s.waiting and s.waiting.reason not in
                                                                    (None, "ContainerCreating")) for s in states):
            synced_at = time.monotonic()  # the kubelet went past the pull: its event, if any, is on its way
        now = time.monotonic()
        if (synced_at is not None and now - synced_at > 5.0) or now >= deadline:
            break
        time.sleep(tenancy.POLL_S)
    facts["events"] = [f"{e.reason}: {e.message}" for e in events][-10:]
    outcome = "allowed" if synced_at is not None else "pending"
    return Attempt("pull-with-target-secret-by-name", action, run.identity.subject, outcome,
                   message="" if synced_at is None else f"the kubelet used a pull Secret named {secret} in namespace "
                   f"{tenant.namespace} (no {PULL_EVENT} event)", waited_s=time.monotonic() - start, facts=facts)


resolve(__name__)
