"""Who changed what, when (``--hetero-audit-log``) on a real apiserver with an audit policy.

The shared planes are never restarted: this module starts a plane of its own with tests/infra/kubeplane.sh
(``HETERO_KUBE_STATE`` in a temporary folder: its own etcd, apiserver, controller-manager, scheduler and KWOK
on free ports, about 20 s warm), whose apiserver runs with the audit policy kubeplane.sh writes
(``$STATE/audit/policy.yaml``, log ``$STATE/audit/audit.log``), and stops it at the end. A gate run signs a
snapshot; then ``alice`` (a client certificate of group ``platform-ops`` signed by the plane's CA, allowed by
a Role to patch quotas) raises the namespace's ResourceQuota; the second run reads the audit log for the
window between the two bundles: alice's patch is in its signed change record with the user the apiserver
recorded, and, as the declared record names only pool ``b``, it is flagged for pool ``a``. With
``managed-fields`` the same change is found with its field manager and labelled as such; a hostile log is
refused before any item runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubekit import POOL, SESSION, kube_matrix, schedulable
from kubernetes import client, config
from support import REPO
from test_kube_publish import hetero, wait_for

pytestmark = pytest.mark.usefixtures("outside_inputs")

PLANE = REPO / "tests" / "infra" / "kubeplane.sh"


@dataclass
class Plane:
    """A plane of this module's own: ``state`` folder, admin ``kubeconfig``, ``api`` (admin), ``port``."""

    state: Path
    kubeconfig: Path
    api: client.ApiClient
    port: int

    @property
    def audit_log(self) -> Path:
        return self.state / "audit" / "audit.log"


def _plane(state: Path, sub: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(PLANE), sub], env={**os.environ, "HETERO_KUBE_STATE": str(state)},
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def plane() -> Iterator[Plane]:
    state = Path(tempfile.mkdtemp(prefix="hetero-audit-plane-"))
    started = _plane(state, "start")
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        kubeconfig = state / "admin.kubeconfig"
        port = int(next(line.split("=")[1] for line in (state / "ports.env").read_text().splitlines()
                        if line.startswith("APISERVER_PORT=")))
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)  # type: ignore[no-untyped-call]
        yield Plane(state, kubeconfig, client.ApiClient(cfg), port)
    finally:
        _plane(state, "stop")
        shutil.rmtree(state, ignore_errors=True)
        Path(f"{state}.lock").unlink(missing_ok=True)


def user_cert(plane: Plane, tmp: Path, name: str, group: str) -> tuple[Path, Path]:
    """A client certificate ``CN=name, O=group`` signed by the plane's CA (the apiserver's user ``name``)."""
    key, csr, crt, ext = (tmp / f"{name}.{s}" for s in ("key", "csr", "crt", "ext"))
    ext.write_text("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=clientAuth\n")
    pki = plane.state / "pki"
    subprocess.run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-subj", f"/O={group}/CN={name}", "-out", str(csr)], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.crt"), "-CAkey",
                    str(pki / "ca.key"), "-CAcreateserial", "-CAserial", str(tmp / "ca.srl"), "-days", "1",
                    "-sha256", "-extfile", str(ext), "-out", str(crt)], check=True, capture_output=True)
    return crt, key


