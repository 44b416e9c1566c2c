"""Reserved capacity for critical inference on the real node: the kube-scheduler's own priority preemption.

A ``reserved-inference`` probe deploys the digits service (real MLServer, ``servingimage.py``) as a
Deployment of 2 replicas, loads it, and starts a training burst of 4 pods on the same pool. The pool is an
extended resource advertised on the real node for this test alone (4 slots, a node status patch, as the
Kubernetes documentation advertises a dongle), so the burst competes with the serving replicas and nothing
else on the shared node: each serving replica and each burst pod asks for one slot, the burst fills the pool
and asks to preempt. PriorityClasses are created here, as a platform team would, and deleted afterwards.

- serving at a high PriorityClass (1000000), the burst at 1000: the scheduler finds no victim, two burst pods
  stay Pending, the serving replicas stay Ready, requests keep succeeding: the probe passes;
- serving without a PriorityClass (priority 0), the burst at 1000: the scheduler preempts both serving
  replicas (``Preempted`` events naming the burst pods), the replacements stay Pending, requests fail: the
  probe fails ``serving_floor_broken`` (platform) and the timeline says which pods went, when, and for whom.

Real parts: apiserver, kube-scheduler (preemption), kubelet (readiness probes, kills), containerd, CNI pod IPs,
the deployment and endpoint-slice controllers, MLServer. Nothing is simulated.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import servingimage
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from realkit import data, failure, on_node, run
from support import evidence_of

from pytest_hetero.bundle.signoff import signoff_context
from pytest_hetero.evidence.document import as_document
from pytest_hetero.reporting.dossier import render_dossier

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster

pytestmark = pytest.mark.usefixtures("outside_inputs")

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "matrices" / "example-serving-k8s.matrix.yaml"
SLOTS = 4
CRITICAL, TRAINING = 1_000_000, 1000


@pytest.fixture(scope="module")
def image(realnode: RealNodeCluster) -> str:
    """The serving image in the node's containerd (built when its recipe changed)."""
    return servingimage.ensure(Path(realnode.info.containerd_socket))


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


