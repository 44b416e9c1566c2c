"""What a loaded matrix points at, checked without running: the files behind its models and
datasets, the model code folders, the acceptance rules files and the entrypoint placeholders
(``hetero lint``; a run finds the same problems only when it reaches the layer that needs them).

Each problem is a :class:`~pytest_hetero.errors.MatrixError` naming the matrix file and the
line of the model or dataset entry (``Model.line`` / ``Dataset.line``), the field, and a hint;
a broken acceptance rules file gives its own problems, at their lines in that file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from string import Formatter

from pytest_hetero.errors import CaseError, HeteroError, Location, MatrixError, RulesInvalid
from pytest_hetero.matrix.acceptance import AcceptanceRule, load_rules
from pytest_hetero.matrix.model import Dataset, Matrix, Model

Report = Callable[[str, int, str, str], None]
"""Records one problem: (message, entry line, field, hint)."""
PLACEHOLDERS: tuple[str, ...] = ("python", "code", "model", "dataset", "outputs", "provider")
"""Entrypoint placeholders the backends substitute (see ``backends.base.render_entrypoint``)."""
KNOWN = " ".join("{" + p + "}" for p in PLACEHOLDERS)


CHUNK = 1024 * 1024


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks. Raises OSError when unreadable."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def display(path: Path) -> str:
    """``path`` relative to the working directory when under it, else as given (as load_matrix names it)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def reference_problems(matrix: Matrix, *, digests: bool = False) -> list[HeteroError]:
    """Every problem of what ``matrix`` references, in entry order (empty when all is well).

    Checks: each model file (not for a served model that declares none) and dataset file is a
    file; each model ``code`` is a folder; each acceptance file exists and loads with
    :func:`~pytest_hetero.matrix.acceptance.load_rules` (its problems are returned as they are, located in
    that file); each entrypoint placeholder is one of :data:`PLACEHOLDERS`. With ``digests``,
    each file's sha256 is computed and compared with the declared one (both named). Raises
    nothing for bad content; an unreadable file is reported as a problem.
    """
    file = display(matrix.path)
    problems: list[HeteroError] = []

    def err(message: str, line: int, field: str, hint: str) -> None:
        problems.append(MatrixError(message, Location(file, line, 0, field), hint))

    for i, model in enumerate(matrix.models):
        _model_references(err, model, f"spec.models[{i}:{model.name}]", digests)
    for i, dataset in enumerate(matrix.datasets):
        where = f"spec.datasets[{i}:{dataset.name}]"
        _file(err, f"dataset '{dataset.name}'", dataset.path, dataset.sha256, dataset.line, f"{where}.uri",
              digests)
        _truth_references(err, dataset, where, digests)
        if dataset.acceptance is None:
            continue
        if not os.path.lexists(dataset.acceptance) or dataset.acceptance.is_dir():
            state = "is a folder, not a file" if dataset.acceptance.is_dir() else "not found"
            err(f"acceptance file of dataset '{dataset.name}' {state}: {dataset.acceptance}", dataset.line,
                f"{where}.acceptance", "point acceptance: at an AcceptanceRules YAML file "
                "(relative to the matrix file's folder)")
            continue
        try:
            rules = load_rules(dataset.acceptance)  # the safe reader names a FIFO, device, link loop or giant
        except RulesInvalid as exc:
            problems.extend(_relocated(p) for p in exc.problems)
            continue
        except CaseError as exc:
            problems.append(_relocated(exc))
            continue
        _rule_task_problems(err, dataset, rules, where)
    return problems


def _truth_references(err: Report, dataset: Dataset, where: str, digests: bool) -> None:
    """A separate labels file exists (and has its sha256 with ``digests``); with ``digests`` the truth is also
    read as the business layer reads it (columns present, ids unique, labels usable)."""
    truth = dataset.truth
    if truth is None:
        return
    if truth.separate:
        _file(err, f"labels of dataset '{dataset.name}'", truth.path, truth.sha256, dataset.line,
              f"{where}.truth.labels.uri", digests)
    if digests and truth.path.is_file():
        from pytest_hetero.matrix.truth_table import TruthError, read_truth

        try:
            read_truth(truth)
        except TruthError as exc:
            if exc.category != "truth_changed":  # the sha256 check above named it already
                err(exc.message, dataset.line, f"{where}.truth", "point truth.target and truth.id at columns "
                    "of the file, with one row per id")


