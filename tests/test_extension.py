"""One extension mechanism: a third-party backend (and writer, evidence and cleanup hooks) in a plugin
module serves ``hetero lint``, ``hetero plan``, ``hetero cleanup``, ``hetero report`` and a real pytest
run alike, loaded with ``-p MODULE`` or from the ``pytest_hetero`` entry-point group."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import matrix_text, statuses

from pytest_hetero.bundle.signing import generate_keypair, load_public_key
from pytest_hetero.bundle.verify import verify_bundle
from pytest_hetero.cli import main as hetero

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

# Written against the Backend ABC of pytest_hetero.backends.protocol; the model runs for real.
LAB_PLUGIN = '''
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_hetero.backends.labels import CleanupReport
from pytest_hetero.backends.protocol import (Backend, ExecResult, Inventory, NodePool, Placement, Started,
                                             render_entrypoint)


class LabBackend(Backend):
    """A lab cluster of one node whose commands run on this host; it answers in engine terms only."""

    name = "lab"
    scheduling_per_image = True

    def fingerprint(self):
        return {"backend": "lab", "identity": "lab-7", "nodes": ["lab-node-1"], "versions": {"lab": "1.0"},
                "images": {}}

    def inventory(self, step):
        step.record("lab.inventory", node="lab-node-1", cpus=4)
        node = {"name": "lab-node-1", "ready": "True", "ready_reason": None, "ready_message": None,
                "unschedulable": False, "taints": [], "labels": {}, "capacity": {}, "allocatable": {},
                "simulated": False}
        return Inventory(pool=NodePool(nodes=[node], snapshot={"source": "lab"}, selector="", wanted=[]))

    def place(self, step):
        step.record("lab.placement", node="lab-node-1", image=step.image.name)
        return Placement(placed=True)

    def start(self, step):
        step.record("lab.start", image=step.image.reference)
        return Started(name="lab-slot-1", where="lab-node-1")

    def run(self, started, argv, timeout_s, env=None):
        begin = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              env={**os.environ, **(env or {})})
        return ExecResult(argv, done.returncode, time.perf_counter() - begin, done.stdout, done.stderr, None)

    def execute(self, step):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "outputs.json"
            argv = render_entrypoint(step.model.entrypoint, {
                "python": sys.executable, "code": str(step.model.code), "model": str(step.model.path),
                "dataset": str(step.dataset.path), "outputs": str(out), "provider": "CPUExecutionProvider"})
            started = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, text=True, timeout=step.timeout_s, check=False)
            return ExecResult(argv, done.returncode, time.perf_counter() - started, done.stdout, done.stderr,
                              out.read_bytes() if out.is_file() else None)


def pytest_hetero_backend(name):
    return LabBackend if name == "lab" else None


def pytest_hetero_evidence(ctx, evidence):
    evidence["records"].append({"kind": "lab.stamp", "at": "", "data": {"checked": ctx is not None}})


def pytest_hetero_amend_evidence(evidence):
    evidence["lab"] = {"items": len(evidence["items"])}


def pytest_hetero_write_reports(evidence, bundle_dir):
    path = bundle_dir / "lab.txt"
    path.write_text(f"lab verdict: {evidence['summary']['verdict']}; lab section: {evidence.get('lab')}\\n")
    return [path]


def pytest_hetero_cleanup_options(parser):
    parser.add_argument("--lab-site", default="site-0")


def pytest_hetero_cleanup(backend, args):
    if backend not in (None, "lab"):
        return None
    return [CleanupReport("lab", [{"backend": "lab", "kind": "slot", "name": f"{args.lab_site}/slot-3",
                                   "run_id": args.run_id, "created_at": None, "age_s": None,
                                   "removed": not args.dry_run, "error": None}])]
'''
IMAGES = [{"name": "py", "reference": "python:current"}, {"name": "py2", "reference": "python:next"}]
PLANNED = ["cpu-host::discovery", "cpu-host::py2::digits-logreg@digits-test::business",
           "cpu-host::py2::digits-logreg@digits-test::model", "cpu-host::py2::scheduling",
           "cpu-host::py2::startup", "cpu-host::py::digits-logreg@digits-test::business",
           "cpu-host::py::digits-logreg@digits-test::model", "cpu-host::py::scheduling", "cpu-host::py::startup"]
"""Scheduling keyed resource × image: the plugin class's ``scheduling_per_image`` planned it."""


