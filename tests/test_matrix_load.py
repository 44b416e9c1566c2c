"""Matrix loading: the example is valid; every kind of bad matrix gets one clear positioned error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import REPO, dedent

from pytest_hetero.errors import MatrixInvalid
from pytest_hetero.matrix import load_matrix, parse_duration

GOOD = dedent("""
    apiVersion: pytest-hetero/v1
    kind: ValidationMatrix
    metadata: {name: m}
    spec:
      resources:
        - name: cpu-a
          type: cpu
          requests: {cpu: 2}
      images:
        - name: py
          reference: python:current
      models:
        - name: mod
          version: "1"
          uri: model.onnx
          sha256: %s
          entrypoint: [run]
      datasets:
        - name: ds
          version: "1"
          uri: data.csv
          sha256: %s
    """) % ("a" * 64, "b" * 64)


def load_text(tmp_path: Path, text: str) -> MatrixInvalid:
    path = tmp_path / "bad.matrix.yaml"
    path.write_text(text)
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(path)
    return info.value


def test_example_matrix_loads_with_resolved_paths_and_seconds() -> None:
    matrix = load_matrix(REPO / "matrices" / "example-cpu.matrix.yaml")
    assert matrix.name == "example-cpu"
    assert [r.name for r in matrix.resources] == ["cpu-host", "gpu-nvidia"]
    assert matrix.resource("gpu-nvidia").requests == {"nvidia.com/gpu": "1"}
    assert matrix.model("digits-logreg").path == REPO / "cases/digits/model/digits-logreg-1.0.0.onnx"
    assert matrix.timeouts_s["model"] == 300.0 and matrix.timeouts_s["discovery"] == 30.0
    assert matrix.timeouts_s["scheduling"] == 120.0  # default
    assert matrix.owners["business"] == "business"
    assert len(matrix.sha256) == 64


def test_unknown_key_names_line_column_and_suggests(tmp_path: Path) -> None:
    err = load_text(tmp_path, GOOD.replace("      type: cpu\n", "      type: cpu\n      requets: {}\n"))
    assert len(err.problems) == 1
    p = err.problems[0]
    assert (p.location.line, p.location.column) == (8, 7)
    assert p.location.field == "spec.resources[0:cpu-a].requets"
    assert p.message == "unknown key 'requets'"
    assert p.hint == "did you mean 'requests'?"
    assert err.render() == (f"{tmp_path}/bad.matrix.yaml:8:7: field 'spec.resources[0:cpu-a].requets': "
                            "unknown key 'requets'\n  hint: did you mean 'requests'?")


def test_unknown_resource_in_exclude_rule(tmp_path: Path) -> None:
    text = GOOD + "  exclude:\n    - {resource: cpu-b, image: py, reason: not built yet}\n"
    err = load_text(tmp_path, text)
    p = err.problems[0]
    assert p.message == "exclude rule names unknown resource 'cpu-b'"
    assert p.hint == "did you mean 'cpu-a'?"
    assert p.location.line == 24 and p.location.field == "spec.exclude[0].resource"


def test_exclude_rule_without_reason(tmp_path: Path) -> None:
    err = load_text(tmp_path, GOOD + "  exclude:\n    - {resource: cpu-a, image: py}\n")
    assert err.problems[0].message == "'reason' is a required property"
    assert err.problems[0].location.line == 24


def test_duplicate_names(tmp_path: Path) -> None:
    text = GOOD.replace("      images:", "").replace(
        "  images:\n", "  images:\n    - name: py\n      reference: x\n")
    err = load_text(tmp_path, text)
    assert [p.message for p in err.problems] == ["duplicate image name 'py'"]
    assert err.problems[0].location.line == 12
    assert err.problems[0].hint == "give each image a unique name"


def test_missing_sha256_hint(tmp_path: Path) -> None:
    err = load_text(tmp_path, GOOD.replace("      sha256: " + "b" * 64 + "\n", ""))
    p = err.problems[0]
    assert p.message == "'sha256' is a required property"
    assert p.location.field == "spec.datasets[0:ds]"
    assert "sha256sum" in p.hint


def test_bad_sha256_and_bad_duration_reported_together(tmp_path: Path) -> None:
    text = GOOD.replace("a" * 64, "xyz") + "  layers:\n    model: {timeout: 5 minutes}\n"
    err = load_text(tmp_path, text)
    messages = [p.message for p in err.problems]
    assert messages == ["sha256 must be 64 lowercase hex digits, got 'xyz'", "bad duration '5 minutes'"]
    assert [p.location.line for p in err.problems] == [16, 24]
    assert err.render().splitlines()[0] == f"2 problems in {tmp_path}/bad.matrix.yaml:"


def test_yaml_syntax_error_position(tmp_path: Path) -> None:
    err = load_text(tmp_path, GOOD.replace("requests: {cpu: 2}", "requests: {cpu: 2"))
    p = err.problems[0]
    assert p.message.startswith("YAML syntax error")
    assert p.location.line == 9


def test_duplicate_key_refused(tmp_path: Path) -> None:
    err = load_text(tmp_path, GOOD.replace("      type: cpu\n", "      type: cpu\n      type: gpu\n"))
    assert err.problems[0].message == "duplicate key 'type'"
    assert err.problems[0].location.line == 8
    assert err.problems[0].location.field == "spec.resources[0].type"


def test_alias_bomb_refused(tmp_path: Path) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 8):
        bomb += f"{'abcdefghij'[i]}: &{'abcdefghij'[i]} [" + ", ".join([f"*{'abcdefghij'[i - 1]}"] * 10) + "]\n"
    err = load_text(tmp_path, bomb)
    assert "more than 100000 nodes" in err.problems[0].message


def test_top_level_list_and_wrong_kind(tmp_path: Path) -> None:
    assert load_text(tmp_path, "- 1\n").problems[0].message == "top level is a list, not a mapping"
    err = load_text(tmp_path, GOOD.replace("kind: ValidationMatrix", "kind: Matrix"))
    assert err.problems[0].location.field == "kind"
    assert err.problems[0].location.line == 2


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(tmp_path / "nope.matrix.yaml")
    assert info.value.render() == (f"{tmp_path / 'nope.matrix.yaml'}: cannot read the matrix: missing: no such file\n"
                                   "  hint: check the path")


@pytest.mark.parametrize(("text", "seconds"), [(30, 30.0), ("90s", 90.0), ("5m", 300.0), ("1m30s", 90.0),
                                                ("250ms", 0.25), ("1h", 3600.0)])
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds  # type: ignore[arg-type]


def test_bad_duration_raises() -> None:
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration("5 minutes")


def test_paths_must_stay_inside_the_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HETERO_ALLOW_PATHS", raising=False)
    project = tmp_path / "proj"
    (project / "matrices").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "model.onnx").write_bytes(b"x")
    (project / "data.csv").write_text("x")
    (project / "link.csv").symlink_to(outside / "model.onnx")
    text = GOOD.replace("uri: model.onnx", "uri: ../../elsewhere/model.onnx").replace("uri: data.csv", "uri: ../link.csv")
    path = project / "matrices" / "m.matrix.yaml"
    path.write_text(text)
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(path)
    assert [(p.location.line, p.location.field, p.message) for p in info.value.problems] == [
        (15, "spec.models[0:mod].uri",
         f"path '../../elsewhere/model.onnx' resolves to {outside / 'model.onnx'}, outside the project root {project}"),
        (21, "spec.datasets[0:ds].uri",
         f"path '../link.csv' resolves to {outside / 'model.onnx'}, outside the project root {project}")]
    assert info.value.problems[0].hint.endswith(f"(e.g. HETERO_ALLOW_PATHS={outside})")
    monkeypatch.setenv("HETERO_ALLOW_PATHS", str(outside))
    assert load_matrix(path).model("mod").path == outside / "model.onnx"


def test_containment_is_on_outside_a_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No pyproject.toml, .git or .hetero-root above the matrix: its own folder is the boundary, so
    ``uri: ../../etc/shadow`` is refused by lint and by a run, unless HETERO_ALLOW_PATHS allows it."""
    import subprocess
    import sys

    monkeypatch.delenv("HETERO_ALLOW_PATHS", raising=False)
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    (folder / "data.csv").write_text("x")
    depth = "../" * len(folder.parts)
    text = GOOD.replace("uri: model.onnx", f"uri: {depth}etc/shadow")
    path = folder / "m.matrix.yaml"
    path.write_text(text)
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(path)
    (problem,) = info.value.problems
    assert problem.location.field == "spec.models[0:mod].uri"
    assert problem.message == (f"path '{depth}etc/shadow' resolves to /etc/shadow, outside the matrix's folder "
                               f"{folder} (no pyproject.toml, .git, .hetero-root above the matrix, so its own "
                               "folder is the boundary)")
    env = {k: v for k, v in os.environ.items() if k != "HETERO_ALLOW_PATHS"}
    lint = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "lint", str(path)], capture_output=True,
                          text=True, env={**env, "PYTHONPATH": str(REPO)}, check=False, timeout=120)
    assert lint.returncode == 1 and "resolves to /etc/shadow, outside the matrix's folder" in lint.stdout + lint.stderr
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(path)], cwd=folder,
                         capture_output=True, text=True, env={**env, "PYTHONPATH": str(REPO)}, check=False,
                         timeout=120)
    assert run.returncode == 2 and "resolves to /etc/shadow, outside the matrix's folder" in run.stdout
    monkeypatch.setenv("HETERO_ALLOW_PATHS", "/etc")
    assert load_matrix(path).model("mod").path == Path("/etc/shadow")


