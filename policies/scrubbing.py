"""Credential scrubbing of text shown outside the model (§8.3, issue #17).

ZeroClaw scrubs ``key=value`` credentials at its rendering boundary, secret
prefixes only in provider errors, and sends tool-call arguments raw. Here one
rule, :func:`scrub_text`, covers all of it and is used on every surface (logs,
observer events and their OpenTelemetry spans, tool-call arguments, summaries,
error messages). It removes, in this order:

1. PEM private-key blocks (a block cut before its END line is removed to the
   end of the text: a truncated key is still a key);
2. the password of ``user:password@`` in a URL of any scheme;
3. the query string of every ``http(s)`` URL, and the secret path of Slack and
   Discord webhook URLs;
4. credential ``key=value`` / ``key: value`` pairs with a value of at least 8
   characters: the key and the first 4 characters stay, then ``*[REDACTED]``
   (``Authorization: Bearer <token>`` keeps the scheme word too; a value that
   already starts with a redaction marker keeps only the marker). Quotes may be
   JSON-escaped (a backslash before each quote: a JSON text inside a JSON
   string); a ``password``/``passwd``/``passphrase`` value of 3-7 characters
   (``password: hunter2``) is replaced whole;
5. bare ``Bearer <token>`` values the same way;
6. high-entropy values under other secret-like keys (``STRIPE_KEY=...``,
   ``AccountKey=...``), replaced whole;
7. tokens of a known shape (cloud keys, provider tokens, JWTs, bare AWS secret
   access keys; the list is in :mod:`policies.secret_shapes`), replaced whole by
   ``[REDACTED]``;
8. secrets found by gitleaks' maintained rule set (about 220 provider rules
   with keywords, entropy thresholds and allowlists, MIT; see
   :mod:`policies.secret_rules`), replaced whole by ``[REDACTED]``.

:func:`summarize` (observer items, log values, telemetry text) also replaces
long high-entropy tokens of no known shape
(:func:`policies.secret_shapes.scrub_unknown_tokens`).

Every step is idempotent and steps 1-7 create no input for an earlier one; the
rule set's replacements can (a run they cut short may take a known shape), so
:func:`scrub_text` runs the steps again until nothing changes, and
``scrub_text(scrub_text(x)) == scrub_text(x)``. The hand-written patterns are
linear: each quantified run is bounded by characters that end it, so 1 MB of
text is one pass per pattern; gitleaks' rules run only where their keywords
occur.

:func:`summarize` bounds a scrubbed text, :func:`make_scrubber` adds the
configured secret values, and :func:`looks_like_secret_key` names the JSON keys
whose whole value is a secret. Parsed JSON, JSON text, tool calls and messages
are scrubbed by :mod:`policies.structured_scrubbing`, built on this rule.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable
from typing import Final

from turnledger.policies import secret_shapes
from turnledger.policies.errors import PolicyError
from turnledger.policies.secret_rules import rule_findings, scrub_rule_matches
from turnledger.policies.secret_shapes import (
    key_words,
    scrub_secretish_values,
    scrub_tokens,
    scrub_unknown_tokens,
    scrub_userinfo,
    scrub_webhooks,
)

REDACTED: Final = secret_shapes.REDACTED
"""What a whole secret is replaced by."""

PRIVATE_KEY_REDACTED: Final = "[REDACTED PRIVATE KEY]"
"""What a PEM private-key block is replaced by."""

SUMMARY_LIMIT: Final = 200
"""The default character bound of a summary (before the ellipsis)."""

ELLIPSIS: Final = "\u2026"
"""The summary ellipsis: one character that no secret pattern contains, so a cut
summary never grows a credential value (``"..."`` would extend ``key=abcdefg``)."""


_PEM_BLOCK: Final = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
    re.DOTALL,
)

# Up to the first character that cannot be in a URL written in text or JSON. The
# scheme is spelled as classes, not with IGNORECASE, so the engine can skip
# positions by first character.
_URL: Final = re.compile(r"[hH][tT][tT][pP][sS]?://[^\s\"'<>`\\]*")

# Credentials are matched against an ASCII-lowercased copy of the text (same
# length, same positions) so that the key alternation is case-sensitive and starts
# with plain letters: the regex engine then skips positions by first character,
# which is what keeps a pass over 1 MB in the tens of milliseconds.
_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_CREDENTIAL_KEYS: Final = (
    r"a(?:uthorization|pi[_-]?key|ccess[_-]key|ccount[_-]?key)|token|bearer"
    r"|p(?:ass(?:word|wd|phrase)|rivate[_-]key)"
    r"|s(?:ecrets?|ecret[_-]key|et[_-]cookie|hared[_-]?access[_-]?key)|user[_-]key"
    r"|c(?:redentials?|lient[_-]key|ookie)"
)
_CREDENTIAL: Final = re.compile(
    # key, optional closing quote (JSON-escaped too), separator, optional auth
    # scheme; or "bearer "
    rf"(?:{_CREDENTIAL_KEYS})"
    r"(?:(?:\\?[\"'])?[ \t]*[:=][ \t]*"
    r"(?:(?:bearer|basic|(?:api-)?token|digest)[ \t]+)?"
    r"|(?<=bearer)[ \t]+)"
    # never the scheme word itself (its token already cut to a short head)
    r"(?!(?:bearer|basic|(?:api-)?token|digest)[ \t])"
    # a value of 8+ characters: JSON-escaped double-quoted (a JSON text inside a
    # JSON string), double-quoted, single-quoted or bare
    r"(?:\\\"(?P<eq>[^\"\\\r\n]{8,})\\\""
    r"|\"(?P<dq>(?:[^\"\\\r\n]|\\.){8,})\""
    r"|'(?P<sq>(?:[^'\\\r\n]|\\.){8,})'"
    r"|(?P<bare>[a-z0-9_\-./+=]{8,}))"
)
# A password too short for _CREDENTIAL (``password: hunter2``) goes whole. The
# value stops before a marker character, so a redacted value never matches.
_SHORT_PASSWORD: Final = re.compile(
    r"pass(?:word|wd|phrase)(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?"
    r"(?P<value>[^\s\"'\\\[\]*]{3,7})(?=\\?[\"']|[\s,;})]|\Z)"
)
_SECRET_WORDS: Final = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "secret",
        "secrets",
        "credential",
        "credentials",
        "cookie",
        "cookies",
        "authorization",
        "bearer",
        "apikey",
        "auth",
    }
)
_KEY_QUALIFIERS: Final = frozenset(
    {
        "api",
        "private",
        "secret",
        "access",
        "user",
        "client",
        "signing",
        "encryption",
        "master",
    }
)


def _strip_query(match: re.Match[str]) -> str:
    url = match.group(0)
    fragment = url.find("#")
    if fragment == -1:
        fragment = len(url)
    query = url.find("?", 0, fragment)
    if query != -1:
        return url[:query]
    # A fragment that carries parameters (OAuth implicit flow) is a query too.
    if "=" in url[fragment:]:
        return url[:fragment]
    return url


# A character of a value, an escape sequence counting as one: the kept head is
# 4 of these, so it never ends in half an escape (``\\*`` would corrupt JSON).
_UNIT: Final = re.compile(r"\\.|[^\\]", re.DOTALL)


def _head(value: str) -> str:
    return "".join(_UNIT.findall(value[:8])[:4])


_MARKERS: Final = (PRIVATE_KEY_REDACTED, REDACTED)


def _redacted_value(value: str) -> tuple[str, ...]:
    # A value already redacted by another step keeps only its marker, so a
    # second pass never turns "[REDACTED]" into "[RED*[REDACTED]".
    for marker in _MARKERS:
        if value.startswith(marker):
            return (marker,)
    return (_head(value), "*", REDACTED)


def _scrub_credentials(text: str, lowered: str) -> str:
    pieces: list[str] = []
    last = 0
    for match in _CREDENTIAL.finditer(lowered):
        # The key, separator and opening quote stay; the value keeps its head.
        start, end = match.span(match.lastgroup or 0)
        pieces += (text[last:start], *_redacted_value(text[start:end]))
        last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def scrub_text(text: str) -> str:
    """Remove credentials and secrets from text.

    Args:
        text: Any text: a log line, a tool result, a query, an error message.

    Returns:
        The text with PEM private keys, URL passwords and query strings,
        credential values and secrets of a known shape removed (see the module
        docstring). Idempotent: when the rule set's replacements change what
        the earlier steps see (a 40-character run left alone because it went on
        becomes exactly 40 characters), the steps run again on the result, to a
        fixpoint (:data:`MAX_PASSES` passes at most; the property tests find
        none needing more than 2).

    Example:
        ``"token=QWxh+GRpbjpvcGVu/IHNlc2FtZQ== next=public"`` becomes
        ``"token=QWxh*[REDACTED] next=public"``.
    """
    for _ in range(MAX_PASSES):
        shaped = _scrub_shapes(text)
        scrubbed = _scrub_escaped_secrets(scrub_rule_matches(shaped))
        if scrubbed in (shaped, text):
            return scrubbed
        text = scrubbed
    return text


MAX_PASSES: Final = 4
"""Passes of :func:`scrub_text` at most (see there)."""


def _scrub_shapes(text: str) -> str:
    """Steps 1-7 (an idempotent block: the rule set is step 8)."""
    if "PRIVATE KEY" in text:
        text = _PEM_BLOCK.sub(PRIVATE_KEY_REDACTED, text)
    text = scrub_userinfo(text)
    text = _URL.sub(_strip_query, text)
    text = scrub_webhooks(text)
    text = _scrub_credentials(text, text.translate(_ASCII_LOWER))
    if "pass" in text.translate(_ASCII_LOWER):
        text = _scrub_short_passwords(text)
    text = scrub_secretish_values(text, looks_like_secret_key)
    return scrub_tokens(text)


# A line holding a backslash escape (JSON text inside a JSON string, a log of a
# request body) is unescaped once and read by the rule set too: its rules expect
# real quotes and newlines around a secret.
_ESCAPE: Final = re.compile(r"\\([\"\\/nrt])")
_UNESCAPED: Final = {"n": "\n", "r": "\r", "t": "\t"}
_MIN_ESCAPED_SECRET: Final = 8


def _escaped(secret: str) -> str:
    return (
        secret.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )


def _escaped_lines(text: str) -> list[str]:
    """The lines of ``text`` that hold a backslash, each once."""
    lines: list[str] = []
    at = text.find("\\")
    while at != -1:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end == -1 else end
        lines.append(text[start:end])
        at = text.find("\\", end)
    return lines


def _scrub_escaped_secrets(text: str) -> str:
    if "\\" not in text:
        return text
    secrets: set[str] = set()
    for line in _escaped_lines(text):
        view = _ESCAPE.sub(lambda m: _UNESCAPED.get(m.group(1), m.group(1)), line)
        secrets.update(view[start:end] for _, start, end in rule_findings(view))
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= _MIN_ESCAPED_SECRET:
            text = text.replace(_escaped(secret), REDACTED).replace(secret, REDACTED)
    return text


def _scrub_short_passwords(text: str) -> str:
    pieces: list[str] = []
    last = 0
    for match in _SHORT_PASSWORD.finditer(text.translate(_ASCII_LOWER)):
        pieces += (text[last : match.start("value")], REDACTED)
        last = match.end("value")
    pieces.append(text[last:])
    return "".join(pieces)


def looks_like_secret_key(key: str) -> bool:
    """Return whether a JSON object key names a secret.

    The key is split into words (``_``, ``-``, spaces and camelCase). It is a
    secret key when a word is one of ``password``, ``passwd``, ``passphrase``,
    ``secret(s)``, ``credential(s)``, ``cookie(s)``, ``authorization``,
    ``bearer``, ``apikey``, ``auth``; when its last word is ``token``
    (``access_token``, but not ``max_tokens`` or ``token_count``); or when it ends
    with ``<qualifier> key`` for a qualifier such as ``api``, ``private``,
    ``access`` or ``user`` (``api_key``, ``privateKey``, ``x-api-key``).

    Args:
        key: A JSON object key.

    Returns:
        Whether its whole value must be redacted.
    """
    words = key_words(key)
    if not words:
        return False
    if words[-1] == "token" or any(word in _SECRET_WORDS for word in words):
        return True
    return len(words) >= 2 and words[-1] == "key" and words[-2] in _KEY_QUALIFIERS


def summarize(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """Return a scrubbed summary of at most ``limit`` characters plus an ellipsis.

    Args:
        text: The text to summarize (a recall query, an error message...).
        limit: The character bound before the ellipsis (>= 1).

    Returns:
        :func:`scrub_text` of ``text``; when longer than ``limit``, its first
        ``limit`` characters, right-trimmed, followed by ``…``. Idempotent.

    Raises:
        ValueError: ``limit`` is below 1.
    """
    if limit < 1:
        msg = f"Expected a summary limit >= 1, found {limit}"
        raise ValueError(msg)
    scrubbed = scrub_unknown_tokens(scrub_text(text))
    if len(scrubbed) <= limit:
        return scrubbed
    body = scrubbed[:limit].rstrip()
    # A cut can shape a secret (a run cut to exactly 40 characters is an AWS
    # secret's length): the kept part is scrubbed again, to a fixpoint.
    for _ in range(MAX_PASSES):
        again = scrub_unknown_tokens(scrub_text(body))
        if again == body:
            break
        body = again[:limit].rstrip()
    return body + ELLIPSIS


class ScrubberConfigError(PolicyError):
    """A scrubber was configured with an unusable known secret."""


MIN_KNOWN_SECRET_CHARS: Final = 8
"""The shortest configured secret a scrubber accepts."""


# Marker characters (a marker must never contain a secret) and the characters
# that end a URL (deleting a query must never join two halves of a secret).
_FORBIDDEN_IN_SECRETS: Final = frozenset("[]*\"'<>`\\")


def _validated_secret(secret: str) -> str:
    if len(secret) < MIN_KNOWN_SECRET_CHARS or any(
        char.isspace() or char in _FORBIDDEN_IN_SECRETS for char in secret
    ):
        msg = (
            "Expected known secrets of at least 8 characters without whitespace,"
            " quotes, '[', ']', '*', '<', '>', '`' or '\\', found one of"
            f" {len(secret)} characters"
        )
        raise ScrubberConfigError(msg)
    return secret


def make_scrubber(*, known_secrets: Iterable[str] = ()) -> Callable[[str], str]:
    """Build a scrubber that also removes configured secret values.

    The shell knows the real API keys it was configured with; each occurrence of
    one is replaced by ``[REDACTED]`` before the :func:`scrub_text` patterns run.

    Args:
        known_secrets: Literal secret values: at least 8 characters, without
            whitespace, quotes, ``[``, ``]``, ``*``, ``<``, ``>``, backtick or
            backslash (so no marker contains one and no URL cut creates one).

    Returns:
        ``scrub(text) -> text``, idempotent.

    Raises:
        ScrubberConfigError: A secret is too short or holds a forbidden
            character (the message never repeats the secret).
    """
    secrets = sorted(
        {_validated_secret(secret) for secret in known_secrets}, key=len, reverse=True
    )
    if not secrets:
        return scrub_text
    # Longest first, so a secret that contains another is removed whole.
    pattern = re.compile("|".join(re.escape(secret) for secret in secrets))

    def scrub(text: str) -> str:
        return scrub_text(pattern.sub(REDACTED, text))

    return scrub
