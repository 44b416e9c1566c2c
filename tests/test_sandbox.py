"""The code under test cannot touch the evidence (issue 15, items 1 and 3): real attacks, run by real
models through the real plugin on the local backend, in a real bubblewrap sandbox.

Each attacking model is told the bundle folder, the signing key's path and the gate's pid (stronger
than the issue's ``evil.py``, which had to find them in ``/proc/<ppid>/cmdline``), tries every way
in, and writes what each attempt got into its own outputs, which the bundle keeps.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from support import DIGITS, MODEL_SHA, evidence_of, gone, statuses, survivors

from pytest_hetero.bundle.signing import generate_keypair

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

EVIL = """\
import json, os, sys, time
open(sys.argv[1],"w").write('{"metrics": {"accuracy": 1}}')
a=open(f"/proc/{os.getppid()}/cmdline").read().split("\\0")
b=os.path.join(a[a.index("--hetero-report-dir")+1], a[a.index("--hetero-run-id")+1])
open(os.path.join(b,"planted.txt"),"w").write("x\\n")
print("gate key readable:", open(a[a.index("--hetero-sign-key")+1]).read().startswith("-----BEGIN PRIVATE KEY"))
"""
"""The issue's evil.py, first half verbatim (its journal-forging child is in ATTACK, told the paths)."""

ATTACK = """\
import json, os, signal, sys, time
out, bundle, key, gate, marker, ending = sys.argv[1:7]
seen = {}
def attempt(name, fn):
    try:
        seen[name] = "ok: " + repr(fn())[:120]
    except Exception as exc:
        seen[name] = "refused: " + type(exc).__name__
attempt("read_key", lambda: open(key).read()[:40])
attempt("write_bundle", lambda: open(os.path.join(bundle, "planted.txt"), "w").write("x\\n"))
attempt("append_journal", lambda: open(os.path.join(bundle, "journal.jsonl"), "a").write("{}\\n"))
attempt("list_bundle", lambda: os.listdir(bundle))
attempt("read_gate_cmdline", lambda: open(f"/proc/{gate}/cmdline").read())
attempt("signal_gate", lambda: os.kill(int(gate), 0))
attempt("signal_everyone", lambda: os.kill(-1, 0))
attempt("docker_socket", lambda: open("/var/run/docker.sock", "rb"))
attempt("write_tmp_outside", lambda: open("/work/hetero-planted-" + marker, "w"))
seen["visible_processes"] = {p: open(f"/proc/{p}/cmdline", "rb").read().replace(b"\\0", b" ").decode()[:60]
                             for p in os.listdir("/proc") if p.isdigit()}
seen["env"] = sorted(os.environ)
seen["uid"] = os.getuid()
seen["status"] = {line.split(":")[0]: line.split(":", 1)[1].strip() for line in open("/proc/self/status")
                  if line.startswith(("Cap", "NoNewPrivs"))}
if os.fork() == 0:  # a child that leaves the session, ignores SIGTERM and keeps forging the journal
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c",
                 "import signal, sys, time\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
                 "for _ in range(6000):\\n"
                 "    try: open(sys.argv[2] + '/journal.jsonl', 'a').write('{}\\\\n')\\n"
                 "    except OSError: pass\\n"
                 "    time.sleep(0.1)", marker, bundle])
    os._exit(0)
time.sleep(0.3)
json.dump({"metrics": {"accuracy": 1}, "attack": seen}, open(out, "w"))
print("attack done")
if ending == "hang":
    time.sleep(600)
"""

RULES = """\
apiVersion: pytest-hetero/v1
kind: AcceptanceRules
rules:
  - {name: accuracy-floor, metric: accuracy, op: ">=", value: 0.5, self_reported: true}
"""


