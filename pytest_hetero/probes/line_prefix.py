"""One line normaliser in front of every reader: forwarded and logging prefixes are taken off each line.

Operators rarely paste a tool's output bare. Lines arrive with the layers a collector put in front of them:

* a forwarding host, as ``pdsh``/``clush``/``ansible -o`` and remote syslog print it: ``192.0.2.10: `` or
  ``node-a1: `` (the same host token must start most lines, so ``NVRM:``, ``Error:`` or a YAML key are never
  mistaken for one);
* a syslog / ``journalctl`` (``short``, ``short-precise``, ``short-iso``, ``short-iso-precise``) prefix,
  ``<time> <host> <tag>[<pid>]: `` — the month may be English (``Jan  3``) or a CJK locale's (``8月 18``);
* a raw ``/dev/kmsg`` record head ``<prio>,<seq>,<usec>,<flags>;`` (rewritten as the dmesg uptime stamp
  ``[<sec>.<usec>] `` so the kernel reader still has a time);
* ``torchrun``'s per-rank ``[rank1]: `` / ``[default0]:`` (kept as the finding's ``rank``);
* ``kubectl logs --prefix``'s ``[pod/<name>/<container>] ``;
* an RFC 3339 stamp from ``kubectl logs --timestamps`` or a CRI log file (``<rfc3339> stdout F ``).

What is kept: a syslog prefix whose tag is ``kernel`` (the kernel reader reads it, wall clock included), and
RFC 3339 stamps on runs of kernel lines (``dmesg --time-format iso``). The stripped prefix is kept per line
(:class:`Prefix`): the host becomes the finding's ``host`` entity. Source lines in findings keep the exact
input text; only what the readers parse is normalised.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_MONTH = r"(?:[A-Z][a-z]{2}|\d{1,2}月)"
SYSLOG = re.compile(
    r"^(?P<ts>" + _MONTH + r"\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:\.\d+)?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
    r"\s+(?P<host>[\w.:-]+)\s+(?P<tag>[\w./@-]+)(?:\[\d+\])?:(?:\s|$)"
)
"""A syslog / journalctl line head: time, host, tag with optional ``[pid]``, colon."""

HOST = re.compile(r"^(?P<host>(?:\d{1,3}(?:\.\d{1,3}){3}|\[?[0-9a-fA-F:]+:[0-9a-fA-F:]+\]?|[A-Za-z0-9][\w.-]{0,62})):"
                  r"(?: |$)")
"""A forwarded-host head: an IPv4/IPv6 address or a host name, a colon, a space."""

KUBECTL_PREFIX = re.compile(r"^\[(?P<host>(?:pod|deployment|daemonset|job|statefulset)/[\w.-]+/[\w.-]+)\] ")
"""``kubectl logs --prefix``: ``[pod/<name>/<container>] ``."""

RANK_PREFIX = re.compile(r"^\[(?:rank|default)(?P<rank>\d+)\]:\s?")
"""``torchrun`` per-rank output prefixes: ``[rank1]: `` (``--tee``/``--local-ranks-filter``), ``[default0]:``."""

KMSG = re.compile(r"^(?P<prio>\d{1,4}),(?P<seq>\d+),(?P<usec>\d+),[-+c]?[^;\s]*;")
"""A raw ``/dev/kmsg`` record head (Documentation/ABI/testing/dev-kmsg)."""

RFC3339 = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d))"
                     r"(?:\s+(?:stdout|stderr)\s+[FP])?\s")
"""A leading RFC 3339 stamp (``kubectl logs --timestamps``; CRI log files add ``stdout F``)."""

_KERNELISH = re.compile(r"NVRM|Xid|nvidia|kernel:|\[\s*\d+\.\d+\]|PCI|pci |Call Trace|Tainted|Hardware name")
_NOT_HOSTS = frozenset({
    "nvrm", "kernel", "error", "warning", "warn", "info", "debug", "fatal", "note", "hint", "caused by", "reason",
    "message", "status", "events", "name", "type", "http", "https", "file", "traceback", "e", "w", "i", "f",
    "runtimeerror", "valueerror", "exception", "solution", "possible cause", "gpu", "npu", "key", "legend",
    "nic legend", "gpus", "nvswitches", "tip", "output", "result", "failed", "usage", "example",
})
"""First tokens that start ordinary lines (``NVRM:``, ``Error:``, ``Events:``), never a forwarding host."""


@dataclass(frozen=True)
class Prefix:
    """What was taken off one line: the ``host`` (forwarder or syslog host), the ``time`` as printed, the
    syslog ``tag``; ``text`` is the exact removed head."""

    text: str
    host: str | None = None
    time: str | None = None
    tag: str | None = None
    rank: str | None = None


def _forwarding_host(lines: list[str]) -> set[str]:
    """Host tokens that head at least 60 % of the non-blank lines (at least 2 lines) of the text."""
    heads: Counter[str] = Counter()
    nonblank = 0
    for line in lines:
        if not line.strip():
            continue
        nonblank += 1
        m = HOST.match(line)
        if m and m.group("host").lower() not in _NOT_HOSTS:
            heads[m.group("host")] += 1
    return {h for h, n in heads.items() if n >= 2 and n * 10 >= nonblank * 6}


def _strip_syslog(line: str) -> tuple[str, Prefix | None]:
    m = SYSLOG.match(line)
    if not m or m.group("tag") == "kernel":
        return line, None
    return line[m.end():], Prefix(line[: m.end()], host=m.group("host"), time=m.group("ts"), tag=m.group("tag"))


def _kmsg(line: str) -> tuple[str, Prefix | None]:
    m = KMSG.match(line)
    if not m:
        return line, None
    usec = int(m.group("usec"))
    return f"[{usec // 1_000_000:5d}.{usec % 1_000_000:06d}] " + line[m.end():], Prefix(line[: m.end()])


def normalise(lines: list[str]) -> tuple[list[str], list[Prefix | None]]:
    """Return ``(lines, prefixes)``: each line with its forwarding/logging prefix removed (see the module
    docstring) and, per line, the :class:`Prefix` taken off (None when nothing was). Never raises; the
    result has as many lines as the input."""
    if not lines:
        return [], []
    hosts = _forwarding_host(lines)
    out: list[str] = []
    prefixes: list[Prefix | None] = []
    stamped: list[int] = []
    for line in lines:
        head: Prefix | None = None
        rest = line
        if hosts:
            m = HOST.match(rest)
            if m and m.group("host") in hosts:
                head = Prefix(rest[: m.end()], host=m.group("host"))
                rest = rest[m.end():]
        kube = KUBECTL_PREFIX.match(rest)
        if kube:
            head = Prefix(rest[: kube.end()], host=kube.group("host"))
            rest = rest[kube.end():]
        rank = RANK_PREFIX.match(rest)
        if rank:
            head = Prefix((head.text if head else "") + rest[: rank.end()], host=head.host if head else None,
                          rank=rank.group("rank"))
            rest = rest[rank.end():]
        rest, syslog = _strip_syslog(rest)
        if syslog is not None:
            head = Prefix((head.text if head else "") + syslog.text, host=head.host if head else syslog.host,
                          time=syslog.time, tag=syslog.tag)
        rest, kmsg = _kmsg(rest)
        if kmsg is not None:
            head = Prefix((head.text if head else "") + kmsg.text, host=head.host if head else None)
        if RFC3339.match(rest):
            stamped.append(len(out))
        out.append(rest)
        prefixes.append(head)
    _strip_stamps(out, prefixes, stamped)
    return out, prefixes


def _strip_stamps(out: list[str], prefixes: list[Prefix | None], stamped: list[int]) -> None:
    """RFC 3339 stamps come off runs of stamped lines that hold no kernel line (a kernel run keeps them:
    ``dmesg --time-format iso`` is read with its stamps by the kernel reader)."""
    runs: list[list[int]] = []
    for i in stamped:
        if runs and all(not out[k].strip() for k in range(runs[-1][-1] + 1, i)):
            runs[-1].append(i)
        else:
            runs.append([i])
    for run in runs:
        if any(_KERNELISH.search(out[i]) for i in run):
            continue
        for i in run:
            m = RFC3339.match(out[i])
            if m is None:
                continue
            old = prefixes[i]
            prefixes[i] = Prefix((old.text if old else "") + out[i][: m.end()], host=old.host if old else None,
                                 time=m.group("ts"), tag=old.tag if old else None)
            out[i] = out[i][m.end():]
