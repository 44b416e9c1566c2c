"""The dossier's capacity view of each pool: per node and requested resource, capacity, allocatable, what the
pods bound to the node requested when discovery listed it, what was free, and what the node withholds
(capacity − allocatable: for a device, devices its plugin reported unhealthy; for cpu/memory, the node's
reservations); and the devices a model run held without using them.

Inputs are the ``discovery.snapshot`` records (Kubernetes: :mod:`pytest_hetero.backends.kubernetes.inventory`
and :mod:`~pytest_hetero.backends.kubernetes.capacity`) and the ``model.usage`` device summaries
(:meth:`pytest_hetero.probes.usage.Sampler.result`). A value the engine did not read is "not read", never 0.
"""

from __future__ import annotations

from typing import TypedDict

from pytest_hetero.evidence.records import SNAPSHOT, USAGE
from pytest_hetero.matrix.quantity import quantity_or_none
from pytest_hetero.reporting.docview import dims
from pytest_hetero.reporting.dossier_facts import Facts, number, short
from pytest_hetero.reporting.dossier_text import Text

ROWS = 40
"""At most this many node × resource rows (the rest are counted; every node stays in evidence.json)."""


class CapacityRow(TypedDict):
    """One node × requested resource of a pool, each amount as text ("not read" when the engine did not read it)."""

    pool: str
    node: str
    resource: str
    capacity: str
    allocatable: str
    requested: str
    free: str
    withheld: str


class IdleRow(TypedDict):
    """A device a model run held whose utilisation never rose above 0 %, over ``samples`` samples."""

    item: str
    device: str
    samples: str


class Capacity(TypedDict):
    """The capacity view: at most :data:`ROWS` rows (``more`` counts the rest), notes, idle devices."""

    rows: list[CapacityRow]
    more: int
    notes: list[str]
    idle: list[IdleRow]


def _amount(name: str, value: float | None, t: Text) -> str:
    if value is None:
        return t("ops.not_read")
    if name == "memory" or name.endswith("/memory") or name == "ephemeral-storage":
        return t("cap.gib", value=number(value / 2**30, 1))
    return number(value, 3)


def capacity(f: Facts, t: Text) -> Capacity:
    """``{"rows": [{"pool", "node", "resource", "capacity", "allocatable", "requested", "free", "withheld"}],
    "more": n, "notes": [text], "idle": [{"item", "device", "samples"}]}``: the capacity view at discovery of
    every pool a discovery item listed, and the devices held idle (a model run's device whose utilisation
    never rose above 0 % over two or more samples)."""
    rows: list[CapacityRow] = []
    notes: list[str] = []
    for item in f.by_layer["discovery"]:
        for snap in f.all(item, SNAPSHOT):
            if "nodes" not in snap:
                continue  # a host probe's snapshot: no node pool
            nodes = snap["nodes"]
            view = snap.get("capacity_view") or {}
            pool = dims(item).resource or ""
            why = view.get("unavailable")
            if why:
                notes.append(t("cap.unavailable", pool=pool, why=str(why)[:200]))
            for node in nodes:
                held = node.get("requested_by_pods")
                for name in snap.get("requested") or []:
                    cap = quantity_or_none((node.get("capacity") or {}).get(name))
                    alloc = quantity_or_none((node.get("allocatable") or {}).get(name))
                    asked = None if held is None else float(held.get(name, 0.0))
                    free = None if alloc is None or asked is None else alloc - asked
                    withheld = None if cap is None or alloc is None else cap - alloc
                    rows.append({"pool": pool, "node": str(node["name"]), "resource": str(name),
                                 "capacity": _amount(name, cap, t), "allocatable": _amount(name, alloc, t),
                                 "requested": _amount(name, asked, t), "free": _amount(name, free, t),
                                 "withheld": _amount(name, withheld, t)})
    idle: list[IdleRow] = []
    for item in f.with_kind[USAGE.name]:
        for data in f.all(item, USAGE):
            for dev in data["devices"] if data["available"] else []:
                series = [v for v in dev["series"]["utilisation_pct"] if v is not None]
                if len(series) >= 2 and max(series) <= 0:
                    idle.append({"item": short(item["nodeid"]), "device": str(dev["name"] or dev["id"]),
                                 "samples": str(len(series))})
    return {"rows": rows[:ROWS], "more": max(0, len(rows) - ROWS), "notes": notes, "idle": idle}
