"""Synthetic evidence documents and bundles for the bundle, signing and report tests (and the benchmark).

``sample_evidence`` returns a dict shaped exactly like evidence.json written by
``pytest_hetero.evidence.recorder.assemble``; ``make_bundle`` writes one into a folder with a
journal, captured artifacts, every rendering, the manifest and the (optionally signed) envelope.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pytest_hetero.bundle.finish import finish_bundle
from pytest_hetero.bundle.signoff import matrix_owners, run_signoff
from pytest_hetero.evidence.document import as_document
from pytest_hetero.evidence.inputs import RunInputs
from pytest_hetero.evidence.untested import DOES_NOT_PROVE, summarise
from pytest_hetero.reporting.writers import write_renderings

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import ItemDict, UntestedSection

REPO = Path(__file__).resolve().parents[1]
MATRIX = REPO / "matrices" / "example-cpu.matrix.yaml"
PREFIX = "matrices/example-cpu.matrix.yaml"
OWNERS = {"discovery": "infrastructure", "scheduling": "platform", "startup": "platform", "model": "algorithm",
          "business": "business"}
EVIL = "<script>document.title='PWNED'</script><img src=x onerror=\"document.title='PWNED'\">"


def _item(nodeid: str, layer: str, keys: dict[str, str], status: str, **extra: Any) -> dict[str, Any]:
    item = {"nodeid": nodeid, "matrix": PREFIX, "layer": layer, "keys": keys, "owner": OWNERS[layer],
            "status": status, "started_at": "2026-11-29T10:00:00.000000Z",
            "finished_at": "2026-11-29T10:00:01.500000Z", "duration_s": 1.5, "records": [], "failure": None,
            "blocked_by": None, "reason": None, "artifacts": []}
    item.update(extra)
    return item


def sample_evidence(models: int = 1, datasets: int = 1, log_text: str = "all good",
                    resources: tuple[str, ...] = ("cpu-host", "gpu-nvidia")) -> dict[str, Any]:
    """Evidence for resources cpu-host (all pass) and gpu-nvidia (discovery fails, the rest blocked),
    image py-current, ``models`` × ``datasets`` model@dataset pairs; one excluded combination.
    ``log_text`` is the text of a log record (``sample.log``, a kind of the test's own: its data stays open) of
    the first cpu-host model item (for escaping tests).
    ``resources=("cpu-host",)`` gives a run where everything passed.
    """
    items: list[dict[str, Any]] = []
    untested: list[dict[str, Any]] = []
    gpu_disc = f"{PREFIX}::gpu-nvidia::discovery"

    def add(nodeid: str, layer: str, keys: dict[str, str], status: str, **extra: Any) -> None:
        item = _item(nodeid, layer, keys, status, **extra)
        items.append(item)
        if status not in ("passed", "failed", "error"):
            untested.append({k: item[k] for k in ("nodeid", "layer", "keys", "status", "reason", "blocked_by")})

    for res in resources:
        ok = res == "cpu-host"
        blocked = {} if ok else {"blocked_by": gpu_disc, "reason": f"blocked by {gpu_disc}: no NVIDIA driver"}
        add(f"{PREFIX}::{res}::discovery", "discovery", {"resource": res}, "passed" if ok else "failed",
            failure=None if ok else {"layer": "discovery", "category": "driver_missing",
                                     "message": "nvidia-smi not found: no NVIDIA driver on vm", "owner": "infrastructure"},
            records=[{"kind": "discovery.host", "at": "2026-11-29T10:00:00Z", "data": {"cpus": 4}}])
        add(f"{PREFIX}::{res}::scheduling", "scheduling", {"resource": res}, "passed" if ok else "blocked", **blocked)
        add(f"{PREFIX}::{res}::py-current::startup", "startup", {"resource": res, "image": "py-current"},
            "passed" if ok else "blocked", **blocked)
        for m in range(models):
            for d in range(datasets):
                keys = {"resource": res, "image": "py-current", "model": f"model-{m}", "dataset": f"data-{d}"}
                base = f"{PREFIX}::{res}::py-current::model-{m}@data-{d}"
                extra: dict[str, Any] = dict(blocked)
                if ok and m == 0 and d == 0:
                    extra["records"] = [{"kind": "sample.log", "at": "2026-11-29T10:00:01Z", "data": {"text": log_text}}]
                    extra["artifacts"] = [{"name": "stdout.txt", "path": "artifacts/cpu-host/py-current/stdout.txt",
                                           "size": 0, "sha256": "", "media_type": "text/plain"}]
                add(f"{base}::model", "model", keys, "passed" if ok else "blocked", **extra)
                add(f"{base}::business", "business", keys, "passed" if ok else "blocked", **blocked)
    untested.append({"nodeid": f"{PREFIX}::cpu-host::py-old::startup", "layer": "startup",
                     "keys": {"resource": "cpu-host", "image": "py-old"}, "status": "excluded",
                     "reason": "excluded by matrix rule (line 40): py-old is retired", "blocked_by": None})
    items.sort(key=lambda i: i["nodeid"])
    untested.sort(key=lambda e: e["nodeid"])
    never = {"example-cpu": {"resource": ["gpu-nvidia"]}} if "gpu-nvidia" in resources else {}
    scope = {"items": untested, "never_covered": never, "not_proven": [],
             "does_not_prove": dict(DOES_NOT_PROVE)}
    sha = hashlib.sha256(MATRIX.read_bytes()).hexdigest()
    return {
        "schema": "pytest-hetero/evidence/v1",
        "run": {"id": "run-1", "tool": "pytest-hetero", "tool_version": "0.1.0", "host": "vm",
                "started_at": "2026-11-29T10:00:00.000000Z", "finished_at": "2026-11-29T10:05:00.000000Z",
                "exit_status": 1, "interrupted": False, "git_commit": "abc123", "profile": None},
        "matrices": [{"name": "example-cpu", "path": str(MATRIX), "prefix": PREFIX, "sha256": sha}],
        "target": [{"backend": "local", "identity": "vm", "nodes": ["vm"], "images": {},
                    "versions": {"kernel": "6.1", "python": "3.11.7"}}],
        "items": items, "untested": scope, "summary": summarise(cast("list[ItemDict]", items), cast("UntestedSection", scope)), "errors": [], "warnings": [],
    }


def make_bundle(bundle_dir: Path, evidence: dict[str, Any], key: Path | None,
                owners: dict[str, str] | None = None) -> Path:
    """Write a complete bundle for ``evidence`` into ``bundle_dir`` (signed with ``key`` if given);
    ``owners`` ({layer: team}) replaces the matrix's owner teams."""
    bundle_dir.mkdir(parents=True, exist_ok=True)
    (bundle_dir / "journal.jsonl").write_text(
        "".join(json.dumps({"type": "item", "evidence": i}) + "\n" for i in evidence["items"]), encoding="utf-8")
    for item in evidence["items"]:
        for art in item["artifacts"]:
            path = bundle_dir / art["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("stdout of the model run\n", encoding="utf-8")
    (bundle_dir / "evidence.json").write_text(json.dumps(evidence, indent=1, sort_keys=True), encoding="utf-8")
    inputs = RunInputs()
    kept = inputs.keep(as_document(evidence), bundle_dir)
    teams = matrix_owners(as_document(evidence), inputs)
    if owners:
        teams = {name: {**per, **owners} for name, per in teams.items()}
    write_renderings(as_document(evidence), bundle_dir, run_signoff(teams, key))
    finish_bundle(as_document(evidence), bundle_dir, key, teams, kept)
    return bundle_dir


def policy_text(roles: dict[str, list[tuple[Path, list[str]]]], gate: list[tuple[Path, list[str]]] | None = None,
                allow_gate_key: tuple[str, ...] = (), name: str = "test-policy") -> str:
    """A TrustPolicy YAML document: ``roles`` {role: [(public key PEM file, people's names)]}, optional
    ``gate`` keys, and the roles where the gate key may sign (``allow_gate_key``)."""
    import yaml

    def keys(entries: list[tuple[Path, list[str]]]) -> list[dict[str, Any]]:
        return [{"names": names, "public_key": pub.read_text()} for pub, names in entries]

    doc: dict[str, Any] = {"apiVersion": "pytest-hetero/v1", "kind": "TrustPolicy", "metadata": {"name": name},
                           "roles": {role: {"keys": keys(entries), **({"allow_gate_key": True}
                                                                      if role in allow_gate_key else {})}
                                     for role, entries in roles.items()}}
    if gate:
        doc["gate"] = keys(gate)
    return yaml.safe_dump(doc, sort_keys=False)
