"""The journal as written and read: authenticated lines, the group commit, the run folder's lock,
conflicts refused (issue 15 item 1, journal side; issue 20 item 2), and a run's inputs kept in the
bundle (issue 15 item 5)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import DIGITS, matrix_text

from pytest_hetero.errors import BundleError
from pytest_hetero.evidence import recorder as recorder_module
from pytest_hetero.evidence.document import ITEM_FIELDS, ITEM_RESULT_FIELDS, DocumentError, as_document, check_item
from pytest_hetero.evidence.journal import JournalKey, read_lines
from pytest_hetero.evidence.recorder import SYNC_EVERY_LINES, Recorder, assemble, journal_locked

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def _item(n: int, status: str = "passed") -> dict[str, Any]:
    return {"nodeid": f"m.matrix.yaml::r{n}::discovery", "matrix": "m.matrix.yaml", "layer": "discovery",
            "keys": {"resource": f"r{n}"}, "owner": "infrastructure", "status": status, "records": [],
            "artifacts": [], **RESULT}


RESULT: dict[str, Any] = {"started_at": "2026-12-04T00:00:00.000000Z", "finished_at": "2026-12-04T00:00:01.000000Z",
                          "duration_s": 1.0, "failure": None, "blocked_by": None, "reason": None}
"""An item's result fields as every item writes them (:data:`recorder.RESULT_FIELDS`)."""


