"""--hetero-keep leaves the workloads; ``hetero cleanup --backend kubernetes`` removes them; a dropped
watch resumes and a too-old resourceVersion re-lists (faults produced on the real apiserver)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
from kubekit import kube_matrix
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes import watch as watch_module
from pytest_hetero.backends.kubernetes.watch import PodWatch

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def hetero(*args: str, kubeconfig: str) -> subprocess.CompletedProcess[str]:
    """Run the ``hetero`` CLI with ``KUBECONFIG`` set."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_hetero.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": kubeconfig},
        timeout=120,
        check=False,
    )


def pods_of(cluster: Cluster, run_id: str) -> list[str]:
    pods: list[Any] = cluster.core.list_pod_for_all_namespaces(label_selector=f"pytest-hetero.run-id={run_id}").items
    return sorted(p.metadata.name for p in pods if p.metadata.deletion_timestamp is None)


def test_keep_then_hetero_cleanup(pytester: pytest.Pytester, cluster: Cluster, run_id: str) -> None:
    pytester.makefile(
        ".matrix.yaml",
        k=kube_matrix(
            cluster.suffix,
            cluster.namespace,
            [{"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"}],
        ),
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-keep", "-k", "scheduling"
    )
    assert result.ret == 0
    kept = pods_of(cluster, run_id)
    assert len(kept) == 1 and kept[0].startswith("hetero-cpu-py-")
    dry = hetero(
        "cleanup",
        "--backend",
        "kubernetes",
        "--run-id",
        run_id,
        "--kube-namespace",
        cluster.namespace,
        "--dry-run",
        "--json",
        kubeconfig=str(cluster.kubeconfig),
    )
    assert dry.returncode == 0, dry.stderr
    assert [(e["kind"], e["name"], e["run_id"], e["removed"]) for e in json.loads(dry.stdout)] == [
        ("pod", f"{cluster.namespace}/{kept[0]}", run_id, False)
    ]
    done = hetero(
        "cleanup",
        "--backend",
        "kubernetes",
        "--run-id",
        run_id,
        "--kube-namespace",
        "all",
        "--json",
        kubeconfig=str(cluster.kubeconfig),
    )
    assert done.returncode == 0, done.stderr
    assert [(e["kind"], e["removed"]) for e in json.loads(done.stdout)] == [("pod", True)]
    assert pods_of(cluster, run_id) == []


def test_cleanup_refuses_a_bare_call(cluster: Cluster) -> None:
    bare = hetero("cleanup", "--backend", "kubernetes", kubeconfig=str(cluster.kubeconfig))
    assert bare.returncode == 2 and "--older-than" in bare.stderr


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"pytest-hetero.owner": "watchtest", "pytest-hetero.probe": name},
        },
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "nowhere"},
            "containers": [{"name": "c", "image": "x/y:1"}],
        },
    }


