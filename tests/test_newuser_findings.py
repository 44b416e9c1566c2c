"""Findings of a new user's trial on evidence truth, inputs and the CLI: each test reproduces one with real
files and real runs (pytester, the ``hetero`` command in a subprocess) and asserts the corrected behaviour."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import matrix_text

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def _strict_json(text: str) -> Any:
    """Parse ``text`` as RFC 8259 JSON: NaN and ±Infinity refused as JSON.parse and jq refuse them."""
    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=refuse)


def _model(name: str, outputs: str) -> dict[str, Any]:
    """A model of the digits case whose entrypoint writes ``outputs`` (raw text) as its outputs file (hex in
    the argv: braces there are entrypoint placeholders)."""
    doc = json.loads(matrix_text())["spec"]["models"][0]
    return {**doc, "name": name, "entrypoint": [
        "{python}", "-c", "import sys; open(sys.argv[1], 'wb').write(bytes.fromhex(sys.argv[2]))", "{outputs}",
        outputs.encode().hex()]}


def _business(ev: dict[str, Any], model: str) -> dict[str, Any]:
    return next(i for i in ev["items"] if i["layer"] == "business" and f"::{model}@" in i["nodeid"])


def _layer(ev: dict[str, Any], model: str, layer: str) -> dict[str, Any]:
    return next(i for i in ev["items"] if i["layer"] == layer and f"::{model}@" in i["nodeid"])


def test_non_finite_metrics_are_not_evaluable_and_every_file_stays_standard_json(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Finding 2: ``Infinity`` passed ``acc >= 0.9``, ``-Infinity`` passed ``<= 2``, ``1e400`` (read as
    inf) passed, and evidence.json/journal.jsonl held bare ``Infinity``. Finding 11: a key written twice
    in the outputs silently kept the last value."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: acc, metric: accuracy, op: '>=', value: 0.9, self_reported: true}\n"
                     "  - {name: err, metric: accuracy, op: '<=', value: 2, self_reported: true}\n"
                     "  - {name: lat, metric: mean(latency_ms), op: '<=', value: 5, self_reported: true}\n")
    doc = json.loads(matrix_text(acceptance=rules))
    doc["spec"]["models"] = [
        _model("inf", '{"metrics": {"accuracy": Infinity}, "latency_ms": [1, 2]}'),
        _model("neginf", '{"metrics": {"accuracy": -Infinity}, "latency_ms": [1, 2]}'),
        _model("huge", '{"metrics": {"accuracy": 1e400}, "latency_ms": [1e308, 1e308]}'),
        _model("dupkey", '{"metrics": {"accuracy": 0.95, "accuracy": 0.1}, "latency_ms": [1]}'),
        _model("good", '{"metrics": {"accuracy": 0.95}, "latency_ms": [1, 2]}'),
    ]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    bundle = next((pytester.path / "reports").iterdir())
    ev = _strict_json((bundle / "evidence.json").read_text())
    for line in (bundle / "journal.jsonl").read_text().splitlines():
        _strict_json(line)
    for model in ("inf", "neginf", "huge"):
        business = _business(ev, model)
        assert business["status"] == "error", model
        assert (business["failure"]["category"], business["failure"]["owner"]) == ("outputs_invalid", "algorithm")
        results = {r["name"]: r for r in next(r["data"] for r in business["records"]
                                              if r["kind"] == "business.rules")["results"]}
        assert results["acc"]["verdict"] == results["err"]["verdict"] == "not_evaluable"
    assert "metric 'accuracy' is Infinity, not a number" in _business(ev, "inf")["failure"]["message"]
    assert "metric 'accuracy' is -Infinity, not a number" in _business(ev, "neginf")["failure"]["message"]
    assert "metric 'mean(latency_ms)' evaluates to Infinity" in _business(ev, "huge")["failure"]["message"]
    dup = _layer(ev, "dupkey", "model")
    assert (dup["status"], dup["failure"]["category"], dup["failure"]["owner"]) == ("failed", "bad_outputs",
                                                                                   "algorithm")
    assert dup["failure"]["message"].startswith("outputs file repeats key 'accuracy' in one object")
    assert _business(ev, "good")["status"] == "passed"
    assert ev["summary"]["verdict"] == "fail"


def test_a_non_finite_number_in_a_record_is_written_as_null_never_as_bare_infinity(tmp_path: Path) -> None:
    """Finding 2: the journal (and from it the evidence) wrote bare ``Infinity``/``NaN``, which JSON.parse
    refuses; a non-finite float anywhere in a record is now written as null, and evidence.json refuses one."""
    from pytest_hetero.evidence.journal import JournalKey, seal
    from pytest_hetero.evidence.recorder import write_evidence

    line = seal({"type": "record", "data": {"peak": float("inf"), "values": [1.5, float("nan"), -float("inf")]}},
                3, JournalKey.ephemeral())
    parsed = _strict_json(line.decode("ascii"))
    assert parsed["data"] == {"peak": None, "values": [1.5, None, None]} and parsed["seq"] == 3
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        write_evidence(tmp_path, {"summary": {"mean": float("inf")}})
    assert not (tmp_path / "evidence.json").exists()


def _hetero(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_hetero.cli", *args], capture_output=True, text=True,
                          check=False, timeout=180)


def test_a_killed_run_rebuilt_has_a_recovered_finish_time_and_a_finished_bundle_is_never_rebuilt(
        tmp_path: Path) -> None:
    """Finding 14: a bundle rebuilt after kill -9 had ``finished_at`` None, so ``verify --max-age`` always
    failed. Finding 4: ``report --from-journal`` on a finished bundle rewrote it and deleted every sign-off."""
    from support import DIGITS, MODEL_SHA

    doc = json.loads(matrix_text(name="crash", extra_spec={"owners": {"business": "risk-business"}}))
    doc["spec"]["models"].append({"name": "slow-model", "version": "1", "sha256": MODEL_SHA,
                                  "uri": str(DIGITS / "model" / "digits-logreg-1.0.0.onnx"),
                                  "entrypoint": ["{python}", "-c", "import time; time.sleep(120)"]})
    (tmp_path / "crash.matrix.yaml").write_text(json.dumps(doc))
    bundle = tmp_path / "reports" / "r1"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                             "crash.matrix.yaml", "--hetero-run-id", "r1"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            lines = (bundle / "journal.jsonl").read_text().splitlines() if (bundle / "journal.jsonl").exists() else []
            if sum(1 for x in lines if x.strip() and json.loads(x)["type"] == "item") >= 5:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the run never finished its first model's business item")
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert not (bundle / "attestation.intoto.jsonl").exists()
    made = _hetero("keygen", str(tmp_path / "gate.key"), "--pub", str(tmp_path / "gate.pub"))
    biz = _hetero("keygen", str(tmp_path / "biz.key"), "--pub", str(tmp_path / "biz.pub"))
    assert made.returncode == biz.returncode == 0, made.stderr + biz.stderr
    rebuilt = _hetero("report", "--from-journal", str(bundle), "--sign-key", str(tmp_path / "gate.key"))
    assert rebuilt.returncode == 0, rebuilt.stderr
    ev = json.loads((bundle / "evidence.json").read_text())
    journal_times = [json.loads(x)["evidence"]["finished_at"] for x in (bundle / "journal.jsonl").read_text()
                     .splitlines() if json.loads(x)["type"] == "item"]
    assert ev["run"]["finished_at"] == max(journal_times) and ev["run"]["finished_at_recovered"] is True
    verified = _hetero("verify", str(bundle), "--key", str(tmp_path / "gate.pub"), "--max-age", "1h")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert (f"finished {ev['run']['finished_at']} (recovered: the time of the journal's last line; the run ended "
            "without writing its end)") in verified.stdout

    signed = _hetero("sign", str(bundle), "--key", str(tmp_path / "biz.key"), "--role", "risk-business",
                     "--decision", "reject", "--text", "interrupted run", "--gate-key", str(tmp_path / "gate.pub"))
    assert signed.returncode == 0, signed.stderr
    before = (bundle / "attestation.intoto.jsonl").read_bytes()
    assert len(before.splitlines()) == 2
    again = _hetero("report", "--from-journal", str(bundle), "--sign-key", str(tmp_path / "gate.key"))
    assert again.returncode == 2
    assert again.stderr.startswith(
        f"hetero report: {bundle} is a finished bundle (attestation.intoto.jsonl exists, 2 line(s): the run's "
        "signature and 1 team sign-off(s)); rebuilding it from its journal would replace the run's signature and "
        "discard every sign-off\n  hint: nothing to recover; check it with: hetero verify")
    assert (bundle / "attestation.intoto.jsonl").read_bytes() == before


def test_sign_verifies_the_bundle_first_and_a_later_decision_supersedes_the_earlier(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 15: ``hetero sign`` signed an unsigned and a tampered bundle without a word, and a team that
    accepted could never reject with its key (``already signed``)."""
    from bundle_samples import make_bundle, policy_text, sample_evidence
    from test_bundle_verify import hetero

    from pytest_hetero.bundle.signing import generate_keypair

    for name in ("gate", "biz"):
        generate_keypair(tmp_path / f"{name}.key", tmp_path / f"{name}.pub")
    owners = {"discovery": "infra-team", "business": "risk-business"}
    unsigned = make_bundle(tmp_path / "unsigned", sample_evidence(), None, owners)
    sign = ("--key", str(tmp_path / "biz.key"), "--role", "risk-business")
    known = ("--decision", "accept-with-known-failures", "--text", "gpu blocked: INC-42")
    assert hetero("sign", str(unsigned), *sign, *known) == 2
    err = capsys.readouterr().err
    assert "FAIL attestation.intoto.jsonl: unsigned: the bundle is UNSIGNED" in err
    assert f"hetero sign: refusing to sign {unsigned}: it does not verify (1 problem(s) above)" in err
    assert len((unsigned / "attestation.intoto.jsonl").read_bytes().splitlines()) == 1

    signed = make_bundle(tmp_path / "signed", sample_evidence(), tmp_path / "gate.key", owners)
    evidence = signed / "evidence.json"
    original = evidence.read_bytes()
    evidence.write_bytes(original.replace(b'"fail"', b'"pass"'))
    (signed / "planted.txt").write_text("not the gate's\n")
    assert hetero("sign", str(signed), *sign, *known, "--gate-key", str(tmp_path / "gate.pub")) == 2
    err = capsys.readouterr().err
    assert "FAIL evidence.json: modified:" in err and "FAIL planted.txt: extra:" in err
    assert hetero("sign", str(signed), *sign, *known, "--unverified") == 0  # said explicitly: signed, with a warning
    assert "warning: signed although the bundle does not verify (--unverified): evidence.json: modified" in \
        capsys.readouterr().err
    evidence.write_bytes(original)
    (signed / "planted.txt").unlink()

    policy = tmp_path / "trust.yaml"
    policy.write_text(policy_text({"risk-business": [(tmp_path / "biz.pub", ["Ana Ruiz"])]}))
    verify = ("verify", str(signed), "--key", str(tmp_path / "gate.pub"), "--policy", str(policy),
              "--policy-sha256", hashlib.sha256(policy.read_bytes()).hexdigest())
    assert hetero("sign", str(signed), *sign, "--decision", "reject", "--text", "wrong data set") == 2
    err = capsys.readouterr().err
    assert "already signed for role 'risk-business' ('accept-with-known-failures' at" in err
    assert "sign again with --supersede" in err
    assert hetero("sign", str(signed), *sign, "--decision", "reject", "--text", "wrong data set", "--supersede",
                  "--gate-key", str(tmp_path / "gate.pub")) == 0
    capsys.readouterr()
    assert hetero(*verify) == 0
    assert "  risk-business: rejected" in capsys.readouterr().out.splitlines()
    assert hetero("sign", str(signed), *sign, *known, "--supersede", "--gate-key", str(tmp_path / "gate.pub")) == 0
    capsys.readouterr()
    assert hetero(*verify) == 0
    assert "  risk-business: accepted_with_known_failures" in capsys.readouterr().out.splitlines()


