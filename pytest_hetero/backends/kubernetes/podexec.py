"""Exec into a pod's container (the ``pods/exec`` websocket), with stdin, a timeout and the exit code.

The exit code comes from the error channel's Status: ``Success`` → 0; ``ExitCode`` in its causes
(kubelet wording); else ``exit status N`` in its message (KWOK's local exec wording). A command
that outlives ``timeout_s`` is left to the caller to kill (it knows the process); the stream is closed.
So is one abandoned when the caller's ``stop`` event is set (its node turned NotReady): within 0.5 s.

Each exec opens its websocket from the request the shared ApiClient serialises (:func:`open_exec`), not through
``kubernetes.stream.stream``, which swaps ``call_api`` on the ApiClient it is given while it opens the websocket (a
REST call made meanwhile on that client would be sent as a websocket request: ``Handshake status 200``) and runs
the generated method's argument validation on every exec. Execs and REST calls may thus run concurrently.
Every exec of one client configuration shares one TLS context (:func:`tls_context`; ``kubernetes.stream`` loaded
the CA and the client certificate again for each) and resumes the TLS session of the last full handshake
(:func:`connect_websocket`); the handshake's answer is read ahead (:class:`ReadAhead`), and its messages are read by
channel as they arrive (:class:`ExecStream`).

stdout and stderr are kept as the bytes the process wrote (as the Docker and local engines keep them): their sizes
and sha256 are of those bytes, and their text is decoded once from the kept bytes, so a UTF-8 character the server
split across two messages reads as itself. An outputs file is read back as stdout's bytes (``raw_stdout``).
"""

from __future__ import annotations

import os
import re
import select
import socket
import ssl
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlparse

import certifi
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import ws_client
from kubernetes.stream.ws_client import (
    CLOSE_CHANNEL,
    ERROR_CHANNEL,
    STDERR_CHANNEL,
    STDIN_CHANNEL,
    STDOUT_CHANNEL,
    V4_CHANNEL_PROTOCOL,
    V5_CHANNEL_PROTOCOL,
)
from websocket import ABNF, DEFAULT_SOCKET_OPTION, WebSocket, WebSocketConnectionClosedException, WebSocketException

from pytest_hetero.backends.kubernetes.objects import parse_status
from pytest_hetero.backends.streams import STREAM_CAP_BYTES, CappedStream
from pytest_hetero.signals import quiet_thread


class Stop(Protocol):
    """What :func:`run` reads of its ``stop``: a :class:`threading.Event`, or several seen as one
    (:class:`~pytest_hetero.backends.kubernetes.run.AnyOf`)."""

    def is_set(self) -> bool:
        """Whether the exec is to be abandoned now."""
        ...


@dataclass
class ExecOutcome:
    """``exit_code`` (None when it timed out, was abandoned or none was reported), ``stdout``/``stderr``
    text, wall ``duration_s`` (seconds), ``timed_out``, ``status`` (the error channel's Status text),
    ``abandoned`` (the caller's stop event ended the wait), ``streams`` (each stream's full size,
    sha256 and whether it was capped: at most :data:`~pytest_hetero.backends.streams.STREAM_CAP_BYTES`
    of each is kept, unless the caller gave stdout another cap), ``stdout_bytes`` (stdout's bytes, whole, when the
    caller asked for them and none was dropped; ``stdout`` is then empty), ``prelude`` (what the command wrote on
    stderr before the caller's marker line, when it asked for one: :class:`Prelude`; None when that line never
    came; ``stderr`` and its facts are then of what came after it)."""

    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool
    status: str
    abandoned: bool = False
    streams: dict[str, object] = field(default_factory=dict)
    stdout_bytes: bytes | None = None
    prelude: str | None = None


def exit_code(status_text: str) -> int | None:
    """Exit code from the exec error channel's Status JSON (see module docstring); None when absent."""
    status = parse_status(status_text) if status_text else None
    if status is None:
        return None
    if status.status == "Success":
        return 0
    for reason, message in status.causes:
        if reason == "ExitCode" and message is not None:
            try:
                return int(message)
            except (TypeError, ValueError):  # not a number (a Status not sent by the kubelet): the message below
                pass
    found = re.search(r"exit status (\d+)", str(status.message or ""))
    return int(found.group(1)) if found else None


