"""Canonical digest of what ``hetero explain`` reads from the bench's generated 50,000-line mixed log.

Used to prove that a change meant to make ``explain`` faster changes nothing it reports:
``tests/test_explain_snapshot.py`` rebuilds the log with :func:`bench.bench_explain.build_log`, reads it,
and compares against ``tests/data/explain/bench-snapshot.json``, which this script writes.

The snapshot holds no findings, only digests (SHA-256 of canonical JSON: sorted keys, no spaces,
``ensure_ascii``): of the input text, of the whole report (``Report.to_dict()``), and of the findings
in chunks of :data:`CHUNK` so a failing comparison names where the first difference is. Counts of
lines, blocks and findings are kept in clear.

Usage: ``python bench/explain_snapshot.py [--write] [--dump FILE]``: prints the snapshot; ``--write``
stores it (only do that for an intended change of behaviour, or when the fixtures changed);
``--dump FILE`` writes the full canonical report JSON for diffing against an older revision's dump.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_explain import build_log
from pytest_hetero.explain import explain_bytes

SNAPSHOT = Path(__file__).resolve().parents[1] / "tests" / "data" / "explain" / "bench-snapshot.json"
"""Where the pinned snapshot lives."""

LINES = 50_000
"""Size of the generated log, as the bench builds it by default."""

CHUNK = 50
"""Findings per chunk digest."""


def canonical(value: object) -> str:
    """Return ``value`` as canonical JSON (sorted keys, compact, ASCII-only); raises TypeError for
    values JSON cannot hold."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def snapshot(lines: int = LINES) -> dict[str, object]:
    """Build the bench log of ``lines`` lines, read it, and return the snapshot dict: ``lines``,
    ``input_sha256`` (of the UTF-8 text), ``blocks``, ``findings`` (counts), ``report_sha256``,
    ``blocks_sha256``, ``chunk`` and ``chunks`` (SHA-256 per ``CHUNK`` findings, in order)."""
    text = build_log(lines)
    data = text.encode("utf-8")
    report = explain_bytes(data).to_dict()
    findings = report["findings"]
    assert isinstance(findings, list)
    chunks = [_sha(canonical(findings[k : k + CHUNK])) for k in range(0, len(findings), CHUNK)]
    blocks = report["blocks"]
    assert isinstance(blocks, list)
    return {
        "lines": lines,
        "input_sha256": hashlib.sha256(data).hexdigest(),
        "blocks": len(blocks),
        "findings": len(findings),
        "report_sha256": _sha(canonical(report)),
        "blocks_sha256": _sha(canonical(blocks)),
        "chunk": CHUNK,
        "chunks": chunks,
    }


def main(argv: list[str] | None = None) -> int:
    """Print the snapshot as JSON; ``--write`` stores it at :data:`SNAPSHOT`, ``--dump`` writes the full
    report. Returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"store the snapshot at {SNAPSHOT}")
    parser.add_argument("--dump", metavar="FILE", help="write the full canonical report JSON to FILE")
    args = parser.parse_args(argv)
    snap = snapshot()
    out = json.dumps(snap, indent=1) + "\n"
    if args.write:
        SNAPSHOT.write_text(out, encoding="utf-8")
    if args.dump:
        report = explain_bytes(build_log(LINES).encode("utf-8")).to_dict()
        Path(args.dump).write_text(canonical(report) + "\n", encoding="utf-8")
    print(out, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
