"""Attacks on the evidence, performed for real against real runs (issue 15 items 1 and 5, the journal's side).

Another process appends forged journal lines and plants files while the gate runs; two runs share one
run id; SIGTERM arrives while the bundle is being finished; the journal is torn, not UTF-8, or crafted
to name files outside the bundle. Each test asserts what the gate did about it: the forged line
rejected, nothing planted listed or signed, the second run refused, the bundle complete or clearly
unfinished with the hint to rebuild it, what was recoverable recovered and what was lost named.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import DIGITS, MODEL_SHA, matrix_text, outside_paths

from pytest_hetero.bundle.signing import generate_keypair, load_public_key
from pytest_hetero.bundle.verify import verify_bundle

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

MODEL = str(DIGITS / "model" / "digits-logreg-1.0.0.onnx")


def _model(name: str, code: str) -> dict[str, Any]:
    return {"name": name, "version": "1", "uri": MODEL, "sha256": MODEL_SHA,
            "entrypoint": ["{python}", "-c", code, "{outputs}"]}


BAD = _model("bad", "import sys, time; time.sleep(1); sys.exit(1)")
SLOW = _model("slow", "import time; time.sleep(120)")
WAIT = _model("wait", "import time; time.sleep(4)")

ATTACKER = r'''
import json, os, sys, time
bundle = sys.argv[1]
journal = os.path.join(bundle, "journal.jsonl")
deadline = time.time() + 150
while time.time() < deadline:
    try:
        lines = open(journal, encoding="utf-8").read().splitlines()
    except FileNotFoundError:
        time.sleep(0.05)
        continue
    for line in lines:
        entry = json.loads(line) if line.strip() else {}
        ev = entry.get("evidence") or {}
        if "::bad@" in ev.get("nodeid", "") and ev.get("layer") == "model" and ev.get("status") != "passed":
            ev.update(status="passed", failure=None)
            with open(journal, "a", encoding="utf-8") as fh:  # the genuine line's MAC, a forged body
                fh.write(json.dumps(entry, separators=(",", ":")) + "\n")
            with open(os.path.join(bundle, "planted.txt"), "w") as fh:
                fh.write("x\n")
            print("forged", flush=True)
            sys.exit(0)
    time.sleep(0.05)
sys.exit(3)
'''


def _write_matrix(tmp_path: Path, *models: dict[str, Any], name: str = "sec", **kw: Any) -> Path:
    doc = json.loads(matrix_text(name=name, **kw))
    doc["spec"]["models"] = [*doc["spec"]["models"][:0], *models]
    path = tmp_path / f"{name}.matrix.yaml"
    path.write_text(json.dumps(doc))
    return path


def _pytest(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _hetero(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_hetero.cli", *args], capture_output=True, text=True,
                          check=False, timeout=180)


def _keys(tmp_path: Path) -> tuple[Path, Path]:
    generate_keypair(tmp_path / "run.key", tmp_path / "run.pub")
    return tmp_path / "run.key", tmp_path / "run.pub"


def _wait_for(predicate: Any, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition never held")


def _items(journal: Path) -> list[dict[str, Any]]:
    return [json.loads(x)["evidence"] for x in journal.read_text().splitlines()
            if x.strip() and '"type":"item"' in x]


def _statement(bundle: Path) -> dict[str, Any]:
    return dict(json.loads((bundle / "statement.intoto.json").read_text()))


def test_a_line_another_process_appends_is_rejected_and_a_planted_file_is_never_signed(tmp_path: Path) -> None:
    key, pub = _keys(tmp_path)
    _write_matrix(tmp_path, BAD, WAIT)
    bundle = tmp_path / "reports" / "r1"
    attacker = subprocess.Popen([sys.executable, "-c", ATTACKER, str(bundle)], stdout=subprocess.PIPE, text=True)
    run = _pytest(tmp_path, "sec.matrix.yaml", "--hetero-run-id", "r1", "--hetero-sign-key", str(key))
    out, _ = run.communicate(timeout=300)
    assert attacker.wait(timeout=30) == 0, "the attack did not happen"
    assert run.returncode == 1, out
    assert "FAILED sec.matrix.yaml::cpu-host::py::bad@digits-test::model" in out
    assert ("pytest-hetero: " + str(bundle) + ": evidence tampering detected: 1 journal line(s) not written by the "
            "gate were rejected") in out
    assert '1 file(s) the gate did not write were kept out of the bundle: "planted.txt" (unrecorded)' in out
    evidence = json.loads((bundle / "evidence.json").read_text())
    status = {i["nodeid"].split("::", 2)[2]: i["status"] for i in evidence["items"]}
    assert status["py::bad@digits-test::model"] == "failed"
    (rejected,) = evidence["journal"]["rejected"]
    assert rejected["why"] == "MAC does not verify: not written by the gate (or altered)"
    assert evidence["journal"]["authenticated"] is True and evidence["journal"]["key"] == "derived"
    predicate = _statement(bundle)["predicate"]
    assert predicate["journal"]["rejected"] == [rejected]
    assert [(f["path"], f["kind"]) for f in predicate["unrecorded_files"]] == [("planted.txt", "unrecorded")]
    listed = [e["path"] for e in json.loads((bundle / "manifest.json").read_text())["files"]]
    assert "planted.txt" not in listed and not (bundle / "planted.txt").exists()
    aside = tmp_path / "reports" / "r1.unrecorded"
    assert (aside / "planted.txt").read_text() == "x\n"
    # the bundle's journal holds the gate's lines only; the file as found is set aside
    assert [i["status"] for i in _items(bundle / "journal.jsonl") if "::bad@" in i["nodeid"]
            and i["layer"] == "model"] == ["failed"]
    assert [i["status"] for i in _items(aside / "journal.jsonl") if "::bad@" in i["nodeid"]
            and i["layer"] == "model"] == ["failed", "passed"]
    assert verify_bundle(bundle, [load_public_key(pub)]).problems == []


def test_recovery_with_the_run_key_rejects_the_forged_line_and_without_it_refuses_to_pick(tmp_path: Path) -> None:
    """After a crash the journal key is gone from memory; a signed run's is derived from its run key,
    so ``hetero report --from-journal --sign-key`` authenticates every line as the live run would."""
    key, pub = _keys(tmp_path)
    _write_matrix(tmp_path, BAD, SLOW)
    bundle = tmp_path / "reports" / "r1"
    attacker = subprocess.Popen([sys.executable, "-c", ATTACKER, str(bundle)], stdout=subprocess.PIPE, text=True)
    run = _pytest(tmp_path, "sec.matrix.yaml", "--hetero-run-id", "r1", "--hetero-sign-key", str(key))
    try:
        assert attacker.wait(timeout=240) == 0, "the attack did not happen"
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    refused = _hetero("report", "--from-journal", str(bundle))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "is a second, different line numbered seq" in refused.stderr  # the forged copy of bad's line
    assert "the lines cannot be authenticated, so neither is picked" in refused.stderr
    assert not (bundle / "evidence.json").exists()
    rebuilt = _hetero("report", "--from-journal", str(bundle), "--sign-key", str(key))
    assert rebuilt.returncode == 1, rebuilt.stdout + rebuilt.stderr
    assert "evidence tampering detected: 1 journal line(s) not written by the gate were rejected" in rebuilt.stderr
    evidence = json.loads((bundle / "evidence.json").read_text())
    assert evidence["journal"]["authenticated"] is True
    assert [i["status"] for i in evidence["items"] if i["nodeid"].endswith("::bad@digits-test::model")] == ["failed"]
    assert verify_bundle(bundle, [load_public_key(pub)]).problems == []


def test_an_unsigned_run_recovered_after_a_crash_says_its_lines_are_not_authenticated(tmp_path: Path) -> None:
    """What recovery cannot prove: the journal key of an unsigned run died with the process."""
    _write_matrix(tmp_path, SLOW)
    bundle = tmp_path / "reports" / "r1"
    run = _pytest(tmp_path, "sec.matrix.yaml", "--hetero-run-id", "r1")
    try:
        _wait_for(lambda: (bundle / "journal.jsonl").exists() and len(_items(bundle / "journal.jsonl")) >= 3)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    rebuilt = _hetero("report", "--from-journal", str(bundle))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert ("warning: journal lines not authenticated: the run was unsigned: its journal key lived only in the "
            "crashed process, so these lines cannot be told from lines another process appended") in rebuilt.stderr
    journal = json.loads((bundle / "evidence.json").read_text())["journal"]
    assert journal["authenticated"] is False and journal["key"] == "ephemeral"
    assert _statement(bundle)["predicate"]["journal"]["authenticated"] is False


def test_a_second_run_with_the_same_run_id_is_refused_while_the_first_runs_and_after_it(tmp_path: Path) -> None:
    _write_matrix(tmp_path, SLOW)
    bundle = tmp_path / "reports" / "r1"
    first = _pytest(tmp_path, "sec.matrix.yaml", "--hetero-run-id", "r1")
    try:
        _wait_for(lambda: (bundle / "journal.jsonl").exists() and len(_items(bundle / "journal.jsonl")) >= 1)
        second = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "sec.matrix.yaml",
                                 "--hetero-run-id", "r1"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                                check=False)
    finally:
        first.send_signal(signal.SIGTERM)
        first_out, _ = first.communicate(timeout=120)
    assert second.returncode == 4
    assert (f"pytest-hetero: run id 'r1' is in use: another session is writing {bundle / 'journal.jsonl'} right now; "
            "give each run its own --hetero-run-id (or leave it out for a fresh one)") in second.stdout + second.stderr
    assert "passed" not in second.stdout
    lines = [json.loads(x) for x in (bundle / "journal.jsonl").read_text().splitlines()]
    assert [e["type"] for e in lines].count("run") == 1  # nothing of the second run reached the journal
    retry = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "sec.matrix.yaml",
                            "--hetero-run-id", "r1"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           check=False)
    assert retry.returncode == 4, first_out
    # a finished bundle: the message must not send anyone to `report --from-journal` (it would discard sign-offs)
    assert (f"pytest-hetero: run id 'r1' already has a finished bundle at {bundle} (signed or not, with any team "
            "sign-offs: it is kept as it is); give this run another --hetero-run-id, or leave it out for a fresh one"
            ) in retry.stdout + retry.stderr
    assert "--from-journal" not in retry.stdout + retry.stderr


SLOW_WRITER = '''
import time
from pathlib import Path


def pytest_hetero_write_reports(evidence, bundle_dir, settings, inputs):
    Path(bundle_dir, "..", "writing").resolve().write_text("now")
    time.sleep(4)
'''


@pytest.mark.parametrize("signals", [1, 2], ids=["one-sigterm-is-held", "a-second-abandons"])
def test_sigterm_while_the_bundle_is_finished(tmp_path: Path, signals: int) -> None:
    key, pub = _keys(tmp_path)
    _write_matrix(tmp_path, WAIT)
    (tmp_path / "conftest.py").write_text(SLOW_WRITER)
    bundle = tmp_path / "reports" / "r1"
    run = _pytest(tmp_path, "sec.matrix.yaml", "--hetero-run-id", "r1", "--hetero-sign-key", str(key))
    _wait_for(lambda: (tmp_path / "reports" / "writing").exists(), 240)
    for _ in range(signals):
        run.send_signal(signal.SIGTERM)
        time.sleep(0.5)
    out, _ = run.communicate(timeout=120)
    assert run.returncode == 2, out  # pytest's INTERRUPTED
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert (f"pytest-hetero: finishing the bundle {bundle}; interrupt again to abandon it (then rebuild it with: "
            f"hetero report --from-journal {bundle})") in out
    if signals == 1:
        assert f"pytest-hetero: the bundle {bundle} was finished before giving way to the interrupt" in out
        assert verify_bundle(bundle, [load_public_key(pub)]).problems == []
        return
    assert (f"pytest-hetero: interrupted while finishing the run; the bundle {bundle} is unfinished (it has no "
            f"attestation.intoto.jsonl). Everything journaled is kept: rebuild it with: hetero report "
            f"--from-journal {bundle} --sign-key KEY") in out
    assert not (bundle / "attestation.intoto.jsonl").exists()
    assert [(p.path, p.kind) for p in verify_bundle(bundle, [load_public_key(pub)]).problems][:1] == [
        ("attestation.intoto.jsonl", "missing")]
    (tmp_path / "conftest.py").unlink()
    rebuilt = _hetero("report", "--from-journal", str(bundle), "--sign-key", str(key))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert verify_bundle(bundle, [load_public_key(pub)]).problems == []
    assert json.loads((bundle / "evidence.json").read_text())["journal"]["authenticated"] is True


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A finished, signed run of the digits matrix: (its bundle folder, the run key)."""
    tmp = tmp_path_factory.mktemp("finished")
    key, _ = _keys(tmp)
    (tmp / "m.matrix.yaml").write_text(matrix_text(name="m"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "m.matrix.yaml",
                           "--hetero-run-id", "r1", "--hetero-sign-key", str(key)], cwd=tmp, capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**os.environ, "HETERO_ALLOW_PATHS": outside_paths(tmp_path_factory)})
    assert done.returncode == 0, done.stdout
    return tmp / "reports" / "r1", key


