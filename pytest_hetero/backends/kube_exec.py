"""Exec into a pod's container (the ``pods/exec`` websocket), with stdin, a timeout and the exit code.

The exit code comes from the error channel's Status: ``Success`` → 0; ``ExitCode`` in its causes
(kubelet wording); else ``exit status N`` in its message (KWOK's local exec wording). A command
that outlives ``timeout_s`` is left to the caller to kill (it knows the process); the stream is closed.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

from kubernetes import client
from kubernetes.stream import stream
from kubernetes.stream.ws_client import ERROR_CHANNEL, STDIN_CHANNEL
from websocket import WebSocketConnectionClosedException


@dataclass
class ExecOutcome:
    """``exit_code`` (None when it timed out or none was reported), ``stdout``/``stderr`` text,
    wall ``duration_s`` (seconds), ``timed_out``, ``status`` (the error channel's Status text)."""

    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    status: str


def exit_code(status_text: str) -> int | None:
    """Exit code from the exec error channel's Status JSON (see module docstring); None when absent."""
    if not status_text:
        return None
    try:
        status = json.loads(status_text)
    except ValueError:
        return None
    if status.get("status") == "Success":
        return 0
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message"))
            except (TypeError, ValueError):
                pass
    found = re.search(r"exit status (\d+)", str(status.get("message", "")))
    return int(found.group(1)) if found else None


def run(
    core: client.CoreV1Api,
    namespace: str,
    pod: str,
    container: str,
    argv: list[str],
    timeout_s: float,
    stdin: bytes | None = None,
) -> ExecOutcome:
    """Run ``argv`` in ``pod``/``container``; feed ``stdin`` (then close it); wait up to ``timeout_s`` seconds.

    Raises ApiException when the apiserver refuses the exec (403 without ``create pods/exec``,
    400 when the container is not running) and websocket errors when the connection fails.
    """
    start = time.perf_counter()
    ws = stream(
        core.connect_get_namespaced_pod_exec,
        pod,
        namespace,
        container=container,
        command=argv,
        stdin=stdin is not None,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
    )
    out: list[str] = []
    err: list[str] = []
    status = ""
    try:
        if stdin is not None:
            ws.write_channel(STDIN_CHANNEL, stdin)
            try:
                ws.close_channel(STDIN_CHANNEL)
            except Exception:  # noqa: BLE001, S110 - pre-v5 servers: stdin ends with the connection
                pass
        deadline = start + timeout_s
        while ws.is_open():
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            try:
                ws.update(timeout=min(left, 1.0))
            except WebSocketConnectionClosedException:
                break  # the server closed between is_open() and the read: what arrived is kept below
            out.append(ws.read_stdout(timeout=0) if ws.peek_stdout() else "")
            err.append(ws.read_stderr(timeout=0) if ws.peek_stderr() else "")
            if ws.peek_channel(ERROR_CHANNEL):
                status += ws.read_channel(ERROR_CHANNEL)
        out.append(ws.read_stdout(timeout=0) if ws.peek_stdout() else "")
        err.append(ws.read_stderr(timeout=0) if ws.peek_stderr() else "")
        if ws.peek_channel(ERROR_CHANNEL):
            status += ws.read_channel(ERROR_CHANNEL)
        timed_out = ws.is_open() and not status and time.perf_counter() >= deadline
    finally:
        ws.close()
    return ExecOutcome(
        exit_code=None if timed_out else exit_code(status),
        stdout="".join(out),
        stderr="".join(err),
        duration_s=time.perf_counter() - start,
        timed_out=timed_out,
        status=status,
    )
