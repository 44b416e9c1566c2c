"""Merge the bundles of a sharded run (``--hetero-shard K/N``) into one bundle.

Checks, before writing anything: every bundle's evidence verifies (run signature → statement → manifest →
evidence.json's digest; or is accepted unsigned on request), and each artifact copied from a verified bundle
is checked against its signed manifest digest as it is copied;
all come from the same matrix digests; no item was run by two bundles (overlap); and every
planned item was run by some bundle unless all bundles left it out for a reason other than
sharding (coverage). The merged bundle is rebuilt the way a run builds its own: a new journal
(run, matrix, item, deselected, target, end lines) assembled by
:func:`pytest_hetero.evidence.recorder.assemble`, so untested scope is computed over the whole
matrix. Artifacts are copied; the bundle is then finished as a run finishes its own
(:func:`pytest_hetero.bundle.finish.publish`: evidence.json, renderings, manifest and statement),
signed when a key is given (else visibly unsigned).
"""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hetero.bundle.finish import publish
from pytest_hetero.bundle.verify import load_verified
from pytest_hetero.errors import BundleError, Location
from pytest_hetero.evidence.document import run_start
from pytest_hetero.evidence.inputs import RunInputs
from pytest_hetero.evidence.model import utc_now
from pytest_hetero.evidence.recorder import JournalLine, MatrixLine, Recorder, RunLine, assemble, read_journal
from pytest_hetero.matrix.selection import SHARD_REASON
from pytest_hetero.settings import SignCommand, bundle_settings

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument

ARTIFACTS = "artifacts"


def _shard(evidence: EvidenceDocument) -> str | None:
    """The shard (``k/n``) a run selected; None for a run that selected none (no ``selection`` section)."""
    selection = evidence.get("selection")
    return selection["shard"] if selection else None


def _matrix_lines(bundle: Path, evidence: EvidenceDocument) -> list[MatrixLine]:
    """The matrix lines of ``bundle``'s journal; without a readable journal, made from ``evidence``'s
    ``matrices`` (a matrix entry written without its ``path`` gets an empty one: its kept copy stands in)."""
    try:
        lines = [e for e in read_journal(bundle) if e["type"] == "matrix"]
    except BundleError:
        lines = []
    if lines:
        return lines
    per_image = any(i["layer"] == "scheduling" and "image" in i["keys"] for i in evidence["items"])
    return [{"type": "matrix", "path": m.get("path", ""), "prefix": m["prefix"], "name": m["name"],
             "sha256": m["sha256"], "scheduling_per_image": per_image} for m in evidence["matrices"]]


def check_shards(evidences: list[tuple[Path, EvidenceDocument]]) -> dict[str, str]:
    """Check digests, overlap and coverage; return nodeid → reason for items no bundle ran
    (to journal as deselected). Raises BundleError naming the offending bundles/items."""
    digests = {p: sorted((m["name"], m["sha256"]) for m in ev["matrices"]) for p, ev in evidences}
    first_path, first = next(iter(digests.items()))
    for path, digest in digests.items():
        if digest != first:
            raise BundleError(f"{path} was run from matrix {digest}, {first_path} from {first}",
                              Location(str(path)), "merge shards of one run of the same matrix version")
    shards = [_shard(ev) for _, ev in evidences]
    named = [s for s in shards if s]
    if len(set(named)) != len(named):
        raise BundleError(f"the same shard appears twice: {', '.join(sorted(named))}",
                          hint="pass each shard's bundle once")
    ran: dict[str, Path] = {}
    for path, ev in evidences:
        for item in ev["items"]:
            if item["nodeid"] in ran:
                raise BundleError(f"item {item['nodeid']} was run by both {ran[item['nodeid']]} and {path}",
                                  hint="shards overlap: were they run with the same --hetero-shard N "
                                       "and selection options?")
            ran[item["nodeid"]] = path
    left: dict[str, list[str]] = {}
    for _, ev in evidences:
        for entry in ev["untested"]["items"]:
            if entry["nodeid"] not in ran and entry["status"] == "deselected":
                left.setdefault(entry["nodeid"], []).append(entry["reason"])
    gaps = sorted(n for n, reasons in left.items() if all(r.startswith(SHARD_REASON) for r in reasons))
    if gaps:
        missing = sorted({r.split(": runs in shard ")[-1].rstrip(")") for n in gaps for r in left[n]
                          if ": runs in shard " in r} - set(named))
        raise BundleError(f"{len(gaps)} planned item(s) were run by no bundle, e.g. {gaps[0]}",
                          hint=f"add the bundle of shard {', '.join(missing)}" if missing
                          else "merge every shard of the run")
    return {n: next(r for r in reasons if not r.startswith(SHARD_REASON)) for n, reasons in left.items()}


