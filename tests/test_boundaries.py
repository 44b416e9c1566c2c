"""Network and data boundary probes (``network-isolation``, ``data-isolation``), without a cluster: their
matrix keys load and are checked (file, line, field and the fix), the NetworkPolicy selection the probe
names policies with follows networking.k8s.io/v1 (``podSelector``, ``policyTypes`` defaults), and the
verdicts of refusals an enforcer would produce (none runs on this kernel). The probes themselves run
against the real node in tests/kubernetes/test_realnode_boundaries.py."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from support import matrix_text

from pytest_hetero.backends.kubernetes.boundaries import (
    NetworkPolicy,
    isolating,
    opening,
    parse_policy,
    parse_selector,
    selects,
)
from pytest_hetero.backends.kubernetes.manifests import LabelSelectorJSON, NetworkPolicySpec
from pytest_hetero.backends.protocol import AttemptDict, PolicyFacts
from pytest_hetero.errors import MatrixInvalid
from pytest_hetero.evidence.records import Kind
from pytest_hetero.layers.base import LayerBroken, LayerFailed
from pytest_hetero.layers.boundaries import judge, proven
from pytest_hetero.matrix import load_matrix
from pytest_hetero.matrix.governance import DEFAULT_REASONS
from pytest_hetero.matrix.model import GovernanceProbe

pytestmark = pytest.mark.usefixtures("outside_inputs")

TENANTS = [{"name": "a", "namespace": "team-a", "service_account": "runner"},
           {"name": "b", "namespace": "team-b", "service_account": "runner"}]


def write(tmp_path: Path, probes: list[dict[str, Any]]) -> Path:
    path = tmp_path / "b.matrix.yaml"
    path.write_text(matrix_text(extra_spec={"governance": {"tenants": TENANTS, "probes": probes}}))
    return path


def problems(tmp_path: Path, probes: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(write(tmp_path, probes))
    return [(p.location.field or "", p.message, p.hint) for p in info.value.problems]


def test_network_and_data_probes_load_with_their_names(tmp_path: Path) -> None:
    matrix = load_matrix(write(tmp_path, [
        {"name": "net", "kind": "network-isolation", "resource": "cpu-host", "as": "a", "target": "b",
         "services": ["model"], "egress": ["203.0.113.10:443", "[2001:db8::1]:80"]},
        {"name": "data", "kind": "data-isolation", "resource": "cpu-host", "as": "a", "target": "b",
         "claims": ["datasets"], "secrets": ["hub-token"], "pull_secrets": ["registry-b"]}]))
    net, data = matrix.probes
    assert (net.kind, net.services, net.egress) == ("network-isolation", ("model",),
                                                    ("203.0.113.10:443", "[2001:db8::1]:80"))
    assert (data.claims, data.secrets, data.pull_secrets) == (("datasets",), ("hub-token",), ("registry-b",))


def test_a_probe_with_nothing_to_reach_or_read_is_an_error_with_the_fix(tmp_path: Path) -> None:
    got = problems(tmp_path, [
        {"name": "n1", "kind": "network-isolation", "resource": "cpu-host", "as": "a"},
        {"name": "n2", "kind": "network-isolation", "resource": "cpu-host", "as": "a", "services": ["m"],
         "egress": ["10.0.0.1:80"]},
        {"name": "d1", "kind": "data-isolation", "resource": "cpu-host", "as": "a", "target": "b"},
        {"name": "d2", "kind": "data-isolation", "resource": "cpu-host", "as": "a", "target": "b",
         "secrets": ["s"], "egress": ["10.0.0.1:80"]}])
    assert got == [
        ("spec.governance.probes[0:n1]", "network-isolation probe 'n1' has nothing to reach",
         "add target: (a tenant whose Services must be unreachable) or egress: [host:port, ...]"),
        ("spec.governance.probes[1:n2].services", "probe 'n2' names services without a target",
         "add target: the tenant whose namespace holds them"),
        ("spec.governance.probes[2:d1]", "data-isolation probe 'd1' names no claim, Secret or pull Secret",
         "add claims:, secrets: or pull_secrets: with names of the target tenant's objects"),
        ("spec.governance.probes[3:d2].egress", "a data-isolation probe does not take 'egress'",
         "data-isolation takes as, claims, expect, image, pull_secrets, secrets, target besides name, kind and "
         "resource")]


def test_an_egress_address_without_a_port_is_refused_by_the_schema(tmp_path: Path) -> None:
    got = problems(tmp_path, [{"name": "n", "kind": "network-isolation", "resource": "cpu-host", "as": "a",
                               "egress": ["203.0.113.10"]}])
    assert [f for f, _, _ in got] == ["spec.governance.probes[0:n].egress[0]"]


def test_label_selectors_follow_the_api() -> None:
    labels = {"app": "model", "tier": "serve"}

    def sel(raw: LabelSelectorJSON | None) -> bool:
        return selects(parse_selector(raw), labels)

    assert sel(None) and sel({})
    assert sel({"matchLabels": {"app": "model"}})
    assert not sel({"matchLabels": {"app": "other"}})
    assert sel({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["serve", "x"]}]})
    assert not sel({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["serve"]}]})
    assert sel({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]})
    assert not sel({"matchExpressions": [{"key": "zone", "operator": "Exists"}]})
    assert not sel({"matchExpressions": [{"key": "tier", "operator": "Bogus"}]})


def test_the_policies_that_isolate_a_pod_per_direction() -> None:
    def pol(name: str, spec: NetworkPolicySpec) -> NetworkPolicy:
        return parse_policy({"metadata": {"namespace": "team-b", "name": name}, "spec": spec})

    policies = [pol("ingress-default", {"podSelector": {}}),  # no policyTypes: Ingress only
                pol("both-by-rules", {"podSelector": {}, "egress": [{"to": [{"podSelector": {}}]}]}),  # Egress too
                pol("egress-only", {"podSelector": {}, "policyTypes": ["Egress"]}),
                pol("other-pods", {"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress"]})]
    labels = {"app": "model"}
    assert isolating(policies, labels, "Ingress") == ["team-b/ingress-default", "team-b/both-by-rules"]
    assert isolating(policies, labels, "Egress") == ["team-b/both-by-rules", "team-b/egress-only"]
    assert isolating(policies, {"app": "db"}, "Ingress") == ["team-b/ingress-default", "team-b/both-by-rules",
                                                             "team-b/other-pods"]


def test_a_policy_that_admits_every_peer_isolates_nothing() -> None:
    """Policies add up: one selecting the pod with a rule without peers (``ingress: [{}]``, or on the port)
    allows that traffic, so no policy isolates it and :func:`opening` names the one that lets it in; a rule
    with peers, on another port or another protocol opens nothing."""
    def pol(name: str, spec: NetworkPolicySpec) -> NetworkPolicy:
        return parse_policy({"metadata": {"namespace": "team-b", "name": name}, "spec": spec})

    deny = pol("deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})
    open_all = pol("looks-like-deny", {"podSelector": {}, "ingress": [{}]})
    on_port = pol("port-8080", {"podSelector": {}, "policyTypes": ["Ingress"],
                                "ingress": [{"ports": [{"port": 8000, "endPort": 8090}]}]})
    peers = pol("own-pods", {"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]})
    udp = pol("udp", {"podSelector": {}, "ingress": [{"ports": [{"port": 8080, "protocol": "UDP"}]}]})
    labels = {"app": "model"}
    assert isolating([deny, open_all], labels, "Ingress", 8080) == []
    assert opening([deny, open_all], labels, "Ingress", 8080) == ["team-b/looks-like-deny"]
    assert isolating([deny, on_port], labels, "Ingress", 8080) == []
    assert isolating([deny, on_port], labels, "Ingress", 9000) == ["team-b/deny", "team-b/port-8080"]
    assert isolating([deny, peers, udp], labels, "Ingress", 8080) == ["team-b/deny", "team-b/own-pods", "team-b/udp"]
    assert isolating([deny, open_all], labels, "Egress", 8080) == ["team-b/deny"]  # an ingress rule opens no egress
    assert opening([pol("all-out", {"podSelector": {}, "egress": [{}]})], labels, "Egress") == ["team-b/all-out"]


def test_a_policy_read_once_into_its_declared_shape() -> None:
    """The NetworkPolicy, Service and claim parsers read the JSON once into declared shapes: null where the API
    omits a field reads as absent (as the field-by-field reads did); a field of the wrong type, or one the
    apiserver always serves missing, is refused at the parse as a ValueError naming its path (before, a wrong
    ``endPort`` passed through and raised ValueError from ``int()`` when a port was compared, with no field
    named; a missing ``podSelector`` raised a bare KeyError)."""
    import msgspec

    from pytest_hetero.backends.kubernetes.boundaries import parse_claim, parse_service

    nulls: Any = {"metadata": {"namespace": "team-b", "name": "n"},
                  "spec": {"podSelector": {"matchLabels": None, "matchExpressions": [
                      {"key": "tier", "operator": "DoesNotExist", "values": None}]},
                      "policyTypes": None, "ingress": [{"from": None, "ports": [{"port": 80, "endPort": None}]}],
                      "egress": None}}
    pol = parse_policy(nulls)
    assert (pol.ref, pol.types) == ("team-b/n", ("Ingress",))
    assert opening([pol], {"app": "x"}, "Ingress", 80) == ["team-b/n"] and opening([pol], {}, "Ingress", 81) == []
    no_labels: Any = {"matchLabels": None}
    assert selects(parse_selector(no_labels), {"a": "b"})
    bad: Any = {"metadata": {"namespace": "team-b", "name": "n"},
                "spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80, "endPort": "90"}]}]}}
    with pytest.raises(ValueError, match=r"\$\.spec\.ingress\[0\]\.ports\[0\]\.endPort") as info:
        parse_policy(bad)
    assert isinstance(info.value, msgspec.ValidationError)
    no_selector: Any = {"metadata": {"namespace": "team-b", "name": "n"}, "spec": {}}
    with pytest.raises(ValueError, match=r"`podSelector` - at `\$\.spec`"):
        parse_policy(no_selector)
    svc: Any = {"metadata": {"name": "model"}, "spec": {"clusterIP": "None", "ports": None}}
    assert (parse_service(svc).name, parse_service(svc).cluster_ip, parse_service(svc).ports) == ("model", "None", [])
    claim: Any = {"metadata": {"name": "c"}, "spec": {"volumeName": "pv-1", "accessModes": None,
                                                      "resources": {"requests": None}}, "status": {}}
    seen = parse_claim(claim)
    assert (seen.volume, seen.access_modes, seen.storage_class, seen.requests, seen.phase) == ("pv-1", [], None, {}, None)
    no_resources: Any = {**claim, "spec": {"volumeName": "pv-1"}}
    with pytest.raises(ValueError, match=r"`resources` - at `\$\.spec`"):
        parse_claim(no_resources)


class _Recorder:
    """The one part of a LayerContext the boundary verdicts use: ``record`` and ``write`` (a record through its
    Kind)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, dict[str, Any]]] = []

    def record(self, kind: str, **data: Any) -> None:
        self.records.append((kind, data))

    def write(self, kind: Kind[Any], data: Mapping[str, object]) -> None:
        self.record(kind.name, **data)


