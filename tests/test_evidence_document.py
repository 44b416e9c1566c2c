"""The typed evidence document: JSON read from a bundle becomes an EvidenceDocument in one place (the verifying
loader), which refuses a document that is not of its shape, naming the field, before any renderer reads it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from bundle_samples import make_bundle, sample_evidence
from readme_run import readme_bundle
from test_bundle_verify import hetero

from pytest_hetero.bundle.verify import load_evidence
from pytest_hetero.errors import BundleError
from pytest_hetero.evidence.document import ByLayer, DocumentError, as_document, failure_of, item_of, owner_of
from pytest_hetero.evidence.untested import summarise
from pytest_hetero.evidence.usage import ledger
from pytest_hetero.vocab import LAYERS


def _edit(bundle: Path, change: Any) -> None:
    doc = json.loads((bundle / "evidence.json").read_text())
    change(doc)
    (bundle / "evidence.json").write_text(json.dumps(doc))


def test_a_bundle_as_written_loads_and_renders_unchanged(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b", sample_evidence(), None)
    before = (bundle / "evidence.json").read_bytes()
    doc, state = load_evidence(bundle, allow_unsigned=True)
    assert state == "unsigned"
    assert doc["items"] and all(item_of(i) is i for i in doc["items"])
    assert all(item_of(e) is None and owner_of(e) == "" and failure_of(e) is None for e in doc["untested"]["items"])
    failed = [i for i in doc["items"] if i["status"] == "failed"]
    assert failed and failure_of(failed[0]) == failed[0]["failure"]
    out = tmp_path / "summary.md"
    assert hetero("render", str(bundle), "--format", "md", "--out", str(out)) == 0
    assert "infrastructure" in out.read_text()
    assert (bundle / "evidence.json").read_bytes() == before  # reading never rewrites the document


@pytest.mark.parametrize(("change", "field", "words"), [
    (lambda d: d["items"][0].update(status="pased"), "items[0].status", "'pased' is not a status"),
    (lambda d: d["items"][1].pop("records"), "items[1].records", "missing"),
    (lambda d: d["items"][2]["records"].append({"kind": "x", "at": "t"}), "items[2].records[", "not a record"),
    (lambda d: d["items"][0].update(failure={"message": 3}), "items[0].failure", "not a failure"),
    (lambda d: d["items"][1].pop("reason"), "items[1].reason", "missing"),
    (lambda d: d["items"][0].pop("failure"), "items[0].failure", "missing"),
    (lambda d: d["items"][2].update(duration_s="1.5"), "items[2].duration_s", "is a string, not a number"),
    (lambda d: d["items"][0].update(blocked_by=3), "items[0].blocked_by", "is a JSON int, not a string or null"),
    (lambda d: d["untested"]["items"][0].update(layer="shipping"), "untested.items[0].layer", "not a layer"),
    (lambda d: d.update(summary=[]), "summary", "is a list, not an object"),
    (lambda d: d.update(usage={**ledger([], None), "workloads": "3"}), "usage.workloads", "is a string, not a number"),
    (lambda d: d.update(usage={"queue": {"units": "seconds", "method": "m", "pools": {}}}), "usage.covers",
     "missing"),
    (lambda d: d["summary"]["by_layer"].pop("model"), "summary.by_layer.model", "missing"),
    (lambda d: d["items"][0].update(attempts=[{"attempt": 1}]), "items[0].attempts[0].nodeid", "missing"),
    (lambda d: d.update(cleanup={"clean": False, "leftovers": [{"backend": "docker", "name": 5}]}),
     "cleanup.leftovers[0].name", "not a string"),
    (lambda d: d["matrices"][0].pop("sha256"), "matrices[0]", "not a matrix entry"),
])
def test_render_refuses_a_document_not_of_its_shape_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, field: str, words: str) -> None:
    bundle = make_bundle(tmp_path / "b", sample_evidence(), None)
    _edit(bundle, change)
    assert hetero("render", str(bundle), "--format", "md", "--out", str(tmp_path / "x.md")) != 0
    err = capsys.readouterr().err
    assert f"evidence.json: field '{field}" in err and "not an evidence document" in err and words in err
    assert not (tmp_path / "x.md").exists()
    with pytest.raises(BundleError) as caught:  # the loader itself, as diff, catalog, trend and merge call it
        load_evidence(bundle, allow_unsigned=True)
    assert caught.value.location.field.startswith(field) and words in caught.value.message


def test_a_summary_counts_every_layer() -> None:
    """The renderers subscript ``summary.by_layer`` by each layer: :class:`ByLayer` declares every layer of the
    vocabulary, and the summary the gate writes has every one, a layer without items too."""
    assert tuple(ByLayer.__annotations__) == LAYERS
    assert summarise([], {"items": [], "never_covered": {}, "not_proven": []})["by_layer"] == dict.fromkeys(LAYERS, {})


def test_as_document_checks_without_copying() -> None:
    raw = sample_evidence()
    assert as_document(raw) is raw
    with pytest.raises(DocumentError, match=r"^items: missing$"):
        as_document({"untested": {"items": []}})
    with pytest.raises(DocumentError, match="the document is a list, not an object"):
        as_document([])


@pytest.mark.parametrize("fmt", ["html", "md", "junit", "ctrf", "dossier"])
def test_an_untested_entry_without_blocked_by_renders_as_one_blocked_by_nothing(tmp_path: Path, fmt: str) -> None:
    """The renderers subscript an untested entry's ``blocked_by``; the loader accepted an entry without it (read as
    none before the renderers were typed), so the loader gives it ``None``: the rendering is the same bytes as for
    the entry written with ``blocked_by: null``."""
    outs = []
    def drop(doc: dict[str, Any]) -> None:
        for entry in doc["untested"]["items"]:
            entry.pop("blocked_by", None)

    def null(doc: dict[str, Any]) -> None:
        for entry in doc["untested"]["items"]:
            entry["blocked_by"] = None

    for name, change in (("runqa", drop), ("runqb", null)):
        bundle = make_bundle(tmp_path / name, sample_evidence(), None)
        _edit(bundle, change)
        assert json.loads((bundle / "evidence.json").read_text())["untested"]["items"]
        out = tmp_path / f"{name}.{fmt}"
        assert hetero("render", str(bundle), "--format", fmt, "--out", str(out)) == 0
        outs.append(out.read_bytes().replace(name.encode(), b"X"))
    assert outs[0] == outs[1]


def test_render_without_a_key_refuses_a_record_lacking_a_field_it_reads_never_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unverified bundle is read as hostile: in the README's real run, every field of every record's data
    removed in turn (and the ``business.rules`` results nulled), every format renders it or refuses it as one
    message naming evidence.json (on 3eba738 a ``business.rules`` record without ``results`` raised KeyError in
    junit, ctrf and the dossier, a ``model.identity`` without ``model`` in the dossier)."""
    real, _ = readme_bundle(tmp_path / "project")
    base = json.loads((real / "evidence.json").read_text())
    edits: list[tuple[str, Any]] = []
    for i, item in enumerate(base["items"]):
        for r, record in enumerate(item["records"]):
            for key in record["data"]:
                edits.append((f"{record['kind']}.{key}",
                              lambda d, i=i, r=r, key=key: d["items"][i]["records"][r]["data"].pop(key)))
    edits.append(("rules results null", lambda d: [r["data"].update(results=None) for i in d["items"]
                                                   for r in i["records"] if r["kind"] == "business.rules"]))
    assert any(name == "business.rules.results" for name, _ in edits)
    refused: set[str] = set()
    for n, (name, change) in enumerate(edits):
        bundle = tmp_path / f"b{n}"
        shutil.copytree(real, bundle)
        _edit(bundle, change)
        for fmt in ("html", "md", "junit", "ctrf", "dossier"):
            code = hetero("render", str(bundle), "--format", fmt, "--out", str(tmp_path / f"o{n}.{fmt}"))
            err = capsys.readouterr().err
            assert code in (0, 2), (name, fmt, code)
            if code == 2:
                refused.add(name)
                assert ("not an evidence document" in err  # the loader: a declared field of the kind's shape
                        or "evidence.json: a record or field the" in err and "not of the shape this version writes" in err)
        shutil.rmtree(bundle)
    assert {"business.rules.results", "rules results null"} <= refused


