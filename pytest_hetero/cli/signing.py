"""``hetero keygen | sign | sign-policy | verify | render``: key pairs, team sign-off, the trust policy,
offline verification, re-rendering (arguments: :mod:`pytest_hetero.cli._parser`).

Exit codes: 0 ok; 1 verification failed; 2 usage or input error (bad key, unreadable bundle).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_hetero.errors import HeteroError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from pytest_hetero.bundle.policy import TrustPolicy
    from pytest_hetero.bundle.signing import Signer
    from pytest_hetero.bundle.verify import Verification
    from pytest_hetero.evidence.document import EvidenceDocument
    from pytest_hetero.evidence.views import SignoffView

BROWSERS: tuple[str, ...] = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _keygen(args: argparse.Namespace) -> int:
    from pytest_hetero.bundle.signing import generate_keypair

    private = Path(args.key)
    public = Path(args.pub) if args.pub else private.with_name(private.name + ".pub")
    for path in (private, public):
        if path.exists():
            print(f"hetero keygen: {path} already exists; not overwriting a key", file=sys.stderr)
            return 2
    try:
        private.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        public.parent.mkdir(parents=True, exist_ok=True)
        kid = generate_keypair(private, public)
    except OSError as exc:
        print(f"hetero keygen: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"private key: {private} (mode 0600; keep it secret)\npublic key:  {public}\nkeyid:       {kid}")
    return 0


def _sign_check(bundle: Path, gate: list[str]) -> tuple[list[str], bool]:
    """What makes ``bundle`` unfit to be signed (``hetero verify``'s problems; without a trusted gate key,
    every problem but the run signer's key being unknown), and whether the run signer was checked."""
    from pytest_hetero.bundle.verify import trusted_keys, verify_bundle

    keys = trusted_keys([Path(k) for k in gate])
    result = verify_bundle(bundle, keys, any_signer=not keys)
    return [str(p) for p in result.problems], bool(keys)


def signer_of(args: argparse.Namespace, what: str) -> Signer:
    """The :class:`~pytest_hetero.bundle.signing.Signer` of ``--key`` or ``--sign-command``/``--sign-public``
    (:func:`~pytest_hetero.settings.signer_spec`). Raises HeteroError when neither is given (``what`` says
    what needs it), both are, or the key or signer is refused."""
    from pytest_hetero.bundle.signing import load_signer
    from pytest_hetero.settings import signer_spec

    spec = signer_spec(args.key, args.sign_command, args.sign_public, key_flag="--key")
    if spec is None:
        raise HeteroError(f"{what} needs a signer: --key PEM, or --sign-command CMD --sign-public PEM")
    return load_signer(spec)


def _sign(args: argparse.Namespace) -> int:
    from pytest_hetero.bundle.attestation import add_signoff, chain_head, read_attestations
    from pytest_hetero.bundle.signing import PAYLOAD_TYPE
    from pytest_hetero.safeio import printable_name

    key = signer_of(args, "a sign-off")
    problems, trusted = _sign_check(Path(args.bundle), args.gate_key)
    if problems and not args.unverified:
        for problem in problems:
            print(printable_name(f"FAIL {problem}"), file=sys.stderr)
        raise HeteroError(f"refusing to sign {args.bundle}: it does not verify ({len(problems)} problem(s) above); "
                          "a sign-off vouches for what the bundle proves",
                          hint="sign a bundle that verifies (hetero verify BUNDLE --key GATE.pub); to sign this one "
                               "anyway, say so with --unverified")
    statement = add_signoff(Path(args.bundle), key, args.role, args.decision, args.text, args.layer or None,
                            supersede=args.supersede)
    claim = statement["predicate"]
    text = f": {claim['conditions']}" if claim["conditions"] else ""
    print(printable_name(f"signed {args.bundle} as {claim['role']} for {', '.join(claim['layers'])}: "
                         f"{claim['decision']}{text}; key {key.keyid} at {claim['signed_at']} "
                         f"(run {claim['run']['id']}, verdict {claim['run']['verdict']})"))
    head = chain_head(read_attestations(Path(args.bundle), PAYLOAD_TYPE))
    print(f"sign-off chain head: {head} (record it: hetero verify … --signoff-head {head} catches a removed sign-off)")
    if problems:
        print(printable_name(f"warning: signed although the bundle does not verify (--unverified): {problems[0]}"
                             + (f" and {len(problems) - 1} more" if len(problems) > 1 else "")), file=sys.stderr)
    elif not trusted:
        print("note: the bundle's files match its signed statement; the run's signer was not checked (no --gate-key "
              "or $HETERO_TRUST_KEYS)", file=sys.stderr)
    return 0


def _sign_policy(args: argparse.Namespace) -> int:
    import base64
    import hashlib

    from pytest_hetero.bundle.policy import sign_policy

    key = signer_of(args, "signing a trust policy")
    try:
        out = sign_policy(Path(args.policy), key)
    except OSError as exc:
        raise HeteroError(f"cannot write the signature of {args.policy}: {exc.strerror}") from None
    digest = hashlib.sha256(base64.b64decode(json.loads(out.read_text("ascii"))["payload"])).hexdigest()
    print(f"wrote {out}: {args.policy} (sha256 {digest}) signed by gate key {key.keyid}")
    return 0


def parse_age(text: str) -> float:
    """``--max-age`` value in seconds, read by the one duration grammar (:mod:`pytest_hetero.durations`:
    ``3600``, ``36h``, ``7d``, ``1d12h``). Raises HeteroError naming the option and the accepted forms."""
    from pytest_hetero.durations import EXAMPLES, parse_duration

    try:
        return parse_duration(text)
    except ValueError:
        raise HeteroError(f"--max-age {text!r} is not a duration", hint=EXAMPLES) from None


def _policy(args: argparse.Namespace, keys: list[Ed25519PublicKey]) -> TrustPolicy | None:
    """The trust policy of ``--policy`` (trusted by ``keys``, pinned by ``--policy-sha256``), None without one."""
    from pytest_hetero.bundle.policy import load_policy

    if args.policy is None:
        if args.policy_sha256:
            raise HeteroError("--policy-sha256 pins a policy: give the policy file with --policy")
        return None
    return load_policy(Path(args.policy), keys, args.policy_sha256)


def _signoff_lines(result: Verification) -> list[str]:
    """``hetero verify``'s lines on the sign-offs of ``result``: each role's state and its sign-offs."""
    from pytest_hetero.bundle.signoff_check import role_state

    if not result.signoffs:
        return ["sign-offs: none"]
    if result.policy is None:
        return [f"sign-offs: {len(result.signoffs)} present, not checked (no --policy: a sign-off is bound to its "
                "role only by a trust policy)"]
    lines = [f"sign-offs checked against trust policy {result.policy.name} ({result.policy.trusted_by}):"]
    for role in sorted({s.role for s in result.signoffs}):
        mine = [s for s in result.signoffs if s.role == role]
        lines.append(f"  {role}: {role_state(mine)}")
        for s in mine:
            text = f": {s.conditions}" if s.conditions else ""
            lines.append(f"    {s.decision}{text}, by {', '.join(s.names) or '?'} (key {s.keyid[:16]}…) "
                         f"at {s.signed_at} for {', '.join(s.layers)}")
    return lines


def _verify(args: argparse.Namespace) -> int:
    from pytest_hetero.bundle.signing import load_public_key
    from pytest_hetero.bundle.verify import verify_bundle
    from pytest_hetero.safeio import printable_name

    keys = [load_public_key(Path(k)) for k in args.key]
    policy = _policy(args, keys)
    if args.require_role and policy is None:
        raise HeteroError("--require-role needs --policy: a sign-off is bound to its role's keys only by a trust "
                          "policy", hint="hetero verify BUNDLE --key GATE.pub --policy POLICY --require-role ROLE")
    if not keys and not (policy and policy.gate):
        raise HeteroError("no trusted gate key: pass the run-signing public key with --key (or a policy with "
                          "gate keys)")
    max_age = parse_age(args.max_age) if args.max_age else None
    result = verify_bundle(Path(args.bundle), keys, args.require_role, policy=policy, max_age_s=max_age,
                           signoff_head=args.signoff_head)
    for problem in result.problems:
        print(f"FAIL {printable_name(str(problem))}")
    if not result.ok:
        print(f"verification FAILED: {len(result.problems)} problem(s) in {printable_name(args.bundle)}")
        return 1
    run = result.run
    recovered = " (recovered: the time of the journal's last line; the run ended without writing its end)" \
        if run["finished_at_recovered"] else ""
    print(printable_name(f"OK {args.bundle}: run {run['id']}, verdict {str(run['verdict']).upper()}, "
                         f"finished {run['finished_at']}{recovered}; {result.files} files match the manifest; "
                         "run signed by "
                         f"{', '.join(k[:16] + '…' for k in result.run_signers)}"))
    for line in _signoff_lines(result):
        print(printable_name(line))
    print(f"sign-off chain head: {result.chain_head} (pin it with --signoff-head to catch a removed latest sign-off)")
    return 0


def print_pdf(html_path: Path, pdf_path: Path, timeout_s: float = 120.0) -> None:
    """Print ``html_path`` to ``pdf_path`` with a headless Chromium/Chrome found on PATH.

    Raises HeteroError when no browser is installed or printing fails.
    """
    browser = next((b for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        raise HeteroError("no headless browser found for --pdf", hint="install chromium (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="hetero-pdf-") as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
               "--no-pdf-header-footer", f"--print-to-pdf={pdf_path}", html_path.resolve().as_uri()]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0 or not pdf_path.is_file():
        raise HeteroError(f"{browser} could not print the report (exit {done.returncode})",
                          hint=done.stderr.strip()[-300:])


def _render(args: argparse.Namespace) -> int:
    from pytest_hetero.bundle.signing import load_public_key
    from pytest_hetero.bundle.signoff import bundle_signoff
    from pytest_hetero.bundle.verify import load_verified
    from pytest_hetero.reporting.writers import render

    bundle = Path(args.bundle)
    keys = [load_public_key(Path(k)) for k in args.key]
    policy = _policy(args, keys)
    if keys or (policy and policy.gate):
        gate = keys + [k.public for k in policy.gate.values()] if policy else keys
        evidence = load_verified(bundle, allow_unsigned=False, keys=gate).evidence
    else:  # no key: read as hostile as any (the one safe reader), rendered as unverified
        evidence = load_verified(bundle, allow_unsigned=True).evidence
    if args.out and Path(args.out).resolve().is_relative_to(bundle.resolve()):
        raise HeteroError(f"refusing to write {args.out} inside the signed bundle (verify would report it)",
                          hint="write the rendering outside the report folder")
    if args.lang is not None and args.format != "dossier":
        raise HeteroError(f"--lang {args.lang} applies to --format dossier only; {args.format} is rendered in English")
    signoff = bundle_signoff(bundle, evidence, keys, policy)
    if keys or (policy and policy.gate):
        data = render(args.format, evidence, signoff, args.lang or "en")
    else:
        data = _render_unverified(bundle, args.format, evidence, signoff, args.lang or "en")
    if args.pdf:
        if args.format not in ("html", "dossier") or not args.out:
            raise HeteroError("--pdf needs --format html or dossier, and --out FILE.pdf")
        with tempfile.TemporaryDirectory(prefix="hetero-render-") as tmp:
            page = Path(tmp) / "report.html"
            page.write_bytes(data)
            print_pdf(page, Path(args.out))
        print(f"wrote {args.out}")
    elif args.out:
        Path(args.out).write_bytes(data)
        print(f"wrote {args.out}")
    else:
        sys.stdout.buffer.write(data)
    return 0


def _render_unverified(bundle: Path, fmt: str, evidence: EvidenceDocument, signoff: SignoffView,
                       lang: str) -> bytes:
    """:func:`pytest_hetero.reporting.writers.render` of a bundle read without a key (as hostile as any file): the
    loader holds the document's sections, items and every record of a declared kind to their types; this catch is
    the net for what no declaration covers (an undeclared section or kind a renderer reads), refused as one message
    naming the file, never a traceback. Raises :class:`HeteroError`."""
    from jinja2 import UndefinedError

    from pytest_hetero.reporting.writers import render

    try:
        return render(fmt, evidence, signoff, lang)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError, UndefinedError) as exc:
        raise HeteroError(
            f"{bundle / 'evidence.json'}: a record or field the {fmt} rendering reads is missing or of another "
            f"type ({type(exc).__name__}: {str(exc)[:200]}); the bundle was read without a key and is not of the "
            "shape this version writes", hint="render a bundle this version wrote; check it first with: hetero "
            f"verify {bundle} --key GATE.pub") from None


def _guard(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn a HeteroError into one message on stderr and exit code 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            return int(func(args))
        except HeteroError as exc:
            sys.stderr.write(f"hetero {args.command}: {exc.render()}\n")
            return 2
    return run


keygen = _guard(_keygen)
"""``hetero keygen KEY [--pub PUB]``."""
sign = _guard(_sign)
"""``hetero sign BUNDLE --key KEY --role ROLE --decision D [--text TEXT] [--layer L]… [--gate-key PUB]…
[--unverified] [--supersede]``: the bundle must verify first (exit 2 naming each problem), unless --unverified."""
sign_policy = _guard(_sign_policy)
"""``hetero sign-policy POLICY --key GATE_KEY``."""
verify = _guard(_verify)
"""``hetero verify BUNDLE --key PUB… [--policy POLICY [--policy-sha256 HEX]] [--require-role ROLE]…
[--max-age AGE]``."""
render = _guard(_render)
"""``hetero render BUNDLE [--format F] [--lang en|zh] [--out FILE] [--pdf] [--key PUB…] [--policy POLICY]``."""