PROBE = GovernanceProbe(name="a-not-to-b", kind="network-isolation", resource="cpu-host", acting_as="a",
                        target="b")
ACCEPTED = DEFAULT_REASONS["network-isolation"]


def _attempt(role: str, outcome: str, code: str = "", policies: PolicyFacts | None = None
             ) -> AttemptDict:
    return {"role": role, "action": "connect to 10.0.0.7:8080 (pod team-b/model behind Service model) from a pod "
            "of tenant a in namespace team-a", "identity": "system:serviceaccount:team-a:hetero", "outcome": outcome,
            "message": "timed out after 3 s", "waited_s": 3.0,
            "reasons": [{"source": "probe pod", "code": code, "message": "timed out after 3 s"}] if code else [],
            "facts": {"address": "10.0.0.7:8080", "target": "pod team-b/model behind Service model", "node": "n1",
                      "policies": policies or {"egress": [], "ingress": [], "allowing": []}}}


# The refusals below are what a running enforcer produces; none can run on this machine's kernel (no
# nft_queue), so their verdicts are checked on the attempt records the engine writes.
def test_a_timeout_passes_and_names_the_policies_that_isolate_the_address() -> None:
    ctx = _Recorder()
    judge(ctx, PROBE, "a", _attempt("reach-target-pod", "refused", "network_timeout",  # type: ignore[arg-type]
                                    {"egress": ["team-a/egress-own"], "ingress": ["team-b/own-only"], "allowing": []}),
          ACCEPTED)
    [(kind, data)] = ctx.records
    assert (kind, data["by"], data["codes"]) == ("governance.refused", "NetworkPolicy team-a/egress-own, "
                                                 "team-b/own-only", ["network_timeout"])
    ctx = _Recorder()  # an egress address: the target's ingress policies do not apply to it
    judge(ctx, PROBE, "a", _attempt("reach-egress", "refused", "network_refused",  # type: ignore[arg-type]
                                    {"egress": ["team-a/egress-own"], "ingress": ["team-b/own-only"], "allowing": []}),
          ACCEPTED)
    assert ctx.records[0][1]["policies"] == ["team-a/egress-own"]


