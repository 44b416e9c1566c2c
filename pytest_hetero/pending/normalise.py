"""One entry point: detect what was captured, dispatch to the right parser, return normalised reasons.

``explain`` accepts a string (``kubectl describe`` text, a ``kubectl get events`` table, Workload /
PodGroup / Pod / Event YAML or JSON, ``kubectl`` error output, or one bare scheduler / apiserver /
queue message), bytes (UTF-8), a dict (one object) or a list (of objects or messages).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml

from pytest_hetero.errors import ParseError
from pytest_hetero.pending.describe import (
    classify_message,
    parse_describe,
    parse_event_object,
    parse_events_table,
    parse_pod,
)
from pytest_hetero.pending.kueue import parse_workload
from pytest_hetero.pending.model import Condition, Reason, make_reason
from pytest_hetero.pending.objects import KubeObject
from pytest_hetero.pending.scheduler import parse_scheduler_message
from pytest_hetero.pending.startup import _DEVICE_RUNTIME, classify_startup
from pytest_hetero.pending.volcano import parse_podgroup, parse_podgroup_text

_YAML_START = re.compile(
    r"^(?:---\s*\n)?(?:#[^\n]*\n)*(?:apiVersion|kind|status|items|metadata|spec|conditions)\s*:", re.MULTILINE
)
_UNKNOWN_CAP = 2000
_BARE_LINES = 10


def explain(
    text_or_obj: str | bytes | Mapping[str, Any] | list[Any],
    *,
    advertised: Collection[str] | None = None,
) -> list[Reason]:
    """Return every reason found, in order, without duplicates.

    ``[]`` means there was nothing to explain: empty input, or a recognised capture that holds no
    failure (a describe/events listing with only Normal events, an admitted Workload, a Pod whose
    conditions are all True).

    Text nobody recognises comes back as one ``unknown`` reason holding the (whitespace-squashed,
    at most 2000 characters) text, with source ``scheduler`` (the command's usual input) unless the
    event that carried it names its reporter. Owners are the failure table's (:attr:`Reason.owner`).
    ``advertised``: resource names some node advertises; ``insufficient_resource`` for a resource
    outside it becomes ``resource_not_advertised``.

    Raises :class:`ParseError` for bytes that are not UTF-8, text containing NUL bytes, objects of
    another type, and objects whose status/conditions have the wrong shape.
    """
    try:
        reasons = _dedupe(_dispatch(text_or_obj))
    except RecursionError as exc:
        raise ParseError("input is nested too deeply to be a Kubernetes object") from exc
    if advertised is not None:
        reasons = [
            replace(r, code="resource_not_advertised")
            if r.code == "insufficient_resource" and r.resource and r.resource not in advertised
            else r
            for r in reasons
        ]
    return reasons


def _dedupe(reasons: list[Reason]) -> list[Reason]:
    out: list[Reason] = []
    for reason in reasons:
        if reason not in out:
            out.append(reason)
    return out


def _dispatch(value: Any) -> list[Reason]:
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"input is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if isinstance(value, str):
        return _from_text(value)
    if isinstance(value, Mapping):
        return _from_object(value)
    if isinstance(value, list):
        return [r for item in value for r in _dispatch(item)]
    raise ParseError(
        f"cannot explain a {type(value).__name__}", hint="pass text, bytes, or a Kubernetes object as a dict"
    )


def _json_text(text: str, stripped: str) -> list[Reason] | None:
    """A JSON object or list (read as objects), or None when the text is not JSON, or is JSON in which no object
    is one the readers know (``{}``, ``[]``, ``{"a": 1}``: not a capture that holds no failure, but text nobody
    recognises, which :func:`_scan` returns as ``unknown``)."""
    if stripped[0] not in "{[":
        return None
    try:
        loaded = json.loads(stripped)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(loaded, (dict, list)):
        return None
    found = _dispatch(loaded)
    return found if found or _known(loaded) else None


def _known(value: object) -> bool:
    """Whether ``value`` (decoded JSON) holds an object the readers know: a ``…List``, a kind they read, a shape
    :func:`_guess` reads, or a message; a list when one of its items does."""
    if isinstance(value, list):
        return any(_known(item) for item in value)
    if not isinstance(value, Mapping):
        return False
    shape = ObjectShape.parse(value)
    return (shape.items is not None or shape.kind in _KINDS or _guess(shape) is not None
            or bool(shape.message and shape.message.strip()) or bool(shape.conditions))


def _yaml_text(text: str, stripped: str) -> list[Reason] | None:
    """YAML documents that start like a Kubernetes object (each read as one), or None."""
    if not _YAML_START.match(stripped):
        return None
    try:
        docs = [d for d in yaml.safe_load_all(stripped) if d is not None]
    except (yaml.YAMLError, RecursionError):
        return None
    if docs and all(isinstance(d, (Mapping, list)) for d in docs):
        return [r for d in docs for r in _dispatch(d)]
    return None


def _describe_text(text: str, stripped: str) -> list[Reason] | None:
    """``kubectl describe pod`` text (an ``Events:``/``Containers:`` section or a container state), or None."""
    if not (re.search(r"^\s*(?:Events|Containers|Init Containers):\s*$", text, re.MULTILINE) or re.search(
        r"(?:^|\s{3})(?:Last )?State:\s+(?:Waiting|Terminated|Running)", text, re.MULTILINE
    )):
        return None
    # A pod's own Message:/Reason: fields are not a PodGroup condition; only a gang message is read twice.
    extra = parse_podgroup_text(text) if "tasks in gang" in text else []
    return parse_describe(text) + [r for r in extra if r.code != "unknown"]


def _events_text(text: str, stripped: str) -> list[Reason] | None:
    """A ``kubectl get events`` table, or None."""
    if not re.search(r"^\s*(?:NAMESPACE\s+)?LAST SEEN\s.*\bREASON\b.*\bMESSAGE\b", text, re.MULTILINE):
        return None
    return parse_events_table(text)


def _condition_text(text: str, stripped: str) -> list[Reason] | None:
    """A PodGroup condition excerpt (``Message:`` lines) when every reason in it is understood, or None."""
    if not re.search(r"^\s*Message:", text, re.MULTILINE):
        return None
    found = parse_podgroup_text(text)
    return found if found and all(r.code != "unknown" for r in found) else None


_TEXT_FORMS: tuple[Callable[[str, str], list[Reason] | None], ...] = (
    _json_text, _yaml_text, _describe_text, _events_text, _condition_text,
)
"""Readers of whole-text captures in priority order: ``(text, text.strip())`` -> reasons, or None when
the text is not their form. Text none of them takes is scanned as free text (:func:`_scan`)."""


def _from_text(text: str) -> list[Reason]:
    if "\x00" in text:
        raise ParseError("input contains NUL bytes; it is not captured text")
    if not text.strip():
        return []
    stripped = text.strip()
    for read in _TEXT_FORMS:
        found = read(text, stripped)
        if found is not None:
            return found
    return _scan(text)


def _scan(text: str) -> list[Reason]:
    """Free text: each line on its own, or the whole text as one (wrapped) message; else ``unknown``.

    The reading with more recognised reasons wins (fewer ``unknown`` breaks a tie; per line on a
    full tie), so a mixed capture is read line by line and a wrapped message as one.
    """
    squashed = re.sub(r"\s+", " ", text).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    # Bare fragments ("Too many pods") are only trusted in short texts: in a long capture such
    # words are more likely part of unrelated output.
    bare = len(lines) <= _BARE_LINES
    per_line = [r for line in lines for r in classify_message(line) or (_bare(line) if bare else [])]
    whole = classify_message(squashed) if "\n" in text.strip() else []
    whole = whole or (_bare(squashed) if bare else [])
    found = max((per_line, whole), key=_score)
    if not any(r.code != "unknown" for r in found):
        startup = _startup(lines)
        if startup:
            return startup
    return found or [make_reason("scheduler", "unknown", squashed[:_UNKNOWN_CAP])]


def _startup(lines: list[str]) -> list[Reason]:
    """Container/device runtime and image-pull errors in bare text (``nvidia-container-cli: …``, ``could
    not select device driver``, ``Failed to pull image``) read by the startup classifier."""
    out: list[Reason] = []
    for line in lines:
        if _DEVICE_RUNTIME.search(line) or re.search(r"OCI runtime|failed to create (?:containerd|shim) task", line):
            found = classify_startup("StartError", line)
        elif re.search(r"Failed to pull image|ErrImagePull|ImagePullBackOff|back-off pulling image", line,
                       re.IGNORECASE):
            found = classify_startup("ErrImagePull", line)
        else:
            continue
        if found is not None and found not in out:
            out.append(found)
    return out


def _bare(line: str) -> list[Reason]:
    """A scheduler fragment without the ``0/N nodes`` head, e.g. ``Too many pods``."""
    return [r for r in parse_scheduler_message(line) if r.code != "unknown"]


def _score(reasons: list[Reason]) -> tuple[int, int]:
    known = sum(r.code != "unknown" for r in reasons)
    return known, -(len(reasons) - known)


_KINDS: dict[str, Callable[[Mapping[str, object]], list[Reason]]] = {
    "Workload": parse_workload,
    "PodGroup": parse_podgroup,
    "Pod": parse_pod,
    "Event": parse_event_object,
}


@dataclass(frozen=True)
class ObjectShape:
    """What tells the pending readers what a pasted mapping is: its ``kind`` ("" when absent), its ``items`` (a
    ``…List``'s; None when not a list), the conditions of its ``status`` (or of the mapping itself, a status
    pasted alone; none when not a list), its top-level ``message`` (when text), whether it reads like an Event
    (``involvedObject``/``regarding``, or a ``type`` of Warning/Normal) and the keys of its status and spec."""

    kind: str
    items: list[Any] | None
    conditions: list[Condition]
    message: str | None
    event_like: bool
    status_keys: frozenset[str]
    spec_keys: frozenset[str]

    @classmethod
    def parse(cls, obj: Mapping[str, object]) -> ObjectShape:
        """The shape of ``obj`` (read by :class:`KubeObject`). Never raises."""
        parsed = KubeObject.parse(obj)
        found, conditions = parsed.status_or_self(), parsed.conditions_or_own()
        status: Mapping[str, object] = found if isinstance(found, Mapping) else {}
        return cls(kind=parsed.kind, items=parsed.items,
                   conditions=[Condition.parse(c) for c in (conditions if isinstance(conditions, list) else [])
                               if isinstance(c, Mapping)],
                   message=parsed.message, event_like=parsed.event_like,
                   status_keys=frozenset(str(k) for k in status), spec_keys=frozenset(str(k) for k in parsed.spec))


def _from_object(obj: Mapping[str, object]) -> list[Reason]:
    shape = ObjectShape.parse(obj)
    if shape.items is not None:
        return [r for item in shape.items for r in _dispatch(item)]
    if shape.kind in _KINDS:
        return _KINDS[shape.kind](obj)
    guessed = _guess(shape)
    if guessed is not None:
        return guessed(obj)
    messages = [c.message or "" for c in shape.conditions]
    if shape.message is not None:
        messages.append(shape.message)
    return [r for m in messages if m.strip() for r in _scan(m)]


def _guess(shape: ObjectShape) -> Callable[[Mapping[str, object]], list[Reason]] | None:
    """Kind of an object whose ``kind`` is missing (trimmed captures), from its fields."""
    if shape.event_like:
        return parse_event_object
    status, spec = shape.status_keys, shape.spec_keys
    types = {c.type or "" for c in shape.conditions}
    messages = " ".join(c.message or "" for c in shape.conditions)
    if (
        "resourceRequests" in status
        or "admission" in status
        or "podSets" in spec
        or "queueName" in spec
        or types & {"QuotaReserved", "Admitted", "Evicted"}
        or "flavor" in messages
    ):
        return parse_workload
    if "containerStatuses" in status or "PodScheduled" in types or "containers" in spec:
        return parse_pod
    if "minMember" in spec or "tasks in gang" in messages or "Unschedulable" in types:
        return parse_podgroup
    return None


def summarise(reasons: list[Reason], *, owners: Mapping[str, str] | None = None, facts_only: bool = False) -> str:
    """One line for humans, filter reasons before preemption verdicts, e.g.
    ``insufficient_resource nvidia.com/gpu on 1/3 nodes [infrastructure]; preemption: ...``: each reason
    ends with its owner from the failure table (``owners`` names the team of an owner role, e.g.
    ``{"image": "ml-team"}``). ``facts_only``: no owners (an engine's message states facts; the item's
    owner is the judge's). Returns ``"no reason found"`` for an empty list.
    """
    if not reasons:
        return "no reason found"
    teams = None if facts_only else (owners or {})
    parts = [_one(r, teams) for r in reasons if not r.preemption]
    pre = [_one(r, teams) for r in reasons if r.preemption]
    if pre:
        parts.append("preemption: " + ", ".join(pre))
    return "; ".join(parts)


def _one(r: Reason, teams: Mapping[str, str] | None) -> str:
    text = r.code
    if r.resource:
        text += f" {r.resource}"
    if r.flavor:
        text += f" in flavor {r.flavor}"
    if r.taint:
        text += f" ({r.taint})"
    if "more_needed" in r.quantities:
        text += f", {r.quantities['more_needed']} more needed"
    if r.nodes is not None:
        text += f" on {r.nodes}" + (f"/{r.total_nodes}" if r.total_nodes is not None else "") + " nodes"
    if r.node_names:
        text += f" ({','.join(r.node_names)})"
    if r.code == "unknown":
        text += f": {r.message[:120]}"
    return text if teams is None else text + f" [{teams.get(r.owner, r.owner)}]"
