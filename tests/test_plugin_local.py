"""End to end on the local backend through pytester: real model, real data, real evidence."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import DATA_SHA, DIGITS, REPO, evidence_of, matrix_text, statuses

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

CPU = {"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}}
GPU = {"name": "gpu-nvidia", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1}}
COMBO = "digits-logreg@digits-test"


def _no_nvidia() -> bool:
    from pytest_hetero.probes import probe_host

    return not probe_host("nvidia").devices


def test_example_matrix_end_to_end(pytester: pytest.Pytester) -> None:
    """The README's main job: CPU row passes all provable layers, GPU row fails discovery honestly."""
    if not _no_nvidia():
        pytest.skip("this host has an NVIDIA GPU; the example's failing row assumes none")
    pytester.makefile(".matrix.yaml", example=matrix_text(resources=[CPU, GPU]))
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=4, failed=1, skipped=5)
    assert result.ret == 1
    ev = evidence_of(pytester)
    assert statuses(ev) == {
        "cpu-host::discovery": "passed",
        "cpu-host::scheduling": "not_applicable",
        "cpu-host::py::startup": "passed",
        f"cpu-host::py::{COMBO}::model": "passed",
        f"cpu-host::py::{COMBO}::business": "passed",
        "gpu-nvidia::discovery": "failed",
        "gpu-nvidia::scheduling": "blocked",
        "gpu-nvidia::py::startup": "blocked",
        f"gpu-nvidia::py::{COMBO}::model": "blocked",
        f"gpu-nvidia::py::{COMBO}::business": "blocked",
    }
    items = {i["nodeid"].split("::", 1)[1]: i for i in ev["items"]}
    gpu = items["gpu-nvidia::discovery"]
    assert gpu["failure"]["category"] == "driver_missing"
    assert gpu["failure"]["owner"] == "infrastructure"
    assert gpu["failure"]["message"].startswith("nvidia discovery on this host: ")
    root = "example.matrix.yaml::gpu-nvidia::discovery"
    for layer in ("scheduling", "py::startup", f"py::{COMBO}::model", f"py::{COMBO}::business"):
        blocked = items[f"gpu-nvidia::{layer}"]
        assert blocked["blocked_by"] == root
        assert blocked["reason"].startswith(f"blocked by {root}: nvidia discovery on this host")
    result.stdout.fnmatch_lines([f"*SKIPPED*blocked by {root}: nvidia discovery on this host*"])
    # the model item recorded a real run with its digests and the business rules their verdicts
    model = items[f"cpu-host::py::{COMBO}::model"]
    run = next(r["data"] for r in model["records"] if r["kind"] == "model.run")
    assert run["exit_code"] == 0 and run["timed_out"] is False
    # its rusage starts from the session sandbox's supervisor (a few MiB), not this test process, so the
    # digits model's own peak (ONNX Runtime and numpy loaded: tens of MiB) is measured
    assert 20 < run["peak_rss_mib"] < 1000 and "peak_rss_unmeasured" not in run, run
    assert run["stdout"]["text"].startswith("360 samples, provider CPUExecutionProvider")
    assert [a["name"] for a in model["artifacts"]] == ["stdout.txt", "stderr.txt", "outputs.json"]
    outputs = json.loads((pytester.path / "reports" / ev["run"]["id"] / model["artifacts"][2]["path"]).read_text())
    assert "metrics" not in outputs and "labels" not in outputs and outputs["n"] == 360
    business = items[f"cpu-host::py::{COMBO}::business"]
    rules = next(r["data"] for r in business["records"] if r["kind"] == "business.rules")["results"]
    assert [(r["name"], r["verdict"], r["provenance"]["source"]) for r in rules] == [
        ("accuracy-floor", "pass", "computed"), ("macro-f1-floor", "pass", "computed"),
        ("golden-samples", "pass", "computed"), ("per-sample-time", "pass", "measured"),
        ("mean-confidence", "pass", "self_reported"), ("latency-p95", "pass", "self_reported")]
    # the gate's accuracy is scikit-learn's on the dataset's label column and the model's predictions
    from sklearn.metrics import accuracy_score

    truth = {int(r["index"]): int(r["label"]) for r in csv.DictReader((DIGITS / "data" / "digits-test-1.0.0.csv").open())}
    expected = accuracy_score([truth[i] for i in outputs["ids"]], outputs["predictions"])
    assert rules[0]["observed"] == round(expected, 6) == 0.963889
    assert (rules[0]["provenance"]["truth_sha256"], rules[0]["provenance"]["rows"]) == (DATA_SHA, 360)
    metrics = next(r["data"] for r in business["records"] if r["kind"] == "business.metrics")
    assert metrics["join"] == {"joined": 360, "missing": 0, "duplicate": 0, "extra": 0}
    digests = [r["data"] for r in model["records"] if r["kind"] == "artifact.digest"]
    assert [(d["what"], d["observed"] == d["expected"]) for d in digests] == [("model", True), ("dataset", True)]
    # untested scope and summary
    assert ev["summary"]["verdict"] == "fail"
    assert ev["summary"]["by_layer"]["scheduling"] == {"not_applicable": 1, "blocked": 1}
    untested = {u["nodeid"].split("::", 1)[1]: u for u in ev["untested"]["items"]}
    assert untested["cpu-host::scheduling"]["reason"] == "not applicable: the local backend cannot prove scheduling"
    assert ev["untested"]["never_covered"] == {"t": {"resource": ["gpu-nvidia"],
                                                     "resource_not_proven_end_to_end": ["gpu-nvidia"]}}
    journal = (pytester.path / "reports" / ev["run"]["id"] / "journal.jsonl").read_text().splitlines()
    assert [json.loads(line)["type"] for line in journal].count("item") == 10
    result.stdout.fnmatch_lines(["*pytest-hetero evidence*", "verdict: FAIL*", "  discovery   1 passed, 1 failed"])