def test_a_refusal_without_a_networkpolicy_passes_and_says_the_gate_cannot_name_it() -> None:
    ctx = _Recorder()
    judge(ctx, PROBE, "a", _attempt("reach-target-pod", "refused", "network_timeout"), ACCEPTED)  # type: ignore[arg-type]
    assert ctx.records[0][1]["by"].startswith("no NetworkPolicy of either namespace isolates it: refused by "
                                              "something the gate cannot read")


def test_a_refusal_the_matrix_does_not_accept_is_unexpected() -> None:
    with pytest.raises(LayerFailed) as info:  # expect.reasons: [network_timeout] (a dropping plugin)
        judge(_Recorder(), PROBE, "a", _attempt("reach-target-pod", "refused", "network_refused"),  # type: ignore[arg-type]
              ("network_timeout",))
    assert info.value.category == "refusal_unexpected"
    assert "reasons ['network_refused']" in info.value.message


def test_traffic_through_a_declared_policy_is_not_enforced_and_without_one_not_governed() -> None:
    with pytest.raises(LayerFailed) as info:
        judge(_Recorder(), PROBE, "a", _attempt("reach-target-pod", "allowed",  # type: ignore[arg-type]
                                                policies={"egress": [], "ingress": ["team-b/own-only"],
                                                          "allowing": []}), ACCEPTED)
    assert info.value.category == "network_policy_not_enforced"
    assert info.value.message.startswith("tenant a's pod connected to 10.0.0.7:8080 (pod team-b/model behind "
                                         "Service model) on node n1 although NetworkPolicy team-b/own-only")
    with pytest.raises(LayerFailed) as info:
        judge(_Recorder(), PROBE, "a", _attempt("reach-egress", "allowed"), ACCEPTED)  # type: ignore[arg-type]
    assert info.value.category == "governance_not_enforced"
    assert info.value.message.endswith("(none of the tenant's namespace selects its pod for Egress)")


