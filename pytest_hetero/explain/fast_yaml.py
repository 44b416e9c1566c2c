"""``yaml.safe_load_all`` with the same result, built faster for the plain mappings, lists and strings of
``kubectl -o yaml`` output.

PyYAML's SafeLoader spends most of its time in Python: resolving the tag of every plain scalar (a regex
per candidate type, tried for each key and value) and constructing objects through generic, generator
based constructors. :func:`load_all` keeps libyaml's C parser and composer (``CSafeLoader`` when
PyYAML was built with libyaml, else the pure-Python ``SafeLoader``) and changes two things only:

* tags of plain scalars are resolved once per distinct text (:class:`_Loader` memoises the resolver,
  which for SafeLoader is a pure function of the text: it has no path resolvers);
* a document made only of ``str``/``map``/``seq`` nodes, other standard scalar tags (int, float, bool,
  null, timestamp, binary), hashable keys, no merge keys (``<<``) or value keys (``=``) and no node
  reached twice (aliases) is built by a direct walk; every other document, and any document the walk
  cannot finish (``RecursionError`` on deep nesting), goes through SafeLoader's own constructor, so
  errors (``yaml.YAMLError`` subclasses) and results are SafeLoader's in every case.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_BASE: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_LEAF_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "timestamp", "binary")
)
"""Scalar tags SafeConstructor builds without looking at other nodes: handed to its own constructor."""

_RESOLVED: dict[str, str] = {}
"""Plain-scalar text -> resolved tag, shared by all loads; cleared when it holds :data:`_RESOLVED_MAX`."""
_RESOLVED_MAX = 65536


class _Loader(_BASE):  # type: ignore[misc,valid-type]
    """SafeLoader (libyaml's when present) with plain-scalar tag resolution memoised."""

    def resolve(self, kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
        """SafeLoader's ``resolve``; plain scalars (``implicit[0]``) are looked up in :data:`_RESOLVED`."""
        if kind is ScalarNode and implicit[0] and not self.yaml_path_resolvers:
            tag = _RESOLVED.get(value)
            if tag is None:
                tag = str(super().resolve(kind, value, implicit))
                if len(_RESOLVED) >= _RESOLVED_MAX:
                    _RESOLVED.clear()
                _RESOLVED[value] = tag
            return tag
        return str(super().resolve(kind, value, implicit))


class _Fallback(Exception):
    """The document needs SafeConstructor's own machinery."""


def _build(loader: _Loader, root: Node) -> object:
    """Python value of the document at ``root`` for the simple node kinds; raises :class:`_Fallback`
    (or RecursionError) otherwise, before any side effect on ``loader``'s constructor state matters."""
    seen: set[int] = set()

    def build(node: Node) -> object:
        key = id(node)
        if key in seen:
            raise _Fallback
        seen.add(key)
        tag = node.tag
        if tag == _STR and isinstance(node, ScalarNode):
            return node.value
        if tag == _MAP and isinstance(node, MappingNode):
            out: dict[object, object] = {}
            for key_node, value_node in node.value:
                if key_node.tag == _MAP or key_node.tag == _SEQ or not isinstance(key_node, ScalarNode):
                    raise _Fallback
                if key_node.tag not in (_STR, *_LEAF_TAGS):
                    raise _Fallback  # merge (<<), value (=) or an unknown tag
                name = build(key_node)
                try:
                    hash(name)
                except TypeError:
                    raise _Fallback from None
                out[name] = build(value_node)
            return out
        if tag == _SEQ and isinstance(node, SequenceNode):
            return [build(item) for item in node.value]
        if tag in _LEAF_TAGS and isinstance(node, ScalarNode):
            return loader.construct_object(node, deep=True)
        raise _Fallback

    return build(root)


def load_all(text: str) -> Iterator[object]:
    """Yield the documents of ``text`` exactly as ``yaml.load_all(text, Loader=CSafeLoader)`` (or
    ``SafeLoader`` without libyaml) would, ``None`` for empty documents included.

    Raises what that call raises: ``yaml.YAMLError`` subclasses for malformed text or unknown tags,
    ``RecursionError`` when SafeLoader's own constructor recurses too deep.
    """
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            try:
                data = _build(loader, node)
            except (_Fallback, RecursionError):
                data = None
                built = False
            else:
                built = True
            loader.constructed_objects = {}
            if not built:
                data = loader.construct_document(node)
            yield data
    finally:
        loader.dispose()
