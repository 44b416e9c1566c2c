"""Items' JUnit testcases and CTRF tests rendered while the run goes on (pytest_hetero.reporting.itemtexts): the
finish joins them, and junit.xml and ctrf.json are byte for byte what rendering every item at the finish gives;
a text is used only for an item whose journal line this process sealed and assembly authenticated."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_bundle_verify import hetero

from pytest_hetero.evidence.document import EvidenceDocument
from pytest_hetero.evidence.inputs import RunInputs
from pytest_hetero.evidence.journal import JournalKey
from pytest_hetero.evidence.recorder import Recorder, assemble
from pytest_hetero.reporting.ctrf import ctrf_text, render_ctrf
from pytest_hetero.reporting.itemtexts import ItemTexts
from pytest_hetero.reporting.junit import render_junit
from pytest_hetero.reporting.view import json_text

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import ItemDict

pytestmark = pytest.mark.usefixtures("outside_inputs")

PREFIX = "odd.matrix.yaml"
ODD = ["plain", "中文 模型 ✓", "esc \x1b[31mred\x1b[0m bell \x07 nul \x00", "bidi \u202egnp.exe\u202c zero\u200bwidth",
       "lone \ud800 surrogate", "xml <&>\"' ]]> [[PROPERTY|owner=evil]] 100%", "astral 😀 \U0001f680", "tab\tnew\nline\r"]


def _item(n: int, text: str) -> dict[str, Any]:
    layer = ("discovery", "scheduling", "startup", "model", "business")[n % 5]
    status = ("passed", "failed", "error", "blocked", "passed")[n % 5]
    item: dict[str, Any] = {
        "nodeid": f"{PREFIX}::res-{n}::{text[:12]}::{layer}", "matrix": PREFIX, "layer": layer,
        "keys": {"resource": f"res-{n}", "model": text}, "owner": f"team {text}", "status": status,
        "started_at": "2026-11-29T10:00:00.000000Z", "finished_at": "2026-11-29T10:00:01.250000Z",
        "duration_s": 0.0 if n == 3 else 1.25 + n,
        "records": [{"kind": "business.rules", "at": "2026-11-29T10:00:01.000000Z",
                     "data": {"results": [{"name": f"rule {text}", "kind": "metric", "metric": "accuracy",
                                           "expected": ">= 0.9", "observed": 0.5 + n / 100, "unit": "%",
                                           "provenance": {"source": "computed"}, "verdict": "failed"}],
                              "run": None}}] if layer == "business" else [],
        "failure": None, "blocked_by": None, "reason": None,
        "artifacts": [{"name": f"out {text}.txt", "path": f"artifacts/res-{n}/out.txt", "size": 3,
                       "sha256": "0" * 64, "media_type": None}] if n % 2 else []}
    if status in ("failed", "error"):
        item["failure"] = {"layer": layer, "category": f"threshold {text}", "message": f"it broke: {text}",
                           "owner": f"owner {text}"}
    elif status == "blocked":
        item["blocked_by"] = f"{PREFIX}::res-0::discovery"
        item["reason"] = f"blocked: {text}"
    return item


def _run(bundle: Path, texts: ItemTexts | None, key: JournalKey | None = None, repeat: bool = False) -> Recorder:
    """Journal the odd items (each once; with ``repeat`` the first again, an identical line) and end the run."""
    rec = Recorder(bundle, {"id": bundle.name, "tool": "pytest-hetero", "tool_version": "0.1.0",
                            "started_at": "2026-11-29T10:00:00.000000Z"}, key, texts)
    items = [_item(n, text) for n, text in enumerate(ODD)]
    for item in items[:3]:
        rec.item(item)
    # journaled as a run's lines are, odd values and all (the recorder seals what it is given)
    rec.write_entries([{"type": "item", "evidence": cast("ItemDict", item)} for item in items[3:]])
    if repeat:
        rec.item(items[0])
    rec.end(1, False)
    return rec


def _renderings(doc: EvidenceDocument, texts: ItemTexts | None) -> tuple[bytes, bytes]:
    return render_junit(doc, None, texts), "".join(ctrf_text(doc, None, texts)).encode("utf-8", "replace")


def _at_finish(doc: EvidenceDocument) -> tuple[bytes, bytes]:
    """junit.xml and ctrf.json as rendering every item at the finish writes them."""
    return render_junit(doc), (json_text(render_ctrf(doc)) + "\n").encode("utf-8", "replace")


def test_texts_rendered_as_items_are_journaled_are_the_finishs_bytes(tmp_path: Path) -> None:
    texts = ItemTexts()
    rec = _run(tmp_path / "run", texts, repeat=True)
    assert (texts.rendered, texts.broken) == (len(ODD) + 1, "")
    doc = assemble(tmp_path / "run", RunInputs(texts=texts), key=rec.key)
    assert len(doc["items"]) == len(ODD) and texts.bound == len(ODD)  # the repeat is dropped; each item bound
    junit, ctrf = _renderings(doc, texts)
    assert (junit, ctrf) == _at_finish(doc)
    parsed = json.loads(ctrf)
    assert parsed["results"]["summary"]["tests"] == len(ODD)
    tests = {t["name"]: t for t in parsed["results"]["tests"]}
    esc = tests[f"{PREFIX}::res-2::esc [31mred::startup"]  # the terminal escapes and the NUL are gone
    assert esc["message"] == "it broke: esc [31mred[0m bell  nul " and esc["rawStatus"] == "error"
    assert tests[f"{PREFIX}::res-4::lone \ufffd surro::business"]["extra"]["rules"][0]["observed"] == 0.54
    assert "[[PROPERTY|owner=team xml &lt;&amp;&gt;\"' %5D%5D&gt; %5B%5BPROPERTY%7Cowner=evil%5D%5D 100%25]]" \
        in junit.decode()  # escaped for XML, and the brackets and bar cannot open a property
    assert tests[f"{PREFIX}::res-3::bidi gnp.ex::model"]["duration"] == 0  # bidi override gone
    texts.close()
    assert texts.ctrf(doc["items"][0]) is None  # closed: nothing is kept, and the spool file is gone


def test_only_lines_this_process_sealed_and_assembly_authenticated_use_texts(tmp_path: Path) -> None:
    plain = _run(tmp_path / "run", None)  # journaled with no texts at all
    journal = tmp_path / "run" / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    texts = ItemTexts()
    for line in lines[1:4]:  # three item lines handed over, as a recorder with texts would have
        texts.add(line)
    assert texts.rendered == 3
    # one of them altered after it was written: its MAC no longer verifies, so assembly rejects it
    lines[1] = lines[1].replace(b'"status":"passed"', b'"status":"failed"')
    journal.write_bytes(b"".join(lines))
    doc = assemble(tmp_path / "run", RunInputs(texts=texts), key=plain.key)
    assert doc["journal"]["rejected"] and len(doc["items"]) == len(ODD) - 1
    assert texts.bound == 2
    assert _renderings(doc, texts) == _at_finish(doc)
    # read without the key (nothing authenticated): no text is used
    unkeyed = assemble(tmp_path / "run", RunInputs(texts=texts))
    assert not unkeyed["journal"]["authenticated"] and texts.bound == 0
    assert _renderings(unkeyed, texts) == _at_finish(unkeyed)


def test_a_line_that_cannot_be_rendered_drops_every_text(tmp_path: Path) -> None:
    texts = ItemTexts()
    rec = _run(tmp_path / "run", texts)
    texts.add(b'{"type":"item","evidence":{"nodeid":"x"}}\n')  # no MAC, no item fields: a rendering error
    assert texts.broken and texts.rendered == len(ODD)
    texts.add((tmp_path / "run" / "journal.jsonl").read_bytes().splitlines(keepends=True)[1])
    assert texts.rendered == len(ODD)  # once broken, nothing more is kept
    doc = assemble(tmp_path / "run", RunInputs(texts=texts), key=rec.key)
    assert texts.bound == 0
    assert _renderings(doc, texts) == _at_finish(doc)


def test_a_pytest_run_joins_the_texts_it_rendered_and_writes_the_bytes_render_gives(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    from support import matrix_text

    pytester.makefile(".matrix.yaml", t=matrix_text())
    pytester.makeconftest(f"""
import json
from pytest_hetero.pytest_plugin.stash import RECORDER

def pytest_unconfigure(config):
    texts = config.stash[RECORDER].texts
    with open({str(tmp_path / "texts.json")!r}, "w") as fh:
        json.dump({{"rendered": texts.rendered, "bound": texts.bound, "broken": texts.broken}}, fh)
""")
    pytester.runpytest_subprocess("t.matrix.yaml", "--hetero-run-id", "r1", "--hetero-report-dir", "reports")
    bundle = pytester.path / "reports" / "r1"
    items = json.loads((bundle / "evidence.json").read_text())["items"]
    assert len(items) >= 5
    assert json.loads((tmp_path / "texts.json").read_text()) == {"rendered": len(items), "bound": len(items),
                                                                 "broken": ""}
    for fmt, name in (("junit", "junit.xml"), ("ctrf", "ctrf.json")):
        out = tmp_path / name
        assert hetero("render", str(bundle), "--format", fmt, "--out", str(out)) == 0  # every item rendered anew
        assert out.read_bytes() == (bundle / name).read_bytes()
