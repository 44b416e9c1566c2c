"""The trust policy: which keys may sign off for which role, and the people they belong to.

A sign-off names its role; only a trust policy binds a role to keys. The policy is a YAML file::

    apiVersion: pytest-hetero/v1
    kind: TrustPolicy
    metadata: {name: acme-gate}
    gate:                        # keys that sign runs (the CI key); optional beside --key
      - names: [CI gate]
        public_key: |
          -----BEGIN PUBLIC KEY-----
          …
    roles:                       # role = the owner team as the matrix names it (spec.owners)
      risk-business:
        keys:
          - names: [Ana Ruiz]
            public_key: |
              -----BEGIN PUBLIC KEY-----
              …
      infra-team:
        allow_gate_key: true     # the gate key may sign for this team (it may not otherwise)
        keys: […]

Keys are inline PEM (SubjectPublicKeyInfo, Ed25519), so the policy's digest or signature covers
them; an optional ``keyid`` beside a key must equal the computed one
(:func:`~pytest_hetero.bundle.signing.keyid`). A policy is trusted only when it is either

* **signed by a gate key**: ``hetero sign-policy POLICY --key gate.key`` writes ``POLICY.dsse.json``,
  a DSSE envelope (payloadType :data:`POLICY_PAYLOAD_TYPE`) over the policy's exact bytes, which
  must verify with a key given with ``--key``; or
* **pinned by digest**: the file is kept beside the bundle (e.g. in the repository) and its sha256
  is given (``--policy-sha256 HEX``), e.g. from the CI configuration.

Otherwise :func:`load_policy` refuses it. A role's keys may include a gate key only with
``allow_gate_key: true``; a policy that lists one without it is refused, so the gate's own key
cannot sign as a team by accident.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import yaml

from pytest_hetero.declared import resolve
from pytest_hetero.errors import BundleError, Location

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    from pytest_hetero.bundle.intoto import Envelope
    from pytest_hetero.bundle.signing import Signer

POLICY_KIND = "TrustPolicy"
POLICY_API = "pytest-hetero/v1"
POLICY_PAYLOAD_TYPE = "application/vnd.pytest-hetero.trust-policy+yaml"
SIGNATURE_SUFFIX = ".dsse.json"
"""A policy's signature file is the policy's path with this suffix added."""
MAX_POLICY_BYTES = 4 << 20


class PolicyError(BundleError):
    """A trust policy is malformed, untrusted (neither signed by a gate key nor pinned) or inconsistent."""


@dataclass(frozen=True)
class PolicyKey:
    """One key of the policy: ``keyid``, the ``public`` key and the ``names`` of the people holding it."""

    keyid: str
    public: Ed25519PublicKey
    names: tuple[str, ...]


@dataclass(frozen=True)
class RolePolicy:
    """A role's keys by keyid and whether the gate key may sign for it."""

    name: str
    keys: dict[str, PolicyKey]
    allow_gate_key: bool = False


@dataclass(frozen=True)
class TrustPolicy:
    """A loaded, trusted policy: ``name``, ``path``, its ``sha256``, the ``gate`` keys, the ``roles``,
    and ``trusted_by`` (how it was trusted: ``signed by gate key <keyid>`` or ``pinned by sha256``)."""

    name: str
    path: str
    sha256: str
    gate: dict[str, PolicyKey]
    roles: dict[str, RolePolicy]
    trusted_by: str
    gate_keyids: frozenset[str] = field(default_factory=frozenset)

    def names_of(self, kid: str) -> list[str]:
        """The people's names the policy gives key ``kid`` (any role or the gate), else ``[]``."""
        for role in self.roles.values():
            if kid in role.keys:
                return list(role.keys[kid].names)
        return list(self.gate[kid].names) if kid in self.gate else []


POLICY_FIELDS = frozenset({"apiVersion", "kind", "metadata", "gate", "roles"})
KEY_FIELDS = frozenset({"names", "public_key", "keyid"})
ROLE_FIELDS = frozenset({"keys", "allow_gate_key"})


