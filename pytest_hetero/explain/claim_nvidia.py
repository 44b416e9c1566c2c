"""Block claimers for the NVIDIA tool outputs that are not ``nvidia-smi``'s table, ``-q`` or XML (and for the
Ascend/MindX ``hwlog`` and Kueue ``describe workload`` / ``get workloads`` layouts, which no older claimer knew).

Each claimer takes ``(lines, i)`` and returns ``(kind, end)`` when a block of its kind starts at line ``i``
(see :mod:`pytest_hetero.explain.blocks`). Formats (as printed by the tools, R450 … R580 drivers, DCGM
2.x … 4.x):

* ``nvidia-smi -L``: ``GPU <n>: <name> (UUID: GPU-…)`` lines, each MIG device under its GPU as
  ``  MIG <profile> Device <n>: (UUID: MIG-…)`` (R470+) or ``MIG-GPU-<uuid>/<gi>/<ci>`` (R450/R460);
* ``nvidia-smi nvlink -s`` / ``--status`` (R4xx-R5xx): the ``-L`` GPU line, then ``Link <n>: <speed> GB/s`` or
  ``Link <n>: <inactive>`` per link, indented (or ``NVML: Unable to retrieve NVLink information as all links are
  inActive`` for a GPU with none up);
* ``nvidia-smi mig -lgi|-lci|-lgip|-lcip``: box tables titled ``GPU instances:``, ``Compute instances:``,
  ``GPU instance profiles:``, ``Compute instance profiles:``; ``-lgipp``/``-lcipp``: one
  ``GPU  0 Profile ID 14 Placements: {0,1,2,3}:1`` line per profile (``Placement :`` when there is one);
* ``nvidia-smi topo -m``: a matrix whose header row starts with ``GPU0`` and ends with ``CPU Affinity`` (and
  ``NUMA Affinity``, ``GPU NUMA ID`` on newer drivers), then ``Legend:`` and ``NIC Legend:``;
* ``dcgmi nvlink -s``: ``NvLink Link Status`` box, ``GPUs:`` / ``gpuId N:`` / state letters,
  ``NvSwitches:``, ``Key: Up=U, Down=D, …``;
* ``dcgmi health -c`` (box ``Health Monitor Report``; ``-j`` JSON goes through the JSON reader);
* ``dcgmi dmon``: ``#Entity  <FIELD> …`` header, ``ID`` line, ``GPU <n>  <values>`` rows;
* ``nvidia-smi --query-gpu=… --format=csv``: recognised from its command line (``noheader``) or its header.
"""

from __future__ import annotations

import re

Claim = tuple[str, int]

GPU_LINE = re.compile(r"^\s*GPU (?P<index>\d+): (?P<name>.+?) \((?:UUID|S/N): (?P<uuid>[^)]+)\)\s*$")
MIG_LINE = re.compile(r"^\s+MIG (?P<profile>[\w.+]+)\s+Device\s+(?P<device>\d+): \(UUID: (?P<uuid>MIG-[^)]+)\)\s*$")
MIG_TITLE = re.compile(r"^\s*\|\s*(?P<title>GPU instances|Compute instances|GPU instance profiles|"
                       r"Compute instance profiles):\s*\|?\s*$")
MIG_EMPTY = re.compile(r"^\s*(?:No (?:GPU|compute) instances? (?:profiles? )?found|No MIG-enabled devices found"
                       r"|Unable to (?:create|destroy|list)[^:]*)\b")
PLACEMENTS = re.compile(r"^\s*GPU\s+(?P<gpu>\d+)\s+(?:GPU instance ID\s+(?P<gi>\d+)\s+)?Profile ID\s+(?P<id>\d+)\s+"
                        r"Placements?\s*:\s*\{(?P<starts>[\d,\s]*)\}:(?P<size>\d+)\s*$")
TOPO_HEADER = re.compile(r"^\s*GPU0(?:\s+(?:GPU\d+|NIC\d+|mlx\d\S*|CPU\s+Affinity|NUMA\s+Affinity|GPU\s+NUMA\s+ID|"
                         r"Affinity))*\s+CPU\s+Affinity\b")
NVLINK_TITLE = re.compile(r"^\s*\|\s*NvLink Link Status\s*\|\s*$")
HEALTH_TITLE = re.compile(r"^\s*\|\s*Health Monitor Report\s*\|?\s*$")
DMON_HEADER = re.compile(r"^\s*#\s*Entity\s+\S+")
CSV_COMMAND = re.compile(r"nvidia-smi\s+.*--query-(?:gpu|compute-apps|remapped-rows|retired-pages)=(?P<fields>\S+)"
                         r".*--format=csv(?P<opts>\S*)")
