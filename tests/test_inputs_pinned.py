"""Issue 29: the matrix, and the acceptance rules it names, are read once when the run loads them; the items are
judged by those bytes and the bundle keeps a copy of the same bytes. An edit during the run (a colleague saving the
file, a CI checkout moving on) can neither change what the business items are judged by nor split the bundle's
evidence from its inputs: before, the finish copied the edited file and the bundle failed its own ``verify``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import DIGITS, REPO, matrix_text
from test_crash_safety import _hetero, _wait_items

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def test_a_matrix_edited_during_the_run_leaves_a_bundle_that_verifies_with_the_inputs_used(tmp_path: Path) -> None:
    acceptance = tmp_path / "acceptance.yaml"
    shutil.copy(DIGITS / "acceptance.yaml", acceptance)
    rules = acceptance.read_bytes()
    matrix = tmp_path / "edit.matrix.yaml"
    matrix.write_text(matrix_text(name="edit", acceptance=acceptance))
    original = matrix.read_bytes()
    keys = tmp_path / "keys"
    keys.mkdir()
    assert _hetero("keygen", str(keys / "run.key"), "--pub", str(keys / "run.pub")).returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                             matrix.name, "--hetero-run-id", "r1", "--hetero-sign-key", str(keys / "run.key")],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    bundle = tmp_path / "reports" / "r1"
    try:
        _wait_items(bundle / "journal.jsonl", 1)  # discovery done; the model and business items are still to run
        doc = json.loads(original)
        doc["metadata"]["description"] = "edited while the run was going"
        doc["spec"]["layers"]["model"]["timeout"] = "1s"
        matrix.write_text(json.dumps(doc))
        acceptance.write_text("apiVersion: pytest-hetero/v1\nkind: NotRules\n")
        out = proc.communicate(timeout=600)[0].decode()
    finally:
        proc.kill()
    ev = json.loads((bundle / "evidence.json").read_text())
    business = [i for i in ev["items"] if i["layer"] == "business"]
    assert len(business) == 1, out  # judged by the rules as loaded, not the edit ('kind: NotRules' is bad_rules)
    assert (business[0]["failure"] or {}).get("category") != "bad_rules", out
    used = [r["data"] for r in business[0]["records"] if r["kind"] == "inputs.used"]
    assert used == [{"input": "acceptance", "path": str(acceptance), "sha256": hashlib.sha256(rules).hexdigest()}]
    assert (bundle / "inputs" / "edit.matrix.yaml").read_bytes() == original
    assert (bundle / "inputs" / "edit" / "acceptance" / "digits-test.yaml").read_bytes() == rules
    kept = ev["inputs"]["edit"]["acceptance"]["digits-test"]
    assert "changed_during_run" not in kept and kept["sha256"] == hashlib.sha256(rules).hexdigest()
    verified = _hetero("verify", str(bundle), "--key", str(keys / "run.pub"))
    assert verified.returncode == 0, verified.stdout + verified.stderr
