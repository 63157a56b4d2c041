"""Redaction: one policy for everything a run writes or shows.

Results, run manifests, debug bundles, logs, the viewer, `wink query` output and the HTML
report all pass through the same `Redactor`, applied where their records are built.
Four nets, applied to every string (JSON values and keys, log messages, text files):

1. literal secrets: the values of environment variables whose names look secret
   (`OPENAI_API_KEY`, `GITHUB_TOKEN`, `DB_PASSWORD`, `DATABASE_URL`'s password...), read
   when the redactor is made, plus `RedactionPolicy.secrets`;
2. patterns: provider API keys (OpenAI, Anthropic, Google, Hugging Face, Groq, xAI,
   Replicate, Stripe, GitHub, GitLab, AWS, Slack), JSON web tokens, `Bearer <token>` and
   `Basic <credentials>`, `password=...`/`secret: ...`-style pairs;
3. credentials inside URLs: the password of `postgres://user:pw@host` (the user is kept);
4. field names: in JSON data, string values under keys such as `api_key`, `password` or
   `authorization` are replaced whole.

Examples:
    >>> r = default_redactor(environ={})
    >>> r.text("connect to postgres://ada:hunter2@db:5432/app with password=hunter2")
    'connect to postgres://ada:[REDACTED]@db:5432/app with password=[REDACTED]'
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._redaction_reading import ITEMS as _ITEMS
from ._redaction_reading import MAPPING as _MAPPING
from ._redaction_reading import NUMBERS as _NUMBERS
from ._redaction_reading import RecordReaders as _RecordReaders
from ._redaction_text import alternation as _alternation
from ._redaction_text import fold as _fold
from ._redaction_text import name_form as _name_form
from ._redaction_text import replace_spans
from ._redaction_values import NO_ITEMS as _NO_ITEMS

__all__ = [
    "DEFAULT_SECRET_ENV_NAMES",
    "DEFAULT_SECRET_FIELD_NAMES",
    "DEFAULT_SECRET_PATTERNS",
    "REDACTED",
    "RedactingFilter",
    "RedactionPolicy",
    "Redactor",
    "default_redactor",
    "redact_logs",
]

REDACTED = "[REDACTED]"
"""What a secret is replaced with by default."""

DEFAULT_SECRET_ENV_NAMES = r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|_URL$|_DSN$|_URI$"
"""Environment variables whose names contain one of these (any case) hold secrets.

