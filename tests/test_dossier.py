"""The acceptance dossier's content from evidence: catalogue, cover (qualified verdict, change, conditions),
sign-off contract, acceptance results, phases and scenarios, untested groups, escaping, scale."""

from __future__ import annotations

import copy
import re
import string
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from bundle_samples import EVIL, PREFIX, make_bundle, sample_evidence
from test_bundle_verify import hetero

from pytest_hetero.bundle.baseline import TRANSITIONS
from pytest_hetero.bundle.signoff import signoff_context
from pytest_hetero.bundle.signoff_check import NO_POLICY, SignOff
from pytest_hetero.evidence.document import as_document
from pytest_hetero.evidence.views import SignoffView
from pytest_hetero.reporting import dossier_sections as sections
from pytest_hetero.reporting.dossier import cover, not_proves, proves, qualifications, render_dossier
from pytest_hetero.reporting.dossier_facts import KINDS, Facts
from pytest_hetero.reporting.dossier_text import MESSAGES, Text

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import UntestedSection

OWNERS = {"example-cpu": {"discovery": "infrastructure", "scheduling": "platform", "startup": "platform",
                          "model": "algorithm", "business": "business"}}
GPU_DISC = f"{PREFIX}::gpu-nvidia::discovery"


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_catalogue_has_both_languages_with_the_same_fields() -> None:
    for key, (en, zh) in MESSAGES.items():
        assert en.strip() and zh.strip(), key
        assert fields(en) == fields(zh), key
    # the Chinese is written, not copied: every sentence-length entry differs from its English
    same = [k for k, (en, zh) in MESSAGES.items() if en == zh and re.search(r"[a-z]{4,} [a-z]{4,}", en)]
    assert same == []
    chinese = Text("zh")
    assert chinese("h.proves") == "本次运行可证明" and chinese("h.not_proves") == "本次运行不能证明"
    assert chinese.join(["资源发现", "调度"]) == "资源发现、调度"
    assert chinese.counts({"passed": 4, "failed": 1}) == "通过 4 项、失败 1 项"
    assert Text("en").counts({"passed": 4, "failed": 1}) == "4 passed, 1 failed"
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        Text("fr")  # type: ignore[arg-type]


def local_pass() -> dict[str, Any]:
    """sample_evidence with the local backend's honest scheduling (not applicable) and only the CPU row."""
    ev = sample_evidence()
    ev["items"] = [i for i in ev["items"] if "::gpu-nvidia::" not in i["nodeid"]]
    sched = next(i for i in ev["items"] if i["layer"] == "scheduling")
    sched.update(status="not_applicable", reason="not applicable: the local backend cannot prove scheduling")
    ev["untested"]["items"] = [{k: sched[k] for k in ("nodeid", "layer", "keys", "status", "reason", "blocked_by")}]
    ev["untested"]["never_covered"] = {}
    from pytest_hetero.evidence.untested import summarise

    ev["summary"] = summarise(ev["items"], ev["untested"])
    return ev


@pytest.mark.parametrize(("lang", "words"), [
    ("en", "passed — scheduling not proven on this backend (local)"),
    ("zh", "通过——调度未在此后端（local）上得到证明"),
])
def test_verdict_carries_its_qualification(lang: str, words: str) -> None:
    ev = local_pass()
    signed = signoff_context(OWNERS, "ab" * 32, None)
    t = Text(lang)  # type: ignore[arg-type]
    assert cover(Facts(as_document(ev)), t, signed, sections.roles(signed, t))["verdict"] == words
    unsigned = signoff_context(OWNERS, None, "no key")
    assert qualifications(Facts(as_document(ev)), t, unsigned)[-1] == t("q.unsigned")


def test_failing_run_verdict_names_failures_and_partial_layers() -> None:
    t = Text("en")
    quals = qualifications(Facts(as_document(sample_evidence())), t, signoff_context(OWNERS, None, "no key"))
    assert quals == ["1 item(s) failed, 0 errored",
                     "discovery, scheduling, startup, model execution, business acceptance proven for 1 of 2 "
                     "resources", "bundle unsigned"]


