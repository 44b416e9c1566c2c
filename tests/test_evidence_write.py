"""The finish writes evidence.json section by section and a few items at a time, and report.html piece by piece
(issue 20 item 3): the same bytes as one ``json.dumps`` / one ``render``, without holding the whole text."""

from __future__ import annotations

import hashlib
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from pytest_hetero.bundle.signoff import signoff_context
from pytest_hetero.evidence.recorder import write_evidence
from pytest_hetero.evidence.views import SignoffView

sys.path.insert(0, str(Path(__file__).parent))
from bundle_samples import EVIL, sample_evidence  # noqa: E402

from pytest_hetero.evidence.document import as_document
from pytest_hetero.reporting.writers import render, write_renderings  # noqa: E402


def _reference(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _doc(items: int, log_kib: int = 1) -> dict[str, Any]:
    return {
        "schema": "pytest-hetero/evidence/v1",
        "baseline_diff": {"items": [], "gate": "pass"},  # an "items" key before the top-level one
        "items": [{"nodeid": f"m.matrix.yaml::r::i::m{n}@d::model", "status": "passed", "keys": {"z": "1", "a": "2"},
                   "records": [{"kind": "model.stdout", "data": {"text": "log ✓ \u2028 \"q\" </x>\n" * (log_kib * 40)}}],
                   "duration_s": 0.25, "failure": None, "ok": True}
                  for n in range(items)],
        "untested": {"items": [{"nodeid": "x", "status": "deselected"}], "never_covered": {}},
        "warnings": ["ünïcode", "tab\there"],
        "zeta": [1, 2.5, -3, None, {"b": [], "a": {}}],
    }


@pytest.mark.parametrize("items", [0, 1, 3, 50])
def test_the_bytes_are_those_of_one_json_dumps(tmp_path: Path, items: int) -> None:
    doc = _doc(items)
    digest, size = write_evidence(tmp_path, doc)
    written = (tmp_path / "evidence.json").read_bytes()
    assert written == _reference(doc)
    assert (digest, size) == (hashlib.sha256(written).hexdigest(), len(written))
    assert json.loads(written) == doc
    assert not (tmp_path / "evidence.json.tmp").exists()


def test_items_of_mixed_sizes_encoded_several_per_call_give_the_same_bytes(tmp_path: Path) -> None:
    """Items are encoded a few per call, as many as the last call's text says fit: small ones many at a time,
    a large one after them alone; the bytes stay those of one ``json.dumps``."""
    doc = _doc(300)
    for n in (5, 6, 150, 299):
        doc["items"][n]["records"][0]["data"]["text"] = "big ✓\n" * 20_000
    digest, size = write_evidence(tmp_path, doc)
    written = (tmp_path / "evidence.json").read_bytes()
    assert written == _reference(doc)
    assert (digest, size) == (hashlib.sha256(written).hexdigest(), len(written))


def test_a_document_without_items_and_an_items_value_that_is_no_list(tmp_path: Path) -> None:
    for doc in ({"schema": "s"}, {"items": {"a": 1}, "b": 2}, {}):
        write_evidence(tmp_path, doc)
        assert (tmp_path / "evidence.json").read_bytes() == _reference(doc)


def test_a_non_finite_number_in_an_item_leaves_no_file(tmp_path: Path) -> None:
    doc = _doc(5)
    doc["items"][3]["duration_s"] = float("nan")
    with pytest.raises(ValueError, match="Out of range float"):
        write_evidence(tmp_path, doc)
    assert not (tmp_path / "evidence.json").exists()
    assert not (tmp_path / "evidence.json.tmp").exists()


def test_the_documents_text_is_never_held_whole(tmp_path: Path) -> None:
    doc = _doc(200, log_kib=16)  # ~4 MB of JSON
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        _, size = write_evidence(tmp_path, doc)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert size > 3_500_000
    # one item's text (~30 KB, its str and bytes) at a time when items are that large; one json.dumps would hold
    # size twice
    assert peak < size / 20, f"peak {peak} bytes while writing {size}"


def test_report_html_written_piece_by_piece_is_what_render_gives(tmp_path: Path) -> None:
    evidence = sample_evidence()
    evidence["items"][0]["records"].append({"kind": "model.stdout", "at": "2026-11-29T10:00:01Z",
                                            "data": {"text": EVIL + " lone \ud800 surrogate ✓"}})
    signoff: SignoffView = signoff_context({}, None, None, note="n")
    write_renderings(as_document(evidence), tmp_path, signoff)
    page = (tmp_path / "report.html").read_bytes()
    assert page == render("html", as_document(evidence), signoff)
    assert b"&lt;script&gt;document.title" in page and b"<script>document" not in page


def test_a_page_that_fails_half_way_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """report.html is streamed: a template error after the first pieces must not leave half a page that
    the manifest would then list."""
    import pytest_hetero.reporting.html as html

    def broken(evidence: dict[str, Any], signoff: dict[str, Any]) -> Any:
        yield "<!doctype html><p>half"
        raise RuntimeError("template broke")

    monkeypatch.setattr(html, "html_chunks", broken)
    with pytest.raises(RuntimeError, match="template broke"):
        write_renderings(as_document(sample_evidence()), tmp_path, signoff_context({}, None, None, note=""))
    assert sorted(p.name for p in tmp_path.iterdir()) == []
