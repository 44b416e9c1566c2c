"""Load a ValidationMatrix YAML file: syntax → JSON Schema → references → :class:`Matrix`.

Every problem becomes a :class:`~pytest_hetero.errors.MatrixError` naming file, line, column
and field, with a hint (``did you mean …`` for unknown keys and names). All problems of a
file are gathered into one :class:`~pytest_hetero.errors.MatrixInvalid`.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import msgspec

from pytest_hetero import LAYERS
from pytest_hetero.declared import resolve
from pytest_hetero.durations import parse_duration
from pytest_hetero.errors import Location, MatrixError, MatrixInvalid
from pytest_hetero.matrix import taskqueues
from pytest_hetero.matrix.defaults import (
    DatasetSpec,
    ImageSpec,
    LabelsSpec,
    ModelSpec,
    ResourceSpec,
    RollbackSpec,
    ServingSpec,
    Spec,
    complete,
    probe_spec,
)
from pytest_hetero.matrix.document import MatrixDoc, ReserveDoc
from pytest_hetero.matrix.governance import Names, reserve_spec
from pytest_hetero.matrix.model import (
    Auth,
    Coverage,
    Dataset,
    Dimension,
    ExcludeRule,
    GovernanceProbe,
    Image,
    LoadSettings,
    Matrix,
    Model,
    Profile,
    Reserve,
    Resource,
    Rollback,
    Serving,
    Tenant,
    Truth,
)
from pytest_hetero.matrix.reference import Node as SchemaNode
from pytest_hetero.matrix.reference import schema
from pytest_hetero.matrix.training import parse_training
from pytest_hetero.matrix.yamlnodes import MAX_BYTES, Positions, dotted, parse_yaml, read_yaml
from pytest_hetero.safeio import Unreadable, read_file, read_local, resolved
from pytest_hetero.usercache import cache_dir, installed_files

if TYPE_CHECKING:  # annotations only: jsonschema is imported when a matrix is validated
    from jsonschema.exceptions import ValidationError


@lru_cache(maxsize=1)
def matrix_schema() -> SchemaNode:
    """The JSON Schema (draft 2020-12) of ValidationMatrix v1 shipped in the package (read once)."""
    return schema()


MAX_DURATION_S = 7 * 24 * 3600.0
"""Longest layer timeout accepted (seconds); longer ones would overflow timers and hide hangs."""


TYPE_WORDS = {
    "number": "a number (e.g. 2 or 0.5, without quotes)",
    "integer": "a whole number (e.g. 4, without quotes)",
    "string": "a string (quote values YAML reads otherwise, e.g. '1.0', 'yes', 'null')",
    "object": "a mapping: 'key: value' lines indented under this key",
    "array": "a list: one '- item' line per entry, or [a, b]",
    "boolean": "true or false",
}
"""JSON Schema type name → how to write it in YAML (for :func:`type_hint`)."""


def type_hint(expected: str | list[str], instance: object) -> str:
    """The fix for a JSON Schema ``type`` error: what to write instead of ``instance``."""
    names = [expected] if isinstance(expected, str) else list(expected)
    wanted = " or ".join(TYPE_WORDS.get(n, n) for n in names)
    if instance is None:
        return f"the value is empty (YAML null); write {wanted}, or remove the key"
    if isinstance(instance, str) and set(names) & {"number", "integer"} and _numeric_text(instance):
        return (f"YAML reads {instance} as text, not a number (an exponent needs a dot, 1.0e3, and the number must "
                f"be finite); write {TYPE_WORDS['number' if 'number' in names else 'integer'].split(' (')[0]} such "
                "as 1000 or 1.0e3")
    return f"write {wanted}"


def _numeric_text(text: str) -> bool:
    """Whether ``text`` reads as a number to Python though YAML 1.1 read it as a string (``1e3``, ``1e309``)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def backend_location(matrix_path: Path | str, name: str, matrix_backend: str) -> Location:
    """Where backend ``name`` was asked for: the line and column of ``spec.target.backend`` in the matrix
    file when it is the matrix's (line 0 when the file no longer reads), else the ``--hetero-backend``
    option that overrode it."""
    if name != matrix_backend:
        return Location("--hetero-backend", 0, 0, "")
    try:
        _, pos = read_yaml(Path(matrix_path), MatrixError)
        line, col = pos.of(("spec", "target", "backend"))
    except (MatrixError, OSError):
        line, col = 0, 0
    return Location(str(matrix_path), line, col, "spec.target.backend")


