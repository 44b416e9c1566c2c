"""Device slots of a host, engine-neutral part (``resources[].model_runs: per-run`` on an engine whose host holds
the devices: Docker, local).

A **slot** is what one model run is pinned to while it runs beside others:

- a resource that requests accelerators (``nvidia.com/gpu: N``, ``huawei.com/Ascend*: N``) gets N device indices
  per slot, taken in order from the engine's pinned list (``target.device_ids[<resource>]``) when given, else from
  the host's devices the engine knows (:func:`host_devices`). Without known indices there is one unpinned slot:
  the runs go one at a time;
- a CPU resource gets ⌈``cpu``⌉ CPUs per slot (1 when it requests none), taken in order from
  ``target.cpuset[<resource>]`` when given, else from the CPUs the engine may use.

A list the matrix pins (``target.device_ids``: one whole-number device index ≥ 0 per entry, :func:`device_list`;
``target.cpuset``) must hold at least one slot (:func:`enough`): it is refused (ValueError, the engine's
``bad_request``), never turned into an unpinned slot on devices or CPUs the matrix did not give.

The runs of a resource × image go at most ``min(concurrency, slots)`` at once (:func:`width`); a run takes a free
slot (:class:`Slots`) and gives it back once its workload is gone. Every gate process of a host carves its slots
from the same CPUs and devices (pytest-xdist runs each resource on a worker of its own), so a slot is also leased
host-wide (:class:`HostLease`, a lock file per CPU or device): no two processes' runs are pinned to one CPU or device
at once. How a slot pins a run is the engine's: a
container's ``CpusetCpus``/``DeviceIDs`` on Docker, a process's CPU affinity or ``CUDA_VISIBLE_DEVICES`` /
``ASCEND_RT_VISIBLE_DEVICES`` locally.
"""

from __future__ import annotations

import fcntl
import math
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pytest_hetero.backends.protocol import ActionFailed
from pytest_hetero.matrix.quantity import quantity

if TYPE_CHECKING:
    from pytest_hetero.backends.spread import Concurrency

NVIDIA_GPU = "nvidia.com/gpu"
"""The extended resource name of an NVIDIA GPU (the device plugin's)."""
ASCEND_PREFIXES: tuple[str, ...] = ("huawei.com/Ascend", "huawei.com/npu")
"""Prefixes of the extended resource names of an Ascend NPU (``huawei.com/Ascend910``, …)."""


class SlotDict(TypedDict):
    """A :class:`Slot` as evidence keeps it: its ``kind`` and ``ids``."""

    kind: str
    ids: list[str]


@dataclass(frozen=True)
class Slot:
    """A device slot one model run is pinned to: ``kind`` ``devices`` (accelerator indices), ``cpuset`` (CPU
    numbers) or ``unpinned`` (no index known: the run is not pinned), and the ``ids``."""

    kind: str
    ids: tuple[str, ...]

    def to_dict(self) -> SlotDict:
        """JSON-ready dict (evidence)."""
        return {"kind": self.kind, "ids": list(self.ids)}


def accelerator(requests: dict[str, str]) -> str | None:
    """The vendor of the accelerator ``requests`` (a resource's merged requests/limits) asks for: ``nvidia``,
    ``ascend``, or None (a CPU resource)."""
    for key in requests:
        if key == NVIDIA_GPU:
            return "nvidia"
        if key.startswith(ASCEND_PREFIXES):
            return "ascend"
    return None


def cpu_list(text: str) -> list[str]:
    """The CPU numbers of a cpuset list (``"0-3,6"`` → ``["0", "1", "2", "3", "6"]``, the kernel's
    ``cpuset.cpus`` format). Raises ValueError naming the text when it is not one, or names a CPU twice (two slots
    would share it: :func:`distinct`)."""
    out: list[str] = []
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        if not low.isdecimal() or (high and not high.isdecimal()) or (high and int(high) < int(low)):
            raise ValueError(f"{text!r} is not a CPU list (e.g. 0-3,6)")
        out += [str(i) for i in range(int(low), int(high or low) + 1)]
    return distinct(out, f"target.cpuset {text!r}", "CPU")


def distinct(ids: list[str], source: str, noun: str) -> list[str]:
    """``ids`` when none is listed twice; else ValueError naming ``source`` and the id: slots carved from them
    would share that CPU or device while each run is recorded pinned to a slot of its own."""
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise ValueError(f"{source} names {noun} {i} twice: a {noun} may be in one slot only (runs at once "
                             f"would share it)")
        seen.add(i)
    return ids