def as_user(plane: Plane, cert: tuple[Path, Path], method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One request with ``cert`` as the client certificate (curl: its field manager is ``curl``)."""
    out = subprocess.run(["curl", "-sS", "--fail-with-body", "--max-time", "20", "--cacert",
                          str(plane.state / "pki" / "ca.crt"), "--cert", str(cert[0]), "--key", str(cert[1]),
                          "-X", method, "-H", "Content-Type: application/merge-patch+json", "--data-binary",
                          json.dumps(body), f"https://127.0.0.1:{plane.port}{path}"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return dict(json.loads(out.stdout))


@pytest.fixture
def setup(plane: Plane, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Two KWOK nodes (pools a and b), a namespace with a ResourceQuota, alice's Role, a matrix, a key."""
    tag = uuid.uuid4().hex[:5]
    core = client.CoreV1Api(plane.api)
    ns = f"audit-{tag}"
    core.create_namespace({"metadata": {"name": ns}})  # type: ignore[arg-type]  # a manifest dict, sent as it is
    core.create_namespaced_resource_quota(ns, {"metadata": {"name": "team-quota"},  # type: ignore[arg-type]
                                               "spec": {"hard": {"requests.cpu": "8"}}})
    rbac = client.RbacAuthorizationV1Api(plane.api)
    rbac.create_namespaced_role(ns, {"metadata": {"name": "quota-editor"},  # type: ignore[arg-type]
                                     "rules": [{"apiGroups": [""], "resources": ["resourcequotas"],
                                                "verbs": ["get", "patch", "update"]}]})
    rbac.create_namespaced_role_binding(ns, {  # type: ignore[arg-type]
        "metadata": {"name": "alice-quota"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "quota-editor"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]})
    cap = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    names = {p: f"audit{p}-{tag}" for p in ("a", "b")}
    for pool, name in names.items():
        core.create_node({"metadata": {  # type: ignore[arg-type]
            "name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {POOL: f"audit-{pool}-{tag}", SESSION: tag, "kubernetes.io/hostname": name}}})
        core.patch_node_status(name, {"status": {"capacity": cap, "allocatable": cap, "conditions": []}})
    for name in names.values():
        wait_for(lambda n=name: schedulable(core.read_node(n)), 60, f"node {name} Ready")
    doc = json.loads(kube_matrix(tag, ns, [
        {"name": "a", "type": "cpu", "requests": {"cpu": "1"}, "pool": f"audit-a-{tag}"},
        {"name": "b", "type": "cpu", "requests": {"cpu": "1"}, "pool": f"audit-b-{tag}"}], name="d"))
    doc["spec"]["profiles"] = {"quick": {"layers": ["discovery"]}}
    (tmp_path / "d.matrix.yaml").write_text(json.dumps(doc))
    assert hetero("keygen", str(tmp_path / "key")).returncode == 0
    try:
        yield {"ns": ns, "tag": tag, "nodes": names, "alice": user_cert(plane, tmp_path, "alice", "platform-ops")}
    finally:
        for name in names.values():
            core.delete_node(name)
        core.delete_namespace(ns)


def gate(tmp: Path, plane: Plane, *args: str) -> dict[str, Any]:
    """Run the gate (profile quick: discovery) on tmp/d.matrix.yaml; the new bundle's evidence, path, output."""
    before = set((tmp / "reports").iterdir()) if (tmp / "reports").exists() else set()
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig),
           "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                          str(tmp / "d.matrix.yaml"), "--hetero-profile", "quick", "--hetero-kube-context", "hetero",
                          "--hetero-report-dir", str(tmp / "reports"), "--hetero-sign-key", str(tmp / "key"), *args],
                         capture_output=True, text=True, env=env, cwd=tmp, timeout=600, check=False)
    new = sorted(set((tmp / "reports").iterdir()) - before) if (tmp / "reports").exists() else []
    return {"bundle": new[0] if len(new) == 1 else None, "stdout": run.stdout, "stderr": run.stderr,
            "rc": run.returncode,
            "evidence": json.loads((new[0] / "evidence.json").read_text()) if len(new) == 1 else None}


def raise_quota(plane: Plane, setup: dict[str, Any]) -> str:
    """alice patches the quota; returns the time the apiserver recorded (its audit event, once written)."""
    time.sleep(1.1)  # managedFields times are whole seconds: keep the patch clear of the first run's end
    path = f"/api/v1/namespaces/{setup['ns']}/resourcequotas/team-quota"
    as_user(plane, setup["alice"], "PATCH", path, {"spec": {"hard": {"requests.cpu": "16"}}})

    def recorded() -> str | None:
        for line in plane.audit_log.read_text().splitlines():
            event = json.loads(line)
            if event["user"]["username"] == "alice" and event["requestURI"] == path and event["verb"] == "patch":
                return str(event["stageTimestamp"])
        return None
    return str(wait_for(recorded, 20, "alice's patch in the audit log"))


def test_the_plane_writes_the_audit_policy_it_was_started_with(plane: Plane) -> None:
    policy = (plane.state / "audit" / "policy.yaml").read_text()
    assert "level: Metadata" in policy and "resourcequotas" in policy and "kueue.x-k8s.io" in policy
    assert "scheduling.volcano.sh" in policy and "batch.volcano.sh" in policy and "device-plugin-config" in policy
    cmdline = next(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                   for pid in [(plane.state / "run" / "kube-apiserver.pid").read_text().strip()])
    assert b"--audit-policy-file" in cmdline and str(plane.audit_log).encode() in cmdline


def test_a_quota_change_between_two_runs_is_in_the_second_record_with_its_user(
        plane: Plane, setup: dict[str, Any], tmp_path: Path) -> None:
    first = gate(tmp_path, plane, "--hetero-snapshot")
    assert first["rc"] == 0, first["stdout"][-3000:]
    when = raise_quota(plane, setup)
    second = gate(tmp_path, plane, "--hetero-affected-from-cluster", str(first["bundle"]), "--hetero-audit-log",
                  str(plane.audit_log), "--hetero-change", "operator=alice; ticket=OPS-9; reason=quota; intended=b")
    assert second["evidence"] is not None, second["stdout"][-3000:] + second["stderr"][-3000:]
    record = second["evidence"]["cluster"]["change_record"]
    audit = record["audit"]
    assert (audit["source"], audit["fallback"], audit["file"]["path"]) == ("audit-log", None, str(plane.audit_log))
    assert audit["window"]["from"] == first["evidence"]["run"]["finished_at"]
    assert audit["covers_window"] is True and audit["log_span"]["first"] < audit["window"]["from"]
    [part] = audit["matrices"]
    quota = [c for c in part["changes"] if c["what"]["resource"] == "resourcequotas"]
    assert [(c["who"], c["what"], c["when"], c["pools"], c["undeclared_pools"]) for c in quota] == [(
        {"user": "alice", "groups": ["platform-ops", "system:authenticated"], "via": None, "manager": None},
        {"verb": "patch", "resource": "resourcequotas", "subresource": None, "namespace": setup["ns"],
         "name": "team-quota", "apiGroup": ""}, when, ["a", "b"], ["a"])]
    flagged = [f for f in part["findings"] if f["change"]["what"]["resource"] == "resourcequotas"]
    assert [(f["category"], f["pools"], f["status"], f["owner"]) for f in flagged] == [
        ("undeclared_change", ["a"], "failed", "platform")]
    assert flagged[0]["message"] == (f"alice (platform-ops) patch resourcequotas {setup['ns']}/team-quota at {when} "
                                     "changed pool(s) a that the change record does not name")
    assert (part["status"], audit["status"]) == ("failed", "failed")
    # an undeclared change fails the run: the verdict and the exit status signed and returned
    summary = second["evidence"]["summary"]
    assert (summary["verdict"], second["rc"], second["evidence"]["run"]["exit_status"]) == ("fail", 1, 1)
    assert summary["verdict_reason"] == ("the audited change record failed: a change to a pool that "
                                         "--hetero-change does not name")
    assert (audit["actors"], audit["operator_in_log"]) == (["alice"], True)
    # signed: the statement's predicate carries the same record, and the bundle verifies
    predicate = json.loads((second["bundle"] / "statement.intoto.json").read_text())["predicate"]
    assert predicate["cluster"]["change_record"]["audit"] == audit
    assert hetero("verify", str(second["bundle"]), "--key", str(tmp_path / "key.pub")).returncode == 0
    assert "audited changes (audit-log; who is the user)" in second["stdout"]
    assert f"alice (platform-ops) patch resourcequotas {setup['ns']}/team-quota at {when} (pools a, b)" in (
        second["stdout"])

    # declared for both pools: recorded, not flagged
    covered = gate(tmp_path, plane, "--hetero-affected-from-cluster", str(first["bundle"]), "--hetero-audit-log",
                   str(plane.audit_log), "--hetero-change", "operator=alice; ticket=OPS-9; intended=a,b")
    [part] = covered["evidence"]["cluster"]["change_record"]["audit"]["matrices"]
    assert [c["who"]["user"] for c in part["changes"] if c["what"]["resource"] == "resourcequotas"] == ["alice"]
    assert [f for f in part["findings"] if f["change"]["what"]["resource"] == "resourcequotas"] == []
    assert covered["evidence"]["summary"]["verdict"] != "fail" and covered["rc"] == 0, covered["stdout"][-3000:]


def test_without_audit_access_managed_fields_name_a_manager_and_say_so(
        plane: Plane, setup: dict[str, Any], tmp_path: Path) -> None:
    first = gate(tmp_path, plane, "--hetero-snapshot")
    assert first["rc"] == 0, first["stdout"][-3000:]
    raise_quota(plane, setup)
    second = gate(tmp_path, plane, "--hetero-affected-from-cluster", str(first["bundle"]), "--hetero-audit-log",
                  "managed-fields", "--hetero-change", "operator=alice; intended=b")
    assert second["evidence"] is not None, second["stdout"][-3000:] + second["stderr"][-3000:]
    audit = second["evidence"]["cluster"]["change_record"]["audit"]
    assert audit["source"] == "managedFields" and audit["file"] is None
    assert audit["fallback"] == "--hetero-audit-log managed-fields: no audit log access"
    assert audit["who"].startswith("manager: a field manager (the client's name, e.g. kubectl-patch), NOT a user")
    [part] = audit["matrices"]
    quota = [c for c in part["changes"] if c["what"]["resource"] == "resourcequotas"]
    assert [(c["who"], c["what"]["verb"], c["what"]["name"], c["undeclared_pools"]) for c in quota] == [
        ({"user": None, "groups": None, "via": None, "manager": "curl"}, "Update", "team-quota", ["a"])]
    assert [f["change"]["who"]["manager"] for f in part["findings"]
            if f["change"]["what"]["resource"] == "resourcequotas"] == ["curl"]
    assert "audited changes (managedFields; who is the manager)" in second["stdout"]
    assert (audit["actors"], audit["operator_in_log"]) == (["manager curl"], None)


def test_a_hostile_audit_log_is_refused_before_any_item_runs(
        plane: Plane, setup: dict[str, Any], tmp_path: Path) -> None:
    first = gate(tmp_path, plane, "--hetero-snapshot")
    hostile = tmp_path / "audit.log"
    hostile.write_bytes(plane.audit_log.read_bytes()[:4096].split(b"\n")[0] + b"\n\x00\x01binary\xff\n")
    second = gate(tmp_path, plane, "--hetero-affected-from-cluster", str(first["bundle"]), "--hetero-audit-log",
                  str(hostile))
    assert second["rc"] == 4 and second["bundle"] is None
    assert f"{hostile}:2: --hetero-audit-log: binary data (a NUL byte), not a JSON line" in second["stderr"]
    no_window = gate(tmp_path, plane, "--hetero-audit-log", str(plane.audit_log))
    assert no_window["rc"] == 4
    assert "--hetero-audit-log reads the changes made since an earlier bundle" in no_window["stderr"]