def test_wrong_type_says_what_to_write(tmp_path: Path) -> None:
    err = load_text(tmp_path, GOOD.replace("requests: {cpu: 2}", "requests: {cpu: 2}\n      expect: {min_cpus: lots}"))
    (problem,) = err.problems
    assert (problem.location.line, problem.location.field) == (9, "spec.resources[0:cpu-a].expect.min_cpus")
    assert problem.message == "'lots' is not of type 'number'"
    assert problem.hint == "write a number (e.g. 2 or 0.5, without quotes)"


def test_a_value_of_none_of_a_fields_forms_is_shown_the_forms(tmp_path: Path) -> None:
    """A field taking one of several forms (``coverage``: ``every`` or ``{sample: N}`` or ``{share: F}``) written
    as null got jsonschema's bare "None is not valid under any of the given schemas" with no hint; the hint now
    shows the schema's examples of the field."""
    err = load_text(tmp_path, GOOD.replace("requests: {cpu: 2}", "requests: {cpu: 2}\n      coverage: null"))
    (problem,) = err.problems
    assert (problem.location.line, problem.location.field) == (9, "spec.resources[0:cpu-a].coverage")
    assert problem.hint == 'write it like "every" or {"sample": 8} or {"share": 0.25}'


def test_empty_entry_says_it_is_null(tmp_path: Path) -> None:
    err = load_text(tmp_path, GOOD.replace("  resources:\n", "  resources:\n    -\n"))
    (problem,) = err.problems
    assert (problem.location.line, problem.location.field) == (6, "spec.resources[0]")
    assert problem.hint == ("the value is empty (YAML null); write a mapping: 'key: value' lines indented under "
                            "this key, or remove the key")


