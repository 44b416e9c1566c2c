"""The Docker daemon restarted in the middle of a run (issue 8: backend faults during a run).

A private ``dockerd`` (own socket, data root and exec root, vfs, no network) is started for this
module, so restarting it cannot disturb the shared engine other tests use. The shell-only test
image is copied into it from the shared engine (``docker save`` → ``docker load``).

The matrix has two CPU resources. The model run of the first sleeps while a marker file exists in
its (bind-mounted) code folder; once that sleep is seen inside the container the test removes the
marker and restarts the daemon (SIGTERM, wait for exit, start again). Expected: that model item
ends ``error`` (``engine_restarted``, infrastructure) with the outage as reason, its business item
is blocked, the second resource passes all layers on the restarted engine, and nothing is left.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from dockerkit import SHELL_IMAGE, docker_matrix, evidence, failure, items, leftovers, record, statuses

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

SLOW_SLEEP_S = 30
ACCURACY_ONLY = """apiVersion: pytest-hetero/v1
kind: AcceptanceRules
metadata: {name: shell}
rules:
  - {name: accuracy-floor, metric: accuracy, op: ">=", value: 0.95, self_reported: true}
"""


class PrivateEngine:
    """A ``dockerd`` of this test only, under ``root`` (a short /tmp path: unix socket paths are
    limited to 108 bytes). :meth:`start`, :meth:`stop` (SIGTERM, wait) and :meth:`restart`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = f"unix://{root}/docker.sock"
        self.restarts: list[dict[str, float]] = []
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, wait_s: float = 60.0) -> None:
        """Start dockerd and wait until it answers a ping; AssertionError with its log when it does not."""
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115 - handed to the daemon
        self.process = subprocess.Popen(
            ["dockerd", f"--host={self.url}", f"--data-root={self.root}/data", f"--exec-root={self.root}/exec",
             f"--pidfile={self.root}/dockerd.pid", "--storage-driver=vfs", "--bridge=none", "--iptables=false",
             "--ip6tables=false"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                with docker.APIClient(base_url=self.url, timeout=5) as api:
                    if api.ping():
                        return
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.1)
        raise AssertionError(f"private dockerd did not answer in {wait_s}s:\n"
                             f"{(self.root / 'dockerd.log').read_text()[-3000:]}")

    def stop(self, wait_s: float = 60.0) -> None:
        """SIGTERM the daemon (it stops its containers) and reap it; SIGKILL after ``wait_s`` seconds."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(wait_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        """Stop, then start again; the down time (seconds) is appended to :attr:`restarts`."""
        began = time.monotonic()
        self.stop()
        down = time.monotonic()
        self.start()
        self.restarts.append({"stopping_s": down - began, "down_s": time.monotonic() - down})


@pytest.fixture(scope="module")
def private_engine(engine: Any) -> Iterator[PrivateEngine]:
    """A private engine holding SHELL_IMAGE (copied from the shared ``engine``); removed afterwards."""
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.fail("restarting a Docker daemon needs root and dockerd (tests/infra/docker-engine.sh installs it)")
    root = Path(tempfile.mkdtemp(prefix="hdr-", dir="/tmp"))
    private = PrivateEngine(root)
    private.start()
    try:
        with docker.APIClient(base_url=private.url, timeout=120) as api:
            api.load_image(b"".join(engine.get_image(SHELL_IMAGE)))  # type: ignore[no-untyped-call]  # (untyped in types-docker)
            assert api.inspect_image(SHELL_IMAGE)["Id"] == engine.inspect_image(SHELL_IMAGE)["Id"]  # type: ignore[no-untyped-call]
        yield private
    finally:
        private.stop()
        shutil.rmtree(root, ignore_errors=True)


def two_resource_matrix(code: Path, engine_url: str, acceptance: Path) -> str:
    """cpu-a and cpu-b on the private engine, two datasets; the model sleeps while ``code/slow`` exists."""
    doc = json.loads(docker_matrix(
        resources=[{"name": "cpu-a", "type": "cpu", "requests": {"cpu": 1, "memory": "256Mi"}},
                   {"name": "cpu-b", "type": "cpu", "requests": {"cpu": 1, "memory": "256Mi"}}],
        image=SHELL_IMAGE, runtime="shell", acceptance=acceptance, datasets=2,
        target={"docker_host": engine_url, "engine_wait_s": 60},
        entrypoint=["/bin/sh", "-c",
                    (f'if [ -e "$1/slow" ]; then sleep {SLOW_SLEEP_S}; fi; '
                     'echo \'{{"metrics": {{"accuracy": 1.0}}}}\' > "$0"'), "{outputs}", "{code}"]))
    doc["spec"]["models"][0]["code"] = str(code)
    return json.dumps(doc, indent=2)


def test_daemon_restarted_during_a_model_run(pytester: pytest.Pytester, run_id: str,
                                             private_engine: PrivateEngine) -> None:
    code = pytester.mkdir("code")
    (code / "slow").write_text("sleep while this exists\n")
    rules = pytester.makefile(".yaml", rules=ACCURACY_ONLY)
    pytester.makefile(".matrix.yaml", d=two_resource_matrix(code, private_engine.url, rules))
    restarted_while: list[str] = []

    def restart_during_the_sleep() -> None:
        deadline = time.monotonic() + 90
        with docker.APIClient(base_url=private_engine.url, timeout=10) as api:
            while time.monotonic() < deadline and not restarted_while:
                for c in api.containers(filters={"label": f"pytest-hetero.run-id={run_id}"}):
                    procs = api.top(c["Id"])["Processes"] or []
                    if any(f"sleep {SLOW_SLEEP_S}" in " ".join(p) for p in procs):
                        restarted_while.append(c["Names"][0].lstrip("/"))
                if not restarted_while:
                    time.sleep(0.1)
        if restarted_while:
            (code / "slow").unlink()
            private_engine.restart()

    thread = threading.Thread(target=restart_during_the_sleep)
    thread.start()
    began = time.monotonic()
    try:
        result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    finally:
        thread.join()
    elapsed = time.monotonic() - began
    ev = evidence(pytester)
    assert restarted_while == [f"hetero-{run_id}-cpu-a-img"]
    combo, combo1 = "digits-logreg@digits-test", "digits-logreg@digits-test1"
    assert statuses(ev) == {
        "cpu-a::discovery": "passed", "cpu-a::scheduling": "passed", "cpu-a::img::startup": "passed",
        f"cpu-a::img::{combo}::model": "error", f"cpu-a::img::{combo}::business": "blocked",
        f"cpu-a::img::{combo1}::model": "error", f"cpu-a::img::{combo1}::business": "blocked",
        "cpu-b::discovery": "passed", "cpu-b::scheduling": "passed", "cpu-b::img::startup": "passed",
        f"cpu-b::img::{combo}::model": "passed", f"cpu-b::img::{combo}::business": "passed",
        f"cpu-b::img::{combo1}::model": "passed", f"cpu-b::img::{combo1}::business": "passed",
    }
    assert result.ret == 1
    model = items(ev)[f"cpu-a::img::{combo}::model"]
    status, category, owner, message = failure(model)
    assert (status, category, owner) == ("error", "engine_restarted", "infrastructure")
    outage = record(model, "engine.interruption")
    assert outage["engine"] == private_engine.url
    assert outage["container"] == f"hetero-{run_id}-cpu-a-img"
    assert outage["back_at"] is not None and 0 < outage["waited_s"] < 60
    assert outage["container_state"]["Running"] is False
    assert outage["error"] in ("the exec stream ended and the engine no longer answers",
                               "the engine no longer knows the exec (it restarted)")
    assert message.startswith(f"the Docker engine went away at {outage['lost_at']} during the model run (exec ")
    assert f"it answered again after {outage['waited_s']:.1f} s ({outage['back_at']})" in message
    assert f"container hetero-{run_id}-cpu-a-img is now exited" in message
    assert "Traceback" not in json.dumps(model)
    # the next model run for the stopped container ends at once, naming the same outage
    status, category, owner, message = failure(items(ev)[f"cpu-a::img::{combo1}::model"])
    assert (status, category, owner) == ("error", "engine_restarted", "infrastructure")
    assert message.startswith(f"container hetero-{run_id}-cpu-a-img was stopped before the model run: the Docker "
                              f"engine went away at {outage['lost_at']} during the model run (exec ")
    assert message.endswith(f"(status exited, exit {outage['container_state']['ExitCode']}, finished "
                            f"{outage['container_state']['FinishedAt']})")
    # the sleep was cut short by the restart, not waited out
    assert elapsed < SLOW_SLEEP_S + 20, (elapsed, private_engine.restarts)
    assert ev["items"] and not any(i["failure"] and i["failure"]["category"] == "harness" for i in ev["items"])
    with docker.APIClient(base_url=private_engine.url, timeout=30) as api:
        assert leftovers(api, run_id) == []


def test_daemon_that_stays_down_ends_the_run_with_errors_and_cleanup_follows(
        pytester: pytest.Pytester, run_id: str, private_engine: PrivateEngine) -> None:
    code = pytester.mkdir("code")
    (code / "slow").write_text("sleep while this exists\n")
    rules = pytester.makefile(".yaml", rules=ACCURACY_ONLY)
    doc = json.loads(two_resource_matrix(code, private_engine.url, rules))
    doc["spec"]["target"]["engine_wait_s"] = 2
    pytester.makefile(".matrix.yaml", d=json.dumps(doc))
    stopped: list[str] = []

    def stop_during_the_sleep() -> None:
        deadline = time.monotonic() + 90
        with docker.APIClient(base_url=private_engine.url, timeout=10) as api:
            while time.monotonic() < deadline and not stopped:
                for c in api.containers(filters={"label": f"pytest-hetero.run-id={run_id}"}):
                    if any(f"sleep {SLOW_SLEEP_S}" in " ".join(p) for p in api.top(c["Id"])["Processes"] or []):
                        stopped.append(c["Names"][0].lstrip("/"))
                time.sleep(0.1)
        private_engine.stop()

    thread = threading.Thread(target=stop_during_the_sleep)
    thread.start()
    try:
        result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    finally:
        thread.join()
        private_engine.start()  # the module's other tests and the leftover check need it back
    ev = evidence(pytester)
    combo = "digits-logreg@digits-test"
    st = statuses(ev)
    assert (st[f"cpu-a::img::{combo}::model"], st["cpu-b::discovery"], st["cpu-b::scheduling"]) == (
        "error", "error", "blocked")
    status, category, owner, message = failure(items(ev)[f"cpu-a::img::{combo}::model"])
    assert (status, category, owner) == ("error", "engine_unreachable", "infrastructure")
    assert message.endswith("; it did not answer again")
    assert record(items(ev)[f"cpu-a::img::{combo}::model"], "engine.interruption")["back_at"] is None
    status, category, owner, message = failure(items(ev)["cpu-b::discovery"])
    assert (status, category, owner) == ("error", "engine_unreachable", "infrastructure")
    assert message.startswith(f"Docker engine at {private_engine.url} does not answer")
    # the session end could not remove the stopped container; the terminal says how, and cleanup does it
    result.stderr.fnmatch_lines([(f"pytest-hetero: docker cleanup of run {run_id} incomplete: *"
                                  f"run: hetero cleanup --run-id {run_id}")])
    with docker.APIClient(base_url=private_engine.url, timeout=30) as api:
        probe_image = api.images(filters={"label": [f"pytest-hetero.run-id={run_id}",
                                                    "pytest-hetero.role=placement-probe"]})[0]["Id"]
        assert sorted(leftovers(api, run_id)) == sorted([f"/hetero-{run_id}-cpu-a-img", probe_image])
        done = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "cleanup", "--backend", "docker",
                               "--run-id", run_id, "--docker-host", private_engine.url, "--json"],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert sorted((x["kind"], x["removed"]) for x in json.loads(done.stdout)) == [
            ("container", True), ("image", True)]
        assert f"hetero-{run_id}-cpu-a-img" in [x["name"] for x in json.loads(done.stdout)]
        assert leftovers(api, run_id) == []
