"""Offline verification of an evidence bundle that may be hostile: fail closed, fast, with a name.

:func:`verify_bundle` checks, in this order, and stops at the first step that fails (nothing a
failed step vouches for is read):

1. ``attestation.intoto.jsonl`` is a regular file within its size bound, and each line exactly a
   DSSE envelope over an in-toto statement (:mod:`pytest_hetero.bundle.attestation`);
2. **the run's signature** (line 1): at least one, every one by a trusted gate key, valid over the
   DSSE PAE; an unsigned bundle, an unknown key or a bad signature stops here;
3. the run statement: in-toto v1, our predicate type at a known version, well-formed subjects;
   the envelope line is byte for byte as written; ``statement.intoto.json`` equals the payload;
4. ``manifest.json`` has the signed digest (only then is it parsed), its shape and order;
5. every file of the bundle, walked with ``os.scandir`` relative to directory descriptors: each
   listed file is a regular file hashed up to its listed size, nothing unlisted, no symlink, FIFO,
   device or socket (each a named ``unsafe`` problem); the documented files are all there;
   ``evidence.json`` (the bytes with the listed digest) is a document the verifying loader accepts
   (a ``content`` problem names the field otherwise: its readers would refuse it);
   ``validation.intoto.jsonl`` (each pool's VSA, outside the manifest like the attestation): present
   exactly when the signed statement has pools, one line per pool, each signed by a trusted gate key
   and saying what the signed statement says (:func:`pytest_hetero.bundle.vsa.check_vsas`);
6. each sign-off line (:func:`~pytest_hetero.bundle.signoff_check.check_signoffs`), against the trust
   policy when one is given;
7. required roles, and the freshness bound (``max_age_s``).

It never raises for a hostile bundle and never blocks on one: every malformed input is a
:class:`~pytest_hetero.bundle.manifest.Problem`. :func:`load_verified` is how ``hetero diff``,
``merge`` and the baseline read a bundle: signature → statement → manifest → the digest of
``evidence.json``, reading nothing else.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import msgspec

from pytest_hetero.bundle.attestation import (
    MAX_ATTESTATION_BYTES,
    SIGNOFF_PREDICATE_TYPE,
    Attestation,
    RunClaim,
    WrittenDigest,
    WrittenSubject,
    chain_head,
    read_attestations,
)
from pytest_hetero.bundle.manifest import (
    ATTESTATION,
    MANIFEST,
    SIGNATURE_FILES,
    STATEMENT,
    VALIDATION,
    Problem,
    manifest_entries,
)
from pytest_hetero.bundle.signing import (
    PAYLOAD_TYPE,
    PREDICATE_PREFIX,
    PREDICATE_VERSIONS,
    STATEMENT_TYPE,
    check_signature,
    envelope_bytes,
    keyid,
    legacy_keyid,
    pae,
)
from pytest_hetero.bundle.signoff_check import SignOff, check_signoffs, current, role_state
from pytest_hetero.errors import BundleError, Location
from pytest_hetero.safeio import MIB, Unreadable, file_kind, hash_fd, loads_bounded, read_regular, safe_relative
from pytest_hetero.settings import SignCommand

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from pytest_hetero.bundle.policy import TrustPolicy
    from pytest_hetero.evidence.document import EvidenceDocument

MAX_MANIFEST_BYTES = 512 * MIB
"""The most ``manifest.json`` may hold (50,000 items with 3 artifacts each: about 30 MiB)."""
MAX_UNVERIFIED_EVIDENCE_BYTES = 2 << 30
"""The most an ``evidence.json`` read without a signed manifest (``--allow-unsigned``, render without
``--key``) may hold (2 GiB; a 100,000-item run writes a few hundred MiB): a larger or sparse one is refused
unread."""
MAX_DEPTH = 64
"""Folder depth beyond which the walk stops with a named problem."""
EVIDENCE = "evidence.json"
REQUIRED_FILES: tuple[str, ...] = (EVIDENCE, "journal.jsonl", "report.html", "summary.md", "junit.xml", "ctrf.json")
"""Files every finished bundle has (docs/evidence-bundle.md); a signed bundle lacking one is incomplete."""
_HEX64 = re.compile(r"[0-9a-f]{64}")


class SignedRun(TypedDict):
    """The run as the signed predicate states it (:func:`_check_statement`): its ``id``, ``verdict`` and
    ``finished_at`` as written (untrusted JSON values; None when absent) and whether the finish time was
    ``finished_at_recovered`` (true only when the predicate says exactly ``true``)."""

    id: object
    verdict: object
    finished_at: object
    finished_at_recovered: bool


def _no_run() -> SignedRun:
    """The run of a statement that states none (every field unknown)."""
    return {"id": None, "verdict": None, "finished_at": None, "finished_at_recovered": False}


@dataclass
class Verification:
    """Result of :func:`verify_bundle`: ``problems`` (empty = verified); the trusted ``run_signers``;
    every ``signoffs`` line as checked; the run ``statement`` (None when unreadable); ``run``
    (:class:`SignedRun`) from the signed predicate (every field unknown when it states none); the number of manifest
    ``files`` checked; the ``policy`` sign-offs were checked against (None: not checked)."""

    problems: list[Problem] = field(default_factory=list)
    run_signers: list[str] = field(default_factory=list)
    signoffs: list[SignOff] = field(default_factory=list)
    statement: dict[str, Any] | None = None
    run: SignedRun = field(default_factory=_no_run)
    files: int = 0
    policy: TrustPolicy | None = None
    payload_sha256: str = ""
    chain_head: str = ""
    """``N:<sha256 of the last attestation line>`` (:func:`~pytest_hetero.bundle.attestation.chain_head`)."""

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.problems

    @property
    def roles(self) -> dict[str, list[SignOff]]:
        """{role: its verified sign-offs}."""
        out: dict[str, list[SignOff]] = {}
        for s in self.signoffs:
            if s.verified:
                out.setdefault(s.role, []).append(s)
        return out


def gate_keys(public_keys: list[Ed25519PublicKey], policy: TrustPolicy | None = None) -> dict[str, Ed25519PublicKey]:
    """{keyid: key} of the keys trusted to sign runs: ``public_keys`` and the policy's gate keys,
    each under its keyid and its :func:`~pytest_hetero.bundle.signing.legacy_keyid`."""
    keys = [*public_keys, *(k.public for k in policy.gate.values())] if policy else list(public_keys)
    out = {}
    for key in keys:
        out[keyid(key)] = key
        out[legacy_keyid(key)] = key
    return out


def check_run_signature(run: Attestation, keys: dict[str, Ed25519PublicKey], result: Verification) -> None:
    """Step 2: the run's line carries at least one signature and each is by a key of ``keys``
    ({keyid: key}, see :func:`gate_keys`) and valid; trusted signers go to ``result.run_signers``,
    every failure to ``result.problems``."""
    if run.predicate_type == SIGNOFF_PREDICATE_TYPE:
        result.problems.append(Problem(ATTESTATION, "predicate", "line 1 is a team sign-off, not the run's "
                                       "attestation: the bundle has no run signature"))
        return
    if not run.signatures:
        result.problems.append(Problem(ATTESTATION, "unsigned", "the bundle is UNSIGNED (no signature in the "
                                       "run's envelope)"))
        return
    message = pae(PAYLOAD_TYPE, run.payload)
    for n, sig in enumerate(run.signers, 1):
        kid = sig.keyid or ""
        label = f"signature {n} (keyid {kid[:16]}…)"
        public = keys.get(kid)
        if public is None:
            result.problems.append(Problem(label, "unknown_key", "the run is signed by a key not trusted here "
                                                                 "(--key, or the policy's gate keys)"))
        elif not check_signature(public, sig.sig, message):
            result.problems.append(Problem(label, "signature", "does not verify: the statement was altered or the "
                                                               "signature is corrupt"))
        else:
            result.run_signers.append(keyid(public))


def _subjects(subjects: object, result: Verification) -> dict[str, str]:
    """{name: sha256} of the run statement's ``subjects`` (as written); shape problems go to ``result``."""
    out: dict[str, str] = {}
    for subject in subjects if isinstance(subjects, list) else []:
        # only JSON objects are converted, and every field is any JSON value: converting cannot fail
        said = msgspec.convert(subject, WrittenSubject) if isinstance(subject, dict) else WrittenSubject()
        name, digest = said.name, said.digest
        sha = msgspec.convert(digest, WrittenDigest).sha256 if isinstance(digest, dict) else None
        if not isinstance(name, str) or not safe_relative(name) or not isinstance(sha, str) \
                or not _HEX64.fullmatch(sha):
            result.problems.append(Problem(str(name)[:200] if name else "?", "subject",
                                           "subject has an unsafe name or no sha256 hex digest"))
            continue
        out[name] = sha
    if MANIFEST not in out:
        result.problems.append(Problem(MANIFEST, "subject", "the signed statement does not cover manifest.json"))
    return out


