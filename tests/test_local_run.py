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
from pytest_hetero.probes.usage import Sampler, UsageRecord, sampling


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


def held_until_periodic(sampler: Sampler, at_least_s: float, timeout_s: float = 30.0) -> None:
    """Keep ``sampler``'s section open ``at_least_s`` and until the sampling thread took one periodic sample
    (the first is ``start``'s own): the thread wakes when the interval is due, which a loaded machine may
    delay past a short section (20 runs of 60 ms each needing a wake-up within 50 ms is timing, not a rule)."""
    deadline = time.monotonic() + timeout_s
    time.sleep(at_least_s)
    while len(sampler.readings) < 2:
        assert time.monotonic() < deadline, f"no periodic sample within {timeout_s} s"
        time.sleep(0.005)


def test_one_sampling_thread_serves_every_run(thread_starts: list[str]) -> None:
    results: list[UsageRecord] = []
    for _ in range(20):
        with sampling("cpu", interval_s=0.01) as sampler:
            held_until_periodic(sampler, 0.06)
        results.append(sampler.result())
    assert len([n for n in thread_starts if n == "hetero-usage-sampler"]) <= 1
    for result in results:
        assert result["available"] is True and result["samples"] >= 3  # first, at least one periodic, last
        times = result["devices"][0]["series"]["t_s"]
        assert times == sorted(times) and times[0] == 0.0 and times[-1] >= 0.06
        assert times[1] >= 0.01  # the periodic sample came when its interval was due, not before


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


@pytest.mark.parametrize("failing_starts", [1, 2])
def test_a_sandbox_bwrap_cannot_set_up_is_retried_then_an_infrastructure_error_never_the_models(
        tmp_path: Path, failing_starts: int) -> None:
    """Seen in the 1k-item benchmark beside a running containerd: ``bwrap: Can't bind mount /oldroot/ on
    /newroot/: … remount "…/rootfs": No such file or directory`` (a container's mount vanished while
    bwrap copied the root) failed the model item as ``nonzero_exit`` owned by algorithm. Here a mount
    bwrap must make fails for real (an input folder removed after the launch was prepared), on the first
    start only (the second start runs) or on both (an infrastructure error; the code never ran)."""
    from pytest_hetero.backends.local import SANDBOX_ATTEMPTS, run_confined
    from pytest_hetero.backends.sandbox import Sandbox

    sandbox = Sandbox([])
    gone = tmp_path / "inputs" / "gone"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    real_prepare = sandbox.prepare
    starts: list[Launch] = []

    def prepare_then_remove(*args: Any, **kwargs: Any) -> Launch:
        vanish = len(starts) < failing_starts
        if vanish:
            gone.mkdir(parents=True)
        launch = real_prepare(*args, **kwargs)
        if vanish:
            gone.rmdir()
        starts.append(launch)
        return launch

    sandbox.prepare = prepare_then_remove  # type: ignore[method-assign]
    cwd = tmp_path / "cwd"  # beside the input, so the input is bound on its own
    cwd.mkdir()
    launch, result = run_confined(sandbox, ["/bin/sh", "-c", f"echo ran > {run_dir}/ran.txt"], cwd=cwd,
                                  run_dir=run_dir, env={"PATH": "/usr/bin:/bin"}, inputs=[gone], timeout_s=30)
    if launch.confinement.mechanism != "bubblewrap":
        pytest.skip(f"no bubblewrap here: {launch.confinement.reason}")
    assert SANDBOX_ATTEMPTS == 2 and result.details["sandbox_attempts"] == len(starts) == 2
    if failing_starts == 1:
        assert (result.failure, result.exit_code) == (None, 0)
        assert (run_dir / "ran.txt").read_text() == "ran\n"
        return
    assert result.failure is not None and result.failure["category"] == "sandbox_setup_failed"
    assert "owner" not in result.failure and result.failure["status"] == "error"  # the failure table owns it
    assert "bwrap: " in result.failure["message"] and not (run_dir / "ran.txt").exists()


def test_a_run_that_prints_like_bwrap_but_ran_keeps_its_own_exit(tmp_path: Path) -> None:
    from pytest_hetero.backends.local import run_confined
    from pytest_hetero.backends.sandbox import Sandbox

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    launch, result = run_confined(Sandbox([]), ["/bin/sh", "-c", "echo out; echo 'bwrap: fake' >&2; exit 1"],
                                  cwd=tmp_path, run_dir=run_dir, env={"PATH": "/usr/bin:/bin"}, inputs=[],
                                  timeout_s=30)
    assert (result.exit_code, result.stdout, result.failure, result.details["sandbox_attempts"]) == (1, "out\n", None, 1)