def _code_run(pytester: pytest.Pytester, tmp_path: Path, folders: dict[str, Path], conftest: str = "") -> Path:
    """A signed run of one model per ``folders`` entry (model name → its code folder, entrypoint writing an
    accuracy of 0.95 against a rule of >= 0.9); returns the bundle folder. ``conftest`` runs before the finish."""
    from support import DIGITS, MODEL_SHA

    made = _hetero("keygen", str(tmp_path / "gate.key"), "--pub", str(tmp_path / "gate.pub"))
    assert made.returncode == 0, made.stderr
    rules = tmp_path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: acc, metric: accuracy, op: '>=', value: 0.9, self_reported: true}\n")
    doc = json.loads(matrix_text(acceptance=rules))
    doc["spec"]["models"] = []
    for name, folder in folders.items():
        model = {**_model(name, '{"metrics": {"accuracy": 0.95}}'), "code": str(folder)}
        if (folder / "model.onnx").exists():  # the code folder holds only the model file, which is the model
            model.update(uri=str(folder / "model.onnx"), sha256=MODEL_SHA)
        doc["spec"]["models"].append(model)
    assert (DIGITS / "model" / "digits-logreg-1.0.0.onnx").exists()
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    if conftest:
        pytester.makeconftest(conftest)
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-sign-key", str(tmp_path / "gate.key"),
                       "--hetero-run-id", "r1")
    return pytester.path / "reports" / "r1"


