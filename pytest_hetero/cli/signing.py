"""``hetero keygen | sign | verify | render``: key pairs, team sign-off, offline verification, re-rendering.

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

from pytest_hetero import LAYERS
from pytest_hetero.errors import HeteroError
from pytest_hetero.evidence.recorder import EVIDENCE
from pytest_hetero.reporting.writers import FORMATS, bundle_signoff, render
from pytest_hetero.bundle.signing import add_role_signature, generate_keypair, load_private_key, load_public_key
from pytest_hetero.bundle.verify import verify_bundle

BROWSERS: tuple[str, ...] = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _keygen(args: argparse.Namespace) -> int:
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


def _sign(args: argparse.Namespace) -> int:
    key = load_private_key(Path(args.key))
    entry = add_role_signature(Path(args.bundle), key, args.role, args.layer or None)
    claim = entry["signoff"]
    print(f"signed {args.bundle} as {claim['role']} for {', '.join(claim['layers'])} "
          f"with key {claim['keyid']} at {claim['signed_at']}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    keys = [load_public_key(Path(k)) for k in args.key]
    result = verify_bundle(Path(args.bundle), keys, args.require_role)
    for problem in result.problems:
        print(f"FAIL {problem}")
    if not result.ok:
        print(f"verification FAILED: {len(result.problems)} problem(s) in {args.bundle}")
        return 1
    roles = ", ".join(f"{r} by {c[0]['keyid'][:16]}…" for r, c in sorted(result.roles.items())) or "none"
    print(f"OK {args.bundle}: {result.files} files match the manifest; statement signed by "
          f"{', '.join(k[:16] + '…' for k in result.run_signers) or 'roles only'}; role sign-offs: {roles}")
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
    bundle = Path(args.bundle)
    try:
        evidence = json.loads((bundle / EVIDENCE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HeteroError(f"cannot read {bundle / EVIDENCE}: {exc}", hint="point at a report folder") from None
    if args.out and Path(args.out).resolve().is_relative_to(bundle.resolve()):
        raise HeteroError(f"refusing to write {args.out} inside the signed bundle (verify would report it)",
                          hint="write the rendering outside the report folder")
    data = render(args.format, evidence, bundle_signoff(bundle, evidence))
    if args.pdf:
        if args.format != "html" or not args.out:
            raise HeteroError("--pdf needs --format html and --out FILE.pdf")
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


def _guard(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn a HeteroError into one message on stderr and exit code 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            return int(func(args))
        except HeteroError as exc:
            sys.stderr.write(f"hetero {args.command}: {exc.render()}\n")
            return 2
    return run


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``keygen``, ``sign``, ``verify`` and ``render``."""
    p = subparsers.add_parser("keygen", help="create an Ed25519 key pair (PEM; private key mode 0600)")
    p.add_argument("key", help="private key file to create")
    p.add_argument("--pub", help="public key file (default: KEY.pub)")
    p.set_defaults(func=_guard(_keygen))

    p = subparsers.add_parser("sign", help="add a team's sign-off signature to a bundle's envelope")
    p.add_argument("bundle", help="report folder (reports/<run-id>)")
    p.add_argument("--key", required=True, help="the team's Ed25519 private key (PEM)")
    p.add_argument("--role", required=True, help="owner team as named in the matrix (e.g. business)")
    p.add_argument("--layer", action="append", choices=LAYERS,
                   help="layer to vouch for (repeatable; default: every layer the role owns)")
    p.set_defaults(func=_guard(_sign))

    p = subparsers.add_parser("verify", help="verify a bundle offline: signatures, statement, manifest")
    p.add_argument("bundle", help="report folder")
    p.add_argument("--key", action="append", required=True, help="trusted public key PEM (repeatable)")
    p.add_argument("--require-role", action="append", default=[], metavar="ROLE",
                   help="fail unless ROLE has signed off (repeatable)")
    p.set_defaults(func=_guard(_verify))

    p = subparsers.add_parser("render", help="re-render a bundle's evidence.json (html, md, junit, ctrf)")
    p.add_argument("bundle", help="report folder")
    p.add_argument("--format", choices=list(FORMATS), default="html")
    p.add_argument("--out", help="output file (default: stdout); keep it outside the bundle, which is signed")
    p.add_argument("--pdf", action="store_true", help="print the HTML to PDF (--out) with headless Chromium")
    p.set_defaults(func=_guard(_render))