def test_proves_and_does_not_prove_are_specific_to_what_ran() -> None:
    ev = local_pass()
    model = next(i for i in ev["items"] if i["layer"] == "model")
    model["records"] = [{"kind": "model.identity", "at": "t", "data": {
        "model": "model-0", "version": "1.1.0", "sha256": "d2" * 32, "dataset": "data-0", "dataset_version": "2.0",
        "dataset_sha256": "36" * 32}}, {"kind": "model.run", "at": "t", "data": {"duration_s": 0.19, "exit_code": 0, "peak_rss_mib": None}}]
    t = Text("en")
    lines = {p["layer"]: p["lines"] for p in proves(Facts(as_document(ev)), t)}
    assert lines["model"] == ["model-0 1.1.0 ran on data-0 2.0 on cpu-host × py-current in 0.19 s (exit 0, "
                              "outputs kept)"]
    assert lines["scheduling"] == [t("proves.none")]
    dnp = not_proves(Facts(as_document(ev)), t)
    assert "Scheduling: the local backend places nothing: no scheduler, queue, quota or Pending reason was " \
           "exercised for any resource." in dnp
    assert t("dnp.startup.local") in dnp
    assert t("dnp.simulated", nodes="kwok-1") not in dnp


def test_every_record_kind_a_chapter_counts_is_indexed() -> None:
    """A layer chapter counts the items holding each kind of :data:`sections.EVIDENCE_KINDS` from the index
    (``Facts.with_kind``, one list per kind of :data:`KINDS`); ``failure`` is an item's failure, not a record."""
    listed = {kind for per in sections.EVIDENCE_KINDS.values() for _, kinds in per for kind in kinds}
    assert listed - {"failure"} <= KINDS


FULL_CONTRACT: SignoffView = {
    "source": "attestations", "run_signer": "cd" * 32, "run_verified": False, "signer_error": None,
    "verification": "unverified", "verified_by": None, "policy": None, "note": "", "roles": [
        {"role": "business", "layers": ["business"], "owner": "risk-business", "state": "accepted_with_conditions",
         "signed": [{"keyid": "ab" * 32, "names": ["Li Wei (business owner)"], "decision": "accept-with-conditions",
                     "conditions": "re-measure latency on the H200 pool before go-live",
                     "signed_at": "2026-11-30T08:00:00Z", "verified": True, "why_unverified": None,
                     "layers": ["business"]}]},
        {"role": "platform", "layers": ["scheduling", "startup"], "owner": "platform", "state": "rejected",
         "signed": [{"keyid": "ef" * 32, "names": ["Zhang Min"], "decision": "reject", "conditions": "p99 too high",
                     "signed_at": "2026-11-30T09:00:00Z", "verified": False,
                     "why_unverified": "key not in the trust policy", "layers": []}]},
        {"role": "algorithm", "layers": ["model"], "owner": "algorithm", "state": "pending", "signed": []},
    ]}


def test_sign_off_contract_fields_are_rendered_and_a_role_without_sign_offs_reads_as_pending() -> None:
    t = Text("en")
    roles = sections.roles(FULL_CONTRACT, t)
    business, platform, algorithm = roles
    assert business["owner"] == "risk-business" and business["state_text"] == "accepted with conditions"
    assert business["signed"][0]["names"] == ["Li Wei (business owner)"] and business["signed"][0]["verified"]
    assert platform["signed"][0]["why_unverified"] == "key not in the trust policy"
    assert algorithm["state"] == "pending" and algorithm["signed"] == []
    # the view as hetero render builds it without a trust policy: a sign-off is listed, not verified, names nobody,
    # and its role stays pending (never shown as accepted)
    unchecked = sections.roles(signoff_context(OWNERS, None, None, [
        SignOff(2, "ab" * 32, "business", ["business"], "accept", None, "2026-11-29T11:00:00Z",
                why_unverified=NO_POLICY)], source="attestations"), t)
    role = next(r for r in unchecked if r["role"] == "business")
    claim = role["signed"][0]
    assert role["state"] == "pending" and claim["verified"] is False
    assert claim["why_unverified"] == NO_POLICY and claim["names"] == []
    conditions = cover(Facts(as_document(sample_evidence())), t, FULL_CONTRACT, roles)["conditions"]
    assert conditions == ["business accepted on condition: re-measure latency on the H200 pool before go-live",
                          "A sign-off for platform does not verify: key not in the trust policy",
                          "Sign-off pending: algorithm (model execution)",
                          "1 failed or errored item(s) owned by infrastructure"]
    html = render_dossier(as_document(sample_evidence()), FULL_CONTRACT, "zh")
    text = visible_text(html)
    assert "Li Wei (business owner)" in text and "附条件接受" in text and "已验证" in text
    assert "签名：未验证：key not in the trust policy" in text and "签名：已验证" in text
    assert "条件：re-measure latency on the H200 pool before go-live" in text and "决定" in text


