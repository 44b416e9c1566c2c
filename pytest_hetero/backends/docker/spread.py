"""Model runs spread over a Docker host's devices: a container of its own per model run (``model_runs: per-run``).

With ``per-run`` each model × dataset run of a resource × image is a container of its own, created from the image
as the resource × image container is (same request, mounts, read-only root, users, dropped capabilities) but
pinned to one **device slot** of the host, and removed once its outputs are read:

- a resource that requests accelerators (``nvidia.com/gpu: N``, ``huawei.com/Ascend*: N``) gets N device indices
  per slot, taken in order from ``target.device_ids[<resource>]`` when given, else from the host's device nodes
  (``/dev/nvidia<i>``, ``/dev/davinci<i>``; engine on this host). Without known indices (a remote engine) there is
  one unpinned slot: the runs go one at a time, as the engine's own ``Count`` request places them;
- a CPU resource gets ⌈``cpu``⌉ CPUs per slot (``CpusetCpus``; 1 when it requests none), taken in order from
  ``target.cpuset[<resource>]`` when given, else from the engine's CPUs ``0 … NCPU-1``.

The runs go at most ``min(concurrency, slots)`` at once (:func:`width`): the engine-neutral
:class:`~pytest_hetero.backends.spread.Spread` launches them at the group's first model item and joins each result
to its item; a run takes a free slot (:class:`Slots`) and gives it back when its container is removed. Ctrl-C and
SIGTERM reach the engine's close, which cancels the runs not started and removes every container of the run
(owner label), these included.

Evidence per run (``details["spread"]``): the container (id, name), its device slot, when the run was queued, got
its slot, the container was created, started, the model ran, the container was removed (epoch seconds), how long
it waited for a slot, the concurrency. ``details["isolation"]`` (:func:`isolation`) is :data:`PER_RUN_CONTAINER`: no
other model run used the run's container (isolation between model runs proven), unless runs went at once on a
network their containers share (``target.network`` other than ``none``): not proven then.
"""

from __future__ import annotations

import dataclasses
import math
import queue
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_hetero.backends.docker.translate import (
    ASCEND_PREFIXES,
    NVIDIA_GPU,
    DockerTarget,
    host_davinci_ids,
    quantity,
)

if TYPE_CHECKING:
    from pytest_hetero.backends.spread import Concurrency

PER_RUN_CONTAINER: dict[str, Any] = {
    "mechanism": "docker container of its own per model run, pinned to one device slot (device indices or a CPU "
                 "set), read-only root file system, removed after the run",
    "confined": True, "shared_between_runs": False,
    "models_isolation": "proven: no other model run used this run's container (file system, processes, devices)",
}
"""``isolation`` of a per-run model run on Docker (:func:`isolation`: its network ``none``, or runs one at a time)."""


def isolation(slot: Slot, network: str, width: int) -> dict[str, Any]:
    """``details["isolation"]`` of a per-run model run pinned to ``slot``, its container on ``network``
    (``target.network``), runs going ``width`` at once.

    :data:`PER_RUN_CONTAINER` (proven) when the container has no network (``none``, the default) or the runs go
    one at a time; else not proven (``shared_between_runs``): containers on one network at once reach each other
    (``bridge`` or a network of the target's) or share one network namespace (``host``, ``container:…``), so one
    run can take a port another run needs or answer in its service's place. An unpinned slot (no device index
    known) is said to be."""
    facts = dict(PER_RUN_CONTAINER)
    if slot.kind == "unpinned":
        facts["mechanism"] = ("docker container of its own per model run, not pinned to a device slot (no device "
                              "index known: the engine places the request), read-only root file system, removed "
                              "after the run")
    if network == "none" or width <= 1:
        return facts
    facts.pop("models_isolation")
    return {**facts, "shared_between_runs": True,
            "reason": f"model runs went {width} at once on the network {network!r} (target.network), which their "
                      "containers share: a run could reach another run's ports or take one it needs (target.network "
                      "none, or concurrency 1, keeps them apart)"}


