"""The evidence document's items on disk (issue 32, memory flat in items): an assembled document's ``items`` is an
ItemSpool read back item by item, and everything written from it is the bytes a list of the same items gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_hetero.bundle.signoff import signoff_context
from pytest_hetero.errors import BundleError
from pytest_hetero.evidence.document import ItemDict
from pytest_hetero.evidence.recorder import ItemLine, Recorder, assemble, write_evidence
from pytest_hetero.evidence.spool import ItemSpool, Subset, encode_item, pick, where


def _item(n: int, status: str = "passed", layer: str = "model") -> dict[str, Any]:
    return {"nodeid": f"m.matrix.yaml::r{n:03d}::{layer}", "matrix": "m.matrix.yaml", "layer": layer,
            "keys": {"resource": "cpu", "image": "py", "model": f"m{n}"}, "owner": "infrastructure",
            "status": status,
            "records": [{"kind": "model.run", "at": "2026-12-03T00:00:00Z", "data": {"text": "é ☃ \u2028", "n": n}}],
            "artifacts": [], "duration_s": n / 7, "started_at": "2026-12-03T00:00:00Z",
            "finished_at": "2026-12-03T00:00:01Z", "failure": None, "blocked_by": None, "reason": None}


def _spool(items: list[dict[str, Any]]) -> ItemSpool:
    spool = ItemSpool()
    for item in items:
        spool.add(item)
    spool.order(range(len(items)))
    return spool


def test_items_read_back_equal_what_was_added_in_the_order_given() -> None:
    items = [_item(n) for n in range(5)]
    spool = ItemSpool()
    numbers = [spool.add(item)[0] for item in items]
    assert numbers == [0, 1, 2, 3, 4]
    spool.order([3, 1, 4])  # only these, in this order
    assert list(spool) == [items[3], items[1], items[4]]
    assert len(spool) == 3 and spool[0] == items[3] and spool[-1] == items[4] and spool[1:] == [items[1], items[4]]
    assert spool == [items[3], items[1], items[4]] and spool != [items[3]]
    with pytest.raises(IndexError):
        spool[3]
    first = spool[0]
    first["status"] = "failed"  # a fresh dict each read: the spool is read-only
    assert spool[0]["status"] == "passed"


def test_each_line_is_the_items_text_in_evidence_json() -> None:
    items = [_item(n) for n in range(3)]
    spool = _spool(items)
    assert list(spool.lines()) == [encode_item(i).encode("ascii") for i in items]
    assert [json.loads(line) for line in spool.lines()] == items


def test_many_items_cross_the_read_buffer() -> None:
    big = [{**_item(n), "records": [{"kind": "log", "at": "t", "data": {"text": "x" * 70_000}}]} for n in range(40)]
    spool = _spool(big)
    assert list(spool) == big and spool[37] == big[37]


def test_evidence_json_from_a_spool_is_the_bytes_of_the_same_items_as_a_list(tmp_path: Path) -> None:
    items = [_item(n) for n in range(4)]
    doc = {"schema": "s", "items": items, "untested": {"items": []}, "run": {"id": "r"}}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    listed = write_evidence(tmp_path / "a", doc)
    spooled = write_evidence(tmp_path / "b", {**doc, "items": _spool(items)})
    assert listed == spooled
    data = (tmp_path / "b" / "evidence.json").read_bytes()
    assert data == json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("ascii")
    (tmp_path / "c").mkdir()
    write_evidence(tmp_path / "c", {**doc, "items": _spool([])})
    assert json.loads((tmp_path / "c" / "evidence.json").read_bytes())["items"] == []


def test_an_item_holding_nan_is_kept_but_evidence_json_refuses_it(tmp_path: Path) -> None:
    bad = {**_item(1), "duration_s": float("nan")}
    spool = _spool([_item(0), bad])
    assert spool[1]["duration_s"] != spool[1]["duration_s"]  # NaN read back
    with pytest.raises(ValueError, match="not JSON compliant"):
        write_evidence(tmp_path, {"items": spool, "untested": {"items": []}})
    assert not (tmp_path / "evidence.json").exists() and not (tmp_path / "evidence.json.tmp").exists()


def test_subsets_read_the_items_they_name() -> None:
    items = [_item(n, layer="model" if n % 2 else "business") for n in range(6)]
    spool = _spool(items)
    models = where(spool, lambda i: i["layer"] == "model")
    assert isinstance(models, Subset) and list(models) == [items[1], items[3], items[5]]
    assert models[1] == items[3] and models[0:2] == [items[1], items[3]] and len(models) == 3
    inner = pick(models, [2, 0])  # a subset of a subset, out of order
    assert list(inner) == [items[5], items[1]] and inner[0] == items[5]
    assert list(pick(models, [])) == []
    listed = cast("list[ItemDict]", items)
    assert where(listed, lambda i: i["layer"] == "model") == [items[1], items[3], items[5]]  # a list stays a list


def test_assemble_keeps_items_on_disk_sorted_and_one_per_nodeid(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r", {"id": "r"})
    for n in (3, 1, 2):
        rec.item(_item(n))
    rec.item(_item(1))  # the same line again: dropped
    rec.end(0, False)
    doc = assemble(tmp_path / "r", key=rec.key)
    assert isinstance(doc["items"], ItemSpool)
    assert list(doc["items"]) == [_item(1), _item(2), _item(3)]
    assert doc["summary"]["totals"] == {"passed": 3} and doc["journal"]["lines"] == 6


def test_two_item_lines_that_disagree_are_refused(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r", {"id": "r"})
    rec.item(_item(1))
    rec.item(_item(1, "failed"))
    rec.end(1, False)
    with pytest.raises(BundleError, match="two item lines for m.matrix.yaml::r001::model disagree"):
        assemble(tmp_path / "r", key=rec.key)


def test_a_bad_entry_is_refused_with_its_line(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r", {"id": "r"})
    rec.item(_item(1))
    rec.write_entries([cast("ItemLine", {"type": "item", "evidence": {**_item(2), "status": "pased"}})])
    rec.end(0, False)
    with pytest.raises(BundleError, match="not a status") as caught:
        assemble(tmp_path / "r", key=rec.key)
    assert caught.value.location.line == 3


def _finish_peak(folder: Path, n: int) -> int:
    """Peak traced bytes of assembling a journal of ``n`` items that each hold a 20 KB record, writing
    evidence.json and every rendering from it."""
    import tracemalloc

    from pytest_hetero.reporting.writers import write_renderings

    rec = Recorder(folder, {"id": "r", "started_at": "2026-12-03T00:00:00Z"})
    for i in range(n):
        rec.item({**_item(i), "records": [{"kind": "model.run", "at": "2026-12-03T00:00:01Z",
                                           "data": {"text": f"log {i} " * 2500}}]})
    rec.end(0, False)
    tracemalloc.start()
    try:
        doc = assemble(folder, key=rec.key)
        write_evidence(folder, doc)
        write_renderings(doc, folder, signoff_context({}, None, "unsigned"))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_finish_does_not_hold_what_items_recorded(tmp_path: Path) -> None:
    """Four times the items, each recording 20 KB: the finish's peak grows by a few KB per item (its stubs and
    the renderings' per-test lines), not by what the items recorded (the document held it: ~40 KB each)."""
    _finish_peak(tmp_path / "warm", 5)  # imports and the compiled template are not the items' doing
    small, large = _finish_peak(tmp_path / "small", 100), _finish_peak(tmp_path / "large", 400)
    per_item = (large - small) / 300
    assert per_item < 10_000, f"{per_item:.0f} bytes per item (32 KB when the document held the items)"
    evidence = json.loads((tmp_path / "large" / "evidence.json").read_bytes())
    assert len(evidence["items"]) == 400 and len(evidence["items"][7]["records"][0]["data"]["text"]) == 15_000


def test_the_finish_keeps_the_journals_digests_not_its_decoded_lines(tmp_path: Path) -> None:
    """Assembly leaves the finish (``inputs.journal``) the journal's digests, line numbers and what was set aside,
    not every decoded line and MAC: a deselected item's line (~1 KB decoded) was held through the whole finish."""
    from pytest_hetero.evidence.inputs import RunInputs

    rec = Recorder(tmp_path / "r", {"id": "r"})
    rec.item(_item(1))
    rec.deselected_many((f"m.matrix.yaml::r{n:03d}::business", "deselected (-k)") for n in range(50))
    rec.end(0, False)
    inputs = RunInputs()
    doc = assemble(tmp_path / "r", inputs, key=rec.key)
    read = inputs.journal
    assert read is not None and read.entries == [] and read.said == {}
    assert len(read.numbers) == doc["journal"]["lines"] == read.section()["lines"] == 53
    assert read.authenticated and read.sha256 == read.file_sha256 and not read.rejected