PATTERN_HINTS = {
    "^[0-9]+(\\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?$":
        "write a Kubernetes quantity: a number with an optional unit m, k, M, G, T, Ki, Mi, Gi or Ti (e.g. 1, 500m, "
        "16Gi)",
    "^(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9.-]+):[0-9]{1,5}$":
        "write host:port, an IPv6 host in brackets (e.g. 203.0.113.10:443, proxy.example.com:3128, [2001:db8::1]:443)",
}
"""Schema pattern → the fix in words (instead of the regular expression)."""
REDACT_HINT = ("spec.redact is a list of {kind, pattern}: kind a lowercase name shown as [REDACTED:<kind>], pattern a "
               "regular expression, e.g. redact: [{kind: db-password, pattern: 'pw=\\S+'}]")
"""The fix named for any problem under ``spec.redact``."""


def _unknown_keys(best: Any, path: tuple[Any, ...], data: Any, pos: Positions, file: str) -> list[MatrixError]:
    """One problem per key of the mapping at ``path`` that its schema does not allow (``best``: the
    ``additionalProperties`` error), at the key's position, with a ``did you mean`` hint."""
    allowed = sorted(best.schema.get("properties", {}))
    extra = sorted(set(best.instance) - set(allowed)) if isinstance(best.instance, dict) else []
    out = []
    for key in extra:
        where = (*path, key)
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(allowed)}"
        line, col = pos.of(where, key=True)
        out.append(MatrixError(f"unknown key '{key}'", Location(file, line, col, dotted(where, data)), hint))
    return out


@lru_cache(maxsize=1)
def _schema_digest() -> str:
    return hashlib.sha256(json.dumps(matrix_schema(), sort_keys=True).encode()).hexdigest()


VALIDATION_RULES = "finite-numbers"
"""The gate's own rules on top of the schema (:func:`finite_number`): a pass remembered before a rule was added is
not a pass under it."""
VALIDATOR_PACKAGES = ("jsonschema", "referencing", "jsonschema_specifications")
"""Packages whose code decides a schema validation (the validator, ``$ref`` resolution, the metaschemas)."""


