"""Redaction of secrets before anything is written to evidence, artifacts, logs or reports.

Removed, each replaced by ``[REDACTED:<kind>]`` so a reader knows what was there:

- values of environment variables whose names look secret (:data:`SECRET_ENV_GLOBS`, plus names
  added with ``HETERO_REDACT_ENV``, comma-separated globs), as written, as a JSON string spells
  them and as a reader sees them. Values that cannot be told from ordinary data (shorter than
  :data:`MIN_SECRET_LEN`, numbers, versions, booleans: ``MAX_TOKENS=1024``) are left alone;
- the token formats of `detect-secrets <https://github.com/Yelp/detect-secrets>`_ (its regular
  expression plugins: GitHub, GitLab, AWS, Slack tokens and webhooks, Stripe, PyPI, npm, SendGrid,
  Twilio, Azure, IBM…), kind ``ds-<plugin secret type>``, rewritten for RE2 (:func:`to_re2`);
- structures the gate sees that those plugins do not cover (:data:`PATTERNS`): PEM private keys
  (a block cut by a head/tail truncation too), ``user:password@`` in a URL (also after a path
  join turned ``://`` into ``:/``, and with an empty user as in ``redis://:pw@``), Authorization
  headers (Bearer, Basic…), ``X-Api-Key:``-style headers, ``password=``/``"api_key":``-style
  assignments (JDBC ``?password=`` included), JWTs, kubeconfig and Docker registry credentials,
  GitHub fine-grained (``github_pat_``), OpenAI (``sk-``), Hugging Face (``hf_``) and npm
  (``npm_``, anywhere) tokens, ``.npmrc`` ``_auth``/``_authToken``/``_password`` of any registry;
- regular expressions a matrix adds (``spec.redact``).

What a reader sees is what is searched (:func:`reader_view`): JSON and Python escapes decoded (two
levels: JSON written as a string inside JSON), ANSI terminal sequences and :data:`INVISIBLE`
characters (zero-width, bidi controls, soft hyphen, BOM, C0/C1 controls…) removed; bytes are read
as UTF-16/UTF-32 when they say so, and as UTF-8 with bytes that are not kept as they are
(:meth:`Redactor.bytes`). Each secret found is replaced where it is written, span by span: the rest
of the text stays as it was, and a JSON document is redacted value by value (keys included), so it
stays JSON. Every pattern runs with RE2 (``google-re2``): matching is linear in the text, whatever
the text (a backtracking engine spent 52 s on 24 kB crafted for detect-secrets' npm pattern).
Each pattern runs only when a literal it cannot match without is in the text (one RE2 set pass
finds them): most text holds none of them.
"""

from __future__ import annotations

import builtins
import fnmatch
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
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

_VALUE = r"""[^\s"'&;,{}\[\]<>\\]{4,}"""
"""A secret value after a key, up to a delimiter (so redacting JSON text keeps it JSON); a value that
is already redacted or ordinary data (a plain number, boolean or null) is left (:func:`_ordinary_value`)."""

PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("private-key", re.compile(r"(?P<s>-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
                               r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z))", re.DOTALL),
     "[REDACTED:private-key]"),
    # the end of a key block whose beginning a head/tail truncation cut off
    ("private-key", re.compile(r"\A(?P<s>[A-Za-z0-9+/=\s]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)"),
     "[REDACTED:private-key]"),
    # the value only: an enclosing quote stays (a kubeconfig embedded in JSON stays JSON)
    ("kubeconfig", re.compile(r"(?:client-key-data|client-certificate-data|token|password)\s*:\s*[\"']?"
                              r"(?P<s>[^\s\"']{8,})"), "[REDACTED:kubeconfig]"),
    ("registry-auth", re.compile(r"\"(?:auth|identitytoken|password)\"\s*:\s*\"(?P<s>[^\"]+)\""),
     "[REDACTED:registry-auth]"),
    ("bearer-token", re.compile(r"(?i)bearer\s+(?P<s>[A-Za-z0-9\-._~+/]{8,}=*)"),
     "[REDACTED:bearer-token]"),
    ("authorization", re.compile(r"(?i)authorization\s*[:=]\s*[\"']?(?:basic|bearer|token|digest|negotiate|apikey)"
                                 r"\s+(?P<s>[A-Za-z0-9\-._~+/:]{4,}=*)"), "[REDACTED:authorization]"),
    ("api-key-header", re.compile(r"(?i)(?:x-)?(?:api|auth|access)[-_]?(?:key|token)\s*:\s*(?P<s>[^\s\"',;]{4,})"),
     "[REDACTED:api-key-header]"),
    ("assignment", re.compile(r"(?i)(?:^|[^A-Za-z0-9])(?:\\?[\"'])?(?:[a-z0-9]+[_-])*(?:password|passwd|passphrase|"
                              r"pwd|secret|token|api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|"
                              r"client[_-]?secret)(?:\\?[\"'])?\s*(?:=|:)\s*(?:\\?[\"'])?(?P<s>" + _VALUE + ")"),
     "[REDACTED:assignment]"),
    ("jwt", re.compile(r"\b(?P<s>eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,})"), "[REDACTED:jwt]"),
    ("github-pat", re.compile(r"(?P<s>github_pat_[A-Za-z0-9_]{20,})"), "[REDACTED:github-pat]"),
    ("openai-key", re.compile(r"\b(?P<s>sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})"), "[REDACTED:openai-key]"),
    ("huggingface-token", re.compile(r"\b(?P<s>hf_[A-Za-z0-9]{20,})"), "[REDACTED:huggingface-token]"),
    # npm access tokens wherever they are written (detect-secrets' plugin sees `.npmrc` lines only)
    ("npm-token", re.compile(r"(?P<s>npm_[A-Za-z0-9]{36,})"), "[REDACTED:npm-token]"),
    # .npmrc credentials of any registry: `_authToken=`, `_auth=` (base64 user:password), `_password=`
    ("npmrc-auth", re.compile(r"(?i):_(?:authToken|auth|password)\s*=\s*[\"']?(?P<s>[^\s\"']{4,})"),
     "[REDACTED:npmrc-auth]"),
    # anchored on the literal ':/' (not on the scheme, whose open-ended run made a backtracking search
    # quadratic on long token-like text); ':/' also catches a URL a path join collapsed
    # ('https:/svc:pw@host'), and the user may be empty ('redis://:pw@')
    ("url-credentials", re.compile(r":/{1,3}(?P<s>[^/\s:@\"'<>]*:[^/\s@\"'<>]+)@"),
     "[REDACTED:url-credentials]"),
)
"""Our own patterns as ``(kind, regex, replacement)``, applied after the detect-secrets ones. Each
names the secret part ``s`` (what is replaced by ``[REDACTED:<kind>]``); they are written in the
common subset of Python's and RE2's syntax (``\\Z`` becomes RE2's ``\\z``), and run with RE2
(linear time). The third element is the marker written in its place."""

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


_LEAD = r"(?:(?<=\W)|(?<=^))"
_TRAIL = r"(?!\w)"


def to_re2(source: str, flags: int) -> str:
    """``source`` (a Python regular expression compiled with ``flags``) in RE2's syntax, the secret
    part named ``s`` (the whole match unless the source names it). Look-arounds detect-secrets
    writes are rewritten to consuming ones outside ``s`` (a leading ``(?<=\\W)|(?<=^)`` becomes
    ``(?:^|\\W)``, a trailing ``(?!\\w)`` becomes ``(?:\\W|$)``, ``(?![class])`` inside becomes
    ``(?:[^class]|$)``), repetition bounds over RE2's 1000
    become open, ``\\Z`` becomes ``\\z`` and flags become inline ones. Whatever else RE2 refuses
    stays as it is (:func:`_compile` then raises)."""
    core, lead, trail = source, "", ""
    if core.startswith(_LEAD):
        core, lead = core[len(_LEAD):], r"(?:^|\W)"
    if core.endswith(_TRAIL):
        core, trail = core[:-len(_TRAIL)], r"(?:\W|$)"
    core = re.sub(r"\{(\d+),(\d+)\}", lambda m: m.group(0) if int(m.group(2)) <= 1000 else f"{{{m.group(1)},}}",
                  core)
    core = re.sub(r"(?<!\\)((?:\\\\)*)\\Z", r"\1\\z", core)
    # a negative look-ahead of one character class: that class's complement or the end, consumed
    core = re.sub(r"\(\?!\[((?:[^\]\\]|\\.)+)\]\)", r"(?:[^\1]|$)", core)
    inline = "".join(flag for bit, flag in ((re.IGNORECASE, "i"), (re.DOTALL, "s"), (re.MULTILINE, "m"))
                     if flags & bit)
    body = core if "(?P<s>" in core else f"(?P<s>{core})"
    return (f"(?{inline})" if inline else "") + lead + body + trail


