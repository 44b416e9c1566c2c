"""The acceptance dossier of real runs, printed by headless Chromium (A4) and read back with pdftotext, in
English and Chinese: a passing CPU run on the local backend, a failing run (GPU row without a driver, golden
samples and latency missed), and a signed run compared with its accepted baseline and signed off by teams.
Screenshots are kept under each test's tmp folder and their paths printed. (The Kubernetes run:
tests/kubernetes/test_kube_dossier.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bundle_samples import policy_text
from support import DIGITS, REPO, matrix_text
from test_bundle_verify import hetero
from test_report_html import chromium  # noqa: F401 - the fixture (installs Chromium, pdftotext, a CJK font)

from pytest_hetero.bundle.signing import generate_keypair
from pytest_hetero.reporting.dossier_facts import number

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

CPU = {"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}
GPU = {"name": "gpu-nvidia", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1},
       "expect": {"devices": 1}}
STRICT = """apiVersion: pytest-hetero/v1
kind: AcceptanceRules
metadata: {name: strict}
rules:
  - {name: accuracy-floor, metric: accuracy, op: ">=", value: 0.95}
  - name: golden-samples
    golden: {field: predictions, key: ids, samples: [{index: 0, expected: 0}, {index: 70, expected: 7},
                                                        {index: 50, expected: 9}]}
  - {name: latency-p95, latency: {field: latency_ms, percentile: 95, max_ms: 0.0001}, self_reported: true}
"""


def run_gate(folder: Path, name: str, matrix: str, *args: str) -> Path:
    """Run ``matrix`` with pytest in a fresh interpreter under ``folder``; return its bundle. The matrix names the
    repository's cases/ and rules beside ``folder`` by absolute path: the run allows those two folders (it runs
    in a module-scoped fixture, before any test's ``outside_inputs``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "t.matrix.yaml").write_text(matrix)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "HETERO_ALLOW_PATHS": os.pathsep.join((str(REPO / "cases"), str(folder.parent)))}
    done = subprocess.run([sys.executable, "-m", "pytest", "t.matrix.yaml", "-p", "no:cacheprovider",
                           "--hetero-report-dir", str(folder / "reports"), "--rootdir", str(folder), *args],
                          cwd=folder, capture_output=True, text=True, timeout=600, env=env, check=False)
    bundles = sorted((folder / "reports").iterdir())
    assert bundles, done.stdout[-2000:] + done.stderr[-2000:]
    return Path(bundles[-1].rename(folder / name))


