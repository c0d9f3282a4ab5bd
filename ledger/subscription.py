"""Following the ledger: the blocking iterator ``EventStore.subscribe`` returns.

A :class:`Subscription` wraps a backend's row subscription (SQLite polls,
PostgreSQL listens), turns each library notification back into a
:class:`~ledger.backend.StoredRow` and decodes it with the store's ``decode``, so a
follower sees the same typed envelopes and errors as a reader.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Self
from uuid import UUID

from turnledger.ledger.backend import RowSubscription, StoredRow
from turnledger.ledger.errors import LedgerError, StoreUnavailableError

if TYPE_CHECKING:
    from eventsourcing.persistence import Notification

    from turnledger.ledger.envelope import Recorded


class Subscription:
    """A blocking iterator of newly recorded events; ``stop()`` ends it."""

    def __init__(
        self, rows: RowSubscription, decode: Callable[[StoredRow], Recorded]
    ) -> None:
        self._rows = rows
        self._decode = decode

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Recorded:
        try:
            notification: Notification = next(self._rows)
        except (StopIteration, LedgerError):
            raise
        except Exception as e:
            msg = f"The ledger subscription failed: {e}"
            raise StoreUnavailableError(msg) from e
        stream = notification.originator_id
        state = notification.state
        row = StoredRow(
            notification.id,
            stream if isinstance(stream, UUID) else UUID(stream),
            notification.originator_version,
            notification.topic,
            state.encode("utf-8", "surrogateescape")
            if isinstance(state, str)
            else bytes(state),
        )
        return self._decode(row)

    def stop(self) -> None:
        """Stop following; a blocked iteration ends."""
        self._rows.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        _exc_type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.stop()
