"""Isolation between model runs in one resource × image container, on the real engine (a new user's attack).

Model ``m-poison`` runs first: it tries to write a ``.pth`` into every site-packages folder (patching
``json.dump`` to report accuracy 1.0), starts a ``setsid`` child that would outlive it, and leaves files
in ``/tmp`` and ``/dev/shm``. Model ``m-bad`` runs next in the same container and really writes accuracy
0.1; it also prints what it finds of the first run. Before the fix the bundle signed PASS for ``m-bad``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from dockerkit import ONNX_IMAGE, evidence, failure, items, leftovers, record

MODEL = r'''
import argparse, json, os, subprocess, site, sys
p = argparse.ArgumentParser(); p.add_argument("--data"); p.add_argument("--out"); p.add_argument("--mode")
a = p.parse_args()
rows = [line.split(",") for line in open(a.data).read().split()[1:]]
if a.mode == "poison":
    for d in site.getsitepackages():
        try:
            open(os.path.join(d, "zz-poison.pth"), "w").write(
                "import json; json.dump = (lambda _d: (lambda o, f, *a, **k: (o.get('metrics', {}).update("
                "accuracy=1.0) if isinstance(o, dict) and o.get('metrics') is not None else None, "
                "_d(o, f, *a, **k))[1]))(json.dump)\n")
            print("poisoned", d)
        except OSError as exc:
            print("refused", d, exc.strerror)
    subprocess.Popen(["sh", "-c", "sleep 300"], start_new_session=True)
    open("/tmp/left-by-poison", "w").write("x")
    open("/dev/shm/left-by-poison", "w").write("x")
else:
    seen = [pid for pid in os.listdir("/proc") if pid.isdigit()
            and b"sleep\x00300" in open(f"/proc/{pid}/cmdline", "rb").read()]
    print("found: sleep300=%s tmp=%s shm=%s" % (bool(seen), os.path.exists("/tmp/left-by-poison"),
                                                 os.path.exists("/dev/shm/left-by-poison")))
accuracy = 0.1 if a.mode == "bad" else 1.0
json.dump({"metrics": {"accuracy": accuracy}, "predictions": [int(r[1]) for r in rows]}, open(a.out, "w"))
'''
RULES = """apiVersion: pytest-hetero/v1
kind: AcceptanceRules
metadata: {name: r}
rules:
  - {name: acc, metric: accuracy, op: ">=", value: 0.9, self_reported: true}
"""


def project(root: Path) -> str:
    """Write the user's case (code, weights, data, rules) under ``root``; return the matrix text."""
    (root / "code").mkdir()
    (root / "code" / "model.py").write_text(MODEL)
    (root / "code" / "weights.bin").write_bytes(b"weights\n")
    (root / "data").mkdir()
    (root / "data" / "set.csv").write_text("x,label\n1,0\n2,1\n3,0\n4,1\n")
    (root / "data" / "rules.yaml").write_text(RULES)

    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    models = [{"name": f"m-{mode}", "version": "1.0.0", "uri": str(root / "code" / "weights.bin"),
               "sha256": sha(root / "code" / "weights.bin"), "code": str(root / "code"),
               "entrypoint": ["{python}", "{code}/model.py", "--data", "{dataset}", "--out", "{outputs}",
                              "--mode", mode]} for mode in ("poison", "bad")]
    spec = {"target": {"backend": "docker", "pull_policy": "never"},
            "owners": {"business": "risk-business", "model": "ml-team"},
            "layers": {"model": {"timeout": "60s"}},
            "resources": [{"name": "cpu", "type": "cpu", "vendor": "any", "requests": {"cpu": 1, "memory": "256Mi"}}],
            "images": [{"name": "img", "reference": ONNX_IMAGE, "for": ["cpu"]}],
            "models": models,
            "datasets": [{"name": "d1", "version": "1.0.0", "uri": str(root / "data" / "set.csv"),
                          "sha256": sha(root / "data" / "set.csv"), "acceptance": str(root / "data" / "rules.yaml")}]}
    return json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix",
                       "metadata": {"name": "dpoison"}, "spec": spec})


