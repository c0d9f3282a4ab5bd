"""A session's lineage: its own events, preceded by its source's prefix when a fork.

A fork (``session.forked``, the first event of its stream) copies nothing: its
history is the source stream's events up to ``source_version`` followed by the
fork's own events, and the source may itself be a fork. :func:`segments` walks
that chain back to a session that was opened; :func:`lineage` gives the events
relabeled with the fork's stream id, so the session-history fold folds them as
one session (the fork event sets the version offset its own events are counted
with). :func:`session_timeline` is the observer timeline of a lineage.
"""

from __future__ import annotations

from typing import Final
from uuid import UUID

import msgspec

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.errors import CorruptRecordError
from turnledger.ledger.events import SessionForked
from turnledger.ledger.store import EventStore
from turnledger.projections.observer import DEFAULT_LIMIT, ObserverView, timeline
from turnledger.projections.observer.items import ObserverItem

MAX_FORK_DEPTH: Final = 1000
"""How many forks deep a lineage may go before it is refused as corrupt."""


class Segment(msgspec.Struct, frozen=True, kw_only=True):
    """The part of a lineage one stream contributes.

    Attributes:
        stream_id: The stream.
        offset: Added to the stream's versions to count them in the lineage.
        events: Its events in the lineage, oldest first.
    """

    stream_id: UUID
    offset: int
    events: list[Recorded]


def fork_event(events: list[Recorded]) -> SessionForked | None:
    """Return the fork event a stream begins with, if it is a fork."""
    if events and isinstance(events[0].event, SessionForked):
        return events[0].event
    return None


def segments(
    store: EventStore,
    stream_id: UUID,
    *,
    until: int | None = None,
    own: list[Recorded] | None = None,
) -> list[Segment]:
    """Return the segments of a session's lineage, the oldest source first.

    Args:
        store: The ledger.
        stream_id: The session stream.
        until: Only this stream's versions up to it.
        own: The stream's events, when the caller has read them already.

    Raises:
        CorruptRecordError: A fork names a source that is missing, shorter than
            the fork says, or the chain loops.
    """
    chain: list[Segment] = []
    seen: set[UUID] = set()
    events = own if own is not None else store.read_stream(stream_id, until=until)
    while True:
        seen.add(stream_id)
        forked = fork_event(events)
        offset = forked.base_version if forked is not None else 0
        chain.append(Segment(stream_id=stream_id, offset=offset, events=events))
        if forked is None:
            break
        source = _source(forked, seen, len(chain))
        events = store.read_stream(source, until=forked.source_version)
        if len(events) != forked.source_version:
            msg = (
                f"Expected {forked.source_version} events of fork source {source}, "
                f"found {len(events)}"
            )
            raise CorruptRecordError(msg)
        stream_id = source
    chain.reverse()
    return chain


def _source(forked: SessionForked, seen: set[UUID], depth: int) -> UUID:
    try:
        source = UUID(forked.source_stream)
    except ValueError:
        msg = f"Expected a stream id as fork source, found {forked.source_stream!r}"
        raise CorruptRecordError(msg) from None
    if source in seen or depth > MAX_FORK_DEPTH:
        msg = (
            f"Expected a fork chain back to an opened session, found a loop at {source}"
        )
        raise CorruptRecordError(msg)
    return source


def lineage(
    store: EventStore,
    stream_id: UUID,
    *,
    at: int | None = None,
    own: list[Recorded] | None = None,
) -> list[Recorded]:
    """Return a session's events with its sources' prefixes, as one stream.

    Prefix events keep their version and position and take ``stream_id``, so
    any fold keyed by stream folds the lineage as this session.

    Args:
        store: The ledger.
        stream_id: The session stream.
        at: Only events at or before this global position.
        own: The stream's events, when the caller has read them already.
    """
    bounded = own is None and at is not None
    if bounded:
        own = _until_position(store, stream_id, at)  # type: ignore[arg-type]
    chain = segments(store, stream_id, own=own)
    if len(chain) == 1 and (at is None or bounded):
        return chain[0].events  # one stream, read up to ``at``: nothing to compose
    composed: list[Recorded] = []
    for segment in chain:
        for r in segment.events:
            if at is not None and r.position > at:
                continue
            if segment.stream_id != stream_id:
                r = msgspec.structs.replace(r, stream_id=stream_id)  # noqa: PLW2901 - relabeled
            composed.append(r)
    return composed


