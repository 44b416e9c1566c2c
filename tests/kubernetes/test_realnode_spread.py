"""Model runs spread over the real node's 4 stand-in GPUs (``resources[].model_runs: per-run``).

The real kubelet, containerd and the test device plugin: each model run is a Pod of its own asking for one
``nvidia.com/gpu``, placed by the real scheduler, handed its device by the plugin's Allocate
(``NVIDIA_VISIBLE_DEVICES``). Four model items with ``concurrency: free`` (4 free GPUs) run at once (their recorded run times
overlap), each on a different device; each item's outputs are its own model's; nothing of the run is left.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import realimages
from realkit import GPU, STANDIN, VENDOR_LABELS, controls, data, real_matrix, run
from support import ctrl_c_reaches, evidence_of, outside_paths

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster

pytestmark = pytest.mark.usefixtures("outside_inputs")

RUN_S = 6
"""Seconds each model run sleeps: long enough that four runs started together visibly overlap."""
MODEL = '''"""Stand-in model: sleeps, then writes who it is, when it ran and the devices it saw."""
import argparse, json, os, time
p = argparse.ArgumentParser()
for a in ("--name", "--data", "--out", "--sleep"):
    p.add_argument(a, required=True)
p.add_argument("--tag", default="")
a = p.parse_args()
began = time.time()
time.sleep(float(a.sleep))
out = {"model": a.name, "began": began, "ended": time.time(), "ids": [0, 1], "predictions": [0, 1],
       "visible": os.environ.get("NVIDIA_VISIBLE_DEVICES"), "host": os.uname().nodename}
with open(a.out, "w") as fh:
    json.dump(out, fh)
'''


@pytest.fixture(scope="module")
def ns(realnode: RealNodeCluster) -> Iterator[str]:
    """This module's namespace; the node labelled as GFD would; the stand-in images in its containerd."""
    realnode.core.patch_node(realnode.info.node, {"metadata": {"labels": VENDOR_LABELS}})
    realimages.ensure(realnode.info.containerd_socket, STANDIN)
    name = realnode.new_namespace("spread")
    yield name
    realnode.core.delete_namespace(name)


@pytest.fixture
def run_id(realnode: RealNodeCluster, ns: str) -> Iterator[str]:
    """A fresh run id; afterwards no pod of it may be left (cleanup is under test)."""
    value = "r" + uuid.uuid4().hex[:10]
    yield value
    left: list[Any] = realnode.core.list_namespaced_pod(ns, label_selector=f"pytest-hetero.run-id={value}").items
    alive = [p.metadata.name for p in left if p.metadata.deletion_timestamp is None]
    assert not alive, f"pods of run {value} left behind: {alive}"


def spread_matrix(realnode: RealNodeCluster, ns: str, folder: Path, runs: int, model_runs: str,
                  concurrency: int | str = 4, sleep_s: float = RUN_S, tag: str = "") -> str:
    """A matrix of ``runs`` stand-in models (``m1``…) on one small dataset, each run asking for one GPU of the
    real node, with ``model_runs`` and ``concurrency``; its files written to ``folder``; ``tag``: a word in each
    model process's command line."""
    (folder / "code").mkdir(exist_ok=True)
    (folder / "code" / "model.py").write_text(MODEL)
    (folder / "w.json").write_text("{}\n")
    (folder / "data.csv").write_text("index,x\n0,0.1\n1,0.9\n")
    (folder / "rules.yaml").write_text(
        "apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nmetadata: {name: spread}\nrules:\n"
        "  - name: golden\n    golden: {field: predictions, key: ids, samples: [{index: 1, expected: 1}]}\n")
    sha = {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in ("w.json", "data.csv")}
    gpu = {"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {GPU: "1"},
           "expect": {"devices": realnode.info.gpus}, "model_runs": model_runs, "concurrency": concurrency}
    doc = json.loads(real_matrix(realnode.info, ns, [gpu], images=[{"name": "acc", "reference": STANDIN,
                                                                   "for": ["gpu"]}], framework=False))
    doc["spec"]["models"] = [
        {"name": f"m{i}", "version": "1", "uri": str(folder / "w.json"), "sha256": sha["w.json"],
         "code": str(folder / "code"),
         "entrypoint": ["{python}", "{code}/model.py", "--name", f"m{i}", "--data", "{dataset}", "--out",
                        "{outputs}", "--sleep", str(sleep_s), "--tag", tag]} for i in range(1, runs + 1)]
    doc["spec"]["datasets"] = [{"name": "d", "version": "1", "uri": str(folder / "data.csv"),
                                "sha256": sha["data.csv"], "acceptance": str(folder / "rules.yaml")}]
    return json.dumps(doc, indent=1)


def outputs(pytester: pytest.Pytester, item: dict[str, Any]) -> dict[str, Any]:
    """The outputs.json the model item kept."""
    [bundle] = sorted((pytester.path / "reports").iterdir())
    return dict(json.loads((bundle / data(item, "model.outputs")["artifact"]).read_text()))