def test_a_probe_that_proved_nothing_is_an_error_never_a_pass() -> None:
    attempt: AttemptDict = {**_attempt("reach-target-pod", "not-attempted"),
                            "message": "the control did not connect either"}
    ctx = _Recorder()
    judge(ctx, PROBE, "a", attempt, ACCEPTED)  # type: ignore[arg-type]
    assert ctx.records[0][0] == "scope.not_proven"
    with pytest.raises(LayerBroken) as info:
        proven(PROBE, [attempt])
    assert (info.value.category, info.value.status) == ("probe_not_run", "error")
    proven(PROBE, [attempt, _attempt("reach-egress", "refused", "network_timeout")])  # one proven: no error


def test_an_attempts_facts_not_of_their_shape_are_an_error_of_the_probe_naming_the_field() -> None:
    """The facts the layers read of an attempt are converted once (layers.attempts): a third party's engine that
    writes one of another JSON type (policies as text) gets an error naming it, not a TypeError in a sentence."""
    attempt: AttemptDict = _attempt("reach-target-pod", "allowed")
    attempt["facts"] = {**attempt["facts"], "policies": "team-b/own-only"}  # type: ignore[typeddict-item]
    with pytest.raises(LayerBroken) as info:
        judge(_Recorder(), PROBE, "a", attempt, ACCEPTED)  # type: ignore[arg-type]
    assert (info.value.category, info.value.status) == ("probe_not_run", "error")
    assert "(reach-target-pod) are not of their shape" in info.value.message and "`$.policies`" in info.value.message