def test_business_failure_is_owned_by_business_and_model_still_passes(pytester: pytest.Pytester,
                                                                      tmp_path: Path) -> None:
    strict = tmp_path / "strict.yaml"
    strict.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                      "  - {name: accuracy-floor, metric: accuracy, op: '>=', value: 0.99}\n")
    pytester.makefile(".matrix.yaml", m=matrix_text(acceptance=strict, truth=True))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    ev = evidence_of(pytester)
    business = next(i for i in ev["items"] if i["layer"] == "business")
    assert business["status"] == "failed"
    assert business["failure"] == {"layer": "business", "category": "acceptance_failed", "owner": "business",
                                   "owner_category": "business", "message": "1 of 1 acceptance rules failed: accuracy-floor: expected "
                                              "accuracy >= 0.99, observed 0.963889 [computed]"}
    assert statuses(ev)[f"cpu-host::py::{COMBO}::model"] == "passed"


def test_model_digest_mismatch_fails_the_model_item_and_blocks_its_business(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", m=matrix_text(model_sha="0" * 64))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1, skipped=2)
    ev = evidence_of(pytester)
    model = next(i for i in ev["items"] if i["layer"] == "model")
    assert model["failure"]["category"] == "digest_mismatch"
    assert model["failure"]["owner"] == "algorithm"
    assert model["failure"]["message"] == (
        f"model digits-logreg@1.0.0 sha256 mismatch: matrix declares {'0' * 64}, file "
        f"{REPO}/cases/digits/model/digits-logreg-1.0.0.onnx has d2230a9096140b09d443879ca3b0d7cb0021917896a8f462f79806de1109b523")
    assert "model.run" not in [r["kind"] for r in model["records"]]  # checked before anything runs
    assert statuses(ev)["cpu-host::py::startup"] == "passed"
    assert statuses(ev)[f"cpu-host::py::{COMBO}::business"] == "blocked"


def test_one_wrong_dataset_digest_blocks_only_the_combinations_that_use_it(pytester: pytest.Pytester) -> None:
    """A wrong sha256 on dataset A failed startup for the whole resource x image and blocked the
    models on dataset B too: startup is the platform's claim, and the image started."""
    doc = json.loads(matrix_text())
    good = doc["spec"]["datasets"][0]
    doc["spec"]["datasets"] = [{**good, "name": "digits-a", "sha256": "1" * 64}, {**good, "name": "digits-b"}]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=1, skipped=2)
    ev = evidence_of(pytester)
    assert statuses(ev) == {
        "cpu-host::discovery": "passed", "cpu-host::scheduling": "not_applicable", "cpu-host::py::startup": "passed",
        "cpu-host::py::digits-logreg@digits-a::model": "failed",
        "cpu-host::py::digits-logreg@digits-a::business": "blocked",
        "cpu-host::py::digits-logreg@digits-b::model": "passed",
        "cpu-host::py::digits-logreg@digits-b::business": "passed"}
    failed = next(i for i in ev["items"] if i["status"] == "failed")
    assert (failed["failure"]["category"], failed["failure"]["owner"]) == ("digest_mismatch", "algorithm")
    assert failed["failure"]["message"].startswith(f"dataset digits-a@1.0.0 sha256 mismatch: matrix declares {'1' * 64}")
    startup = next(i for i in ev["items"] if i["layer"] == "startup")
    assert "artifact.digest" not in [r["kind"] for r in startup["records"]]


