"""What the dossier reads from evidence.json, indexed once (one pass over the items and their records).

:class:`Facts` holds the reported items by layer, the records of the kinds the dossier shows (by item),
the model identity of each model × dataset combination, and the small formatting helpers every section
shares. Nothing here is language-specific.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_hetero import LAYERS
from pytest_hetero.evidence.document import matrix_of_item
from pytest_hetero.evidence.records import IDENTITY, IdentityData, Kind, data_of
from pytest_hetero.reporting.docview import dims, run_view, targets
from pytest_hetero.reporting.view import entries

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytest_hetero.bundle.baseline import BaselineSection
    from pytest_hetero.evidence.document import (
        Entry,
        EvidenceDocument,
        ItemDict,
        MatrixEntry,
        RecordDict,
        RunSection,
    )

D = TypeVar("D")

KINDS: frozenset[str] = frozenset({
    "discovery.snapshot", "discovery.engine", "discovery.engine_can_satisfy",
    "scheduling.request", "scheduling.submitted", "scheduling.placed", "scheduling.pending",
    "scheduling.allocation", "scheduling.translation", "scheduling.queue",
    "startup.environment", "startup.pod", "startup.image", "startup.container", "startup.device_init",
    "startup.simulation", "startup.failed", "artifact.digest",
    "model.identity", "model.run", "model.outputs", "model.usage",
    "training.communication", "training.checkpoint",
    "serving.auth", "serving.load", "serving.rollback", "serving.usage",
    "business.rules", "scope.not_proven", "governance.probe",
    "reserve.serving", "reserve.burst", "reserve.window", "reserve.timeline",
})
"""Record kinds the dossier reads; others stay in evidence.json only."""


class Facts:
    """The evidence document indexed for the dossier.

    ``items``: reported items; ``entries``: every item once (reported, then untested-only);
    ``by_layer``: reported items per layer; ``records[nodeid][kind]``: the data of that item's records
    of a kind in :data:`KINDS` (in order); ``with_kind[kind]``: items holding such a record;
    ``combo[(matrix, resource, image, model, dataset, layer)]``: the item of that combination;
    ``backends``: the target backends; ``names``: matrix nodeid prefix → matrix name; ``run_section`` the
    ``run`` section as written (``{}`` when absent), ``run`` and ``targets`` it and the target fingerprints read
    once (:mod:`~pytest_hetero.reporting.docview`); ``matrices`` the matrix entries; ``baseline_diff`` the change
    since the accepted baseline (None when the run was not compared); ``totals`` the summary's status counts (0
    for a status no item has).
    """

    def __init__(self, evidence: EvidenceDocument) -> None:
        self.evidence = evidence
        self.run_section: RunSection = evidence["run"]
        self.run = run_view(self.run_section)
        self.targets = targets(evidence)
        self.matrices: list[MatrixEntry] = evidence["matrices"]
        self.baseline_diff: BaselineSection | None = evidence.get("baseline_diff")
        self.items: Sequence[ItemDict] = evidence["items"]
        self.entries = entries(evidence)
        self.by_layer: dict[str, list[ItemDict]] = {layer: [] for layer in LAYERS}
        self.records: dict[str, dict[str, list[RecordDict]]] = {}
        self.with_kind: dict[str, list[ItemDict]] = {kind: [] for kind in KINDS}
        self.combo: dict[tuple[str, ...], Entry] = {}
        for item in self.items:
            self.by_layer.setdefault(item["layer"], []).append(item)
            keys = item["keys"]
            # a node-coverage item is not its resource × image's startup item, nor a training check its model run
            if "coverage" not in keys and "check" not in keys:
                self.combo[(*_combination(item), item["layer"])] = item
            mine: dict[str, list[RecordDict]] = {}
            for record in item["records"]:
                kind = record["kind"]
                if kind in KINDS:
                    if kind not in mine:
                        self.with_kind[kind].append(item)
                    mine.setdefault(kind, []).append(record)
            if mine:
                self.records[item["nodeid"]] = mine
        self.backends = sorted({str(x.backend) for x in self.targets if x.backend})
        self.names = {m["prefix"]: m["name"] for m in self.matrices}
        self.totals: Counter[str] = Counter(evidence["summary"]["totals"])
        self.by_layer_counts: dict[str, Counter[str]] = {
            layer: Counter({s: int(n) for s, n in evidence["summary"]["by_layer"][layer].items()})
            for layer in LAYERS}

    def first(self, item: Entry, kind: Kind[D]) -> D | None:
        """The data of ``item``'s first record of ``kind`` (None when it has none), as ``kind``'s shape."""
        found = self.records.get(item["nodeid"], {}).get(kind.name)
        return data_of(found[0], kind) if found else None

    def all(self, item: Entry, kind: Kind[D]) -> list[D]:
        """The data of every record of ``kind`` on ``item``, as ``kind``'s shape."""
        mine = self.records.get(item["nodeid"], {}).get(kind.name, [])
        return [d for r in mine if (d := data_of(r, kind)) is not None]

    def sibling(self, item: Entry, layer: str) -> Entry | None:
        """The item of ``layer`` with the same matrix and keys (the model item of a business item…)."""
        return self.combo.get((*_combination(item), layer))

    def identity(self, item: Entry) -> IdentityData | None:
        """The model identity (``model.identity`` data) of a model or business item's combination (None: none)."""
        for candidate in (item, self.sibling(item, "model")):
            if candidate is not None:
                found = self.first(candidate, IDENTITY)
                if found:
                    return found
        return None


def _combination(item: Entry) -> tuple[str, str, str, str, str]:
    """(matrix, resource, image, model, dataset) of an item, '' for a dimension it has none of."""
    d = dims(item)
    return matrix_of_item(item), d.resource or "", d.image or "", d.model or "", d.dataset or ""


def short(nodeid: str) -> str:
    """A node id without its matrix file prefix (``cpu-host::py::m@d::model``)."""
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


def where(item: Entry) -> str:
    """``resource × image`` (× ``model@dataset``) of an item, as far as its keys go."""
    keys = item["keys"]
    parts = [str(keys[d]) for d in ("resource", "image") if d in keys]
    if "model" in keys:
        parts.append(f"{keys['model']}@{dims(item).dataset or ''}")
    return " × ".join(parts)


def when(value: Any) -> str:
    """An ISO time or epoch seconds as ``YYYY-MM-DD HH:MM:SS`` UTC; '' when absent or unreadable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%d %H:%M:%S")
    if not isinstance(value, str) or not value:
        return ""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return parsed.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def digest(value: Any, n: int = 12) -> str:
    """A digest shortened for reading (``sha256:0123456789ab…``); '' when absent."""
    if not value:
        return ""
    text = str(value)
    algo, sep, hexpart = text.rpartition(":")
    return f"{algo}{sep}{hexpart[:n]}…" if len(hexpart) > n else text


def number(value: Any, digits: int = 4) -> str:
    """A number as plain text: at most ``digits`` decimals, no trailing zeros (``0.963889`` → ``0.9639``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    text = f"{value:.{digits}f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text  # 1000 with no decimals stays 1000
    return text or "0"


def cut(text: Any, n: int = 160) -> str:
    """``text`` as a string of at most ``n`` characters (cut with an ellipsis)."""
    value = str(text or "")
    return value[: n - 1] + "…" if len(value) > n else value