def test_lines_are_numbered_and_authenticated_and_a_foreign_line_is_rejected(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r1", {"id": "r1"})
    for n in range(3):
        rec.item(_item(n))
    with open(tmp_path / "r1" / "journal.jsonl", "a", encoding="utf-8") as fh:  # another process appends
        fh.write(json.dumps({"type": "item", "evidence": _item(1, "failed"), "seq": 9,
                             "mac": "0" * 64}, separators=(",", ":")) + "\n")
    rec.item(_item(3))
    rec.end(0, False)
    lines = (tmp_path / "r1" / "journal.jsonl").read_text().splitlines()
    assert [json.loads(x)["seq"] for x in lines] == [0, 1, 2, 3, 9, 4, 5]
    assert all(json.loads(x)["mac"] for x in lines)
    read = read_lines(tmp_path / "r1" / "journal.jsonl", rec.key)
    assert read.rejected == [(5, "MAC does not verify: not written by the gate (or altered)")]
    assert read.authenticated and read.missing == [] and len(read.entries) == 6
    assert read.key == {"mac": "hmac-sha256", "key": "ephemeral"}
    # without the key (a crashed unsigned run) the forged line claims seq 9: accepted, and said to be
    unauthenticated = read_lines(tmp_path / "r1" / "journal.jsonl")
    assert not unauthenticated.authenticated and unauthenticated.missing == [6, 7, 8]
    assert "the run was unsigned" in unauthenticated.why_not


@pytest.mark.parametrize("member", ["xy", 5, ["key"], 0, None])
def test_a_run_line_whose_journal_member_is_no_object_is_read_unauthenticated_never_a_traceback(
        tmp_path: Path, member: object) -> None:
    """A hand-made run line whose ``journal`` member (how the key was made) is not an object states no key, as a run
    line without one (written before authentication): read unauthenticated. A string or number there raised
    ValueError/TypeError out of ``hetero report --from-journal`` (``dict(member)``)."""
    path = tmp_path / "journal.jsonl"
    path.write_text(json.dumps({"type": "run", "id": "r1", "journal": member}) + "\n"
                    + json.dumps({"type": "end", "at": "2026-12-04T16:00:00Z", "exit_status": 0,
                                  "interrupted": False}) + "\n")
    read = read_lines(path)
    assert (read.key, read.authenticated, read.origin.stated, len(read.entries)) == ({}, False, False, 2)


def test_a_derived_key_is_the_same_for_the_run_and_for_a_recovery_holding_the_run_key() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    live = JournalKey.derived(key.sign, "kid", "r1")
    again = JournalKey.derived(key.sign, "kid", "r1", live.info["nonce"])
    other = JournalKey.derived(Ed25519PrivateKey.generate().sign, "kid", "r1", live.info["nonce"])
    assert live.mac(b"x") == again.mac(b"x") != other.mac(b"x")
    assert "nonce" in repr(live) and live.info["key"] == "derived"


def test_assembly_refuses_two_item_lines_that_disagree(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r1", {"id": "r1"})
    rec.item(_item(0, "failed"))
    rec.item(_item(0, "passed"))  # even two lines the gate wrote: never pick one
    rec.end(1, False)
    with pytest.raises(BundleError, match=r"two item lines for m.matrix.yaml::r0::discovery disagree \(seq 1 and 2\)"):
        assemble(tmp_path / "r1", key=rec.key)


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("status", "pased", "item entry field 'evidence.status' is 'pased', not a status (passed, failed, error, blocked, "
                        "not_applicable, skipped, excluded, deselected, not_run)"),
    ("layer", "modle", "item entry field 'evidence.layer' is 'modle', not a layer (discovery, scheduling, startup, "
                       "model, business)"),
])
def test_a_journaled_item_outside_the_vocabulary_is_refused_naming_the_field(tmp_path: Path, field: str, value: str,
                                                                             problem: str) -> None:
    rec = Recorder(tmp_path / "r1", {"id": "r1"})
    rec.item(_item(0))
    rec.item({**_item(1), field: value})  # authenticated: the line is the gate's, its word is not
    rec.end(0, False)
    assert recorder_module.entry_problem({"type": "item", "evidence": {**_item(1), field: value}}) == problem
    with pytest.raises(BundleError, match=r"journal line is not a pytest-hetero entry: ") as refused:
        assemble(tmp_path / "r1", key=rec.key)
    assert refused.value.message == f"journal line is not a pytest-hetero entry: {problem}"
    assert refused.value.location.line == 3
    # the typed loader refuses the same word, so a journal check that passes means the document loads
    assert recorder_module.entry_problem({"type": "item", "evidence": _item(1)}) == ""


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("reason", KeyError, "item entry lacks 'evidence.reason'"),
    ("started_at", KeyError, "item entry lacks 'evidence.started_at'"),
    ("duration_s", "x", "item entry field 'evidence.duration_s' is a str"),
    ("duration_s", True, "item entry field 'evidence.duration_s' is a bool"),
    ("finished_at", None, "item entry field 'evidence.finished_at' is a NoneType"),
    ("blocked_by", ["x"], "item entry field 'evidence.blocked_by' is a list"),
    ("failure", "boom", "item entry field 'evidence.failure' is a str"),
])
def test_a_journaled_item_lacking_or_mistyping_a_result_field_is_refused_naming_it(
        tmp_path: Path, field: str, value: object, problem: str) -> None:
    """An unsigned run's journal can be edited (its key died with the process): an item line without ``reason``
    or with a ``duration_s`` string is refused with its line and field, as the typed loader refuses the item,
    not read until a rendering subscripts it (``hetero report --from-journal`` raised KeyError/ValueError)."""
    bad = {k: v for k, v in _item(1).items() if k != field}
    if value is not KeyError:
        bad[field] = value
    rec = Recorder(tmp_path / "r1", {"id": "r1"})
    rec.item(_item(0))
    rec.item(bad)
    rec.end(0, False)
    assert recorder_module.entry_problem({"type": "item", "evidence": bad}) == problem
    with pytest.raises(BundleError, match=r"journal line is not a pytest-hetero entry: ") as refused:
        assemble(tmp_path / "r1", key=rec.key)
    assert refused.value.message == f"journal line is not a pytest-hetero entry: {problem}"
    assert refused.value.location.line == 3


@pytest.mark.parametrize("record", ["x", {"at": "t", "data": {}}, {"kind": "usage.workload", "at": "t", "data": "y"},
                                    {"kind": "k", "data": {}}, {"kind": 1, "at": "t", "data": {}}])
