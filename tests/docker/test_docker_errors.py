"""Classification of Docker Engine error texts (the texts are the engine's own, as measured in
tests/infra/README-docker.md; the same paths run against the real engine in test_docker_failures.py)."""

from __future__ import annotations

import pytest

from pytest_hetero.backends.docker.errors import classify, outcome
from pytest_hetero.backends.protocol import ActionFailed, EngineUnavailable
from pytest_hetero.judge.failures import owner_category


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
     'process: exec: "python3": executable file not found in $PATH: unknown'), ("interpreter_missing", "image")),
    (('failed to create shim task: OCI runtime create failed: runc create failed: unable to start container '
     'process: exec: "/code/run": no such file or directory: unknown'), ("entrypoint_missing", "algorithm")),
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
    """The engine reports the category (of the model run's exec here); the failure table owns it."""
    category, owner = expected
    found = classify(text, phase="run", interpreter="python3")
    assert found == category
    assert owner_category(found, "model", image_owner="algorithm") == ("algorithm" if owner == "image" else owner)


def test_a_program_that_cannot_run_while_starting_the_image_is_an_image_defect() -> None:
    text = 'OCI runtime create failed: exec: "/bin/sh": stat /bin/sh: no such file or directory: unknown'
    assert classify(text, phase="start") == "interpreter_missing"


def test_unknown_engine_text_is_broken_not_failed() -> None:
    class Answer(Exception):
        explanation = "something the engine never said before"

    result = outcome(Answer(), "starting container x", phase="start")
    assert isinstance(result, EngineUnavailable)
    assert (result.category, result.message) == (
        "engine_error", "starting container x: the Docker engine answered: something the engine never said before")


def test_known_text_fails_with_a_category_and_no_owner() -> None:
    class Answer(Exception):
        explanation = b"pull access denied for x"

    result = outcome(Answer(), "pulling image x", phase="start")
    assert isinstance(result, ActionFailed)
    assert (result.category, result.message, hasattr(result, "owner")) == (
        "pull_denied", "pulling image x: pull access denied for x", False)
    assert owner_category(result.category, "startup", image_owner="algorithm") == "algorithm"
