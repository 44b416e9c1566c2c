"""The OpenAI-compatible chat protocol, streamed, against a real server: tinyq4 serving a tiny
deterministic llama-architecture model (tests/serving/tiny_gguf.py), on the CPU, on loopback.
Time to first byte is measured on the server-sent events."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support import evidence_of, statuses

from serving.helpers import items_of, records, serving_matrix

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

PROMPTS = ["hello world", "the cat sat on the mat", "a dog ran fast", "hello world", "yes or no", "ok"]


def _dataset(tmp_path: Path) -> dict[str, object]:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"index": i, "input": t}) + "\n" for i, t in enumerate(PROMPTS)))
    rules = tmp_path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: no-errors, error_rate: {max: 0}}\n"
                     "  - {name: p95, service_latency: {percentile: 95, max_ms: 10000}}\n"
                     "  - {name: some-throughput, throughput: {min_rps: 0.1}}\n")
    return {"name": "prompts", "version": "1", "uri": str(path), "acceptance": str(rules),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def test_streamed_chat_service(pytester: pytest.Pytester, tinyq4_url: str, tmp_path: Path) -> None:
    serving = {"protocol": "openai", "task": "chat", "endpoint": tinyq4_url, "model_name": "tiny",
               "options": {"stream": True, "max_tokens": 6},
               "load": {"concurrency": [1, 2], "requests": 6, "request_timeout": "30s"}}
    pytester.makefile(".matrix.yaml", s=serving_matrix(serving, version="0.1.0", dataset=_dataset(tmp_path)))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, skipped=1)
    ev = evidence_of(pytester)
    combo = "cpu-host::py::digits-service@prompts"
    assert statuses(ev) == {"cpu-host::discovery": "passed", "cpu-host::scheduling": "not_applicable",
                            "cpu-host::py::startup": "passed", f"{combo}::model": "passed",
                            f"{combo}::business": "passed"}
    items = items_of(ev)
    (ident,) = records(items["cpu-host::py::startup"], "serving.identity")
    assert (ident["found"], ident["metadata"]["model_ids"], ident["probe_status"]) == (True, ["tiny"], 200)
    levels = records(items[f"{combo}::model"], "serving.load")
    assert [(lv["concurrency"], lv["requests"], lv["ok"], lv["status_counts"]) for lv in levels] == [
        (1, 6, 6, {"200": 6}), (2, 6, 6, {"200": 6})]
    for lv in levels:
        assert 0 < lv["ttfb_ms"]["p50"] <= lv["latency_ms"]["max"]
    (rules,) = records(items[f"{combo}::business"], "business.rules")
    assert {r["name"]: r["verdict"] for r in rules["results"]} == {
        "no-errors": "pass", "p95": "pass", "some-throughput": "pass"}
    (art,) = [a for a in items[f"{combo}::model"]["artifacts"] if a["name"] == "outputs.json"]
    (bundle,) = (pytester.path / "reports").iterdir()
    answers = json.loads((bundle / art["path"]).read_text())["predictions"]
    assert all(isinstance(a, str) and a for a in answers)
    assert answers[0] == answers[3]  # same prompt, temperature 0: the same answer
    raw = (bundle / art["path"]).with_name("responses-c1.jsonl").read_text().splitlines()
    assert json.loads(raw[0])["body"].startswith("data: {")
