"""Failing tests from an attack on per-run model runs on the local engine (branch ``w/localrun``, issue 32).

Each test states what the gate should do; none fixes the engine. Real Spread objects, real pytest runs, real
bubblewrap."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import types
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from support import DIGITS, evidence_of
from test_local_spread import CPU, GPU, _in_runs, items, record, spread_matrix

from pytest_hetero.backends.local.spread import local_slots
from pytest_hetero.backends.protocol import ActionFailed, EngineFault
from pytest_hetero.backends.spread import Deferred, Group, Plan, Spread
from pytest_hetero.evidence.untested import CONTENTION_PART
from pytest_hetero.matrix.model import Resource

pytestmark = pytest.mark.usefixtures("outside_inputs")


def test_a_queued_run_cancelled_at_close_counts_as_ended() -> None:
    """Ctrl-C / SIGTERM with more runs than slots: ``Spread.shutdown`` cancels the queued run, the running one ends
    when killed. ``Spread.wait`` must count the cancelled run as ended: today ``concurrent.futures.wait`` never sees
    a future cancelled by ``shutdown(cancel_futures=True)`` as done (its state stays CANCELLED, not
    CANCELLED_AND_NOTIFIED), so the engine's close waits its full 10 s and records a phantom leftover ("1 per-run
    model run(s) did not end within 10 s of being killed", ``cleanup.clean`` False) though nothing is left."""
    release = threading.Event()

    def run(step: Deferred, width: int, queued: float) -> Any:
        release.wait(30)
        raise ActionFailed("killed", "harness")

    def unexpected(exc: Exception, step: Deferred) -> EngineFault:
        return ActionFailed(str(exc), "harness")

    spread = Spread()
    group = spread.groups[("m", "r", "i")] = Group(Plan(run=run, unexpected=unexpected, width=1, noun="sandbox"),
                                                   spread.stop)
    step = cast(Any, SimpleNamespace(matrix=None, settings=None, timeout_s=1.0))
    group.launch(step, cast(Any, SimpleNamespace(parts=("a",))))
    group.launch(step, cast(Any, SimpleNamespace(parts=("b",))))  # waits for the one thread: queued
    spread.shutdown()
    release.set()  # the running one is killed and ends
    begun = time.monotonic()
    # ends as soon as the killed run has (a loaded machine may take a while to run its thread), not at the timeout
    left = spread.wait(30.0)
    assert (left, time.monotonic() - begun < 30.0) == (0, True)


def res(requests: dict[str, str]) -> Resource:
    return Resource(name="r", type="cpu", vendor="any", requests=requests, limits={})


@pytest.mark.parametrize("cpuset", ["0", " , "])
def test_a_target_cpuset_too_small_for_one_slot_is_refused_not_unpinned(cpuset: str) -> None:
    """``target.cpuset: {r: "0"}`` with ``cpu: 2``: the matrix allows CPU 0 only, yet today the runs go unpinned,
    on every CPU of the gate (a run printed ``[0, 1]``), with no error; a blank list (" , ") does the same. A cpuset
    that cannot hold one slot is a ``bad_request`` naming ``target.cpuset`` (ValueError here), never a run on CPUs
    the matrix did not give."""
    with pytest.raises(ValueError, match="target.cpuset"):
        local_slots(res({"cpu": "2"}), {"cpuset": {"r": cpuset}}, cpus=[0, 1])


@pytest.mark.parametrize("ids", [["0,1", "1"], ["abc"], [""], ["-1"], ["1", "01"]])
def test_device_ids_that_are_not_one_device_index_each_are_refused(ids: list[str]) -> None:
    """``target.device_ids`` entries go into ``CUDA_VISIBLE_DEVICES`` unchecked: ``["0,1", "1"]`` makes two slots
    recorded as different devices of which both hold device 1 (two runs at once on GPU 1, each "pinned to a slot of
    its own"), ``"abc"``, ``""`` and ``"-1"`` hide every device while the slot is recorded as a device, and
    ``"01"`` is device 1 again. Each must be a named ValueError (``bad_request`` naming ``target.device_ids``)."""
    gpu = Resource(name="r", type="gpu", vendor="nvidia", requests={"nvidia.com/gpu": "1"}, limits={})
    with pytest.raises(ValueError, match="target.device_ids"):
        local_slots(gpu, {"device_ids": {"r": ids}}, cpus=[0], environ={})


HOG = """
import threading, time
threading.stack_size(64 * 1024)
held = []
try:
    while True:
        t = threading.Thread(target=time.sleep, args=(10,))
        t.start()
        held.append(t)
except RuntimeError:
    pass
time.sleep(10)
"""
HONEST = ["{python}", "-c", "import subprocess, sys, time; time.sleep(3); "
          "subprocess.run([sys.executable, *sys.argv[1:]], check=True)",
          "{code}/infer.py", "--model", "{model}", "--data", "{dataset}", "--out", "{outputs}",
          "--provider", "{provider}"]


