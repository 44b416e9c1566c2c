"""``hetero lint`` checks what a loaded matrix points at: files, code folders, acceptance rules files,
entrypoint placeholders, and (``--digests``) the sha256 of each file; and lints AcceptanceRules files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import DIGITS, MODEL_SHA, REPO, dedent, matrix_text

from pytest_hetero.cli import main

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

RULES_HEAD = "apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"


def lint(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["lint", *argv])
    return code, capsys.readouterr().out


def test_every_broken_reference_reported_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.csv").mkdir()
    (tmp_path / "code.py").write_text("")
    doc = json.loads(matrix_text(acceptance=tmp_path / "missing-rules.yaml"))
    model = doc["spec"]["models"][0]
    model.update(uri="missing.onnx", code="code.py", entrypoint=["{python}", "{code}/infer.py", "--gpu={gpu_id}"])
    doc["spec"]["datasets"][0]["uri"] = "data.csv"
    (tmp_path / "m.matrix.yaml").write_text(json.dumps(doc, indent=2))
    code, out = lint(capsys, "m.matrix.yaml")
    assert code == 1
    assert out == dedent(f"""
        5 problems in m.matrix.yaml:
        m.matrix.yaml:32: field 'spec.models[0:digits-logreg].uri': model 'digits-logreg' file not found: {tmp_path}/missing.onnx
          hint: check uri: (relative to the matrix file's folder)
        m.matrix.yaml:32: field 'spec.models[0:digits-logreg].code': model 'digits-logreg' code is a file, not a folder: {tmp_path}/code.py
          hint: point code: at the folder the entrypoint's {{code}} stands for
        m.matrix.yaml:32: field 'spec.models[0:digits-logreg].entrypoint[2]': model 'digits-logreg' entrypoint uses unknown placeholder {{gpu_id}}
          hint: known: {{python}} {{code}} {{model}} {{dataset}} {{outputs}} {{provider}}, each a plain name without format spec or conversion; write {{{{ and }}}} for a literal brace
        m.matrix.yaml:47: field 'spec.datasets[0:digits-test].uri': dataset 'digits-test' uri is a folder, not a file: {tmp_path}/data.csv
          hint: point uri: at the file itself (its sha256 is of that file)
        m.matrix.yaml:47: field 'spec.datasets[0:digits-test].acceptance': acceptance file of dataset 'digits-test' not found: {tmp_path}/missing-rules.yaml
          hint: point acceptance: at an AcceptanceRules YAML file (relative to the matrix file's folder)
    """)


def test_broken_acceptance_file_gives_its_own_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules.yaml").write_text(RULES_HEAD + dedent("""
          - name: floor
            metrc: accuracy
            op: ">="
            value: 0.9
          - {name: fast, latency: {percentile: 95}}
    """))
    (tmp_path / "m.matrix.yaml").write_text(matrix_text(acceptance=tmp_path / "rules.yaml"))
    code, out = lint(capsys, "m.matrix.yaml")
    assert code == 1
    assert out == dedent("""
        2 problems in m.matrix.yaml:
        rules.yaml:5:3: field 'rules[0].metrc': unknown key 'metrc'
          hint: did you mean 'metric'?
        rules.yaml:8:3: field 'rules[1]': rule 'fast': latency needs percentile (0-100) and max_ms
          hint: e.g. latency: {percentile: 95, max_ms: 20}
    """)
    code, out = lint(capsys, "rules.yaml")
    assert code == 1
    assert out.splitlines()[0] == "2 problems in rules.yaml:"
    assert out.splitlines()[1] == "rules.yaml:5:3: field 'rules[0].metrc': unknown key 'metrc'"


def test_digests_compared_only_with_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.matrix.yaml").write_text(matrix_text(model_sha="0" * 64))
    assert lint(capsys, "m.matrix.yaml") == (0, "ok: m.matrix.yaml (t: 5 items, 0 omitted)\n")
    code, out = lint(capsys, "--digests", "m.matrix.yaml")
    assert code == 1
    assert out == dedent(f"""
        m.matrix.yaml:32: field 'spec.models[0:digits-logreg].sha256': model 'digits-logreg' sha256 mismatch: matrix declares {"0" * 64}, file {DIGITS}/model/digits-logreg-1.0.0.onnx has {MODEL_SHA}
          hint: update sha256 if the file changed on purpose (`sha256sum FILE`), else restore the file
    """)
    (tmp_path / "good.matrix.yaml").write_text(matrix_text())
    assert lint(capsys, "--digests", "good.matrix.yaml") == (0, "ok: good.matrix.yaml (t: 5 items, 0 omitted)\n")


def test_expand_error_and_reference_problems_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    doc = json.loads(matrix_text(backend="slurm"))
    doc["spec"]["models"][0]["entrypoint"].append("{gpu")
    (tmp_path / "m.matrix.yaml").write_text(json.dumps(doc, indent=2))
    code, out = lint(capsys, "m.matrix.yaml")
    assert code == 1
    assert out.splitlines()[0] == "2 problems in m.matrix.yaml:"
    assert "unknown backend 'slurm'" in out
    assert ("m.matrix.yaml:32: field 'spec.models[0:digits-logreg].entrypoint[10]': model 'digits-logreg' "
            "entrypoint argument '{gpu' has an unbalanced brace\n  hint: write {{ and }} for a literal brace\n") in out


def test_served_model_without_file_and_rules_files_lint_clean(capsys: pytest.CaptureFixture[str]) -> None:
    serving = REPO / "matrices" / "example-serving.matrix.yaml"
    code, out = lint(capsys, "--digests", str(serving))
    assert (code, out.startswith(f"ok: {serving}")) == (0, True)
    for rules, n in ((DIGITS / "acceptance.yaml", 6), (DIGITS / "serving" / "acceptance.yaml", 5)):
        assert lint(capsys, str(rules)) == (0, f"ok: {rules} (AcceptanceRules: {n} rules)\n")
