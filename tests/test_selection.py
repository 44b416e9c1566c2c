"""Profiles, affected-only and shards: which items run, and the reason recorded for each one left out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import evidence_of, matrix_text

from pytest_hetero.errors import SettingsError
from pytest_hetero.matrix.expand import expand
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.matrix.selection import Request, assign_shards, parse_selector, parse_shard, select

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def old_inputs(root: Path) -> Path:
    """A copy of the digits case's code folder and acceptance rules at ``root`` (an old revision's
    checkout: ``--hetero-affected-from`` compares code only when the old matrix names its own files)."""
    import shutil

    from support import DIGITS

    shutil.copytree(DIGITS, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def wide_matrix(*, name: str = "wide", image_digest: str | None = None, model_version: str = "1.0.0",
                resources: int = 2, profiles: dict[str, Any] | None = None, inputs: Path | None = None) -> str:
    """2 cpu resources × 2 images × 2 models × 1 dataset on the real digits case (12 items per resource);
    ``inputs``: the digits case copy whose code folder and acceptance rules the matrix names."""
    doc = json.loads(matrix_text(name=name, resources=[
        {"name": f"cpu-{c}", "type": "cpu", "requests": {"cpu": 1}} for c in "abcdefgh"[:resources]]))
    spec = doc["spec"]
    spec["images"] = [{"name": "py-a", "reference": "python:current"},
                      {"name": "py-b", "reference": "python:current"}]
    if image_digest:
        spec["images"][1]["digest"] = image_digest
    second = dict(spec["models"][0], name="digits-b", version=model_version)
    spec["models"].append(second)
    if profiles:
        spec["profiles"] = profiles
    if inputs is not None:
        for model in spec["models"]:
            model["code"] = str(inputs)
        spec["datasets"][0]["acceptance"] = str(inputs / "acceptance.yaml")
    return json.dumps(doc, indent=1)


def untested_reasons(evidence: dict[str, Any]) -> dict[str, str]:
    """id below the matrix file → reason, for deselected untested entries."""
    return {e["nodeid"].split("::", 1)[1]: e["reason"] for e in evidence["untested"]["items"]
            if e["status"] == "deselected"}


def plan_of(path: Path) -> tuple[Any, Any]:
    matrix = load_matrix(path)
    return matrix, expand(matrix)


def test_quick_profile_runs_first_combination_of_each_resource_and_records_the_rest(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", w=wide_matrix())
    result = pytester.runpytest("--hetero-profile", "quick", "-p", "no:cacheprovider")
    evidence = evidence_of(pytester)
    ran = sorted(i["nodeid"].split("::", 1)[1] for i in evidence["items"])
    assert ran == ["cpu-a::discovery", "cpu-a::py-a::startup", "cpu-a::scheduling",
                   "cpu-b::discovery", "cpu-b::py-a::startup", "cpu-b::scheduling"]
    reasons = untested_reasons(evidence)
    assert len(reasons) == 18
    assert set(reasons.values()) == {"deselected (profile quick)"}
    assert "cpu-a::py-b::startup" in reasons and "cpu-a::py-a::digits-logreg@digits-test::model" in reasons
    assert evidence["run"]["profile"] == "quick"
    assert evidence["selection"]["profile"] == "quick"
    assert evidence["selection"]["deselected"] == {"deselected (profile quick)": 18}
    assert evidence["selection"]["profiles"] == {"wide": {
        "name": "quick", "layers": ["discovery", "scheduling", "startup"], "representative": True, "repeat": 1}}
    result.stdout.fnmatch_lines(["*18 deselected*"])


def test_matrix_profile_overrides_builtin(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", w=wide_matrix(profiles={"quick": {"layers": ["discovery"]}}))
    pytester.runpytest("--hetero-profile", "quick", "-p", "no:cacheprovider")
    evidence = evidence_of(pytester)
    assert sorted(i["nodeid"].split("::", 1)[1] for i in evidence["items"]) == ["cpu-a::discovery", "cpu-b::discovery"]
    assert len(untested_reasons(evidence)) == 22


def test_unknown_profile_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", w=wide_matrix())
    result = pytester.runpytest("--hetero-profile", "weekly", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--hetero-profile 'weekly': matrix wide has no such profile*",
                                 "*known profiles: full, nightly, quick*"])


def test_affected_selector_keeps_matches_and_their_dependencies(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", w=wide_matrix())
    pytester.runpytest("--hetero-affected", "resource=cpu-b,model=digits-b", "-p", "no:cacheprovider")
    evidence = evidence_of(pytester)
    ran = sorted(i["nodeid"].split("::", 1)[1] for i in evidence["items"])
    assert ran == ["cpu-b::discovery", "cpu-b::py-a::digits-b@digits-test::business",
                   "cpu-b::py-a::digits-b@digits-test::model", "cpu-b::py-a::startup",
                   "cpu-b::py-b::digits-b@digits-test::business", "cpu-b::py-b::digits-b@digits-test::model",
                   "cpu-b::py-b::startup", "cpu-b::scheduling"]
    reasons = untested_reasons(evidence)
    assert len(reasons) == 16
    assert set(reasons.values()) == {"deselected (not affected: resource=cpu-b,model=digits-b)"}


@pytest.mark.parametrize("arg, message", [
    ("image=py-z", "*unknown image 'py-z' (not in any collected matrix)*"),
    ("node=x", "*unknown dimension 'node'*"),
    ("image", "*'image' is not DIMENSION=VALUE*"),
])
def test_bad_affected_selector_is_a_usage_error(pytester: pytest.Pytester, arg: str, message: str) -> None:
    pytester.makefile(".matrix.yaml", w=wide_matrix())
    result = pytester.runpytest("--hetero-affected", arg, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_affected_from_old_matrix_selects_changed_image_and_new_model_version(pytester: pytest.Pytester) -> None:
    old = pytester.path / "old.yaml"
    old.write_text(wide_matrix(inputs=old_inputs(pytester.path / "old-rev")), encoding="utf-8")
    pytester.makefile(".matrix.yaml", w=wide_matrix(image_digest="sha256:" + "ab" * 32))
    pytester.runpytest("--hetero-affected-from", str(old), "-p", "no:cacheprovider")
    evidence = evidence_of(pytester)
    ran = sorted(i["nodeid"].split("::", 1)[1] for i in evidence["items"])
    # py-b's digest changed: its startup and everything below it, plus discovery/scheduling they depend on
    assert ran == sorted(f"cpu-{r}::{x}" for r in "ab" for x in (
        "discovery", "scheduling", "py-b::startup", "py-b::digits-logreg@digits-test::model",
        "py-b::digits-logreg@digits-test::business", "py-b::digits-b@digits-test::model",
        "py-b::digits-b@digits-test::business"))
    assert set(untested_reasons(evidence).values()) == {
        "deselected (unchanged since old.yaml: spec.target, the resource, image, model and dataset entries (their "
        "sha256 digests included) and the sha256 of dataset digits-test's acceptance rules, model digits-b's code "
        "folder, model digits-logreg's code folder compared)"}
    assert len(untested_reasons(evidence)) == 10


def test_old_matrix_in_the_test_folder_is_not_collected(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", old=wide_matrix(inputs=old_inputs(pytester.path / "old-rev")),
                      w=wide_matrix(image_digest="sha256:" + "cd" * 32))
    pytester.runpytest("--hetero-affected-from", "old.matrix.yaml", "-p", "no:cacheprovider", "--hetero-profile",
                       "quick")
    evidence = evidence_of(pytester)
    assert [m["prefix"] for m in evidence["matrices"]] == ["w.matrix.yaml"]
    assert sorted(i["nodeid"] for i in evidence["items"]) == [
        "w.matrix.yaml::cpu-a::discovery", "w.matrix.yaml::cpu-a::scheduling",
        "w.matrix.yaml::cpu-b::discovery", "w.matrix.yaml::cpu-b::scheduling"]


def test_affected_from_pure_selection_names_the_change(tmp_path: Path) -> None:
    (tmp_path / "old.yaml").write_text(wide_matrix(inputs=old_inputs(tmp_path / "old-rev")), encoding="utf-8")
    (tmp_path / "new.yaml").write_text(wide_matrix(model_version="2.0.0", resources=3), encoding="utf-8")
    old = load_matrix(tmp_path / "old.yaml")
    new, plan = plan_of(tmp_path / "new.yaml")
    sel = select(Request(affected_from=old), [("m", new, plan)])
    assert sel.affected["m::cpu-a::py-a::digits-b@digits-test::model"] == \
        "model digits-b changed: version 1.0.0 → 2.0.0"
    assert sel.affected["m::cpu-c::discovery"] == "resource cpu-c added"
    assert sel.affected["m::cpu-a::py-a::startup"] == "dependency of an affected item"
    assert "m::cpu-a::py-a::digits-logreg@digits-test::model" in sel.deselected
    assert len(sel.affected) == 12 + 2 * 8 and len(sel.deselected) == 2 * 4


def test_affected_from_another_matrix_is_a_usage_error(pytester: pytest.Pytester) -> None:
    old = pytester.path / "old.yaml"
    old.write_text(wide_matrix(name="other"), encoding="utf-8")
    pytester.makefile(".matrix.yaml", w=wide_matrix())
    result = pytester.runpytest("--hetero-affected-from", str(old), "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*old matrix is 'other', collected: wide*"])


def test_shards_split_by_resource_without_overlap(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", w=wide_matrix(resources=3))
    ran: list[set[str]] = []
    for k in (1, 2):
        pytester.runpytest("w.matrix.yaml", "--hetero-shard", f"{k}/2", "-p", "no:cacheprovider",
                           "--hetero-profile", "quick")
        evidence = evidence_of(pytester)
        ran.append({i["nodeid"] for i in evidence["items"]})
        reasons = untested_reasons(evidence)
        assert {r for r in reasons.values() if "shard" in r} == {f"deselected (shard {k}/2: runs in shard {3 - k}/2)"}
        assert evidence["selection"]["shard"] == f"{k}/2"
        for bundle in (pytester.path / "reports").iterdir():
            bundle.rename(pytester.path / f"shard{k}")
    assert not ran[0] & ran[1]
    assert len(ran[0] | ran[1]) == 3 * 3
    resources = [{n.split("::")[1] for n in r} for r in ran]
    assert not resources[0] & resources[1]


@pytest.mark.parametrize("text, message", [("3/2", "K must be between 1 and N"), ("0/2", "K must be"),
                                           ("0/0", "--hetero-shard 0/0: N must be at least 1 (got N=0)"),
                                           ("1-2", "is not K/N")])
def test_bad_shard_is_a_usage_error(pytester: pytest.Pytester, text: str, message: str) -> None:
    pytester.makefile(".matrix.yaml", w=wide_matrix())
    result = pytester.runpytest("--hetero-shard", text, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])
    assert not (pytester.path / "reports").exists()


def test_shard_assignment_is_deterministic_and_balanced() -> None:
    counts = {("m", f"r{i}"): 10 + i for i in range(9)}
    first = assign_shards(counts, 3)
    assert first == assign_shards(dict(reversed(list(counts.items()))), 3)
    load = {s: sum(counts[u] for u, v in first.items() if v == s) for s in (1, 2, 3)}
    assert max(load.values()) - min(load.values()) <= 2


def test_parsers() -> None:
    assert parse_shard(" 2 / 5 ") == (2, 5)
    assert parse_selector("resource=a, image=b") == {"resource": "a", "image": "b"}
    with pytest.raises(SettingsError, match="given twice"):
        parse_selector("image=a,image=b")


def test_claim_ids_do_not_move_with_an_option_path(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """--hetero-affected-from /elsewhere/old.matrix.yaml (a separate word) is taken by pytest for a test
    path and moves its rootdir: evidence, JUnit and the heat map read poc/m.matrix.yaml::… while a run
    without it reads m.matrix.yaml::…, so CI test history broke."""
    import xml.etree.ElementTree as ET

    poc, elsewhere = pytester.mkdir("poc"), pytester.mkdir("elsewhere")
    (poc / "m.matrix.yaml").write_text(matrix_text())
    old = json.loads(matrix_text())
    old["spec"]["datasets"][0]["version"] = "0.9.0"
    (elsewhere / "old.matrix.yaml").write_text(json.dumps(old))
    monkeypatch.chdir(poc)
    result = pytester.runpytest("m.matrix.yaml", "-p", "no:cacheprovider", "--hetero-affected-from",
                                str(elsewhere / "old.matrix.yaml"))
    result.assert_outcomes(passed=4, skipped=1)
    result.stdout.fnmatch_lines([f"pytest-hetero: claim ids are relative to {poc}: pytest took "
                                 f"{elsewhere}/old.matrix.yaml for test paths and moved its rootdir to*"])
    [bundle] = (poc / "reports").iterdir()
    ev = json.loads((bundle / "evidence.json").read_text())
    ids = sorted(i["nodeid"] for i in ev["items"])
    assert ids == sorted(f"m.matrix.yaml::cpu-host::{p}" for p in (
        "discovery", "scheduling", "py::startup", "py::digits-logreg@digits-test::model",
        "py::digits-logreg@digits-test::business"))
    assert [m["prefix"] for m in ev["matrices"]] == ["m.matrix.yaml"]
    assert all(u["nodeid"].startswith("m.matrix.yaml::") for u in ev["untested"]["items"])
    cases = ET.parse(bundle / "junit.xml").getroot().iter("testcase")
    assert all(not c.attrib["classname"].startswith("poc") and "poc/" not in c.attrib["name"] for c in cases)


def _checkout(root: Path, *, venv_dists: tuple[str, ...] = ()) -> Path:
    """A checkout of the digits case with a matrix that points at it by relative paths (code folder,
    acceptance rules, a local environment whose installed distributions are ``venv_dists``)."""
    import shutil

    from support import DIGITS

    shutil.copytree(DIGITS, root / "cases" / "digits", ignore=shutil.ignore_patterns("__pycache__", "serving"))
    site = root / "env" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (root / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for dist in venv_dists:
        name, version = dist.split("==")
        meta = site / f"{name}-{version}.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    doc = json.loads(matrix_text(images=[{"name": "py", "reference": "python:current"},
                                         {"name": "env", "reference": "venv:../env"}]))
    model, dataset = doc["spec"]["models"][0], doc["spec"]["datasets"][0]
    model.update(uri="../cases/digits/model/digits-logreg-1.0.0.onnx", code="../cases/digits")
    dataset.update(uri="../cases/digits/data/digits-test-1.0.0.csv", acceptance="../cases/digits/acceptance.yaml")
    (root / "matrices").mkdir()
    (root / "matrices" / "m.matrix.yaml").write_text(json.dumps(doc))
    return root / "matrices" / "m.matrix.yaml"


@pytest.mark.parametrize(("change", "affected"), [
    ("code", "model digits-logreg changed: code folder"),
    ("rules", "dataset digits-test changed: acceptance rules"),
    ("environment", "image env changed: environment"),
])
def test_affected_from_compares_code_rules_and_environment(tmp_path: Path, change: str, affected: str) -> None:
    """Changing the entrypoint code, acceptance.yaml or the environment selected nothing (19 deselected, exit 5)."""
    old = load_matrix(_checkout(tmp_path / "old", venv_dists=("numpy==2.0.0",)))
    new_path = _checkout(tmp_path / "new", venv_dists=("numpy==2.0.0",))
    digits = tmp_path / "new" / "cases" / "digits"
    if change == "code":
        (digits / "infer.py").write_text((digits / "infer.py").read_text() + "\n# faster batching\n")
    elif change == "rules":
        (digits / "acceptance.yaml").write_text((digits / "acceptance.yaml").read_text().replace("0.95", "0.96"))
    else:
        meta = tmp_path / "new" / "env" / "lib" / "python3.11" / "site-packages" / "numpy-2.0.0.dist-info"
        meta.rename(meta.with_name("numpy-2.1.0.dist-info"))
        (meta.with_name("numpy-2.1.0.dist-info") / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: numpy\nVersion: 2.1.0\n")
    same, same_plan = plan_of(_checkout(tmp_path / "same", venv_dists=("numpy==2.0.0",)))
    assert select(Request(affected_from=old), [("m", same, same_plan)]).affected == {}  # same files elsewhere
    new, plan = plan_of(new_path)
    sel = select(Request(affected_from=old), [("m", new, plan)])
    reasons = {k.split("::", 1)[1]: v for k, v in sel.affected.items() if v != "dependency of an affected item"}
    assert reasons and all(affected in v for v in reasons.values()), reasons
    expected = {"code": {f"{img}::digits-logreg@digits-test::{layer}" for img in ("py", "env")
                         for layer in ("model", "business")},
                "rules": {f"{img}::digits-logreg@digits-test::{layer}" for img in ("py", "env")
                          for layer in ("model", "business")},
                "environment": {"env::startup", "env::digits-logreg@digits-test::model",
                                "env::digits-logreg@digits-test::business"}}[change]
    assert {k.split("::", 1)[1] for k in reasons} == expected


def test_an_input_the_old_matrix_cannot_find_counts_as_changed(tmp_path: Path) -> None:
    old_path = _checkout(tmp_path / "old")
    import shutil

    shutil.rmtree(tmp_path / "old" / "cases")  # the old matrix copied out of its checkout
    new, plan = plan_of(_checkout(tmp_path / "new"))
    sel = select(Request(affected_from=load_matrix(old_path)), [("m", new, plan)])
    reason = sel.affected["m::cpu-host::py::digits-logreg@digits-test::model"]
    assert reason.startswith("model digits-logreg changed: code folder (not found) → ")
    assert "; dataset digits-test changed: acceptance rules (not found) → " in reason