def test_timeout_and_exclusion_and_incompatible(pytester: pytest.Pytester) -> None:
    text = matrix_text(resources=[CPU, {**GPU, "name": "gpu-b"}], layers={"model": {"timeout": "10ms"}},
                       images=[{"name": "py", "reference": "python:current"},
                               {"name": "cuda", "reference": "python:current", "for": ["gpu"]}],
                       exclude=[{"resource": "gpu-b", "reason": "no GPU hosts in this lab yet"}])
    pytester.makefile(".matrix.yaml", m=text)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1, skipped=2)
    ev = evidence_of(pytester)
    model = next(i for i in ev["items"] if i["layer"] == "model")
    assert model["failure"]["category"] == "timeout"
    assert model["failure"]["message"] == "model run exceeded the 0.01 s timeout"
    st = statuses(ev)
    assert st["gpu-b::discovery"] == "excluded" and st["gpu-b::cuda::startup"] == "excluded"
    assert st["cpu-host::cuda::startup"] == "not_applicable"
    reasons = {u["nodeid"].split("::", 1)[1]: u["reason"] for u in ev["untested"]["items"]}
    assert reasons["gpu-b::discovery"].endswith(": no GPU hosts in this lab yet")


def test_markers_keyword_and_deselection_recorded(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", m=matrix_text(resources=[CPU, GPU]))
    result = pytester.runpytest("-p", "no:cacheprovider", "-m", "discovery and gpu")
    result.assert_outcomes(failed=1)
    ev = evidence_of(pytester)
    deselected = [u for u in ev["untested"]["items"] if u["status"] == "deselected"]
    assert len(deselected) == 9
    assert {u["reason"] for u in deselected} == {"deselected (not selected by -k/-m/--lf in this session)"}


def test_item_whose_dependency_was_not_selected_runs_and_says_so(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", m=matrix_text())
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "startup")
    result.assert_outcomes(passed=1)
    ev = evidence_of(pytester)
    [startup] = ev["items"]
    note = next(r["data"]["message"] for r in startup["records"] if r["kind"] == "gating.note")
    assert note == "dependency m.matrix.yaml::cpu-host::scheduling did not run in this session; this item runs without it"


def test_invalid_matrix_is_a_clear_collection_error_and_other_files_still_collect(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", good=matrix_text())
    pytester.makefile(".matrix.yaml", bad=matrix_text().replace('"requests"', '"requets"'))
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "2 problems in bad.matrix.yaml:",
        "bad.matrix.yaml:17:7: field 'spec.resources[0:cpu-host]': 'requests' is a required property",
        "  hint: add the missing field",
        "bad.matrix.yaml:20:9: field 'spec.resources[0:cpu-host].requets': unknown key 'requets'",
        "  hint: did you mean 'requests'?"])
    assert "Traceback" not in result.stdout.str()
    assert "good.matrix.yaml::cpu-host::discovery" in result.stdout.str()
    assert result.ret == 2
    assert not (pytester.path / "reports").exists()  # --collect-only writes no bundle