def _check_statement(run: Attestation, claim: RunClaim, result: Verification) -> dict[str, str]:
    if run.statement_type != STATEMENT_TYPE:
        result.problems.append(Problem(ATTESTATION, "predicate",
                                       f"_type {str(run.statement_type)[:80]!r} is not {STATEMENT_TYPE}"))
    ptype = str(run.predicate_type_written)
    if not ptype.startswith(PREDICATE_PREFIX):
        result.problems.append(Problem(ATTESTATION, "predicate", f"wrong predicate type {ptype[:120]!r}: not a "
                                       f"pytest-hetero evidence bundle (expected {PREDICATE_PREFIX}"
                                       f"{PREDICATE_VERSIONS[-1]})"))
    elif ptype[len(PREDICATE_PREFIX):] not in PREDICATE_VERSIONS:
        result.problems.append(Problem(ATTESTATION, "predicate", f"unknown predicate version "
                                       f"{ptype[len(PREDICATE_PREFIX):][:40]!r} (this verifier knows "
                                       f"{', '.join(PREDICATE_VERSIONS)})"))
    if not claim.run_stated:
        result.problems.append(Problem(ATTESTATION, "predicate", "the predicate has no run section"))
    else:
        result.run = {"id": claim.run_id, "verdict": claim.verdict, "finished_at": claim.finished_at,
                      "finished_at_recovered": claim.finished_at_recovered}
    return _subjects(run.subject, result)


