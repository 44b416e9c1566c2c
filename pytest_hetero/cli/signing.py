"""``hetero keygen | sign | verify | render``: key pairs, team sign-off, offline verification, re-rendering
(arguments: :mod:`pytest_hetero.cli._parser`).

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

from pytest_hetero.errors import HeteroError

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


def _sign(args: argparse.Namespace) -> int:
    from pytest_hetero.bundle.signing import add_role_signature, load_private_key

    key = load_private_key(Path(args.key))
    entry = add_role_signature(Path(args.bundle), key, args.role, args.layer or None)
    claim = entry["signoff"]
    print(f"signed {args.bundle} as {claim['role']} for {', '.join(claim['layers'])} "
          f"with key {claim['keyid']} at {claim['signed_at']}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from pytest_hetero.bundle.signing import load_public_key
    from pytest_hetero.bundle.verify import verify_bundle

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
    from pytest_hetero.bundle.signoff import bundle_signoff
    from pytest_hetero.evidence.recorder import EVIDENCE
    from pytest_hetero.reporting.writers import render

    bundle = Path(args.bundle)
    try:
        evidence = json.loads((bundle / EVIDENCE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HeteroError(f"cannot read {bundle / EVIDENCE}: {exc}", hint="point at a report folder") from None
    if args.out and Path(args.out).resolve().is_relative_to(bundle.resolve()):
        raise HeteroError(f"refusing to write {args.out} inside the signed bundle (verify would report it)",
                          hint="write the rendering outside the report folder")
    if args.lang is not None and args.format != "dossier":
        raise HeteroError(f"--lang {args.lang} applies to --format dossier only; {args.format} is rendered in English")
    data = render(args.format, evidence, bundle_signoff(bundle, evidence), args.lang or "en")
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
"""``hetero sign BUNDLE --key KEY --role ROLE [--layer L]…``."""
verify = _guard(_verify)
"""``hetero verify BUNDLE --key PUB… [--require-role ROLE]…``."""
render = _guard(_render)
"""``hetero render BUNDLE [--format F] [--lang en|zh] [--out FILE] [--pdf]``."""
