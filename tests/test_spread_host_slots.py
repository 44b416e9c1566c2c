"""Per-run model runs of several gate processes on one host (an attack on issue 32's local and Docker spread).

pytest-xdist puts each resource of a matrix on a worker of its own (``pytest_plugin/xdist.py``), and each worker is
a gate process with its own device slots carved from the same host: without a host-wide lease, two workers pinned a
run each to CPU 0 (or GPU 0) at the same moment, each run's evidence naming the slot as its own and isolation
between model runs proven. A slot is now leased host-wide (:class:`pytest_hetero.backends.slots.HostLease`): a lock
file per CPU or device, held while the run holds the slot, which another process's run waits for or passes over.
Real pytest runs (``-n 2``), real bubblewrap."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from support import evidence_of, matrix_text
from test_local_spread import items, record

from pytest_hetero.backends.local.spread import VISIBLE, Pin, isolation, pin
from pytest_hetero.backends.protocol import ActionFailed
from pytest_hetero.backends.slots import HostLease, Slot, Slots
from pytest_hetero.matrix.model import Resource

pytestmark = pytest.mark.usefixtures("outside_inputs")


def test_two_processes_never_hold_one_cpu_at_once(tmp_path: Path) -> None:
    """Two gate processes (two :class:`Slots` over the same lock folder: a lock file's flock is held per open file,
    so one process stands in for two) each carve CPU 0 as a slot: the second waits until the first gives it back."""
    first = Slots([Slot("cpuset", ("0",))], lease=HostLease("host", tmp_path))
    second = Slots([Slot("cpuset", ("0",))], lease=HostLease("host", tmp_path))
    slot, _ = first.take()
    got: list[tuple[Slot, float]] = []
    waiter = threading.Thread(target=lambda: got.append(second.take()), daemon=True)
    waiter.start()
    time.sleep(0.5)
    assert got == []  # CPU 0 is the first process's run's until it gives it back
    first.give(slot)
    waiter.join(5)
    assert got and got[0][0] == Slot("cpuset", ("0",)) and got[0][1] >= 0.4


def test_a_slot_held_elsewhere_is_passed_over_for_a_free_one(tmp_path: Path) -> None:
    """Another process holds CPUs 0-1 (a slot of a 2-CPU request): this process's run takes its slot on CPUs 3-4
    at once rather than waiting for its slot on CPUs 1-2, which shares CPU 1 with the held one; that one is taken once
    the other process gives CPU 1 back."""
    other = Slots([Slot("cpuset", ("0", "1"))], lease=HostLease("host", tmp_path))
    held, _ = other.take()
    mine = Slots([Slot("cpuset", ("1", "2")), Slot("cpuset", ("3", "4"))], lease=HostLease("host", tmp_path))
    slot, waited = mine.take()
    assert (slot.ids, waited < 0.5) == (("3", "4"), True)
    other.give(held)
    assert mine.take()[0].ids == ("1", "2")


def test_leases_are_per_host(tmp_path: Path) -> None:
    """CPU 0 of another Docker engine is not this host's CPU 0."""
    here = Slots([Slot("cpuset", ("0",))], lease=HostLease("host", tmp_path))
    there = Slots([Slot("cpuset", ("0",))], lease=HostLease("docker-engine-abc", tmp_path))
    here.take()
    assert there.take()[0].ids == ("0",)


def test_unpinned_runs_go_one_at_a_time_on_the_host(tmp_path: Path) -> None:
    """A slot with no device index (a GPU resource on a host whose devices the gate cannot list: the engine's
    ``Count`` request or the gate's own device selection places it, on the same devices each time) lets one run at a
    time go within a process; two processes' unpinned runs went at once (shown: two GPU resources under ``-n 2``,
    both runs unpinned over the same 8 s, each isolation proven). One host-wide lease holds them to one at a time."""
    a = Slots([Slot("unpinned", ())], lease=HostLease("host", tmp_path))
    b = Slots([Slot("unpinned", ())], lease=HostLease("host", tmp_path))
    slot, _ = a.take()
    got: list[tuple[Slot, float]] = []
    waiter = threading.Thread(target=lambda: got.append(b.take()), daemon=True)
    waiter.start()
    time.sleep(0.5)
    assert got == []
    a.give(slot)
    waiter.join(5)
    assert got and got[0][0].kind == "unpinned"