def test_a_code_folder_holding_only_the_model_file_is_listed_and_verifies(pytester: pytest.Pytester,
                                                                          tmp_path: Path) -> None:
    """Finding 6: a code folder whose only file is the model was never kept (``cannot copy code folder``: the
    listing's folder was never created), inputs.code was {} and the bundle still verified."""
    from support import DIGITS

    code = tmp_path / "code"
    code.mkdir()
    (code / "model.onnx").write_bytes((DIGITS / "model" / "digits-logreg-1.0.0.onnx").read_bytes())
    bundle = _code_run(pytester, tmp_path, {"only": code})
    ev = json.loads((bundle / "evidence.json").read_text())
    kept = ev["inputs"]["t"]["code"]["only"]
    assert (kept["files"], kept["copied"], kept["listing"]) == (1, 0, "inputs/t/code/only.sha256sum")
    assert kept["left_out"][0]["why"] == "a model or dataset file of the matrix (digested by the run)"
    digest = hashlib.sha256(code.joinpath("model.onnx").read_bytes()).hexdigest()
    assert (bundle / kept["listing"]).read_text() == f"{digest}  model.onnx\n"
    assert ev["inputs_not_kept"] == [] and ev["summary"]["verdict"] == "pass"
    verified = _hetero("verify", str(bundle), "--key", str(tmp_path / "gate.pub"))
    assert verified.returncode == 0, verified.stdout