def golden_failure(ev: dict[str, Any]) -> dict[str, Any]:
    biz: dict[str, Any] = next(i for i in ev["items"] if i["layer"] == "business" and i["status"] == "passed")
    biz.update(status="failed", failure={"layer": "business", "category": "acceptance_failed", "owner": "business",
                                         "message": "2 of 3 acceptance rules failed"})
    biz["records"] = [{"kind": "business.rules", "at": "t", "data": {"run": None, "sensitive": False, "results": [
        {"name": "accuracy-floor", "kind": "metric", "expected": "accuracy >= 0.95", "observed": 0.963889,
         "verdict": "pass", "detail": "", "bound": {"op": ">=", "value": 0.95, "tolerance": None}},
        {"name": "golden-samples", "kind": "golden", "expected": "10 golden samples match", "observed": "8/10 match",
         "verdict": "fail", "detail": "sample 70: expected 7, got 1; sample 0: expected 9, got 0", "failing": [70, 0]},
        {"name": "latency-p95", "kind": "latency", "expected": "p95 ≤ 0.001 ms", "observed": 0.0114,
         "verdict": "fail", "detail": ""}]}}]
    return biz


def test_acceptance_results_show_units_verdicts_and_failing_golden_indices() -> None:
    ev = sample_evidence()
    golden_failure(ev)
    res = sections.results(Facts(as_document(ev)), Text("en"))
    (group,) = res["groups"]
    assert group["heading"] == "model-0 ? × data-0 ?"  # no model.identity recorded in this sample
    rows = {(r["where"], r["rule"]): r for r in group["rows"]}
    acc = rows[("cpu-host × py-current", "accuracy-floor")]
    assert (acc["threshold"], acc["observed"], acc["verdict_text"]) == ("accuracy >= 0.95", "0.9639 (96.39 %)", "pass")
    assert rows[("cpu-host × py-current", "golden-samples")]["failing"] == "70, 0"
    lat = rows[("cpu-host × py-current", "latency-p95")]
    assert (lat["observed"], lat["verdict_text"]) == ("0.0114 ms", "fail")
    blocked = rows[("gpu-nvidia × py-current", "")]
    assert blocked["verdict_text"].startswith(f"business layer blocked: blocked by {GPU_DISC}")
    zh = sections.results(Facts(as_document(ev)), Text("zh"))["groups"][0]["rows"]
    assert {r["observed"] for r in zh} >= {"0.9639（96.39%）", "0.0114 毫秒"}


def test_untested_scope_is_grouped_with_who_can_close_it() -> None:
    groups = sections.untested(Facts(as_document(sample_evidence())), Text("zh"))
    first, second = groups["groups"]
    assert (first["reason"], first["count"], first["who"]) == ("被 gpu-nvidia::discovery 阻断", 4, "基础设施团队")
    assert first["how"] == "修复根因失败（driver_missing）后重新运行"
    assert (second["who"], second["how"]) == ("矩阵维护方", "在矩阵中删除或收窄该排除规则")
    assert groups["never"] == ["example-cpu 中没有任何通过项覆盖：资源：gpu-nvidia"]


def test_phases_and_scenarios_mark_what_proves_them_or_not_covered() -> None:
    ev = local_pass()
    t = Text("en")
    unsigned = {p["what"]: p for p in sections.phases(Facts(as_document(ev)), t, signoff_context(OWNERS, None, "x"))}
    assert unsigned["1. Resource catalogue usable"]["state"] == "covered"
    assert unsigned["1. Resource catalogue usable"]["proof"] == ["cpu-host::discovery"]
    placement = unsigned["2. Tasks land in the right pool, Pending explained, no boundary crossed"]
    assert (placement["state"], placement["detail"]) == ("not_covered", "no placement was attempted on this "
                                                                         "backend (local)")
    assert unsigned["4. Expansion breaks nothing"]["detail"] == "no baseline was compared"
    ev["baseline_diff"] = {"baseline": {"run": "night-1"}, "counts": {**dict.fromkeys(TRANSITIONS, 0), "regression": 1},
                           "transitions": {name: [] for name in TRANSITIONS}, "verification": "verified", "gate": {}}
    expansion = sections.phases(Facts(as_document(ev)), t, signoff_context(OWNERS, None, "x"))[3]
    assert (expansion["state"], expansion["detail"]) == ("against", "against baseline night-1: 1 regression(s), "
                                                                    "0 new failure(s)")
    scen = {s["what"]: s for s in sections.scenarios(Facts(as_document(ev)), t)}
    assert scen["New resource admitted"]["state"] == "partial"
    assert scen["Training / fine-tune under quota"]["state"] == "not_covered"
    assert scen["Inference service: version, entry, permission, observability, rollback"]["detail"] == \
        "no served model in the matrix"