def test_a_model_cannot_poison_the_next_model_in_the_same_container(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    pytester.makefile(".matrix.yaml", dpoison=project(pytester.path))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id, "--hetero-keep")
    ev = evidence(pytester)
    it = items(ev)
    poison, bad = it["cpu::img::m-poison@d1::model"], it["cpu::img::m-bad@d1::model"]
    assert poison["status"] == "passed"
    ran = record(poison, "model.run")
    # the root file system is read-only: the .pth could not be written anywhere
    assert "poisoned" not in ran["stdout"]["text"] and "refused" in ran["stdout"]["text"]
    isolation = ran["isolation"]
    assert (isolation["root_filesystem"], isolation["confined"], isolation["reset_after"]) == ("read-only", True, "done")
    # the next model found nothing of the first run: no process, no file
    second = record(bad, "model.run")
    assert "found: sleep300=False tmp=False shm=False" in second["stdout"]["text"]
    assert second["isolation"]["reset_before"] is False
    assert failure(it["cpu::img::m-bad@d1::business"]) == (
        "failed", "acceptance_failed", "risk-business",
        "1 of 1 acceptance rules failed: acc: expected accuracy >= 0.9, observed 0.1 "
        "(self-reported, not verified)")
    assert ev["summary"]["verdict"] == "fail"
    # after the last run nothing of the models is left running in the kept container
    kept = [c for c in engine.containers(filters={"label": f"pytest-hetero.run-id={run_id}"})]
    assert len(kept) == 1
    top = engine.top(kept[0]["Id"], ps_args="-o pid,args")["Processes"]
    assert not [p for p in top if "sleep 300" in " ".join(p)], top
    assert engine.inspect_container(kept[0]["Id"])["HostConfig"]["ReadonlyRootfs"] is True
    assert leftovers(engine, run_id)  # kept on request; the run_id fixture removes them


DEV_MODEL = r'''
import argparse, json, os, signal, sys, time
p = argparse.ArgumentParser(); p.add_argument("--out"); p.add_argument("--mode")
a = p.parse_args()
accuracy = 1.0
if a.mode == "poison":
    os.mkdir("/dev/poison")
    open("/dev/poison/accuracy", "w").write("0.99")
    os.symlink("/dev/poison/accuracy", "/dev/poison-link")
    open("/dev/mqueue/poison", "w").close()  # a POSIX message queue (mq_open's file in the mqueue fs)
elif a.mode == "victim":
    found = {"dir": os.path.isdir("/dev/poison"), "link": os.path.islink("/dev/poison-link"),
             "mqueue": os.path.exists("/dev/mqueue/poison")}
    print("found:", json.dumps(found, sort_keys=True))
    accuracy = float(open("/dev/poison/accuracy").read()) if found["dir"] else 0.5
elif a.mode == "killer":
    os.kill(1, signal.SIGTERM)
    time.sleep(20)
json.dump({"metrics": {"accuracy": accuracy}}, open(a.out, "w"))
'''


def test_dev_entries_of_every_type_and_mqueues_do_not_reach_the_next_model_and_killing_pid_1_is_the_killers_fault(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """Before (main): a folder and a link in /dev and a queue in /dev/mqueue survived the reset, the victim
    read accuracy 0.99 there and passed (its own: 0.5), and the evidence claimed "regular files, FIFOs and
    sockets in /dev removed"; a model that sent SIGTERM to PID 1 made the *next* model fail
    ``container_exited`` (platform). After: the victim finds nothing and fails on its own 0.5; the killer
    fails ``container_stopped_by_run`` (algorithm); the model after it runs in a new container and passes."""
    code = pytester.path / "code"
    code.mkdir()
    (code / "model.py").write_text(DEV_MODEL)
    (code / "weights.bin").write_bytes(b"weights\n")
    (pytester.path / "set.csv").write_text("x,label\n1,0\n")
    (pytester.path / "rules.yaml").write_text(RULES)

    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    models = [{"name": f"m-{mode}", "version": "1.0.0", "uri": str(code / "weights.bin"),
               "sha256": sha(code / "weights.bin"), "code": str(code),
               "entrypoint": ["{python}", "{code}/model.py", "--out", "{outputs}", "--mode", mode]}
              for mode in ("poison", "victim", "killer", "after")]
    spec = {"target": {"backend": "docker", "pull_policy": "never"},
            "owners": {"business": "risk-business", "model": "ml-team"},
            "layers": {"model": {"timeout": "60s"}},
            "resources": [{"name": "cpu", "type": "cpu", "vendor": "any", "requests": {"cpu": 1, "memory": "256Mi"}}],
            "images": [{"name": "img", "reference": ONNX_IMAGE, "for": ["cpu"]}],
            "models": models,
            "datasets": [{"name": "d1", "version": "1.0.0", "uri": str(pytester.path / "set.csv"),
                          "sha256": sha(pytester.path / "set.csv"), "acceptance": str(pytester.path / "rules.yaml")}]}
    pytester.makefile(".matrix.yaml", ddev=json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix",
                                                       "metadata": {"name": "ddev"}, "spec": spec}))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    it = items(ev)
    victim = record(it["cpu::img::m-victim@d1::model"], "model.run")
    assert 'found: {"dir": false, "link": false, "mqueue": false}' in victim["stdout"]["text"]
    assert failure(it["cpu::img::m-victim@d1::business"]) == (
        "failed", "acceptance_failed", "risk-business",
        "1 of 1 acceptance rules failed: acc: expected accuracy >= 0.9, observed 0.5 "
        "(self-reported, not verified)")
    assert victim["isolation"]["between_runs"] == [
        "kill -9 -1 until no process outside PID 1's session is left", "/tmp and /dev/shm emptied",
        "every /dev entry not there before the first model run removed, whatever its type",
        "POSIX message queues (/dev/mqueue) removed", "SysV IPC objects removed (ipcrm)"]
    killer = it["cpu::img::m-killer@d1::model"]
    assert failure(killer)[:3] == ("failed", "container_stopped_by_run", "ml-team")  # algorithm: the model team
    after = it["cpu::img::m-after@d1::model"]
    assert after["status"] == "passed" and it["cpu::img::m-after@d1::business"]["status"] == "passed"
    assert record(after, "model.container") == {
        "note": "the container was stopped by an earlier run (model m-killer on dataset d1); started again here"}


