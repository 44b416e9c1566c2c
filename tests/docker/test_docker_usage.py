"""The usage ledger on a real Docker engine: the placement probe, the resource × image container and each
model run inside it are ``usage.workload`` records with the engine's own times (inspect ``Created``,
``State.StartedAt``); the evidence's ``usage`` section sums them under namespace ``docker``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from dockerkit import COMBO, ENTRYPOINT, docker_matrix, evidence, items

from pytest_hetero.evidence.usage import RECORD
from pytest_hetero.matrix.quantity import quantity

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def _usage(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [r["data"] for r in item["records"] if r["kind"] == RECORD]


def test_docker_workloads_land_in_the_ledger_with_the_engines_times(pytester: pytest.Pytester, run_id: str,
                                                                    engine: Any) -> None:
    cpu = {"name": "cpu", "type": "cpu", "requests": {"cpu": "500m"}, "limits": {"cpu": "500m", "memory": "512Mi"}}
    pytester.makefile(".matrix.yaml", d=docker_matrix(resources=[cpu]))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    it = items(ev)
    [probe] = _usage(it["cpu::scheduling"])
    [container] = _usage(it["cpu::img::startup"])
    [run] = _usage(it[f"cpu::img::{COMBO}::model"])
    assert (probe["object"], probe["namespace"], probe["outcome"]) == ("container", "docker", "completed")
    assert probe["released"] >= probe["placed"]  # removed by the engine right after the probe, confirmed
    assert (container["object"], container["outcome"], container["attempts"]) == ("container", "running", 1)
    assert container["requests"] == {"cpu": 0.5, "memory": 512 * 2**20}
    # idle between placement (Created) and start (State.StartedAt), both the engine's own
    assert container["idle_s"] == pytest.approx(container["started"] - container["placed"], abs=0.001)
    assert 0 <= container["idle_s"] < 30
    assert (run["object"], run["within"], run["model"], run["task_type"]) == (
        "exec", container["workload"], "digits-logreg@1.0.0", "batch-inference")
    usage = ev["usage"]
    # the container is held until the run's end (released by the engine's cleanup before the end line)
    end = usage_end(ev)
    held = {probe["workload"]: min(probe["released"], probe["ended"] or probe["released"]) - probe["placed"],
            container["workload"]: end - container["placed"]}
    cpu_s = sum(0.5 * s for s in held.values())
    assert usage["resource_seconds"]["by_namespace"]["docker"]["cpu"] == pytest.approx(cpu_s, abs=0.01)
    assert usage["resource_seconds"]["by_model"]["digits-logreg@1.0.0"]["cpu"] == pytest.approx(
        0.5 * (run["ended"] - run["started"]), abs=0.002)
    assert usage["resource_seconds"]["by_model"]["digits-logreg@1.0.0"]["memory"] == pytest.approx(
        quantity("512Mi") * (run["ended"] - run["started"]), rel=1e-6)
    assert usage["waste"]["idle"]["seconds"] >= container["idle_s"]
    assert usage["incomplete"]["count"] == 0


def usage_end(ev: dict[str, Any]) -> float:
    from pytest_hetero.evidence.usage import epoch

    end = epoch(ev["run"]["finished_at"])
    assert end is not None
    return end


def test_a_failed_model_run_in_the_container_is_waste(pytester: pytest.Pytester, run_id: str, engine: Any) -> None:
    pytester.makefile(".matrix.yaml", d=docker_matrix(entrypoint=["{python}", "-c", "raise SystemExit(5)"]))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    ev = evidence(pytester)
    [run] = _usage(items(ev)[f"cpu::img::{COMBO}::model"])
    assert run["outcome"] == "failed"
    waste = ev["usage"]["waste"]["failed"]
    assert waste["workloads"] == 1 and waste["items"] == [f"d.matrix.yaml::cpu::img::{COMBO}::model"]
    assert waste["resource_seconds"]["cpu"] == pytest.approx(
        quantity(str(run["requests"]["cpu"])) * (run["ended"] - run["started"]), abs=0.002)


def test_a_container_the_model_item_had_to_start_is_ledgered_once(pytester: pytest.Pytester, run_id: str,
                                                                  engine: Any) -> None:
    pytester.makefile(".matrix.yaml", d=docker_matrix())
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "model")
    ev = evidence(pytester)
    model = items(ev)[f"cpu::img::{COMBO}::model"]
    assert model["status"] == "passed", model.get("failure")
    container, run = _usage(model)  # started here (no startup item selected), then the run inside it
    assert (container["object"], run["object"], run["within"]) == ("container", "exec", container["workload"])
    assert ev["usage"]["workloads"] == 2
    end = usage_end(ev)
    assert ev["usage"]["resource_seconds"]["by_namespace"]["docker"]["cpu"] == pytest.approx(
        1 * (end - container["placed"]), abs=0.01)


HOLD = ("import runpy, sys, time; held = bytearray(160 * 2**20); held[::4096] = b'x' * (160 * 256); "
        "end = time.monotonic() + 2.5\nwhile time.monotonic() < end: pass\n"  # busy: every tick's CPU counter moves
        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")


def test_model_run_is_sampled_through_the_stats_api_and_judged_on_its_peak(pytester: pytest.Pytester, run_id: str,
                                                                           engine: Any) -> None:
    rules = pytester.path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: memory-roomy, metric: memory_peak_mib, op: '<=', value: 512}\n"
                     "  - {name: memory-tight, metric: memory_peak_mib, op: '<=', value: 1}\n")
    # the digits model, after holding 160 MiB of its own (touched pages) for 2.5 s: longer than the 1 s interval
    pytester.makefile(".matrix.yaml", d=docker_matrix(acceptance=rules, entrypoint=["{python}", "-c", HOLD, *ENTRYPOINT[1:]]))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id)
    it = items(evidence(pytester))
    model = it[f"cpu::img::{COMBO}::model"]
    sampled = next(r["data"] for r in model["records"] if r["kind"] == "model.usage")
    values = next(r["data"] for r in model["records"] if r["kind"] == "model.run_time")["values"]
    container = next(r["data"] for r in model["records"] if r["kind"] == "model.run")["container"]
    assert (sampled["source"], sampled["available"], sampled["interval_s"]) == ("docker-stats", True, 1.0)
    assert sampled["scope"].startswith(f"container {container}'s cgroup during this model run")
    assert sampled["samples"] >= 2 and sampled["errors"] == []  # the engine's 1 s ticks during the 2.5 s+ run
    (dev,) = sampled["devices"]
    series = dev["series"]
    assert len(series["t_s"]) == sampled["samples"] and series["t_s"] == sorted(series["t_s"])
    memory = series["memory_used_mib"]
    assert all(m is not None and m > 0 for m in memory)  # every sample was taken: a number, never a stand-in 0
    assert series["utilisation_pct"][0] is None  # no CPU delta before the second sample: not read, never 0
    peak = values["memory_peak_mib"]
    # the highest working-set sample during the exec (usage − total_inactive_file on this cgroup v1 engine):
    # the model's 160 MiB held, not page cache
    assert peak["value"] == pytest.approx(max(memory), abs=0.06) and 160 < peak["value"] < 512
    # the series also holds the samples taken after the container started and before the exec, or after the exec
    # ended and before sampling stopped: the peak is judged on those during the exec only (at least 2 of 2.5 s+)
    during = re.fullmatch(r"Docker Engine stats API \(GET /containers/\{id\}/stats stream\): the container's "
                          r"cgroup, memory working set = usage − inactive_file: highest of the (\d+) sample\(s\) of "
                          rf"container {re.escape(container)} taken during the run", peak["source"])
    assert during is not None, peak["source"]
    assert 2 <= int(during.group(1)) <= sampled["samples"]
    assert values["cpu_s"]["value"] > 0 and values["cpu_s"]["measured_by"] == "gate"
    results = next(r["data"] for r in it[f"cpu::img::{COMBO}::business"]["records"]
                   if r["kind"] == "business.rules")["results"]
    assert [(r["name"], r["verdict"]) for r in results] == [("memory-roomy", "pass"), ("memory-tight", "fail")]
    for r in results:
        assert r["observed"] == peak["value"] and r["provenance"] == {"source": "measured", "unit": "MiB",
                                                                      "by": f"the gate: {peak['source']}"}
    assert it[f"cpu::img::{COMBO}::business"]["failure"]["category"] == "acceptance_failed"
