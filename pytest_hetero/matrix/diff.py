"""What changed between two versions of one matrix, down to the items whose claims changed.

Two views of one change: :func:`dimension_changes` lists each resource, image, model or
dataset that was added, removed or changed (with the fields that differ, e.g. an image
``digest``), and :func:`changed_items` lists the items of the new plan whose claim differs
from the old plan's item with the same id: a new item (new resource, newly un-excluded
combination) or one whose dimension definitions changed. A change of ``spec.target``
changes every item.

Besides the matrix text, what its entries point at is compared (:func:`input_digests`): a model's
``code`` folder, a dataset's ``acceptance`` rules file, and a local environment (``venv:PATH`` or
``python:/path``: its installed distributions and ``pyvenv.cfg``). Paths resolve from each matrix
file's own folder, so the old matrix must sit beside its own files (a checkout or ``git worktree``
of the old revision). An input that cannot be compared counts as changed: one the old matrix's path
does not find (:data:`MISSING`), and one the old matrix names at the very path the new matrix does
(:data:`SAME_PATH`, code folders and acceptance rules: an ``OLD.matrix.yaml`` copied beside the new
one reads today's code, not the old revision's, so "unchanged" would be a guess). An environment is
compared as found today by both paths. :func:`compared` says, for the reason of an item left
out, what was compared.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_hetero.matrix.document import DatasetDoc, ImageDoc, ModelDoc, ResourceDoc
from pytest_hetero.matrix.expand import Plan
from pytest_hetero.matrix.model import Dimension, Matrix
from pytest_hetero.matrix.references import file_sha256

DIMENSION_KEYS: dict[Dimension, str] = {"resource": "resources", "image": "images", "model": "models",
                                        "dataset": "datasets"}
"""Dimension name → its list under ``spec``."""
_IGNORED = frozenset({"description"})


@dataclass(frozen=True)
class Change:
    """One dimension value that differs: ``kind`` is ``added``, ``removed`` or ``changed``;
    ``fields`` maps each differing field to ``(old, new)`` (empty unless ``changed``)."""

    dimension: str
    name: str
    kind: str
    fields: dict[str, tuple[Any, Any]]

    def describe(self) -> str:
        """One line, e.g. ``image py311 changed: digest sha256:aa… → sha256:bb…``."""
        if self.kind != "changed":
            return f"{self.dimension} {self.name} {self.kind}"
        parts = [f"{k} {_short(old)} → {_short(new)}" for k, (old, new) in sorted(self.fields.items())]
        return f"{self.dimension} {self.name} changed: " + "; ".join(parts)


def _short(value: Any) -> str:
    text = "(absent)" if value is None else str(value)
    return text if len(text) <= 40 or text in (MISSING, SAME_PATH) else text[:37] + "…"


BY_CONTENT: dict[Dimension, frozenset[str]] = {"resource": frozenset(), "image": frozenset(),
                                               "model": frozenset({"code"}), "dataset": frozenset({"acceptance"})}
"""Each dimension's entry fields compared by the content they name (:func:`input_digests`), not by their path text:
a code folder or rules file moved with the same content is no change, one edited at the same path is."""


def _definitions(matrix: Matrix, dim: Dimension) -> dict[str, dict[str, object]]:
    spec = matrix.source["spec"]
    listed: dict[Dimension, list[ResourceDoc] | list[ImageDoc] | list[ModelDoc] | list[DatasetDoc]] = {
        "resource": spec["resources"], "image": spec["images"], "model": spec["models"], "dataset": spec["datasets"]}
    entries = listed[dim]
    skip = _IGNORED | BY_CONTENT[dim]
    return {e["name"]: {k: v for k, v in e.items() if k not in skip or not isinstance(v, str)} for e in entries}


IGNORED_FILES = frozenset({"__pycache__", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
"""Folder names left out of a code folder's digest (caches and version control, not code)."""
MISSING = "(not found)"
"""Digest value of an input whose path finds nothing."""
SAME_PATH = "(the same path as the new matrix's: its old content is unknown)"
"""Old digest of an input the old matrix names at the same resolved path as the new matrix."""


