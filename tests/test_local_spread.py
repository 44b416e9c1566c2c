"""Per-run model runs on the local engine (``model_runs: per-run``, issue 32): each model run a bubblewrap sandbox of
its own, pinned to a device slot of this host (CPU affinity, or ``CUDA_VISIBLE_DEVICES`` /
``ASCEND_RT_VISIBLE_DEVICES``), the runs going concurrently, each result joined to its item, gating kept; Ctrl-C
or a kill of the gate leaves no process. Real pytest runs, real bubblewrap, real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support import ctrl_c_reaches, evidence_of, gone, matrix_text, statuses, survivors

from pytest_hetero.backends.local.spread import (
    Pin,
    Running,
    affinity,
    host_accelerators,
    isolation,
    local_slots,
    pin,
    pin_kept,
    unkept,
)
from pytest_hetero.backends.sandbox import ConfinementFacts
from pytest_hetero.backends.slots import Slot
from pytest_hetero.evidence.untested import CONTENTION_PART, MODELS_ISOLATION_PART
from pytest_hetero.matrix.model import Resource

pytestmark = pytest.mark.usefixtures("outside_inputs")

SLEEP_S = 6.0  # longer than a sandbox start on a loaded 2-core machine: two runs at once overlap however slow
# the model: sleeps, then writes when it began and ended, its CPU affinity, the kernel's Cpus_allowed_list of itself
# and of a child it starts, and the device variables it saw (no braces: the entrypoint's placeholders use them)
PROBE = f"""
import json, os, subprocess, sys, time
begun = time.time()
time.sleep({SLEEP_S})
def allowed(text):
    return [line.split(':', 1)[1].strip() for line in text.splitlines() if line.startswith('Cpus_allowed_list')][0]
child = subprocess.run(['cat', '/proc/self/status'], capture_output=True, text=True).stdout
json.dump(dict(begun=begun, ended=time.time(), affinity=sorted(os.sched_getaffinity(0)),
               allowed=allowed(open('/proc/self/status').read()), child_allowed=allowed(child),
               cuda=os.environ.get('CUDA_VISIBLE_DEVICES'), ascend=os.environ.get('ASCEND_RT_VISIBLE_DEVICES')),
          open(sys.argv[1], 'w'))
