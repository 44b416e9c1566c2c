"""Model runs spread over this host's device slots: a bubblewrap sandbox of its own per model run
(``model_runs: per-run`` on the local engine).

With ``per-run`` each model × dataset run of a resource × image is a confined process of its own: a bubblewrap of
its own (new PID, mount, IPC, UTS and network namespaces, its own run folder and private ``/tmp``), never a fork
of the session's shared sandbox, ended with its whole process tree and its folder removed after the run. Each is
pinned to one **device slot** of the host (:mod:`pytest_hetero.backends.slots`):

- a resource that requests accelerators (``nvidia.com/gpu: N``, ``huawei.com/Ascend*: N``) gets N device indices
  per slot, taken in order from ``target.device_ids[<resource>]`` when given, else from the devices the gate was
  given (its own ``CUDA_VISIBLE_DEVICES`` / ``ASCEND_RT_VISIBLE_DEVICES`` when set), else from the host's device
  nodes (``/dev/nvidia<i>``, ``/dev/davinci<i>``). The run gets them as ``CUDA_VISIBLE_DEVICES`` (NVIDIA, counted
  in PCI bus order: :data:`ORDER`) or ``ASCEND_RT_VISIBLE_DEVICES`` (Ascend). Without known indices there is one
  unpinned slot: the runs go one at a time, with the gate's own device selection;
- a CPU resource gets ⌈``cpu``⌉ CPUs per slot (1 when it requests none), taken in order from
  ``target.cpuset[<resource>]`` when given, else from the CPUs this process may run on (its affinity). The run is
  started with that CPU affinity (:func:`affinity`): its process and every child inherit it.

The runs go at most ``min(concurrency, slots)`` at once (:func:`~pytest_hetero.backends.slots.width`; ``free``: one
per slot): the engine-neutral :class:`~pytest_hetero.backends.spread.Spread` launches them at the group's first
model item (its startup passed) and joins each result to its item. Ctrl-C and SIGTERM reach the engine's close,
which cancels the runs not started and kills those running (:class:`Running`); a killed gate takes them with it
(bubblewrap's parent-death signal).

A run pinned to accelerators has only its slot's devices sampled (``model.usage``, hence ``gpu_memory_peak_mib`` and
``device_utilisation_mean``: :func:`sampled_devices`), never another run's.

Evidence per run: ``details["spread"]`` (the run's process, its device slot, when it was queued, got its slot,
ran, its sandbox ended, how long it waited for a slot, the concurrency: Docker's keys) and ``details["isolation"]``
(:func:`isolation`): the run's confinement with ``shared_between_runs`` False and ``models_isolation`` proven, unless
runs went at once on the host's network (``models[].network``), or the run was not confined; runs at once share the
sandbox user's process limit the host's memory and the disk of their run folders (``contention``: listed as not proven).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from pytest_hetero.backends.slots import Slot, SlotDict, accelerator, host_devices, slots_of
from pytest_hetero.matrix.model import Resource

if TYPE_CHECKING:
    from typing import Required

    from pytest_hetero.backends.sandbox import ConfinementFacts
    from pytest_hetero.backends.sandbox.init import RunLimits

VISIBLE: dict[str, str] = {"nvidia": "CUDA_VISIBLE_DEVICES", "ascend": "ASCEND_RT_VISIBLE_DEVICES"}
"""Vendor → the environment variable its runtime reads the devices a process may use from (CUDA runtime; Ascend
CANN runtime)."""

ORDER: dict[str, dict[str, str]] = {"nvidia": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}}
"""Vendor → what a run pinned to device indices also gets so that its runtime counts devices as the slot does:
CUDA reads ``CUDA_VISIBLE_DEVICES`` indices in ``CUDA_DEVICE_ORDER``, by default the fastest device first, while
the slot's indices (``target.device_ids``, ``/dev/nvidia<i>``), NVML (the run's samples), ``nvidia-smi`` and
Docker's device requests count in PCI bus order: on a host of mixed GPUs, index 1 would be another GPU to CUDA than
the one leased, sampled and recorded (CUDA C Programming Guide, "CUDA Environment Variables")."""

PER_RUN_SANDBOX = ("bubblewrap sandbox of its own per model run (its own PID, mount, IPC, UTS and network "
                   "namespaces, run folder and private /tmp, /var/tmp and /dev/shm), pinned to one device slot "
                   "(device indices or CPU affinity), ended with its whole process tree after the run, its run "
                   "folder removed")
"""``per_run`` of a per-run model run's ``isolation`` (:func:`isolation`)."""