def folder_sha256(folder: Path) -> str:
    """sha256 over every file under ``folder`` (relative path and content digest, sorted), leaving out
    :data:`IGNORED_FILES` and ``*.pyc``; :data:`MISSING` when ``folder`` does not exist. A file is
    digested as a folder of one."""
    if not folder.exists():
        return MISSING
    files = [folder] if folder.is_file() else sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix != ".pyc"
        and not IGNORED_FILES & set(p.relative_to(folder).parts))
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.relative_to(folder) if path != folder else path.name}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def environment_sha256(matrix: Matrix, reference: str) -> str | None:
    """sha256 of a local Python environment's ``pyvenv.cfg`` and installed distributions (``name==version``,
    sorted) for ``venv:PATH`` (relative to the matrix file) and ``python:/path/bin/python``; None for any
    other reference (``python:current`` is the interpreter running now; an OCI image has its digest);
    :data:`MISSING` when the environment is not found."""
    from importlib import metadata

    if reference.startswith("venv:"):
        root = (matrix.base / reference.split(":", 1)[1]).resolve()
    elif reference.startswith("python:") and reference != "python:current":
        root = Path(reference.split(":", 1)[1]).resolve().parent.parent
    else:
        return None
    if not root.is_dir():
        return MISSING
    sites = [str(p) for p in sorted(root.glob("lib*/python*/site-packages"))]
    dists = sorted({f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions(path=sites)
                    if d.metadata["Name"]})
    cfg = root / "pyvenv.cfg"
    text = (cfg.read_text(encoding="utf-8", errors="replace") if cfg.is_file() else "") + "\n".join(dists)
    return hashlib.sha256(text.encode()).hexdigest()


def input_paths(matrix: Matrix) -> dict[tuple[str, str], dict[str, str]]:
    """(dimension, name) → {input: resolved path} of the project's own inputs :func:`input_digests`
    digests: code folders and acceptance rules. Environments are left out: an interpreter or venv is
    named at the same path by every revision, so the same path there says nothing about its content."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    for model in matrix.models:
        if model.code is not None:
            out[("model", model.name)] = {"code folder": str(Path(model.code).resolve())}
    for dataset in matrix.datasets:
        if dataset.acceptance is not None:
            out[("dataset", dataset.name)] = {"acceptance rules": str(Path(dataset.acceptance).resolve())}
    return out


def input_digests(matrix: Matrix) -> dict[tuple[str, str], dict[str, str]]:
    """(dimension, name) → {input: digest} of what the matrix's entries point at: ``code folder`` of a
    model that runs code, ``acceptance rules`` of a dataset, ``environment`` of a local environment image."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    for model in matrix.models:
        if model.code is not None:
            out[("model", model.name)] = {"code folder": folder_sha256(model.code)}
    for dataset in matrix.datasets:
        if dataset.acceptance is not None:
            out[("dataset", dataset.name)] = {"acceptance rules": folder_sha256(dataset.acceptance)}
    for image in matrix.images:
        env = environment_sha256(matrix, image.reference)
        if env is not None:
            out[("image", image.name)] = {"environment": env}
    return out


def _old_digests(old: Matrix, new: Matrix) -> dict[tuple[str, str], dict[str, str]]:
    """:func:`input_digests` of ``old``, with :data:`SAME_PATH` for every input it names at the resolved
    path ``new`` names it at (today's content, not the old revision's). An old matrix read from the new
    one's folder (``read_from``: a ``git show`` copy) keeps its digests: its deselection reason says the
    files it shares were not compared."""
    digests = input_digests(old)
    if old.read_from is not None:  # a copy read from the new matrix's folder: it says so itself (selection)
        return digests
    old_paths, new_paths = input_paths(old), input_paths(new)
    for key, inputs in old_paths.items():
        for name, path in inputs.items():
            if new_paths.get(key, {}).get(name) == path and name in digests.get(key, {}):
                digests[key][name] = SAME_PATH
    return digests


