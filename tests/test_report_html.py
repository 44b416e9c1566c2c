"""report.html in a real headless Chromium: contents, offline, escaping (an injected <script> never runs), PDF."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from bundle_samples import EVIL, PREFIX, make_bundle, sample_evidence
from test_bundle_verify import hetero

from pytest_hetero.bundle.attestation import add_signoff
from pytest_hetero.bundle.signing import generate_keypair, load_private_key
from pytest_hetero.bundle.signoff import signoff_context
from pytest_hetero.evidence.document import as_document
from pytest_hetero.reporting.html import render_html

ENSURE = Path(__file__).parent / "infra" / "chromium.sh"
CSP = re.compile(r'<meta http-equiv="Content-Security-Policy"[^>]*>')


@pytest.fixture(scope="module")
def chromium() -> str:
    """Path of a headless Chromium, installed by tests/infra/chromium.sh on a fresh machine."""
    done = subprocess.run(["sh", str(ENSURE), "ensure"], capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"chromium.sh ensure failed in CI: {done.stderr[-500:]}")
        pytest.skip(f"no chromium: {done.stderr.strip()[-200:]}")
    return done.stdout.strip().splitlines()[-1]


def dump_dom(browser: str, page: Path, profile: Path) -> str:
    """The DOM after load (scripts, if any could run, have run) as serialised by Chromium."""
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           "--virtual-time-budget=2000", "--dump-dom", page.resolve().as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-1000:]
    return done.stdout


class Text(HTMLParser):
    """Collects the text of elements by id and all <pre class="log"> texts."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, dict[str, str | None]]] = []
        self.by_id: dict[str, str] = {}
        self.logs: list[str] = []
        self.cells: dict[str, tuple[str, str]] = {}
        self.title = ""
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts += 1
        if tag not in ("br", "meta", "img", "input", "link"):
            self.stack.append((tag, dict(attrs)))
            self._text = getattr(self, "_text", {})
            self._text[len(self.stack)] = ""

    def handle_endtag(self, tag: str) -> None:
        if not self.stack:
            return
        depth = len(self.stack)
        name, attrs = self.stack.pop()
        text = self._text.pop(depth, "")
        if depth - 1 in self._text:
            self._text[depth - 1] += text
        if name == "title":
            self.title = text
        if attrs.get("id"):
            self.by_id[str(attrs["id"])] = text
        if name == "pre" and attrs.get("class") == "log":
            self.logs.append(text)
        if name == "td" and attrs.get("data-nodeid"):
            self.cells[str(attrs["data-nodeid"])] = (str(attrs.get("class")), text)

    def handle_data(self, data: str) -> None:
        if self.stack:
            self._text[len(self.stack)] += data


def parse(dom: str) -> Text:
    parser = Text()
    parser.feed(dom)
    return parser


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    generate_keypair(tmp_path / "run.key", tmp_path / "run.pub")
    generate_keypair(tmp_path / "biz.key", tmp_path / "biz.pub")
    bundle = make_bundle(tmp_path / "b", sample_evidence(log_text="line 1\n" + EVIL + "\nline 3"),
                         tmp_path / "run.key")
    add_signoff(bundle, load_private_key(tmp_path / "biz.key"), "business", "accept-with-known-failures",
                "gpu-nvidia is out for repair <b>(INC-42)</b>")
    return bundle


def test_report_contents_in_chromium(chromium: str, bundle: Path, tmp_path: Path) -> None:
    dom = parse(dump_dom(chromium, bundle / "report.html", tmp_path / "profile"))
    assert dom.title == "pytest-hetero FAIL: run-1"
    assert dom.scripts == 0
    assert dom.by_id["verdict"] == "FAIL"
    assert dom.by_id["run-id"] == "run-1"
    assert "Bundle signed by key" in " ".join(dom.by_id["signature"].split())
    assert dom.cells[f"{PREFIX}::gpu-nvidia::discovery"] == ("cell s-failed", "failed")
    assert dom.cells[f"{PREFIX}::gpu-nvidia::py-current::model-0@data-0::business"] == (
        "cell s-blocked", "blockedblocked by gpu-nvidia::discovery")
    assert dom.cells[f"{PREFIX}::cpu-host::py-old::startup"][0] == "cell s-excluded"
    assert dom.cells[f"{PREFIX}::cpu-host::py-current::model-0@data-0::model"] == ("cell s-passed", "passed")
    assert "line 1\n" + EVIL + "\nline 3" in dom.logs
    report = dump_dom(chromium, bundle / "report.html", tmp_path / "profile")
    assert "A startup pass shows that this image started on that node" in report
    # the grid: failure reason on hover (title) and numbered for print; failed and error coloured apart
    assert ('<span class="sub s-failed" title="discovery: 1 failed\n[1] driver_missing: nvidia-smi not found: no '
            'NVIDIA driver on vm" data-layer="discovery">D<sup>1</sup></span>') in report
    assert '<li value="1">driver_missing: nvidia-smi not found: no NVIDIA driver on vm' in report
    assert "excluded by matrix rule (line 40): py-old is retired" in report
    failure_row = re.search(r"<h3>infrastructure \(1\)</h3>.*?</table>", report, re.DOTALL)
    assert failure_row and '<td>driver_missing</td>' in failure_row.group(0)
    anchor = re.search(r'<a href="#item-(\d+)">1 record\(s\)</a>', failure_row.group(0))
    assert anchor and f'<details id="item-{anchor.group(1)}" class="s-failed">' in report
    # rendered at the end of the run, signed with it: sign-offs come later, so it states no sign-off state at all
    section = report[report.index('<h2 id="signoff">'):report.index('<h2 id="items">')]
    assert "pending" not in section
    assert "<td>business</td><td>business</td><td>not part of this page</td><td>—</td>" in section
    assert "Team sign-offs are separate attestations added to attestation.intoto.jsonl afterwards" in section