@pytest.fixture
def open_folder() -> Any:
    """A folder other users can read (pytest's temporary folders are 0700, and any pytest session
    starting on the machine makes them so again): the sandbox user must read a matrix folder to run
    as itself."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="hetero-sandbox-test-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def model(name: str, entrypoint: list[str]) -> dict[str, Any]:
    return {"name": name, "version": "1", "uri": str(DIGITS / "model" / "digits-logreg-1.0.0.onnx"),
            "sha256": MODEL_SHA, "code": ".", "entrypoint": entrypoint}


def write_matrix(root: Path, models: list[dict[str, Any]], python: str = "python:current",
                 timeout: str = "60s") -> None:
    (root / "rules.yaml").write_text(RULES)
    (root / "attack.py").write_text(ATTACK)
    (root / "evil.py").write_text(EVIL)
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "t"},
           "spec": {"target": {"backend": "local"}, "layers": {"model": {"timeout": timeout}},
                    "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
                    "images": [{"name": "py", "reference": python}],
                    "models": models,
                    "datasets": [{"name": "d", "version": "1", "uri": str(DIGITS / "data" / "digits-test-1.0.0.csv"),
                                  "sha256": "3678e2fa8f107ffa5d8518cc07a46b9e4ce67e89d65b2f88e4c391638d965bfb",
                                  "acceptance": "rules.yaml"}]}}
    (root / "m.matrix.yaml").write_text(json.dumps(doc))


def attacks(bundle: Path, model_name: str) -> dict[str, Any]:
    out = bundle / "artifacts" / "cpu-host" / "py" / f"{model_name}_d" / "model" / "outputs.json"
    if not out.exists():
        out = next(bundle.rglob(f"*{model_name}*/model/outputs.json"))
    return dict(json.loads(out.read_text())["attack"])


def isolation_of(evidence: dict[str, Any], model_name: str) -> dict[str, Any]:
    item = next(i for i in evidence["items"] if i["nodeid"].endswith(f"{model_name}@d::model"))
    run = next(r for r in item["records"] if r["kind"] == "model.run")
    return dict(run["data"]["isolation"])


@pytest.mark.parametrize("mode", ["session", "per-run"])
@pytest.mark.parametrize("identity", ["sandbox-user", "copied-input"])
def test_a_model_cannot_read_the_key_write_the_bundle_or_see_the_gate(pytester: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      identity: str, mode: str,
                                                                      open_folder: Path) -> None:
    """The issue's attack (evil.py, then a model that forges bad's journal line, plants a file and keeps a
    SIGTERM-proof child) on a matrix of evil, attack, bad (exits 1 after 1 s) and slow (3 s, good outputs).
    As the sandbox user, with inputs readable to it and with a matrix folder it cannot read (pytest's 0700
    folder: the run sees a readable copy, never runs as uid 0): no capability in any set and
    ``no_new_privs``, the gate's own interpreter under 0700 /root bound read-only; in the session's sandbox
    (runs forked by one bubblewrap, issue 20) and with a bubblewrap per run (``HETERO_SANDBOX_SHARED=off``).
    bad stays FAILED everywhere, nothing planted exists or is signed."""
    if mode == "per-run":
        monkeypatch.setenv("HETERO_SANDBOX_SHARED", "off")
    root = pytester.path
    marker = f"hetero-evil-{uuid.uuid4().hex}"
    python = "python:current"  # under /root (0700): its prefix is bound read-only for the sandbox user
    if identity == "sandbox-user":
        root = open_folder
    generate_keypair(root / "k.key", root / "k.pub")
    monkeypatch.setenv("HETERO_SIGN_KEY", str(root / "k.key"))
    monkeypatch.setenv("SOME_API_TOKEN", "tok-not-for-models-4821")
    bundle = root / "rep" / "r1"
    write_matrix(root, [
        model("evil", ["{python}", "{code}/evil.py", "{outputs}"]),
        model("attack", ["{python}", "{code}/attack.py", "{outputs}", str(bundle), str(root / "k.key"),
                         str(os.getpid()), marker, "pass"]),
        model("bad", ["{python}", "-c", "import time, sys; time.sleep(1); sys.exit(1)"]),
        model("slow", ["{python}", "-c", "import json, sys, time; time.sleep(3); "
                                         "json.dump({{'metrics': {{'accuracy': 0.9}}}}, open(sys.argv[1], 'w'))",
                       "{outputs}"]),
    ], python=python)
    # startup deselected: the system interpreter the sandbox user can read has no ONNX Runtime
    result = pytester.runpytest(str(root / "m.matrix.yaml"), "-p", "no:cacheprovider",
                                "--hetero-report-dir", str(root / "rep"),
                                "--hetero-run-id", "r1", "--hetero-sign-key", str(root / "k.key"),
                                "-k", "model or business")
    result.stdout.fnmatch_lines(["*FAILED*bad@d::model*"])
    assert "gate key readable: True" not in result.stdout.str()
    evidence = json.loads((bundle / "evidence.json").read_text())
    got = statuses(evidence)
    assert (got["cpu-host::py::bad@d::model"], got["cpu-host::py::bad@d::business"]) == ("failed", "blocked")
    assert got["cpu-host::py::evil@d::model"] == "failed"  # it found no gate command line to read
    assert (got["cpu-host::py::slow@d::model"], got["cpu-host::py::attack@d::business"]) == ("passed", "passed")
    assert evidence["summary"]["verdict"] == "fail"

    seen = attacks(bundle, "attack")
    for name in ("read_key", "write_bundle", "append_journal", "read_gate_cmdline", "signal_gate",
                 "docker_socket", "write_tmp_outside"):
        assert seen[name].startswith("refused"), (name, seen[name])
    assert seen["list_bundle"] == "refused: PermissionError"  # an empty tmpfs (mode 0000) over the report folder
    # a PID namespace of its own: bwrap's init as 1, the model, its children; not the gate (this process)
    visible = seen["visible_processes"]
    assert str(os.getpid()) not in visible and max(int(p) for p in visible) < 20, visible
    assert not any("test_sandbox.py" in cmd for cmd in visible.values()), visible
    caps = {k: v for k, v in seen["status"].items() if k.startswith("Cap")}
    assert set(caps) == {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} and set(caps.values()) == {"0" * 16}, caps
    assert seen["status"]["NoNewPrivs"] == "1"
    assert "HETERO_SIGN_KEY" not in seen["env"] and "SOME_API_TOKEN" not in seen["env"]
    assert {"PATH", "HETERO_EXECUTION_PROVIDER", "HOME", "TMPDIR"} <= set(seen["env"])
    iso = isolation_of(evidence, "attack")
    assert iso["confined"] is True and iso["mechanism"] == "bubblewrap"
    if os.geteuid() != 0:  # a gate run by an ordinary user (issue 29): the run keeps its uid in a user namespace
        assert seen["uid"] == os.geteuid() != 0
        assert iso["identity"] == f"uid {os.geteuid()} (the gate's user, unprivileged) in a user namespace"
        assert iso["copied"] == []
    elif identity == "sandbox-user":
        assert seen["uid"] != 0 and iso["identity"].startswith("hetero-sandbox (uid ")
        assert iso["copied"] == []
    else:
        assert seen["uid"] != 0 and iso["identity"].startswith("hetero-sandbox (uid ")
        assert iso["copied"] == [f"{root.resolve()} (copied: hetero-sandbox cannot read {root.resolve()})"]
    assert evidence["untested"]["not_proven"] == []

    assert gone(marker) == []  # the SIGTERM-proof setsid grandchild died with its run
    assert not (bundle / "planted.txt").exists() and not list(Path("/work").glob(f"hetero-planted-{marker}"))
    journal = [json.loads(line) for line in (bundle / "journal.jsonl").read_text().splitlines()]
    assert all(line != {} for line in journal)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert not any("planted" in json.dumps(entry) for entry in manifest.get("files", manifest))
    verify = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "verify", str(bundle), "--key",
                             str(root / "k.pub")], capture_output=True, text=True, check=False, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.parametrize("shared", ["on", "off"])
@pytest.mark.parametrize("ending", ["pass", "hang"])
def test_no_child_of_the_model_survives_its_item(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                 ending: str, shared: str) -> None:
    """Forked, setsid and SIGTERM-ignoring children die when the model passes and when it is killed
    at its timeout: in the session's sandbox and with a bubblewrap per run (``HETERO_SANDBOX_SHARED=off``; as
    root the run, switched to the sandbox user, outlived its killed bubblewrap until the gate killed the run
    itself)."""
    monkeypatch.setenv("HETERO_SANDBOX_SHARED", shared)
    marker = f"hetero-child-{uuid.uuid4().hex}"
    bundle = pytester.path / "reports" / "r1"
    write_matrix(pytester.path, [model("attack", ["{python}", "{code}/attack.py", "{outputs}", str(bundle),
                                                  "/nonexistent", "1", marker, ending])],
                 timeout="3s" if ending == "hang" else "60s")
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", "r1", "-k", "model")
    if ending == "hang":
        result.assert_outcomes(failed=1)
        evidence = evidence_of(pytester)
        item = next(i for i in evidence["items"] if i["layer"] == "model")
        assert item["failure"]["category"] == "timeout"
    else:
        result.assert_outcomes(passed=1)
    assert gone(marker) == []


def test_kill_9_of_pytest_kills_the_model_tree_and_leaves_no_raw_output(tmp_path: Path) -> None:
    """pytest killed with SIGKILL mid-run: the model and its escaped, SIGTERM-proof children die with it;
    the run folder it left holds no stdout/stderr (they only ever went through pipes) and the next
    backend start removes it."""
    marker = f"hetero-kill9-{uuid.uuid4().hex}"
    secret = "printed-secret-" + uuid.uuid4().hex
    write_matrix(tmp_path, [model("attack", ["{python}", "-c",
                                             f"import os, subprocess, sys; print('{secret}', flush=True); "
                                             f"print('{secret}', file=sys.stderr, flush=True); "
                                             "subprocess.Popen([sys.executable, '{code}/attack.py', sys.argv[1], "
                                             f"'/x', '/x', '1', '{marker}', 'hang'], start_new_session=True); "
                                             "import time; time.sleep(600)", "{outputs}"])])
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "m.matrix.yaml",
                             "--hetero-run-id", "r1", "-k", "model"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not survivors(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert survivors(marker), "the model never started its children"
        left = sorted(Path("/tmp").glob(f"hetero-run-{proc.pid}-*"))
        assert left
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert gone(marker) == []
    for folder in left:
        if folder.name.endswith("-stage"):  # the readable copy of the 0700 matrix folder: inputs, not output
            continue
        for path in folder.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
    from pytest_hetero.backends.local import sweep_run_folders

    removed = sweep_run_folders()
    assert set(left) <= set(removed) and not any(p.exists() for p in left)


@pytest.mark.parametrize(("writer", "category"), [
    ("sys.stdout.buffer.write(b'x' * (40 << 20)); open(o, 'w').write('{{}}')", None),
    ("open(o, 'wb').write(b' ' * (80 << 20))", "outputs_too_large"),
    ("f = open(o, 'wb'); f.truncate(3 << 30); f.close()", "outputs_too_large"),
    ("os.symlink('/etc/hostname', o)", "bad_outputs"),
    ("os.mkfifo(o)", "bad_outputs"),
    ("open(o + '.x', 'w').write('{{}}'); os.link(o + '.x', o)", "bad_outputs"),
])
def test_streams_are_capped_and_outputs_checked_before_reading(pytester: pytest.Pytester, writer: str,
                                                               category: str | None) -> None:
    """40 MiB of stdout is kept as 16 MiB head+tail with its full size and sha256; an 80 MiB or a
    3 GiB sparse outputs file is refused by its size without being read; a symlink, FIFO or hard
    link in place of the outputs file is refused without following or blocking on it."""
    write_matrix(pytester.path, [model("m", ["{python}", "-c", f"import os, sys; o = sys.argv[1]; {writer}",
                                             "{outputs}"])])
    started = time.monotonic()
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", "r1", "-k", "model")
    assert time.monotonic() - started < 60
    evidence = evidence_of(pytester)
    item = next(i for i in evidence["items"] if i["layer"] == "model")
    run = next(r for r in item["records"] if r["kind"] == "model.run")["data"]
    if category is None:
        result.assert_outcomes(passed=1)
        import hashlib

        assert run["stdout_bytes"] == 40 << 20 and run["stdout_capped"] is True
        assert run["stdout_sha256"] == hashlib.sha256(b"x" * (40 << 20)).hexdigest()
        art = next(a for a in item["artifacts"] if a["name"] == "stdout.txt")
        assert art["size"] <= (16 << 20) + 200
    else:
        result.assert_outcomes(failed=1)
        assert item["failure"]["category"] == category


def test_unconfined_run_is_said_in_evidence_and_verdict(pytester: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no sandbox can be made (here: HETERO_SANDBOX=off), the model still runs, its record says
    unconfined and why, the untested scope lists it, and the verdict cannot be PASS."""
    monkeypatch.setenv("HETERO_SANDBOX", "off")
    write_matrix(pytester.path, [model("m", ["{python}", "-c", "import sys; open(sys.argv[1], 'w').write("
                                             "'{{\"metrics\": {{\"accuracy\": 1}}}}')", "{outputs}"])])
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", "r1")
    result.assert_outcomes(passed=4, skipped=1)
    evidence = evidence_of(pytester)
    iso = isolation_of(evidence, "m")
    assert (iso["mechanism"], iso["confined"], iso["reason"]) == ("none", False, "HETERO_SANDBOX=off")
    assert [p["part"] for p in evidence["untested"]["not_proven"]] == ["isolation of the code under test"]
    assert evidence["summary"]["verdict"] == "incomplete"
    result.stdout.fnmatch_lines(["*verdict: INCOMPLETE*"])


