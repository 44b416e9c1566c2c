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


def test_env_secret_spelled_as_a_json_string_is_redacted() -> None:
    """A model that json.dumps a secret with quotes, backslashes or non-ASCII writes it escaped."""
    import json

    r = Redactor({"DB_PASSWORD": 'pl@nted"Pass\\w\u00f6rd'})
    assert r.text(json.dumps({"pw": 'pl@nted"Pass\\w\u00f6rd'})) == '{"pw": "[REDACTED:env:DB_PASSWORD]"}'
    assert r.text(json.dumps({"pw": 'pl@nted"Pass\\w\u00f6rd'}, ensure_ascii=False)) == \
        '{"pw": "[REDACTED:env:DB_PASSWORD]"}'
    assert r.text('raw pl@nted"Pass\\w\u00f6rd') == "raw [REDACTED:env:DB_PASSWORD]"


def test_nested_data_and_matrix_patterns() -> None:
    r = Redactor(ENV, extra=[("customer-id", r"CUST-[0-9]{6}")])
    data = {"records": [{"data": {"stdout": "user CUST-123456 tok-9f8e7d6c5b", "n": 3}}], "k": ("a",)}
    assert r.data(data) == {"records": [{"data": {"stdout": "user [REDACTED:customer-id] [REDACTED:env:API_TOKEN]",
                                                  "n": 3}}], "k": ["a"]}


def test_binary_left_alone_and_text_bytes_redacted() -> None:
    r = Redactor(ENV)
    assert r.bytes(b"\xff\xfe tok-9f8e7d6c5b") == b"\xff\xfe tok-9f8e7d6c5b"
    assert r.bytes(b"x tok-9f8e7d6c5b") == b"x [REDACTED:env:API_TOKEN]"


SCRIPT = ("import json, os, sys; t = os.environ['HETERO_TEST_API_TOKEN']; "
          "print('token', t, 'Authorization: Bearer ' + 'abcdefghij' + 'klmnop1234'); "
          "print('-----BEGIN RSA PRIVATE KEY-----\\n' + 'MIIE' + 'ow\\n-----END RSA PRIVATE KEY-----'); "
          "json.dump({{'predictions': [t], 'auths': {{'r.io': {{'auth': 'dXNlcjpwYXNz' + 'd29yZA=='}}}}}}, "
          "open(sys.argv[1], 'w')); "
          "print('pulling https://bob:' + 'hunter2' * 2 + '@registry.example.com/v2/ failed with ' + t, "
          "file=sys.stderr); sys.exit(3)")
"""Entrypoint code: str.format placeholders, so literal braces are doubled."""
PLANTED = ("tok-5e3f9a7c1d", "abcdefghijklmnop1234", "MIIEow", "dXNlcjpwYXNzd29yZA==", "hunter2hunter2")


