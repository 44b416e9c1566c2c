"""An exec's stdout, stderr and exit Status as :func:`pytest_hetero.backends.kubernetes.podexec.run` reads them from a
real websocket (a ``v5.channel.k8s.io`` server on a local socket: RFC 6455 handshake and frames, each message's first
byte its channel): a UTF-8 character the server split across messages reads as itself, stdout comes back as the
bytes sent (``raw_stdout``: an outputs file that is no UTF-8 at all, as a UTF-16 JSON file, stays exact), and more
than the cap is refused as bytes and kept as head and tail; an outputs file read back is as many bytes as ``wc -c``
counted, or not judged."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client
from websocket import ABNF

from pytest_hetero.backends.kubernetes import podexec
from pytest_hetero.backends.kubernetes import run as kube_run
from pytest_hetero.backends.protocol import EngineUnavailable

STDOUT, STDERR, ERROR = 1, 2, 3
SUCCESS = json.dumps({"metadata": {}, "status": "Success"}).encode()


class ExecServer:
    """One exec websocket on 127.0.0.1: answers the handshake with ``v5.channel.k8s.io``, sends ``messages``
    (channel, bytes) as binary frames, then a close frame, and closes the connection once the client's close
    frame came."""

    def __init__(self, messages: list[tuple[int, bytes]], together: bool = False,
                 pauses: dict[int, float] | None = None) -> None:
        self.messages = messages
        self.pauses = pauses or {}  # message index → seconds waited before it is sent
        self.together = together  # the answer and every message in one write (the client reads them in one read)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.request = b""
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            while b"\r\n\r\n" not in self.request:
                self.request += conn.recv(4096)
            key = next(line.split(b":", 1)[1].strip() for line in self.request.split(b"\r\n")
                       if line.lower().startswith(b"sec-websocket-key:"))
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())  # noqa: S324 - RFC 6455 §4.2.2
            answer = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      b"Sec-WebSocket-Accept: " + accept + b"\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n")
            frames = [ABNF(1, 0, 0, 0, ABNF.OPCODE_BINARY, 0, bytes([channel]) + data).format()
                      for channel, data in self.messages]
            frames.append(ABNF(1, 0, 0, 0, ABNF.OPCODE_CLOSE, 0, b"\x03\xe8").format())
            if self.together:
                conn.sendall(answer + b"".join(frames))
            else:
                conn.sendall(answer)
                for n, frame in enumerate(frames):
                    time.sleep(self.pauses.get(n, 0))
                    conn.sendall(frame)
            conn.settimeout(5)
            try:
                conn.recv(4096)  # the client's close frame: the connection then closes
            except OSError:
                pass
        self.listener.close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The exec connects straight to the local server (a proxy in the environment would take it elsewhere)."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    yield


def exec_over(messages: list[tuple[int, bytes]], together: bool = False, pauses: dict[int, float] | None = None,
              timeout_s: float = 10, **kwargs: object) -> podexec.ExecOutcome:
    """:func:`podexec.run` of ``cat`` against an :class:`ExecServer` sending ``messages`` (``together``: in the
    handshake's answer's write; ``pauses``: seconds before message N)."""
    server = ExecServer(messages, together, pauses)
    core = client.CoreV1Api(client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.port}")))
    done = podexec.run(core, "ns", "pod", "workload", ["cat", "/tmp/x"], timeout_s, **kwargs)  # type: ignore[arg-type]
    server.thread.join(10)
    assert b"GET /api/v1/namespaces/ns/pods/pod/exec?container=workload&command=cat&command=/tmp/x&stdin=false" \
        in server.request
    return done


def split(data: bytes, *cuts: int) -> list[bytes]:
    """``data`` cut at byte offsets ``cuts``."""
    edges = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


def test_a_character_split_across_messages_reads_as_itself() -> None:
    """'é' (2 bytes) split after its first byte, '😀' (4 bytes) over three messages, '€' split on stderr, and an
    exit Status cut inside its message's 'ü': each reads as itself, and the streams' sizes and sha256 are those of
    the bytes sent (per-message decoding made each split character two or three U+FFFD, 3 bytes each)."""
    out = "café 😀 done\n".encode()
    err = "cost: 5 €\n".encode()
    status = json.dumps({"status": "Failure", "message": "command terminated (Prüfung): exit status 3"},
                        ensure_ascii=False).encode()
    at = status.index("ü".encode()) + 1
    e, smile = out.index("é".encode()) + 1, out.index("😀".encode())
    messages = [(STDOUT, part) for part in split(out, e, smile + 1, smile + 3)]
    messages += [(STDERR, part) for part in split(err, err.index("€".encode()) + 2)]
    messages += [(ERROR, status[:at]), (ERROR, status[at:])]
    done = exec_over(messages)
    assert (done.stdout, done.stderr, done.exit_code, done.timed_out) == ("café 😀 done\n", "cost: 5 €\n", 3, False)
    assert done.status == status.decode()
    assert done.streams == {"stdout_bytes": len(out), "stdout_sha256": hashlib.sha256(out).hexdigest(),
                            "stdout_capped": False, "stderr_bytes": len(err),
                            "stderr_sha256": hashlib.sha256(err).hexdigest(), "stderr_capped": False}
    assert done.stdout_bytes is None  # not asked for


def test_ascii_output_keeps_its_text_size_and_digest() -> None:
    """ASCII output reads as it always did: the text, and the size and sha256 of its bytes."""
    out = b"".join(b"line %d of the run\n" % i for i in range(2000))
    done = exec_over([(STDOUT, part) for part in split(out, 7, 5000, 5001, 20000)] + [(ERROR, SUCCESS)])
    assert (done.stdout, done.exit_code) == (out.decode(), 0)
    assert (done.streams["stdout_bytes"], done.streams["stdout_sha256"]) == (len(out), hashlib.sha256(out).hexdigest())


def test_raw_stdout_is_the_bytes_sent() -> None:
    """``raw_stdout``: stdout's bytes exactly (a UTF-16 JSON outputs file, with its byte order mark, is no UTF-8),
    its text left empty; its size and sha256 are of those bytes."""
    outputs = '{"ids": [1, 2], "label": "Größe"}'.encode("utf-16")
    done = exec_over([(STDOUT, part) for part in split(outputs, 1, 2, 9)] + [(ERROR, SUCCESS)], raw_stdout=True)
    assert (done.stdout_bytes, done.stdout, done.exit_code) == (outputs, "", 0)
    assert done.streams["stdout_sha256"] == hashlib.sha256(outputs).hexdigest()


def test_raw_stdout_over_its_cap_is_not_handed_back_as_bytes() -> None:
    """More stdout than ``stdout_cap``: no bytes (they would not be the whole), the head and tail as text."""
    out = b"a " * 600
    done = exec_over([(STDOUT, out[:500]), (STDOUT, out[500:]), (ERROR, SUCCESS)], raw_stdout=True, stdout_cap=1000)
    assert done.stdout_bytes is None and done.streams["stdout_capped"] is True
    assert "bytes not kept" in done.stdout and done.streams["stdout_bytes"] == 1200
    exact = exec_over([(STDOUT, out[:500]), (STDOUT, out[500:1000]), (ERROR, SUCCESS)], raw_stdout=True,
                      stdout_cap=1000)
    assert exact.stdout_bytes == out[:1000]  # exactly the cap: whole


def read_outputs_over(messages: list[tuple[int, bytes]]) -> bytes | None:
    """:func:`kube_run.read_outputs` of ``/r/outputs.json`` against an :class:`ExecServer` sending ``messages``."""
    server = ExecServer(messages)
    core = client.CoreV1Api(client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.port}")))
    try:
        return kube_run.read_outputs(core, "ns", "pod", "/r/outputs.json")
    finally:
        server.thread.join(10)


def test_an_outputs_file_is_the_bytes_wc_counted_or_not_judged() -> None:
    """The outputs read hands back stdout's bytes when as many arrived as ``wc -c`` counted (its first stderr line);
    fewer (the exec stream closed before the end of stdout) is ``exec_stream_lost``, never outputs to judge."""
    outputs = '{"ids": [1], "label": "Größe"}'.encode()
    whole = [(STDERR, b"%d\n" % len(outputs)), (STDOUT, outputs[:20]), (STDOUT, outputs[20:]), (ERROR, SUCCESS)]
    assert read_outputs_over(whole) == outputs
    with pytest.raises(EngineUnavailable) as cut:
        read_outputs_over([(STDERR, b"%d\n" % len(outputs)), (STDOUT, outputs[:20]), (ERROR, SUCCESS)])
    assert cut.value.category == "exec_stream_lost"
    assert f"20 bytes arrived of the {len(outputs)} bytes wc -c counted" in cut.value.message
    failed = json.dumps({"status": "Failure", "message": "command terminated with non-zero exit code: exit status 1",
                         "details": {"causes": [{"reason": "ExitCode", "message": "1"}]}}).encode()
    assert read_outputs_over([(ERROR, failed)]) is None  # no outputs file


def test_the_handshake_answer_is_read_ahead_and_messages_behind_it_are_read_as_they_came(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """websocket-client reads the handshake's answer one byte per ``recv``; :class:`podexec.ReadAhead` serves those
    from one read of the socket (the 101 answer's ~190 bytes took ~190 reads of the socket and of its TLS layer per
    exec). Messages the server sent in the same write as the answer are kept and read in order, exit Status
    included, whether or not the socket polls readable again."""
    reads: list[int] = []
    plain = socket.create_connection

    class Counted(socket.socket):
        def recv(self, size: int, flags: int = 0) -> bytes:
            reads.append(size)
            return super().recv(size, flags)

    def counted(address: tuple[str, int], *args: object, **kwargs: object) -> socket.socket:
        sock = plain(address)
        made = Counted(sock.family, sock.type, sock.proto, fileno=sock.detach())
        return made

    monkeypatch.setattr(socket, "create_connection", counted)
    out = b"".join(b"row %d\n" % i for i in range(50))
    done = exec_over([(STDOUT, out[:100]), (STDOUT, out[100:]), (STDERR, b"warn\n"), (ERROR, SUCCESS)], together=True)
    assert (done.stdout, done.stderr, done.exit_code, done.timed_out) == (out.decode(), "warn\n", 0, False)
    assert 1 <= len(reads) <= 3, reads  # one read ahead (and the close's answer), not one per byte of the answer
    reads.clear()
    apart = exec_over([(STDOUT, b"alone\n"), (ERROR, SUCCESS)])  # the answer and each message in writes of their own
    assert (apart.stdout, apart.exit_code) == ("alone\n", 0)
    assert len(reads) < 20, reads


def test_a_run_after_its_prelude_has_its_own_timeout_and_duration() -> None:
    """A run whose inputs are unpacked by its own exec first (:class:`podexec.Prelude`): what comes before the marker
    (the unpacking) has a timeout of its own and takes none of the run's time. Here the marker comes 0.7 s after the
    exec began and the run's answer 0.6 s after the marker, with a 1 s timeout: the run is not timed out, and its
    duration is counted from the marker (it was the whole exec's, unpacking included: 1.3 s, timed out)."""
    marker = b"=== 0123abcd\n"
    done = exec_over([(STDERR, b"NVIDIA_VISIBLE_DEVICES=2\n" + marker), (STDOUT, b"ran\n"), (ERROR, SUCCESS)],
                     pauses={0: 0.7, 1: 0.6}, timeout_s=1, prelude=marker)
    assert (done.timed_out, done.exit_code, done.stdout, done.stderr) == (False, 0, "ran\n", "")
    assert done.prelude == "NVIDIA_VISIBLE_DEVICES=2\n"
    assert 0.55 <= done.duration_s < 1.0, done.duration_s
    slow = exec_over([(STDERR, marker), (STDOUT, b"late\n"), (ERROR, SUCCESS)], pauses={1: 1.5}, timeout_s=1,
                     prelude=marker)  # the run itself over its timeout: timed out as before
    assert (slow.timed_out, slow.exit_code) == (True, None)


def test_an_environment_larger_than_the_prelude_is_still_the_prelude() -> None:
    """A container environment of 1.5 MiB printed before the marker (more than :data:`podexec.PRELUDE_BYTES`): the
    marker is still found (here split between two messages), the run after it keeps its own stderr and its exit
    status, and the prelude is the environment's first whole lines within the limit (before: the prelude was given
    up at 1 MiB, the environment became the run's stderr and the run, which ran, read as inputs never unpacked)."""
    marker = b"=== 0123abcd\n"
    env = b"NVIDIA_VISIBLE_DEVICES=3\n" + b"".join(b"BIG_%06d=%s\n" % (i, b"x" * 90) for i in range(16_000))
    assert len(env) > podexec.PRELUDE_BYTES * 1.4
    parts = [(STDERR, chunk) for chunk in split(env + marker[:5], *range(65_536, len(env), 65_536))]
    done = exec_over([*parts, (STDERR, marker[5:] + b"model says\n"), (STDOUT, b"ran\n"), (ERROR, SUCCESS)],
                     prelude=marker)
    assert (done.exit_code, done.stdout, done.stderr) == (0, "ran\n", "model says\n")
    assert done.prelude is not None and done.prelude.startswith("NVIDIA_VISIBLE_DEVICES=3\nBIG_000000=")
    assert done.prelude.endswith("x\n") and len(done.prelude) <= podexec.PRELUDE_BYTES
    assert env.decode().startswith(done.prelude)
    assert len(done.prelude) > podexec.PRELUDE_BYTES - 100


def test_a_prelude_without_its_marker_is_the_commands_stderr_and_bounded() -> None:
    """No marker (the unpacking failed: tar's message, here 1.5 MiB of it): the prelude is None, the first
    :data:`podexec.PRELUDE_BYTES` are the command's stderr with the count of what was not kept, and the exit status
    is the command's."""
    marker = b"=== 0123abcd\n"
    message = b"tar: cannot open\n" * 90_000
    parts = [(STDERR, chunk) for chunk in split(message, *range(65_536, len(message), 65_536))]
    done = exec_over([*parts, (ERROR, json.dumps({"status": "Failure", "message": "exit", "reason": "NonZeroExitCode",
                                                  "details": {"causes": [{"reason": "ExitCode", "message": "2"}]}}
                                                 ).encode())], prelude=marker)
    assert (done.prelude, done.exit_code) == (None, 2)
    assert done.stderr.startswith("tar: cannot open\n")
    assert f"[{len(message) - podexec.PRELUDE_BYTES} more bytes before the marker not kept]" in done.stderr