def test_a_journaled_item_with_a_record_that_is_no_record_is_refused_naming_it(tmp_path: Path, record: object) -> None:
    """An edited journal's item whose record is not ``{kind, at, data}`` is refused with its line and field, as the
    typed loader refuses the item; ``hetero report --from-journal`` raised TypeError (a record that is a string) or
    KeyError (one without ``kind``) out of assembly, or wrote a bundle its own verify then refused."""
    bad = {**_item(1), "records": [{"kind": "k", "at": "t", "data": {}}, record]}
    problem = "item entry field 'evidence.records[1]' is not a record {kind: string, at: string, data: object}"
    assert recorder_module.entry_problem({"type": "item", "evidence": bad}) == problem
    with pytest.raises(DocumentError, match=r"items\[0\]\.records\[1\]: is not a record"):
        check_item(bad, "items[0]")  # the loader's judgement, the same
    rec = Recorder(tmp_path / "r1", {"id": "r1"})
    rec.item(_item(0))
    rec.item(bad)
    rec.end(0, False)
    with pytest.raises(BundleError) as refused:
        assemble(tmp_path / "r1", key=rec.key)
    assert refused.value.message == f"journal line is not a pytest-hetero entry: {problem}"
    assert refused.value.location.line == 3


def test_an_artifact_that_is_no_object_is_a_named_problem_of_the_finish_never_a_traceback(tmp_path: Path) -> None:
    """An edited journal's item listing an artifact that is not an object assembled, then raised AttributeError out
    of the finish (``recorded``: ``art.get``); it is an unsafe-path problem like an artifact without a path."""
    from pytest_hetero.bundle.finish import recorded

    rec = Recorder(tmp_path / "r1", {"id": "r1"})
    rec.item({**_item(0), "artifacts": ["x", {"path": "../up", "sha256": "0" * 64, "size": 1}]})
    rec.end(0, False)
    files, problems = recorded(assemble(tmp_path / "r1", key=rec.key), None, tmp_path / "r1")
    assert files == {}
    assert [(p.path, p.kind) for p in problems] == [("x", "unsafe"), ("../up", "unsafe")]
    assert "is not an object {path, sha256, size}" in problems[0].detail


_ODD_VALUES: list[object] = [KeyError, None, "x", 1, 1.5, True, [], {}, {"layer": "model", "category": "c",
                                                                      "message": "m", "owner": "o"}]


@pytest.mark.parametrize("field", [name for name, _ in ITEM_FIELDS] + list(ITEM_RESULT_FIELDS))
def test_the_journal_and_the_loader_judge_an_item_field_by_field_alike(field: str) -> None:
    """One table (``document.ITEM_FIELDS`` / ``ITEM_RESULT_FIELDS``) decides what an item line must hold, for the
    journal's line check and for the verifying loader: every field absent or holding each JSON type is refused by
    both or accepted by both, except the one stated variation (the loader checks ``failure``'s object fields, the
    journal only that it is an object or null)."""
    for value in _ODD_VALUES:
        item = _item(1)
        if value is KeyError:
            del item[field]
        else:
            item[field] = value
        journal_ok = recorder_module.entry_problem({"type": "item", "evidence": item}) == ""
        try:
            check_item(item, "items[0]")
            loader_ok = True
        except DocumentError:
            loader_ok = False
        expected = journal_ok
        if field == "failure" and value == {}:
            expected = False  # the loader's variation: a failure object names its four strings
        if field in ("layer", "status") and type(value) is str:
            expected = False  # "x" is no layer or status word: both refuse it (the vocabulary)
            assert not journal_ok
        assert loader_ok == expected, (field, value, journal_ok, loader_ok)


def test_fsync_is_a_group_commit_and_every_line_is_written_at_once(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder_module, "SYNC_INTERVAL_S", 3600.0)
    rec = Recorder(tmp_path / "r1", {"id": "r1"})
    journal = tmp_path / "r1" / "journal.jsonl"
    for n in range(200):
        rec.item(_item(n))
        # in the kernel before item() returns: a SIGKILL of the process loses nothing written
        assert journal.read_bytes().count(b"\n") == n + 2
    assert rec.syncs == (200 + 1) // SYNC_EVERY_LINES + 1  # the run line's first commit, then every 64 lines
    rec.deselected_many((f"m.matrix.yaml::d{n}::discovery", "deselected (-k)") for n in range(10_000))
    assert journal.read_bytes().count(b"\n") == 10_201
    rec.end(0, False)
    assert rec.syncs <= 6 and not journal_locked(tmp_path / "r1")