CSV_HEADER = re.compile(r"^\s*(?:index|name|uuid|pci\.bus_id|gpu_recovery_action|memory\.\w+|temperature\.gpu|"
                        r"utilization\.\w+|driver_version|serial|gpu_bus_id|pid|gpu_uuid)(?:\s*\[[^\]]*\])?"
                        r"(?:\s*,\s*[\w.]+(?:\s*\[[^\]]*\])?)+\s*$")


def _blank(line: str) -> bool:
    return not line or line.isspace()


def _boxed(line: str) -> bool:
    return line.lstrip().startswith(("|", "+"))


NVLINK_LINK = re.compile(r"^\s+Link (?P<link>\d+): (?:(?P<speed>\d+(?:\.\d+)?) GB/s|(?P<inactive><inactive>))\s*$")
"""One link of ``nvidia-smi nvlink -s``: its speed, or ``<inactive>``."""
NVLINK_NONE = re.compile(r"^\s*NVML: Unable to retrieve NVLink information as all links are inActive\s*$",
                         re.IGNORECASE)


def nvsmi_list(lines: list[str], i: int) -> Claim | None:
    """``nvidia-smi -L`` (GPU lines, MIG lines under them), or ``nvidia-smi nvlink -s`` when link lines follow."""
    if not GPU_LINE.match(lines[i]):
        return None
    n, j = len(lines), i + 1
    if j < n and (NVLINK_LINK.match(lines[j]) or NVLINK_NONE.match(lines[j])):
        while j < n and (GPU_LINE.match(lines[j]) or NVLINK_LINK.match(lines[j]) or NVLINK_NONE.match(lines[j])):
            j += 1
        return "nvidia-smi-nvlink", j
    while j < n and (GPU_LINE.match(lines[j]) or MIG_LINE.match(lines[j])):
        j += 1
    return "nvidia-smi-list", j


def mig(lines: list[str], i: int) -> Claim | None:
    """``nvidia-smi mig -lgi/-lci/-lgip/-lcip`` box tables, ``-lgipp/-lcipp`` lines, and the tool's
    ``No … found`` answers."""
    n = len(lines)
    line = lines[i]
    if line.lstrip().startswith("+") and i + 1 < n and MIG_TITLE.match(lines[i + 1]) or MIG_TITLE.match(line):
        j = i + 1
        while j < n and _boxed(lines[j]):
            j += 1
        return "nvidia-smi-mig", j
    if PLACEMENTS.match(line):
        j = i + 1
        while j < n and PLACEMENTS.match(lines[j]):
            j += 1
        return "nvidia-smi-mig", j
    if MIG_EMPTY.match(line):
        return "nvidia-smi-mig", i + 1
    return None


def topo(lines: list[str], i: int) -> Claim | None:
    """``nvidia-smi topo -m``: the matrix, its ``Legend:`` and ``NIC Legend:`` (blank lines inside kept)."""
    if not TOPO_HEADER.match(lines[i]):
        return None
    n, j = len(lines), i + 1
    while j < n:
        s = lines[j].strip()
        if re.match(r"^(?:GPU\d+|NIC\d+|mlx\d\S*|Legend:|NIC Legend:|X\s+=|[A-Z]+#?\s+=|NIC\d+:)", s):
            j += 1
            continue
        if not s:
            k = j
            while k < n and _blank(lines[k]):
                k += 1
            if k < n and re.match(r"^\s*(?:Legend:|NIC Legend:|X\s+=|[A-Z]+#?\s+=|NIC\d+:)", lines[k]):
                j = k
                continue
        break
    return "nvidia-smi-topo", j


