"""One line normaliser in front of every reader: forwarded and logging prefixes are taken off each line.

Operators rarely paste a tool's output bare. Lines arrive with the layers a collector put in front of them:

* a forwarding host, as ``pdsh``/``clush``/``ansible -o`` and remote syslog print it: ``192.0.2.10: `` or
  ``node-a1: `` (an address anywhere; a host name only when the same token starts at least 60 % of the lines,
  and never ``NVRM:``, ``Error:`` and the like, so a YAML key or a log tag is not mistaken for one);
* a syslog / ``journalctl`` (``short``, ``short-precise``, ``short-iso``, ``short-iso-precise``) prefix,
  ``<time> <host> <tag>[<pid>]: `` — the month may be English (``Jan  3``) or a CJK locale's (``8月 18``);
* a raw ``/dev/kmsg`` record head ``<prio>,<seq>,<usec>,<flags>;`` (rewritten as the dmesg uptime stamp
  ``[<sec>.<usec>] `` so the kernel reader still has a time);
* ``torchrun``'s per-rank ``[rank1]: `` / ``[default0]:`` and ``mpirun --tag-output``'s ``[1,0]<stdout>:`` (kept
  as the finding's ``rank``);
* ``kubectl logs --prefix``'s ``[pod/<name>/<container>] ``;
* an RFC 3339 stamp from ``kubectl logs --timestamps`` or a CRI log file (``<rfc3339> stdout F ``).

What is kept: a syslog prefix whose tag is ``kernel`` (the kernel reader reads it, wall clock included), and RFC
3339 stamps on kernel lines (``dmesg --time-format iso``, whose stamps put ``,`` before the fraction). The stripped
prefix is kept per line (:class:`Prefix`): the host becomes the finding's ``host`` entity. Source lines in findings
keep the exact input text; only what the readers parse is normalised.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_MONTH = r"(?:[A-Z][a-z]{2}|\d{1,2}月)"
_SYSLOG_TIME = _MONTH + r"\s+\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?"
_ISO_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
SYSLOG = re.compile(
    r"^(?P<ts>" + _SYSLOG_TIME + "|" + _ISO_TIME + r")"
    r" (?P<host>\w[\w.-]*|[0-9a-fA-F]*:[0-9a-fA-F:]+) (?P<tag>[A-Za-z][\w./@-]*)(?:\[\d+\])?:(?: |$)"
)
"""A syslog / journalctl line head: time, host, tag with optional ``[pid]``, colon."""

KERNEL_STAMPS: tuple[str, ...] = (
    r"kern\s*:\s*(?P<level>\w+)\s*:",  # dmesg --decode
    # syslog / journalctl -k / rsyslog high precision
    r"(?P<syslog>" + _MONTH + r"\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:\.\d+)?|" + _ISO_TIME + r")\s+\S+\s+kernel:",
    r"(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[,.]\d+(?:[+-]\d\d:?\d\d|Z)?)\s",  # dmesg --time-format iso
    r"\[(?P<ctime>(?:[A-Z][a-z]{2} ){2}[ \d]?\d \d\d:\d\d:\d\d \d{4})\]",  # dmesg -T
    r"kernel:",  # journalctl -o cat, a grep of kern.log
    r"\[\s*(?P<uptime>\d+\.\d+)\]",  # dmesg
)
"""The heads a kernel line keeps after :func:`normalise` (the kernel reader reads its time from them)."""
KERNEL_HEAD = re.compile(
    r"^\s*(?:" + KERNEL_STAMPS[0] + r"\s*)?(?:" + "|".join(KERNEL_STAMPS[1:5]) + r")?\s*"
    r"(?:" + KERNEL_STAMPS[5] + r"\s*)?"
)
"""A kernel line's head: decode level, wall clock (syslog/journal, ISO, ``dmesg -T``) or ``kernel:``, uptime."""
KERNEL_START = re.compile(r"^\s*(?:" + "|".join(re.sub(r"\(\?P<\w+>", "(?:", s) for s in KERNEL_STAMPS) + r"|NVRM:)")
"""A line that starts as a kernel log line does (one of :data:`KERNEL_STAMPS`, or ``NVRM:``)."""
KLOG_HEAD = r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+[\w./-]+:\d+\]"
"""The head of a klog line (``I0624 22:58:05.486593       1 health.go:159]``), no groups (for alternations)."""
KLOG = re.compile(r"^\s*(?P<level>[IWEF])(?P<date>\d{4}) (?P<time>\d\d:\d\d:\d\d\.\d+)\s+\d+\s+"
                  r"(?P<src>[\w./-]+:\d+)\]\s?(?P<msg>.*)$")
"""A klog line (Kubernetes components): level, month-day, time, thread id, ``file:line]``, message."""


_KLOG_TIME = re.compile(r"^\s*(?P<ts>[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+)")


def klog_stamp(line: str) -> str | None:
    """The klog time at the start of ``line`` as printed (``I0624 22:58:05.486593``), or None."""
    m = _KLOG_TIME.match(line)
    return m.group("ts") if m else None