def test_rerendered_report_shows_who_signed_and_what_only_when_verified(chromium: str, bundle: Path,
                                                                        tmp_path: Path) -> None:
    """hetero render reads sign-off from the attestations at view time: with the gate key and the trust policy the
    business sign-off shows as verified, with the person's name, decision and text; without them, or with a policy
    that does not give the key this role, it shows as not verified and names nobody."""
    import hashlib

    from bundle_samples import policy_text

    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text({"business": [(tmp_path / "biz.pub", ["Ana Ruiz"])]}))
    pin = hashlib.sha256(policy.read_bytes()).hexdigest()
    out = tmp_path / "re.html"
    assert hetero("render", str(bundle), "--format", "html", "--out", str(out), "--key", str(tmp_path / "run.pub"),
                  "--policy", str(policy), "--policy-sha256", pin) == 0
    report = dump_dom(chromium, out, tmp_path / "profile")
    assert re.search(r'<td>business</td><td>business</td><td class="state-accepted_with_known_failures">accepted with '
                     r'known failures</td><td><span class="signed">verified</span> accept-with-known-failures by Ana '
                     r"Ruiz \(key <code>[0-9a-f]{16}</code>\) at 20\d\d-[^<]+ for business: <q>gpu-nvidia is out for "
                     r"repair &lt;b&gt;\(INC-42\)&lt;/b&gt;</q>", report)
    assert '<td>platform</td><td>scheduling, startup</td><td class="state-pending">pending</td>' in report
    assert hetero("render", str(bundle), "--format", "html", "--out", str(out)) == 0
    unverified = dump_dom(chromium, out, tmp_path / "profile")
    assert "Ana Ruiz" not in unverified and "verified</span> accept" not in unverified
    assert re.search(r'<td class="state-pending">pending</td><td><span class="unsigned">not verified</span> \(key '
                     r"<code>[0-9a-f]{16}</code>\): the run's signature is not verified \(give the gate key with "
                     r"--key\)", unverified)
    other = tmp_path / "other.yaml"
    other.write_text(policy_text({"business": [(tmp_path / "run.pub", ["CI gate"])]}, allow_gate_key=("business",)))
    assert hetero("render", str(bundle), "--format", "html", "--out", str(out), "--key", str(tmp_path / "run.pub"),
                  "--policy", str(other), "--policy-sha256", hashlib.sha256(other.read_bytes()).hexdigest()) == 0
    wrong = dump_dom(chromium, out, tmp_path / "profile")
    assert re.search(r"not verified</span> \(key <code>[0-9a-f]{16}</code>\): signed by a key the policy test-policy "
                     r"does not give 'business'", wrong.replace("&#39;", "'"))


def test_injected_script_does_not_execute_even_without_csp(chromium: str, tmp_path: Path) -> None:
    evidence = sample_evidence(log_text=EVIL)
    evidence["items"][0]["failure"] = {"layer": "discovery", "category": EVIL, "owner": EVIL, "message": EVIL}
    evidence["items"][0]["status"] = "failed"
    evidence["run"]["host"] = EVIL
    page = tmp_path / "nocsp.html"
    html = render_html(as_document(evidence), signoff_context({}, None, EVIL))
    assert CSP.search(html)
    page.write_text(CSP.sub("", html), encoding="utf-8")
    dom_text = dump_dom(chromium, page, tmp_path / "profile")
    dom = parse(dom_text)
    assert dom.title == "pytest-hetero FAIL (NOT VERIFIED): run-1"
    assert dom.scripts == 0 and "<img src=\"x\"" not in dom_text and "PWNED" in dom_text
    assert EVIL in dom.logs
    # control: the same harness does see a script run when one is not escaped
    control = tmp_path / "control.html"
    control.write_text("<html><head><title>t</title></head><body>" + EVIL + "</body></html>")
    assert parse(dump_dom(chromium, control, tmp_path / "profile")).title == "PWNED"