def open_exec(core: client.CoreV1Api, namespace: str, pod: str, container: str, argv: list[str],
              stdin: bool) -> ExecStream:
    """The exec websocket of ``argv`` in ``pod``/``container`` (stdout and stderr, ``stdin`` when asked, no tty), opened
    from the request the shared client serialises (its configuration, credentials and token refresh, as
    :func:`.client.raw_request` sends), without the generated method's argument validation nor
    ``kubernetes.stream.stream``'s swap of ``call_api`` on the client it is given: execs and REST calls may share
    ``core``'s ApiClient, concurrently. The TLS connection is the client's (:func:`connect_websocket`: one context
    per client configuration, its session resumed). Raises ApiException (status 0, the handshake's answer in
    ``reason``, as ``kubernetes.stream`` raises it) when the apiserver refuses the exec or the connection fails."""
    api = core.api_client
    query = [("container", container), *(("command", arg) for arg in argv), ("stdin", "true" if stdin else "false"),
             ("stdout", "true"), ("stderr", "true"), ("tty", "false")]
    _, url, headers, _, _ = api.param_serialize("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/exec",
                                                query_params=query, auth_settings=["BearerToken"])
    try:
        return ExecStream(connect_websocket(api.configuration, url, headers))
    except (Exception, KeyboardInterrupt, SystemExit) as exc:  # noqa: BLE001 - as kubernetes.stream translates them
        raise ApiException(status=0, reason=str(exc)) from None


class Prelude:
    """stderr split at a marker line: the bytes before it are kept here (``kept``: the first :data:`PRELUDE_BYTES`
    of them, cut at their last whole line when more came, ``dropped`` counting the rest), the marker dropped, and
    everything after it handed to ``rest`` as the command's stderr. A command that prints what the gate asked before
    it starts the run, then the marker, keeps that apart from the run's own stderr: the run starts after the marker
    is written, so nothing it writes can come before it. However much comes before the marker, it is looked for
    (a container's environment larger than :data:`PRELUDE_BYTES` is still the prelude, not the run's stderr); at
    most :data:`PRELUDE_BYTES` plus the marker's length are held meanwhile. When the stream ends without the marker,
    what was kept is the command's stderr (``rest``)."""

    def __init__(self, marker: bytes, rest: CappedStream) -> None:
        self.marker = marker
        self.rest = rest
        self.kept = bytearray()
        self.dropped = 0
        """Bytes before the marker beyond :data:`PRELUDE_BYTES` (not held)."""
        self._window = bytearray()  # the last bytes read, not yet kept: a marker may span two messages
        self.seen = False
        self.seen_at = 0.0
        """``time.perf_counter()`` when the marker was read (0 before)."""
        self.ended = False

    def add(self, data: bytes) -> None:
        """Hand ``data`` (stderr bytes as they arrive) to the prelude or to ``rest``."""
        if self.seen or self.ended:
            self.rest.add(data)
            return
        self._window += data
        at = self._window.find(self.marker)
        if at >= 0:
            self.seen, self.seen_at = True, time.perf_counter()
            self._keep(self._window[:at])
            after = bytes(self._window[at + len(self.marker):])
            self._window.clear()
            self.rest.add(after)
            return
        cut = len(self._window) - (len(self.marker) - 1)
        if cut > 0:
            self._keep(self._window[:cut])
            del self._window[:cut]

    def _keep(self, data: bytearray) -> None:
        room = max(PRELUDE_BYTES - len(self.kept), 0)
        self.kept += data[:room]
        self.dropped += max(len(data) - room, 0)

    def text(self) -> str | None:
        """The prelude as text (UTF-8, invalid bytes replaced), None when the marker did not come; when more than
        :data:`PRELUDE_BYTES` came, up to the last whole line kept."""
        if not self.seen:
            return None
        kept = self.kept[:self.kept.rfind(b"\n") + 1] if self.dropped else self.kept
        return kept.decode("utf-8", "replace")

    def end(self) -> None:
        """The stream ended: when the marker never came, what was kept is the command's stderr (``rest``)."""
        if self.seen or self.ended:
            return
        self.ended = True
        self._keep(self._window)
        self._window.clear()
        self.rest.add(bytes(self.kept))
        if self.dropped:
            self.rest.add(b"\n[%d more bytes before the marker not kept]\n" % self.dropped)
        self.kept.clear()


PRELUDE_BYTES = 1024 * 1024
"""Most stderr bytes :class:`Prelude` keeps of what comes before its marker (the rest is counted, not held)."""


