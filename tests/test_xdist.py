"""pytest-xdist on the local backend: statuses, reasons and untested scope equal a serial run's."""

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
from support import matrix_text

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

pytest.importorskip("xdist")

RESOURCES = [{"name": "cpu-a", "type": "cpu", "requests": {"cpu": 1}},
             {"name": "cpu-b", "type": "cpu", "requests": {"cpu": 1}},
             {"name": "gpu-nvidia", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1},
              "expect": {"devices": 1}}]


def outcome(pytester: pytest.Pytester, *args: str) -> tuple[int, dict[str, tuple[str, str]]]:
    """Run in a subprocess; return (exit code, id → (status, reason)) over items and untested scope."""
    result = pytester.runpytest_subprocess("m.matrix.yaml", "-p", "no:cacheprovider", *args)
    (bundle,) = list((pytester.path / "reports").iterdir())
    doc: dict[str, Any] = json.loads((bundle / "evidence.json").read_text())
    bundle.rename(pytester.path / f"done-{bundle.name}")
    out = {u["nodeid"]: (u["status"], u["reason"]) for u in doc["untested"]["items"]}
    out.update({i["nodeid"]: (i["status"], i.get("reason") or "") for i in doc["items"]})
    return int(result.ret), out


@pytest.mark.parametrize("extra", [[], ["--hetero-profile", "quick", "--hetero-affected", "resource=cpu-b"]])
def test_two_workers_give_the_serial_statuses(pytester: pytest.Pytester, extra: list[str]) -> None:
    doc = json.loads(matrix_text(resources=RESOURCES))
    doc["spec"]["images"] = [{"name": "py-a", "reference": "python:current"},
                             {"name": "py-b", "reference": "python:current"}]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    serial_ret, serial = outcome(pytester, *extra)
    parallel_ret, parallel = outcome(pytester, "-n", "2", *extra)
    assert parallel == serial
    assert parallel_ret == serial_ret
    assert len(serial) == 3 * 8
    statuses = {k.split("::", 1)[1]: v[0] for k, v in serial.items()}
    assert statuses["cpu-b::discovery"] == "passed"
    assert statuses["gpu-nvidia::py-b::startup"] in ("blocked", "deselected")


def _live(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _pids_running(marker: str) -> list[int]:
    """Live pids whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return [p for p in found if _live(p)]


def _children(pid: int) -> list[int]:
    """Live pids whose parent is ``pid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                pass
    return [p for p in out if _live(p)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_workers_and_their_models_stop_when_the_controller_is_killed(pytester: pytest.Pytester) -> None:
    """kill -9 of the controller: the workers get SIGTERM from the kernel, stop their model runs and
    exit, instead of running on (and holding containers or pods) until their current model ends."""
    marker = f"sleep 97.{os.getpid()}"
    doc = json.loads(matrix_text(resources=RESOURCES[:2]))
    doc["spec"]["models"][0]["entrypoint"] = ["/bin/sh", "-c", f"{marker}; echo {{{{}}}} > $0", "{outputs}"]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    controller = subprocess.Popen([sys.executable, "-m", "pytest", "m.matrix.yaml", "-p", "no:cacheprovider",
                                   "-n", "2", "--hetero-run-id", "r1"], cwd=pytester.path,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while len(_pids_running(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        models = _pids_running(marker)
        workers = _children(controller.pid)
        assert len(models) >= 2 and len(workers) == 2, (models, workers)  # sh -c and its sleep, per worker
        # the controller journals a worker's report when it receives it: wait for both startups (a model
        # running on a worker does not mean the controller has written that worker's startup line yet)
        journal_file = pytester.path / "reports" / "r1" / "journal.jsonl"
        while time.monotonic() < deadline and journal_file.is_file() and \
                journal_file.read_text().count('::py::startup"') < 2:
            time.sleep(0.1)
        controller.kill()
        controller.wait()
        # with PR_SET_PDEATHSIG the models are gone at once and the workers within 0.25-2 s (pytest formats the
        # interrupt's traceback first, slower on a loaded machine); without it each worker ran on until its model
        # ended (here a 97 s sleep), then xdist's own shutdown took 5 s more: 30 s tells the two apart on a machine
        # loaded enough to slow the traceback (10 s was this machine's margin)
        deadline = time.monotonic() + 30
        while any(_live(p) for p in workers + models) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p in workers + models if _live(p)] == []
    finally:
        if controller.poll() is None:
            controller.kill()
        for pid in _pids_running(marker):
            os.kill(pid, signal.SIGKILL)
    # what finished before the kill is in the journal: both resources' discovery passed
    journal = [json.loads(x) for x in (pytester.path / "reports" / "r1" / "journal.jsonl").read_text().splitlines()]
    passed = sorted(e["evidence"]["nodeid"].split("::", 1)[1] for e in journal
                    if e["type"] == "item" and e["evidence"]["status"] == "passed")
    assert passed == ["cpu-a::discovery", "cpu-a::py::startup", "cpu-b::discovery", "cpu-b::py::startup"]


def test_a_dist_mode_that_splits_a_resource_is_refused(pytester: pytest.Pytester) -> None:
    """``-n 2 --dist loadgroup`` signed GPU model items ``passed`` after GPU discovery failed on another worker."""
    pytester.makefile(".matrix.yaml", m=matrix_text(resources=RESOURCES))
    result = pytester.runpytest_subprocess("m.matrix.yaml", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-hetero: --dist loadgroup would split a resource's items *"
                                 "use --dist load *"])
    assert not (pytester.path / "reports").exists() or not any((pytester.path / "reports").iterdir())
