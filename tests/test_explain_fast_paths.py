"""The splitter's fast paths decide exactly as the plain code they replaced (kept here as references)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hetero.explain import blocks


def _json_end_reference(lines: list[str], i: int) -> int:
    depth, in_string, escape = 0, False, False
    n = len(lines)
    for j in range(i, n):
        for ch in lines[j]:
            if in_string:
                if escape:
                    escape = False
                elif ch == "\\":
                    escape = True
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
        if depth <= 0 and j > i:
            return j + 1
    return n


_JSONISH = st.text(alphabet='{}[]"\\ a:,\n', max_size=80)


@settings(max_examples=600, deadline=None)
@given(_JSONISH, st.integers(0, 3))
def test_json_end_same_as_char_loop(text: str, start: int) -> None:
    lines = text.split("\n")
    i = min(start, len(lines) - 1)
    assert blocks._json_end(lines, i) == _json_end_reference(lines, i)


def _stops_reference(line: str) -> bool:
    return bool(blocks.KLOG.match(line) or blocks.KERNEL_PREFIX.match(line) or blocks.PROMPT.match(line))


_LINE_START = st.sampled_from(["", " ", "  ", "\t", "\u2003", "- ", "[", "$ ", "# ", "> ", "% "])
_WORDS = st.sampled_from(["kernel:", "kern  :", "bash-5.1#", "sh-4.2$", "zsh-1#", "ksh-1$", "PS C:\\>", "user@host:~#",
                          "a@b$", "I0624 22:58:05.486593       1 health.go:159]", "[ 12.5]", "NVRM:", "name:",
                          "apiVersion: v1", "Jan  2 03:04:05 host kernel:", "2024-01-02T03:04:05.1+00:00 ",
                          "kubectl get pods", "- item", "x", "é@ü#", "ls"])


@settings(max_examples=600, deadline=None)
@given(_LINE_START, st.lists(_WORDS, min_size=1, max_size=4), st.sampled_from(["", " ", " cmd", "@", "# x"]))
def test_yaml_stop_guard_never_hides_a_stop(start: str, words: list[str], tail: str) -> None:
    line = start + " ".join(words) + tail
    body = line.lstrip()
    guarded = not (body[:1] in blocks._NEVER_STOPS and "@" not in line) and bool(blocks._YAML_STOP.match(line))
    assert guarded == _stops_reference(line)


@settings(max_examples=1000, deadline=None)
@given(st.text(max_size=40))
def test_yaml_stop_guard_any_text(line: str) -> None:
    body = line.lstrip()
    guarded = not (body[:1] in blocks._NEVER_STOPS and "@" not in line) and bool(blocks._YAML_STOP.match(line))
    assert guarded == _stops_reference(line)