def test_change_since_baseline_lists_versions_transitions_metrics_and_gate() -> None:
    ev = local_pass()
    ev["baseline_diff"] = {
        "baseline": {"run": "night-1", "matrices": ["example-cpu"]}, "verification": "verified",
        "transitions": {**{name: [] for name in TRANSITIONS},
                        "regression": [{"item": "example-cpu::cpu-host::discovery", "old": "passed", "new": "failed"}]},
        "counts": {**dict.fromkeys(TRANSITIONS, 0), "regression": 1},
        "input_changes": [{"what": "model", "name": "digits-logreg", "old": "1.0.0", "new": "1.1.0"}],
        "metric_changes": [{"item": "example-cpu::x::business", "rule": "accuracy-floor", "old": 0.96, "new": 0.9,
                            "relative_change": -0.0625}],
        "target_changes": [], "gate": {"policy": "regression", "failed": True, "reasons": ["1 regression(s)"]}}
    lines = cover(Facts(as_document(ev)), Text("zh"), signoff_context({}, None, None), [])["change"]
    assert lines == ["基线运行 night-1（签名已验证）。", "模型 digits-logreg：1.0.0 → 1.1.0", "状态变化：回归 1 项",
                     "回归：cpu-host::discovery（通过 → 失败）", "x::business 的指标 accuracy-floor：0.96 → 0.9（-6.2%）",
                     "基线门禁（失败策略 regression）：未通过: 1 regression(s)"]