def with_version(text: str, version: str) -> str:
    doc = json.loads(text)
    doc["spec"]["models"][0]["version"] = version
    return json.dumps(doc, indent=2)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example bundles, each from a real run: ``cpu`` (passes), ``failing``, ``baseline`` and ``signed``
    (model 1.1.0 against the accepted 1.0.0 run, signed off by the business and algorithm teams)."""
    root = tmp_path_factory.mktemp("dossier-runs")
    generate_keypair(root / "gate.key", root / "gate.pub")
    for team in ("business", "algorithm"):
        generate_keypair(root / f"{team}.key", root / f"{team}.pub")
    sign = ("--hetero-sign-key", str(root / "gate.key"))
    (root / "strict.yaml").write_text(STRICT)
    out = {"cpu": run_gate(root / "cpu", "cpu", matrix_text(resources=[CPU]), *sign),
           "failing": run_gate(root / "failing", "failing", matrix_text(resources=[CPU, GPU],
                                                                        acceptance=root / "strict.yaml",
                                                                        truth=True), *sign)}
    out["baseline"] = run_gate(root / "rel", "baseline", matrix_text(resources=[CPU]), *sign)
    out["signed"] = run_gate(root / "rel", "signed", with_version(matrix_text(resources=[CPU]), "1.1.0"), *sign,
                             "--hetero-baseline", str(out["baseline"]))
    for team in ("business", "algorithm"):
        assert hetero("sign", str(out["signed"]), "--key", str(root / f"{team}.key"), "--role", team,
                      "--decision", "accept") == 0
    (root / "trust.yaml").write_text(policy_text({"business": [(root / "business.pub", ["Bea Business"])],
                                                  "algorithm": [(root / "algorithm.pub", ["Al Gorithm"])]}))
    assert hetero("sign-policy", str(root / "trust.yaml"), "--key", str(root / "gate.key")) == 0
    return out


def gate_key(bundles: dict[str, Path]) -> tuple[str, ...]:
    """``hetero render`` options that verify the run with the gate's key (a dossier of an unverified bundle says
    NOT VERIFIED instead of its verdict)."""
    return "--key", str(bundles["signed"].parent.parent / "gate.pub")


def trust(bundles: dict[str, Path]) -> tuple[str, ...]:
    """``hetero render`` options that verify the run and check its sign-offs against the gate-signed policy."""
    root = bundles["signed"].parent.parent
    return "--key", str(root / "gate.pub"), "--policy", str(root / "trust.yaml")


def print_dossier(bundle: Path, lang: str, browser: str, folder: Path, capsys: pytest.CaptureFixture[str],
                  *extra: str) -> tuple[str, str]:
    """Render the dossier to HTML and PDF, take a screenshot; return (PDF text with whitespace runs as one
    space, PDF text without any whitespace: Chinese wraps anywhere)."""
    html, pdf, shot = folder / f"{bundle.name}-{lang}.html", folder / f"{bundle.name}-{lang}.pdf", \
        folder / f"{bundle.name}-{lang}.png"
    assert hetero("render", str(bundle), "--format", "dossier", "--lang", lang, "--out", str(html), *extra) == 0
    assert hetero("render", str(bundle), "--format", "dossier", "--lang", lang, "--pdf", "--out", str(pdf),
                  *extra) == 0
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"Page size:\s+59[45]\.\d+ x 841\.\d+ pts \(A4\)", info), info
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={folder / 'profile'}", "--hide-scrollbars", "--window-size=1240,1754",
                           f"--screenshot={shot}", html.resolve().as_uri()], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0 and shot.read_bytes().startswith(b"\x89PNG"), done.stderr[-500:]
    with capsys.disabled():
        print(f"\ndossier screenshot: {shot}\ndossier PDF: {pdf}")
    # reading order (paragraphs wrapped over lines) and layout order (table rows on one line), both searched
    text = "\n|||\n".join(subprocess.run(["pdftotext", *mode, str(pdf), "-"], capture_output=True, text=True,
                                          check=True).stdout for mode in ([], ["-layout"]))
    return re.sub(r"\s+", " ", text), re.sub(r"\s+", "", text)


def rules_of(bundle: Path) -> dict[str, dict[str, Any]]:
    evidence = json.loads((bundle / "evidence.json").read_text())
    biz = next(i for i in evidence["items"] if i["layer"] == "business" and "cpu-host" in i["nodeid"])
    return {r["name"]: r for r in next(rec["data"]["results"] for rec in biz["records"] if "results" in rec["data"])}


def dense(text: str) -> str:
    return re.sub(r"\s+", "", text)


def sampled(bundle: Path) -> list[tuple[str, int]]:
    """Per sampled device of each model run, (memory|util, number of points read), in evidence order."""
    evidence = json.loads((bundle / "evidence.json").read_text())
    out = []
    for item in evidence["items"]:
        for rec in item["records"]:
            if rec["kind"] == "model.usage" and rec["data"]["available"]:
                for dev in rec["data"]["devices"]:
                    for kind, key in (("memory", "memory_used_mib"), ("util", "utilisation_pct")):
                        n = sum(v is not None for v in dev["series"][key])
                        if n >= 2:
                            out.append((kind, n))
    return out


def charted(html: str) -> list[tuple[str, int]]:
    """The dossier's usage charts as (kind, points drawn): the figure's count and its polylines' vertices agree."""
    out = []
    for kind, points, body in re.findall(r'<figure class="chart chart-(memory|util)" data-points="(\d+)">(.*?)</figure>',
                                         html, re.S):
        drawn = sum(len(p.split()) for p in re.findall(r'<polyline class="series" points="([^"]*)"', body))
        assert drawn == int(points), body
        out.append((kind, int(points)))
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_dossier_of_a_passing_cpu_run(bundles: dict[str, Path], chromium: str, lang: str,  # noqa: F811
                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flat, squeezed = print_dossier(bundles["cpu"], lang, chromium, tmp_path, capsys, *gate_key(bundles))
    rules = rules_of(bundles["cpu"])
    accuracy, latency = rules["accuracy-floor"]["observed"], rules["latency-p95"]["observed"]
    if lang == "en":
        assert "Verdict passed — scheduling not proven on this backend (local)" in flat
        assert "What this run proves" in flat and "What this run does not prove" in flat
        assert f"{number(accuracy)} ({number(accuracy * 100, 2)} %)" in flat
        assert f"{number(latency)} ms" in flat and "p95 ≤ 20 ms" in flat
        assert "digits-logreg 1.0.0 × digits-test 1.0.0" in flat
        assert "Scheduling: the local backend places nothing" in flat
        assert "cgroup" in flat and "MiB" in flat  # run-time usage sampled during the model run
    # the pictures draw exactly the points the evidence holds (a value no sample read is a gap, never 0); a run
    # so short that a series has fewer than two read points has no picture of it, and says nothing of one
    html = (tmp_path / f"cpu-{lang}.html").read_text()
    assert charted(html) == sampled(bundles["cpu"])
    kinds = {kind for kind, _ in sampled(bundles["cpu"])}
    captions = {"memory": ("Memory used over the run:", "运行期间内存占用："),
                "util": ("Utilisation over the run:", "运行期间利用率：")}
    for kind, (en, zh) in captions.items():
        assert ((en in flat) if lang == "en" else (dense(zh) in squeezed)) == (kind in kinds)
    if lang == "zh":
        assert dense("验收结论 通过——调度未在此后端（local）上得到证明") in squeezed
        assert "本次运行可证明" in squeezed and "本次运行不能证明" in squeezed
        assert dense(f"{number(accuracy)}（{number(accuracy * 100, 2)}%）") in squeezed
        assert dense(f"{number(latency)} 毫秒") in squeezed
        assert dense("digits-logreg 1.0.0 × digits-test 1.0.0") in squeezed
        assert dense("调度：local 后端不进行任何调度") in squeezed


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_dossier_of_a_failing_run(bundles: dict[str, Path], chromium: str, lang: str,  # noqa: F811
                                  tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flat, squeezed = print_dossier(bundles["failing"], lang, chromium, tmp_path, capsys, *gate_key(bundles))
    rules = rules_of(bundles["failing"])
    assert rules["golden-samples"]["failing"] == [70, 50]
    latency = rules["latency-p95"]["observed"]
    if lang == "en":
        assert re.search(r"Verdict failed — 2 item\(s\) failed, 0 errored; scheduling not proven on this backend "
                         r"\(local\)", flat), flat[:600]
        # the provenance may wrap inside its table cell: compared without white space
        assert dense("golden-samples 3 golden samples match 1/3 match · computed fail 70, 50") in squeezed
        # the rule's row up to its observed value (the provenance label's layout in the PDF's text layer varies)
        assert dense(f"latency-p95 p95 ≤ 0.0001 ms {number(latency)} ms") in squeezed
        assert "blocked by gpu-nvidia::discovery" in flat and "fix the root failure (driver_missing)" in flat
    else:
        assert dense("验收结论 未通过——2 项失败，0 项执行异常；调度未在此后端（local）上得到证明") in squeezed
        assert dense("golden-samples 3 golden samples match 1/3 match · 门禁计算 未通过 70, 50") in squeezed
        assert dense(f"{number(latency)} 毫秒 · 模型自报，未经验证 未通过") in squeezed
        assert dense("被 gpu-nvidia::discovery 阻断 4") in squeezed and dense("基础设施团队 修复根因失败") in squeezed


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_dossier_of_a_signed_run_against_its_baseline(bundles: dict[str, Path], chromium: str,  # noqa: F811
                                                      lang: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    flat, squeezed = print_dossier(bundles["signed"], lang, chromium, tmp_path, capsys, *trust(bundles))
    baseline = json.loads((bundles["baseline"] / "evidence.json").read_text())["run"]["id"]
    if lang == "en":
        assert "Verdict passed — scheduling not proven on this backend (local)" in flat
        assert f"Baseline run {baseline} (signature verified)." in flat
        assert "model digits-logreg: 1.0.0 → 1.1.0" in flat
        assert "digits-logreg 1.1.0 × digits-test 1.0.0" in flat
        assert re.search(r"Role business State accepted Signed by Bea Business", flat), flat
        assert "Sign-off pending: infrastructure (discovery)" in flat
    else:
        assert dense(f"基线运行 {baseline}（签名已验证）。") in squeezed
        assert dense("模型 digits-logreg：1.0.0 → 1.1.0") in squeezed
        assert dense("digits-logreg 1.1.0 × digits-test 1.0.0") in squeezed
        assert re.search(r"角色业务团队状态接受签核人BeaBusiness", squeezed), squeezed
        assert dense("待签核：基础设施团队（资源发现）") in squeezed
    assert DIGITS.is_dir()