@dataclass(frozen=True)
class Slot:
    """A device slot one model run's container is pinned to: ``kind`` ``devices`` (accelerator indices),
    ``cpuset`` (CPU numbers) or ``unpinned`` (no index known: the engine places the request), and the ``ids``."""

    kind: str
    ids: tuple[str, ...]

    def target(self, target: DockerTarget, resource: str) -> DockerTarget:
        """``target`` with this slot pinned for ``resource`` (``device_ids`` or ``cpuset``, as
        :func:`~pytest_hetero.backends.docker.translate.translate` reads them)."""
        if self.kind == "devices":
            return dataclasses.replace(target, device_ids={**target.device_ids, resource: list(self.ids)})
        if self.kind == "cpuset":
            return dataclasses.replace(target, cpuset={**target.cpuset, resource: ",".join(self.ids)})
        return target

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (evidence)."""
        return {"kind": self.kind, "ids": list(self.ids)}


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


def slots_of(requests: dict[str, str], pinned_devices: Sequence[int | str] | None, cpuset: str | None, ncpu: int | None,
             host_devices: dict[str, list[str]]) -> list[Slot]:
    """The device slots of a resource whose merged requests/limits are ``requests`` (see the module docstring).

    ``pinned_devices``: ``target.device_ids[<resource>]`` (None: not given); ``cpuset``: ``target.cpuset[<resource>]``;
    ``ncpu``: the engine's CPUs; ``host_devices``: the device indices the host has by vendor (``nvidia``,
    ``ascend``; empty when not known). Raises ValueError for a malformed quantity or CPU list, or a CPU or device
    index listed twice."""
    for key, value in requests.items():
        if key == NVIDIA_GPU or key.startswith(ASCEND_PREFIXES):
            vendor = "nvidia" if key == NVIDIA_GPU else "ascend"
            known = distinct([str(i) for i in pinned_devices], f"target.device_ids {list(pinned_devices)!r}",
                             "device") if pinned_devices else host_devices.get(vendor, [])
            return carve(known, int(quantity(value)), "devices")
    cpus = cpu_list(cpuset) if cpuset is not None else [str(i) for i in range(ncpu or 0)]
    per = math.ceil(quantity(requests["cpu"])) if "cpu" in requests else 1
    return carve(cpus, per, "cpuset")


def host_devices(local: bool) -> dict[str, list[str]]:
    """Indices of this host's accelerators by vendor (``/dev/nvidia<i>``, ``/dev/davinci<i>``), numerically sorted;
    empty lists when the engine is not on this host (its devices cannot be listed from here)."""
    if not local:
        return {"nvidia": [], "ascend": []}
    from pytest_hetero.backends.docker.place import device_nodes

    nvidia = sorted(int(p.rsplit("nvidia", 1)[1]) for p in device_nodes("nvidia")
                     if p.rsplit("nvidia", 1)[1].isdecimal())
    return {"nvidia": [str(i) for i in nvidia], "ascend": host_davinci_ids()}


def width(concurrency: Concurrency, slots: list[Slot]) -> int:
    """How many runs go at once: the concurrency setting, at most one per slot (``free``: one per slot)."""
    return max(1, len(slots) if concurrency == "free" else min(concurrency, len(slots)))


class Slots:
    """The free device slots of one resource × image's runs: :meth:`take` blocks until one is free."""

    def __init__(self, slots: list[Slot]) -> None:
        self.all = list(slots)
        self.free: queue.Queue[Slot] = queue.Queue()
        for slot in slots:
            self.free.put(slot)

    def take(self) -> tuple[Slot, float]:
        """A free slot and the seconds waited for it."""
        begun = time.monotonic()
        slot = self.free.get()
        return slot, time.monotonic() - begun

    def give(self, slot: Slot) -> None:
        """Free ``slot`` again (its container was removed)."""
        self.free.put(slot)