Connection strings (`DATABASE_URL`, `SENTRY_DSN`) count only when they carry a password:
see `RedactionPolicy.redactor`."""

DEFAULT_SECRET_FIELD_NAMES = (
    r"api[_-]?key|secret|passw(?:or)?d|authorization|cookie|credentials?"
    r"|private[_-]?key|(?:access|auth|refresh|bearer|id)[_-]?token|^token$"
)
"""JSON keys (any case) whose string values are replaced whole."""

_KV_NAMES = r"api[_-]?key|access[_-]?key|secret|password|passwd|pwd|token"
DEFAULT_SECRET_PATTERNS: tuple[str, ...] = (
    r"sk-[A-Za-z0-9_-]{16,}",  # OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-) API keys
    r"AIza[0-9A-Za-z_-]{30,}",  # Google (Gemini) API keys
    r"hf_[A-Za-z0-9]{20,}",  # Hugging Face tokens
    r"gsk_[A-Za-z0-9]{20,}",  # Groq
    r"xai-[A-Za-z0-9]{20,}",  # xAI
    r"r8_[A-Za-z0-9]{20,}",  # Replicate
    r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
    r"gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{20,}",  # GitHub fine-grained tokens
    r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab tokens
    r"AKIA[0-9A-Z]{16}",  # AWS access key ids
    r"xox[abprs]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JSON web tokens
    r"(?P<keep>(?i:bearer)\s+)[A-Za-z0-9._~+/=-]{8,}",  # Authorization: Bearer <token>
    r"(?P<keep>(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:basic)\s+)[A-Za-z0-9+/=]{8,}",
    rf"(?P<keep>(?i:{_KV_NAMES})[\"']?\s*[=:]\s*[\"']?)[^\s\"'&,;]+",  # api_key=..., token: ...
    # scheme://user:password@host: the password goes, the user and host stay.
    r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\"']*:)[^\s@/\"']+(?=@)",
)
"""Regular expressions of secrets. A match is replaced; a named group `keep` (the
`api_key=` in `api_key=abc`) is kept in front of the replacement."""

_KEY_GUARD = re.compile(r"key[\"']?\s*[=:]")
_TOKEN_GUARD = re.compile(r"token[\"']?\s*[=:]")


_KV_GUARD_WORDS = ("secret", "passw", "pwd", "key", "token")
"""Words one of which `_kv_guard` needs."""


def _kv_guard(lower: str) -> bool:
    if "secret" in lower or "passw" in lower or "pwd" in lower:
        return True
    # Each regex starts with a literal, which `re` finds fast; an alternation would not.
    return ("key" in lower and _KEY_GUARD.search(lower) is not None) or (
        "token" in lower and _TOKEN_GUARD.search(lower) is not None
    )


_GUARDS: dict[str, tuple[str, ...] | Callable[[str], bool]] = {
    DEFAULT_SECRET_PATTERNS[0]: ("sk-",),
    DEFAULT_SECRET_PATTERNS[1]: ("aiza",),
    DEFAULT_SECRET_PATTERNS[2]: ("hf_",),
    DEFAULT_SECRET_PATTERNS[3]: ("gsk_",),
    DEFAULT_SECRET_PATTERNS[4]: ("xai-",),
    DEFAULT_SECRET_PATTERNS[5]: ("r8_",),
    DEFAULT_SECRET_PATTERNS[6]: ("_live_", "_test_"),
    DEFAULT_SECRET_PATTERNS[7]: ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    DEFAULT_SECRET_PATTERNS[8]: ("github_pat_",),
    DEFAULT_SECRET_PATTERNS[9]: ("glpat-",),
    DEFAULT_SECRET_PATTERNS[10]: ("akia",),
    DEFAULT_SECRET_PATTERNS[11]: ("xox",),
    DEFAULT_SECRET_PATTERNS[12]: ("eyj",),
    DEFAULT_SECRET_PATTERNS[13]: ("bearer",),
    DEFAULT_SECRET_PATTERNS[14]: ("basic",),
    DEFAULT_SECRET_PATTERNS[15]: _kv_guard,
    DEFAULT_SECRET_PATTERNS[16]: ("://",),
}
"""For each default pattern, a cheap test of the lower-cased text: substrings one of which
it needs (or a function): the pattern itself runs only where its guard passes, which
keeps checking a record that holds no secret to a few microseconds."""

_DEFAULT_FIELD_WORDS = ("key", "secret", "passw", "authorization", "cookie", "credential", "token")
"""Substrings one of which every key matched by `DEFAULT_SECRET_FIELD_NAMES` holds."""

_SCALARS = frozenset({bool, int, float})
"""Types whose JSON form is no string (a subclass, such as an `IntEnum`, is not vouched for)."""

_LONG_TEXT = 4096
_LONG_STRING = 512
_CLEAN_CHARS = 4_000_000
"""`Redactor.finds_in`: a record's text this long has its strings this long remembered once
found clean (at most this many characters of them per redactor)."""

_MAX_VALUES = 100_000
"""`Redactor.finds_in` leaves values with more parts (or a cycle) to `finds` on the JSON."""

_UNSEEN: Any = object()


_URL_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:([^\s@/]+)@")


@dataclass(frozen=True, slots=True, kw_only=True)
class RedactionPolicy:
    """What counts as a secret. Redaction cannot be turned off; it can be widened.

    Examples:
        >>> r = RedactionPolicy(secrets=("hunter2-hunter2",)).redactor(environ={})
        >>> r.text("pw is hunter2-hunter2, key sk-abcdefghijklmnopqrstu")
        'pw is [REDACTED], key [REDACTED]'
    """

    env_names: str = DEFAULT_SECRET_ENV_NAMES
    """Regex searched (case-insensitively) in environment variable names; the values of
    matching variables are redacted wherever they appear."""
    field_names: str = DEFAULT_SECRET_FIELD_NAMES
    """Regex searched (case-insensitively) in JSON keys; string values under a matching
    key are replaced whole."""
    patterns: tuple[str, ...] = DEFAULT_SECRET_PATTERNS
    """Regexes of secrets found in any text (see `DEFAULT_SECRET_PATTERNS`)."""
    secrets: tuple[str, ...] = ()
    """Extra literal values to redact (any length)."""
    min_env_value_length: int = 8
    """Environment values shorter than this are not treated as secrets: `TOKENIZERS_
    PARALLELISM=false` must not turn every "false" into the replacement."""
    replacement: str = REDACTED
    """What a secret is replaced with."""

    def redactor(self, environ: Mapping[str, str]) -> Redactor:
        """Compile the policy against `environ` (pass `os.environ` at write time).

        The value of a variable whose name looks secret is a secret; for a URL-like value
        (`DATABASE_URL=postgres://u:pw@h/db`) only its password is, and a URL without
        one is not.
        """
        names = re.compile(self.env_names, re.IGNORECASE)
        literals: set[str] = set()
        for name, value in environ.items():
            if not names.search(name):
                continue
            url = _URL_PASSWORD.match(value)
            if url is not None:
                value = url.group(1)
            elif "://" in value:
                continue  # an address without a password is no secret
            if len(value) >= self.min_env_value_length:
                literals.add(value)
        literals.update(s for s in self.secrets if s)
        return Redactor(
            literals=tuple(sorted(literals, key=len, reverse=True)),
            patterns=self.patterns,  # compiled when first needed (see `Redactor`)
            field_names=re.compile(self.field_names, re.IGNORECASE),
            replacement=self.replacement,
        )


class _LazyPattern:
    """A regular expression compiled on first use."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: re.Pattern[str] | str) -> None:
        self._compiled: re.Pattern[str] | None = None
        if isinstance(pattern, re.Pattern):
            self.pattern, self._compiled = pattern.pattern, pattern
        else:
            self.pattern = pattern

    def compiled(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern)
        return compiled