def test_the_run_folder_is_claimed_once(tmp_path: Path) -> None:
    first = Recorder(tmp_path / "r1", {"id": "r1"})
    assert first.claim() == "" and journal_locked(tmp_path / "r1")
    second = Recorder(tmp_path / "r1", {"id": "r1"})
    assert second.claim().startswith("run id 'r1' is in use: another session is writing")
    second.item(_item(0))  # refused: writes nothing
    first.end(0, False)
    third = Recorder(tmp_path / "r1", {"id": "r1"})
    assert third.claim().startswith("run id 'r1' already has an interrupted run's bundle at")
    assert [json.loads(x)["type"] for x in (tmp_path / "r1" / "journal.jsonl").read_text().splitlines()] == [
        "run", "end"]


def test_a_run_keeps_its_code_folder_and_acceptance_file_in_the_bundle(tmp_path: Path) -> None:
    (tmp_path / "m.matrix.yaml").write_text(matrix_text(name="m"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "m.matrix.yaml",
                           "--hetero-run-id", "r1"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout
    bundle = tmp_path / "reports" / "r1"
    evidence = json.loads((bundle / "evidence.json").read_text())
    code = evidence["inputs"]["m"]["code"]["digits-logreg"]
    listing = (bundle / "inputs/m/code/digits-logreg.sha256sum").read_text().splitlines()
    expected = sorted(p.relative_to(DIGITS).as_posix() for p in DIGITS.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts)
    assert [line.split("  ", 1)[1] for line in listing] == expected
    for line in listing:
        digest, rel = line.split("  ", 1)
        assert digest == hashlib.sha256((DIGITS / rel).read_bytes()).hexdigest()
    assert code["sha256"] == hashlib.sha256((bundle / code["listing"]).read_bytes()).hexdigest()
    assert (bundle / "inputs/m/code/digits-logreg/infer.py").read_bytes() == (DIGITS / "infer.py").read_bytes()
    assert sorted(e["path"] for e in code["left_out"]) == ["data/digits-test-1.0.0.csv",
                                                          "model/digits-logreg-1.0.0.onnx"]
    acceptance = evidence["inputs"]["m"]["acceptance"]["digits-test"]
    assert acceptance["sha256"] == hashlib.sha256((DIGITS / "acceptance.yaml").read_bytes()).hexdigest()
    assert (bundle / acceptance["copy"]).read_bytes() == (DIGITS / "acceptance.yaml").read_bytes()
    listed = {e["path"] for e in json.loads((bundle / "manifest.json").read_text())["files"]}
    assert {"inputs/m/code/digits-logreg/infer.py", "inputs/m/code/digits-logreg.sha256sum",
            "inputs/m/acceptance/digits-test.yaml"} <= listed
    predicate = json.loads((bundle / "statement.intoto.json").read_text())["predicate"]
    assert predicate["inputs"]["m"]["code"]["digits-logreg"]["sha256"] == code["sha256"]


def test_a_code_folder_holding_the_report_folder_keeps_no_bundle(tmp_path: Path) -> None:
    """``code: .`` next to ``reports/``: the second run's code copy holds neither the first bundle nor itself
    (each is named as left out: a bundle is evidence, not code)."""
    doc = json.loads(matrix_text(name="m"))
    (tmp_path / "infer.py").write_text((DIGITS / "infer.py").read_text())
    for model in doc["spec"]["models"]:
        model["code"] = "."
    (tmp_path / "m.matrix.yaml").write_text(json.dumps(doc))
    for run_id in ("r1", "r2"):
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "m.matrix.yaml",
                               "--hetero-run-id", run_id], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              check=False)
        assert done.returncode == 0, done.stdout
    bundle = tmp_path / "reports" / "r2"
    code = json.loads((bundle / "evidence.json").read_text())["inputs"]["m"]["code"]["digits-logreg"]
    listed = [e["path"] for e in json.loads((bundle / "manifest.json").read_text())["files"]]
    assert "inputs/m/code/digits-logreg/infer.py" in listed
    assert not [p for p in listed if p.startswith("inputs/m/code/digits-logreg/reports/")]
    assert {e["path"]: e["why"] for e in code["left_out"] if e["path"].startswith("reports/")} == {
        "reports/r1/": "a pytest-hetero bundle folder (evidence, not code)",
        "reports/r2/": "a pytest-hetero bundle folder (evidence, not code)"}