def validated_key(data: Any) -> str | None:
    """The sha256 (hex) naming one schema validation: the schema shipped in the package, the validator
    packages' installed files (:data:`VALIDATOR_PACKAGES`: path, size, mtime and inode of each
    ``__init__.py`` and its folder, read without importing them: a reinstall or upgrade changes them)
    and the document as ``repr`` of the parsed YAML (``'2024-01-01'`` and ``datetime.date(2024, 1, 1)``
    differ; a type whose ``repr`` varies between processes only costs a miss). None when a validator
    package is not found (the validation then runs and reports it)."""
    digest = hashlib.sha256(f"{_schema_digest()}\0{VALIDATION_RULES}".encode())
    for name in VALIDATOR_PACKAGES:
        found = installed_files(name)
        if found is None:
            return None
        digest.update(f"\0{name}\0{found}".encode())
    digest.update(b"\0" + repr(data).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def validated_cache() -> Path:
    """``$XDG_CACHE_HOME/pytest-hetero/validated`` (default ``~/.cache``): one empty file per document
    that passed the schema (named by :func:`validated_key`)."""
    return cache_dir("validated")


def _schema_problems(data: Any, pos: Positions, file: str) -> list[MatrixError]:
    """Every schema problem of ``data``, each at its line and column. A document that passed once (same
    content, schema and validator: :func:`validated_key`) is not validated again: its mark under
    :func:`validated_cache` says so, and ``jsonschema`` is not even imported (about 0.1 s of each
    command). Only a pass is remembered; a document with problems is validated every time."""
    key = validated_key(data)
    mark = validated_cache() / key if key is not None else None
    if mark is not None and mark.is_file():
        return []
    problems = _validate(data, pos, file)
    if mark is not None and not problems:
        try:
            mark.parent.mkdir(parents=True, exist_ok=True)
            mark.touch()
        except OSError:  # a read-only home: validated every time, as before
            pass
    return problems


def _value_hint(best: ValidationError) -> str:
    """What to write instead of the value a jsonschema ``ValidationError`` (``best``) refused, for the validators
    that judge one value (``const``/``enum``, ``type``, ``oneOf``/``anyOf`` with ``examples``, bounds and
    patterns); empty for any other."""
    if best.validator in ("const", "enum"):
        return f"use one of: {best.validator_value!r}"
    if best.validator == "type":  # validator_value: the schema's "type", a name or a list of names
        return type_hint(cast("str | list[str]", best.validator_value), best.instance)
    if best.validator in ("oneOf", "anyOf") and isinstance(best.schema, dict) and best.schema.get("examples"):
        # no branch fits (jsonschema: "None is not valid under any of the given schemas"): show the forms
        return "write it like " + " or ".join(json.dumps(x) for x in best.schema["examples"])
    if best.validator in ("minimum", "exclusiveMinimum", "maximum", "minLength", "minItems", "pattern"):
        return PATTERN_HINTS.get(str(best.validator_value),
                                 f"change the value to satisfy {best.validator} {best.validator_value!r}")
    return ""


def finite_number(checker: object, instance: object) -> bool:
    """The JSON Schema type ``number`` for the matrix: an int or a finite float, never a bool. YAML's ``.nan`` and
    ``.inf`` are floats, and they satisfy every bound a schema sets (NaN compares false with each, infinity with any
    minimum): a share of ``.nan``, a ``min_cpus`` of ``.nan`` (met by any node) or a wait of ``.inf`` would load."""
    if isinstance(instance, bool):
        return False
    return isinstance(instance, int) or (isinstance(instance, float) and math.isfinite(instance))


def _validate(data: Any, pos: Positions, file: str) -> list[MatrixError]:
    import jsonschema

    base = jsonschema.Draft202012Validator
    finite = jsonschema.validators.extend(  # type: ignore[no-untyped-call]  # jsonschema leaves extend unannotated
        base, type_checker=base.TYPE_CHECKER.redefine("number", finite_number))
    validator = finite(matrix_schema())
    problems: list[MatrixError] = []
    for err in validator.iter_errors(data):
        # oneOf/anyOf: the most specific sub-error reads best
        best = jsonschema.exceptions.best_match([err])
        path = tuple(best.absolute_path)
        field = dotted(path, data)
        hint = ""
        message = best.message
        key_pos = False
        if best.validator == "additionalProperties":
            extra = _unknown_keys(best, path, data, pos, file)
            if extra:  # every unknown key, each at its own line and column
                problems += extra
                continue
        elif best.validator == "required":
            hint = "add the missing field"
            missing = re.findall(r"'([^']+)' is a required property", best.message)
            if missing and missing[0] == "sha256":
                hint = "add sha256: <64 hex digits> (compute it with `sha256sum FILE`)"
        elif best.validator == "type" and isinstance(best.instance, float) and not math.isfinite(best.instance):
            message = f"{best.instance} is not a finite number"
            hint = "write a finite number (YAML's .nan and .inf are not values the gate can use)"
        elif path and path[-1] == "timeout":
            message = f"bad duration {best.instance!r}"
            hint = "write a duration like 30, '90s', '5m' or '1m30s'"
        elif best.validator == "pattern" and path and path[-1] == "sha256":
            message = f"sha256 must be 64 lowercase hex digits, got {best.instance!r}"
            hint = "compute it with `sha256sum FILE`"
        elif best.validator == "pattern" and path and path[-1] == "name":
            hint = "use lowercase letters, digits, '-', '.', '_' (DNS-label style)"
        else:
            hint = _value_hint(best)
        hint = REDACT_HINT if path[:2] == ("spec", "redact") else hint  # an entry's shape is what helps
        line, col = pos.of(path, key=key_pos)
        problems.append(MatrixError(message, Location(file, line, col, field), hint))
    return problems


def _reference_problems(data: MatrixDoc, spec: Spec, pos: Positions, file: str) -> list[MatrixError]:
    """Problems the schema cannot see: duplicate names, exclude rules naming unknown entries, timeouts
    out of range, bad redaction patterns, model entrypoints, unknown profile layers. ``spec``: ``data``'s spec
    with its defaults filled (:func:`~pytest_hetero.matrix.defaults.complete`)."""

    def error(path: tuple[Any, ...], message: str, hint: str, field: bool = True) -> MatrixError:
        line, col = pos.of(path)
        return MatrixError(message, Location(file, line, col, dotted(path, data) if field else ""), hint)

    problems, names = _name_problems(spec, error)
    dims: tuple[Dimension, ...] = ("resource", "image", "model", "dataset")
    for i, rule in enumerate(spec["exclude"]):
        for dim in dims:
            if dim in rule and rule[dim] not in names[dim]:
                close = difflib.get_close_matches(rule[dim], names[dim], n=1)
                hint = f"did you mean '{close[0]}'?" if close else f"known {dim}s: {', '.join(names[dim])}"
                problems.append(error(("spec", "exclude", i, dim), f"exclude rule names unknown {dim} '{rule[dim]}'",
                                      hint))
    for layer, conf in spec["layers"].items():
        try:
            seconds = parse_duration(conf["timeout"])
        except ValueError:
            seconds = 0.0
        if not 0 < seconds <= MAX_DURATION_S:
            problems.append(error(("spec", "layers", layer, "timeout"),
                                  f"timeout {conf['timeout']!r} is {seconds:g} s, outside (0, 7 days]",
                                  "write a duration like '90s', '5m' or '2h'"))
    for i, redact in enumerate(spec["redact"]):
        try:
            re.compile(redact["pattern"])
        except re.error as exc:
            problems.append(error(("spec", "redact", i, "pattern"), f"bad regular expression: {exc}",
                                  "write a Python regular expression"))
    for i, model in enumerate(spec["models"]):
        problems.extend(_model_problems(model, ("spec", "models", i), pos, file, data))
    for i, dataset in enumerate(spec["datasets"]):
        problems.extend(truth_problems(dataset, ("spec", "datasets", i), error))
    from pytest_hetero.matrix.governance import governance_problems

    problems += governance_problems(spec, names, error)
    problems += taskqueues.task_queue_problems(spec, error)
    problems += [error(("spec", "profiles", pname, "layers", j), f"unknown layer '{layer}'",
                       f"layers are {', '.join(LAYERS)}", field=False)
                 for pname, prof in spec["profiles"].items()
                 for j, layer in enumerate(prof["layers"]) if layer not in LAYERS]
    return problems


def _name_problems(spec: Spec, error: Callable[[tuple[Any, ...], str, str], MatrixError]
                   ) -> tuple[list[MatrixError], Names]:
    """Duplicate resource/image/model/dataset names; and the names of each dimension, in order."""
    problems: list[MatrixError] = []
    names: Names = {"resource": [], "image": [], "model": [], "dataset": []}
    entries: tuple[tuple[Dimension, str, list[ResourceSpec] | list[ImageSpec] | list[ModelSpec] | list[DatasetSpec]],
                   ...] = (
        ("resource", "resources", spec["resources"]), ("image", "images", spec["images"]),
        ("model", "models", spec["models"]), ("dataset", "datasets", spec["datasets"]))
    for dim, key, listed in entries:
        for i, entry in enumerate(listed):
            if entry["name"] in names[dim]:
                problems.append(error(("spec", key, i, "name"), f"duplicate {dim} name '{entry['name']}'",
                                      f"give each {dim} a unique name"))
            names[dim].append(entry["name"])
    return problems, names


def _model_problems(model: ModelSpec, path: tuple[Any, ...], pos: Positions, file: str,
                    data: MatrixDoc) -> list[MatrixError]:
    """A model is run (entrypoint, uri, sha256) or served (serving with endpoint or deploy)."""
    def err(message: str, hint: str, *sub: Any) -> MatrixError:
        line, col = pos.of((*path, *sub))
        return MatrixError(message, Location(file, line, col, dotted((*path, *sub), data)), hint)

    serving = model["serving"]
    if serving is None:
        given = (("entrypoint", model["entrypoint"]), ("uri", model["uri"]), ("sha256", model["sha256"]))
        missing = [k for k, value in given if value is None]
        if missing == ["sha256"]:
            return [err(f"model '{model['name']}' has no sha256", "add sha256: <64 hex digits> "
                        "(compute it with `sha256sum FILE`)")]
        if missing:
            return [err(f"model '{model['name']}' has no {' or '.join(missing)} and no serving",
                        "give entrypoint, uri and sha256 to run the model, or serving: {protocol, "
                        "endpoint | deploy, model_name} to validate a running inference service")]
        return []
    problems = []
    if serving["endpoint"] is None and serving["deploy"] is None:
        problems.append(err(f"serving of model '{model['name']}' names neither endpoint nor deploy",
                            "add endpoint: http://HOST:PORT, or deploy: {kind: InferenceService, name: …}",
                            "serving"))
    if (model["uri"] is None) != (model["sha256"] is None):
        problems.append(err(f"model '{model['name']}' declares only one of uri and sha256",
                            "a served model's file is optional, but give both or neither"))
    rollback = serving["rollback"]
    if rollback is not None and rollback["endpoint"] is None and rollback["deploy"] is None \
            and serving["deploy"] is None:
        problems.append(err(f"rollback of model '{model['name']}' has no way to switch",
                            "add endpoint: (the previous version's URL) or deploy: (the object to patch; "
                            "default: serving.deploy)",
                            "serving", "rollback"))
    return problems


def _reserve(given: ReserveDoc | None) -> Reserve | None:
    """A reserved-inference probe's ``reserve`` with its defaults (window, duration, min_ready:
    :func:`~pytest_hetero.matrix.governance.reserve_spec`; no dataset or serving PriorityClass, error rate 0) and
    its durations in seconds."""
    if given is None:
        return None
    r = reserve_spec(given)
    return Reserve(model=r["model"], replicas=int(r["replicas"]), min_ready=int(r["min_ready"]),
                   burst={"priority_class": str(r["burst"]["priority_class"]), "pods": int(r["burst"]["pods"])},
                   p95_ms=float(r["p95_ms"]), window_s=parse_duration(r["window"]),
                   duration_s=parse_duration(r["duration"]),
                   dataset=r["dataset"], priority_class=r["priority_class"],
                   max_error_rate=float(r["max_error_rate"]))


def _rollback(given: RollbackSpec | None) -> Rollback | None:
    """A served model's ``rollback``: its version and deploy values as text, the endpoint None when absent."""
    if given is None:
        return None
    return Rollback(version=str(given["version"]), endpoint=given["endpoint"],
                    deploy={k: str(v) for k, v in given["deploy"].items()} if given["deploy"] is not None else None)


def _serving(raw: ServingSpec | None) -> Serving | None:
    if raw is None:
        return None
    given, load = raw["load"], LoadSettings()
    if "concurrency" in given:
        load = replace(load, concurrency=tuple(given["concurrency"]))
    if "requests" in given:
        load = replace(load, requests=given["requests"])
    if "duration" in given:
        load = replace(load, duration_s=parse_duration(given["duration"]))
    if "batch" in given:
        load = replace(load, batch=given["batch"])
    if "request_timeout" in given:
        load = replace(load, request_timeout_s=parse_duration(given["request_timeout"]))
    return Serving(
        protocol=raw["protocol"], model_name=raw["model_name"], version=str(raw["version"]),
        endpoint=raw["endpoint"],
        deploy={k: str(v) for k, v in raw["deploy"].items()} if raw["deploy"] is not None else None,
        task=raw["task"], auth=Auth(**raw["auth"]), load=load,
        rollback=_rollback(raw["rollback"]), options=dict(raw["options"]),
        ready_timeout_s=parse_duration(raw["ready_timeout"]) if raw["ready_timeout"] is not None else None)


PROJECT_MARKERS: tuple[str, ...] = ("pyproject.toml", ".git", ".hetero-root")
"""Files or folders that mark a project root; a matrix's paths must stay inside its project."""


def project_root(matrix_path: Path) -> Path | None:
    """Nearest ancestor folder of ``matrix_path`` holding a PROJECT_MARKERS entry, or None."""
    for folder in resolved(matrix_path).parents:
        if any((folder / marker).exists() for marker in PROJECT_MARKERS):
            return folder
    return None


def allowed_roots(root: Path) -> list[Path]:
    """The project root plus folders listed in ``$HETERO_ALLOW_PATHS`` (``os.pathsep``-separated)."""
    extra = [resolved(Path(p)) for p in os.environ.get("HETERO_ALLOW_PATHS", "").split(os.pathsep) if p.strip()]
    return [root, *extra]


def containment_root(matrix_path: Path) -> tuple[Path, str]:
    """The folder a matrix's paths must stay in, and how it was chosen: the matrix's project (the
    nearest folder above it with a PROJECT_MARKERS entry), else the matrix file's own folder. Always
    on: a matrix outside any project cannot reach ``../../etc/shadow`` either."""
    root = project_root(matrix_path)
    if root is not None:
        return root, f"the project root {root}"
    folder = resolved(matrix_path).parent
    return folder, (f"the matrix's folder {folder} (no {', '.join(PROJECT_MARKERS)} above the matrix, so its own "
                    "folder is the boundary)")


def _escaping_paths(data: MatrixDoc, spec: Spec, pos: Positions, file: str, matrix_path: Path) -> list[MatrixError]:
    """Model/dataset/code/acceptance paths that resolve (symlinks followed) outside the containment root
    (:func:`containment_root`) and every folder allowed by ``HETERO_ALLOW_PATHS``."""
    root, which = containment_root(matrix_path)
    roots = allowed_roots(root)
    problems = []
    paths: list[tuple[str, int, str, str | None]] = []  # (key, index, field, the path as written)
    for i, model in enumerate(spec["models"]):
        paths += [("models", i, "uri", model["uri"]), ("models", i, "code", model["code"])]
    for i, dataset in enumerate(spec["datasets"]):
        paths += [("datasets", i, "uri", dataset["uri"]), ("datasets", i, "acceptance", dataset["acceptance"])]
        labels = dataset["truth"]["labels"] if dataset["truth"] is not None else None
        if labels:
            paths.append(("datasets", i, "truth.labels.uri", labels["uri"]))
    for key, i, field, value in paths:
        if not isinstance(value, str) or "://" in value:
            continue
        target = resolved(matrix_path.parent / value)
        if not any(target == r or r in target.parents for r in roots):
            at = ("spec", key, i, *field.split("."))
            line, col = pos.of(at)
            problems.append(MatrixError(
                f"path {value!r} resolves to {target}, outside {which}",
                Location(file, line, col, dotted(at, data)),
                "keep models and data under the project, or allow the folder with "
                f"HETERO_ALLOW_PATHS (e.g. HETERO_ALLOW_PATHS={target.parent})"))
    return problems


def _hex(digest: str) -> str:
    return digest.split(":", 1)[-1]


def _truth(dataset: DatasetSpec, rel: Callable[[str | None], Path | None]) -> Truth | None:
    """The dataset's :class:`Truth` (None when it declares none): in its ``labels`` file when it names one,
    else in the dataset file (then with the dataset's sha256 and format)."""
    raw = dataset["truth"]
    if raw is None:
        return None
    labels = raw["labels"]
    source: LabelsSpec | DatasetSpec = labels if labels is not None else dataset
    found = rel(source["uri"])
    assert found is not None
    return Truth(task=raw["task"], target=raw["target"], id=raw["id"], path=found, sha256=_hex(source["sha256"]),
                 uri=source["uri"], format=source["format"], separate=labels is not None,
                 slices=tuple(raw["slices"]), json_schema=raw["json_schema"])


def truth_problems(dataset: DatasetSpec, at: tuple[Any, ...],
                   error: Callable[[tuple[Any, ...], str, str], MatrixError]) -> list[MatrixError]:
    """A truth that joins by id names its id column; one that names none says ``join: order``."""
    truth = dataset["truth"]
    if truth is None:
        return []
    join = truth["join"]
    if join == "order" and truth["id"] is not None:
        return [error((*at, "truth", "join"), "join: order with an id column: which one joins is unclear",
                      "drop id to join by row order, or drop join to join by id")]
    if truth["id"] is None and join != "order":
        return [error((*at, "truth"), "truth names no id column to join predictions on",
                      "add id: <column> (the outputs then carry ids beside predictions), or join: order (predictions "
                      "in the file's row order)")]
    return []


def _build(data: MatrixDoc, spec: Spec, path: Path, raw: bytes, pos: Positions, base: Path) -> Matrix:

    def rel(p: str | None) -> Path | None:
        return None if p is None else resolved(base / p)

    def line(*p: Any) -> int:
        return pos.of(p)[0]

    resources_ = tuple(Resource(
        name=r["name"], type=r["type"], vendor=r["vendor"],
        requests={k: str(v) for k, v in r["requests"].items()},
        limits={k: str(v) for k, v in r["limits"].items()},
        node_selector=dict(r["node_selector"]), tolerations=tuple(r["tolerations"]),
        queue=r["queue"], priority_class=r["priority_class"], expect=r["expect"].copy(),
        line=line("spec", "resources", i), coverage=Coverage.parse(r["coverage"]),
        model_runs=r["model_runs"], concurrency=r["concurrency"])
        for i, r in enumerate(spec["resources"]))
    images = tuple(Image(
        name=m["name"], reference=m["reference"], digest=m["digest"],
        for_types=tuple(m["for"]), line=line("spec", "images", i))
        for i, m in enumerate(spec["images"]))
    models = tuple(Model(
        name=m["name"], version=str(m["version"]), uri=m["uri"] or "", path=rel(m["uri"]) or base,
        sha256=_hex(m["sha256"] or ""), entrypoint=tuple(m["entrypoint"] or ()),
        runtime=m["runtime"], code=rel(m["code"]), line=line("spec", "models", i),
        serving=_serving(m["serving"]), task_type=m["task_type"],
        network=bool(m["network"]), training=parse_training(m["training"], base))
        for i, m in enumerate(spec["models"]))
    datasets = tuple(Dataset(
        name=d["name"], version=str(d["version"]), uri=d["uri"], path=rel(d["uri"]) or base,
        sha256=_hex(d["sha256"]), acceptance=rel(d["acceptance"]),
        sensitive=bool(d["sensitive"]), line=line("spec", "datasets", i), truth=_truth(d, rel))
        for i, d in enumerate(spec["datasets"]))
    layers = spec["layers"]
    timeouts = {layer: parse_duration(layers[layer]["timeout"]) for layer in LAYERS}
    output_limit = max(layers[layer]["output_limit_bytes"] for layer in LAYERS)
    exclude = tuple(ExcludeRule(match={k: str(v) for k, v in e.items() if k != "reason"},
                                reason=e["reason"], line=line("spec", "exclude", i))
                    for i, e in enumerate(spec["exclude"]))
    profiles = {n: Profile(name=n, layers=tuple(p["layers"]), representative=bool(p["representative"]),
                           repeat=int(p["repeat"]))
                for n, p in spec["profiles"].items()}
    gov, validation = spec["governance"], spec["validation"]
    tenants = tuple(Tenant(name=x["name"], namespace=x["namespace"], service_account=x["service_account"],
                           queue=x["queue"], cluster_queue=x["cluster_queue"],
                           line=line("spec", "governance", "tenants", i))
                    for i, x in enumerate(gov["tenants"]))
    probes = tuple(GovernanceProbe(
        name=x["name"], kind=x["kind"], resource=x["resource"], acting_as=x["as"], target=x["target"],
        image=x["image"], within={k: str(v) for k, v in x["within"].items()},
        above={k: str(v) for k, v in x["above"].items()}, high=x["high"], low=x["low"],
        reasons=tuple(x["expect"].get("reasons", ())),
        timeout_s=parse_duration(x["timeout"]) if x["timeout"] is not None else None,
        line=line("spec", "governance", "probes", i), reserve=_reserve(x["reserve"]),
        services=_strings(x["services"]), egress=_strings(x["egress"]), claims=_strings(x["claims"]),
        secrets=_strings(x["secrets"]), pull_secrets=_strings(x["pull_secrets"]))
        for i, x in enumerate(map(probe_spec, gov["probes"])))
    return Matrix(
        path=path, sha256=hashlib.sha256(raw).hexdigest(), raw=raw, name=data["metadata"]["name"],
        description=data["metadata"].get("description", ""),
        target=spec["target"].copy(), owners=spec["owners"], timeouts_s=timeouts,
        output_limit=int(output_limit), resources=resources_, images=images, models=models,
        datasets=datasets, exclude=exclude, profiles=profiles,
        redact=tuple((r["kind"], r["pattern"]) for r in spec["redact"]), source=data,
        tenants=tenants, probes=probes, task_queues=taskqueues.build(spec, line),
        validation_domain=validation["domain"], valid_for_s=parse_duration(validation["valid_for"]))


def load_matrix(path: str | Path, *, read_from: Path | None = None) -> Matrix:
    """Read, validate and build the matrix at ``path``; with ``read_from`` (a folder), its relative paths
    resolve from there and must stay in that folder's project, as if the file lay in it.

    Raises MatrixInvalid (a MatrixError) listing every problem with file:line:column, field
    and hint; never another exception for bad content. OSError-level problems (missing
    file) are also reported as MatrixError.
    """
    given = Path(path)
    path = resolved(given)
    placed = (resolved(read_from) / path.name) if read_from is not None else path
    display = _display(path)
    try:  # read once: what is parsed, digested, and later copied into the bundle are the same bytes
        try:
            raw = read_file(given, "the matrix", MAX_BYTES, MatrixError)
        except MatrixError:
            display = _display(resolved(given.parent) / given.name)  # the refusal names the path given, not
            raise                                                      # where its link leads (/dev/zero)
        data, pos = parse_yaml(raw, path, MatrixError)
    except MatrixError as exc:
        raise MatrixInvalid([MatrixError(exc.message, Location(display, exc.location.line,
                             exc.location.column, exc.location.field), exc.hint)]) from None
    except RecursionError:
        raise MatrixInvalid([MatrixError("document nests too deeply (brackets or indentation thousands of "
                                         "levels deep, or a recursive YAML alias)",
                             Location(display), "flatten the nesting; a matrix needs only a few levels")]) from None
    if not isinstance(data, dict):
        raise MatrixInvalid([MatrixError(f"top level is a {type(data).__name__}, not a mapping",
                             Location(display, 1, 1), "start with apiVersion: pytest-hetero/v1")])
    problems = _schema_problems(data, pos, display)
    if problems:
        raise MatrixInvalid(problems)
    doc = cast(MatrixDoc, data)  # the schema admitted it: its shape is MatrixDoc's
    spec = complete(doc["spec"])  # the documented defaults, filled once: the checks and the build subscript
    problems = _reference_problems(doc, spec, pos, display) + _escaping_paths(doc, spec, pos, display, placed)
    if problems:
        raise MatrixInvalid(problems)
    matrix = _build(doc, spec, path, raw, pos, placed.parent)
    if placed != path:
        matrix = replace(matrix, read_from=placed.parent)
    for dataset in matrix.datasets:  # the rules that decide the run are read now, once, like the matrix
        if dataset.acceptance is not None and dataset.acceptance not in matrix.pinned:
            with contextlib.suppress(Unreadable):  # lint and the business item name why it does not read
                matrix.pinned[dataset.acceptance] = read_local(dataset.acceptance, MAX_BYTES)
    return matrix


def load_earlier_version(old: Path, current: list[Path]) -> Matrix:
    """The earlier version of a matrix for ``--hetero-affected-from``: ``old`` read beside its own files when it
    lies in a project of its own (a git worktree or checkout of the base branch); otherwise — a copy made with
    ``git show BASE:matrices/m.matrix.yaml > /tmp/old.yaml``, or one written into this project — its relative
    paths are read from the folder of the matrix among ``current`` with the same ``metadata.name``, where they
    were written. Raises MatrixInvalid as :func:`load_matrix`."""
    old = old.resolve()
    own = project_root(old)
    currents = [p.resolve() for p in current]
    if own is not None and all(project_root(p) != own for p in currents):
        return load_matrix(old)
    try:
        data, _ = read_yaml(old, MatrixError)
        name = _metadata_name(data)
    except MatrixError:
        name = None
    for candidate in currents:
        try:
            other, _ = read_yaml(candidate, MatrixError)
        except MatrixError:
            continue
        if name is not None and _metadata_name(other) == name:
            return load_matrix(old, read_from=candidate.parent)
    return load_matrix(old)


class _Metadata(msgspec.Struct, frozen=True, kw_only=True):
    """``metadata`` as :func:`_metadata_name` reads it: the ``name`` (None when absent or null)."""

    name: str | None = None


class _Named(msgspec.Struct, frozen=True, kw_only=True):
    """A matrix document as :func:`_metadata_name` reads it: its ``metadata`` (None when absent or null)."""

    metadata: _Metadata | None = None


def _metadata_name(doc: object) -> str | None:
    """``metadata.name`` of a parsed YAML document not yet checked against the schema (None when the document is
    no mapping, or its ``metadata`` or the name is missing or of another type: the schema check of
    :func:`load_matrix` then says so)."""
    try:
        metadata = msgspec.convert(doc, _Named).metadata
    except msgspec.ValidationError:
        return None
    return metadata.name if metadata is not None else None


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _strings(names: list[str]) -> tuple[str, ...]:
    """A governance probe's list of names (network and data boundaries), as strings."""
    return tuple(str(v) for v in names)


resolve(__name__)
