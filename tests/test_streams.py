"""CappedStream: head and tail kept within the cap, total size and sha256 of everything."""

from __future__ import annotations

import hashlib

import pytest

from pytest_hetero.backends.streams import CappedStream


@pytest.mark.parametrize("chunk", [1, 3, 7, 1000])
@pytest.mark.parametrize(("data", "kept", "capped"), [
    (b"", "", False),
    (b"0123456789", "0123456789", False),
    (b"0123 567890", "0123 \n… [6 bytes not kept] …\n", True),
    (b"ab cd efgh ij kl", "ab \n… [10 bytes not kept] …\n kl", True),
    (b"01 34567890abcdefghijKLM OP", "01 \n… [21 bytes not kept] …\n OP", True),
])
def test_head_and_tail_whatever_the_chunking(chunk: int, data: bytes, kept: str, capped: bool) -> None:
    stream = CappedStream(10)
    for i in range(0, len(data), chunk):
        stream.add(data[i:i + chunk])
    stream.add(None)
    assert (stream.text(), stream.capped) == (kept, capped)
    assert stream.facts("stdout") == {"stdout_bytes": len(data), "stdout_sha256": hashlib.sha256(data).hexdigest(),
                                      "stdout_capped": capped}
    assert stream.data() == (None if capped else data)  # the bytes whole, or none when some were dropped


def test_memory_stays_near_the_cap_on_a_long_stream() -> None:
    stream = CappedStream(1024)
    for _ in range(10_000):
        stream.add(b"x" * 100)
    assert len(stream.head) == 512 and stream.tail_len <= 512 + 100
    # one 1 MB word: its edges are partial words (≤ EDGE_BYTES), dropped with the middle
    assert stream.text() == "\n… [1000000 bytes not kept] …\n"


def test_a_token_cut_by_the_cap_leaves_no_prefix() -> None:
    """Truncation must not leave part of a secret that redaction can no longer recognise."""
    stream = CappedStream(40)
    stream.add(b"hello world ghp_0123456789abcdef0123456789abcdef0123 and some tail words here ok")
    assert stream.text() == "hello world \n… [49 bytes not kept] …\n tail words here ok"
    assert "ghp_" not in stream.text() and "0123" not in stream.text()


def test_invalid_utf8_is_replaced_not_raised() -> None:
    stream = CappedStream(100)
    stream.add(b"ok \xff\xfe end")
    assert stream.text() == "ok \ufffd\ufffd end"
