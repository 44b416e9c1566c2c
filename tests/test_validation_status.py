"""Task types, the validation status of a run (pool × task type → level, expiry), its VSA attestation
checked offline, and ``hetero catalog`` — on real local runs of the digits case, signed with real keys."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from support import REPO, matrix_text

from pytest_hetero import LAYERS
from pytest_hetero.bundle.verify import trusted_keys
from pytest_hetero.bundle.vsa import VSA_PREDICATE_TYPE, load_status
from pytest_hetero.errors import BundleError, MatrixError
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.status.compute import RESOURCE_LAYERS, layer_summary, level_of, pool_status
from pytest_hetero.status.publish import NodeSeen, PublishRefused, expiry_plan, parse_now, publish_plan

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import ItemDict, PoolStatus

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def hetero(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "pytest_hetero.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120, check=False)


def gate(pytester: pytest.Pytester, spec_extra: dict[str, Any], *args: str) -> Path:
    """Run the gate on a two-resource digits matrix (a CPU that passes, an NVIDIA GPU that fails
    discovery on this host); return the bundle folder."""
    resources = [{"name": "cpu-host", "type": "cpu", "requests": {"cpu": 1}},
                 {"name": "gpu", "type": "gpu", "vendor": "nvidia", "requests": {"nvidia.com/gpu": 1}}]
    pytester.makefile(".matrix.yaml", s=matrix_text(resources=resources, extra_spec=spec_extra, name="s"))
    pytester.runpytest("-p", "no:cacheprovider", *args)
    [bundle] = sorted((pytester.path / "reports").iterdir())
    return bundle


@pytest.fixture
def signed(pytester: pytest.Pytester) -> tuple[Path, Path]:
    assert hetero("keygen", str(pytester.path / "k")).returncode == 0
    bundle = gate(pytester, {"validation": {"valid_for": "1d12h", "domain": "gpu.example.com"}},
                  "--hetero-sign-key", str(pytester.path / "k"))
    return bundle, pytester.path / "k.pub"


def test_task_type_defaults_and_validation_settings(tmp_path: Path) -> None:
    doc = json.loads(matrix_text(extra_spec={"validation": {"valid_for": "1d12h", "domain": "gpu.example.com"}}))
    doc["spec"]["models"].append({**doc["spec"]["models"][0], "name": "trainer", "task_type": "fine-tune"})
    (tmp_path / "a.matrix.yaml").write_text(json.dumps(doc))
    matrix = load_matrix(tmp_path / "a.matrix.yaml")
    assert [(m.name, m.task_type) for m in matrix.models] == [("digits-logreg", "batch-inference"),
                                                              ("trainer", "fine-tune")]
    assert (matrix.valid_for_s, matrix.validation_domain) == (36 * 3600.0, "gpu.example.com")
    assert load_matrix(REPO / "matrices" / "example-serving.matrix.yaml").models[0].task_type == "online-inference"
    assert (load_matrix(REPO / "matrices" / "example-cpu.matrix.yaml").valid_for_s) == 7 * 86400.0


@pytest.mark.parametrize(("where", "value", "field"), [
    ("task_type", "inference", "task_type"), ("valid_for", "7 days", "valid_for"), ("domain", "Not_A_Domain", "domain"),
])
def test_bad_task_type_or_validation_is_named(tmp_path: Path, where: str, value: str, field: str) -> None:
    doc = json.loads(matrix_text())
    if where == "task_type":
        doc["spec"]["models"][0]["task_type"] = value
    else:
        doc["spec"]["validation"] = {where: value}
    (tmp_path / "b.matrix.yaml").write_text(json.dumps(doc))
    with pytest.raises(MatrixError) as info:
        load_matrix(tmp_path / "b.matrix.yaml")
    assert field in str(info.value)


def test_pool_status_groups_items_by_resource_task_type_and_layer(tmp_path: Path) -> None:
    """Each resource × task type's layers from its own items only: the resource layers shared by every task
    type, model and business from that task type's models (checked against the definition, item by item)."""
    resources = [{"name": "cpu-a", "type": "cpu", "requests": {"cpu": 1}},
                 {"name": "cpu-b", "type": "cpu", "requests": {"cpu": 1}}]
    doc = json.loads(matrix_text(resources=resources))
    doc["spec"]["models"].append({**doc["spec"]["models"][0], "name": "trainer", "task_type": "fine-tune"})
    (tmp_path / "t.matrix.yaml").write_text(json.dumps(doc))
    matrix = load_matrix(tmp_path / "t.matrix.yaml")
    statuses = ["passed", "failed", "blocked", "not_applicable", "passed", "error"]
    items: list[dict[str, Any]] = []
    for r, res in enumerate(("cpu-a", "cpu-b", "elsewhere")):
        for n, layer in enumerate(LAYERS):
            models = [None] if layer in RESOURCE_LAYERS else ["digits-logreg", "trainer"]
            for m, model in enumerate(models):
                keys = {"resource": res, **({"model": model} if model else {})}
                items.append({"keys": keys, "layer": layer, "status": statuses[(r * 7 + n * 3 + m) % 6],
                              "records": []})
    pools = pool_status(matrix, cast("list[ItemDict]", items), "2026-11-29T10:00:00Z")
    assert [p["pool"] for p in pools] == ["cpu-a", "cpu-b"]
    for pool in pools:
        for task_type, models in (("batch-inference", ["digits-logreg"]), ("fine-tune", ["trainer"])):
            want: dict[str, str] = {layer: layer_summary(i["status"] for i in items if i["keys"]["resource"] == pool["pool"]
                                         and i["layer"] == layer and (layer in RESOURCE_LAYERS
                                                                      or i["keys"].get("model") in models))
                    for layer in LAYERS}
            assert pool["task_types"][task_type]["layers"] == want
            assert pool["task_types"][task_type]["level"] == level_of(want)
    assert pools[0]["task_types"]["batch-inference"]["layers"] != pools[0]["task_types"]["fine-tune"]["layers"]