def _re2_options() -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False
    options.max_mem = 64 << 20  # room for the DFA of the wider patterns on large texts
    return options


class _Linear:
    """A compiled RE2 pattern (linear-time matching, no backtracking) over UTF-8 bytes, with the span
    of its group ``s``."""

    __slots__ = ("_rx", "_group")

    def __init__(self, source: str, flags: int) -> None:
        import re2

        self._rx: Any = re2.compile(to_re2(source, flags).encode("utf-8"), _re2_options())
        index = self._rx.groupindex
        self._group: int = index["s"] if "s" in index else index[b"s"]  # bytes patterns name groups in bytes

    def spans(self, text: bytes) -> Iterator[tuple[int, int]]:
        """``(start, end)`` byte offsets of each secret part in ``text``, leftmost first, not overlapping."""
        group = self._group
        for match in self._rx.finditer(text):
            yield match.span(group)


class _Rule:
    """One pattern: its ``kind``, guard literals ``needs`` (:func:`required_literals`), whether a match
    is trimmed of delimiters at its ends (``trim``: detect-secrets' whole matches) and :attr:`rx`, compiled
    when first needed (in most runs no text holds most patterns' literals)."""

    __slots__ = ("kind", "needs", "trim", "_source", "_flags", "_rx", "_broken")

    def __init__(self, kind: str, source: str, flags: int, needs: tuple[str, ...] | None, trim: bool) -> None:
        self.kind, self.needs, self.trim = kind, needs, trim
        self._source, self._flags = source, flags
        self._rx: _Linear | None = None
        self._broken = False

    @property
    def re2_source(self) -> str:
        """The pattern as :attr:`rx` compiles it (:func:`to_re2` of its source and flags)."""
        return to_re2(self._source, self._flags)

    @property
    def rx(self) -> _Linear | None:
        """The compiled pattern (RE2); None when RE2 cannot compile it (:func:`untranslatable`)."""
        if self._rx is None and not self._broken:
            try:
                self._rx = _Linear(self._source, self._flags)
            except ImportError:
                raise
            except Exception:  # noqa: BLE001 - re2.error: never run it with a backtracking engine
                self._broken = True
        return self._rx


_COMPILED: list[_Rule] | None = None


def _compiled() -> list[_Rule]:
    """Every pattern as a :class:`_Rule`, detect-secrets' first, then :data:`PATTERNS` (built once;
    a detect-secrets pattern that neither Python nor RE2 can compile is left out; see
    :func:`untranslatable`)."""
    global _COMPILED
    if _COMPILED is None:
        plugins = [(t, source, flags) for t, source, flags in _plugin_patterns() if t not in SKIPPED_PLUGINS]
        ours = [(rx.pattern, rx.flags) for _, rx, _ in PATTERNS]
        guards = _guards([(source, flags) for _, source, flags in plugins] + ours)
        out: list[_Rule] = []
        for (secret_type, source, flags), (ok, needs) in zip(plugins, guards, strict=False):
            if ok:
                kind = "ds-" + re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")
                out.append(_Rule(kind, source, flags, needs, True))
        out += [_Rule(kind, rx.pattern, rx.flags, needs, False)
                for (kind, rx, _), (_, needs) in zip(PATTERNS, guards[len(plugins):], strict=True)]
        _COMPILED = out
    return _COMPILED


def untranslatable() -> list[str]:
    """Sources of the patterns in use that RE2 cannot compile (each would be skipped): empty when
    every detect-secrets pattern and ours runs in linear time (the tests hold it so)."""
    return [rule._source for rule in _compiled() if rule.rx is None]


