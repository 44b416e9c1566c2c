"""How the local backend runs one entrypoint (``run_measured``) and samples it, at the per-item cost
a nightly matrix pays (issue 20 item 1): no thread started per run, the timeout kept without one."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_hetero.backends.local import run_measured
from pytest_hetero.backends.sandbox import Confinement, Launch
from pytest_hetero.probes.usage import sampling


def _plain(argv: list[str]) -> Launch:
    return Launch(argv=argv, env={"PATH": "/usr/bin:/bin"},
                  confinement=Confinement(mechanism="none", identity="test", confined=False))


@pytest.fixture
def thread_starts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the threads started while the test runs (the real start, counted)."""
    started: list[str] = []
    real = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    return started


def test_a_run_starts_no_thread_and_reports_exit_output_and_time(tmp_path: Path, thread_starts: list[str]) -> None:
    for n in range(5):
        result = run_measured(["sh"], _plain(["/bin/sh", "-c", f"echo out{n}; echo err >&2; exit {n}"]), tmp_path,
                              30.0)
        assert (result.exit_code, result.stdout, result.stderr, result.timed_out) == (n, f"out{n}\n", "err\n", False)
        assert 0 < result.duration_s < 10
    assert thread_starts == []


def test_the_timeout_kills_a_run_that_closed_its_pipes(tmp_path: Path, thread_starts: list[str]) -> None:
    started = time.monotonic()
    result = run_measured(["sh"], _plain(["/bin/sh", "-c", "exec >/dev/null 2>&1; sleep 60"]), tmp_path, 0.5)
    assert result.timed_out is True and result.exit_code is None
    assert 0.5 <= time.monotonic() - started < 20
    assert thread_starts == []


def test_the_timeout_kills_a_silent_run_holding_its_pipes(tmp_path: Path) -> None:
    result = run_measured(["sh"], _plain(["/bin/sh", "-c", "echo begun; sleep 60"]), tmp_path, 0.5)
    assert result.timed_out is True and result.exit_code is None and result.stdout == "begun\n"


def test_one_sampling_thread_serves_every_run(thread_starts: list[str]) -> None:
    results: list[dict[str, Any]] = []
    for _ in range(20):
        with sampling("cpu", interval_s=0.01) as sampler:
            time.sleep(0.06)
        results.append(sampler.result())
    assert len([n for n in thread_starts if n == "hetero-usage-sampler"]) <= 1
    for result in results:
        assert result["available"] is True and result["samples"] >= 3  # first, at least one periodic, last
        times = result["devices"][0]["series"]["t_s"]
        assert times == sorted(times) and times[0] == 0.0 and times[-1] >= 0.06


def test_item_evidence_as_a_dict_has_every_field_and_copies_what_records_hold() -> None:
    """``to_dict`` walks JSON data instead of ``dataclasses.asdict`` (about 3 ms of each model item):
    same keys in the same order as the dataclass, same values, containers not shared."""
    from dataclasses import asdict, fields

    from pytest_hetero.evidence.model import Artifact, Failure, ItemEvidence

    ev = ItemEvidence(nodeid="m.matrix.yaml::cpu::py::m@d::model", matrix="m.matrix.yaml", layer="model",
                      keys={"resource": "cpu"}, owner="algorithm", failure=Failure("model", "timeout", "late", "a"),
                      artifacts=[Artifact("stdout.txt", "items/x/stdout.txt", 3, "0" * 64)])
    ev.record("model.run", argv=["sh", "-c", "x"], streams={"stdout": {"text": "ok", "bytes": 2}}, gaps=("a", "b"))
    out = ev.to_dict()
    expected = asdict(ev)
    expected.update(failure=ev.failure.to_dict() if ev.failure else None, artifacts=[a.to_dict() for a in ev.artifacts])
    assert list(out) == [f.name for f in fields(ItemEvidence)] and out == expected
    out["records"][0]["data"]["streams"]["stdout"]["text"] = "changed"
    out["keys"]["resource"] = "changed"
    assert ev.records[0]["data"]["streams"]["stdout"]["text"] == "ok" and ev.keys == {"resource": "cpu"}