def _run_connect(addresses: list[str]) -> list[list[str]]:
    """The probe pods' program run here with this Python: its ``NET`` lines, split."""
    import subprocess
    import sys

    from pytest_hetero.backends.kubernetes.boundaries import CONNECT, CONNECT_S, SETTLE_S

    out = subprocess.run([sys.executable, "-c", CONNECT, str(CONNECT_S), str(SETTLE_S), *addresses],
                         capture_output=True, text=True, timeout=30, check=True).stdout.splitlines()
    assert out[-1] == "END", out
    return [line.split(" ", 4) for line in out[:-1]]


def test_a_refused_connection_is_tried_again_until_the_settle_time_and_a_late_listener_counts_as_connected() -> None:
    """The program waits SETTLE_S before its first packet; then a port nobody listens on is refused after
    SETTLE_S of tries (the socket's words kept), and one whose listener appears 0.6 s after the first try (an
    enforcer that learned the pod's IP late) is connected."""
    import socket
    import threading

    from pytest_hetero.backends.kubernetes.boundaries import SETTLE_S

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = free.getsockname()[1]
    late = socket.socket()
    late.bind(("127.0.0.1", 0))
    port = late.getsockname()[1]
    timer = threading.Timer(SETTLE_S + 0.6, late.listen)
    timer.start()
    began = time.monotonic()
    try:
        got = _run_connect([f"127.0.0.1:{port}", f"127.0.0.1:{closed}"])
    finally:
        timer.cancel()
        late.close()
    (_, addr0, outcome0, secs0, why0), (_, addr1, outcome1, secs1, why1) = got
    assert (addr0, outcome0, why0) == (f"127.0.0.1:{port}", "connected", "connected")
    assert 0.3 < float(secs0) < SETTLE_S  # refused at first, connected once the listener was up
    assert (addr1, outcome1, why1) == (f"127.0.0.1:{closed}", "refused", "[Errno 111] Connection refused")
    assert SETTLE_S <= float(secs1) < SETTLE_S + 1
    assert time.monotonic() - began >= SETTLE_S + float(secs0) + float(secs1)  # no packet before the settle


def test_a_named_service_the_target_does_not_have_is_a_configuration_error_naming_the_field() -> None:
    """``services: [modle]`` beside a refused egress address: the egress refusal alone would pass, with b's
    model never tried; the probe is error ``configuration`` naming ``services`` and the Services b has."""
    absent: AttemptDict = {"role": "reach-target-service", "action": "reach Service team-b/modle",
              "identity": "system:serviceaccount:team-a:hetero", "outcome": "not-attempted", "waited_s": 0.0,
              "message": "Service team-b/modle does not exist", "reasons": [],
              "facts": {"service": "modle", "absent": "services", "present": ["model"]}}
    with pytest.raises(LayerBroken) as info:
        proven(PROBE, [absent, _attempt("reach-egress", "refused", "network_timeout")])
    assert (info.value.category, info.value.status) == ("configuration", "error")
    assert info.value.message == (
        f"probe {PROBE.name}: Service team-b/modle does not exist: spec.governance.probes[{PROBE.name}].services names "
        "what tenant b does not have, so that part of the boundary was not tested; correct the name (its services: "
        "model)")