LATE_MODEL = r'''
import argparse, ctypes, json, os, signal, struct
p = argparse.ArgumentParser(); p.add_argument("--out"); p.add_argument("--mode")
a = p.parse_args()
json.dump({"metrics": {"accuracy": 1.0}}, open(a.out, "w"))
if a.mode == "after":  # the documented gap: PID 1 is the run's own user, and the reset keeps it
    libc = ctypes.CDLL(None, use_errno=True)
    attached = libc.ptrace(16, 1, 0, 0) == 0  # PTRACE_ATTACH
    if attached:
        os.waitpid(1, 0)
        libc.ptrace(17, 1, 0, 0)  # PTRACE_DETACH
    print("ptrace PID 1:", "attached" if attached else os.strerror(ctypes.get_errno()))
if a.mode == "late-killer":
    libc = ctypes.CDLL(None, use_errno=True)
    watch = libc.inotify_init1(os.O_CLOEXEC)
    assert libc.inotify_add_watch(watch, a.out.encode(), 0x10) >= 0  # IN_CLOSE_NOWRITE: a reader closed it
    if os.fork() == 0:
        # the child outlives the exec (its output closed, so the exec can end): once the gate has read the
        # outputs (after its check of the container), it stops PID 1, before the reset kills it
        os.setsid()
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.read(watch, 4096)
        os.kill(1, signal.SIGTERM)
        os._exit(0)
'''


def test_a_model_that_stops_pid_1_after_its_exec_returned_is_failed_itself_not_the_next_one(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """Before: a model whose child stopped the container's PID 1 an instant after the model's exec returned (once
    the gate had checked the container and read the outputs, before the reset) passed; the next model got a new
    container, noted as stopped by "a model run that ended as it stopped it". After: the gate looks at the
    container again once the reset has killed everything the run left: the late killer fails
    ``container_stopped_by_run`` (algorithm, its model team) with that said, and the next model runs in a new
    container whose note names the killer, and passes on its own."""
    code = pytester.path / "code"
    code.mkdir()
    (code / "model.py").write_text(LATE_MODEL)
    (code / "weights.bin").write_bytes(b"weights\n")
    (pytester.path / "set.csv").write_text("x,label\n1,0\n")
    (pytester.path / "rules.yaml").write_text(RULES)

    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    models = [{"name": f"m-{mode}", "version": "1.0.0", "uri": str(code / "weights.bin"),
               "sha256": sha(code / "weights.bin"), "code": str(code),
               "entrypoint": ["{python}", "{code}/model.py", "--out", "{outputs}", "--mode", mode]}
              for mode in ("late-killer", "after")]
    spec = {"target": {"backend": "docker", "pull_policy": "never"},
            "owners": {"business": "risk-business", "model": "ml-team"},
            "layers": {"model": {"timeout": "60s"}},
            "resources": [{"name": "cpu", "type": "cpu", "vendor": "any", "requests": {"cpu": 1, "memory": "256Mi"}}],
            "images": [{"name": "img", "reference": ONNX_IMAGE, "for": ["cpu"]}],
            "models": models,
            "datasets": [{"name": "d1", "version": "1.0.0", "uri": str(pytester.path / "set.csv"),
                          "sha256": sha(pytester.path / "set.csv"), "acceptance": str(pytester.path / "rules.yaml")}]}
    pytester.makefile(".matrix.yaml", dlate=json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix",
                                                        "metadata": {"name": "dlate"}, "spec": spec}))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id)
    it = items(evidence(pytester))
    killer = it["cpu::img::m-late-killer@d1::model"]
    category, owner, message = failure(killer)[1:]
    assert (killer["status"], category, owner) == ("failed", "container_stopped_by_run", "ml-team")
    assert "after its exec returned (exit 0)" in message, message
    assert it["cpu::img::m-late-killer@d1::business"]["status"] == "blocked"
    after = it["cpu::img::m-after@d1::model"]
    assert after["status"] == "passed" and it["cpu::img::m-after@d1::business"]["status"] == "passed"
    assert record(after, "model.container") == {
        "note": "the container was stopped by an earlier run (model m-late-killer on dataset d1); started again here"}
    # not fixed, and said so in every run's record: a run can trace PID 1, which outlives the reset
    ran = record(after, "model.run")
    assert "ptrace PID 1: attached" in ran["stdout"]["text"]
    assert any("ptrace them or write their memory" in gap for gap in ran["isolation"]["gaps"])


