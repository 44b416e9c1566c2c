"""Redaction: every kind of secret is replaced by a marker naming its kind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import REPO

from pytest_hetero.redact import Redactor

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

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


def test_bytes_that_are_not_text_keep_their_bytes_but_lose_their_secrets() -> None:
    """Issue 29: outputs-unusable.txt (not UTF-8) was copied raw with every secret in it."""
    r = Redactor(ENV)
    assert r.bytes(b"\xff\xfe tok-9f8e7d6c5b") == b"\xff\xfe [REDACTED:env:API_TOKEN]"
    assert r.bytes(b"\x00\x01binary\xc3") == b"\x00\x01binary\xc3"
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
        "  hint: allowed keys: concurrency, coverage, description, expect, limits, model_runs, name, node_selector, "
        "priority_class, queue, requests, tolerations, type, vendor")
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


SECRETS: dict[str, tuple[str, str]] = {
    # kind: (how it is written, the part that must never be seen)
    "github-token": ("ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
    "github-pat": ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF",
                   "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF"),
    "openai": ("sk-proj-Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6", "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6"),
    "aws-access-key": ("AKIAQWERTYUIOPASDFGH", "QWERTYUIOPASDFGH"),
    "huggingface": ("hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456", "QwErTyUiOpAsDfGhJkLzXcVbNm123456"),
    "slack-bot": ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    "slack-webhook": ("https://hooks.slack.com/services/T01ABCDEF/B02GHIJKL/xYzAbCdEfGhIjKlMnOpQrStU",
                      "xYzAbCdEfGhIjKlMnOpQrStU"),
    "redis-empty-user": ("redis://:Redis0Pass9x@cache:6379/0", "Redis0Pass9x"),
    "jdbc": ("jdbc:postgresql://db:5432/app?user=app&password=JdbcS3cretPw", "JdbcS3cretPw"),
    "basic-auth-header": ("Authorization: Basic dXNlcjpCYXNpY1Bhc3M5OQ==", "dXNlcjpCYXNpY1Bhc3M5OQ"),
    "json-api-key": ('"api_key": "ApiKeyValue12345"', "ApiKeyValue12345"),
    "x-api-key": ("X-Api-Key: XApiKeyValue67890", "XApiKeyValue67890"),
    "password-assignment": ("password=PlainPassw0rd77", "PlainPassw0rd77"),
    "uri-credentials": ("https://svc:UriPassw0rd55@models.example.com/m.onnx", "UriPassw0rd55"),
    "private-key": ("-----BEGIN PRIVATE KEY-----\\nMC4CAQAwBQYDK2VwBCIEIPrivKeyBodyXyz\\n-----END PRIVATE KEY-----",
                    "PrivKeyBodyXyz"),
}
"""One planted secret of each literal kind the issue names."""
ENV_SECRETS: dict[str, tuple[str, str]] = {
    "DB_PASS": ("DbPassValue4242", "DbPassValue4242"),
    "MYSQL_PWD": ("MysqlPwdValue99", "MysqlPwdValue99"),
    "GITHUB_PAT": ("GhPatEnvValue7777", "GhPatEnvValue7777"),
    "SSH_PASSPHRASE": ("ssh phrase value 88", "ssh phrase value 88"),
    "SENTRY_DSN": ("https://SentryKey0123456789@o1.ingest.sentry.io/42", "SentryKey0123456789"),
}
"""Secrets only the environment names as such (their values have no recognisable format)."""

LEAKY = """\
import json, os, sys
out, enc, code = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = {secrets!r} + [os.environ[n] for n in {env_names!r}]
for line in lines:
    print("stdout:", line)
    print("stderr:", line, file=sys.stderr)