class ExecStream:
    """One exec's websocket, read by channel (the ``channel.k8s.io`` protocols: each message's first byte is its
    channel; ``v5.channel.k8s.io`` adds a message closing a channel), as ``kubernetes.stream.ws_client.WSClient``
    reads it, except that stdout and stderr are handed to :meth:`pump`'s streams as the bytes that arrive (WSClient
    decodes each message as UTF-8 on its own: a character split between two messages became two replacement
    characters, and bytes that are no UTF-8 were replaced), the error channel's bytes (the exit Status) kept and
    read as text in ``status``. ``open`` turns False once the server closed the connection; ``resumed``: its TLS
    handshake resumed an earlier session."""

    def __init__(self, sock: WebSocket) -> None:
        self.sock = sock
        self.resumed = bool(getattr(sock.sock, "session_reused", False))
        protocol = getattr(sock, "subprotocol", None) or (sock.getheaders() or {}).get("sec-websocket-protocol")
        self.v5 = protocol == V5_CHANNEL_PROTOCOL
        self.open = True
        self._status = bytearray()

    @property
    def status(self) -> str:
        """The error channel's text so far (UTF-8, invalid bytes replaced; decoded whole, not message by message)."""
        return self._status.decode("utf-8", "replace")

    def write_stdin(self, data: bytes) -> None:
        """Send ``data`` on stdin (one binary message), then close stdin (``v5.channel.k8s.io``; an older server
        sees stdin end with the connection)."""
        self.sock.send(bytes([STDIN_CHANNEL]) + data, opcode=ABNF.OPCODE_BINARY)
        if self.v5:
            try:
                self.sock.send(bytes([CLOSE_CHANNEL, STDIN_CHANNEL]), opcode=ABNF.OPCODE_BINARY)
            except Exception:  # noqa: BLE001, S110 - the run goes on; its stdin ends with the connection
                pass

    def pump(self, timeout_s: float, out: CappedStream, err: CappedStream | Prelude) -> None:
        """Wait up to ``timeout_s`` seconds for a message, then read every message already there: stdout into
        ``out``, stderr into ``err``, the error channel onto ``status``; a close message ends the stream. Raises
        WebSocketConnectionClosedException when the connection dropped under the read."""
        if not self.open:
            return
        sock = self.sock
        if not sock.connected:
            self.open = False
            return
        raw = sock.sock
        ready = _pending(raw) or _readable(raw, timeout_s)
        while ready:
            opcode, frame = sock.recv_data_frame(True)
            if opcode == ABNF.OPCODE_CLOSE:
                self.open = False
                return
            data: bytes = frame.data if opcode in (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT) else b""
            if data:
                channel = data[0]
                if channel == CLOSE_CHANNEL and self.v5:
                    return
                if channel == STDOUT_CHANNEL:
                    out.add(data[1:])
                elif channel == STDERR_CHANNEL:
                    err.add(data[1:])
                elif channel == ERROR_CHANNEL:
                    self._status += data[1:]
            ready = _pending(raw) or _readable(raw, 0)

    def close(self) -> None:
        """Close the websocket (a close message, its answer awaited up to 3 s, then the connection), as
        ``WSClient.close`` does."""
        self.open = False
        self.sock.close()


def _pending(sock: Any) -> bool:
    """Has ``sock`` bytes no poll of the socket would show: read ahead (:class:`ReadAhead`), or decrypted by its TLS
    layer (a whole record read before)?"""
    if isinstance(sock, ReadAhead):
        return sock.pending() > 0
    return isinstance(sock, ssl.SSLSocket) and sock.pending() > 0


