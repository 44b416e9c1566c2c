"""CappedStream: head and tail kept within the cap, total size and sha256 of everything."""

from __future__ import annotations

import hashlib

import pytest

from pytest_hetero.backends.streams import CappedStream


@pytest.mark.parametrize("chunk", [1, 3, 7, 1000])
@pytest.mark.parametrize(("data", "kept", "capped"), [
    (b"", "", False),
    (b"0123456789", "0123456789", False),
    (b"01234567890", "01234\n… [1 bytes not kept] …\n67890", True),
    (b"0123456789abcdefghijKLMNOP", "01234\n… [16 bytes not kept] …\nLMNOP", True),
])
def test_head_and_tail_whatever_the_chunking(chunk: int, data: bytes, kept: str, capped: bool) -> None:
    stream = CappedStream(10)
    for i in range(0, len(data), chunk):
        stream.add(data[i:i + chunk])
    stream.add(None)
    assert (stream.text(), stream.capped) == (kept, capped)
    assert stream.facts("stdout") == {"stdout_bytes": len(data), "stdout_sha256": hashlib.sha256(data).hexdigest(),
                                      "stdout_capped": capped}


def test_memory_stays_near_the_cap_on_a_long_stream() -> None:
    stream = CappedStream(1024)
    for _ in range(10_000):
        stream.add(b"x" * 100)
    assert len(stream.head) == 512 and stream.tail_len <= 512 + 100
    assert stream.text() == "x" * 512 + f"\n… [{1_000_000 - 1024} bytes not kept] …\n" + "x" * 512


def test_invalid_utf8_is_replaced_not_raised() -> None:
    stream = CappedStream(100)
    stream.add(b"ok \xff\xfe end")
    assert stream.text() == "ok \ufffd\ufffd end"
