"""Reading the ledger: streams, pages of the global log, subscriptions.

:class:`StoreReader` is the read part of :class:`~ledger.store.EventStore`,
which holds one and hands its read calls to it: it asks the backend for rows by
stream or by position, optionally filtered by event type, and decodes them
through the store's mapper into :class:`~ledger.envelope.Recorded` envelopes;
nothing here writes. The pager over the global log, ``iter_all``, stays on the
store (the one place that pages ``read_all``), and so do the counts that decode
nothing (a stream's version, the last position, the stream ids, the number of
events), which the store asks its backend for itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from uuid import UUID

from turnledger.ledger.backend import Backend, StoredRow
from turnledger.ledger.codec import MsgspecMapper
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import Event, tag_of
from turnledger.ledger.events.registry import type_for_tag
from turnledger.ledger.row_decode import decode_row, decode_rows
from turnledger.ledger.subscription import Subscription


class StoreReader:
    """The read API of :class:`~ledger.store.EventStore`.

    Args:
        backend: Where the rows live.
        mapper: The store's mapper, which decodes (and decrypts) them.
    """

    def __init__(self, backend: Backend, mapper: MsgspecMapper) -> None:
        self.backend = backend
        self.mapper = mapper

    def decode_rows(self, rows: Sequence[StoredRow]) -> list[Recorded]:
        """See :meth:`~ledger.store.EventStore.decode_rows`."""
        return decode_rows(self.mapper, rows)

    def decode(self, row: StoredRow) -> Recorded:
        """See :meth:`~ledger.store.EventStore.decode`."""
        return decode_row(self.mapper, row)

    def read_stream(
        self,
        stream_id: UUID,
        *,
        after: int = 0,
        until: int | None = None,
        limit: int | None = None,
        types: Sequence[type[Event] | str] = (),
    ) -> list[Recorded]:
        """See :meth:`~ledger.store.EventStore.read_stream`."""
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
        """See :meth:`~ledger.store.EventStore.read_all`."""
        rows = self.backend.select_all(
            gt=after, limit=limit, topics=_topics(types), lte=until
        )
        return self.decode_rows(rows)

    def iter_rows(self, *, after: int = 0, page_size: int = 500) -> Iterator[StoredRow]:
        """Iterate over raw rows (undecoded) in position order; ``verify`` uses it."""
        until = self.backend.max_position()
        while True:
            page = self.backend.select_all(
                gt=after, limit=page_size, topics=(), lte=until
            )
            yield from page
            if len(page) < page_size:
                return
            after = page[-1].position

    def subscribe(
        self, *, after: int = 0, types: Sequence[type[Event] | str] = ()
    ) -> Subscription:
        """See :meth:`~ledger.store.EventStore.subscribe`."""
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
    return tag_of(event_type)