def _rule_task_problems(err: Report, dataset: Dataset, rules: list[AcceptanceRule], where: str) -> None:
    """A rule over a gate metric needs truth, of the task kind the metric belongs to."""
    from pytest_hetero.matrix.gate_metrics import task_of

    for rule in rules:
        if rule["kind"] != "metric" or rule["self_reported"]:
            continue
        task = task_of(str(rule["metric"]))
        if task is None:
            continue
        if dataset.truth is None:
            err(f"rule '{rule['name']}' of {dataset.acceptance} judges {rule['metric']}, which the gate computes "
                f"from truth, and dataset '{dataset.name}' declares none", dataset.line, f"{where}.truth",
                "add truth: {task: classification, target: <label column>, id: <id column>}")
        elif task != dataset.truth.task:
            err(f"rule '{rule['name']}' of {dataset.acceptance} judges {rule['metric']}, a {task} metric, and "
                f"dataset '{dataset.name}' is a {dataset.truth.task} task", dataset.line, f"{where}.truth.task",
                f"use a {dataset.truth.task} metric, or correct truth.task")
        elif rule["slice"] and next(iter(rule["slice"])) not in dataset.truth.slices:
            column = next(iter(rule["slice"]))
            err(f"rule '{rule['name']}' of {dataset.acceptance} judges {rule['metric']} over the rows where "
                f"{column} is {rule['slice'][column]!r}, and dataset '{dataset.name}' reads no column {column!r} "
                "beside its truth", dataset.line, f"{where}.truth.slices", f"add truth.slices: [{column}]")


def _model_references(err: Report, model: Model, where: str, digests: bool) -> None:
    """Report a model's missing file or code folder and its unknown entrypoint placeholders."""
    if model.serving is None or model.sha256:
        _file(err, f"model '{model.name}'", model.path, model.sha256, model.line, f"{where}.uri", digests)
    if model.code is not None and model.serving is None:
        if not model.code.exists():
            err(f"model '{model.name}' code folder not found: {model.code}", model.line, f"{where}.code",
                "check code: (relative to the matrix file's folder)")
        elif not model.code.is_dir():
            err(f"model '{model.name}' code is a file, not a folder: {model.code}", model.line,
                f"{where}.code", "point code: at the folder the entrypoint's {code} stands for")
    for j, arg in enumerate(model.entrypoint):
        try:
            unknown = _unknown_placeholders(arg)
        except ValueError:
            err(f"model '{model.name}' entrypoint argument {arg!r} has an unbalanced brace", model.line,
                f"{where}.entrypoint[{j}]", "write {{ and }} for a literal brace")
            continue
        for name in unknown:
            err(f"model '{model.name}' entrypoint uses unknown placeholder {name}", model.line,
                f"{where}.entrypoint[{j}]", f"known: {KNOWN}, each a plain name without format spec or "
                "conversion; write {{ and }} for a literal brace")


def _file(report: Report, what: str, path: Path, declared: str, line: int, field: str, digests: bool) -> None:
    if not path.exists():
        report(f"{what} file not found: {path}", line, field,
               "check uri: (relative to the matrix file's folder)")
    elif not path.is_file():
        report(f"{what} uri is a folder, not a file: {path}", line, field,
               "point uri: at the file itself (its sha256 is of that file)")
    elif digests and declared:
        try:
            observed = file_sha256(path)
        except OSError as exc:
            report(f"{what} file cannot be read: {exc.strerror}", line, field, "check its permissions")
            return
        if observed != declared:
            report(f"{what} sha256 mismatch: matrix declares {declared}, file {path} has {observed}", line,
                   f"{field[:-len('.uri')]}.sha256",
                   "update sha256 if the file changed on purpose (`sha256sum FILE`), else restore the file")


def _unknown_placeholders(arg: str) -> list[str]:
    """Placeholders of one entrypoint argument that are not in PLACEHOLDERS, as written (``{gpu_id}``).

    A known name with a format spec or conversion (``{python:>200000000}``, ``{model!r}``) is reported
    too: placeholders are plain names, substituted as they are. Raises ValueError for a lone ``{`` or
    ``}`` (str.format would fail on it at run time).
    """
    out = []
    for _, name, spec, conversion in Formatter().parse(arg):
        if name is None:
            continue
        written = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        if name not in PLACEHOLDERS or spec or conversion:  # {python:>200000000} would pad to 200 MB
            out.append(written if len(written) <= 80 else written[:77] + "...")
    return out


def _relocated(exc: HeteroError) -> HeteroError:
    loc = exc.location
    where = Location(display(Path(loc.file)), loc.line, loc.column, loc.field)
    return CaseError(exc.message, where, exc.hint)
