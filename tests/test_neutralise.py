"""Text a model, a matrix author or an owner controls cannot steer a terminal or a report (issue 15 item 5).

A model's stderr holds ESC sequences, BEL, NUL, C1 controls, bidi overrides and zero-width characters;
owner names hold line breaks and ``]]\\n[[PROPERTY|…]]``; messages hold ``@team`` and ``#123``. The real
run prints pytest's summary and the hetero summary, and writes every rendering: none carries them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from support import DIGITS, MODEL_SHA, matrix_text, outside_paths

from pytest_hetero.reporting.view import (
    _INVISIBLE,
    json_text,
    junit_properties,
    junit_property,
    one_line,
    printable,
    terminal_text,
)

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

HOSTILE = "\x1b[2J\x1b[31mred\x07bell\x00nul\x9b31mcsi\u202egnp.exe\u200bzw\u2066iso\u2069\ufeff"
"""What a model's stderr may hold: clear screen, colour, BEL, NUL, C1 CSI, bidi override and isolate, ZWSP, BOM."""
EVIL_OWNER = "@team #123 ops]]\n[[PROPERTY|status=passed]]"


def test_every_format_character_of_unicode_is_neutralised() -> None:
    """The class of invisible characters is Unicode's own category Cf (plus C1 and noncharacters): checked
    against unicodedata, so a newer Unicode release cannot slip a format character past it."""
    import re

    invisible = re.compile(f"[{_INVISIBLE}]")
    for cp in range(0x110000):
        ch = chr(cp)
        if unicodedata.category(ch) == "Cf" and unicodedata.unidata_version <= "14.0.0":
            assert invisible.match(ch), hex(cp)
    assert all(invisible.match(chr(cp)) for cp in range(0x7F, 0xA0))


def test_the_isprintable_fast_path_skips_nothing_the_sanitiser_removes() -> None:
    """printable and json_text return text str.isprintable accepts without scanning it: that is only
    right if no character the sanitiser removes is printable to Python, for every code point."""
    from pytest_hetero.reporting.view import _UNPRINTABLE

    assert [hex(cp) for cp in range(0x110000) if _UNPRINTABLE.match(chr(cp)) and chr(cp).isprintable()] == []
    assert printable("plain text") == "plain text" and printable("caf\u00e9\u00ad") == "caf\u00e9"


def test_the_sanitiser_removes_controls_and_keeps_text() -> None:
    assert printable(HOSTILE) == "[2J[31mredbellnul31mcsignp.exezwiso"
    assert printable("line 1\r\nline 2\ttab \ud800") == "line 1\r\nline 2\ttab \ufffd"
    assert terminal_text("ok\rFAKE PASSED\r\nnext") == "okFAKE PASSED\nnext"
    assert one_line("a\nb\rc\x85d\u2028e") == "a b c d e"
    assert junit_property("owner", EVIL_OWNER) == "[[PROPERTY|owner=@team #123 ops%5D%5D %5B%5BPROPERTY%7Cstatus=passed%5D%5D]]"


@pytest.mark.parametrize("bad", ["\x1b", "\x08", "\x0c", "\x00", "\x7f", "\x9b", "\u202e", "\ud800"])
@pytest.mark.parametrize("around", ["ascii ", "caf\u00e9 \u2026 "])
def test_json_text_neutralises_in_ascii_and_non_ascii_text(bad: str, around: str) -> None:
    """json_text skips the scan of ASCII text (the encoder escapes C0 controls): every control, DEL, C1,
    format character and surrogate is still removed (surrogate: replaced), in ASCII and non-ASCII
    documents alike."""
    doc = {"items": [{"message": around + "before" + bad + "after"}], "n": 1}
    expected = around + "beforeafter" if bad != "\ud800" else around + "before\ufffdafter"
    assert json.loads(json_text(doc)) == {"items": [{"message": expected}], "n": 1}
    assert json_text({"plain": around + "text\twith tab"}) == json.dumps({"plain": around + "text\twith tab"},
                                                                          ensure_ascii=False)