def _copy_verified(src: Path, out: Path, entries: dict[str, tuple[str, int]]) -> None:
    """Copy the artifacts the signed manifest of ``src`` lists ({path: (sha256, size)}), checking each digest as
    it is read (the only read of the file); nothing unlisted is copied. Raises BundleError on a mismatch."""
    import hashlib
    import os

    from pytest_hetero.safeio import Unreadable, open_in, read_fd

    for rel, (sha, size) in entries.items():
        if not rel.startswith(ARTIFACTS + "/"):
            continue
        try:
            fd = open_in(src, rel)
            try:
                data = read_fd(fd, size)
            finally:
                os.close(fd)
        except Unreadable as exc:
            raise BundleError(f"artifact {rel}: {exc.kind}: {exc.detail}", Location(str(src / rel)),
                              "use the shard bundle exactly as its run wrote it") from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise BundleError(f"artifact {rel} is not the one the shard's signed manifest lists",
                              Location(str(src / rel)), "use the shard bundle exactly as its run wrote it")
        _place(out / rel, data, src / rel)


def _place(dest: Path, data: bytes, src: Path) -> None:
    if dest.exists():
        if dest.read_bytes() != data:
            raise BundleError(f"artifact {dest.name} differs between shards", Location(str(src)))
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)


def _copy_artifacts(src: Path, out: Path) -> None:
    """Copy the regular files under ``src/artifacts`` of a bundle accepted unverified (``--allow-unsigned``)."""
    for path in sorted((src / ARTIFACTS).rglob("*")):
        rel = path.relative_to(src)
        if not path.is_file() or path.is_symlink():
            continue
        dest = out / rel
        if dest.exists():
            if not filecmp.cmp(path, dest, shallow=False):
                raise BundleError(f"artifact {rel} differs between shards", Location(str(path)))
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)


def _point_at_matrix(matrices: list[MatrixLine], matrix: Path | None, first_bundle: Path) -> None:
    """Point the matrix lines at ``matrix`` (the merge job's checkout; else the first shard's kept copy
    when the recorded path is gone). Raises BundleError when it is not the matrix the shards ran."""
    if matrix is None:
        copy = first_bundle / "inputs" / f"{matrices[0]['name']}.matrix.yaml"
        matrix = copy if not Path(matrices[0]["path"]).is_file() and copy.is_file() else None
    if matrix is None:
        return
    from pytest_hetero.bundle.manifest import sha256_file

    digest, _ = sha256_file(matrix)
    for line in matrices:
        if line["sha256"] == digest:
            line["path"] = str(matrix.resolve())
    if not any(line["sha256"] == digest for line in matrices):
        raise BundleError(f"{matrix} (sha256 {digest[:12]}…) is not the matrix the shards ran", Location(str(matrix)))


