"""The ledger's error tree. Backend errors are translated into these at the edge."""

from __future__ import annotations

from uuid import UUID


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
            f"Expected idempotency key {key!r} for stream {first_stream} "
            f"(its first append), found it on stream {stream}"
        )