def _read_attestations(bundle_dir: Path, result: Verification) -> list[Attestation] | None:
    try:
        return read_attestations(bundle_dir, PAYLOAD_TYPE)
    except Unreadable as exc:
        result.problems.append(Problem(ATTESTATION, exc.kind, exc.detail))
        return None


def _verify_run(bundle_dir: Path, keys: dict[str, Ed25519PublicKey], result: Verification,
                any_signer: bool = False) -> tuple[list[Attestation], RunClaim, dict[str, str]] | None:
    """Steps 1-3: the run's attestation, signature and statement: (the lines, the run's claim, {subject:
    sha256}); None when it failed (then stop).
    ``any_signer``: a signature by a key not in ``keys`` is not a problem (it is not checked)."""
    lines = _read_attestations(bundle_dir, result)
    if lines is None:
        return None
    run = lines[0]
    check_run_signature(run, keys, result)
    if any_signer:
        result.problems = [p for p in result.problems if p.kind != "unknown_key"]
    if result.problems:
        return None
    result.statement = run.statement
    result.payload_sha256 = hashlib.sha256(run.payload).hexdigest()
    claim = RunClaim.of(run)
    subjects = _check_statement(run, claim, result)
    if run.raw != envelope_bytes(run.envelope).rstrip(b"\n"):
        result.problems.append(Problem(ATTESTATION, "edited", "line 1 is not byte for byte as pytest-hetero "
                                       "writes it (reformatted or edited after signing)"))
    try:
        if read_regular(bundle_dir, STATEMENT, MAX_ATTESTATION_BYTES) != run.payload:
            result.problems.append(Problem(STATEMENT, "modified", "differs from the signed payload in the envelope"))
    except Unreadable as exc:
        result.problems.append(Problem(STATEMENT, exc.kind, f"the copy of the signed statement: {exc.detail}"))
    return (lines, claim, subjects) if not result.problems else None


