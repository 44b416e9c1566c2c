"""The failure table: every category an engine, reader or layer check can report has one owner there,
the docs are the table, and a real run's failures take their owner from it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from pytest_hetero.backends.docker.errors import RULES, classify
from pytest_hetero.backends.kubernetes.startup import startup_category
from pytest_hetero.judge.failures import (
    README_BEGIN,
    README_END,
    TABLE,
    markdown,
    owner_category,
    readme_table,
    status_of,
)
from pytest_hetero.pending import explain
from pytest_hetero.pending.model import CODES, make_reason
from pytest_hetero.pending.startup import ContainerState, container_reasons
from pytest_hetero.probes.payload import FAILURE as PAYLOAD_FAILURE
from pytest_hetero.pytest_plugin.item import STORAGE_ERRORS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pytest_hetero"
SCANNED = ("backends", "layers", "pytest_plugin", "pending", "truth", "serving")
"""The packages that report failure categories: engines, layer checks, the glue, the Pending readers, the truth
reader and the serving clients. (explain/'s ``category`` is a broad family, not a failure category; the
judge holds the table itself.)"""
PARAMS = ("category", "cause")
"""Parameter names that carry a failure category (``cause``: a Pending reason's, :mod:`pytest_hetero.pending`)."""
BROAD = frozenset({"Reason"})
"""Callables whose ``category`` is a broad family, not a failure category: a Pending :class:`Reason`'s
(capacity, placement, …); its failure category is its code (every code is checked) or its ``cause``."""


def _signature_index(args: ast.arguments, method: bool) -> int | None:
    names = [a.arg for a in [*args.posonlyargs, *args.args]]
    if method and names[:1] in (["self"], ["cls"]):
        names = names[1:]
    found = [names.index(p) for p in PARAMS if p in names]
    return found[0] if found else (-1 if any(a.arg in PARAMS for a in args.kwonlyargs) else None)


def category_callables(trees: list[ast.Module]) -> dict[str, int]:
    """Every function, method and class (its ``__init__``, or a dataclass/NamedTuple's fields in order) with a
    ``category``/``cause`` parameter → the positional index of it (-1: keyword only); a subclass without its
    own ``__init__`` takes its base's."""
    found: dict[str, int] = {}
    bases: dict[str, list[str]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                index = _signature_index(node.args, method=True)
                if index is not None and node.name != "__init__":
                    found.setdefault(node.name, index)
            elif isinstance(node, ast.ClassDef):
                bases[node.name] = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute)
                                    else "" for b in node.bases]
                init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
                fields = [n.target.id for n in node.body if isinstance(n, ast.AnnAssign)
                          and isinstance(n.target, ast.Name)]
                if init is not None:
                    index = _signature_index(init.args, method=True)
                elif any(p in fields for p in PARAMS):
                    index = next(fields.index(p) for p in PARAMS if p in fields)
                else:
                    continue
                if index is not None:
                    found[node.name] = index
    changed = True
    while changed:  # subclasses without their own __init__
        changed = False
        for name, parents in bases.items():
            inherited = next((found[b] for b in parents if b in found), None)
            if name not in found and inherited is not None:
                found[name], changed = inherited, True
    return found


