"""What the gate's own writers really write fits the shape its record kind declares
(pytest_hetero/evidence/records.py): the gate checks every item's evidence against those shapes before it keeps it
(pytest_plugin.item.finish, evidence.document.check_item), so a declaration narrower than a writer's data turns a
genuine run's verdict into a harness error and loses the item's evidence."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from readme_run import copy_project, gate, readme_bundle
from test_bundle_verify import hetero

from pytest_hetero.bundle.verify import load_evidence
from pytest_hetero.errors import BundleError, CaseError
from pytest_hetero.evidence import records
from pytest_hetero.evidence.document import check_item
from pytest_hetero.evidence.journal import finite
from pytest_hetero.evidence.model import ItemEvidence
from pytest_hetero.evidence.shapes import check_json
from pytest_hetero.layers.base import LayerFailed
from pytest_hetero.layers.training import _result
from pytest_hetero.matrix.acceptance import evaluate, load_rules
from pytest_hetero.probes import inworkload

_README: dict[str, tuple[Path, Path]] = {}


def _readme_bundle(tmp_path: Path) -> tuple[Path, Path]:
    """The README run's bundle, made once per test process (the tests copy it before they edit it)."""
    if "bundle" not in _README:
        _README["bundle"] = readme_bundle(tmp_path / "project")
    return _README["bundle"]


