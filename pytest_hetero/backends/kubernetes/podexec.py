"""Exec into a pod's container (the ``pods/exec`` websocket), with stdin, a timeout and the exit code.

The exit code comes from the error channel's Status: ``Success`` → 0; ``ExitCode`` in its causes
(kubelet wording); else ``exit status N`` in its message (KWOK's local exec wording). A command
that outlives ``timeout_s`` is left to the caller to kill (it knows the process); the stream is closed.
So is one abandoned when the caller's ``stop`` event is set (its node turned NotReady): within 0.5 s.

Each exec opens its websocket from the request the shared ApiClient serialises (:func:`open_exec`), not through
``kubernetes.stream.stream``, which swaps ``call_api`` on the ApiClient it is given while it opens the websocket (a
REST call made meanwhile on that client would be sent as a websocket request: ``Handshake status 200``) and runs
the generated method's argument validation on every exec. Execs and REST calls may thus run concurrently.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.stream import ws_client
from kubernetes.stream.ws_client import ERROR_CHANNEL, STDIN_CHANNEL
from websocket import WebSocketConnectionClosedException

from pytest_hetero.backends.streams import CappedStream
from pytest_hetero.signals import quiet_thread


@dataclass
class ExecOutcome:
    """``exit_code`` (None when it timed out, was abandoned or none was reported), ``stdout``/``stderr``
    text, wall ``duration_s`` (seconds), ``timed_out``, ``status`` (the error channel's Status text),
    ``abandoned`` (the caller's stop event ended the wait), ``streams`` (each stream's full size,
    sha256 and whether it was capped: at most :data:`~pytest_hetero.backends.streams.STREAM_CAP_BYTES`
    of each is kept)."""

    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    status: str
    abandoned: bool = False
    streams: dict[str, object] = field(default_factory=dict)


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


def open_exec(core: client.CoreV1Api, namespace: str, pod: str, container: str, argv: list[str],
              stdin: bool) -> Any:
    """The exec websocket (a ``kubernetes.stream.ws_client.WSClient``) of ``argv`` in ``pod``/``container``
    (stdout and stderr, ``stdin`` when asked, no tty), opened from the request the shared client serialises (its
    configuration, credentials and token refresh, as :func:`.client.raw_request` sends), without the generated
    method's argument validation nor ``kubernetes.stream.stream``'s swap of ``call_api`` on the client it is given:
    execs and REST calls may share ``core``'s ApiClient, concurrently. Raises ApiException (status 0, the
    handshake's answer in ``reason``, as ``stream`` raised it) when the apiserver refuses the exec or the
    connection fails."""
    api = core.api_client
    query = [("container", container), *(("command", arg) for arg in argv), ("stdin", "true" if stdin else "false"),
             ("stdout", "true"), ("stderr", "true"), ("tty", "false")]
    _, url, headers, _, _ = api.param_serialize("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/exec",
                                                query_params=query, auth_settings=["BearerToken"])
    return ws_client.websocket_call(api.configuration, "GET", url, headers=headers,  # type: ignore[no-untyped-call]
                                    _preload_content=False, capture_all=False)


def run(
    core: client.CoreV1Api,
    namespace: str,
    pod: str,
    container: str,
    argv: list[str],
    timeout_s: float,
    stdin: bytes | None = None,
    stop: threading.Event | None = None,
) -> ExecOutcome:
    """Run ``argv`` in ``pod``/``container`` (an exec websocket of its own: :func:`open_exec`); feed ``stdin``
    (then close it); wait up to ``timeout_s`` seconds, or until ``stop`` is set (then ``abandoned``; the
    process is left to the caller).

    Raises ApiException when the apiserver refuses the exec (403 without ``create pods/exec``,
    400 when the container is not running) and websocket errors when the connection fails.
    """
    start = time.perf_counter()
    ws = open_exec(core, namespace, pod, container, argv, stdin is not None)
    out, err = CappedStream(), CappedStream()
    status = ""
    try:
        if stdin is not None:
            ws.write_channel(STDIN_CHANNEL, stdin)
            try:
                ws.close_channel(STDIN_CHANNEL)
            except Exception:  # noqa: BLE001, S110 - pre-v5 servers: stdin ends with the connection
                pass
        deadline = start + timeout_s
        tick = 1.0 if stop is None else 0.5
        abandoned = False
        while ws.is_open():
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            if stop is not None and stop.is_set():
                abandoned = True
                break
            try:
                ws.update(timeout=min(left, tick))
            except WebSocketConnectionClosedException:
                break  # the server closed between is_open() and the read: what arrived is kept below
            _drain(ws, out, err)
            if ws.peek_channel(ERROR_CHANNEL):
                status += ws.read_channel(ERROR_CHANNEL)
        _drain(ws, out, err)
        if ws.peek_channel(ERROR_CHANNEL):
            status += ws.read_channel(ERROR_CHANNEL)
        abandoned = abandoned and not status  # finished as the stop came: the answer stands
        timed_out = not abandoned and ws.is_open() and not status and time.perf_counter() >= deadline
    finally:
        ws.close()
    return ExecOutcome(
        exit_code=None if timed_out or abandoned else exit_code(status),
        stdout=out.text(),
        stderr=err.text(),
        duration_s=time.perf_counter() - start,
        timed_out=timed_out,
        status=status,
        abandoned=abandoned,
        streams={**out.facts("stdout"), **err.facts("stderr")},
    )


def _drain(ws: object, out: CappedStream, err: CappedStream) -> None:
    """Move what the websocket client buffered for stdout/stderr into the capped streams."""
    if ws.peek_stdout():  # type: ignore[attr-defined]
        out.add(ws.read_stdout(timeout=0).encode("utf-8", "surrogateescape"))  # type: ignore[attr-defined]
    if ws.peek_stderr():  # type: ignore[attr-defined]
        err.add(ws.read_stderr(timeout=0).encode("utf-8", "surrogateescape"))  # type: ignore[attr-defined]


def try_run(core: client.CoreV1Api, namespace: str, pod: str, argv: list[str], wait_s: float) -> bool:
    """Best effort :func:`run` of ``argv`` in the ``workload`` container, in a daemon thread; True when
    it answered (ran to an exit) within ``wait_s`` seconds. Never raises: a NotReady node's kubelet
    may never answer, and the caller must not wait for it longer than ``wait_s``."""
    answered = threading.Event()

    def attempt() -> None:
        quiet_thread()
        try:
            done = run(core, namespace, pod, "workload", argv, wait_s)
        except Exception:  # noqa: BLE001 - unreachable kubelet, pod gone: not answered
            return
        if not done.timed_out:
            answered.set()

    threading.Thread(target=attempt, name="hetero-exec-try", daemon=True).start()
    return answered.wait(wait_s)
