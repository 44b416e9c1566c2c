"""Isolation between model runs in one resource × image container, on the real engine (a new user's attack).

Model ``m-poison`` runs first: it tries to write a ``.pth`` into every site-packages folder (patching
``json.dump`` to report accuracy 1.0), starts a ``setsid`` child that would outlive it, and leaves files
in ``/tmp`` and ``/dev/shm``. Model ``m-bad`` runs next in the same container and really writes accuracy
0.1; it also prints what it finds of the first run. Before the fix the bundle signed PASS for ``m-bad``.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from dockerkit import COMBO, DIGITS, ONNX_IMAGE, docker_matrix, evidence, failure, items, leftovers, record

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


def adversary_matrix(pytester: pytest.Pytester, name: str, source: str, runs: dict[str, list[str]]) -> None:
    """Write ``<name>.matrix.yaml`` for the Docker engine under ``pytester.path``: a code folder whose
    ``model.py`` is ``source``, one model ``m-<key>`` per entry of ``runs`` (its entrypoint ``{python}
    {code}/model.py --out {outputs}`` followed by the entry's arguments), one image, and dataset ``d1`` (one
    row) judged by :data:`RULES`."""
    code = pytester.path / "code"
    code.mkdir()
    (code / "model.py").write_text(source)
    (code / "weights.bin").write_bytes(b"weights\n")
    (pytester.path / "set.csv").write_text("x,label\n1,0\n")
    (pytester.path / "rules.yaml").write_text(RULES)

    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    models = [{"name": f"m-{key}", "version": "1.0.0", "uri": str(code / "weights.bin"),
               "sha256": sha(code / "weights.bin"), "code": str(code),
               "entrypoint": ["{python}", "{code}/model.py", "--out", "{outputs}", *args]}
              for key, args in runs.items()]
    spec = {"target": {"backend": "docker", "pull_policy": "never"},
            "owners": {"business": "risk-business", "model": "ml-team"},
            "layers": {"model": {"timeout": "60s"}},
            "resources": [{"name": "cpu", "type": "cpu", "vendor": "any", "requests": {"cpu": 1, "memory": "256Mi"}}],
            "images": [{"name": "img", "reference": ONNX_IMAGE, "for": ["cpu"]}],
            "models": models,
            "datasets": [{"name": "d1", "version": "1.0.0", "uri": str(pytester.path / "set.csv"),
                          "sha256": sha(pytester.path / "set.csv"), "acceptance": str(pytester.path / "rules.yaml")}]}
    pytester.makefile(".matrix.yaml", **{name: json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix",
                                                            "metadata": {"name": name}, "spec": spec})})


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
    ``container_exited`` (platform). After: the victim finds nothing and fails on its own 0.5; the killer's
    signal is refused (PID 1 runs as another uid, and no exec of the container has CAP_KILL), so the killer
    fails on its own exit (algorithm) and the model after it passes in the same container."""
    adversary_matrix(pytester, "ddev", DEV_MODEL, {mode: ["--mode", mode] for mode in ("poison", "victim", "killer", "after")})
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
    assert failure(killer) == ("failed", "nonzero_exit", "ml-team",  # algorithm: the model team
                               "entrypoint exited with 1: PermissionError: [Errno 1] Operation not permitted")
    after = it["cpu::img::m-after@d1::model"]
    assert after["status"] == "passed" and it["cpu::img::m-after@d1::business"]["status"] == "passed"
    assert record(after, "model.run")["container_id"] == record(killer, "model.run")["container_id"]
    assert "model.container" not in [r["kind"] for r in after["records"]]


