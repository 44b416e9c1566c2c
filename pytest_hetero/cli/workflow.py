"""``hetero lint``, ``hetero plan``, ``hetero diff`` and ``hetero merge``: the gate's workflows
without a pytest run (arguments: :mod:`pytest_hetero.cli._parser`). Backends are resolved, and
bundles finished, through the plugin registry (:mod:`pytest_hetero.hooks.registry`), so a
third-party backend plans here as it collects under pytest. Exit codes: 0 ok, 1 the check failed
(lint problems, gate failed), 2 usage or input error (unreadable bundle, failed verification,
bad option).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from pytest_hetero import LAYERS
from pytest_hetero.errors import HeteroError, MatrixError

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument
    from pytest_hetero.matrix.expand import Plan
    from pytest_hetero.matrix.model import Matrix
    from pytest_hetero.status.drift import Change, ChangeImpact


def scheduling_per_image(matrix: Matrix, hook: Any, backend: str | None = None) -> bool:
    """Whether the matrix's backend (or ``backend``) plans scheduling per image, as collection does,
    asking ``hook.pytest_hetero_backend``. Raises MatrixError for an unknown backend (the same
    error collection gives)."""
    from pytest_hetero.hooks.builtin import BACKENDS

    name = backend or matrix.backend
    cls = hook.pytest_hetero_backend(name=name)
    if cls is None:
        from pytest_hetero.matrix.load import backend_location

        raise MatrixError(f"unknown backend '{name}'", backend_location(matrix.path, name, matrix.backend),
                          f"use one of {', '.join(BACKENDS)}, or install the plugin that provides it")
    return bool(cls.scheduling_per_image)


def lint(paths: list[Path], out: Any = None, *, digests: bool = False, hook: Any = None) -> int:
    """Validate every file in ``paths`` without running; print every problem to ``out`` (default
    stdout). Returns 1 if any file has a problem, else 0. ``hook`` resolves backends (default:
    the registry without ``-p`` plugins).

    A ValidationMatrix is loaded and expanded (schema and reference errors as collection gives
    them); a matrix that loads also has what it points at checked
    (:func:`~pytest_hetero.matrix.references.reference_problems`: files, code folders, acceptance
    files, entrypoint placeholders; sha256 of each file too with ``digests``). A file whose
    ``kind`` is ``AcceptanceRules`` is checked as rules. Raises nothing for bad content.
    """
    from pytest_hetero.hooks.registry import plugin_manager
    from pytest_hetero.layers.discovery import expect_problems, image_problems
    from pytest_hetero.matrix.expand import expand
    from pytest_hetero.matrix.load import load_matrix
    from pytest_hetero.matrix.references import display, reference_problems

    hook = hook if hook is not None else plugin_manager().hook
    out = out or sys.stdout
    bad = 0
    for path in paths:
        if _kind(path) == "AcceptanceRules":
            bad += _lint_rules(path, out)
            continue
        try:
            matrix = load_matrix(path)
        except HeteroError as exc:
            bad += 1
            print(exc.render(), file=out)
            continue
        problems: list[HeteroError] = []
        try:
            plan = expand(matrix, scheduling_per_image=scheduling_per_image(matrix, hook))
        except HeteroError as exc:
            problems.extend(getattr(exc, "problems", [exc]))
        problems.extend(expect_problems(matrix, matrix.backend))
        problems.extend(image_problems(matrix, matrix.backend))
        problems.extend(reference_problems(matrix, digests=digests))
        if problems:
            bad += 1
            head = [f"{len(problems)} problems in {display(matrix.path)}:"] if len(problems) > 1 else []
            print("\n".join([*head, *(p.render() for p in problems)]), file=out)
            continue
        print(f"ok: {path} ({matrix.name}: {len(plan.items)} items, {len(plan.omitted)} omitted)", file=out)
    return 1 if bad else 0


class Estimate(TypedDict):
    """A plan's serial duration estimate: ``seconds``, a model item's ``repeat``, and how many items' times
    came from each ``source`` (``bundle_item``, ``bundle_layer_mean``, ``timeout``)."""

    seconds: float
    repeat: int
    source: dict[str, int]


class TaskChecks(TypedDict):
    """A model's task type and the checks it brings."""

    task_type: str
    checks: list[str]


class ClusterDrift(TypedDict):
    """``--affected-from-cluster``: the baseline's ``label``, the cluster ``changes`` since it, the items
    ``affected`` ({item id: reason}) and the declared change record with its impact (None without one)."""

    label: str
    changes: list[Change]
    affected: dict[str, str]
    change_record: ChangeImpact | None


class PlannedMatrix(TypedDict):
    """The planned matrix: its name, file path and sha256."""

    name: str
    path: str
    sha256: str


