"""explain(): input-kind detection and dispatch, owners, summarise, and never crashing on any input."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_hetero.errors import ParseError
from pytest_hetero.judge.failures import TABLE
from pytest_hetero.pending import CODES, Reason, explain, summarise
from pytest_hetero.pending.model import OWNERS, SOURCES, make_reason

WORKLOAD = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "Workload",
    "metadata": {"name": "wl"},
    "status": {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": "ClusterQueue cq-a100 is inactive",
            }
        ]
    },
}
PODGROUP_YAML = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  name: mpi-job
spec:
  minMember: 4
  queue: default
status:
  phase: Inqueue
  conditions:
  - type: Unschedulable
    status: "True"
    reason: NotEnoughResources
    message: '4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; Pending: 4
      Unschedulable'
"""
EVENT_LIST_YAML = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Event
  type: Warning
  reason: FailedScheduling
  source: {component: default-scheduler}
  message: '0/2 nodes are available: 2 Too many pods.'
- apiVersion: v1
  kind: Event
  type: Normal
  reason: Scheduled
  message: Successfully assigned a/b to n
"""


def test_workload_as_json_text_and_dict() -> None:
    from_text = explain(json.dumps(WORKLOAD))
    assert [(r.source, r.code, r.detail["clusterqueue"]) for r in from_text] == [
        ("kueue", "queue_inactive", "cq-a100")
    ]
    assert explain(WORKLOAD) == from_text


def test_podgroup_yaml_with_folded_message() -> None:
    (reason,) = explain(PODGROUP_YAML)
    assert (reason.code, reason.quantities["pending_unschedulable"], reason.detail["queue"]) == (
        "gang_unschedulable",
        "4",
        "default",
    )


def test_event_list_yaml_and_multi_document() -> None:
    (reason,) = explain(EVENT_LIST_YAML)
    assert (reason.code, reason.nodes, reason.total_nodes) == ("too_many_pods", 2, 2)
    both = explain(EVENT_LIST_YAML + "---\n" + yaml.safe_dump(WORKLOAD))
    assert [r.code for r in both] == ["too_many_pods", "queue_inactive"]


def test_objects_without_kind_are_recognised() -> None:
    pod = {
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 node(s) were unschedulable.",
                }
            ]
        }
    }
    assert [r.code for r in explain(pod)] == ["node_unschedulable"]
    event = {
        "involvedObject": {"kind": "Pod"},
        "reason": "FilteringFailed",
        "message": "2 nodes NumaNotFit(a,b)",
    }
    assert [(r.code, r.nodes) for r in explain(event)] == [("device_numa_unfit", 2)]
    loose = {
        "status": {"conditions": [{"message": "Workload namespace doesn't match ClusterQueue selector"}]}
    }
    assert [r.code for r in explain(loose)] == ["queue_namespace_mismatch"]


def test_bare_messages_of_each_source() -> None:
    assert [r.code for r in explain("0/3 nodes are available: 3 Insufficient huawei.com/Ascend910.")] == [
        "insufficient_resource"
    ]
    assert [
        r.code
        for r in explain(
            'pods "x" is forbidden: maximum memory usage per Container is 8Gi, but limit is 16Gi'
        )
    ] == ["limitrange_violation"]
    assert [r.code for r in explain("queue resource quota insufficient")] == ["queue_quota_insufficient"]
    assert [
        r.code
        for r in explain(
            "1/2 tasks in gang unschedulable: pod group is not ready,\n  2 Pending, 2 minAvailable"
        )
    ] == ["gang_unschedulable"]


def test_a_list_and_bytes() -> None:
    got = explain(["0/1 nodes are available: 1 Too many pods.", {"message": "LocalQueue lq doesn't exist"}])
    assert [r.code for r in got] == ["too_many_pods", "queue_not_found"]
    assert [r.code for r in explain(b"Too many pods")] == ["too_many_pods"]


def test_unknown_text_is_kept_whole_and_empty_input_gives_nothing() -> None:
    (reason,) = explain("  the cluster\n   is sad today ")
    assert (reason.code, reason.message, reason.owner) == ("unknown", "the cluster is sad today", "platform")
    assert explain("") == [] and explain("  \n") == []


def test_duplicates_are_dropped() -> None:
    msg = "0/2 nodes are available: 2 Insufficient cpu."
    assert len(explain([msg, msg])) == 1


def test_owners_are_the_failure_tables() -> None:
    """Readers report codes and causes; every owner is the failure table's row of the cause, else the code."""
    for text in ("0/2 nodes are available: 2 node(s) didn't match node selector.",
                 "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
                 'Failed to pull image "r.local/x:1": dial tcp: lookup r.local on 10.96.0.10:53: no such host'):
        for reason in explain(text):
            assert reason.owner == TABLE[reason.cause or reason.code].owner
    assert [(r.code, r.cause, r.owner) for r in explain(
        'Failed to pull image "r.local/x:1": dial tcp: lookup r.local on 10.96.0.10:53: no such host')] == [
        ("image_pull_failed", "registry_unreachable", "infrastructure")]
    with pytest.raises(ValueError, match="no row"):
        make_reason("kubelet", "crash_loop", "m", cause="a_cause_nobody_owns")