def host_accelerators(environ: Mapping[str, str] | None = None, dev: Path = Path("/dev")) -> dict[str, list[str]]:
    """The accelerator indices (by vendor: ``nvidia``, ``ascend``) the gate may hand to runs: its own
    :data:`VISIBLE` variable's list when set (what the gate itself was given; an empty value gives none), else the
    host's device nodes under ``dev`` (:func:`~pytest_hetero.backends.slots.host_devices`)."""
    environ = os.environ if environ is None else environ
    found = host_devices(dev)
    for vendor, name in VISIBLE.items():
        given = environ.get(name)
        if given is not None:
            found[vendor] = [i.strip() for i in given.split(",") if i.strip()]
    return found


def local_slots(resource: Resource, target: Mapping[str, Any], cpus: list[int] | None = None,
                environ: Mapping[str, str] | None = None, dev: Path = Path("/dev")) -> list[Slot]:
    """The device slots of ``resource``'s per-run model runs on this host (see the module docstring): ``target``
    is the matrix's ``spec.target`` (``device_ids``, ``cpuset``: ``{resource: …}``); ``cpus`` the CPUs this process
    may run on (default: its affinity). Raises ValueError for a malformed request or CPU list, an index listed
    twice, a ``target.device_ids`` entry that is not one device index, a pinned list too short for one slot
    (:func:`~pytest_hetero.backends.slots.slots_of`), or a ``target.cpuset`` CPU this process may not run on (a run
    pinned there could never start)."""
    allowed = sorted(os.sched_getaffinity(0)) if cpus is None else list(cpus)
    cpuset = (target.get("cpuset") or {}).get(resource.name)
    found = slots_of({**resource.requests, **resource.limits}, (target.get("device_ids") or {}).get(resource.name),
                     cpuset, [str(c) for c in allowed], host_accelerators(environ, dev))
    outside = [i for s in found if s.kind == "cpuset" for i in s.ids if int(i) not in allowed]
    if outside:
        raise ValueError(f"target.cpuset {cpuset!r} names CPU {outside[0]}, which this process may not run on "
                         f"(its CPUs: {','.join(str(c) for c in allowed)})")
    return found


@dataclass(frozen=True)
class Pin:
    """How one run is pinned to its ``slot``: ``env`` added to its environment (the :data:`VISIBLE` variable of a
    device slot), ``cpus`` its CPU affinity (a CPU slot; None: unchanged), ``width`` the runs at once."""

    slot: Slot
    env: dict[str, str] = field(default_factory=dict)
    cpus: frozenset[int] | None = None
    width: int = 1


def pin(slot: Slot, resource: Resource, width: int) -> Pin:
    """The :class:`Pin` of a run of ``resource`` on ``slot`` with ``width`` runs at once: a device slot sets the
    vendor's :data:`VISIBLE` variable to its indices (comma-separated) and the vendor's :data:`ORDER`, a CPU slot the
    CPU affinity; an unpinned slot changes neither."""
    vendor = accelerator({**resource.requests, **resource.limits})
    if slot.kind == "devices" and vendor is not None:
        return Pin(slot, env={VISIBLE[vendor]: ",".join(slot.ids), **ORDER.get(vendor, {})}, width=width)
    if slot.kind == "cpuset":
        return Pin(slot, cpus=frozenset(int(i) for i in slot.ids), width=width)
    return Pin(slot, width=width)