def kernel_time(line: str) -> tuple[str | None, str | None, int]:
    """Return ``(timestamp, uptime, end of head)`` for one kernel line (:data:`KERNEL_HEAD`): the timestamp is
    the wall clock when one was printed (then ``uptime`` is the dmesg stamp after it), else the uptime stamp
    (then ``uptime`` is None), else None."""
    m = KERNEL_HEAD.match(line)
    wall = m.group("syslog") or m.group("iso") or m.group("ctime") if m else None
    if m is None:
        return None, None, 0
    uptime = m.group("uptime")
    if wall:
        return wall, uptime, m.end()
    return uptime, None, m.end()

HOST = re.compile(r"^(?P<host>(?:\d{1,3}(?:\.\d{1,3}){3}|\[?[0-9a-fA-F:]+:[0-9a-fA-F:]+\]?|[A-Za-z0-9][\w.-]{0,62})):"
                  r"(?: |$)")
"""A forwarded-host head: an IPv4/IPv6 address or a host name, a colon, a space."""

KUBECTL_PREFIX = re.compile(r"^\[(?P<host>(?:pod|deployment|daemonset|job|statefulset)/[\w.-]+/[\w.-]+)\] ")
"""``kubectl logs --prefix``: ``[pod/<name>/<container>] ``."""

RANK_PREFIX = re.compile(r"^\[(?:(?:rank|default)(?P<rank>\d+)\]|\d+,(?P<mpirank>\d+)\]<std(?:out|err)>):\s?")
"""Per-rank output prefixes: ``torchrun``'s ``[rank1]: `` (``--tee``/``--local-ranks-filter``), ``[default0]:``,
and Open MPI ``mpirun --tag-output``'s ``[<job>,<rank>]<stdout>:`` / ``<stderr>:``."""

KMSG = re.compile(r"^(?P<prio>\d{1,4}),(?P<seq>\d+),(?P<usec>\d+),[-+c]?[^;\s]*;")
"""A raw ``/dev/kmsg`` record head (Documentation/ABI/testing/dev-kmsg)."""

RFC3339 = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d))"
                     r"(?:\s+(?:stdout|stderr)\s+[FP])?\s")
"""A leading RFC 3339 stamp (``kubectl logs --timestamps``; CRI log files add ``stdout F``)."""

_KERNELISH = re.compile(r"^\s*(?:\[\s*\d+\.\d+\]\s*)?(?:NVRM|nvidia(?!-container)[\w-]*:|kernel:|Call Trace|"
                        r"Tainted:|Hardware name:|"
                        r"\w+ \d{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d: )")
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
    """Host tokens that head the lines: an IPv4/IPv6 address on any line, a host name when it heads at least
    60 % of the non-blank lines (and at least 2 of them)."""
    heads: Counter[str] = Counter()
    nonblank = 0
    ips: set[str] = set()
    for line in lines:
        if not line.strip():
            continue
        nonblank += 1
        m = HOST.match(line)
        if m and m.group("host").lower() not in _NOT_HOSTS:
            heads[m.group("host")] += 1
            if re.fullmatch(r"\d{1,3}(?:\.\d{1,3}){3}|\[?[0-9a-fA-F:]+:[0-9a-fA-F:]+\]?", m.group("host")) and (
                    ":" not in m.group("host") or m.group("host").count(":") >= 2):
                ips.add(m.group("host"))
    return ips | {h for h, n in heads.items() if n >= 2 and n * 10 >= nonblank * 6}


MINUTE_COLUMN = re.compile(r"^ ?(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d)(?: |$)")
"""A log viewer's or shipper's time column at minute precision (`` 2025-02-18 12:54 ``): no program prints
its own log time without seconds, so where it heads most lines it is a collector's layer."""


def _minute_column(lines: list[str]) -> bool:
    """True when :data:`MINUTE_COLUMN` heads at least 60 % of the non-blank lines (and at least 2)."""
    nonblank = [line for line in lines if line.strip()]
    n = sum(1 for line in nonblank if MINUTE_COLUMN.match(line))
    return n >= 2 and n * 10 >= len(nonblank) * 6


def _strip_syslog(line: str) -> tuple[str, Prefix | None]:
    m = SYSLOG.match(line)
    if not m or m.group("tag") == "kernel":
        return line, None
    return line[m.end():], Prefix(line[: m.end()], host=m.group("host"), time=m.group("ts"), tag=m.group("tag"))


def _kmsg(line: str) -> tuple[str, Prefix | None]:
    """A raw ``/dev/kmsg`` head: a kernel record (facility 0: ``prio`` < 8) becomes the dmesg uptime stamp,
    unless the text already starts with a kernel time stamp; a record of another facility (a user-space
    writer of ``/dev/kmsg``, ``prio`` >= 8) comes off whole, its time kept in the :class:`Prefix`."""
    m = KMSG.match(line)
    if not m:
        return line, None
    usec = int(m.group("usec"))
    stamp = f"{usec // 1_000_000}.{usec % 1_000_000:06d}"
    rest = line[m.end():]
    head = KERNEL_HEAD.match(rest)
    stamped = head is not None and any(head.group(g) for g in ("syslog", "iso", "ctime", "uptime"))
    if int(m.group("prio")) >= 8 or stamped:
        return rest, Prefix(line[: m.end()], time=stamp)
    return f"[{usec // 1_000_000:5d}.{usec % 1_000_000:06d}] " + rest, Prefix(line[: m.end()])