"""
CPU = {"name": "cpu", "type": "cpu", "requests": {"cpu": 1}}
GPU = {"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1}}


def spread_matrix(folder: Path, resource: dict[str, Any], *, runs: int = 2, concurrency: int | str = 2,
                  entrypoint: list[str] | None = None, target: dict[str, Any] | None = None,
                  image: str = "python:current") -> Path:
    """A local matrix of ``runs`` model runs (models ``m1``…) of ``resource`` with ``per-run`` model runs."""
    doc = json.loads(matrix_text(resources=[{**resource, "model_runs": "per-run", "concurrency": concurrency}],
                                 name="spread", images=[{"name": "py", "reference": image}]))
    first = doc["spec"]["models"][0]
    doc["spec"]["models"] = [{**first, "name": f"m{i}", "entrypoint": entrypoint or ["{python}", "-c", PROBE,
                                                                                        "{outputs}"]}
                             for i in range(1, runs + 1)]
    doc["spec"]["target"].update(target or {})
    path = folder / "spread.matrix.yaml"
    path.write_text(json.dumps(doc))
    return path


def items(ev: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """nodeid (less the file) → item."""
    return {i["nodeid"].split("::", 1)[1]: i for i in ev["items"]}


def record(item: dict[str, Any], kind: str) -> dict[str, Any]:
    [found] = [r["data"] for r in item["records"] if r["kind"] == kind]
    return dict(found)


def outputs(pytester: pytest.Pytester, ev: dict[str, Any], nodeid: str) -> dict[str, Any]:
    """The outputs the gate kept for ``nodeid`` (the file the model wrote, joined to its item)."""
    [art] = [a for a in items(ev)[nodeid]["artifacts"] if a["name"] == "outputs.json"]
    return dict(json.loads((pytester.path / "reports" / ev["run"]["id"] / art["path"]).read_text()))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two runs pinned to a CPU each need two CPUs")
def test_two_runs_overlap_each_pinned_to_a_cpu_of_its_own(pytester: pytest.Pytester) -> None:
    """``cpu: 1``, concurrency 2, on a host of ≥ 2 CPUs: both model runs go at once, each in a bubblewrap of its
    own on one CPU (its process and its child see exactly that CPU), different ones; each item joins the outputs of
    its own run; startup ran first (gating), and isolation between the runs is recorded proven."""
    spread_matrix(pytester.path, CPU)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", "r1",
                                "-k", "not business")
    ev = evidence_of(pytester)
    assert result.ret == 0, [(i["nodeid"], i["failure"]) for i in ev["items"] if i["failure"]]
    assert {k: v for k, v in statuses(ev).items() if not k.endswith("::business")} == {"cpu::discovery": "passed", "cpu::scheduling": "not_applicable",
                            "cpu::py::startup": "passed", "cpu::py::m1@digits-test::model": "passed",
                            "cpu::py::m2@digits-test::model": "passed"}
    first = record(items(ev)["cpu::py::m1@digits-test::model"], "model.spread")
    cpus = sorted(os.sched_getaffinity(0))
    assert (first["model_runs"], first["concurrency"], first["launched"], first["concurrency_setting"]) == \
        ("per-run", 2, 2, 2)
    assert first["slots"] == [{"kind": "cpuset", "ids": [str(c)]} for c in cpus]
    assert first["items"] == ["cpu::py::m1@digits-test::model", "cpu::py::m2@digits-test::model"]
    seen = {}
    for name in ("m1", "m2"):
        nodeid = f"cpu::py::{name}@digits-test::model"
        run = record(items(ev)[nodeid], "model.run")
        out = outputs(pytester, ev, nodeid)
        [cpu] = run["spread"]["slot"]["ids"]
        assert run["spread"]["slot"]["kind"] == "cpuset" and run["spread"]["concurrency"] == 2
        assert (out["affinity"], out["allowed"], out["child_allowed"]) == ([int(cpu)], cpu, cpu), out
        iso = run["isolation"]
        assert (iso["mechanism"], iso["confined"], iso["shared_between_runs"]) == ("bubblewrap", True, False), iso
        assert iso["models_isolation"].startswith("proven") and iso["slot"] == run["spread"]["slot"]
        # two at once as one sandbox user: its process limit and the host's memory are shared, listed as not proven
        assert "RLIMIT_NPROC" in iso["contention"]
        assert [r["data"]["reason"] for r in items(ev)[nodeid]["records"] if r["kind"] == "scope.not_proven"
                and r["data"]["part"] == CONTENTION_PART] == [iso["contention"]]
        assert "net" in iso["namespaces"] and "uts" in iso["namespaces"]  # a bubblewrap of its own, not a fork
        assert any("affinity mask" in g for g in iso["gaps"]), iso["gaps"]
        assert "pinning" not in run["spread"] and "pinning" not in iso  # it kept its one CPU
        assert not [r for r in items(ev)[nodeid]["records"] if r["kind"] == "scope.not_proven"
                    and r["data"]["part"] == MODELS_ISOLATION_PART]
        seen[name] = (out["begun"], out["ended"], cpu)
    (b1, e1, c1), (b2, e2, c2) = seen["m1"], seen["m2"]
    assert b2 < e1 and b1 < e2, seen  # the two runs overlapped in time
    assert c1 != c2, seen  # on different CPUs
    # gating kept: the runs were launched at the first model item, after startup had passed
    startup_end = datetime.fromisoformat(items(ev)["cpu::py::startup"]["finished_at"].replace("Z", "+00:00"))
    assert min(b1, b2) >= startup_end.timestamp(), (startup_end, seen)


def test_a_gpu_runs_devices_come_as_cuda_visible_devices(pytester: pytest.Pytester) -> None:
    """``nvidia.com/gpu: 1`` with ``target.device_ids: {gpu: [3, 1]}``: two runs at once, one on device 3, one on
    device 1, each seeing only its own in ``CUDA_VISIBLE_DEVICES``. Discovery and startup are deselected (this host
    has no GPU): the model items run without them, as a gate run with ``-k model`` does."""
    spread_matrix(pytester.path, GPU, target={"device_ids": {"gpu": [3, "1"]}})
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", "r1",
                                "-k", "model")
    ev = evidence_of(pytester)
    assert result.ret == 0, [(i["nodeid"], i["failure"]) for i in ev["items"] if i["failure"]]
    first = record(items(ev)["gpu::py::m1@digits-test::model"], "model.spread")
    assert (first["concurrency"], first["slots"]) == (2, [{"kind": "devices", "ids": ["3"]},
                                                          {"kind": "devices", "ids": ["1"]}])
    seen = {}
    for name in ("m1", "m2"):
        nodeid = f"gpu::py::{name}@digits-test::model"
        run = record(items(ev)[nodeid], "model.run")
        out = outputs(pytester, ev, nodeid)
        assert run["spread"]["slot"]["kind"] == "devices"
        assert out["cuda"] == ",".join(run["spread"]["slot"]["ids"]) and out["ascend"] is None, out
        assert any("CUDA_VISIBLE_DEVICES" in g for g in run["isolation"]["gaps"])
        seen[name] = (out["begun"], out["ended"], out["cuda"])
    assert sorted(s[2] for s in seen.values()) == ["1", "3"]
    assert seen["m2"][0] < seen["m1"][1] and seen["m1"][0] < seen["m2"][1], seen


def test_a_failed_startup_blocks_the_per_run_model_runs(pytester: pytest.Pytester) -> None:
    """Gating is the items': the image's startup fails, so no model run is launched (none in a sandbox of its own
    either), and the model items are blocked by it, as in shared mode."""
    spread_matrix(pytester.path, CPU, image="python:/nonexistent/python3")
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", "r1", "-k", "not business")
    ev = evidence_of(pytester)
    got = statuses(ev)
    assert got["cpu::py::startup"] == "failed"
    assert got["cpu::py::m1@digits-test::model"] == got["cpu::py::m2@digits-test::model"] == "blocked"
    assert not [r for i in ev["items"] for r in i["records"] if r["kind"] in ("model.spread", "model.run")]


def test_a_failed_run_reports_the_same_category_as_in_shared_mode(pytester: pytest.Pytester) -> None:
    """A model that exits 3 without outputs, and one whose entrypoint does not exist: the categories shared mode
    gives them (``nonzero_exit``, ``entrypoint_missing``), each on its own item."""
    spread_matrix(pytester.path, CPU)
    doc = json.loads((pytester.path / "spread.matrix.yaml").read_text())
    doc["spec"]["models"][0]["entrypoint"] = ["{python}", "-c", "import sys; sys.exit(3)"]
    doc["spec"]["models"][1]["entrypoint"] = ["/nonexistent/entrypoint", "{outputs}"]
    (pytester.path / "spread.matrix.yaml").write_text(json.dumps(doc))
    got = {}
    for mode in ("per-run", "shared"):
        pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", f"r-{mode}",
                           "-k", "model", "--hetero-model-runs", mode)
        ev = json.loads((pytester.path / "reports" / f"r-{mode}" / "evidence.json").read_text())
        got[mode] = {k: (v["status"], v["failure"]["category"]) for k, v in items(ev).items()}
        assert any(r["kind"] == "model.spread" for i in ev["items"] for r in i["records"]) == (mode == "per-run")
    assert got["per-run"] == got["shared"] == {"cpu::py::m1@digits-test::model": ("failed", "nonzero_exit"),
                                               "cpu::py::m2@digits-test::model": ("failed", "entrypoint_missing")}


def _in_runs(token: str) -> int:
    """How many model processes (not their bubblewrap launchers) hold ``token`` in their command line."""
    found = 0
    for pid in survivors(token):
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if not argv0.endswith(b"bwrap"):
            found += 1
    return found


@pytest.mark.parametrize(("sig", "shared"), [(signal.SIGINT, "on"), (signal.SIGKILL, "on"), (signal.SIGKILL, "off")])
def test_ctrl_c_or_a_kill_mid_run_leaves_no_process(tmp_path: Path, sig: signal.Signals, shared: str) -> None:
    """A real pytest process, stopped (Ctrl-C, or SIGKILL) while two per-run model runs sleep at once: no process of
    either is left, also with ``HETERO_SANDBOX_SHARED=off`` (as root a run of its own is still forked by a sandbox
    of its own: a bubblewrap per run could not kill it). After Ctrl-C the gate ends as interrupted (exit 2), the
    model items ``not_run``, and their run folders are gone."""
    token = f"hetero-spread-{uuid.uuid4().hex}"
    spread_matrix(tmp_path, CPU, entrypoint=["{python}", "-c", f"import time; time.sleep(120)  # {token}"],
                  concurrency="free")
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                             "spread.matrix.yaml", "--hetero-run-id", "r1", "--rootdir", str(tmp_path),
                             "-k", "not business"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "HETERO_SANDBOX_SHARED": shared},
                            preexec_fn=ctrl_c_reaches)
    want = min(2, len(os.sched_getaffinity(0)))
    try:
        deadline = time.monotonic() + 120
        while _in_runs(token) < want and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _in_runs(token) == want, "the model runs never started"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert gone(token) == []
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        return
    assert proc.returncode == 2, out[-3000:]
    assert sorted(Path("/tmp").glob(f"hetero-run-{proc.pid}-*")) == []
    ev = json.loads((tmp_path / "reports" / "r1" / "evidence.json").read_text())
    assert ev["run"]["interrupted"] is True
    assert {k: v for k, v in statuses(ev).items() if k.endswith("::model")} == {
        "cpu::py::m1@digits-test::model": "not_run", "cpu::py::m2@digits-test::model": "not_run"}
    assert ev["cleanup"]["leftovers"] == []  # every run ended when killed: none left to the cleanup ledger


# -- the pinning decisions, without a run ------------------------------------------------------------------------

def res(requests: dict[str, str], limits: dict[str, str] | None = None) -> Resource:
    return Resource(name="r", type="cpu", vendor="any", requests=requests, limits=limits or {})


def test_cpu_slots_are_this_processs_cpus_cut_by_the_request() -> None:
    assert local_slots(res({"cpu": "1"}), {}, cpus=[2, 5, 7]) == [Slot("cpuset", ("2",)), Slot("cpuset", ("5",)),
                                                                 Slot("cpuset", ("7",))]
    assert local_slots(res({"cpu": "1500m"}), {}, cpus=[0, 1, 2, 3, 4]) == [Slot("cpuset", ("0", "1")),
                                                                           Slot("cpuset", ("2", "3"))]
    assert local_slots(res({"cpu": "1"}), {"cpuset": {"r": "1,3"}}, cpus=[0, 1, 2, 3]) == [
        Slot("cpuset", ("1",)), Slot("cpuset", ("3",))]
    assert local_slots(res({"cpu": "4"}), {}, cpus=[0, 1]) == [Slot("unpinned", ())]
    with pytest.raises(ValueError, match=r"target.cpuset '0-3' names CPU 2, which this process may not run on "
                                         r"\(its CPUs: 0,1\)"):
        local_slots(res({"cpu": "1"}), {"cpuset": {"r": "0-3"}}, cpus=[0, 1])
    with pytest.raises(ValueError, match="names CPU 1 twice"):
        local_slots(res({"cpu": "1"}), {"cpuset": {"r": "1,1"}}, cpus=[0, 1])


def test_device_slots_come_from_the_target_the_gates_own_selection_or_the_device_nodes(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia10", "nvidiactl", "davinci2", "davinci_manager"):
        (dev / name).touch()
    assert host_accelerators({}, dev) == {"nvidia": ["0", "1", "10"], "ascend": ["2"]}
    assert host_accelerators({"CUDA_VISIBLE_DEVICES": "3, 5", "ASCEND_RT_VISIBLE_DEVICES": ""}, dev) == {
        "nvidia": ["3", "5"], "ascend": []}
    gpu = res({"nvidia.com/gpu": "1"})
    assert local_slots(gpu, {}, cpus=[0], environ={}, dev=dev) == [Slot("devices", (i,)) for i in ("0", "1", "10")]
    assert local_slots(gpu, {}, cpus=[0], environ={"CUDA_VISIBLE_DEVICES": "5,6"}, dev=dev) == [
        Slot("devices", ("5",)), Slot("devices", ("6",))]
    assert local_slots(gpu, {"device_ids": {"r": [7, "4"]}}, cpus=[0], environ={"CUDA_VISIBLE_DEVICES": "5"},
                       dev=dev) == [Slot("devices", ("7",)), Slot("devices", ("4",))]
    assert local_slots(res({"nvidia.com/gpu": "2"}), {}, cpus=[0], environ={}, dev=dev) == [
        Slot("devices", ("0", "1"))]
    assert local_slots(gpu, {}, cpus=[0], environ={}, dev=tmp_path) == [Slot("unpinned", ())]
    npu = res({"cpu": "2"}, {"huawei.com/Ascend910": "1"})
    assert local_slots(npu, {}, cpus=[0], environ={}, dev=dev) == [Slot("devices", ("2",))]


def test_a_slot_pins_by_the_vendors_variable_or_the_cpu_affinity() -> None:
    assert pin(Slot("devices", ("0", "2")), res({"nvidia.com/gpu": "2"}), 2) == Pin(
        Slot("devices", ("0", "2")), env={"CUDA_VISIBLE_DEVICES": "0,2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, width=2)
    assert pin(Slot("devices", ("1",)), res({"huawei.com/Ascend910B": "1"}), 1).env == {
        "ASCEND_RT_VISIBLE_DEVICES": "1"}
    assert pin(Slot("cpuset", ("1", "3")), res({"cpu": "2"}), 2) == Pin(
        Slot("cpuset", ("1", "3")), cpus=frozenset({1, 3}), width=2)
    assert pin(Slot("unpinned", ()), res({"nvidia.com/gpu": "1"}), 1) == Pin(Slot("unpinned", ()))


def test_affinity_is_the_calling_threads_and_reaches_a_child() -> None:
    """Set on a helper thread around a process start: the child runs on that CPU, the thread gets its CPUs back,
    and the other threads never lose theirs."""
    mine = os.sched_getaffinity(0)
    cpu = max(mine)
    got: dict[str, Any] = {}

    def start() -> None:
        with affinity(frozenset({cpu})):
            child = subprocess.run(["grep", "Cpus_allowed_list", "/proc/self/status"], capture_output=True,
                                   text=True, check=True)
            got["during_main"] = os.sched_getaffinity(threading.main_thread().native_id or 0)
        got["child"] = child.stdout.split(":", 1)[1].strip()
        got["after"] = os.sched_getaffinity(0)

    worker = threading.Thread(target=start)
    worker.start()
    worker.join(30)
    assert got == {"child": str(cpu), "after": mine, "during_main": mine}
    with affinity(None):
        assert os.sched_getaffinity(0) == mine


def sandboxed(mechanism: str = "bubblewrap", confined: bool = True, gaps: tuple[str, ...] = (),
              reason: str = "") -> ConfinementFacts:
    """A sandbox's isolation record (:meth:`pytest_hetero.backends.sandbox.Confinement.facts`)."""
    return {"mechanism": mechanism, "identity": "hetero-sandbox", "confined": confined, "namespaces": ["pid"],
            "visible": [], "hidden": [], "writable": [], "network": "none", "limits": None, "copied": [],
            "gaps": list(gaps), "reason": reason}