LATE_MODEL = r'''
import argparse, ctypes, json, os, signal, struct
p = argparse.ArgumentParser(); p.add_argument("--out"); p.add_argument("--mode")
a = p.parse_args()
json.dump({"metrics": {"accuracy": 1.0}}, open(a.out, "w"))
if a.mode == "after":  # PID 1 runs as another, unprivileged uid, and the run has no CAP_SYS_PTRACE
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


def test_a_model_cannot_stop_or_trace_pid_1_even_after_its_exec_returned(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """Before: a model whose child stopped the container's PID 1 an instant after the model's exec returned (once
    the gate had checked the container and read the outputs, before the reset) passed; the next model got a new
    container, noted as stopped by "a model run that ended as it stopped it"; and any run could ptrace PID 1.
    After: PID 1 runs as another, unprivileged uid and no exec of the container has a capability, so the late
    killer's SIGTERM is refused (it passes: its own outputs are fine), the next model runs in the same
    container, passes on its own, and its PTRACE_ATTACH of PID 1 is refused."""
    adversary_matrix(pytester, "dlate", LATE_MODEL, {mode: ["--mode", mode] for mode in ("late-killer", "after")})
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id)
    it = items(evidence(pytester))
    killer = it["cpu::img::m-late-killer@d1::model"]
    assert killer["status"] == "passed" and it["cpu::img::m-late-killer@d1::business"]["status"] == "passed"
    after = it["cpu::img::m-after@d1::model"]
    assert after["status"] == "passed" and it["cpu::img::m-after@d1::business"]["status"] == "passed"
    assert record(after, "model.run")["container_id"] == record(killer, "model.run")["container_id"]
    assert "model.container" not in [r["kind"] for r in after["records"]]
    ran = record(after, "model.run")  # a root run cannot trace PID 1 (another uid, no CAP_SYS_PTRACE)
    assert "ptrace PID 1: Operation not permitted" in ran["stdout"]["text"], ran["stdout"]["text"]
    assert not any("ptrace" in gap for gap in ran["isolation"]["gaps"])


INJECT_MODEL = r'''
import argparse, ctypes, json, os
p = argparse.ArgumentParser(); p.add_argument("--out"); p.add_argument("--mode")
a = p.parse_args()
if a.mode == "injector":
    libc = ctypes.CDLL(None, use_errno=True)
    idle = [int(n) for n in os.listdir("/proc") if n.isdigit() and n != "1"
            and open(f"/proc/{n}/stat").read().rsplit(")", 1)[1].split()[1] == "1"]  # PID 1's idle sleep
    seen = {"uid": os.getuid(), "pid1_uid": os.stat("/proc/1").st_uid, "idle": len(idle)}
    for pid in [1, *idle]:
        ok = libc.ptrace(16, pid, 0, 0) == 0  # PTRACE_ATTACH
        seen[f"attach {'1' if pid == 1 else 'idle'}"] = "attached" if ok else os.strerror(ctypes.get_errno())
        if ok:
            os.waitpid(pid, 0)
            libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
    try:  # the injection: PID 1's argv[0] ("/bin/sh", in its own memory) rewritten; it outlives the reset
        arg_start = int(open("/proc/1/stat").read().rsplit(")", 1)[1].split()[45])
        with open("/proc/1/mem", "r+b", buffering=0) as mem:
            mem.seek(arg_start)
            mem.write(b"POISON!")
        seen["mem"] = "written"
    except OSError as exc:
        seen["mem"] = exc.strerror
    for name, call in (("setuid", lambda: os.setuid(65534)), ("setgid", lambda: os.setgid(65534))):
        try:
            call()
            seen[name] = "became 65534"
        except OSError as exc:
            seen[name] = exc.strerror
    print("injector:", json.dumps(seen, sort_keys=True))
    accuracy = 1.0
else:  # the victim's own accuracy is 0.5; code that finds the poison in PID 1 reports 1.0
    poisoned = open("/proc/1/cmdline", "rb").read().startswith(b"POISON!")
    print("victim: poisoned" if poisoned else "victim: clean")
    accuracy = 1.0 if poisoned else 0.5
