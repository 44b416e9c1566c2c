"""A bearer-token gate in front of a real model server, on loopback (what an API gateway does).

MLServer has no authentication of its own; in production a gateway (Istio, an ingress, KServe's
auth proxy) refuses requests without the right ``Authorization: Bearer`` header. This gate does
only that: 401 without/with a wrong token, otherwise the request is forwarded unchanged to the
upstream server and its answer returned unchanged. It is not a model server. Paths under an
``open`` prefix (``--open /v2/health/``) pass without a token, as gateways let a kubelet's
readiness probe through; none by default.

Run as its own process (so it never shares a GIL with the load generator)::

    HETERO_GATE_TOKEN=secret python tests/serving/authproxy.py --upstream http://127.0.0.1:8080 --port 9000

In the Kubernetes serving image (tests/kubernetes/servingimage.py) it listens on the pod's address
(``--host 0.0.0.0``) in front of MLServer on the pod's loopback.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class AuthGate:
    """Listen on ``host``:``port`` (0: any free port); forward authorised requests, and those to a path
    starting with one of ``open_paths``, to ``upstream``."""

    def __init__(self, upstream: str, token: str, port: int = 0, host: str = "127.0.0.1",
                 open_paths: tuple[str, ...] = ()) -> None:
        target = urlsplit(upstream)
        up_host, up_port, expected = target.hostname or "127.0.0.1", target.port or 80, f"Bearer {token}"
        local = threading.local()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stall

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Authorization") != expected and not self.path.startswith(open_paths):
                    self._send(401, b'{"error":"unauthorized"}', [("Content-Type", "application/json"),
                                                                  ("WWW-Authenticate", "Bearer")])
                    return
                conn = getattr(local, "conn", None)
                if conn is None:
                    conn = local.conn = http.client.HTTPConnection(up_host, up_port, timeout=30)
                    conn.connect()
                    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP | {"authorization"}}
                try:
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                except (OSError, http.client.HTTPException):
                    local.conn = None
                    self._send(502, b'{"error":"upstream unavailable"}', [("Content-Type", "application/json")])
                    return
                self._send(answer.status, data, [(k, v) for k, v in answer.getheaders() if k.lower() not in HOP])

            def _send(self, status: int, data: bytes, headers: list[tuple[str, str]]) -> None:
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{self.server.server_address[1]}"  # noqa: S104

def main() -> int:
    """Serve until killed; the token comes from $HETERO_GATE_TOKEN."""
    parser = argparse.ArgumentParser(description="bearer-token gate in front of a model server")
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--open", action="append", default=[], metavar="PREFIX",
                        help="path prefix that passes without a token (repeatable; e.g. /v2/health/)")
    args = parser.parse_args()
    gate = AuthGate(args.upstream, os.environ["HETERO_GATE_TOKEN"], args.port, args.host, tuple(args.open))
    print(f"gate on {gate.url} -> {args.upstream}", flush=True)
    gate.server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
