"""Plugins that reorder, rerun or filter items (the real pytest-randomly, pytest-rerunfailures and
pytest's own ``--lf``) cannot change what the signed evidence says: dependency order holds, every
attempt is kept, the exit status agrees with the verdict, and ``--lf`` reruns what a root cause blocked."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_randomly  # noqa: F401 - the real plugin must be installed (test extras)
import pytest_rerunfailures  # noqa: F401 - idem
from support import DIGITS, matrix_text, statuses

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

CPU = {"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}
HUGE = {"name": "cpu-huge", "type": "cpu", "requests": {"cpu": 1}, "expect": {"min_cpus": 100000}}
COMBO = "digits-logreg@digits-test"


def _bundle(pytester: pytest.Pytester, folder: str) -> tuple[Path, dict[str, Any]]:
    [bundle] = (pytester.path / folder).iterdir()
    return bundle, dict(json.loads((bundle / "evidence.json").read_text()))


def _claims(ev: dict[str, Any]) -> dict[str, Any]:
    """What evidence states, without times, run ids and measurements (durations, memory, latency)."""
    items = {i["nodeid"]: {"status": i["status"], "owner": i["owner"], "failure": i["failure"],
                           "blocked_by": i["blocked_by"], "reason": i["reason"],
                           "records": [r["kind"] for r in i["records"]],
                           "artifacts": [a["name"] for a in i["artifacts"]]} for i in ev["items"]}
    return {"items": items, "untested": ev["untested"], "summary": ev["summary"]}


def test_three_randomly_seeds_give_the_evidence_of_a_plain_run(pytester: pytest.Pytester) -> None:
    """pytest-randomly (on by default once installed) shuffled a business item before its model
    (error outputs_unavailable) and dependents of a failed discovery before it (not blocked)."""
    pytester.makefile(".matrix.yaml", m=matrix_text(resources=[CPU, HUGE]))
    plain = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-report-dir", "plain")
    plain.assert_outcomes(passed=4, failed=1, skipped=5)
    _, expected = _bundle(pytester, "plain")
    assert statuses(expected)["cpu-huge::py::startup"] == "blocked"
    for seed in (1, 2, 3):
        result = pytester.runpytest("-p", "no:cacheprovider", "-p", "randomly", f"--randomly-seed={seed}",
                                    "--hetero-report-dir", f"seed{seed}")
        result.stdout.fnmatch_lines([f"Using --randomly-seed={seed}"])
        result.assert_outcomes(passed=4, failed=1, skipped=5)
        _, ev = _bundle(pytester, f"seed{seed}")
        assert _claims(ev) == _claims(expected), seed


class _Attempts:
    """A loopback TCP counter the flaky model asks which attempt it is: the model runs confined (read-only
    file system, nothing it writes survives its run), so the count lives outside it, as a real flaky
    dependency (a busy device, a service) would."""

    def __init__(self) -> None:
        self.count = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                self.count += 1
                conn.sendall(str(self.count).encode())

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def attempts() -> Iterator[_Attempts]:
    counter = _Attempts()
    yield counter
    counter.close()


def _flaky_matrix(pytester: pytest.Pytester, failures: int, attempts: _Attempts) -> None:
    """A model whose entrypoint fails its first ``failures`` runs (counted by ``attempts``), then runs
    the real digits model."""
    code = pytester.mkdir("flaky")
    (code / "flaky.py").write_text(
        "import runpy, socket, sys\n"
        f"with socket.create_connection(('127.0.0.1', {attempts.port}), timeout=10) as conn:\n"
        "    n = int(conn.recv(16))\n"
        f"if n <= {failures}:\n    sys.exit(f'attempt {{n}}: device busy')\n"
        f"sys.argv = [{str(DIGITS / 'infer.py')!r}, *sys.argv[1:]]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    doc = json.loads(matrix_text())
    model = doc["spec"]["models"][0]
    model["code"] = str(code)
    model["network"] = True  # it asks the test's counter on loopback; the sandbox cuts the network otherwise
    model["entrypoint"] = [a.replace("{code}/infer.py", "{code}/flaky.py") for a in model["entrypoint"]]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))


def _junit_counts(path: Path) -> dict[str, str]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return {k: suite.attrib[k] for k in ("tests", "failures", "errors", "skipped")}


def test_a_rerun_that_passes_keeps_the_failed_attempt_and_agrees_with_pytest(pytester: pytest.Pytester,
                                                                            attempts: _Attempts) -> None:
    """pytest-rerunfailures: the failed attempt was the signed verdict (FAIL) while pytest exited 0
    and its JUnit said failures="0"; business judged outputs of an attempt the evidence did not show."""
    _flaky_matrix(pytester, failures=1, attempts=attempts)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--reruns", "1",
                                "--junitxml", "junit.xml")
    assert result.parseoutcomes() == {"passed": 4, "skipped": 1, "rerun": 1}
    assert result.ret == 0
    assert _junit_counts(pytester.path / "junit.xml") == {"tests": "5", "failures": "0", "errors": "0",
                                                          "skipped": "1"}
    bundle, ev = _bundle(pytester, "reports")
    assert ev["summary"]["verdict"] == "pass"
    assert ev["summary"]["flaky"] == [f"m.matrix.yaml::cpu-host::py::{COMBO}::model"]
    model = next(i for i in ev["items"] if i["layer"] == "model")
    assert (model["status"], model["attempt"]) == ("passed", 2)
    [first] = model["attempts"]
    assert (first["attempt"], first["status"], first["failure"]["category"]) == (1, "failed", "nonzero_exit")
    assert first["failure"]["message"] == "entrypoint exited with 1: attempt 1: device busy"
    folder = f"artifacts/cpu-host/py/{COMBO}/model"
    assert [a["path"] for a in first["artifacts"]] == [f"{folder}/attempt-1/stdout.txt",
                                                      f"{folder}/attempt-1/stderr.txt"]
    run = next(r["data"] for r in first["records"] if r["kind"] == "model.run")
    assert run["stderr_artifact"] == f"{folder}/attempt-1/stderr.txt"
    for art in [*first["artifacts"], *model["artifacts"]]:  # both attempts' files, each as recorded
        assert hashlib.sha256((bundle / art["path"]).read_bytes()).hexdigest() == art["sha256"], art["path"]
    assert (bundle / f"{folder}/attempt-1/stderr.txt").read_text() == "attempt 1: device busy\n"
    journal = [json.loads(line) for line in (bundle / "journal.jsonl").read_text().splitlines()]
    assert [e["evidence"]["status"] for e in journal if e["type"] == "item" and e["evidence"]["layer"] == "model"] \
        == ["passed"]  # the repeated attempt is not journaled as a result of its own
    business = next(i for i in ev["items"] if i["layer"] == "business")
    judged = next(r["data"] for r in business["records"] if r["kind"] == "business.rules")
    assert judged["outputs_of"] == f"cpu-host::py::{COMBO}::model" and business["status"] == "passed"
    result.stdout.fnmatch_lines([f"flaky (passed on a rerun): m.matrix.yaml::cpu-host::py::{COMBO}::model "
                                 "(attempt 1 failed: nonzero_exit)"])


def test_a_rerun_that_fails_again_fails_everywhere(pytester: pytest.Pytester, attempts: _Attempts) -> None:
    _flaky_matrix(pytester, failures=2, attempts=attempts)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--reruns", "1",
                                "--junitxml", "junit.xml")
    assert result.parseoutcomes() == {"passed": 2, "failed": 1, "skipped": 2, "rerun": 1}
    assert result.ret == 1
    assert _junit_counts(pytester.path / "junit.xml")["failures"] == "1"
    _, ev = _bundle(pytester, "reports")
    assert ev["summary"]["verdict"] == "fail" and ev["summary"]["flaky"] == []
    model = next(i for i in ev["items"] if i["layer"] == "model")
    assert model["failure"]["message"] == "entrypoint exited with 1: attempt 2: device busy"
    assert [(a["attempt"], a["failure"]["message"]) for a in model["attempts"]] == [
        (1, "entrypoint exited with 1: attempt 1: device busy")]
    assert statuses(ev)[f"cpu-host::py::{COMBO}::business"] == "blocked"


def test_lf_after_fixing_the_root_cause_reruns_what_it_blocked(pytester: pytest.Pytester) -> None:
    """--lf reran only the failed root: the items it had blocked were reported as skipped, so they
    stayed out and the verdict read PASS over one item."""
    pytester.makefile(".matrix.yaml", m=matrix_text(resources=[CPU, HUGE]))
    first = pytester.runpytest("-p", "no:randomly", "--hetero-report-dir", "before")
    first.assert_outcomes(passed=4, failed=1, skipped=5)
    fixed = json.loads(matrix_text(resources=[CPU, {**HUGE, "expect": {"min_cpus": 1}}]))
    pytester.makefile(".matrix.yaml", m=json.dumps(fixed))
    result = pytester.runpytest("-p", "no:randomly", "--lf", "--hetero-report-dir", "after")
    result.assert_outcomes(passed=4, skipped=1, deselected=5)
    _, ev = _bundle(pytester, "after")
    got = statuses(ev)
    assert {k: v for k, v in got.items() if k.startswith("cpu-huge")} == {
        "cpu-huge::discovery": "passed", "cpu-huge::scheduling": "not_applicable", "cpu-huge::py::startup": "passed",
        f"cpu-huge::py::{COMBO}::model": "passed", f"cpu-huge::py::{COMBO}::business": "passed"}
    untested = {u["nodeid"]: u["reason"] for u in ev["untested"]["items"] if u["status"] == "deselected"}
    assert sorted(untested) == sorted(f"m.matrix.yaml::{n}" for n in got if n.startswith("cpu-host"))
    assert set(untested.values()) == {
        "deselected (--lf: not among the previous run's failures nor their dependents; not rerun)"}
    assert ev["summary"]["verdict"] == "incomplete"  # a partial selection never signs pass
    result.stdout.fnmatch_lines(["verdict: INCOMPLETE *", "  covers 5 of 10 planned items; not run in this session: "
                                 "5 deselected (listed in untested scope)"])


def test_business_selected_alone_brings_its_model_item(pytester: pytest.Pytester) -> None:
    """-m "business and cpu" gave [error] business/outputs_unavailable and verdict FAIL: the business
    item ran without the model run whose outputs it judges."""
    pytester.makefile(".matrix.yaml", m=matrix_text())
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "business and cpu")
    result.assert_outcomes(passed=2, deselected=3)
    _, ev = _bundle(pytester, "reports")
    assert {i["nodeid"].split("::", 1)[1]: i["status"] for i in ev["items"]} == {
        f"cpu-host::py::{COMBO}::model": "passed", f"cpu-host::py::{COMBO}::business": "passed"}
    assert ev["summary"]["verdict"] == "incomplete"  # 2 of 5 planned items: a partial selection never signs pass


def test_business_whose_model_did_not_run_is_not_run_never_an_error(pytester: pytest.Pytester) -> None:
    """A plugin registered after ours drops the model item after every selection: the business item
    has no run of this session to judge, which is not a failure of business."""
    pytester.makeconftest("""
