"""Each record kind the gate declares has one shape (pytest_hetero/evidence/records.py), and the loader and the gate's
own item check hold every record of that kind to it (pytest_hetero/evidence/shapes.py): an edited or foreign record
is refused naming the record and field, before any reader subscripts it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal, TypedDict

import pytest
from readme_run import readme_bundle
from test_bundle_verify import hetero

from pytest_hetero.bundle.verify import load_evidence
from pytest_hetero.errors import BundleError
from pytest_hetero.evidence import records
from pytest_hetero.evidence.document import DocumentError, check_item
from pytest_hetero.evidence.shapes import MAX_DEPTH, ShapeError, check_json, fields_of


class _Inner(TypedDict):
    n: int


class _Float(TypedDict):
    x: float


class _Shape(TypedDict, total=False):
    name: str
    at: float | None
    kind: Literal["a", "b"]
    inner: _Inner | None
    tags: list[str]
    by: dict[str, int]


class _Required(TypedDict):
    name: str


def test_every_kind_has_one_shape_whose_hints_resolve_at_run_time() -> None:
    names = [k.name for k in vars(records).values() if isinstance(k, records.Kind)]
    assert len(names) == len(set(names)) == len(records.KINDS)
    for kind in records.KINDS.values():
        shape = kind.shape
        members = getattr(shape, "__args__", (shape,))
        for member in members:
            assert fields_of(member), kind.name  # NameError here: a hint names something only TYPE_CHECKING imports
    assert records.KINDS["scheduling.placed"].shape is records.PlacedData
    assert records.KINDS["discovery.snapshot"] is records.SNAPSHOT


@pytest.mark.parametrize(("value", "hint", "path", "words"), [
    ({}, _Required, ".name", "missing"),
    ({"name": 3}, _Required, ".name", "is a number, not a string"),
    ({"at": "1"}, _Shape, ".at", "is a string, not a number or null"),
    ({"at": True}, _Shape, ".at", "is a boolean, not a number or null"),
    ({"kind": "c"}, _Shape, ".kind", "is 'c', not one of 'a', 'b'"),
    ({"inner": {"n": "x"}}, _Shape, ".inner.n", "is a string, not a number"),
    ({"inner": {}}, _Shape, ".inner.n", "missing"),
    ({"tags": ["a", 1]}, _Shape, ".tags[1]", "is a number, not a string"),
    ({"by": {"x": None}}, _Shape, ".by.x", "is null, not a number"),
    ([], _Shape, "", "is a list, not an object"),
])
def test_check_json_names_the_first_wrong_field(value: object, hint: object, path: str, words: str) -> None:
    with pytest.raises(ShapeError) as caught:
        check_json(value, hint)
    assert caught.value.path == path and caught.value.message == words


def test_check_json_accepts_what_the_type_allows() -> None:
    check_json({"at": 3, "kind": "a", "inner": None, "tags": [], "by": {"x": 1}, "extra": object()}, _Shape)
    check_json({}, _Shape)  # total=False: nothing required
    check_json({"name": "n", "written_by_a_newer_gate": [1]}, _Required)  # keys it does not declare: left alone


def test_check_json_refuses_deep_nesting_without_recursing_to_a_crash() -> None:
    deep: Any = []
    for _ in range(10_000):
        deep = [deep]
    check_json({"sizes": deep}, dict[str, Any])  # what the type leaves open is not walked: no recursion at all
    with pytest.raises(ShapeError, match=f"nested deeper than {MAX_DEPTH}"):
        check_json(_nested(MAX_DEPTH + 3), _deep_list(MAX_DEPTH + 3))


def _deep_list(levels: int) -> object:
    hint: object = int
    for _ in range(levels):
        hint = list[hint]  # type: ignore[valid-type]
    return hint


def _nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


def _item(records_: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nodeid": "m.yaml::r::discovery", "matrix": "m.yaml", "layer": "discovery", "keys": {}, "owner": "",
            "status": "passed", "records": records_, "artifacts": [], "started_at": "t", "finished_at": "t",
            "duration_s": 0.1, "failure": None, "blocked_by": None, "reason": None}


def test_the_item_check_holds_a_record_of_a_declared_kind_to_its_shape_and_leaves_other_kinds_open() -> None:
    placed = {"pod": "p", "node": "n", "waited_s": 1, "decided_at": None, "observed_epoch_s": None}
    check_item(_item([{"kind": "scheduling.placed", "at": "t", "data": placed},
                      {"kind": "my.plugin", "at": "t", "data": {"anything": [1, {"x": None}]}}]), "items[0]")
    with pytest.raises(DocumentError) as caught:
        check_item(_item([{"kind": "my.plugin", "at": "t", "data": {}},
                          {"kind": "scheduling.placed", "at": "t", "data": {**placed, "waited_s": "1"}}]), "items[4]")
    assert caught.value.path == "items[4].records[1].data.waited_s"
    assert caught.value.message == "is a string, not a number (record kind scheduling.placed)"


def test_a_real_runs_records_fit_their_kinds_and_an_edited_one_is_refused_by_every_reader(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's real run: its evidence loads (every record of a declared kind fits); each record's data edited
    to drop a required field, or to hold another JSON type, is refused by the loader naming the record's field —
    so ``render`` (every format), ``diff``, ``trend`` and ``catalog`` refuse it as one message, never a traceback."""
    real, _ = readme_bundle(tmp_path / "project")
    doc, state = load_evidence(real, allow_unsigned=True)
    assert state == "unverified"  # signed, read without its key
    kinds = {r["kind"] for i in doc["items"] for r in i["records"]}
    declared = kinds & records.KINDS.keys()
    assert {"model.identity", "model.run", "business.rules", "discovery.snapshot", "inputs.used"} <= declared
    base = json.loads((real / "evidence.json").read_text())
    edits: list[tuple[str, str, Any]] = []
    for i, item in enumerate(base["items"]):
        for r, record in enumerate(item["records"]):
            kind = records.KINDS.get(record["kind"])
            if kind is None or getattr(kind.shape, "__args__", None):
                continue
            for key, _hint, required in fields_of(kind.shape):
                if key not in record["data"]:
                    continue
                where = f"items[{i}].records[{r}].data.{key}"
                if required:
                    edits.append((where, "missing", lambda d, i=i, r=r, key=key:
                                  d["items"][i]["records"][r]["data"].pop(key)))
                edits.append((where, "is ", lambda d, i=i, r=r, key=key:
                              d["items"][i]["records"][r]["data"].update({key: {"edited": [True]}})))
    assert len(edits) > 20
    for n, (where, words, change) in enumerate(edits):
        doc = json.loads((real / "evidence.json").read_text())
        change(doc)
        bundle = tmp_path / f"b{n}"
        shutil.copytree(real, bundle)
        (bundle / "evidence.json").write_text(json.dumps(doc))
        with pytest.raises(BundleError) as caught:
            load_evidence(bundle, allow_unsigned=True)
        assert caught.value.location.field.startswith(where) and f": {words}" in caught.value.message, where
        if n % 7 == 0:  # every reader, on a sample of the edits (each is a process-free call)
            for argv in (("render", str(bundle), "--format", "dossier", "--out", str(tmp_path / "o")),
                         ("diff", "--allow-unsigned", str(real), str(bundle)),
                         ("trend", "--allow-unsigned", str(bundle)), ("catalog", "--allow-unsigned", str(bundle))):
                assert hetero(*argv) == 2, (argv, where)
                err = capsys.readouterr().err
                assert "Traceback" not in err and where in err, (argv, err)
        shutil.rmtree(bundle)


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_number_is_refused_where_the_type_wants_a_number(number: float) -> None:
    """The journal writes NaN and ±Infinity as null, so a record holding one passed the gate's own item check and
    then made the signed bundle unreadable to every reader (w/attack12, three writers). The check now refuses it where
    the gate checks the item, naming the field."""
    with pytest.raises(ShapeError) as caught:
        check_json({"x": number}, _Float)
    assert caught.value.path == ".x" and "not a finite number" in caught.value.message
    check_json({"at": number}, _Shape)  # float | None: journaled as null, which the form allows
    placed = {"pod": "p", "node": "n", "waited_s": number, "decided_at": None, "observed_epoch_s": None}
    with pytest.raises(DocumentError, match=r"items\[0\]\.records\[0\]\.data\.waited_s: is .*not a finite number"):
        check_item(_item([{"kind": "scheduling.placed", "at": "t", "data": placed}]), "items[0]")