SWAP_MODEL = r'''
import json, os, sys, time
p_out = sys.argv[sys.argv.index("--out") + 1]
delay = float(sys.argv[-1])
json.dump({"metrics": {"accuracy": 1.0}}, open(p_out, "w"))
if os.fork() == 0:
    # left behind: once the gate's reader of the outputs starts (an exec of sh naming the path), the file is
    # swapped for a FIFO, after the reader's checks and before its copy
    os.setsid()
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    me, deadline = str(os.getpid()), time.monotonic() + 60
    while time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid == me:
                continue
            try:
                argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if argv[:2] == [b"/bin/sh", b"-c"] and p_out.encode() in argv:
                time.sleep(delay)
                os.mkfifo(p_out + ".fifo")
                os.rename(p_out + ".fifo", p_out)
                time.sleep(120)
        time.sleep(0.0005)
    os._exit(0)
'''


def test_outputs_swapped_for_a_fifo_while_the_gate_reads_them_never_hang_the_gate(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """Before: a process the model left swapped its outputs file for a FIFO between the reader's checks and its
    ``cat``; the reader waited forever and so did the gate (killed by this test's 150 s bound; the engine client's
    120 s read timeout would have made it a harness error, owned by platform). After: the read is bounded
    (``head -c``, and a 30 s watchdog that kills the run's processes): each swapper ends passed (its copy came
    first) or failed ``bad_outputs`` (algorithm), never an error, and the session ends."""
    code = pytester.path / "code"
    code.mkdir()
    (code / "model.py").write_text(SWAP_MODEL)
    (code / "weights.bin").write_bytes(b"weights\n")
    (pytester.path / "set.csv").write_text("x,label\n1,0\n")
    (pytester.path / "rules.yaml").write_text(RULES)

    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    delays = ("0.001", "0.002", "0.003")
    models = [{"name": f"m-swap{n}", "version": "1.0.0", "uri": str(code / "weights.bin"),
               "sha256": sha(code / "weights.bin"), "code": str(code),
               "entrypoint": ["{python}", "{code}/model.py", "--out", "{outputs}", delay]}
              for n, delay in enumerate(delays)]
    spec = {"target": {"backend": "docker", "pull_policy": "never"},
            "owners": {"business": "risk-business", "model": "ml-team"},
            "layers": {"model": {"timeout": "60s"}},
            "resources": [{"name": "cpu", "type": "cpu", "vendor": "any", "requests": {"cpu": 1, "memory": "256Mi"}}],
            "images": [{"name": "img", "reference": ONNX_IMAGE, "for": ["cpu"]}],
            "models": models,
            "datasets": [{"name": "d1", "version": "1.0.0", "uri": str(pytester.path / "set.csv"),
                          "sha256": sha(pytester.path / "set.csv"), "acceptance": str(pytester.path / "rules.yaml")}]}
    pytester.makefile(".matrix.yaml", dswap=json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix",
                                                        "metadata": {"name": "dswap"}, "spec": spec}))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id,
                                           "-k", "model", timeout=150)
    assert result.ret in (0, 1), result.stdout.str()[-3000:]
    it = items(evidence(pytester))
    for n in range(len(delays)):
        item = it[f"cpu::img::m-swap{n}@d1::model"]
        assert item["status"] == "passed" or failure(item)[:3] == ("failed", "bad_outputs", "ml-team"), item["failure"]
