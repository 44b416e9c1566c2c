"""pending/objects.py: the one parse of a pasted object's top level and of an Event, read by both the pending and
the explain readers (strict and lenient readings of the same parse)."""

from __future__ import annotations

import pytest

from pytest_hetero.errors import ParseError
from pytest_hetero.pending.describe import parse_event_object
from pytest_hetero.pending.kueue import WorkloadFacts
from pytest_hetero.pending.objects import EventObject, KubeObject


def test_status_absent_null_and_mapping_are_told_apart() -> None:
    pasted_status = KubeObject.parse({"conditions": [{"type": "Admitted"}]})
    assert not pasted_status.has_status and pasted_status.status is None
    assert pasted_status.status_or_self() is pasted_status.whole
    assert pasted_status.conditions_or_own() == [{"type": "Admitted"}]

    null = KubeObject.parse({"kind": "Workload", "status": None, "conditions": [{"type": "Admitted"}]})
    assert null.has_status and null.status_or_self() is None and null.conditions_or_own() is None

    whole = KubeObject.parse({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": 7}, "spec": "x",
                              "status": {"conditions": [], "phase": "Pending"}})
    assert (whole.kind, whole.api, whole.name) == ("Pod", "v1", "7")
    assert whole.spec == {} and whole.spec_value == "x"
    assert whole.status_or_empty() == {"conditions": [], "phase": "Pending"} and whole.conditions_or_own() == []


def test_strict_reader_refuses_the_part_as_written() -> None:
    with pytest.raises(ParseError, match="metadata is a list, expected a mapping"):
        WorkloadFacts.parse({"kind": "Workload", "metadata": ["w"], "status": {}})
    with pytest.raises(ParseError, match="Workload status is not a mapping"):
        WorkloadFacts.parse({"kind": "Workload", "status": None})
    facts = WorkloadFacts.parse({"metadata": {"name": "w"}, "spec": {"queueName": "q"}, "conditions": []})
    assert (facts.name, facts.local_queue) == ("w", "q")


def test_event_core_v1_and_events_k8s_io_v1() -> None:
    core = EventObject.parse({"type": "Warning", "reason": "FailedScheduling", "message": "0/3 nodes",
                              "count": 4, "source": {"component": "default-scheduler"},
                              "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns"},
                              "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": None})
    assert (core.type, core.reason, core.message, core.count, core.component) == (
        "Warning", "FailedScheduling", "0/3 nodes", 4, "default-scheduler")
    assert (core.involved, core.namespace, core.timestamps) == ("pod/p", "ns", ("2026-01-01T00:00:00Z",))

    v1 = EventObject.parse({"note": "queue closed", "reportingController": "volcano", "count": "2",
                            "regarding": {"kind": "PodGroup", "name": "g"}, "source": "odd"})
    assert (v1.type, v1.message, v1.count, v1.component) == ("Warning", "queue closed", None, None)
    assert (v1.reporting_controller, v1.involved, v1.namespace, v1.source) == ("volcano", "podgroup/g", "", "odd")
    assert EventObject.parse({}).involved == ""
    with pytest.raises(ParseError, match="source is a str, expected a mapping"):
        parse_event_object({"note": "queue closed", "source": "odd"})


def test_keys_that_are_not_text_are_left_out_and_nothing_raises() -> None:
    """YAML lets any scalar be a key (``1:``, ``no:``): such a key names no field; the fields around it are read."""
    import yaml

    parsed = KubeObject.parse(yaml.safe_load("1: x\nno: y\nkind: Node\nmetadata: {null: 1, name: n}\n"))
    assert (parsed.kind, parsed.name, parsed.metadata_value) == ("Node", "n", {None: 1, "name": "n"})
    event = EventObject.parse(yaml.safe_load("2: 3\nreason: Failed\ninvolvedObject: {1: 1, kind: Pod, name: p}\n"))
    assert (event.reason, event.involved) == ("Failed", "pod/p")
