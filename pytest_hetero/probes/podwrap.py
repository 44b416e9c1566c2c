"""The gate's wrapper of a model run inside the workload pod (standard library only).

This file is not imported by the gate: its text runs in the pod as ``python -I -S -c <text> <run dir>
<interval s> <device tool or -> <argv…>`` (:mod:`pytest_hetero.backends.kubernetes.runtime`). It forks the model run
(``argv``; the child dies with the wrapper: ``PR_SET_PDEATHSIG`` SIGKILL), samples the container's cgroup
every ``interval`` seconds while it runs and reaps it with ``wait4``, then exits as the run did (its exit
code, or the signal that killed it, raised again on itself: ``137`` stays an OOM kill's status).

Written in the run dir, read back and judged by the gate:

- ``.samples``: a header line ``{"memory": path, "cpu": path, "cores": n, "interval": s, "at": epoch s, "t":
  monotonic s}`` (the files found, or null; the CPUs it may run on; when sampling began), then
  one JSON list per sample: ``[monotonic s, memory usage text, inactive file lines of memory.stat, CPU text]``
  (raw file contents, "" when unreadable, plus ``error`` text after the first failure);
- ``.devices`` (with a device tool, ``nvidia-smi`` or ``npu-smi``): a header ``{"tool", "path" (null: not on
  PATH), "query", "at", "t", "visible": NVIDIA_VISIBLE_DEVICES / ASCEND_VISIBLE_DEVICES}`` (``npu-smi``: also
  ``"memory": {npu id: [exit code, stdout, stderr tail]}`` of ``info -t memory -i N``), then one JSON list per
  sample: ``nvidia-smi``: ``[monotonic s, exit code, stdout, stderr tail]`` of ``--query-gpu=…
  --format=csv,noheader,nounits``; ``npu-smi``: ``[monotonic s, {npu id: [exit code, stdout, stderr tail]}]``
  of ``info -t usages -i N`` for each NPU of ``ASCEND_VISIBLE_DEVICES``;
- ``.rusage``: ``{"status": wait status, "maxrss_kib", "utime", "stime" (s, the run and every descendant it
  reaped), "inherited_kib" (the wrapper's own peak RSS at the fork: where the run's ru_maxrss starts), "at": epoch s}``.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading
import time
from typing import TextIO

MEMORY = ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory/memory.usage_in_bytes")
CPU = ("/sys/fs/cgroup/cpu.stat", "/sys/fs/cgroup/cpuacct/cpuacct.usage", "/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage")


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _sample(memory: str | None, cpu: str | None) -> list[object]:
    stat = ""
    if memory:
        stat = "".join(line + "\n" for line in _read(os.path.join(os.path.dirname(memory), "memory.stat"))
                       .splitlines() if line.split(" ", 1)[0] in ("inactive_file", "total_inactive_file"))
    cpu_text = _read(cpu) if cpu else ""
    if cpu and cpu.endswith("cpu.stat"):
        cpu_text = "".join(line + "\n" for line in cpu_text.splitlines() if line.startswith("usage_usec "))
    return [round(time.monotonic(), 3), _read(memory).strip() if memory else "", stat, cpu_text.strip()]


def _sampler(out: str, interval: float, done: threading.Event) -> None:
    memory = next((p for p in MEMORY if os.access(p, os.R_OK)), None)
    cpu = next((p for p in CPU if os.access(p, os.R_OK)), None)
    with open(out, "w", buffering=1) as f:
        f.write(json.dumps({"memory": memory, "cpu": cpu, "cores": len(os.sched_getaffinity(0)), "interval": interval,
                            "at": time.time(), "t": round(time.monotonic(), 3)}) + "\n")
        errors = 0
        while True:
            try:
                f.write(json.dumps(_sample(memory, cpu)) + "\n")
            except OSError as exc:
                errors += 1
                if errors <= 3:
                    f.write(json.dumps([round(time.monotonic(), 3), "", "", "", f"{type(exc).__name__}: {exc}"]) + "\n")
            if done.wait(interval):
                f.write(json.dumps(_sample(memory, cpu)) + "\n")  # the last one, as the run ends
                return


QUERY = "--query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu"
FORMAT = "--format=csv,noheader,nounits"


def _npu_ids(visible: str | None) -> list[str]:
    """The NPU ids of ``ASCEND_VISIBLE_DEVICES`` (``0,1``, ``0-3``); unreadable items are left out."""
    ids: list[str] = []
    for item in (visible or "").replace(" ", "").split(","):
        lo, sep, hi = item.partition("-")
        if lo.isdecimal() and (not sep or hi.isdecimal()):
            ids.extend(str(i) for i in range(int(lo), int(hi if sep else lo) + 1))
    return ids


def _devices(out: str, interval: float, done: threading.Event, tool: str) -> None:
    """Sample the devices the container sees with ``tool`` every ``interval`` seconds: ``nvidia-smi``
    (one ``--query-gpu … -lms`` process, :func:`_looped`; else one ``--query-gpu`` call a sample) or
    ``npu-smi`` (``info -t usages -i N`` for each NPU of ``ASCEND_VISIBLE_DEVICES`` a sample, ``info -t memory
    -i N`` once, in the header)."""
    import shutil
    import subprocess
    path = shutil.which(tool)
    npu = tool == "npu-smi"
    visible = os.environ.get("ASCEND_VISIBLE_DEVICES" if npu else "NVIDIA_VISIBLE_DEVICES")
    limit = max(5.0, 2 * interval)

    def call(argv: list[str]) -> list[object]:
        try:
            got = subprocess.run([path or tool, *argv], capture_output=True, text=True, timeout=limit)
            return [got.returncode, got.stdout, got.stderr[-300:]]
        except (OSError, subprocess.SubprocessError) as exc:
            return [None, "", f"{type(exc).__name__}: {exc}"]

    ids = _npu_ids(visible) if npu else []
    with open(out, "w", buffering=1) as f:
        head: dict[str, object] = {"tool": tool, "path": path, "query": ["info", "-t", "usages"] if npu else
                                   [QUERY, FORMAT], "at": time.time(), "interval": interval,
                                   "t": round(time.monotonic(), 3), "visible": visible}
        if npu and path:
            head["memory"] = {i: call(["info", "-t", "memory", "-i", i]) for i in ids}
        f.write(json.dumps(head) + "\n")
        if path and not npu and _looped(f, path, interval, done):
            return
        while path and (ids or not npu):
            at = round(time.monotonic(), 3)
            if npu:
                f.write(json.dumps([at, {i: call(["info", "-t", "usages", "-i", i]) for i in ids}]) + "\n")
            else:
                f.write(json.dumps([at, *call([QUERY, FORMAT])]) + "\n")
            if done.wait(interval):
                return


def _looped(f: TextIO, path: str, interval: float, done: threading.Event) -> bool:
    """Sample with one ``nvidia-smi --query-gpu … -lms <interval ms>`` process (NVML is opened once, not once a
    sample): each line goes to ``f`` as it comes, timed by its block (one line per GPU; a new block starts when
    the index does not grow), so the lines of one block share their sample time. True when it sampled until
    ``done``; False when the tool ended first (no ``-lms``, a refusal): the caller then calls it once per
    sample, which records each answer."""
    import subprocess
    try:
        proc = subprocess.Popen([path, QUERY, FORMAT, "-lms", str(max(1, round(interval * 1000)))],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    except OSError:
        return False

    def stop() -> None:  # its whole process group: a child of a tool left holding the pipe would delay the end
        done.wait()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:  # already gone
            pass

    threading.Thread(target=stop, daemon=True).start()
    at, last = 0.0, -1
    assert proc.stdout is not None
    for line in proc.stdout:  # each line as it comes, with its block's time (the gate merges a block's lines)
        first = line.split(",", 1)[0].strip()
        index = int(first) if first.isdecimal() else -1
        if index <= last or not at:
            at = round(time.monotonic(), 3)
        f.write(json.dumps([at, 0, line, ""]) + "\n")
        last = index
    proc.wait()
    return done.is_set()


def _die_with_parent() -> None:
    """``PR_SET_PDEATHSIG`` SIGKILL: the gate kills a run at its timeout by the wrapper's pid."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (ImportError, OSError, AttributeError):  # no ctypes in the image: the run outlives a killed wrapper
        pass