import pytest

class DropModels:
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self, config, items):
        result = yield
        items[:] = [i for i in items if not i.nodeid.endswith("::model")]
        return result

def pytest_sessionstart(session):
    session.config.pluginmanager.register(DropModels(), "drop-models")
""")
    pytester.makefile(".matrix.yaml", m=matrix_text())
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "business")
    result.assert_outcomes(skipped=1)
    assert result.ret == 0
    _, ev = _bundle(pytester, "reports")
    [business] = ev["items"]
    assert business["status"] == "not_run" and business["failure"] is None
    assert business["reason"] == (f"not_run: it judges the outputs of m.matrix.yaml::cpu-host::py::{COMBO}::model, "
                                  "which did not run in this session; select the model item too")
    assert ev["summary"]["verdict"] == "incomplete"


def test_fail_on_flaky_signs_the_exit_status_pytest_returns(pytester: pytest.Pytester, attempts: _Attempts) -> None:
    """``--fail-on-flaky`` made pytest exit 7 while the statement signed ``exit_status: 0`` and ``pass``."""
    _flaky_matrix(pytester, failures=1, attempts=attempts)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--reruns", "1", "--fail-on-flaky")
    assert result.ret == 7
    bundle, ev = _bundle(pytester, "reports")
    assert (ev["run"]["exit_status"], ev["summary"]["verdict"]) == (7, "fail")
    assert ev["summary"]["verdict_reason"] == ("exit status 7 although no item failed (--fail-on-flaky, a baseline "
                                               "gate, or another test of the session)")
    statement = json.loads((bundle / "statement.intoto.json").read_text())
    assert (statement["predicate"]["run"]["exit_status"], statement["predicate"]["verdict"]) == (7, "fail")