def carve(ids: list[str], per_slot: int, kind: str) -> list[Slot]:
    """``ids`` cut in order into slots of ``per_slot`` (≥ 1) ids each (what is left over is unused); one unpinned
    slot when fewer than ``per_slot`` ids are known."""
    per_slot = max(1, per_slot)
    slots = [Slot(kind, tuple(ids[i:i + per_slot])) for i in range(0, len(ids) - per_slot + 1, per_slot)]
    return slots or [Slot("unpinned", ())]


DEVICE_UUID = re.compile(r"(?:GPU|MIG)-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}")
"""An NVIDIA device UUID as ``nvidia-smi -L`` prints it: a GPU's (``GPU-…``) or a MIG instance's (``MIG-…``, the only
way to name one instance to Docker's device requests and ``CUDA_VISIBLE_DEVICES``)."""


def device_list(given: Sequence[int | str], source: str = "target.device_ids") -> list[str]:
    """The device indices of a pinned list (``target.device_ids[<resource>]``) as decimal strings (``["03", 1]`` →
    ``["3", "1"]``; a GPU or MIG UUID, :data:`DEVICE_UUID`, is kept as written). Raises ValueError naming
    ``source`` and the fix when the list is empty (given, so it must name a device: an empty list would fall back to
    devices the matrix did not give), or an entry is neither one whole number ≥ 0 nor one UUID
    (``"0,1"``, ``"abc"``, ``""``, ``"-1"``: put into ``CUDA_VISIBLE_DEVICES`` they hide every device, or give
    one run two), or names a device twice (``"1"`` and ``"01"``: :func:`distinct`)."""
    shown = f"{source} {list(given)!r}"
    if not given:
        raise ValueError(f"{shown} names no device: list one device index per entry (e.g. [0, 1]), or leave the "
                         "resource out of target.device_ids to use the host's devices")
    out: list[str] = []
    for entry in given:
        text = entry.strip() if isinstance(entry, str) else entry
        if isinstance(text, str) and DEVICE_UUID.fullmatch(text):  # one GPU or one MIG instance, by its UUID
            out.append(text)
            continue
        if isinstance(text, bool) or not (isinstance(text, int) and text >= 0
                                          or isinstance(text, str) and text.isascii() and text.isdecimal()):
            raise ValueError(f"{shown}: entry {entry!r} is not a device index: each entry must be one whole number "
                             "≥ 0 or one NVIDIA GPU/MIG UUID (e.g. [0, 1] or [\"MIG-…\"], never \"0,1\" in one entry)")
        out.append(str(int(text)))
    return distinct(out, shown, "device")


def enough(ids: list[str], per_slot: int, source: str, noun: str, asked: str) -> list[str]:
    """``ids`` (a list the matrix pinned, named by ``source``) when it holds at least one slot of ``per_slot``; else
    ValueError naming ``source`` and the fix: fewer would leave the runs unpinned, on every CPU or device of the
    host, which the matrix did not give them."""
    if len(ids) < per_slot:
        raise ValueError(f"{source} holds {len(ids)} {noun}(s), fewer than the {per_slot} one run of this resource "
                         f"asks for ({asked}): list at least {per_slot} {noun}(s) there, or lower the request")
    return ids


def slots_of(requests: dict[str, str], pinned_devices: Sequence[int | str] | None, cpuset: str | None,
             cpus: list[str], host_devices: dict[str, list[str]]) -> list[Slot]:
    """The device slots of a resource whose merged requests/limits are ``requests`` (see the module docstring).

    ``pinned_devices``: ``target.device_ids[<resource>]`` (None: not given); ``cpuset``: ``target.cpuset[<resource>]``;
    ``cpus``: the CPUs the engine may use, in order (carved when no ``cpuset`` is given); ``host_devices``: the
    device indices the host has by vendor (``nvidia``, ``ascend``; empty when not known). Raises ValueError for a
    malformed quantity or CPU list, a CPU or device index listed twice, a ``target.device_ids`` entry that is not
    one device index (:func:`device_list`), or a pinned list too short for one slot (:func:`enough`)."""
    vendor = accelerator(requests)
    if vendor is not None:
        key = next(k for k in requests if k == NVIDIA_GPU or k.startswith(ASCEND_PREFIXES))
        count = max(1, int(quantity(requests[key])))
        if pinned_devices is None:
            return carve(host_devices.get(vendor, []), count, "devices")
        known = enough(device_list(pinned_devices), count, f"target.device_ids {list(pinned_devices)!r}", "device",
                       f"{key}: {requests[key]}")
        return carve(known, count, "devices")
    per = max(1, math.ceil(quantity(requests["cpu"]))) if "cpu" in requests else 1
    if cpuset is None:
        return carve(list(cpus), per, "cpuset")
    asked = f"cpu: {requests['cpu']}" if "cpu" in requests else "one CPU when it requests none"
    return carve(enough(cpu_list(cpuset), per, f"target.cpuset {cpuset!r}", "CPU", asked), per, "cpuset")


