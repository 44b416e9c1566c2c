"""pytest glue of ``--hetero-snapshot``, ``--hetero-affected-from-cluster`` and ``--hetero-change``.

Before collection (``tryfirst``, ahead of the selection glue) the snapshot of each kubernetes matrix's
cluster is taken once (:func:`pytest_hetero.backends.kubernetes.snapshot.snapshot_of_target`); with a
baseline bundle (verified like ``--hetero-baseline``) it is diffed against the baseline's snapshot and
each change mapped to the items it can affect (:mod:`pytest_hetero.status.drift`); the selection glue
runs only those, the others are ``deselected (unchanged since bundle <run id>)``. A
:class:`ClusterRecord` adds the ``cluster`` section to the evidence (signed: evidence.json is in the
manifest, and the predicate carries its digests, the drift and the change record).

The snapshot is taken when the session starts, before the run creates anything. Under pytest-xdist
each worker takes its own (a cluster changing during collection could make them differ).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import pytest

from pytest_hetero.errors import HeteroError
from pytest_hetero.pytest_plugin.stash import SETTINGS

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument
    from pytest_hetero.status.drift import ChangeImpact

CLUSTER_HITS = pytest.StashKey["tuple[dict[str, dict[str, str]] | None, str]"]()
"""(matrix name → {item id: reason}, or None without a baseline; the baseline's label)."""


class ClusterRecord:
    """Session plugin holding the snapshots, the drift and the change record of the run."""

    def __init__(self, snapshots: list[dict[str, Any]], drift: list[dict[str, Any]] | None,
                 change: ChangeImpact | None) -> None:
        self.snapshots, self.drift, self.change = snapshots, drift, change

    def pytest_hetero_amend_evidence(self, evidence: EvidenceDocument) -> None:
        """Add ``cluster``: ``{"snapshots": [{"matrix", "taken_at", "sha256", "snapshot"}], "drift":
        [{"matrix", "baseline", "changes", "affected"}] | None, "change_record": {…, "observed",
        "unintended", "not_observed"} | None}``."""
        evidence["cluster"] = {"snapshots": self.snapshots, "drift": self.drift, "change_record": self.change}

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        """What changed in the cluster, and the change record's intended vs observed impact."""
        terminalreporter.write_sep("-", "cluster")
        for entry in self.snapshots:
            terminalreporter.write_line(f"snapshot of {entry['matrix']}: sha256 {entry['sha256'][:16]}… "
                                        f"({len(entry['snapshot'].get('nodes') or {})} nodes)")
        for entry in self.drift or []:
            terminalreporter.write_line(f"{entry['matrix']}: {len(entry['changes'])} change(s) since "
                                        f"{entry['baseline']['label']}, {len(entry['affected'])} item(s) affected")
        if self.change is not None and self.change.get("audit"):
            from pytest_hetero.pytest_plugin.audit import summary_lines

            for line in summary_lines(self.change["audit"]):
                terminalreporter.write_line(line)
        if self.change is not None:
            c = self.change
            terminalreporter.write_line(f"change record: intended {c['intended'] or 'nothing named'}; observed "
                                        f"{c['observed'] if c['observed'] is not None else 'not measured'}"
                                        + (f"; unintended {c['unintended']}" if c["unintended"] else "")
                                        + (f"; not observed {c['not_observed']}" if c["not_observed"] else ""))


def cluster_of(matrix: Any, settings: Any) -> tuple[dict[str, Any], str | None, str | None]:
    """The Kubernetes cluster a matrix's items reach, for the snapshot and the audit: its ``spec.target`` (a copy),
    the kubeconfig context and the namespace (``--hetero-kube-context`` / ``--hetero-kube-namespace`` over the
    target's ``context`` / ``namespace``; None: neither names one)."""
    target = dict(matrix.target)
    context = settings.kube_context or target.get("context")
    return target, context, settings.kube_namespace or target.get("namespace")


def _baseline(settings: Any) -> tuple[EvidenceDocument, str]:
    from pytest_hetero.bundle.verify import load_evidence, trusted_keys
    from pytest_hetero.status.drift import baseline_label

    evidence, verification = load_evidence(settings.affected_from_cluster, allow_unsigned=settings.allow_unsigned,
                                           keys=trusted_keys(private=settings.sign_key))
    return evidence, baseline_label(evidence, verification)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Take the snapshots, compute the drift against the baseline, parse the change record."""
    config = session.config
    settings = config.stash[SETTINGS]
    if not (settings.snapshot or settings.change or settings.audit_log):
        return
    from pytest_hetero.pytest_plugin.selection import matrices_in_args, usage_error

    try:
        record, hits, label = _prepare(settings, matrices_in_args(config))
    except HeteroError as exc:
        raise usage_error(exc) from None
    config.stash[CLUSTER_HITS] = (hits, label)
    config.pluginmanager.register(record, "pytest_hetero.cluster_record")


def _prepare(settings: Any, plans: list[Any]) -> tuple[ClusterRecord, dict[str, dict[str, str]] | None, str]:
    from pytest_hetero.backends.kubernetes.snapshot import snapshot_of_target
    from pytest_hetero.backends.protocol import EngineFault
    from pytest_hetero.bundle.signing import canonical
    from pytest_hetero.errors import SettingsError
    from pytest_hetero.evidence.model import utc_now
    from pytest_hetero.status.drift import drift_since, impact, observed_by_resource, parse_change

    started = utc_now()
    change = parse_change(settings.change) if settings.change else None
    if settings.audit_log and not settings.affected_from_cluster:
        raise SettingsError("--hetero-audit-log reads the changes made since an earlier bundle, and none is given",
                            hint="add --hetero-affected-from-cluster BUNDLE (the window starts where that run ended)")
    baseline, label = _baseline(settings) if settings.affected_from_cluster else (None, "")
    snapshots: list[dict[str, Any]] = []
    drift: list[dict[str, Any]] | None = [] if baseline is not None else None
    hits: dict[str, dict[str, str]] | None = {} if baseline is not None else None
    observed: dict[str, list[str]] = {}
    for _prefix, matrix, plan in plans:
        if (settings.backend or matrix.backend) != "kubernetes" or not settings.snapshot:
            continue
        try:
            target, context, namespace = cluster_of(matrix, settings)
            snap = snapshot_of_target(target, context, [namespace] if namespace else [])
        except (EngineFault, OSError, ValueError) as exc:
            raise SettingsError(f"--hetero-snapshot: cannot list the cluster of matrix {matrix.name}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - ApiException and transport errors: named, not a crash
            raise SettingsError(f"--hetero-snapshot: listing the cluster of matrix {matrix.name} failed: "
                                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
        snapshots.append({"matrix": matrix.name, "taken_at": utc_now(),
                          "sha256": hashlib.sha256(canonical(snap)).hexdigest(), "snapshot": snap})
        if baseline is None or drift is None or hits is None:
            continue
        old, changes, found = drift_since(baseline, label, matrix, plan, snap, "--hetero-affected-from-cluster")
        hits[matrix.name] = found
        observed.update(observed_by_resource(found, plan))
        drift.append({"matrix": matrix.name, "baseline": {"label": label, "run": baseline["run"]["id"],
                                                           "sha256": hashlib.sha256(canonical(old)).hexdigest()},
                      "changes": changes, "affected": found})
    if settings.snapshot and not snapshots:
        raise SettingsError("--hetero-snapshot records the cluster of kubernetes matrices, and none is collected",
                            hint="collect a matrix with spec.target.backend: kubernetes (or --hetero-backend "
                                 "kubernetes), or leave the option out")
    if settings.audit_log:
        from pytest_hetero.pytest_plugin.audit import audited

        change = change if change is not None else {"operator": None, "ticket": None, "reason": None, "intended": []}
    record = ClusterRecord(snapshots, drift, impact(change, observed if drift is not None else None)
                           if change is not None else None)
    if settings.audit_log and record.change is not None:
        record.change["audit"] = audited(settings, plans, baseline, label, snapshots, started,
                                         record.change["intended"], record.change["operator"])
    return record, hits, label

