"""Split a paste into blocks and name each block's kind.

Operators paste several outputs at once: a shell prompt, ``nvidia-smi``, a ``dmesg`` excerpt, an events
table, a container log. :func:`split` walks the cleaned lines once and cuts them into :class:`Piece`
objects. Each claimer below recognises the start of one kind and says where it ends; lines nobody
claims become ``text`` pieces (cut at blank lines), read later line by line. Shell prompts and echoed
commands become ``prompt`` pieces and their command is handed to the next piece (``command``).

Cleaning (:func:`clean_lines`): CR/LF and lone CR line ends, ANSI colour/cursor escapes, NUL-free
check, tabs kept. Line numbers stay those of the input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from pytest_hetero.explain import claim_nvidia
from pytest_hetero.pending.events import OLD_HEADER, OLD_ROW
from pytest_hetero.probes import line_prefix
from pytest_hetero.probes.nvidia_table import GPU_ROW

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")

KERNEL_PREFIX = line_prefix.KERNEL_START
"""Start of a kernel log line in any of the layouts dmesg, journalctl and syslog print."""

KLOG = re.compile(r"^\s*" + line_prefix.KLOG_HEAD)
"""A Kubernetes component (klog) line: ``I0624 22:58:05.486593       1 health.go:159] ...``."""

PROMPT = re.compile(
    r"^\s*(?:\([\w.-]{1,40}\)\s+)?(?:"
    r"\[[^\]\n]{1,80}\]\s?[#$]"  # [user@host dir]$  [node-a1 ~]#
    r"|[\w.-]+@[\w.-]+(?::\S*)?\s?[#$%]"  # root@host:~/dir#
    r"|(?:ba|z|k)?sh-[\d.]+[#$]"  # bash-5.1#
    r"|PS [^>\n]{1,80}>"  # PowerShell
    r"|[$#%>]"  # bare prompt
    r")\s+(?P<cmd>\S.*)$"
)
TOOL_COMMAND = re.compile(
    r"^\s*[$#]?(?P<cmd>(?:sudo\s+)?(?:microk8s\s+)?(?:nvidia-smi|npu-smi|dcgmi|kubectl|docker|dmesg|journalctl|"
    r"crictl|ctr|apiclient|vcctl|helm|nerdctl|podman|lspci|hl-smi)(?:\s+[-\w./=:,|'\"{}@*]+)*)\s*$"
)
NVSMI_STAMP = re.compile(
    r"^\s*\S+\s+\S+\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\d{4}\s*$|^\s*\d{4}[-/年]\S*\s+\S.*\d\d:\d\d:\d\d"
)
EVENT_HEADER = re.compile(r"^\s*Type\s+Reason\s+Age\s+From\s+Message\s*$|" + OLD_HEADER.pattern)
GET_EVENTS_HEADER = re.compile(r"^\s*(?:NAMESPACE\s+)?LAST SEEN\s+TYPE\s+REASON\s+(?:OBJECT|KIND)\b.*MESSAGE")
EVENT_ROW = re.compile(
    r"^\s*(?:(?:[\w.-]+\s+)?(?:<unknown>|\d+(?:\.\d+)?[smhdy][\w.]*|<invalid>)(?:\s+\(x\d+ over \S+\))?\s+)?"
    r"(?:Normal|Warning)\s+[A-Z]\w+\s+\S|" + OLD_ROW.pattern
)
TABLE_HEADER = re.compile(r"^\s*(?:NAMESPACE\s+)?NAME\s+(?:READY|STATUS)\s|^\s*(?:NAMESPACE|NS)\s+NAME\s+USED\s+HARD")
YAML_START = re.compile(
    r"^\s*(?:apiVersion|kind|status|items|metadata|spec|conditions|allocatable|capacity)\s*:\s*(?:\S.*)?$"
)
YAML_LINE = re.compile(r"^\s*(?:- )?(?:[\w./\"'-]+|\"[^\"]*\"|'[^']*'):(?:\s|$)|^\s*- |^\s+\S|^---\s*$|^\s*#")
KV_LINE = re.compile(r"^\s*[^\s:：|+\[<{#$>][^:：]*?\s*[:：]\s*\S")
NPU_KV_KEY = re.compile(r"^\s*(?:NPU ID|Chip ID|Chip Count|Chip Name|Board ID|PCIe Bus Info)\s*[:：]")
LABEL_LINE = re.compile(r"^\s*[\w.-]+(?:/[\w.-]+)?=(?:\S[^\s=]*=\S*|[^\s=]*)(?:\s+\S[^\s=]*=\S*)*\s*$")
"""A ``key=value`` label line: the first key, then whitespace-separated words that each hold an ``=`` after their
first character. The same lines as ``…=[^\\s=]*\\s*(?:\\S+=\\S*\\s*)*$`` (checked on every string of up to 8
characters of ``a= /.,-``), without its ways of splitting ``a=a=a=…`` into groups: on a line that is not labels
that one backtracked exponentially (``k=v`` and 16 ``a=`` then `` y``: 5 s; each ``a=`` more, ×3)."""
JSON_FRAGMENT = re.compile(r'^\s*"[^"]+"\s*:\s*(?:"[^"]*"|[-\d.]+|true|false|null)\s*,?\s*$')
RESOURCE_LINE = re.compile(
    r"^\s+(?:[\w.-]+/[\w.-]+|cpu|memory|pods|ephemeral-storage|hugepages-\w+)\s*:?\s+\S+(?:\s+\S+)?\s*$"
)
DESCRIBE_TOP = re.compile(r"^[A-Z][\w -]{1,40}:(?:\s|$)")
SECTION = re.compile(r"^\s*={2,}\s*\S.*$|^\s*-{2,}\s+\S.*\s-{2,}\s*$|^captured_at=")


@dataclass
class Piece:
    """A cut of the paste: ``kind``, line indexes ``start`` (inclusive) and ``end`` (exclusive), the
    preceding shell ``command`` if any."""

    kind: str
    start: int
    end: int
    command: str | None = None


def clean_lines(text: str) -> tuple[list[str], list[str]]:
    """Return ``(raw, clean)`` line lists: ``raw`` as in the input (line ends removed), ``clean`` without
    ANSI escapes and with trailing CR/whitespace removed. Lone CRs end lines as LF does."""
    raw = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    if "\x1b" in text:
        clean = [ANSI.sub("", line).rstrip() for line in raw]
    else:
        clean = [line.rstrip() for line in raw]
    return raw, clean


def _blank(line: str) -> bool:
    return not line or line.isspace()


def _next_nonblank(lines: list[str], i: int) -> int:
    while i < len(lines) and _blank(lines[i]):
        i += 1
    return i


def _boxed(line: str) -> bool:
    s = line.lstrip()
    return s.startswith(("|", "+", "├", "│"))


def _box_end(lines: list[str], i: int) -> int:
    """End of a box-drawn table (and following tables separated by blank lines) starting at ``i``."""
    n = len(lines)
    while i < n:
        if _boxed(lines[i]):
            i += 1
            continue
        j = _next_nonblank(lines, i)
        if j < n and j > i and _boxed(lines[j]) and j - i <= 2:
            i = j
            continue
        if j < n and j > i and lines[j].strip().startswith("+") is False and "MIG devices" in lines[j]:
            i = j
            continue
        break
    return i


# --- claimers: (lines, i) -> (kind, end) or None ------------------------------------------------------

Claim = tuple[str, int]


def _xml(lines: list[str], i: int) -> Claim | None:
    s = lines[i].lstrip()
    if not (s.startswith(("<?xml", "<nvidia_smi_log", "<!DOCTYPE nvidia_smi_log"))):
        return None
    n = len(lines)
    for j in range(i, n):
        if "</nvidia_smi_log>" in lines[j]:
            return "nvidia-smi-xml", j + 1
    j = i
    while j < n and (_blank(lines[j]) or lines[j][:1] in (" ", "\t", "<")):
        j += 1
    return "nvidia-smi-xml", j


_QUERY_START = re.compile(r"^\s*Timestamp\s+:\s+\S")
_QUERY_NEXT = re.compile(r"^\s*(?:Driver Version|CUDA Version|Attached GPUs|Driver version)\s+:")


def _nvsmi_query(lines: list[str], i: int) -> Claim | None:
    if "NVSMI LOG" not in lines[i] and not (
        _QUERY_START.match(lines[i]) and any(_QUERY_NEXT.match(x) for x in lines[i + 1 : i + 4])
    ):
        return None
    n, j = len(lines), i + 1
    while j < n:
        line = lines[j]
        if (_blank(line) or line[0] in " \t" or KV_LINE.match(line) or re.match(r"^GPU [0-9A-Fa-f:.]+\s*$", line)
                or line.strip() in ("[...]", "...", "…")):
            j += 1
            continue
        if re.match(r"^[A-Za-z][\w -]+$", line) and j + 1 < n and lines[j + 1][:1] in (" ", "\t"):
            j += 1
            continue
        break
    while j > i and _blank(lines[j - 1]):
        j -= 1
    return "nvidia-smi-query", j


_NVSMI_ERRORS = re.compile(
    r"NVIDIA-SMI has failed|NVIDIA-SMI couldn't find libnvidia-ml|Failed to initialize NVML|No devices were found"
    r"|Unable to determine the device handle|nvidia-smi: (?:command )?not found"
)


def _nvsmi_table(lines: list[str], i: int) -> Claim | None:
    line = lines[i]
    s = line.lstrip()
    n = len(lines)
    start_table = None
    if s.startswith("+") and i + 1 < n and "NVIDIA-SMI" in lines[i + 1] or s.startswith("|") and "NVIDIA-SMI" in s:
        start_table = i
    elif NVSMI_STAMP.match(line) and i + 1 < n and lines[i + 1].lstrip().startswith("+") and (
        i + 2 < n and "NVIDIA-SMI" in lines[i + 2]
    ):
        return "nvidia-smi-table", _box_end(lines, i + 1)
    if start_table is None and (GPU_ROW.match(line) or s.startswith("+") and i + 1 < n and GPU_ROW.match(lines[i + 1])):
        start_table = i  # GPU rows pasted without the table's header
    if start_table is not None:
        return "nvidia-smi-table", _box_end(lines, start_table)
    if (_NVSMI_ERRORS.match(s) or _NVSMI_ERRORS.match(re.sub(r"^[\w/.-]+:\s+", "", s))) and "NVRM" not in line:
        j = i + 1
        while j < n and (_NVSMI_ERRORS.search(lines[j]) or _blank(lines[j])):
            j += 1
        if j < n and re.match(r"^\s*command terminated with exit code \d+", lines[j]):
            return "nvidia-smi-table", j + 1
        while j > i + 1 and _blank(lines[j - 1]):
            j -= 1
        return "nvidia-smi-table", j
    return None


def _npu_table(lines: list[str], i: int) -> Claim | None:
    s = lines[i].lstrip()
    n = len(lines)
    if s.startswith("+") and i + 1 < n and re.search(r"\|\s*npu-smi\s+\S+\s+Version", lines[i + 1]):
        return "npu-smi", _box_end(lines, i)
    if s.startswith("|") and (re.search(r"npu-smi\s+\S+\s+Version", s) or ("Health" in s and "NPU" in s)):
        return "npu-smi", _box_end(lines, i)
    return None


_VNPU_MARK = re.compile(r"NPU resource static info|Total number of vnpu|\|\s*Vnpu ID\s*\|")


def _npu_vnpu(lines: list[str], i: int) -> Claim | None:
    """``npu-smi info -t info-vnpu``: the boxed resource table, vNPU count and vNPU list, one run of ``+``/``|``
    lines that names one of them."""
    s = lines[i].lstrip()
    if not (s.startswith("|") and _VNPU_MARK.search(s)
            or s.startswith("+") and i + 1 < len(lines) and _VNPU_MARK.search(lines[i + 1])):
        return None
    j = i
    while j < len(lines) and lines[j].lstrip().startswith(("|", "+")):
        j += 1
    return "npu-smi-vnpu", j


def _npu_kv(lines: list[str], i: int) -> Claim | None:
    line = lines[i]
    n = len(lines)
    command = re.match(r"^\s*(?:\S*[#$>]\s*)?npu-smi info\s+-t\s+(\S+)", line)
    if command and command.group(1) == "topo":
        return None
    if not command and not NPU_KV_KEY.match(line):
        return None
    j = i + 1 if command else i
    while j < n:
        cur = lines[j]
        if _blank(cur) or (KV_LINE.match(cur) and not re.match(r"^\s*(?:\S*[#$>]\s*)?npu-smi\b", cur)):
            j += 1
            continue
        break
    while j > i + 1 and _blank(lines[j - 1]):
        j -= 1
    return "npu-smi-kv", j


def _npu_topo(lines: list[str], i: int) -> Claim | None:
    line = lines[i]
    n = len(lines)
    command = re.match(r"^\s*(?:\S*[#$>]\s*)?npu-smi info\s+-t\s+topo\b", line)
    header = re.match(r"^\s*NPU0\s+NPU1\b", line)
    if not command and not header:
        return None
    j = i + 1
    while j < n:
        cur = lines[j].strip()
        if (not cur or re.match(r"^(?:NPU\d+|Legend:|[A-Z]+\s+=)", cur) or cur.startswith("NPU0")
                or re.match(r"^\s*NPU\d+(?:\s+NPU\d+)+", cur)):
            j += 1
            continue
        break
    while j > i + 1 and _blank(lines[j - 1]):
        j -= 1
    return "npu-smi-topo", j


def _dcgm(lines: list[str], i: int) -> Claim | None:
    line = lines[i]
    s = line.lstrip()
    n = len(lines)
    if s.startswith("Successfully ran diagnostic"):
        j = _next_nonblank(lines, i + 1)
        while j < n and lines[j].lstrip().startswith("Successfully ran diagnostic"):
            j += 1
        if j < n and lines[j].lstrip().startswith("{"):
            return "dcgmi-diag", _json_end(lines, j)
        return "dcgmi-diag", _dcgm_end(lines, j)
    if re.match(r"^\s*[+|]-{2,}\s+\S[\w ]*\s+-{2,}[+|]", line) or (
        s.startswith("+") and i + 1 < n and re.match(r"^\s*\|\s*Diagnostic\s*\|\s*Result", lines[i + 1])
    ):
        return "dcgmi-diag", _dcgm_end(lines, i)
    if re.match(r"^\s*\d+ GPUs? found\.?\s*$", line) or re.match(r"^\s*\d+ (?:NvSwitch|CPU|CX)\w* found\.?\s*$", line):
        j = i + 1
        while j < n and (_boxed(lines[j]) or re.match(r"^\s*\d+ \w+ found\.?\s*$", lines[j])):
            j += 1
        return "dcgmi-discovery", j
    return None


def _dcgm_end(lines: list[str], i: int) -> int:
    n = len(lines)
    j = i
    while j < n and (_boxed(lines[j]) or lines[j].strip() in ("...", "…")):
        j += 1
    return j


_JSON_SPECIAL = re.compile(r'[\\"{}\[\]]')


def _json_end(lines: list[str], i: int) -> int:
    """Line index after the JSON value starting at line ``i`` (bracket balance outside strings).

    The line that closes the outermost bracket ends the value; so does the end of any line after the
    first where the balance is back to zero or below; an unclosed value runs to the end. Only backslashes,
    quotes and brackets are visited (``_JSON_SPECIAL``); ``escaped`` is the index, in the current line, of
    the character a backslash inside a string escapes (``-1`` when none is pending)."""
    depth, in_string, escaped = 0, False, -1
    n = len(lines)
    for j in range(i, n):
        line = lines[j]
        for m in _JSON_SPECIAL.finditer(line):
            at = m.start()
            if at == escaped:  # the character a backslash escapes: skip it
                escaped = -1
                continue
            escaped = -1  # a plain character at the escaped index ended the escape before this one
            ch = line[at]
            if in_string:
                if ch == "\\":
                    escaped = at + 1
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth <= 0:
                    return j + 1
        escaped = 0 if escaped == len(line) else -1  # a backslash ending the line escapes the next one's first
        if depth <= 0 and j > i:
            return j + 1
    return n


def _json(lines: list[str], i: int) -> Claim | None:
    s = lines[i].lstrip()
    if not s or s[0] not in "{[":
        return None
    if s[0] == "[" and not re.match(r"^\[\s*(?:$|[{\[\"\d-]|true|false|null)", s):
        return None
    end = _json_end(lines, i)
    if end - i <= 2000:
        try:
            json.loads("\n".join(lines[i:end]))
        except (ValueError, RecursionError):
            return None
    return "json", end


def _yaml(lines: list[str], i: int) -> Claim | None:
    line = lines[i]
    if not YAML_START.match(line) or line.rstrip().endswith(":") is False and not re.match(
        r"^\s*(?:apiVersion|kind)\s*:", line
    ):
        return None
    n = len(lines)
    j = i + 1
    base = len(line) - len(line.lstrip())
    stop = _YAML_STOP.match
    yaml_line = YAML_LINE.match
    while j < n:
        cur = lines[j]
        if not cur or cur.isspace():
            k = _next_nonblank(lines, j)
            nested = k < n and (len(lines[k]) - len(lines[k].lstrip()) > base or YAML_START.match(lines[k]))
            if nested and YAML_LINE.match(lines[k]):
                j = k
                continue
            break
        body = cur.lstrip()
        if not (body[:1] in _NEVER_STOPS and "@" not in cur) and stop(cur):
            break
        if len(cur) - len(body) < base and not body.startswith("- "):
            break
        if not yaml_line(cur):
            break
        j += 1
    return "yaml", j


_YAML_STOP = re.compile("|".join(f"(?:{p.pattern})" for p in (KLOG, KERNEL_PREFIX, PROMPT)))
"""A klog, kernel or shell-prompt line (any of the three matches): it ends a YAML block."""

_NEVER_STOPS = frozenset("acdefghijlmnopqrtuvwxy-")
"""First non-blank characters with which no :data:`_YAML_STOP` alternative can match unless the line has an
``@`` (``user@host`` prompts): KLOG starts with I/W/E/F, kernel prefixes with ``[``, a digit, a capital or
``kern``, prompts with ``[``, ``$#%>``, ``PS``, ``sh-``/``bash-``/``zsh-``/``ksh-`` or ``word@``. Most YAML
lines (``key:``, ``- item``) start so and skip the three regexes."""


def _kernel(lines: list[str], i: int) -> Claim | None:
    if not KERNEL_PREFIX.match(lines[i]):
        return None
    n, j = len(lines), i + 1
    while j < n and KERNEL_PREFIX.match(lines[j]):
        j += 1
    return "kernel-log", j


def _klog(lines: list[str], i: int) -> Claim | None:
    if not KLOG.match(lines[i]):
        return None
    n, j = len(lines), i + 1
    while j < n and KLOG.match(lines[j]):
        j += 1
    return "klog", j


def _events(lines: list[str], i: int) -> Claim | None:
    line = lines[i]
    n = len(lines)
    starts = re.match(r"^\s*Events:", line)
    if starts and re.match(r"^\s*Events:\s*<none>\s*$", line):
        return "events", i + 1
    if starts or EVENT_HEADER.match(line) or GET_EVENTS_HEADER.match(line) or EVENT_ROW.match(line):
        j = i + 1
        while j < n:
            cur = lines[j]
            if _blank(cur):
                break
            if EVENT_HEADER.match(cur) or EVENT_ROW.match(cur) or re.match(r"^\s*-{3,}", cur):
                j += 1
                continue
            if cur[:1] in (" ", "\t") and not KERNEL_PREFIX.match(cur) and j > i:
                j += 1  # wrapped message continuation
                continue
            break
        if starts and j == i + 1 and not line.strip().endswith(":") and "Type" not in line:
            return None
        return "events", j
    return None


_NODE_KEYS = ("Roles:", "Taints:", "Capacity:", "Allocatable:", "Allocated resources:", "Unschedulable:", "Lease:",
              "System Info:", "PodCIDR", "ProviderID:", "Non-terminated Pods:", "Addresses:")
_POD_KEYS = ("Containers:", "Init Containers:", "Controlled By:", "QoS Class:", "Node:", "Start Time:", "IP:",
             "Service Account:", "Priority:")


_CONTAINER_HEAD = re.compile(r"^\s+[a-z0-9][\w.-]*:\s*$")
_CONTAINER_KEYS = re.compile(r"^\s+(?:Container ID|Image|Image ID|State|Last State|Restart Count|Ready):", re.MULTILINE)


def _container_block(lines: list[str], i: int) -> Claim | None:
    """A ``kubectl describe pod`` container block pasted without the ``Containers:`` line above it: an indented
    ``<name>:`` followed by ``Container ID:``/``Image:``/``State:`` fields (read as a describe-pod piece)."""
    if not _CONTAINER_HEAD.match(lines[i]):
        return None
    window = "\n".join(lines[i + 1 : i + 6])
    if len(_CONTAINER_KEYS.findall(window)) < 2:
        return None
    base = len(lines[i]) - len(lines[i].lstrip())
    n, j = len(lines), i + 1
    while j < n and lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) > base:
        j += 1
    return "describe-pod", j


_STATE_HEAD = re.compile(r"^(\s*)(?:State|Last State):\s+(?:Waiting|Running|Terminated)\s*$")
_STATE_KEYS = re.compile(r"^\s+(?:Reason|Exit Code|Signal|Started|Finished|Restart Count|Ready|Last State|State):",
                         re.MULTILINE)


def _state_fields(lines: list[str], i: int) -> Claim | None:
    """A container's ``State:``/``Last State:`` fields of ``kubectl describe pod`` pasted alone (no ``Containers:``
    line, no container name above them): read as a describe-pod piece while the lines stay indented at least as
    far as the first and none is blank."""
    head = _STATE_HEAD.match(lines[i])
    if head is None or len(_STATE_KEYS.findall("\n".join(lines[i + 1 : i + 6]))) < 2:
        return None
    base = len(head.group(1))
    n, j = len(lines), i + 1
    while j < n and lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) >= base:
        j += 1
    return "describe-pod", j


def _describe(lines: list[str], i: int) -> Claim | None:
    line = lines[i]
    if not DESCRIBE_TOP.match(line.lstrip()) or line[:1] == "-":
        return None
    head = line.lstrip()
    window = "\n".join(lines[i : i + 40])
    kind = None
    node_head = head.startswith(("Name:", "Capacity:", "Allocatable:", "Allocated resources:", "Taints:", "Roles:"))
    if node_head and any(k in window for k in _NODE_KEYS) and (
        "Roles:" in window or "Capacity:" in window or "Allocatable:" in window or "Taints:" in window
    ):
        kind = "describe-node"
    pod_head = head.startswith(("Name:", "Containers:", "Init Containers:", "Namespace:"))
    if kind is None and pod_head and any(k in window for k in _POD_KEYS) and "Roles:" not in window:
        kind = "describe-pod"
    if kind is None and head.startswith(("Spec:", "Status:", "Name:", "Namespace:")) and re.search(
        r"^\s*(?:Capability|Inqueue|Weight|Reclaimable|Min Member|Min Available|Guarantee|Deserved|State):",
        window,
        re.MULTILINE,
    ):
        kind = "describe-volcano"
    if kind is None and head.startswith("Message:") and re.search(r"^\s*(?:Reason|Type|Phase):", window, re.MULTILINE):
        kind = "describe-condition"
    if kind is None:
        return None
    n, j = len(lines), i + 1
    while j < n:
        cur = lines[j]
        if _blank(cur):
            k = _next_nonblank(lines, j)
            if k < n and k - j <= 1 and (lines[k][:1] in (" ", "\t") or DESCRIBE_TOP.match(lines[k])) and not (
                PROMPT.match(lines[k]) or TABLE_HEADER.match(lines[k])
            ):
                j = k
                continue
            break
        if PROMPT.match(cur) or KLOG.match(cur) or TABLE_HEADER.match(cur) or KERNEL_PREFIX.match(cur):
            break
        if cur[:1] in (" ", "\t") or DESCRIBE_TOP.match(cur) or cur.strip().startswith(("....", "…")):
            j += 1
            continue
        break
    return kind, j


def _table(lines: list[str], i: int) -> Claim | None:
    if not TABLE_HEADER.match(lines[i]):
        return None
    n, j = len(lines), i + 1
    while j < n and not _blank(lines[j]) and not lines[j].startswith(" ") and not PROMPT.match(lines[j]) and not (
        lines[j].startswith("==")
    ):
        if TABLE_HEADER.match(lines[j]):
            j += 1
            continue
        if len(lines[j].split()) < 3:
            break
        j += 1
    return "kubectl-table", j


def _labels(lines: list[str], i: int) -> Claim | None:
    line = lines[i]
    if JSON_FRAGMENT.match(line):
        n, j = len(lines), i + 1
        while j < n and JSON_FRAGMENT.match(lines[j]):
            j += 1
        return "labels", j
    if LABEL_LINE.match(line) and "=" in line and not line.lstrip().startswith(("-", "#")):
        n, j = len(lines), i + 1
        while j < n and LABEL_LINE.match(lines[j]) and "=" in lines[j]:
            j += 1
        return "labels", j
    return None


def _resources(lines: list[str], i: int) -> Claim | None:
    if not RESOURCE_LINE.match(lines[i]) or "/" not in lines[i] and ":" not in lines[i]:
        return None
    n, j = len(lines), i + 1
    while j < n and RESOURCE_LINE.match(lines[j]):
        j += 1
    if j - i < 2:
        return None
    return "resources", j


def _section(lines: list[str], i: int) -> Claim | None:
    return ("section", i + 1) if SECTION.match(lines[i]) else None


def _csv_header(lines: list[str], i: int) -> Claim | None:
    return claim_nvidia.csv_query(lines, i, None)


CLAIMERS: tuple[Callable[[list[str], int], Claim | None], ...] = (
    _xml,
    claim_nvidia.nvsmi_list,
    claim_nvidia.mig,
    claim_nvidia.topo,
    claim_nvidia.dcgm_tools,
    _csv_header,
    claim_nvidia.hwlog,
    claim_nvidia.kueue_describe,
    claim_nvidia.kueue_table,
    _nvsmi_query,
    _nvsmi_table,
    _npu_vnpu,
    _npu_table,
    _npu_topo,
    _npu_kv,
    _dcgm,
    _kernel,
    _klog,
    _events,
    _container_block,
    _state_fields,
    _describe,
    _table,
    _yaml,
    _json,
    _labels,
    _resources,
    _section,
)
"""Claimers in priority order: the first that recognises a line starts a block there."""

_FIRST_CHARS = frozenset("<=+|[{\"'$#>%-")


def split(lines: list[str]) -> list[Piece]:
    """Cut cleaned ``lines`` into pieces; every non-blank line belongs to exactly one piece.

    Returns pieces in input order; ``text`` pieces hold lines no claimer recognised (cut at blank
    lines). Never raises.
    """
    pieces: list[Piece] = []
    n = len(lines)
    i = 0
    command: str | None = None
    text_start: int | None = None

    def close_text(end: int) -> None:
        nonlocal text_start, command
        if text_start is not None:
            pieces.append(Piece("text", text_start, end, command))
            command = None
            text_start = None

    while i < n:
        line = lines[i]
        if _blank(line):
            close_text(i)
            i += 1
            continue
        prompt = PROMPT.match(line)
        tool = None if prompt else TOOL_COMMAND.match(line)
        if (prompt and not line.lstrip().startswith(("# ", "#\t")) or tool) and not (
            line.lstrip().startswith((">>>",)) or KERNEL_PREFIX.match(line)
        ):
            close_text(i)
            matched = prompt or tool
            assert matched is not None
            command = matched.group("cmd").strip()
            if re.match(r"^\s*(?:\S*[#$>]\s*)?npu-smi info\s+-t\s+\S+", line):
                claim = _npu_topo(lines, i) or _npu_kv(lines, i)
                if claim is not None:
                    pieces.append(Piece(claim[0], i, claim[1], command))
                    command = None
                    i = claim[1]
                    continue
            pieces.append(Piece("prompt", i, i + 1, command))
            i += 1
            continue
        claim = claim_nvidia.csv_query(lines, i, command) if command else None
        for claimer in () if claim else CLAIMERS:
            claim = claimer(lines, i)
            if claim is not None:
                break
        if claim is None or claim[1] <= i:
            if text_start is None:
                text_start = i
            i += 1
            continue
        close_text(i)
        pieces.append(Piece(claim[0], i, claim[1], command))
        command = None
        i = claim[1]
    close_text(n)
    return pieces