class ReadAhead:
    """A connected socket (TLS or plain) whose one-byte reads are served from one larger read: websocket-client reads
    the handshake's answer (the 101 status line and headers) one ``recv(1)`` at a time, ~190 calls through its
    socket layer and the TLS layer per exec. The first ``recv(1)`` with nothing kept reads what the server has sent
    (up to :data:`READ_AHEAD_BYTES`) and keeps the rest; every later read is served from what is kept first, so
    frames that came behind the headers are read as they would have been. Everything else (``send``, ``fileno``,
    ``settimeout``, ``shutdown``, ``close``, ``session_reused``…) is the socket's own. :meth:`pending` counts what is
    kept and what the TLS layer holds: a poll of the socket sees neither."""

    __slots__ = ("_kept", "sock")

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self._kept = b""

    def recv(self, size: int) -> bytes:
        """Up to ``size`` bytes: what is kept first; else, for a one-byte read, one read of up to
        :data:`READ_AHEAD_BYTES` of which the rest is kept. Raises what the socket's ``recv`` raises (timeouts,
        ``ssl.SSLWantReadError``); ``b""`` when the peer closed."""
        if self._kept:
            got, self._kept = self._kept[:size], self._kept[size:]
            return got
        if size != 1:
            data: bytes = self.sock.recv(size)
            return data
        data = self.sock.recv(READ_AHEAD_BYTES)
        self._kept = data[1:]
        return data[:1]

    def pending(self) -> int:
        """Bytes readable without waiting for the network: kept here, plus those the TLS layer decrypted."""
        return len(self._kept) + (self.sock.pending() if isinstance(self.sock, ssl.SSLSocket) else 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


READ_AHEAD_BYTES = 16384
"""Largest read :class:`ReadAhead` makes to serve a one-byte read (a TLS record's largest plaintext)."""


def _readable(sock: Any, timeout_s: float) -> bool:
    """Is ``sock`` readable within ``timeout_s`` seconds (poll: no fd limit, unlike select)?"""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


@dataclass
class _Tls:
    """One client configuration's TLS for exec websockets: the ``context`` built from ``source`` (CA, client
    certificate, verification) and the newest ``sessions`` the apiserver gave, by host and port."""

    source: tuple[object, ...]
    context: ssl.SSLContext
    sessions: dict[tuple[str, int], ssl.SSLSession] = field(default_factory=dict)


_TLS: weakref.WeakKeyDictionary[client.Configuration, _Tls] = weakref.WeakKeyDictionary()
_TLS_LOCK = threading.Lock()


def tls_context(configuration: client.Configuration) -> _Tls:
    """The TLS context exec websockets of ``configuration`` share, built once (again when its CA, certificate or
    verification settings change) as ``kubernetes.stream`` and websocket-client build one per exec: verification
    with ``ssl_ca_cert`` (else certifi's) when ``verify_ssl``, ``assert_hostname`` deciding the host name check, the
    client certificate ``cert_file``/``key_file`` when set (``SSLKEYLOGFILE`` honoured). Raises WebSocketException
    (websocket-client's wording) when the CA or the certificate cannot be loaded."""
    c = configuration
    source = (c.verify_ssl, c.ssl_ca_cert, c.cert_file, c.key_file, c.assert_hostname)
    with _TLS_LOCK:
        found = _TLS.get(c)
        if found is not None and found.source == source:
            return found
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if os.environ.get("SSLKEYLOGFILE") is not None:
        context.keylog_filename = os.environ["SSLKEYLOGFILE"]
    if c.verify_ssl:
        try:
            context.load_verify_locations(cafile=c.ssl_ca_cert or certifi.where())
        except (FileNotFoundError, ssl.SSLError, ValueError) as exc:
            raise WebSocketException(f"SSL CA certificate loading failed: {exc}") from None
        context.check_hostname = True if c.assert_hostname is None else bool(c.assert_hostname)
        context.verify_mode = ssl.CERT_REQUIRED
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if c.cert_file:
        try:
            context.load_cert_chain(c.cert_file, c.key_file or None)
        except (FileNotFoundError, ValueError, ssl.SSLError) as exc:
            raise WebSocketException(f"SSL client certificate loading failed: {exc}") from None
    made = _Tls(source, context)
    with _TLS_LOCK:
        _TLS[c] = made
    return made


def connect_websocket(configuration: client.Configuration, url: str, headers: dict[str, str]) -> WebSocket:
    """The websocket of the request ``url`` (``http(s)://``, as the client serialised it; ``headers``: its
    ``authorization`` is sent) with the channel protocols ``kubernetes.stream`` offers. Over TLS the connection
    uses :func:`tls_context` and resumes the session the apiserver gave for that host at the last full handshake
    (no certificate exchange on a resumed handshake; a full one when the server declines, whose session is then
    kept). The socket is read through :class:`ReadAhead`. Behind a proxy (the configuration's,
    or ``https_proxy``/``http_proxy`` in the environment) the connection is ``kubernetes.stream``'s own. Raises
    websocket-client's errors (``Handshake status 403 …`` when the apiserver refuses), ``OSError`` and
    ``ssl.SSLError`` when the connection fails."""
    ws_url = ws_client.get_websocket_url(url)  # type: ignore[no-untyped-call]
    parsed = urlparse(ws_url)
    secure = parsed.scheme == "wss"
    proxy = "https_proxy" if secure else "http_proxy"
    if configuration.proxy or configuration.proxy_headers or os.environ.get(proxy) or os.environ.get(proxy.upper()):
        made: WebSocket = ws_client.create_websocket(configuration, ws_url, headers)  # type: ignore[no-untyped-call]
        return made
    header = [f"sec-websocket-protocol: {V5_CHANNEL_PROTOCOL},{V4_CHANNEL_PROTOCOL}"]
    if "authorization" in headers:
        header.insert(0, f"authorization: {headers['authorization']}")
    host, port = str(parsed.hostname), parsed.port or (443 if secure else 80)
    sock: Any = socket.create_connection((host, port))
    try:
        for option in DEFAULT_SOCKET_OPTION:
            sock.setsockopt(*option)
        tls = tls_context(configuration) if secure else None
        if tls is not None:
            sock = tls.context.wrap_socket(sock, server_hostname=configuration.tls_server_name or host,
                                           session=tls.sessions.get((host, port)))
        ws = WebSocket(skip_utf8_validation=False)
        ws.connect(ws_url, header=header, socket=ReadAhead(sock))  # type: ignore[no-untyped-call]
    except BaseException:
        sock.close()
        raise
    if tls is not None and not sock.session_reused:
        session = sock.session  # one read: each copies the session (its certificates parsed again), ~0.3 ms
        if session is not None:
            tls.sessions[(host, port)] = session  # the server's ticket came with its answer: the next exec resumes
    return ws


def run(
    core: client.CoreV1Api,
    namespace: str,
    pod: str,
    container: str,
    argv: list[str],
    timeout_s: float,
    stdin: bytes | None = None,
    stop: Stop | None = None,
    stdout_cap: int = STREAM_CAP_BYTES,
    raw_stdout: bool = False,
    prelude: bytes | None = None,
) -> ExecOutcome:
    """Run ``argv`` in ``pod``/``container`` (an exec websocket of its own: :func:`open_exec`); feed ``stdin``
    (then close it); wait up to ``timeout_s`` seconds, or until ``stop`` is set (then ``abandoned``; the
    process is left to the caller). At most ``stdout_cap`` bytes of stdout are held (head and tail,
    :class:`~pytest_hetero.backends.streams.CappedStream`). With ``raw_stdout``, stdout comes back as bytes,
    ``stdout_bytes``, when no more than ``stdout_cap`` came (its text, ``stdout``, is then left empty: a 64 MiB
    outputs file is not held a second time as text); when more came, ``stdout_bytes`` is None and ``stdout`` the
    kept head and tail as text, as without it. With ``prelude`` (a marker line), stderr is split there
    (:class:`Prelude`): the outcome's ``prelude`` is what came before it, its ``stderr`` what came after; what
    comes before the marker has ``timeout_s`` of its own, and the run after it ``timeout_s`` from the marker's
    arrival, its ``duration_s`` counted from there (a run's own inputs unpacked first take none of its time).

    Raises ApiException when the apiserver refuses the exec (403 without ``create pods/exec``,
    400 when the container is not running) and websocket errors when the connection fails.
    """
    start = time.perf_counter()
    ws = open_exec(core, namespace, pod, container, argv, stdin is not None)
    out, err = CappedStream(stdout_cap), CappedStream()
    split = Prelude(prelude, err) if prelude is not None else None
    errs = split or err
    try:
        if stdin is not None:
            ws.write_stdin(stdin)
        deadline = start + timeout_s
        tick = 1.0 if stop is None else 0.5
        abandoned = False
        waiting = split is not None  # for the marker: the run's own time starts when it comes
        while ws.open:
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            if stop is not None and stop.is_set():
                abandoned = True
                break
            try:
                ws.pump(min(left, tick), out, errs)
            except WebSocketConnectionClosedException:
                break  # the server closed between the check and the read
            if waiting and split is not None and split.seen:
                waiting = False
                start = split.seen_at
                deadline = start + timeout_s
        ws.pump(0, out, errs)
        if waiting and split is not None and split.seen:
            start = split.seen_at
        if split is not None:
            split.end()
        status = ws.status
        abandoned = abandoned and not status  # finished as the stop came: the answer stands
        timed_out = not abandoned and ws.open and not status and time.perf_counter() >= deadline
    finally:
        ws.close()
    whole = out.data() if raw_stdout else None
    return ExecOutcome(
        exit_code=None if timed_out or abandoned else exit_code(status),
        stdout="" if whole is not None else out.text(),
        stderr=err.text(),
        duration_s=time.perf_counter() - start,
        timed_out=timed_out,
        status=status,
        abandoned=abandoned,
        streams={**out.facts("stdout"), **err.facts("stderr")},
        stdout_bytes=whole,
        prelude=split.text() if split is not None else None,
    )


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