class Visible(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.skip += tag in ("style", "title")

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("style", "title")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = Visible()
    parser.feed(html)
    return re.sub(r"\s+", " ", " ".join(parser.parts))


def test_evidence_text_is_escaped_and_control_characters_dropped() -> None:
    ev = sample_evidence()
    gpu = next(i for i in ev["items"] if i["nodeid"] == GPU_DISC)
    gpu["failure"]["message"] = EVIL + "\x1b[31m red\x00"
    ev["run"]["invocation"] = [EVIL]
    html = render_dossier(as_document(ev), signoff_context(OWNERS, None, EVIL), "en")
    assert "<script>" not in html and "<img src=x" not in html and "&lt;script&gt;" in html
    assert "\x1b" not in html and "\x00" not in html
    assert "<script" not in html.split("<style>")[0] and html.count("<script") == 0


def test_render_command_dossier_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = make_bundle(tmp_path / "b", sample_evidence(), None)
    out = tmp_path / "d.html"
    assert hetero("render", str(bundle), "--format", "dossier", "--lang", "zh", "--out", str(out)) == 0
    html = out.read_text()
    assert '<html lang="zh-CN">' in html and "验收报告" in html and "@page { size: A4;" in html
    assert hetero("render", str(bundle), "--format", "html", "--lang", "zh", "--out", str(out)) == 2
    assert "--lang zh applies to --format dossier only" in capsys.readouterr().err
    assert hetero("render", str(bundle), "--format", "md", "--pdf", "--out", str(tmp_path / "x.pdf")) == 2
    assert "--pdf needs --format html or dossier" in capsys.readouterr().err
    assert not (bundle / "dossier.html").exists()  # rendered on demand, never part of the signed bundle


def big_evidence(n: int) -> dict[str, Any]:
    """``n`` items from the bundle benchmark's generator (20 resources × 5 images × model@dataset), as evidence."""
    import importlib.util

    from pytest_hetero.evidence.untested import DOES_NOT_PROVE, summarise

    spec = importlib.util.spec_from_file_location("bench_bundle", Path(__file__).parents[1] / "bench" / "bench_bundle.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    items = bench.synthetic_items(n)
    untested = {"items": [{k: i[k] for k in ("nodeid", "layer", "keys", "status", "reason", "blocked_by")}
                          for i in items if i["status"] == "blocked"], "never_covered": {}, "not_proven": [],
                "does_not_prove": dict(DOES_NOT_PROVE)}
    ev = copy.deepcopy(sample_evidence())
    ev.update(items=items, untested=untested, summary=summarise(items, cast("UntestedSection", untested)),
              matrices=[{"name": "bench", "prefix": "matrices/bench.matrix.yaml", "sha256": "0" * 64}])
    return ev


@pytest.mark.parametrize("n", [2000, 20000])
def test_dossier_of_a_large_run_stays_readable(n: int) -> None:
    ev = big_evidence(n)
    start = time.perf_counter()
    html = render_dossier(as_document(ev), signoff_context({"bench": OWNERS["example-cpu"]}, None, "no key"), "zh")
    elapsed = time.perf_counter() - start
    print(f"dossier of {n} items: {len(html) / 1e6:.2f} MB in {elapsed:.2f} s")
    assert len(html) < 1_500_000
    assert html.count('<td class="gcell"') == len({(i["keys"]["resource"], i["keys"].get("image")) for i in ev["items"]
                                                   if "image" in i["keys"]})
    assert "另有" in html  # capped lists say how many more are in evidence.json


def test_queue_admission_time_is_read_from_the_kueue_admission_record() -> None:
    """The queue table's "admitted" column read ``admitted_at`` from ``scheduling.placed``, which no writer fills;
    a Kueue admission is recorded as ``scheduling.queue`` (placement.record_admission), so the column always said
    "not recorded" (found by typerep2)."""
    ev = sample_evidence()
    items = {i["nodeid"]: i for i in ev["items"]}
    sched = items[f"{PREFIX}::cpu-host::scheduling"]
    sched["keys"] = {"resource": "cpu-host", "image": "py-current"}
    sched["records"] = [
        {"kind": "scheduling.submitted", "at": "t", "data": {"name": "w", "submitted_at_epoch_s": 1796121718.4}},
        {"kind": "scheduling.placed", "at": "t", "data": {"pod": "w", "node": "kwok-1", "waited_s": 0.06,
                                                            "decided_at": None, "observed_epoch_s": 1796121718.46}},
        {"kind": "scheduling.queue", "at": "t", "data": {"controller": "kueue", "admitted": True,
                                                           "admitted_at": "2026-12-01T10:41:59Z", "wait_s": 1.0}}]
    (row,) = sections.operations(Facts(as_document(ev)), Text("en"))["queue"]
    assert (row["submitted"], row["admitted"], row["placed"]) == (
        "2026-12-01 10:41:58", "2026-12-01 10:41:59", "2026-12-01 10:41:58")


def test_queue_wait_from_what_the_engine_recorded() -> None:
    ev = sample_evidence()
    items = {i["nodeid"]: i for i in ev["items"]}
    sched, startup = items[f"{PREFIX}::cpu-host::scheduling"], items[f"{PREFIX}::cpu-host::py-current::startup"]
    # scheduling keyed by resource × image, as the Kubernetes engine places per image
    sched["keys"] = {"resource": "cpu-host", "image": "py-current"}
    sched["records"] = [
        {"kind": "scheduling.submitted", "at": "t", "data": {"name": "w", "submitted_at_epoch_s": 1796121718.4}},
        {"kind": "scheduling.placed", "at": "t", "data": {"pod": "w", "node": "kwok-1", "waited_s": 0.06,
                                                            "decided_at": None, "observed_epoch_s": 1796121718.46}}]
    startup["records"] = [{"kind": "startup.pod", "at": "t", "data": {
        "pod": "w", "node": "kwok-1", "digest": None, "container_statuses": [
        {"restartCount": 2, "state": {"running": {"startedAt": "2026-12-01T10:41:58Z"}}}]}}]
    ops = sections.operations(Facts(as_document(ev)), Text("en"))
    assert ops["queue"] == [{"item": "cpu-host::scheduling", "submitted": "2026-12-01 10:41:58",
                             "admitted": "not recorded", "placed": "2026-12-01 10:41:58",
                             "started": "2026-12-01 10:41:58", "wait": "0.06 s / < 1 s (stamped in whole seconds)",
                             "restarts": "2"}]
    assert sections.operations(Facts(as_document(sample_evidence())), Text("zh"))["queue_note"] == \
        "此后端未进行排队或调度，排队等待不适用（local）。"