_DELIMITERS = b" \t\r\n\"'=:"
"""Characters a detect-secrets match may hold at its ends that are kept (the value is redacted, not its quotes)."""
_ORDINARY_VALUE = re.compile(rb"(?i)(?:true|false|null|none)\b|[-+]?\d+(?:\.\d+)?\Z")
"""An assignment's value that is ordinary data, not a secret."""
_MARK = b"[REDACTED"


def secret_value(name: str, value: str) -> bool:
    """True when ``value`` of environment variable ``name`` is treated as a secret by its value alone
    (the name is judged by the globs): long enough and not ordinary data."""
    return name not in NOT_SECRET_ENV and len(value) >= MIN_SECRET_LEN and not _ORDINARY.fullmatch(value.strip())


INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00, 0x08), (0x0B, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x34F, 0x34F), (0x600, 0x605), (0x61C, 0x61C),
    (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF9, 0xFFFB), (0xFFFE, 0xFFFF), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))
"""Characters a reader does not see, as inclusive code point ranges: C0/C1 controls but tab and
newline (a carriage return lets a terminal overwrite what came before, and renderings drop it),
soft hyphen, Arabic and Syriac format characters, combining grapheme joiner, Arabic letter mark,
Hangul fillers, Mongolian free variation selectors and vowel separator, zero-width space,
non-joiner and joiner, left-to-right and right-to-left marks, bidirectional embeddings, overrides
and isolates, word joiner and invisible operators, variation selectors, the byte-order mark
(zero-width no-break space), interlinear annotation marks, musical formatting characters, tag
characters and noncharacters: a superset of what any rendering removes
(:func:`pytest_hetero.reporting.view.printable`). A token split by one of them reads whole, so
secrets are searched for with them removed."""
INVISIBLE: str = "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" if hi > lo else re.escape(chr(lo))
                         for lo, hi in INVISIBLE_RANGES)
""":data:`INVISIBLE_RANGES` as the inside of a regular-expression character class."""
_INVISIBLE_RUN = re.compile(f"[{INVISIBLE}]+")
_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}"
                     r"|\\U[0-9a-fA-F]{8}|\\x[0-9a-fA-F]{2}|\\[\"'\\/nrtbf]")