def test_collection_error_elsewhere_keeps_the_good_matrix_items_as_not_run(pytester: pytest.Pytester) -> None:
    """pytest stops before running when another file is invalid; the good file's collected items
    are still in the bundle (not_run), not silently missing."""
    pytester.makefile(".matrix.yaml", good=matrix_text())
    pytester.makefile(".matrix.yaml", bad=matrix_text().replace('"requests"', '"requets"'))
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 2
    ev = evidence_of(pytester)
    assert [m["name"] for m in ev["matrices"]] == ["t"]
    assert [e["nodeid"] for e in ev["errors"]] == ["bad.matrix.yaml"]
    assert statuses(ev) == {n: "not_run" for n in (
        "cpu-host::discovery", "cpu-host::scheduling", "cpu-host::py::startup",
        "cpu-host::py::digits-logreg@digits-test::model", "cpu-host::py::digits-logreg@digits-test::business")}
    # a matrix that cannot be loaded fails the gate (the judge's verdict), it does not merely leave it incomplete
    assert (ev["summary"]["verdict"], ev["summary"]["verdict_reason"]) == ("fail", "1 file(s) could not be collected")


def test_unknown_backend_is_named(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", m=matrix_text(backend="slurm"))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*field 'spec.target.backend': unknown backend 'slurm'",
                                 "*hint: use one of local, docker, kubernetes*"])


def test_layer_check_hook_and_failure_owner_hook(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('''
from pytest_hetero.layers.base import LayerFailed

def pytest_hetero_layer_check(ctx):
    if ctx.layer == "startup":
        ctx.record("site.policy", checked="no world-writable model files")
        raise LayerFailed("site policy: image not on the allow-list", "policy")

def pytest_hetero_failure_owner(layer, category, default):
    return "security" if category == "policy" else None
''')
    pytester.makefile(".matrix.yaml", m=matrix_text())
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, skipped=3)
    startup = next(i for i in evidence_of(pytester)["items"] if i["layer"] == "startup")
    assert startup["failure"]["owner"] == "security"
    assert startup["records"][-1]["kind"] == "site.policy"


def test_xdist_gives_the_same_statuses_as_a_serial_run(pytester: pytest.Pytester) -> None:
    pytester.makefile(".matrix.yaml", m=matrix_text(resources=[CPU, GPU]))
    serial = pytester.runpytest("-p", "no:cacheprovider", "--hetero-report-dir", "serial")
    parallel = pytester.runpytest("-p", "no:cacheprovider", "-n", "2", "--hetero-report-dir", "parallel")
    assert serial.ret == parallel.ret == 1

    def load(folder: str) -> dict[str, Any]:
        [bundle] = (pytester.path / folder).iterdir()
        return dict(json.loads((bundle / "evidence.json").read_text()))

    s, p = load("serial"), load("parallel")
    assert statuses(s) == statuses(p)
    assert [(i["nodeid"], i["blocked_by"], (i["failure"] or {}).get("category")) for i in s["items"]] == \
        [(i["nodeid"], i["blocked_by"], (i["failure"] or {}).get("category")) for i in p["items"]]
    assert s["summary"] == p["summary"] and s["untested"]["never_covered"] == p["untested"]["never_covered"]


def test_sensitive_dataset_keeps_digests_and_verdicts_not_content(pytester: pytest.Pytester) -> None:
    doc = json.loads(matrix_text())
    doc["spec"]["datasets"][0]["sensitive"] = True
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, skipped=1)
    ev = evidence_of(pytester)
    items = {i["layer"]: i for i in ev["items"]}
    outputs = next(r["data"] for r in items["model"]["records"] if r["kind"] == "model.outputs")
    assert outputs["artifact"] is None and len(outputs["sha256"]) == 64 and outputs["bytes"] > 1000
    run = next(r["data"] for r in items["model"]["records"] if r["kind"] == "model.run")
    assert run["stdout"]["text"] == "[withheld: sensitive dataset]" and run["stdout"]["bytes"] > 0
    assert items["model"]["artifacts"] == []
    rules = next(r["data"] for r in items["business"]["records"] if r["kind"] == "business.rules")
    assert rules["sensitive"] is True
    assert (rules["results"][0]["name"], rules["results"][0]["verdict"]) == ("accuracy-floor", "pass")
    bundle = pytester.path / "reports" / ev["run"]["id"]
    assert not list(bundle.rglob("outputs.json")) and not list(bundle.rglob("stdout.txt"))
    assert "predictions" not in (bundle / "evidence.json").read_text()


