"""The shapes of common secrets, for :mod:`policies.scrubbing` (issue #17).

Each function here is one scrubbing step over text. Every step is idempotent, its
output marker (``[REDACTED]``) contains no character any step matches, and no
step creates input for another, so :func:`policies.scrubbing.scrub_text` stays
idempotent. Every pattern either starts with literal characters (the regex engine
then skips positions by first character) or with a one-character look-behind, so
a pass over 1 MB stays linear.

Shapes (all replaced whole by ``[REDACTED]`` unless said otherwise):

- ``user:password@`` in a URL of any scheme (``postgres://``, ``mysql://``,
  ``redis://``, ``amqp://``, ``https://``...): the password only;
- Slack and Discord webhook URLs: the path after ``/services/`` or ``/webhooks/``;
- tokens with a known prefix, at a token boundary: OpenAI and Anthropic ``sk-``,
  Stripe ``sk_live_``/``sk_test_``/``rk_live_``/``rk_test_``/``whsec_``, GitHub
  ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_``, GitLab ``glpat-``/
  ``gldt-``/``glptt-``, Slack ``xoxb-``/``xoxp-``/``xoxa-``/``xoxr-``/``xoxs-``/
  ``xapp-``, Google ``AIza`` API keys, ``GOCSPX-`` OAuth secrets and ``ya29.``
  access tokens and ``1//0`` OAuth refresh tokens, Mailgun ``key-`` (32 hex
  characters), npm ``npm_`` (36 characters), Hugging Face ``hf_``, PyPI
  ``pypi-AgE``, SendGrid ``SG.x.y``, Shopify ``shpat_``/``shpss_``, DigitalOcean
  ``dop_v1_``, AWS access key ids (``AKIA``, ``ASIA`` and the other 4-letter id
  prefixes, then 16 upper-case letters or digits) and JWTs (``eyJ...eyJ...``);
- Telegram bot tokens (5-16 digits, ``:AA``, 33 characters);
- Azure AD client secrets (``xxx8Q~`` then 31-34 characters);
- bare 40-character AWS-style secret access keys (exactly 40 of ``A-Za-z0-9/+``
  mixing upper case, lower case and digits, with at least 3.5 bits of entropy per
  character; a 40-character hex digest is never one);
- unknown tokens (:func:`scrub_unknown_tokens`, used by
  :func:`policies.scrubbing.summarize`, so on observer, log and telemetry
  text): runs of :data:`UNKNOWN_TOKEN_CHARS` or more base64/base64url characters
  holding a window of :data:`UNKNOWN_TOKEN_CHARS` characters that mixes upper
  case, lower case and digits with at least :data:`UNKNOWN_TOKEN_BITS` bits of
  entropy per character;
- high-entropy values (16+ characters mixing letters and digits, at least 3.0
  bits per character) under a secret-like key (:func:`secretish_key`): a key that
  :func:`policies.scrubbing.looks_like_secret_key` accepts, or one whose last word
  is ``key``, ``pwd``, ``pass``, ``sig``, ``signature`` or ``salt`` and whose word
  before is not an ordinary one (``session_key``, ``primary_key``...).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Final

REDACTED: Final = "[REDACTED]"
"""What a whole secret is replaced by (the same marker as the scrubber's)."""

# "://" then user ":" password "@": the password is greedy up to the authority's
# last "@" and stops at what ends an authority (or a URL written in text).
_USERINFO: Final = re.compile(
    r"://(?P<user>[^\s/?#@:\"'<>`\\\[\]]*):(?P<pw>[^\s/?#\"'<>`\\]+)@"
)

_WEBHOOK: Final = re.compile(
    r"(?:hooks\.slack\.com/(?:services|workflows|triggers)"
    r"|discord(?:app)?\.com/api/webhooks)/(?P<path>[A-Za-z0-9/_\-]+)"
)

_BODY: Final = r"[A-Za-z0-9\-_.:]{8,}"
_ALNUM_AFTER: Final = r"(?![A-Za-z0-9])"
# (literal prefix, body). Each is its own pattern: a literal prefix lets the
# engine find candidates with a fast search, and a prefix absent from the text
# costs one substring test. The look-behind checks the token boundary.
TOKEN_SHAPES: Final = (
    *((prefix, _BODY) for prefix in ("sk-", "sk_live_", "sk_test_", "rk_live_")),
    *((prefix, _BODY) for prefix in ("rk_test_", "whsec_", "shpat_", "shpss_")),
    *((f"gh{kind}_", _BODY) for kind in "pousr"),
    *((prefix, _BODY) for prefix in ("github_pat_", "glpat-", "gldt-", "glptt-")),
    *((f"xox{kind}-", _BODY) for kind in "abprs"),
    ("xapp-", _BODY),
    ("GOCSPX-", _BODY),
    ("dop_v1_", _BODY),
    ("AIza", r"[A-Za-z0-9\-_]{8,}"),
    *(
        (f"A{kind}", rf"[0-9A-Z]{{16}}{_ALNUM_AFTER}")
        for kind in ("KIA", "SIA", "GPA", "IDA", "ROA", "IPA", "NPA", "NVA", "BIA")
    ),
    ("ACCA", rf"[0-9A-Z]{{16}}{_ALNUM_AFTER}"),
    ("ya29.", r"[A-Za-z0-9\-_]{16,}"),
    ("1//0", r"[A-Za-z0-9\-_]{30,}"),
    ("key-", rf"[0-9a-f]{{32}}{_ALNUM_AFTER}"),
    ("npm_", rf"[A-Za-z0-9]{{36}}{_ALNUM_AFTER}"),
    ("hf_", r"[A-Za-z0-9]{30,}"),
    ("pypi-AgE", r"[A-Za-z0-9\-_]{16,}"),
    ("SG.", r"[A-Za-z0-9\-_]{16,}\.[A-Za-z0-9\-_]{16,}"),
    ("eyJ", r"[A-Za-z0-9\-_]{8,}\.eyJ[A-Za-z0-9\-_]{4,}\.[A-Za-z0-9\-_]*"),
)
"""(literal prefix, body pattern) of every token shape replaced whole."""

_TOKENS: Final = tuple(
    (
        prefix,
        re.compile(f"{re.escape(prefix)}(?<![A-Za-z0-9]{re.escape(prefix)}){body}"),
    )
    for prefix, body in TOKEN_SHAPES
)

_TELEGRAM_BOT_TOKEN: Final = re.compile(
    r"(?<![0-9])[0-9]{5,16}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])"
)

_AZURE_SECRET: Final = re.compile(r"Q~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])")
_AZURE_HEAD: Final = re.compile(r"[A-Za-z0-9_~.\-]{3}[0-9]")
_AZURE_CHARS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_~.-"
)

