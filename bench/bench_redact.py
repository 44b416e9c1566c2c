"""Benchmark: the redactor on 50 MB of adversarial text, against a plain ``re`` scan of the same text.

The text is built from the inputs that made the backtracking redactor quadratic (issue 29: 24 kB of
crafted stdout kept the gate busy 52 s): runs of ``//`` (detect-secrets' npm pattern), ``sk-``
(its OpenAI pattern), ``-----BEGIN … PRIVATE KEY-----`` without an end, ``password=`` and
``a_a_a_…`` key prefixes, ``:/`` without credentials, ``Bearer``/``xoxb-``/``AKC``/``aws`` near
misses, JSON ``\\u`` escapes and zero-width spaces inside token-like words, plus planted secrets
(one of each of a dozen kinds per megabyte) so redaction really replaces spans.

* **A, the plain way**: one ``re`` scan of the text for one token format
  (``re.finditer(r"ghp_[A-Za-z0-9]{36}", text)``), the least any redactor must do;
* **B, the gate**: :meth:`pytest_hetero.redact.Redactor.text` (every detect-secrets pattern and ours,
  with RE2; the text as written and as a reader sees it).

Prints both times, the ratio B / A, and B's throughput; with ``--backtracking``, also the time of the
same patterns run by Python's backtracking ``re`` against RE2 on 24 kB of each worst input. Exit 1
when a planted secret survives. Usage: ``python bench/bench_redact.py [--mb 50] [--backtracking]``.

Measured on the shared 2-core development machine (50 MB): 47.1 MB redacted in 37.9 s against 0.55 s
for the plain scan, ratio 68.7x (1.2 MB/s; 4.7 MB: 2.3 s, so linear); no planted secret left.
24 kB of ``sk-`` costs Python's ``re`` 39 s with these patterns and RE2 0.02 s; of ``//`` 8.4 s and 0.014 s.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_hetero.redact import Redactor

ADVERSARIAL: dict[str, str] = {
    "npm //": "//",
    "openai sk-": "sk-",
    "private key without end": "-----BEGIN RSA PRIVATE KEY----- ",
    "assignment key prefix": "a_",
    "password=": "password=",
    ":/ without credentials": ":/x",
    "Bearer": "Bearer ",
    "xoxb-": "xoxb-1-",
    "AKC": " AKC" + "a" * 64,
    "aws": "aws key ",
    "json escapes": "\\u0067hp_",
    "zero-width": "ghp_abc\u200b",
}
"""Inputs that push a backtracking engine (or a per-match step) to its worst; each is repeated into a block."""
PLANTED: tuple[tuple[str, str], ...] = (
    ("ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
    ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("https://svc:UriPassw0rd55@models.example.com/m", "UriPassw0rd55"),
    ("password=PlainPassw0rd77", "PlainPassw0rd77"),
    ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    ("AKIAQWERTYUIOPASDFGH", "QWERTYUIOPASDFGH"),
    ("Authorization: Bearer BearerTokenValue123", "BearerTokenValue123"),
    ("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzYSJ9.c2lnbmF0dXJl", "c2lnbmF0dXJl"),
    ("ghp_Z1b2C3d4E5f6\u200bG7h8I9j0K1l2M3n4O5p6Q7r8", "G7h8I9j0K1l2M3n4O5p6Q7r8"),
    ('"\\u0067hp_Y1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r9"', "Y1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r9"),
    ("hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456", "QwErTyUiOpAsDfGhJkLzXcVbNm123456"),
    ("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIPrivKeyBody\n-----END PRIVATE KEY-----", "PrivKeyBody"),
)
"""``(as written, the part that must not survive)``."""


def build(megabytes: int) -> str:
    """About ``megabytes`` MB of text: per MB, one block of each adversarial input on one line, then
    every planted secret."""
    block = 1_000_000 // (len(ADVERSARIAL) + 1)
    chunk = "".join((piece * (block // len(piece) + 1))[:block] + "\n" for piece in ADVERSARIAL.values())
    chunk += " ".join(written for written, _ in PLANTED) + "\n"
    return chunk * megabytes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=int, default=50, help="size of the adversarial text in MB (default 50)")
    parser.add_argument("--backtracking", action="store_true",
                        help="also time the same patterns with Python's backtracking re on 24 kB of each input "
                             "(minutes)")
    args = parser.parse_args()
    text = build(args.mb)
    redactor = Redactor(env={})
    redactor.text("warm up ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8")  # compile the patterns once
    started = time.perf_counter()
    found = sum(1 for _ in re.finditer(r"ghp_[A-Za-z0-9]{36}", text))
    plain = time.perf_counter() - started
    started = time.perf_counter()
    redacted = redactor.text(text)
    gate = time.perf_counter() - started
    leaks = [core for _, core in PLANTED if core in redacted]
    size = len(text.encode("utf-8")) / 1e6
    print(f"text: {size:.1f} MB, {args.mb} x {len(ADVERSARIAL)} adversarial blocks + {len(PLANTED)} planted secrets/MB")
    print(f"A plain re scan (one pattern): {plain:.2f} s ({found} matches)")
    print(f"B redactor (every pattern, RE2, reader's view): {gate:.2f} s, {size / gate:.1f} MB/s")
    print(f"ratio B/A: {gate / plain:.1f}x")
    print(f"planted secrets left: {len(leaks)} {leaks[:3]}")
    if args.backtracking:
        _old_against_new()
    return 1 if leaks else 0


def _old_against_new() -> None:
    """24 kB of each worst input: the backtracking patterns (Python ``re``, as before RE2) against RE2."""
    from pytest_hetero.redact import _compiled

    rules = [r for r in _compiled() if r.rx is not None]
    slow = [(kind, re.compile(src, flags)) for kind, src, flags in
            ((r.kind, r._source, r._flags) for r in rules)]
    for name, piece in ADVERSARIAL.items():
        text = (piece * (24_000 // len(piece) + 1))[:24_000]
        started = time.perf_counter()
        for _, rx in slow:
            for _ in rx.finditer(text):
                pass
        backtracking = time.perf_counter() - started
        started = time.perf_counter()
        Redactor(env={}).text(text, guard=False)
        linear = time.perf_counter() - started
        print(f"24 kB of {name!r}: backtracking re {backtracking:.3f} s, redactor (RE2) {linear:.3f} s")


if __name__ == "__main__":
    sys.exit(main())
