"""``hetero probe nvidia|ascend|cpu [--from FILE] [--root DIR]``: print an Inventory as JSON (arguments:
:mod:`pytest_hetero.cli._parser`).

Without ``--from`` the live tools are asked (:func:`pytest_hetero.probes.probe_host`). With
``--from FILE`` (``-`` for stdin) a captured output is read and its format detected:
``nvidia-smi -q -x`` XML, plain ``nvidia-smi``, a kernel/dmesg or device-plugin Xid log, or
``npu-smi info`` / ``npu-smi info -t board`` / ``npu-smi info -t info-vnpu``. Exit 0 healthy,
1 an unhealthy device or a global error, 2 unreadable input or a bad option.
"""

from __future__ import annotations

import argparse
import json
import sys

from pytest_hetero.errors import ParseError
from pytest_hetero.probes import probe_host
from pytest_hetero.probes.model import Device, Inventory


def _read(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    with open(source, "rb") as handle:
        return handle.read().decode("utf-8", errors="replace")


def parse_captured(vendor: str, text: str) -> Inventory:
    """Parse captured ``text`` for ``vendor`` (format detected); raises ParseError if unreadable."""
    if vendor == "nvidia":
        from pytest_hetero.probes.nvidia import detect_format, parse_nvidia_smi

        if detect_format(text) == "unknown":
            raise ParseError(
                "not a known NVIDIA format: expected nvidia-smi -q -x XML, plain nvidia-smi, "
                "a kernel log with 'NVRM: Xid' lines or a device-plugin log"
            )
        return parse_nvidia_smi(text)
    if vendor == "ascend":
        from pytest_hetero.probes.ascend import parse_npu_board, parse_npu_smi_info

        if "Total number of vnpu" in text or "NPU resource static info" in text:
            from pytest_hetero.probes.ascend import parse_npu_vnpu

            vnpu = parse_npu_vnpu(text)
            chip = Device(
                vendor="ascend",
                index=None,
                partitions=vnpu.partitions,
                extra={"vnpu_resources": vnpu.resources, "vnpu_declared": vnpu.declared_count},
            )
            return Inventory(
                vendor="ascend", source="npu-smi-vnpu", devices=(chip,), warnings=vnpu.warnings, raw=text
            )
        if "|" not in text and "NPU ID" in text:
            board = parse_npu_board(text)
            return Inventory(
                vendor="ascend",
                source="npu-smi-board",
                firmware_version=board.get("firmware_version"),
                driver_version=board.get("software_version"),
                raw=text,
                extra={"board": board},
            )
        return parse_npu_smi_info(text)
    raise ParseError(
        f"--from is not supported for {vendor}", hint="use --root DIR to read /proc and /sys under DIR"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``hetero probe``; print the Inventory JSON; return 0 healthy, 1 unhealthy, 2 unreadable."""
    try:
        if args.source:
            try:
                text = _read(args.source)
            except OSError as exc:
                print(f"hetero probe: cannot read {args.source}: {exc.strerror or exc}", file=sys.stderr)
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
    json.dump(inventory.to_dict(include_raw=not args.no_raw), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if inventory.healthy else 1