# Runs of base64 characters are found on a translated copy: every character of
# the class becomes "a", "=" becomes "b", every other ASCII character " ", so a
# 40-character run is a fast substring search for 40 "a"s.
_RUN_CLASS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+"
)
_RUN_MAP: Final = str.maketrans(
    {
        chr(c): "a" if chr(c) in _RUN_CLASS else "b" if chr(c) == "=" else " "
        for c in range(128)
    }
)
_AWS_SECRET_CHARS: Final = 40
_RUN: Final = re.compile(r"a+")

# Values after a separator are found the same way: runs of the value class
# (":" and "=" are not in it, so a value never swallows the next pair).
_VALUE_CLASS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_.~-"
)
_VALUE_MAP: Final = str.maketrans(
    {chr(c): "a" if chr(c) in _VALUE_CLASS else " " for c in range(128)}
)
_MIN_VALUE_CHARS: Final = 16
_BEFORE_VALUE: Final = re.compile(r"[:=][ \t]*[\"']?\Z")
_KEY_CHARS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
)
_SECRETISH_LAST_WORDS: Final = frozenset(
    {"key", "pwd", "pass", "sig", "signature", "salt"}
)
_ORDINARY_KEY_QUALIFIERS: Final = frozenset(
    {
        "session",
        "public",
        "primary",
        "foreign",
        "sort",
        "partition",
        "cache",
        "idempotency",
        "memory",
        "dedup",
        "group",
        "routing",
        "lookup",
        "hash",
        "map",
        "row",
        "search",
        "stream",
        "event",
        "message",
        "index",
        "object",
        "file",
        "dict",
        "unique",
        "composite",
        "shard",
        "tracking",
    }
)
_WORD_SPLIT: Final = re.compile(r"[^a-z0-9]+")
_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def entropy_bits(value: str) -> float:
    """Return the Shannon entropy of ``value`` in bits per character.

    Args:
        value: Any text (empty text has 0 bits).

    Returns:
        ``-sum(p * log2 p)`` over the character frequencies.
    """
    if not value:
        return 0.0
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in Counter(value).values())


def high_entropy(value: str) -> bool:
    """Return whether a value looks random enough to be a secret.

    Args:
        value: A candidate value.

    Returns:
        True for 16+ characters holding both a letter and a digit with at least
        3.0 bits of entropy per character.
    """
    return (
        len(value) >= 16
        and any(char.isdigit() for char in value)
        and any(char.isalpha() for char in value)
        and entropy_bits(value) >= 3.0
    )