def test_a_model_item_whose_business_item_is_deselected_hands_nothing_on(pytester: pytest.Pytester) -> None:
    """Issue 32 (memory flat in items): with the business items deselected (``-k "not business"``, as the scale
    benches run), nothing would take back a model item's handoff (the run-time values, the wall time, a sensitive
    dataset's outputs), which stayed in memory to the end of the run: ~1.4 KB per model run. The model item records
    the same; with its business item selected the handoff is taken back, and nothing is left either way."""
    doc = json.loads(matrix_text())
    doc["spec"]["datasets"][0]["sensitive"] = True
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    pytester.makeconftest('''
import pytest
from pytest_hetero.pytest_plugin.stash import HANDOFF

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    print("HANDOFF", sorted(session.config.stash.get(HANDOFF, {})))
''')
    for selected, outcomes in (("not business", {"passed": 3, "skipped": 1}), ("", {"passed": 4, "skipped": 1})):
        result = pytester.runpytest("-p", "no:cacheprovider", "-s", "-k", selected)
        result.assert_outcomes(**outcomes)
        assert [line.split("HANDOFF ", 1)[1] for line in result.outlines if "HANDOFF " in line] == ["[]"]
        items = {i["layer"]: i for i in evidence_of(pytester)["items"]}
        kinds = {r["kind"] for r in items["model"]["records"]}
        assert {"model.outputs", "model.run_time"} <= kinds
        shutil.rmtree(pytester.path / "reports")


def test_full_profile_repeats_model_runs_and_judges_every_business_sample(pytester: pytest.Pytester) -> None:
    doc = json.loads(matrix_text())
    doc["spec"]["profiles"] = {"full": {"layers": ["discovery", "scheduling", "startup", "model", "business"],
                                        "repeat": 3}}
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider", "--hetero-profile", "full")
    result.assert_outcomes(passed=4, skipped=1)
    ev = evidence_of(pytester)
    items = {i["layer"]: i for i in ev["items"]}
    assert [r["data"] for r in items["model"]["records"] if r["kind"] == "model.repeat"] == [
        {"run": 1, "of": 3}, {"run": 2, "of": 3}, {"run": 3, "of": 3}]
    assert [a["name"] for a in items["model"]["artifacts"]] == [
        "stdout-r1.txt", "stderr-r1.txt", "outputs-r1.json", "stdout-r2.txt", "stderr-r2.txt", "outputs-r2.json",
        "stdout-r3.txt", "stderr-r3.txt", "outputs-r3.json"]
    judged = [r["data"] for r in items["business"]["records"] if r["kind"] == "business.rules"]
    assert [j["run"] for j in judged] == [1, 2, 3]
    assert all(r["verdict"] == "pass" for j in judged for r in j["results"])


def test_two_matrices_with_the_same_names_keep_their_own_artifacts(pytester: pytest.Pytester) -> None:
    """prod and staging matrices naming the same resource, image and model: each item's artifacts
    stay its own (they were written to one folder, the second run overwriting the first's, so the
    first's recorded sha256 no longer matched the file in the bundle)."""
    import hashlib

    pytester.makefile(".matrix.yaml", prod=matrix_text(name="prod"))
    staging = json.loads(matrix_text(name="staging"))
    staging["spec"]["models"][0]["entrypoint"] = [
        "{python}", "-c", ("import json, sys; json.dump({{'n': 1, 'ids': [0], 'predictions': [7], "
        "'metrics': {{'accuracy': 0.0}}}}, open(sys.argv[1], 'w'))"), "{outputs}"]
    pytester.makefile(".matrix.yaml", staging=json.dumps(staging))
    pytester.runpytest("prod.matrix.yaml", "staging.matrix.yaml", "-p", "no:cacheprovider")
    ev = evidence_of(pytester)
    bundle = next((pytester.path / "reports").iterdir())
    business = {i["matrix"]: i["status"] for i in ev["items"] if i["layer"] == "business"}
    assert business == {"prod.matrix.yaml": "passed", "staging.matrix.yaml": "failed"}
    outputs = {}
    for item in ev["items"]:
        for art in item["artifacts"]:
            assert hashlib.sha256((bundle / art["path"]).read_bytes()).hexdigest() == art["sha256"], art["path"]
            if art["name"] == "outputs.json":
                outputs[item["matrix"]] = art["path"]
    assert outputs == {m: f"artifacts/{m}/cpu-host/py/{COMBO}/model/outputs.json"
                       for m in ("prod.matrix.yaml", "staging.matrix.yaml")}