"""Escapes a reader of JSON (``\\uXXXX``, surrogate pairs, ``\\"``…), Python (``\\xXX``, ``\\UXXXXXXXX``)
or C strings decodes: each becomes one character."""
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}
_TERMINAL = re.compile(r"\x1b\[[0-?]{0,64}[ -/]{0,16}[@-~]|\x1b\][^\x07\x1b]{0,2048}(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
"""ANSI escape sequences (CSI such as colours, OSC such as titles and links, two-character ones): a
terminal shows none of them."""
_SURROGATE = re.compile("[\ud800-\udfff]")
ESCAPE_ROUNDS = 2
"""Levels of escaping decoded (JSON written as a string inside JSON, as a registry auth often is)."""


def _unescape(match: re.Match[str]) -> str:
    text = match.group()
    kind = text[1]
    if kind in "uUx":
        if len(text) == 12:  # a surrogate pair
            high, low = int(text[2:6], 16), int(text[8:12], 16)
            return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        code = int(text[2:], 16)
        return chr(code) if code <= 0x10FFFF else "\ufffd"
    return _SIMPLE.get(kind, kind)


class _Stage:
    """One step from a text to what a reader sees: ``rx`` finds each change, each match becomes
    ``out`` characters (1: an escape decoded; 0: removed). Maps positions back (:meth:`map_back`)."""

    __slots__ = ("text", "rx", "out")

    def __init__(self, text: str, rx: re.Pattern[str], out: int) -> None:
        self.text, self.rx, self.out = text, rx, out

    def map_back(self, queries: list[list[int]]) -> None:
        """Rewrite ``queries`` (``[position in the view, role]``, sorted by position then role, role 0 the
        end of a span and 1 its start) in place to positions in :attr:`text`: a start goes to its first
        character (past removed ones), an end past its last (before removed ones); an escape is kept
        whole. One pass over the text, whatever the number of queries."""
        changes = self.rx.finditer(self.text)
        pending = next(changes, None)
        delta = 0
        for query in queries:
            position, role = query
            while pending is not None:
                start = pending.start()
                at = start - delta
                if at < position or (role == 1 and at == position and self.out == 0):
                    delta += pending.end() - start - self.out
                    pending = next(changes, None)
                    continue
                break
            if role == 1 and pending is not None and self.out == 1 and pending.start() - delta == position:
                query[0] = pending.start()
            else:
                query[0] = position + delta


def reader_view(text: str) -> tuple[str, list[_Stage]]:
    """What a reader of ``text`` sees: escapes decoded (:data:`ESCAPE_ROUNDS` levels), terminal escape
    sequences and :data:`INVISIBLE` characters removed; and the stages that lead there (empty when
    the view is the text)."""
    stages: list[_Stage] = []
    view = text
    for _ in range(ESCAPE_ROUNDS):
        if "\\" not in view:
            break
        decoded = _ESCAPE.sub(_unescape, view)
        if decoded == view:
            break
        stages.append(_Stage(view, _ESCAPE, 1))
        view = decoded
    if "\x1b" in view:
        stripped = _TERMINAL.sub("", view)
        if len(stripped) != len(view):
            stages.append(_Stage(view, _TERMINAL, 0))
            view = stripped
    if _invisible_found(view):
        stripped = _INVISIBLE_RUN.sub("", view)
        if len(stripped) != len(view):
            stages.append(_Stage(view, _INVISIBLE_RUN, 0))
            view = stripped
    return view, stages


_INVISIBLE_RE2: Any = None


def _needle_pattern(needle: str) -> bytes:
    """The RE2 pattern of a guard literal, matched case-insensitively: the same in :meth:`Redactor._present`'s set and
    in the pre-screen's (:meth:`Redactor._screen_set`), so a text the screen passes holds no guard literal the scan
    would find."""
    return b"(?i)" + re.escape(needle).encode("utf-8")


def _invisible_found(text: str) -> bool:
    """Whether ``text`` holds an :data:`INVISIBLE` character (one RE2 pass)."""
    global _INVISIBLE_RE2
    if _INVISIBLE_RE2 is None:
        import re2

        _INVISIBLE_RE2 = re2.compile(f"[{INVISIBLE}]".encode(), _re2_options())
    return _INVISIBLE_RE2.search(text.encode("utf-8", "surrogatepass")) is not None


SHORT_TEXT = 256
"""Texts up to this many characters have their redaction remembered (per Redactor)."""
SHORT_TEXTS_KEPT = 1024
"""Texts remembered per Redactor before those not looked up since the last time are forgotten (so at most twice
this many): the keys, kinds and node ids items repeat stay remembered, while each item's own times and paths,
never looked up again, are not kept for the rest of the run (they were ~1.5 KB per item, held to the end)."""


class Redactor:
    """Replaces secrets in text, bytes and nested JSON-like data. Build once per run.

    ``env``: the environment to take secret values from (default ``os.environ``);
    ``extra``: (kind, regex) pairs from the matrix, run with RE2 when it can compile them (else with
    Python's ``re``: the matrix author's own patterns). Raises re.error for a bad regex.

    A secret is searched for in the text as written and as a reader sees it (:func:`reader_view`:
    escapes decoded, invisible characters and terminal sequences removed); each span found is
    replaced in the text as written by ``[REDACTED:<kind>]``, overlapping spans as one (the kind of
    the earliest rule: environment values, detect-secrets, :data:`PATTERNS`, the matrix's). Text
    outside the spans is kept as it was, invisible characters included.
    """

    def __init__(self, env: Mapping[str, str] | None = None, extra: Iterable[tuple[str, str]] = ()) -> None:
        try:
            import re2  # noqa: F401 - fail here, loudly, rather than redact nothing
        except ImportError as exc:
            raise ImportError("pytest-hetero redacts with RE2: install google-re2 (pip install google-re2)") from exc
        env = os.environ if env is None else env
        globs = SECRET_ENV_GLOBS + tuple(g.strip() for g in env.get("HETERO_REDACT_ENV", "").split(",") if g.strip())
        values = {(name, value) for name, value in env.items()
                  if secret_value(name, value) and any(fnmatch.fnmatchcase(name.upper(), g) for g in globs)}
        # the same secret as a JSON string spells it (outputs.json, logs of JSON): quotes, backslashes,
        # control and non-ASCII characters escaped; and as a reader sees it
        values |= {(name, spelled) for name, value in values
                   for spelled in (json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
                                   reader_view(value)[0])}
        # longest first so a secret containing another is replaced whole
        self._literals = sorted(((n, v) for n, v in values if v), key=lambda nv: -len(nv[1]))
        self._patterns = _compiled()
        self._needles = tuple(sorted({n for rule in self._patterns for n in rule.needs or ()}))
        self._unguarded = tuple((rank, rule) for rank, rule in enumerate(self._patterns) if rule.needs is None)
        """The rules that run whatever the text holds, with their ranks: all that run on a text holding no guard
        literal (most texts: the other rules' loop was most of a short text's cost)."""
        self._needle_set: Any = None
        self._extra: list[tuple[str, Any]] = [(kind, _extra_pattern(rx)) for kind, rx in extra]
        self._seen: dict[str, str] = {}
        self._screen: Any = None
        """One RE2 set of everything that makes a plain text worth scanning (:meth:`_plain_clean`); False when
        it could not be built (every text is then scanned)."""
        self._older: dict[str, str] = {}

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
            known = self._older.get(value)
            if known is not None:  # still in use: kept when the older texts are forgotten
                self._remember(value, known)
                return known
        redacted = self._redact(value, guard)
        if short:
            self._remember(value, redacted)
        return redacted

    def _remember(self, value: str, redacted: str) -> None:
        """Remember a short text's redaction; when :data:`SHORT_TEXTS_KEPT` are remembered, the texts not looked
        up since the previous time are forgotten (two generations: the keys and kinds every item repeats stay, a
        time or a path seen once goes)."""
        if len(self._seen) >= SHORT_TEXTS_KEPT:
            self._older, self._seen = self._seen, {}
        self._seen[value] = redacted

    def found(self, value: str) -> bool:
        """True when ``value`` holds a secret :meth:`text` would replace."""
        return bool(self._spans(value, True))

    def _redact(self, value: str, guard: bool) -> str:
        spans = self._spans(value, guard)
        if not spans:
            return value
        out: list[str] = []
        last = 0
        for start, end, kind in spans:
            out.append(value[last:start])
            out.append(f"[REDACTED:{kind}]")
            last = end
        out.append(value[last:])
        return "".join(out)

    def _spans(self, value: str, guard: bool) -> list[tuple[int, int, str]]:
        """Merged ``(start, end, kind)`` of every secret in ``value`` as a reader sees it (mapped back to
        ``value``), in order, not overlapping."""
        if guard and self._plain_clean(value):
            return []
        view, stages = reader_view(value)
        found = self._scan(view, guard)
        if not found:
            return []
        if stages:
            found = _map_spans(found, stages)
        found.sort(key=lambda s: (s[0], s[2]))
        merged: list[list[Any]] = []
        for start, end, rank, kind in found:
            if merged and start < merged[-1][1]:
                top = merged[-1]
                top[1] = max(top[1], end)
                if rank < top[2]:
                    top[2], top[3] = rank, kind
                continue
            merged.append([start, end, rank, kind])
        return [(start, end, kind) for start, end, _, kind in merged]

    def _scan(self, view: str, guard: bool) -> list[tuple[int, int, int, str]]:
        """``(start, end, rank, kind)`` (character offsets) of each match in ``view``; ``rank`` orders
        the rules. The patterns run with RE2 over the UTF-8 bytes of the view (a lone surrogate, left by
        bytes that were not UTF-8, reads as ``?``)."""
        found: list[tuple[int, int, int, str]] = []
        for name, secret in self._literals:
            at = view.find(secret)
            while at >= 0:
                found.append((at, at + len(secret), -1, f"env:{name}"))
                at = view.find(secret, at + len(secret))
        rank = len(self._patterns)
        encoded = view.encode("utf-8", "replace")
        spans: list[tuple[int, int, int, str]] = []
        for kind, pattern in self._extra:
            if isinstance(pattern, re.Pattern):  # one RE2 cannot compile: the matrix author's choice
                found += [(m.start(), m.end(), rank, kind) for m in pattern.finditer(view) if m.end() > m.start()]
            else:
                spans += [(m.start(), m.end(), rank, kind) for m in pattern.finditer(encoded) if m.end() > m.start()]
        present = self._present(encoded) if guard else set()
        for rank, rule in self._unguarded if guard and not present else enumerate(self._patterns):
            if guard and rule.needs is not None and present.isdisjoint(rule.needs):
                continue
            rx = rule.rx
            if rx is None:
                continue
            for start, end in rx.spans(encoded):
                span = _keep(encoded, start, end, rule)
                if span is not None:
                    spans.append((span[0], span[1], rank, rule.kind))
        if spans and len(encoded) != len(view):
            spans = _char_spans(encoded, spans)
        return found + spans

    def _plain_clean(self, value: str) -> bool:
        """True when the guarded scan of ``value`` (:meth:`_scan`) would find nothing, told in one RE2 set pass:
        ``value`` is short (:data:`SHORT_TEXT`: a set pass that ran out of DFA memory would answer "no match") ASCII
        with no backslash and no ESC, and holds no :data:`INVISIBLE` character (so its reader's
        view is itself), no environment secret, and neither a guard literal (no guarded rule runs) nor a match of
        a rule that runs unguarded; and the matrix adds no pattern. False: scan it (most unique texts of an item's
        evidence, times, names and paths, are told clean here for a fifth of a scan's cost)."""
        if len(value) > SHORT_TEXT or self._extra or not value.isascii() or "\\" in value or "\x1b" in value:
            return False
        for _, secret in self._literals:
            if secret in value:
                return False
        screen = self._screen
        if screen is None:
            screen = self._screen = self._screen_set()
        return screen is not False and not screen.Match(value.encode("ascii"))

    def _screen_set(self) -> Any:
        """The RE2 set :meth:`_plain_clean` matches: the :data:`INVISIBLE` class, each guard literal
        (:func:`_needle_pattern`, as :meth:`_present` adds it) and each unguarded rule's pattern (as :class:`_Linear`
        compiles it, same options); False when a rule cannot be compiled or the set cannot be built."""
        import re2

        try:
            screen = re2.Set.SearchSet(_re2_options())
            screen.Add(f"[{INVISIBLE}]".encode())
            for needle in self._needles:
                screen.Add(_needle_pattern(needle))
            for _, rule in self._unguarded:
                if rule.rx is None:  # never run by the scan either
                    continue
                screen.Add(rule.re2_source.encode("utf-8"))
            screen.Compile()
        except Exception:  # noqa: BLE001 - re2.error: every text is scanned as before
            return False
        return screen

    def _present(self, value: bytes) -> set[str]:
        """The guard literals (lower case) that ``value`` holds, case-insensitively (one RE2 pass)."""
        if not self._needles:
            return set()
        if self._needle_set is None:
            import re2

            self._needle_set = re2.Set.SearchSet(_re2_options())
            for needle in self._needles:
                self._needle_set.Add(_needle_pattern(needle))
            self._needle_set.Compile()
        return {self._needles[i] for i in self._needle_set.Match(value) or ()}

    def data(self, value: Any) -> Any:
        """Redact every string in nested dicts/lists/tuples, keys included (a key that becomes one
        already there gets ``~2``, ``~3``… so no value is lost); other values unchanged."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                if isinstance(key, str):
                    redacted = self.text(key)
                    if redacted != key:
                        key = _unique(redacted, out)
                out[key] = self.data(item)
            return out
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value

    def bytes(self, value: bytes) -> bytes:
        """Redact the text in ``value`` as a reader's tools decode it: UTF-16 or UTF-32 (with or
        without a byte-order mark, as ``json.detect_encoding`` tells), else UTF-8, bytes that are not
        UTF-8 kept as they are around the text (a viewer shows them as replacement characters). A
        JSON document is redacted value by value (keys included) and written back as JSON in the
        same encoding, so it stays valid JSON; other text is redacted span by span. Bytes holding
        no secret come back unchanged (the same object)."""
        text, encoding, errors = _decode(value)
        out = self._bytes_as(value, text, encoding, errors)
        if encoding != "utf-8":  # read as UTF-8 too, as a tool that ignores the byte-order mark would
            out = self._bytes_as(out, out.decode("utf-8", "surrogateescape"), "utf-8", "surrogateescape")
        return out

    def _bytes_as(self, value: builtins.bytes, text: str, encoding: str, errors: str) -> builtins.bytes:
        """:meth:`bytes` for ``value`` read as ``text`` in ``encoding``."""
        if not self.found(text):
            return value
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        try:
            document = json.loads(text[len(bom):], object_pairs_hook=_pairs)
        except (ValueError, RecursionError):
            document = _NOT_JSON
        if isinstance(document, (dict, list)):
            indent = 2 if "\n" in text.strip() else None
            redacted = bom + json.dumps(self.data(document), ensure_ascii=False, indent=indent)
        else:
            redacted = self.text(text)
        return redacted.encode(encoding, errors)


_NOT_JSON = object()


class _Duplicate(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Duplicate("repeated key")  # written back as text: merging keys would change the document
    return out


def _unique(key: str, taken: Mapping[Any, Any]) -> str:
    if key not in taken:
        return key
    n = 2
    while f"{key}~{n}" in taken:
        n += 1
    return f"{key}~{n}"


def _decode(value: bytes) -> tuple[str, str, str]:
    """``(text, encoding, errors)`` of ``value`` as a reader's tools decode it (see :meth:`Redactor.bytes`)."""
    if value[:4].count(0):
        encoding = json.detect_encoding(value)
        if encoding not in ("utf-8", "utf-8-sig"):
            try:
                return value.decode(encoding), encoding, "strict"
            except UnicodeDecodeError:
                pass
    elif value[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return value.decode("utf-16"), "utf-16", "strict"
        except UnicodeDecodeError:
            pass
    # UTF-8; bytes that are not stay as lone surrogates and are written back as they were
    return value.decode("utf-8", "surrogateescape"), "utf-8", "surrogateescape"


def _keep(view: bytes, start: int, end: int, rule: _Rule) -> tuple[int, int] | None:
    """The span of a match to replace, or None: detect-secrets' matches lose delimiters at their ends;
    a value already redacted or that is ordinary data is kept."""
    if rule.trim:
        while start < end and view[start:start + 1] in _DELIMITERS:
            start += 1
        while end > start and view[end - 1:end] in _DELIMITERS:
            end -= 1
    if end <= start or view.startswith(_MARK, start):
        return None
    if rule.kind == "assignment" and _ORDINARY_VALUE.match(view, start, end):
        return None
    return start, end


def _char_spans(encoded: bytes, spans: list[tuple[int, int, int, str]]) -> list[tuple[int, int, int, str]]:
    """``spans`` in byte offsets of UTF-8 ``encoded`` as character offsets (one pass, whatever their number)."""
    positions = sorted({p for start, end, _, _ in spans for p in (start, end)})
    chars: dict[int, int] = {}
    last = count = 0
    for position in positions:
        count += len(encoded[last:position].decode("utf-8", "replace"))
        last = position
        chars[position] = count
    return [(chars[start], chars[end], rank, kind) for start, end, rank, kind in spans]


def _map_spans(spans: list[tuple[int, int, int, str]], stages: list[_Stage]) -> list[tuple[int, int, int, str]]:
    """``spans`` in the last stage's view as spans of the first stage's text."""
    queries = [[p, role] for start, end, _, _ in spans for p, role in ((start, 1), (end, 0))]
    order = sorted(range(len(queries)), key=lambda i: (queries[i][0], queries[i][1]))
    sorted_queries = [queries[i] for i in order]
    for stage in reversed(stages):
        stage.map_back(sorted_queries)
    return [(queries[2 * i][0], queries[2 * i + 1][0], rank, kind) for i, (_, _, rank, kind) in enumerate(spans)]


def _extra_pattern(source: str) -> Any:
    """A matrix's ``spec.redact`` pattern: RE2 (linear time) when it can compile it, else Python's ``re``."""
    compiled = re.compile(source)  # re.error for a bad pattern, as the matrix loader reports it
    try:
        import re2

        options = re2.Options()
        options.log_errors = False
        return re2.compile(source.encode(), options)  # run over UTF-8 bytes, as the built-in patterns
    except Exception:  # noqa: BLE001 - look-arounds and back-references RE2 does not have
        return compiled