def compared(old: Matrix, new: Matrix) -> str:
    """What :func:`changed_items` compares for ``new`` against ``old``, in words, for the reason of an
    item it leaves out: ``spec.target``, every resource, image, model and dataset entry (dataset and
    model ``sha256`` included) and each input digest by name."""
    inputs = [f"{dim} {name}'s {what}" for (dim, name), found in sorted(input_digests(new).items())
              for what in sorted(found)]
    text = "spec.target, the resource, image, model and dataset entries (their sha256 digests included)"
    return text + (" and the sha256 of " + ", ".join(inputs) if inputs else "") + " compared"


def differing(old: Mapping[str, object], new: Mapping[str, object]) -> dict[str, tuple[Any, Any]]:
    """Each key whose value differs between ``old`` and ``new`` (absent: None), sorted, with ``(old, new)``."""
    return {k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


def _input_fields(old: dict[str, str], new: dict[str, str]) -> dict[str, tuple[Any, Any]]:
    """The inputs whose digests differ, or that the old matrix's path does not find (cannot compare)."""
    return {name: (old.get(name), digest) for name, digest in new.items()
            if old.get(name) != digest or old.get(name) in (MISSING, SAME_PATH)}


def dimension_changes(old: Matrix, new: Matrix) -> list[Change]:
    """Every added/removed/changed dimension value of ``new`` relative to ``old`` (its entry, or what the
    entry points at: :func:`input_digests`), plus a pseudo-dimension ``target`` when ``spec.target``
    differs. Sorted by dimension, then name."""
    changes: list[Change] = []
    if old.target != new.target:
        changes.append(Change("target", "spec.target", "changed", differing(old.target, new.target)))
    old_inputs, new_inputs = _old_digests(old, new), input_digests(new)
    for dim in DIMENSION_KEYS:
        before, after = _definitions(old, dim), _definitions(new, dim)
        for name in sorted(set(before) | set(after)):
            if name not in before:
                changes.append(Change(dim, name, "added", {}))
            elif name not in after:
                changes.append(Change(dim, name, "removed", {}))
            else:
                fields = differing(before[name], after[name])
                fields.update(_input_fields(old_inputs.get((dim, name), {}), new_inputs.get((dim, name), {})))
                if fields:
                    changes.append(Change(dim, name, "changed", fields))
    return changes


def changed_items(old: Matrix, old_plan: Plan, new: Matrix, new_plan: Plan) -> dict[str, str]:
    """Item id (``PlannedItem.id``) → why it is affected, for every item of ``new_plan`` that
    is new or whose dimension definitions differ from ``old``. Dependencies are not added here
    (the selection adds them). Ids of unchanged items are absent."""
    changes = dimension_changes(old, new)
    if any(c.dimension == "target" for c in changes):
        return {item.id: "target changed" for item in new_plan.items}
    touched = {(c.dimension, c.name): c for c in changes}
    old_ids = {item.id for item in old_plan.items}
    rules = _task_queue_changes(old, new)
    out: dict[str, str] = {}
    for item in new_plan.items:
        hits = [touched[(dim, name)] for dim, name in item.keys.items() if (dim, name) in touched]
        if hits:
            out[item.id] = "; ".join(c.describe() for c in hits)
        elif item.keys.get("task_type") in rules:
            out[item.id] = f"spec.task_queues.{item.keys['task_type']} changed"
        elif item.id not in old_ids:
            out[item.id] = "new in this matrix version (was excluded or absent)"
    return out


def _task_queue_changes(old: Matrix, new: Matrix) -> set[str]:
    """Task types whose ``spec.task_queues`` rule differs between ``old`` and ``new`` (its line aside)."""
    from dataclasses import replace

    def rules(m: Matrix) -> dict[str, object]:
        return {r.task_type: replace(r, line=0) for r in m.task_queues}

    before, after = rules(old), rules(new)
    return {t for t in after if before.get(t) != after[t]}