def test_xdist_workers_never_hold_the_journal_key_and_the_controller_authenticates(pytester: pytest.Pytester
                                                                                    ) -> None:
    pytester.makefile(".matrix.yaml", m=matrix_text(name="m"))
    pytester.makeconftest("""
def pytest_configure(config):
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        with open("workerinput-" + worker["workerid"] + ".json", "w") as fh:
            fh.write(repr(sorted(worker)))
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--hetero-run-id", "r1")
    result.assert_outcomes(passed=4, skipped=1)
    for found in pytester.path.glob("workerinput-*.json"):
        assert "journal" not in found.read_text() and "key" not in found.read_text()
    evidence = json.loads((pytester.path / "reports" / "r1" / "evidence.json").read_text())
    assert evidence["journal"]["authenticated"] is True and evidence["journal"]["rejected"] == []
    assert evidence["journal"]["lines"] == len((pytester.path / "reports" / "r1" / "journal.jsonl"
                                                ).read_text().splitlines())


def test_reports_and_items_keep_slim_evidence_once_it_is_journaled(pytester: pytest.Pytester) -> None:
    """A long run's memory does not grow with what items recorded: after journaling, pytest's reports
    and the items' stash hold only what gating and pytest-html read."""
    pytester.makefile(".matrix.yaml", m=matrix_text(name="m"))
    pytester.makeconftest("""
import json
from pytest_hetero.pytest_plugin.stash import FINAL, OUTCOME

SEEN = []


def pytest_runtest_logreport(report):
    SEEN.append(report)


def pytest_sessionfinish(session):
    kept = [dict(r.user_properties).get("hetero_evidence") for r in SEEN if r.user_properties]
    stash = [item.stash.get(OUTCOME, None) for item in session.items]
    objects = {}  # nodeid -> ids of the slim dicts its stash and reports hold
    for item in session.items:
        objects[item.nodeid] = {id(item.stash.get(OUTCOME, None)), id(item.stash.get(FINAL, None))}
    for r in SEEN:
        if dict(r.user_properties).get("hetero_evidence") is not None:
            objects[r.nodeid].add(id(dict(r.user_properties)["hetero_evidence"]))
    with open("kept.json", "w") as fh:
        json.dump({"reports": kept, "stash": stash, "objects": {k: len(v) for k, v in objects.items()}}, fh)
""")
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--hetero-run-id", "r1").assert_outcomes(
        passed=4, skipped=1)
    kept = json.loads((pytester.path / "kept.json").read_text())
    slim = {"nodeid", "matrix", "layer", "keys", "owner", "status", "blocked_by", "reason", "failure"}
    assert len(kept["reports"]) == 5 and all(set(e) == slim for e in kept["reports"])
    assert len(kept["stash"]) == 5 and all(set(e) == slim for e in kept["stash"])
    # one slim dict per item, shared by its stash and its reports (not one each)
    assert kept["objects"] and set(kept["objects"].values()) == {1}
    journaled = [json.loads(x)["evidence"] for x in (pytester.path / "reports" / "r1" / "journal.jsonl"
                                                     ).read_text().splitlines() if '"type":"item"' in x]
    assert all(e["records"] for e in journaled if e["status"] == "passed")  # the full evidence is in the journal
    assert os.path.exists(pytester.path / "reports" / "r1" / "attestation.intoto.jsonl")


