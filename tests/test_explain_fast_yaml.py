"""``explain.fast_yaml.load_all`` returns what ``yaml.load_all`` with SafeLoader returns, or raises the same."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_hetero.explain import fast_yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

CASES = [
    "apiVersion: v1\nkind: Node\nstatus:\n  capacity:\n    nvidia.com/gpu: 8\n    cpu: '96'\n",
    "items:\n- kind: Event\n  count: 3\n  firstTimestamp: 2024-05-01T10:00:00Z\n  message: 'a\n    b'\n",
    "a: &x {b: 1}\nc: *x\n",  # alias: the same object twice
    "base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n",  # merge key
    "=: v\nk: 1\n",  # value key
    "? [a, b]\n: complex\n",  # unhashable key
    "t: !!set {a, b}\no: !!omap [a: 1]\n",
    "n: ~\nb: yes\nf: 1.5e3\ni: 0x1F\ns: '12'\nd: 2001-12-14\nbin: !!binary aGk=\n",
    "1: one\ntrue: t\nnull: n\n",  # non-string scalar keys
    "--- \n--- a\n---\n- 1\n...\n",  # empty documents and a scalar document
    "k: !custom x\n",  # unknown tag: ConstructorError
    "a: [1, 2\n",  # malformed: ParserError
    "x: |\n  line1\n  line2\ny: >-\n  folded\n  text\n",
    "- - - deep\n",
    "str_tag: !!str 123\nmap_tag: !!map {a: 1}\n",
]


def _reference(text: str) -> tuple[str, object]:
    try:
        return "ok", list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        return "error", type(exc).__name__


def _fast(text: str) -> tuple[str, object]:
    try:
        return "ok", list(fast_yaml.load_all(text))
    except yaml.YAMLError as exc:
        return "error", type(exc).__name__


@pytest.mark.parametrize("text", CASES)
def test_same_as_safe_loader(text: str) -> None:
    assert _fast(text) == _reference(text)


def test_alias_keeps_one_object() -> None:
    doc = next(fast_yaml.load_all("a: &x {b: 1}\nc: *x\n"))
    assert isinstance(doc, dict) and doc["a"] is doc["c"]


_SCALARS = st.sampled_from(["x", "1", "0o7", "1.0", ".inf", "yes", "No", "~", "null", "'q'", '"d\\n"',
                            "2024-01-02", "2024-01-02T03:04:05Z", "a b", "-1", "0x10", "1_000", "*a", "&a v",
                            "!!str 5", "[1, x]", "{k: v}", "<<", "=", ""])
_KEYS = st.sampled_from(["a", "b", "1", "true", "<<", "=", "kind", "items", "? x"])


@st.composite
def _docs(draw: st.DrawFn, depth: int = 0) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        key = draw(_KEYS)
        if depth < 2 and draw(st.booleans()):
            child = draw(_docs(depth + 1))
            if draw(st.booleans()):
                child = "- " + child.replace("\n", "\n  ")
            lines.append(f"{key}:\n" + "\n".join("  " + ln for ln in child.split("\n")))
        else:
            lines.append(f"{key}: {draw(_SCALARS)}")
    return "\n".join(lines)


@settings(max_examples=300, deadline=None)
@given(st.lists(_docs(), min_size=1, max_size=3))
def test_same_as_safe_loader_generated(docs: list[str]) -> None:
    text = "\n---\n".join(docs) + "\n"
    assert _fast(text) == _reference(text)
