"""Line prefixes never change what ``hetero explain`` reads (the normaliser in front of every reader).

Property: every fixture (``../shared/fixtures/real/`` with ``produced-here/``, the hand-made
``tests/data/explain/`` and the published outputs in ``tests/data/field/``), with a forwarding host
(``pdsh``/``clush``: ``192.0.2.10: ``, ``node-a1: ``), a journalctl/syslog head for a non-kernel tag (``short``,
``short-precise``, ``short-iso``; English and Chinese-locale months), ``kubectl logs --prefix``, a ``kubectl logs
--timestamps`` / ``docker logs -t`` RFC 3339 stamp, or a user-space ``/dev/kmsg`` record head added to every line,
gives the same findings as the bare file (same codes, owners, severities, entities apart from the ``host`` the
prefix names, quantities, counts and source line numbers). Kernel-facility ``/dev/kmsg`` heads are added to every
fixture that is a kernel log only; kernel-tagged syslog and torchrun rank prefixes are checked on their own
samples below.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from pytest_hetero.explain import Report, explain_bytes, explain_text
from pytest_hetero.probes import parse_captured
from pytest_hetero.probes.line_prefix import normalise

REAL = Path(__file__).resolve().parents[2] / "shared/fixtures/real"
HERE = Path(__file__).resolve().parent / "data"
ROOTS = {"real": REAL, "hand": HERE / "explain", "field": HERE / "field"}
FILES = sorted(f"{key}:{p.relative_to(root)}" for key, root in ROOTS.items() if root.is_dir() for p in root.rglob("*")
               if p.is_file() and p.suffix not in (".md", ".json") or (key != "hand" and p.suffix == ".json"))
PREFIXES = {
    "ip": "192.0.2.10: ",
    "host": "node-a1: ",
    "journal": "Dec 02 06:40:19 node-a1 bash[1234]: ",
    "journal-iso": "2026-12-02T06:40:19+0000 node-a1 containerd[88]: ",
    "journal-zh": "12月 02 06:40:19 node-a1 kubelet[176281]: ",
    "kubectl-prefix": "[pod/train-0/main] ",
    "journal-precise": "Dec 02 06:40:19.123456 node-a1 bash[1234]: ",
    "syslog": "Dec  2 06:40:19 node-a1 app[1234]: ",
    "rfc3339": "2026-12-02T06:40:19.123456789Z ",
    "docker-t": "2026-12-02T06:40:19.123456789+08:00 ",
    "kmsg-user": "14,1811,17257355375,-;",
    "ip+journal": "192.0.2.10: Dec  2 06:40:19 node-a1 bash[1234]: ",
}
KERNELISH = ("dmesg", "kern-", "syslog-", "device-plugin-log", "torch-cuda-devices")
"""Fixtures holding kernel lines: an RFC 3339 stamp stays on kernel runs (dmesg --time-format iso), so only
their timestamps may differ under that prefix."""


def _path(name: str) -> Path:
    key, _, rel = name.partition(":")
    return ROOTS[key] / rel


@cache
def _bare(name: str) -> Report:
    return explain_bytes(_path(name).read_bytes())


def _view(report: Report, *, stamps: bool = True) -> list[tuple[object, ...]]:
    return [(f.kind, f.code, f.category, f.owner, f.severity,
              tuple(sorted((k, v) for k, v in f.entity.items() if k not in ("host",))),
              tuple(sorted(f.quantities.items())), f.count, f.age,
              tuple(line.number for line in f.lines), f.timestamps if stamps else ())
            for f in report.findings]


def _prefixed(name: str, prefix: str) -> str:
    text = _path(name).read_bytes().decode("utf-8").replace("\r\n", "\n")
    return "\n".join(prefix + line if line.strip() else line for line in text.split("\n"))


@pytest.mark.skipif(not FILES, reason=f"real fixtures not present at {REAL}")
@pytest.mark.parametrize("style", sorted(PREFIXES))
@pytest.mark.parametrize("name", FILES)
def test_prefixed_fixture_reads_the_same(name: str, style: str) -> None:
    text = _path(name).read_bytes().decode("utf-8")
    if style == "host" and len([ln for ln in text.splitlines() if ln.strip()]) < 2:
        pytest.skip("one line: a bare host name before it is ambiguous (an IP is not)")
    bare = _bare(name)
    got = explain_text(_prefixed(name, PREFIXES[style]))
    stamps = not (style in ("rfc3339", "docker-t") and name.partition(":")[2].startswith(KERNELISH))
    assert _view(got, stamps=stamps) == _view(bare, stamps=stamps)
    assert (got.exit_code(), [b.kind for b in got.blocks]) == (bare.exit_code(), [b.kind for b in bare.blocks])
    if style in ("ip", "host", "journal"):
        hosts = {f.entity.get("host") for f in got.findings if f.lines}
        assert hosts == {"192.0.2.10" if style == "ip" else "node-a1"}


KERNEL_ONLY = [n for n in FILES if n.startswith("real:") and _bare(n).blocks
               and {b.kind for b in _bare(n).blocks} == {"kernel-log"}]


@pytest.mark.parametrize("name", KERNEL_ONLY)
def test_kernel_kmsg_heads_read_the_same(name: str) -> None:
    """A kernel log read from ``/dev/kmsg`` (facility 0 heads): the same findings; a line without a stamp gets
    the record's time as its dmesg stamp, so only timestamps may differ."""
    bare = _bare(name)
    got = explain_text(_prefixed(name, "6,1811,17257355375,-;"))
    assert _view(got, stamps=False) == _view(bare, stamps=False) and got.exit_code() == bare.exit_code()


