"""Crash safety on real runs: SIGKILL at several points keeps every finished item; SIGTERM closes
the bundle; ``hetero report --from-journal`` rebuilds a bundle that verifies; a report folder
that cannot be written stops the run before anything runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import DIGITS, MODEL_SHA, matrix_text

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

SLOW = {"name": "slow-model", "version": "1", "uri": str(DIGITS / "model" / "digits-logreg-1.0.0.onnx"),
        "sha256": MODEL_SHA, "entrypoint": ["{python}", "-c", "import time; time.sleep(120)"]}


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen[bytes]:
    doc = json.loads(matrix_text(name="crash"))
    doc["spec"]["models"].append(SLOW)
    (tmp_path / "crash.matrix.yaml").write_text(json.dumps(doc))
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "crash.matrix.yaml",
                             "--hetero-run-id", "r1", *extra], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _wait_items(journal: Path, count: int, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if journal.exists():
            lines = [json.loads(x) for x in journal.read_text().splitlines() if x.strip()]
            if sum(1 for x in lines if x["type"] == "item") >= count:
                return
        time.sleep(0.05)
    raise AssertionError(f"journal never reached {count} items")


def _hetero(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_hetero.cli", *args], capture_output=True, text=True,
                          check=False, timeout=120)


@pytest.mark.parametrize("finished", [1, 3, 5])
def test_sigkill_keeps_finished_items_and_report_rebuilds_a_verifying_bundle(tmp_path: Path, finished: int) -> None:
    proc = _start(tmp_path)
    bundle = tmp_path / "reports" / "r1"
    try:
        _wait_items(bundle / "journal.jsonl", finished)
        if finished == 5:
            time.sleep(1.0)  # inside the slow model's run
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert not (bundle / "evidence.json").exists()
    if finished == 5:
        assert _slow_children(tmp_path) == []  # PR_SET_PDEATHSIG took the model down with pytest
    keys = tmp_path / "keys"
    keys.mkdir()
    made = _hetero("keygen", str(keys / "run.key"), "--pub", str(keys / "run.pub"))
    assert made.returncode == 0, made.stderr
    rebuilt = _hetero("report", "--from-journal", str(bundle), "--sign-key", str(keys / "run.key"))
    assert rebuilt.returncode == 0, rebuilt.stderr
    ev = json.loads((bundle / "evidence.json").read_text())
    assert ev["run"]["interrupted"] is True and ev["run"]["exit_status"] is None
    done = [i["nodeid"].split("::", 1)[1] for i in ev["items"]]
    assert len(done) >= finished
    order = ["cpu-host::discovery", "cpu-host::scheduling", "cpu-host::py::startup",
             "cpu-host::py::digits-logreg@digits-test::model", "cpu-host::py::digits-logreg@digits-test::business",
             "cpu-host::py::slow-model@digits-test::model", "cpu-host::py::slow-model@digits-test::business"]
    assert sorted(done) == sorted(order[:len(done)])
    not_run = sorted(u["nodeid"].split("::", 1)[1] for u in ev["untested"]["items"] if u["status"] == "not_run")
    assert not_run == sorted(order[len(done):])
    assert {u["reason"] for u in ev["untested"]["items"] if u["status"] == "not_run"} == {
        "not_run (interrupted before this item finished)"}
    assert ev["summary"]["verdict"] == "incomplete"
    verified = _hetero("verify", str(bundle), "--key", str(keys / "run.pub"))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_sigterm_closes_the_bundle_with_not_run_items(tmp_path: Path) -> None:
    proc = _start(tmp_path)
    bundle = tmp_path / "reports" / "r1"
    _wait_items(bundle / "journal.jsonl", 5)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out.decode()  # pytest's INTERRUPTED
    ev = json.loads((bundle / "evidence.json").read_text())
    assert ev["run"]["interrupted"] is True
    statuses = {i["nodeid"].split("::", 1)[1]: i["status"] for i in ev["untested"]["items"]}
    assert statuses["cpu-host::py::slow-model@digits-test::business"] == "not_run"
    assert (bundle / "manifest.json").exists()
    assert _slow_children(tmp_path) == []  # the model's process group went with the run


def _slow_children(cwd: Path) -> list[int]:
    import psutil

    time.sleep(0.5)
    found = []
    for p in psutil.process_iter(["cmdline", "cwd"]):
        try:
            if p.info["cwd"] == str(cwd) and "time.sleep(120)" in " ".join(p.info["cmdline"] or []):
                found.append(p.pid)
        except (psutil.Error, TypeError):
            continue
    return found




def test_unwritable_report_dir_stops_before_running(tmp_path: Path) -> None:
    (tmp_path / "m.matrix.yaml").write_text(matrix_text())
    target = "/proc/hetero-reports"  # not creatable, even for root
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "m.matrix.yaml",
                          "--hetero-report-dir", target], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         check=False)
    assert run.returncode == 4
    assert f"ERROR: pytest-hetero: report folder {target} is not writable (No such file or directory); fix it " \
           "or choose another with --hetero-report-dir" in run.stderr.splitlines()
    assert "_pytest.outcomes.Exit" not in run.stdout + run.stderr  # was "! _pytest.outcomes.Exit: … !"
    assert "passed" not in run.stdout


def test_sigkill_before_a_second_matrix_ran_lists_its_items_not_run(tmp_path: Path) -> None:
    """Every collected matrix is journaled before anything runs: a file whose items never started
    is not missing from the rebuilt bundle, its items are not_run."""
    (tmp_path / "zz-second.matrix.yaml").write_text(matrix_text(name="second"))
    proc = _start(tmp_path, "zz-second.matrix.yaml")
    bundle = tmp_path / "reports" / "r1"
    try:
        _wait_items(bundle / "journal.jsonl", 5)
        time.sleep(1.0)  # inside the slow model's run of the first matrix
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    rebuilt = _hetero("report", "--from-journal", str(bundle))
    assert rebuilt.returncode == 0, rebuilt.stderr
    ev = json.loads((bundle / "evidence.json").read_text())
    assert [m["name"] for m in ev["matrices"]] == ["crash", "second"]
    second = sorted((u["nodeid"], u["status"], u["reason"]) for u in ev["untested"]["items"]
                    if u["nodeid"].startswith("zz-second.matrix.yaml::"))
    assert second == sorted((f"zz-second.matrix.yaml::{n}", "not_run", "not_run (interrupted before this item finished)")
                            for n in ("cpu-host::discovery", "cpu-host::scheduling", "cpu-host::py::startup",
                                      "cpu-host::py::digits-logreg@digits-test::model",
                                      "cpu-host::py::digits-logreg@digits-test::business"))


@pytest.mark.parametrize(("line", "problem"), [
    ("{}", "unknown type None"),
    ("[]", "a JSON list, not an object"),
    ("7", "a JSON int, not an object"),
    ('{"type": "item"}', "item entry lacks 'evidence'"),
    ('{"type": "item", "evidence": {"nodeid": "x"}}', "item entry lacks 'evidence.matrix'"),
    ('{"type": "matrix", "path": "/etc/passwd"}', "matrix entry lacks 'prefix'"),
    ('{"type": "target", "fingerprint": 1}', "target entry field 'fingerprint' is a int"),
    ('{"type": "end", "at": "t", "exit_status": true, "interrupted": false}', "end entry field 'exit_status' is a bool"),
])
def test_report_from_an_edited_journal_names_the_line_not_a_traceback(tmp_path: Path, line: str, problem: str) -> None:
    journal = tmp_path / "journal.jsonl"
    journal.write_text('{"type": "run", "id": "r1"}\n' + line + '\n{"type": "deselected", "nodeid": "n", "reason": "r"}\n')
    rebuilt = _hetero("report", "--from-journal", str(tmp_path))
    assert (rebuilt.returncode, rebuilt.stderr) == (2, (
        f"hetero report: {journal}:2: journal line is not a pytest-hetero entry: {problem}\n"
        "  hint: the journal was edited or corrupted\n"))


DISK_FULL_AFTER_ONE_ITEM = '''
import errno
import os

import pytest_hetero.evidence.recorder as recorder

_journal_writes = []


class _OS:
    """os, except that the journal's fifth write finds the disk full (the journal writes with os.write)."""

    def __getattr__(self, name):
        return getattr(os, name)

    @staticmethod
    def write(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("journal.jsonl"):
            _journal_writes.append(fd)
            if len(_journal_writes) > 4:  # run, matrix, target, discovery; scheduling finds the disk full
                raise OSError(errno.ENOSPC, "No space left on device")
        return os.write(fd, data)


recorder.os = _OS()
'''


def test_report_folder_full_mid_run_stops_with_a_clear_message(pytester: pytest.Pytester) -> None:
    """A journal that cannot be written any more stops the run after that item (exit 4), says what
    is kept and how to rebuild; no INTERNALERROR traceback."""
    pytester.makeconftest(DISK_FULL_AFTER_ONE_ITEM)
    pytester.makefile(".matrix.yaml", m=matrix_text())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--hetero-run-id", "r1")
    bundle = pytester.path / "reports" / "r1"
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, out
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert (f"pytest-hetero: the report folder became unwritable during the run: cannot write {bundle}/journal.jsonl "
            "(No space left on device); the run stopped. Items journaled before are kept: free space, then run "
            f"hetero report --from-journal {bundle}") in out
    result.assert_outcomes(passed=1, skipped=1)  # discovery, scheduling (not_applicable); nothing after
    journal = [json.loads(x) for x in (bundle / "journal.jsonl").read_text().splitlines()]
    # the scheduling line could not be written: the disk was full
    assert [e["type"] for e in journal] == ["run", "matrix", "target", "item"]
    assert not (bundle / "evidence.json").exists()


def test_report_dir_that_is_a_file_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "m.matrix.yaml").write_text(matrix_text())
    (tmp_path / "out").write_text("")
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "m.matrix.yaml",
                          "--hetero-report-dir", "out"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         check=False)
    assert run.returncode == 4
    assert f"pytest-hetero: report folder {tmp_path / 'out'} is a file, not a folder; fix it or choose another " \
           "with --hetero-report-dir" in run.stdout + run.stderr


def test_disk_filling_up_during_a_model_run_is_an_infrastructure_error(pytester: pytest.Pytester) -> None:
    """A real 70 MiB tmpfs as the report folder (the start check wants 64 MiB free); it fills up just
    before the model item (a conftest hook: the confined model cannot write there itself), the model
    prints 300 kB, so the stdout artifact cannot be written: error disk_full, owner infrastructure,
    then the run stops because the journal cannot be written either."""
    if os.geteuid() != 0:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("mounting a tmpfs needs root; CI runs as root")
        pytest.skip("mounting a tmpfs needs root")
    small = pytester.mkdir("small")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=70m", "tmpfs", str(small)], check=True)
    try:
        fill = ["/bin/sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x"]
        pytester.makeconftest(f"""
            import subprocess
            def pytest_runtest_setup(item):
                if item.nodeid.endswith("::model"):
                    subprocess.run("dd if=/dev/zero of={small}/filler bs=1M count=100 2>/dev/null", shell=True)
        """)
        doc = json.loads(matrix_text())
        doc["spec"]["models"][0]["entrypoint"] = fill
        pytester.makefile(".matrix.yaml", m=json.dumps(doc))
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--hetero-run-id", "r1",
                                               "--hetero-report-dir", str(small / "reports"))
        out = result.stdout.str() + result.stderr.str()
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
    assert result.ret == 4, out
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert ("[error] model/disk_full (owner: infrastructure): No space left on device; free space or choose "
            "another --hetero-report-dir") in out
    assert "the report folder became unwritable during the run" in out
