"""``hetero trend BUNDLE…``: each item and business metric across many signed bundles (say 30 nights).

Every bundle is verified first (:func:`pytest_hetero.bundle.verify.load_evidence` against ``--key`` and
``$HETERO_TRUST_KEYS``); one that does not verify stops the command (exit 2) naming it, and unsigned
bundles are read only with ``--allow-unsigned`` (marked so). The trend itself is
:func:`pytest_hetero.reporting.trend.trend`. Exit codes: 0 written; 2 a bundle unreadable or not verified.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_hetero.errors import HeteroError


def run(args: argparse.Namespace) -> int:
    """Verify and read every bundle, compute the trend, write it as text, JSON or HTML."""
    from pytest_hetero.bundle.verify import load_evidence, trusted_keys
    from pytest_hetero.reporting.trend import render_trend_html, render_trend_text, trend

    try:
        keys = trusted_keys(args.key)
        nights = [load_evidence(Path(b), allow_unsigned=args.allow_unsigned, keys=keys) for b in args.bundles]
    except HeteroError as exc:
        sys.stderr.write(f"hetero trend: {exc.render()}\n")
        return 2
    data = trend(nights)
    if args.format == "json":
        text = json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    elif args.format == "html":
        text = render_trend_html(data, args.limit)
    else:
        text = render_trend_text(data, args.limit)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0
