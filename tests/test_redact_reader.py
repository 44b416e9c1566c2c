"""Redaction sees what a reader sees (issue 29): escapes decoded, invisible characters and terminal
sequences removed, bytes in any encoding a reader's tools use; values replaced, never the structure;
RE2 (linear time) for every pattern; names like tokens redacted alike everywhere; the change record
redacted before it is signed; CLI printers and pytest's report carry no terminal controls."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from pytest_hetero.bundle.signing import generate_keypair  # imported before pytester runs (they drop new modules)
from pytest_hetero.cli import main
from pytest_hetero.redact import INVISIBLE_RANGES, Redactor, reader_view, untranslatable

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

GHP = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GHP_CORE = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
NPM = "npm_abcdefghijklmnopqrstuvwxyz0123456789"


@pytest.mark.parametrize(("text", "expected"), [
    # a zero-width space, joiner, soft hyphen, BOM, bidi override or NUL inside a token
    (f"t {GHP[:10]}\u200b{GHP[10:]} e", "t [REDACTED:ds-github-token] e"),
    (f"t {GHP[:10]}\u200d\u00ad{GHP[10:]} e", "t [REDACTED:ds-github-token] e"),
    (f"t {GHP[:10]}\ufeff\u202e{GHP[10:]} e", "t [REDACTED:ds-github-token] e"),
    (f"t {GHP[:10]}\x00{GHP[10:]} e", "t [REDACTED:ds-github-token] e"),
    (f"t {GHP[:10]}\x1b[0m{GHP[10:]} e", "t [REDACTED:ds-github-token] e"),
    (f"t {GHP[:10]}\r{GHP[10:]} e", "t [REDACTED:ds-github-token] e"),
    # JSON string escapes, a surrogate pair, Python escapes
    ('{"k": "\\u0067\\u0068p_' + GHP[4:] + '"}', '{"k": "[REDACTED:ds-github-token]"}'),
    ('{"k": "x \\u0067hp_' + GHP[4:14] + "\\u200b" + GHP[14:] + '"}', '{"k": "x [REDACTED:ds-github-token]"}'),
    ("s = '\\x67hp_" + GHP[4:] + "'", "s = '[REDACTED:ds-github-token]'"),
    # registry-auth JSON written as a string inside JSON (and once more inside that)
    ('{"cfg": "{\\"auths\\":{\\"r.io\\":{\\"auth\\":\\"dXNlcjpwYXNzd29yZA==\\"}}}"}',
     '{"cfg": "{\\"auths\\":{\\"r.io\\":{\\"auth\\":\\"[REDACTED:registry-auth]\\"}}}"}'),
    ('"{\\"a\\": \\"{\\\\\\"auth\\\\\\":\\\\\\"dXNlcjpwYXNzd29yZA==\\\\\\"}\\"}"',
     '"{\\"a\\": \\"{\\\\\\"auth\\\\\\":\\\\\\"[REDACTED:registry-auth]\\\\\\"}\\"}"'),
    # npm tokens anywhere, not only in .npmrc lines; .npmrc auths of any registry
    (f"export NODE_AUTH={NPM}", "export NODE_AUTH=[REDACTED:npm-token]"),
    (f'{{"npm": "{NPM}"}}', '{"npm": "[REDACTED:npm-token]"}'),
    ("//npm.corp.example/:_auth=dXNlcjpwYXNzd29yZA==", "//npm.corp.example/:_auth=[REDACTED:npmrc-auth]"),
    # the kubeconfig value only: its closing quote stays
    ('{"kubeconfig": "token: abcdefgh12345678"}', '{"kubeconfig": "token: [REDACTED:kubeconfig]"}'),
    # invisible characters outside a secret are kept as written
    ("a\u200bb", "a\u200bb"),
    ("password=true, token: 12345678 MAX_TOKENS=1024", "password=true, token: [REDACTED:kubeconfig] MAX_TOKENS=1024"),
])
def test_secrets_are_found_as_a_reader_sees_them(text: str, expected: str) -> None:
    assert Redactor(env={}).text(text) == expected


def test_an_environment_secret_split_or_escaped_is_found() -> None:
    r = Redactor({"DB_PASSWORD": "S3cretPassw0rd"})
    assert r.text("pw S3cret\u200bPassw0rd!") == "pw [REDACTED:env:DB_PASSWORD]!"
    assert r.text('{"pw": "\\u0053\\u0033cretPassw0rd"}') == '{"pw": "[REDACTED:env:DB_PASSWORD]"}'


def test_reader_view_drops_what_a_reader_does_not_see() -> None:
    assert reader_view("a\u200bb\\u0063\x1b[31md\x1b]0;title\x07e")[0] == "abcde"
    assert reader_view("plain")[1] == []


def test_every_character_a_rendering_removes_is_invisible_to_the_redactor() -> None:
    """Renderings strip format and control characters after redaction (printable, terminal_text): a
    token split by a character they strip but the redactor kept would come out whole."""
    from pytest_hetero.reporting.view import _CONTROL, _TERMINAL

    invisible = {cp for lo, hi in INVISIBLE_RANGES for cp in range(lo, hi + 1)}
    removed = {cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF
               and (_CONTROL.match(chr(cp)) or _TERMINAL.match(chr(cp)))}
    assert sorted(hex(cp) for cp in removed - invisible) == []


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32",
                                      "utf-32-le", "utf-32-be"])
def test_outputs_in_every_json_encoding_stay_json_in_that_encoding(encoding: str) -> None:
    doc = {"metrics": {"accuracy": 0.97, "n_samples": 1024}, "note": f"k {GHP}",
           "kube": "token: abcdefgh12345678", GHP: 1, "zw": f"{GHP[:9]}\u200b{GHP[9:]}"}
    raw = json.dumps(doc).encode(encoding)
    out = Redactor(env={}).bytes(raw)
    assert out[:2] == raw[:2] and out[:3] == raw[:3]  # the byte-order mark (or its absence) kept
    back = json.loads(out.decode(encoding))
    assert back == {"metrics": {"accuracy": 0.97, "n_samples": 1024}, "note": "k [REDACTED:ds-github-token]",
                    "kube": "token: [REDACTED:kubeconfig]", "[REDACTED:ds-github-token]": 1,
                    "zw": "[REDACTED:ds-github-token]"}


def test_bytes_that_are_not_utf8_are_redacted_and_kept_otherwise() -> None:
    r = Redactor(env={})
    raw = b"\xff\xfe\x80 " + GHP.encode() + b" \xc3 password=Hunter2Hunter2 \xe2\x80\x8b"
    assert r.bytes(raw) == b"\xff\xfe\x80 [REDACTED:ds-github-token] \xc3 password=[REDACTED:assignment] \xe2\x80\x8b"
    # UTF-16 text without a byte-order mark that does not decode (an odd byte): NULs do not hide the token
    raw16 = GHP.encode("utf-16-le") + b"\x00"
    assert GHP_CORE.encode("utf-16-le") not in r.bytes(raw16) and GHP_CORE.encode() not in r.bytes(raw16)
    clean = b"\x00\x01\xfebinary"
    assert r.bytes(clean) is clean


def test_duplicate_keys_and_keys_redacted_alike_lose_nothing() -> None:
    r = Redactor(env={})
    other = "ghp_Z1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    assert r.data({GHP: 1, other: 2}) == {"[REDACTED:ds-github-token]": 1, "[REDACTED:ds-github-token]~2": 2}
    raw = ('{"a": "' + GHP + '", "a": 2}').encode()  # not a JSON object Python keeps whole: redacted as text
    assert r.bytes(raw) == b'{"a": "[REDACTED:ds-github-token]", "a": 2}'


def test_every_pattern_runs_in_linear_time_with_re2() -> None:
    """No pattern is left to a backtracking engine (detect-secrets' look-arounds are rewritten)."""
    assert untranslatable() == []


@pytest.mark.parametrize("piece", ["//", "sk-", "a_", "xoxb-1-"])
def test_inputs_that_made_the_redactor_quadratic_are_redacted_at_once(piece: str) -> None:
    """Issue 29: 24 kB of such stdout kept the gate busy for 52 s (detect-secrets' npm and OpenAI
    patterns backtrack). 240 kB is bounded very generously (the backtracking engine needs hours)."""
    text = piece * (240_000 // len(piece)) + " " + GHP
    started = time.perf_counter()
    out = Redactor(env={}).text(text)
    assert time.perf_counter() - started < 20
    assert out.endswith(" [REDACTED:ds-github-token]") and GHP_CORE not in out


def test_names_like_tokens_get_one_redacted_name_in_item_ids(tmp_path: Path) -> None:
    from support import matrix_text

    from pytest_hetero.matrix.expand import expand
    from pytest_hetero.matrix.load import load_matrix

    doc = json.loads(matrix_text())
    model = doc["spec"]["models"][0]
    twin = {**model, "name": "npm_0123456789abcdefghijklmnopqrstuvwxyz"}  # names are lowercase DNS labels
    doc["spec"]["models"] = [{**model, "name": NPM}, twin]
    path = tmp_path / "m.matrix.yaml"
    path.write_text(json.dumps(doc))
    plan = expand(load_matrix(path))
    ids = [i.id for i in plan.items if i.layer in ("model", "business")]
    assert ids == ["cpu-host::py::[REDACTED:npm-token]@digits-test::model",
                   "cpu-host::py::[REDACTED:npm-token]@digits-test::business",
                   "cpu-host::py::[REDACTED:npm-token]~2@digits-test::model",
                   "cpu-host::py::[REDACTED:npm-token]~2@digits-test::business"]
    assert [i.keys["model"] for i in plan.items if i.layer == "model"] == [NPM, twin["name"]]
    assert Redactor().text(ids[0]) == ids[0]  # a redacted id stays as it is when redacted again


def test_change_record_is_redacted_before_it_is_signed() -> None:
    from pytest_hetero.errors import SettingsError
    from pytest_hetero.status.drift import parse_change

    record = parse_change("operator=alice; ticket=OPS-1; reason=rotated password=Hunter2Hunter2 and "
                          f"{NPM}; intended=gpu-a")
    assert record == {"operator": "alice", "ticket": "OPS-1", "intended": ["gpu-a"],
                      "reason": "rotated password=[REDACTED:assignment] and [REDACTED:npm-token]"}
    with pytest.raises(SettingsError) as raised:
        parse_change(f"operator=alice; {GHP}")
    assert raised.value.message == "--hetero-change: '[REDACTED:ds-github-token]' is not key=value"


HOSTILE = "\x1b[2J\x1b[31mred\x07bell\x00nul\x9b31mcsi\u202egnp.exe\u200bzw\rFAKE\u2066iso\u2069"


def test_every_cli_printer_goes_through_one_sanitiser(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    """``hetero`` wraps stdout and stderr: a bundle path (any text a command prints) with ESC, BEL, NUL,
    C1, bidi and carriage returns comes out without them."""
    assert main(["trend", f"/nonexistent/{HOSTILE.replace(chr(0), '')}"]) == 2  # NUL: a path cannot hold one
    err = capsys.readouterr().err
    assert err.startswith("hetero trend: /nonexistent/[2J[31mredbellnul31mcsignp.exezwFAKEiso: bundle does not verify")
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u202e\u2066\u2069]", err)


FAKE = """\
import json, sys
json.dump({"metrics": {"x\\nverdict: PASS\\n\\x1b[32mPASSED\\x1b[0m": 1.0, "y\\r\\u202everdict: PASS": 2.0}},
          open(sys.argv[1], "w"))
"""


def test_a_metric_name_cannot_print_a_line_of_its_own_in_pytests_report(pytester: pytest.Pytester) -> None:
    """Issue 29: a newline in a metric key the model controls printed ``verdict: PASS`` as a line of
    pytest's report (the failure section quoted the outputs' metric names)."""
    from support import matrix_text

    (pytester.path / "fake.py").write_text(FAKE)
    # no truth: the gate's no_truth error quotes the self-reported metric names the model controls
    doc = json.loads(matrix_text(truth=False))
    doc["spec"]["models"][0].update(code=str(pytester.path), entrypoint=["{python}", "{code}/fake.py", "{outputs}"])
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA", "-v")
    out = result.stdout.str() + result.stderr.str()
    assert [line for line in out.splitlines() if line.strip() in ("verdict: PASS", "PASSED", "[32mPASSED[0m")] == []
    assert not re.search("[\x1b\r\u202e]", out)
    [line] = [x for x in out.splitlines() if x.startswith("[error] business/no_truth")]
    assert "(available metrics: x verdict: PASS [32mPASSED[0m, y verdict: PASS;" in line


def test_trend_and_catalog_print_no_terminal_controls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29: ``hetero trend`` printed a rule name's ESC/BEL/NUL/bidi raw (and ``catalog`` its rows)."""
    from bundle_samples import make_bundle
    from test_trend import BIZ, night

    generate_keypair(tmp_path / "k", tmp_path / "k.pub")
    bundles = []
    for n in range(2):
        ev = night(n, 0.96)
        rules = next(i for i in ev["items"] if i["nodeid"] == BIZ)["records"][0]["data"]["results"]
        rules[0]["name"] = f"acc{HOSTILE}"
        rules[0]["expected"] = f"accuracy >= 0.95{HOSTILE}"
        bundles.append(str(make_bundle(tmp_path / f"b{n}", ev, tmp_path / "k")))
    capsys.readouterr()
    assert main(["trend", *bundles, "--key", str(tmp_path / "k.pub")]) == 0
    trend_out = capsys.readouterr().out
    assert "acc[2J[31mredbellnul31mcsignp.exezwFAKEiso" in trend_out
    main(["catalog", *bundles, "--key", str(tmp_path / "k.pub")])
    catalog_out = capsys.readouterr()
    for out in (trend_out, catalog_out.out, catalog_out.err):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u202e\u2066\u2069]", out)