def dcgm_tools(lines: list[str], i: int) -> Claim | None:
    """``dcgmi nvlink -s``, ``dcgmi health -c`` and ``dcgmi dmon`` blocks."""
    n = len(lines)
    line = lines[i]
    s = line.lstrip()
    if s.startswith("+") and i + 1 < n and NVLINK_TITLE.match(lines[i + 1]) or NVLINK_TITLE.match(line):
        j = i + 1
        while j < n:
            cur = lines[j].strip()
            if (_boxed(lines[j]) or re.match(r"^(?:GPUs:|NvSwitches:|gpuId \d+:|physicalId \d+:|"
                                             r"(?:[UDX_]\s*)+$|No NvSwitches found\.?|Key:)", cur)):
                j += 1
                continue
            if not cur and j + 1 < n and lines[j + 1].strip().startswith("Key:"):
                j += 1
                continue
            break
        return "dcgmi-nvlink", j
    if s.startswith("+") and i + 1 < n and HEALTH_TITLE.match(lines[i + 1]) or HEALTH_TITLE.match(line):
        j = i + 1
        while j < n and _boxed(lines[j]):
            j += 1
        return "dcgmi-health", j
    if re.match(r"^\s*Health monitor systems set successfully\.?\s*$", line):
        return "dcgmi-health", i + 1
    if DMON_HEADER.match(line):
        j = i + 1
        while j < n and (re.match(r"^\s*(?:ID|Id)\b", lines[j]) or re.match(r"^\s*(?:GPU|GPU-I|GPU-CI|Switch|"
                                                                               r"Link|CPU|Core)\s+\d+\s", lines[j])):
            j += 1
        return "dcgmi-dmon", j
    return None


def csv_query(lines: list[str], i: int, command: str | None) -> Claim | None:
    """``nvidia-smi --query-…=… --format=csv[,noheader][,nounits]`` output: recognised from the command
    printed before it, or (no command) from a header of nvidia-smi field names."""
    header = CSV_HEADER.match(lines[i])
    from_command = command is not None and CSV_COMMAND.search(command) is not None
    if not header and not from_command:
        return None
    n, j = len(lines), i + 1
    while j < n and not _blank(lines[j]) and "," in lines[j] and not lines[j].lstrip().startswith(("$", "#")):
        j += 1
    return "nvidia-smi-csv", j


HWLOG = re.compile(r"^\s*\[(?P<level>INFO|WARN|ERROR|DEBUG|CRITICAL)\]\s+(?P<date>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d"
                   r"(?:\.\d+)?)\s+(?P<pid>\d+)\s+(?P<src>[\w./-]+:\d+)\s+(?P<msg>.*)$")
"""Huawei MindX DL ``hwlog`` line (Ascend device plugin, NPU exporter, noded, Volcano Ascend plugin):
``[INFO]     2025/07/09 20:05:31.842816 1       main.go:193    message``."""


def hwlog(lines: list[str], i: int) -> Claim | None:
    """A run of ``hwlog`` lines (klog lines in between are left to the klog claimer)."""
    if not HWLOG.match(lines[i]):
        return None
    n, j = len(lines), i + 1
    while j < n and HWLOG.match(lines[j]):
        j += 1
    return "hwlog", j


_KUEUE_TYPES = re.compile(r"^\s*Type:\s+(?:QuotaReserved|Admitted|Evicted|PodsReady|Finished|Preempted|Requeued|"
                          r"DeactivationTarget)\s*$", re.MULTILINE)


def kueue_describe(lines: list[str], i: int) -> Claim | None:
    """``kubectl describe workload``'s ``Admission Checks:`` / ``Conditions:`` sections (up to ``Events:``),
    when a Kueue condition type is in them."""
    if not re.match(r"^\s*(?:Admission Checks|Conditions):\s*$", lines[i]):
        return None
    n, j = len(lines), i + 1
    base = len(lines[i]) - len(lines[i].lstrip())
    while j < n and lines[j].strip() and not re.match(r"^\s*Events:", lines[j]) and (
        len(lines[j]) - len(lines[j].lstrip()) > base or re.match(r"^\s*(?:Admission Checks|Conditions):\s*$",
                                                                 lines[j])):
        j += 1
    window = "\n".join(lines[i:j])
    if "Admission Checks:" not in window and not _KUEUE_TYPES.search(window):
        return None
    return "kueue-describe", j


KUEUE_TABLE = re.compile(r"^\s*(?:NAMESPACE\s+)?NAME\s+QUEUE\s+(?:RESERVED IN|ADMITTED BY)\b")


def kueue_table(lines: list[str], i: int) -> Claim | None:
    """``kubectl get workloads`` (Kueue): ``NAME QUEUE ADMITTED BY AGE`` (v0.3-0.5) or ``NAME QUEUE RESERVED IN
    ADMITTED [FINISHED] AGE`` (v0.6+)."""
    if not KUEUE_TABLE.match(lines[i]):
        return None
    n, j = len(lines), i + 1
    while j < n and lines[j].strip() and not lines[j].startswith((" ", "$", ">", "#")):
        j += 1
    return "kueue-workloads", j