def test_environment_is_checked_once_per_interpreter_per_session(pytester: pytest.Pytester) -> None:
    """Three images on one interpreter: three startup items, one question to the interpreter."""
    write_matrix(pytester.path, [model("m", ["{python}", "-c", "import sys; open(sys.argv[1], 'w').write("
                                             "'{{\"metrics\": {{\"accuracy\": 1}}}}')", "{outputs}"])])
    doc = json.loads((pytester.path / "m.matrix.yaml").read_text())
    doc["spec"]["images"] = [{"name": f"py{i}", "reference": "python:current"} for i in range(3)]
    (pytester.path / "m.matrix.yaml").write_text(json.dumps(doc))
    pytester.makeconftest("""
        import pytest_hetero.backends.local as local
        calls = []
        real = local.LocalBackend._ask
        def counted(self, python, step):
            calls.append(str(python))
            return real(self, python, step)
        local.LocalBackend._ask = counted
        def pytest_sessionfinish(session):
            print("ENVIRONMENT QUESTIONS", len(calls))
    """)
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", "r1", "-s", "-k", "startup")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*ENVIRONMENT QUESTIONS 1*"])
    records = [r["data"] for i in evidence_of(pytester)["items"] for r in i["records"]
               if r["kind"] == "startup.environment"]
    assert len(records) == 3 and len({r["digest"] for r in records}) == 1


def test_bwrap_is_installed_here() -> None:
    """The suite runs where the sandbox can be made (tests/run.sh installs bubblewrap); a missing
    bwrap fails here rather than silently testing the unconfined path."""
    assert shutil.which("bwrap"), "install bubblewrap: apt-get install bubblewrap"
