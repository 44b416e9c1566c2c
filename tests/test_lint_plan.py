"""``hetero lint`` and ``hetero plan``: validation without running, and what a run would do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import REPO, matrix_text

from pytest_hetero.cli import main

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

GPU = {"name": "gpu-nvidia", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1}}
CPU = {"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_lint_reports_every_problem_of_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, "good.matrix.yaml", matrix_text())
    doc = json.loads(matrix_text())
    doc["spec"]["resources"][0]["typo"] = 1
    doc["spec"]["models"][0]["sha256"] = "xyz"
    bad = write(tmp_path, "bad.matrix.yaml", json.dumps(doc, indent=2))
    other = write(tmp_path, "other.matrix.yaml", matrix_text(backend="slurm"))
    assert main(["lint", str(good)]) == 0
    assert "ok: " in capsys.readouterr().out
    assert main(["lint", str(good), str(bad), str(other)]) == 1
    out = capsys.readouterr().out
    assert "2 problems in" in out
    assert "unknown key 'typo'" in out
    assert "sha256 must be 64 lowercase hex digits, got 'xyz'" in out
    assert "unknown backend 'slurm'" in out


def test_lint_gives_the_collection_error_text(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(matrix_text())
    doc["spec"]["resources"][0]["typo"] = 1
    path = pytester.makefile(".matrix.yaml", bad=json.dumps(doc, indent=2))
    assert main(["lint", str(path)]) == 1
    lint_text = capsys.readouterr().out.strip()
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert lint_text.splitlines()[0].split(": ", 1)[1] in result.stdout.str()


def test_plan_counts_items_omissions_and_profile_gaps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(matrix_text(resources=[CPU, GPU], exclude=[
        {"resource": "cpu-host", "image": "py-cpu", "reason": "wheel set not built yet"}]))
    doc["spec"]["images"] = [{"name": "py", "reference": "python:current"},
                             {"name": "py-cpu", "reference": "python:current", "for": ["cpu"]}]
    path = write(tmp_path, "m.matrix.yaml", json.dumps(doc))
    assert main(["plan", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["planned"] == rep["items"] == 2 * 5
    assert rep["by_layer_resource"]["startup"] == {"cpu-host": 1, "gpu-nvidia": 1}
    combo = "digits-logreg@digits-test"
    assert [(o["id"], o["status"]) for o in rep["omitted"]] == [
        ("cpu-host::py-cpu::startup", "excluded"), (f"cpu-host::py-cpu::{combo}::model", "excluded"),
        (f"cpu-host::py-cpu::{combo}::business", "excluded"),
        ("gpu-nvidia::py-cpu::startup", "not_applicable"), ("gpu-nvidia::py-cpu::model", "not_applicable"),
        ("gpu-nvidia::py-cpu::business", "not_applicable")]
    assert rep["omitted"][0]["reason"].endswith("wheel set not built yet")
    assert rep["estimate"] == {"seconds": 2 * (60 + 120 + 300 + 120 + 60), "repeat": 1, "source": {"timeout": 10}}
    assert main(["plan", str(path), "--profile", "quick"]) == 0
    text = capsys.readouterr().out
    assert "items to run: 6 of 10 planned" in text
    assert "  4 deselected (profile quick)" in text
    assert f"    gpu-nvidia::py::{combo}::business" in text
    assert "excluded/incompatible: 6" in text
    assert "estimate: 960 s serial (6 from timeout)" in text


def test_plan_estimates_from_a_previous_bundle(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    path = pytester.makefile(".matrix.yaml", m=matrix_text())
    pytester.runpytest("-p", "no:cacheprovider")
    capsys.readouterr()
    (bundle,) = list((pytester.path / "reports").iterdir())
    items = json.loads((bundle / "evidence.json").read_text())["items"]
    assert main(["plan", str(path), "--from-bundle", str(bundle), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["estimate"]["source"] == {"bundle_item": 5}
    assert rep["estimate"]["seconds"] == pytest.approx(sum(i["duration_s"] for i in items), abs=0.01)


def test_plan_of_the_full_profile_counts_each_repeated_model_run(pytester: pytest.Pytester,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """hetero plan --profile full (repeat: 3) estimated the model runs as one each."""
    path = pytester.makefile(".matrix.yaml", m=matrix_text())
    pytester.runpytest("-p", "no:cacheprovider")
    (bundle,) = list((pytester.path / "reports").iterdir())
    items = {i["layer"]: i["duration_s"] for i in json.loads((bundle / "evidence.json").read_text())["items"]}
    capsys.readouterr()
    assert main(["plan", str(path), "--profile", "full", "--from-bundle", str(bundle), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["estimate"]["repeat"] == 3
    assert rep["estimate"]["seconds"] == pytest.approx(sum(items.values()) + 2 * items["model"], abs=0.01)
    assert main(["plan", str(path), "--profile", "full"]) == 0
    text = capsys.readouterr().out
    assert f"estimate: {60 + 120 + 300 + 3 * 120 + 60} s serial (5 from timeout; each model item runs 3 times)" in text


def test_plan_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "m.matrix.yaml", matrix_text())
    assert main(["plan", str(path), "--profile", "weekly"]) == 2
    assert "no such profile" in capsys.readouterr().err
    assert main(["plan", str(path), "--shard", "4/3"]) == 2
    assert "K must be between 1 and N" in capsys.readouterr().err
    assert main(["plan", str(path), "--affected", "model=nope"]) == 2
    assert "unknown model 'nope'" in capsys.readouterr().err


def test_example_matrix_declares_the_three_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    example = REPO / "matrices" / "example-cpu.matrix.yaml"
    assert main(["lint", str(example)]) == 0
    capsys.readouterr()
    for name, count in (("quick", 6), ("nightly", 10), ("full", 10)):
        assert main(["plan", str(example), "--profile", name, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["items"] == count
