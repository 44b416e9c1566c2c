"""Ctrl-C while the model runs on the Kubernetes engine (KWOK plane): the run is interrupted (exit 2, the
model and business items ``not_run``), never the model's failure, and the workload is deleted.

A terminal's Ctrl-C is SIGINT to the foreground process group: here the gate's own pytest process (started in
a session of its own). On KWOK the model is exec'd on this host by KWOK's ClusterExec, outside that group, so
the gate alone receives the signal, as it would with a real kubelet. The Docker engine's case is in
tests/docker/test_docker_lifecycle.py, the local engine's in tests/test_interrupted_model_run.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kubekit import kube_matrix
from support import ctrl_c_reaches, outside_paths

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import Cluster

COMBO = "digits-logreg@digits-test"


def _on_this_host(token: str) -> list[str]:
    """Pids of processes on this host whose command line carries ``token``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if token.encode() in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:
            pass
    return found


def _workload_pods(cluster: Cluster, run_id: str) -> list[str]:
    """This run's pods that are not being deleted (the API's answer: every field optional)."""
    pods: list[Any] = cluster.core.list_namespaced_pod(
        cluster.namespace, label_selector=f"pytest-hetero.run-id={run_id}").items
    return [p.metadata.name for p in pods if p.metadata.deletion_timestamp is None]


def test_ctrl_c_while_the_model_runs_interrupts_the_run_and_deletes_the_workload(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, cluster: Cluster, run_id: str
) -> None:
    token = f"hetero-kube-intr-{run_id}"
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace,
                                 [{"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu"}]))
    doc["spec"]["models"][0]["entrypoint"] = ["{python}", "-c", f"import time; time.sleep(60)  # {token}"]
    code, out, _ = _interrupted_while(tmp_path, tmp_path_factory, cluster, run_id, doc, token, runs=1,
                                      during=lambda: _workload_pods(cluster, run_id))
    assert code == 2, out[-3000:]
    ev = json.loads((tmp_path / "reports" / run_id / "evidence.json").read_text())
    reported = {i["nodeid"].split("::", 1)[1]: i["status"] for i in ev["items"]}
    untested = {u["nodeid"].split("::", 1)[1]: u["reason"] for u in ev["untested"]["items"]}
    assert reported == {"cpu::discovery": "passed", "cpu::py::scheduling": "passed", "cpu::py::startup": "passed"}, \
        out[-3000:]
    # the interruption is the run's, never the model's failure (no_outputs, owner algorithm)
    assert untested == {f"cpu::py::{COMBO}::model": "not_run (interrupted before this item finished)",
                        f"cpu::py::{COMBO}::business": "not_run (interrupted before this item finished)"}
    assert ev["run"]["interrupted"] is True
    # the workload is deleted (the run_id fixture asserts it again), and the exec it ran on this host ended
    assert _workload_pods(cluster, run_id) == []
    deadline = time.monotonic() + 30
    while _on_this_host(token) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _on_this_host(token) == []



def _interrupted_while(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, cluster: Cluster, run_id: str,
                       doc: dict[str, Any], token: str, runs: int = 2,
                       during: Callable[[], object] | None = None) -> tuple[int, str, float]:
    """Run the gate on ``doc`` (its model sleeps with ``token`` on its command line), Ctrl-C it once ``runs`` of its
    model runs run on this host (the KWOK host; ``during()`` must then answer something truthy), and wait for it to
    end: (exit status, what it printed, seconds from Ctrl-C to its end)."""
    (tmp_path / "k.matrix.yaml").write_text(json.dumps(doc))
    # the matrix sits in tmp_path and names the repository's cases/ by absolute path: allowed for this run only
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PYTHONUNBUFFERED": "1",
           "HETERO_ALLOW_PATHS": outside_paths(tmp_path_factory)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                             "k.matrix.yaml", "--hetero-run-id", run_id, "--rootdir", str(tmp_path)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env, preexec_fn=ctrl_c_reaches)
    try:
        deadline = time.monotonic() + 120
        while len(_on_this_host(token)) < runs and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _on_this_host(token), "the model runs never started"
        assert during is None or during(), "the model's pod is not there while it runs"
        time.sleep(1)  # well inside the model's exec, past its start
        os.killpg(proc.pid, signal.SIGINT)
        interrupted = time.monotonic()
        out, _ = proc.communicate(timeout=200)
        return proc.returncode, out, time.monotonic() - interrupted
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def test_ctrl_c_while_per_run_pods_run_kills_their_runs_and_ends_at_once(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, cluster: Cluster, run_id: str
) -> None:
    """``model_runs: per-run``: the runs go in helper threads, each in a Pod of its own. On KWOK a run's exec outlives
    its Pod (it runs on this host), and the threads waited on their execs: after Ctrl-C the gate wrote its bundle,
    deleted the Pods, then hung at exit until every run in flight had ended by itself (a 120 s model: ~120 s), the
    models running meanwhile. Now stopping the runs kills each run's process before its Pod is deleted, and the gate
    ends within seconds with nothing left running."""
    token = f"hetero-kube-intr-per-run-{run_id}"
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace,
                                 [{"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu",
                                   "model_runs": "per-run", "concurrency": 2}]))
    doc["spec"]["models"][0]["entrypoint"] = ["{python}", "-c", f"import time; time.sleep(120)  # {token}"]
    doc["spec"]["datasets"] = [dict(doc["spec"]["datasets"][0], name=f"digits-{i}") for i in range(2)]
    code, out, took = _interrupted_while(tmp_path, tmp_path_factory, cluster, run_id, doc, token)
    assert code == 2, out[-3000:]
    assert took < 45, f"the gate took {took:.0f} s to end after Ctrl-C: {out[-2000:]}"
    assert _on_this_host(token) == [], "a model run still runs on the KWOK host after the gate ended"
    assert _workload_pods(cluster, run_id) == []
    ev = json.loads((tmp_path / "reports" / run_id / "evidence.json").read_text())
    assert ev["run"]["interrupted"] is True


def test_ctrl_c_while_node_coverage_smoke_runs_kills_them_and_ends_at_once(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, cluster: Cluster, run_id: str
) -> None:
    """``coverage: every``: each node's smoke model run goes in a helper thread of the node-coverage item. After
    Ctrl-C the item waited for every thread (its executor's exit), i.e. for every smoke run to end by itself or by
    its timeout (the startup layer's: 150 s here), the models running meanwhile, on a kubelet's pods as on the KWOK
    host. Now the item stops waiting, and the engine's close kills every run still in flight before it deletes the
    pods: the gate ends within seconds with nothing left running."""
    token = f"hetero-kube-intr-cover-{run_id}"
    doc = json.loads(kube_matrix(cluster.suffix, cluster.namespace,
                                 [{"name": "cpu", "type": "cpu", "requests": {"cpu": "1"}, "pool": "cpu",
                                   "coverage": "every"}],
                                 layers={"discovery": {"timeout": "20s"}, "scheduling": {"timeout": "20s"},
                                         "startup": {"timeout": "150s"}, "model": {"timeout": "150s"}}))
    doc["spec"]["models"][0]["entrypoint"] = ["{python}", "-c", f"import time; time.sleep(120)  # {token}"]
    code, out, took = _interrupted_while(tmp_path, tmp_path_factory, cluster, run_id, doc, token)
    assert code == 2, out[-3000:]
    assert took < 45, f"the gate took {took:.0f} s to end after Ctrl-C: {out[-2000:]}"
    assert _on_this_host(token) == [], "a smoke run still runs on the KWOK host after the gate ended"
    assert _workload_pods(cluster, run_id) == []
