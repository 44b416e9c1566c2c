"""How the gate reads a container's log from the kubelet (:func:`pytest_hetero.backends.kubernetes.startup.read_logs`).

The kubelet answers 200 with ``unable to retrieve container logs for <id>`` while the runtime does not know the
container (a crash-looping container's previous instance being replaced): a race the real node shows under load
(CI saw it once) but cannot be made to show on demand, so the API's answers are given here."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hetero.backends.kubernetes import startup


class Answers:
    """A CoreV1Api whose ``read_namespaced_pod_log`` gives ``bodies`` in turn."""

    def __init__(self, *bodies: str | None) -> None:
        self.bodies, self.calls = list(bodies), 0

    def read_namespaced_pod_log(self, *args: Any, **kwargs: Any) -> str | None:
        self.calls += 1
        return self.bodies.pop(0)


@pytest.fixture(autouse=True)
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(startup, "LOG_RETRY_S", 0.0)


def test_the_kubelets_race_is_retried_and_never_passed_off_as_the_log() -> None:
    said = "unable to retrieve container logs for containerd://55103ddd1df6\n"
    core = Answers(said, "boom\n")
    assert startup.read_logs(core, "ns", "pod", previous=True) == "boom\n"  # type: ignore[arg-type]
    assert core.calls == 2
    stuck = Answers(said, said, said)
    assert startup.read_logs(stuck, "ns", "pod") == (  # type: ignore[arg-type]
        "(logs unavailable: the kubelet said 'unable to retrieve container logs for containerd://55103ddd1df6' "
        "3 times)")


def test_a_log_that_begins_with_the_kubelets_words_is_the_containers_own() -> None:
    """A container printing that line first cannot make its log read as unavailable: only the line alone is the
    kubelet's."""
    own = "unable to retrieve container logs for x\nthen the model's traceback\n"
    assert startup.read_logs(Answers(own), "ns", "pod") == own  # type: ignore[arg-type]
    assert startup.read_logs(Answers(None), "ns", "pod") == ""  # type: ignore[arg-type]
