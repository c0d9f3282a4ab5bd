"""Reading the ledger: streams, pages of the global log, counts, subscriptions.

:class:`StoreReading` is the read half of :class:`~ledger.store.EventStore`
(a mixin on its ``backend`` and its ``decode_rows``/``decode``): it asks the
backend for rows by stream or by position, optionally filtered by event type,
and decodes them into :class:`~ledger.envelope.Recorded` envelopes; nothing
here writes. The pager over the global log, ``iter_all``, stays on the store
(the one place that pages ``read_all``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from uuid import UUID

from turnledger.ledger.backend import Backend, StoredRow
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import Event
from turnledger.ledger.events.registry import type_for_tag
from turnledger.ledger.subscription import Subscription


class StoreReading:
    """The read API of :class:`~ledger.store.EventStore`, over its ``backend``."""

    backend: Backend

    def decode_rows(self, rows: Sequence[StoredRow]) -> list[Recorded]:
        """Decode rows in order (the store implements it)."""
        raise NotImplementedError

    def decode(self, row: StoredRow) -> Recorded:
        """Decode one row (the store implements it)."""
        raise NotImplementedError

    def read_stream(
        self,
        stream_id: UUID,
        *,
        after: int = 0,
        until: int | None = None,
        limit: int | None = None,
        types: Sequence[type[Event] | str] = (),
    ) -> list[Recorded]:
        """Return a stream's events with versions in ``(after, until]``, in order.

        With ``types`` (classes or tags), only events of those types: the others
        are neither read out nor decoded (a fold that ignores them reads less).
        """
        rows = self.backend.select_stream(
            stream_id, gt=after, lte=until, limit=limit, topics=_topics(types)
        )
        return self.decode_rows(rows)

    def read_all(
        self,
        *,
        after: int = 0,
        limit: int = 500,
        types: Sequence[type[Event] | str] = (),
        until: int | None = None,
    ) -> list[Recorded]:
        """Return one page of the global log: positions after ``after``, in order.

        Args:
            after: The last position already seen (0 for the start).
            limit: The page size.
            types: Only events of these types (classes or tags); all when empty.
            until: Stop at this position (inclusive).
        """
        rows = self.backend.select_all(
            gt=after, limit=limit, topics=_topics(types), lte=until
        )
        return self.decode_rows(rows)

    def iter_rows(self, *, after: int = 0, page_size: int = 500) -> Iterator[StoredRow]:
        """Iterate over raw rows (undecoded) in position order; ``verify`` uses it."""
        until = self.max_position()
        while True:
            page = self.backend.select_all(
                gt=after, limit=page_size, topics=(), lte=until
            )
            yield from page
            if len(page) < page_size:
                return
            after = page[-1].position

    def stream_version(self, stream_id: UUID) -> int:
        """Return a stream's head version (0 when the stream is empty)."""
        return self.backend.stream_version(stream_id)

    def max_position(self) -> int:
        """Return the last position written (0 when the ledger is empty)."""
        return self.backend.max_position()

    def stream_ids(self) -> list[UUID]:
        """Return the id of every stream, sorted."""
        return self.backend.stream_ids()

    def count(self) -> int:
        """Return the number of events."""
        return self.backend.count_rows()

    def subscribe(
        self, *, after: int = 0, types: Sequence[type[Event] | str] = ()
    ) -> Subscription:
        """Follow the ledger: events after ``after`` now, then as they are recorded.

        SQLite polls; PostgreSQL listens (LISTEN/NOTIFY) with a periodic wake-up.
        """
        return Subscription(
            self.backend.subscribe(gt=after, topics=_topics(types)), self.decode
        )


def _topics(types: Sequence[type[Event] | str]) -> list[str]:
    tags = []
    for t in types:
        tag = t if isinstance(t, str) else type_for_tag_of(t)
        type_for_tag(tag)  # refuse unknown tags with a typed error
        tags.append(tag)
    return tags


def type_for_tag_of(event_type: type[Event]) -> str:
    """Return the tag of an event class (refusing unregistered classes)."""
    from turnledger.ledger.events import tag_of  # noqa: PLC0415

    return tag_of(event_type)
