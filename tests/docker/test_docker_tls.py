"""Connection over TCP with mutual TLS (``target.docker_host`` + ``target.tls``), to the real engine.

The engine here listens on its unix socket only, so the test puts a real TLS endpoint in front of
it: a proxy on 127.0.0.1 that requires a client certificate signed by a test CA (generated with
``cryptography``) and relays bytes to the socket, as ``dockerd --tlsverify -H tcp://…`` would serve.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import select
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from dockerkit import COMBO, docker, docker_matrix, evidence, failure, items, leftovers, record, statuses

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(cn: str, key: Any, issuer: x509.Name, issuer_key: Any, *, ca: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(folder: Path, stem: str, cert: x509.Certificate, key: Any) -> tuple[str, str]:
    crt, pem = folder / f"{stem}.pem", folder / f"{stem}-key.pem"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    return str(crt), str(pem)


class TlsProxy:
    """Mutual-TLS endpoint on 127.0.0.1 relaying to the engine's unix socket; counts verified clients."""

    def __init__(self, folder: Path, unix_path: str) -> None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _cert("hetero-test-ca", ca_key, _name("hetero-test-ca"), ca_key, ca=True)
        self.ca, _ = _write(folder, "ca", ca, ca_key)
        files = {}
        for cn in ("localhost", "hetero-client"):
            key = ec.generate_private_key(ec.SECP256R1())
            files[cn] = _write(folder, cn, _cert(cn, key, ca.subject, ca_key), key)
        self.client_cert, self.client_key = files["hetero-client"]
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(*files["localhost"])
        self.context.load_verify_locations(self.ca)
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.unix_path = unix_path
        self.clients: list[str] = []
        self.refused = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            tls = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            self.refused += 1
            raw.close()
            return
        cert: Any = tls.getpeercert()  # the context requires a client certificate, so there is one
        subject = dict(x[0] for x in cert["subject"])
        self.clients.append(subject["commonName"])
        upstream = socket.socket(socket.AF_UNIX)
        upstream.connect(self.unix_path)
        # one thread per connection: an SSLSocket must not be read and written from two threads at once
        try:
            while True:
                ready = [tls] if tls.pending() else select.select([tls, upstream], [], [], 5.0)[0]
                if tls in ready:
                    data = tls.recv(65536)
                    if not data:
                        break
                    upstream.sendall(data)
                if upstream in ready:
                    data = upstream.recv(65536)
                    if not data:
                        break
                    tls.sendall(data)
        except OSError:
            pass
        finally:
            for s in (tls, upstream):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def proxy(engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsProxy]:
    base = str(docker.utils.kwargs_from_env().get("base_url") or "unix:///var/run/docker.sock")
    if not base.startswith("unix://"):
        pytest.skip(f"the engine is not on a unix socket ({base})")
    p = TlsProxy(tmp_path_factory.mktemp("tls"), base[len("unix://"):])
    yield p
    p.close()


def test_matrix_over_tcp_with_mutual_tls(pytester: pytest.Pytester, run_id: str, engine: Any,
                                         proxy: TlsProxy) -> None:
    tls = {"ca_cert": proxy.ca, "client_cert": proxy.client_cert, "client_key": proxy.client_key}
    pytester.makefile(".matrix.yaml", d=docker_matrix(target={"docker_host": f"tcp://127.0.0.1:{proxy.port}",
                                                              "tls": tls}))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id).assert_outcomes(passed=5)
    ev = evidence(pytester)
    assert set(statuses(ev).values()) == {"passed"}
    assert record(items(ev)[f"cpu::img::{COMBO}::model"], "model.run")["exit_code"] == 0
    assert record(items(ev)["cpu::discovery"], "discovery.engine")["engine_host_local"] is True
    assert proxy.clients and set(proxy.clients) == {"hetero-client"} and proxy.refused == 0
    assert leftovers(engine, run_id) == []
    assert json.loads(docker_matrix())["spec"]["target"].get("tls") is None


def test_engine_refuses_a_client_without_certificate(pytester: pytest.Pytester, run_id: str,
                                                     proxy: TlsProxy) -> None:
    pytester.makefile(".matrix.yaml", d=docker_matrix(target={"docker_host": f"tcp://127.0.0.1:{proxy.port}",
                                                              "tls": {"ca_cert": proxy.ca}}))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "discovery")
    status, category, owner, message = failure(items(evidence(pytester))["cpu::discovery"])
    assert (status, category, owner) == ("error", "engine_unreachable", "infrastructure")
    assert message.startswith(f"Docker engine at tcp://127.0.0.1:{proxy.port} does not answer: ")
    assert proxy.refused >= 1 and proxy.clients == []


def test_tls_files_that_do_not_exist(pytester: pytest.Pytester, run_id: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    pytester.makefile(".matrix.yaml", d=docker_matrix(target={
        "docker_host": "tcp://127.0.0.1:9", "tls": {"client_cert": missing, "client_key": missing}}))
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, "-k", "discovery")
    status, category, owner, message = failure(items(evidence(pytester))["cpu::discovery"])
    assert (status, category, owner) == ("error", "bad_target", "platform")  # the one failure table
    assert message.startswith("target.tls: Path to a certificate and key files must be provided through the "
                              "client_cert param.")