def test_one_run_cannot_fail_another_run_at_once_through_the_shared_process_limit(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs at once as the same sandbox user: m1 takes every process the uid may have (RLIMIT_NPROC counts
    every process of the uid, across sandboxes), m2 is an honest model that starts one child after 3 s. Today m2
    fails ``nonzero_exit`` (owner algorithm: BlockingIOError from fork) while both items record isolation between
    model runs "proven": m2's owner is blamed for m1's act. m2 must pass (its run isolated from m1's), or at the
    very least not be judged with isolation proven."""
    monkeypatch.setenv("HETERO_SANDBOX_PIDS", "64")
    path = spread_matrix(pytester.path, CPU)
    doc = json.loads(path.read_text())
    doc["spec"]["models"][0]["entrypoint"] = ["{python}", "-c", HOG]
    doc["spec"]["models"][1]["entrypoint"] = HONEST
    path.write_text(json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", "r1", "-k", "model")
    ev = evidence_of(pytester)
    victim = items(ev)["cpu::py::m2@digits-test::model"]
    run = record(victim, "model.run")
    # a fork refused for want of processes another run held: the victim's failure is not proven to be its own, and
    # its evidence says so (runs at once share the sandbox user's process limit: listed as not proven)
    contention = [r["data"] for r in victim["records"] if r["kind"] == "scope.not_proven"
                  and r["data"]["part"] == CONTENTION_PART]
    assert victim["status"] == "passed" or (len(contention) == 1 and "RLIMIT_NPROC" in contention[0]["reason"]), (
        victim["failure"], run["isolation"].get("models_isolation"))



def test_a_run_whose_model_file_fails_its_digest_is_never_started(tmp_path: Path) -> None:
    """m2's model file is not the declared version (sha256 mismatch). In shared mode its item fails
    ``digest_mismatch`` before its entrypoint runs; per-run, m1's item launches m2's run ahead, so m2's entrypoint
    runs (seen here as a process) on the unverified file, while m2's item then reports ``digest_mismatch`` with no
    run recorded: code ran that the gate's evidence says never ran. A run launched ahead must be its item's run
    after the item's own checks (``verify_inputs``, the dataset view), or not be launched."""
    token = f"atk8-digest-{uuid.uuid4().hex}"
    path = spread_matrix(tmp_path, CPU, entrypoint=["{python}", "-c", "import time; time.sleep(6)"])
    other = tmp_path / "other.onnx"
    shutil.copy(DIGITS / "model" / "digits-logreg-1.0.0.onnx", other)
    doc = json.loads(path.read_text())
    doc["spec"]["models"][1].update(uri=str(other), sha256="0" * 64,
                                    entrypoint=["{python}", "-c", f"import time; time.sleep(6)  # {token}"])
    path.write_text(json.dumps(doc))
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                             path.name, "--hetero-run-id", "r1", "--rootdir", str(tmp_path), "-k", "model"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = False
    try:
        while proc.poll() is None:
            seen = seen or _in_runs(token) > 0
            time.sleep(0.1)
    finally:
        out, _ = proc.communicate(timeout=120)
    ev = json.loads((tmp_path / "reports" / "r1" / "evidence.json").read_text())
    assert items(ev)["cpu::py::m2@digits-test::model"]["failure"]["category"] == "digest_mismatch", out[-2000:]
    assert not seen, "m2's entrypoint ran on a model file that failed its digest check"


class FakeNvml(types.ModuleType):
    """NVML of a host with two GPUs: GPU 0 (the run's slot) at 100 MiB and 0 %, GPU 1 (another run's slot, or
    another slot's idle neighbour) at 9000 MiB and 95 %."""

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        super().__init__("pynvml")

    def nvmlInit(self) -> None:  # noqa: N802 - NVML's names
        pass

    def nvmlShutdown(self) -> None:  # noqa: N802
        pass

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:  # noqa: N802
        return b"Fake GPU"

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(total=80 * 2**30, used=(100 if h == 0 else 9000) * 2**20)

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(gpu=0 if h == 0 else 95)


def test_a_runs_gpu_memory_peak_is_read_from_its_own_slots_devices_only(pytester: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A per-run model run pinned to GPU 0 (``CUDA_VISIBLE_DEVICES=0``): ``model.run_time``'s
    ``gpu_memory_peak_mib`` is documented as "the highest memory used on a device allocated to the run" and can be
    judged by acceptance rules, yet the local engine samples every GPU of the host, so with runs at once the figure
    of run A is run B's (here 9000 MiB from GPU 1, a device never given to this run). It must be GPU 0's: 100."""
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    spread_matrix(pytester.path, GPU, runs=1, concurrency=1, target={"device_ids": {"gpu": [0, 1]}})
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", "r1", "-k", "model")
    item = items(evidence_of(pytester))["gpu::py::m1@digits-test::model"]
    assert record(item, "model.run")["spread"]["slot"] == {"kind": "devices", "ids": ["0"]}
    peak = record(item, "model.run_time")["values"]["gpu_memory_peak_mib"]
    assert peak["value"] == 100.0, peak
