"""``--hetero-audit-log``: who changed the pools between the baseline bundle and this run, signed into the
change record (:mod:`pytest_hetero.status.audit` reads and maps, the judge gives the statuses).

The window is ``[the baseline run's finished_at, this session's start)``. The source is the apiserver's
audit log at the given path; ``managed-fields`` (or an audit log this user may not read) reads the
``managedFields`` of each kubernetes matrix's cluster instead, and the record says so: who is then a
field manager (a client's name), not a user.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from pytest_hetero.errors import SettingsError

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument
    from pytest_hetero.status.audit import FileRead, ManagedObject
    from pytest_hetero.vocab import Status

MANAGED = "managed-fields"
WHO_USER = "user: the authenticated identity the apiserver recorded (impersonation: the user acted as, 'via' who did)"
WHO_MANAGER = ("manager: a field manager (the client's name, e.g. kubectl-patch), NOT a user; the last write per "
               "manager only, deleted objects unseen")


AuditWindow = TypedDict("AuditWindow", {"from": str, "to": str, "bundle": str})
"""The audited window: ``from`` (the baseline run's end) ``to`` (this session's start), UTC, and the baseline's
``bundle`` label."""


class LogSpan(TypedDict):
    """The earliest and latest ``stageTimestamp`` of any event in the audit log (UTC; None: the log has none)."""

    first: str | None
    last: str | None


class AuditRecord(TypedDict):
    """The ``audit`` part of the change record (:func:`audited` writes every field; see there)."""

    source: str
    who: str
    fallback: str | None
    file: FileRead | None
    problems: list[str]
    window: AuditWindow
    lines: int | None
    torn_last_line: bool
    log_span: LogSpan | None
    covers_window: bool | None
    outside: int
    matrices: list[dict[str, Any]]
    actors: list[str]
    operator_in_log: bool | None
    status: Status


def _window(baseline: EvidenceDocument, started: str) -> tuple[Any, Any]:
    from pytest_hetero.status.audit import parse_time

    since = parse_time(baseline["run"]["finished_at"])
    until = parse_time(started)
    if since is None or until is None:
        raise SettingsError("--hetero-audit-log: the baseline bundle records no end time (run.finished_at)",
                            hint="use a bundle written by a finished run")
    return since, until


def audited(settings: Any, plans: list[Any], baseline: EvidenceDocument | None, label: str,
            snapshots: list[dict[str, Any]], started: str, intended: list[str],
            operator: object = None) -> AuditRecord:
    """The ``audit`` part of the change record: ``{"source": "audit-log"|"managedFields", "who", "fallback",
    "file", "problems", "window": {"from", "to", "bundle"}, "lines", "torn_last_line", "log_span": {"first",
    "last"}, "covers_window" (:meth:`Window.covers`; None for managedFields), "outside",
    "matrices": [{"matrix", "writes", "refused", "changes", "truncated", "findings", "actors", "status"}],
    "actors" (who changed a pool, the control plane left out), "operator_in_log" (whether the declared
    ``operator`` is among them; None without one, or from managedFields, which name no user), "status"}``
    (``findings`` and statuses judged: :func:`pytest_hetero.judge.verdict.change_findings`). Raises
    SettingsError for an audit log that cannot be read (named file and line), or a cluster whose
    managedFields cannot be listed."""
    from pytest_hetero.judge.verdict import change_findings, change_record_status
    from pytest_hetero.pytest_plugin.drift import cluster_of
    from pytest_hetero.status.audit import AuditLogError, Window, classify, managed_changes, read_audit_log
    from pytest_hetero.status.drift import baseline_snapshot

    assert baseline is not None  # _prepare refuses --hetero-audit-log without a baseline
    since, until = _window(baseline, started)
    source, fallback, file, window = "audit-log", None, None, Window()
    if settings.audit_log != MANAGED:
        try:
            window, file = read_audit_log(settings.audit_log, since, until)
        except PermissionError as exc:
            fallback = f"the audit log {settings.audit_log} cannot be read by this user ({exc}): managedFields instead"
        except AuditLogError as exc:
            raise SettingsError(f"--hetero-audit-log: {exc.message}", exc.location, exc.hint) from None
    else:
        fallback = "--hetero-audit-log managed-fields: no audit log access"
    if fallback is not None:
        source = "managedFields"
    covers = window.covers(since) if fallback is None else None
    kube = [(m, p) for _prefix, m, p in plans if (settings.backend or m.backend) == "kubernetes"]
    problems: list[str] = []
    out = []
    for matrix, _plan in kube:
        namespace = cluster_of(matrix, settings)[2]
        if fallback is not None:
            objects, missing = _managed(settings, matrix, namespace)
            window = managed_changes(objects, since, until)
            problems += [f"{matrix.name}: {p}" for p in missing]
        now = next((s["snapshot"] for s in snapshots if s["matrix"] == matrix.name), None)
        snaps = [s for s in (baseline_snapshot(baseline, matrix.name), now) if s is not None]
        part = classify(window, matrix, snaps, namespace, intended)
        part["status"], part["findings"] = change_findings(matrix, part["findings"], covers)
        out.append(part)
    actors = sorted({a for p in out for a in p["actors"]})
    return {"source": source, "who": WHO_MANAGER if fallback else WHO_USER, "fallback": fallback, "file": file,
            "problems": problems,
            "window": {"from": since.isoformat().replace("+00:00", "Z"), "to": started, "bundle": label},
            "lines": window.lines if fallback is None else None, "torn_last_line": window.torn_last_line,
            "log_span": {"first": _stamp(window.first), "last": _stamp(window.last)} if fallback is None else None,
            "covers_window": covers,
            "outside": window.outside, "matrices": out, "actors": actors,
            "operator_in_log": (operator in actors) if operator and fallback is None else None,
            "status": change_record_status(p["status"] for p in out)}


def _stamp(when: Any) -> str | None:
    return None if when is None else str(when.isoformat()).replace("+00:00", "Z")


def _managed(settings: Any, matrix: Any, namespace: str | None) -> tuple[list[ManagedObject], list[str]]:
    from pytest_hetero.backends.kubernetes.client import connect
    from pytest_hetero.backends.kubernetes.managed import managed_objects
    from pytest_hetero.backends.protocol import EngineFault
    from pytest_hetero.pytest_plugin.drift import cluster_of
    from pytest_hetero.status.audit import DEVICE_CONFIG

    try:
        target, context, _ = cluster_of(matrix, settings)
        api, default_ns, _ = connect(target, context)
        return managed_objects(api, [n for n in (namespace, default_ns) if n],
                               lambda name: bool(DEVICE_CONFIG.search(name)))
    except (EngineFault, OSError, ValueError) as exc:
        raise SettingsError(f"--hetero-audit-log: cannot list the managedFields of matrix {matrix.name}'s "
                            f"cluster: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - ApiException and transport errors: named, not a crash
        raise SettingsError(f"--hetero-audit-log: listing the managedFields of matrix {matrix.name}'s cluster "
                            f"failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None


def summary_lines(audit: AuditRecord) -> list[str]:
    """The terminal summary of the audited change record: source, window, counts, each finding."""
    from pytest_hetero.status.audit import describe_change

    window = audit["window"]
    lines = [f"audited changes ({audit['source']}; who is the {audit['who'].split(':')[0]}) from {window['from']} "
             f"({window['bundle']}) to {window['to']}: " + (audit["fallback"] + "; " if audit["fallback"] else "")
             + ("the log begins after the window starts (rotated?): earlier changes unseen; "
                if audit["covers_window"] is False else "")
             + f"status {audit['status']}"]
    if audit["operator_in_log"] is False:
        lines.append(f"  the declared operator is not among who changed the pools: {', '.join(audit['actors'])}")
    for part in audit["matrices"]:
        shown = [c for c in part["changes"] if c["pools"]]
        lines.append(f"  {part['matrix']}: {part['writes']} write(s), {len(shown)} to its pools, "
                     f"{len(part['findings'])} not in the change record")
        lines += [f"    {describe_change(c)} (pools {', '.join(c['pools'])})" for c in shown[:20]]
        lines += [f"    {f['status']} ({f['team']}): {f['message']}" for f in part["findings"][:20]]
    return lines
