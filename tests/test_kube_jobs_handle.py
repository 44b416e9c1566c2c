"""What the Kubernetes engine keeps of a training job it made (:class:`pytest_hetero.backends.kubernetes.jobs.JobHandle`)
and how :func:`~pytest_hetero.backends.kubernetes.jobs.remove` reads it: a checkpoint job whose rank the gate killed
is kept for the Job controller's restart, any other is deleted by its name. The API calls are stood in for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client

from pytest_hetero.backends.jobs import Job, JobSpec
from pytest_hetero.backends.kubernetes import jobs


class Deletes:
    """Records each delete call as ``(kind, name, namespace)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def delete_namespaced_job(self, name: str, namespace: str, **kwargs: Any) -> None:
        self.calls.append(("Job", name, namespace))

    def delete_namespaced_service(self, name: str, namespace: str, **kwargs: Any) -> None:
        self.calls.append(("Service", name, namespace))

    def delete_namespaced_config_map(self, name: str, namespace: str, **kwargs: Any) -> None:
        self.calls.append(("ConfigMap", name, namespace))


def _job(restartable: bool, killed: set[int]) -> Job:
    own = jobs.JobHandle(name="hetero-job-x", queue=None, key=("me", "item", "checkpoint", "claim"),
                         restartable=restartable, submitted=1.0)
    return Job(spec=JobSpec(name="checkpoint", world_size=2, argv=("true",), volume="claim"), ranks=["a", "b"],
               rendezvous_host="", handle={jobs.HANDLE: own}, killed=killed)


def test_remove_keeps_a_killed_checkpoint_job_and_deletes_any_other(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Deletes()
    monkeypatch.setattr(client, "BatchV1Api", lambda _: api)
    monkeypatch.setattr(jobs, "KEPT", {})
    session: Any = SimpleNamespace(api=None, core=api, namespace="ns")
    kept = _job(restartable=True, killed={1})
    jobs.remove(session, kept)
    assert jobs.KEPT == {("me", "item", "checkpoint", "claim"): kept} and api.calls == []
    for job in (_job(restartable=True, killed=set()), _job(restartable=False, killed={1})):
        jobs.remove(session, job)
    assert api.calls == [(kind, "hetero-job-x", "ns") for kind in ("Job", "Service", "ConfigMap")] * 2
    assert len(jobs.KEPT) == 1
