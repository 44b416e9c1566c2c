"""``hetero explain`` reads the bench's generated 50,000-line mixed log exactly as it did before it was made fast.

``tests/data/explain/bench-snapshot.json`` was written by ``bench/explain_snapshot.py --write`` from the
implementation at 2e041d6, before the performance work; it pins digests of the whole report
(every block, every finding with its lines, quantities and meaning) and of each run of 50 findings.
A failure names the first differing chunk. If the fixtures in ``../shared/fixtures/real/`` changed (the
input digest differs), or a reader's output changed on purpose, rewrite it with
``python bench/explain_snapshot.py --write`` and say why in the commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import bench_explain, explain_snapshot

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not bench_explain.REAL.is_dir(),
                                reason=f"real fixtures not present at {bench_explain.REAL}")


def test_bench_log_reads_exactly_as_the_snapshot() -> None:
    pinned = json.loads(explain_snapshot.SNAPSHOT.read_text(encoding="utf-8"))
    now: dict[str, Any] = explain_snapshot.snapshot(pinned["lines"])
    assert now["input_sha256"] == pinned["input_sha256"], (
        "the generated log changed (fixtures added or edited): check, then rewrite the snapshot")
    assert (now["blocks"], now["findings"]) == (pinned["blocks"], pinned["findings"])
    assert now["blocks_sha256"] == pinned["blocks_sha256"]
    first = next((k for k, (a, b) in enumerate(zip(now["chunks"], pinned["chunks"], strict=False)) if a != b), None)
    assert first is None, f"findings {first * pinned['chunk']}..{(first + 1) * pinned['chunk'] - 1} differ"
    assert now["report_sha256"] == pinned["report_sha256"]
