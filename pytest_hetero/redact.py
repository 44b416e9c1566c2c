"""Redaction of secrets before anything is written to evidence, artifacts, logs or reports.

Removed, each replaced by ``[REDACTED:<kind>]`` so a reader knows what was there:
values of environment variables whose names look secret (``*TOKEN*``, ``*SECRET*``,
``*PASSWORD*``, ``*KEY*``, ``*CREDENTIAL*``, plus names added with ``HETERO_REDACT_ENV``,
comma-separated globs), bearer tokens, JWTs, kubeconfig client keys/certificates/tokens,
Docker registry ``auth`` values, user:password in URLs, PEM private keys, and regular
expressions a matrix adds (``spec.redact``).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_ENV_GLOBS: tuple[str, ...] = ("*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*KEY*", "*CREDENTIAL*",
                                     "*AUTH*")
MIN_SECRET_LEN = 4
"""Environment values shorter than this are not treated as secrets (``KEY=1`` would redact every '1')."""

PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("private-key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
                               re.DOTALL), "[REDACTED:private-key]"),
    ("kubeconfig", re.compile(r"((?:client-key-data|client-certificate-data|token|password)\s*:\s*)"
                              r"(?!\[REDACTED)[\"']?[^\s\"']{8,}[\"']?"), r"\1[REDACTED:kubeconfig]"),
    ("registry-auth", re.compile(r"(\"(?:auth|identitytoken|password)\"\s*:\s*\")[^\"]+(\")"),
     r"\1[REDACTED:registry-auth]\2"),
    ("bearer-token", re.compile(r"(?i)(bearer\s+)(?!\[REDACTED)[A-Za-z0-9\-._~+/]{8,}=*"),
     r"\1[REDACTED:bearer-token]"),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"), "[REDACTED:jwt]"),
    # anchored on the literal '://' (not on the scheme, whose open-ended run made the search
    # quadratic on long token-like text: 100 kB of one word took 5 s)
    ("url-credentials", re.compile(r"(://)[^/\s:@\"']+:[^/\s@\"']+@"), r"\1[REDACTED:url-credentials]@"),
)


class Redactor:
    """Replaces secrets in text and in nested JSON-like data. Build once per run.

    ``env``: the environment to take secret values from (default ``os.environ``);
    ``extra``: (kind, regex) pairs from the matrix. Raises re.error for a bad regex.
    """

    def __init__(self, env: Mapping[str, str] | None = None, extra: Iterable[tuple[str, str]] = ()) -> None:
        env = os.environ if env is None else env
        globs = SECRET_ENV_GLOBS + tuple(g.strip() for g in env.get("HETERO_REDACT_ENV", "").split(",") if g.strip())
        values = {(name, value) for name, value in env.items()
                  if len(value) >= MIN_SECRET_LEN and any(fnmatch.fnmatchcase(name.upper(), g) for g in globs)}
        # the same secret as a JSON string spells it (outputs.json, logs of JSON): quotes, backslashes,
        # control and non-ASCII characters escaped
        values |= {(name, spelled) for name, value in values
                   for spelled in (json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1])}
        # longest first so a secret containing another is replaced whole
        self._literals = sorted(values, key=lambda nv: -len(nv[1]))
        self._extra = [(kind, re.compile(rx)) for kind, rx in extra]

    def text(self, value: str) -> str:
        """Return ``value`` with every known secret replaced by ``[REDACTED:<kind>]``."""
        if not value:
            return value
        for name, secret in self._literals:
            if secret in value:
                value = value.replace(secret, f"[REDACTED:env:{name}]")
        for _kind, pattern, repl in PATTERNS:
            value = pattern.sub(repl, value)
        for kind, pattern in self._extra:
            value = pattern.sub(f"[REDACTED:{kind}]", value)
        return value

    def data(self, value: Any) -> Any:
        """Redact every string (keys excluded) in nested dicts/lists/tuples; other values unchanged."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value

    def bytes(self, value: bytes) -> bytes:
        """Redact UTF-8 text content; binary content (not valid UTF-8) is returned unchanged."""
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            return value
        redacted = self.text(text)
        return value if redacted == text else redacted.encode("utf-8")