class LeftOutItem(TypedDict):
    """An item the plan leaves out (excluded, incompatible; or deselected: no ``status``), and why."""

    id: str
    reason: str


class OmittedItem(LeftOutItem):
    """An item the expansion omitted, with its status (``excluded``…)."""

    status: str


class PlanReport(TypedDict):
    """``hetero plan``'s report (``--json`` prints it): what would run, what not and why, and how long."""

    matrix: PlannedMatrix
    backend: str | None
    profile: str | None
    shard: str | None
    items: int
    planned: int
    by_layer_resource: dict[str, dict[str, int]]
    omitted: list[OmittedItem]
    deselected: list[LeftOutItem]
    affected: dict[str, str]
    cluster: ClusterDrift | None
    task_types: dict[str, TaskChecks]
    estimate: Estimate


def _kind(path: Path) -> object:
    """The ``kind`` of the YAML document at ``path``; None when it cannot be read (load_matrix says why)."""
    from pytest_hetero.matrix.yamlnodes import read_yaml

    try:
        data, _ = read_yaml(path, MatrixError)
    except (HeteroError, RecursionError):
        return None
    return data.get("kind") if isinstance(data, dict) else None


def _lint_rules(path: Path, out: Any) -> int:
    """Check an AcceptanceRules file; print ok or every problem. Returns 1 on a problem, else 0."""
    from pytest_hetero.errors import CaseError
    from pytest_hetero.matrix.acceptance import load_rules

    try:
        rules = load_rules(path)
    except CaseError as exc:
        print(exc.render(), file=out)
        return 1
    print(f"ok: {path} (AcceptanceRules: {len(rules)} rules)", file=out)
    return 0


def estimate(matrix: Matrix, plan: Plan, run_ids: set[str], bundle: EvidenceDocument | None,
             repeat: int = 1) -> Estimate:
    """Serial duration estimate (seconds) of the items in ``run_ids``: each item's duration in
    ``bundle`` when it ran there, else that layer's mean there, else the layer timeout (an upper
    bound). A model item runs ``repeat`` times (a profile's ``repeat``; a served model once): its time
    per run (a bundle item's duration over the runs it recorded) times ``repeat``. Returns
    ``{"seconds", "repeat", "source": {"bundle_item"|"bundle_layer_mean"|"timeout": n}}``."""
    by_item: dict[str, float] = {}
    by_layer: dict[str, list[float]] = {}
    for done in bundle["items"] if bundle else []:
        runs = max(1, sum(1 for r in done["records"] if r["kind"] == "model.repeat"))
        per_run = float(done["duration_s"] or 0.0) / runs  # the loader refuses an item without it (check_item)
        by_item[done["nodeid"].split("::", 1)[1]] = per_run
        by_layer.setdefault(done["layer"], []).append(per_run)
    total, source = 0.0, Counter[str]()
    for item in plan.items:
        if item.id not in run_ids:
            continue
        if item.id in by_item:
            seconds, kind = by_item[item.id], "bundle_item"
        elif item.layer in by_layer:  # a layer is there only with a duration
            seconds, kind = sum(by_layer[item.layer]) / len(by_layer[item.layer]), "bundle_layer_mean"
        else:
            seconds, kind = matrix.timeouts_s[item.layer], "timeout"
        runs = repeat if item.layer == "model" and "check" not in item.keys \
            and matrix.model(item.keys["model"]).serving is None else 1
        total += seconds * runs
        source[kind] += 1
    return {"seconds": round(total, 3), "repeat": repeat, "source": dict(source)}