def _until_position(store: EventStore, stream_id: UUID, at: int) -> list[Recorded]:
    """Read a stream's events up to global position ``at`` (found in O(log n)).

    A fork's first event is always kept: it names the prefix, whose events
    lie before it.
    """
    last = last_version_at(store, stream_id, at, store.stream_version(stream_id))
    events = store.read_stream(stream_id, until=max(last, 1))
    if last == 0 and not fork_event(events):
        return []
    return events


def last_version_at(
    store: EventStore, stream_id: UUID, position: int, high: int
) -> int:
    """Return the last version up to ``high`` whose position is <= ``position``.

    Positions grow with versions, so the search interpolates between the
    versions it has read (a session's events usually sit close together) and
    bisects every other step: a few reads, O(log n) at worst.
    """

    def at(version: int) -> int:
        return store.read_stream(stream_id, after=version - 1, limit=1)[0].position

    if high < 1:
        return 0
    low, low_at = 1, at(1)
    if low_at > position:
        return 0
    top, top_at = high, at(high)
    if top_at <= position:
        return high
    bisect = False
    while top - low > 1:  # at(low) <= position < at(top)
        if bisect:
            mid = (low + top) // 2
        else:
            guess = low + (position - low_at) * (top - low) // max(top_at - low_at, 1)
            mid = min(max(guess, low + 1), top - 1)
        bisect = not bisect
        found = at(mid)
        if found <= position:
            low, low_at = mid, found
        else:
            top, top_at = mid, found
    return low


class Point(msgspec.Struct, frozen=True, kw_only=True):
    """The last event of a lineage at or before a position.

    Attributes:
        stream_id: The stream holding it.
        version: Its version there.
        position: Its global position.
        history_version: Its version counted through the lineage.
    """

    stream_id: UUID
    version: int
    position: int
    history_version: int


def locate(
    store: EventStore, stream_id: UUID, position: int, *, cap: int | None = None
) -> Point | None:
    """Find the last lineage event at or before ``position`` (O(log n) reads).

    Args:
        store: The ledger.
        stream_id: The session stream.
        position: The global position.
        cap: Only versions up to this one (a fork's source prefix).
    """
    for _ in range(MAX_FORK_DEPTH):
        first = store.read_stream(stream_id, limit=1)
        if not first:
            return None
        forked = fork_event(first)
        high = cap if cap is not None else store.stream_version(stream_id)
        low = last_version_at(store, stream_id, position, high)
        if low:
            at = store.read_stream(stream_id, after=low - 1, limit=1)[0]
            offset = forked.base_version if forked is not None else 0
            return Point(
                stream_id=stream_id,
                version=low,
                position=at.position,
                history_version=offset + low,
            )
        if forked is None:
            return None
        stream_id, cap = UUID(forked.source_stream), forked.source_version
    msg = (
        "Expected a fork chain back to an opened session, "
        f"found one deeper than {MAX_FORK_DEPTH}"
    )
    raise CorruptRecordError(msg)


def history_version(segments_: list[Segment], position: int) -> int:
    """Return the lineage version of the last event at or before ``position``."""
    found = 0
    for segment in segments_:
        for r in segment.events:
            if r.position <= position:
                found = max(found, segment.offset + r.version)
    return found


def session_timeline(
    store: EventStore,
    stream_id: UUID,
    *,
    at: int | None = None,
    limit: int = DEFAULT_LIMIT,
) -> tuple[ObserverItem, ...]:
    """Return a session's observer timeline, a fork's source prefix first.

    The observer view keeps one bounded timeline per stream, so a fork's view
    state holds only its own events; this folds the observer over the
    session's lineage (the source's events up to the fork point, then the
    fork's), the way history and replay read a fork.

    Args:
        store: The ledger.
        stream_id: The session stream.
        at: Only events at or before this global position.
        limit: The newest items returned at most (0: none).

    Returns:
        Items in ledger order, oldest first; each keeps the position of the
        event it comes from (a prefix item, its source-stream position).
    """
    view = ObserverView(max(limit, 1))
    state = view.initial("")
    for recorded in lineage(store, stream_id, at=at):
        state = view.evolve(state, recorded)
    return timeline({str(stream_id): state}, limit=limit)
