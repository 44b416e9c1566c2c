"""Redaction of secrets before anything is written to evidence, artifacts, logs or reports.

Removed, each replaced by ``[REDACTED:<kind>]`` so a reader knows what was there:

- values of environment variables whose names look secret (:data:`SECRET_ENV_GLOBS`, plus names
  added with ``HETERO_REDACT_ENV``, comma-separated globs), as written and as a JSON string spells
  them. Values that cannot be told from ordinary data (shorter than :data:`MIN_SECRET_LEN`,
  numbers, versions, booleans: ``MAX_TOKENS=1024``) are not secrets and are left alone;
- the token formats of `detect-secrets <https://github.com/Yelp/detect-secrets>`_ (its regular
  expression plugins: GitHub, GitLab, AWS, Slack tokens and webhooks, Stripe, PyPI, npm, SendGrid,
  Twilio, Azure, IBM…), kind ``ds-<plugin secret type>``; the detect-secrets version in use is
  the one installed, its patterns cached per installation (importing it costs about half a second);
- structures the gate sees that those plugins do not cover (:data:`PATTERNS`): PEM private keys
  (a block cut by a head/tail truncation too), ``user:password@`` in a URL (also after a path
  join turned ``://`` into ``:/``, and with an empty user as in ``redis://:pw@``), Authorization
  headers (Bearer, Basic…), ``X-Api-Key:``-style headers, ``password=``/``"api_key":``-style
  assignments (JDBC ``?password=`` included), JWTs, kubeconfig and Docker registry credentials,
  GitHub fine-grained (``github_pat_``), OpenAI (``sk-``) and Hugging Face (``hf_``) tokens;
- regular expressions a matrix adds (``spec.redact``).

Each pattern runs only when a literal it cannot match without is in the text (derived from the
pattern itself, so the output is identical to running them all): most text holds none of them.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_hetero.usercache import cache_dir, installed_files

SECRET_ENV_GLOBS: tuple[str, ...] = ("*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*PASS", "*PASS_*",
                                     "*PASSPHRASE*", "*PWD*", "*_PAT", "*_PAT_*", "*KEY*", "*CREDENTIAL*", "*AUTH*",
                                     "*DSN*", "*WEBHOOK*", "*PRIVATE*", "*COOKIE*", "*SESSION*")
"""Environment names (globs, matched on the upper-cased name) whose values are secrets."""
NOT_SECRET_ENV: frozenset[str] = frozenset({"PWD", "OLDPWD", "HETERO_REDACT_ENV", "HETERO_PASS_ENV",
                                            "SSH_AUTH_SOCK", "XDG_SESSION_ID", "XDG_SESSION_TYPE",
                                            "XDG_SESSION_CLASS", "DBUS_SESSION_BUS_ADDRESS"})
"""Names the globs catch that hold no secret (the working folder, agent socket paths…)."""
MIN_SECRET_LEN = 6
"""Environment values shorter than this are not treated as secrets (``KEY=1`` would redact every '1')."""
_ORDINARY = re.compile(r"[-+]?[\d.,:_ ]*|true|false|yes|no|on|off|none|null", re.IGNORECASE)
"""Values that read as ordinary data (numbers, versions, times, booleans): never treated as secrets."""

_VALUE = (r"""(?!\[REDACTED)(?!(?:true|false|null|none)\b)(?![-+]?\d+(?:\.\d+)?(?:[\s,;&"'}\]]|$))"""
          r"""[^\s"'&;,{}\[\]<>\\]{4,}""")
"""A secret value after a key: not already redacted, not a plain number, boolean or null, not a JSON
object or array, up to a delimiter (so redacting JSON text keeps it JSON)."""

PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("private-key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
                               r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.DOTALL),
     "[REDACTED:private-key]"),
    # the end of a key block whose beginning a head/tail truncation cut off
    ("private-key", re.compile(r"\A[A-Za-z0-9+/=\s]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"),
     "[REDACTED:private-key]"),
    ("kubeconfig", re.compile(r"((?:client-key-data|client-certificate-data|token|password)\s*:\s*)"
                              r"(?!\[REDACTED)[\"']?[^\s\"']{8,}[\"']?"), r"\1[REDACTED:kubeconfig]"),
    ("registry-auth", re.compile(r"(\"(?:auth|identitytoken|password)\"\s*:\s*\")(?!\[REDACTED)[^\"]+(\")"),
     r"\1[REDACTED:registry-auth]\2"),
    ("bearer-token", re.compile(r"(?i)(bearer\s+)(?!\[REDACTED)[A-Za-z0-9\-._~+/]{8,}=*"),
     r"\1[REDACTED:bearer-token]"),
    ("authorization", re.compile(r"(?i)(authorization\s*[:=]\s*[\"']?(?:basic|bearer|token|digest|negotiate|apikey)"
                                 r"\s+)(?!\[REDACTED)[A-Za-z0-9\-._~+/:]{4,}=*"), r"\1[REDACTED:authorization]"),
    ("api-key-header", re.compile(r"(?i)((?:x-)?(?:api|auth|access)[-_]?(?:key|token)\s*:\s*)"
                                  r"(?!\[REDACTED)[^\s\"',;]{4,}"),
     r"\1[REDACTED:api-key-header]"),
    ("assignment", re.compile(r"(?i)((?<![A-Za-z0-9])(?:\\?[\"'])?(?:[a-z0-9]+[_-])*(?:password|passwd|passphrase|"
                              r"pwd|secret|token|api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|"
                              r"client[_-]?secret)(?:\\?[\"'])?\s*(?:=|:)\s*(?:\\?[\"'])?)" + _VALUE),
     r"\1[REDACTED:assignment]"),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"), "[REDACTED:jwt]"),
    ("github-pat", re.compile(r"github_pat_[A-Za-z0-9_]{20,}"), "[REDACTED:github-pat]"),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), "[REDACTED:openai-key]"),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{20,}"), "[REDACTED:huggingface-token]"),
    # anchored on the literal ':/' (not on the scheme, whose open-ended run made the search
    # quadratic on long token-like text: 100 kB of one word took 5 s); ':/' also catches a URL a
    # path join collapsed ('https:/svc:pw@host'), and the user may be empty ('redis://:pw@')
    ("url-credentials", re.compile(r"(:/{1,3})(?!\[REDACTED)[^/\s:@\"'<>]*:[^/\s@\"'<>]+@"),
     r"\1[REDACTED:url-credentials]@"),
)
"""Our own patterns as ``(kind, regex, replacement)``, applied in this order after the detect-secrets ones."""