def key_words(key: str) -> list[str]:
    """Split a key into lower-case words (``_``, ``-``, spaces, camelCase).

    Args:
        key: A JSON object key or the key of a ``key=value`` pair.

    Returns:
        Its words, lower case, without empty ones.
    """
    spaced = _CAMEL.sub("_", key).lower()
    return [word for word in _WORD_SPLIT.split(spaced) if word]


def secretish_key(words: list[str]) -> bool:
    """Return whether a key's words end like a secret (``stripe_key``, ``db_pass``).

    Args:
        words: The key's words (:func:`key_words`).

    Returns:
        True when the last word is ``key``, ``pwd``, ``pass``, ``sig``,
        ``signature`` or ``salt`` and the word before (if any) is not an ordinary
        qualifier such as ``session``, ``primary`` or ``public``.
    """
    if not words or words[-1] not in _SECRETISH_LAST_WORDS:
        return False
    return len(words) < 2 or words[-2] not in _ORDINARY_KEY_QUALIFIERS


def _keep_marker(value: str) -> str:
    return value if value == REDACTED else REDACTED


def scrub_userinfo(text: str) -> str:
    """Replace the password of ``scheme://user:password@`` by ``[REDACTED]``.

    Args:
        text: Any text.

    Returns:
        The text with every URL password replaced (the user name stays).
    """
    if "://" not in text:
        return text
    return _USERINFO.sub(
        lambda m: f"://{m.group('user')}:{_keep_marker(m.group('pw'))}@", text
    )


def scrub_webhooks(text: str) -> str:
    """Replace the secret path of Slack and Discord webhook URLs.

    Args:
        text: Any text.

    Returns:
        The text with each webhook path after its fixed prefix replaced.
    """
    if "hooks.slack.com/" not in text and "/api/webhooks/" not in text:
        return text
    return _WEBHOOK.sub(
        lambda m: m.group(0)[: m.start("path") - m.start()] + REDACTED, text
    )


def _splice(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces += (text[last:start], REDACTED)
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _azure_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for match in _AZURE_SECRET.finditer(text):
        start = match.start() - 4
        if (
            start >= 0
            and _AZURE_HEAD.fullmatch(text, start, match.start())
            and (start == 0 or text[start - 1] not in _AZURE_CHARS)
        ):
            spans.append((start, match.end()))
    return spans


def _bare_aws_spans(text: str) -> list[tuple[int, int]]:
    mapped = text.translate(_RUN_MAP)
    spans: list[tuple[int, int]] = []
    for start, end in _runs(mapped, _AWS_SECRET_CHARS):
        value = text[start:end]
        if (
            end - start == _AWS_SECRET_CHARS
            and (start == 0 or mapped[start - 1] != "b")
            and (end == len(mapped) or mapped[end] != "b")
            and any(char.isupper() for char in value)
            and any(char.islower() for char in value)
            and any(char.isdigit() for char in value)
            and entropy_bits(value) >= 3.5
        ):
            spans.append((start, end))
    return spans


UNKNOWN_TOKEN_CHARS: Final = 40
"""The shortest run judged by :func:`scrub_unknown_tokens`: longer than the ids
providers use for calls and messages (``call_...``, ``toolu_...``, ``msg_...``:
24-30 characters), as long as an AWS secret access key."""

UNKNOWN_TOKEN_BITS: Final = 4.2
"""The entropy (bits per character) from which a run is a token: 40 random
base64 characters carry about 4.9, English words and paths written in camelCase
or snake_case about 3.5-4.0, a hex digest at most 4.0 (and no upper case)."""

_TOKEN_CLASS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+_-"
)
_TOKEN_MAP: Final = str.maketrans(
    {
        chr(c): "a" if chr(c) in _TOKEN_CLASS else "b" if chr(c) == "=" else " "
        for c in range(128)
    }
)


UNKNOWN_TOKEN_OFFSETS: Final = 1024
"""How far into a run a token may start and still be found (windows judged)."""


def _weight(count: int) -> float:
    return count * math.log2(count) if count > 1 else 0.0


