"""Issue 29: every secret kind the README lists, planted in every channel a model or an operator
controls, through a real run (local engine, signed): not one is found in any file of the bundle, in
the acceptance dossier, in the signed statement's payloads or on the terminal, read the way a reader
reads them (HTML entities and JSON escapes decoded, UTF-8/16/32, invisible characters and terminal
sequences removed). The outputs stay JSON (their business items pass), and the bundle verifies (the
gate does not take its own redacted names for tampering)."""

from __future__ import annotations

import base64
import html
import json
import re
import unicodedata

import pytest
from support import DIGITS, MODEL_SHA

from pytest_hetero.bundle import signing  # noqa: F401 - imported before pytester runs (they drop new modules)
from pytest_hetero.cli import main

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

KINDS: dict[str, tuple[str, str]] = {
    # kind: (as written, the part that must never be seen)
    "github": ("ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
    "github-pat": ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF", "abcdefghijklmnopqrstuvwxyzABC"),
    "gitlab": ("glpat-Xy9zAbCdEfGhIjKlMnOp", "AbCdEfGhIjKlMnOp"),
    "aws": ("AKIAQWERTYUIOPASDFGH", "QWERTYUIOPASDFGH"),
    "slack-token": ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    "slack-webhook": ("https://hooks.slack.com/services/T01ABCDEF/B02GHIJKL/xYzAbCdEfGhIjKlMnOpQrStU",
                      "xYzAbCdEfGhIjKlMnOpQrStU"),
    "stripe": ("sk_live_Ab12Cd34Ef56Gh78Ij90Kl12", "Ab12Cd34Ef56Gh78Ij90Kl12"),
    "pypi": ("pypi-AgEIcHlwaS5vcmc" + "Pq7Rs8Tu9Vw0" * 6, "Pq7Rs8Tu9Vw0Pq7Rs8Tu9Vw0"),
    "npm": ("npm_Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8", "Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0"),
    "npmrc-auth": ("//npm.corp.example/:_auth=bnBtdXNlcjpOcG1QYXNzMTIz", "bnBtdXNlcjpOcG1QYXNzMTIz"),
    "sendgrid": ("SG.Ab1Cd2Ef3Gh4Ij5Kl6Mn7O.Pq8Rs9Tu0Vw1Xy2Za3Bc4De5Fg6Hi7Jk8Lm9No0Pq1Rs", "Pq8Rs9Tu0Vw1Xy2Za3Bc4De5"),
    "twilio": ("AC0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
    "artifactory": ("AKCp8Zq9Wx7Vy6Ut5Sr4", "p8Zq9Wx7Vy6Ut5Sr4"),
    "azure": ("AccountKey=" + "Az0By1Cx2Dw3Ev4Fu5Gt6Hs7Ir8Jq9Kp0Lo1Mn2" * 2 + "AbCdEfGh==",
              "Az0By1Cx2Dw3Ev4Fu5Gt6Hs7Ir8Jq9Kp0Lo1Mn2"),
    "discord": ("MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs", "ZnCjm1XVW7vRze4b7Cq4se7kKWs"),
    "mailchimp": ("0123456789abcdef0123456789abcdef-us12", "0123456789abcdef0123456789abcdef-us"),
    "square": ("sq0csp-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4C", "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9"),
    "telegram": ("123456789:AAHn7Fq2Xb9Lm4Kp8Zr3Tw6Yc1Vd5Gh0JsQ", "AAHn7Fq2Xb9Lm4Kp8Zr3Tw6Yc1Vd5Gh0JsQ"),
    "openai": ("sk-proj-Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6", "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6"),
    "huggingface": ("hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456", "QwErTyUiOpAsDfGhJkLzXcVbNm123456"),
    "jwt": ("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzYS1wbGFudGVkIn0.c2lnbmF0dXJlUGxhbnRlZA", "c2lnbmF0dXJlUGxhbnRlZA"),
    "private-key": ("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIPrivKeyBodyXyz\n-----END PRIVATE KEY-----",
                    "PrivKeyBodyXyz"),
    "url-credentials": ("https://svc:UriPassw0rd55@models.example.com/m.onnx", "UriPassw0rd55"),
    "redis-empty-user": ("redis://:Redis0Pass9x@cache:6379/0", "Redis0Pass9x"),
    "collapsed-url": ("https:/joined:JoinedPassw0rd1@host/x", "JoinedPassw0rd1"),
    "jdbc": ("jdbc:postgresql://db:5432/app?user=app&password=JdbcS3cretPw", "JdbcS3cretPw"),
    "basic-auth": ("Authorization: Basic dXNlcjpCYXNpY1Bhc3M5OQ==", "dXNlcjpCYXNpY1Bhc3M5OQ"),
    "bearer": ("Authorization: Bearer BearerTok3nValue42xyz", "BearerTok3nValue42xyz"),
    "x-api-key": ("X-Api-Key: XApiKeyValue67890", "XApiKeyValue67890"),
    "password-assignment": ("password=PlainPassw0rd77", "PlainPassw0rd77"),
    "json-api-key": ('"api_key": "ApiKeyValue12345"', "ApiKeyValue12345"),
    "kubeconfig": ("client-key-data: LS0tLS1CRUdJTiBLdWJlS2V5RGF0YQ", "LS0tLS1CRUdJTiBLdWJlS2V5RGF0YQ"),
    "registry-auth": ('{"auths": {"r.io": {"auth": "cmVnOlJlZ2lzdHJ5UGFzczE="}}}', "cmVnOlJlZ2lzdHJ5UGFzczE"),
    "matrix-pattern": ("customer CUST-482913", "CUST-482913"),
}
"""One planted secret of each kind the README lists (detect-secrets' plugins, ours, the matrix's)."""
ENV: dict[str, str] = {
    "DEPLOY_TOKEN": "EnvTokenValue0001", "APP_SECRET": "EnvSecretValue002", "DB_PASSWORD": "EnvPasswordVal03",
    "SMTP_PASS": "EnvPassValue0004", "GPG_PASSPHRASE": "env passphrase five", "MYSQL_PWD": "EnvPwdValue00006",
    "GITHUB_PAT": "EnvPatValue00007", "SIGNING_KEY": "EnvKeyValue00008", "CLOUD_CREDENTIALS": "EnvCredValue0009",
    "PROXY_AUTH": "EnvAuthValue0010", "SENTRY_DSN": "https://EnvDsnKey0011@o1.ingest.sentry.io/42",
    "ALERT_WEBHOOK": "https://hooks.example.com/EnvWebhook0012", "SITE_LICENSE": "EnvSiteValue0013",
}
"""A value for each secret-named environment glob (SITE_* through HETERO_REDACT_ENV)."""
ENV_CORES = {**ENV, "SENTRY_DSN": "EnvDsnKey0011", "ALERT_WEBHOOK": "EnvWebhook0012"}
"""The part of each that must never be seen."""
NAME_TOKEN = "npm_abcdefghijklmnopqrstuvwxyz0123456789"
"""A model named like a token (names are lowercase DNS labels: an npm token can be one)."""


def _split(written: str, core: str, sep: str) -> str:
    """``written`` with ``sep`` inside its core."""
    at = written.index(core) + len(core) // 2
    return written[:at] + sep + written[at:]


def _escaped(written: str, core: str) -> str:
    """``written`` as a JSON string body whose core has characters spelled ``\\uXXXX``."""
    body = json.dumps(written)[1:-1]
    at = body.index(json.dumps(core)[1:-1])
    return body[:at] + "".join(f"\\u{ord(c):04x}" for c in core[:6]) + body[at + 6:]


MODEL = """\
import csv, json, os, sys
out, channel, data = sys.argv[1], sys.argv[2], sys.argv[3]
plan = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "plan.json")))
lines = plan["lines"] + [os.environ[n] for n in plan["env"]]
for line in plan["zw"]:
    print("stdout:", line)
for line in plan["esc"]:
    print("stderr:", line, file=sys.stderr)
print("json line: {{\\"escaped\\": [" + ", ".join('"' + e + '"' for e in plan["escaped"]) + "]}}")
# predictions for the gate to join with the dataset's truth (the model reads the view without the label)
ids = [int(row["index"]) for row in csv.DictReader(open(data))]
metrics = {{"metrics": {{"accuracy": 0.97}}, "ids": ids, "predictions": [0] * len(ids)}}
if channel == "escaped":
    text = json.dumps(metrics)[:-1] + ', "lines": ['
    text += ", ".join('"' + e + '"' for e in plan["escaped"]) + "]}}"
    open(out, "w").write(text)
elif channel in ("utf-16", "utf-32-le", "utf-8"):
    open(out, "wb").write(json.dumps({{**metrics, "lines": lines, "zw": plan["zw"]}}).encode(channel))
elif channel == "not-utf8":
    open(out, "wb").write(b"\\xff\\xfe\\x80 " + " ".join(lines).encode() + b" \\xc3")
print("last: " + lines[0], file=sys.stderr)
sys.exit(3 if channel == "fails" else 0)
"""


def _model(name: str, channel: str) -> dict[str, object]:
    return {"name": name, "version": "1", "uri": str(DIGITS / "model" / "digits-logreg-1.0.0.onnx"),
            "sha256": MODEL_SHA, "code": ".",
            "entrypoint": ["{python}", "{code}/leaky.py", "{outputs}", channel, "{dataset}"]}


def _readings(data: bytes) -> list[str]:
    """``data`` as a reader may see it: each encoding, HTML entities and (two levels of) JSON escapes
    decoded, DSSE payloads base64-decoded, control and format characters and terminal sequences removed."""
    texts = [data.decode("utf-8", "replace")] + [data.decode(e, "ignore") for e in
                                                  ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")]
    for line in texts[0].splitlines():
        try:
            payload = json.loads(line).get("payload")
        except (ValueError, AttributeError):
            continue
        if isinstance(payload, str):
            texts.append(base64.b64decode(payload).decode("utf-8", "replace"))
    out = []
    for text in texts:
        for _ in range(3):
            text = html.unescape(text)
            text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
            text = text.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        text = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]", "", text)
        out.append("".join(c for c in text if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf")))
    return out


def test_no_secret_of_any_kind_survives_any_channel(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HETERO_REDACT_ENV", "SITE_*")
    monkeypatch.setenv("HETERO_PASS_ENV", ",".join(ENV))  # the model's environment is scrubbed
    written = [w for w, _ in KINDS.values()]
    plan = {"lines": written, "env": list(ENV),
            "zw": [_split(w, c, "\u200b") for w, c in KINDS.values()]
            + [_split(w, c, "\u200d\u00ad") for w, c in KINDS.values()],
            "esc": [_split(w, c, "\x1b[0m") for w, c in KINDS.values()]
            + [_split(w, c, "\u202e") for w, c in KINDS.values()],
            "escaped": [_escaped(w, c) for w, c in KINDS.values()]}
    (pytester.path / "plan.json").write_text(json.dumps(plan))
    (pytester.path / "leaky.py").write_text(MODEL.format())
    (pytester.path / "rules.yaml").write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                                              "  - {name: acc, metric: accuracy, op: '>=', value: 0}\n"
                                              "  - {name: n, metric: wall_s, op: '<', value: 600}\n")
    channels = {"utf8": "utf-8", "escaped": "escaped", "utf16": "utf-16", "utf32": "utf-32-le",
                "notutf8": "not-utf8", "fails": "fails", NAME_TOKEN: "utf-8"}
    doc = {"apiVersion": "pytest-hetero/v1", "kind": "ValidationMatrix", "metadata": {"name": "leaks"},
           "spec": {"target": {"backend": "local"},
                    "redact": [{"kind": "customer-id", "pattern": "CUST-[0-9]{6}"}],
                    "resources": [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}],
                    "images": [{"name": "py", "reference": "python:current"}],
                    "models": [_model(name, channel) for name, channel in channels.items()],
                    "datasets": [{"name": "d", "version": "1", "uri": str(DIGITS / "data" / "digits-test-1.0.0.csv"),
                                  "sha256": "3678e2fa8f107ffa5d8518cc07a46b9e4ce67e89d65b2f88e4c391638d965bfb",
                                  "acceptance": "rules.yaml",
                                  "truth": {"task": "classification", "target": "label", "id": "index"}}]}}
    pytester.makefile(".matrix.yaml", leaks=json.dumps(doc))
    assert main(["keygen", str(pytester.path / "k")]) == 0
    change = ("operator=alice; ticket=OPS-1; reason=rotated " + KINDS["password-assignment"][0] + " and "
              + KINDS["npm"][0] + " and " + KINDS["url-credentials"][0])
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", "sec", "-rA", "-v",
                                "--hetero-sign-key", str(pytester.path / "k"), "--hetero-change", change)
    terminal = result.stdout.str() + result.stderr.str()
    bundle = pytester.path / "reports" / "sec"
    evidence = json.loads((bundle / "evidence.json").read_text())
    status = {i["nodeid"].split("::", 3)[-1]: i["status"] for i in evidence["items"]}
    # the outputs stay JSON in every encoding: their business items judge them and pass
    for name in ("utf8", "escaped", "utf16", "utf32", "[REDACTED:npm-token]"):
        assert status[f"{name}@d::business"] == "passed", (name, status)
    assert status["notutf8@d::model"] == "failed" and status["fails@d::model"] == "failed"
    assert evidence["cluster"]["change_record"]["reason"] == (
        "rotated password=[REDACTED:assignment] and [REDACTED:npm-token] and "
        "https://[REDACTED:url-credentials]@models.example.com/m.onnx")
    assert "tampering" not in terminal
    capsys.readouterr()
    assert main(["verify", str(bundle), "--key", str(pytester.path / "k.pub")]) == 0, capsys.readouterr()
    verified = capsys.readouterr().out
    dossier = pytester.path / "dossier.html"
    assert main(["render", str(bundle), "--format", "dossier", "--key", str(pytester.path / "k.pub"),
                 "--out", str(dossier)]) == 0
    places = {str(p.relative_to(bundle)): p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    places.update({"dossier": dossier.read_bytes(), "terminal": terminal.encode(), "verify": verified.encode()})
    assert {"report.html", "junit.xml", "ctrf.json", "summary.md", "evidence.json",
            "attestation.intoto.jsonl"} <= set(places)
    assert any("outputs-unusable" in p for p in places) and any("_REDACTED_npm-token_@d" in p for p in places)
    cores = {kind: core for kind, (_, core) in KINDS.items()}
    cores.update({f"env:{name}": core for name, core in ENV_CORES.items()})
    cores["model-name"] = NAME_TOKEN[4:]
    leaks = sorted({(kind, where) for where, data in places.items() for text in _readings(data)
                    for kind, core in cores.items() if core in text})
    assert leaks == []