def test_a_code_folder_shared_by_models_is_kept_once_and_never_copies_a_bundle(tmp_path: Path) -> None:
    """Issue 20.1: models sharing one ``code`` folder that also holds the report folder (``code: .``)
    cost one digest and copy of that folder, not one per model (each copied the bundles the earlier
    ones wrote: 1.7 GB at 1,000 items), and never a copy of a bundle."""
    from pytest_hetero.evidence.inputs import RunInputs
    from pytest_hetero.matrix.load import load_matrix

    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "infer.py").write_text("print('hi')\n")
    for name in ("model.onnx", "data.csv"):
        (project / name).write_bytes((DIGITS / ("model/digits-logreg-1.0.0.onnx" if name == "model.onnx"
                                                else "data/digits-test-1.0.0.csv")).read_bytes())
    old = project / "reports" / "r0" / "inputs"
    old.mkdir(parents=True)
    (old / "earlier.txt").write_text("an earlier bundle\n")
    (old.parent / "journal.jsonl").write_text("")  # what makes a folder a bundle
    doc = json.loads(matrix_text(name="m"))
    model = doc["spec"]["models"][0]
    model.update(uri=str(project / "model.onnx"), code=str(project))
    doc["spec"]["models"] = [{**model, "name": f"m{i}"} for i in range(3)]
    doc["spec"]["datasets"][0].update(uri=str(project / "data.csv"))
    del doc["spec"]["datasets"][0]["acceptance"]
    (project / ".hetero-root").write_text("")
    (project / "m.matrix.yaml").write_text(json.dumps(doc))
    matrix = load_matrix(project / "m.matrix.yaml")
    bundle = project / "reports" / "r1"
    bundle.mkdir()
    inputs = RunInputs()
    inputs.keep(as_document({"items": [], "untested": {"items": []}, "matrices": [
        {"path": str(matrix.path), "prefix": "m.matrix.yaml", "name": "m", "sha256": matrix.sha256}]}), bundle)
    code = inputs.section["m"]["code"]
    listing = (bundle / "inputs/m/code/m0.sha256sum").read_text().splitlines()
    assert [line.split("  ", 1)[1] for line in listing] == [".hetero-root", "data.csv", "m.matrix.yaml",
                                                           "model.onnx", "src/infer.py"]
    assert {e["path"]: e["why"] for e in code["m0"]["left_out"] if e["path"].startswith("reports/")} == {
        "reports/r0/": "a pytest-hetero bundle folder (evidence, not code)",
        "reports/r1/": "a pytest-hetero bundle folder (evidence, not code)"}
    assert not (bundle / "inputs/m/code/m0/reports").exists()
    assert (bundle / "inputs/m/code/m0/src/infer.py").read_text() == "print('hi')\n"
    assert code["m1"] == {**code["m0"], "same_as": "m0"} and code["m2"]["same_as"] == "m0"
    assert sorted(p.name for p in (bundle / "inputs/m/code").iterdir()) == ["m0", "m0.sha256sum"]
    assert sorted(inputs.written) == sorted([f"inputs/m/code/m0/{n}" for n in (".hetero-root", "m.matrix.yaml",
                                                                             "src/infer.py")]
                                            + ["inputs/m.matrix.yaml", "inputs/m/code/m0.sha256sum"])


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("id", 5, "run entry field 'id' is a int"),
    ("invocation", "pytest -x", "run entry field 'invocation' is a str"),
    ("host", ["a"], "run entry field 'host' is a list"),
])
def test_a_run_line_with_a_field_of_another_type_is_refused_as_the_loader_would(
        tmp_path: Path, field: str, value: object, problem: str) -> None:
    """``hetero report --from-journal`` rebuilt a bundle from a run line whose ``id`` was a number (rc 0), which every
    reader then refused (``run.id: is a JSON int, not a string or null``): the journal's line check now uses the
    loader's run field types (``document.RUN_FIELD_TYPES``) and refuses the line, naming it."""
    assert recorder_module.entry_problem({"type": "run", field: value}) == problem
    rec = Recorder(tmp_path / "r1", {"id": "r1", field: value} if field != "id" else {field: value})
    rec.item(_item(0))
    rec.end(0, False)
    with pytest.raises(BundleError) as refused:
        assemble(tmp_path / "r1", key=rec.key)
    assert refused.value.message == f"journal line is not a pytest-hetero entry: {problem}"
    assert refused.value.location.line == 1
    good = Recorder(tmp_path / "r2", {"id": "r2", "host": "h", "invocation": ["pytest"]})
    good.item(_item(0))
    good.end(0, False)
    assert assemble(tmp_path / "r2", key=good.key)["run"]["invocation"] == ["pytest"]
