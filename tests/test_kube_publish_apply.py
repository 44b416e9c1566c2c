"""``hetero publish`` writing a plan onto Nodes (:func:`pytest_hetero.backends.kubernetes.publish.apply_plan`), against
a stand-in CoreV1Api: what it does when a node of the plan no longer exists."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes import publish
from pytest_hetero.backends.protocol import ActionFailed
from pytest_hetero.status.publish import NodeChange


class Core:
    """The CoreV1Api calls apply_plan makes; nodes in ``gone`` answer 404 as the apiserver does for a deleted node."""

    def __init__(self, gone: set[str]) -> None:
        self.gone = gone
        self.patched: list[tuple[str, str]] = []

    def _patch(self, what: str, name: str) -> None:
        if name in self.gone:
            raise ApiException(status=404, reason="Not Found")
        self.patched.append((what, name))

    def patch_node(self, name: str, body: Any, **_: Any) -> None:
        self._patch("node", name)

    def patch_node_status(self, name: str, body: Any, **_: Any) -> None:
        self._patch("status", name)


def change(node: str, level: str | None, ok: bool) -> NodeChange:
    key = "validation.d.example/batch-inference"
    return {"node": node, "labels": {key: level}, "annotations": {key + ".bundle": "ab"},
            "conditions": [{"type": key, "status": "True" if ok else "False", "reason": "r", "message": "m"}],
            "taint": None}


def test_a_node_deleted_since_the_run_is_skipped_and_the_others_are_published(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    """A node the run exercised was deleted before ``hetero publish`` (an autoscaler's scale-down between the nightly
    run and the publish): its patch answers 404. apply_plan stopped there ('the apiserver does not serve it (HTTP
    404; CRD or API not installed?)', exit 1) and wrote nothing on the nodes after it in the plan, including the
    withdrawal of a node that failed (its earlier True condition stayed), and every retry stopped at the same node.
    Now a node that is gone is named as such and skipped; the others are published."""
    core = Core(gone={"n1"})
    monkeypatch.setattr(publish, "_core", lambda kubeconfig, context: core)
    done = publish.apply_plan([change("n1", "business", True), change("n2", None, False)], None)
    assert core.patched == [("node", "n2"), ("status", "n2")]
    assert [(d["node"], d.get("gone", False)) for d in done] == [("n1", True), ("n2", False)]


def test_any_other_refusal_still_stops_the_publish_and_names_what_was_published(monkeypatch: pytest.MonkeyPatch
                                                                               ) -> None:
    class Forbidden(Core):
        def patch_node(self, name: str, body: Any, **_: Any) -> None:
            if name == "n2":
                raise ApiException(status=403, reason="Forbidden")
            self._patch("node", name)

    monkeypatch.setattr(publish, "_core", lambda kubeconfig, context: Forbidden(set()))
    with pytest.raises(ActionFailed, match=r"nodes already published: n1"):
        publish.apply_plan([change("n1", "business", True), change("n2", None, False)], None)
