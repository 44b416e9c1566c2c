"""One sandbox per session (issue 20 item 1): the runs it forks keep everything a bubblewrap per run gave
them, on the real kernel, real bubblewrap and the real sandbox user.

Each run is forked by the session's sandbox into mount, IPC and PID namespaces of its own, with an empty
``/tmp``, ``/var/tmp`` and ``/dev/shm``, only its own run folder writable, no capability at all and
``no_new_privs``. These tests run two runs in one sandbox and check what the second can see of the first,
what a run is allowed, and what happens when the sandbox itself fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import gone, survivors

from pytest_hetero.backends.local import run_confined, run_folder
from pytest_hetero.backends.sandbox import Launch, Sandbox, child_environment
from pytest_hetero.bundle.signing import generate_keypair

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the session sandbox is used when the gate runs as root")


@pytest.fixture
def folder() -> Iterator[Path]:
    """A matrix-like folder the sandbox user can read (outside the hidden /tmp, like a checkout)."""
    path = Path(tempfile.mkdtemp(prefix="hetero-session-test-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(sandbox: Sandbox, script: str, cwd: Path, timeout_s: float = 60) -> tuple[Launch, dict[str, object], str]:
    """Run ``sh -c script`` in a run folder of this process; (launch, result facts, stdout)."""
    with run_folder() as tmp:
        env = child_environment({}, tmp, passed=sandbox.passed)
        launch, result = run_confined(sandbox, ["/bin/sh", "-c", script], cwd=cwd, run_dir=tmp, env=env,
                                      inputs=[cwd], timeout_s=timeout_s)
        facts: dict[str, object] = {"exit": result.exit_code, "failure": result.failure, "stderr": result.stderr,
                                    "attempts": result.details.get("sandbox_attempts"), "run_dir": str(tmp),
                                    "peak": result.peak_rss_mib, "cpu_s": result.details.get("cpu_s")}
        return launch, facts, result.stdout


def test_two_runs_of_one_sandbox_see_nothing_of_each_other_and_hold_no_capability(folder: Path) -> None:
    """The first run writes into /tmp, /var/tmp, /dev/shm and its home, and leaves a setsid child behind;
    the second, forked by the same sandbox, finds all three folders empty but for its own run folder,
    sees only its own processes, cannot read the protected key, and holds no capability (every set
    empty, ``no_new_privs``) as the sandbox user. The child left behind died with the first run."""
    generate_keypair(folder / "k.key", folder / "k.pub")
    sandbox = Sandbox([folder / "k.key"])
    marker = f"hetero-left-{uuid.uuid4().hex}"
    try:
        first, facts, out = run(sandbox, "for d in /tmp /var/tmp /dev/shm $HOME; do echo a > $d/left-$$ || exit 3; "
                                         f"done; setsid python3 -c 'import time; time.sleep(300)' {marker} & "
                                         "sleep 0.2; echo done", folder)
        assert (facts["exit"], facts["failure"], out) == (0, None, "done\n"), facts
        assert first.zygote is not None and first.confinement.namespaces == ("pid", "mount", "ipc", "net")
        assert gone(marker) == []
        second, facts, out = run(sandbox, "ls -A /tmp; echo ---; ls -A /tmp/*; echo ---; ls -A /var/tmp /dev/shm; "
                                          "echo ---; ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '; echo; echo ---; "
                                          "grep -E '^(Cap[A-Za-z]+|NoNewPrivs|Uid|Groups):' /proc/self/status; "
                                          "echo ---; cat k.key && echo read || echo refused", folder)
        assert (facts["exit"], facts["failure"]) == (0, None), facts
        assert second.zygote is first.zygote  # one sandbox served both
        tmp_top, tmp_runs, others, pids, status, key = out.split("---\n")
        run_dir = Path(str(facts["run_dir"]))
        assert tmp_top.split() == [run_dir.parent.name] and tmp_runs.split() == [run_dir.name]
        assert others.split() == ["/dev/shm:", "/var/tmp:", folder.name]  # only the input bound back
        assert len(pids.split()) <= 4 and max(int(p) for p in pids.split()) < 10, pids
        fields = dict(line.split(":", 1) for line in status.strip().splitlines())
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(fields[cap].strip(), 16) == 0, (cap, fields[cap])
        assert fields["NoNewPrivs"].strip() == "1" and fields["Groups"].strip() == ""
        assert fields["Uid"].split()[0] != "0" and second.confinement.identity.startswith("hetero-sandbox (uid ")
        assert key.strip() == "refused"  # /dev/null in its place, on a nodev mount
    finally:
        assert sandbox.close() == []


def test_a_small_runs_peak_memory_is_measured(folder: Path) -> None:
    """The run's ru_maxrss starts from the peak of the process that forked it: the sandbox's supervisor
    (a few MiB), not the gate (tens to hundreds of MiB), so a 64 MiB run is measured."""
    sandbox = Sandbox([])
    try:
        _, facts, _ = run(sandbox, "exec python3 -c 'b = bytearray(64 << 20); b[::4096] = b\"x\" * (16 << 10)'",
                          folder)
        assert facts["exit"] == 0, facts
        assert isinstance(facts["peak"], float) and 64 <= facts["peak"] < 200, facts
        assert isinstance(facts["cpu_s"], float) and facts["cpu_s"] > 0
    finally:
        sandbox.close()


def test_a_dead_sandbox_is_started_again_and_one_dying_mid_run_loses_only_that_run(folder: Path) -> None:
    """The sandbox killed between runs: the next run starts a new one and passes. Killed during a run:
    that run fails ``sandbox_lost`` (infrastructure, error), is not started again (it may have done part
    of its work), and nothing it started survives."""
    sandbox = Sandbox([])
    marker = f"hetero-lost-{uuid.uuid4().hex}"
    try:
        first, facts, _ = run(sandbox, "true", folder)
        assert facts["exit"] == 0 and first.zygote is not None and first.zygote.proc is not None
        os.kill(first.zygote.proc.pid, signal.SIGKILL)
        first.zygote.proc.wait()
        second, facts, _ = run(sandbox, "true", folder)
        assert (facts["exit"], facts["attempts"]) == (0, 1) and second.zygote is not first.zygote
        assert second.zygote is not None and second.zygote.proc is not None
        zygote = second.zygote.proc.pid

        def kill_once_running() -> None:  # during the run: once its process exists (a fixed delay may come
            deadline = time.monotonic() + 20  # before a loaded machine has started it)
            while not survivors(marker) and time.monotonic() < deadline:
                time.sleep(0.05)
            os.kill(zygote, signal.SIGKILL)

        killer = threading.Thread(target=kill_once_running, daemon=True)
        killer.start()
        started = time.monotonic()
        _, facts, _ = run(sandbox, f"python3 -c 'import time; time.sleep(60)' {marker}", folder)
        killer.join()
        assert time.monotonic() - started < 20
        failure = facts["failure"]
        assert isinstance(failure, dict) and (failure["category"], failure.get("owner"), failure["status"]) == \
            ("sandbox_lost", None, "error")  # the engine reports the category; the failure table owns it
        assert facts["attempts"] == 1 and facts["exit"] is None
        assert gone(marker) == []
    finally:
        sandbox.close()


@pytest.mark.parametrize("failing_starts", [1, 2])
def test_a_sandbox_bubblewrap_cannot_build_is_a_refused_start(folder: Path, failing_starts: int) -> None:
    """An input bound into the session's view vanishes before the sandbox starts (as a container's mount
    may while bubblewrap copies the root): that start is refused and retried with a new sandbox; when
    every start is refused the run is an infrastructure error and never ran."""
    sandbox = Sandbox([])
    gone_input = Path(tempfile.mkdtemp(prefix="hetero-vanish-")) / "gone"  # under the hidden /tmp: bound back
    real_prepare = sandbox.prepare
    starts: list[Launch] = []

    def prepare_then_remove(*args: object, **kwargs: object) -> Launch:
        vanish = len(starts) < failing_starts
        if vanish:
            gone_input.mkdir()
        launch = real_prepare(*args, **kwargs)  # type: ignore[arg-type]
        if vanish:
            gone_input.rmdir()
        starts.append(launch)
        return launch

    sandbox.prepare = prepare_then_remove  # type: ignore[method-assign]
    try:
        with run_folder() as tmp:
            launch, result = run_confined(sandbox, ["/bin/sh", "-c", f"echo ran > {tmp}/ran.txt"], cwd=folder,
                                          run_dir=tmp, env={"PATH": "/usr/bin:/bin"}, inputs=[gone_input],
                                          timeout_s=30)
            ran = (tmp / "ran.txt").exists()
        assert starts[0].zygote is not None and result.details["sandbox_attempts"] == len(starts) == 2
        if failing_starts == 1:
            assert (result.failure, result.exit_code, ran) == (None, 0, True)
            return
        assert result.failure is not None and result.failure["category"] == "sandbox_setup_failed"
        assert "owner" not in result.failure and "bwrap: " in result.failure["message"]
        assert not ran
    finally:
        sandbox.close()
        shutil.rmtree(gone_input.parent, ignore_errors=True)


def test_closing_ends_the_sandbox_and_its_run_root() -> None:
    sandbox = Sandbox([])
    cwd = Path("/")
    _, facts, _ = run(sandbox, "true", cwd)
    assert facts["exit"] == 0
    zygotes = list(sandbox._zygotes.values())
    assert len(zygotes) == 1 and zygotes[0].proc is not None
    pid = zygotes[0].proc.pid
    assert sandbox.close() == []
    assert not Path(f"/proc/{pid}").exists()
    assert not (Path(tempfile.gettempdir()) / f"hetero-run-{os.getpid()}-runs").exists()


def test_per_run_bubblewrap_when_asked(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``HETERO_SANDBOX_SHARED=off``: each run gets a bubblewrap of its own (the launch names bwrap)."""
    monkeypatch.setenv("HETERO_SANDBOX_SHARED", "off")
    sandbox = Sandbox([])
    launch, facts, _ = run(sandbox, "true", folder)
    assert facts["exit"] == 0 and launch.zygote is None and launch.argv[0].endswith("bwrap")
    assert launch.confinement.namespaces[:2] == ("pid", "mount")


