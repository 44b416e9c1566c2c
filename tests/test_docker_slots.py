"""The device slots of Docker's per-run model runs (``model_runs: per-run``): how a host's CPUs or accelerator indices
are cut into one slot per concurrent run, how many runs go at once, and what each slot pins in the engine request.
The runs themselves go on the real engine in tests/docker/test_docker_spread.py."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pytest_hetero.backends.docker.spread import PER_RUN_CONTAINER, Slot, Slots, cpu_list, isolation, slots_of, width
from pytest_hetero.backends.docker.spread import pinned as spread_pinned
from pytest_hetero.backends.docker.translate import DockerTarget, translate
from pytest_hetero.matrix.model import Resource

NO_DEVICES: dict[str, list[str]] = {"nvidia": [], "ascend": []}


def ids(slots: list[Slot]) -> list[tuple[str, tuple[str, ...]]]:
    return [(s.kind, s.ids) for s in slots]


def test_a_cpu_list_reads_as_the_kernel_writes_it() -> None:
    assert cpu_list("0-3,6") == ["0", "1", "2", "3", "6"]
    assert cpu_list("5") == ["5"]
    for bad in ("3-1", "a", "1-b", "-2"):
        with pytest.raises(ValueError, match="is not a CPU list"):
            cpu_list(bad)


def test_cpu_slots_are_the_engines_cpus_cut_by_the_request() -> None:
    assert ids(slots_of({"cpu": "1", "memory": "512Mi"}, None, None, 2, NO_DEVICES)) == [
        ("cpuset", ("0",)), ("cpuset", ("1",))]
    # 1.5 CPUs asked for: 2 CPUs a slot; the 5th CPU of 5 is left over
    assert ids(slots_of({"cpu": "1500m"}, None, None, 5, NO_DEVICES)) == [
        ("cpuset", ("0", "1")), ("cpuset", ("2", "3"))]
    # the target's cpuset for the resource bounds the CPUs the slots are taken from
    assert ids(slots_of({"cpu": "2"}, None, "2-5", 64, NO_DEVICES)) == [("cpuset", ("2", "3")), ("cpuset", ("4", "5"))]
    assert ids(slots_of({"memory": "1Gi"}, None, None, 3, NO_DEVICES)) == [("cpuset", (str(i),)) for i in range(3)]
    # fewer CPUs than one run asks for: one slot the engine places unpinned
    assert ids(slots_of({"cpu": "4"}, None, None, 2, NO_DEVICES)) == [("unpinned", ())]


def test_accelerator_slots_are_device_indices() -> None:
    host = {"nvidia": ["0", "1", "2", "3"], "ascend": ["0", "1"]}
    assert ids(slots_of({"cpu": "1", "nvidia.com/gpu": "1"}, None, None, 2, host)) == [
        ("devices", (str(i),)) for i in range(4)]
    assert ids(slots_of({"nvidia.com/gpu": "2"}, None, None, 2, host)) == [
        ("devices", ("0", "1")), ("devices", ("2", "3"))]
    # the target's device ids for the resource, in its order, beat the host's
    assert ids(slots_of({"nvidia.com/gpu": "1"}, ["3", "1"], None, 2, host)) == [("devices", ("3",)), ("devices", ("1",))]
    assert ids(slots_of({"huawei.com/Ascend910": "1"}, None, None, 2, host)) == [("devices", ("0",)), ("devices", ("1",))]
    # a remote engine's devices cannot be listed from here: one unpinned slot, the runs one at a time
    assert ids(slots_of({"nvidia.com/gpu": "1"}, None, None, 2, NO_DEVICES)) == [("unpinned", ())]


def test_runs_at_once_are_the_concurrency_at_most_one_per_slot() -> None:
    two = [Slot("cpuset", ("0",)), Slot("cpuset", ("1",))]
    assert (width(4, two), width(1, two), width(2, two), width(3, [Slot("unpinned", ())])) == (2, 1, 2, 1)
    assert (width("free", two), width("free", [Slot("unpinned", ())])) == (2, 1)  # free: one per slot


@pytest.mark.parametrize(("requests", "slot", "field", "expected"), [
    ({"cpu": "1"}, Slot("cpuset", ("1",)), "cpuset_cpus", "1"),
    ({"cpu": "2"}, Slot("cpuset", ("2", "3")), "cpuset_cpus", "2,3"),
    ({"nvidia.com/gpu": "1"}, Slot("devices", ("2",)), "device_requests",
     [{"Driver": "", "Count": 0, "DeviceIDs": ["2"], "Capabilities": [["gpu"]]}]),
    ({"huawei.com/Ascend910": "1"}, Slot("devices", ("1",)), "environment", {"ASCEND_VISIBLE_DEVICES": "1"}),
])
def test_a_slot_pins_the_engine_request(requests: dict[str, str], slot: Slot, field: str, expected: Any) -> None:
    res = Resource(name="r", type="cpu", vendor="any", requests=requests)
    target = DockerTarget.parse({"backend": "docker", "cpuset": {"other": "0"}})
    pinned = spread_pinned(slot, target, "r")
    assert getattr(translate(res, pinned, host_visible=False), field) == expected
    assert target == DockerTarget.parse({"backend": "docker", "cpuset": {"other": "0"}})  # left as it was
    assert spread_pinned(Slot("unpinned", ()), target, "r") is target


def test_a_run_waits_for_a_free_slot() -> None:
    pool = Slots([Slot("cpuset", ("0",)), Slot("cpuset", ("1",))])
    first, second = pool.take()[0], pool.take()[0]
    assert {first.ids, second.ids} == {("0",), ("1",)}
    got: list[tuple[Slot, float]] = []
    waiter = threading.Thread(target=lambda: got.append(pool.take()))
    waiter.start()
    time.sleep(0.3)
    assert got == []  # both slots taken: the third run waits
    pool.give(second)
    waiter.join(5)
    assert got[0][0] == second and got[0][1] >= 0.25


def test_isolation_is_proven_only_without_a_network_the_runs_at_once_share() -> None:
    pinned, unpinned = Slot("cpuset", ("0",)), Slot("unpinned", ())
    assert isolation(pinned, "none", 4) == PER_RUN_CONTAINER  # the default: no network at all
    assert isolation(pinned, "host", 1) == PER_RUN_CONTAINER  # one at a time: no run is alive beside another
    for network in ("host", "bridge", "my-net", "container:abc"):
        shared = isolation(pinned, network, 2)
        assert shared["shared_between_runs"] is True and "models_isolation" not in shared
        assert f"2 at once on the network {network!r}" in shared["reason"]
    # a slot with no device index is not said to be pinned
    assert "not pinned" in isolation(unpinned, "none", 1)["mechanism"]
    assert "pinned to one device slot" in isolation(pinned, "none", 1)["mechanism"]


def test_a_cpu_or_device_listed_twice_is_refused() -> None:
    for text in ("0,0", "0-3,2", "1, 1-2"):
        with pytest.raises(ValueError, match="twice"):
            cpu_list(text)
    with pytest.raises(ValueError, match=r"target.device_ids \['0', '1', '0'\] names device 0 twice"):
        slots_of({"nvidia.com/gpu": "1"}, ["0", "1", "0"], None, 8, NO_DEVICES)
    assert ids(slots_of({"nvidia.com/gpu": "1"}, ["1", "0"], None, 8, NO_DEVICES)) == [("devices", ("1",)),
                                                                                      ("devices", ("0",))]


@pytest.mark.parametrize(("devices", "asked", "why"), [
    (["0,1", "1"], "1", "entry '0,1' is not a device index"),
    (["GPU-1a2b"], "1", "entry 'GPU-1a2b' is not a device index"),
    ([" "], "1", "entry ' ' is not a device index"),
    ([-1], "1", "entry -1 is not a device index"),
    ([True], "1", "entry True is not a device index"),
    (["1", "01"], "1", "names device 1 twice"),
    ([], "1", "names no device"),
    (["0", "1", "2"], "2", r"holds 3 device\(s\), fewer than the 4 one run .* \(nvidia.com/gpu: 4\)"),
])
def test_pinned_device_ids_must_be_one_device_index_each_and_hold_a_slot(devices: list[Any], asked: str,
                                                                        why: str) -> None:
    """The per-run slots of Docker and local read ``target.device_ids`` through this one function: an entry that is
    neither one whole number ≥ 0 nor one GPU/MIG UUID, a device named twice (``1`` and ``01``), an empty list (it would fall back to the
    host's devices) or a list too short for one slot (runs unpinned, on every device) is refused by name."""
    request = {"nvidia.com/gpu": "4" if "fewer" in why else asked}
    with pytest.raises(ValueError, match=f"target.device_ids .*{why}"):
        slots_of(request, devices, None, 8, {"nvidia": ["0", "1", "2", "3"], "ascend": []})
    # the same indices written as numbers, as strings or zero-padded are the same slots
    assert ids(slots_of({"nvidia.com/gpu": "1"}, [2, " 3", "01"], None, 8, NO_DEVICES)) == [
        ("devices", ("2",)), ("devices", ("3",)), ("devices", ("1",))]


def test_a_gpu_or_mig_instance_named_by_its_uuid_is_one_device() -> None:
    """A MIG instance can only be named by its UUID (``nvidia-smi -L``): each UUID is one device slot, as written;
    one named twice is refused like an index named twice."""
    mig = ["MIG-4f3c2a1b-0000-1111-2222-333344445555", "MIG-4f3c2a1b-0000-1111-2222-333344446666"]
    gpu = "GPU-a1b2c3d4-e5f6-0718-293a-4b5c6d7e8f90"
    assert ids(slots_of({"nvidia.com/gpu": "1"}, [*mig, gpu, 3], None, 8, NO_DEVICES)) == [
        ("devices", (mig[0],)), ("devices", (mig[1],)), ("devices", (gpu,)), ("devices", ("3",))]
    with pytest.raises(ValueError, match="twice"):
        slots_of({"nvidia.com/gpu": "1"}, [gpu, f" {gpu}"], None, 8, NO_DEVICES)
    with pytest.raises(ValueError, match="is not a device index"):
        slots_of({"nvidia.com/gpu": "1"}, [f"{gpu},{mig[0]}"], None, 8, NO_DEVICES)


@pytest.mark.parametrize("cpuset", ["0", " , ", ""])
def test_a_pinned_cpuset_too_small_for_one_slot_is_refused(cpuset: str) -> None:
    """``cpu: 2`` with ``target.cpuset`` ``"0"`` (or none at all): not an unpinned slot on every CPU of the engine,
    a refusal naming the cpuset and the fix; the engine's own CPUs too few for a slot stay one unpinned slot."""
    with pytest.raises(ValueError, match=r"target.cpuset .* fewer than the 2 one run .* \(cpu: 2\): list at least 2"):
        slots_of({"cpu": "2"}, None, cpuset, 8, NO_DEVICES)
    assert ids(slots_of({"cpu": "2"}, None, None, 1, NO_DEVICES)) == [("unpinned", ())]