def test_watch_resumes_after_a_drop_and_relists_when_too_old(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = cluster.new_namespace("hetero-watch")
    watch = PodWatch(cluster.api, ns, "pytest-hetero.owner=watchtest")
    watch.start()
    try:
        cluster.core.create_namespaced_pod(ns, _pod("a"))  # type: ignore[arg-type]  # a manifest dict, sent as it is
        assert watch.wait("a", lambda pods: pods, 10)
        watch._resp.shutdown()  # the connection drops mid-stream (as a proxy or apiserver restart does)
        cluster.core.create_namespaced_pod(ns, _pod("b"))  # type: ignore[arg-type]  # a manifest dict, sent as it is
        assert watch.wait("b", lambda pods: pods, 10)
        assert watch.resumes >= 1 and watch.relists == 0
    finally:
        watch.stop()
    # a watch resuming from an expired resourceVersion gets 410 Gone ("too old resource version"):
    # it re-lists, then watches on. A young plane still serves old versions from its watch cache,
    # so the 410 itself is injected (the one fault this plane cannot be made to produce on demand);
    # the re-list and the watch after it are real.
    stale = PodWatch(cluster.api, ns, "pytest-hetero.owner=watchtest")
    real_watch = watch_module.watch_events
    expired = {"sent": False}

    def watch_pods(*args: Any, **kwargs: Any) -> Any:
        if not expired["sent"]:
            expired["sent"] = True
            raise ApiException(status=410, reason="Gone")
        return real_watch(*args, **kwargs)

    monkeypatch.setattr(watch_module, "watch_events", watch_pods)  # the injected 410, then the real watch
    stale.rv = "1"
    stale.run()
    try:
        assert stale.wait("a", lambda pods: pods, 15)
        assert stale.relists == 1 and expired["sent"]
        cluster.core.create_namespaced_pod(ns, _pod("c"))  # type: ignore[arg-type]  # a manifest dict, sent as it is
        assert stale.wait("c", lambda pods: pods, 15)
        assert {"a", "b", "c"} <= set(stale.pods)
    finally:
        stale.stop()


def test_a_forgotten_key_is_dropped_and_its_later_events_not_kept(cluster: Cluster) -> None:
    """A per-run pod, once read back and deleted, is forgotten: its pods leave the watch at once, and the events that
    follow (here the pod's deletion) are not kept, so a gate of thousands of runs holds the ones in flight only;
    another key is untouched and by_key still reads it."""
    ns = cluster.new_namespace("hetero-watch")
    watch = PodWatch(cluster.api, ns, "pytest-hetero.owner=watchtest")
    watch.start()
    try:
        for name in ("gone", "kept"):
            cluster.core.create_namespaced_pod(ns, _pod(name))  # type: ignore[arg-type]  # a manifest dict
            assert watch.wait(name, lambda pods: pods, 10)
        watch.forget("gone")
        assert ("gone" in watch.pods, watch.by_key("gone"), watch.forgotten) == (False, [], {"gone"})
        cluster.core.delete_namespaced_pod("gone", ns, grace_period_seconds=0)
        cluster.core.delete_namespaced_pod("kept", ns, grace_period_seconds=0)
        assert watch.wait("kept", lambda pods: [p for p in pods if p.get("deleted")], 10)
        deadline = time.monotonic() + 10
        while watch.forgotten and time.monotonic() < deadline:  # the deletion of "gone" came before or comes soon
            time.sleep(0.1)
        assert (watch.forgotten, "gone" in watch.pods, "gone" in watch.keyed) == (set(), False, False)
        assert [p["metadata"]["name"] for p in watch.by_key("kept")] == ["kept"]
    finally:
        watch.stop()


def test_a_stopped_watch_wakes_its_waiters_at_once(cluster: Cluster) -> None:
    """The engine's close stops the pod watch: a run still waiting for its pod (model timeout: minutes) gets None
    at once instead of holding an interrupted gate's exit until then."""
    ns = cluster.new_namespace("hetero-watch")
    watch = PodWatch(cluster.api, ns, "pytest-hetero.owner=watchtest")
    watch.start()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(watch.wait("never", lambda pods: pods, 600)), daemon=True)
    waiter.start()
    time.sleep(0.5)
    begun = time.monotonic()
    watch.stop()
    waiter.join(10)
    assert (got, waiter.is_alive()) == ([None], False) and time.monotonic() - begun < 2


def test_cleanup_without_a_namespace_finds_the_runs_namespace(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    """The run's namespace comes from its matrix, not the kubeconfig context (here ``default``): a bare
    ``--run-id`` cleanup searches every namespace (it said 'nothing to clean up' and left the pod)."""
    pytester.makefile(
        ".matrix.yaml",
        k=kube_matrix(
            cluster.suffix,
            cluster.namespace,
            [{"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"}],
        ),
    )
    pytester.runpytest(
        "-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-keep", "-k", "scheduling"
    )
    [kept] = pods_of(cluster, run_id)
    done = hetero(
        "cleanup", "--backend", "kubernetes", "--run-id", run_id, "--json", kubeconfig=str(cluster.kubeconfig)
    )
    assert done.returncode == 0, done.stderr
    assert [(e["kind"], e["name"], e["removed"]) for e in json.loads(done.stdout)] == [
        ("pod", f"{cluster.namespace}/{kept}", True)
    ]
    assert pods_of(cluster, run_id) == []


def test_cleanup_as_the_least_privilege_account_searches_its_namespace(
    pytester: pytest.Pytester, cluster: Cluster, run_id: str
) -> None:
    """deploy/rbac.yaml grants no cluster-wide pod list: the cleaner says so and searches the context's
    namespace, where the account's runs are."""
    import yaml
    from test_kube_rbac import install_rbac

    ns = cluster.new_namespace("hetero-clean")
    sa = pytester.path / "sa.kubeconfig"
    sa.write_text(yaml.safe_dump(install_rbac(cluster, ns)))
    pytester.makefile(
        ".matrix.yaml",
        k=kube_matrix(
            cluster.suffix,
            ns,
            [{"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"}],
            target={"kubeconfig": str(sa)},
        ),
    )
    pytester.runpytest(
        "-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-keep", "-k", "scheduling"
    )
    [kept] = pods_of(cluster, run_id)
    done = hetero("cleanup", "--backend", "kubernetes", "--run-id", run_id, "--json", kubeconfig=str(sa))
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "hetero cleanup: kubernetes: may not list across namespaces (HTTP 403); searched only "
        f"namespace {ns} (name others with --kube-namespace NS)\n"
    )
    assert [(e["kind"], e["name"], e["removed"]) for e in json.loads(done.stdout)] == [
        ("pod", f"{ns}/{kept}", True)
    ]
    assert pods_of(cluster, run_id) == []