def test_levels_stop_at_the_first_layer_not_passed() -> None:
    assert layer_summary([]) == "absent"
    assert layer_summary(["passed", "not_applicable"]) == "passed"
    assert layer_summary(["passed", "failed", "blocked"]) == "blocked+failed"
    # not_applicable proves nothing: the level stops below it (issue 27: a local pool never reaches business)
    assert level_of({"discovery": "passed", "scheduling": "not_applicable", "startup": "passed",
                     "model": "failed", "business": "passed"}) == "discovery"
    assert level_of({"discovery": "passed", "scheduling": "passed", "startup": "passed",
                     "model": "failed", "business": "passed"}) == "startup"
    assert level_of({"discovery": "failed"}) == "none"


def test_status_is_signed_and_each_pool_is_a_vsa_verified_offline(signed: tuple[Path, Path]) -> None:
    bundle, pub = signed
    status = load_status(bundle, trusted_keys([pub]))
    pools = {p["pool"]: p for p in status["validation"]["pools"]}
    assert {k: v["task_types"]["batch-inference"]["level"] for k, v in pools.items()} == {
        "cpu-host": "discovery", "gpu": "none"}  # scheduling not_applicable on the local host stops the level
    cpu = pools["cpu-host"]
    assert cpu["task_types"]["batch-inference"]["layers"] == {
        "discovery": "passed", "scheduling": "not_applicable", "startup": "passed", "model": "passed",
        "business": "passed"}
    assert (parse_now(cpu["expires_at"]) - parse_now(cpu["verified_at"])).total_seconds() == 36 * 3600
    statement = json.loads((bundle / "statement.intoto.json").read_text())
    assert statement["predicate"]["validation"] == status["validation"]
    vsas = {v["predicate"]["resourceUri"]: v for v in status["vsas"]}
    vsa = vsas["hetero-pool:s/cpu-host"]
    assert vsa["predicateType"] == VSA_PREDICATE_TYPE == "https://slsa.dev/verification_summary/v1"
    predicate = vsa["predicate"]
    assert (predicate["verificationResult"], predicate["verifiedLevels"]) == (
        "PASSED", ["PYTEST_HETERO_BATCH_INFERENCE_DISCOVERY"])
    assert predicate["inputAttestations"][0]["digest"]["sha256"] == status["digest"]
    assert predicate["pytestHetero"]["validUntil"] == cpu["expires_at"]
    assert vsas["hetero-pool:s/gpu"]["predicate"]["verificationResult"] == "FAILED"
    # the VSA lines are signed by the run's key (DSSE over PAE), independent of the run's envelope
    assert hetero("verify", str(bundle), "--key", str(pub)).returncode == 0


