"""Per-run model runs on the real engine (``model_runs: per-run``): each model run a container of its own pinned to a
CPU set of its own, the runs going concurrently, each result joined to its item; Ctrl-C removes every container."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from dockerkit import RUN_LABEL, docker_matrix, evidence, interrupted, items, leftovers, record, statuses

pytestmark = pytest.mark.usefixtures("outside_inputs")

SLEEP_S = 8  # longer than a container create under a CPU-bound CI (~3 s seen): the pairs overlap however slow
# the digits model after a pause, then the container's host name (Docker's default: the container id's first 12
# characters) and the data sets it can see written into its outputs, so each item's outputs say which container made
# them and what it was given
SCRIPT = (f'sleep {SLEEP_S} && "$1" "$2/infer.py" --model "$3" --data "$4" --out "$5" --provider "$6" && "$1" -c '
          '"import json, os, socket, sys; d = json.load(open(sys.argv[1])); d[\'host\'] = socket.gethostname(); '
          'd[\'seen\'] = sorted(os.listdir(\'/hetero/datasets\')); '
          'json.dump(d, open(sys.argv[1], \'w\'))" "$5"')
ENTRYPOINT = ["/bin/sh", "-c", SCRIPT, "sh", "{python}", "{code}", "{model}", "{dataset}", "{outputs}", "{provider}"]
RUNS = 4


def spread_matrix(model_runs: str, concurrency: int = 2, entrypoint: list[str] | None = None) -> str:
    """The digits case on 4 data sets (4 model runs) of a CPU resource asking for one CPU per run."""
    doc = json.loads(docker_matrix(datasets=RUNS, entrypoint=entrypoint or ENTRYPOINT))
    doc["spec"]["resources"][0].update(model_runs=model_runs, concurrency=concurrency)
    return json.dumps(doc)


def model_runs(ev: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """nodeid → the ``model.run`` record of every model item."""
    return {k: record(v, "model.run") for k, v in items(ev).items() if k.endswith("::model")}


def outputs_of(pytester: pytest.Pytester, ev: dict[str, Any], nodeid: str, bundle: Path | None = None
               ) -> dict[str, Any]:
    """The outputs the gate kept for ``nodeid`` (of the one bundle under ``reports/`` unless ``bundle``)."""
    if bundle is None:
        [bundle] = sorted((pytester.path / "reports").iterdir())
    [art] = [a for a in items(ev)[nodeid]["artifacts"] if a["name"] == "outputs.json"]
    return dict(json.loads((bundle / art["path"]).read_text()))


def outputs_host(pytester: pytest.Pytester, ev: dict[str, Any], nodeid: str) -> str:
    """The host name the model wrote into the outputs the gate kept for ``nodeid``."""
    return str(outputs_of(pytester, ev, nodeid)["host"])


def test_per_run_containers_overlap_on_cpu_sets_of_their_own(pytester: pytest.Pytester, run_id: str,
                                                             engine: Any) -> None:
    pytester.makefile(".matrix.yaml", d=spread_matrix("per-run"))
    begun = time.monotonic()
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id)
    per_run_s = time.monotonic() - begun
    ev = evidence(pytester)
    assert result.ret == 0, [(i["nodeid"], i["failure"]) for i in ev["items"] if i["failure"]]
    runs = model_runs(ev)
    assert len(runs) == RUNS
    spreads = [r["spread"] for r in runs.values()]
    # a container of its own per run, each pinned to a CPU of its own while another ran (2 CPUs, concurrency 2)
    assert len({s["container_id"] for s in spreads}) == RUNS
    assert {s["concurrency"] for s in spreads} == {2}
    assert all(s["slot"]["kind"] == "cpuset" and len(s["slot"]["ids"]) == 1 for s in spreads)
    for nodeid, run in runs.items():
        started = record(items(ev)[nodeid], "startup.container")
        assert started["id"] == run["spread"]["container_id"] == run["container_id"]
        assert started["allocated"]["CpusetCpus"] == ",".join(run["spread"]["slot"]["ids"])
        assert run["isolation"]["shared_between_runs"] is False and "proven" in run["isolation"]["models_isolation"]
        # the outputs joined to this item came from this item's container, which was given its own data set only
        assert outputs_host(pytester, ev, nodeid) == run["container_id"][:12]
        assert outputs_of(pytester, ev, nodeid)["seen"] == [nodeid.split("@", 1)[1].split("::", 1)[0]]
    # two runs at once: each run overlapped another (times), on different CPU sets
    windows = sorted((s["run_started_at"], s["run_ended_at"], s["slot"]["ids"][0]) for s in spreads)
    overlaps = [(a, b) for i, a in enumerate(windows) for b in windows[i + 1:] if b[0] < a[1]]
    assert len(overlaps) >= 2 and all(a[2] != b[2] for a, b in overlaps), windows
    makespan = max(s["removed_at"] for s in spreads) - min(s["queued_at"] for s in spreads)
    serial = sum(s["removed_at"] - s["slot_at"] for s in spreads)  # each run's own time, slot to removal
    assert makespan < serial, (makespan, serial)
    first = record(items(ev)["cpu::img::digits-logreg@digits-test::model"], "model.spread")
    assert (first["model_runs"], first["concurrency"], first["launched"]) == ("per-run", 2, RUNS)
    assert first["startup_container_removed"] == f"hetero-{run_id}-cpu-img"
    assert leftovers(engine, run_id) == []

    # the same matrix with the shared container: the same statuses, one container, the runs one after the other
    shared = pytester.mkdir("shared")
    (shared / "d.matrix.yaml").write_text(spread_matrix("shared"))
    begun = time.monotonic()
    again = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id + "s",
                               str(shared / "d.matrix.yaml"), "--hetero-report-dir", str(shared / "reports"))
    shared_s = time.monotonic() - begun
    [bundle] = sorted((shared / "reports").iterdir())
    ev_shared = json.loads((bundle / "evidence.json").read_text())
    assert again.ret == 0
    assert statuses(ev_shared) == statuses(ev)
    assert len({r["container_id"] for r in model_runs(ev_shared).values()}) == 1
    # the shared container holds every run's data set (the runs there are not isolated from one another)
    every = sorted(k.split("@", 1)[1].split("::", 1)[0] for k in model_runs(ev_shared))
    assert all(outputs_of(pytester, ev_shared, k, bundle)["seen"] == every for k in model_runs(ev_shared))
    shared_runs = sum(r["duration_s"] for r in model_runs(ev_shared).values())
    sys.stderr.write(f"per-run: pytest {per_run_s:.1f} s, model runs {makespan:.1f} s (their own times {serial:.1f} s)"
                     f"; shared: pytest {shared_s:.1f} s, model runs {shared_runs:.1f} s; ideal "
                     f"{RUNS // 2 * SLEEP_S} s\n")


def test_ctrl_c_mid_run_removes_every_run_container(tmp_path: Path, run_id: str, engine: Any) -> None:
    """A real pytest process, interrupted while two per-run containers run their models: none is left."""
    sleepy = ["/bin/sh", "-c", "sleep 45"]
    (tmp_path / "sleepy.matrix.yaml").write_text(spread_matrix("per-run", entrypoint=sleepy))
    sleeping: set[str] = set()

    def two_sleep() -> bool:
        for c in engine.containers(filters={"label": f"{RUN_LABEL}={run_id}"}):
            try:  # the startup container is stopped and removed once the runs begin
                processes = engine.top(c["Id"])["Processes"] or []
            except docker.errors.APIError:  # gone, or no longer running
                continue
            if any("sleep 45" in " ".join(p) for p in processes):
                sleeping.add(c["Id"])
        return len(sleeping) >= 2  # two model runs at once, each in its container

    code, out = interrupted(tmp_path, ["sleepy.matrix.yaml", "-p", "no:cacheprovider", "--hetero-run-id", run_id,
                                       "--rootdir", str(tmp_path)], two_sleep, signal.SIGINT)
    assert code == 2, out[-2000:]
    assert leftovers(engine, run_id) == []
    ev = json.loads((tmp_path / "reports" / run_id / "evidence.json").read_text())
    assert ev["run"]["interrupted"] is True
    assert {v for k, v in statuses(ev).items() if k.endswith("::model")} == {"not_run"}


def loopback_port(seed: str) -> int:
    """A TCP port of 127.0.0.1 that nothing holds now, below the kernel's ephemeral range (the local ports of
    outgoing connections and their TIME_WAIT leftovers, which a busy suite has thousands of, come from there):
    tried from a port derived from ``seed`` (each run its own), then the next ones."""
    import socket

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    span = low - 10000
    start = int(seed.encode().hex()[-4:], 16) % span
    for step in range(span):
        port = 10000 + (start + step) % span
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free loopback port in 10000-{low - 1}")


def test_runs_at_once_on_a_shared_network_are_not_proven_isolated(pytester: pytest.Pytester, run_id: str,
                                                                  engine: Any) -> None:
    """``target.network: host``: two runs at once share the host's network namespace, so one run can take the
    loopback port the other needs (each binds 127.0.0.1:PORT and holds it): one run's result is the other's doing,
    and no run may be recorded isolated from the others (``shared_between_runs``, ``scope.not_proven``)."""
    port = loopback_port(run_id)
    hold = (f'"$1" -c "import socket, time; s = socket.socket(); s.bind((\'127.0.0.1\', {port})); s.listen(1); '
            f'time.sleep(10)" && "$1" "$2/infer.py" --model "$3" --data "$4" --out "$5" --provider "$6"')
    doc = json.loads(docker_matrix(datasets=2, target={"network": "host"},
                                   entrypoint=["/bin/sh", "-c", hold, "sh", "{python}", "{code}", "{model}",
                                               "{dataset}", "{outputs}", "{provider}"]))
    doc["spec"]["resources"][0].update(model_runs="per-run", concurrency=2)
    pytester.makefile(".matrix.yaml", d=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    runs = model_runs(ev)
    assert len(runs) == 2
    # the interference itself: exactly one of the two runs at once found the port taken (by the other run)
    assert sorted(r["exit_code"] for r in runs.values())[0] == 0, runs
    assert sorted(r["exit_code"] for r in runs.values())[1] != 0
    assert "Address already in use" in "".join(r["stderr"]["text"] for r in runs.values())
    for nodeid, run in runs.items():
        isolation = run["isolation"]
        assert isolation["shared_between_runs"] is True, isolation
        assert "proven" not in isolation.get("models_isolation", ""), isolation
        assert "network" in isolation["reason"] and "host" in isolation["reason"], isolation
        gap = record(items(ev)[nodeid], "scope.not_proven")
        assert gap["part"] == "isolation between model runs", gap
    assert {v for k, v in statuses(ev).items() if k.endswith("::model")} != {"passed"}
    assert leftovers(engine, run_id) == []


def test_a_cpu_listed_twice_is_never_two_slots(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    """``target.cpuset`` naming CPU 0 twice (``0,0``) for a resource of one CPU a run: not two slots on one CPU (two
    runs at once pinned to the same CPU, each recorded as pinned to a slot of its own, isolation proven), but a
    malformed request the model items report, naming the CPU."""
    doc = json.loads(spread_matrix("per-run"))
    doc["spec"]["target"]["cpuset"] = {"cpu": "0,0"}
    pytester.makefile(".matrix.yaml", d=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    models = {k: v for k, v in items(ev).items() if k.endswith("::model")}
    assert len(models) == RUNS
    pinned = [record(v, "model.run")["spread"]["slot"]["ids"] for v in models.values()
              if any(r["kind"] == "model.run" for r in v["records"])]
    assert pinned == [], pinned  # no run went on a slot
    for item in models.values():
        assert item["failure"]["category"] == "bad_request", item["failure"]
        assert "'0,0'" in item["failure"]["message"] and "twice" in item["failure"]["message"], item["failure"]
    assert leftovers(engine, run_id) == []


def test_a_run_container_whose_start_fails_is_removed_at_once(pytester: pytest.Pytester, run_id: str,
                                                              engine: Any) -> None:
    """The matrix's network is taken away once startup passed (its container disconnected, the network removed): each
    run's own container is created and then refused at start (``network … not found``). Each run fails, and its
    container is removed then, not kept until the engine's close."""
    net = f"hetero-spread-{run_id}"
    engine.create_network(net, labels={RUN_LABEL: run_id})
    doc = json.loads(spread_matrix("per-run", concurrency=1))
    doc["spec"]["target"]["network"] = net
    pytester.makefile(".matrix.yaml", d=json.dumps(doc))
    seen = pytester.path / "run-containers.txt"
    pytester.makeconftest(f'''
import subprocess
def pytest_runtest_setup(item):
    if item.nodeid.endswith("::model"):
        for cid in subprocess.run(["docker", "ps", "-aq", "--filter", "network={net}"], capture_output=True,
                                  text=True).stdout.split():
            subprocess.run(["docker", "network", "disconnect", "-f", "{net}", cid], capture_output=True)
        subprocess.run(["docker", "network", "rm", "{net}"], capture_output=True)
def pytest_runtest_teardown(item):
    if item.nodeid.endswith("::model"):
        left = subprocess.run(["docker", "ps", "-aq", "--filter", "label=pytest-hetero.run-id={run_id}",
                               "--filter", "label=pytest-hetero.role=model-run"], capture_output=True, text=True)
        with open({str(seen)!r}, "a") as fh:
            fh.write(str(len(left.stdout.split())) + "\\n")
''')
    try:
        pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id)
    finally:
        try:
            engine.remove_network(net)
        except docker.errors.DockerException:
            pass
    ev = evidence(pytester)
    runs = {k: v for k, v in items(ev).items() if k.endswith("::model")}
    assert len(runs) == RUNS and {v["status"] for v in runs.values()} == {"error"}, statuses(ev)  # the engine refused
    assert all("not found" in v["failure"]["message"] for v in runs.values()), [v["failure"] for v in runs.values()]
    # after each item at most the next run's container, in flight (runs are launched ahead); after the last, none
    counts = [int(c) for c in seen.read_text().split()]
    assert len(counts) == RUNS and max(counts) <= 1 and counts[-1] == 0, counts
    assert leftovers(engine, run_id) == []
