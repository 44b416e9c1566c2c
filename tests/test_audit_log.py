"""The audit-log reader and the pool mapping of ``--hetero-audit-log`` (pytest_hetero/status/audit.py) on a
real audit log of the test plane's apiserver (tests/data/audit/kubeplane-v1.34.4.jsonl, written by
kube-apiserver v1.34.4 with tests/infra/kubeplane.sh's audit policy: a quota created by the admin, patched
by ``alice`` with her client certificate, a patch by the admin impersonating ``bob`` that RBAC refused, a
node created, patched by two kube-controller-manager controllers and the admin, then deleted, and a
device-plugin ConfigMap patched), and hostile files refused cleanly. The same path against a live
apiserver is tests/kubernetes/test_kube_audit.py."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support import REPO, matrix_text

from pytest_hetero.evidence.document import SelectionCounts
from pytest_hetero.judge.verdict import change_findings, change_record_status, exit_status, run_verdict
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.status.audit import (
    MAX_LINE_BYTES,
    AuditLogError,
    ManagedObject,
    Window,
    classify,
    describe_change,
    managed_changes,
    read_audit_log,
)
from pytest_hetero.vocab import Status

pytestmark = pytest.mark.usefixtures("outside_inputs")

SAMPLE = REPO / "tests" / "data" / "audit" / "kubeplane-v1.34.4.jsonl"
EARLY = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)
LATE = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)


@pytest.fixture
def matrix(tmp_path: Path) -> Any:
    resources = [{"name": "h100", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1},
                  "node_selector": {"pool": "h100"}},
                 {"name": "cpu", "type": "cpu", "requests": {"cpu": 1}, "node_selector": {"pool": "cpu"}}]
    (tmp_path / "d.matrix.yaml").write_text(matrix_text(resources=resources, name="d"))
    return load_matrix(tmp_path / "d.matrix.yaml")


SNAP: dict[str, Any] = {"nodes": {"gpu-node-1": {"labels": {"pool": "h100"}, "allocatable": {}}}}


def test_the_real_log_gives_who_what_when() -> None:
    window, file = read_audit_log(str(SAMPLE), EARLY, LATE)
    assert (window.lines, window.writes, window.refused, window.outside, window.torn_last_line) == (9, 8, 1, 0, False)
    assert file["bytes"] == SAMPLE.stat().st_size and len(file["sha256"]) == 64
    alice = window.changes[1]
    assert alice["who"] == {"user": "alice", "groups": ["platform-ops", "system:authenticated"], "via": None,
                            "manager": None}
    assert alice["what"] == {"verb": "patch", "resource": "resourcequotas", "subresource": None,
                             "namespace": "team-a", "name": "gpu-quota", "apiGroup": ""}
    assert (alice["when"], alice["code"]) == ("2026-12-02T13:47:02.950088Z", 200)
    assert describe_change(alice) == ("alice (platform-ops) patch resourcequotas team-a/gpu-quota at "
                                      "2026-12-02T13:47:02.950088Z")
    # bob's impersonated patch was refused (403): counted, never a change
    assert all(c["who"]["user"] != "bob" for c in window.changes)
    assert [c["who"]["user"] for c in window.changes if c["what"]["resource"] == "nodes"] == [
        "hetero-admin", "system:serviceaccount:kube-system:node-controller",
        "system:serviceaccount:kube-system:ttl-controller", "hetero-admin", "hetero-admin"]


def test_the_window_is_between_the_two_bundles() -> None:
    cut = datetime(2026, 12, 2, 13, 47, 3, 50000, tzinfo=UTC)
    before, _ = read_audit_log(str(SAMPLE), EARLY, cut)
    after, _ = read_audit_log(str(SAMPLE), cut, LATE)
    assert (before.writes, after.writes) == (2, 6)
    assert (before.refused, before.outside, after.refused, after.outside) == (1, 6, 0, 3)
    assert after.changes[0]["what"]["name"] == "gpu-node-1" and after.changes[0]["when"] == "2026-12-02T13:47:03.069811Z"


def test_pool_changes_not_in_the_record_are_flagged_and_judged(matrix: Any) -> None:
    window, _ = read_audit_log(str(SAMPLE), EARLY, LATE)
    part = classify(window, matrix, [SNAP], "team-a", intended=["cpu"])
    pools = {(c["who"]["user"], c["what"]["resource"], c["what"]["verb"]): c["pools"] for c in part["changes"]}
    assert pools[("alice", "resourcequotas", "patch")] == ["h100", "cpu"]  # a quota of the target namespace
    assert pools[("hetero-admin", "configmaps", "patch")] == ["h100"]  # device-plugin config: GPU pools only
    assert pools[("hetero-admin", "nodes", "delete")] == ["h100"]
    found = [(f["change"]["who"]["user"], f["change"]["what"]["resource"], f["change"]["what"]["verb"], f["pools"])
             for f in part["findings"]]
    assert found == [("hetero-admin", "resourcequotas", "create", ["h100"]),
                     ("alice", "resourcequotas", "patch", ["h100"]),
                     ("hetero-admin", "nodes", "create", ["h100"]), ("hetero-admin", "nodes", "patch", ["h100"]),
                     ("hetero-admin", "configmaps", "patch", ["h100"]), ("hetero-admin", "nodes", "delete", ["h100"])]
    # the node controllers' own writes are kept, marked, and never flagged
    assert [c["control_plane"] for c in part["changes"] if c["who"]["user"].startswith("system:")] == [True, True]
    status, judged = change_findings(matrix, part["findings"])
    assert status == "failed"
    assert {(f["status"], f["owner"], f["category"]) for f in judged} == {("failed", "platform", "undeclared_change")}
    assert judged[1]["message"] == ("alice (platform-ops) patch resourcequotas team-a/gpu-quota at "
                                    "2026-12-02T13:47:02.950088Z changed pool(s) h100 that the change record does "
                                    "not name")
    assert part["actors"] == ["alice", "hetero-admin"]  # the node controllers' writes are not actors
    covered = classify(window, matrix, [SNAP], "team-a", intended=["cpu", "h100"])
    assert covered["findings"] == [] and change_findings(matrix, covered["findings"])[0] == "passed"
    statuses: list[list[Status]] = [["passed", "failed"], ["passed", "error"], ["passed"]]
    assert [change_record_status(s) for s in statuses] == ["failed", "error", "passed"]


def test_a_quota_of_another_namespace_is_not_a_pool_object(matrix: Any) -> None:
    window, _ = read_audit_log(str(SAMPLE), EARLY, LATE)
    part = classify(window, matrix, [SNAP], "other-ns", intended=[])
    assert all(not c["pools"] for c in part["changes"] if c["what"]["resource"] == "resourcequotas")


def test_managed_fields_name_a_manager_not_a_user(matrix: Any) -> None:
    objects: list[ManagedObject] = [{"resource": "resourcequotas", "apiGroup": "", "namespace": "team-a", "name": "gpu-quota",
                "managedFields": [
                    {"manager": "kubectl-patch", "operation": "Update", "time": "2026-12-02T13:47:02Z"},
                    {"manager": "kube-controller-manager", "operation": "Update", "time": "2026-12-02T13:47:02Z",
                     "subresource": "status"},
                    {"manager": "helm", "operation": "Apply", "time": "2026-12-01T09:00:00Z"},
                    # not a ManagedFieldsEntry (no apiserver serves one): left out, as a non-object entry is
                    {"manager": ["x"], "operation": "Update", "time": "2026-12-02T13:47:02Z"}]}]
    window = managed_changes(objects, EARLY, LATE)
    assert (window.writes, window.outside) == (1, 1)
    [change] = window.changes
    assert change["who"] == {"user": None, "groups": None, "via": None, "manager": "kubectl-patch"}
    assert describe_change(change) == "manager kubectl-patch Update resourcequotas team-a/gpu-quota at 2026-12-02T13:47:02Z"
    assert classify(window, matrix, [SNAP], "team-a", [])["findings"][0]["pools"] == ["h100", "cpu"]


# ---------------------------------------------------------------------------------------- hostile files
def refused(path: Path) -> str:
    started = time.monotonic()
    with pytest.raises(AuditLogError) as info:
        read_audit_log(str(path), EARLY, LATE)
    assert time.monotonic() - started < 5
    return info.value.render()


def test_a_huge_line_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    good = SAMPLE.read_bytes().splitlines(keepends=True)[0]
    path = tmp_path / "audit.log"
    with path.open("wb") as fh:
        fh.write(good)
        fh.write(b'{"kind": "Event", "x": "' + b"a" * (MAX_LINE_BYTES * 3) + b'"}\n')
    text = refused(path)
    assert f"{path}:2: a line longer than the {MAX_LINE_BYTES} bytes an audit event may hold" in text


def test_binary_data_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    path.write_bytes(SAMPLE.read_bytes() + os.urandom(64).replace(b"\n", b"x") + b"\x00\xff\n")
    assert f"{path}:10: binary data (a NUL byte), not a JSON line" in refused(path)
    path.write_bytes(b"\xff\xfe\x80 not utf-8\n")
    assert f"{path}:1: not a JSON audit event: the line is not UTF-8" in refused(path)


def test_wrong_json_and_wrong_kind_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    path.write_text('{"kind": "Event", "apiVersion": "audit.k8s.io/v1", \n')
    assert f"{path}:1: not a JSON audit event" in refused(path)
    path.write_text('{"kind": NaN}\n')
    assert f"{path}:1: not a JSON audit event: non-standard token NaN" in refused(path)
    path.write_text("[" * 100_000 + "\n")
    assert f"{path}:1: not a JSON audit event" in refused(path)
    path.write_text('[1, 2]\n')
    assert f"{path}:1: a JSON list, not an audit Event object" in refused(path)
    path.write_text(json.dumps({"kind": "Event", "apiVersion": "audit.k8s.io/v1beta1"}) + "\n")
    text = refused(path)
    assert "not an audit.k8s.io/v1 Event" in text and "--audit-log-version" in text
    event = json.loads(SAMPLE.read_text().splitlines()[1])
    del event["user"]
    path.write_text(json.dumps(event) + "\n")
    assert f"{path}:1: not an audit.k8s.io/v1 Event: Object missing required field `user`" in refused(path)
    # an optional field of another type than the Event's is refused by its path, not read as text
    event = json.loads(SAMPLE.read_text().splitlines()[1])
    event["objectRef"]["name"] = 7
    path.write_text(json.dumps(event) + "\n")
    assert f"{path}:1: not an audit.k8s.io/v1 Event: Expected `str | null`, got `int` - at `$.objectRef.name`" in (
        refused(path))
    event["objectRef"]["name"], event["responseStatus"] = "gpu-quota", {"code": "200"}
    path.write_text(json.dumps(event) + "\n")
    assert "Expected `int | null`, got `str` - at `$.responseStatus.code`" in refused(path)
    event = json.loads(SAMPLE.read_text().splitlines()[1])
    event["stageTimestamp"] = "yesterday"
    path.write_text(json.dumps(event) + "\n")
    assert "stageTimestamp 'yesterday' is not an RFC 3339 time" in refused(path)


def test_unsafe_and_oversize_files_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "not a regular file" in refused(fifo)
    assert "cannot read the audit log: missing" in refused(tmp_path / "absent")
    sparse = tmp_path / "sparse"
    with sparse.open("wb") as fh:
        fh.truncate(3 << 30)
    assert "more than the 2147483648 an audit log read here may hold" in refused(sparse)


def test_a_torn_last_line_is_skipped_and_said(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    data = SAMPLE.read_bytes()
    path.write_bytes(data + data.splitlines()[1][:200])
    window, _ = read_audit_log(str(path), EARLY, LATE)
    assert (window.writes, window.torn_last_line) == (8, True)


def test_a_log_that_begins_after_the_window_starts_proves_nothing_before_it(matrix: Any) -> None:
    window, _ = read_audit_log(str(SAMPLE), EARLY, LATE)
    assert window.first is not None and window.first.isoformat() == "2026-12-02T13:47:02.877386+00:00"
    assert window.last is not None and window.last.isoformat() == "2026-12-02T13:47:03.363162+00:00"
    assert (window.covers(EARLY), window.covers(window.first), Window().covers(EARLY)) == (False, True, None)
    covered = classify(window, matrix, [SNAP], "team-a", intended=["cpu", "h100"])
    assert change_findings(matrix, covered["findings"], covers_window=False)[0] == "error"
    assert change_findings(matrix, covered["findings"], covers_window=None)[0] == "passed"


def test_the_change_record_status_decides_the_run_verdict_and_exit_status() -> None:
    """A failed record fails a run whose items all passed (and turns exit 0 into 1); a record whose source
    does not cover the window leaves it incomplete; a passed one (or none) changes nothing."""
    totals = {"passed": 4}
    none: SelectionCounts = {"deselected": 0, "by": []}
    assert [run_verdict(totals, 0, False, none, 0, 0, change)[0] for change in ("failed", "error", "passed", None)] == [
        "fail", "incomplete", "pass", "pass"]
    assert [exit_status(0, None, change) for change in ("failed", "error", "passed", None)] == [1, 0, 0, 0]
    assert exit_status(2, None, "failed") == 2  # an interruption stays one
    assert run_verdict({"failed": 1}, 0, False, none, 1, 0, "failed")[1] == "1 failed, 0 error"


KUEUE = REPO / "tests" / "data" / "audit" / "kubeplane-v1.34.4-kueue-impersonation.jsonl"
"""The same apiserver with Kueue's LocalQueue/ClusterQueue kinds served (CRDs of group kueue.x-k8s.io): the
admin creates ClusterQueue cq-gpu and LocalQueue team-a/lq-gpu (→ cq-gpu), then, impersonating ``carol``
(group ml-platform, allowed by a ClusterRole), patches both; then creates ClusterQueue cq-cpu."""


def test_impersonation_names_the_user_and_who_acted_and_queues_map_to_their_pool(tmp_path: Path) -> None:
    resources = [{"name": "h100", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1},
                  "node_selector": {"pool": "h100"}, "queue": "lq-gpu"},
                 {"name": "cpu", "type": "cpu", "requests": {"cpu": 1}, "node_selector": {"pool": "cpu"},
                  "queue": "lq-cpu"}]
    (tmp_path / "q.matrix.yaml").write_text(matrix_text(resources=resources, name="q"))
    matrix = load_matrix(tmp_path / "q.matrix.yaml")
    window, _ = read_audit_log(str(KUEUE), EARLY, datetime(2026, 12, 2, 15, 0, tzinfo=UTC))
    assert window.writes == 5
    carol = [c for c in window.changes if c["who"]["user"] == "carol"]
    assert [c["who"] for c in carol] == [{"user": "carol", "groups": ["ml-platform", "system:authenticated"],
                                          "via": "hetero-admin", "manager": None}] * 2
    assert describe_change(carol[0]).startswith(
        "carol (ml-platform) as impersonated by hetero-admin patch clusterqueues.kueue.x-k8s.io cq-gpu at ")
    snapshot = {"kueue": {"localqueues": {"team-a/lq-gpu": {"clusterQueue": "cq-gpu"},
                                          "team-a/lq-cpu": {"clusterQueue": "cq-cpu"}}}}
    part = classify(window, matrix, [snapshot], "team-a", intended=[])
    assert [(c["what"]["verb"], c["what"]["resource"], c["what"]["name"], c["pools"]) for c in part["changes"]] == [
        ("create", "clusterqueues", "cq-gpu", ["h100"]), ("create", "localqueues", "lq-gpu", ["h100"]),
        ("patch", "clusterqueues", "cq-gpu", ["h100"]), ("patch", "localqueues", "lq-gpu", ["h100"]),
        ("create", "clusterqueues", "cq-cpu", ["cpu"])]
    # without the LocalQueue → ClusterQueue mapping in a snapshot, any ClusterQueue may be a queued pool's
    unknown = classify(window, matrix, [{}], "team-a", intended=[])
    assert unknown["changes"][0]["pools"] == ["h100", "cpu"]


def test_a_deletecollection_names_no_object_and_touches_every_pool_of_its_kind(matrix: Any, tmp_path: Path) -> None:
    # the real node delete of the sample, as a deletecollection (the apiserver then records no name)
    event = json.loads(SAMPLE.read_text().splitlines()[8])
    assert (event["verb"], event["objectRef"]["name"]) == ("delete", "gpu-node-1")
    event["verb"] = "deletecollection"
    del event["objectRef"]["name"]
    event["requestURI"] = "/api/v1/nodes"
    path = tmp_path / "audit.log"
    path.write_text(json.dumps(event) + "\n")
    window, _ = read_audit_log(str(path), EARLY, LATE)
    both = {"nodes": {**SNAP["nodes"], "cpu-1": {"labels": {"pool": "cpu"}, "allocatable": {}}}}
    part = classify(window, matrix, [both], "team-a", intended=["cpu"])
    assert [(f["change"]["what"]["verb"], f["pools"]) for f in part["findings"]] == [("deletecollection", ["h100"])]
    assert part["changes"][0]["pools"] == ["h100", "cpu"]


def test_a_log_this_user_may_not_read_is_a_permission_error_the_gate_falls_back_on(tmp_path: Path) -> None:
    """--hetero-audit-log falls back to managedFields on PermissionError (pytest_plugin/audit.py); a real
    EACCES: the file is 0600 of another user (as root: read as uid 65534 through setpriv)."""
    import subprocess
    import sys

    path = tmp_path / "audit.log"
    path.write_bytes(SAMPLE.read_bytes())
    code = ("import sys; from datetime import datetime, timezone; from pytest_hetero.status.audit import "
            "read_audit_log\ntry:\n    read_audit_log(sys.argv[1], datetime(2026, 1, 1, tzinfo=timezone.utc), "
            "datetime(2027, 1, 1, tzinfo=timezone.utc))\nexcept PermissionError as exc:\n    print('denied:', exc)\n")
    if os.geteuid() == 0:
        path.chmod(0o600)
        tmp_path.chmod(0o755)
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code, str(path)]
    else:
        path.chmod(0)
        argv = [sys.executable, "-c", code, str(path)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, cwd="/")
    assert out.stdout.strip() == "denied: cannot be opened (Permission denied)", out.stderr[-2000:]


def test_a_failed_audit_keeps_its_reason_when_an_input_also_changed_during_the_run() -> None:
    """The finish settles the verdict over the audited change record AND the inputs that changed while the run
    used them (bundle/finish._inputs_evidence): the loop over changed inputs once rebound the audit's status to
    the last changed input, so the signed reason became "exit status 1 although no item failed"."""
    from pytest_hetero.bundle.finish import _inputs_evidence
    from pytest_hetero.evidence.document import EvidenceDocument
    from pytest_hetero.evidence.inputs import RunInputs
    from pytest_hetero.evidence.untested import INPUTS_PART

    nodeid = "m.matrix.yaml::cpu::img::digits@test::model"
    evidence: Any = {"items": [{"nodeid": nodeid, "status": "passed", "layer": "model", "keys": {}}],
                     "untested": {"items": [], "not_proven": []}, "run": {"exit_status": 0}, "summary": {},
                     "errors": [], "warnings": [],
                     "cluster": {"change_record": {"audit": {"status": "failed"}}}}
    inputs = RunInputs()
    reason = "the code folder /cases/digits changed while the run used it"
    inputs.changed.append({"path": "/cases/digits", "input": "code", "nodeids": [nodeid], "reason": reason})
    doc: EvidenceDocument = evidence
    _inputs_evidence(doc, inputs)
    assert (doc["run"]["exit_status"], doc["summary"]["verdict"], doc["summary"]["verdict_reason"]) == (
        1, "fail", "the audited change record failed: a change to a pool that --hetero-change does not name")
    assert doc["untested"]["not_proven"] == [{"nodeid": nodeid, "layer": "model", "part": INPUTS_PART, "reason": reason}]
    assert reason in doc["warnings"]
