"""The model run's node check before its exec (:func:`pytest_hetero.backends.kubernetes.nodes.ensure_ready`) answers
from the session's node watch when it is running and holds the node (no GET per model run: at 2,000 runs that was
2,000 reads of a whole Node), and reads the node otherwise."""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client

from pytest_hetero.backends.kubernetes.manifests import ListedNode
from pytest_hetero.backends.kubernetes.nodes import NodeReadiness, ensure_ready
from pytest_hetero.backends.protocol import EngineUnavailable


def node(name: str, status: str) -> ListedNode:
    """A Node as served, its Ready condition ``status``."""
    return {"metadata": {"name": name}, "spec": {}, "status": {"conditions": [
        {"type": "Ready", "status": status, "reason": "KubeletNotReady" if status != "True" else "KubeletReady",
         "message": "PLEG is not healthy" if status != "True" else "kubelet is posting ready status",
         "lastTransitionTime": "2026-12-04T10:00:00Z"}]}}


def unreachable() -> client.ApiClient:
    """A client of an apiserver address nothing listens on: any GET fails at once (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    configuration = client.Configuration(host=f"http://127.0.0.1:{port}")
    configuration.retries = 0
    return client.ApiClient(configuration)


def check(feed: NodeReadiness | None, name: str) -> list[tuple[str, dict[str, Any]]]:
    """Run :func:`ensure_ready` for a model run on node ``name``; the records it wrote."""
    api = unreachable()
    records: list[tuple[str, dict[str, Any]]] = []
    session = SimpleNamespace(node_feed=feed, core=client.CoreV1Api(api))
    ctx = SimpleNamespace(layer="model", planned=SimpleNamespace(id="cpu::py::m::d::model"),
                          record=lambda kind, **data: records.append((kind, data)))
    workload = SimpleNamespace(node_lost=None, pod="run-abc")
    ensure_ready(session, ctx, workload, name)  # type: ignore[arg-type]  # the fields ensure_ready reads
    return records


def test_a_node_the_watch_holds_is_answered_from_it_and_others_are_read() -> None:
    feed = NodeReadiness(unreachable())  # fed by hand below: nothing is listed or watched
    feed.listed([node("n-ready", "True"), node("n-lost", "False")], 0.0)
    assert check(feed, "n-ready") == []  # Ready in the watch: no read (the read would have failed: a record)
    with pytest.raises(EngineUnavailable) as lost:
        check(feed, "n-lost")
    assert lost.value.category == "node_not_ready" and "PLEG is not healthy" in lost.value.message
    # a node the watch does not hold, or a watch that has failed: the node is read (here the read fails: said so)
    [(kind, data)] = check(feed, "n-other")
    assert (kind, data["node"], data["checked"]) == ("model.node_check", "n-other", False)
    feed.error = "ProtocolError: the watch stream broke"
    [(kind, data)] = check(feed, "n-lost")
    assert (kind, data["node"], data["checked"]) == ("model.node_check", "n-lost", False)
    [(kind, _)] = check(None, "n-ready")  # no node watch running yet: read
    assert kind == "model.node_check"
