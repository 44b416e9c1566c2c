"""``hetero probe nvidia|ascend|cpu [--from FILE] [--root DIR]``: print an Inventory as JSON (arguments:
:mod:`pytest_hetero.cli._parser`).

Without ``--from`` the live tools are asked (:func:`pytest_hetero.probes.probe_host`). With
``--from FILE`` (``-`` for stdin) a captured output is read and its format detected:
``nvidia-smi -q -x`` XML, plain ``nvidia-smi``, a kernel/dmesg or device-plugin Xid log, or
``npu-smi info`` / ``npu-smi info -t board`` / ``npu-smi info -t info-vnpu``. With ``--from`` the command
is also a view of ``hetero explain``'s findings on the same text (issue 31: the two cannot disagree): the
vendor's unhealthy findings (:data:`VENDOR_KINDS`) are listed under ``findings`` with their failure category
and the failure table's owner, and one of them makes the capture unhealthy as an unhealthy device does.
Exit 0 healthy, 1 an unhealthy device, a global error or an unhealthy finding, 2 unreadable input or a bad
option.
"""

from __future__ import annotations

import argparse
import json
import sys

from pytest_hetero.errors import HeteroError, ParseError
from pytest_hetero.probes import parse_captured, probe_host

VENDOR_KINDS: dict[str, tuple[str, ...]] = {
    "nvidia": ("nvidia-smi", "kernel-log", "klog", "dcgmi"),
    "ascend": ("npu-smi", "hwlog"),
    "cpu": (),
}
"""``explain`` block kinds (prefixes) whose findings a vendor's ``probe --from`` shows."""


def explain_view(vendor: str, text: str) -> list[dict[str, object]]:
    """The unhealthy findings ``hetero explain`` reads in ``text`` from the vendor's tools (JSON-ready)."""
    from pytest_hetero.explain.core import explain_text

    kinds = VENDOR_KINDS.get(vendor, ())
    return [f.to_dict() for f in explain_text(text).findings
            if f.unhealthy and kinds and f.kind.startswith(kinds)]


def _read(source: str) -> str:
    from pytest_hetero.safeio import read_source

    return read_source(source, "the captured output").decode("utf-8", errors="replace")


def run(args: argparse.Namespace) -> int:
    """Run ``hetero probe``; print the Inventory JSON; return 0 healthy, 1 unhealthy, 2 unreadable."""
    try:
        if args.source:
            try:
                text = _read(args.source)
            except HeteroError as exc:
                print(f"hetero probe: {exc.render()}", file=sys.stderr)
                return 2
            if not text.strip():
                raise ParseError("empty input: no tool output was captured")
            inventory = parse_captured(args.vendor, text)
        else:
            inventory = probe_host(args.vendor, args.root)
    except ParseError as exc:
        where = args.source if args.source and args.source != "-" else "<stdin>"
        print(f"hetero probe: {where}: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return 2
    out = inventory.to_dict(include_raw=not args.no_raw)
    healthy = inventory.healthy
    if args.source:
        out["findings"] = explain_view(args.vendor, text)
        healthy = healthy and not out["findings"]
        out["healthy"] = healthy
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if healthy else 1