def _rewrite_first_vsa(bundle: Path, change: Any) -> None:
    path = bundle / "validation.intoto.jsonl"
    lines = path.read_bytes().splitlines()
    env = json.loads(lines[0])
    statement = json.loads(base64.b64decode(env["payload"]))
    change(statement)
    env["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    path.write_bytes(b"\n".join([json.dumps(env).encode(), *lines[1:]]) + b"\n")


def test_an_edited_or_foreign_vsa_is_refused(signed: tuple[Path, Path], tmp_path: Path) -> None:
    bundle, pub = signed
    keys = trusted_keys([pub])
    _rewrite_first_vsa(bundle, lambda s: s["predicate"]["pytestHetero"].update(validUntil="2099-01-01T00:00:00Z"))
    with pytest.raises(BundleError, match="line 1: no valid signature by a trusted key"):
        load_status(bundle, keys)
    (bundle / "validation.intoto.jsonl").unlink()
    with pytest.raises(BundleError, match="no validation.intoto.jsonl"):
        load_status(bundle, keys)


def test_a_vsa_of_another_run_is_refused(pytester: pytest.Pytester) -> None:
    assert hetero("keygen", str(pytester.path / "k")).returncode == 0
    first = gate(pytester, {}, "--hetero-sign-key", str(pytester.path / "k"), "--hetero-run-id", "one")
    second = first.parent / "two"
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-sign-key", str(pytester.path / "k"), "--hetero-run-id",
                       "two")
    (second / "validation.intoto.jsonl").write_bytes((first / "validation.intoto.jsonl").read_bytes())
    with pytest.raises(BundleError, match="line 1: the VSA names another bundle's statement"):
        load_status(second, trusted_keys([pytester.path / "k.pub"]))


def test_catalog_renders_pools_levels_expiry_and_untested(signed: tuple[Path, Path]) -> None:
    bundle, pub = signed
    done = hetero("catalog", str(bundle), "--key", str(pub), "--json")
    assert done.returncode == 0, done.stderr
    rows = {r["pool"]: r for r in json.loads(done.stdout)}
    cpu, gpu = rows["s/cpu-host"], rows["s/gpu"]
    assert (cpu["type"], cpu["requests"], cpu["task_types"], cpu["expired"], cpu["verification"]) == (
        "cpu", {"cpu": "1"}, {"batch-inference": "discovery"}, False, "verified")
    assert gpu["task_types"] == {"batch-inference": "none"}
    assert {e["status"] for e in gpu["untested"]} == {"blocked"}  # the failed discovery is a result, not untested
    assert cpu["owners"]["business"] == "business"
    later = hetero("catalog", str(bundle), "--key", str(pub), "--now", "2099-01-01T00:00:00Z")
    assert later.returncode == 0 and "(EXPIRED)" in later.stdout and "| s/cpu-host | cpu/any |" in later.stdout
    unsigned = hetero("catalog", str(bundle))
    assert unsigned.returncode == 2 and "no trusted public key" in unsigned.stderr