def device_indices(prefix: str, dev: Path = Path("/dev")) -> list[str]:
    """Indices of the ``/dev/<prefix><N>`` nodes under ``dev``, numerically sorted (``[]`` when none)."""
    found = [int(p.name[len(prefix):]) for p in dev.glob(f"{prefix}[0-9]*") if p.name[len(prefix):].isdecimal()]
    return [str(i) for i in sorted(found)]


def host_devices(dev: Path = Path("/dev")) -> dict[str, list[str]]:
    """Indices of this host's accelerators by vendor, from their device nodes (``/dev/nvidia<i>``,
    ``/dev/davinci<i>``, numerically sorted)."""
    return {"nvidia": device_indices("nvidia", dev), "ascend": device_indices("davinci", dev)}


def width(concurrency: Concurrency, slots: list[Slot]) -> int:
    """How many runs go at once: the concurrency setting, at most one per slot (``free``: one per slot)."""
    return max(1, len(slots) if concurrency == "free" else min(concurrency, len(slots)))


SLOT_LOCKS = Path("/tmp/pytest-hetero-slots")
"""Default folder of the host-wide slot leases (:class:`HostLease`); ``HETERO_SLOT_LOCKS`` names another (every gate
process of the host must name the same one to keep clear of each other's slots)."""


class HostLease:
    """Host-wide leases of device slots: one lock file per CPU or device (``<folder>/<host>-<kind>-<id>.lock``),
    held with ``flock`` while a run of this process is pinned to it. Each gate process carves its slots from the same
    CPUs and devices (pytest-xdist workers, one per resource; two gates on one host), so a slot free in this process
    may be another's run's at this moment: :class:`Slots` takes a slot only once it holds every lock of its ids. The
    kernel drops a lock when its holder dies (even by SIGKILL), so no lease outlives its process.

    ``host`` names whose CPUs and devices these are (``host`` for this machine's; a remote Docker engine's ID for
    its own); ``folder`` (default: ``HETERO_SLOT_LOCKS``, else :data:`SLOT_LOCKS`) is made world-writable and
    sticky, as ``/tmp`` is (so the gates of every user of the host share it). Raises ValueError naming the folder and
    the fix when it is a symbolic link (never followed), not a folder, or another user's (not root's) that is not
    world-writable and sticky."""

    def __init__(self, host: str, folder: Path | None = None) -> None:
        self.host = re.sub(r"[^A-Za-z0-9_.-]", "_", host)
        self.folder = folder if folder is not None else Path(os.environ.get("HETERO_SLOT_LOCKS") or SLOT_LOCKS)
        with suppress(FileExistsError):
            self.folder.mkdir(parents=True)
            self.folder.chmod(0o1777)
        st = self.folder.lstat()
        shared = st.st_mode & (stat.S_ISVTX | stat.S_IWOTH) == stat.S_ISVTX | stat.S_IWOTH  # as /tmp: any user's
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or not (st.st_uid in (0, os.geteuid())
                                                                           or shared):
            raise ValueError(f"the slot lock folder {self.folder} is a link, not a folder, or another user's that is "
                             "not world-writable and sticky: remove it, or name a folder of your own in "
                             "HETERO_SLOT_LOCKS")

    def acquire(self, slot: Slot) -> list[int] | None:
        """The open lock files of ``slot``'s ids, each locked (in the ids' sorted order, as every process takes
        them: no two processes wait on each other), or None when another process holds one of them (what was
        locked here is let go). An unpinned slot (no device index known: the engine's or the gate's own device
        selection places the run, the same devices each time) holds one lock of the host, ``unpinned-any``: such runs
        go one at a time on the host, as they do within one process. Raises ActionFailed ``configuration`` naming
        the file and the fix when a lock file cannot be opened (another user's, mode 0600; a link: never followed)."""
        held: list[int] = []
        for i in sorted(slot.ids) or ["any"]:
            path = self.folder / re.sub(r"[^A-Za-z0-9_.-]", "_", f"{self.host}-{slot.kind}-{i}.lock")
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                self.release(held)
                raise ActionFailed(f"the device slot lock file {path} cannot be opened ({exc.strerror}): make it a "
                                   "plain file every gate user may read, or name a folder of your own in "
                                   "HETERO_SLOT_LOCKS", "configuration") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self.release(held)
                return None
            held.append(fd)
        return held

    @staticmethod
    def release(held: list[int]) -> None:
        """Let go of the lock files :meth:`acquire` returned."""
        for fd in held:
            os.close(fd)  # closing the only descriptor of the open file drops its flock


