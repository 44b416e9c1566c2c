"""``validation.intoto.jsonl``: each pool's validation status as a SLSA Verification Summary Attestation.

One line per pool of the run's signed ``validation`` section, each a DSSE envelope (the run's key; no
signature when the run is unsigned) over an in-toto Statement v1 with predicateType
:data:`VSA_PREDICATE_TYPE` (https://slsa.dev/spec/v1.0/verification_summary). The statement's subject is
the pool: name ``hetero-pool:<matrix>/<pool>``, digest the sha256 of the canonical JSON of
:func:`pool_identity` (matrix, pool, requests, node selector, nodes). The predicate:

* ``verifier.id`` :data:`VERIFIER_ID`, ``verifier.version`` ``{"pytest-hetero": version}``;
* ``timeVerified`` (the run's end), ``resourceUri`` (the subject's name);
* ``policy``: ``{"uri": LEVELS_POLICY, "digest": {"sha256": the matrix file's sha256}}``;
* ``inputAttestations``: ``[{"uri": "statement.intoto.json", "digest": {"sha256": the run statement's
  payload digest}}]`` — what binds the VSA to exactly one bundle;
* ``verificationResult`` ``PASSED`` when at least one task type reached a level above ``none``;
* ``verifiedLevels``: ``PYTEST_HETERO_<TASK_TYPE>_<LEVEL>`` per task type (upper case, ``-`` → ``_``);
  VSA v1 allows non-SLSA level strings;
* ``pytestHetero``: ``{"validFrom", "validUntil", "taskTypes": {task: level}, "domain"}``. VSA v1 has no
  expiry field; consumers that follow the in-toto parsing rules ignore this extension field, so the
  expiry is only enforced by readers that know it (:func:`read_vsas` and ``hetero publish``).

The file is a signature file: it is outside the manifest (it names the statement's digest, so it
cannot be inside it) and :func:`read_vsas` checks it offline with the bundle's keys.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hetero import __version__
from pytest_hetero.bundle.manifest import STATEMENT, VALIDATION
from pytest_hetero.errors import BundleError, Location

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    from pytest_hetero.bundle.signing import Signer

VSA_PREDICATE_TYPE = "https://slsa.dev/verification_summary/v1"
VERIFIER_ID = "https://pytest-hetero.dev/gate"
LEVELS_POLICY = "https://pytest-hetero.dev/policy/validation-levels/v1"
MAX_VSA_BYTES = 64 * 1024 * 1024


def pool_identity(pool: dict[str, Any]) -> dict[str, Any]:
    """What names a pool in its subject digest: matrix, pool, requests, node selector, nodes."""
    return {k: pool.get(k) for k in ("matrix", "pool", "requests", "node_selector", "nodes")}


def verified_level(task_type: str, level: str) -> str:
    """``PYTEST_HETERO_<TASK_TYPE>_<LEVEL>``, e.g. ``PYTEST_HETERO_BATCH_INFERENCE_BUSINESS``."""
    return f"PYTEST_HETERO_{task_type}_{level}".upper().replace("-", "_")


def vsa_statement(pool: dict[str, Any], statement_digest: str, matrix_sha256: str) -> dict[str, Any]:
    """The in-toto Statement v1 (a VSA) of one ``pool`` entry of the validation status."""
    from pytest_hetero.bundle.signing import STATEMENT_TYPE, canonical

    name = f"hetero-pool:{pool['matrix']}/{pool['pool']}"
    levels = {task: str(entry["level"]) for task, entry in sorted(pool["task_types"].items())}
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": hashlib.sha256(canonical(pool_identity(pool))).hexdigest()}}],
        "predicateType": VSA_PREDICATE_TYPE,
        "predicate": {
            "verifier": {"id": VERIFIER_ID, "version": {"pytest-hetero": __version__}},
            "timeVerified": pool["verified_at"], "resourceUri": name,
            "policy": {"uri": LEVELS_POLICY, "digest": {"sha256": matrix_sha256}},
            "inputAttestations": [{"uri": STATEMENT, "digest": {"sha256": statement_digest}}],
            "verificationResult": "PASSED" if any(v != "none" for v in levels.values()) else "FAILED",
            "verifiedLevels": [verified_level(t, v) for t, v in levels.items() if v != "none"],
            "pytestHetero": {"validFrom": pool["verified_at"], "validUntil": pool["expires_at"],
                             "taskTypes": levels, "domain": pool["domain"]},
        },
    }


def write_vsas(bundle_dir: Path, validation: dict[str, Any], matrices: list[dict[str, Any]],
               statement_bytes: bytes, key: Ed25519PrivateKey | Signer | None) -> int:
    """Write ``validation.intoto.jsonl`` (one envelope per pool; none written when there is no pool);
    return the number of lines. ``matrices`` are the evidence's ``[{"name", "sha256", …}]``."""
    from pytest_hetero.bundle.signing import envelope_bytes, envelope_for

    pools = validation.get("pools") or []
    path = bundle_dir / VALIDATION
    if not pools:
        path.unlink(missing_ok=True)
        return 0
    digest = hashlib.sha256(statement_bytes).hexdigest()
    shas = {m["name"]: m["sha256"] for m in matrices}
    lines = []
    for pool in pools:
        data = json.dumps(vsa_statement(pool, digest, shas.get(pool["matrix"], "")), sort_keys=True,
                          separators=(",", ":")).encode("utf-8")
        lines.append(envelope_bytes(envelope_for(data, key)))
    tmp = path.with_name(VALIDATION + ".tmp")
    tmp.write_bytes(b"".join(lines))
    tmp.replace(path)
    return len(lines)