def plan_report(args: argparse.Namespace, hook: Any = None) -> PlanReport:
    """The plan of ``args.matrix`` under the selection options, as a JSON-ready dict; ``hook``
    resolves the backend (default: the registry with ``args.plugins``)."""
    from pytest_hetero.hooks.registry import plugin_manager
    from pytest_hetero.matrix.expand import expand
    from pytest_hetero.matrix.load import load_earlier_version, load_matrix
    from pytest_hetero.matrix.selection import Request, parse_selector, parse_shard, resolve_profile, select

    hook = hook if hook is not None else plugin_manager(getattr(args, "plugins", ())).hook
    matrix = load_matrix(args.matrix)
    plan = expand(matrix, scheduling_per_image=scheduling_per_image(matrix, hook, args.backend))
    request = Request(profile=args.profile, selectors=tuple(parse_selector(s) for s in args.affected),
                      affected_from=load_earlier_version(Path(args.affected_from), [matrix.path])
                      if args.affected_from else None,
                      shard=parse_shard(args.shard) if args.shard else None)
    cluster = _cluster_drift(args, matrix, plan) if getattr(args, "affected_from_cluster", None) else None
    if cluster is not None:
        request = replace(request, cluster={matrix.name: cluster["affected"]}, cluster_label=cluster["label"])
    selection = select(request, [("", matrix, plan)])
    dropped = {k[2:]: v for k, v in selection.deselected.items()}
    run = [i for i in plan.items if i.id not in dropped]
    table: dict[str, dict[str, int]] = {layer: {} for layer in LAYERS}
    for item in run:
        row = table[item.layer]
        row[item.keys["resource"]] = row.get(item.keys["resource"], 0) + 1
    bundle = None
    if args.from_bundle:
        from pytest_hetero.bundle.verify import load_evidence

        bundle, _ = load_evidence(args.from_bundle, allow_unsigned=True)
    return {
        "matrix": {"name": matrix.name, "path": str(matrix.path), "sha256": matrix.sha256},
        "backend": args.backend or matrix.backend, "profile": args.profile, "shard": args.shard,
        "items": len(run), "planned": len(plan.items), "by_layer_resource": table,
        "omitted": [{"id": o.id if hasattr(o, "id") else "::".join(o.parts), "status": o.status,
                     "reason": o.reason} for o in plan.omitted],
        "deselected": [{"id": i, "reason": r} for i, r in dropped.items()],
        "affected": {k[2:]: v for k, v in selection.affected.items()},
        "cluster": cluster,
        "task_types": _task_checks(matrix),
        "estimate": estimate(matrix, plan, {i.id for i in run}, bundle,
                             resolve_profile(matrix, args.profile).repeat if args.profile else 1),
    }


def _task_checks(matrix: Matrix) -> dict[str, TaskChecks]:
    """``{model: {"task_type", "checks": [check, ...]}}``: the checks each model's task type brings."""
    from pytest_hetero.matrix.training import checks_of

    return {m.name: {"task_type": m.task_type, "checks": list(checks_of(m.task_type))} for m in matrix.models}


def _cluster_drift(args: argparse.Namespace, matrix: Matrix, plan: Plan) -> ClusterDrift:
    """``hetero plan --affected-from-cluster BUNDLE``: the live cluster of the matrix's target diffed against
    the verified baseline's snapshot: ``{"label", "changes", "affected": {item id: reason}, "change_record"}``."""
    from pytest_hetero.backends.kubernetes.snapshot import snapshot_of_target
    from pytest_hetero.bundle.verify import load_evidence
    from pytest_hetero.status.drift import baseline_label, drift_since, impact, observed_by_resource, parse_change

    baseline, verification = load_evidence(args.affected_from_cluster, allow_unsigned=args.allow_unsigned,
                                           keys=_keys(args))
    label = baseline_label(baseline, verification)
    target = dict(matrix.target)
    namespace = matrix.target.get("namespace")
    live = snapshot_of_target(target, args.context or matrix.target.get("context"), [namespace] if namespace else [])
    _, changes, found = drift_since(baseline, label, matrix, plan, live, "--affected-from-cluster")
    record = impact(parse_change(args.change), observed_by_resource(found, plan)) if args.change else None
    return {"label": label, "changes": changes, "affected": found, "change_record": record}


def _print_cluster(cluster: ClusterDrift, out: Any) -> None:
    from pytest_hetero.status.drift import describe

    print(f"cluster changes since {cluster['label']}: {len(cluster['changes'])}", file=out)
    for change in cluster["changes"][:50]:
        print(f"  {describe(change)}", file=out)
    record = cluster["change_record"]
    if record is not None:
        print(f"change record ({record['operator']}, {record['ticket']}: {record['reason']}): intended "
              f"{record['intended']}, observed {record['observed']}, unintended {record['unintended']}, "
              f"not observed {record['not_observed']}", file=out)