def sampled_devices(run: Pin | None) -> list[str] | None:
    """The accelerator indices a run's device sampling reads (``model.usage``, hence ``gpu_memory_peak_mib`` and
    ``device_utilisation_mean``): a run pinned to a device slot, only its slot's (NVML / npu-smi index = the slot's
    index); None (every device of the host, as in shared mode) for a CPU, unpinned or shared-mode run."""
    return list(run.slot.ids) if run is not None and run.slot.kind == "devices" and run.env else None


@contextmanager
def affinity(cpus: frozenset[int] | None) -> Iterator[None]:
    """Within the block, the calling thread runs on ``cpus`` (``sched_setaffinity(0)`` is the calling thread's on
    Linux): a process it starts meanwhile inherits them, and so do its children. Restored after; None: unchanged.
    Raises OSError when no CPU of ``cpus`` is one the process may run on."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class RunIsolation(TypedDict, total=False):
    """``details["isolation"]`` of a per-run model run (:func:`isolation`): the sandbox's
    :class:`~pytest_hetero.backends.sandbox.ConfinementFacts` (none for a run whose sandbox never started), the
    ``per_run`` mechanism, the ``slot``, whether it was ``shared_between_runs`` (with the ``reason``) or
    ``models_isolation`` proven; the ``contention`` of runs at once and, for a run that widened its CPU affinity,
    ``pinning`` (:func:`unkept`)."""

    mechanism: str
    identity: str
    confined: bool
    namespaces: list[str]
    visible: list[str]
    hidden: list[str]
    writable: list[str]
    network: str
    limits: RunLimits | None
    copied: list[str]
    gaps: Required[list[str]]
    reason: str
    per_run: Required[str]
    slot: Required[SlotDict]
    shared_between_runs: Required[bool]
    models_isolation: str
    contention: str
    pinning: str


def isolation(confinement: ConfinementFacts | None, run: Pin, network: bool) -> RunIsolation:
    """``details["isolation"]`` of a per-run model run: its ``confinement`` facts (the sandbox's record) with
    ``per_run`` (:data:`PER_RUN_SANDBOX`), the ``slot`` it was pinned to, and whether other model runs could reach
    it. Proven (``shared_between_runs`` False, ``models_isolation``) when it was confined and the runs had no network
    of the host they shared at once (``network``: the matrix granted the model the host's network; ``run.width``
    runs at once); else not proven, with the ``reason``. Runs at once also share the sandbox user's process limit,
    the host's memory and the disk of their run folders: ``contention`` says so (one run could make another fail,
    never pass: the model layer lists it as not proven without holding back the verdict). The pinning's own limits
    are listed in ``gaps``."""
    gaps = list(confinement["gaps"]) if confinement is not None else []
    if run.cpus is not None:
        gaps.append("its CPUs are an affinity mask (sched_setaffinity), not a cpuset cgroup: the run could widen it")
    chosen = [name for name in run.env if name in VISIBLE.values()]
    if chosen:
        gaps.append(f"its devices are chosen by {', '.join(chosen)}: a run that ignores it can open any device "
                    "node it sees")
    facts: RunIsolation = {"per_run": PER_RUN_SANDBOX, "slot": run.slot.to_dict(), "gaps": gaps,
                           "shared_between_runs": False}
    if confinement is not None:  # the sandbox's record, its gaps with the pinning's
        facts = {**confinement, **facts}
    if confinement is None or not confinement["confined"]:
        why = (confinement["reason"] if confinement is not None else "") or "no sandbox"
        return {**facts, "shared_between_runs": True,
                "reason": f"the run was not confined ({why}): it shared the host's file system and "
                          "processes with the other model runs"}
    if network and run.width > 1:
        return {**facts, "shared_between_runs": True,
                "reason": f"model runs went {run.width} at once on the host's network (granted by the matrix: "
                          "models[].network), which they share: a run could reach another run's ports or take one "
                          "it needs (concurrency 1, or no network grant, keeps them apart)"}
    proven: RunIsolation = {**facts, "shared_between_runs": False,
                            "models_isolation": "proven: no other model run used this run's sandbox (file system "
                                                "view, processes, network namespace)"}
    if run.width > 1:
        proven["contention"] = (f"model runs went {run.width} at once as one sandbox user, whose process limit "
                                "(RLIMIT_NPROC counts every process of that uid, in every sandbox), the host's "
                                "memory and the disk of their run folders (the gate's temporary folder, not a "
                                "size-limited tmpfs) they share: a run could make another fail (its fork or "
                                "allocation refused, its outputs' write: No space left on device), which that run's "
                                "item would report as its own failure (concurrency 1 runs them one after the other)")
    return proven


PIN_SLACK = (1.10, 0.2)
"""``(factor, seconds)``: a CPU-pinned run's CPU-seconds may exceed its run time × its slot's CPU count by this much
(``cpu_s ≤ wall × cpus × 1.10 + 0.2``) before :func:`pin_kept` says the run widened its affinity: rusage and the
wall clock are read at slightly different moments, and the sandbox's start is counted in both."""