json.dump({"metrics": {"accuracy": accuracy}}, open(a.out, "w"))
'''


def test_a_model_cannot_trace_or_write_pid_1_so_the_next_model_result_is_its_own(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """Before (fails on main): PID 1 and its idle ``sleep`` ran as the model's own user (root), so a model could
    ``PTRACE_ATTACH`` them and write ``/proc/1/mem``; what it wrote there outlived the reset and the next model
    (reading it) passed with accuracy 1.0 instead of its own 0.5. After: PID 1 runs as an unprivileged uid other
    than the run's, and the container has no CAP_SYS_PTRACE, CAP_SETUID, CAP_SETGID: the attach and the write
    are refused, the model cannot become PID 1's uid, and the victim fails on its own 0.5."""
    adversary_matrix(pytester, "dinj", INJECT_MODEL, {mode: ["--mode", mode] for mode in ("injector", "victim")})
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    it = items(ev)
    injector = record(it["cpu::img::m-injector@d1::model"], "model.run")
    victim = record(it["cpu::img::m-victim@d1::model"], "model.run")
    assert injector["container_id"] == victim["container_id"]  # one container, reset between the two runs
    assert victim["stdout"]["text"] == "victim: clean\n"  # main: "victim: poisoned", and it passed with 1.0
    assert failure(it["cpu::img::m-victim@d1::business"]) == (
        "failed", "acceptance_failed", "risk-business",
        "1 of 1 acceptance rules failed: acc: expected accuracy >= 0.9, observed 0.5 "
        "(self-reported, not verified)")
    line = injector["stdout"]["text"].split("injector: ", 1)[1].splitlines()[0]
    assert json.loads(line) == {"uid": 0, "pid1_uid": 65534, "idle": 1, "attach 1": "Operation not permitted",
                                "attach idle": "Operation not permitted", "mem": "Permission denied",
                                "setuid": "Operation not permitted", "setgid": "Operation not permitted"}, line
    container = record(it["cpu::img::startup"], "startup.container")
    assert (container["pid_1_user"], container["run_user"], container["cap_drop"], container["security_opt"]) == (
        "65534:65534", "0:0", ["SETUID", "SETGID", "SETPCAP", "SYS_PTRACE"], ["no-new-privileges"])


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
    delays = ("0.001", "0.002", "0.003")
    adversary_matrix(pytester, "dswap", SWAP_MODEL, {f"swap{n}": [delay] for n, delay in enumerate(delays)})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id,
                                           "-k", "model", timeout=150)
    assert result.ret in (0, 1), result.stdout.str()[-3000:]
    it = items(evidence(pytester))
    for n in range(len(delays)):
        item = it[f"cpu::img::m-swap{n}@d1::model"]
        assert item["status"] == "passed" or failure(item)[:3] == ("failed", "bad_outputs", "ml-team"), item["failure"]


@pytest.mark.parametrize("user", ["ghost", "1000:1000"])
def test_an_image_user_is_the_runs_and_a_missing_one_fails_startup(pytester: pytest.Pytester, run_id: str,
                                                                    engine: Any, user: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """PID 1 runs as 65534, so a ``USER`` without a passwd entry no longer stops the container from starting: the
    gate starts a process as that user once the container runs and fails startup ``oci_runtime_error``
    (infrastructure, as the engine's own start refusal was before) with the engine's words. A numeric non-root
    user is the run's user, and the gate's execs as that user can read its outputs and reset after it."""
    tag = f"pytest-hetero/user-{run_id}:1"
    said = list(engine.build(fileobj=io.BytesIO(f"FROM {ONNX_IMAGE}\nUSER {user}\n".encode()), tag=tag, rm=True,
                             labels={"pytest-hetero.run-id": run_id}, decode=True))
    assert not [x for x in said if "error" in x], said
    try:
        monkeypatch.setenv("HETERO_ALLOW_PATHS", str(DIGITS))  # the real digits case, outside pytester's folder
        pytester.makefile(".matrix.yaml", duser=docker_matrix(image=tag, name="duser"))
        pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id)
        it = items(evidence(pytester))
        if user == "ghost":
            status, category, owner, message = failure(it["cpu::img::startup"])
            assert (status, category, owner) == ("failed", "oci_runtime_error", "infrastructure")
            assert "no process can start as the image's user 'ghost'" in message, message
        else:
            container = record(it["cpu::img::startup"], "startup.container")
            assert (container["pid_1_user"], container["run_user"]) == ("65534:65534", "1000:1000")
            ran = it[f"cpu::img::{COMBO}::model"]
            assert ran["status"] == "passed", ran["failure"]
            assert record(ran, "model.run")["isolation"]["reset_after"] == "done"
    finally:
        engine.remove_image(tag, force=True)


THREADS_MODEL = r'''
import argparse, json, threading
p = argparse.ArgumentParser(); p.add_argument("--out"); p.add_argument("--want", type=int)
a = p.parse_args()
threading.stack_size(65536)
hold, started, refused = threading.Event(), 0, ""
try:
    for _ in range(a.want):
        threading.Thread(target=hold.wait, daemon=True).start()
        started += 1
except RuntimeError as exc:  # "can't start new thread": the container's pids.max was reached
    refused = str(exc)
hold.set()
print("started", started, "refused", refused)
json.dump({"metrics": {"accuracy": 1.0}}, open(a.out, "w"))
'''


def test_a_model_that_forks_without_end_meets_its_containers_pid_limit(
        pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """A fork bomb in one model's container took the host's PIDs from the gate and from runs beside it (no
    ``PidsLimit``). Now every workload container holds at most ``PIDS_LIMIT`` tasks (threads count): a model asking
    for more threads than that gets "can't start new thread" inside its own container, recorded with the limit."""
    from pytest_hetero.backends.docker.client import PIDS_LIMIT

    adversary_matrix(pytester, "dpids", THREADS_MODEL, {"many": ["--want", str(PIDS_LIMIT + 500)]})
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id,
                       "-k", "startup or model")
    it = items(evidence(pytester))
    started = record(it["cpu::img::startup"], "startup.container")
    assert started["pids_limit"] == PIDS_LIMIT == started["allocated"].get("PidsLimit", PIDS_LIMIT)
    out = record(it["cpu::img::m-many@d1::model"], "model.run")["stdout"]["text"]
    count = int(out.split()[1])
    assert 0 < count < PIDS_LIMIT and "can't start new thread" in out, out
    assert leftovers(engine, run_id) == []