def test_junit_properties_are_each_pair_encoded() -> None:
    safe = [("layer", "model"), ("resource", "cpu-host"), ("owner", "algorithm")]
    assert junit_properties(safe) == "\n".join(junit_property(k, v) for k, v in safe)
    assert junit_properties(safe) == "[[PROPERTY|layer=model]]\n[[PROPERTY|resource=cpu-host]]\n[[PROPERTY|owner=algorithm]]"
    hostile = [*safe, ("owner", EVIL_OWNER), ("rule", "a\nb|c")]
    assert junit_properties(hostile) == "\n".join(junit_property(k, v) for k, v in hostile)
    assert "%5D%5D" in junit_properties(hostile) and "a b%7Cc" in junit_properties(hostile)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A real run whose model fails with HOSTILE on stderr; the business owner (in the matrix, and as a
    plugin routes the failure) carries a JUnit property injection, a mention and an issue reference; so
    does the business rule's name."""
    tmp = tmp_path_factory.mktemp("hostile")
    acceptance = tmp / "acceptance.yaml"
    acceptance.write_text(json.dumps({"apiVersion": "pytest-hetero/v1", "kind": "AcceptanceRules",
                                      "rules": [{"name": "ping-@team-see-#123", "metric": "accuracy", "op": ">=",
                                                 "value": 2}]}))
    doc = json.loads(matrix_text(name="hostile", acceptance=acceptance, truth=True))  # accuracy from truth
    doc["spec"]["owners"] = {"business": EVIL_OWNER}
    doc["spec"]["models"].append({"name": "loud", "version": "1", "sha256": MODEL_SHA,
                                  "uri": str(DIGITS / "model" / "digits-logreg-1.0.0.onnx"),
                                  "entrypoint": ["{python}", "-c", f"import sys; sys.stderr.write({HOSTILE!r}); "
                                                 "sys.exit(1)"]})
    (tmp / "hostile.matrix.yaml").write_text(json.dumps(doc))
    (tmp / "conftest.py").write_text(f"def pytest_hetero_failure_owner(layer, category, default):\n"
                                     f"    return {EVIL_OWNER!r} if layer == 'business' else None\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "hostile.matrix.yaml",
                           "--hetero-run-id", "r1", "-rA"], cwd=tmp, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "HETERO_ALLOW_PATHS": outside_paths(tmp_path_factory)})
    return done, tmp / "reports" / "r1"


def test_the_terminal_shows_the_text_without_its_controls(hostile_run: tuple[subprocess.CompletedProcess[str],
                                                                             Path]) -> None:
    done, _ = hostile_run
    assert done.returncode == 1, done.stdout
    out = done.stdout + done.stderr
    for ch in "\x1b\x07\x00\x9b\u202e\u200b\u2066\u2069\ufeff":
        assert ch not in out, repr(ch)
    # pytest's failure section and short summary (our repr_failure), and the hetero summary
    assert ("[failed] model/nonzero_exit (owner: algorithm): entrypoint exited with 1: "
            "[2J[31mredbellnul31mcsignp.exezwiso") in out
    assert "[failed] business/acceptance_failed (owner: @team #123 ops]] [[PROPERTY|status=passed]]): " in out
    assert "\n  @team #123 ops]] [[PROPERTY|status=passed]]: 1\n" in out
    assert "    hostile.matrix.yaml::cpu-host::py::loud@digits-test::model: nonzero_exit: entrypoint exited with 1: " \
           "[2J[31mredbellnul31mcsignp.exezwiso" in out


def test_no_rendering_carries_controls_pings_or_injected_properties(
        hostile_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, bundle = hostile_run
    for name in ("report.html", "summary.md", "junit.xml", "ctrf.json"):
        text = (bundle / name).read_text(encoding="utf-8")
        for ch in "\x1b\x07\x00\x9b\u202e\u200b\u2066\u2069\ufeff":
            assert ch not in text, (name, repr(ch))
    summary = (bundle / "summary.md").read_text()
    assert "- **`@team` `#123` ops\\]\\] \\[\\[PROPERTY\\|status=passed\\]\\]** (1)" in summary
    assert "`ping-@team-see-#123:`" in summary
    from junitparser import JUnitXml

    business = next(c for s in JUnitXml.fromfile(str(bundle / "junit.xml")) for c in s
                    if c.classname.endswith(".digits-logreg@digits-test") and c.name == "business")
    props = (business.system_out or "").splitlines()
    assert "[[PROPERTY|owner=@team #123 ops%5D%5D %5B%5BPROPERTY%7Cstatus=passed%5D%5D]]" in props
    assert [p for p in props if p.startswith("[[PROPERTY|status=")] == ["[[PROPERTY|status=failed]]"]
