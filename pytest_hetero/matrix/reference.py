"""The matrix field reference, read from the shipped JSON Schema (``schema.json``), like ``kubectl explain``.

:func:`explain` answers for one field path (``spec.resources.expect.driver``; ``[]`` after a list is optional):
its meaning (``description``), type in words, default, allowed values and examples, and its fields when it is
a mapping. :func:`markdown` renders the whole tree as ``docs/matrix-reference.md`` (generated: a test fails when
the file and the schema disagree). The schema is the one source: add meaning to a field there
(``description``, ``default``, ``examples``), never here. Imports nothing heavy (json only).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypedDict, cast

from pytest_hetero.errors import HeteroError

Node = TypedDict("Node", {
    "$ref": str, "$defs": "dict[str, Node]", "type": "str | list[str]", "items": "Node",
    "properties": "dict[str, Node]", "additionalProperties": "Node | bool", "required": "list[str]",
    "description": str, "default": object, "examples": "list[object]", "pattern": str, "enum": "list[object]",
    "const": object, "oneOf": "list[Node]", "anyOf": "list[Node]",
}, total=False)
"""A JSON Schema (draft 2020-12) node, with the keywords the reference reads (``$ref`` names ``#/$defs/NAME``)."""


@dataclass(frozen=True)
class Keywords:
    """The keywords of one schema node the reference reads, read once (:func:`keywords`), an absent one as JSON
    Schema means it: no ``$ref`` ``""``; no ``type`` None (any value); no ``items`` or ``additionalProperties``
    (``values``) None; no ``properties``, ``required`` or ``examples`` empty; no ``description`` ``""``."""

    ref: str
    type: str | list[str] | None
    items: Node | None
    properties: dict[str, Node]
    values: Node | bool | None
    required: list[str]
    description: str
    examples: list[object]


def keywords(node: Node) -> Keywords:
    """:class:`Keywords` of ``node`` as written (its ``$ref`` not followed: see :func:`_deref`)."""
    return Keywords(ref=node.get("$ref", ""), type=node.get("type"), items=node.get("items"),
                    properties=node.get("properties", {}), values=node.get("additionalProperties"),
                    required=node.get("required", []), description=node.get("description", ""),
                    examples=node.get("examples", []))


def schema() -> Node:
    """The ValidationMatrix v1 JSON Schema shipped in the package."""
    text = resources.files("pytest_hetero.matrix").joinpath("schema.json").read_text("utf-8")
    return cast(Node, json.loads(text))  # the package's own schema file: an object of JSON Schema keywords


def _deref(root: Node, node: Node) -> Node:
    """``node`` with its ``$ref`` (``#/$defs/NAME``) followed; the referring node's own annotations win."""
    while "$ref" in node:
        target = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        own = node.copy()
        del own["$ref"]
        node = target.copy()
        node.update(own)
    return node


def _element(root: Node, node: Node) -> Node:
    """The node that holds fields: a list's items, a mapping's values (``additionalProperties``) when it has
    no named fields, else the node itself."""
    node = _deref(root, node)
    read = keywords(node)
    if read.type == "array" and isinstance(read.items, dict):
        return _deref(root, read.items)
    if "properties" not in node and isinstance(read.values, dict):
        return _deref(root, read.values)
    return node


def type_words(root: Node, node: Node) -> str:
    """A field's type in words: ``string``, ``integer``, ``list of object``, ``map of string to quantity``,
    ``one of: gpu | npu | cpu``, ``duration (number or string)``…"""
    name = keywords(node).ref.rsplit("/", 1)[-1]
    node = _deref(root, node)
    read = keywords(node)
    if name in ("duration", "quantity", "sha256", "name"):
        return {"duration": "duration (number of seconds, or a string such as 30s, 5m, 2d)",
                "quantity": "quantity (number, or a string such as 500m, 16Gi)", "sha256": "sha256 (hex string)",
                "name": "name (string)"}[name]
    if "const" in node:
        return f"constant {json.dumps(node['const'])}"
    if "enum" in node:
        return "one of: " + " | ".join(json.dumps(v) if not isinstance(v, str) else (v or '""') for v in node["enum"])
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(type_words(root, n) for n in node[key])
    kind = read.type if read.type is not None else "any"
    if kind == "array":
        return f"list of {type_words(root, read.items if read.items is not None else {})}"
    if kind == "object" and "properties" not in node and isinstance(read.values, dict):
        return f"map of string to {type_words(root, read.values)}"
    return str(kind)


def _parts(path: str) -> list[str]:
    return [p.removesuffix("[]") for p in path.strip().strip(".").split(".") if p.removesuffix("[]")]


def field(path: str) -> tuple[Node, Node, list[str]]:
    """(root schema, the field's node, its path parts) for ``path`` (``""`` is the document). Raises HeteroError
    naming the unknown part, with the close names as a hint."""
    root = schema()
    node: Node = root
    parts = _parts(path)
    for n, part in enumerate(parts):
        holder = _element(root, node)
        fields = keywords(holder).properties
        if part not in fields:
            where = ".".join(parts[:n]) or "the document"
            close = difflib.get_close_matches(part, list(fields), n=3)
            hint = (f"did you mean {', '.join(close)}?" if close else
                    f"fields of {where}: {', '.join(fields) or '(none: it has no named fields)'}")
            raise HeteroError(f"{path!r}: {where} has no field {part!r}", hint=hint)
        node = fields[part]
    return root, node, parts


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def explain(path: str = "") -> str:
    """``kubectl explain``-style text for the field at ``path``: FIELD, TYPE, REQUIRED, DEFAULT, DESCRIPTION,
    EXAMPLES and FIELDS (name, type, one line of meaning, ``-required-`` marks). Raises HeteroError for an
    unknown path (see :func:`field`)."""
    root, node, parts = field(path)
    full = _deref(root, node)
    out = [f"FIELD:    {'.'.join(parts) or '(the matrix document)'}", f"TYPE:     {type_words(root, node)}"]
    if parts:
        parent = _element(root, field(".".join(parts[:-1]))[1]) if len(parts) > 1 else root
        out.append(f"REQUIRED: {'yes' if parts[-1] in keywords(parent).required else 'no'}")
    if "default" in full:
        out.append(f"DEFAULT:  {_value(full['default'])}")
    if "pattern" in full:
        out.append(f"PATTERN:  {full['pattern']}")
    read = keywords(full)
    out += ["", "DESCRIPTION:", f"    {read.description or '(no description in the schema)'}"]
    if read.examples:
        out += ["", "EXAMPLES:"] + [f"    {_value(e)}" for e in read.examples]
    holder = keywords(_element(root, node))
    if holder.properties:
        required = set(holder.required)
        out += ["", "FIELDS:"]
        for name, child in holder.properties.items():
            mark = "  -required-" if name in required else ""
            out.append(f"    {name}  <{type_words(root, child)}>{mark}")
            meaning = keywords(_deref(root, child)).description
            if meaning:
                out.append(f"      {meaning}")
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """The whole reference as Markdown (the contents of ``docs/matrix-reference.md``): one table per mapping,
    document order, each row a field with its type, whether required, default, meaning and first example."""
    root = schema()
    out = ["# Matrix field reference", "",
           "<!-- generated by `hetero schema --markdown` from pytest_hetero/matrix/schema.json; do not edit: "
           "tests/test_schema_reference.py fails when they differ -->", "",
           "Every field of a `ValidationMatrix` (apiVersion `pytest-hetero/v1`). `hetero schema PATH` prints one "
           "field (e.g. `hetero schema spec.resources.expect`); the guide is [docs/matrix.md](matrix.md).", ""]
    seen: set[str] = set()

    def table(path: list[str], node: Node) -> None:
        holder = keywords(_element(root, node))
        props = holder.properties
        key = ".".join(path)
        if not props or key in seen:
            return
        seen.add(key)
        meaning = keywords(_deref(root, node)).description
        out.extend([f"## `{key or '(document)'}`", ""] + ([meaning, ""] if meaning and path else []))
        out.extend(["| field | type | required | default | meaning | example |", "|---|---|---|---|---|---|"])
        required = set(holder.required)
        for name, child in props.items():
            full = _deref(root, child)
            read = keywords(full)
            example = _value(read.examples[0]) if read.examples else ""
            default = _value(full["default"]) if "default" in full else ""
            out.append(f"| `{name}` | {_cell(type_words(root, child))} | {'yes' if name in required else ''} | "
                       f"{_cell(f'`{default}`' if default else '')} | {_cell(read.description)} | "
                       f"{_cell(f'`{example}`' if example else '')} |")
        out.append("")
        for name, child in props.items():
            table([*path, name], child)

    table([], root)
    return "\n".join(out).rstrip() + "\n"