def test_deep_nesting_without_alias_is_named_as_nesting(tmp_path: Path) -> None:
    err = load_text(tmp_path, "a: " + "[" * 5000 + "]" * 5000 + "\n")
    (problem,) = err.problems
    assert (problem.message, problem.location.line, problem.location.column) == (
        "the document nests more than 64 levels deep", 1, 67)
    assert problem.hint == "flatten the nesting; a matrix needs only a few levels"


def _fresh_load(path: Path, cache: Path) -> dict[str, object]:
    """Load ``path`` in a fresh interpreter with ``cache`` as XDG_CACHE_HOME; what it saw."""
    import json
    import subprocess
    import sys

    script = ("import json, sys\nfrom pytest_hetero.matrix import load_matrix\nfrom pytest_hetero.errors import "
              "MatrixInvalid\ntry:\n    load_matrix(sys.argv[1]); problems = []\nexcept MatrixInvalid as exc:\n"
              "    problems = [p.message for p in exc.problems]\n"
              "print(json.dumps({'jsonschema': 'jsonschema' in sys.modules, 'problems': problems}))\n")
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True,
                          env={**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(REPO)})
    return dict(json.loads(done.stdout))


def test_a_document_that_passed_the_schema_is_not_validated_again(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    path = tmp_path / "m" / "good.matrix.yaml"
    path.write_text(GOOD)
    first = _fresh_load(path, tmp_path / "cache")
    assert first == {"jsonschema": True, "problems": []}
    assert len(list((tmp_path / "cache" / "pytest-hetero" / "validated").iterdir())) == 1
    assert _fresh_load(path, tmp_path / "cache") == {"jsonschema": False, "problems": []}
    # another content is validated: a new mark, the validator imported again
    path.write_text(GOOD.replace("name: m}", "name: m2}"))
    assert _fresh_load(path, tmp_path / "cache") == {"jsonschema": True, "problems": []}
    assert len(list((tmp_path / "cache" / "pytest-hetero" / "validated").iterdir())) == 2


def test_a_document_with_schema_problems_is_validated_every_time(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    path = tmp_path / "m" / "bad.matrix.yaml"
    path.write_text(GOOD.replace("type: cpu", "type: cpux"))
    for _ in range(2):
        seen = _fresh_load(path, tmp_path / "cache")
        assert seen["jsonschema"] is True
        assert seen["problems"] == ["'cpux' is not one of ['gpu', 'npu', 'cpu']"]
    assert not (tmp_path / "cache" / "pytest-hetero" / "validated").exists()


def test_the_validation_key_tells_types_apart() -> None:
    import datetime

    from pytest_hetero.matrix.load import validated_key

    as_text, as_date = validated_key({"v": "2024-01-01"}), validated_key({"v": datetime.date(2024, 1, 1)})
    assert as_text is not None and as_date is not None and as_text != as_date
    assert validated_key({"v": 1}) != validated_key({"v": True}) != validated_key({"v": "1"})
    assert validated_key({"v": "2024-01-01"}) == as_text


@pytest.mark.parametrize(("metadata", "problem"), [
    ("{labels: {team: a}}", ("'name' is a required property", "metadata")),
    ("{name: [m]}", ("['m'] is not of type 'string'", "metadata.name")),
    ("[m]", ("['m'] is not of type 'object'", "metadata"))])
def test_an_earlier_version_without_metadata_name_is_a_matrix_problem(tmp_path: Path, metadata: str,
                                                                      problem: tuple[str, str]) -> None:
    """``--hetero-affected-from`` with an old matrix whose metadata has no name (or one of another type): the
    schema names the field (MatrixInvalid), as for any matrix; it raised KeyError('name') before the old file was
    checked."""
    from pytest_hetero.matrix.load import load_earlier_version

    (tmp_path / ".hetero-root").touch()
    new = tmp_path / "new.matrix.yaml"
    new.write_text(GOOD)
    old = tmp_path / "old.yaml"
    old.write_text(GOOD.replace("metadata: {name: m}", f"metadata: {metadata}"))
    with pytest.raises(MatrixInvalid) as info:
        load_earlier_version(old, [new])
    assert [(p.message, p.location.field) for p in info.value.problems] == [problem]


@pytest.mark.parametrize(("extra", "field", "says"), [
    ("coverage: {share: .nan}", "spec.resources[0:cpu-a].coverage.share", "nan is not a finite number"),
    ("expect: {min_cpus: .nan}", "spec.resources[0:cpu-a].expect.min_cpus", "nan is not a finite number"),
    ("requests: {cpu: .inf}", "spec.resources[0:cpu-a].requests.cpu", 'write it like 1 or "500m"'),  # a quantity
])
def test_a_number_that_is_not_finite_is_refused_at_its_field(tmp_path: Path, extra: str, field: str, says: str
                                                             ) -> None:
    """YAML's ``.nan`` and ``.inf`` are floats that satisfy every bound of a JSON Schema number (NaN compares false
    with all of them, infinity with none above): ``coverage: {share: .nan}`` loaded and then raised ``ValueError:
    cannot convert float NaN to integer`` in the node-coverage item, ``min_cpus: .nan`` made the expectation pass
    whatever the node had, ``spec.validation.valid_for: .inf`` escaped the loader as a bare ``ValueError``. Each is
    refused as the value of its field, with the fix."""
    text = GOOD.replace("requests: {cpu: 2}", "requests: {cpu: 2}\n      " + extra) if "requests" not in extra \
        else GOOD.replace("requests: {cpu: 2}", extra)
    err = load_text(tmp_path, text)
    (problem,) = err.problems
    assert problem.location.field == field and says in problem.render(), problem.render()


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf"])
def test_a_validity_that_is_not_finite_is_a_matrix_problem(tmp_path: Path, value: str) -> None:
    err = load_text(tmp_path, GOOD + f"  validation: {{valid_for: {value}, domain: a.example}}\n")
    assert [p.location.field for p in err.problems] == ["spec.validation.valid_for"]