def _holds_token(run: str) -> bool:
    """Whether a window of the run, at one of its first offsets, is a token.

    The entropy of the sliding window is kept from its character counts
    (``log2 w - sum(n log2 n) / w``), one character in and one out per step.
    """
    width = UNKNOWN_TOKEN_CHARS
    counts = Counter(run[:width])
    weights = sum(_weight(n) for n in counts.values())
    kinds = Counter(_kind(char) for char in run[:width])
    last = min(len(run) - width, UNKNOWN_TOKEN_OFFSETS - 1)
    for offset in range(last + 1):
        if offset:
            for char, step in ((run[offset - 1], -1), (run[offset + width - 1], 1)):
                weights -= _weight(counts[char])
                counts[char] += step
                weights += _weight(counts[char])
                kinds[_kind(char)] += step
        bits = math.log2(width) - weights / width
        if kinds["u"] and kinds["l"] and kinds["d"] and bits >= UNKNOWN_TOKEN_BITS:
            return True
    return False


def _kind(char: str) -> str:
    if char.isupper():
        return "u"
    if char.islower():
        return "l"
    return "d" if char.isdigit() else "o"


def scrub_unknown_tokens(text: str) -> str:
    """Replace long high-entropy tokens of no known shape by ``[REDACTED]``.

    A run of base64/base64url characters (``A-Za-z0-9+/_-``, then any ``=``
    padding) of at least :data:`UNKNOWN_TOKEN_CHARS` characters is a token when
    a window of :data:`UNKNOWN_TOKEN_CHARS` characters starting at one of its
    first :data:`UNKNOWN_TOKEN_OFFSETS` offsets holds upper case, lower case and
    digits with at least :data:`UNKNOWN_TOKEN_BITS` bits of entropy per
    character (a token glued after plain text is found too). A run cut short
    (a bounded summary) keeps its start, so its windows are some of the whole
    run's: the verdict on what is left never changes.

    Args:
        text: Any text.

    Returns:
        The text with each such run (and its padding) replaced whole.
    """
    mapped = text.translate(_TOKEN_MAP)
    spans: list[tuple[int, int]] = []
    for start, run_end in _runs(mapped, UNKNOWN_TOKEN_CHARS):
        if _holds_token(text[start:run_end]):
            end = run_end
            while end < len(mapped) and mapped[end] == "b":
                end += 1
            spans.append((start, end))
    return _splice(text, spans)


def scrub_tokens(text: str) -> str:
    """Replace prefixed tokens, Azure client secrets and bare AWS secrets.

    Args:
        text: Any text.

    Returns:
        The text with each such token replaced whole by ``[REDACTED]``.
    """
    for prefix, pattern in _TOKENS:
        if prefix in text:
            text = pattern.sub(REDACTED, text)
    if ":AA" in text:
        text = _TELEGRAM_BOT_TOKEN.sub(REDACTED, text)
    if "Q~" in text:
        text = _splice(text, _azure_spans(text))
    return _splice(text, _bare_aws_spans(text))


def _key_before(text: str, end: int) -> str:
    start = end
    while start > 0 and text[start - 1] in _KEY_CHARS:
        start -= 1
    return text[start:end]


def _runs(mapped: str, length: int) -> list[tuple[int, int]]:
    needle = "a" * length
    spans: list[tuple[int, int]] = []
    at = mapped.find(needle)
    while at != -1:
        run = _RUN.match(mapped, at)
        assert run is not None  # noqa: S101 - the needle starts a run
        spans.append(run.span())
        at = mapped.find(needle, run.end())
    return spans


def scrub_secretish_values(text: str, is_secret_key: Callable[[str], bool]) -> str:
    """Replace high-entropy values under secret-like keys in ``key=value`` text.

    Args:
        text: Any text.
        is_secret_key: The scrubber's rule for secret keys
            (:func:`policies.scrubbing.looks_like_secret_key`).

    Returns:
        The text with each such value replaced whole by ``[REDACTED]``: a value
        of :func:`high_entropy` (16+ of ``A-Za-z0-9+/_.~-``, then up to two
        ``=``) after ``:`` or ``=`` (spaces and one opening quote allowed), under
        a key (one closing quote and spaces allowed before the separator) that
        ``is_secret_key`` or :func:`secretish_key` accepts.
    """
    spans: list[tuple[int, int]] = []
    for start, run_end in _runs(text.translate(_VALUE_MAP), _MIN_VALUE_CHARS):
        end = run_end
        while end < len(text) and end - run_end < 2 and text[end] == "=":
            end += 1
        before = _BEFORE_VALUE.search(text, max(0, start - 8), start)
        if before is None or not high_entropy(text[start:run_end]):
            continue
        key_end = before.start()
        while key_end > 0 and text[key_end - 1] in " \t":
            key_end -= 1
        if key_end > 0 and text[key_end - 1] in "\"'":
            key_end -= 1
        key = _key_before(text, key_end)
        if is_secret_key(key) or secretish_key(key_words(key)):
            spans.append((start, end))
    return _splice(text, spans)