class Redactor:
    """A compiled `RedactionPolicy`: replaces secrets in text, bytes and JSON data."""

    def __init__(
        self,
        *,
        literals: tuple[str, ...],
        patterns: Sequence[re.Pattern[str] | str],
        field_names: re.Pattern[str],
        replacement: str,
    ) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self._literals = re.compile("|".join(re.escape(s) for s in literals)) if literals else None
        # A pattern is compiled the first time its guard lets it run (most never run on a
        # record without secrets): compiling all seventeen cost a process's first run
        # several milliseconds.
        self._patterns = tuple(_LazyPattern(p) for p in patterns)
        guards = [(_GUARDS.get(p.pattern), p) for p in self._patterns]
        self._word_guarded = tuple((g, p) for g, p in guards if isinstance(g, tuple))
        self._other_guarded = tuple((g, p) for g, p in guards if not isinstance(g, tuple))
        # One search for every guard word: where none occurs (most records), no guarded
        # pattern can match, and only the unguarded ones (a policy's own) are run.
        words = [w for g, _ in guards if isinstance(g, tuple) for w in g]
        if any(g is _kv_guard for g, _ in guards):
            words += _KV_GUARD_WORDS
        self._any_guard_word = re.compile(_alternation(words)) if words else None
        self._unguarded = tuple(p for g, p in guards if g is None)
        self._default_fields = field_names.pattern == DEFAULT_SECRET_FIELD_NAMES
        self._fields = field_names
        self._replacement = replacement
        # A literal is searched as it is and JSON-escaped (`finds` runs on serialized JSON).
        self._literal_forms = tuple({json.dumps(s)[1:-1] for s in literals} | set(literals))
        self._secret_keys: dict[str, bool] = {}
        # class -> how `_collect` reads it (see `RecordReaders.how_to_read`)
        self._readers = _RecordReaders(self._secret_key)
        self._classes = self._readers.classes
        self._clean_long: set[str] = set()  # see `_finds_secret_once`
        self._clean_chars = 0

    @property
    def replacement(self) -> str:
        """What a secret is replaced with."""
        return self._replacement

    def finds(self, text: str) -> bool:
        """Whether `text` holds anything a net would replace (a secret-looking JSON key too).

        The cheap test before `data` on a serialized record: a few substring and guarded
        regex searches, and each distinct JSON key checked once per redactor. On JSON
        text, a newline or tab inside a string is an escape (a backslash and a letter),
        not the blank that `Bearer <token>` or `password = <value>` needs: to vouch for
        JSON data, parse it and ask `finds_in`.
        """
        lower = text.lower()
        if self._finds_secret(text, lower):
            return True
        if self._default_fields:
            names = lower if text.isascii() else _name_form(text).lower()
            hits = [word for word in _DEFAULT_FIELD_WORDS if word in names]
            if not hits:
                return False
            if hits == ["token"] and names.count("token") == names.count('_tokens"'):
                return False  # only the usage counts (`input_tokens`...), never secret
        keys = self._secret_keys
        # Each `":` ends a key (approximately: a string value may hold one too, which
        # only costs a needless check).
        for chunk in text.split('":')[:-1]:
            key = chunk[chunk.rfind('"') + 1 :]
            secret = keys.get(key)
            if secret is None:
                secret = keys[key] = self._fields.search(_name_form(key)) is not None
            if secret:
                return True
        return False

    def finds_in(self, value: object) -> bool | None:
        """Whether `value`'s JSON form holds anything `data` would replace; None: cannot tell.

        The cheap test before serializing a record redacted: it reads the strings of
        `value` (of dataclasses, tuples, lists and string-keyed mappings, at any depth)
        and checks them, and the keys and field names around them, as `finds` checks
        JSON text, without the JSON's own punctuation and fixed key names to search
        through. A value of another type (a `datetime`, an enum, a pydantic model...)
        answers None: check the serialized text with `finds` instead.
        """
        strings: list[str] = []
        if not self._collect(value, strings):
            return None
        text = "\n".join(strings)
        if len(text) >= _LONG_TEXT:  # a transcript: its long strings recur (prompts)
            return self._finds_secret_once(strings)
        return self._finds_secret(text, text.lower())

    def _finds_secret_once(self, strings: list[str]) -> bool:
        """`_finds_secret` on the strings, each long one found clean before skipped.

        A long string found clean alone (a system prompt, tool descriptions, repeated
        in every result of a run) is remembered, up to `_CLEAN_CHARS` characters in
        all: it is searched once per redactor, not once per record.
        """
        clean = self._clean_long
        rest = [s for s in strings if len(s) < _LONG_STRING or s not in clean]
        text = "\n".join(rest)
        if self._finds_secret(text, text.lower()):
            return True
        for s in rest:
            if len(s) >= _LONG_STRING and not self._finds_secret(s, s.lower()):
                if self._clean_chars + len(s) > _CLEAN_CHARS:
                    clean.clear()
                    self._clean_chars = 0
                clean.add(s)
                self._clean_chars += len(s)
        return False

    def _collect(self, value: object, out: list[str]) -> bool:
        """Append the strings of `value` to `out`; False when one cannot be vouched for.

        A secret-looking key or field name answers False too, so that the caller falls
        back to `finds`, which reports it. Iterative (a stack, no recursion): this runs
        once per result written.
        """
        stack: list[Any] = [value]
        push, pop, append = stack.append, stack.pop, out.append
        classes, secret_keys = self._classes, self._secret_keys
        budget = _MAX_VALUES  # values looked at; a huge or cyclic value is left to `finds`
        while stack:
            item = pop()
            kind = type(item)
            # The commonest kinds first: this runs once per result written. The parts of
            # a container are sorted here: strings out, None dropped, the rest stacked.
            if kind is tuple or kind is list:
                parts = item
            elif kind is str:
                append(item)
                continue
            elif item is None or kind in _SCALARS:
                continue
            else:
                how = _MAPPING if kind is dict else classes.get(kind, _UNSEEN)
                if how is _UNSEEN:
                    how = classes[kind] = self._readers.how_to_read(kind)
                if how is _MAPPING:
                    for key in item:
                        if type(key) is not str:
                            return False
                        secret = secret_keys.get(key)
                        if secret is None:
                            secret = self._secret_key(key)
                        if secret:
                            return False
                        append(key)
                    parts = item.values()
                elif how is _ITEMS:
                    parts = item
                elif how is _NUMBERS:
                    continue
                elif how is None:
                    return False
                else:  # a dataclass: its reader sorts its parts as the loop below does
                    budget -= how(item, append, push) + 1
                    if budget < 0:
                        return False
                    continue
            budget -= len(parts) + 1
            if budget < 0:
                return False
            for part in parts:
                if type(part) is str:
                    append(part)
                elif part is not None and part is not _NO_ITEMS:  # no need to stack `()`
                    push(part)
        return True

    def _secret_key(self, key: str) -> bool:
        secret = self._secret_keys.get(key)
        if secret is None:
            secret = self._secret_keys[key] = self._fields.search(_name_form(key)) is not None
        return secret

    def _finds_secret(self, text: str, lower: str) -> bool:
        if self._finds_secret_as_written(text, lower):
            return True
        if text.isascii():
            return False
        folded = _fold(text)  # a fullwidth `secret: value` is `secret: value` to a reader
        return folded is not text and self._finds_secret_as_written(folded, folded.lower())

    def _finds_secret_as_written(self, text: str, lower: str) -> bool:
        for form in self._literal_forms:
            if form in text:
                return True
        if self._any_guard_word is not None and self._any_guard_word.search(lower) is None:
            unguarded = self._unguarded  # none in the default policy: no generator made
            return bool(unguarded) and any(p.compiled().search(text) for p in unguarded)
        for words, pattern in self._word_guarded:
            for word in words:
                if word in lower:
                    if pattern.compiled().search(text):
                        return True
                    break
        for guard, pattern in self._other_guarded:
            if (guard is None or guard(lower)) and pattern.compiled().search(text):
                return True
        return False

    def text(self, text: str) -> str:
        """Return `text` with every secret replaced."""
        if not self._finds_secret(text, text.lower()):
            return text
        # Every net searches the text as given, and the spans found are replaced at once:
        # replacing one net's finds before the next searched could hide a secret from it
        # (`Bearer\npostgres://u:pw@h`: the token pattern takes `postgres`, and the URL
        # pattern no longer sees a scheme in front of the password).
        spans: list[tuple[int, int]] = []
        self._spans(text, spans)
        folded = text if text.isascii() else _fold(text)
        if folded is not text:  # same length, same places: its spans are the text's
            self._spans(folded, spans)
        return replace_spans(text, spans, self._replacement)

    def _spans(self, text: str, spans: list[tuple[int, int]]) -> None:
        """Append the spans of `text` that a net replaces."""
        if self._literals is not None:
            spans.extend(found.span() for found in self._literals.finditer(text))
        for pattern in self._patterns:
            for found in pattern.compiled().finditer(text):
                start, end = found.span()
                if found.re.groupindex.get("keep") and found.group("keep") is not None:
                    if start < found.start("keep"):  # a `keep` not at the front
                        spans.append((start, found.start("keep")))
                    start = found.end("keep")
                if start < end:
                    spans.append((start, end))

    def bytes(self, data: bytes) -> bytes:
        """Redact bytes as UTF-8 text; undecodable bytes pass through unchanged."""
        text = data.decode("utf-8", errors="surrogateescape")
        return self.text(text).encode("utf-8", errors="surrogateescape")

    def data(self, value: Any, *, under_secret_key: bool = False) -> Any:
        """Return a copy of JSON-compatible `value` with every string (keys too) redacted.

        Strings under a secret-looking key are replaced whole; numbers, booleans and None
        are kept so a redacted snapshot still has its types.
        """
        if isinstance(value, str):
            return self._replacement if under_secret_key and value else self.text(value)
        if isinstance(value, Mapping):
            return {
                (self.text(k) if isinstance(k, str) else k): self.data(
                    v,
                    under_secret_key=under_secret_key
                    or (isinstance(k, str) and self._fields.search(_name_form(k)) is not None),
                )
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.data(v, under_secret_key=under_secret_key) for v in value]
        return value


