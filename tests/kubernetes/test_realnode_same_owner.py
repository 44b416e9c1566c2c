"""The same fact gets the same owner on every engine, from real runs (issue 27): one image, run by the real
Docker engine (which builds the real node's test images) and by the real node (kubelet + containerd), and
the same fact on the local engine where it can happen there. Each engine reports a category; the owner is
the failure table's, so the three agree.

=========================  ===============================  ========================================================
fact                       engines that can meet it          where it is proven
=========================  ===============================  ========================================================
OOM at startup             Docker, Kubernetes                here (``oom-shell``: its ``/bin/sh`` allocates 512 MiB)
missing interpreter        Docker, Kubernetes, local         here (no ``/bin/sh``; no ``{python}``; a local
                                                             environment whose interpreter cannot run)
image pull failure         Docker, Kubernetes                here (a registry nothing listens on)
untolerated taint          Kubernetes (Docker and local      test_realnode_discovery (discovery) and
                           have no taints)                   test_kube_scheduling (scheduling): platform in both
=========================  ===============================  ========================================================
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import realimages
from realkit import ABSENT, failure, real_matrix, run
from support import clear_reports, evidence_of, matrix_text

if TYPE_CHECKING:
    from conftest import RealNodeCluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

docker = pytest.importorskip("docker", reason="docker SDK (pip install docker>=7) is required")

CPU = {"name": "cpu", "type": "cpu", "requests": {"cpu": "100m"}}
SMALL = {"name": "cpu", "type": "cpu", "requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}}
NO_SHELL, NO_PYTHON, OOM_SHELL = "pytest-hetero/no-shell:1", "pytest-hetero/no-python:1", "pytest-hetero/oom-shell:1"
LATE_OOM = "pytest-hetero/late-oom-shell:1"


@pytest.fixture(scope="module")
def ns(realnode: RealNodeCluster) -> Iterator[str]:
    """This module's namespace on the real node's plane; the images it runs imported into its containerd
    (and so built in the Docker engine)."""
    for name in (NO_SHELL, NO_PYTHON, OOM_SHELL, LATE_OOM):
        realimages.ensure(realnode.info.containerd_socket, name)
    name = realnode.new_namespace("same-owner")
    yield name
    realnode.core.delete_namespace(name)


@pytest.fixture
def run_id(realnode: RealNodeCluster, ns: str) -> Iterator[str]:
    """A fresh run id; afterwards no pod or container of it may be left (cleanup is under test)."""
    value = "o" + uuid.uuid4().hex[:10]
    yield value
    left: list[Any] = realnode.core.list_namespaced_pod(ns, label_selector=f"pytest-hetero.run-id={value}").items
    alive = [p.metadata.name for p in left if p.metadata.deletion_timestamp is None]
    engine = docker.from_env()
    try:
        containers = [c.name for c in engine.containers.list(all=True, filters={"label": f"pytest-hetero.run-id={value}"})]
    finally:
        engine.close()
    assert (alive, containers) == ([], []), f"run {value} left pods {alive} and containers {containers}"


def on_kubernetes(pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str,
                  images: list[str], resource: dict[str, Any], **target: Any) -> dict[str, tuple[str, str, str]]:
    """``-k startup`` of ``images`` on the real node: image → ``(status, category, owner)``."""
    listed = [{"name": f"i{n}", "reference": ref} for n, ref in enumerate(images)]
    got = run(pytester, real_matrix(realnode.info, ns, [resource], images=listed, framework=False, target=target),
              run_id, "-k", "startup")
    return {ref: failure(got[f"cpu::i{n}::startup"]) for n, ref in enumerate(images)}


def on_docker(pytester: pytest.Pytester, run_id: str, images: list[str], resource: dict[str, Any],
              **target: Any) -> dict[str, tuple[str, str, str]]:
    """``-k startup`` of ``images`` on the Docker engine: image → ``(status, category, owner)``."""
    listed = [{"name": f"i{n}", "reference": ref} for n, ref in enumerate(images)]
    doc = json.loads(matrix_text(resources=[resource], backend="docker", images=listed))
    doc["spec"]["target"] = {"backend": "docker", "pull_policy": "never", **target}
    for model in doc["spec"]["models"]:
        model.pop("runtime", None)
    pytester.makefile(".matrix.yaml", k=json.dumps(doc))
    clear_reports(pytester)
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "startup")
    got = {i["nodeid"].split("::", 1)[1]: i for i in evidence_of(pytester)["items"]}
    return {ref: failure(got[f"cpu::i{n}::startup"]) for n, ref in enumerate(images)}


def test_oom_at_startup_has_one_owner_on_docker_and_kubernetes(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    """An image whose container is OOM-killed while it starts, before any model code ran: the memory limit
    of the pool against the image, ``startup_oom_killed``, the platform's on both engines (it was the
    algorithm team's on Kubernetes)."""
    kube = on_kubernetes(pytester, realnode, ns, run_id, [OOM_SHELL], SMALL)
    moby = on_docker(pytester, run_id, [OOM_SHELL], SMALL)
    assert kube == moby == {OOM_SHELL: ("failed", "startup_oom_killed", "platform")}


