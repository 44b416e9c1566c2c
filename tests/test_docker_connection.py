"""A Docker target's engine address and settings, converted once (:func:`.client.connection`,
:class:`.translate.DockerTarget`); no engine is contacted."""

from __future__ import annotations

from pathlib import Path

import docker.errors
import pytest

from pytest_hetero.backends.docker.client import connection
from pytest_hetero.backends.docker.translate import DockerTarget


def test_an_empty_tls_asks_for_none_and_the_host_is_the_targets() -> None:
    assert connection({"docker_host": "tcp://h:2376", "tls": {}}) == {"base_url": "tcp://h:2376"}


def test_tls_settings_reach_the_tls_config(tmp_path: Path) -> None:
    ca, cert, key = (tmp_path / n for n in ("ca.pem", "cert.pem", "key.pem"))
    for f in (ca, cert, key):
        f.write_text("pem")
    mutual = connection({"docker_host": "tcp://h:2376", "tls": {"ca_cert": str(ca), "client_cert": str(cert),
                                                                 "client_key": str(key)}})
    tls = mutual["tls"]
    assert (tls.ca_cert, tls.cert, tls.verify) == (str(ca), (str(cert), str(key)), True)
    assert connection({"docker_host": "tcp://h:2376", "tls": {"verify": False}})["tls"].verify is False


def test_a_client_cert_without_its_key_or_a_member_of_another_type_is_a_clean_engine_error(tmp_path: Path) -> None:
    # (until msgspec: a KeyError for the missing key; verify "no" read as true)
    cert = tmp_path / "cert.pem"
    cert.write_text("pem")
    with pytest.raises(docker.errors.TLSParameterError):
        connection({"docker_host": "tcp://h:2376", "tls": {"client_cert": str(cert)}})
    with pytest.raises(docker.errors.DockerException, match=r"`\$\.tls\.verify`"):
        connection({"docker_host": "tcp://h:2376", "tls": {"verify": "no"}})


def test_docker_target_reads_its_keys_with_their_defaults_and_ignores_other_engines() -> None:
    assert DockerTarget.parse({"backend": "docker", "namespace": "x"}) == DockerTarget()
    got = DockerTarget.parse({"backend": "docker", "docker_host": "tcp://h:2375", "pull_policy": "never",
                              "network": "bridge", "python": "python3.12", "engine_wait_s": 5,
                              "device_ids": {"gpu": [0, "1"]}, "cpuset": {"cpu": "0-3"}})
    assert got == DockerTarget(docker_host="tcp://h:2375", pull_policy="never", network="bridge", python="python3.12",
                               engine_wait_s=5.0, device_ids={"gpu": [0, "1"]}, cpuset={"cpu": "0-3"})
    with pytest.raises(ValueError, match=r"target: .*`\$\.engine_wait_s`"):
        DockerTarget.parse({"engine_wait_s": "soon"})
