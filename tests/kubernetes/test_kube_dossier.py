"""The acceptance dossier of a Kubernetes run on the test plane (matrices/example-k8s.matrix.yaml on KWOK
pools and its real-node rows), printed by headless Chromium and read back with pdftotext, in English and Chinese."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support import evidence_of
from test_bundle_verify import hetero
from test_dossier_browser import print_dossier
from test_kube_example import example_pools, run_example  # noqa: F401 - the fixture
from test_report_html import chromium  # noqa: F401 - the fixture

from pytest_hetero.bundle.signing import generate_keypair
from pytest_hetero.reporting.dossier_facts import number

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster


@pytest.fixture
def kube_bundle(pytester: pytest.Pytester, realnode: RealNodeCluster, example_pools: dict[str, str],  # noqa: F811
                monkeypatch: pytest.MonkeyPatch) -> Path:
    generate_keypair(pytester.path / "gate.key", pytester.path / "gate.pub")
    run_example(pytester, realnode, monkeypatch, "--hetero-sign-key", str(pytester.path / "gate.key"))
    evidence = evidence_of(pytester)
    run_id: str = evidence["run"]["id"]
    return pytester.path / "reports" / run_id


def test_dossier_of_a_kubernetes_run_in_english_and_chinese(
        kube_bundle: Path, example_pools: dict[str, str], chromium: str, tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    """Both languages' dossiers of one run (a run of the example takes the real node ~7 s)."""
    for lang in ("en", "zh"):
        dossier_of_the_run(kube_bundle, example_pools, chromium, lang, tmp_path, capsys)


def dossier_of_the_run(kube_bundle: Path, pools: dict[str, str], browser: str, lang: str,
                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Print the bundle's dossier in ``lang`` and check what it says against the bundle's evidence."""
    evidence = json.loads((kube_bundle / "evidence.json").read_text())
    items = {i["nodeid"].split("::", 1)[1]: i for i in evidence["items"]}
    biz = items["cpu-pool::py311::digits-logreg@digits-test::business"]
    rules = {r["name"]: r for r in next(rec["data"]["results"] for rec in biz["records"] if "results" in rec["data"])}
    accuracy = rules["accuracy-floor"]["observed"]
    placed = next(r["data"] for r in items["gpu-h100::py311::scheduling"]["records"]
                  if r["kind"] == "scheduling.placed")
    # rendered with the gate's key: a dossier of an unverified bundle says NOT VERIFIED instead of its verdict
    flat, squeezed = print_dossier(kube_bundle, lang, browser, tmp_path, capsys,
                                   "--key", str(kube_bundle.parent.parent / "gate.pub"))
    gpu_node = pools["gpu"]
    if lang == "en":
        assert re.search(r"Verdict failed — 3 item\(s\) failed, 0 errored; .*startup and model ran on simulated "
                         r"nodes \(", flat), flat[:800]
        # compared without whitespace: the PDF may wrap the sentence inside the node name (example-gpu-\nc0aea)
        assert re.sub(r"\s", "", f"gpu-h100: a workload asking for nvidia.com/gpu=1 was placed on node {gpu_node} "
                                 f"after {placed['waited_s']} s") in squeezed
        assert "these nodes are simulated (KWOK)" in flat
        assert f"{number(accuracy)} ({number(accuracy * 100, 2)} %)" in flat
        assert "digits-logreg 1.0.0 × digits-test 1.0.0" in flat
        assert "Queue wait (submitted → admitted → placed → started)" in flat
        assert "device_not_visible" in flat
    else:
        assert re.search(r"验收结论未通过——3项失败，0项执行异常；.*启动与模型运行在模拟节点（", squeezed)
        assert re.sub(r"\s", "", f"gpu-h100：按 nvidia.com/gpu=1 请求资源的工作负载在 {placed['waited_s']} 秒后被调度到节点 "
                                 f"{gpu_node}") in squeezed
        assert "这些节点为模拟节点（KWOK）" in squeezed
        assert f"{number(accuracy)}（{number(accuracy * 100, 2)}%）" in squeezed
        assert "排队等待（提交→准入→调度→启动）" in squeezed
    # the queue picture: per pool of the usage ledger (the one place its percentiles are computed), its figures
    html = (tmp_path / f"{kube_bundle.name}-{lang}.html").read_text()
    ledger = evidence["usage"]["queue"]["pools"]
    drawn = dict(re.findall(r'<figure class="chart chart-queue"[^>]*><figcaption class="small">(?:Pool|资源池) '
                            r'([^:：]+)[:：]([^<]*)', html))
    assert set(drawn) == {p for p, e in ledger.items() if "wait_s" in e or "start_s" in e} and drawn
    if lang == "en":
        for pool, e in ledger.items():
            if "wait_s" in e:
                w = e["wait_s"]
                assert (f" {e['workloads']} workload(s); wait {w['count']} measured, p50 {number(w['p50'], 2)} s, "
                        f"p95 {number(w['p95'], 2)} s, max {number(w['max'], 2)} s;") in drawn[pool]
        assert "Queue and placement per pool (wait: submitted → placed; start: placed → started)" in flat
        assert "Pool capacity at discovery (allocatable vs requested by the pods on each node)" in flat
        # the real node's GPUs: 4 advertised by the test device plugin, all healthy
        assert re.search(r'<tr><td>gpu-real</td><td><code class="small">[^<]+</code></td><td>nvidia.com/gpu</td>'
                         r'<td class="num">4</td><td class="num">4</td>', html)
    else:
        assert "各资源池排队与调度（等待：提交→调度完成" in squeezed and "发现阶段的资源池容量" in squeezed
    out = subprocess.run(["pdftotext", str(tmp_path / f"{kube_bundle.name}-{lang}.pdf"), "-"], capture_output=True,
                         text=True, check=True).stdout
    assert out.count("\f") >= 4  # several A4 pages
    assert hetero("verify", str(kube_bundle), "--key", str(kube_bundle.parents[1] / "gate.pub")) == 0
