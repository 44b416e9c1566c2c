"""Redaction: every kind of secret is replaced by a marker naming its kind."""

from __future__ import annotations

import pytest

from pytest_hetero.redact import Redactor

ENV = {"API_TOKEN": "tok-9f8e7d6c5b", "DB_PASSWORD": "hunter2hunter2", "HOME": "/root", "SSH_KEY": "1",
       "MY_SITE_VAR": "site-secret-77", "HETERO_REDACT_ENV": "MY_SITE_*"}


@pytest.mark.parametrize(("text", "expected"), [
    ("token is tok-9f8e7d6c5b.", "token is [REDACTED:env:API_TOKEN]."),
    ("pw=hunter2hunter2", "pw=[REDACTED:env:DB_PASSWORD]"),
    ("value site-secret-77", "value [REDACTED:env:MY_SITE_VAR]"),
    ("Authorization: Bearer abc.def-123456789", "Authorization: Bearer [REDACTED:bearer-token]"),
    ("https://bob:pa55w0rd@registry.example.com/v2/", "https://[REDACTED:url-credentials]@registry.example.com/v2/"),
    ('{"auths":{"r.io":{"auth":"Ym9iOnBhc3M="}}}', '{"auths":{"r.io":{"auth":"[REDACTED:registry-auth]"}}}'),
    ("    client-key-data: LS0tLS1CRUdJTiBQUklWQVRF\n", "    client-key-data: [REDACTED:kubeconfig]\n"),
    ("    token: 0123456789abcdef0123\n", "    token: [REDACTED:kubeconfig]\n"),
    ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\nok",
     "[REDACTED:private-key]\nok"),
    ("id eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzYSJ9.c2lnbmF0dXJl end", "id [REDACTED:jwt] end"),
    ("home is /root, key=1", "home is /root, key=1"),
])
def test_each_kind(text: str, expected: str) -> None:
    assert Redactor(ENV).text(text) == expected


def test_nested_data_and_matrix_patterns() -> None:
    r = Redactor(ENV, extra=[("customer-id", r"CUST-[0-9]{6}")])
    data = {"records": [{"data": {"stdout": "user CUST-123456 tok-9f8e7d6c5b", "n": 3}}], "k": ("a",)}
    assert r.data(data) == {"records": [{"data": {"stdout": "user [REDACTED:customer-id] [REDACTED:env:API_TOKEN]",
                                                  "n": 3}}], "k": ["a"]}


def test_binary_left_alone_and_text_bytes_redacted() -> None:
    r = Redactor(ENV)
    assert r.bytes(b"\xff\xfe tok-9f8e7d6c5b") == b"\xff\xfe tok-9f8e7d6c5b"
    assert r.bytes(b"x tok-9f8e7d6c5b") == b"x [REDACTED:env:API_TOKEN]"
