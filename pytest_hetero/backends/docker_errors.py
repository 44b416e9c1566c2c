"""Classify Docker Engine failures into a layer outcome: category, owning team, readable message.

The patterns are the engine's own error texts (dockerd 20.10–27, runc 1.1, containerd 1.6/1.7),
e.g. ``Unknown runtime specified nvidia`` or ``could not select device driver "" with
capabilities: [[gpu]]``. Image problems belong to whoever the matrix names as image owner
(``target.image_owner``: ``platform`` by default, ``algorithm`` when the model team ships images).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_hetero.layers.base import LayerBroken, LayerFailed, LayerOutcome

IMAGE_OWNER_DEFAULT = "platform"


@dataclass(frozen=True)
class Rule:
    """``pattern`` (regular expression, searched case-insensitively) → ``category`` and ``owner``.

    ``owner`` ``"image"`` stands for the configured image owner, ``"phase"`` for the owner of
    the phase the error happened in (``platform`` for startup, ``algorithm`` for a model run).
    """

    pattern: str
    category: str
    owner: str
    broken: bool = False


RULES: tuple[Rule, ...] = (
    Rule(r"pull access denied|unauthorized|denied: |authentication required", "pull_denied", "image"),
    Rule(r"manifest unknown|manifest for .* not found|no such image|repository does not exist|"
         r"not found: manifest", "image_not_found", "image"),
    Rule(r"dial tcp|no such host|i/o timeout|connection refused|tls: |x509: |TLS handshake",
         "registry_unreachable", "infrastructure"),
    Rule(r"unknown runtime specified", "runtime_missing", "infrastructure"),
    Rule(r"could not select device driver", "device_driver_missing", "infrastructure"),
    Rule(r"error gathering device information|no such device", "device_missing", "infrastructure"),
    Rule(r"requested cpus are not available|range of cpus is from|minimum memory limit|"
         r"invalid value .* for cpuset", "resource_rejected", "platform"),
    Rule(r"bind source path does not exist|invalid mount config", "mount_failed", "platform"),
    Rule(r"exec: .*(no such file or directory|not found)|executable file not found|"
         r"exec format error|permission denied", "entrypoint_missing", "phase"),
    Rule(r"oci runtime|runc |shim task|nvidia-container-cli", "oci_runtime_error", "infrastructure"),
)
"""First match wins; order puts the specific texts before the generic OCI runtime wrapper."""


def explanation(exc: BaseException) -> str:
    """The engine's own message of a docker SDK error (``explanation``), else ``str(exc)``, one line."""
    text = getattr(exc, "explanation", None) or str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return " ".join(str(text).split())


def classify(text: str, *, phase_owner: str, image_owner: str = IMAGE_OWNER_DEFAULT) -> tuple[str, str] | None:
    """Return ``(category, owner)`` for an engine error text, or None when no rule matches."""
    for rule in RULES:
        if re.search(rule.pattern, text, re.IGNORECASE):
            owner = {"image": image_owner, "phase": phase_owner}.get(rule.owner, rule.owner)
            return rule.category, owner
    return None


def outcome(exc: BaseException, what: str, *, phase_owner: str,
            image_owner: str = IMAGE_OWNER_DEFAULT) -> LayerOutcome:
    """Turn a docker SDK exception raised while doing ``what`` into LayerFailed (known failure)
    or LayerBroken (``engine_error``: an engine answer no rule explains, or no answer at all)."""
    text = explanation(exc)
    found = classify(text, phase_owner=phase_owner, image_owner=image_owner)
    if found is None:
        return LayerBroken(f"{what}: the Docker engine answered: {text}", "engine_error")
    category, owner = found
    return LayerFailed(f"{what}: {text}", category, owner)