def test_report_is_self_contained_and_printable(bundle: Path) -> None:
    html = (bundle / "report.html").read_text()
    assert "<link" not in html and "<script" not in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "@media print" in html
    csp = CSP.search(html)
    assert csp is not None and csp.group(0) == ('<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
                                         'style-src \'unsafe-inline\'; img-src data:">')


def test_render_pdf(chromium: str, bundle: Path, tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    assert hetero("render", str(bundle), "--format", "html", "--pdf", "--out", str(pdf)) == 0
    assert pdf.read_bytes().startswith(b"%PDF-")


def test_large_run_stays_usable(tmp_path: Path) -> None:
    evidence = sample_evidence(models=40, datasets=25)
    html = render_html(as_document(evidence), signoff_context({}, None, "no key"))
    assert "2001 combinations (resource × image × model × dataset): the grid above shows them per resource × " \
           "image." in html
    assert html.count('<td class="gcell"') == 3 and 'id="heat"' not in html
    assert html.count("<details id=\"item-") == 1500
    assert "2507 more item(s), mostly passed, are in evidence.json only." in html
    assert len(html) < 3_000_000


def test_the_compiled_template_is_kept_for_the_next_run_in_a_folder_only_this_user_may_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20: compiling report.html.j2 cost every run ~0.1-0.2 s; the next run loads it compiled,
    never from a folder another user could write (what it loads is code)."""
    from pytest_hetero.reporting.html import template_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    evidence = sample_evidence()
    first = render_html(as_document(evidence), signoff_context({}, None, "no key"))
    folder = tmp_path / "pytest-hetero" / "jinja2"
    entries = list(folder.iterdir())
    assert folder.stat().st_mode & 0o777 == 0o700 and entries
    assert all(e.name.startswith("__jinja2_") and e.stat().st_size > 100 for e in entries)
    assert render_html(as_document(evidence), signoff_context({}, None, "no key")) == first
    folder.chmod(0o777)
    assert template_cache() is None
    assert render_html(as_document(evidence), signoff_context({}, None, "no key")) == first


def test_record_data_reads_as_json_compact_where_short_and_indented_where_long() -> None:
    """Issue 20's fifth pass: records are no longer all indented by the pure-Python encoder; a short value
    stays on its key's line, a long nested one is indented, characters are kept, and it is JSON."""
    import json

    from pytest_hetero.reporting.html import RECORD_LINE, _record_text

    data = {"source": "proc", "expected": {"min_cpus": 1}, "name": "中文 GPU",
            "observed": {"devices": [{"index": n, "name": "NVIDIA H100 80GB HBM3", "health": "ok"} for n in range(3)]}}
    text = _record_text(data)
    assert json.loads(text) == data
    lines = text.splitlines()
    assert ' "expected": {"min_cpus": 1},' in lines and ' "name": "中文 GPU",' in lines
    assert ' "observed": {' in lines and '    "name": "NVIDIA H100 80GB HBM3"' in lines
    assert all(len(line) <= RECORD_LINE + 20 for line in lines)
    assert _record_text({"text": "a log\n"}) == "a log\n" and _record_text([1, "x"]) == '[1, "x"]'
    assert _record_text({}) == "{}"


def test_indented_records_are_the_stdlib_text_and_leave_no_cycles_for_the_paused_collector() -> None:
    """Issue 32 (memory flat in items): the standard library indents with nested functions that refer to each
    other, a cycle per call; the finish pauses the cyclic collector, so each item shown in detail left ~13 KB
    until the bundle was finished. The page's indented values are now the same text, and leave nothing."""
    import gc
    import json

    from pytest_hetero.reporting.html import _indented, _record_text

    value = {"metrics": {"accuracy": 0.92, "per_class": [{"label": n, "f1": n / 10, "ok": n % 2 == 0, "note": None}
                                                         for n in range(10)]},
             "ids": list(range(40)), "quoted": 'a "b" \\ é \u2028 \ud800', "empty": {}, "none": [], "big": 2 ** 70}
    for shown in (value, value["metrics"], value["ids"], [value, [value]], {"": {"x": [[], [{}]]}}):
        assert _indented(shown) == json.dumps(shown, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False)
    for odd in ({"a": (1, 2)}, {3: "x", 1: [{None: 2}]}):  # not JSON data: the standard library's encoder
        assert _indented(odd) == json.dumps(odd, indent=1, sort_keys=True, ensure_ascii=False)
    with pytest.raises(ValueError, match="Out of range"):
        _indented({"nan": [float("nan")]})
    gc.collect()
    gc.disable()
    try:
        for _ in range(20):
            _record_text({"outputs": value, "stdout": "x" * 200})
        left = gc.collect()
    finally:
        gc.enable()
    assert left == 0  # before: 620 (31 per record)
