"""The ledger's error tree. Backend errors are translated into these at the edge."""

from __future__ import annotations

from typing import Final
from uuid import UUID

QUOTED_CHARS: Final = 200
"""An error text quotes at most this many characters of any value."""


def quote_value(value: object, limit: int = QUOTED_CHARS) -> str:
    """Return a bounded quote of a value for an error text.

    Text is quoted with ``repr`` of at most ``limit`` of its characters; any
    other value by its ``repr``, cut to ``limit`` characters. A cut quote is
    followed by ``…`` and the full length (``'aaaa…' (10,485,760 characters)``).

    Args:
        value: The value an error names (user-supplied, possibly huge).
        limit: How many characters of it to quote.

    Returns:
        The quote.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}\u2026 ({len(value):,} characters)"
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\u2026 ({len(text):,} characters of repr)"


def type_name(value: object) -> str:
    """Return the name of a value's type for an error text (``None`` for None)."""
    return "None" if value is None else type(value).__qualname__


class LedgerError(Exception):
    """Base of every error the ledger raises."""


class ConcurrencyError(LedgerError):
    """An append expected a stream version that is not the stream's head.

    Nothing of the append was written.
    """

    def __init__(self, stream_id: UUID, expected: int, found: int) -> None:
        self.stream_id = stream_id
        self.expected = expected
        self.found = found
        super().__init__(
            f"Expected stream {stream_id} at version {expected}, found {found}"
        )


class InvalidEventError(LedgerError, ValueError):
    """An event failed validation before it was written; nothing was written."""


class InvalidArgumentError(InvalidEventError, TypeError):
    """A store method was given ``None`` or a value of the wrong type.

    Raised before anything is read or written. Also a ``TypeError``.
    """


class InvalidIdError(InvalidEventError):
    """An identifier holds a control character; nothing was written.

    Agent names, session keys, stream ids, turn ids and tool call ids may hold
    any character but the C0 controls (U+0000 to U+001F), DEL (U+007F) and the C1
    controls (U+0080 to U+009F).

    Attributes:
        field: The identifier's field (``session_key``, ``tool_calls[0].id``).
        position: The offending character's index in the value.
        char: That character.
    """

    def __init__(self, field: str, value: str, position: int) -> None:
        self.field = field
        self.position = position
        self.char = value[position]
        super().__init__(
            f"{field}: expected an identifier without control characters, found "
            f"U+{ord(self.char):04X} at character {position} of {quote_value(value)}"
        )


class UnknownEventTypeError(LedgerError):
    """A stored row names an event tag or schema version this code does not know."""


class CorruptRecordError(LedgerError):
    """A stored row cannot be decoded into the event its tag names."""


class StoreUnavailableError(LedgerError):
    """The backing database cannot be reached or opened."""


class ConfigurationError(LedgerError, ValueError):
    """A store URL, option or key is invalid."""


class LedgerLockedError(StoreUnavailableError):
    """Another writer held the ledger's write lock for the whole busy timeout."""


class LedgerFullError(StoreUnavailableError):
    """The disk (or the database's size limit) is full; nothing was written."""


class LedgerReadOnlyError(StoreUnavailableError):
    """The ledger file or database refuses writes; nothing was written."""


class IdempotencyKeyError(LedgerError, ValueError):
    """An idempotency key already used for another stream; nothing was written."""

    def __init__(self, key: str, first_stream: UUID, stream: UUID) -> None:
        self.key = key
        self.first_stream = first_stream
        self.stream = stream
        super().__init__(
            f"Expected idempotency key {quote_value(key)} for stream {first_stream} "
            f"(its first append), found it on stream {stream}"
        )