def _copy_journal(finished: tuple[Path, Path], tmp_path: Path, edit: Any) -> Path:
    bundle = tmp_path / "r1"
    bundle.mkdir()
    lines = (finished[0] / "journal.jsonl").read_bytes().splitlines(keepends=True)
    (bundle / "journal.jsonl").write_bytes(edit(lines))
    return bundle


def test_report_recovers_a_journal_with_a_non_utf8_tail(finished: tuple[Path, Path], tmp_path: Path) -> None:
    bundle = _copy_journal(finished, tmp_path, lambda lines: b"".join(lines[:-1]) + b'{"type":"end","at":"\xff\xfe')
    rebuilt = _hetero("report", "--from-journal", str(bundle), "--sign-key", str(finished[1]))
    assert rebuilt.returncode == 0, rebuilt.stderr
    number = len((finished[0] / "journal.jsonl").read_bytes().splitlines())
    assert f"warning: journal line {number} lost (not UTF-8 (byte 20)); its item, if any, is reported not_run" \
        in rebuilt.stderr
    evidence = json.loads((bundle / "evidence.json").read_text())
    assert evidence["run"]["interrupted"] is True and len(evidence["items"]) == 5
    assert evidence["journal"]["lost"] == [{"line": number, "why": "not UTF-8 (byte 20)"}]


