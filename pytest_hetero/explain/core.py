"""The single entry point: split a paste into blocks, read each with the reader of its kind, correlate."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import replace

from pytest_hetero.errors import HeteroError
from pytest_hetero.explain import read_ascend, read_kube, read_nvidia, read_nvtools, read_platform
from pytest_hetero.explain.blocks import Piece, clean_lines, split
from pytest_hetero.explain.context import Ctx, make
from pytest_hetero.explain.model import Block, Finding, Report, Value
from pytest_hetero.explain.read_text import read_text
from pytest_hetero.probes.line_prefix import Prefix, normalise


def read_prompt(ctx: Ctx, piece: Piece) -> list[Finding]:
    """A shell prompt line: nothing, unless it is a ``docker|podman|nerdctl run`` whose device mapping
    is worth reading (``--gpus``, ``--device``, ``--runtime``, ``*_VISIBLE_DEVICES``)."""
    command = piece.command or ""
    if not re.match(r"^(?:sudo\s+)?(?:docker|podman|nerdctl)\s+(?:container\s+)?run\b", command):
        return []
    try:
        args = shlex.split(command)
    except ValueError:
        args = command.split()
    gpus = runtime = None
    devices: list[str] = []
    env: dict[str, str] = {}
    for i, arg in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if arg.startswith("--gpus"):
            gpus = arg.partition("=")[2] or nxt
        elif arg.startswith("--device"):
            devices.append(arg.partition("=")[2] or nxt)
        elif arg.startswith("--runtime"):
            runtime = arg.partition("=")[2] or nxt
        elif arg in ("-e", "--env") or arg.startswith("--env="):
            key, _, value = (arg.partition("=")[2] if arg.startswith("--env=") else nxt).partition("=")
            if "VISIBLE_DEVICES" in key or key.startswith(("NVIDIA_", "ASCEND_")):
                env[key] = value
    davinci = [d for d in devices if re.search(r"/dev/davinci\d+", d)]
    control = {"davinci_manager", "devmm_svm", "hisi_hdc"}
    missing = sorted(c for c in control if davinci and not any(c in d for d in devices))
    q: dict[str, Value] = {"gpus": gpus, "runtime": runtime, "devices": ", ".join(devices) or None,
                           **{f"env.{k}": v for k, v in env.items()}}
    out = [make("prompt", "container_device_request", category="runtime", severity="ok",
                meaning="container asks for " + (f"GPUs {gpus}" if gpus else (f"devices {', '.join(devices)}"
                                                                               if devices else "no accelerator")),
                lines=ctx.span(piece), quantities=q)]
    if missing:
        out.append(make("prompt", "ascend_control_devices_missing", category="runtime",
                        failure="container_device_mapping",
                        severity="warning",
                        meaning="the container maps /dev/davinci* but not " + ", ".join(f"/dev/{m}" for m in missing)
                                + ": the Ascend runtime cannot open the NPU without them",
                        lines=ctx.span(piece), quantities={"missing": ", ".join(missing)}))
    return out


def _nothing(ctx: Ctx, piece: Piece) -> list[Finding]:
    return []


READERS: dict[str, Callable[[Ctx, Piece], list[Finding]]] = {
    **read_nvidia.READERS,
    **read_nvtools.READERS,
    **read_platform.READERS,
    **read_ascend.READERS,
    **read_kube.READERS,
    "text": read_text,
    "prompt": read_prompt,
    "section": _nothing,
}
"""Block kind -> reader."""

MAX_REFUSAL = 300
"""Characters of a reader's refusal an unread block's finding keeps (its first line: the field it names)."""

_DEVICE_FAULT = re.compile(r"^(?:xid_\d+|gpu_reset_required|gpu_fallen_off_bus|gpu_lost|gpu_row_remap_pending|"
                           r"gpu_ecc_uncorrectable|nvrm_assertion|gpu_init_failed)$")
_EXPLAINED = {"cuda_devices_unavailable", "cuda_unknown", "cuda_initialization_error", "cuda_launch_failure",
              "cuda_no_device"}


def correlate(findings: list[Finding]) -> list[Finding]:
    """Cross-block rules: a CUDA device-availability error next to a GPU fault (Xid, reset required) in
    the same paste is explained by that fault, so it takes the fault's failure category and names it."""
    faults = [f for f in findings if _DEVICE_FAULT.match(f.code) and f.failure and f.failure != "xid_application"]
    if not faults:
        return findings
    out = []
    for f in findings:
        if f.code in _EXPLAINED and f.failure != faults[0].failure:
            f = replace(f, failure=faults[0].failure,
                        meaning=f.meaning + f"; explained by {faults[0].code} in the same paste",
                        quantities={**f.quantities, "explained_by": faults[0].code})
        out.append(f)
    return out


def _lone_value(ctx: Ctx, piece: Piece, text: str, blocks: list[Block]) -> Finding:
    blocks.append(Block("value", piece.start + 1, piece.end, False, piece.command))
    return make("text", "unrecognised", category="unrecognised", severity="unrecognised",
                meaning=f"a bare value ({text}) with nothing that says what it counts", lines=ctx.span(piece))