def test_a_run_waiting_for_a_slot_held_elsewhere_ends_when_the_gate_stops(tmp_path: Path) -> None:
    """Ctrl-C while a run waits for a CPU another process holds: it ends (``harness``), giving the slot back to its
    own pool, instead of waiting for the other process."""
    stop = threading.Event()
    other = Slots([Slot("cpuset", ("0",))], lease=HostLease("host", tmp_path))
    other.take()
    mine = Slots([Slot("cpuset", ("0",))], lease=HostLease("host", tmp_path), stopped=stop.is_set)
    errors: list[BaseException] = []

    def take() -> None:
        try:
            mine.take()
        except ActionFailed as exc:
            errors.append(exc)

    waiter = threading.Thread(target=take, daemon=True)
    waiter.start()
    time.sleep(0.3)
    stop.set()
    waiter.join(5)
    assert not waiter.is_alive() and len(errors) == 1 and "stopped" in str(errors[0])
    assert [s.ids for s in mine.free_slots()] == [("0",)]


def test_a_lock_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    """The lock folder is shared by every gate process of the host (by default under /tmp): one that is a symbolic
    link (planted by another user) is refused, naming the folder and the fix, never followed."""
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(ValueError, match="HETERO_SLOT_LOCKS"):
        HostLease("host", link)


PROBE = """
import json, os, sys, time
begun = time.time()
time.sleep(10)
json.dump(dict(begun=begun, ended=time.time(), affinity=sorted(os.sched_getaffinity(0))), open(sys.argv[1], 'w'))
"""


def test_two_xdist_workers_never_pin_runs_to_one_cpu_at_once(pytester: pytest.Pytester) -> None:
    """Two CPU resources of one matrix, ``per-run``, concurrency 1, under ``-n 2``: each resource's items run on a
    worker of its own, both at once. Before the lease both runs were pinned to CPU 0 at the same moment (each
    worker's first slot), each recorded as its own slot with isolation proven; now runs that overlap in time are
    on different CPUs (on a one-CPU host they go one after the other)."""
    doc = json.loads(matrix_text(resources=[{"name": n, "type": "cpu", "requests": {"cpu": 1},
                                             "model_runs": "per-run", "concurrency": 1} for n in ("ca", "cb")],
                                 name="two", truth=False))
    doc["spec"]["models"][0]["entrypoint"] = ["{python}", "-c", PROBE, "{outputs}"]
    (pytester.path / "two.matrix.yaml").write_text(json.dumps(doc))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-n", "2",
                                           "--hetero-run-id", "r1", "-k", "model")
    ev = evidence_of(pytester)
    assert result.ret == 0, [(i["nodeid"], i["failure"]) for i in ev["items"] if i["failure"]]
    runs: dict[str, tuple[float, float, list[int], list[str]]] = {}
    for nodeid in ("ca::py::digits-logreg@digits-test::model", "cb::py::digits-logreg@digits-test::model"):
        run = record(items(ev)[nodeid], "model.run")
        [art] = [a for a in items(ev)[nodeid]["artifacts"] if a["name"] == "outputs.json"]
        out = json.loads((pytester.path / "reports" / ev["run"]["id"] / art["path"]).read_text())
        runs[nodeid] = (out["begun"], out["ended"], out["affinity"], run["spread"]["slot"]["ids"])
        assert out["affinity"] == [int(i) for i in run["spread"]["slot"]["ids"]], (out, run["spread"])
    (b1, e1, a1, _), (b2, e2, a2, _) = runs.values()
    overlapped = b1 < e2 and b2 < e1
    assert not (overlapped and set(a1) & set(a2)), runs  # never the same CPU at the same time
    if len(os.sched_getaffinity(0)) >= 2:
        assert overlapped, runs  # a second CPU was free: the second worker's run took it rather than waiting


def gpu(n: int = 1) -> Resource:
    return Resource(name="g", type="gpu", vendor="nvidia", requests={"nvidia.com/gpu": str(n)}, limits={})