def test_every_fixture_folder_is_covered() -> None:
    assert {n.partition(":")[0] for n in FILES} >= {"real", "hand"} and any("produced-here/" in n for n in FILES)
    assert len(KERNEL_ONLY) >= 5


def test_issue_sample_forwarded_kernel_log_explain_and_probe_agree() -> None:
    """The issue's case: a kernel log forwarded with ``192.0.2.10: `` before each line (Xid 62, Xid 45, an
    NVSwitch SXid) was 'unrecognised' for explain and read by probe; both read it now, the same way."""
    text = "\n".join("192.0.2.10: " + line for line in (
        "[Mon Mar  3 10:00:01 2025] NVRM: Xid (PCI:0000:18:00): 62, pid='<unknown>', name=<unknown>, "
        "Internal micro-controller halt",
        "[Mon Mar  3 10:00:02 2025] NVRM: Xid (PCI:0000:18:00): 45, pid=4242, name=python, Ch 00000010",
        "[Mon Mar  3 10:00:03 2025] nvidia-nvswitch2: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 44 egress "
        "non-posted PRIV error"))
    r = explain_text(text)
    assert [(f.code, f.entity.get("bus_id"), f.entity.get("host")) for f in r.findings if f.unhealthy] == [
        ("xid_62", "0000:18:00", "192.0.2.10"), ("xid_45", "0000:18:00", "192.0.2.10"),
        ("nvswitch_sxid", "0000:86:00.0", "192.0.2.10")]
    inv = parse_captured("nvidia", text)
    assert not inv.healthy and r.exit_code() == 1


def test_kernel_tagged_journal_keeps_its_wall_clock() -> None:
    line = "Dec  2 06:40:19 node-a1 kernel: [17257.355375] NVRM: Xid (PCI:0000:5d:00): 79, pid=0, name=x, GPU has " \
           "fallen off the bus."
    for text in (line, "10.0.0.7: " + line, "10.0.0.7: " + line + "\n10.0.0.7: " + line):
        r = explain_text(text)
        f = next(f for f in r.findings if f.code == "xid_79")
        assert (f.timestamps, f.entity["bus_id"]) == (("Dec  2 06:40:19",), "0000:5d:00")


def test_raw_kmsg_records_read_as_dmesg() -> None:
    text = "3,1811,17257355375,-;NVRM: Xid (PCI:0000:3b:00): 48, pid=77, name=python, An uncorrectable double bit " \
           "error (DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0."
    lines, prefixes = normalise(text.split("\n"))
    assert lines[0].startswith("[17257.355375] NVRM: Xid") and prefixes[0] is not None
    f = next(f for f in explain_text(text).findings if f.code == "xid_48")
    assert (f.entity["bus_id"], f.timestamps) == ("0000:3b:00", ("17257.355375",))


def test_torchrun_rank_prefix_names_the_rank_not_hccl() -> None:
    r = explain_text("[rank3]: Traceback (most recent call last):\n"
                     "[rank3]:   File \"train.py\", line 9, in <module>\n"
                     "[rank3]: ValueError: expected 4 dims, got 3")
    assert not [f for f in r.findings if f.code.startswith("hccl")]
    (f,) = r.findings
    assert (f.code, f.entity["rank"]) == ("unrecognised", "3")


def test_mpirun_tag_output_prefix_is_taken_off_and_names_the_rank() -> None:
    """Open MPI ``--tag-output``: ``[<job>,<rank>]<stdout>:`` before every line (NVIDIA/nccl#300's paste)."""
    lines, prefixes = normalise(["[1,3]<stdout>:5873af64cf59:10161:10551 [3] NCCL INFO NET/IB : No device found.",
                                 "[1,0]<stderr>:NCCL version 2.5.6+cuda10.2"])
    assert lines == ["5873af64cf59:10161:10551 [3] NCCL INFO NET/IB : No device found.",
                     "NCCL version 2.5.6+cuda10.2"]
    assert [p.rank if p else None for p in prefixes] == ["3", "0"]


def test_ordinary_colon_lines_are_not_hosts() -> None:
    text = "NVRM: GPU at PCI:0000:01:00: GPU-1\nNVRM: Xid (PCI:0000:01:00): 13, pid=1, name=x, Graphics Exception\n" \
           "NVRM: GPU 0000:01:00.0: GPU has fallen off the bus."
    lines, prefixes = normalise(text.split("\n"))
    assert lines == text.split("\n") and prefixes == [None, None, None]
    yaml = "status: ok\nkind: Node\nspec: {}\nstatus: x"
    assert normalise(yaml.split("\n"))[0] == yaml.split("\n")


def test_rfc3339_stamped_kernel_lines_keep_their_stamp_under_a_host() -> None:
    for stamp in ("2025-02-23T16:24:18.123456Z", "2025-02-23T16:24:18,123456+00:00"):
        text = f"10.1.2.3: {stamp} NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after " \
               "6s of waiting for RPC response from GPU4 GSP! Expected function 76 (GSP_RM_CONTROL)"
        f = next(f for f in explain_text(text).findings if f.code == "xid_119")
        assert (f.timestamps, f.entity["bus_id"], f.entity["host"]) == ((stamp,), "0000:9b:00", "10.1.2.3")