CHANGE_DURING_RUN = '''
import pathlib, shutil
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """Before the gate finishes its bundle: what a person editing files while the run goes does."""
    root = pathlib.Path({root!r})
    rules = root / "rules.yaml"
    rules.write_text(rules.read_text().replace("0.9", "0.99"))
    (root / "edited" / "helper.py").write_text("CHANGED = True\\n")
    shutil.rmtree(root / "gone")
'''


def test_inputs_are_digested_when_used_and_a_change_or_loss_before_the_finish_is_evidence(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Finding 3: the bundle copied code and rules at the end of the run, so its signed inputs described files
    the run never used, and verify said OK. Finding 6: an input that could not be kept was only a line on
    stderr. Now items digest what they use; the finish flags a difference (verdict at best incomplete) and a
    loss (signed in the statement: verify fails)."""
    for name in ("edited", "gone"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "helper.py").write_text("CHANGED = False\n")
    bundle = _code_run(pytester, tmp_path, {"edited": tmp_path / "edited", "gone": tmp_path / "gone"},
                       CHANGE_DURING_RUN.replace("{root!r}", repr(str(tmp_path))))
    ev = json.loads((bundle / "evidence.json").read_text())
    model = next(i for i in ev["items"] if i["nodeid"].endswith("::edited@digits-test::model"))
    [used] = [r["data"] for r in model["records"] if r["kind"] == "inputs.used"]
    line = hashlib.sha256(b"CHANGED = False\n").hexdigest() + "  helper.py\n"
    before = hashlib.sha256(line.encode()).hexdigest()
    assert used == {"input": "code", "path": str(tmp_path / "edited"), "sha256": before}
    code = ev["inputs"]["t"]["code"]["edited"]
    assert code["changed_during_run"] is True and code["used_sha256"] == [before] and code["sha256"] != before
    rules = ev["inputs"]["t"]["acceptance"]["digits-test"]
    # the rules are pinned from the bytes read when the matrix loaded (issue 29): an edit during the run changes
    # neither what was judged nor the bundle's copy
    assert "changed_during_run" not in rules
    assert "0.99" not in (bundle / rules["copy"]).read_text()
    parts = {(p["nodeid"].split("::", 1)[1], p["part"]) for p in ev["untested"]["not_proven"]}
    assert ("cpu-host::py::edited@digits-test::model", "the inputs the bundle keeps are the ones the run used") in parts
    # the business item judged the pinned rules, which the bundle keeps as they were read
    assert ("cpu-host::py::edited@digits-test::business",
            "the inputs the bundle keeps are the ones the run used") not in parts
    assert ev["summary"]["verdict"] == "incomplete"
    assert ev["inputs_not_kept"] == [f"cannot copy code folder {tmp_path / 'gone'}: No such file or directory"]
    assert f"input not kept in the bundle: cannot copy code folder {tmp_path / 'gone'}" in " ".join(ev["warnings"])
    verified = _hetero("verify", str(bundle), "--key", str(tmp_path / "gate.pub"))
    assert verified.returncode == 1
    assert (f"FAIL inputs: not_kept: 1 input(s) the run used are not in the bundle (signed in the statement): "
            f"cannot copy code folder {tmp_path / 'gone'}: No such file or directory") in verified.stdout


def test_trend_and_diff_count_a_code_change_as_an_input_change(tmp_path: Path) -> None:
    """Finding 7: runs tr1, tr2 (the model's code edited so it reports 0.1), tr3 (restored): trend called the
    item flaky with inputs unchanged and ``hetero diff tr1 tr2`` listed no input change."""
    assert _hetero("keygen", str(tmp_path / "gate.key"), "--pub", str(tmp_path / "gate.pub")).returncode == 0
    rules = tmp_path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: acc, metric: accuracy, op: '>=', value: 0.9, self_reported: true}\n")
    code = tmp_path / "code"
    code.mkdir()
    doc = json.loads(matrix_text(acceptance=rules))
    doc["spec"]["models"][0].update(code=str(code), entrypoint=["{python}", "{code}/emit.py", "{outputs}"])
    (tmp_path / "tr.matrix.yaml").write_text(json.dumps(doc))
    emit = "import json, sys\njson.dump({{'metrics': {{'accuracy': {}}}}}, open(sys.argv[1], 'w'))\n"
    for run, accuracy in (("tr1", 0.95), ("tr2", 0.1), ("tr3", 0.95)):
        (code / "emit.py").write_text(emit.format(accuracy))
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                               "tr.matrix.yaml", "--hetero-run-id", run, "--hetero-sign-key",
                               str(tmp_path / "gate.key")], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == (1 if run == "tr2" else 0), done.stdout[-2000:]
    reports = tmp_path / "reports"
    trend = _hetero("trend", *(str(reports / r) for r in ("tr1", "tr2", "tr3")), "--key", str(tmp_path / "gate.pub"),
                    "--format", "json")
    assert trend.returncode == 0, trend.stderr
    business = next(i for i in json.loads(trend.stdout)["items"] if i["item"].endswith("::business"))
    assert business["history"] == ["passed", "failed", "passed"]
    assert (business["changes"], business["flaky"], business["flaky_changes"]) == (2, False, 0)
    diff = _hetero("diff", str(reports / "tr1"), str(reports / "tr2"), "--json", "--key", str(tmp_path / "gate.pub"))
    assert diff.returncode == 1, diff.stderr  # the regression fails the diff's gate
    changes = json.loads(diff.stdout)["input_changes"]
    assert [(c["what"], c["name"]) for c in changes] == [("code", "t/digits-logreg")]


def test_the_dossier_claims_a_framework_initialised_only_when_the_evidence_says_one_was(
        pytester: pytest.Pytester) -> None:
    """Finding 10: with no model declaring ``runtime: onnxruntime`` the evidence says ``framework: null``, yet the
    dossier said the image's device framework initialised (CPUExecutionProvider)."""
    from pytest_hetero.reporting.dossier import proves
    from pytest_hetero.reporting.dossier_facts import Facts
    from pytest_hetero.reporting.dossier_text import Text

    doc = json.loads(matrix_text())
    del doc["spec"]["models"][0]["runtime"]
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    bundle = next((pytester.path / "reports").iterdir())
    ev = json.loads((bundle / "evidence.json").read_text())
    startup = next(i for i in ev["items"] if i["layer"] == "startup")
    assert next(r["data"] for r in startup["records"] if r["kind"] == "startup.device_init")["framework"] is None
    dossier = _hetero("render", str(bundle), "--format", "dossier")
    assert dossier.returncode == 0, dossier.stderr
    assert "framework initialised" not in dossier.stdout
    assert "started (no model declares a device framework, so none was initialised)" in dossier.stdout
    [line] = next(p["lines"] for p in proves(Facts(ev), Text("en")) if p["layer"] == "startup")
    init = next(r for r in startup["records"] if r["kind"] == "startup.device_init")
    init["data"].update(framework="onnxruntime", ok=True)  # what a model declaring the runtime records
    [claimed] = next(p["lines"] for p in proves(Facts(ev), Text("en")) if p["layer"] == "startup")
    assert claimed == line.split(" started ")[0] + (" started and its device framework initialised (onnxruntime, "
                                                     "CPUExecutionProvider)")


def test_lint_rejects_unknown_target_keys_each_with_its_fix_and_bad_rules(tmp_path: Path) -> None:
    """Finding 8: ``target: {backend: docker, pul_policy: never, image_ownr: platform, bogus_key: 1}`` linted ok
    and ran (the schema allowed any key under target). Finding 11: a golden rule with ``samples: []`` and two rules
    of one name linted ok."""
    doc = json.loads(matrix_text(backend="docker"))
    doc["spec"]["target"].update(pul_policy="never", image_ownr="platform", bogus_key=1)
    (tmp_path / "typo.matrix.yaml").write_text(json.dumps(doc, indent=1))
    linted = _hetero("lint", str(tmp_path / "typo.matrix.yaml"))
    assert linted.returncode == 1
    lines = linted.stdout.splitlines()
    assert lines[0] == f"3 problems in {tmp_path / 'typo.matrix.yaml'}:"
    assert [(x.split(": ", 2)[1:], h) for x, h in zip(lines[1::2], lines[2::2], strict=True)] == [
        (["field 'spec.target.pul_policy'", "unknown key 'pul_policy'"], "  hint: did you mean 'pull_policy'?"),
        (["field 'spec.target.image_ownr'", "unknown key 'image_ownr'"], "  hint: did you mean 'image_owner'?"),
        (["field 'spec.target.bogus_key'", "unknown key 'bogus_key'"],
         "  hint: allowed keys: backend, cleanup_wait_s, context, cpuset, device_ids, docker_host, engine_wait_s, "
         "image_owner, kubeconfig, namespace, network, node_problem_conditions, pull_policy, python, submit_as, tls, "
         "unschedulable_grace_s")]
    rules = tmp_path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: acc, metric: accuracy, op: '>=', value: 0.9, self_reported: true}\n"
                     "  - {name: acc, metric: f1_macro, op: '>=', value: 0.1}\n"
                     "  - {name: g, golden: {samples: []}}\n")
    (tmp_path / "rules.matrix.yaml").write_text(matrix_text(acceptance=rules))
    linted = _hetero("lint", str(tmp_path / "rules.matrix.yaml"))
    assert linted.returncode == 1
    assert f"{rules}:5:12: field 'rules[1].name': rule name 'acc' is used twice (first on line 4)" in linted.stdout
    assert f"{rules}:6:5: field 'rules[2]': rule 'g': golden samples is empty: it would prove nothing" in linted.stdout


