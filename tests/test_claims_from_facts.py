"""Issue 27, point 4: every "covered / proves / level" comes from recorded facts of the kind the claim needs.

Against the README's run (local backend, the example CPU matrix, signed): the local host places
nothing, so scheduling is ``not_applicable`` and proves nothing; its model runs carry cgroup samples,
which say what was used, not who it is counted to.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import pytest
from readme_run import cli, readme_bundle


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return readme_bundle(tmp_path_factory.mktemp("readme"))


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", page, flags=re.S)))
                    .split())


def test_the_local_cpu_pool_is_not_validated_beyond_what_was_proven(readme_run: tuple[Path, Path]) -> None:
    """Before: ``hetero catalog`` showed example-cpu/cpu-host at level ``business`` (not_applicable
    counted as passed) and 0 untested items, and its VSA said PYTEST_HETERO_BATCH_INFERENCE_BUSINESS."""
    bundle, pub = readme_run
    done = cli("catalog", bundle, "--key", pub, "--json")
    assert done.returncode == 0, done.stderr
    rows = {r["pool"]: r for r in json.loads(done.stdout)}
    cpu = rows["example-cpu/cpu-host"]
    assert (cpu["task_types"], cpu["nodes"], cpu["verification"]) == ({"batch-inference": "discovery"}, [],
                                                                      "verified")
    assert [(e["nodeid"], e["status"]) for e in cpu["untested"]] == [
        ("matrices/example-cpu.matrix.yaml::cpu-host::scheduling", "not_applicable")]
    evidence = json.loads((bundle / "evidence.json").read_text())
    pool = next(p for p in evidence["validation"]["pools"] if p["pool"] == "cpu-host")
    assert pool["task_types"]["batch-inference"]["layers"] == {
        "discovery": "passed", "scheduling": "not_applicable", "startup": "passed", "model": "passed",
        "business": "passed"}
    assert (pool["task_types"]["batch-inference"]["level"], pool["untested"]) == ("discovery", 1)
    vsa = json.loads(base64.b64decode(json.loads((bundle / "validation.intoto.jsonl").read_bytes().splitlines()[0])
                                      ["payload"]))
    assert vsa["predicate"]["resourceUri"] == "hetero-pool:example-cpu/cpu-host"
    assert vsa["predicate"]["verifiedLevels"] == ["PYTEST_HETERO_BATCH_INFERENCE_DISCOVERY"]


def test_usage_attribution_is_not_claimed_from_device_samples(readme_run: tuple[Path, Path], tmp_path: Path) -> None:
    """Before: POC scenario "Usage attributed by project, task and model: covered" from one cgroup sample."""
    bundle, pub = readme_run
    evidence = json.loads((bundle / "evidence.json").read_text())
    sampled = [i for i in evidence["items"] for r in i.get("records") or []
               if r["kind"] == "model.usage" and r["data"].get("available")]
    assert len(sampled) == 1  # the real cgroup sample of the one model run
    for lang, want in (
            ("en", "Usage attributed by project, task and model not covered no attribution probe ran, so "
                   "attribution by project, task and model is not proven (1 model run(s) carry device samples, "
                   "which say what was used, not who it is counted to)"),
            ("zh", "按项目、任务、模型归属用量 未覆盖 未运行用量归属探针，按项目、任务、模型归属用量未得到证明（1 次模型运行带有"
                   "设备采样，它们只说明用了多少，不说明计入谁的账户）")):
        out = tmp_path / f"dossier-{lang}.html"
        done = cli("render", bundle, "--format", "dossier", "--lang", lang, "--key", pub, "--out", out)
        assert done.returncode == 0, done.stderr
        assert want in _text(out.read_text(encoding="utf-8"))
