"""The failure table: every category an engine, reader or layer check can report has one owner there,
the docs are the table, and a real run's failures take their owner from it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from pytest_hetero.backends.docker.errors import RULES, classify
from pytest_hetero.backends.kubernetes.startup import startup_category
from pytest_hetero.judge.failures import TABLE, markdown, owner_category, status_of
from pytest_hetero.layers.startup import CATEGORY
from pytest_hetero.pending import explain
from pytest_hetero.pending.model import CODES, make_reason
from pytest_hetero.pending.startup import container_reasons
from pytest_hetero.pytest_plugin.item import STORAGE_ERRORS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pytest_hetero"
RAISERS = {"LayerFailed", "LayerBroken", "LayerOutcome", "ActionFailed", "EngineUnavailable", "EngineFault",
           "outcome", "_fail", "NotReady"}


def _constants(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _constants(node.body) | _constants(node.orelse)
    return set()


def emitted() -> dict[str, str]:  # noqa: C901 - one walk over every node kind that names a category
    """Every literal failure category the engines, the layer checks and the pytest glue can report:
    the category argument of a fault/outcome, and ``"category"``/``"code"`` values of failure dicts."""
    found: dict[str, str] = {}
    for folder in ("backends", "layers", "pytest_plugin"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                values: set[str] = set()
                if isinstance(node, ast.Call):
                    func = node.func
                    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) \
                        else ""
                    index = 4 if name == "_fail" else 1
                    if name in RAISERS and len(node.args) > index:
                        values |= _constants(node.args[index])
                    values |= {c for kw in node.keywords if kw.arg == "category" for c in _constants(kw.value)}
                if isinstance(node, ast.Dict):
                    for key, value in zip(node.keys, node.values, strict=True):
                        if isinstance(key, ast.Constant) and key.value in ("category", "code") and value is not None:
                            values |= _constants(value)
                for value in values:
                    found.setdefault(value, f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}")
    for rule in RULES:
        found.setdefault(rule.category, "backends/docker/errors.RULES")
    for code in CODES:
        found.setdefault(code, "pending/model.CODES")
    for category in [*CATEGORY.values(), *STORAGE_ERRORS.values(), "interpreter_missing", "startup_oom_killed"]:
        found.setdefault(category, "layers/startup.CATEGORY, pytest_plugin/item.STORAGE_ERRORS")
    return found


def test_every_category_an_engine_or_reader_emits_is_in_the_table() -> None:
    found = emitted()
    assert len(found) >= 140  # the walk still finds the raisers (a rename would make it find nothing)
    assert {c: where for c, where in found.items() if c not in TABLE} == {}


def test_the_table_names_no_role_that_is_not_a_team() -> None:
    assert {row.owner for row in TABLE.values()} == {"platform", "infrastructure", "algorithm", "business", "image"}
    assert {row.status for row in TABLE.values()} == {"failed", "error"}


def test_docs_are_the_table() -> None:
    assert (ROOT / "docs" / "failure-owners.md").read_text() == markdown()


REAL = ROOT.parent / "shared" / "fixtures" / "real"


def test_a_driver_error_behind_a_crash_loop_has_docker_s_owner_on_kubernetes() -> None:
    """A real ``kubectl describe pod`` (GFD in CrashLoopBackOff, last state StartError: nvidia-container-cli
    driver rpc error) and the same runtime's words as Docker reports them: one owner, infrastructure (the
    crash loop was the algorithm team's)."""
    reasons = explain((REAL / "pod-describe-gfd-crashloop-nvidia-container-cli-rpc-timeout.txt").read_text())
    kube = startup_category(reasons)
    docker = classify("failed to create shim task: OCI runtime create failed: runc create failed: unable to start "
                      "container process: error during container init: error running hook #0: error running hook: "
                      "exit status 1, stdout: , stderr: nvidia-container-cli.real: initialization error: driver rpc "
                      "error: timed out: unknown", phase="start")
    assert ([r.code for r in reasons][:2], kube, docker) == (
        ["crash_loop", "device_runtime_error"], "device_runtime_error", "oci_runtime_error")
    assert owner_category(kube, "startup") == owner_category(docker, "startup") == "infrastructure"