def test_a_bad_redact_entry_names_the_shape_to_write(tmp_path: Path) -> None:
    """Finding 17: ``redact: {db: ...}`` was answered "write a list", an entry without ``pattern`` named no keys;
    the hint now shows the ``[{kind, pattern}]`` shape."""
    doc = json.loads(matrix_text())
    doc["spec"]["redact"] = [{"kind": "db-password"}]
    (tmp_path / "red.matrix.yaml").write_text(json.dumps(doc, indent=1))
    linted = _hetero("lint", str(tmp_path / "red.matrix.yaml"))
    assert linted.returncode == 1
    text = json.dumps(doc, indent=1).splitlines()
    line = next(n for n, x in enumerate(text, 1) if x.strip() == '"redact": [') + 1  # the entry's line
    assert linted.stdout.splitlines() == [
        f"{tmp_path / 'red.matrix.yaml'}:{line}:4: field 'spec.redact[0]': 'pattern' is a required property",
        "  hint: spec.redact is a list of {kind, pattern}: kind a lowercase name shown as [REDACTED:<kind>], pattern "
        "a regular expression, e.g. redact: [{kind: db-password, pattern: 'pw=\\S+'}]"]


def test_an_unknown_backend_is_named_at_its_line_and_column(tmp_path: Path) -> None:
    """Finding 16: ``backend: lokal`` was reported with the file alone, no line or column."""
    path = tmp_path / "nobackend.matrix.yaml"
    path.write_text(matrix_text().replace('"backend": "local"', '"backend": "lokal"'))
    line = next(n for n, x in enumerate(path.read_text().splitlines(), 1) if '"lokal"' in x)
    linted = _hetero("lint", str(path))
    assert linted.returncode == 1
    column = path.read_text().splitlines()[line - 1].index('"lokal"') + 1
    assert linted.stdout.splitlines() == [
        f"{path}:{line}:{column}: field 'spec.target.backend': unknown backend 'lokal'",
        "  hint: use one of local, docker, kubernetes, or install the plugin that provides it"]


