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

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

import msgspec

from pytest_hetero.backends import slots as neutral
from pytest_hetero.backends.docker.translate import DockerTarget
from pytest_hetero.backends.slots import Slot, Slots, cpu_list, distinct, width

if TYPE_CHECKING:
    from typing import NotRequired

__all__ = ["PER_RUN_CONTAINER", "Slot", "Slots", "cpu_list", "distinct", "host_devices", "isolation", "pinned",
           "slots_of", "width"]

class ContainerIsolation(TypedDict):
    """``details["isolation"]`` of a per-run model run on Docker (:func:`isolation`): the ``mechanism``, that it was
    ``confined`` and whether it ``shared_between_runs``; proven: ``models_isolation`` says what; not proven: the
    ``reason``."""

    mechanism: str
    confined: bool
    shared_between_runs: bool
    models_isolation: NotRequired[str]
    reason: NotRequired[str]


PER_RUN_CONTAINER: ContainerIsolation = {
    "mechanism": "docker container of its own per model run, pinned to one device slot (device indices or a CPU "
                 "set), read-only root file system, removed after the run",
    "confined": True, "shared_between_runs": False,
    "models_isolation": "proven: no other model run used this run's container (file system, processes, devices)",
}
"""``isolation`` of a per-run model run on Docker (:func:`isolation`: its network ``none``, or runs one at a time)."""


def isolation(slot: Slot, network: str, width: int) -> ContainerIsolation:
    """``details["isolation"]`` of a per-run model run pinned to ``slot``, its container on ``network``
    (``target.network``), runs going ``width`` at once.

    :data:`PER_RUN_CONTAINER` (proven) when the container has no network (``none``, the default) or the runs go
    one at a time; else not proven (``shared_between_runs``): containers on one network at once reach each other
    (``bridge`` or a network of the target's) or share one network namespace (``host``, ``container:…``), so one
    run can take a port another run needs or answer in its service's place. An unpinned slot (no device index
    known) is said to be."""
    facts = PER_RUN_CONTAINER.copy()
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


def pinned(slot: Slot, target: DockerTarget, resource: str) -> DockerTarget:
    """``target`` with ``slot`` pinned for ``resource`` (``device_ids`` or ``cpuset``, as
    :func:`~pytest_hetero.backends.docker.translate.translate` reads them); ``target`` itself for an unpinned
    slot."""
    if slot.kind == "devices":
        return msgspec.structs.replace(target, device_ids={**target.device_ids, resource: list(slot.ids)})
    if slot.kind == "cpuset":
        return msgspec.structs.replace(target, cpuset={**target.cpuset, resource: ",".join(slot.ids)})
    return target


def slots_of(requests: dict[str, str], pinned_devices: Sequence[int | str] | None, cpuset: str | None, ncpu: int | None,
             host_devices: dict[str, list[str]]) -> list[Slot]:
    """The device slots of a resource whose merged requests/limits are ``requests``
    (:func:`pytest_hetero.backends.slots.slots_of`), the engine's CPUs being ``0 … ncpu-1``. Raises ValueError for
    a malformed quantity or CPU list, or a CPU or device index listed twice."""
    return neutral.slots_of(requests, pinned_devices, cpuset, [str(i) for i in range(ncpu or 0)], host_devices)


def host_devices(local: bool) -> dict[str, list[str]]:
    """Indices of this host's accelerators by vendor (:func:`pytest_hetero.backends.slots.host_devices`); empty
    lists when the engine is not on this host (its devices cannot be listed from here)."""
    if not local:
        return {"nvidia": [], "ascend": []}
    return neutral.host_devices()