def _join(head: Prefix | None, text: str, *, host: str | None = None, time: str | None = None,
          tag: str | None = None, rank: str | None = None) -> Prefix:
    """``head`` extended by the removed ``text`` and the fields it read; the outermost host is kept, inner fields
    fill the rest."""
    if head is None:
        return Prefix(text, host=host, time=time, tag=tag, rank=rank)
    return Prefix(head.text + text, host=head.host or host, time=time or head.time, tag=tag or head.tag,
                  rank=rank or head.rank)


def _outer(line: str, hosts: set[str]) -> tuple[str, Prefix | None]:
    """Forwarding host, then syslog/journal heads and ``kubectl --prefix`` heads in any order (a relayed journal,
    a log shipper's pod), at most three layers."""
    head: Prefix | None = None
    rest = line
    m = HOST.match(rest) if hosts else None
    if m and m.group("host") in hosts:
        head, rest = _join(head, rest[: m.end()], host=m.group("host")), rest[m.end():]
    for _ in range(3):
        before = rest
        rest, syslog = _strip_syslog(rest)
        if syslog is not None:
            head = _join(head, syslog.text, host=syslog.host, time=syslog.time, tag=syslog.tag)
        kube = KUBECTL_PREFIX.match(rest)
        if kube:
            head, rest = _join(head, rest[: kube.end()], host=kube.group("host")), rest[kube.end():]
        user = KMSG.match(rest)
        if user and int(user.group("prio")) >= 8:  # a user-space /dev/kmsg record around another layer
            rest, kmsg = _kmsg(rest)
            head = _join(head, kmsg.text if kmsg else "", time=kmsg.time if kmsg else None)
        if rest == before:
            break
    return rest, head


def _inner(line: str, head: Prefix | None) -> tuple[str, Prefix | None]:
    """A raw kmsg record head, then the torchrun rank prefix (written to ``/dev/kmsg``, a rank's line keeps it)."""
    line, kmsg = _kmsg(line)
    if kmsg is not None:
        head = _join(head, kmsg.text, time=kmsg.time)
    rank = RANK_PREFIX.match(line)
    if rank:
        which = rank.group("rank") or rank.group("mpirank")
        head, line = _join(head, line[: rank.end()], rank=which), line[rank.end():]
    return line, head


def normalise(lines: list[str]) -> tuple[list[str], list[Prefix | None]]:
    """Return ``(lines, prefixes)``: each line with its forwarding/logging prefix removed (see the module
    docstring) and, per line, the :class:`Prefix` taken off (None when nothing was). Layers come off outside
    in: host, syslog/journal, ``kubectl --prefix``, RFC 3339 stamp, torchrun rank, kmsg head. Never raises;
    the result has as many lines as the input."""
    if not lines:
        return [], []
    hosts = _forwarding_host(lines)
    out: list[str] = []
    prefixes: list[Prefix | None] = []
    stamped: list[int] = []
    for line in lines:
        rest, head = _outer(line, hosts)
        out.append(rest)
        prefixes.append(head)
    stamped = [i for i, line in enumerate(out) if RFC3339.match(line)]
    _strip_stamps(out, prefixes, stamped)
    if _minute_column(out):
        for i, line in enumerate(out):
            stamp = MINUTE_COLUMN.match(line)
            if stamp:
                prefixes[i] = _join(prefixes[i], line[: stamp.end()], time=stamp.group("ts"))
                out[i], inner = _outer(line[stamp.end():], hosts)
                if inner is not None:
                    prefixes[i] = _join(prefixes[i], inner.text, host=inner.host, tag=inner.tag)
    for i, line in enumerate(out):
        out[i], prefixes[i] = _inner(line, prefixes[i])
    return out, prefixes


def _strip_stamps(out: list[str], prefixes: list[Prefix | None], stamped: list[int]) -> None:
    """RFC 3339 stamps come off every stamped line except kernel lines: ``dmesg --time-format iso`` stamps
    (``,`` before the fraction) and stamps on a line whose text is a kernel message stay, for the kernel
    reader reads them as the line's time. What was under a stripped stamp loses its own syslog/``--prefix``
    heads too."""
    for i in stamped:
        m = RFC3339.match(out[i])
        if m is None or "," in m.group("ts") or _KERNELISH.search(out[i][m.end():]):
            continue
        prefixes[i] = _join(prefixes[i], out[i][: m.end()], time=m.group("ts"))
        rest, head = _outer(out[i][m.end():], set())
        if head is not None:
            prefixes[i] = _join(prefixes[i], head.text, host=head.host, tag=head.tag)
        out[i] = rest