def read_manifest(bundle_dir: Path, digest: str, result: Verification) -> list[tuple[str, str, int]] | None:
    """Step 4: the manifest's entries when its bytes have the signed ``digest``; else None (problem noted)."""
    try:
        data = read_regular(bundle_dir, MANIFEST, MAX_MANIFEST_BYTES)
    except Unreadable as exc:
        result.problems.append(Problem(MANIFEST, exc.kind, exc.detail))
        return None
    actual = hashlib.sha256(data).hexdigest()
    if actual != digest:
        result.problems.append(Problem(MANIFEST, "modified", f"sha256 {actual[:16]}… does not match the signed "
                                                             f"statement's subject digest {digest[:16]}…"))
        return None
    try:
        entries = manifest_entries(loads_bounded(data, "manifest.json"))
    except Unreadable as exc:
        result.problems.append(Problem(MANIFEST, exc.kind, exc.detail))
        return None
    for i in range(1, len(entries)):
        a, b = entries[i - 1][0], entries[i][0]
        if b.encode("utf-8", "surrogateescape") <= a.encode("utf-8", "surrogateescape"):
            what = "duplicate entry" if a == b else "entries out of order"
            result.problems.append(Problem(MANIFEST, "order", f"{what}: {b!r} listed after {a!r} (entry {i})"))
            return None
    return entries