@pytest.fixture
def pool(realnode: RealNodeCluster, image: str) -> Iterator[dict[str, Any]]:
    """A namespace, the extended resource ``hetero-test.io/reserve-<random>`` (:data:`SLOTS` on the real node)
    and PriorityClasses ``critical`` (:data:`CRITICAL`) and ``training`` (:data:`TRAINING`); afterwards the
    resource and classes are removed and no pod of the probe is left in the namespace."""
    tag = uuid.uuid4().hex[:6]
    made = {"ns": realnode.new_namespace("reserve"), "slot": f"hetero-test.io/reserve-{tag}",
            "critical": f"hetero-critical-{tag}", "training": f"hetero-training-{tag}", "image": image}
    core, sched = realnode.core, client.SchedulingV1Api(realnode.api)
    node = realnode.info.node
    path = _escape(made["slot"])
    core.patch_node_status(node, [{"op": "add", "path": f"/status/capacity/{path}", "value": str(SLOTS)},
                                  {"op": "add", "path": f"/status/allocatable/{path}", "value": str(SLOTS)}])
    try:
        for name, value in ((made["critical"], CRITICAL), (made["training"], TRAINING)):
            sched.create_priority_class({"metadata": {"name": name}, "value": value,  # type: ignore[arg-type]  # a manifest dict
                                         "description": "pytest-hetero reserved-inference test"})
        yield made
    finally:
        pods: list[Any] = core.list_namespaced_pod(made["ns"]).items
        left = [p.metadata.name for p in pods if p.metadata.deletion_timestamp is None]
        for name in (made["critical"], made["training"]):
            try:
                sched.delete_priority_class(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        current: Any = core.read_node(node)
        patch = [{"op": "remove", "path": f"/status/{part}/{path}"} for part in ("capacity", "allocatable")
                 if made["slot"] in (getattr(current.status, part) or {})]
        if patch:
            core.patch_node_status(node, patch)
        core.delete_namespace(made["ns"])
        assert left == [], f"left behind in {made['ns']}: {left}"


def _matrix(realnode: RealNodeCluster, made: dict[str, Any], serving_class: str | None, **changes: Any) -> str:
    """The serving example's model and dataset on resource ``slots`` (one slot per pod, on the real node) with
    one reserved-inference probe: 2 replicas, the burst of 4 pods at ``training`` for 10 s (5 windows of 2 s),
    p95 bound 3 s; ``changes`` replace keys of ``reserve``."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    spec = doc["spec"]
    spec["target"] = {"backend": "kubernetes", "kubeconfig": str(realnode.info.kubeconfig), "namespace": made["ns"],
                      "pull_policy": "never"}
    spec["layers"] = {"scheduling": {"timeout": "3m"}}
    spec["resources"] = [on_node(realnode.info, {"name": "slots", "type": "cpu",
                                                 "requests": {made["slot"]: "1"}})]
    model = spec["models"][0]
    model["serving"].pop("auth")
    model["serving"].pop("rollback")
    model["serving"]["load"] = {"request_timeout": "2s"}
    for dataset in spec["datasets"]:
        for key in ("uri", "acceptance"):
            dataset[key] = str((EXAMPLE.parent / dataset[key]).resolve())
    reserve: dict[str, Any] = {"model": "digits-service", "replicas": 2, "burst": {"priority_class": made["training"],
                                                                                "pods": SLOTS},
                               "p95_ms": 3000, "max_error_rate": 0.0, "window": "2s", "duration": "10s"}
    if serving_class:
        reserve["priority_class"] = serving_class
    reserve.update(changes)
    spec["governance"] = {"probes": [{"name": "floor", "kind": "reserved-inference", "resource": "slots",
                                      "image": "mlserver-digits", "reserve": reserve}]}
    return json.dumps(doc, indent=1)


ITEM = "slots::governance::floor::scheduling"


def _timeline(item: dict[str, Any]) -> list[dict[str, Any]]:
    return list(data(item, "reserve.timeline")["entries"])


def _clean(item: dict[str, Any]) -> None:
    cleanup = data(item, "governance.cleanup")
    assert cleanup["leftovers"] == [] and all(o["gone"] for o in cleanup["objects"]), cleanup
    kinds = sorted(o["kind"] for o in cleanup["objects"])
    assert kinds == ["deployment", *["pod"] * SLOTS, "service"], kinds


def test_a_high_priorityclass_keeps_the_serving_floor_through_a_training_burst(
        pytester: pytest.Pytester, realnode: RealNodeCluster, pool: dict[str, Any]) -> None:
    """Serving at 1000000, burst at 1000: no victim, two burst pods wait, every window answered."""
    got = run(pytester, _matrix(realnode, pool, pool["critical"]), "r" + uuid.uuid4().hex[:9], "-k", "governance")
    item = got[ITEM]
    assert item["status"] == "passed", item.get("failure")
    serving, burst = data(item, "reserve.serving"), data(item, "reserve.burst")
    assert serving["priority_class"] == {"name": pool["critical"], "value": CRITICAL,
                                         "preemption_policy": "PreemptLowerPriority", "global_default": False}
    assert (serving["replicas"], serving["min_ready"], len(serving["ready"]["pods"])) == (2, 2, 2)
    assert burst["priority_class"]["value"] == TRAINING and burst["requested"] == SLOTS
    # the pool holds 4 slots: 2 serving + 2 burst placed; the other 2 burst pods asked and found no victim
    assert (burst["placed"], burst["asked_to_preempt"], burst["refused"]) == (2, True, [])
    waiting = [p for p in burst["pods"] if not p["placed"]]
    assert len(waiting) == 2 and all(not p["preempted_for"] for p in burst["pods"])
    assert all(f"Insufficient {pool['slot']}" in (p["pending"] or "") for p in waiting), waiting
    assert all("preemption:" in (p["pending"] or "") for p in waiting), waiting
    assert data(item, "reserve.victims")["victims"] == []
    windows = [r["data"] for r in item["records"] if r["kind"] == "reserve.window"]
    during = [w for w in windows if w["phase"] == "burst"]
    assert [w["phase"] for w in windows[:2]] == ["before", "before"] and len(during) >= 4
    assert all(w["ready_min"] == 2 and len(w["endpoints"]) == 2 and w["errors"] == 0 and w["ok"] > 0
               for w in during), during
    assert all(w["p95_ms"] <= 3000 for w in during)
    timeline = _timeline(item)
    # nothing of the serving Deployment was deleted, preempted or killed during the burst
    assert not [e for e in timeline if e["role"] == "serving" and e["what"] in ("Preempted", "Killing", "deleting",
                                                                                "gone", "not-ready")]
    events = {(e["pod"], e["what"]) for e in timeline if e["source"] == "event"}
    assert all((p["name"], "FailedScheduling") in events for p in waiting), events
    _clean(item)


def test_without_a_priorityclass_the_burst_preempts_the_serving_replicas(
        pytester: pytest.Pytester, realnode: RealNodeCluster, pool: dict[str, Any]) -> None:
    """Serving at priority 0, burst at 1000: the scheduler preempts both replicas for the burst; the timeline
    names each victim, when it went and the burst pod it went for."""
    # 12 s: the victims must be seen gone (their graceful termination) while the probe still watches
    got = run(pytester, _matrix(realnode, pool, None, duration="12s"), "r" + uuid.uuid4().hex[:9], "-k", "governance")
    item = got[ITEM]
    assert failure(item) == ("failed", "serving_floor_broken", "platform"), item.get("failure")
    serving, burst = data(item, "reserve.serving"), data(item, "reserve.burst")
    assert serving["priority_class"] is None
    first = set(serving["ready"]["pods"])
    assert len(first) == 2
    victims = data(item, "reserve.victims")["victims"]
    assert {v["pod"] for v in victims} == first, victims
    burst_pods = {p["name"] for p in burst["pods"]}
    assert all(v["by"] in burst_pods for v in victims), victims
    assert all(0 <= v["at_s"] <= 12 for v in victims), victims
    assert item["failure"]["message"].startswith(
        f"the training burst ({pool['training']}) removed 2 of 2 serving replica(s) of {serving['deployment']} "
        "(no PriorityClass): ")
    timeline = _timeline(item)
    preempted = [e for e in timeline if e["what"] == "Preempted"]
    assert {e["pod"] for e in preempted} == first and all(e["source"] == "event" for e in preempted), preempted
    assert all(e["by"] in burst_pods and e["at_s"] >= 0 for e in preempted)
    for pod in first:  # the scheduler's word, then the pod observed going: DisruptionTarget, then gone
        mine = [e for e in timeline if e["pod"] == pod and e["at_s"] is not None and e["at_s"] >= 0]
        whats = [e["what"] for e in mine]
        assert "Preempted" in whats and "gone" in whats, mine
        deleting = [e for e in mine if e["what"] == "deleting"]
        assert not deleting or "PreemptionByScheduler" in deleting[0]["message"], deleting
    # the Deployment's replacements were created but the burst holds the pool: they stay Pending
    later = [e for e in timeline if e["role"] == "serving" and e["what"] == "created" and e["pod"] not in first]
    assert later, timeline
    assert burst["asked_to_preempt"] is True and sum(p["preempted_for"] for p in burst["pods"]) == 2
    windows = [r["data"] for r in item["records"] if r["kind"] == "reserve.window"]
    assert all(w["ready_min"] == 2 for w in windows if w["phase"] == "before")
    assert min(w["ready_min"] for w in windows if w["phase"] == "burst") == 0
    _clean(item)
    # the usage ledger counts every pod the probe made: the victims failed, the replacements were refused
    ledger = {r["data"]["name"]: r["data"] for r in item["records"] if r["kind"] == "usage.workload"}
    assert {ledger[p]["outcome"] for p in first} == {"failed"}
    assert {ledger[p["name"]]["outcome"] for p in burst["pods"]} == {"completed"}
    assert {ledger[e["pod"]]["outcome"] for e in later} == {"refused"}
    assert all(u["namespace"] == pool["ns"] and u["requests"] == {pool["slot"]: "1"} and u["released"]
               and u["role"].startswith("governance:floor:") for u in ledger.values())
    # the dossier shows the timeline: each victim preempted, for which burst pod, seconds after the burst began
    html = render_dossier(as_document(evidence_of(pytester)), signoff_context({}, None, None), "en")
    section = html.split('<h3 id="reserved">', 1)[1].split("</section>", 1)[0]
    assert "serving at no PriorityClass, 2 replica(s), floor 2" in section
    for v in victims:
        assert f'<code class="small">{v["pod"]}</code></td><td>serving</td><td>Preempted</td>' in section
        assert f"→ {v['by']} Preempted by pod " in section
    zh = render_dossier(as_document(evidence_of(pytester)), signoff_context({}, None, None), "zh")
    assert "训练突发下的推理预留容量" in zh and all(v["pod"] in zh for v in victims)


def test_a_burst_that_fits_beside_the_serving_replicas_proves_nothing(
        pytester: pytest.Pytester, realnode: RealNodeCluster, pool: dict[str, Any]) -> None:
    """2 burst pods beside 2 serving replicas fill the 4 slots without asking to preempt: error, not a pass."""
    got = run(pytester, _matrix(realnode, pool, pool["critical"], burst={"priority_class": pool["training"], "pods": 2},
                                duration="6s"), "r" + uuid.uuid4().hex[:9], "-k", "governance")
    item = got[ITEM]
    assert failure(item) == ("error", "preemption_not_exercised", "platform"), item.get("failure")
    burst = data(item, "reserve.burst")
    assert (burst["placed"], burst["asked_to_preempt"]) == (2, False)
    assert item["failure"]["message"].startswith("all 2 burst pods were placed beside the serving replicas")
    cleanup = data(item, "governance.cleanup")
    assert cleanup["leftovers"] == [] and len(cleanup["objects"]) == 4


def test_a_latency_bound_the_service_cannot_meet_fails_with_the_window(
        pytester: pytest.Pytester, realnode: RealNodeCluster, pool: dict[str, Any]) -> None:
    """The floor holds (serving at 1000000) but a p95 bound of 0.01 ms cannot be met: serving_latency_breached,
    naming the first burst window and its p95."""
    got = run(pytester, _matrix(realnode, pool, pool["critical"], p95_ms=0.01, duration="6s"),
              "r" + uuid.uuid4().hex[:9], "-k", "governance")
    item = got[ITEM]
    assert failure(item) == ("failed", "serving_latency_breached", "platform"), item.get("failure")
    assert data(item, "reserve.victims")["victims"] == []
    first = next(r["data"] for r in item["records"] if r["kind"] == "reserve.window" and r["data"]["phase"] == "burst")
    assert item["failure"]["message"] == (f"window {first['from_s']}–{first['to_s']} s of the burst: p95 "
                                          f"{first['p95_ms']} ms > the bound 0.01 ms ({first['ok']} requests)")
    _clean(item)


def test_a_burst_priorityclass_that_never_preempts_is_refused_before_anything_is_deployed(
        pytester: pytest.Pytester, realnode: RealNodeCluster, pool: dict[str, Any]) -> None:
    """The burst's PriorityClass (1000, above the unprotected serving replicas' 0) has ``preemptionPolicy: Never``:
    its pods wait in the queue and never ask to preempt, so a full pool leaves them Unschedulable beside intact
    serving replicas, which once passed as a reservation that held. It is error ``preemption_not_exercised``
    naming the class and its policy, before the probe deploys anything."""
    patient = f"hetero-patient-{uuid.uuid4().hex[:6]}"
    sched = client.SchedulingV1Api(realnode.api)
    sched.create_priority_class({"metadata": {"name": patient}, "value": TRAINING,  # type: ignore[arg-type]  # a manifest dict
                                 "preemptionPolicy": "Never", "description": "pytest-hetero reserved-inference test"})
    try:
        got = run(pytester, _matrix(realnode, pool, None, burst={"priority_class": patient, "pods": SLOTS},
                                    duration="6s"), "r" + uuid.uuid4().hex[:9], "-k", "governance")
    finally:
        sched.delete_priority_class(patient)
    item = got[ITEM]
    assert failure(item) == ("error", "preemption_not_exercised", "platform"), item.get("failure")
    assert item["failure"]["message"] == (
        f"PriorityClass {patient} of the burst (reserve.burst.priority_class) has preemptionPolicy Never: its pods "
        "never ask to preempt, so the reservation would not be tested; name a class with preemptionPolicy "
        "PreemptLowerPriority (the training workloads' class)")
    assert not [r for r in item["records"] if r["kind"] == "reserve.window"]
    assert realnode.core.list_namespaced_pod(pool["ns"]).items == []