LEASE_POLL_S = 0.1
"""Seconds between two looks at the slots held by other processes (:meth:`Slots.take`)."""


class Slots:
    """The free device slots of one resource × image's runs: :meth:`take` blocks until one is free, here and (with a
    ``lease``) in every other gate process of the host."""

    def __init__(self, slots: list[Slot], lease: HostLease | None = None,
                 stopped: Callable[[], bool] = lambda: False) -> None:
        self.all = list(slots)
        self.lease, self.stopped = lease, stopped
        self._free = list(slots)
        self._held: dict[Slot, list[int]] = {}
        self._retired: dict[Slot, str] = {}
        self._cond = threading.Condition()

    def free_slots(self) -> list[Slot]:
        """The slots no run of this pool holds now (in the order they are offered)."""
        with self._cond:
            return list(self._free)

    def take(self) -> tuple[Slot, float]:
        """A free slot and the seconds waited for it: the first free one here whose CPUs or devices no other process
        holds (:class:`HostLease`). Raises ActionFailed ``harness`` when ``stopped()`` turns true while waiting, and
        ``container_not_reset`` when every slot was retired (:meth:`retire`)."""
        begun = time.monotonic()
        with self._cond:
            while True:
                for slot in self._free:
                    held = [] if self.lease is None else self.lease.acquire(slot)
                    if held is not None:
                        self._free.remove(slot)
                        self._held[slot] = held
                        return slot, time.monotonic() - begun
                if self.stopped():
                    raise ActionFailed("the gate stopped while this model run waited for a free device slot",
                                       "harness")
                if not self._free and len(self._retired) == len(self.all):
                    raise ActionFailed("no device slot of this resource is left to run on: "
                                       + "; ".join(self._retired.values()), "container_not_reset")
                self._cond.wait(LEASE_POLL_S)

    def retire(self, slot: Slot, why: str) -> None:
        """Never give ``slot`` to another run (``why``: what still holds it, e.g. an earlier run's container the
        engine would not remove, running on its CPUs or devices). Its host-wide lease stays held by this process; a
        run waiting for a slot when none is left fails (ActionFailed ``container_not_reset``, naming ``why``)."""
        with self._cond:
            self._retired[slot] = why
            self._cond.notify_all()

    def give(self, slot: Slot) -> None:
        """Free ``slot`` again (its workload is gone): its host-wide leases too."""
        with self._cond:
            if self.lease is not None:
                self.lease.release(self._held.pop(slot, []))
            self._free.append(slot)
            self._cond.notify_all()


class SpreadTiming(TypedDict):
    """The timing part of a pinned per-run model run's ``details["spread"]`` (:func:`spread_facts`)."""

    slot: SlotDict
    concurrency: int
    queued_at: float
    slot_at: float
    created_at: float | None
    running_at: float | None
    run_started_at: float | None
    run_ended_at: float | None
    removed_at: float | None
    waited_for_slot_s: float
    slot_wait_s: float


def spread_facts(slot: Slot, width: int, queued: float, got: float, waited: float, created: float | None,
                 running: float | None, ran: tuple[float | None, float | None], removed: float | None) -> SpreadTiming:
    """The timing part of a pinned per-run model run's ``details["spread"]``, the same keys on Docker and local (the
    renderers read them alike): its ``slot`` and the ``concurrency`` (``width``); epoch seconds it was ``queued`` at,
    ``got`` its slot at (after ``waited`` seconds in :meth:`Slots.take`), its workload was ``created`` and
    ``running`` at, the run's own window (``ran``: the exec's ``(started, ended)``, None: not known) and when the
    workload was ``removed`` (None: it was not); the seconds from queue to slot and the wait in the slot queue."""
    return {"slot": slot.to_dict(), "concurrency": width, "queued_at": queued, "slot_at": got, "created_at": created,
            "running_at": running, "run_started_at": ran[0], "run_ended_at": ran[1],
            "removed_at": removed, "waited_for_slot_s": round(got - queued, 3), "slot_wait_s": round(waited, 3)}