SKIPPED_PLUGINS: frozenset[str] = frozenset({"Public IP (ipv4)", "JSON Web Token", "Private Key",
                                          "Basic Auth Credentials"})
"""detect-secrets plugins not used: node IPs are evidence, not secrets; its JWT pattern keeps the
signature; its private-key patterns match the header line only (:data:`PATTERNS` remove the block); its
URL-credentials pattern misses the user and an empty user (:data:`PATTERNS` has one)."""


def _cache_dir() -> Path:
    return cache_dir()


def _installed(package: str) -> str | None:
    """16 hex digits naming the installed files of ``package`` (:func:`pytest_hetero.usercache.installed_files`)."""
    found = installed_files(package)
    return found[:16] if found else None


def _write_cache(cache: Path, value: Any) -> None:
    """Write ``value`` as JSON to ``cache`` whole (a temporary file renamed); a read-only home is ignored."""
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(value), "utf-8")
        tmp.replace(cache)
    except OSError:
        pass


def _plugin_patterns() -> list[tuple[str, str, int]]:
    """``(secret type, regex source, flags)`` of every detect-secrets regular-expression plugin
    (cached per installed detect-secrets, :func:`_installed`, under ``$XDG_CACHE_HOME/pytest-hetero``);
    empty when detect-secrets is not installed."""
    installed = _installed("detect_secrets")
    if installed is None:
        return []
    cache = _cache_dir() / f"detect-secrets-{installed}-patterns.json"
    try:
        cached = json.loads(cache.read_text("utf-8"))
        return [(str(t), str(p), int(f)) for t, p, f in cached]
    except (OSError, ValueError, TypeError):
        pass
    found = _load_plugins()
    _write_cache(cache, found)
    return found


def _guards(sources: list[tuple[str, int]]) -> list[tuple[bool, tuple[str, ...] | None]]:
    """For each ``(regex source, flags)``: (whether it compiles, its :func:`required_literals`). Cached
    under ``$XDG_CACHE_HOME/pytest-hetero`` per Python version and list of sources: deriving them
    parses every pattern (20-40 ms of each gate command), and a run then compiles only the patterns
    whose literals appear (:class:`_Rule`)."""
    import hashlib

    key = hashlib.sha256(json.dumps([sys.version, sources]).encode()).hexdigest()[:16]
    cache = _cache_dir() / f"redact-guards-{key}.json"
    try:
        cached = json.loads(cache.read_text("utf-8"))
        if len(cached) == len(sources):
            return [(bool(ok), None if needs is None else tuple(str(n) for n in needs)) for ok, needs in cached]
    except (OSError, ValueError, TypeError):
        pass
    found: list[tuple[bool, tuple[str, ...] | None]] = []
    for source, flags in sources:
        try:
            rx = re.compile(source, flags)
        except re.error:
            found.append((False, None))
            continue
        found.append((True, required_literals(rx)))
    _write_cache(cache, found)
    return found


