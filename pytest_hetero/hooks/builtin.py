"""Built-in implementations of the ``pytest_hetero_*`` hooks, each the last resort (``trylast``).

A plugin answering the same hook first replaces or extends them. This module imports nothing
heavy: each implementation imports the engine, protocol, reporting or bundle module it needs when
it is called, so ``hetero --help`` and a pytest run without a matrix pay for none of them.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pluggy

if TYPE_CHECKING:
    from pytest_hetero.backends.labels import CleanupReport
    from pytest_hetero.backends.protocol import Backend
    from pytest_hetero.evidence.document import EvidenceDocument, PoolStatus, ValidationSection
    from pytest_hetero.evidence.inputs import RunInputs
    from pytest_hetero.matrix.model import Serving
    from pytest_hetero.serving.protocol import ServingProtocol
    from pytest_hetero.settings import Settings

hookimpl = pluggy.HookimplMarker("pytest")

BACKENDS: tuple[str, ...] = ("local", "docker", "kubernetes")
"""Names the built-in :func:`pytest_hetero_backend` answers (for messages)."""


@hookimpl(trylast=True)
def pytest_hetero_backend(name: str) -> type[Backend] | None:
    """The built-in engine class for ``local``, ``docker`` or ``kubernetes``; None for other names."""
    if name == "local":
        from pytest_hetero.backends.local import LocalBackend

        return LocalBackend
    if name == "docker":
        from pytest_hetero.backends.docker.engine import DockerBackend

        return DockerBackend
    if name == "kubernetes":
        from pytest_hetero.backends.kubernetes.engine import KubernetesBackend

        return KubernetesBackend
    return None


@hookimpl(trylast=True)
def pytest_hetero_make_protocol(name: str, serving: Serving) -> ServingProtocol | None:
    """The built-in client of ``oip`` or ``openai`` for ``serving``; None for other names."""
    if name == "oip":
        from pytest_hetero.serving.oip import OpenInferenceProtocol

        return OpenInferenceProtocol(serving)
    if name == "openai":
        from pytest_hetero.serving.openai import OpenAICompatible

        return OpenAICompatible(serving)
    return None


@hookimpl(trylast=True)
def pytest_hetero_failure_owner(layer: str, category: str, default: str) -> str | None:
    """The owner the check named, else the matrix's owner of the layer."""
    return default


@hookimpl(trylast=True)
def pytest_hetero_amend_evidence(evidence: EvidenceDocument, settings: Settings, inputs: RunInputs) -> None:
    """Add the ``validation`` section (each pool × task type's level and expiry, and each exercised node's
    own: :func:`pytest_hetero.status.compute.validation_status`), the nodes of each pool the run did not
    exercise to the untested scope (``untested.nodes``: ``[{"matrix", "pool", "node", "status", "reason"}]``),
    and the ``selection`` section (what was
    asked, deselections by reason, the profile each matrix ran) when a profile, affected-only or shard
    option was given."""
    evidence["validation"] = _validation(evidence, inputs)
    # nodes of a pool no workload exercised: unvalidated by this run, part of what it did not test
    evidence["untested"]["nodes"] = [{"matrix": p["matrix"], "pool": p["pool"], **e}
                                     for p in evidence["validation"]["pools"] for e in p["unvalidated"]]
    if not (settings.profile or settings.affected or settings.affected_from or settings.shard
            or settings.affected_from_cluster):
        return
    reasons = Counter(entry["reason"] for entry in evidence["untested"]["items"] if entry["status"] == "deselected")
    evidence["selection"] = {
        "profile": settings.profile, "affected": list(settings.affected),
        "affected_from": str(settings.affected_from) if settings.affected_from else None,
        "affected_from_cluster": str(settings.affected_from_cluster) if settings.affected_from_cluster else None,
        "shard": settings.shard.replace(" ", "") if settings.shard else None, "deselected": dict(reasons),
        "profiles": _profiles(evidence, settings.profile, inputs)}