def test_two_matrices_with_one_name_stop_before_anything_runs(pytester: pytest.Pytester) -> None:
    """Two files, one metadata.name: the bundle keys matrix copies and never-covered values by name, so
    the second would overwrite the first's signed copy; the run refuses (exit 4) before running."""
    pytester.makefile(".matrix.yaml", a=matrix_text(name="gate"))
    pytester.makefile(".matrix.yaml", b=matrix_text(name="gate", layers={"model": {"timeout": "1m"}}))
    result = pytester.runpytest("a.matrix.yaml", "b.matrix.yaml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([("ERROR: pytest-hetero: matrix name 'gate' is used by a.matrix.yaml and b.matrix.yaml; "
                                 "the bundle keys matrices by metadata.name*give each matrix of one run its own name*")])
    result.assert_outcomes()


def _rules_file(tmp_path: Path, rule: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(f"apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n  - {rule}\n")
    return path


@pytest.mark.parametrize(("rule", "truth", "category", "owner", "hint"), [
    ("{name: f1-floor, metric: f1_macro, op: '>=', value: 0.9}", False, "no_truth", "risk-business",
     "rule f1-floor: the gate has no value for metric 'f1_macro': dataset 'digits-test' declares no truth "
     "(spec.datasets[].truth): the gate cannot compute it, and does not take the model's own numbers for it"),
    ("{name: conf, metric: max(top_probabilty), op: '>=', value: 0.9, self_reported: true}", True, "rules_error",
     "risk-business", "rule conf: outputs field 'top_probabilty' is absent (did you mean 'top_probability'?)"),
    ("{name: conf, metric: max(confidence), op: '>=', value: 0.9, self_reported: true}", True,
     "outputs_missing_metric", "algorithm", "rule conf: outputs field 'confidence' is absent"),
])
def test_a_rule_that_cannot_be_evaluated_is_not_a_business_failure(pytester: pytest.Pytester, tmp_path: Path,
                                                                   rule: str, truth: bool, category: str, owner: str,
                                                                   hint: str) -> None:
    """A rule whose metric is absent failed as `acceptance_failed` owned by business: the model's
    outputs or the rules are at fault, and the evidence names what the outputs offered. A gate metric on a
    dataset without truth is not taken from the outputs (issue 30): `no_truth`, the dataset's owner's."""
    pytester.makefile(".matrix.yaml", m=matrix_text(acceptance=_rules_file(tmp_path, rule), truth=truth,
                                                    extra_spec={"owners": {"business": "risk-business"}}))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    business = next(i for i in evidence_of(pytester)["items"] if i["layer"] == "business")
    assert business["status"] == "error"
    assert (business["failure"]["category"], business["failure"]["owner"]) == (category, owner)
    assert business["failure"]["message"] == (
        f"1 acceptance rule(s) could not be evaluated: {hint} (available metrics: none; numeric list fields: "
        "ids, latency_ms, predictions, top_probability)")
    [judged] = next(r["data"] for r in business["records"] if r["kind"] == "business.rules")["results"]
    assert judged["verdict"] == "not_evaluable"


def test_outputs_that_are_not_json_are_kept_for_their_owner(pytester: pytest.Pytester) -> None:
    doc = json.loads(matrix_text())
    doc["spec"]["models"][0]["entrypoint"] = [
        "{python}", "-c", "import sys; open(sys.argv[1], 'w').write('accuracy=0.97\\n' * 100000)", "{outputs}"]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1, skipped=2)
    ev = evidence_of(pytester)
    model = next(i for i in ev["items"] if i["layer"] == "model")
    folder = f"artifacts/cpu-host/py/{COMBO}/model"
    assert model["failure"]["category"] == "bad_outputs" and model["failure"]["owner"] == "algorithm"
    assert model["failure"]["message"].startswith("outputs file is not JSON: ")
    assert model["failure"]["message"].endswith(f" (kept as {folder}/outputs-unusable.txt)")
    kept = next(r["data"] for r in model["records"] if r["kind"] == "model.outputs_unusable")
    assert (kept["bytes"], kept["kept_bytes"], kept["truncated"]) == (1_400_000, 1024 * 1024, True)
    text = (pytester.path / "reports" / ev["run"]["id"] / folder / "outputs-unusable.txt").read_text()
    assert text.startswith("accuracy=0.97\n") and len(text) == 1024 * 1024