doc = {{"metrics": {{"accuracy": 1.0, "n_samples": 1024}}, "lines": lines}}
open(out, "wb").write(json.dumps(doc).encode(enc))
print("last: " + " ".join(lines[:6]), file=sys.stderr)
sys.exit(code)
"""


def test_zero_leaks_for_every_kind_in_every_place(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """One planted secret of each kind in each place: the environment, the entrypoint's argv, its stdout
    and stderr, outputs in UTF-8 and UTF-16, matrix values, a model/dataset URI, a failure message and
    a collection error; then every file of the bundle (read as UTF-8 and as UTF-16) and the terminal
    are searched. ``MAX_TOKENS=1024`` in the environment corrupts nothing: the outputs stay JSON and
    the business items judge them."""
    import json

    from support import DIGITS, MODEL_SHA

    written = [w for w, _ in SECRETS.values()]
    for name, (value, _) in ENV_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MAX_TOKENS", "1024")
    monkeypatch.setenv("HETERO_PASS_ENV", ",".join(ENV_SECRETS))  # the model's environment is scrubbed
    (pytester.path / "leaky.py").write_text(LEAKY.format(secrets=[w.replace("\\n", "\n") for w in written],
                                                         env_names=list(ENV_SECRETS)))
    (pytester.path / "rules.yaml").write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                                              "  - {name: acc, metric: accuracy, op: '>=', value: 0.5, self_reported: true}\n"
                                              "  - {name: n, metric: n_samples, op: '==', value: 1024, self_reported: true}\n")

    def model(name: str, encoding: str, code: int) -> dict[str, object]:
        return {"name": name, "version": "1", "uri": str(DIGITS / "model" / "digits-logreg-1.0.0.onnx"),
                "sha256": MODEL_SHA, "code": ".",
                "entrypoint": ["{python}", "{code}/leaky.py", "{outputs}", encoding, str(code),
                               *(w.replace("{", "{{").replace("}", "}}") for w in written)]}

    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix",
           "metadata": {"name": "leaks", "description": " ".join(written)},
           "spec": {"target": {"backend": "local"},
                    "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1},
                                   "node_selector": {"note": SECRETS["password-assignment"][0]}}],
                    "images": [{"name": "py", "reference": "python:current"}],
                    "models": [model("utf8", "utf-8", 0), model("utf16", "utf-16", 0), model("fails", "utf-8", 3)],
                    "datasets": [{"name": "d", "version": "1", "uri": str(DIGITS / "data" / "digits-test-1.0.0.csv"),
                                  "sha256": "3678e2fa8f107ffa5d8518cc07a46b9e4ce67e89d65b2f88e4c391638d965bfb",
                                  "acceptance": "rules.yaml"}]}}
    pytester.makefile(".matrix.yaml", leaks=json.dumps(doc))
    broken = json.loads(json.dumps(doc))
    broken["metadata"]["name"] = "uris"
    broken["spec"]["datasets"][0]["uri"] = SECRETS["uri-credentials"][0]
    broken["spec"]["models"][0]["uri"] = "s3://" + SECRETS["jdbc"][0].split("//", 1)[1]
    pytester.makefile(".matrix.yaml", uris=json.dumps(broken))
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", "sec", "-v", "-rA",
                                "--continue-on-collection-errors")
    terminal = result.stdout.str() + result.stderr.str()
    bundle = pytester.path / "reports" / "sec"
    evidence = json.loads((bundle / "evidence.json").read_text())
    got = {i["nodeid"]: i for i in evidence["items"]}
    assert got["leaks.matrix.yaml::cpu-host::py::utf8@d::business"]["status"] == "passed"
    assert got["leaks.matrix.yaml::cpu-host::py::utf16@d::business"]["status"] == "passed"
    assert got["leaks.matrix.yaml::cpu-host::py::fails@d::model"]["status"] == "failed"
    # a URI with credentials is not a file: the failure of the model item that uses it names it,
    # credentials redacted (input digests belong to the model/dataset pair that uses them, issue 14.5)
    assert "s3:/db:5432/app?user=app&password=[REDACTED:assignment]" in \
        got["uris.matrix.yaml::cpu-host::py::utf8@d::model"]["failure"]["message"]

    files = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    places = {"terminal": terminal.encode()}
    places.update({str(p.relative_to(bundle)): data for p, data in files.items()})
    cores = {kind: core for kind, (_, core) in SECRETS.items()}
    cores.update({f"env:{name}": core for name, (_, core) in ENV_SECRETS.items()})
    leaks = sorted((kind, where) for kind, core in cores.items() for where, data in places.items()
                   if core.encode() in data or core.encode("utf-16-le") in data)
    assert leaks == []
    outputs16 = next(data for p, data in files.items() if p.name == "outputs.json" and "utf16" in str(p))
    assert json.loads(outputs16)["metrics"]["n_samples"] == 1024 and outputs16.startswith(b"\xff\xfe")  # still UTF-16 JSON
    assert "[REDACTED:" in json.loads(outputs16)["lines"][0]


def test_guards_change_nothing_but_the_time() -> None:
    """Each pattern is skipped when a literal it needs is absent (20.5): the output equals running every
    pattern, on text holding each planted kind, near-misses, JSON escapes and mixed case."""
    import random

    rng = random.Random(15)
    pieces = [w.replace("\\n", "\n") for w, _ in SECRETS.values()] + [
        "BEARER abcdefghijkl", "xOxB-1-abc", "AKIA", "hf_short", "Password: hunter22", "https:/u:p@h", "a:/b@c",
        '{"token": "ab\\"cd"}', "-----END RSA PRIVATE KEY-----", "eyJhbGciOi.eyJzdWIi.c2ln", "MAX_TOKENS=1024",
        "sk_live_" + "a" * 24, "SG." + "a" * 22 + "." + "b" * 43, "1234567890:" + "A" * 35, "plain words here"]
    r = Redactor(env={"DB_PASS": "DbPassValue4242"})
    for _ in range(300):
        text = " ".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        assert r.text(text) == r.text(text, guard=False), text


def test_cached_guards_and_patterns_redact_as_freshly_derived_ones(tmp_path: Path) -> None:
    """The detect-secrets patterns and every pattern's guard literals are kept under the user cache
    (20.1: deriving them cost 0.1 s of each command); a process reading them back redacts exactly as
    the one that derived them, and as running every pattern."""
    import subprocess
    import sys

    script = ("import json, sys\nfrom pytest_hetero.redact import Redactor, _compiled\n"
              "texts = json.loads(sys.stdin.read())\nr = Redactor(env={'DB_PASS': 'DbPassValue4242'})\n"
              "print(json.dumps({'rules': len(_compiled()), 'guarded': [r.text(t) for t in texts],"
              " 'all': [r.text(t, guard=False) for t in texts]}))\n")
    texts = [w.replace("\\n", "\n") for w, _ in SECRETS.values()] + ["plain words", "ghp_" + "a" * 36,
                                                                        "xoxb-1234-5678-abcdefgh"]
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], input=json.dumps(texts), text=True,
                                      capture_output=True, check=True, env=env).stdout) for _ in range(2)]
    cached = sorted(p.name for p in (tmp_path / "pytest-hetero").iterdir())
    assert [n.split("-")[0] + "-" + n.split("-")[1] for n in cached] == ["detect-secrets", "redact-guards"]
    assert runs[0] == runs[1]
    assert runs[0]["guarded"] == runs[0]["all"]
    assert runs[0]["rules"] > 30  # detect-secrets' plugins and ours
    assert "[REDACTED:" in runs[0]["guarded"][-2] and "[REDACTED:" in runs[0]["guarded"][-1]


def test_short_plain_texts_told_clean_in_one_set_pass_hold_nothing_a_full_scan_finds() -> None:
    """The one RE2 set pass over a short plain text (32: an item's unique times, names and paths, most of its
    redaction's cost) never passes a text in which running every pattern finds a secret (planted kinds, near-misses,
    the unguarded rules' formats, invisible characters), and passes an item's ordinary texts."""
    import random

    rng = random.Random(32)
    pieces = [w.replace("\\n", "\n") for w, _ in SECRETS.values()] + [
        "BEARER abcdefghijkl", "xOxB-1-abc", "AKIA", "hf_short", "Password: hunter22", "https:/u:p@h", "a:/b@c",
        "-----END RSA PRIVATE KEY-----", "eyJhbGciOi.eyJzdWIi.c2ln", "MAX_TOKENS=1024", "sk_live_" + "a" * 24,
        "1234567890:" + "A" * 35, "MTAx" + "a" * 20 + ".abcdef." + "b" * 27, "DbPassValue4242", "zero\u200bwidth",
        "bell\x07here", "plain words here"]
    r = Redactor(env={"DB_PASS": "DbPassValue4242"})
    texts = pieces + [" ".join(rng.choice(pieces) for _ in range(rng.randint(1, 4))) for _ in range(400)]
    passed = [text for text in texts if r._plain_clean(text)]
    assert passed and len(passed) < len(texts)
    for text in passed:
        assert r.text(text, guard=False) == text, text
    ordinary = ["2026-12-04T22:01:10.388987Z", "run-cpu-m11-d-b690b7-92d3d0", "benchcov-8f6755-10", "m11@1",
                "pod/hetero-itemcpu-8f6755/run-cpu-m11-d-b690b7-92d3d0", "spread.matrix.yaml::cpu::py::m11@d::model",
                "/tmp/hetero-92d3d08498-b690b7/code/m11/model.py"]
    assert [t for t in ordinary if not r._plain_clean(t)] == []
    assert not Redactor(extra=[("mine", "hetero")])._plain_clean(ordinary[1])  # a matrix's patterns: always scanned


def test_texts_seen_once_are_not_remembered_for_the_whole_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32 (memory flat in items): the short texts a run redacts are remembered, but each item's own times
    and paths are never looked up again; they were kept for the rest of the run (~1.5 KB per item). Now at most
    2 × SHORT_TEXTS_KEPT texts are remembered, and a text every item repeats (a record's keys) is redacted once."""
    import tracemalloc

    from pytest_hetero import redact

    redacted: list[str] = []  # each time the key is redacted (not looked up)
    fresh = redact.Redactor._redact

    def counted(self: Redactor, value: str, guard: bool) -> str:
        if value == "started_at":
            redacted.append(value)
        return fresh(self, value, guard)

    monkeypatch.setattr(redact.Redactor, "_redact", counted)
    r = Redactor(env={})
    r.text("warm up")  # the guard set is compiled on first use
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(30_000):  # 30,000 items, each with its own time and the same key
            assert r.text(f"2026-12-04T22:23:{n:09d}Z") == f"2026-12-04T22:23:{n:09d}Z"
            assert r.text("started_at") == "started_at"
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert redacted == ["started_at"]
    assert held < 1_500_000, held  # before: the 30,000 times (~3.4 MB)
