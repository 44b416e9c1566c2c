"""Issue 27, point 6: ``--hetero-affected-from OLD.matrix.yaml`` counts the model's code, the acceptance
rules and the dataset digests, and its reason says what was compared — against real runs of the README's
matrix (local backend), the model's code folder edited so that accuracy falls below the rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from readme_run import cli, copy_project, gate

SLOPPY = "predictions.append(int(label[0]) if len(predictions) % 4 else (int(label[0]) + 1) % 10)"


def _break_the_model_code(project: Path) -> None:
    infer = project / "cases" / "digits" / "infer.py"
    text = infer.read_text()
    assert "predictions.append(int(label[0]))" in text
    infer.write_text(text.replace("predictions.append(int(label[0]))", SLOPPY))


def _evidence(reports: Path) -> dict[str, object]:
    (bundle,) = reports.iterdir()
    return dict(json.loads((bundle / "evidence.json").read_text()))


def test_old_matrix_beside_the_new_one_does_not_hide_edited_code(tmp_path: Path) -> None:
    """Before: every item deselected "(unchanged since OLD.matrix.yaml)", written into the signed untested
    scope, and "gate PASS"; the old matrix copied beside the new one read today's code folder."""
    project = copy_project(tmp_path / "p")
    before = gate(project, "--hetero-report-dir", "before")
    assert "bundle signed by" in before.stdout, before.stdout[-2000:]
    shutil.copy(project / "matrices" / "example-cpu.matrix.yaml", project / "matrices" / "OLD.matrix.yaml")
    _break_the_model_code(project)
    after = gate(project, "--hetero-affected-from", "matrices/OLD.matrix.yaml", "--hetero-report-dir", "after")
    assert after.returncode == 1, after.stdout[-3000:]
    evidence = _evidence(project / "after")
    statuses = {i["nodeid"].split("::", 1)[1]: i["status"] for i in evidence["items"]}  # type: ignore[attr-defined]
    combo = "cpu-host::py-current::digits-logreg@digits-test"
    assert (statuses[f"{combo}::model"], statuses[f"{combo}::business"]) == ("passed", "failed")
    assert [e["status"] for e in evidence["untested"]["items"]  # type: ignore[index]
            if e["status"] == "deselected"] == []
    plan = cli("plan", "matrices/example-cpu.matrix.yaml", "--affected-from", "matrices/OLD.matrix.yaml", "--json",
               cwd=project)
    assert plan.returncode == 0, plan.stderr
    affected = json.loads(plan.stdout)["affected"]
    assert affected[f"{combo}::model"].startswith(
        "model digits-logreg changed: code folder (the same path as the new matrix's: its old content is unknown) → ")
    assert evidence["summary"]["verdict"] == "fail"  # type: ignore[index]
    assert "gate PASS" not in after.stdout
    # hetero diff of the two signed bundles names the same change the selection acted on
    (old_bundle,) = (project / "before").iterdir()
    (new_bundle,) = (project / "after").iterdir()
    diff = cli("diff", old_bundle, new_bundle, "--key", project / "keys" / "gate.key.pub", "--json")
    assert diff.returncode == 1, diff.stdout[-2000:] + diff.stderr
    changes = json.loads(diff.stdout)["input_changes"]
    assert [(c["what"], c["name"]) for c in changes] == [("code", "example-cpu/digits-logreg")]
    assert "dataset digits-test changed: acceptance rules (the same path as the new matrix's: its old content is " \
           "unknown) → " in affected[f"{combo}::model"]


def test_old_revision_checkout_compares_code_and_the_reason_names_what_was_compared(tmp_path: Path) -> None:
    """Before: the deselection reason was only "(unchanged since example-cpu.matrix.yaml)"."""
    project = copy_project(tmp_path / "p")
    old_rev = tmp_path / "old-rev"
    shutil.copytree(project, old_rev)  # a checkout of the previous revision beside its own files
    old = old_rev / "matrices" / "example-cpu.matrix.yaml"
    same = gate(project, "--hetero-affected-from", str(old), "--hetero-report-dir", "same")
    assert same.returncode == 5, same.stdout[-3000:]  # nothing changed: nothing selected
    reasons = {e["reason"] for e in _evidence(project / "same")["untested"]["items"]}  # type: ignore[index]
    assert reasons == {"deselected (unchanged since example-cpu.matrix.yaml: spec.target, the resource, image, model "
                       "and dataset entries (their sha256 digests included) and the sha256 of dataset digits-test's "
                       "acceptance rules, model digits-logreg's code folder compared)"}
    _break_the_model_code(project)
    edited = gate(project, "--hetero-affected-from", str(old), "--hetero-report-dir", "edited")
    assert edited.returncode == 1, edited.stdout[-3000:]
    plan = cli("plan", "matrices/example-cpu.matrix.yaml", "--affected-from", old, "--json", cwd=project)
    affected = json.loads(plan.stdout)["affected"]
    assert affected["cpu-host::py-current::digits-logreg@digits-test::model"].startswith(
        "model digits-logreg changed: code folder ")
    assert _evidence(project / "edited")["summary"]["verdict"] == "fail"  # type: ignore[index]