@pytest.fixture
def lab(pytester: pytest.Pytester) -> Path:
    """A folder on sys.path holding the plugin module ``labplugin`` and the matrix ``m.matrix.yaml``."""
    pytester.makepyfile(labplugin=LAB_PLUGIN)
    pytester.syspathinsert()
    pytester.makefile(".matrix.yaml", m=matrix_text(backend="lab", images=IMAGES))
    return pytester.path


def test_lint_and_plan_resolve_a_backend_from_a_plugin(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = str(lab / "m.matrix.yaml")
    assert hetero(["lint", matrix]) == 1
    assert "unknown backend 'lab'" in capsys.readouterr().out
    assert hetero(["lint", "-p", "labplugin", matrix]) == 0
    assert capsys.readouterr().out == f"ok: {matrix} (t: 9 items, 0 omitted)\n"
    assert hetero(["plan", matrix, "-p", "labplugin", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["backend"], plan["items"], plan["by_layer_resource"]["scheduling"]) == ("lab", 9, {"cpu-host": 2})
    assert hetero(["plan", matrix, "-p", "no_such_plugin"]) == 2
    assert "-p no_such_plugin: cannot import the plugin module" in capsys.readouterr().err


def test_a_pytest_run_through_the_plugin(lab: Path, pytester: pytest.Pytester, tmp_path: Path) -> None:
    generate_keypair(tmp_path / "run.key", tmp_path / "run.pub")
    result = pytester.runpytest("-p", "labplugin", "-p", "no:cacheprovider", "--hetero-run-id", "r1",
                                "--hetero-sign-key", str(tmp_path / "run.key"))
    result.assert_outcomes(passed=9)
    bundle = lab / "reports" / "r1"
    evidence = json.loads((bundle / "evidence.json").read_text())
    assert statuses(evidence) == dict.fromkeys(PLANNED, "passed")
    items = {i["nodeid"].split("::", 1)[1]: i for i in evidence["items"]}
    kinds = {k: [r["kind"] for r in i["records"]] for k, i in items.items()}
    assert "lab.inventory" in kinds["cpu-host::discovery"]
    assert ("lab.placement" in kinds["cpu-host::py2::scheduling"], "lab.start" in kinds["cpu-host::py2::startup"]) == (
        True, True)
    assert all(k[-1] == "lab.stamp" for k in kinds.values())  # pytest_hetero_evidence, on every item
    assert [r["data"] for r in items["cpu-host::py::startup"]["records"] if r["kind"] == "lab.stamp"] == [
        {"checked": True}]
    assert evidence["target"] == [{"backend": "lab", "identity": "lab-7", "nodes": ["lab-node-1"],
                                   "versions": {"lab": "1.0"}, "images": {}}]
    assert evidence["lab"] == {"items": 9}  # amended before the one write of evidence.json
    assert (bundle / "lab.txt").read_text() == "lab verdict: pass; lab section: {'items': 9}\n"
    listed = [f["path"] for f in json.loads((bundle / "manifest.json").read_text())["files"]]
    assert "lab.txt" in listed  # the plugin's writer ran before the manifest and the signature
    assert verify_bundle(bundle, [load_public_key(tmp_path / "run.pub")]).ok


def test_an_unknown_backend_without_the_plugin_is_a_collection_error(lab: Path, pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*unknown backend 'lab'*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED


def test_report_from_a_journal_runs_the_plugins_writer(lab: Path, pytester: pytest.Pytester,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    pytester.runpytest("-p", "labplugin", "-p", "no:cacheprovider", "--hetero-run-id", "r2").assert_outcomes(passed=9)
    rebuilt = lab / "rebuilt"
    rebuilt.mkdir()
    (rebuilt / "journal.jsonl").write_bytes((lab / "reports" / "r2" / "journal.jsonl").read_bytes())
    capsys.readouterr()
    assert hetero(["report", "--from-journal", str(rebuilt), "-p", "labplugin"]) == 0
    assert capsys.readouterr().out.startswith("verdict: PASS")
    assert json.loads((rebuilt / "evidence.json").read_text())["lab"] == {"items": 9}
    assert (rebuilt / "lab.txt").is_file()


def test_cleanup_asks_the_plugin(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert hetero(["cleanup", "--backend", "lab", "--run-id", "r9"]) == 2
    assert capsys.readouterr().err == ("hetero cleanup: no installed plugin cleans up backend 'lab' "
                                       "(built in: docker, kubernetes)\n")
    assert hetero(["cleanup", "-p", "labplugin", "--backend", "lab", "--run-id", "r9", "--lab-site", "b4",
                   "--dry-run"]) == 0
    assert capsys.readouterr().out == "would remove lab slot b4/slot-3 (run r9, age ?)\n"
    with pytest.raises(SystemExit):
        hetero(["cleanup", "-p", "labplugin", "--help"])
    assert "--lab-site" in capsys.readouterr().out


def test_a_plugin_from_the_entry_point_group_needs_no_p(lab: Path, pytester: pytest.Pytester,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A package declaring ``[project.entry-points.pytest_hetero] lab = "labplugin"`` serves both."""
    dist = lab / "labplugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: labplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pytest_hetero]\nlab = labplugin\n")
    assert hetero(["lint", str(lab / "m.matrix.yaml")]) == 0
    assert "9 items" in capsys.readouterr().out
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", "r3").assert_outcomes(passed=9)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:lab", "--hetero-run-id", "r4")
    result.stdout.fnmatch_lines(["*unknown backend 'lab'*"])


BAD_RECORD_HOOK = """
def pytest_hetero_evidence(evidence):
    if evidence["layer"] == "discovery":
        evidence["records"].append({"kind": "lab.half"})  # no "at", no "data": not a record
"""


def test_a_hook_that_leaves_a_malformed_record_errors_its_item_and_the_bundle_still_renders(
        lab: Path, pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makeconftest(BAD_RECORD_HOOK)
    pytester.runpytest("-p", "labplugin", "-p", "no:cacheprovider", "--hetero-run-id", "r2")
    bundle = lab / "reports" / "r2"
    evidence = json.loads((bundle / "evidence.json").read_text())
    discovery = next(i for i in evidence["items"] if i["layer"] == "discovery")
    assert discovery["status"] == "error"
    assert "a pytest_hetero_evidence hook left this item's evidence not of its shape" in discovery["failure"]["message"]
    assert "evidence.records[" in discovery["failure"]["message"]
    assert not any(r.get("kind") == "lab.half" for i in evidence["items"] for r in i["records"])
    assert hetero(["render", str(bundle), "--format", "md", "--out", str(tmp_path / "s.md")]) == 0



NAN_DURATION_HOOK = """
def pytest_hetero_evidence(evidence):
    if evidence["layer"] == "discovery":
        evidence["duration_s"] = float("nan")
"""


def test_a_hook_that_leaves_a_nan_duration_errors_its_item_and_the_bundle_loads(
        lab: Path, pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A NaN duration has no JSON form: the journal wrote it as null, which the verifying loader refuses, so the
    gate wrote a bundle its own ``hetero render`` refused. The item's check refuses it like any shape problem."""
    pytester.makeconftest(NAN_DURATION_HOOK)
    pytester.runpytest("-p", "labplugin", "-p", "no:cacheprovider", "--hetero-run-id", "r5")
    bundle = lab / "reports" / "r5"
    evidence = json.loads((bundle / "evidence.json").read_text())
    discovery = next(i for i in evidence["items"] if i["layer"] == "discovery")
    assert discovery["status"] == "error"
    assert "evidence.duration_s: is nan, not a finite number of seconds" in discovery["failure"]["message"]
    assert all(type(i["duration_s"]) is float for i in evidence["items"])
    assert hetero(["render", str(bundle), "--format", "md", "--out", str(tmp_path / "s.md")]) == 0
