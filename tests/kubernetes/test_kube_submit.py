"""submit_as job / kueue-job / volcano-job on the plane (no Kueue or Volcano installed there: the
backend says so), exec refused by RBAC, SIGTERM mid-run cleans up, and API faults the plane cannot
produce (429/5xx, via constructed ApiExceptions)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
from kubekit import kube_matrix
from kubernetes.client.exceptions import ApiException
from support import clear_reports, evidence_of

from pytest_hetero.backends.kubernetes.client import api_outcome
from pytest_hetero.backends.protocol import ActionFailed, EngineUnavailable

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def items(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    return {i["nodeid"].split("::", 1)[1]: i for i in evidence_of(pytester)["items"]}


def data(item: dict[str, Any], kind: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [r["data"] for r in item["records"] if r["kind"] == kind]
    return found[-1]


CPU = {"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"}


def test_job_is_scheduled_through_the_job_controller(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    pytester.makefile(
        ".matrix.yaml", k=kube_matrix(cluster.suffix, cluster.namespace, [CPU], target={"submit_as": "job"})
    )
    clear_reports(pytester)
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "scheduling")
    item = items(pytester)["cpu::py::scheduling"]
    assert item["status"] == "passed"
    submitted = data(item, "scheduling.submitted")
    assert (
        submitted["submit_as"],
        submitted["manifest"]["kind"],
        submitted["manifest"]["spec"]["backoffLimit"],
    ) == ("job", "Job", 0)
    placed = data(item, "scheduling.placed")
    assert placed["pod"].startswith(submitted["name"] + "-") and placed["node"] in cluster.nodes["cpu"]


def test_queues_that_are_not_installed_are_named(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    pytester.makefile(
        ".matrix.yaml",
        k=kube_matrix(
            cluster.suffix,
            cluster.namespace,
            [{**CPU, "queue": "team-a"}],
            layers={"scheduling": {"timeout": "3s"}},
            target={"submit_as": "kueue-job"},
        ),
    )
    clear_reports(pytester)
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "scheduling")
    item = items(pytester)["cpu::py::scheduling"]
    assert (item["failure"]["category"], item["failure"]["owner"]) == ("scheduling_timeout", "platform")
    # said from API discovery, no longer guessed ("is Kueue installed and LocalQueue team-a present?")
    assert item["failure"]["message"].endswith(
        "; the apiserver serves no kueue.x-k8s.io API (API discovery): the controller is not installed")
    manifest = data(item, "scheduling.submitted")["manifest"]
    assert (manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], manifest["spec"]["suspend"]) == (
        "team-a",
        True,
    )

    (pytester.path / "k.matrix.yaml").write_text(
        kube_matrix(
            cluster.suffix,
            cluster.namespace,
            [{**CPU, "queue": "team-a"}],
            target={"submit_as": "volcano-job"},
        )
    )
    clear_reports(pytester)
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "scheduling")
    item = items(pytester)["cpu::py::scheduling"]
    assert (item["failure"]["category"], item["failure"]["owner"]) == ("api_not_served", "platform")


def test_sigterm_mid_run_deletes_the_workloads(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    pytester.makefile(
        ".matrix.yaml",
        k=kube_matrix(
            cluster.suffix,
            cluster.namespace,
            [
                CPU,
                {
                    "name": "gpu",
                    "type": "gpu",
                    "vendor": "nvidia",
                    "requests": {"nvidia.com/gpu": "9"},  # never fits: its item waits out the grace
                    "pool": "gpu",
                },
            ],
            layers={"scheduling": {"timeout": "60s"}},
            target={"unschedulable_grace_s": 60},
            images=[
                {
                    "name": "py",
                    "reference": "registry.invalid/hetero/missing:pull-error",
                    "for": ["cpu", "gpu"],
                }
            ],
        ),
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--hetero-run-id",
            run_id,
            "--hetero-parallel",
            "2",
            "-k",
            "gpu and scheduling or cpu and scheduling",
            "--hetero-kube-namespace",
            cluster.namespace,
        ],
        cwd=pytester.path,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    selector = f"pytest-hetero.run-id={run_id}"
    deadline = time.monotonic() + 60
    while len(cluster.core.list_namespaced_pod(cluster.namespace, label_selector=selector).items) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0].decode()
    pods: list[Any] = cluster.core.list_namespaced_pod(cluster.namespace, label_selector=selector).items
    left = [p.metadata.name for p in pods if p.metadata.deletion_timestamp is None]
    assert left == [], out[-3000:]


@pytest.mark.parametrize(
    ("status", "expected"),
    [(429, EngineUnavailable), (500, EngineUnavailable), (503, EngineUnavailable), (401, ActionFailed), (404, ActionFailed)],
)
def test_api_faults_the_plane_cannot_produce(status: int, expected: type) -> None:
    out = api_outcome(ApiException(status=status, reason="x"), "create pods in ns")
    assert type(out) is expected
    assert (
        out.category
        == {
            429: "apiserver_error",
            500: "apiserver_error",
            503: "apiserver_error",
            401: "unauthorized",
            404: "api_not_served",
        }[status]
    )


def test_namespace_that_does_not_exist_is_named(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    """A target namespace that does not exist fails scheduling ``namespace_not_found`` (platform) and
    says so, instead of 'the apiserver does not serve it (CRD or API not installed?)'."""
    missing = f"no-such-ns-{run_id}"
    pytester.makefile(".matrix.yaml", k=kube_matrix(cluster.suffix, missing, [CPU]))
    clear_reports(pytester)
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "scheduling")
    item = items(pytester)["cpu::py::scheduling"]
    failure = item["failure"]
    assert (item["status"], failure["category"], failure["owner"]) == (
        "error",
        "namespace_not_found",
        "platform",
    )
    assert failure["message"].startswith("create Pod hetero-cpu-py-")
    assert failure["message"].endswith(
        f"in namespace {missing}: namespace {missing} does not exist: create it (deploy/rbac.yaml creates "
        "hetero-validation) or name another with target.namespace / --hetero-kube-namespace"
    )
