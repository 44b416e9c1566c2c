"""Safe YAML reading with source positions, for files users write (matrices, acceptance rules).

PyYAML's composer gives a node tree with marks; we build plain Python data from it ourselves
so that we can (1) remember the line/column of every key and value by JSON path, (2) refuse
duplicate keys — a key written twice in one mapping; a key a merge key (``<<: *base``, YAML 1.1
merge type) brings in and the mapping then sets itself is an override, as YAML reads it — and
(3) bound alias expansion (a "billion laughs" document is refused instead of exhausting memory).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from pytest_hetero.errors import HeteroError, Location
from pytest_hetero.safeio import read_file

MAX_BYTES = 4 * 1024 * 1024
"""Largest file read, in bytes (4 MiB)."""
MAX_NODES = 100_000
"""Most YAML nodes in a document, and built after alias expansion (a 100,000-key matrix is refused)."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences read (a matrix needs fewer than ten levels)."""
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser and composer when PyYAML was built with it (ten times faster), else PyYAML's own."""

PathKey = tuple[Any, ...]


class Positions:
    """Maps a JSON path (tuple of keys/indices) to the 1-based (line, column) of its value and key."""

    def __init__(self) -> None:
        self.values: dict[PathKey, tuple[int, int]] = {}
        self.keys: dict[PathKey, tuple[int, int]] = {}

    def of(self, path: PathKey, *, key: bool = False) -> tuple[int, int]:
        """Position of ``path`` (its key when ``key``), else of the nearest ancestor; (0, 0) if none."""
        table = self.keys if key else self.values
        probe = tuple(path)
        while probe:
            if probe in table:
                return table[probe]
            if not key and probe in self.keys:
                return self.keys[probe]
            probe = probe[:-1]
        return self.values.get((), (1, 1))


def _pos(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def read_yaml(path: Path, error: type[HeteroError], what: str = "the file") -> tuple[Any, Positions]:
    """Read ``path`` (``what`` it is, for the refusal: ``"the matrix"``) as one YAML document; return (data,
    positions).

    The file is read by the one safe reader (:func:`pytest_hetero.safeio.read_file`: a regular file of at
    most MAX_BYTES, never a FIFO, device or symlink loop) and parsed by :func:`parse_yaml`. Raises
    ``error`` (a HeteroError subclass) naming file/line/column for every problem.
    """
    return parse_yaml(read_file(path, what, MAX_BYTES, error), path, error)


def _scan(text: str, path: Path, error: type[HeteroError]) -> None:
    """Walk the YAML events of ``text`` (libyaml when installed: no node is built) and refuse a document
    nested deeper than MAX_DEPTH or holding more than MAX_NODES nodes before anything is composed."""
    depth = nodes = 0

    def at(event: yaml.Event) -> Location:
        mark = event.start_mark
        return Location(str(path), mark.line + 1 if mark else 0, mark.column + 1 if mark else 0)

    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
            nodes += 1
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            nodes += 1
            depth += 1
            if depth > MAX_DEPTH:
                raise error(f"the document nests more than {MAX_DEPTH} levels deep", at(event),
                            "flatten the nesting; a matrix needs only a few levels")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        if nodes > MAX_NODES:
            raise error(f"the document holds more than {MAX_NODES} nodes", at(event),
                        "split it: a matrix needs a few thousand keys at most (docs/safe-reading.md)")


def parse_yaml(raw: bytes, path: Path, error: type[HeteroError]) -> tuple[Any, Positions]:
    """Parse ``raw`` (the bytes of ``path``) as one YAML document; return (data, positions).

    Raises ``error`` naming file/line/column for: bytes that are not UTF-8, YAML syntax errors, nesting
    deeper than MAX_DEPTH, more than MAX_NODES nodes (before or after alias expansion), duplicate keys,
    non-string keys, an integer of more than 4,300 digits, and an empty document.
    """
    try:
        text = raw.decode("utf-8")
        _scan(text, path, error)
        root = yaml.compose(text, Loader=_LOADER)
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text (byte {exc.start})", Location(str(path)),
                    "save the file as UTF-8") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = Location(str(path), mark.line + 1 if mark else 0, mark.column + 1 if mark else 0)
        raise error(f"YAML syntax error: {exc.problem or exc.context}", loc,
                    "fix the indentation or quoting at this position") from None
    except yaml.YAMLError as exc:
        raise error(f"YAML error: {exc}", Location(str(path)), "fix the YAML syntax") from None
    if root is None:
        raise error("the file is empty", Location(str(path)), "write a YAML mapping") from None
    positions = Positions()
    budget = [MAX_NODES]
    constructor = yaml.SafeLoader("")
    data = _build(root, (), positions, budget, _Merges(constructor), path, error)
    return data, positions