def test_an_image_tag_that_does_not_exist_has_one_owner_on_docker_and_kubernetes() -> None:
    """The kubelet's real ``Failed to pull image`` for a tag that does not exist (NotFound, not auth or
    network) and Docker's words for the same fact: ``image_not_found`` on both, the image owner's."""
    text = (REAL / "event-failed-pull-driver-image-tag-not-found-ubuntu21-04.txt").read_text()
    kube = startup_category([make_reason("kubelet", "image_pull_failed", text.strip())])
    docker = classify("manifest for nvcr.io/nvidia/driver:460.73.01-ubuntu21.04 not found: manifest unknown: "
                      "manifest unknown", phase="start")
    assert (kube, docker) == ("image_not_found", "image_not_found")
    assert owner_category(kube, "startup") == "platform"
    assert owner_category(kube, "startup", image_owner="algorithm") == "algorithm"
    network = startup_category([make_reason("kubelet", "image_pull_failed", 'Failed to pull image "x": dial tcp: '
                                             "lookup registry-1.docker.io: no such host")])
    assert (network, classify("dial tcp: lookup registry-1.docker.io: no such host", phase="start")) == (
        "registry_unreachable", "registry_unreachable")


def test_oom_at_startup_has_one_owner_on_docker_and_kubernetes() -> None:
    """Docker's startup check names an OOM-killed container ``startup_oom_killed``; the kubelet's
    ``OOMKilled`` state of a pod that did not start gets the same category (it was the algorithm's)."""
    reasons = container_reasons("main", {"reason": "OOMKilled", "message": "", "exit_code": "137"}, {})
    assert ([r.code for r in reasons], startup_category(reasons)) == (["oom_killed"], "startup_oom_killed")
    assert owner_category("startup_oom_killed", "startup") == "platform"
    assert owner_category("oom_killed", "model") == "algorithm"


def test_a_missing_interpreter_is_the_images_on_docker_and_local() -> None:
    docker = classify("OCI runtime exec failed: exec: \"python3\": executable file not found in $PATH",
                      phase="run", interpreter="python3")
    program = classify("OCI runtime exec failed: exec: \"/code/run.sh\": no such file or directory",
                       phase="run", interpreter="python3")
    assert (docker, program) == ("interpreter_missing", "entrypoint_missing")
    assert owner_category("interpreter_missing", "model") == "platform"
    assert owner_category("interpreter_missing", "model", image_owner="algorithm") == "algorithm"
    assert owner_category("entrypoint_missing", "model") == "algorithm"


def test_a_node_lost_under_startup_or_a_model_run_is_an_error_not_a_failure() -> None:
    """A NotReady node falsifies discovery's and scheduling's claims about its pool; the same node lost
    under startup or a model run (the Kubernetes engine's node check and watch) proves nothing about the
    image or the model: ``error``, the infrastructure's, whatever the engine reported."""
    got = {layer: (status_of("node_not_ready", "error", layer), owner_category("node_not_ready", layer))
           for layer in ("discovery", "scheduling", "startup", "model")}
    assert got == {"discovery": ("failed", "infrastructure"), "scheduling": ("failed", "infrastructure"),
                   "startup": ("error", "infrastructure"), "model": ("error", "infrastructure")}
    assert status_of("oom_killed", "error", "model") == "failed"
    assert status_of("a_hooks_own", "error", "model") == "error"


def test_an_untolerated_taint_has_one_owner_in_discovery_and_scheduling() -> None:
    assert owner_category("untolerated_taint", "discovery") == owner_category("untolerated_taint", "scheduling") \
        == "platform"


def test_evidence_json_roundtrip_keeps_causes() -> None:
    from pytest_hetero.evidence.model import Cause, Failure

    failure = Failure("business", "rules_error", "m", "risk-business", "business",
                      (Cause("rules_error", "risk-business", "business", "a"),
                       Cause("outputs_missing_metric", "ml", "algorithm", "b")))
    assert json.loads(json.dumps(failure.to_dict()))["causes"] == [
        {"category": "rules_error", "owner": "risk-business", "owner_category": "business", "message": "a"},
        {"category": "outputs_missing_metric", "owner": "ml", "owner_category": "algorithm", "message": "b"}]