_DEFAULT: tuple[tuple[tuple[str, str], ...], Redactor] | None = None


def default_redactor(environ: Mapping[str, str] | None = None) -> Redactor:
    """The default `RedactionPolicy` compiled against `environ` (default `os.environ`).

    Compiled once and made again only when the environment changed, so a caller may ask
    for it per record.
    """
    global _DEFAULT
    env = os.environ if environ is None else environ
    items = tuple(sorted(env.items()))
    cached = _DEFAULT
    if cached is not None and cached[0] == items:
        return cached[1]
    redactor = RedactionPolicy().redactor(environ=env)
    _DEFAULT = (items, redactor)
    return redactor


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record before any handler formats it.

    The message (its arguments merged in) and the exception text are redacted.

    Examples:
        >>> key = "sk-" + "a" * 20
        >>> record = logging.LogRecord("x", logging.INFO, "", 0, "key %s", (key,), None)
        >>> RedactingFilter(default_redactor({})).filter(record), record.getMessage()
        (True, 'key [REDACTED]')
    """

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact `record` in place; never drops it."""
        redactor = self._redactor or default_redactor()
        message = record.getMessage()
        clean = redactor.text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redactor.text(record.exc_text)
        return True


def redact_logs(logger: logging.Logger | None = None) -> None:
    """Add a `RedactingFilter` to every handler of `logger` (default: the root logger).

    `wink` installs it on the handlers it configures; call it after configuring your own.
    """
    target = logging.getLogger() if logger is None else logger
    for handler in target.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