def test_an_oom_kill_while_the_startup_checks_run_is_the_oom_kill_on_docker_and_kubernetes(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    """The container is seen running, then OOM-killed while the device payload runs in it (the exec then
    ends with no report): the kill is the fact, ``startup_oom_killed`` (platform), on both engines; the
    payload's missing report is not the image's ``payload_failed`` (seen in CI on the real node)."""
    kube = on_kubernetes(pytester, realnode, ns, run_id, [LATE_OOM], SMALL)
    moby = on_docker(pytester, run_id, [LATE_OOM], SMALL)
    assert kube == moby == {LATE_OOM: ("failed", "startup_oom_killed", "platform")}


def test_a_missing_interpreter_has_one_owner_on_docker_kubernetes_and_local(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    """No ``/bin/sh`` (the gate's idle shell cannot start: runc on Docker, the kubelet's StartError on
    Kubernetes), no ``{python}`` in a shell-only image (the startup check), and on the local engine an
    environment whose interpreter cannot run: ``interpreter_missing``, the image owner's (``platform`` by
    default, ``algorithm`` when the target says so) everywhere (the kubelet's StartError was
    "matrix-author")."""
    kube = on_kubernetes(pytester, realnode, ns, run_id, [NO_SHELL, NO_PYTHON], CPU)
    moby = on_docker(pytester, run_id, [NO_SHELL, NO_PYTHON], CPU)
    expected = ("failed", "interpreter_missing", "platform")
    assert kube == moby == {NO_SHELL: expected, NO_PYTHON: expected}
    broken = pytester.path / "env" / "bin" / "python3"
    broken.parent.mkdir(parents=True)
    broken.write_text("not a program\n")  # the environment's interpreter is there but cannot run
    for owner in ("platform", "algorithm"):
        doc = json.loads(matrix_text(images=[{"name": "py", "reference": f"python:{broken}"}]))
        doc["spec"]["target"] = {"backend": "local", "image_owner": owner}
        pytester.makefile(".matrix.yaml", k=json.dumps(doc))
        clear_reports(pytester)
        pytester.runpytest("-p", "no:cacheprovider", "-k", "startup")
        local = {i["nodeid"].split("::", 1)[1]: failure(i) for i in evidence_of(pytester)["items"]}
        assert local["cpu-host::py::startup"] == ("failed", "interpreter_missing", owner)


def test_an_image_pull_failure_has_one_owner_on_docker_and_kubernetes(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    """A registry nothing listens on: both engines name the cause from their own words,
    ``registry_unreachable``, the infrastructure's (the network). (The local engine pulls no image.)"""
    kube = on_kubernetes(pytester, realnode, ns, run_id, [ABSENT], CPU, pull_policy="if-not-present")
    moby = on_docker(pytester, run_id, [ABSENT], CPU, pull_policy="if-not-present")
    assert kube == moby == {ABSENT: ("failed", "registry_unreachable", "infrastructure")}