def test_four_model_runs_share_out_the_four_gpus_at_once(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    with controls(realnode.info, exclusive=True):  # no device marked unhealthy, no other test's GPU pods held
        # concurrency: free — the width counted from the node's allocatable GPUs beside what its pods hold
        got = run(pytester, spread_matrix(realnode, ns, pytester.path, 4, "per-run", "free"), run_id)
    models = {f"gpu::acc::m{i}@d::model": i for i in range(1, 5)}
    assert {k: got[k]["status"] for k in models} == dict.fromkeys(models, "passed"), \
        {k: (v["status"], (v.get("failure") or {}).get("message")) for k, v in got.items()}
    spread = {k: data(got[k], "model.run")["spread"] for k in models}
    # joined to the right item: each item's outputs are its own model's, from its own pod
    for key, i in models.items():
        out = outputs(pytester, got[key])
        assert (out["model"], out["host"]) == (f"m{i}", spread[key]["pod"])
        assert spread[key]["node"] == realnode.info.node
    # all four at once: the latest start is before the earliest end (the gate's times and the models' own)
    starts = [s["run_started_at"] for s in spread.values()]
    ends = [s["run_ended_at"] for s in spread.values()]
    assert max(starts) < min(ends), spread
    own = [outputs(pytester, got[k]) for k in models]
    assert max(o["began"] for o in own) < min(o["ended"] for o in own)
    # each on a device of its own, as the device plugin handed it and as the model saw it
    devices = [s["devices"].get("NVIDIA_VISIBLE_DEVICES") for s in spread.values()]
    assert len(set(devices)) == 4 and None not in devices, devices
    assert sorted(o["visible"] for o in own) == sorted(devices)
    # isolation between model runs is proven for per-run: stated on the run, never listed as not proven
    run_rec = data(got["gpu::acc::m1@d::model"], "model.run")
    assert run_rec["isolation"]["shared_between_runs"] is False
    assert run_rec["isolation"]["models_isolation"].startswith("proven")
    assert not [r for i in evidence_of(pytester)["items"] for r in i["records"]
                if r["kind"] == "scope.not_proven" and r["data"].get("part") == "isolation between model runs"]
    first = data(got["gpu::acc::m1@d::model"], "model.spread")
    assert (first["concurrency"], first["launched"], first["model_runs"]) == (4, 4, "per-run")
    assert first["startup_workload_released"]  # the startup pod gave its GPU back to the runs
    # free: the device plugin's 4 allocatable GPUs, none held by another pod (the deleted startup pod not counted)
    assert first["concurrency_setting"] == "free"
    assert first["free_capacity"]["nodes"] == {realnode.info.node: {"fits": realnode.info.gpus, "bound_by": GPU}}


def test_shared_model_runs_stay_in_one_pod_one_after_the_other(
    pytester: pytest.Pytester, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    got = run(pytester, spread_matrix(realnode, ns, pytester.path, 2, "shared", sleep_s=1), run_id)
    runs = [data(got[f"gpu::acc::m{i}@d::model"], "model.run") for i in (1, 2)]
    assert [r["exit_code"] for r in runs] == [0, 0]
    assert runs[0]["pod"] == runs[1]["pod"] and "spread" not in runs[0]
    assert runs[0]["isolation"]["shared_between_runs"] is True
    assert [r["data"]["part"] for r in got["gpu::acc::m1@d::model"]["records"] if r["kind"] == "scope.not_proven"] \
        == ["isolation between model runs"]


def _on_this_host(token: str) -> list[str]:
    """Pids of processes on this host (the real node's containers run here) whose command line carries ``token``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if token.encode() in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:
            pass
    return found


def test_ctrl_c_while_per_run_model_runs_go_leaves_nothing_running(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, realnode: RealNodeCluster, ns: str, run_id: str
) -> None:
    token = f"spread-intr-{run_id}"
    (tmp_path / "k.matrix.yaml").write_text(spread_matrix(realnode, ns, tmp_path, 3, "per-run", sleep_s=120,
                                                          tag=token))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HETERO_ALLOW_PATHS": outside_paths(tmp_path_factory)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                             "k.matrix.yaml", "--hetero-run-id", run_id, "--rootdir", str(tmp_path)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env, preexec_fn=ctrl_c_reaches)
    try:
        deadline = time.monotonic() + 120
        while len(_on_this_host(token)) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_on_this_host(token)) >= 3, "the three model runs never ran at once"
        # a gate killed outright (SIGKILL) cannot delete them: each run Pod ends itself at its deadline
        # (twice the model timeout, 2 min here, plus 60 s)
        running: list[Any] = realnode.core.list_namespaced_pod(ns, label_selector=f"pytest-hetero.run-id={run_id}").items
        deadlines = {p.metadata.name: p.spec.active_deadline_seconds for p in running if p.metadata.name.startswith("run-")}
        assert len(deadlines) == 3 and set(deadlines.values()) == {300}, deadlines
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            # SIGABRT: pytest's faulthandler writes every thread's stack, so the failure shows where it waited
            os.killpg(proc.pid, signal.SIGABRT)
            try:
                rest, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rest, _ = proc.communicate()
            pytest.fail(f"the gate had not ended 90 s after Ctrl-C; what it wrote:\n{rest[-8000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 2, out[-3000:]
    ev = json.loads((tmp_path / "reports" / run_id / "evidence.json").read_text())
    assert ev["run"]["interrupted"] is True
    untested = {u["nodeid"].split("::", 1)[1]: u["reason"] for u in ev["untested"]["items"]}
    assert untested["gpu::acc::m1@d::model"] == "not_run (interrupted before this item finished)"
    assert ev["cleanup"] == {"clean": True, "leftovers": []}
    # nothing of the run is left running: its pods are gone (the run_id fixture checks again), so are the models
    pods: list[Any] = realnode.core.list_namespaced_pod(ns, label_selector=f"pytest-hetero.run-id={run_id}").items
    assert [p.metadata.name for p in pods if p.metadata.deletion_timestamp is None] == []
    deadline = time.monotonic() + 30
    while _on_this_host(token) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _on_this_host(token) == []