def _bare_venv(path: Path) -> Path:
    """A virtual environment without the system's packages: no ONNX Runtime, no numpy."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    return path


PURE_MODEL = ("import json, sys; json.dump({{'n': 1, 'indices': [0], 'labels': [0], 'predictions': [0], "
              "'metrics': {{'accuracy': 1.0}}}}, open(sys.argv[1], 'w'))")


@pytest.mark.parametrize("runtime", [None, "pure-python"])
def test_an_environment_without_onnx_runtime_starts_when_no_model_declares_it(
        pytester: pytest.Pytester, tmp_path: Path, runtime: str | None) -> None:
    """A numpy-only environment failed startup with framework_missing: ONNX Runtime not importable,
    whatever the matrix's runtime said."""
    venv = _bare_venv(tmp_path / "bare")
    doc = json.loads(matrix_text(images=[{"name": "bare", "reference": f"venv:{venv}"}], acceptance=_rules_file(
        tmp_path, "{name: acc, metric: accuracy, op: '>=', value: 0.9, self_reported: true}")))
    model = doc["spec"]["models"][0]
    model.pop("runtime")
    if runtime:
        model["runtime"] = runtime
    model["entrypoint"] = ["{python}", "-c", PURE_MODEL, "{outputs}"]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, skipped=1)
    startup = next(i for i in evidence_of(pytester)["items"] if i["layer"] == "startup")
    init = next(r["data"] for r in startup["records"] if r["kind"] == "startup.device_init")
    assert (init["framework"], init["providers"], init["ok"]) == (None, None, True)


def test_a_model_that_declares_onnx_runtime_needs_it_in_the_environment(pytester: pytest.Pytester,
                                                                         tmp_path: Path) -> None:
    venv = _bare_venv(tmp_path / "bare")
    pytester.makefile(".matrix.yaml", m=matrix_text(images=[{"name": "bare", "reference": f"venv:{venv}"}]))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, skipped=3)
    startup = next(i for i in evidence_of(pytester)["items"] if i["layer"] == "startup")
    assert (startup["failure"]["category"], startup["failure"]["owner"]) == ("framework_missing", "algorithm")
    assert startup["failure"]["message"].startswith(f"ONNX Runtime not importable in {venv}/bin/python: "
                                                    "ModuleNotFoundError: No module named 'onnxruntime'")
    assert startup["failure"]["message"].endswith("(models with runtime: onnxruntime: digits-logreg)")


