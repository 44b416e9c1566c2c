"""The gate's in-pod wrapper of a Kubernetes model run (:mod:`pytest_hetero.probes.podwrap`), run
here by the same ``/bin/sh`` script the engine execs in the pod (:func:`~pytest_hetero.backends.kubernetes.run.
run_script`): real processes, real ``wait4`` rusage, this machine's real cgroup files. The pod itself is in
tests/kubernetes/test_realnode_runtime.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pytest_hetero.backends.kubernetes import runtime
from pytest_hetero.backends.kubernetes.run import run_script
from pytest_hetero.probes import inworkload
from pytest_hetero.probes.usage import IN_WORKLOAD, Measured, UsageRecord


def held_until(path: Path, lines: int, at_least_s: float) -> str:
    """Python source of a model run that lasts ``at_least_s`` and until the wrapper's ``path`` (``.samples`` or
    ``.devices``: a header line, then a line per sample or per device tool line) holds ``lines`` lines, 60 s at
    most. The wrapper samples when each interval is due; a loaded machine may run a device tool or wake the
    sampling thread later than that, so a run of fixed length may see fewer samples than its length suggests."""
    return (f"import time\nend, cap = time.monotonic() + {at_least_s}, time.monotonic() + 60\n"
            f"def lines():\n    try:\n        return open({str(path)!r}).read().count('\\n')\n"
            "    except OSError:\n        return 0\n"
            f"while time.monotonic() < end or (lines() < {lines} and time.monotonic() < cap):\n    time.sleep(0.02)\n")


def hold(run_dir: Path) -> str:
    """96 MiB held (touched pages) for 0.7 s and until the sampler wrote its first and one periodic sample
    (``.samples``: header + 2 lines), so with the last one at the run's end it took at least 3."""
    return "b = bytearray(96 * 2**20); b[::4096] = b'x' * (96 * 256)\n" + held_until(run_dir / ".samples", 3, 0.7)


def run(tmp_path: Path, argv: list[str], python: str | None = sys.executable,
        interval_s: float = 0.2, devices: str = "-") -> tuple[int, UsageRecord, dict[str, Measured]]:
    """(exit status of the engine's script, ``model.usage``, ``model.run_time`` values) of ``argv``."""
    saved, inworkload.SAMPLE_INTERVAL_S = inworkload.SAMPLE_INTERVAL_S, interval_s
    try:
        script = run_script(argv, str(tmp_path / "run"), str(tmp_path), {"HETERO_X": "1"}, python, devices)
    finally:
        inworkload.SAMPLE_INTERVAL_S = saved
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=60)
    return (done.returncode, *runtime.read_back(files(tmp_path / "run"), None, 1.0, "p"))


def files(run_dir: Path) -> dict[str, str]:
    """The run dir's evidence files as :func:`runtime.evidence` reads them (absent: "")."""
    return {name: (run_dir / name).read_text() if (run_dir / name).exists() else ""
            for name in (".rusage", runtime.NO_WRAPPER, ".samples", ".devices")}


def test_the_run_is_measured_its_own_peak_rss_and_cpu_and_the_cgroup_series(tmp_path: Path) -> None:
    rc, usage, values = run(tmp_path, [sys.executable, "-c", hold(tmp_path / "run")])
    assert rc == 0 and (tmp_path / "run" / ".rc").read_text().strip() == "0"
    peak, cpu = values["memory_peak_mib"], values["cpu_s"]
    assert peak["value"] is not None and 96 < peak["value"] < 160 and "unavailable" not in peak  # the 96 MiB held + the interpreter
    assert peak["source"].endswith("taken inside the pod by the gate's wrapper") and peak["measured_by"] == IN_WORKLOAD and peak["in_workload"]
    assert cpu["value"] is not None and 0 < cpu["value"] < 5
    assert (usage["source"], usage["available"], usage["interval_s"], usage["errors"]) == ("pod-cgroup", True, 0.2, [])
    assert usage["samples"] >= 3  # at the start, every 0.2 s of the run (one at least: hold()), at its end
    (dev,) = usage["devices"]
    assert all(m is not None and m > 0 for m in dev["series"]["memory_used_mib"])
    assert dev["series"]["utilisation_pct"][0] is None and dev["series"]["utilisation_pct"][1] is not None


def test_the_runs_exit_status_and_killing_signal_pass_through(tmp_path: Path) -> None:
    assert run(tmp_path / "a", ["/bin/sh", "-c", "exit 3"])[0] == 3
    rc, _, values = run(tmp_path / "b", ["/bin/sh", "-c", "kill -9 $$"])
    assert rc == 128 + 9  # the status an OOM kill leaves, which the engine's oom check reads
    assert values["cpu_s"]["value"] is not None
    # a peak not above the wrapper's own at the fork is unknown, and says so (never 0)
    assert values["memory_peak_mib"]["value"] is None
    assert "the gate's wrapper in the pod" in values["memory_peak_mib"]["unavailable"]


def test_killing_the_wrapper_by_its_pid_kills_the_run(tmp_path: Path) -> None:
    """The engine kills a timed-out run by the pid in ``.pid`` (the wrapper's): the run dies with it."""
    (tmp_path / "run").mkdir()
    child = tmp_path / "child.pid"
    script = run_script(["/bin/sh", "-c", f"echo $$ > {child}; exec sleep 30"], str(tmp_path / "run"),
                        str(tmp_path), {}, sys.executable)
    proc = subprocess.Popen(["/bin/sh", "-c", script])
    try:
        deadline = time.monotonic() + 10
        while not child.exists() or not child.read_text().strip():
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.05)
        os.kill(int((tmp_path / "run" / ".pid").read_text()), signal.SIGKILL)
        assert proc.wait(10) == 137
        pid = int(child.read_text())
        deadline = time.monotonic() + 5
        while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]:
            assert time.monotonic() < deadline, "the run outlived its killed wrapper"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    _, values = runtime.read_back(files(tmp_path / "run"), None, 3.0, "p")
    assert values["memory_peak_mib"]["value"] is None
    assert values["memory_peak_mib"]["unavailable"].startswith("the wrapper wrote no rusage: the run did not end")