_POOL = {"workloads": 2, "simulated": 0, "unknown": {"wait_s": 0, "start_s": 1, "run_s": 1},
         "wait_s": {"count": 2, "p50": 1.0, "p95": 2.0, "max": 2.0}}
_COUNTS = {"regression": 1, "new_failure": 0, "still_failing": 0, "fixed": 0, "newly_untested": 0, "newly_covered": 0}


def _sections(pool: Any, counts: Any) -> Any:
    """An edit giving the document a usage ledger's queue with ``pool`` and a baseline diff with ``counts``."""
    def change(d: Any) -> None:
        d["usage"] = {**ledger([], None), "queue": {"units": "seconds", "method": "m", "pools": {"gpu": pool}}}
        d["baseline_diff"] = {"baseline": {"run": "night-1", "matrices": []}, "counts": counts,
                              "transitions": {name: [] for name in _COUNTS}, "target_changes": [],
                              "metric_changes": [], "tolerance": 0.05, "verification": "verified",
                              "gate": {"policy": "regression", "failed": True, "reasons": ["1 regression(s)"]}}
    return change


@pytest.mark.parametrize(("pool", "counts", "rendered"), [
    (_POOL, _COUNTS, True),
    ({k: v for k, v in _POOL.items() if k != "unknown"}, _COUNTS, False),
    ("a pool", _COUNTS, False),
    (_POOL, {k: v for k, v in _COUNTS.items() if k != "new_failure"}, False),
])
def test_dossier_without_a_key_renders_typed_sections_or_refuses_edited_ones_in_one_message(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], pool: Any, counts: Any, rendered: bool) -> None:
    """The dossier reads the usage ledger's queue pools and the baseline diff's counts as the gate writes them
    (every field): a bundle read without a key whose sections were edited is refused naming evidence.json, never a
    traceback; one as written renders them."""
    bundle = make_bundle(tmp_path / "b", sample_evidence(), None)
    _edit(bundle, _sections(pool, counts))
    out = tmp_path / "d.html"
    code = hetero("render", str(bundle), "--format", "dossier", "--out", str(out))
    err = capsys.readouterr().err
    if rendered:
        assert code == 0, err
        assert "Pool gpu: 2 workload(s)" in out.read_text() and "against baseline night-1" in out.read_text()
    else:
        # the usage section is the loader's to refuse (its shape is checked at load), the baseline diff the dossier's
        assert code == 2 and ("evidence.json: a record or field the dossier rendering reads" in err
                              or "evidence.json: field 'usage.queue.pools.gpu" in err
                              and "not an evidence document" in err), err