def test_advertised_turns_insufficient_into_not_advertised() -> None:
    got = explain("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", advertised={"cpu"})
    assert [(r.code, r.owner) for r in got] == [("resource_not_advertised", "infrastructure")]


@pytest.mark.parametrize("bad", [b"\xff\xfe\x00", "text with \x00 nul", 42, None, 3.5])
def test_unreadable_input_raises_parse_error(bad: object) -> None:
    with pytest.raises(ParseError):
        explain(bad)  # type: ignore[arg-type]


def test_bad_object_shape_raises_parse_error() -> None:
    with pytest.raises(ParseError):
        explain({"kind": "Workload", "status": {"conditions": "nope"}})


def test_summarise() -> None:
    reasons = explain(
        "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 3 node(s) had untolerated taint "
        "{gpu: a100}. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
    )
    assert summarise(reasons) == (
        "insufficient_resource nvidia.com/gpu on 2/5 nodes [infrastructure]; untolerated_taint (gpu=a100) on 3/5 "
        "nodes [platform]; preemption: preemption_not_helpful on 5/5 nodes [platform]"
    )
    assert summarise([]) == "no reason found"
    assert summarise(reasons, facts_only=True) == (
        "insufficient_resource nvidia.com/gpu on 2/5 nodes; untolerated_taint (gpu=a100) on 3/5 nodes; "
        "preemption: preemption_not_helpful on 5/5 nodes")
    assert summarise(reasons[:1], owners={"infrastructure": "node-ops"}).endswith("[node-ops]")


def test_reason_dict_shape_and_model_guards() -> None:
    reason = make_reason(
        "kueue", "queue_quota_insufficient", "m", resource="cpu", flavor="f", quantities={"more_needed": "1"}
    )
    assert list(reason.to_dict()) == [
        "source",
        "code",
        "category",
        "owner",
        "cause",
        "resource",
        "nodes",
        "total_nodes",
        "node_names",
        "quantities",
        "flavor",
        "taint",
        "preemption",
        "detail",
        "message",
    ]
    json.dumps(reason.to_dict())
    for args in (("nowhere", "unknown"), ("kueue", "not_a_code")):
        with pytest.raises(ValueError):
            make_reason(*args, "m")
    assert OWNERS == {"platform", "infrastructure", "algorithm", "business", "image"}
    assert all(code in TABLE for code in CODES)


def _check(reasons: object) -> None:
    assert isinstance(reasons, list)
    for r in reasons:
        assert isinstance(r, Reason)
        assert r.code in CODES and r.source in SOURCES and r.owner in OWNERS
        json.dumps(r.to_dict())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
@example("{}").via("found by a CI run (JSON that is no object the readers know gave [])")
@example("[]").via("the same for a list")
@example('[{}, {"message": " "}]').via("the same nested")
def test_any_text_gives_reasons_or_parse_error(text: str) -> None:
    try:
        reasons = explain(text)
    except ParseError:
        return
    _check(reasons)
    assert reasons or not text.strip()


_WORDS = st.sampled_from(
    [
        "0/3 nodes are available:",
        "Insufficient",
        "preemption:",
        "taint {",
        "}",
        "exceeded quota:",
        "requested:",
        "used:",
        "limited:",
        "in flavor",
        "more needed",
        "tasks in gang unschedulable:",
        "pod group is not ready,",
        "Events:",
        "State:",
        "Message:",
        "Warning",
        "FailedScheduling",
        "nodes",
        "(",
        ")",
        ",",
        ".",
        " ",
        "\n",
        "1",
        "2/2",
        "kind: Pod",
        "status:",
        "{",
        "[",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_WORDS, max_size=40).map(" ".join))
