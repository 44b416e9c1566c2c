"""Classification of Docker Engine error texts (the texts are the engine's own, as measured in
tests/infra/README-docker.md; the same paths run against the real engine in test_docker_failures.py)."""

from __future__ import annotations

import pytest

from pytest_hetero.backends.docker.errors import classify, outcome
from pytest_hetero.backends.protocol import ActionFailed, EngineUnavailable


@pytest.mark.parametrize(("text", "expected"), [
    ("Unknown runtime specified nvidia", ("runtime_missing", "infrastructure")),
    ('could not select device driver "" with capabilities: [[gpu]]', ("device_driver_missing", "infrastructure")),
    ('error gathering device information while adding custom device "/dev/davinci0": no such file or directory',
     ("device_missing", "infrastructure")),
    ("Requested CPUs are not available - requested 0-63, available: 0-1", ("resource_rejected", "platform")),
    ("Range of CPUs is from 0.01 to 2.00, as there are only 2 CPUs available", ("resource_rejected", "platform")),
    ("Minimum memory limit allowed is 6MB", ("resource_rejected", "platform")),
    ("invalid mount config for type \"bind\": bind source path does not exist: /x", ("mount_failed", "platform")),
    (('failed to create shim task: OCI runtime create failed: runc create failed: unable to start container '
     'process: exec: "python3": executable file not found in $PATH: unknown'), ("entrypoint_missing", "phase")),
    (("failed to create shim task: OCI runtime create failed: runc create failed: unable to start container "
     "process: error during container init: error setting cgroup config: unknown"),
     ("oci_runtime_error", "infrastructure")),
    ("pull access denied for nosuch/image, repository does not exist or may require 'docker login'",
     ("pull_denied", "image")),
    ("manifest for library/python:0.0 not found: manifest unknown: manifest unknown", ("image_not_found", "image")),
    (('Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: '
     "no such host"), ("registry_unreachable", "infrastructure")),
])
def test_classify_engine_texts(text: str, expected: tuple[str, str]) -> None:
    category, owner = expected
    owner = {"phase": "algorithm", "image": "platform"}.get(owner, owner)
    assert classify(text, phase_owner="algorithm", image_owner="platform") == (category, owner)


def test_unknown_engine_text_is_broken_not_failed() -> None:
    class Answer(Exception):
        explanation = "something the engine never said before"

    result = outcome(Answer(), "starting container x", phase_owner="platform")
    assert isinstance(result, EngineUnavailable)
    assert (result.category, result.message) == (
        "engine_error", "starting container x: the Docker engine answered: something the engine never said before")


def test_known_text_fails_with_the_configured_image_owner() -> None:
    class Answer(Exception):
        explanation = b"pull access denied for x"

    result = outcome(Answer(), "pulling image x", phase_owner="platform", image_owner="algorithm")
    assert isinstance(result, ActionFailed)
    assert (result.category, result.owner, result.message) == (
        "pull_denied", "algorithm", "pulling image x: pull access denied for x")
