"""Network and data boundary probes (``network-isolation``, ``data-isolation``), without a cluster: their
matrix keys load and are checked (file, line, field and the fix), and the NetworkPolicy selection the
probe names policies with follows networking.k8s.io/v1 (``podSelector``, ``policyTypes`` defaults). The
probes themselves run against the real node in tests/kubernetes/test_realnode_boundaries.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import matrix_text

from pytest_hetero.backends.kubernetes.boundaries import isolating, selects
from pytest_hetero.errors import MatrixInvalid
from pytest_hetero.matrix import load_matrix

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
    assert selects(None, labels) and selects({}, labels)
    assert selects({"matchLabels": {"app": "model"}}, labels)
    assert not selects({"matchLabels": {"app": "other"}}, labels)
    assert selects({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["serve", "x"]}]}, labels)
    assert not selects({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["serve"]}]}, labels)
    assert selects({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, labels)
    assert not selects({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, labels)
    assert not selects({"matchExpressions": [{"key": "tier", "operator": "Bogus"}]}, labels)


def test_the_policies_that_isolate_a_pod_per_direction() -> None:
    def pol(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"namespace": "team-b", "name": name}, "spec": spec}

    policies = [pol("ingress-default", {"podSelector": {}}),  # no policyTypes: Ingress only
                pol("both-by-rules", {"podSelector": {}, "egress": [{}]}),  # egress rules: Egress too
                pol("egress-only", {"podSelector": {}, "policyTypes": ["Egress"]}),
                pol("other-pods", {"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress"]})]
    labels = {"app": "model"}
    assert isolating(policies, labels, "Ingress") == ["team-b/ingress-default", "team-b/both-by-rules"]
    assert isolating(policies, labels, "Egress") == ["team-b/both-by-rules", "team-b/egress-only"]
    assert isolating(policies, {"app": "db"}, "Ingress") == ["team-b/ingress-default", "team-b/both-by-rules",
                                                             "team-b/other-pods"]