def test_isolation_is_proven_for_a_confined_run_and_runs_at_once_name_what_they_share() -> None:
    confined = sandboxed()
    alone = isolation(confined, Pin(Slot("cpuset", ("0",)), cpus=frozenset({0}), width=1), network=False)
    assert (alone["shared_between_runs"], alone["slot"]) == (False, {"kind": "cpuset", "ids": ["0"]})
    assert alone["models_isolation"].startswith("proven") and "per_run" in alone
    assert isolation(confined, Pin(Slot("cpuset", ("0",)), width=1), network=True)["shared_between_runs"] is False
    assert "contention" not in alone
    cpu = Pin(Slot("cpuset", ("0",)), cpus=frozenset({0}), width=2)
    together = isolation(confined, cpu, network=False)  # one uid's process limit and the host's memory, shared
    assert together["shared_between_runs"] is False and together["models_isolation"].startswith("proven")
    assert "2 at once as one sandbox user" in together["contention"] and "RLIMIT_NPROC" in together["contention"]
    shared = isolation(confined, cpu, network=True)
    assert shared["shared_between_runs"] is True and "models_isolation" not in shared
    assert "2 at once on the host's network" in shared["reason"]
    loose = isolation(sandboxed("none", confined=False, gaps=("x",), reason="HETERO_SANDBOX=off"), cpu,
                      network=False)
    assert loose["shared_between_runs"] is True and "not confined (HETERO_SANDBOX=off)" in loose["reason"]
    assert loose["gaps"][0] == "x" and loose["mechanism"] == "none"
    never = isolation(None, cpu, network=False)  # the sandbox never started: no record of its own
    assert (never["shared_between_runs"], never["gaps"], "mechanism" in never) == (True, [
        "its CPUs are an affinity mask (sched_setaffinity), not a cpuset cgroup: the run could widen it"], False)
    assert "not confined (no sandbox)" in never["reason"]