def test_report_recovers_around_a_torn_line_in_the_middle_and_names_it(finished: tuple[Path, Path],
                                                                        tmp_path: Path) -> None:
    def tear(lines: list[bytes]) -> bytes:
        at = next(n for n, line in enumerate(lines) if b"::model" in line and b'"type":"item"' in line)
        lines[at] = lines[at][: len(lines[at]) // 2] + b"\n"
        return b"".join(lines)

    bundle = _copy_journal(finished, tmp_path, tear)
    rebuilt = _hetero("report", "--from-journal", str(bundle), "--sign-key", str(finished[1]))
    assert rebuilt.returncode == 0, rebuilt.stderr
    evidence = json.loads((bundle / "evidence.json").read_text())
    (lost,) = evidence["journal"]["lost"]
    assert lost["why"] == "torn or not JSON"
    assert f"warning: journal line {lost['line']} lost (torn or not JSON)" in rebuilt.stderr
    assert evidence["journal"]["missing_seq"] == [lost["line"] - 1]  # seq counts from 0 on line 1
    untested = {u["nodeid"].split("::", 1)[1]: u["status"] for u in evidence["untested"]["items"]}
    assert untested["cpu-host::py::digits-logreg@digits-test::model"] == "not_run"
    reason = next(u["reason"] for u in evidence["untested"]["items"] if u["nodeid"].endswith("test::model"))
    assert reason == f"not_run (its result may be among the journal lines that could not be read (lines {lost['line']}))"
    assert evidence["summary"]["verdict"] == "incomplete"
    assert len(evidence["items"]) == 4


def test_a_crafted_journal_cannot_make_report_write_outside_the_bundle_or_copy_any_file(tmp_path: Path) -> None:
    bundle = tmp_path / "deep" / "r1"
    bundle.mkdir(parents=True)
    matrix = {"type": "matrix", "path": "/etc/passwd", "prefix": "x.matrix.yaml", "name": "../../ESCAPED",
              "sha256": "0" * 64, "scheduling_per_image": False}
    (bundle / "journal.jsonl").write_text(json.dumps({"type": "run", "id": "r1"}) + "\n" + json.dumps(matrix) + "\n")
    rebuilt = _hetero("report", "--from-journal", str(bundle))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "pytest-hetero: matrix name '../../ESCAPED' in the journal is not a plain name; nothing copied for it" \
        in rebuilt.stderr
    assert not list(tmp_path.rglob("ESCAPED*")) and not (bundle / "inputs").exists()
    matrix["name"] = "fine"
    (bundle / "journal.jsonl").write_text(json.dumps({"type": "run", "id": "r1"}) + "\n" + json.dumps(matrix) + "\n")
    (bundle / "attestation.intoto.jsonl").unlink()  # a finished bundle is never rebuilt: unfinish it
    again = _hetero("report", "--from-journal", str(bundle))
    assert again.returncode == 0, again.stderr
    assert "pytest-hetero: matrix /etc/passwd not copied into the bundle:" in again.stderr
    assert not (bundle / "inputs" / "fine.matrix.yaml").exists()


SURROGATE_HOOK = """
def pytest_hetero_evidence(ctx, evidence):
    if evidence["failure"]:
        evidence["failure"]["message"] += " \\ud800 (a lone surrogate)"
"""


def test_a_lone_surrogate_in_evidence_renders_everywhere(tmp_path: Path) -> None:
    """A lone surrogate (which UTF-8 cannot encode) in an item's text: the journal keeps U+FFFD in its
    place, every rendering is written, ``hetero render`` and ``hetero report`` work, also on a bundle
    whose evidence.json still holds one."""
    _write_matrix(tmp_path, _model("fails", "import sys; sys.exit(1)"))
    (tmp_path / "conftest.py").write_text(SURROGATE_HOOK)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "sec.matrix.yaml",
                           "--hetero-run-id", "r1"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 1, done.stdout
    assert "INTERNALERROR" not in done.stdout and "Traceback" not in done.stdout
    bundle = tmp_path / "reports" / "r1"
    (item,) = [i for i in _items(bundle / "journal.jsonl") if i["status"] == "failed"]
    assert item["failure"]["message"].endswith(" \ufffd (a lone surrogate)")
    for name in ("report.html", "summary.md", "junit.xml", "ctrf.json", "attestation.intoto.jsonl"):
        assert (bundle / name).stat().st_size > 0, name
    assert "\ufffd (a lone surrogate)" in (bundle / "summary.md").read_text()
    evidence = (bundle / "evidence.json").read_text().replace("\\ufffd (a lone", "\\ud800 (a lone")
    assert "\\ud800" in evidence
    (bundle / "evidence.json").write_text(evidence)  # as an older gate wrote it
    for fmt in ("html", "md", "junit", "ctrf"):
        rendered = _hetero("render", str(bundle), "--format", fmt)
        assert rendered.returncode == 0, rendered.stderr
        assert "(a lone surrogate)" in rendered.stdout
    (bundle / "attestation.intoto.jsonl").unlink()  # a finished bundle is never rebuilt: unfinish it
    rebuilt = _hetero("report", "--from-journal", str(bundle))
    assert rebuilt.returncode == 0, rebuilt.stderr


def test_planted_links_and_fifos_are_kept_out_and_the_bundle_still_finishes(finished: tuple[Path, Path],
                                                                            tmp_path: Path) -> None:
    import shutil

    bundle = tmp_path / "r1"
    shutil.copytree(finished[0], bundle)
    (bundle / "attestation.intoto.jsonl").unlink()
    (bundle / "artifacts" / "shadow").symlink_to("/etc/shadow")
    os.mkfifo(bundle / "pipe")
    rebuilt = _hetero("report", "--from-journal", str(bundle), "--sign-key", str(finished[1]))
    assert rebuilt.returncode == 1, rebuilt.stderr
    assert ('2 file(s) the gate did not write were kept out of the bundle: "artifacts/shadow" (unrecorded), '
            '"pipe" (unrecorded)') in rebuilt.stderr
    aside = tmp_path / "r1.unrecorded"
    assert (aside / "artifacts" / "shadow").is_symlink() and (aside / "pipe").exists()
    assert verify_bundle(bundle, [load_public_key(finished[1].with_name("run.pub"))]).problems == []