def pin_kept(run: Pin, cpu_s: float | None, wall_s: float) -> str | None:
    """None when a run pinned to CPUs (``run.cpus``) used no more CPU time than those CPUs could give it over its
    run (``cpu_s``: its process tree's rusage; ``wall_s``: its run time, the sandbox's start included; within
    :data:`PIN_SLACK`), or when there is nothing to check (not CPU-pinned, CPU time not measured); else why the
    pinning was not kept (in words: the run widened its affinity, ``sched_setaffinity``, and ran on CPUs outside
    its slot, which other runs at once were pinned to)."""
    if run.cpus is None or cpu_s is None:
        return None
    factor, extra = PIN_SLACK
    bound = wall_s * len(run.cpus) * factor + extra
    if cpu_s <= bound:
        return None
    return (f"not kept: cpu_s {cpu_s:.2f} over {wall_s:.2f} s on {len(run.cpus)} pinned CPU(s), more than those "
            f"CPUs can give ({bound:.2f} s with slack): the run widened its CPU affinity (sched_setaffinity) and ran "
            "on CPUs outside its slot")


def unkept(facts: RunIsolation, why: str) -> RunIsolation:
    """``facts`` (a per-run model run's ``isolation``, :func:`isolation`) for a run whose pinning was not kept
    (:func:`pin_kept`'s ``why``): ``pinning`` says so, and ``per_run`` no longer claims the run stayed pinned to its
    device slot."""
    text = facts["per_run"]
    claim = "pinned to one device slot (device indices or CPU affinity)"
    per_run = text.replace(claim, "started pinned to one device slot (CPU affinity), which the run did not keep "
                                  "(see pinning)") if claim in text else f"{text}; its CPU pinning was not kept "\
                                                                         "(see pinning)"
    return {**facts, "per_run": per_run, "pinning": why}


class Killable(Protocol):
    """A run in flight that can be killed (``backends.local``'s reaper, a forked run's link)."""

    def kill(self) -> None:
        """SIGKILL the run (its whole process tree)."""


class Running:
    """The per-run model runs in flight in helper threads: the engine's close kills them (:meth:`stop`), and a run
    started after that is killed as soon as it is held."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: list[Killable] = []
        self.stopped = False

    @contextmanager
    def hold(self, run: Killable) -> Iterator[None]:
        """Keep ``run`` while the block runs (it waits for the run); killed at once when :meth:`stop` came first."""
        with self._lock:
            self._runs.append(run)
            stopped = self.stopped
        if stopped:
            run.kill()
        try:
            yield
        finally:
            with self._lock:
                self._runs.remove(run)

    def stop(self) -> int:
        """Kill every run held now and any held later; how many were killed now."""
        with self._lock:
            self.stopped = True
            runs = list(self._runs)
        for run in runs:
            run.kill()
        return len(runs)