def test_a_run_held_after_the_stop_is_killed_at_once() -> None:
    class Run:
        def __init__(self) -> None:
            self.killed = 0

        def kill(self) -> None:
            self.killed += 1

    running, early, late = Running(), Run(), Run()
    with running.hold(early):
        assert running.stop() == 1 and early.killed == 1
    with running.hold(late):
        assert late.killed == 1
    assert running.stop() == 0


# widens its CPU affinity to every CPU of the host, burns two CPUs at once (two children that spin) until they used
# clearly more CPU time than its one pinned CPU could give over the run (or 4 s pass: on a loaded machine the spinners
# may never get two CPUs, and 20 s of spinning there only slowed every other test), then infers honestly
WIDEN = """
import os, subprocess, sys, time
code, model, data, out, prov = sys.argv[1:6]
os.sched_setaffinity(0, range(os.cpu_count()))
sys.stderr.write('widened to %d CPU(s)\\n' % len(os.sched_getaffinity(0)))
kids = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _ in range(2)]
tick = os.sysconf('SC_CLK_TCK')
def cpu(pid):
    f = open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick
begun = time.monotonic()
while time.monotonic() - begun < 4:
    time.sleep(0.1)
    if sum(cpu(k.pid) for k in kids) >= 1.6 * (time.monotonic() - begun) + 1.5:
        break
for k in kids:
    k.kill()
    k.wait()
subprocess.run([sys.executable, code + '/infer.py', '--model', model, '--data', data, '--out', out,
                '--provider', prov], check=True)
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="widening a one-CPU pin needs a second CPU")
def test_a_run_that_widens_its_cpu_affinity_is_recorded_as_not_keeping_its_pin(pytester: pytest.Pytester) -> None:
    """``cpu: 1``: the run is pinned to one CPU, widens its affinity (``sched_setaffinity``, which an affinity mask
    cannot forbid) and spins two CPUs at once. The model sees its affinity widened; the record follows the rule on
    the run's measured figures: CPU-seconds beyond what one CPU gives over the run (+10 % + 0.2 s) → ``spread`` and
    ``isolation`` say the pinning was not kept (cpu_s over the run time on 1 pinned CPU) and ``per_run`` no longer
    says it stayed pinned. On an idle second CPU the run exceeds the bound (seen at 16.6 s over 9.5 s); a machine so
    loaded that the two spinners never got more than one CPU between them cannot show a breach by CPU time, and then
    nothing may be claimed either way but that no breach is recorded (the exact rule: the next test)."""
    spread_matrix(pytester.path, CPU, runs=1, concurrency=1,
                  entrypoint=["{python}", "-c", WIDEN, "{code}", "{model}", "{dataset}", "{outputs}", "{provider}"])
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", "r1", "-k", "model")
    item = items(evidence_of(pytester))["cpu::py::m1@digits-test::model"]
    run, cpu_s = record(item, "model.run"), record(item, "model.run_time")["values"]["cpu_s"]["value"]
    assert [ln for ln in run["stderr"]["text"].splitlines() if ln.startswith("widened")] == [
        f"widened to {len(os.sched_getaffinity(0))} CPU(s)"], run["stderr"]
    bound = run["duration_s"] * 1.10 + 0.2
    kept, iso = run["spread"].get("pinning"), run["isolation"]
    if cpu_s > bound + 0.01:
        assert kept is not None and kept.startswith(f"not kept: cpu_s {cpu_s:.2f} over ") and \
            "on 1 pinned CPU(s)" in kept, (cpu_s, run["duration_s"], run["spread"])
        assert iso["pinning"] == kept and "which the run did not keep" in iso["per_run"], iso
        assert "pinned to one device slot (device" not in iso["per_run"]
    elif cpu_s < bound - 0.01:
        assert kept is None and "pinning" not in iso, (cpu_s, run["duration_s"], kept)


def test_the_pin_is_kept_while_cpu_time_fits_the_pinned_cpus() -> None:
    """The bound is the run time × the slot's CPUs, +10 % + 0.2 s; nothing is said of a run not pinned to CPUs, or
    whose CPU time was not measured."""
    two = Pin(Slot("cpuset", ("0", "1")), cpus=frozenset({0, 1}), width=2)
    assert pin_kept(two, 4.6, 2.0) is None  # 2 s × 2 CPUs × 1.1 + 0.2 = 4.6
    assert pin_kept(two, 4.7, 2.0) == ("not kept: cpu_s 4.70 over 2.00 s on 2 pinned CPU(s), more than those CPUs "
                                       "can give (4.60 s with slack): the run widened its CPU affinity "
                                       "(sched_setaffinity) and ran on CPUs outside its slot")
    assert pin_kept(two, None, 2.0) is None
    assert pin_kept(Pin(Slot("devices", ("0",)), env={"CUDA_VISIBLE_DEVICES": "0"}), 99.0, 1.0) is None
    facts = unkept(isolation(sandboxed(), two, network=False), "why")
    assert facts["pinning"] == "why" and "started pinned to one device slot (CPU affinity), which the run did not " \
        "keep" in facts["per_run"]


def test_an_unconfined_per_run_model_run_names_runs_at_the_same_time_as_able_to_change_it(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """``HETERO_SANDBOX=off`` with ``per-run``: the run is not confined, so isolation between model runs is not
    proven; the runs go at once, so the reason names another run earlier *or at the same time*, not only an earlier
    one (shared mode's wording, where runs go one after the other)."""
    monkeypatch.setenv("HETERO_SANDBOX", "off")
    spread_matrix(pytester.path, CPU, runs=1, concurrency=1,
                  entrypoint=["{python}", "{code}/infer.py", "--model", "{model}", "--data", "{dataset}", "--out",
                              "{outputs}", "--provider", "{provider}"])
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", "r1", "-k", "model")
    ev = evidence_of(pytester)
    [shared] = [p for p in ev["untested"]["not_proven"] if p["part"] == "isolation between model runs"]
    assert shared["reason"].startswith("the run was not confined ("), shared
    assert shared["reason"].endswith(": another run (earlier or at the same time) could have changed this run's "
                                     "result"), shared