def test_near_miss_text_never_crashes(text: str) -> None:
    try:
        _check(explain(text))
    except ParseError:
        pass


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "kind",
                    "status",
                    "conditions",
                    "message",
                    "type",
                    "reason",
                    "items",
                    "spec",
                    "metadata",
                    "resourceRequests",
                    "containerStatuses",
                    "state",
                    "waiting",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(["kind", "status", "spec", "items", "message", "type"]), _JSON, max_size=4
    )
)
def test_any_object_gives_reasons_or_parse_error(obj: dict[str, object]) -> None:
    try:
        _check(explain(obj))
    except ParseError:
        pass


def test_describe_workload_text_is_kueue_not_volcano() -> None:
    text = (
        "Status:\n"
        "  Conditions:\n"
        "    Last Transition Time:  2024-05-01T10:00:00Z\n"
        "    Message:               couldn't assign flavors to pod set main: insufficient unused quota for\n"
        "                           nvidia.com/gpu in flavor a100, 2 more needed\n"
        "    Reason:                Pending\n"
        "    Status:                False\n"
        "    Type:                  QuotaReserved\n"
    )
    (reason,) = explain(text)
    assert (reason.source, reason.code, reason.resource, reason.flavor, dict(reason.quantities)) == (
        "kueue",
        "queue_quota_insufficient",
        "nvidia.com/gpu",
        "a100",
        {"more_needed": "2"},
    )


def test_docstring_table_matches_the_code_vocabulary() -> None:
    from pytest_hetero.pending import model

    assert model.__doc__ is not None
    rows = {}
    for line in model.__doc__.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] in CODES:
            rows[parts[0]] = parts[1]
    assert rows == dict(CODES)


def test_wrapped_bare_message_is_read_whole_and_mixed_lines_one_by_one() -> None:
    wrapped = "0/3 nodes are available: 2 Insufficient\n  nvidia.com/gpu, 1 node(s) were\n  unschedulable."
    assert [(r.code, r.nodes, r.resource) for r in explain(wrapped)] == [
        ("insufficient_resource", 2, "nvidia.com/gpu"),
        ("node_unschedulable", 1, None),
    ]
    mixed = "Too many pods\nqueue resource quota insufficient\nsome unrelated line"
    assert [r.code for r in explain(mixed)] == ["too_many_pods", "queue_quota_insufficient"]


def test_headerless_event_rows_keep_every_reason_and_the_node_total() -> None:
    """``kubectl get events -A --no-headers``: namespace, age, type, reason and object precede the message."""
    rows = (
        "ml-team   2m    Warning   FailedScheduling   pod/train-0   0/3 nodes are available: 1 Insufficient "
        "nvidia.com/gpu, 2 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }. preemption: "
        "0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful "
        "for scheduling.\n"
        "ml-team   40s   Warning   FailedScheduling   pod/train-1   0/8 nodes are available: 8 Insufficient "
        "huawei.com/Ascend910.\n"
    )
    assert [(r.code, r.resource, r.nodes, r.total_nodes, r.preemption) for r in explain(rows)] == [
        ("insufficient_resource", "nvidia.com/gpu", 1, 3, False),
        ("untolerated_taint", None, 2, 3, False),
        ("preemption_no_victims", None, 1, 3, True),
        ("preemption_not_helpful", None, 2, 3, True),
        ("insufficient_resource", "huawei.com/Ascend910", 8, 8, False),
    ]


def test_pasted_parts_read_through_their_declared_fields_whatever_their_keys() -> None:
    """A condition, a container state and a HAMi registration entry are read through one declared shape each
    (``fields_of``): values as written (narrowed by the reader), absent ones their default, and a key that is not
    text (YAML ``1: x``) ignored as before, never refused and never a traceback."""
    from pytest_hetero.pending.model import Condition
    from pytest_hetero.pending.node_text import HamiDevice, parse_hami_register
    from pytest_hetero.pending.startup import ContainerState, container_state

    raw = yaml.safe_load("{type: Ready, status: true, 1: x, message: null}")
    assert Condition.parse(raw) == Condition("Ready", "True", None, None)
    assert container_state(yaml.safe_load("{waiting: gone, terminated: {1: x, reason: OOMKilled, exitCode: null}}")) \
        == ContainerState(reason="OOMKilled", message="", exit_code="None")
    assert container_state({"terminated": {"exitCode": 137}}).exit_code == "137"
    assert container_state({"waiting": {"reason": "ErrImagePull"}}) == ContainerState(reason="ErrImagePull", message="")
    assert parse_hami_register(yaml.safe_load("[{2: x, id: GPU-0, devmem: '8', health: true, mode: 0}, {}]")) == [
        HamiDevice("GPU-0", None, 8, None, "", True, mode=None), HamiDevice("", None, None, None, "", None)]
