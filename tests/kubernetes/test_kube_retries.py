"""API calls survive an apiserver that answers 503/429 for a while or is briefly unreachable
(retries with backoff), and end in a clear error when it stays away. The flaky apiserver is a
small loopback HTTP server of our own: the real plane cannot be made to answer 503 on demand."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes.client import connect

NODES = {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": []}


def _kubeconfig(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "flaky",
        "clusters": [{"name": "flaky", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t0k3n-for-tests"}}],
        "contexts": [{"name": "flaky", "context": {"cluster": "flaky", "user": "u", "namespace": "ns1"}}]}))
    return path


def _serve(failures: list[int]) -> tuple[ThreadingHTTPServer, list[float]]:
    """Answer GET with the next status in ``failures`` (then 200 + a NodeList); log request times."""
    seen: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(time.monotonic())
            status = failures.pop(0) if failures else 200
            body = json.dumps(NODES if status == 200 else {"kind": "Status", "code": status}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def test_503_and_429_are_retried_with_backoff(tmp_path: Path) -> None:
    server, seen = _serve([503, 429, 503])
    try:
        api, namespace, context = connect({"kubeconfig": str(_kubeconfig(tmp_path, server.server_port))}, None)
        nodes: Any = client.CoreV1Api(api).list_node()  # the API's answer: the client's models make every field optional
    finally:
        server.shutdown()
    assert (namespace, context, nodes.metadata.resource_version) == ("ns1", "flaky", "7")
    assert len(seen) == 4
    assert seen[-1] - seen[0] >= 0.5 + 1.0  # backoff 0.5 s, 1 s, 2 s between the four tries (first has none)


def test_an_apiserver_that_stays_down_ends_in_a_clear_error(tmp_path: Path) -> None:
    server, seen = _serve([503] * 10)
    try:
        api, _, _ = connect({"kubeconfig": str(_kubeconfig(tmp_path, server.server_port))}, None)
        with pytest.raises(ApiException) as info:
            client.CoreV1Api(api).list_node()
    finally:
        server.shutdown()
    assert info.value.status == 503
    assert len(seen) == 5  # the first try and four retries


def test_a_briefly_unreachable_apiserver_is_reached_once_it_listens(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    api, _, _ = connect({"kubeconfig": str(_kubeconfig(tmp_path, port))}, None)
    holder: dict[str, object] = {}

    def late_start() -> None:
        time.sleep(1.0)  # refused connections meanwhile

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps(NODES).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        holder["server"] = server
        server.serve_forever()

    threading.Thread(target=late_start, daemon=True).start()
    try:
        nodes: Any = client.CoreV1Api(api).list_node()  # the API's answer: the client's models make every field optional
    finally:
        time.sleep(0.1)
        if "server" in holder:
            holder["server"].shutdown()  # type: ignore[attr-defined]
    assert nodes.metadata.resource_version == "7"


@pytest.mark.parametrize(("text", "why"), [
    (": : :\n", "not a kubeconfig (ParserError: while parsing a block mapping)"),
    ("- a\n", "not a kubeconfig (TypeError: list indices must be integers or slices, not str)"),
    ('{"clusters": 5}\n', "not a kubeconfig (TypeError: 'int' object is not iterable)"),
    # a namespace that is no string (kubectl refuses it too): was taken as the namespace "5"
    ("clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\n"
     "contexts: [{name: x, context: {cluster: c, user: u, namespace: 5}}]\ncurrent-context: x\n",
     "not a kubeconfig (ValidationError: Expected `str | null`, got `int` - at `$.context.namespace`)"),
])
def test_kubeconfig_that_is_not_one_is_a_bad_target(tmp_path: Path, text: str, why: str) -> None:
    from pytest_hetero.backends.protocol import ActionFailed
    from pytest_hetero.judge.failures import owner_category

    path = tmp_path / "kubeconfig"
    path.write_text(text)
    with pytest.raises(ActionFailed) as caught:
        connect({"kubeconfig": str(path)}, None)
    assert (caught.value.category, owner_category(caught.value.category, "discovery"), str(caught.value)) == (
        "bad_target", "platform", f"no usable Kubernetes configuration (kubeconfig {path}, context (current)): {why}")