def test_a_gpu_slot_names_its_devices_in_the_order_nvidia_smi_counts_them() -> None:
    """A run pinned to GPU slot ``1`` gets ``CUDA_VISIBLE_DEVICES=1``, which CUDA reads in its own order: by default
    the fastest device first, not the PCI bus order that ``nvidia-smi``, NVML (the run's ``model.usage`` samples
    NVML index 1), Docker's device requests and ``/dev/nvidia1`` count in. On a host of mixed GPUs the run would
    compute on another GPU than the one its evidence names, sampled and leased. ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
    makes CUDA count as they do."""
    env = pin(Slot("devices", ("1",)), gpu(), 2).env
    assert env == {VISIBLE["nvidia"]: "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_runs_at_once_name_the_disk_their_run_folders_share() -> None:
    """Each per-run sandbox's run folder (where it writes its outputs) is on the host's disk under the gate's temporary
    folder, not a size-limited tmpfs (docs/safety.md): shown with the gate's TMPDIR on a 40 MiB tmpfs, a run filling
    its folder made the run beside it fail ``nonzero_exit`` (owner algorithm: "OSError: [Errno 28] No space left on
    device"), while the evidence's ``contention`` named only the process limit and the memory the runs share, so the
    failure's owner read as proven. The disk is named beside them."""
    facts = isolation({"mechanism": "bubblewrap", "identity": "u", "confined": True, "namespaces": [], "visible": [],
                       "hidden": [], "writable": [], "network": "loopback", "limits": None, "copied": [],
                       "gaps": [], "reason": ""}, Pin(Slot("cpuset", ("0",)), cpus=frozenset({0}), width=2), False)
    assert "contention" in facts and "disk" in facts["contention"] and "No space left" in facts["contention"]


@pytest.mark.skipif(os.geteuid() != 0, reason="gives the folder and a lock file to another user (chown)")
def test_the_lock_folder_of_another_user_is_shared_as_tmp_is_and_a_bad_lock_file_is_named(tmp_path: Path) -> None:
    """The default folder is made by the first gate of the host, whoever runs it, world-writable and sticky: another
    user's gate uses it too (their runs share the host's CPUs and devices). A lock file it cannot open (another
    user's, mode 0600) is a clean refusal naming the file and the fix, not a traceback."""
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o1777)
    folder.chmod(0o1777)
    os.chown(folder, 65534, 65534)
    lease = HostLease("host", folder)
    bad = folder / "host-cpuset-0.lock"
    bad.symlink_to(tmp_path / "elsewhere")
    slots = Slots([Slot("cpuset", ("0",))], lease=lease)
    with pytest.raises(ActionFailed, match="host-cpuset-0.lock cannot be opened.*HETERO_SLOT_LOCKS") as caught:
        slots.take()
    assert caught.value.category == "configuration"
    assert not (tmp_path / "elsewhere").exists()  # the link was not followed
    private = folder / "locks-only"
    private.mkdir(mode=0o700)
    os.chown(private, 65534, 65534)
    with pytest.raises(ValueError, match="another user's"):
        HostLease("host", private)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a width of 2 needs two CPU slots")
def test_a_lone_run_is_not_said_to_go_beside_others(pytester: pytest.Pytester) -> None:
    """One model × one dataset, ``per-run``, concurrency 2 on two CPU slots, the model granted the host's network:
    the group's pool was 2 wide, and the lone run was recorded as "model runs went 2 at once on the host's network":
    isolation between model runs not proven (the verdict held back from pass) and contention listed, though no other
    run existed. The width is now at most the runs the group planned."""
    doc = json.loads(matrix_text(resources=[{"name": "c", "type": "cpu", "requests": {"cpu": 1},
                                             "model_runs": "per-run", "concurrency": 2}], name="lone", truth=False))
    doc["spec"]["models"][0]["network"] = True
    doc["spec"]["models"][0]["entrypoint"] = ["{python}", "-c", "import json, sys; json.dump(dict(ids=[0]), "
                                              "open(sys.argv[1], 'w'))", "{outputs}"]
    (pytester.path / "lone.matrix.yaml").write_text(json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", "r1", "-k", "model")
    ev = evidence_of(pytester)
    item = items(ev)["c::py::digits-logreg@digits-test::model"]
    run = record(item, "model.run")
    assert (record(item, "model.spread")["concurrency"], run["spread"]["concurrency"]) == (1, 1)
    assert run["isolation"]["shared_between_runs"] is False and "contention" not in run["isolation"], run["isolation"]
    assert [r["data"]["part"] for r in item["records"] if r["kind"] == "scope.not_proven"] == [], item["records"]