def _validation(evidence: EvidenceDocument, inputs: RunInputs) -> ValidationSection:
    """The validation status of the run's matrices (a matrix that no longer loads is left out)."""
    from pytest_hetero.errors import HeteroError
    from pytest_hetero.evidence.model import utc_now
    from pytest_hetero.redact import Redactor
    from pytest_hetero.status.compute import validation_status

    pools: list[PoolStatus] = []
    for entry in evidence["matrices"]:
        try:
            matrix = inputs.matrix(entry)
        except HeteroError:
            continue
        # matrix values (node selectors, owners, names) pass the same redaction as the items' records
        status = validation_status([(matrix, entry["prefix"])], evidence["items"],
                                   evidence["run"]["finished_at"] or utc_now())
        redacted: ValidationSection = Redactor(extra=matrix.redact).data(status)
        pools += redacted["pools"]
    return {"pools": pools}


class ProfileRan(TypedDict):
    """The profile a matrix ran: its name, layers, whether representative resources only, repeat."""

    name: str
    layers: list[str]
    representative: bool
    repeat: int


def _profiles(evidence: EvidenceDocument, name: str | None, inputs: RunInputs) -> dict[str, ProfileRan]:
    """Matrix name → the profile that ran (layers, representative, repeat: with ``repeat`` > 1 each
    model item runs that many times and its business item judges every sample)."""
    from pytest_hetero.errors import HeteroError
    from pytest_hetero.matrix.selection import resolve_profile

    out: dict[str, ProfileRan] = {}
    if name is None:
        return out
    for entry in evidence["matrices"]:
        try:
            profile = resolve_profile(inputs.matrix(entry), name)
        except HeteroError:
            continue
        out[entry["name"]] = {"name": profile.name, "layers": list(profile.layers),
                              "representative": profile.representative, "repeat": profile.repeat}
    return out


@hookimpl(trylast=True)
def pytest_hetero_write_reports(evidence: EvidenceDocument, bundle_dir: Path, settings: Settings,
                                inputs: RunInputs) -> list[Path]:
    """report.html, summary.md, junit.xml and ctrf.json, with the sign-off section naming the run
    key's keyid (or saying UNSIGNED and why); the items' JUnit and CTRF texts rendered during the run
    (``inputs.texts``) are joined, not rendered again."""
    from pytest_hetero.bundle.signoff import matrix_owners, run_signoff
    from pytest_hetero.reporting.writers import write_renderings

    return write_renderings(evidence, bundle_dir, run_signoff(matrix_owners(evidence, inputs), settings.sign_key),
                            inputs.texts)


@hookimpl(trylast=True)
def pytest_hetero_bundle_finished(evidence: EvidenceDocument, bundle_dir: Path, settings: Settings,
                                  inputs: RunInputs) -> None:
    """Manifest, statement and DSSE envelope, signed with ``settings.sign_key`` when set (last of all)."""
    from pytest_hetero.bundle.finish import finish_bundle
    from pytest_hetero.bundle.signoff import matrix_owners

    finish_bundle(evidence, bundle_dir, settings.sign_key, matrix_owners(evidence, inputs), inputs)


@hookimpl(trylast=True)
def pytest_hetero_cleanup_options(parser: argparse.ArgumentParser) -> None:
    """``--docker-host`` (Docker); ``--kube-context`` and ``--kube-namespace`` (Kubernetes). Declared here,
    so ``hetero cleanup --help`` loads neither engine's client."""
    parser.add_argument("--docker-host", metavar="URL", default=None,
                        help="Docker engine to clean (default: DOCKER_HOST, else the local socket)")
    parser.add_argument("--kube-context", metavar="NAME", default=None,
                        help="kubeconfig context to clean (default: the current context)")
    parser.add_argument("--kube-namespace", metavar="NS", default=None,
                        help="namespace to clean (default and 'all': every namespace; the context's when listing "
                        "across namespaces is forbidden)")


@hookimpl(trylast=True)
def pytest_hetero_cleanup(backend: str | None, args: argparse.Namespace) -> list[CleanupReport]:
    """Leftovers of the Docker and Kubernetes backends (each when named, or both for None)."""
    from pytest_hetero.backends.labels import CleanupError, CleanupReport

    reports = []
    for name in ("docker", "kubernetes"):
        if backend not in (None, name):
            continue
        report = CleanupReport(name)
        try:
            if name == "docker":
                from pytest_hetero.backends.docker.cleanup import cleanup as docker_cleanup

                report.entries = docker_cleanup(args)
            else:
                from pytest_hetero.backends.kubernetes.cleanup import cleanup as kube_cleanup

                report.entries = kube_cleanup(args)
        except CleanupError as exc:
            report.error = str(exc)
        reports.append(report)
    return reports
