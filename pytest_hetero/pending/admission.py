"""kube-apiserver admission and authorization denials (Kubernetes 1.18-1.34 wording).

Read from ``kubectl`` errors (``Error from server (Forbidden): ...``), controller ``FailedCreate``
events (``Error creating: pods "x" is forbidden: ...``) or API status messages:

* ResourceQuota: ``exceeded quota: <name>, requested: <r>=<q>[,<r>=<q>...], used: ..., limited: ...``
  and ``failed quota: <name>: must specify <r>[,<r>]`` (newer: ``must specify <r> for: <ctr>; ...``).
* LimitRange: ``maximum cpu usage per Container is 2, but limit is 4``, ``minimum memory usage per
  Pod is 1Gi, but request is 512Mi``, ``cpu max limit to request ratio per Container is 2, but
  provided ratio is 4.000000``.
* RBAC: ``<res> is forbidden: User "<subject>" cannot <verb> resource "<res>" in API group "<g>"
  in the namespace "<ns>"`` (1.14+; ``at the cluster scope`` for cluster resources) and the
  pre-1.14 ``cannot <verb> <res> in the namespace "<ns>"``.
* Pod Security admission: ``violates PodSecurity "<level>:<version>": <checks>``; PodSecurityPolicy
  (-1.24): ``unable to validate against any pod security policy: [...]``.
* Webhooks: ``admission webhook "<name>" denied the request: <why>``, ``failed calling webhook
  "<name>": <error>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pytest_hetero.pending.model import Reason, make_reason
from pytest_hetero.pending.volcano import classify_queue_text

_OBJECT = re.compile(r'(?P<kind>[\w.]+) "(?P<name>[^"]+)" is forbidden')
_QUOTA = re.compile(
    r"exceeded quota: (?P<quota>[^,\s]+), requested: (?P<req>\S+?), used: (?P<used>\S+?), "
    r"limited: (?P<lim>[^\s,\"']+(?:,[^\s,\"']+)*)"
)
_FAILED_QUOTA = re.compile(r"failed quota: (?P<quota>[^:\s]+): must specify (?P<what>[^\n\"]+)")
_LIMIT = re.compile(
    r"(?P<bound>maximum|minimum) (?P<res>\S+) usage per (?P<scope>Container|Pod|PersistentVolumeClaim) "
    r"is (?P<lim>[^\s,]+), but (?P<kind>limit|request) is (?P<val>[^\s,\]]+)"
)
_RATIO = re.compile(
    r"(?P<res>\S+) max limit to request ratio per (?P<scope>Container|Pod) is (?P<lim>[^\s,]+), "
    r"but provided ratio is (?P<val>[^\s,\]]+)"
)
_RBAC = re.compile(
    r'User "(?P<subject>[^"]*)" cannot (?P<verb>\S+) (?:resource "(?P<res>[^"]*)"|(?P<oldres>[\w./-]+))'
    r'(?: in API group "(?P<group>[^"]*)")?'
    r'(?: in the namespace "(?P<ns>[^"]*)"| at the cluster scope)?'
)
_PSA = re.compile(r'violates PodSecurity "(?P<level>[^"]+)": (?P<checks>[^\n]+)')
_PSP = re.compile(r"unable to validate against any pod security policy: (?P<checks>[^\n]+)")
_WEBHOOK_DENIED = re.compile(r'admission webhook "(?P<hook>[^"]+)" denied the request:?\s*(?P<why>[^\n]*)')
_WEBHOOK_FAILED = re.compile(r'failed calling webhook "(?P<hook>[^"]+)":?\s*(?P<why>[^\n]*)')


def _pairs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _bare(resource: str) -> str:
    """``requests.nvidia.com/gpu`` -> ``nvidia.com/gpu``; ``count/pods`` stays."""
    for prefix in ("requests.", "limits."):
        if resource.startswith(prefix):
            return resource[len(prefix) :]
    return resource


def _object(text: str, end: int) -> dict[str, str]:
    found = [m for m in _OBJECT.finditer(text) if m.start() < end]
    if not found:
        return {}
    return {"object_kind": found[-1].group("kind"), "object_name": found[-1].group("name")}


def _quota(text: str) -> list[tuple[int, Reason]]:
    out: list[tuple[int, Reason]] = []
    for m in _QUOTA.finditer(text):
        req, used, lim = _pairs(m.group("req")), _pairs(m.group("used")), _pairs(m.group("lim"))
        for key in req or lim:
            quantities = {
                k: v
                for k, v in (("requested", req.get(key)), ("used", used.get(key)), ("limited", lim.get(key)))
                if v is not None
            }
            detail = {"quota": m.group("quota"), "quota_resource": key, **_object(text, m.start())}
            out.append(
                (
                    m.start(),
                    make_reason(
                        "admission",
                        "quota_exceeded",
                        m.group(0),
                        resource=_bare(key),
                        quantities=quantities,
                        detail=detail,
                    ),
                )
            )
    for m in _FAILED_QUOTA.finditer(text):
        what = m.group("what").strip()
        for part in re.split(r";\s*", what):
            names, _, containers = part.partition(" for: ")
            for key in filter(None, (n.strip() for n in names.split(","))):
                detail = {"quota": m.group("quota"), "quota_resource": key, **_object(text, m.start())}
                if containers:
                    detail["containers"] = containers.strip()
                out.append(
                    (
                        m.start(),
                        make_reason(
                            "admission",
                            "quota_requires_limits",
                            m.group(0),
                            resource=_bare(key),
                            detail=detail,
                        ),
                    )
                )
    return out


def _limitrange(text: str) -> list[tuple[int, Reason]]:
    out: list[tuple[int, Reason]] = []
    forms: tuple[tuple[re.Pattern[str], str, Callable[[re.Match[str]], dict[str, str]]], ...] = (
        (_LIMIT, " usage per ", lambda m: {m.group("bound"): m.group("lim"), m.group("kind"): m.group("val")}),
        (_RATIO, " max limit to request ratio per ", lambda m: {"max_ratio": m.group("lim"), "ratio": m.group("val")}),
    )
    for pattern, needle, quantities in forms:
        if needle not in text:  # each pattern needs its literal; _RATIO starts with \S+ (slow to scan)
            continue
        for m in pattern.finditer(text):
            detail = {"scope": m.group("scope"), **_object(text, m.start())}
            reason = make_reason("admission", "limitrange_violation", m.group(0), resource=m.group("res"),
                                 quantities=quantities(m), detail=detail)
            out.append((m.start(), reason))
    return out


def _rbac(text: str) -> list[tuple[int, Reason]]:
    out: list[tuple[int, Reason]] = []
    for m in _RBAC.finditer(text):
        resource = m.group("res") if m.group("res") is not None else m.group("oldres")
        detail = {"verb": m.group("verb"), "subject": m.group("subject")}
        if m.group("group") is not None:
            detail["group"] = m.group("group")
        if m.group("ns") is not None:
            detail["namespace"] = m.group("ns")
        elif m.group(0).endswith("cluster scope"):
            detail["scope"] = "cluster"
        sa = re.match(r"system:serviceaccount:([^:]+):(.+)$", m.group("subject"))
        if sa:
            detail["serviceaccount"] = f"{sa.group(1)}/{sa.group(2)}"
        out.append(
            (
                m.start(),
                make_reason("apiserver", "forbidden_rbac", m.group(0), resource=resource, detail=detail),
            )
        )
    return out


def _policy(text: str) -> list[tuple[int, Reason]]:
    out: list[tuple[int, Reason]] = []
    for m in _PSA.finditer(text):
        out.append(
            (
                m.start(),
                make_reason(
                    "admission",
                    "podsecurity_violation",
                    m.group(0),
                    detail={"level": m.group("level"), **_object(text, m.start())},
                ),
            )
        )
    for m in _PSP.finditer(text):
        out.append(
            (
                m.start(),
                make_reason(
                    "admission", "podsecurity_violation", m.group(0), detail={"level": "PodSecurityPolicy"}
                ),
            )
        )
    for m in _WEBHOOK_DENIED.finditer(text):
        queue = classify_queue_text(m.group("why"))
        if queue:
            out.extend((m.start(), r) for r in queue)
            continue
        violations = _violations(text[m.end("hook") :])
        if violations:
            for constraint, container, what in violations:
                detail = {"webhook": m.group("hook"), "why": m.group("why").strip(), "constraint": constraint,
                          "violation": what}
                if container:
                    detail["container"] = container
                out.append((m.start(), make_reason("admission", "webhook_denied", f"[{constraint}] {what}",
                                                   detail=detail)))
            continue
        out.append(
            (
                m.start(),
                make_reason(
                    "admission",
                    "webhook_denied",
                    m.group(0),
                    detail={"webhook": m.group("hook"), "why": m.group("why").strip()},
                ),
            )
        )
    for m in _WEBHOOK_FAILED.finditer(text):
        out.append(
            (
                m.start(),
                make_reason(
                    "admission",
                    "webhook_unavailable",
                    m.group(0),
                    detail={"webhook": m.group("hook"), "why": m.group("why").strip()},
                ),
            )
        )
    return out


_VIOLATION = re.compile(r"\[(?P<constraint>[\w.-]+)\]\s*(?P<what>[^\[\n]*?)\s*(?=\[[\w.-]+\]|\n|$)")


def _violations(text: str) -> list[tuple[str, str, str]]:
    """OPA Gatekeeper / Kyverno violations after ``denied the request:``: ``[constraint] message``, one per
    line or several on one line; returns ``(constraint, container, message)`` with the ``please see <url>``
    tail dropped. Lines that do not start with ``[`` end the list."""
    out: list[tuple[str, str, str]] = []
    for number, line in enumerate(text.split("\n")):
        body = line.split("denied the request:", 1)[-1] if number == 0 else line
        if number > 0 and not body.lstrip().startswith("["):
            break
        for m in _VIOLATION.finditer(body):
            what = re.sub(r",?\s*please see \S+\s*$", "", m.group("what")).strip().rstrip(",")
            container = re.search(r"container <?([\w.-]+)>?", what)
            out.append((m.group("constraint"), container.group(1) if container else "", what))
    return out


def parse_admission_message(text: str) -> list[Reason]:
    """Return every admission / authorization denial found in ``text``, in order of appearance.

    ``text`` may hold surrounding output (a kubectl session, an event listing); only the denial
    wordings listed in the module docstring are read, one reason per exceeded resource. Returns
    ``[]`` when none is present. Never raises on any string.
    """
    found = _quota(text) + _limitrange(text) + _rbac(text) + _policy(text)
    found.sort(key=lambda pair: pair[0])
    return [reason for _, reason in found]