def _journal_lines(run_id: str, evidences: list[EvidenceDocument], matrices: list[MatrixLine],
                   deselected: dict[str, str]) -> tuple[RunLine, list[JournalLine]]:
    """The merged run's journal: its run line, and the lines after it: the matrices, every shard's items,
    deselections, each distinct target fingerprint and collection error, and one end line (worst exit status)."""
    runs = [ev["run"] for ev in evidences]
    # the first shard's run line; the merged run's end is its end line's
    run: RunLine = {**run_start(runs[0]), "type": "run", "id": run_id,
                    "started_at": min(r["started_at"] or "" for r in runs), "merged_from": [r["id"] for r in runs]}
    lines: list[JournalLine] = [*matrices]
    lines += [{"type": "item", "evidence": i} for ev in evidences for i in ev["items"]]
    lines += [{"type": "deselected", "nodeid": n, "reason": r} for n, r in sorted(deselected.items())]
    seen: set[str] = set()
    for ev in evidences:
        for fp in ev["target"]:
            key = json.dumps(fp, sort_keys=True)
            if key not in seen:
                seen.add(key)
                lines.append({"type": "target", "fingerprint": fp})
        lines += [{"type": "collect_error", "nodeid": e["nodeid"], "message": e["message"]}
                  for e in ev["errors"]]
    statuses = [r["exit_status"] or 0 for r in runs]
    lines.append({"type": "end", "at": max(r["finished_at"] or utc_now() for r in runs),
                  "exit_status": max(statuses), "interrupted": any(r["interrupted"] for r in runs)})
    return run, lines


def merge_bundles(bundles: list[Path], out: Path, *, hook: Any, allow_unsigned: bool = False,
                  keys: list[Any] | None = None, sign_key: Path | SignCommand | None = None,
                  matrix: Path | None = None) -> EvidenceDocument:
    """Merge shard ``bundles`` (folders) into the new folder ``out``; return its evidence.

    ``hook`` is the ``pytest_hetero_*`` hook relay that finishes the bundle (writers, signature;
    see :func:`~pytest_hetero.bundle.finish.publish`). ``matrix`` overrides the recorded matrix
    path (the merge job's checkout) and must have the same sha256. Raises BundleError for any
    failed check or an existing non-empty ``out`` (nothing is written before every check passed),
    and the first error of a hook after the bundle is finished (e.g. a refused signing key).
    """
    if not bundles:
        raise BundleError("no bundles to merge", hint="hetero merge BUNDLE… -o OUT")
    bundle_reads = [(Path(b), load_verified(Path(b), allow_unsigned=allow_unsigned, keys=keys)) for b in bundles]
    loaded = [(p, r.evidence, r.verification) for p, r in bundle_reads]
    evidences = [(p, ev) for p, ev, _ in loaded]
    deselected = check_shards(evidences)
    matrices = _matrix_lines(*evidences[0])
    _point_at_matrix(matrices, matrix, evidences[0][0])
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"{out} exists and is not empty", Location(str(out)), "choose a new folder")
    out.mkdir(parents=True, exist_ok=True)
    run, lines = _journal_lines(out.name, [ev for _, ev in evidences], matrices, deselected)
    # the merged journal is this process's own: numbered and authenticated like a run's
    recorder = Recorder(out, {k: v for k, v in run.items() if k != "type"})
    if recorder.claim():
        raise BundleError(recorder.refused, Location(str(out)), "choose a new folder")
    recorder.write_entries(lines)
    recorder.sync()
    recorder.close()
    if recorder.broken:
        raise BundleError(recorder.broken, Location(str(out)))
    for path, read in bundle_reads:
        if read.verification == "verified":
            _copy_verified(path, out, read.entries)
        else:
            _copy_artifacts(path, out)
    inputs = RunInputs()
    evidence = assemble(out, inputs, key=recorder.key)
    evidence["merge"] = {"bundles": [{"path": str(p), "run": ev["run"]["id"], "verification": v,
                                      "shard": _shard(ev)} for p, ev, v in loaded]}
    first_sel = evidences[0][1].get("selection")
    if first_sel:
        evidence["selection"] = {**first_sel, "shard": None}
    failed = publish(hook, evidence, bundle_settings(out, sign_key), inputs)
    if failed:
        raise failed[0][1]
    return evidence