def main() -> None:
    """Run ``argv`` (``sys.argv[4:]``) measured; write ``.samples``, ``.devices`` (``sys.argv[3]``: the device
    tool, ``-`` for none) and ``.rusage`` in ``sys.argv[1]``."""
    run_dir, interval, tool, argv = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4:]
    inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            _die_with_parent()
            if os.getppid() != parent:
                os._exit(137)
            os.execvp(argv[0], argv)
        except OSError as exc:
            sys.stderr.write(f"{argv[0]}: {exc.strerror}\n")
            os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    done = threading.Event()
    thread = threading.Thread(target=_sampler, args=(os.path.join(run_dir, ".samples"), interval, done), daemon=True)
    thread.start()
    devices = threading.Thread(target=_devices, args=(os.path.join(run_dir, ".devices"), interval, done, tool),
                               daemon=True)
    if tool != "-":
        devices.start()
    while True:
        try:
            _, status, usage = os.wait4(pid, 0)
            break
        except InterruptedError:
            continue
    done.set()
    thread.join(5)
    if tool != "-":
        devices.join(5)
    with open(os.path.join(run_dir, ".rusage"), "w") as f:
        json.dump({"status": status, "maxrss_kib": usage.ru_maxrss, "utime": usage.ru_utime, "stime": usage.ru_stime,
                   "inherited_kib": inherited, "at": time.time()}, f)
    if os.WIFSIGNALED(status):
        try:
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL has no handler to reset
            pass
        os.kill(os.getpid(), os.WTERMSIG(status))
    sys.exit(os.waitstatus_to_exitcode(status))


main()