class _PolicyDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A trust policy document's top level (:data:`POLICY_FIELDS`), each field as written (YAML, untrusted; None
    when absent): :func:`parse_policy` checks each."""

    api_version: object = msgspec.field(name="apiVersion", default=None)
    kind: object = None
    metadata: object = None
    gate: object = None
    roles: object = None


class _PolicyMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """The policy's ``metadata``: its ``name`` as written (None when absent); other fields are ignored."""

    name: object = None


class _KeyDoc(msgspec.Struct, frozen=True, kw_only=True):
    """One key of the policy (:data:`KEY_FIELDS`), each field as written: ``names`` (None when absent),
    ``public_key`` (``""`` when absent) and the optional ``keyid``."""

    names: object = None
    public_key: object = ""
    keyid: object = None


class _RoleDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A role of the policy (:data:`ROLE_FIELDS`): its ``keys`` as written (None when absent) and
    ``allow_gate_key``, a boolean (false when absent)."""

    keys: object = None
    allow_gate_key: bool = False


def _unknown(node: dict[Any, Any], known: frozenset[str]) -> list[Any]:
    """The keys of the YAML mapping ``node`` that are not ``known``, sorted by their text (YAML keys may be
    numbers or booleans beside strings, which do not sort together)."""
    return sorted((k for k in node if k not in known), key=str)


def _fail(path: Path, field_name: str, message: str, hint: str = "") -> PolicyError:
    return PolicyError(message, Location(str(path), field=field_name), hint)


def _key(path: Path, where: str, node: Any) -> PolicyKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from pytest_hetero.bundle.signing import keyid

    if not isinstance(node, dict) or _unknown(node, KEY_FIELDS):
        raise _fail(path, where, "a key is {names: [...], public_key: PEM, keyid: optional}",
                    f"unknown key(s): {_unknown(node, KEY_FIELDS)}" if isinstance(node, dict) else "")
    said = msgspec.convert(node, _KeyDoc)  # its keys are KEY_FIELDS (checked above), each field any value
    names = said.names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise _fail(path, f"{where}.names", "names must list the people who hold this key",
                    "e.g. names: [Ana Ruiz]")
    try:
        public = serialization.load_pem_public_key(str(said.public_key).encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        public = None
    if not isinstance(public, Ed25519PublicKey):
        raise _fail(path, f"{where}.public_key", "not an Ed25519 public key in PEM",
                    "paste the .pub file written by hetero keygen (a block scalar: public_key: |)")
    kid = keyid(public)
    if "keyid" in node and said.keyid != kid:
        raise _fail(path, f"{where}.keyid", f"keyid {str(said.keyid)[:80]!r} is not the key's ({kid})",
                    "drop keyid or copy it from hetero keygen's output")
    return PolicyKey(kid, public, tuple(n.strip() for n in names))


def _keys(path: Path, where: str, node: Any) -> dict[str, PolicyKey]:
    if not isinstance(node, list):
        raise _fail(path, where, "must be a list of keys")
    keys = {}
    for n, entry in enumerate(node):
        key = _key(path, f"{where}[{n}]", entry)
        if key.keyid in keys:
            raise _fail(path, f"{where}[{n}]", f"key {key.keyid[:16]}… is listed twice")
        keys[key.keyid] = key
    return keys


def parse_policy(data: bytes, path: Path, gate_keyids: frozenset[str] = frozenset()) -> tuple[
        str, dict[str, PolicyKey], dict[str, RolePolicy]]:
    """Parse the policy document ``data`` (read from ``path``): (name, gate keys, roles).

    ``gate_keyids`` are the run keys trusted on the command line; with the policy's own gate keys,
    a role may list them only with ``allow_gate_key: true``. Raises PolicyError naming the field.
    """
    try:
        doc = yaml.safe_load(data.decode("utf-8"))
    except ValueError as exc:  # int() of more than 4,300 digits (UnicodeDecodeError is one too, below)
        if not isinstance(exc, UnicodeDecodeError):
            raise PolicyError("not a YAML trust policy: holds a number of more than 4300 digits",
                              Location(str(path))) from None
        raise PolicyError("not a YAML trust policy: not UTF-8", Location(str(path))) from None
    except (yaml.YAMLError, RecursionError) as exc:
        mark = getattr(exc, "problem_mark", None)
        raise PolicyError(f"not a YAML trust policy: {getattr(exc, 'problem', None) or type(exc).__name__}",
                          Location(str(path), mark.line + 1 if mark else 0)) from None
    # only the known keys are converted (a YAML key may be a number): each field any value, so it cannot fail
    said = msgspec.convert({k: v for k, v in doc.items() if k in POLICY_FIELDS}, _PolicyDoc) \
        if isinstance(doc, dict) else None
    if said is None or said.kind != POLICY_KIND or said.api_version != POLICY_API:
        raise _fail(path, "kind", f"not a trust policy (expected apiVersion: {POLICY_API}, kind: {POLICY_KIND})")
    unknown = _unknown(doc, POLICY_FIELDS)
    if unknown:
        raise _fail(path, str(unknown[0]), f"unknown key {unknown[0]!r}",
                    "keys: apiVersion, kind, metadata, gate, roles")
    try:
        metadata = msgspec.convert(said.metadata or {}, _PolicyMetadata)
    except msgspec.ValidationError as exc:
        raise _fail(path, "metadata", f"metadata must be a mapping with string keys, e.g. {{name: acme-gate}} "
                                      f"({exc})") from None
    name = str(metadata.name or path.stem)
    gate = _keys(path, "gate", said.gate or [])
    roles_doc = said.roles
    if not isinstance(roles_doc, dict) or not roles_doc:
        raise _fail(path, "roles", "roles must map each role (owner team) to its keys")
    all_gate = gate_keyids | frozenset(gate)
    return name, gate, {str(role): _role(path, role, node, all_gate) for role, node in roles_doc.items()}


def _role(path: Path, role: object, node: object, all_gate: frozenset[str]) -> RolePolicy:
    """The role ``role`` of the policy at ``path`` from its YAML ``node``; ``all_gate`` the gate keyids, which
    its keys may list only with ``allow_gate_key: true``. Raises PolicyError naming the field."""
    where = f"roles.{role}"
    if not isinstance(node, dict) or _unknown(node, ROLE_FIELDS):
        raise _fail(path, where, "a role is {keys: [...], allow_gate_key: false}")
    try:  # its keys are ROLE_FIELDS (checked above): only allow_gate_key can be of another type
        role_doc = msgspec.convert(node, _RoleDoc)
    except msgspec.ValidationError:
        raise _fail(path, f"{where}.allow_gate_key", "must be true or false") from None
    allow = role_doc.allow_gate_key
    keys = _keys(path, f"{where}.keys", role_doc.keys)
    if not keys:
        raise _fail(path, f"{where}.keys", "a role needs at least one key")
    gate_here = sorted(k for k in keys if k in all_gate)
    if gate_here and not allow:
        raise _fail(path, f"{where}.keys", f"lists the gate key {gate_here[0][:16]}…: the key that signs runs "
                    f"cannot also sign off as {role!r}", "set allow_gate_key: true for this role if it must")
    return RolePolicy(str(role), keys, allow)


def policy_envelope(data: bytes, key: Ed25519PrivateKey | Signer) -> Envelope:
    """A DSSE envelope over the policy bytes ``data``, signed by the gate ``key`` (a private key or a
    ``signing.Signer``). Raises SigningKeyError when an external signer fails."""
    import base64

    from pytest_hetero.bundle.signing import Signer, keyid, pae

    kid = key.keyid if isinstance(key, Signer) else keyid(key.public_key())
    return {"payloadType": POLICY_PAYLOAD_TYPE, "payload": base64.b64encode(data).decode("ascii"),
            "signatures": [{"keyid": kid,
                            "sig": base64.b64encode(key.sign(pae(POLICY_PAYLOAD_TYPE, data))).decode("ascii")}]}


def sign_policy(path: Path, key: Ed25519PrivateKey | Signer) -> Path:
    """Check the policy at ``path`` parses, then write its signature ``path + .dsse.json``; return that
    path. Raises PolicyError for an unreadable or malformed policy (nothing is written)."""
    from pytest_hetero.safeio import read_file

    data = read_file(path, "the trust policy", MAX_POLICY_BYTES, PolicyError)
    from pytest_hetero.bundle.signing import Signer, keyid

    parse_policy(data, path, frozenset({key.keyid if isinstance(key, Signer) else keyid(key.public_key())}))
    out = Path(str(path) + SIGNATURE_SUFFIX)
    out.write_text(json.dumps(policy_envelope(data, key), sort_keys=True, allow_nan=False) + "\n", encoding="ascii")
    return out


def _trusted_by(data: bytes, path: Path, gate_keys: list[Ed25519PublicKey], pinned: str | None) -> str:
    """How the policy bytes ``data`` are trusted; raises PolicyError when they are not."""
    import base64

    from pytest_hetero.bundle.attestation import dsse_envelope, dsse_signers
    from pytest_hetero.bundle.signing import check_signature, keyid, pae

    digest = hashlib.sha256(data).hexdigest()
    if pinned:
        if pinned.lower().removeprefix("sha256:") != digest:
            raise PolicyError(f"sha256 {digest} is not the pinned {pinned}", Location(str(path)),
                              "the policy changed since it was pinned: review it and pin the new digest")
        return f"pinned by sha256 {digest[:16]}…"
    from pytest_hetero.safeio import Unreadable, read_local

    sig_path = Path(str(path) + SIGNATURE_SUFFIX)
    if not sig_path.exists() and not sig_path.is_symlink():
        raise PolicyError("the trust policy is neither signed nor pinned, so it cannot be trusted",
                          Location(str(path)), f"sign it with: hetero sign-policy {path} --key GATE.key, or pin it "
                          f"with --policy-sha256 {digest}")
    try:
        envelope = dsse_envelope(json.loads(read_local(sig_path, MAX_POLICY_BYTES * 2)), POLICY_PAYLOAD_TYPE)
        signed = base64.b64decode(envelope["payload"], validate=True)
    except Unreadable as exc:
        raise PolicyError(f"the policy's signature file is {exc.kind}: {exc.detail}", Location(str(sig_path))) from None
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise PolicyError(f"the policy's signature file is malformed ({type(exc).__name__})",
                          Location(str(sig_path))) from None
    if signed != data:
        raise PolicyError("the policy differs from the one its signature covers", Location(str(path)),
                          f"re-sign it (hetero sign-policy {path} --key GATE.key) after review")
    by_id = {keyid(k): k for k in gate_keys}
    message = pae(POLICY_PAYLOAD_TYPE, data)
    for sig in dsse_signers(envelope):
        public = by_id.get(sig.keyid or "")
        if public is not None and check_signature(public, sig.sig, message):
            return f"signed by gate key {keyid(public)[:16]}…"
    raise PolicyError("the policy's signature is not by a trusted gate key", Location(str(sig_path)),
                      "pass the gate's public key with --key, or pin the policy with --policy-sha256")


def load_policy(path: Path, gate_keys: list[Ed25519PublicKey], pinned_sha256: str | None = None) -> TrustPolicy:
    """Read, trust and parse the policy at ``path``.

    ``gate_keys`` are the run-signing keys trusted on the command line (``--key``): the policy's
    signature must be by one of them unless ``pinned_sha256`` (hex, optionally ``sha256:``) pins its
    bytes. Raises PolicyError when unreadable, untrusted or malformed.
    """
    from pytest_hetero.bundle.signing import keyid
    from pytest_hetero.safeio import Unreadable, read_local, refusal

    try:
        data = read_local(path, MAX_POLICY_BYTES)
    except Unreadable as exc:
        raise refusal(path, "the trust policy", exc, PolicyError) from None
    trusted_by = _trusted_by(data, path, gate_keys, pinned_sha256)
    cli_gate = frozenset(keyid(k) for k in gate_keys)
    name, gate, roles = parse_policy(data, path, cli_gate)
    return TrustPolicy(name, str(path), hashlib.sha256(data).hexdigest(), gate, roles, trusted_by,
                       cli_gate | frozenset(gate))


resolve(__name__)