def read_vsas(bundle_dir: Path, keys: dict[str, Ed25519PublicKey] | None,
              predicate_validation: dict[str, Any]) -> list[dict[str, Any]]:
    """The VSA statements of ``bundle_dir``, checked offline: each envelope is signed by one of ``keys``
    ({keyid: public key}; None: unsigned accepted, e.g. an unsigned bundle read with --allow-unsigned),
    names the digest of this bundle's ``statement.intoto.json``, and says exactly what the signed
    ``predicate_validation`` says for its pool (levels, expiry). Raises BundleError naming the line."""
    from pytest_hetero.bundle.signing import PAYLOAD_TYPE, check_signature, pae

    path = bundle_dir / VALIDATION
    where = Location(str(path))
    if not path.is_file() or path.is_symlink():
        raise BundleError(f"no {VALIDATION} in the bundle", where, "the run wrote no validation status (no pool)")
    if path.stat().st_size > MAX_VSA_BYTES:
        raise BundleError(f"{VALIDATION} is larger than {MAX_VSA_BYTES} bytes", where)
    digest = hashlib.sha256((bundle_dir / STATEMENT).read_bytes()).hexdigest()
    expected = {f"hetero-pool:{p['matrix']}/{p['pool']}": p for p in predicate_validation.get("pools") or []}
    out: list[dict[str, Any]] = []
    for n, raw in enumerate(path.read_bytes().splitlines(), 1):
        at = Location(str(path), n)
        try:
            env = json.loads(raw)
            payload = base64.b64decode(env["payload"], validate=True)
            statement = json.loads(payload)
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise BundleError(f"line {n} is not a DSSE envelope: {exc}", at) from None
        if env.get("payloadType") != PAYLOAD_TYPE or statement.get("predicateType") != VSA_PREDICATE_TYPE:
            raise BundleError(f"line {n} is not a VSA envelope", at)
        message = pae(PAYLOAD_TYPE, payload)
        if keys is not None and not any(
                s.get("keyid") in keys and check_signature(keys[s["keyid"]], str(s.get("sig")), message)
                for s in env.get("signatures") or [] if isinstance(s, dict)):
            raise BundleError(f"line {n}: no valid signature by a trusted key", at,
                              "use the bundle exactly as the run wrote it, with the run's public key")
        _check_vsa(statement, digest, expected, at, n)
        out.append(statement)
    if len(out) != len(expected):
        raise BundleError(f"{VALIDATION} has {len(out)} pool(s), the signed statement {len(expected)}", where)
    return out


def _check_vsa(statement: dict[str, Any], digest: str, expected: dict[str, dict[str, Any]], at: Location,
               n: int) -> None:
    predicate = statement.get("predicate") or {}
    inputs = predicate.get("inputAttestations") or [{}]
    if inputs[0].get("digest", {}).get("sha256") != digest:
        raise BundleError(f"line {n}: the VSA names another bundle's statement", at)
    pool = expected.get(str(predicate.get("resourceUri")))
    if pool is None:
        raise BundleError(f"line {n}: pool {predicate.get('resourceUri')} is not in the signed statement", at)
    ext = predicate.get("pytestHetero") or {}
    levels = {t: e["level"] for t, e in pool["task_types"].items()}
    if ext.get("taskTypes") != levels or ext.get("validUntil") != pool["expires_at"]:
        raise BundleError(f"line {n}: levels or expiry differ from the signed statement's", at)


def load_status(path: Path, keys: list[Any] | None, *, allow_unsigned: bool = False) -> dict[str, Any]:
    """The validation status a bundle signs, checked offline with ``keys`` (public keys):
    ``{"bundle": folder, "digest": sha256 of the run statement, "verification": verified | unsigned |
    unverified, "validation": the predicate's section, "vsas": [VSA statements], "run": the predicate's
    run, "untested": {pool: [untested entries]}}``. A bundle that does not verify, or whose VSA file
    does not match its statement, raises BundleError (see :func:`read_vsas`)."""
    from pytest_hetero.bundle.attestation import read_attestations
    from pytest_hetero.bundle.safeio import Unreadable
    from pytest_hetero.bundle.signing import PAYLOAD_TYPE
    from pytest_hetero.bundle.verify import gate_keys, load_verified

    path = Path(path)
    bundle = path.parent if path.is_file() else path
    loaded = load_verified(bundle, allow_unsigned=allow_unsigned, keys=keys)
    try:
        run = read_attestations(bundle, PAYLOAD_TYPE)[0]
    except Unreadable as exc:
        raise BundleError(f"cannot read the run's attestation: {exc.detail}", Location(str(bundle))) from None
    validation = run.predicate.get("validation")
    if not isinstance(validation, dict) or validation != loaded.evidence.get("validation"):
        raise BundleError("the bundle signs no validation status (written by a pytest-hetero without it, or "
                          "its evidence differs)", Location(str(bundle)), "rerun the gate with this version")
    vsas = read_vsas(bundle, gate_keys(keys) if loaded.verification == "verified" and keys else None, validation) \
        if validation.get("pools") else []
    untested: dict[str, list[dict[str, Any]]] = {}
    for entry in loaded.evidence["untested"]["items"]:
        untested.setdefault(str((entry.get("keys") or {}).get("resource")), []).append(entry)
    return {"bundle": bundle, "digest": hashlib.sha256(run.payload).hexdigest(),
            "verification": loaded.verification, "validation": validation, "vsas": vsas,
            "run": run.predicate.get("run") or {}, "untested": untested}