def test_a_number_yaml_reads_as_text_and_a_bad_quantity_get_hints_in_words(tmp_path: Path) -> None:
    """Finding 16: ``min_cpus: 1e309`` was told to write a number "without quotes" (none were written: YAML reads
    ``1e3`` as text), and a bad ``requests`` value got the raw regular expression as its hint."""
    path = tmp_path / "num.matrix.yaml"
    path.write_text(matrix_text().replace('"requests": {\n          "cpu": 1\n        }',
                                          '"requests": {"cpu": "1x"}, "expect": {"min_cpus": "1e309"}'))
    assert '"1x"' in path.read_text()
    linted = _hetero("lint", str(path))
    assert linted.returncode == 1
    hints = [x for x in linted.stdout.splitlines() if x.startswith("  hint: ")]
    assert hints == [
        "  hint: write a Kubernetes quantity: a number with an optional unit m, k, M, G, T, Ki, Mi, Gi or Ti (e.g. 1, "
        "500m, 16Gi)",
        "  hint: YAML reads 1e309 as text, not a number (an exponent needs a dot, 1.0e3, and the number must be "
        "finite); write a number such as 1000 or 1.0e3"]


def test_code_dot_keeps_no_bundle_in_the_code_copy(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """Finding 16: with ``code: .`` the copied code folder held earlier bundles and part of the one being written."""
    (pytester.path / "emit.py").write_text("import json, sys\njson.dump({'metrics': {'accuracy': 0.95}}, "
                                           "open(sys.argv[1], 'w'))\n")
    rules = pytester.path / "rules.yaml"
    rules.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n"
                     "  - {name: acc, metric: accuracy, op: '>=', value: 0.9, self_reported: true}\n")
    doc = json.loads(matrix_text(acceptance=rules))
    doc["spec"]["models"][0].update(code=".", entrypoint=["{python}", "{code}/emit.py", "{outputs}"])
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    for run in ("r1", "r2"):
        pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run).assert_outcomes(
            passed=4, skipped=1)
    ev = json.loads((pytester.path / "reports" / "r2" / "evidence.json").read_text())
    code = ev["inputs"]["t"]["code"]["digits-logreg"]
    listed = [x.split("  ", 1)[1] for x in (pytester.path / "reports" / "r2" / code["listing"]).read_text()
              .splitlines()]
    assert {"emit.py", "m.matrix.yaml", "rules.yaml"} <= set(listed)
    assert [x for x in listed if x.startswith("reports")] == []  # neither r1 nor r2 (being written)
    assert not (pytester.path / "reports" / "r2" / "inputs" / "t" / "code" / "digits-logreg" / "reports").exists()
    assert ev["summary"]["verdict"] == "pass" and "changed_during_run" not in code