class _Values:
    """What an expression can evaluate to, as string constants: literals, both arms of ``x if c else y``,
    ``a or b``, a name assigned in the enclosing function or at module level, and an item of (or ``.get`` on)
    a module-level dict or tuple -- a table of categories."""

    def __init__(self, module: ast.Module) -> None:
        self.module = {t.id: n.value for n in module.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                       for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                       if isinstance(t, ast.Name) and n.value is not None}

    def of(self, node: ast.expr | None, scope: ast.AST | None, depth: int = 0) -> set[str]:
        if node is None or depth > 6:
            return set()
        if isinstance(node, ast.Constant):
            return {node.value} if isinstance(node.value, str) else set()
        if isinstance(node, ast.IfExp):
            return self.of(node.body, scope, depth + 1) | self.of(node.orelse, scope, depth + 1)
        if isinstance(node, ast.BoolOp):
            return set().union(*(self.of(v, scope, depth + 1) for v in node.values))
        if isinstance(node, ast.Name):
            local = [n.value for n in ast.walk(scope) if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in n.targets)] if scope is not None else []
            if local:
                return set().union(*(self.of(v, scope, depth + 1) for v in local))
            return self.table(self.module.get(node.id), depth)
        if isinstance(node, ast.Subscript):
            return self.of(node.value, scope, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            return self.of(node.func.value, scope, depth + 1) | set().union(
                *(self.of(a, scope, depth + 1) for a in node.args[1:]))
        return set()

    def table(self, node: ast.expr | None, depth: int) -> set[str]:
        if isinstance(node, ast.Dict):
            return set().union(set(), *(self.of(v, None, depth + 1) for v in node.values))
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return set().union(set(), *(self.of(v, None, depth + 1) for v in node.elts))
        return self.of(node, None, depth + 1) if node is not None else set()


def _reported(node: ast.AST, values: _Values, scope: ast.AST | None, callables: dict[str, int]) -> set[str]:
    """The categories one node reports (see :func:`emitted_in`)."""
    got: set[str] = set()
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in BROAD:
            return got
        index = callables.get(name)
        if index is not None and 0 <= index < len(node.args):
            got |= values.of(node.args[index], scope)
        for kw in node.keywords:
            if kw.arg in PARAMS:
                got |= values.of(kw.value, scope)
            elif kw.arg == "causes" and isinstance(kw.value, (ast.Tuple, ast.List)):
                got |= {c for pair in kw.value.elts if isinstance(pair, ast.Tuple) and pair.elts
                        for c in values.of(pair.elts[0], scope)}
    elif isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value in PARAMS:
                got |= values.of(value, scope)
    return got


def emitted_in(paths: list[Path], callables: dict[str, int] | None = None) -> dict[str, str]:
    """Every failure category the modules at ``paths`` can report → where: an argument (positional or
    keyword) of a callable with a ``category``/``cause`` parameter (:func:`category_callables`, over
    ``paths`` and the package), each ``(category, message)`` of a ``causes=`` keyword, a ``"category"`` /
    ``"cause"`` value of a dict literal, and what each resolves to through names and tables of categories."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in paths}
    if callables is None:
        callables = category_callables(list(trees.values()))
    found: dict[str, str] = {}
    for path, tree in trees.items():
        values = _Values(tree)
        scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        enclosing = {id(child): scope for scope in scopes for child in ast.walk(scope)}
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        for node in ast.walk(tree):
            got = _reported(node, values, enclosing.get(id(node)), callables)
            for category in got:
                found.setdefault(category, f"{where}:{getattr(node, 'lineno', 0)}")
    return found


def emitted() -> dict[str, str]:
    """Every failure category the engines, layer checks, glue, Pending readers, truth reader and serving
    clients can report (:func:`emitted_in` over :data:`SCANNED`), and every Pending code."""
    paths = [p for folder in SCANNED for p in sorted((PACKAGE / folder).rglob("*.py"))]
    callables = category_callables([ast.parse(p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))
                                    if "explain" not in p.parts])
    found = emitted_in(paths, callables)
    for rule in RULES:
        found.setdefault(rule.category, "backends/docker/errors.RULES")
    for code in CODES:
        found.setdefault(code, "pending/model.CODES")
    for category in [*PAYLOAD_FAILURE.values(), *STORAGE_ERRORS.values()]:
        found.setdefault(category, "probes/payload.FAILURE, pytest_plugin/item.STORAGE_ERRORS")
    return found


def test_every_category_an_engine_or_reader_emits_is_in_the_table() -> None:
    found = emitted()
    assert len(found) >= 150  # the walk still finds the raisers (a rename would make it find nothing)
    assert found["rollout_not_complete"].startswith("pytest_hetero/backends/kubernetes/serving.py")
    assert {c: where for c, where in found.items() if c not in TABLE} == {}


PLANTED = """
from dataclasses import dataclass

STUCK = {"Pending": "planted_table_value", "Unknown": "planted_table_other"}


@dataclass
class Finding:
    message: str
    category: str


def wait_for(name, timeout_s, category, *, cause=None):
    raise RuntimeError(name)


class Stuck(ActionFailed):
    pass


def run(state, slow):
    wait_for("x", 1.0, "planted_positional")
    wait_for("x", 1.0, category="planted_keyword", cause="planted_cause")
    kind = "planted_local_a" if slow else "planted_local_b"
    raise Stuck(f"{state}", STUCK.get(state, kind)) from Finding("m", "planted_field") and {
        "category": "planted_dict"}
"""


def test_the_walk_finds_a_category_passed_as_an_argument_keyword_or_table(tmp_path: Path) -> None:
    """A planted module reports categories the table lacks in every way the package reports one; the walk
    names each (the serving engine's ``rollout_not_complete``, passed to ``wait_rolled_out``, was missed)."""
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED)
    callables = category_callables([ast.parse((PACKAGE / "backends" / "protocol.py").read_text()),
                                    ast.parse(PLANTED)])
    assert {callables["wait_for"], callables["Finding"], callables["Stuck"], callables["ActionFailed"]} == {2, 1}
    found = emitted_in([planted], callables)
    assert {c for c in found if c not in TABLE} == {
        "planted_positional", "planted_keyword", "planted_cause", "planted_local_a", "planted_local_b",
        "planted_table_value", "planted_table_other", "planted_field", "planted_dict"}
    assert found["planted_positional"] == f"{planted}:22"


def test_the_table_names_no_role_that_is_not_a_team() -> None:
    assert {row.owner for row in TABLE.values()} == {"platform", "infrastructure", "algorithm", "business", "image"}
    assert {row.status for row in TABLE.values()} == {"failed", "error"}


def test_docs_are_the_table() -> None:
    assert (ROOT / "docs" / "failure-owners.md").read_text() == markdown()


def test_the_readme_lists_every_category_with_its_owner_category_as_the_table_does() -> None:
    """The README's block is the table's (regenerate: python -m pytest_hetero.judge.failures --readme), and every
    category of the table appears there once, in its owner category's row."""
    readme = (ROOT / "README.md").read_text()
    start, end = readme.index(README_BEGIN), readme.index(README_END) + len(README_END)
    assert readme[start:end] == readme_table()
    rows = {line.split(" | ")[0].strip("| "): line for line in readme[start:end].splitlines()
            if line.startswith("| ") and not line.startswith("| owner")}
    for category, row in TABLE.items():
        assert [owner for owner, line in rows.items() if f"`{category}`" in line] == [row.owner], category


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
    assert kube is not None and docker is not None
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
    reasons = container_reasons("main", ContainerState(reason="OOMKilled", message="", exit_code="137"),
                                ContainerState())
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