def _printed_value(ctx: Ctx, value: tuple[Piece, str], found: list[Finding], blocks: list[Block]) -> list[Finding]:
    """A bare number printed just before a HAMi registration (two ``kubectl get -o jsonpath`` outputs in a row):
    kept on the registration finding as ``printed_value`` when it equals the vGPU slots, else unrecognised."""
    piece, text = value
    for n, f in enumerate(found):
        if f.code == "hami_devices" and str(f.quantities.get("vgpu_slots")) == text:
            blocks.append(Block("value", piece.start + 1, piece.end, True, piece.command))
            found[n] = replace(f, lines=ctx.span(piece) + f.lines,
                               quantities={**f.quantities, "printed_value": int(text),
                                           "printed_value_matches":
                                               "vgpu_slots (the node's allocatable nvidia.com/gpu)"})
            return found
    return [_lone_value(ctx, piece, text, blocks)] + found


def _attach_ends(findings: list[Finding]) -> list[Finding]:
    """``Aborted (core dumped)`` and the like, printed a few lines after an error, end that error's process."""
    out: list[Finding] = []
    last_error: int | None = None  # index in out of the last error finding with lines
    for f in findings:
        prev = out[last_error] if last_error is not None else None
        if (f.code == "process_crashed" and prev is not None and f.lines
                and prev.lines[-1].number >= f.lines[0].number - 3):
            end = f.quantities.get("process_end")
            out[out.index(prev)] = replace(prev, lines=prev.lines + f.lines,
                                           quantities={**prev.quantities, "process_end": end})
            continue
        out.append(f)
        if f.severity == "error" and f.lines:
            last_error = len(out) - 1
    return out


def _with_hosts(findings: list[Finding], prefixes: list[Prefix | None]) -> list[Finding]:
    """A finding whose source lines all came through one forwarding/syslog host (one torchrun rank) names it in
    its ``host`` (``rank``) entity."""
    if not any(p is not None and (p.host or p.rank) for p in prefixes):
        return findings
    out = []
    for f in findings:
        heads = [p for line in f.lines if 0 < line.number <= len(prefixes)
                 for p in (prefixes[line.number - 1],) if p is not None]
        hosts = {p.host for p in heads if p.host}
        ranks = {p.rank for p in heads if p.rank}
        if len(hosts) == 1 and "host" not in f.entity:
            f = replace(f, entity={**f.entity, "host": hosts.pop()})
        if len(ranks) == 1 and "rank" not in f.entity:
            f = replace(f, entity={**f.entity, "rank": ranks.pop()})
        out.append(f)
    return out


def explain_text(text: str) -> Report:
    """Read a paste and return its :class:`Report`.

    ``text`` may hold any mix of the kinds in the README (nvidia-smi, dmesg, dcgmi, npu-smi, kubectl
    describe/get/events, YAML/JSON objects, container logs) with prompts and noise around them, CRLF
    line ends and ANSI colours. Never raises for any string: text with NUL bytes, empty text and text
    with no recognised block give a Report with ``readable=False``.
    """
    if "\x00" in text:
        return Report((), (), readable=False, reason="binary input (NUL bytes): not captured text")
    raw, clean = clean_lines(text.lstrip("\ufeff"))
    clean, prefixes = normalise(clean)
    if not any(line.strip() for line in clean):
        return Report((), (), readable=False, reason="empty input", lines=len(raw))
    ctx = Ctx(raw, clean)
    findings: list[Finding] = []
    blocks: list[Block] = []
    value: tuple[Piece, str] | None = None
    for piece in split(clean):
        if piece.kind == "text" and piece.end - piece.start == 1 and re.fullmatch(r"\s*-?\d+(?:\.\d+)?\s*",
                                                                                   clean[piece.start]):
            value = (piece, clean[piece.start].strip())
            continue
        reader = READERS.get(piece.kind, read_text)
        try:
            found = reader(ctx, piece)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError, HeteroError) as exc:
            # a shared parser's refusal (pending/, probes/: ParseError names the field) is this block's "unread",
            # its message kept (first line, bounded): it names the field
            said = (str(exc).strip().splitlines() or [""])[0][:MAX_REFUSAL]
            found = [make(piece.kind, "unrecognised", category="unrecognised", severity="unrecognised",
                          meaning=f"the {piece.kind} reader could not read this block ({type(exc).__name__}"
                                  f"{': ' + said if said else ''})",
                          lines=ctx.span(piece, 5))]
        recognised = piece.kind in ("prompt", "section") or any(f.severity != "unrecognised" for f in found)
        if value is not None:
            found, value = _printed_value(ctx, value, found, blocks), None
        blocks.append(Block(piece.kind, piece.start + 1, piece.end, recognised, piece.command))
        findings.extend(found)
    if value is not None:
        findings.append(_lone_value(ctx, value[0], value[1], blocks))
    findings = _with_hosts(_attach_ends(correlate(findings)), prefixes)
    readable = any(b.recognised and b.kind not in ("prompt", "section") for b in blocks) or any(
        f.severity != "unrecognised" for f in findings)
    return Report(tuple(findings), tuple(blocks), readable=readable,
                  reason=None if readable else "no block of the input was recognised", lines=len(raw))


def explain_bytes(data: bytes) -> Report:
    """:func:`explain_text` for raw bytes: UTF-8 (BOM stripped), else UTF-16 with a BOM, else Latin-1
    for text that is mostly printable; binary data gives ``readable=False``."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return explain_text(data.decode("utf-16"))
        except UnicodeDecodeError:
            pass
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        if text.count("\ufffd") > max(8, len(text) // 20):
            return Report((), (), readable=False, reason="binary input: not UTF-8 text")
    return explain_text(text)