def test_a_node_selector_on_a_host_engine_is_named_not_proven_by_discovery(pytester: pytest.Pytester) -> None:
    """Finding 13: a local resource with a ``node_selector`` (GFD labels) and a toleration passed discovery as
    if its labels had been checked. The host has no node labels: discovery passes on what it did check
    (the CPU) and names the selector as not proven in the untested scope (evidence and terminal); a
    resource without either records nothing of the kind."""
    resources: list[dict[str, Any]] = [{"name": "labelled", "type": "cpu", "requests": {"cpu": 1},
                  "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                  "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]},
                 {"name": "plain", "type": "cpu", "requests": {"cpu": 1}}]
    pytester.makefile(".matrix.yaml", m=matrix_text(resources=resources))
    result = pytester.runpytest("m.matrix.yaml", "-p", "no:cacheprovider", "-k", "discovery")
    result.assert_outcomes(passed=2)
    (bundle,) = (pytester.path / "reports").iterdir()
    ev = json.loads((bundle / "evidence.json").read_text())
    unproven = [(p["nodeid"].split("::")[1], p["layer"], p["part"], p["reason"]) for p in ev["untested"]["not_proven"]
                if p["part"] == "node labels"]
    assert unproven == [("labelled", "discovery", "node labels",
                         "the local engine has no nodes: the resource's node_selector "
                         "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 and 1 toleration(s) (how a Kubernetes pool "
                         "is chosen) is not checked on this host")]
    result.stdout.fnmatch_lines(["*not proven*m.matrix.yaml::labelled::discovery: node labels (the local engine*"])