def test_an_image_without_the_interpreter_runs_the_model_unwrapped_and_says_why(tmp_path: Path) -> None:
    rc, usage, values = run(tmp_path, ["/bin/sh", "-c", "test \"$HETERO_X\" = 1"], python="no-such-python3")
    assert rc == 0  # the model ran, with its environment
    why = "the image has no no-such-python3 to run the gate's in-pod wrapper (rusage and cgroup samples)"
    assert (usage["available"], usage["unavailable"], usage["samples"]) == (False, why, 0)
    assert all((v["value"], v["unavailable"]) == (None, why) for v in values.values())


def test_devices_are_sampled_with_the_tool_only_those_allocated_or_say_why(tmp_path: Path,
                                                                         monkeypatch: Any) -> None:
    """A tool on PATH standing in for ``nvidia-smi`` (the real node's stand-in image has one too): the query
    the wrapper sends, the allocated device kept, ``[N/A]`` read as None; no tool: why, never 0."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text("#!/bin/sh\n[ \"$*\" = '--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu "
                    "--format=csv,noheader,nounits' ] || exit 2\n"
                    "echo '0, GPU-a, Stand-in, 1234, 8192, [N/A]'\necho '1, GPU-b, Stand-in, 99, 8192, 50'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "GPU-a")
    # 0.5 s, and until the wrapper wrote 2 samples (a call of the tool each, after the header)
    rc, usage, _ = run(tmp_path / "a", [sys.executable, "-c", held_until(tmp_path / "a" / "run" / ".devices", 3, 0.5)],
                       devices="nvidia-smi")
    assert rc == 0
    container, device = usage["devices"]
    assert (container["id"], device["id"], device["source"], device["memory_total_mib"]) == (
        "container", "GPU-a", "nvidia-smi", 8192.0)
    assert set(device["series"]["memory_used_mib"]) == {1234.0} and set(device["series"]["utilisation_pct"]) == {None}
    assert usage["device_sampling"]["available"] and usage["device_sampling"]["samples"] >= 2
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    _, usage, _ = run(tmp_path / "b", ["true"], devices="nvidia-smi")
    assert [d["id"] for d in usage["devices"]] == ["container"]
    assert (usage["device_sampling"]["available"], usage["device_sampling"]["unavailable"]) == (
        False, "nvidia-smi is not on PATH in the container")


def test_a_run_killed_while_its_inputs_unpack_never_starts(tmp_path: Path) -> None:
    """A run's own pod unpacks its inputs in the run's exec (:func:`~pytest_hetero.backends.kubernetes.run.
    inputs_prelude`). When the gate gives up while they unpack (the model's timeout, a node turning NotReady, Ctrl-C)
    it kills the run by ``.pid`` (:func:`~pytest_hetero.backends.kubernetes.run.kill_run`'s command); an exec outlives
    the gate's giving up (KWOK's runs on the host and is fed its whole stdin even after the gate closed the
    connection), so the run must not start once the unpacking ends: ``.pid`` names the exec's shell until the run
    starts."""
    import io
    import tarfile

    from pytest_hetero.backends.kubernetes.run import inputs_prelude, kill_run_script

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("datasets/d/data.csv")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"row,1\n"))
    ran, root, run_dir = tmp_path / "ran", tmp_path / "inputs", tmp_path / "inputs" / "runs" / "r"
    script = inputs_prelude(str(root), "=== marker\n", str(run_dir)) + run_script(
        ["/bin/sh", "-c", f"touch {ran}"], str(run_dir), str(tmp_path), {}, None)
    proc = subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    try:
        data = buf.getvalue()
        proc.stdin.write(data[:512])  # tar is unpacking: the rest has not come yet
        proc.stdin.flush()
        deadline = time.monotonic() + 10
        while not (run_dir / ".pid").exists():
            assert time.monotonic() < deadline, "no pid file while the inputs unpack"
            time.sleep(0.05)
        subprocess.run(kill_run_script(str(run_dir)), check=False)  # the gate gave up
        proc.stdin.write(data[512:])  # the rest of the stdin still comes
        proc.stdin.close()
        proc.wait(10)
        time.sleep(0.5)
        assert not ran.exists(), "the run started after the gate killed it"
    finally:
        proc.kill()
        proc.wait()


def test_a_run_with_its_inputs_creates_its_folder_once(tmp_path: Path) -> None:
    """A run's own Pod gets its inputs in the run's exec: the prelude creates the run folder, and the run's script
    created it again (one more process per run, on KWOK on the gate's host). Now once; the run still writes its
    exit status there."""
    import io
    import tarfile

    from pytest_hetero.backends.kubernetes.run import inputs_prelude

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("datasets/d/data.csv")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"row,1\n"))
    root, run_dir = tmp_path / "inputs", tmp_path / "inputs" / "runs" / "r"
    script = inputs_prelude(str(root), "=== marker\n", str(run_dir)) + run_script(
        ["/bin/sh", "-c", "cat datasets/d/data.csv; exit 3"], str(run_dir), str(root), {}, None, made=True)
    assert script.count("mkdir ") == 1
    done = subprocess.run(["/bin/sh", "-c", script], input=buf.getvalue(), capture_output=True, timeout=30,
                          check=False)
    assert (done.returncode, done.stdout, (run_dir / ".rc").read_text()) == (3, b"row,1\n", "3\n")
    assert done.stderr.endswith(b"=== marker\n")