class _Merges:
    """Flattens merge keys once per mapping node (an alias visits the same node again) and remembers which
    key nodes each mapping got from a merge, so overrides are told apart from keys written twice."""

    def __init__(self, constructor: yaml.SafeLoader) -> None:
        self.constructor = constructor
        self.merged: dict[int, set[int]] = {}

    def pairs(self, node: yaml.MappingNode) -> tuple[list[tuple[yaml.Node, yaml.Node]], set[int]]:
        """``node``'s (key, value) pairs after merging, merged ones first in PyYAML's order (a later pair
        wins), and the ids of the key nodes that came from a merge."""
        if id(node) not in self.merged:
            own = {id(k) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"}
            self.constructor.flatten_mapping(node)
            self.merged[id(node)] = {id(k) for k, _ in node.value if id(k) not in own}
        return node.value, self.merged[id(node)]


def _build(node: yaml.Node, path: PathKey, positions: Positions, budget: list[int],
           merges: _Merges, file: Path, error: type[HeteroError]) -> Any:
    constructor = merges.constructor
    budget[0] -= 1
    if budget[0] < 0:
        line, col = _pos(node)
        raise error(f"document expands to more than {MAX_NODES} nodes (YAML alias bomb?)",
                    Location(str(file), line, col), "remove recursive or repeated aliases")
    positions.values.setdefault(path, _pos(node))
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        pairs, merged = merges.pairs(node)
        written: set[str] = set()
        for key_node, value_node in pairs:
            key = constructor.construct_object(key_node, deep=True)
            line, col = _pos(key_node)
            if not isinstance(key, (str, int, float, bool)):
                raise error("mapping keys must be plain scalars", Location(str(file), line, col),
                            "quote the key")
            key = str(key)
            if id(key_node) not in merged:
                if key in written:
                    raise error(f"duplicate key '{key}'", Location(str(file), line, col,
                                dotted((*path, key))), "remove one of the two entries")
                written.add(key)
            positions.keys[(*path, key)] = (line, col)
            out[key] = _build(value_node, (*path, key), positions, budget, merges, file, error)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(child, (*path, i), positions, budget, merges, file, error)
                for i, child in enumerate(node.value)]
    try:
        return constructor.construct_object(node, deep=True)
    except yaml.constructor.ConstructorError as exc:
        line, col = _pos(node)
        raise error(f"cannot read value: {exc.problem}", Location(str(file), line, col),
                    "quote the value or fix its tag") from None
    except ValueError:  # int() of more than sys.get_int_max_str_digits() digits
        line, col = _pos(node)
        raise error(f"a number of more than {sys.get_int_max_str_digits()} digits", Location(str(file), line, col),
                    "quote it if it is text; no field takes such a number") from None


def dotted(path: PathKey, data: Any = None) -> str:
    """Render a JSON path as ``spec.resources[1].requests`` (names items by ``name`` when ``data`` given)."""
    out = ""
    node = data
    for part in path:
        if isinstance(part, int):
            name = node[part].get("name") if isinstance(node, list) and part < len(node) \
                and isinstance(node[part], dict) else None
            out += f"[{part}]" if name is None else f"[{part}:{name}]"
        else:
            out += ("." if out else "") + str(part)
        try:
            node = node[part] if node is not None else None
        except (KeyError, IndexError, TypeError):
            node = None
    return out