def _rules(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n" + body)
    return path


def test_a_failing_golden_rule_keyed_by_text_ids_is_a_business_rules_record(tmp_path: Path) -> None:
    """A golden rule's ``failing`` lists the failing samples' indices as the rules file wrote them: the values of
    the outputs' key field, text ids as well as numbers (``_positions`` matches either)."""
    rules = load_rules(_rules(tmp_path, "  - name: g\n    golden: {key: ids, samples: [{index: a7, expected: 7}, "
                                        "{index: b2, expected: 2}]}\n"))
    results = evaluate(rules, {"ids": ["a7", "b2"], "predictions": [7, 3]})
    assert results[0]["verdict"] == "fail" and results[0].get("failing") == ["b2"]
    evidence = ItemEvidence(nodeid="m::r::i::mod@ds::business", matrix="m", layer="business",
                            keys={"resource": "r"}, owner="business", status="failed")
    evidence.record("business.rules", file="rules.yaml", outputs_of="", sensitive=False, results=results, run=None)
    check_item(evidence.to_dict(), "evidence")  # DocumentError: ...failing[0]: is a string, not a number


def test_the_readme_run_with_a_quoted_golden_index_fails_its_business_item_as_acceptance_failed(
        tmp_path: Path) -> None:
    """The README's run, its golden rule holding one wrong answer and one index written as text (``"seventy"``:
    absent from the outputs' integer ids): the business item fails as ``acceptance_failed`` with its rules recorded,
    and the bundle loads. Before, the gate refused its own record (``failing[1]: is a string, not a number``): the
    item was reported as ``pytest_outcome`` (platform), its evidence lost."""
    project = copy_project(tmp_path / "project")
    path = project / "cases" / "digits" / "acceptance.yaml"
    path.write_text(path.read_text().replace("- {index: 0, expected: 0}",
                                             '- {index: 0, expected: 3}\n        - {index: "seventy", expected: 1}'))
    done = gate(project, "-k", "cpu-host")
    (bundle,) = (project / "reports").iterdir()
    doc, _ = load_evidence(bundle, allow_unsigned=True)
    [business] = [i for i in doc["items"] if i["layer"] == "business"]
    failure = business["failure"]
    assert failure is not None and failure["category"] == "acceptance_failed", done.stdout[-3000:]
    [golden] = [r for rec in business["records"] if rec["kind"] == "business.rules"
                for r in rec["data"]["results"] if r["kind"] == "golden"]
    assert golden["failing"] == [0, "seventy"]
    assert json.loads((bundle / "evidence.json").read_text())["items"]


@pytest.mark.parametrize("body", [
    "  - {name: x, metric: accuracy, op: '<=', value: .inf}\n",
    "  - {name: x, metric: accuracy, op: '>=', value: .nan}\n",
    "  - {name: x, latency: {percentile: 99, max_ms: .inf}, self_reported: true}\n",
])
def test_a_bound_that_is_no_finite_number_is_refused_when_the_rules_are_read(tmp_path: Path, body: str) -> None:
    """A rule's bound is written into ``business.rules`` (``bound.value``, a number); the journal writes a NaN or
    ±Infinity as null (evidence.journal.finite), so a bound of ``.inf`` made a bundle whose every reader refused it
    (``bound.value: is null, not a number``: the README run with ``max_ms: .inf`` rendered nothing). The rules file
    is refused instead, naming the rule, as any other bound that is no number."""
    with pytest.raises(CaseError) as caught:
        load_rules(_rules(tmp_path, body))
    assert "rule 'x'" in caught.value.message and "finite" in caught.value.message


def _as_journaled(value: object) -> object:
    """``value`` as the bundle holds it: the journal's JSON, a NaN or ±Infinity written as null."""
    return json.loads(json.dumps(finite(value), allow_nan=False))


def test_a_sample_time_the_workload_made_no_finite_number_is_skipped_not_journaled_as_null() -> None:
    """The wrapper's ``.samples``/``.devices`` are the workload's to write: a header ``t`` of 1e308 and a sample at
    -1e308 (or at a JSON ``Infinity``) gave a ``t_s`` of -inf, which the gate's own check let through and the
    journal wrote as null, so every reader refused the whole bundle (``model.usage`` ``...series.t_s[0]: is null,
    not a number``). Such a sample is skipped as an unreadable line is; the others are kept."""
    samples = "\n".join([json.dumps({"memory": "/sys/fs/cgroup/memory.current", "cpu": "/sys/fs/cgroup/cpu.stat",
                                     "cores": 1, "interval": 0.5, "at": 1.7e9, "t": 1e308}),
                         json.dumps([-1e308, "1048576", "inactive_file 0", "usage_usec 10"]),
                         "[Infinity, \"1048576\", \"inactive_file 0\", \"usage_usec 10\"]",
                         json.dumps([1e308, "2097152", "inactive_file 0", "usage_usec 20"])])
    usage, _ = inworkload.read_back({".samples": samples}, None, 1.0, "pod")
    gpu = "\n".join([json.dumps({"tool": "nvidia-smi", "path": "/usr/bin/nvidia-smi", "visible": "GPU-a",
                                 "t": 1e308}),
                     json.dumps([-1e308, 0, "0, GPU-a, H100, 10, 81559, 5\n", ""]),
                     json.dumps([1e308, 0, "0, GPU-a, H100, 20, 81559, 7\n", ""])])
    inworkload.add_devices(usage, gpu)
    npu_usages = "HBM Usage Rate(%) : 25\nHBM Capacity(MB) : 32768\nAicore Usage Rate(%) : 60\n"
    npu = "\n".join([json.dumps({"tool": "npu-smi", "path": "/x/npu-smi", "visible": "1", "t": 1e308,
                                 "memory": {"1": [0, "HBM Capacity(MB) : 32768\n", ""]}}),
                     json.dumps([-1e308, {"1": [0, npu_usages, ""]}]), json.dumps([1e308, {"1": [0, npu_usages, ""]}])])
    npu_usage, _ = inworkload.read_back({".samples": samples}, None, 1.0, "pod")
    inworkload.add_devices(npu_usage, npu)
    for record in (usage, npu_usage):
        check_json(_as_journaled(record), records.USAGE.shape)  # ShapeError before: t_s[0] is null
        assert [d["series"]["t_s"] for d in record["devices"]] == [[0.0], [0.0]]


def test_a_rank_time_so_small_the_bandwidth_overflows_is_the_ranks_failure_not_a_null_in_the_evidence() -> None:
    """``median_s`` 1e-320 passes every time check (finite, > 0, ordered) but 1 MiB over it is an infinite bandwidth:
    ``training.communication`` recorded ``busbw_gbps`` inf, which the gate's own check let through and the journal
    wrote as null, so every reader refused the bundle (``...sizes[0].busbw_gbps: is null, not a number``). It is a
    clean ``job_rank_failed`` naming the size, as any other time no measurement gives."""
    line = {"event": "result", "rank": 1, "world_size": 2, "framework": "torch", "backend": "gloo", "devices": 2,
            "contributed": 2, "init_s": 0.5, "sizes": [{"bytes": 1 << 20, "elements": 1 << 18, "iterations": 3,
                                                         "median_s": 1e-320, "min_s": 1e-320, "max_s": 1e-3,
                                                         "first": 3.0, "last": 3.0}]}
    with pytest.raises(LayerFailed) as bad:
        _result(json.dumps(line), 1)
    assert bad.value.category == "job_rank_failed"
    assert str(bad.value).endswith("sizes[0] gives no finite bandwidth (1048576 B in median_s 1e-320)")


@pytest.mark.parametrize(("edit", "field", "words"), [
    (lambda s: s.pop("acceptance"), "inputs.example-cpu.acceptance", "missing"),
    (lambda s: s.update(acceptance=None), "inputs.example-cpu.acceptance", "is null, not an object"),
    (lambda s: s["acceptance"].update({"digits-test": {}}), "inputs.example-cpu.acceptance.digits-test.path",
     "missing"),
    (lambda s: s["code"].update({"digits-logreg": "x"}), "inputs.example-cpu.code.digits-logreg",
     "is a string, not an object"),
])
def test_an_edited_inputs_section_is_refused_by_the_loader_not_a_traceback_in_diff_or_trend(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, field: str, words: str) -> None:
    """``inputs`` (what was kept of each matrix's code folders and acceptance files) is read by diff and trend
    (evidence.inputs.input_digests subscripts each entry's path and digest), but the loader did not check it: an
    edited bundle without ``inputs.<matrix>.acceptance``, or with an entry of another type, raised KeyError /
    AttributeError / TypeError out of ``hetero diff`` and ``hetero trend``. The loader refuses it naming the field."""
    real, _ = _readme_bundle(tmp_path)
    doc = json.loads((real / "evidence.json").read_text())
    edit(doc["inputs"]["example-cpu"])
    bundle = tmp_path / "edited"
    shutil.copytree(real, bundle)
    (bundle / "evidence.json").write_text(json.dumps(doc))
    with pytest.raises(BundleError) as caught:
        load_evidence(bundle, allow_unsigned=True)
    assert caught.value.location.field == field and f": {words}" in caught.value.message
    for argv in (("diff", "--allow-unsigned", str(real), str(bundle)), ("trend", "--allow-unsigned", str(bundle))):
        assert hetero(*argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and field in err, (argv, err)
