"""The run-wide usage ledger (issue 19 item 2): each workload the gate created is a ``usage.workload``
record of the item that saw it, and assembly folds them into the evidence's ``usage`` section. Expected
sums are computed from the item records of real runs, never written as constants."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from support import evidence_of, matrix_text

from pytest_hetero.evidence.usage import RECORD, epoch, held, ledger
from pytest_hetero.matrix.quantity import quantity

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def _two_models() -> str:
    """The digits case as two models of different task types and versions (same files, two claims)."""
    doc = json.loads(matrix_text(resources=[{"name": "cpu-host", "type": "cpu",
                                            "requests": {"cpu": "500m", "memory": "256Mi"}}]))
    first = doc["spec"]["models"][0]
    second = {**first, "name": "digits-eval", "version": "2.1.0", "task_type": "evaluation"}
    doc["spec"]["models"] = [first, second]
    return json.dumps(doc)


def _workloads(ev: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(i["nodeid"], r["data"]) for i in ev["items"] for r in i["records"] if r["kind"] == RECORD]


def test_a_local_run_ledgers_each_model_process_by_model_version_and_task_type(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", m=_two_models())
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=6, skipped=1)
    ev = evidence_of(pytester)
    seen = _workloads(ev)
    assert sorted(n.split("::")[3] for n, _ in seen) == ["digits-eval@digits-test", "digits-logreg@digits-test"]
    expected_model: dict[str, dict[str, float]] = {}
    expected_task: dict[str, dict[str, float]] = {}
    for _, w in seen:
        assert (w["namespace"], w["object"], w["outcome"], w["open"]) == ("local", "process", "completed", False)
        assert w["requests"] == {"cpu": "500m", "memory": "256Mi"}
        assert w["idle_s"] is None  # nothing places a local process: no idle time is claimed
        seconds = w["ended"] - w["started"]
        assert 0 < seconds < 120 and w["held_s"] == round(seconds, 3)
        assert w["cpu_s"] > 0
        for table, key in ((expected_model, w["model"]), (expected_task, w["task_type"])):
            per = table.setdefault(key, {})
            for res, q in w["requests"].items():
                per[res] = per.get(res, 0.0) + quantity(q) * seconds
    assert set(expected_model) == {"digits-logreg@1.0.0", "digits-eval@2.1.0"}
    assert set(expected_task) == {"batch-inference", "evaluation"}
    usage = ev["usage"]
    for name, table in (("by_model", expected_model), ("by_task_type", expected_task)):
        got = usage["resource_seconds"][name]
        assert set(got) == set(table)
        for key, per in table.items():
            assert got[key] == pytest.approx(per, abs=0.002)
    total_cpu = sum(quantity("500m") * (w["ended"] - w["started"]) for _, w in seen)
    assert usage["resource_seconds"]["by_namespace"]["local"]["cpu"] == pytest.approx(total_cpu, abs=0.002)
    assert usage["resource_seconds"]["by_project"]["(gate)"]["cpu"] == pytest.approx(total_cpu, abs=0.002)
    assert usage["workloads"] == 2 and usage["incomplete"]["count"] == 0
    assert usage["cpu_s"] == pytest.approx(sum(w["cpu_s"] for _, w in seen), abs=0.002)
    assert usage["waste"]["failed"]["workloads"] == 0 and usage["waste"]["retries"]["reruns"] == 0


def test_a_failed_model_run_is_waste(pytester: pytest.Pytester) -> None:
    doc = json.loads(matrix_text())
    doc["spec"]["models"][0]["entrypoint"] = ["{python}", "-c", "import time, sys; time.sleep(0.3); sys.exit(3)"]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1, skipped=2)
    ev = evidence_of(pytester)
    [(nodeid, w)] = _workloads(ev)
    assert w["outcome"] == "failed" and w["ended"] - w["started"] >= 0.3
    waste = ev["usage"]["waste"]["failed"]
    assert waste["workloads"] == 1 and waste["items"] == [nodeid]
    assert waste["resource_seconds"]["cpu"] == pytest.approx(1 * (w["ended"] - w["started"]), abs=0.002)


def test_reruns_count_as_retries_with_what_the_earlier_attempts_held(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_rerunfailures", reason="pytest-rerunfailures is a test dependency")
    doc = json.loads(matrix_text())
    doc["spec"]["models"][0]["entrypoint"] = ["{python}", "-c", "import sys; sys.exit(4)"]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "--reruns", "2")
    ev = evidence_of(pytester)
    model = next(i for i in ev["items"] if i["layer"] == "model")
    earlier = [r["data"] for a in model["attempts"] for r in a["records"] if r["kind"] == RECORD]
    assert len(earlier) == 2
    retries = ev["usage"]["waste"]["retries"]
    assert retries["reruns"] == 2
    assert retries["resource_seconds"]["cpu"] == pytest.approx(sum(w["ended"] - w["started"] for w in earlier),
                                                               abs=0.002)
    assert ev["usage"]["waste"]["failed"]["workloads"] == 3  # every attempt failed, each held its request


def test_recovery_from_the_journal_yields_the_same_usage_section(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", m=_two_models())
    pytester.runpytest("-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    bundle = pytester.path / "reports" / ev["run"]["id"]
    lines = (bundle / "journal.jsonl").read_text().splitlines(keepends=True)
    # the run as a kill -9 leaves it: every item journaled, no end line
    (bundle / "journal.jsonl").write_text("".join(x for x in lines if json.loads(x)["type"] != "end"))
    for name in ("evidence.json", "attestation.intoto.jsonl"):
        (bundle / name).unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "report", "--from-journal", str(bundle)],
                          capture_output=True, text=True, cwd=pytester.path)
    assert (bundle / "evidence.json").exists(), done.stderr
    recovered = json.loads((bundle / "evidence.json").read_text())["usage"]
    original = ev["usage"]
    # every local process ended and was released before its item finished: nothing depends on the end line
    for key in ("resource_seconds", "waste", "workloads", "cpu_s", "governance"):
        assert recovered[key] == original[key], key
    assert recovered["incomplete"]["count"] == 0


def _item(nodeid: str, *records: dict[str, Any]) -> dict[str, Any]:
    return {"nodeid": nodeid, "records": [{"kind": RECORD, "at": f"2026-12-01T10:00:0{n}Z", "data": r}
                                          for n, r in enumerate(records)]}


def test_partial_and_bad_records_count_with_what_they_have_and_are_named() -> None:
    """A record lacking facts counts with what it has; a fact of an unusable value (a quantity or a time that
    does not parse) is named missing; a record whose ``data`` does not fit its declared shape (a fact of another
    JSON type) adds nothing and is listed as incomplete with the field the conversion names; what is not a
    record's envelope (in an earlier attempt's evidence, which no loader checks) is left out. Assembly never breaks
    on any of them."""
    end = "2026-12-01T10:01:40Z"
    pod = {"workload": "pod/a/p", "object": "pod", "namespace": "a", "requests": {"cpu": "2"}, "placed": epoch(
        "2026-12-01T10:00:00Z")}
    later = {"workload": "pod/a/p", "started": epoch("2026-12-01T10:00:10Z"), "attempts": 3}
    broken = {"workload": "pod/b/q", "object": "pod", "namespace": "b", "requests": {"cpu": "two"},
              "submitted": "not a time"}
    mistyped = {"workload": "pod/c/r", "object": "pod", "namespace": "c", "requests": {"cpu": "1"},
                "placed": 1.0, "attempts": "three"}
    governance = {"kind": "governance.ledger", "at": "2026-12-01T10:00:00Z", "data": {
        "resource_seconds": {"a": {"cpu": 3.5, "gpu": "x"}}, "waste": {"attempts": 2}}}
    items = [_item("m::r::scheduling", pod), _item("m::r::i::startup", later, broken, mistyped),
             {"nodeid": "junk", "records": [governance], "attempts": [
                 {"records": ["x", {"kind": RECORD, "data": "y"}]}, "z"]}]
    section = ledger(items, end)
    assert section["workloads"] == 2
    # held from placement to the run's end (released by cleanup): 100 s x 2 cores
    assert section["resource_seconds"]["by_namespace"]["a"] == {"cpu": 200.0}
    assert section["resource_seconds"]["by_namespace"]["b"] == {}
    assert "c" not in section["resource_seconds"]["by_namespace"]
    assert section["waste"]["idle"]["seconds"] == 10.0
    assert section["waste"]["retries"]["restarts"] == 2
    assert section["incomplete"]["count"] == 3
    assert section["governance"] == {"probes": 1, "resource_seconds": {}, "attempts": 0, "refused": 0,
                                     "waited_s": 0.0}
    [bad, unfit, unfit_governance] = section["incomplete"]["workloads"]
    assert bad["workload"] == "pod/b/q"
    assert set(bad["missing"]) == {"placed", "requests.cpu"}
    assert unfit["nodeid"] == "m::r::i::startup" and "`$.attempts`" in unfit["missing"][0], unfit
    assert unfit_governance["workload"] == "governance.ledger" and unfit_governance["nodeid"] == "junk"
    assert "`$.resource_seconds" in unfit_governance["missing"][0], unfit_governance
    # interrupted (no end line): counted until the last reported time, and said so
    open_run = ledger(items[:2], None)
    assert open_run["resource_seconds"]["by_namespace"]["a"] == {"cpu": 4.0}  # 10:00:00 -> 10:00:02 (last record)
    assert open_run["incomplete"]["until"].startswith("last reported time")
    assert held({"placed": 5.0, "ended": 9.0, "released": 12.0})[0] == 4.0


def test_a_governance_ledger_is_summed_and_null_reads_as_none() -> None:
    """A probe's ledger as its writer writes it is summed; ``null`` facts (a workload's, a ledger's waste) read
    as not reported, as before the ledger converted records to their declared shapes."""
    probe = {"kind": "governance.ledger", "at": "2026-12-01T10:00:00Z", "data": {
        "resource_seconds": {"a": {"cpu": 3.5}}, "waste": {"attempts": 2, "refused": 1, "waited_s": 1.5},
        "workloads": []}}
    empty = {"kind": "governance.ledger", "at": "2026-12-01T10:00:00Z", "data": {"resource_seconds": None,
                                                                                  "waste": None}}
    nulls = {"workload": None, "object": None, "namespace": None, "tenant": None, "requests": None,
             "placed": 1.0, "ended": 3.0, "attempts": None, "simulated": None, "cpu_s": None, "model": None}
    section = ledger([{"nodeid": "m::r::g", "records": [probe, empty]}, _item("m::r::s", nulls)],
                     "2026-12-01T10:01:40Z")
    assert section["governance"] == {"probes": 2, "resource_seconds": {"a": {"cpu": 3.5}}, "attempts": 2,
                                     "refused": 1, "waited_s": 1.5}
    assert section["workloads"] == 1 and section["incomplete"]["count"] == 0
    assert section["resource_seconds"]["by_namespace"] == {"(unknown)": {}}
    assert section["resource_seconds"]["by_project"] == {"(gate)": {}}


def test_the_ledger_sums_are_in_the_signed_predicate(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", m=_two_models())
    pytester.runpytest("-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    bundle = pytester.path / "reports" / ev["run"]["id"]
    import base64

    envelope = json.loads((bundle / "attestation.intoto.jsonl").read_text().splitlines()[0])
    predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    assert predicate["usage"]["resource_seconds"] == ev["usage"]["resource_seconds"]
    assert predicate["usage"]["waste"]["idle_s"] == ev["usage"]["waste"]["idle"]["seconds"]
    assert predicate["usage"]["incomplete"] == 0
    summary = (bundle / "summary.md").read_text()
    cpu = ev["usage"]["resource_seconds"]["by_namespace"]["local"]["cpu"]
    assert "### Usage ledger" in summary and f"- by namespace: local: cpu {cpu:g}" in summary
    html = (bundle / "report.html").read_text()
    assert '<h2 id="usage">Usage ledger</h2>' in html and f"cpu {cpu}" in html


HUNGRY = ("import sys, time\n"
          "block = bytearray(int(sys.argv[2]) * 1024 * 1024)\n"
          "for i in range(0, len(block), 4096): block[i] = 1\n"
          "end = time.process_time() + 0.3\n"
          "while time.process_time() < end: pass\n"
          "open(sys.argv[1], 'w').write('{\"metrics\": {\"accuracy\": 1.0}}')\n")


@pytest.mark.parametrize("mode", ["session", "per-run"])
def test_a_confined_run_reports_its_own_cpu_and_peak_rss_never_the_gates(pytester: pytest.Pytester,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         mode: str) -> None:
    """A model that touches 200 MiB more than this process's own peak RSS (the gate runs in it: pytester) and
    spins 0.3 s of CPU: its ``model.run`` peak RSS and its ledger
    ``cpu_s`` are its own, through the sandbox (bwrap's own reaper as PID 1 used to swallow both: 2 ms
    recorded). The small digits model: forked by the session's sandbox, its ``ru_maxrss`` starts from
    the sandbox supervisor's few MiB, so its own peak is measured; with a bubblewrap per run it starts
    from the gate's own RSS, above the model's peak: not claimed (None, and why) instead of the gate's."""
    if mode == "per-run":
        monkeypatch.setenv("HETERO_SANDBOX_SHARED", "off")
    doc = json.loads(matrix_text())
    small = doc["spec"]["models"][0]
    mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 + 200
    hungry = {**small, "name": "hungry", "entrypoint": ["{python}", "-c", HUNGRY.replace("{", "{{").replace(
        "}", "}}").replace("{{python}}", "{python}"), "{outputs}", str(mib)]}
    doc["spec"]["models"] = [small, hungry]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "-k", "model")
    ev = evidence_of(pytester)
    runs = {i["nodeid"].split("::")[3].split("@")[0]: next(r["data"] for r in i["records"] if r["kind"] == "model.run")
            for i in ev["items"] if i["layer"] == "model"}
    assert set(runs) == {"digits-logreg", "hungry"}, ev["items"]
    big = runs["hungry"]
    assert big["exit_code"] == 0 and big["isolation"]["confined"], big
    assert big["peak_rss_mib"] >= mib, big
    ledgered = {w["model"].split("@")[0]: w for _, w in _workloads(ev)}
    assert 0.25 <= ledgered["hungry"]["cpu_s"] < 30, ledgered["hungry"]
    tiny = runs["digits-logreg"]
    if mode == "session":
        assert 20 < tiny["peak_rss_mib"] < mib and "peak_rss_unmeasured" not in tiny, tiny
    else:
        assert tiny["peak_rss_mib"] is None and tiny["peak_rss_unmeasured"].startswith("at most "), tiny
    assert ledgered["digits-logreg"]["cpu_s"] > 0.02  # onnxruntime's start alone, not bwrap's 2 ms


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-12-01T09:45:29Z", 1796118329.0),                      # Kubernetes Time
    ("2026-12-01T09:45:29.123456Z", 1796118329.123456),          # Kubernetes MicroTime
    ("2026-12-01T09:45:29.123456789Z", 1796118329.123456),       # Docker: nanoseconds, cut
    ("2026-12-01T09:45:29.5+01:00", 1796114729.5),               # an offset, one fractional digit
    (datetime(2026, 12, 1, 9, 45, 29, tzinfo=UTC), 1796118329.0),  # the kubernetes client's
    (1796118329, 1796118329.0),
    ("0001-01-01T00:00:00Z", None),                               # Docker's zero time: never
    ("2026-12-01T09:45:29.Z", None), ("yesterday", None), ("", None), (None, None), (True, None),
])
def test_epoch_reads_every_engine_time_format(value: object, expected: float | None) -> None:
    """One reader of RFC 3339 times for every engine (the Docker, Kueue and cleanup copies are gone)."""
    assert epoch(value) == expected