def test_terminal_shows_observed_values_with_units_and_where_the_report_is(pytester: pytest.Pytester,
                                                                           tmp_path: Path) -> None:
    """The terminal printed neither report.html's path nor observed business values; latency values had
    no unit; never-covered read `resource_without_business_pass`."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: accuracy-floor, metric: accuracy, op: '>=', value: 0.95}\n"
                     "  - {name: latency-p95, latency: {percentile: 95, max_ms: 0.000001}, self_reported: true}\n"
                     "  - {name: mean-latency, metric: mean(latency_ms), op: '<=', value: 1000, self_reported: true}\n")
    huge = {"name": "cpu-huge", "type": "cpu", "requests": {"cpu": 1}, "expect": {"min_cpus": 100000}}
    pytester.makefile(".matrix.yaml", m=matrix_text(resources=[CPU, huge], acceptance=rules, truth=True))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=2, skipped=5)
    ev = evidence_of(pytester)
    business = next(i for i in ev["items"] if i["layer"] == "business")
    results = {r["name"]: r for r in business["records"][-1]["data"]["results"]}
    assert (results["latency-p95"]["unit"], results["mean-latency"]["unit"]) == ("ms", "ms")
    assert "unit" not in results["accuracy-floor"]
    p95 = results["latency-p95"]["observed"]
    assert business["failure"]["message"] == (f"1 of 3 acceptance rules failed: latency-p95: expected p95 ≤ 1e-06 ms, "
                                              f"observed {p95} ms (self-reported, not verified)")
    bundle = pytester.path / "reports" / ev["run"]["id"]
    result.stdout.fnmatch_lines([
        "observed business values:",
        f"  m.matrix.yaml::cpu-host::py::{COMBO}::business: accuracy-floor 0.963889 computed (pass), "
        "latency-p95 * ms self-reported, not verified (fail), mean-latency * ms self-reported, not verified (pass)",
        "*resources never proven end to end (no business item passed) in t: cpu-host, cpu-huge",
        f"report: {bundle}/report.html"])
    assert "resource_without_business_pass" not in result.stdout.str()


def test_a_failed_items_context_is_not_held_to_the_end_of_the_session(pytester: pytest.Pytester,
                                                                      tmp_path: Path) -> None:
    """A plugin keeping the failed call's exception (pytest-rerunfailures keeps every one until the session
    ends) keeps no layer context through it: the gate clears the failure's frames once the item's protocol
    is over (the report, logged before, still says why it failed)."""
    strict = tmp_path / "strict.yaml"
    strict.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                      "  - {name: accuracy-floor, metric: accuracy, op: '>=', value: 0.99}\n")
    pytester.makefile(".matrix.yaml", m=matrix_text(acceptance=strict, truth=True))
    pytester.makeconftest(
        "import gc\n"
        "import pytest\n"
        "from pytest_hetero.layers.base import LayerContext\n"
        "KEPT = []\n"
        "@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n"
        "    if call.excinfo is not None and outcome.get_result().failed:\n"
        "        KEPT.append(call.excinfo)  # as pytest-rerunfailures keeps it\n"
        "def pytest_sessionfinish(session):\n"
        "    gc.collect()\n"
        "    alive = sum(isinstance(o, LayerContext) for o in gc.get_objects())\n"
        "    print(f'KEPT {len(KEPT)} CONTEXTS {alive}')\n")
    # a process of its own: an inline run's objects may be held by the calling session
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*KEPT 1 CONTEXTS 0*", "*acceptance_failed*accuracy-floor*"])


@pytest.mark.parametrize("answer", ['{"python": "3.11.7"}', '{"python": "3.11.7", "executable": "/x", '
                                    '"distributions": "12", "distributions_sha256": "ab"}', '[1]'])
def test_an_interpreter_answering_an_environment_of_another_shape_fails_startup_cleanly(
        pytester: pytest.Pytester, tmp_path: Path, answer: str) -> None:
    """The image's interpreter answers the environment question as JSON: an answer without
    ``distributions_sha256`` raised KeyError in the engine (a traceback as the item's failure, owned by nobody's
    table row); now startup fails ``start_failed`` naming the field, like an answer that is not JSON."""
    venv = tmp_path / "odd"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "python"
    fake.write_text(f"#!/bin/sh\necho '{answer}'\n")
    fake.chmod(0o755)
    pytester.makefile(".matrix.yaml", m=matrix_text(images=[{"name": "odd", "reference": f"venv:{venv}"}]))
    pytester.runpytest("-p", "no:cacheprovider")
    startup = next(i for i in evidence_of(pytester)["items"] if i["layer"] == "startup")
    assert startup["status"] == "failed" and startup["failure"]["category"] == "start_failed", startup["failure"]
    message = startup["failure"]["message"]
    assert message.startswith(f"interpreter {fake} answered an environment of another shape (answer"), message
    assert "Traceback" not in message and "KeyError" not in message