def _load_plugins() -> list[tuple[str, str, int]]:
    import importlib
    import pkgutil

    import detect_secrets.plugins as plugins
    from detect_secrets.plugins.base import RegexBasedDetector

    found: list[tuple[str, str, int]] = []
    for info in sorted(pkgutil.iter_modules(plugins.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{plugins.__name__}.{info.name}")
        for cls in vars(module).values():
            if isinstance(cls, type) and issubclass(cls, RegexBasedDetector) and cls.__module__ == module.__name__ \
                    and cls is not RegexBasedDetector:
                patterns: Iterable[re.Pattern[str]] = cls.denylist  # type: ignore[assignment]
                found += [(str(cls.secret_type), p.pattern, p.flags) for p in patterns]
    return found


def required_literals(pattern: re.Pattern[str]) -> tuple[str, ...] | None:
    """Lower-cased literals one of which every match of ``pattern`` contains (a run of ≥ 2 literal
    characters in a required position, or one per alternative of a required branch); None when
    none can be told. A text without any of them (lower-cased) cannot match."""
    import importlib

    sre_parse: Any = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - any parser surprise just means no guard
        return None
    found = _literals(list(parsed), sre_parse)
    return tuple(x.lower() for x in found) if found else None


def _literals(items: list[Any], sre: Any) -> tuple[str, ...] | None:
    """See :func:`required_literals`; ``items`` is a parsed sequence of ``(op, argument)``."""
    run: list[str] = []
    for op, av in items:
        if op is sre.LITERAL:
            run.append(chr(av))
            continue
        if len(run) >= 2:
            return ("".join(run),)
        run = []
        inner: tuple[str, ...] | None = None
        if op is sre.SUBPATTERN:
            inner = _literals(list(av[-1]), sre)
        elif op is sre.BRANCH:
            alternatives = [_literals(list(alt), sre) for alt in av[1]]
            if all(alternatives):
                inner = tuple(x for alt in alternatives for x in alt or ())
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and av[0] >= 1:
            inner = _literals(list(av[2]), sre)
        if inner:
            return inner
    return ("".join(run),) if len(run) >= 2 else None


class _Rule:
    """One pattern: its ``kind``, replacement ``repl``, guard literals ``needs`` (:func:`required_literals`)
    and :attr:`rx`, compiled when first needed (in most runs no text holds most patterns' literals)."""

    __slots__ = ("kind", "repl", "needs", "_source", "_flags", "_rx")

    def __init__(self, kind: str, source: str, flags: int, repl: Any, needs: tuple[str, ...] | None,
                 rx: re.Pattern[str] | None = None) -> None:
        self.kind, self.repl, self.needs = kind, repl, needs
        self._source, self._flags, self._rx = source, flags, rx

    @property
    def rx(self) -> re.Pattern[str]:
        """The compiled regular expression."""
        if self._rx is None:
            self._rx = re.compile(self._source, self._flags)
        return self._rx


_COMPILED: list[_Rule] | None = None


def _compiled() -> list[_Rule]:
    """Every pattern as a :class:`_Rule`, detect-secrets' first, then :data:`PATTERNS` (built once;
    a detect-secrets pattern that does not compile is left out)."""
    global _COMPILED
    if _COMPILED is None:
        plugins = [(t, source, flags) for t, source, flags in _plugin_patterns() if t not in SKIPPED_PLUGINS]
        ours = [(rx.pattern, rx.flags) for _, rx, _ in PATTERNS]
        guards = _guards([(source, flags) for _, source, flags in plugins] + ours)
        out: list[_Rule] = []
        for (secret_type, source, flags), (ok, needs) in zip(plugins, guards, strict=False):
            if ok:
                kind = "ds-" + re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")
                out.append(_Rule(kind, source, flags, _whole(kind), needs))
        out += [_Rule(kind, rx.pattern, rx.flags, repl, needs, rx)
                for (kind, rx, repl), (_, needs) in zip(PATTERNS, guards[len(plugins):], strict=True)]
        _COMPILED = out
    return _COMPILED


def _whole(kind: str) -> Any:
    """Replacement for a detect-secrets match: the whole match, keeping delimiters it consumed at its ends."""
    marker = f"[REDACTED:{kind}]"

    def replace(match: re.Match[str]) -> str:
        text = match.group(0)
        body = text.strip(" \t\r\n\"'=:")
        start = text.find(body) if body else 0
        return text[:start] + marker + text[start + len(body):]

    return replace


def secret_value(name: str, value: str) -> bool:
    """True when ``value`` of environment variable ``name`` is treated as a secret by its value alone
    (the name is judged by the globs): long enough and not ordinary data."""
    return name not in NOT_SECRET_ENV and len(value) >= MIN_SECRET_LEN and not _ORDINARY.fullmatch(value.strip())


SHORT_TEXT = 256
"""Texts up to this many characters have their redaction remembered (per Redactor)."""
SHORT_TEXTS_KEPT = 65536
"""Most remembered texts per Redactor (then forgotten all at once)."""


class Redactor:
    """Replaces secrets in text and in nested JSON-like data. Build once per run.

    ``env``: the environment to take secret values from (default ``os.environ``);
    ``extra``: (kind, regex) pairs from the matrix. Raises re.error for a bad regex.
    """

    def __init__(self, env: Mapping[str, str] | None = None, extra: Iterable[tuple[str, str]] = ()) -> None:
        env = os.environ if env is None else env
        globs = SECRET_ENV_GLOBS + tuple(g.strip() for g in env.get("HETERO_REDACT_ENV", "").split(",") if g.strip())
        values = {(name, value) for name, value in env.items()
                  if secret_value(name, value) and any(fnmatch.fnmatchcase(name.upper(), g) for g in globs)}
        # the same secret as a JSON string spells it (outputs.json, logs of JSON): quotes, backslashes,
        # control and non-ASCII characters escaped
        values |= {(name, spelled) for name, value in values
                   for spelled in (json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1])}
        # longest first so a secret containing another is replaced whole
        self._literals = sorted(values, key=lambda nv: -len(nv[1]))
        self._patterns = _compiled()
        self._needles = tuple(sorted({n for rule in self._patterns for n in rule.needs or ()}))
        self._extra = [(kind, re.compile(rx)) for kind, rx in extra]
        self._seen: dict[str, str] = {}

    def text(self, value: str, guard: bool = True) -> str:
        """Return ``value`` with every known secret replaced by ``[REDACTED:<kind>]``. ``guard=False``
        runs every pattern whatever the text holds (same output, slower: for tests and benchmarks).
        Short texts (evidence keys, node ids, kinds, which repeat on every item) are remembered."""
        if not value:
            return value
        short = len(value) <= SHORT_TEXT and guard
        if short:
            known = self._seen.get(value)
            if known is not None:
                return known
        redacted = self._redact(value, guard)
        if short:
            if len(self._seen) >= SHORT_TEXTS_KEPT:
                self._seen.clear()
            self._seen[value] = redacted
        return redacted

    def _redact(self, value: str, guard: bool) -> str:
        for name, secret in self._literals:
            if secret in value:
                value = value.replace(secret, f"[REDACTED:env:{name}]")
        # which guard literals the text holds, looked up once for all patterns (each holds a few of them)
        present = self._present(value) if guard else set()
        for rule in self._patterns:
            if guard and rule.needs is not None and present.isdisjoint(rule.needs):
                continue
            value, count = rule.rx.subn(rule.repl, value)
            if guard and count:
                present = self._present(value)
        for kind, pattern in self._extra:
            value = pattern.sub(f"[REDACTED:{kind}]", value)
        return value

    def _present(self, value: str) -> set[str]:
        """The guard literals (lower case) that ``value`` holds, case-insensitively."""
        lowered = value.lower()
        return {n for n in self._needles if n in lowered}

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
        """Redact text content in UTF-8, or in any encoding ``json.loads`` accepts (UTF-16 and UTF-32,
        with or without a byte-order mark), re-encoded in the same encoding; content that is none
        of them (binary) is returned unchanged."""
        encoding = "utf-8"
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            encoding = json.detect_encoding(value)
            if encoding in ("utf-8", "utf-8-sig"):
                return value
            try:
                text = value.decode(encoding)
            except UnicodeDecodeError:
                return value
        redacted = self.text(text)
        if redacted == text:
            return value
        return redacted.encode(encoding)