def test_publish_plan_refuses_expired_and_nodeless_status() -> None:
    pool = cast("PoolStatus", {"matrix": "m", "pool": "p", "nodes": ["n1"], "domain": "d.example",
                               "expires_at": "2026-01-02T00:00:00Z",
                               "task_types": {"training": {"level": "startup"}, "batch-inference": {"level": "business"}}})
    plan = publish_plan([pool], "ab" * 32, parse_now("2026-01-01T00:00:00Z"), "d.example/unvalidated")
    [entry] = plan
    assert entry["labels"] == {"validation.d.example/batch-inference": "business",
                               "validation.d.example/training": "startup"}
    assert [(c["type"], c["status"], c["reason"]) for c in entry["conditions"]] == [
        ("validation.d.example/batch-inference", "True", "Validated"),
        ("validation.d.example/training", "False", "NotValidated")]
    assert entry["taint"] == "remove"
    with pytest.raises(PublishRefused, match="has expired: m/p"):
        publish_plan([pool], "ab" * 32, parse_now("2026-01-02T00:00:00Z"))
    with pytest.raises(PublishRefused, match="nothing to publish"):
        publish_plan([cast("PoolStatus", {**pool, "nodes": []})], "ab" * 32, parse_now("2026-01-01T00:00:00Z"))
    nodes: list[NodeSeen] = [{
        "name": "n1", "labels": {}, "taints": [],
        "annotations": {"validation.d.example/training.expires-at": "2026-01-02T00:00:00Z",
                        "validation.d.example/serve.expires-at": "2026-02-01T00:00:00Z"},
        "conditions": [{"type": "validation.d.example/serve", "status": "True", "reason": "Validated", "message": None}]}]
    [expiry] = expiry_plan(nodes, "d.example", parse_now("2026-01-03T00:00:00Z"), "t")
    assert (expiry["labels"], expiry["taint"]) == ({"validation.d.example/training": None}, "remove")
    assert expiry_plan(nodes, "d.example", parse_now("2026-01-01T00:00:00Z"), "t") == []


def test_example_matrix_and_node_readiness_rule_name_the_published_keys() -> None:
    import yaml

    from pytest_hetero.status.compute import label_key

    matrix = load_matrix(REPO / "matrices" / "example-status.matrix.yaml")
    assert ([m.task_type for m in matrix.models], matrix.valid_for_s, matrix.validation_domain) == (
        ["batch-inference"], 7 * 86400.0, "gpu.example.com")
    rule = yaml.safe_load((REPO / "deploy" / "node-readiness-rule.yaml").read_text())
    assert (rule["apiVersion"], rule["kind"]) == ("readiness.node.x-k8s.io/v1alpha1", "NodeReadinessRule")
    assert rule["spec"]["conditions"] == [{"type": label_key("pytest-hetero.dev", "batch-inference"),
                                           "requiredStatus": "True"}]
    assert rule["spec"]["taint"]["effect"] == "NoSchedule" and rule["spec"]["enforcementMode"] == "continuous"


@pytest.fixture(scope="module")
def cosign() -> str:
    """cosign (tests/infra/gotools.sh), found before pytester moves HOME."""
    from test_cosign import gotool

    return gotool("cosign")


def test_cosign_verifies_a_pool_vsa_with_the_run_key(cosign: str, signed: tuple[Path, Path], tmp_path: Path) -> None:
    """The ecosystem's verifier (cosign verify-blob-attestation) accepts a VSA line with the run's key, as a
    SLSA VSA over the pool identity it names; another key is refused."""
    from pytest_hetero.bundle.signing import canonical
    from pytest_hetero.bundle.vsa import pool_identity

    bundle, pub = signed
    status = load_status(bundle, trusted_keys([pub]))
    pool = next(p for p in status["validation"]["pools"] if p["pool"] == "cpu-host")
    line = next(raw for raw in (bundle / "validation.intoto.jsonl").read_bytes().splitlines()
                if b"cpu-host" in base64.b64decode(json.loads(raw)["payload"]))
    (tmp_path / "vsa.json").write_bytes(line + b"\n")
    (tmp_path / "pool.json").write_bytes(canonical(pool_identity(pool)))
    assert hetero("keygen", str(tmp_path / "other")).returncode == 0

    def verify(key: Path) -> tuple[int, str]:
        done = subprocess.run([cosign, "verify-blob-attestation", "--insecure-ignore-tlog", "--key", str(key),
                               "--signature", str(tmp_path / "vsa.json"), "--type", VSA_PREDICATE_TYPE,
                               str(tmp_path / "pool.json")], capture_output=True, text=True, timeout=120, check=False)
        return done.returncode, (done.stdout + done.stderr).strip().splitlines()[-1]

    assert verify(pub) == (0, "Verified OK")
    assert verify(tmp_path / "other.pub")[0] != 0
