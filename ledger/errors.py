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