def test_the_runs_cpu_time_reaches_the_gate_once_the_sandbox_ends(folder: Path) -> None:
    """Each supervisor is waited for by the sandbox's PID 1, which bubblewrap waits for, which the gate
    reaps at close: the CPU time of every run ends up in the gate's own ``RUSAGE_CHILDREN`` (what a
    benchmark of the whole command measures), not lost to auto-reaping."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sandbox = Sandbox([])
    for _ in range(2):
        _, facts, _ = run(sandbox, "exec python3 -c 'import time\nend = time.process_time() + 0.3\n"
                                   "while time.process_time() < end: pass'", folder)
        assert facts["exit"] == 0 and isinstance(facts["cpu_s"], float) and facts["cpu_s"] >= 0.3, facts
    assert sandbox.close() == []
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) >= 0.6


def test_a_sandbox_whose_run_root_was_made_again_is_restarted(folder: Path) -> None:
    """Two launchers in one process (two in-process sessions): the second's close removes the (empty)
    folder of the run folders; the first one's sandbox still binds the removed folder, so it is started
    again, and its next run passes."""
    first, second = Sandbox([]), Sandbox([])
    try:
        launch, facts, _ = run(first, "true", folder)
        assert facts["exit"] == 0 and launch.zygote is not None and launch.zygote.proc is not None
        pid = launch.zygote.proc.pid
        _, facts, _ = run(second, "true", folder)
        assert facts["exit"] == 0 and second.close() == []
        again, facts, _ = run(first, "echo ran", folder)
        assert (facts["exit"], facts["attempts"], facts["failure"]) == (0, 1, None), facts
        assert again.zygote is not None and again.zygote.proc is not None and again.zygote.proc.pid != pid
    finally:
        first.close()
        second.close()


def test_an_input_its_user_cannot_read_is_a_readable_copy_never_a_uid_0_run(folder: Path) -> None:
    """A 0700 matrix folder owned by root: the run still runs as the sandbox user (before: uid 0 without
    capabilities, which owns every root-owned file it can reach), sees a read-only copy of the folder at its
    own path without the protected key, and the record lists the copy; the second run reuses it."""
    (folder / "data.txt").write_text("rows\n")
    generate_keypair(folder / "k.key", folder / "k.pub")
    folder.chmod(0o700)
    sandbox = Sandbox([folder / "k.key"])
    try:
        first, facts, out = run(sandbox, "id -u; cat data.txt; (cat k.key || echo refused) 2>/dev/null; (echo x > data.txt || echo ro) 2>/dev/null", folder)
        assert (facts["exit"], facts["failure"]) == (0, None), facts
        uid, data, key, ro = out.splitlines()
        assert int(uid) != 0 and first.confinement.identity.startswith("hetero-sandbox (uid ")
        assert (data, key, ro) == ("rows", "refused", "ro")
        assert first.confinement.copied == (f"{folder} (copied: hetero-sandbox cannot read {folder})",)
        second, facts, out = run(sandbox, "cat data.txt", folder)
        assert (facts["exit"], out) == (0, "rows\n") and second.confinement.copied == first.confinement.copied
    finally:
        assert sandbox.close() == []


def test_an_unreadable_input_too_big_to_copy_is_refused_and_never_run(folder: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Over ``HETERO_SANDBOX_STAGE`` the gate does not copy: the entrypoint never starts (no uid 0 run), the
    failure is ``sandbox_setup_failed`` (infrastructure, error) naming the folder and the fix."""
    monkeypatch.setenv("HETERO_SANDBOX_STAGE", "1K")
    (folder / "big.bin").write_bytes(b"x" * 4096)
    folder.chmod(0o700)
    sandbox = Sandbox([])
    try:
        _, facts, out = run(sandbox, "echo ran", folder)
        assert out == "" and facts["exit"] == 1
        failure = facts["failure"]
        assert isinstance(failure, dict)
        assert (failure["category"], failure["status"], "owner" in failure) == ("sandbox_setup_failed", "error", False)
        assert failure["message"] == (f"the entrypoint never ran: {folder} is not readable by the sandbox user and "
                                      "holds more than 1024 bytes, the most a session copies for it "
                                      f"(HETERO_SANDBOX_STAGE): make it readable to others (chmod -R o+rX {folder})")
    finally:
        assert sandbox.close() == []