@dataclass
class _Walk:
    listed: dict[str, tuple[str, int]]
    seen: dict[str, tuple[str, int]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def _scan(dir_fd: int, prefix: str, walk: _Walk, depth: int) -> None:
    if depth > MAX_DEPTH:
        walk.problems.append(Problem(prefix.rstrip("/"), "unsafe", f"folders nested deeper than {MAX_DEPTH}"))
        return
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                try:
                    sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                except OSError as exc:
                    walk.problems.append(Problem(rel, "unsafe", f"folder cannot be opened ({exc.strerror})"))
                    continue
                try:
                    _scan(sub, rel + "/", walk, depth + 1)
                finally:
                    os.close(sub)
            elif entry.is_file(follow_symlinks=False):
                if rel in walk.listed:
                    _hash_entry(dir_fd, entry.name, rel, walk)
                elif not (depth == 0 and rel in SIGNATURE_FILES):
                    walk.problems.append(Problem(rel, "extra", "file in the bundle is not listed in the manifest"))
            else:
                mode = entry.stat(follow_symlinks=False).st_mode
                walk.problems.append(Problem(rel, "unsafe", f"a {file_kind(mode)} in the bundle: only regular "
                                                            "files are evidence"))


def _hash_entry(dir_fd: int, name: str, rel: str, walk: _Walk) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        walk.problems.append(Problem(rel, "unsafe", f"cannot be opened as a regular file ({exc.strerror})"))
        return
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # replaced between the listing and the open
            walk.problems.append(Problem(rel, "unsafe", f"a {file_kind(mode)}, not a regular file"))
            return
        walk.seen[rel] = hash_fd(fd, walk.listed[rel][1])
    finally:
        os.close(fd)


def check_files(bundle_dir: Path, entries: list[tuple[str, str, int]], result: Verification) -> None:
    """Step 5: every listed file is a regular file with its listed digest and size; nothing else is
    in the bundle; the documented files (:data:`REQUIRED_FILES`) are listed."""
    walk = _Walk({rel: (sha, size) for rel, sha, size in entries})
    for rel in walk.listed:
        if not safe_relative(rel) or rel in SIGNATURE_FILES:
            result.problems.append(Problem(rel, "unsafe", "listed path escapes the bundle or names a signature file"))
    fd = os.open(bundle_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _scan(fd, "", walk, 0)
    finally:
        os.close(fd)
    unsafe = {p.path for p in walk.problems}
    for rel, (sha, size) in walk.listed.items():
        got = walk.seen.get(rel)
        if got is None:
            parents = {rel.rsplit("/", n)[0] for n in range(1, rel.count("/") + 1)}
            if rel not in unsafe and not parents & unsafe and safe_relative(rel):
                result.problems.append(Problem(rel, "missing", "listed in the manifest but not in the bundle"))
        elif got != (sha, size):
            more = " or more" if got[1] > size else ""
            result.problems.append(Problem(rel, "modified", f"sha256 {got[0][:16]}… ({got[1]}{more} bytes) but the "
                                                            f"manifest says {sha[:16]}… ({size} bytes)"))
    result.problems.extend(walk.problems)
    result.files = len(entries)
    for rel in REQUIRED_FILES:
        if rel not in walk.listed:
            result.problems.append(Problem(rel, "incomplete", "a documented file of every bundle is not in the "
                                                              "signed manifest: the bundle is incomplete"))


def _listed_evidence(bundle_dir: Path, entries: list[tuple[str, str, int]]) -> bytes | None:
    """The bytes of ``evidence.json`` as the signed manifest ``entries`` list it — read once, at most its listed
    size, its sha256 the listed one — or None when it is not listed. Raises :class:`Unreadable`: its own kinds
    (missing, unsafe…), or ``modified`` when the file is larger than listed or has another digest. The one read
    of the evidence that :func:`load_verified` and verification step 5b (:func:`_check_evidence`) rest on."""
    listed = next(((sha, size) for rel, sha, size in entries if rel == EVIDENCE), None)
    if listed is None:
        return None
    sha, size = listed
    try:
        data = read_regular(bundle_dir, EVIDENCE, size)
    except Unreadable as exc:
        if exc.kind == "oversize":
            raise Unreadable("modified", f"larger than the {size} bytes the signed manifest lists") from None
        raise
    if hashlib.sha256(data).hexdigest() != sha:
        raise Unreadable("modified", "its sha256 is not the signed manifest's")
    return data


def _check_evidence(bundle_dir: Path, entries: list[tuple[str, str, int]], result: Verification) -> None:
    """Step 5b: the signed ``evidence.json`` is an evidence document its readers accept — the verifying loader
    (:func:`_evidence_of`: every section and record held to its declared shape) runs on the bytes whose digest
    the manifest lists, so ``verify`` never says OK for a bundle that ``render``, ``diff``, ``trend`` or
    ``catalog`` would refuse. Skipped when the file is not listed or was already found changed (that problem
    is noted). Adds a ``content`` problem naming the field that does not fit."""
    if any(p.path == EVIDENCE for p in result.problems):
        return
    try:
        data = _listed_evidence(bundle_dir, entries)
    except Unreadable as exc:  # changed after the manifest check read it
        result.problems.append(Problem(EVIDENCE, exc.kind, exc.detail))
        return
    if data is None:
        return
    try:
        _evidence_of(data, bundle_dir / EVIDENCE)
    except BundleError as exc:
        where = f" at {exc.location.field}" if exc.location.field else ""
        why = exc.message.removeprefix("not an evidence document: ")
        result.problems.append(Problem(EVIDENCE, "content", f"signed, but not an evidence document the readers "
                                       f"accept{where}: {why} (a gate defect, or a newer format than this verifier "
                                       "knows)"))


def _age_problem(finished_at: Any, max_age_s: float, now: datetime) -> Problem | None:
    try:
        finished = datetime.fromisoformat(str(finished_at).replace("Z", "+00:00"))
        if finished.tzinfo is None:
            raise ValueError("no time zone")
    except ValueError:
        return Problem("run", "stale", f"the signed run has no readable finish time ({str(finished_at)[:40]!r})")
    age = (now - finished).total_seconds()
    if age > max_age_s:
        return Problem("run", "stale", f"finished at {finished_at}, {age / 3600:.1f} h ago: older than --max-age "
                                       f"({max_age_s / 3600:.1f} h)")
    if age < -300:
        return Problem("run", "stale", f"finished at {finished_at}, in the future by {-age:.0f} s")
    return None


def _require(result: Verification, require_roles: list[str] | tuple[str, ...]) -> None:
    for role in require_roles:
        if result.policy is None:
            result.problems.append(Problem(f"role {role}", "role", "a required sign-off can only be checked against "
                                           "a trust policy (--policy)"))
            continue
        mine = [s for s in result.signoffs if s.role == role and s.verified]
        state = role_state(mine)
        if state == "pending":
            result.problems.append(Problem(f"role {role}", "role", "required sign-off is missing (pending)"))
        elif state == "rejected":
            who = "; ".join(f"{', '.join(s.names)}: {s.conditions}" for s in current(mine) if s.decision == "reject")
            result.problems.append(Problem(f"role {role}", "role", f"rejected by {who}"))


def _head_problems(lines: list[Attestation], pinned: str) -> list[Problem]:
    """The problems of ``lines`` (the attestations) against the pinned chain head ``N:<sha256>``."""
    count, _, digest = pinned.partition(":")
    if not count.isdigit() or not re.fullmatch(r"[0-9a-f]{64}", digest.lower().removeprefix("sha256:")):
        return [Problem(ATTESTATION, "signoff_head", f"--signoff-head {pinned[:80]!r} is not N:<64 hex digits>")]
    n, have = int(count), len(lines) - 1
    if have < n:
        return [Problem(ATTESTATION, "signoff_removed", f"the bundle holds {have} sign-off(s) but {n} were pinned: "
                        f"the latest {n - have} sign-off line(s) were removed")]
    if n and hashlib.sha256(lines[n].raw).hexdigest() != digest.lower().removeprefix("sha256:"):
        return [Problem(ATTESTATION, "signoff_chain", f"sign-off {n} is not the pinned one: the sign-offs were "
                        "replaced")]
    if not n and hashlib.sha256(lines[0].raw).hexdigest() != digest.lower().removeprefix("sha256:"):
        return [Problem(ATTESTATION, "signoff_chain", "the run's line is not the pinned one")]
    return []


def verify_bundle(bundle_dir: Path, public_keys: list[Ed25519PublicKey],
                  require_roles: list[str] | tuple[str, ...] = (), *, policy: TrustPolicy | None = None,
                  max_age_s: float | None = None, now: datetime | None = None,
                  any_signer: bool = False, signoff_head: str | None = None) -> Verification:
    """Verify ``bundle_dir`` (steps in the module docstring) against the trusted run keys
    ``public_keys`` (plus the policy's gate keys) and, when given, the trust ``policy``.

    ``require_roles``: each must have a verified, non-rejecting sign-off (needs ``policy``).
    ``max_age_s``: the signed run must have finished at most this many seconds before ``now``
    (default: the current UTC time). ``any_signer``: a run signed by a key not trusted here is not a
    problem (``hetero sign`` without a gate key: every other step still runs). ``signoff_head``
    (``N:<sha256>``, as ``hetero sign`` printed it): the bundle must still hold that N-th sign-off line, so
    the removal of the latest sign-offs is a problem (the chain reveals any other removal). Never raises
    for bundle content; returns every problem.
    """
    result = Verification(policy=policy)
    try:
        if not stat.S_ISDIR(os.stat(bundle_dir).st_mode):
            raise NotADirectoryError(bundle_dir)
    except OSError:
        result.problems.append(Problem(str(bundle_dir), "missing", "not a bundle folder"))
        return result
    verified = _verify_run(bundle_dir, gate_keys(public_keys, policy), result, any_signer)
    if verified is None:
        return result
    lines, claim, subjects = verified
    entries = read_manifest(bundle_dir, subjects[MANIFEST], result)
    if entries is None:
        return result
    check_files(bundle_dir, entries, result)
    _check_evidence(bundle_dir, entries, result)
    listed = {rel: sha for rel, sha, _ in entries}
    for name, sha in subjects.items():
        if name != MANIFEST and listed.get(name) != sha:
            result.problems.append(Problem(name, "modified", "the manifest's digest is not the signed statement's "
                                                             "subject digest" if name in listed else
                                           "subject of the signed statement is not listed in the manifest"))
    not_kept = claim.inputs_not_kept
    if isinstance(not_kept, list) and not_kept:
        result.problems.append(Problem("inputs", "not_kept", f"{len(not_kept)} input(s) the run used are not in the "
                                       f"bundle (signed in the statement): {str(not_kept[0])[:300]}"))
    _check_validation(bundle_dir, lines[0], claim, None if any_signer else gate_keys(public_keys, policy), result)
    signoffs, problems = check_signoffs(lines[1:], result.payload_sha256, claim, policy,
                                        run_line=lines[0].raw)
    result.signoffs = signoffs
    result.problems.extend(problems)
    result.chain_head = chain_head(lines)
    if signoff_head is not None:
        result.problems.extend(_head_problems(lines, signoff_head))
    _require(result, require_roles)
    if max_age_s is not None:
        problem = _age_problem(result.run["finished_at"], max_age_s, now or datetime.now(UTC))
        if problem:
            result.problems.append(problem)
    return result


def _check_validation(bundle_dir: Path, run: Attestation, claim: RunClaim, keys: dict[str, Ed25519PublicKey] | None,
                      result: Verification) -> None:
    """Step 5b: ``validation.intoto.jsonl`` (:func:`pytest_hetero.bundle.vsa.check_vsas`) against the
    signed predicate's ``validation`` (``claim``); ``keys`` None (``any_signer``): contents checked, signatures
    not."""
    from pytest_hetero.bundle.vsa import check_vsas

    _, problems = check_vsas(bundle_dir, keys, claim.validation, run.payload)
    result.problems.extend(Problem(VALIDATION, "validation", p) for p in problems)


def trusted_keys(paths: list[Path] | tuple[Path, ...] = (), private: Path | SignCommand | None = None) -> list[Any]:
    """Ed25519 public keys to verify bundles with: each PEM in ``paths``, every path in
    ``$HETERO_TRUST_KEYS`` (``os.pathsep``-separated), and the public half of ``private`` (the
    run's own ``--hetero-sign-key``). Raises BundleError (SigningKeyError) for an unreadable key."""
    from pytest_hetero.bundle.signing import load_private_key, load_public_key

    env = [Path(p) for p in os.environ.get("HETERO_TRUST_KEYS", "").split(os.pathsep) if p]
    keys = [load_public_key(Path(p)) for p in [*paths, *env]]
    if isinstance(private, Path):
        keys.append(load_private_key(private).public_key())
    elif private is not None:  # an external signer: its public key
        keys.append(load_public_key(private.public))
    return keys


@dataclass
class Loaded:
    """A bundle read by :func:`load_verified`: the ``evidence`` document, ``verification``
    (``verified``, ``unsigned`` or ``unverified``), and the signed ``manifest`` [(path, sha256, size)]
    (empty unless verified)."""

    evidence: EvidenceDocument
    verification: str
    manifest: list[tuple[str, str, int]]

    @property
    def entries(self) -> dict[str, tuple[str, int]]:
        """The signed manifest as {path: (sha256, size)}."""
        return {rel: (sha, size) for rel, sha, size in self.manifest}


def _refuse(bundle: Path, result: Verification) -> BundleError:
    text = "; ".join(str(p) for p in result.problems[:5])
    untrusted = all(p.kind == "unknown_key" for p in result.problems)
    hint = ("the run's signing key is not trusted here: pass its public key with --key PUB.pem (pytest: "
            "$HETERO_TRUST_KEYS)" if untrusted else "use the bundle exactly as the run wrote it")
    return BundleError(f"bundle does not verify ({len(result.problems)} problem(s)): {text}",
                       Location(str(bundle)), hint)


def _evidence_of(data: bytes, where: Path) -> EvidenceDocument:
    """The evidence document in ``data`` (the bytes of ``where``): the one place untrusted JSON becomes an
    :class:`~pytest_hetero.evidence.document.EvidenceDocument` (:func:`~pytest_hetero.evidence.document.as_document`
    checks its shape). Raises BundleError naming the field that is wrong."""
    from pytest_hetero.evidence.document import DocumentError, as_document
    from pytest_hetero.evidence.model import gc_paused

    try:
        with gc_paused():  # millions of new objects, no cycles: collections would only walk them again
            evidence = loads_bounded(data, EVIDENCE)
    except Unreadable as exc:
        raise BundleError(f"cannot read evidence: {exc.detail}", Location(str(where)),
                          "point at a report folder written by pytest-hetero") from None
    if not isinstance(evidence, dict) or "items" not in evidence or "untested" not in evidence:
        raise BundleError("not an evidence document", Location(str(where)))
    try:
        return as_document(evidence)
    except DocumentError as exc:
        raise BundleError(f"not an evidence document: {exc.message}", Location(str(where), field=exc.path),
                          "use the bundle exactly as the run wrote it") from None


def _unverified_read(bundle: Path, state: str) -> Loaded:
    try:
        data = read_regular(bundle, EVIDENCE, MAX_UNVERIFIED_EVIDENCE_BYTES)
    except Unreadable as exc:
        raise BundleError(f"cannot read evidence: {exc.kind}: {exc.detail}", Location(str(bundle / EVIDENCE)),
                          "point at a report folder written by pytest-hetero") from None
    return Loaded(_evidence_of(data, bundle / EVIDENCE), state, [])


def load_verified(path: Path, *, allow_unsigned: bool, keys: list[Any] | None = None) -> Loaded:
    """Read ``path`` (a bundle folder, or its ``evidence.json``) verifying only what the evidence
    rests on: the run's signature → the statement → the manifest's digest → the digest of
    ``evidence.json`` (read once, up to its listed size). Artifacts are not read; sign-offs are
    not checked (they do not change the evidence).

    An unsigned bundle, or a signed one with no trusted key given, is read only with
    ``allow_unsigned`` and reported as ``unsigned`` / ``unverified``. Raises BundleError when the
    evidence is unreadable or does not verify (tampered, unknown signer, hostile files).
    """
    path = Path(path)
    bundle = path.parent if path.name == EVIDENCE and not path.is_dir() else path
    result = Verification()
    lines = _read_attestations(bundle, result)
    signed = bool(lines and lines[0].signatures)
    if not signed or not keys:
        if lines is not None and not signed and not allow_unsigned:
            raise BundleError("bundle is not signed, so it cannot be verified", Location(str(bundle)),
                              "sign runs with --hetero-sign-key, or pass --allow-unsigned "
                              "(pytest: --hetero-allow-unsigned) to accept it unverified")
        if lines is not None and signed and not allow_unsigned:
            raise BundleError("bundle is signed but no trusted public key was given", Location(str(bundle)),
                              "pass --key PUB.pem (pytest: --hetero-sign-key or $HETERO_TRUST_KEYS)")
        if lines is None and not allow_unsigned:
            raise _refuse(bundle, result)
        return _unverified_read(bundle, "unverified" if signed else "unsigned")
    verified = _verify_run(bundle, gate_keys(keys), result)
    entries = read_manifest(bundle, verified[2][MANIFEST], result) if verified else None
    if entries is None:
        raise _refuse(bundle, result)
    try:
        data = _listed_evidence(bundle, entries)
    except Unreadable as exc:
        raise BundleError(f"bundle does not verify: evidence.json: {exc.kind}: {exc.detail}", Location(str(bundle)),
                          "use the bundle exactly as the run wrote it") from None
    if data is None:
        raise BundleError("evidence.json is not in the signed manifest: the bundle is incomplete",
                          Location(str(bundle)))
    return Loaded(_evidence_of(data, bundle / EVIDENCE), "verified", entries)


def load_evidence(path: Path, *, allow_unsigned: bool, keys: list[Any] | None = None
                  ) -> tuple[EvidenceDocument, str]:
    """(evidence document, ``verified`` | ``unsigned`` | ``unverified``) of the bundle at ``path``;
    see :func:`load_verified` (same checks, same errors)."""
    loaded = load_verified(path, allow_unsigned=allow_unsigned, keys=keys)
    return loaded.evidence, loaded.verification