def _print_plan(rep: PlanReport, out: Any) -> None:
    m = rep["matrix"]
    print(f"matrix {m['name']} ({m['path']}, sha256 {m['sha256'][:12]}…), backend {rep['backend']}"
          + (f", profile {rep['profile']}" if rep["profile"] else "")
          + (f", shard {rep['shard']}" if rep["shard"] else ""), file=out)
    print(f"items to run: {rep['items']} of {rep['planned']} planned", file=out)
    resources = sorted({r for row in rep["by_layer_resource"].values() for r in row})
    width = max([len(r) for r in resources] + [10])
    print(f"  {'layer':<10}  " + "  ".join(f"{r:>{width}}" for r in resources), file=out)
    for layer, row in rep["by_layer_resource"].items():
        print(f"  {layer:<10}  " + "  ".join(f"{row.get(r, 0):>{width}}" for r in resources), file=out)
    if rep["omitted"]:
        print(f"excluded/incompatible: {len(rep['omitted'])}", file=out)
        for o in rep["omitted"]:
            print(f"  {o['status']:<14} {o['id']}  ({o['reason']})", file=out)
    if rep["deselected"]:
        print(f"left untested by this selection: {len(rep['deselected'])}", file=out)
        for reason, n in Counter(d["reason"] for d in rep["deselected"]).most_common():
            print(f"  {n} {reason}", file=out)
        for d in rep["deselected"][:30]:
            print(f"    {d['id']}", file=out)
    if rep["affected"]:
        print(f"affected: {len(rep['affected'])} items", file=out)
        for reason, n in Counter(rep["affected"].values()).most_common():
            print(f"  {n} {reason}", file=out)
    if rep["cluster"] is not None:
        _print_cluster(rep["cluster"], out)
    for name, t in rep["task_types"].items():
        print(f"task type of {name}: {t['task_type']}; checks it brings: {', '.join(t['checks']) or 'none'}",
              file=out)
    est = rep["estimate"]
    src = ", ".join(f"{n} from {k.replace('_', ' ')}" for k, n in est["source"].items()) or "no items"
    runs = f"; each model item runs {est['repeat']} times" if est["repeat"] > 1 else ""
    print(f"estimate: {est['seconds']:.0f} s serial ({src}{runs})", file=out)


def cmd_lint(args: argparse.Namespace) -> int:
    """``hetero lint MATRIX… [--digests] [-p MODULE]…``."""
    from pytest_hetero.hooks.registry import plugin_manager

    try:
        hook = plugin_manager(args.plugins).hook
    except HeteroError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    return lint(args.matrices, digests=args.digests, hook=hook)


def cmd_plan(args: argparse.Namespace) -> int:
    """``hetero plan MATRIX [selection options] [--json] [-p MODULE]…``."""
    try:
        rep = plan_report(args)
    except HeteroError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rep, indent=1, sort_keys=True, allow_nan=False))
    else:
        _print_plan(rep, sys.stdout)
    return 0


def _keys(args: argparse.Namespace) -> list[Any]:
    from pytest_hetero.bundle.verify import trusted_keys

    return trusted_keys(args.key)


def cmd_diff(args: argparse.Namespace) -> int:
    """``hetero diff OLD NEW``: exit 1 when the gate policy fails."""
    from pytest_hetero.bundle.baseline import diff_evidence, diff_lines
    from pytest_hetero.bundle.verify import load_evidence
    from pytest_hetero.evidence.model import gc_paused

    try:
        keys = _keys(args)
        with gc_paused():  # two large documents and no cycles: collections would only walk them again
            old, vo = load_evidence(args.old, allow_unsigned=args.allow_unsigned, keys=keys)
            new, vn = load_evidence(args.new, allow_unsigned=args.allow_unsigned, keys=keys)
            diff = diff_evidence(old, new, tolerance=args.tolerance, policy=args.fail_on)
    except HeteroError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    diff["verification"] = vo if vo == vn else f"{vo}/{vn}"
    if args.json:
        print(json.dumps(diff, indent=1, sort_keys=True, allow_nan=False))
    else:
        print("\n".join(diff_lines(diff, limit=10**9)))
    return 1 if diff["gate"]["failed"] else 0


def cmd_merge(args: argparse.Namespace) -> int:
    """``hetero merge BUNDLE… -o DIR``: one bundle, finished through the plugin registry."""
    from pytest_hetero.bundle.merge import merge_bundles
    from pytest_hetero.hooks.registry import plugin_manager
    from pytest_hetero.settings import signer_spec

    try:
        signer = signer_spec(args.sign_key, args.sign_command, args.sign_public)
        hook = plugin_manager(args.plugins).hook
        evidence = merge_bundles(args.bundles, args.output, hook=hook, allow_unsigned=args.allow_unsigned,
                                 keys=_keys(args), sign_key=signer, matrix=args.matrix)
    except HeteroError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    totals = evidence["summary"]["totals"]
    print(f"merged {len(args.bundles)} bundles into {args.output}: verdict {evidence['summary']['verdict']}, "
          + ", ".join(f"{n} {s}" for s, n in sorted(totals.items())))
    for b in evidence["merge"]["bundles"]:
        note = " (accepted with --allow-unsigned)" if b["verification"] != "verified" else ""
        print(f"  {b['path']}: shard {b['shard'] or '-'}, {b['verification']}{note}")
    if signer is None:
        print(f"merged bundle {args.output} is UNSIGNED (the shards' signatures do not carry over; sign the merge "
              "with --sign-key KEY or --sign-command CMD --sign-public PEM)")
    return 0