def test_no_planted_secret_survives_in_any_bundle_file(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from support import matrix_text

    monkeypatch.setenv("HETERO_TEST_API_TOKEN", "tok-5e3f9a7c1d")
    monkeypatch.setenv("HETERO_PASS_ENV", "HETERO_TEST_API_TOKEN")  # the model's environment is scrubbed
    doc = json.loads(matrix_text())
    doc["spec"]["models"][0]["entrypoint"] = ["{python}", "-c", SCRIPT, "{outputs}"]
    doc["spec"]["redact"] = [{"kind": "customer-id", "pattern": "CUST-[0-9]{6}"}]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", "sec")
    result.assert_outcomes(passed=2, failed=1, skipped=2)
    bundle = pytester.path / "reports" / "sec"
    texts = {p: p.read_bytes().decode("utf-8", "replace") for p in bundle.rglob("*") if p.is_file()}
    assert len(texts) >= 8
    leaks = [(p.name, s) for p, text in texts.items() for s in PLANTED if s in text]
    assert leaks == []
    evidence = texts[bundle / "evidence.json"]
    for marker in ("[REDACTED:env:HETERO_TEST_API_TOKEN]", "[REDACTED:bearer-token]", "[REDACTED:private-key]",
                   "[REDACTED:url-credentials]"):
        assert marker in evidence
    model = next(i for i in json.loads(evidence)["items"] if i["layer"] == "model")
    assert model["failure"]["message"] == (
        "entrypoint exited with 3: pulling https://[REDACTED:url-credentials]@registry.example.com/v2/ failed with "
        "[REDACTED:env:HETERO_TEST_API_TOKEN]")
    assert "tok-5e3f9a7c1d" not in result.stdout.str()


def test_secret_quoted_by_a_collection_error_is_redacted(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from support import evidence_of, matrix_text

    monkeypatch.setenv("HETERO_TEST_API_TOKEN", "tok-5e3f9a7c1d")
    doc = json.loads(matrix_text())
    doc["spec"]["resources"][0]["expect"] = {"min_cpus": "tok-5e3f9a7c1d"}
    doc["spec"]["resources"][0]["https://bob:hunter2hunter2@h/"] = 1
    pytester.makefile(".matrix.yaml", m=json.dumps(doc, indent=2))
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 2
    [error] = evidence_of(pytester)["errors"]
    assert error["message"] == (
        "2 problems in m.matrix.yaml:\n"
        "m.matrix.yaml:24:23: field 'spec.resources[0:cpu-host].expect.min_cpus': "
        "'[REDACTED:env:HETERO_TEST_API_TOKEN]' is not of type 'number'\n"
        "  hint: write a number (e.g. 2 or 0.5, without quotes)\n"
        "m.matrix.yaml:26:9: field 'spec.resources[0:cpu-host].https://[REDACTED:url-credentials]@h/': "
        "unknown key 'https://[REDACTED:url-credentials]@h/'\n"
        "  hint: allowed keys: description, expect, limits, name, node_selector, priority_class, queue, requests, "
        "tolerations, type, vendor")
    assert "tok-5e3f9a7c1d" not in result.stdout.str() and "hunter2hunter2" not in result.stdout.str()


def test_matrix_copy_in_the_bundle_is_redacted_and_still_verifies(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """inputs/<matrix> holds the matrix with its secrets redacted; the signed statement covers that copy."""
    import json

    from support import matrix_text

    from pytest_hetero.bundle.signing import generate_keypair, load_public_key
    from pytest_hetero.bundle.verify import verify_bundle

    monkeypatch.setenv("HETERO_TEST_API_TOKEN", "tok-5e3f9a7c1d")
    doc = json.loads(matrix_text(layers={"discovery": {"timeout": "30s"}}))
    doc["metadata"]["description"] = ("mirror https://carol:matrixdescpw@host/ with Bearer MATRIXBEARERTOKEN123, "
                                      "token tok-5e3f9a7c1d, customer CUST-123456")
    doc["spec"]["redact"] = [{"kind": "customer-id", "pattern": "CUST-[0-9]{6}"}]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc, indent=2))
    generate_keypair(pytester.path / "run.key", pytester.path / "run.pub")
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", "sec", "-k", "discovery",
                                "--hetero-sign-key", str(pytester.path / "run.key"))
    result.assert_outcomes(passed=1)
    bundle = pytester.path / "reports" / "sec"
    copy = json.loads((bundle / "inputs" / "t.matrix.yaml").read_text())
    assert copy["metadata"]["description"] == (
        "mirror https://[REDACTED:url-credentials]@host/ with Bearer [REDACTED:bearer-token], "
        "token [REDACTED:env:HETERO_TEST_API_TOKEN], customer [REDACTED:customer-id]")
    planted = ("matrixdescpw", "MATRIXBEARERTOKEN123", "tok-5e3f9a7c1d", "CUST-123456")
    leaks = [(p.name, s) for p in bundle.rglob("*") if p.is_file() for s in planted
             if s in p.read_bytes().decode("utf-8", "replace")]
    assert leaks == []
    verification = verify_bundle(bundle, [load_public_key(pytester.path / "run.pub")])
    assert verification.problems == []


def test_long_token_like_output_is_redacted_in_linear_time() -> None:
    """A megabyte of one 'word' (a model printing a blob) next to URL credentials: the scheme-anchored
    pattern needed minutes here (quadratic); the '://'-anchored one redacts it at once."""
    blob = "x" * 1_000_000
    text = f"{blob} https://u:pw@h {'Zm9vYmFy.' * 50_000} git+ssh://deploy:s3cr3t@git.example/r"
    assert Redactor(env={}).text(text) == (
        f"{blob} https://[REDACTED:url-credentials]@h {'Zm9vYmFy.' * 50_000} "
        "git+ssh://[REDACTED:url-credentials]@git.example/r")
