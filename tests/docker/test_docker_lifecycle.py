"""Container lifecycle on the real engine: reuse across items, --hetero-keep, `hetero cleanup`, Ctrl-C and SIGTERM."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from dockerkit import (
    COMBO,
    ONNX_IMAGE,
    RUN_LABEL,
    docker_matrix,
    evidence,
    interrupted,
    items,
    leftovers,
    record,
    statuses,
)

from pytest_hetero.cli import main

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def cleanup(*argv: str) -> int:
    """Run ``hetero cleanup ARGV`` in-process, through the ``hetero`` command's parsers."""
    return main(["cleanup", *argv])


def test_one_container_serves_every_model_dataset_item(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    pytester.makefile(".matrix.yaml", d=docker_matrix(datasets=3))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id).assert_outcomes(passed=9)
    it = items(evidence(pytester))
    started = record(it["cpu::img::startup"], "startup.container")["id"]
    runs = [record(it[f"cpu::img::digits-logreg@{d}::model"], "model.run")
            for d in ("digits-test", "digits-test1", "digits-test2")]
    assert [r["container_id"] for r in runs] == [started] * 3
    assert len({r["run_dir"] for r in runs}) == 3
    assert leftovers(engine, run_id) == []


def test_keep_leaves_the_container_and_says_how_to_reach_it(pytester: pytest.Pytester, run_id: str,
                                                           engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makefile(".matrix.yaml", d=docker_matrix())
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "--hetero-keep")
    result.assert_outcomes(passed=5)
    name = f"hetero-{run_id}-cpu-img"
    assert leftovers(engine, run_id) == [f"/{name}"]
    assert engine.inspect_container(name)["State"]["Running"] is True
    result.stderr.fnmatch_lines([(f"pytest-hetero: kept container {name} (cpu × img): docker exec -it {name} "
                                 f"/bin/sh; remove with: hetero cleanup --run-id {run_id}")])
    capsys.readouterr()
    assert cleanup("--backend", "docker", "--run-id", run_id, "--dry-run") == 0
    assert capsys.readouterr().out == f"would remove docker container {name} (run {run_id}, age 0.0h)\n"
    assert leftovers(engine, run_id) == [f"/{name}"]
    assert cleanup("--backend", "docker", "--run-id", run_id) == 0
    assert capsys.readouterr().out == f"removed docker container {name} (run {run_id}, age 0.0h)\n"
    assert leftovers(engine, run_id) == []


def test_cleanup_older_than_removes_only_old_leftovers(run_id: str, engine: Any,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    made = {}
    for age, stamp in (("old", "2020-01-01T00:00:00Z"), ("new", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))):
        made[age] = engine.create_container(ONNX_IMAGE, command=["true"], name=f"{run_id}-{age}", labels={
            RUN_LABEL: run_id, "pytest-hetero.created-at": stamp})["Id"]
    volume = engine.create_volume(name=f"{run_id}-vol", labels={RUN_LABEL: run_id,
                                                                "pytest-hetero.created-at": "2020-01-01T00:00:00Z"})
    assert cleanup("--older-than", "2h", "--run-id", run_id, "--backend", "docker", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted((e["kind"], e["name"], e["removed"], e["error"], e["created_at"]) for e in out) == [
        ("container", f"{run_id}-old", True, None, "2020-01-01T00:00:00Z"),
        ("volume", volume["Name"], True, None, "2020-01-01T00:00:00Z")]
    assert all(e["age_s"] > 2 * 3600 for e in out)
    assert leftovers(engine, run_id) == [f"/{run_id}-new"]


def test_cleanup_refuses_without_a_selection(capsys: pytest.CaptureFixture[str]) -> None:
    assert cleanup() == 2
    assert capsys.readouterr().err == ("hetero cleanup: give --older-than DURATION and/or --run-id ID (a bare cleanup "
                                       "could remove a run that is still going)\n")
    assert cleanup("--older-than", "soon") == 2
    assert capsys.readouterr().err == ("hetero cleanup: --older-than 'soon' is not a duration (a number of "
                                       "seconds, or e.g. 250ms, 30s, 5m, 2h, 2d, 1w, 1m30s)\n")


def test_hetero_command_lists_cleanup() -> None:
    from pytest_hetero.cli import build_parser
    from pytest_hetero.cli.cleanup import build_parser as cleanup_parser
    from pytest_hetero.hooks.registry import plugin_manager

    choices = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert "cleanup" in choices
    # every installed backend adds its options (pytest_hetero_cleanup_options); "all" is the default
    actions = {a.dest: a for a in cleanup_parser(plugin_manager().hook)._actions}
    assert (actions["backend"].choices, actions["backend"].default) == (None, "all")
    assert {"docker_host", "kube_context", "kube_namespace"} <= set(actions)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_signal_mid_run_removes_every_container(tmp_path: Path, run_id: str, engine: Any, sig: int) -> None:
    """A real pytest process, stopped by a signal while the model runs: its containers are gone afterwards."""
    (tmp_path / "sleepy.matrix.yaml").write_text(docker_matrix(entrypoint=["/bin/sh", "-c", "sleep 45"]))

    def running() -> bool:
        for c in engine.containers(filters={"label": f"{RUN_LABEL}={run_id}"}):
            if any("sleep 45" in " ".join(p) for p in engine.top(c["Id"])["Processes"] or []):
                # the workload container and the empty placement-probe image exist while the run goes on
                assert [x[0] for x in sorted(leftovers(engine, run_id))] == ["/", "s"]
                return True
        return False

    code, out = interrupted(tmp_path, ["sleepy.matrix.yaml", "-p", "no:cacheprovider", "--hetero-run-id", run_id,
                                       "--rootdir", str(tmp_path)], running, sig)
    assert code == 2, out[-2000:]
    assert leftovers(engine, run_id) == []
    ev = json.loads((tmp_path / "reports" / run_id / "evidence.json").read_text())
    st = statuses(ev)
    assert (st["cpu::discovery"], st["cpu::scheduling"], st["cpu::img::startup"]) == ("passed",) * 3
    # the model item is the run's interruption, never the model's failure (no_outputs, owner algorithm)
    assert st[f"cpu::img::{COMBO}::model"] == st[f"cpu::img::{COMBO}::business"] == "not_run"
    assert {u["reason"] for u in ev["untested"]["items"] if u["status"] == "not_run"} == {
        "not_run (interrupted before this item finished)"}
    assert [i["nodeid"] for i in ev["items"] if i["status"] != "passed"] == []
    assert ev["run"]["interrupted"] is True


def test_hetero_cleanup_command_line(run_id: str) -> None:
    """The installed command: ``python -m pytest_hetero.cli cleanup …`` (what the ``hetero`` script runs)."""
    proc = subprocess.run([sys.executable, "-m", "pytest_hetero.cli", "cleanup", "--backend", "docker",
                           "--run-id", run_id], capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "nothing to clean up\n", "")
